/* Configuration loader: INI text (inih) and --set assignments applied to a
 * struct o1_config through one table of key descriptors.
 *
 * Each key's descriptor gives its section, name, type, limits, offset into
 * the struct and default (as text, parsed by the same code as the file, so
 * defaults and files cannot disagree). A per-type ops table parses, prints
 * and describes what a type allows. Every change is made on a copy and
 * committed only when the whole input is valid.
 *
 * The INI text is fed to inih line by line by a reader that counts lines
 * (so every message names file:line), rejects over-long and indented lines
 * and checks section headers, which inih does not report on its own.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"

enum key_type {
	T_U32,
	T_U64,
	T_DOUBLE,
	T_DOUBLE_AUTO, /* T_DOUBLE, or "auto" (O1_CONFIG_RATIO_AUTO) */
	T_BOOL,
	T_STR,
	T_ENUM,
	T_LIST,
	T_OCTAL,
	T_DEVICE,
	T_COUNT,
};

enum key_flags {
	F_POW2 = 1 << 0,      /* integer: power of two */
	F_ASCENDING = 1 << 1, /* list: strictly ascending */
	F_NONEMPTY = 1 << 2,  /* list or string: at least one entry/byte */
	F_ABSOLUTE = 1 << 3,  /* string: empty or an absolute path */
	F_HOSTPORT = 1 << 4,  /* string: host:port */
	F_DISTINCT = 1 << 5,  /* list: no entry twice */
};

struct key {
	const char *section;
	const char *name;
	enum key_type type;
	size_t offset;
	size_t size;		  /* T_STR: buffer size */
	uint64_t min, max;	  /* integers, list entries, octal */
	double dmin, dmax;	  /* T_DOUBLE(_AUTO), inclusive; dmin >= 0 */
	const char *const *names; /* T_ENUM: NULL-terminated */
	unsigned flags;
	const char *def;
};

static const char *const log_levels[] = {"error", "warn",  "info",
					 "debug", "trace", NULL};
static const char *const dtypes[] = {"auto", "f32", "f16", "bf16", NULL};
static const char *const dequantize_modes[] = {"none", "bf16", NULL};
static const char *const metrics_modes[] = {"auto", "bpf", "shm", NULL};
static const char *const sample_modes[] = {"auto", "on", "off", NULL};
static const char *const quant_dots[] = {"int8", "f32", NULL};
_Static_assert(O1_LOG_ERROR == 0 && O1_LOG_TRACE == 4, "log_levels order");
_Static_assert(O1_CONFIG_DTYPE_BF16 == 3, "dtypes order");
_Static_assert(sizeof(enum o1_log_level) == sizeof(int), "enum as int");
_Static_assert(sizeof(enum o1_config_dtype) == sizeof(int), "enum as int");
_Static_assert(O1_CONFIG_DEQUANTIZE_BF16 == 1, "dequantize_modes order");
_Static_assert(sizeof(enum o1_config_dequantize) == sizeof(int),
	       "enum as int");
_Static_assert(O1_CONFIG_METRICS_SHM == 2, "metrics_modes order");
_Static_assert(sizeof(enum o1_config_metrics_mode) == sizeof(int),
	       "enum as int");
_Static_assert(O1_CONFIG_SAMPLE_OFF == 2, "sample_modes order");
_Static_assert(O1_CONFIG_QUANT_DOT_F32 == 1, "quant_dots order");
_Static_assert(sizeof(enum o1_config_quant_dot) == sizeof(int), "enum as int");
_Static_assert(sizeof(enum o1_config_sample_mode) == sizeof(int),
	       "enum as int");

/* clang-format off */
#define OFF(field) offsetof(struct o1_config, field)
#define SZ(field) sizeof(((struct o1_config *)0)->field)
#define U32(sec, key, lo, hi, fl, d)                                        \
	{#sec, #key, T_U32, OFF(sec.key), 0, lo, hi, 0, 0, NULL, fl, d}
#define LIST(sec, key, lo, hi, fl, d)                                       \
	{#sec, #key, T_LIST, OFF(sec.key), 0, lo, hi, 0, 0, NULL, fl, d}
#define STR(sec, key, fl, d)                                                \
	{#sec, #key, T_STR, OFF(sec.key), SZ(sec.key), 0, 0, 0, 0, NULL, fl, d}
#define BOOL(sec, key, d)                                                   \
	{#sec, #key, T_BOOL, OFF(sec.key), 0, 0, 0, 0, 0, NULL, 0, d}
#define ENUM(sec, key, names, d)                                            \
	{#sec, #key, T_ENUM, OFF(sec.key), 0, 0, 0, 0, 0, names, 0, d}

static const struct key keys[] = {
	U32(daemon, drain_timeout_ms, 0, 3600000, 0, "30000"),
	STR(model, path, F_ABSOLUTE, ""),
	STR(model, name, 0, ""),
	U32(model, max_context_tokens, 0, 16777216, 0, "0"),
	ENUM(model, dtype, dtypes, "auto"),
	ENUM(model, dequantize, dequantize_modes, "none"),
	STR(model, chat_template, F_ABSOLUTE, ""),
	{"backend", "device", T_DEVICE, OFF(backend.device), 0, 0, 63, 0, 0,
	 NULL, 0, "auto"},
	U32(backend, threads, 0, 1024, 0, "0"),
	LIST(backend, devices, 0, 63, F_NONEMPTY | F_DISTINCT, "0"),
	U32(backend, tensor_parallel, 1, 8, 0, "1"),
	ENUM(backend, sample_in_backend, sample_modes, "auto"),
	U32(backend, sample_penalty_entries, 0, 67108864, 0, "0"),
	U32(kv, page_tokens, 1, 256, F_POW2, "16"),
	U32(kv, pages, 0, 16777216, 0, "0"),
	{"kv", "memory_fraction", T_DOUBLE, OFF(kv.memory_fraction), 0, 0, 0,
	 0.01, 1.0, NULL, 0, "0.9"},
	U32(scheduler, max_batch_tokens, 1, 1048576, 0, "2048"),
	U32(scheduler, max_running, 1, 4096, 0, "256"),
	U32(scheduler, prefill_chunk_tokens, 1, 1048576, 0, "2048"),
	U32(scheduler, prefill_tokens_per_decode, 0, 64, 0, "0"),
	{"scheduler", "prefill_time_ratio", T_DOUBLE_AUTO,
	 OFF(scheduler.prefill_time_ratio), 0, 0, 0, 0.0, 16.0, NULL, 0,
	 "auto"},
	{"scheduler", "prefill_whole_ratio", T_DOUBLE,
	 OFF(scheduler.prefill_whole_ratio), 0, 0, 0, 0.0, 16.0, NULL, 0, "0.6"},
	{"scheduler", "prefill_burst_ratio", T_DOUBLE_AUTO,
	 OFF(scheduler.prefill_burst_ratio), 0, 0, 0, 0.01, 16.0, NULL, 0,
	 "auto"},
	U32(scheduler, sampler_threads, 0, 256, 0, "0"),
	U32(scheduler, max_running_per_client, 0, 4096, 0, "0"),
	U32(scheduler, stall_timeout_ms, 0, 86400000, 0, "30000"),
	U32(refine, max_steps, 0, 16, 0, "4"),
	{"refine", "confidence_threshold", T_DOUBLE,
	 OFF(refine.confidence_threshold), 0, 0, 0, -100.0, 0.0, NULL, 0,
	 "-0.05"},
	STR(refine, review_template, F_ABSOLUTE, ""),
	U32(grammar, max_bytes, 0, 16777216, 0, "65536"),
	U32(grammar, cache_entries, 1, 65536, 0, "64"),
	U32(grammar, cache_mb, 1, 1048576, 0, "512"),
	U32(grammar, threads, 1, 64, 0, "2"),
	BOOL(graphs, enabled, "true"),
	LIST(graphs, buckets, 1, 4096, F_ASCENDING | F_NONEMPTY,
	     "1,2,4,8,16,24,32,48,64,96,128,192,256"),
	LIST(graphs, context_spans, 1, 16777216, F_ASCENDING, ""),
	BOOL(cuda, autotune, "false"),
	U32(cuda, autotune_ms, 1, 60000, 0, "2000"),
	ENUM(cuda, quant_dot, quant_dots, "int8"),
	U32(cuda, quant_pass_rows, 0, 256, 0, "12"),
	U32(cuda, quant_i8_rows, 0, 1u << 20, 0, "64"),
	U32(cuda, quant_wgmma_rows, 0, 1u << 20, 0, "256"),
	U32(cuda, attention_splits, 0, 32, 0, "0"),
	BOOL(cuda, faster_row_counts, "true"),
	STR(ipc, socket, F_ABSOLUTE | F_NONEMPTY, "/run/o1d/o1d.sock"),
	{"ipc", "socket_mode", T_OCTAL, OFF(ipc.socket_mode), 0, 0, 0777, 0, 0,
	 NULL, 0, "0660"},
	LIST(ipc, allowed_uids, 0, UINT32_MAX - 1, 0, ""),
	LIST(ipc, allowed_gids, 0, UINT32_MAX - 1, 0, ""),
	LIST(ipc, admin_uids, 0, UINT32_MAX - 1, 0, ""),
	U32(ipc, spin_us, 0, 1000000, 0, "50"),
	U32(ipc, front_threads, 0, 64, 0, "0"),
	U32(ipc, max_clients, 1, 4096, 0, "64"),
	U32(ipc, ring_entries, 8, 65536, F_POW2, "256"),
	U32(ipc, max_inflight, 1, 65536, 0, "64"),
	U32(ipc, max_half_open, 1, 4096, 0, "16"),
	U32(ipc, max_clients_per_uid, 0, 4096, 0, "0"),
	U32(ipc, violation_decay_s, 1, 86400, 0, "60"),
	{"ipc", "arena_bytes", T_U64, OFF(ipc.arena_bytes), 0, 4096,
	 1ull << 32, 0, 0, NULL, 0, "1048576"},
	U32(ipc, max_prompt_tokens, 1, 16777216, 0, "32768"),
	U32(ipc, device_outputs, 0, 64, 0, "0"),
	U32(ipc, device_output_rows, 1, 65536, F_POW2, "64"),
	BOOL(metrics, enabled, "true"),
	STR(metrics, bpf_dir, F_ABSOLUTE | F_NONEMPTY, "/sys/fs/bpf/o1d"),
	STR(metrics, shm_path, F_ABSOLUTE, ""),
	STR(metrics, gid, 0, ""),
	ENUM(metrics, mode, metrics_modes, "auto"),
	{"metrics", "file_mode", T_OCTAL, OFF(metrics.file_mode), 0, 0, 0777,
	 0, 0, NULL, 0, "0640"},
	BOOL(metrics, unpin_on_exit, "false"),
	BOOL(metrics, runq, "false"),
	ENUM(log, level, log_levels, "info"),
	U32(log, requests, 0, 1000000, 0, "1"),
	STR(sidecar, listen, F_HOSTPORT, "127.0.0.1:8080"),
	STR(sidecar, daemon_socket, F_ABSOLUTE, ""),
	U32(sidecar, max_body_bytes, 1024, 1073741824, 0, "1048576"),
	U32(sidecar, max_concurrent, 1, 4096, 0, "32"),
	U32(sidecar, request_timeout_ms, 100, 86400000, 0, "600000"),
	U32(sidecar, idle_timeout_s, 1, 86400, 0, "60"),
	U32(sidecar, drain_delay_ms, 0, 3600000, 0, "0"),
	U32(sidecar, drain_timeout_ms, 0, 86400000, 0, "30000"),
	U32(sidecar, read_timeout_ms, 100, 3600000, 0, "10000"),
	U32(sidecar, max_connections_per_address, 0, 65536, 0, "0"),
	{"slo", "success_rate", T_DOUBLE, OFF(slo.success_rate), 0, 0, 0,
	 0.0, 1.0, NULL, 0, "0.99"},
	U32(slo, p99_ttft_ms, 0, 3600000, 0, "2000"),
	U32(slo, p99_itl_ms, 0, 3600000, 0, "250"),
	U32(slo, p99_queue_wait_ms, 0, 3600000, 0, "1000"),
	U32(slo, window_s, 1, 86400, 0, "60"),
	BOOL(faults, enabled, "false"),
};

/* clang-format on */

#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

/* Parses text V into FIELD; on error writes why into WHY and returns
 * -O1_E_CONFIG. */
typedef int (*parse_fn)(const struct key *k, const char *v, void *field,
			char *why, size_t wl);
typedef void (*print_fn)(const struct key *k, const void *field, FILE *f);
typedef void (*allowed_fn)(const struct key *k, char *buf, size_t len);

struct type_ops {
	parse_fn parse;
	print_fn print;
	allowed_fn allowed;
};

static int reject(char *why, size_t wl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A relative path: refused, with the absolute form it would have from
 * the working directory (the daemon's may not be the shell's). */
static int not_absolute(const char *v, char *why, size_t wl)
{
	char cwd[4096];

	if (!getcwd(cwd, sizeof(cwd)))
		return reject(why, wl, "not an absolute path");
	snprintf(why, wl, "not an absolute path (from this directory: %s/%s)",
		 cwd, v);
	return -O1_E_CONFIG;
}

static int reject(char *why, size_t wl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, wl, fmt, ap);
	va_end(ap);
	return -O1_E_CONFIG;
}

/* Strict unsigned decimal (or BASE) number: digits only, no sign. */
static int parse_uint(const char *v, int base, uint64_t *out)
{
	char *end;
	unsigned long long x;

	if (!isdigit((unsigned char)v[0]))
		return -EINVAL;
	errno = 0;
	x = strtoull(v, &end, base);
	if (errno || *end)
		return -EINVAL;
	*out = x;
	return 0;
}

static int parse_ranged(const struct key *k, const char *v, int base,
			uint64_t *x, char *why, size_t wl)
{
	if (parse_uint(v, base, x))
		return reject(why, wl, "not %s integer",
			      base == 8 ? "an octal" : "a whole");
	if (*x < k->min || *x > k->max)
		return reject(why, wl, "out of range");
	if ((k->flags & F_POW2) && (*x & (*x - 1)))
		return reject(why, wl, "not a power of two");
	return 0;
}

static int parse_u32(const struct key *k, const char *v, void *field, char *why,
		     size_t wl)
{
	uint64_t x = 0;
	int err = parse_ranged(k, v, 10, &x, why, wl);

	if (!err)
		*(uint32_t *)field = (uint32_t)x;
	return err;
}

static int parse_u64(const struct key *k, const char *v, void *field, char *why,
		     size_t wl)
{
	uint64_t x = 0;
	int err = parse_ranged(k, v, 10, &x, why, wl);

	if (!err)
		*(uint64_t *)field = x;
	return err;
}

static int parse_octal(const struct key *k, const char *v, void *field,
		       char *why, size_t wl)
{
	uint64_t x = 0;
	int err = parse_ranged(k, v, 8, &x, why, wl);

	if (!err)
		*(uint32_t *)field = (uint32_t)x;
	return err;
}

static int parse_double(const struct key *k, const char *v, void *field,
			char *why, size_t wl)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (!*v || *end || errno || x != x)
		return reject(why, wl, "not a number");
	if (x < k->dmin || x > k->dmax)
		return reject(why, wl, "out of range");
	*(double *)field = x;
	return 0;
}

static int parse_double_auto(const struct key *k, const char *v,
			     void *field, char *why, size_t wl)
{
	if (strcmp(v, "auto") == 0) {
		*(double *)field = O1_CONFIG_RATIO_AUTO;
		return 0;
	}
	return parse_double(k, v, field, why, wl);
}

static int parse_bool(const struct key *k, const char *v, void *field,
		      char *why, size_t wl)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};

	(void)k;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*(bool *)field = true;
			return 0;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*(bool *)field = false;
			return 0;
		}
	}
	return reject(why, wl, "not a boolean");
}

static int check_hostport(const char *v, char *why, size_t wl)
{
	const char *colon = strrchr(v, ':');
	uint64_t port;

	if (!colon || colon == v || parse_uint(colon + 1, 10, &port) ||
	    port > 65535)
		return reject(why, wl, "not host:port");
	return 0;
}

static int parse_str(const struct key *k, const char *v, void *field, char *why,
		     size_t wl)
{
	size_t len = strlen(v);

	if (len >= k->size)
		return reject(why, wl, "too long (%zu bytes)", len);
	for (const char *p = v; *p; p++)
		if (*p == ';' || iscntrl((unsigned char)*p))
			return reject(why, wl,
				      "contains ';' or a control "
				      "character");
	if ((k->flags & F_NONEMPTY) && len == 0)
		return reject(why, wl, "empty");
	if ((k->flags & F_ABSOLUTE) && len && v[0] != '/')
		return not_absolute(v, why, wl);
	if ((k->flags & F_HOSTPORT) && check_hostport(v, why, wl))
		return -O1_E_CONFIG;
	memset(field, 0, k->size);
	memcpy(field, v, len);
	return 0;
}

static int parse_enum(const struct key *k, const char *v, void *field,
		      char *why, size_t wl)
{
	for (int i = 0; k->names[i]; i++)
		if (strcmp(v, k->names[i]) == 0) {
			*(int *)field = i;
			return 0;
		}
	return reject(why, wl, "not a known value");
}

static int parse_list(const struct key *k, const char *v, void *field,
		      char *why, size_t wl)
{
	struct o1_config_list l = {0};
	char item[32];
	uint64_t x;

	while (*v) {
		size_t n = strcspn(v, ",");
		size_t s = 0;

		while (s < n && isspace((unsigned char)v[s]))
			s++;
		while (n > s && isspace((unsigned char)v[n - 1]))
			n--;
		if (n - s >= sizeof(item))
			return reject(why, wl, "entry %u too long", l.n + 1);
		memcpy(item, v + s, n - s);
		item[n - s] = 0;
		if (parse_uint(item, 10, &x) || x < k->min || x > k->max)
			return reject(why, wl,
				      "entry %u '%s' is not a whole "
				      "number in range",
				      l.n + 1, item);
		if (l.n == O1_CONFIG_LIST_MAX)
			return reject(why, wl, "more than %d entries",
				      O1_CONFIG_LIST_MAX);
		if ((k->flags & F_ASCENDING) && l.n && x <= l.v[l.n - 1])
			return reject(why, wl,
				      "entry %u (%llu) not above the "
				      "one before",
				      l.n + 1, (unsigned long long)x);
		for (uint32_t i = 0; (k->flags & F_DISTINCT) && i < l.n; i++)
			if (l.v[i] == x)
				return reject(why, wl,
					      "entry %u (%llu) given twice",
					      l.n + 1, (unsigned long long)x);
		l.v[l.n++] = (uint32_t)x;
		v += strcspn(v, ",");
		if (*v == ',' && !*++v)
			return reject(why, wl, "trailing comma");
	}
	if ((k->flags & F_NONEMPTY) && l.n == 0)
		return reject(why, wl, "empty");
	memcpy(field, &l, sizeof(l));
	return 0;
}

static int parse_device(const struct key *k, const char *v, void *field,
			char *why, size_t wl)
{
	struct o1_config_device d = {0};
	uint64_t idx;

	if (strcmp(v, "cpu") == 0) {
		d.kind = O1_DEVICE_CPU;
	} else if (strcmp(v, "auto") == 0) {
		d.kind = O1_DEVICE_AUTO;
	} else if (strncmp(v, "cuda:", 5) == 0 &&
		   parse_uint(v + 5, 10, &idx) == 0 && idx <= k->max) {
		d.kind = O1_DEVICE_CUDA;
		d.index = (uint32_t)idx;
	} else {
		return reject(why, wl, "not a device");
	}
	memcpy(field, &d, sizeof(d));
	return 0;
}

/* Shortest text that reads back as exactly X. */
static void print_double_exact(double x, FILE *f)
{
	char buf[64];

	for (int prec = 6; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	fputs(buf, f);
}

static void print_u32(const struct key *k, const void *field, FILE *f)
{
	(void)k;
	fprintf(f, "%u", *(const uint32_t *)field);
}

static void print_u64(const struct key *k, const void *field, FILE *f)
{
	(void)k;
	fprintf(f, "%llu", (unsigned long long)*(const uint64_t *)field);
}

static void print_octal(const struct key *k, const void *field, FILE *f)
{
	(void)k;
	fprintf(f, "%04o", *(const uint32_t *)field);
}

static void print_double(const struct key *k, const void *field, FILE *f)
{
	(void)k;
	print_double_exact(*(const double *)field, f);
}

static void print_double_auto(const struct key *k, const void *field,
			      FILE *f)
{
	if (*(const double *)field < 0)
		fputs("auto", f);
	else
		print_double(k, field, f);
}

static void print_bool(const struct key *k, const void *field, FILE *f)
{
	(void)k;
	fputs(*(const bool *)field ? "true" : "false", f);
}

static void print_str(const struct key *k, const void *field, FILE *f)
{
	(void)k;
	fputs(field, f);
}

static void print_enum(const struct key *k, const void *field, FILE *f)
{
	fputs(k->names[*(const int *)field], f);
}

static void print_list(const struct key *k, const void *field, FILE *f)
{
	const struct o1_config_list *l = field;

	(void)k;
	for (uint32_t i = 0; i < l->n; i++)
		fprintf(f, "%s%u", i ? "," : "", l->v[i]);
}

static void print_device(const struct key *k, const void *field, FILE *f)
{
	char buf[32];

	(void)k;
	fputs(o1_config_device_name(field, buf, sizeof(buf)), f);
}

static void allowed_int(const struct key *k, char *buf, size_t len)
{
	snprintf(buf, len, "a whole number %llu..%llu%s",
		 (unsigned long long)k->min, (unsigned long long)k->max,
		 k->flags & F_POW2 ? ", a power of two" : "");
}

static void allowed_octal(const struct key *k, char *buf, size_t len)
{
	snprintf(buf, len, "octal permission bits 0000..%04llo",
		 (unsigned long long)k->max);
}

static void allowed_double(const struct key *k, char *buf, size_t len)
{
	snprintf(buf, len, "a number %g..%g", k->dmin, k->dmax);
}

static void allowed_double_auto(const struct key *k, char *buf, size_t len)
{
	snprintf(buf, len, "auto or a number %g..%g", k->dmin, k->dmax);
}

static void allowed_bool(const struct key *k, char *buf, size_t len)
{
	(void)k;
	snprintf(buf, len, "true|false (or yes|no, on|off, 1|0)");
}

static void allowed_str(const struct key *k, char *buf, size_t len)
{
	snprintf(buf, len,
		 "%s%s of at most %zu bytes without ';' or control "
		 "characters",
		 k->flags & F_NONEMPTY ? "a non-empty " : "",
		 k->flags & F_ABSOLUTE	 ? "absolute path"
		 : k->flags & F_HOSTPORT ? "host:port (port 0..65535; 0: any free one)"
					 : "text",
		 k->size - 1);
}

static void allowed_enum(const struct key *k, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (int i = 0; k->names[i] && used < len; i++)
		used += snprintf(buf + used, len - used, "%s%s", i ? "|" : "",
				 k->names[i]);
}

static void allowed_list(const struct key *k, char *buf, size_t len)
{
	snprintf(buf, len,
		 "%scomma-separated %s%swhole numbers %llu..%llu, at "
		 "most %d",
		 k->flags & F_NONEMPTY ? "" : "empty or ",
		 k->flags & F_ASCENDING ? "strictly ascending " : "",
		 k->flags & F_DISTINCT ? "distinct " : "",
		 (unsigned long long)k->min, (unsigned long long)k->max,
		 O1_CONFIG_LIST_MAX);
}

static void allowed_device(const struct key *k, char *buf, size_t len)
{
	snprintf(buf, len, "auto|cpu|cuda:N (N 0..%llu)",
		 (unsigned long long)k->max);
}

static const struct type_ops type_ops[] = {
    [T_U32] = {parse_u32, print_u32, allowed_int},
    [T_U64] = {parse_u64, print_u64, allowed_int},
    [T_DOUBLE] = {parse_double, print_double, allowed_double},
    [T_DOUBLE_AUTO] = {parse_double_auto, print_double_auto,
		       allowed_double_auto},
    [T_BOOL] = {parse_bool, print_bool, allowed_bool},
    [T_STR] = {parse_str, print_str, allowed_str},
    [T_ENUM] = {parse_enum, print_enum, allowed_enum},
    [T_LIST] = {parse_list, print_list, allowed_list},
    [T_OCTAL] = {parse_octal, print_octal, allowed_octal},
    [T_DEVICE] = {parse_device, print_device, allowed_device},
};
_Static_assert(sizeof(type_ops) / sizeof(type_ops[0]) == T_COUNT,
	       "one ops entry per key type");

const char *o1_config_device_name(const struct o1_config_device *d, char *buf,
				  size_t len)
{
	if (d->kind == O1_DEVICE_CUDA)
		snprintf(buf, len, "cuda:%u", d->index);
	else
		snprintf(buf, len, "%s",
			 d->kind == O1_DEVICE_CPU ? "cpu" : "auto");
	return buf;
}

/* backend.device = cuda:N with backend.devices left at "0" and one rank:
 * GPU N (the single-GPU form, before backend.devices existed). */
static bool legacy_device(const struct o1_config *c)
{
	const struct o1_config_list *l = &c->backend.devices;

	return c->backend.device.kind == O1_DEVICE_CUDA &&
	       c->backend.tensor_parallel == 1 && l->n == 1 && l->v[0] == 0;
}

uint32_t o1_config_cuda_devices(const struct o1_config *c, uint32_t *out)
{
	if (legacy_device(c)) {
		out[0] = c->backend.device.index;
		return 1;
	}
	memcpy(out, c->backend.devices.v,
	       c->backend.devices.n * sizeof(uint32_t));
	return c->backend.devices.n;
}

/* The rules between keys; on a break, what is wrong into WHY. */
static int check_rules(const struct o1_config *c, char *why, size_t wl)
{
	const struct o1_config_device *d = &c->backend.device;
	uint32_t tp = c->backend.tensor_parallel, n = c->backend.devices.n;

	if (tp != n)
		return reject(why, wl,
			      "[backend] tensor_parallel = %u but devices "
			      "lists %u GPU%s; give one device per rank",
			      tp, n, n == 1 ? "" : "s");
	if (tp > 1 && d->kind == O1_DEVICE_CPU)
		return reject(why, wl,
			      "[backend] tensor_parallel = %u needs the CUDA "
			      "backend, and device = cpu; tensor parallelism "
			      "over the CPU backend is a test reference only",
			      tp);
	if (d->kind == O1_DEVICE_CUDA && !legacy_device(c) &&
	    d->index != c->backend.devices.v[0])
		return reject(why, wl,
			      "[backend] device = cuda:%u but devices starts "
			      "with %u; write device = auto (or cuda:%u) and "
			      "list the GPUs in devices",
			      d->index, c->backend.devices.v[0],
			      c->backend.devices.v[0]);
	return 0;
}

static bool section_known(const char *section)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if (strcmp(keys[i].section, section) == 0)
			return true;
	return false;
}

static const struct key *key_find(const char *section, const char *name)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if (strcmp(keys[i].section, section) == 0 &&
		    strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

/* "a, b, c": the sections, or the keys of SECTION when it is not NULL. */
static void list_names(const char *section, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (size_t i = 0; i < N_KEYS && used < len; i++) {
		const char *s = keys[i].section;

		if (section ? strcmp(s, section) != 0
			    : (i && strcmp(s, keys[i - 1].section) == 0))
			continue;
		used += snprintf(buf + used, len - used, "%s%s",
				 used ? ", " : "", section ? keys[i].name : s);
	}
}

static int fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes the message into ERR (when there is room) and logs it. */
static int fail(char *err, size_t err_len, const char *fmt, ...)
{
	char local[1024];
	char *buf = err_len ? err : local;
	size_t len = err_len ? err_len : sizeof(local);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (!err_len) /* else the caller prints ERR: one line, not two */
		o1_err("config: %s", buf);
	return -O1_E_CONFIG;
}

/* Finds [SECTION] NAME, or explains at WHERE why there is no such key. */
static int resolve(const char *where, const char *section, const char *name,
		   const struct key **out, char *err, size_t err_len)
{
	char names[512];

	if (!*section)
		return fail(err, err_len, "%s: key '%s' outside any [section]",
			    where, name);
	if (!section_known(section)) {
		list_names(NULL, names, sizeof(names));
		return fail(err, err_len,
			    "%s: unknown section [%s]; allowed: %s", where,
			    section, names);
	}
	*out = key_find(section, name);
	if (!*out) {
		list_names(section, names, sizeof(names));
		return fail(err, err_len,
			    "%s: unknown key '%s' in [%s]; allowed: %s", where,
			    name, section, names);
	}
	return 0;
}

static int assign(struct o1_config *c, const char *where, const struct key *k,
		  const char *value, char *err, size_t err_len)
{
	const struct type_ops *ops = &type_ops[k->type];
	char why[160], allowed[256];

	if (ops->parse(k, value, (char *)c + k->offset, why, sizeof(why)) == 0)
		return 0;
	ops->allowed(k, allowed, sizeof(allowed));
	return fail(err, err_len, "%s: [%s] %s = '%s': %s; allowed: %s", where,
		    k->section, k->name, value, why, allowed);
}

int o1_config_init_defaults(struct o1_config *c)
{
	char err[512];
	int ret;

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < N_KEYS; i++) {
		ret = assign(c, "built-in default", &keys[i], keys[i].def, err,
			     sizeof(err));
		if (ret)
			return ret;
	}
	return 0;
}

struct ini_state {
	struct o1_config cfg; /* the copy being changed */
	const char *name;     /* file name for messages */
	const char *text;     /* NUL-terminated INI text */
	size_t pos;
	unsigned line; /* lines handed to inih so far */
	bool failed;
	unsigned seen[N_KEYS]; /* line that set each key, 0 = not yet */
	char *err;
	size_t err_len;
};

static int ini_fail(struct ini_state *st, const char *what)
{
	st->failed = true;
	return fail(st->err, st->err_len, "%s:%u: %s", st->name, st->line,
		    what);
}

/* Checks what inih cannot report: a header naming an unknown section (even
 * one with no keys) and indented text, which inih would glue onto the
 * previous value. */
static int check_line(struct ini_state *st, const char *line)
{
	char section[64], names[256], what[512];
	const char *p = line, *end;

	if (st->line == 1 && strncmp(p, "\xEF\xBB\xBF", 3) == 0)
		p += 3;
	if (*p == ' ' || *p == '\t') {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p && *p != '\n' && *p != '\r' && *p != ';' && *p != '#')
			return ini_fail(st, "indented line (continuation lines "
					    "are not supported)");
		return 0;
	}
	if (*p == '\n' || *p == '\r' || *p == ';' || *p == '#' || !*p)
		return 0;
	if (*p != '[' ? !strpbrk(p, "=:") : !(end = strchr(p, ']')))
		return ini_fail(st, "malformed line (expected [section], "
				    "key = value or a comment)");
	if (*p != '[')
		return 0;
	if ((size_t)(end - p - 1) >= sizeof(section))
		return ini_fail(st, "section name too long");
	memcpy(section, p + 1, (size_t)(end - p - 1));
	section[end - p - 1] = 0;
	if (section_known(section))
		return 0;
	list_names(NULL, names, sizeof(names));
	snprintf(what, sizeof(what), "unknown section [%s]; allowed: %s",
		 section, names);
	return ini_fail(st, what);
}

/* inih reader: one line of the text per call, counted. */
static char *ini_read_line(char *str, int num, void *stream)
{
	struct ini_state *st = stream;
	const char *start = st->text + st->pos;
	const char *nl;
	size_t len;
	char what[64];

	if (st->failed || !*start)
		return NULL;
	nl = strchr(start, '\n');
	len = nl ? (size_t)(nl - start) + 1 : strlen(start);
	st->line++;
	/* The same limit on a line's text whether a newline ends it or the
	 * text does (the last line), so whatever loads also loads once
	 * o1_config_dump has ended it with one (found by fuzz_config). */
	if (len - (nl != NULL) > (size_t)num - 2) {
		snprintf(what, sizeof(what), "line longer than %d characters",
			 num - 2);
		ini_fail(st, what);
		return NULL;
	}
	memcpy(str, start, len);
	str[len] = 0;
	st->pos += len;
	return check_line(st, str) ? NULL : str;
}

static int ini_on_value(void *user, const char *section, const char *name,
			const char *value)
{
	struct ini_state *st = user;
	const struct key *k;
	char where[256], what[128];

	if (st->failed)
		return 0;
	snprintf(where, sizeof(where), "%s:%u", st->name, st->line);
	if (resolve(where, section, name, &k, st->err, st->err_len))
		goto failed;
	if (st->seen[k - keys]) {
		snprintf(what, sizeof(what),
			 "[%s] %s set twice (first at line "
			 "%u)",
			 section, name, st->seen[k - keys]);
		ini_fail(st, what);
		return 0;
	}
	st->seen[k - keys] = st->line;
	if (assign(&st->cfg, where, k, value, st->err, st->err_len))
		goto failed;
	return 1;
failed:
	st->failed = true;
	return 0;
}

/* The rules between keys over the whole file; a break is reported at the
 * line of the last key involved that the file set. */
static int check_file_rules(struct ini_state *st)
{
	static const char *const names[] = {"device", "devices",
					    "tensor_parallel"};
	char why[256];

	if (!check_rules(&st->cfg, why, sizeof(why)))
		return 0;
	st->line = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		unsigned at = st->seen[key_find("backend", names[i]) - keys];

		st->line = at > st->line ? at : st->line;
	}
	return ini_fail(st, why);
}

int o1_config_load_string(struct o1_config *c, const char *text,
			  const char *name, char *err, size_t err_len)
{
	struct ini_state *st = calloc(1, sizeof(*st));
	int ret;

	if (!st)
		return -ENOMEM;
	st->cfg = *c;
	st->name = name;
	st->text = text;
	st->err = err;
	st->err_len = err_len;
	ret = ini_parse_stream(ini_read_line, st, ini_on_value, st);
	if (st->failed) {
		ret = -O1_E_CONFIG;
	} else if (ret > 0) {
		st->line = (unsigned)ret;
		ret = ini_fail(st, "malformed line (expected [section], "
				   "key = value or a comment)");
	} else if (ret < 0) {
		ret = -ENOMEM;
	} else {
		ret = check_file_rules(st);
	}
	if (!ret)
		*c = st->cfg;
	free(st);
	return ret;
}

static int read_text(const char *path, char **out, char *err, size_t err_len)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	size_t len = 0, cap = 0, n;
	int ret = 0;

	if (!f) {
		ret = -errno;
		fail(err, err_len, "%s: cannot open: %s", path, strerror(-ret));
		return ret;
	}
	do {
		if (cap - len < 4096) {
			char *grown = realloc(text, cap + 65536);

			if (!grown) {
				ret = -ENOMEM;
				goto out_close;
			}
			text = grown;
			cap += 65536;
		}
		n = fread(text + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0);
	if (ferror(f)) {
		ret = -EIO;
		fail(err, err_len, "%s: read error", path);
		goto out_close;
	}
	if (memchr(text, 0, len)) {
		ret = fail(err, err_len, "%s: contains a NUL byte", path);
		goto out_close;
	}
	text[len] = 0;
	*out = text;
	text = NULL;
out_close:
	free(text);
	fclose(f);
	return ret;
}

int o1_config_load_file(struct o1_config *c, const char *path, char *err,
			size_t err_len)
{
	char *text = NULL;
	int ret = read_text(path, &text, err, err_len);

	if (ret)
		return ret;
	ret = o1_config_load_string(c, text, path, err, err_len);
	free(text);
	return ret;
}

static void trim(char *s)
{
	size_t n = strlen(s), b = 0;

	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	while (isspace((unsigned char)s[b]))
		b++;
	memmove(s, s + b, n - b + 1);
}

/* One assignment over C, without the rules between keys; *K gets the key
 * (NULL when none was resolved). */
static int set_one(struct o1_config *c, const char *assignment,
		   const struct key **k, char *err, size_t err_len)
{
	char buf[O1_CONFIG_PATH_MAX + 128], where[O1_CONFIG_PATH_MAX + 160];
	char *dot, *eq;
	struct o1_config copy = *c;
	int ret;

	*k = NULL;
	snprintf(where, sizeof(where), "--set %s", assignment);
	if (strlen(assignment) >= sizeof(buf))
		return fail(err, err_len, "%s: too long", where);
	strcpy(buf, assignment);
	eq = strchr(buf, '=');
	dot = strchr(buf, '.');
	if (!eq || !dot || dot > eq)
		return fail(err, err_len, "%s: expected section.key=value",
			    where);
	*dot = *eq = 0;
	trim(buf);
	trim(dot + 1);
	trim(eq + 1);
	ret = resolve(where, buf, dot + 1, k, err, err_len);
	if (ret == 0)
		ret = assign(&copy, where, *k, eq + 1, err, err_len);
	if (ret == 0)
		*c = copy;
	return ret;
}

/* The rules between keys after --set ASSIGNMENT (the last of the
 * overrides that touched a key they involve). */
static int check_set_rules(const struct o1_config *c, const char *assignment,
			   char *err, size_t err_len)
{
	char why[256];

	if (!check_rules(c, why, sizeof(why)))
		return 0;
	return fail(err, err_len, "--set %s: %s", assignment, why);
}

int o1_config_set(struct o1_config *c, const char *assignment, char *err,
		  size_t err_len)
{
	struct o1_config copy = *c;
	const struct key *k;
	int ret = set_one(&copy, assignment, &k, err, err_len);

	if (!ret)
		ret = check_set_rules(&copy, assignment, err, err_len);
	if (!ret)
		*c = copy;
	return ret;
}

/* Is ARGV[*I] OPT (then the value is the next argument) or OPT=VALUE? On a
 * match sets *VALUE (NULL when missing) and advances *I past what it used. */
static bool take_option(int argc, char **argv, int *i, const char *opt,
			const char **value)
{
	size_t n = strlen(opt);

	if (strncmp(argv[*i], opt, n) != 0)
		return false;
	if (argv[*i][n] == '=') {
		*value = argv[*i] + n + 1;
		return true;
	}
	if (argv[*i][n])
		return false;
	*value = *i + 1 < argc ? argv[++*i] : NULL;
	return true;
}

int o1_config_parse_args(struct o1_config *c, int *argc, char **argv, char *err,
			 size_t err_len)
{
	struct o1_config copy = *c;
	const char *file = NULL, *value, *last = "(the file)";
	const struct key *k;
	int kept = 1, ret = 0, i;

	for (i = 1; i < *argc && strcmp(argv[i], "--") != 0; i++) {
		if (take_option(*argc, argv, &i, "--set", &value)) {
			if (!value)
				return fail(err, err_len,
					    "--set needs "
					    "section.key=value");
			continue;
		}
		if (!take_option(*argc, argv, &i, "-c", &value) &&
		    !take_option(*argc, argv, &i, "--config", &value))
			continue;
		if (!value || !*value)
			return fail(err, err_len, "-c needs a file name");
		if (file)
			return fail(err, err_len, "-c given twice ('%s', '%s')",
				    file, value);
		file = value;
	}
	/* named as the option, so the message says which setting is wrong */
	if (file && access(file, R_OK) != 0) {
		ret = -errno;
		fail(err, err_len, "-c %s: cannot open: %s", file,
		     strerror(-ret));
		return ret;
	}
	if (file)
		ret = o1_config_load_file(&copy, file, err, err_len);
	for (i = 1; ret == 0 && i < *argc && strcmp(argv[i], "--") != 0; i++)
		if (take_option(*argc, argv, &i, "--set", &value)) {
			ret = set_one(&copy, value, &k, err, err_len);
			if (!ret && strcmp(k->section, "backend") == 0)
				last = value;
		}
	if (!ret)
		ret = check_set_rules(&copy, last, err, err_len);
	if (ret)
		return ret;
	for (i = 1; i < *argc && strcmp(argv[i], "--") != 0; i++)
		if (!take_option(*argc, argv, &i, "--set", &value) &&
		    !take_option(*argc, argv, &i, "-c", &value) &&
		    !take_option(*argc, argv, &i, "--config", &value))
			argv[kept++] = argv[i];
	for (; i < *argc; i++)
		argv[kept++] = argv[i];
	argv[kept] = NULL;
	*argc = kept;
	*c = copy;
	return 0;
}

void o1_config_dump(const struct o1_config *c, FILE *f)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct key *k = &keys[i];

		if (i == 0 || strcmp(k->section, keys[i - 1].section) != 0)
			fprintf(f, "%s[%s]\n", i ? "\n" : "", k->section);
		fprintf(f, "%s = ", k->name);
		type_ops[k->type].print(k, (const char *)c + k->offset, f);
		fputc('\n', f);
	}
}
