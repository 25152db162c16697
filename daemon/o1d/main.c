/* o1d: the resident inference daemon.
 *
 *   o1d [-c FILE] [--set section.key=value ...]
 *
 * Loads the configuration and the model, allocates the KV pool and every
 * request slot once, starts the engine thread, then runs the io_uring
 * front loop on the main thread until SIGTERM/SIGINT has drained the work
 * (exit 0) or start-up fails (exit 1; 2 for bad arguments). When serving
 * it prints one line "o1d: ready socket=PATH" on stderr (scripts wait for
 * it) and tells systemd READY=1 (STOPPING=1 on the way out), only after a
 * short warm-up generation through the scheduler succeeded (admin status:
 * "ready"). SIGHUP
 * reloads the file and overrides: log level, scheduler knobs and the
 * drain timeout apply at once; other changed sections are logged as not
 * reloaded. Signals are blocked in every thread from the start and read
 * through the front loop's signalfd.
 * NCCL_NVLS_ENABLE=0 is set before anything starts: tensor parallelism
 * (backend.tensor_parallel > 1) runs NCCL, whose NVLink multicast must
 * stay off on shared hosts. */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "config/config.h"
#include "devmem.h"
#include "engine.h"
#include "common/error.h"
#include "faults.h"
#include "kv_budget.h"
#include "grammar/grammar_tokenizer.h"
#include "ipc/control.h"
#include "common/file.h"
#include "common/log.h"
#include "common/version.h"
#include "metrics/metrics_runq.h"
#include "metrics/metrics_writer.h"
#include "model/model.h"
#include "model/weights.h"
#include "notify.h"
#include "paths.h"
#include "tokenizer/tokenizer.h"
#include "backend/tp_shard.h"

#define SLOTS_MAX     1024
#define WARMUP_TOKENS 4
/* scheduler.prefill_time_ratio's "auto" where it applies (time_ratio) */
#define TIME_RATIO_AUTO 0.15

struct o1d {
	struct o1_config cfg;  /* as at start-up */
	struct o1_config live; /* cfg with what reloads applied */
	int argc;
	char **argv; /* the original command line, for SIGHUP */
	struct o1_model *model;
	struct o1_tokenizer *tok;
	struct o1_chat_template *chat; /* NULL: chat requests refused */
	enum o1_backend_kind kind;
	struct o1_backend *backend;
	struct o1_kv_pool *pool;
	struct o1_metrics *metrics;
	struct o1_metrics_runq *runq;
	struct o1_engine *engine;
	struct o1_ipc_server *srv;
	struct o1_faults *faults; /* [faults] enabled only */
	struct o1_grammar_vocab *gvocab; /* the tokens as grammar input, or
					  * NULL: grammars refused */
	uint32_t ctx;
};

static const char usage_text[] =
    "usage: o1d [-c FILE] [--set section.key=value ...]\n"
    "       o1d --help | --version\n"
    "\n"
    "The resident inference daemon: loads model.path, serves clients on\n"
    "ipc.socket (libo1client, o1ctl, o1-sidecar) until stopped.\n"
    "\n"
    "options:\n"
    "  -c FILE                 the configuration (INI, see config/o1d.ini);\n"
    "                          none: built-in defaults\n"
    "  --set section.key=value override one key (repeatable, after -c)\n"
    "  --help, --version       this text; the version line\n"
    "\n"
    "environment:\n"
    "  NOTIFY_SOCKET           systemd: READY=1 once serving, STOPPING=1\n"
    "  NCCL_NVLS_ENABLE        set to 0 by o1d (NVLink multicast stays off)\n"
    "\n"
    "signals:\n"
    "  SIGTERM, SIGINT         refuse new requests, finish those in flight\n"
    "                          (daemon.drain_timeout_ms), exit\n"
    "  SIGHUP                  reload the file and --set (as o1ctl reload)\n"
    "\n"
    "exit codes:\n"
    "  0  stopped by a signal after draining\n"
    "  1  start-up failed (logged: the model, the socket taken, ...) or\n"
    "     the front loop failed\n"
    "  2  bad arguments or configuration\n"
    "\n"
    "It prints \"o1d: ready socket=PATH\" on stderr once it serves.\n";

/* --help or --version as the only argument: answered, exit 0 (1 when
 * stdout cannot be written); -1 otherwise. */
static int help_or_version(int argc, char **argv)
{
	if (argc != 2)
		return -1;
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		fputs(usage_text, stdout);
	else if (!strcmp(argv[1], "--version"))
		o1_version_print(stdout, "o1d");
	else
		return -1;
	return fflush(stdout) ? 1 : 0;
}

/* Parses the command line into C; what is wrong goes to stderr and into
 * ERR (ERR_CAP bytes: FILE:LINE and the reason, for o1ctl reload). */
static int load_config(struct o1_config *c, int argc, char **argv, char *err,
		       size_t err_cap)
{
	char **copy = malloc(((size_t)argc + 1) * sizeof(char *));
	int n = argc, ret;

	if (!copy)
		return -ENOMEM;
	memcpy(copy, argv, ((size_t)argc + 1) * sizeof(char *));
	err[0] = 0;
	ret = o1_config_init_defaults(c);
	if (!ret)
		ret = o1_config_parse_args(c, &n, copy, err, err_cap);
	if (!ret && n > 1) {
		snprintf(err, err_cap, "unexpected argument '%s'", copy[1]);
		fprintf(stderr, "o1d: %s (see o1d --help)\n", err);
		ret = -EINVAL;
	} else if (ret) {
		fprintf(stderr, "o1d: %s\n", err);
	}
	free(copy);
	return ret;
}

/* The format the chat template writes tool calls in (the wire's values:
 * the welcome tells clients, and tool-call grammars are written in it). */
static enum o1_tool_format tool_format(const struct o1d *d)
{
	_Static_assert((int)O1_TOOL_HERMES == O1_WIRE_TOOLS_HERMES &&
			   (int)O1_TOOL_XML == O1_WIRE_TOOLS_XML &&
			   (int)O1_TOOL_LLAMA3_JSON ==
			       O1_WIRE_TOOLS_LLAMA3_JSON &&
			   (int)O1_TOOL_MISTRAL == O1_WIRE_TOOLS_MISTRAL &&
			   (int)O1_TOOL_N == O1_WIRE_TOOLS_COUNT,
		       "tool formats");
	return d->chat ? o1_chat_template_tool_format(d->chat) : O1_TOOL_NONE;
}

/* The chat template (the model's own, or model.chat_template's file).
 * Without one, or when the model's own does not parse, o1d serves
 * prompts and refuses chats; a configured file that fails stops it. */
static int open_chat_template(struct o1d *d)
{
	int err = o1_chat_template_load(d->model->vocab, d->cfg.model.path,
					d->cfg.model.chat_template, &d->chat);

	if (err && d->cfg.model.chat_template[0])
		return err == -O1_E_FORMAT ? -O1_E_CONFIG : err;
	return err == -ENOMEM ? err : 0;
}

static int open_model(struct o1d *d)
{
	const struct o1_model_desc *m;
	int err;

	if (!d->cfg.model.path[0]) {
		o1_err("no model configured: set model.path (a .gguf file or a "
		       "Hugging Face folder)");
		return -O1_E_CONFIG;
	}
	err = o1_model_open(d->cfg.model.path, &d->model);
	if (err)
		return err;
	m = &d->model->desc;
	d->ctx = m->max_context_tokens;
	if (d->cfg.model.max_context_tokens &&
	    d->cfg.model.max_context_tokens < d->ctx)
		d->ctx = d->cfg.model.max_context_tokens;
	if (d->model->vocab) {
		err = o1_tokenizer_create(d->model->vocab, &d->tok);
		if (err)
			return err;
		err = open_chat_template(d);
		if (err)
			return err;
	} else {
		o1_warn("%s has no vocabulary: token-id prompts only (text "
			"prompts are answered \"%s\")",
			d->cfg.model.path, o1_strerror(-O1_E_NO_TOKENIZER));
	}
	return 0;
}

/* Structured output: the tokens' bytes as the grammar matcher reads them,
 * built once (grammar.max_bytes 0 or no tokenizer: grammars refused). */
static int open_grammar_vocab(struct o1d *d)
{
	struct timespec t0, t1;
	int err;

	if (!d->tok || !d->cfg.grammar.max_bytes)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = o1_grammar_vocab_from_tokenizer(d->tok, &d->gvocab);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (err) {
		o1_err("grammar vocabulary: %s", o1_strerror(err));
		return err;
	}
	o1_info("grammar vocabulary: %u tokens in %.1f ms",
		o1_grammar_vocab_size(d->gvocab),
		(double)(t1.tv_sec - t0.tv_sec) * 1e3 +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	return 0;
}

/* Sequences per step: no more than tokens per step. */
static uint32_t max_running(const struct o1_config *c)
{
	return c->scheduler.max_running < c->scheduler.max_batch_tokens
		   ? c->scheduler.max_running
		   : c->scheduler.max_batch_tokens;
}

static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	unsigned long long kb = 0;
	char line[256];

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kb * 1024;
}

/* Tensor-parallel ranks (1 without tensor parallelism). */
static uint32_t n_ranks(const struct o1_config *c)
{
	return c->backend.tensor_parallel;
}

/* Bytes of weights rank R uploads (the whole model for one rank): bf16,
 * but matrices in GGUF block formats at their own size (unless
 * model.dequantize = bf16), plus 64 MiB of tiles for them (the CUDA
 * backend's QTILE_BYTES); a rank of several counts bf16 throughout (an
 * upper bound). */
static uint64_t rank_weight_bytes(const struct o1d *d, uint32_t r)
{
	bool blocks = d->cfg.model.dequantize == O1_CONFIG_DEQUANTIZE_NONE;
	struct o1_tp_shard s;
	uint64_t n = 0, tiles = 0;

	if (n_ranks(&d->cfg) > 1 &&
	    !o1_tp_shard_plan(&d->model->desc, r, n_ranks(&d->cfg), 1, &s))
		return o1_tp_shard_elements(d->model, &s) * 2;
	for (uint32_t i = 0; i < d->model->n_tensors; i++) {
		const struct o1_tensor *t = &d->model->tensors[i];
		bool b = blocks && t->n_dims == 2 &&
			 !o1_dtype_is_float(t->dtype);

		n += b ? t->n_bytes : o1_tensor_elements(t) * 2;
		tiles = b ? 64u << 20 : tiles;
	}
	return n + tiles;
}

/* Device memory left for the KV pool: free now, less the bf16 weights
 * the CUDA backend is about to upload; with tensor parallelism the least
 * any rank's GPU has left. */
static uint64_t cuda_available(const struct o1d *d)
{
	uint32_t dev[O1_CONFIG_LIST_MAX];
	uint32_t n = o1_config_cuda_devices(&d->cfg, dev);
	uint64_t least = UINT64_MAX;

	for (uint32_t r = 0; r < n; r++) {
		uint64_t free_b = 0, w = rank_weight_bytes(d, r);

		if (o1_devmem_free(dev[r], &free_b))
			return 0;
		free_b = free_b > w ? free_b - w : 0;
		least = free_b < least ? free_b : least;
	}
	return n ? least : 0;
}

/* Bytes of one KV page in the memory kv_pages divides: per GPU for CUDA
 * (each rank holds its kv heads of every page), all of it for the host. */
static uint64_t kv_page_bytes(const struct o1d *d, enum o1_backend_kind kind)
{
	const struct o1_model_desc *m = &d->model->desc;
	bool cuda = kind == O1_BACKEND_CUDA;
	struct o1_kv_layout l = {
	    .n_layers = m->n_layers,
	    .n_kv_heads = m->n_kv_heads / (cuda ? n_ranks(&d->cfg) : 1),
	    .page_tokens = d->cfg.kv.page_tokens,
	    .head_dim = m->head_dim,
	};

	return o1_backend_kind_kv_page_bytes(kind, &l);
}

/* The name of the setting behind max_running(): the smaller of the two. */
static const char *max_running_key(const struct o1_config *c)
{
	return c->scheduler.max_running < c->scheduler.max_batch_tokens
		   ? "scheduler.max_running"
		   : "scheduler.max_batch_tokens";
}

/* kv.pages, or kv.memory_fraction of the memory left, but no more than
 * max_running full contexts need (kv_budget.c); the line says which bound
 * decided. */
static uint32_t kv_pages(const struct o1d *d, enum o1_backend_kind kind)
{
	bool cuda = kind == O1_BACKEND_CUDA;
	struct o1_kv_budget_in in = {
	    .pages = d->cfg.kv.pages,
	    .memory_fraction = d->cfg.kv.memory_fraction,
	    .page_bytes = kv_page_bytes(d, kind),
	    .context_tokens = d->ctx + 1, /* a full context and its next token */
	    .page_tokens = d->cfg.kv.page_tokens,
	    .max_running = max_running(&d->cfg),
	};
	struct o1_kv_budget b;
	const char *why;

	if (!in.page_bytes) /* a backend this build lacks: its create refuses */
		return o1_kv_budget(&in).pages;
	in.avail_bytes = in.pages ? 0 : cuda ? cuda_available(d) : mem_available();
	b = o1_kv_budget(&in);
	why = b.bound == O1_KV_BOUND_MAX_RUNNING ? max_running_key(&d->cfg)
						 : o1_kv_bound_name(b.bound);
	o1_info("kv: %u pages of %llu bytes (%llu tokens, %llu full contexts "
		"of %llu tokens), set by %s",
		b.pages, (unsigned long long)in.page_bytes,
		(unsigned long long)b.pages * in.page_tokens,
		(unsigned long long)(b.pages / b.per_context),
		(unsigned long long)d->ctx, why);
	if (!in.pages)
		o1_info("kv: kv.memory_fraction %.2f of %llu MiB %s memory left "
			"would give %llu pages",
			in.memory_fraction,
			(unsigned long long)(in.avail_bytes >> 20),
			cuda ? "device" : "host",
			(unsigned long long)(in.memory_fraction *
					     (double)in.avail_bytes) /
			    in.page_bytes);
	return b.pages;
}

/* backend.sample_in_backend for KIND: auto is on where the backend is
 * built to sample on the device (cuda), off for cpu; on is on for any
 * backend that can sample (warned and off for one that cannot, so that
 * device auto does not fall back to cpu for it). */
static bool sample_in_backend(const struct o1d *d, enum o1_backend_kind kind)
{
	bool can = o1_backend_kind_can_sample(kind);

	switch (d->cfg.backend.sample_in_backend) {
	case O1_CONFIG_SAMPLE_ON:
		if (!can)
			o1_warn("backend.sample_in_backend on: the %s backend "
				"cannot sample; sampling on the host",
				o1_backend_name(kind));
		return can;
	case O1_CONFIG_SAMPLE_OFF:
		return false;
	case O1_CONFIG_SAMPLE_AUTO:
		break;
	}
	return kind == O1_BACKEND_CUDA && can;
}

static int create_backend(struct o1d *d, enum o1_backend_kind kind)
{
	struct o1_backend_config bc = {
	    .n_threads = d->cfg.backend.threads,
	    .max_batch_tokens = d->cfg.scheduler.max_batch_tokens,
	    .max_seqs = max_running(&d->cfg),
	    .max_context_tokens = d->ctx,
	    .page_tokens = d->cfg.kv.page_tokens,
	    .sampling = sample_in_backend(d, kind),
	    .max_sample_pens = d->cfg.backend.sample_penalty_entries,
	    .dequantize = d->cfg.model.dequantize == O1_CONFIG_DEQUANTIZE_BF16,
	    .cuda_quant_f32 =
		d->cfg.cuda.quant_dot == O1_CONFIG_QUANT_DOT_F32,
	    .cuda_quant_pass_rows = d->cfg.cuda.quant_pass_rows,
	    .cuda_quant_i8_rows =
		d->cfg.cuda.quant_dot == O1_CONFIG_QUANT_DOT_F32
		    ? 0
		    : d->cfg.cuda.quant_i8_rows,
	    .cuda_quant_wg_rows = d->cfg.cuda.quant_wgmma_rows,
	    .cuda_attn_tc_splits = d->cfg.cuda.attention_splits,
	    .cuda_keep_row_counts = !d->cfg.cuda.faster_row_counts,
	};
	const struct o1_config_list *buckets = &d->cfg.graphs.buckets;
	const struct o1_config_list *spans = &d->cfg.graphs.context_spans;
	uint32_t dev[O1_CONFIG_LIST_MAX];
	uint32_t n_dev = o1_config_cuda_devices(&d->cfg, dev);
	int err;

	bc.graphs_enabled = d->cfg.graphs.enabled;
	bc.cuda_autotune = d->cfg.cuda.autotune;
	bc.cuda_autotune_ms = d->cfg.cuda.autotune_ms;
	bc.n_graph_buckets = buckets->n;
	if (bc.n_graph_buckets > O1_BACKEND_GRAPH_BUCKETS_MAX) {
		o1_warn(
		    "graphs.buckets: %u sizes given, capturing the first %u",
		    buckets->n, O1_BACKEND_GRAPH_BUCKETS_MAX);
		bc.n_graph_buckets = O1_BACKEND_GRAPH_BUCKETS_MAX;
	}
	memcpy(bc.graph_buckets, buckets->v,
	       bc.n_graph_buckets * sizeof(bc.graph_buckets[0]));
	bc.n_graph_spans = spans->n;
	if (bc.n_graph_spans >= O1_BACKEND_GRAPH_SPANS_MAX) {
		o1_warn("graphs.context_spans: %u lengths given, using the "
			"first %u",
			spans->n, O1_BACKEND_GRAPH_SPANS_MAX - 1);
		bc.n_graph_spans = O1_BACKEND_GRAPH_SPANS_MAX - 1;
	}
	memcpy(bc.graph_spans, spans->v,
	       bc.n_graph_spans * sizeof(bc.graph_spans[0]));
	bc.device = dev[0];
	bc.tensor_parallel = n_ranks(&d->cfg) > 1 ? n_ranks(&d->cfg) : 0;
	memcpy(
	    bc.devices, dev,
	    (n_dev < O1_BACKEND_DEVICES_MAX ? n_dev : O1_BACKEND_DEVICES_MAX) *
		sizeof(uint32_t));
	bc.n_pages = kv_pages(d, kind);
	if (kind == O1_BACKEND_CUDA && !bc.tensor_parallel) {
		bc.devout_areas = d->cfg.ipc.device_outputs;
		bc.devout_rows = d->cfg.ipc.device_output_rows;
	} else if (d->cfg.ipc.device_outputs) {
		o1_warn("ipc.device_outputs %u: the %s backend%s has no device "
			"outputs; clients asking get \"%s\"",
			d->cfg.ipc.device_outputs, o1_backend_name(kind),
			bc.tensor_parallel ? " (tensor-parallel)" : "",
			o1_strerror(-O1_E_NO_DEVOUT));
	}
	err = o1_backend_create(kind, d->model, &bc, &d->backend);
	if (!err)
		d->kind = kind;
	if (!err && bc.sampling)
		o1_info("sampling in the %s backend, %u penalty entries per "
			"step",
			o1_backend_name(kind),
			o1_backend_config(d->backend)->max_sample_pens);
	return err;
}

static int open_backend(struct o1d *d)
{
	enum o1_device_kind dev = d->cfg.backend.device.kind;
	char why[160];
	int err;

	if (dev == O1_DEVICE_CUDA)
		return create_backend(d, O1_BACKEND_CUDA);
	if (n_ranks(&d->cfg) > 1) {
		/* no CPU fallback: the CPU group is a test reference */
		if (dev == O1_DEVICE_AUTO)
			return create_backend(d, O1_BACKEND_CUDA);
		o1_err("backend.tensor_parallel = %u needs the CUDA backend",
		       n_ranks(&d->cfg));
		return -O1_E_CONFIG;
	}
	if (dev == O1_DEVICE_AUTO && !o1_devmem_count(why, sizeof(why))) {
		/* no GPU is a normal case here: one info line, no error */
		o1_info("backend.device auto: %s; using cpu", why);
		return create_backend(d, O1_BACKEND_CPU);
	}
	if (dev == O1_DEVICE_AUTO) {
		err = create_backend(d, O1_BACKEND_CUDA);
		if (!err)
			return 0;
		o1_info("backend.device auto: no CUDA backend (%s); using cpu",
			o1_strerror(err));
	}
	return create_backend(d, O1_BACKEND_CPU);
}

/* metrics.gid: a group name or number; "" keeps o1d's own (-1). */
static int metrics_gid(const char *g, long *out)
{
	struct group gr, *res = NULL;
	char buf[4096], *end;
	unsigned long n;

	*out = -1;
	if (!*g)
		return 0;
	errno = 0;
	n = strtoul(g, &end, 10);
	if (!*end && !errno && n < UINT32_MAX && g[0] != '-') {
		*out = (long)n;
		return 0;
	}
	if (getgrnam_r(g, &gr, buf, sizeof(buf), &res) || !res) {
		o1_err("metrics.gid '%s': no such group", g);
		return -O1_E_CONFIG;
	}
	*out = (long)gr.gr_gid;
	return 0;
}

static enum o1_metrics_mode metrics_mode(const struct o1_config *c)
{
	switch (c->metrics.mode) {
	case O1_CONFIG_METRICS_BPF:
		return O1_METRICS_MODE_BPF;
	case O1_CONFIG_METRICS_SHM:
		return O1_METRICS_MODE_SHM;
	default:
		return O1_METRICS_MODE_AUTO;
	}
}

/* metrics.runq: the run-queue delay program; failing to load it is
 * logged, not fatal. */
static void start_runq(struct o1d *d)
{
	int err;

	if (!d->cfg.metrics.runq)
		return;
	err = o1_metrics_runq_start(d->metrics, getpid(), &d->runq);
	if (err)
		o1_warn("metrics.runq: run-queue delay not recorded: %s",
			o1_strerror(err));
}

/* metrics.enabled = false: nothing is counted (the engine and scheduler
 * skip every metrics call). metrics.mode auto falls back to counting
 * privately when nothing can be published; an explicit bpf or shm mode
 * that fails stops start-up. */
static int open_metrics(struct o1d *d)
{
	const struct o1_config *c = &d->cfg;
	char shm[O1_CONFIG_PATH_MAX + 32];
	struct o1_metrics_opts mo = {
	    .sz = sizeof(mo),
	    .mode = metrics_mode(c),
	    .bpf_dir = c->metrics.bpf_dir,
	    .shm_path = shm,
	    .file_mode = c->metrics.file_mode,
	    .unpin_on_close = c->metrics.unpin_on_exit,
	};
	int err;

	if (!c->metrics.enabled) {
		o1_info("metrics: off (metrics.enabled = false)");
		return 0;
	}
	err = metrics_gid(c->metrics.gid, &mo.gid);
	if (!err)
		err = o1_metrics_shm_path_for(c->metrics.shm_path,
					      c->ipc.socket, shm, sizeof(shm));
	if (err)
		return err;
	err = o1_metrics_open(&mo, &d->metrics);
	if (err && err != -EADDRINUSE && mo.mode == O1_METRICS_MODE_AUTO) {
		o1_warn("metrics unavailable (%s): counting privately",
			o1_strerror(err));
		mo.mode = O1_METRICS_MODE_ANON;
		err = o1_metrics_open(&mo, &d->metrics);
	}
	if (err)
		return err;
	o1_metrics_set(d->metrics, O1_METRICS_CTR_KV_PAGES_TOTAL,
		       o1_kv_pool_layout(d->pool)->n_pages);
	start_runq(d);
	return 0;
}

static uint32_t n_slots(const struct o1_config *c)
{
	uint64_t n = (uint64_t)c->ipc.max_clients * c->ipc.max_inflight;

	if (n < c->scheduler.max_running)
		n = c->scheduler.max_running;
	return n > SLOTS_MAX ? SLOTS_MAX : (uint32_t)n;
}

static void reload(void *ctx, struct o1_engine *e,
		   struct o1_reload_report *rep);
static void dump_config(void *ctx, FILE *f);

/* Prompt tokens a request may bring: ipc.max_prompt_tokens, at most the
 * context. */
static uint32_t prompt_tokens(const struct o1d *d)
{
	return d->cfg.ipc.max_prompt_tokens < d->ctx
		   ? d->cfg.ipc.max_prompt_tokens
		   : d->ctx;
}

/* The refinement review instruction: refine.review_template's text
 * without its trailing white space, or NULL (*out) for the built-in one. */
static int load_review(const struct o1_config *c, char **out)
{
	size_t len = 0;
	int err;

	*out = NULL;
	if (!c->refine.review_template[0])
		return 0;
	err = o1_file_read(c->refine.review_template, 65536, out, &len);
	if (err) {
		o1_err("refine.review_template %s: %s",
		       c->refine.review_template, o1_strerror(err));
		return err;
	}
	while (len && isspace((unsigned char)(*out)[len - 1]))
		len--;
	(*out)[len] = 0;
	if (!len || memchr(*out, 0, len)) {
		o1_err("refine.review_template %s: empty or holds a NUL byte",
		       c->refine.review_template);
		free(*out);
		*out = NULL;
		return -O1_E_CONFIG;
	}
	return 0;
}

_Static_assert(O1_BACKEND_GRAPH_SPANS_MAX <= O1_METRICS_GRAPH_SPANS,
	       "the metrics record every context span");

/* The captured buckets' sizes, the spans' lengths and the capture cost,
 * once, for readers. */
static int publish_graph_buckets(struct o1d *d)
{
	struct o1_backend_graph_stats st;
	uint32_t sizes[O1_BACKEND_GRAPH_BUCKETS_MAX];
	uint32_t lens[O1_BACKEND_GRAPH_SPANS_MAX];
	int err;

	if (!d->metrics)
		return 0;
	o1_backend_graph_stats(d->backend, &st);
	if (!st.n_buckets)
		return 0;
	for (uint32_t i = 0; i < st.n_buckets; i++)
		sizes[i] = st.buckets[i].batch;
	for (uint32_t i = 0; i < st.n_spans; i++)
		lens[i] = st.spans[i].len;
	o1_metrics_graph_capture(d->metrics, st.capture_us, st.capture_bytes);
	err = o1_metrics_graph_set_buckets(d->metrics, sizes, st.n_buckets);
	return err ?: o1_metrics_graph_set_spans(d->metrics, lens, st.n_spans);
}

static void graph_stats(const void *backend, struct o1_backend_graph_stats *out)
{
	o1_backend_graph_stats(backend, out);
}

static int fail_replays(void *backend, uint32_t every)
{
	return o1_backend_fail_replays(backend, every);
}

/* [faults] enabled: the injector wraps the step. graph_replay gets the
 * backend's hook when the backend replays graphs (asking for none, here
 * before any step, tells). */
static int create_faults(struct o1d *d, struct o1_engine_opts *eo)
{
	struct o1_faults_opts fo = {
	    .step = eo->sched.step,
	    .step_ctx = eo->sched.step_ctx,
	    .pool = d->pool,
	    .replay_ctx = d->backend,
	    .vocab = o1_backend_vocab_size(d->backend),
	};
	int err;

	if (o1_backend_fail_replays(d->backend, 0) == 0)
		fo.fail_replays = fail_replays;
	err = o1_faults_create(&fo, &d->faults);
	if (err)
		return err;
	eo->sched.step = o1_faults_step;
	eo->sched.step_ctx = d->faults;
	eo->faults = d->faults;
	return 0;
}

/* The scheduler's forward pass: the backend's step (CTX is the backend;
 * called through the right type, no cast function pointer). */
static int backend_step(void *ctx, const struct o1_step *step)
{
	return o1_backend_step(ctx, step);
}

/* admin "status"'s weights line: the model's bytes by type (a longer list
 * is cut short), and whether block types were dequantized at load. */
static void weights_text(const struct o1d *d, char *buf, size_t n)
{
	struct o1_model_weights w;
	size_t l;

	o1_model_weights(d->model, &w);
	(void)o1_model_weights_text(&w, buf, n);
	l = strlen(buf);
	if (d->cfg.model.dequantize == O1_CONFIG_DEQUANTIZE_BF16 && l < n)
		snprintf(buf + l, n - l, "; block types dequantized at load");
}

/* Whether a matrix of the model (the token embedding aside: it is
 * gathered, not multiplied) is kept in a GGUF block format. */
static bool block_matrices(const struct o1d *d)
{
	if (d->cfg.model.dequantize == O1_CONFIG_DEQUANTIZE_BF16)
		return false;
	for (uint32_t i = 0; i < d->model->n_tensors; i++) {
		const struct o1_tensor *t = &d->model->tensors[i];

		if (t->n_dims == 2 && t->role != O1_T_TOKEN_EMBD &&
		    !o1_dtype_is_float(t->dtype))
			return true;
	}
	return false;
}

/* scheduler.prefill_time_ratio, "auto" resolved: TIME_RATIO_AUTO
 * (measured on the H200: docs/PERFORMANCE.md, ninth session), but off on
 * the CUDA backend with block-format matrices. There a step of more rows
 * than cuda.quant_pass_rows (12) runs other products than the decode
 * step's (gemm_qi8.cu up to cuda.quant_i8_rows, then bf16 tiles: 9.7 and
 * 13-15 ms on llama3-8b Q4_K_M against a 2.1 ms decode step), a fixed
 * cost the budget's per-token model cannot express: beside a few decoding
 * streams it would let a long prompt in one KV page a step, each step
 * that slow. */
static double time_ratio(const struct o1d *d)
{
	double r = d->cfg.scheduler.prefill_time_ratio;

	if (r >= 0)
		return r;
	r = d->kind == O1_BACKEND_CUDA && block_matrices(d) ? 0.0
							    : TIME_RATIO_AUTO;
	o1_info("scheduler: prefill_time_ratio auto: %g%s", r,
		r > 0 ? "" : " (block-format matrices on the GPU)");
	return r;
}

static int create_engine(struct o1d *d)
{
	const struct o1_config *c = &d->cfg;
	uint64_t secret = 0;
	char *review, weights[256];
	int err;
	struct o1_engine_opts eo = {
	    .sched =
		{
		    .pool = d->pool,
		    .tok = d->tok,
		    .chat = d->chat,
		    .metrics = d->metrics,
		    .step = backend_step,
		    .step_ctx = d->backend,
		    .vocab_size = o1_backend_vocab_size(d->backend),
		    .devout_areas = o1_backend_config(d->backend)->devout_areas,
		    .max_context = d->ctx,
		    .max_batch_tokens = c->scheduler.max_batch_tokens,
		    .max_running = max_running(c),
		    .prefill_chunk_tokens = c->scheduler.prefill_chunk_tokens,
		    .prefill_per_decode =
			c->scheduler.prefill_tokens_per_decode,
		    .prefill_time_ratio = time_ratio(d),
		    .prefill_whole_ratio = c->scheduler.prefill_whole_ratio,
		    /* auto (O1_CONFIG_RATIO_AUTO) is <= 0: the whole ratio */
		    .prefill_burst_ratio = c->scheduler.prefill_burst_ratio,
		    .n_slots = n_slots(c),
		    .max_prompt_bytes = 65536,
		    .prefix_cache = true,
		    .bos_id = d->tok ? o1_tokenizer_bos(d->tok)
				     : d->model->desc.bos_id,
		    .eos_id = d->tok ? o1_tokenizer_eos(d->tok)
				     : d->model->desc.eos_id,
		    .max_refine_steps = c->refine.max_steps,
		    .refine_threshold = (float)c->refine.confidence_threshold,
		    .sampler_threads = c->scheduler.sampler_threads,
		    .max_running_per_client =
			c->scheduler.max_running_per_client,
		    .stall_timeout_ms = c->scheduler.stall_timeout_ms,
		    .sample_in_backend = o1_backend_can_sample(d->backend),
		    .sample_pens =
			o1_backend_config(d->backend)->max_sample_pens,
		    .sample_masks =
			o1_backend_config(d->backend)->max_sample_masks,
		},
	    .drain_timeout_ms = c->daemon.drain_timeout_ms,
	    .log_requests = c->log.requests,
	    .model_name =
		c->model.name[0] ? c->model.name : d->model->desc.name,
	    .weights = weights,
	    .backend_name = o1_backend_name(d->kind),
	    .reload = reload,
	    .dump_config = dump_config,
	    .reload_ctx = d,
	    .graph_stats = graph_stats,
	    .graph_ctx = d->backend,
	    .grammar_vocab = d->gvocab,
	    .grammar_cache_entries = c->grammar.cache_entries,
	    .grammar_cache_bytes = (uint64_t)c->grammar.cache_mb << 20,
	    .grammar_threads = c->grammar.threads,
	    .tool_format = (uint8_t)tool_format(d),
	};

	weights_text(d, weights, sizeof(weights));
	if (eo.sched.prefill_time_ratio > 0)
		o1_info("scheduler: prefill_whole_ratio %g, prefill_burst_ratio "
			"%g%s",
			eo.sched.prefill_whole_ratio,
			eo.sched.prefill_burst_ratio > 0
			    ? eo.sched.prefill_burst_ratio
			    : eo.sched.prefill_whole_ratio,
			eo.sched.prefill_burst_ratio > 0 ? "" : " (auto)");
	if (getrandom(&secret, sizeof(secret), 0) != sizeof(secret))
		o1_warn("getrandom failed: prefix-cache salts are "
			"predictable");
	eo.sched.salt_secret = secret;
	if (eo.sched.max_prompt_bytes < prompt_tokens(d) * 4)
		eo.sched.max_prompt_bytes = prompt_tokens(d) * 4;
	if (c->faults.enabled) {
		err = create_faults(d, &eo);
		if (err)
			return err;
	}
	err = load_review(c, &review);
	if (err)
		return err;
	eo.sched.refine_review = review;
	err = o1_engine_create(&eo, &d->engine);
	free(review);
	return err;
}

/* allowed_uids and admin_uids are "besides o1d's own uid" (and root):
 * the ipc layer takes a non-empty list literally. */
static uint32_t with_self(const struct o1_config_list *l, uint32_t *out)
{
	uint32_t n = l->n;

	memcpy(out, l->v, n * sizeof(uint32_t));
	if (n) {
		out[n++] = (uint32_t)geteuid();
		out[n++] = 0;
	}
	return n;
}

/* Readiness before serving: the graph buckets captured, then one short
 * greedy generation through the scheduler (logged with its time). */
static int warm_up(struct o1d *d)
{
	struct o1_backend_graph_stats st;
	uint32_t captured = 0;
	uint64_t ns = 0;
	int err;

	o1_backend_graph_stats(d->backend, &st);
	for (uint32_t i = 0; i < st.n_buckets; i++)
		captured += st.buckets[i].captured;
	o1_engine_set_graphs(d->engine, st.n_buckets, captured);
	if (captured < st.n_buckets)
		o1_warn("graphs: %u of %u buckets captured: not ready",
			captured, st.n_buckets);
	err = o1_engine_warmup(d->engine, WARMUP_TOKENS, &ns);
	if (err) {
		o1_err("warm-up generation failed after %.1f ms: %s",
		       (double)ns / 1e6, o1_strerror(err));
		return err;
	}
	o1_info("warm-up: %d greedy tokens in %.1f ms", WARMUP_TOKENS,
		(double)ns / 1e6);
	return 0;
}

/* The backend's device output areas as the wire describes them: their
 * count (0 without any). */
static uint32_t devout_descs(const struct o1d *d, struct o1_wire_devout *out)
{
	uint32_t n = o1_backend_config(d->backend)->devout_areas;
	struct o1_backend_devout b;

	for (uint32_t i = 0; i < n; i++) {
		if (o1_backend_devout(d->backend, i, &b))
			return 0;
		memset(&out[i], 0, sizeof(out[i]));
		out[i].area = i;
		out[i].rows = b.rows;
		out[i].row_floats = b.row_floats;
		out[i].row_stride_bytes = b.row_stride_bytes;
		out[i].stamps_off = b.stamps_off;
		out[i].area_bytes = b.area_bytes;
		memcpy(out[i].pci_bus_id, b.pci_bus_id,
		       sizeof(out[i].pci_bus_id) - 1);
		memcpy(out[i].mem_handle, b.mem_handle, sizeof(b.mem_handle));
		memcpy(out[i].event_handle, b.event_handle,
		       sizeof(b.event_handle));
	}
	return n;
}

/* ipc.front_threads, 0 (auto) resolved: one per 8 online cores, 1..4;
 * a front thread that spins needs a core of its own to pay. On the
 * 16-core H200 host (docs/PERFORMANCE.md, "Several front threads"), 16
 * clients pinging at once: 2 fronts p50 / p99 1.42-1.72 / 2.46-3.14 us,
 * 4 fronts 1.08-1.16 / 4.69-8.86 (20 spinning threads on 16 cores), 1
 * front 2.60-2.63 / 4.15-6.49. */
static uint32_t front_threads(const struct o1_config *c)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	if (c->ipc.front_threads)
		return c->ipc.front_threads;
	if (cores < 16)
		return 1;
	return cores >= 32 ? 4 : (uint32_t)(cores / 8);
}

static int create_server(struct o1d *d)
{
	struct o1_wire_devout areas[O1_BACKEND_DEVOUT_AREAS_MAX];
	const struct o1_config *c = &d->cfg;
	uint32_t uids[O1_CONFIG_LIST_MAX + 2], admins[O1_CONFIG_LIST_MAX + 2];
	struct o1_ipc_consumer cons;
	struct o1_ipc_opts io = {
	    .sz = sizeof(io),
	    .socket_path = c->ipc.socket,
	    .socket_mode = c->ipc.socket_mode,
	    .allowed_uids = uids,
	    .n_allowed_uids = with_self(&c->ipc.allowed_uids, uids),
	    .allowed_gids = c->ipc.allowed_gids.v,
	    .n_allowed_gids = c->ipc.allowed_gids.n,
	    .admin_uids = admins,
	    .n_admin_uids = with_self(&c->ipc.admin_uids, admins),
	    .spin_us = c->ipc.spin_us,
	    .front_threads = front_threads(c),
	    .max_clients = c->ipc.max_clients,
	    .sq_entries = c->ipc.ring_entries,
	    .cq_entries = c->ipc.ring_entries,
	    .arena_bytes = c->ipc.arena_bytes > UINT32_MAX
			       ? UINT32_MAX
			       : (uint32_t)c->ipc.arena_bytes,
	    .max_inflight = c->ipc.max_inflight,
	    .max_half_open = c->ipc.max_half_open,
	    .max_clients_per_uid = c->ipc.max_clients_per_uid,
	    .violation_decay_ms = c->ipc.violation_decay_s * 1000,
	    .max_prompt_tokens = prompt_tokens(d),
	    .max_prompt_bytes = 65536,
	    .max_tokens = d->ctx,
	    .max_stop_ids = 16,
	    .max_stop_bytes = 1024,
	    .vocab_size = o1_backend_vocab_size(d->backend),
	    .handle_signals = 1,
	    .devout_areas = areas,
	    .max_grammar_bytes = d->gvocab ? c->grammar.max_bytes : 0,
	    .tool_format = (uint8_t)tool_format(d),
	};

	_Static_assert(sizeof(areas[0].mem_handle) ==
			   O1_BACKEND_IPC_HANDLE_BYTES,
		       "IPC handle bytes");
	io.n_devout_areas = devout_descs(d, areas);
	o1_engine_consumer(d->engine, &cons);
	return o1_ipc_server_create(&io, &cons, &d->srv);
}

static void dump_config(void *ctx, FILE *f)
{
	const struct o1d *d = ctx;

	o1_config_dump(&d->live, f);
}

static void report_add(char *list, size_t cap, const char *what)
{
	size_t n = strlen(list);

	snprintf(list + n, cap - n, "%s%s", n ? "," : "", what);
}

/* Sections that changed but are only read at start-up. */
static void not_reloaded(const struct o1_config *c, const struct o1_config *o,
			 struct o1_reload_report *rep)
{
	char *l = rep->not_applied;
	size_t cap = sizeof(rep->not_applied);

	if (memcmp(&c->model, &o->model, sizeof(c->model)))
		report_add(l, cap, "model");
	if (memcmp(&c->backend, &o->backend, sizeof(c->backend)))
		report_add(l, cap, "backend");
	if (memcmp(&c->kv, &o->kv, sizeof(c->kv)))
		report_add(l, cap, "kv");
	if (memcmp(&c->graphs, &o->graphs, sizeof(c->graphs)))
		report_add(l, cap, "graphs");
	if (memcmp(&c->cuda, &o->cuda, sizeof(c->cuda)))
		report_add(l, cap, "cuda");
	if (memcmp(&c->ipc, &o->ipc, sizeof(c->ipc)))
		report_add(l, cap, "ipc");
	if (memcmp(&c->metrics, &o->metrics, sizeof(c->metrics)))
		report_add(l, cap, "metrics");
	if (memcmp(&c->grammar, &o->grammar, sizeof(c->grammar)))
		report_add(l, cap, "grammar");
	if (c->scheduler.max_running_per_client !=
	    o->scheduler.max_running_per_client)
		report_add(l, cap, "scheduler.max_running_per_client");
	if (c->scheduler.stall_timeout_ms != o->scheduler.stall_timeout_ms)
		report_add(l, cap, "scheduler.stall_timeout_ms");
	if (c->scheduler.prefill_tokens_per_decode !=
	    o->scheduler.prefill_tokens_per_decode)
		report_add(l, cap, "scheduler.prefill_tokens_per_decode");
	if (c->scheduler.prefill_time_ratio != o->scheduler.prefill_time_ratio)
		report_add(l, cap, "scheduler.prefill_time_ratio");
	if (c->scheduler.prefill_whole_ratio !=
	    o->scheduler.prefill_whole_ratio)
		report_add(l, cap, "scheduler.prefill_whole_ratio");
	if (c->scheduler.prefill_burst_ratio !=
	    o->scheduler.prefill_burst_ratio)
		report_add(l, cap, "scheduler.prefill_burst_ratio");
	if (l[0])
		o1_warn("reload: %s changed but need a restart; not reloaded",
			l);
}

/* SIGHUP or admin "reload" (front thread): what can change at run time
 * (log level, scheduler knobs capped at their start-up values, the drain
 * timeout) applies at once and becomes the effective configuration;
 * sections read only at start-up keep their old values. */
static void reload(void *ctx, struct o1_engine *e, struct o1_reload_report *rep)
{
	struct o1d *d = ctx;
	struct o1_config c;
	char err[400];

	memset(rep, 0, sizeof(*rep));
	if (load_config(&c, d->argc, d->argv, err, sizeof(err))) {
		snprintf(rep->error, sizeof(rep->error),
			 "%s; nothing reloaded", err);
		o1_err("reload: configuration not reloaded (see above)");
		return;
	}
	o1_log_set_level(c.log.level);
	o1_engine_set_limits(
	    e, c.scheduler.max_batch_tokens, c.scheduler.max_running,
	    c.scheduler.prefill_chunk_tokens, c.daemon.drain_timeout_ms);
	not_reloaded(&c, &d->cfg, rep);
	snprintf(rep->applied, sizeof(rep->applied),
		 "log.level,scheduler.max_batch_tokens,scheduler.max_running,"
		 "scheduler.prefill_chunk_tokens,daemon.drain_timeout_ms");
	d->live.log = c.log;
	d->live.daemon = c.daemon;
	d->live.scheduler.max_batch_tokens =
	    c.scheduler.max_batch_tokens < d->cfg.scheduler.max_batch_tokens
		? c.scheduler.max_batch_tokens
		: d->cfg.scheduler.max_batch_tokens;
	d->live.scheduler.max_running =
	    c.scheduler.max_running < max_running(&d->cfg)
		? c.scheduler.max_running
		: max_running(&d->cfg);
	d->live.scheduler.prefill_chunk_tokens =
	    c.scheduler.prefill_chunk_tokens;
	o1_info("SIGHUP: reloaded log.level, scheduler.max_batch_tokens=%u "
		"max_running=%u prefill_chunk_tokens=%u (capped at start-up "
		"values), daemon.drain_timeout_ms=%u",
		c.scheduler.max_batch_tokens, c.scheduler.max_running,
		c.scheduler.prefill_chunk_tokens, c.daemon.drain_timeout_ms);
}

/* The socket is checked first (its directory, and no daemon serving
 * there), so a second o1d on a live socket stops before it loads a model
 * or touches the live one's metrics. */
static int start(struct o1d *d)
{
	int err = o1_ipc_socket_check(d->cfg.ipc.socket);

	if (!err)
		err = o1_paths_check(&d->cfg, NULL, 0);
	if (!err)
		err = open_model(d);
	if (!err)
		err = open_backend(d);
	if (!err)
		err = open_grammar_vocab(d);
	if (!err)
		err = o1_kv_pool_create(o1_backend_kv_layout(d->backend),
					&d->pool);
	if (!err)
		err = open_metrics(d);
	if (!err)
		err = publish_graph_buckets(d);
	if (!err)
		err = create_engine(d);
	if (!err)
		err = create_server(d);
	if (!err)
		err = warm_up(d);
	if (!err)
		err = o1_engine_start(d->engine, d->srv);
	return err;
}

static void stop(struct o1d *d)
{
	if (d->engine)
		o1_engine_stop(d->engine);
	o1_metrics_runq_stop(d->runq);
	o1_ipc_server_destroy(d->srv);
	o1_engine_destroy(d->engine);
	o1_faults_destroy(d->faults);
	o1_metrics_close(d->metrics);
	o1_kv_pool_destroy(d->pool);
	o1_backend_destroy(d->backend);
	o1_grammar_vocab_destroy(d->gvocab);
	o1_chat_template_destroy(d->chat);
	o1_tokenizer_destroy(d->tok);
	o1_model_close(d->model);
}

static int serve(struct o1d *d)
{
	int err;

	o1_info("serving %s (%s, %u KV pages of %u tokens, context %u)",
		d->model->desc.name, o1_backend_name(d->kind),
		o1_kv_pool_layout(d->pool)->n_pages,
		o1_kv_pool_layout(d->pool)->page_tokens, d->ctx);
	fprintf(stderr, "o1d: ready socket=%s\n", d->cfg.ipc.socket);
	fflush(stderr);
	o1_notify_send("READY=1");
	err = o1_ipc_server_run(d->srv);
	o1_notify_send("STOPPING=1");
	if (err)
		o1_err("front loop failed: %s", o1_strerror(err));
	return err;
}

int main(int argc, char **argv)
{
	struct o1d d = {.argc = argc, .argv = argv};
	char cfg_err[512];
	sigset_t set;
	int err;

	err = help_or_version(argc, argv);
	if (err >= 0)
		return err;
	setenv("NCCL_NVLS_ENABLE", "0", 1);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (load_config(&d.cfg, argc, argv, cfg_err, sizeof(cfg_err)))
		return 2;
	d.live = d.cfg;
	o1_log_set_level(d.cfg.log.level);
	err = start(&d);
	if (!err) {
		err = serve(&d);
	} else {
		o1_err("o1d: start-up failed: %s", o1_strerror(err));
		o1_metrics_unpublish_on_close(d.metrics);
	}
	stop(&d);
	o1_info("o1d: exit %d", err ? 1 : 0);
	return err ? 1 : 0;
}
