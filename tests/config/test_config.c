/* Config loader: defaults, the shipped o1d.ini, good files, every kind of
 * bad input (with file:line in the message and the struct left unchanged),
 * --set overrides, -c/--set argument handling and the dump round trip;
 * the tensor-parallel keys and the rules between the backend keys. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "common/error.h"

static void defaults(struct o1_config *c)
{
	assert_int_equal(o1_config_init_defaults(c), 0);
}

static void test_defaults(void **state)
{
	struct o1_config c;
	char buf[32];

	(void)state;
	defaults(&c);
	assert_int_equal(c.kv.page_tokens, 16);
	assert_int_equal(c.kv.pages, 0);
	assert_true(c.kv.memory_fraction == 0.9);
	assert_true(c.scheduler.prefill_time_ratio == O1_CONFIG_RATIO_AUTO);
	assert_true(c.scheduler.prefill_whole_ratio == 0.6);
	assert_true(c.scheduler.prefill_burst_ratio == O1_CONFIG_RATIO_AUTO);
	assert_int_equal(c.graphs.buckets.n, 13);
	assert_int_equal(c.graphs.buckets.v[0], 1);
	assert_int_equal(c.graphs.buckets.v[12], 256);
	assert_int_equal(c.graphs.context_spans.n, 0);
	assert_true(c.graphs.enabled);
	assert_int_equal(c.cuda.quant_pass_rows, 12);
	assert_int_equal(c.cuda.attention_splits, 0);
	assert_true(c.cuda.faster_row_counts);
	assert_string_equal(c.ipc.socket, "/run/o1d/o1d.sock");
	assert_int_equal(c.ipc.socket_mode, 0660);
	assert_int_equal(c.ipc.allowed_uids.n, 0);
	assert_string_equal(c.metrics.bpf_dir, "/sys/fs/bpf/o1d");
	assert_string_equal(c.metrics.shm_path, "");
	assert_string_equal(c.metrics.gid, "");
	assert_int_equal(c.metrics.mode, O1_CONFIG_METRICS_AUTO);
	assert_int_equal(c.metrics.file_mode, 0640);
	assert_false(c.metrics.unpin_on_exit);
	assert_false(c.metrics.runq);
	assert_int_equal(c.log.level, O1_LOG_INFO);
	assert_int_equal(c.backend.device.kind, O1_DEVICE_AUTO);
	assert_string_equal(
	    o1_config_device_name(&c.backend.device, buf, sizeof(buf)), "auto");
	assert_string_equal(c.model.path, "");
	assert_int_equal(c.ipc.arena_bytes, 1048576);
	assert_int_equal(c.scheduler.sampler_threads, 0);
	assert_int_equal(c.scheduler.max_running_per_client, 0);
	assert_int_equal(c.scheduler.stall_timeout_ms, 30000);
	assert_int_equal(c.sidecar.read_timeout_ms, 10000);
	assert_int_equal(c.sidecar.max_connections_per_address, 0);
}

static void test_shipped_ini_equals_defaults(void **state)
{
	struct o1_config d, c;
	char err[512] = "";

	(void)state;
	defaults(&d);
	/* From all zeroes: equal only if the file gives every key its
	 * default value. */
	memset(&c, 0, sizeof(c));
	assert_int_equal(o1_config_load_file(&c,
					     O1_SOURCE_DIR "/config/o1d.ini",
					     err, sizeof(err)),
			 0);
	assert_memory_equal(&c, &d, sizeof(c));
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return text;
}

/* Every line of the default dump ("[section]", "key = value") is a line
 * of the shipped file, zero-valued and empty defaults included. */
static void test_shipped_ini_lists_every_key(void **state)
{
	char *dump = NULL, *file, *line, *save = NULL, needle[512];
	size_t len = 0, n;
	struct o1_config c;
	FILE *f;

	(void)state;
	defaults(&c);
	f = open_memstream(&dump, &len);
	o1_config_dump(&c, f);
	fclose(f);
	file = read_file(O1_SOURCE_DIR "/config/o1d.ini");
	for (line = strtok_r(dump, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		n = strlen(line);
		if (line[n - 1] == ' ') /* "key = " is written "key =" */
			n--;
		snprintf(needle, sizeof(needle), "\n%.*s\n", (int)n, line);
		if (!strstr(file, needle))
			fail_msg("o1d.ini lacks the line '%.*s'", (int)n, line);
	}
	free(file);
	free(dump);
}

static void test_good_file(void **state)
{
	static const char text[] = "\xEF\xBB\xBF; comment\n"
				   "# another\n"
				   "[backend]\n"
				   "device = cuda:3   ; inline comment\n"
				   "threads=8\r\n"
				   "\n"
				   "[kv]\n"
				   "page_tokens = 32\n"
				   "memory_fraction = 0.5\n"
				   "[graphs]\n"
				   "enabled = off\n"
				   "buckets = 1, 3 ,7\n"
				   "context_spans = 2048,8192\n"
				   "[ipc]\n"
				   "socket_mode = 0600\n"
				   "allowed_uids = 1000,0\n"
				   "admin_uids =\n"
				   "[model]\n"
				   "path = /models/q.gguf\n"
				   "dtype = bf16\n"
				   "dequantize = bf16\n"
				   "[metrics]\n"
				   "shm_path = /dev/shm/o1-a\n"
				   "gid = monitor\n"
				   "mode = shm\n"
				   "file_mode = 0604\n"
				   "unpin_on_exit = yes\n"
				   "runq = true\n"
				   "[scheduler]\n"
				   "sampler_threads = 3\n"
				   "[refine]\n"
				   "max_steps = 16\n"
				   "confidence_threshold = -0.5\n"
				   "review_template = /etc/o1d/review.txt\n"
				   "[log]\n"
				   "level = trace\n";
	struct o1_config c;
	char err[512] = "";

	(void)state;
	defaults(&c);
	assert_int_equal(
	    o1_config_load_string(&c, text, "good.ini", err, sizeof(err)), 0);
	assert_int_equal(c.backend.device.kind, O1_DEVICE_CUDA);
	assert_int_equal(c.backend.device.index, 3);
	assert_int_equal(c.backend.threads, 8);
	assert_int_equal(c.kv.page_tokens, 32);
	assert_true(c.kv.memory_fraction == 0.5);
	assert_false(c.graphs.enabled);
	assert_int_equal(c.graphs.buckets.n, 3);
	assert_int_equal(c.graphs.buckets.v[1], 3);
	assert_int_equal(c.graphs.buckets.v[2], 7);
	assert_int_equal(c.graphs.context_spans.n, 2);
	assert_int_equal(c.graphs.context_spans.v[1], 8192);
	assert_int_equal(c.ipc.socket_mode, 0600);
	assert_int_equal(c.ipc.allowed_uids.n, 2);
	assert_int_equal(c.ipc.allowed_uids.v[1], 0);
	assert_string_equal(c.model.path, "/models/q.gguf");
	assert_int_equal(c.model.dtype, O1_CONFIG_DTYPE_BF16);
	assert_int_equal(c.model.dequantize, O1_CONFIG_DEQUANTIZE_BF16);
	assert_int_equal(c.log.level, O1_LOG_TRACE);
	assert_int_equal(c.scheduler.max_running, 256);
	assert_string_equal(c.metrics.shm_path, "/dev/shm/o1-a");
	assert_string_equal(c.metrics.gid, "monitor");
	assert_int_equal(c.metrics.mode, O1_CONFIG_METRICS_SHM);
	assert_int_equal(c.metrics.file_mode, 0604);
	assert_true(c.metrics.unpin_on_exit);
	assert_true(c.metrics.runq);
	assert_int_equal(c.scheduler.sampler_threads, 3);
	assert_int_equal(c.refine.max_steps, 16);
	assert_true(c.refine.confidence_threshold == -0.5);
	assert_string_equal(c.refine.review_template, "/etc/o1d/review.txt");
}

struct bad_case {
	const char *text;
	const char *expect[3]; /* substrings of the message */
};

static const struct bad_case bad_cases[] = {
    {"[kv]\npages = 1\n[bogus]\n",
     {"t.ini:3:", "unknown section [bogus]", "allowed: daemon, model"}},
    {"[kv]\nfoo = 1\n",
     {"t.ini:2:", "unknown key 'foo' in [kv]", "page_tokens"}},
    {"\n[kv]\npage_tokens = abc\n",
     {"t.ini:3:", "page_tokens = 'abc'", "1..256, a power of two"}},
    {"[kv]\npage_tokens = -16\n", {"t.ini:2:", "not a whole integer"}},
    {"[kv]\npage_tokens = 512\n", {"t.ini:2:", "out of range"}},
    {"[kv]\npage_tokens = 24\n", {"t.ini:2:", "not a power of two"}},
    {"[kv]\npages = 99999999999999999999999\n", {"t.ini:2:", "pages"}},
    {"[kv]\nmemory_fraction = 1.5\n", {"t.ini:2:", "out of range", "0.01..1"}},
    {"[kv]\nmemory_fraction = nan\n", {"t.ini:2:", "not a number"}},
    {"[refine]\nmax_steps = 17\n", {"t.ini:2:", "max_steps", "0..16"}},
    {"[model]\ndequantize = q8_0\n", {"t.ini:2:", "dequantize", "none"}},
    {"[scheduler]\nsampler_threads = 257\n",
     {"t.ini:2:", "sampler_threads", "0..256"}},
    {"[refine]\nconfidence_threshold = 0.5\n",
     {"t.ini:2:", "out of range", "-100..0"}},
    {"[refine]\nreview_template = review.txt\n",
     {"t.ini:2:", "review_template", "absolute"}},
    {"[log]\nlevel = loud\n",
     {"t.ini:2:", "level = 'loud'", "error|warn|info|debug|trace"}},
    {"[graphs]\nbuckets = 1,4,2\n",
     {"t.ini:2:", "entry 3 (2) not above", "strictly ascending"}},
    {"[graphs]\nbuckets = 1,x\n", {"t.ini:2:", "entry 2 'x'"}},
    {"[graphs]\nbuckets = 1,2,\n", {"t.ini:2:", "trailing comma"}},
    {"[graphs]\nbuckets = 0\n", {"t.ini:2:", "entry 1 '0'"}},
    {"[graphs]\nbuckets =\n", {"t.ini:2:", "empty"}},
    {"[graphs]\ncontext_spans = 8192,4096\n",
     {"t.ini:2:", "entry 2 (4096) not above", "strictly ascending"}},
    {"[graphs]\ncontext_spans = 0\n", {"t.ini:2:", "entry 1 '0'"}},
    {"[graphs]\nenabled = maybe\n", {"t.ini:2:", "true|false"}},
    {"[backend]\ndevice = gpu\n", {"t.ini:2:", "auto|cpu|cuda:N"}},
    {"[backend]\ndevice = cuda:64\n", {"t.ini:2:", "not a device"}},
    {"[ipc]\nsocket_mode = 0999\n", {"t.ini:2:", "not an octal integer"}},
    {"[ipc]\nsocket_mode = 01777\n", {"t.ini:2:", "out of range"}},
    {"[ipc]\nsocket = relative.sock\n", {"t.ini:2:", "not an absolute path"}},
    {"[ipc]\nsocket = /a/very/long/path/that/does/not/fit/into/sun_path/"
     "of/a/unix/socket/address/because/it/is/much/much/too/long.sock\n",
     {"t.ini:2:", "too long"}},
    {"[ipc]\nallowed_uids = 1,4294967295\n", {"t.ini:2:", "entry 2"}},
    {"[model]\nname = a;b\n", {"t.ini:2:", "contains ';'"}},
    {"[metrics]\nmode = ebpf\n", {"t.ini:2:", "mode = 'ebpf'", "auto|bpf|shm"}},
    {"[metrics]\nshm_path = o1.shm\n", {"t.ini:2:", "not an absolute path"}},
    {"[metrics]\nfile_mode = 01640\n", {"t.ini:2:", "out of range"}},
    {"[metrics]\nrunq = 2\n", {"t.ini:2:", "true|false"}},
    {"[sidecar]\nlisten = localhost\n", {"t.ini:2:", "not host:port"}},
    {"[sidecar]\nlisten = :80\n", {"t.ini:2:", "not host:port"}},
    {"[slo]\nsuccess_rate = 1.5\n", {"t.ini:2:", "out of range", "0..1"}},
    /* "auto" or a number in range: never a negative one (auto's value) */
    {"[scheduler]\nprefill_time_ratio = -1\n",
     {"t.ini:2:", "out of range", "auto or a number 0..16"}},
    {"[scheduler]\nprefill_time_ratio = Auto\n", {"t.ini:2:", "not a number"}},
    {"[scheduler]\nprefill_time_ratio = 17\n", {"t.ini:2:", "out of range"}},
    {"[scheduler]\nprefill_burst_ratio = 0\n", {"t.ini:2:", "out of range"}},
    {"[cuda]\nquant_pass_rows = 257\n", {"t.ini:2:", "out of range", "0..256"}},
    {"[cuda]\nattention_splits = 33\n", {"t.ini:2:", "out of range", "0..32"}},
    {"[slo]\nwindow_s = 0\n", {"t.ini:2:", "window_s", "1..86400"}},
    {"[slo]\np99_ttft_ms = -1\n", {"t.ini:2:", "p99_ttft_ms"}},
    {"[faults]\nenabled = maybe\n", {"t.ini:2:", "true|false"}},
    {"[kv]\npages = 1\npages = 2\n",
     {"t.ini:3:", "set twice", "first at line 2"}},
    {"[kv]\npages 1\n", {"t.ini:2:", "malformed line"}},
    {"[kv\npages = 1\n", {"t.ini:1:", "malformed line"}},
    {"pages = 1\n", {"t.ini:1:", "outside any [section]"}},
    {"[kv]\npages = 1\n  page_tokens = 8\n", {"t.ini:3:", "indented"}},
    {"[kv]\n; xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxx\n",
     {"t.ini:2:", "line longer than"}},
    /* 199 characters on the last line, with no newline: the same limit as
     * a line that has one (its dump would add the newline) */
    {"[kv]\n; "
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxx",
     {"t.ini:2:", "line longer than 198"}},
};

static void test_bad_inputs(void **state)
{
	struct o1_config d, c;
	char err[1024];

	(void)state;
	defaults(&d);
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *b = &bad_cases[i];
		int ret;

		c = d;
		err[0] = 0;
		ret = o1_config_load_string(&c, b->text, "t.ini", err,
					    sizeof(err));
		if (ret != -O1_E_CONFIG)
			fail_msg("case %zu: ret %d, message '%s'", i, ret, err);
		for (int j = 0; j < 3 && b->expect[j]; j++)
			if (!strstr(err, b->expect[j]))
				fail_msg("case %zu: '%s' not in '%s'", i,
					 b->expect[j], err);
		assert_memory_equal(&c, &d, sizeof(c));
	}
}

static void test_missing_file(void **state)
{
	struct o1_config c;
	char err[512] = "";

	(void)state;
	defaults(&c);
	assert_int_equal(
	    o1_config_load_file(&c, "/nonexistent/o1d.ini", err, sizeof(err)),
	    -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/o1d.ini: cannot open"));
}

static void test_set(void **state)
{
	struct o1_config d, c;
	char err[512];

	(void)state;
	defaults(&d);
	c = d;
	assert_int_equal(
	    o1_config_set(&c, "kv.page_tokens=64", err, sizeof(err)), 0);
	assert_int_equal(
	    o1_config_set(&c, " backend.device = cuda:1 ", err, sizeof(err)),
	    0);
	assert_int_equal(
	    o1_config_set(&c, "ipc.allowed_gids=5,6", err, sizeof(err)), 0);
	assert_int_equal(c.kv.page_tokens, 64);
	assert_int_equal(c.backend.device.index, 1);
	assert_int_equal(c.ipc.allowed_gids.n, 2);
	assert_int_equal(
	    o1_config_set(&c, "slo.success_rate=0.995", err, sizeof(err)), 0);
	assert_int_equal(
	    o1_config_set(&c, "slo.p99_itl_ms=80", err, sizeof(err)), 0);
	assert_int_equal(
	    o1_config_set(&c, "faults.enabled=true", err, sizeof(err)), 0);
	assert_true(c.slo.success_rate == 0.995);
	assert_int_equal(c.slo.p99_itl_ms, 80);
	assert_int_equal(o1_config_set(&c, "scheduler.prefill_time_ratio=0.25",
				       err, sizeof(err)),
			 0);
	assert_true(c.scheduler.prefill_time_ratio == 0.25);
	assert_int_equal(o1_config_set(&c, "scheduler.prefill_time_ratio=auto",
				       err, sizeof(err)),
			 0);
	assert_true(c.scheduler.prefill_time_ratio == O1_CONFIG_RATIO_AUTO);
	assert_int_equal(o1_config_set(&c, "scheduler.prefill_burst_ratio=1",
				       err, sizeof(err)),
			 0);
	assert_true(c.scheduler.prefill_burst_ratio == 1.0);
	assert_int_equal(o1_config_set(&c, "scheduler.prefill_burst_ratio=auto",
				       err, sizeof(err)),
			 0);
	assert_true(c.scheduler.prefill_burst_ratio == O1_CONFIG_RATIO_AUTO);
	assert_true(c.faults.enabled);
	assert_int_equal(d.slo.window_s, 60);
	assert_false(d.faults.enabled);
	c = d;
	assert_int_equal(o1_config_set(&c, "kv.page_tokens", err, sizeof(err)),
			 -O1_E_CONFIG);
	assert_non_null(strstr(err, "expected section.key=value"));
	assert_int_equal(o1_config_set(&c, "kvpages=1", err, sizeof(err)),
			 -O1_E_CONFIG);
	assert_int_equal(o1_config_set(&c, "kv.nope=1", err, sizeof(err)),
			 -O1_E_CONFIG);
	assert_non_null(strstr(err, "--set kv.nope=1: unknown key 'nope'"));
	assert_int_equal(
	    o1_config_set(&c, "kv.page_tokens=3", err, sizeof(err)),
	    -O1_E_CONFIG);
	assert_non_null(strstr(err, "not a power of two"));
	assert_memory_equal(&c, &d, sizeof(c));
}

static char *write_temp(const char *text)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/o1-test-config-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void test_parse_args(void **state)
{
	struct o1_config c;
	char err[512], *path = write_temp("[kv]\npage_tokens = 8\npages = 5\n");
	char set1[] = "--set", set1v[] = "kv.pages=7",
	     set2[] = "--set=log.level=debug";
	char prog[] = "o1d", pos[] = "positional", opt[] = "--other";
	char dashc[] = "-c", dd[] = "--", after[] = "--set";
	char *argv[] = {prog, set1, set1v, pos,	  dashc, path,
			opt,  set2, dd,	   after, NULL};
	int argc = 10;

	(void)state;
	defaults(&c);
	assert_int_equal(
	    o1_config_parse_args(&c, &argc, argv, err, sizeof(err)), 0);
	assert_int_equal(c.kv.page_tokens, 8); /* from the file */
	assert_int_equal(c.kv.pages, 7);       /* --set wins, though first */
	assert_int_equal(c.log.level, O1_LOG_DEBUG);
	assert_int_equal(argc, 5);
	assert_string_equal(argv[0], "o1d");
	assert_string_equal(argv[1], "positional");
	assert_string_equal(argv[2], "--other");
	assert_string_equal(argv[3], "--");
	assert_string_equal(argv[4], "--set");
	assert_null(argv[5]);
	unlink(path);
}

static void test_parse_args_errors(void **state)
{
	struct o1_config d, c;
	char err[512];
	char prog[] = "o1d", dashc[] = "-c", f1[] = "/nonexistent.ini";
	char f2[] = "b.ini", conf[] = "--config=a.ini", set[] = "--set";
	char bad[] = "kv.page_tokens=0";
	char *a1[] = {prog, dashc, NULL};
	char *a2[] = {prog, conf, dashc, f2, NULL};
	char *a3[] = {prog, dashc, f1, NULL};
	char *a4[] = {prog, set, NULL};
	char *a5[] = {prog, set, bad, NULL};
	int argc;

	(void)state;
	defaults(&d);
	c = d;
	argc = 2;
	assert_int_equal(o1_config_parse_args(&c, &argc, a1, err, sizeof(err)),
			 -O1_E_CONFIG);
	assert_non_null(strstr(err, "-c needs a file name"));
	argc = 4;
	assert_int_equal(o1_config_parse_args(&c, &argc, a2, err, sizeof(err)),
			 -O1_E_CONFIG);
	assert_non_null(strstr(err, "given twice"));
	argc = 3;
	assert_int_equal(o1_config_parse_args(&c, &argc, a3, err, sizeof(err)),
			 -ENOENT);
	argc = 2;
	assert_int_equal(o1_config_parse_args(&c, &argc, a4, err, sizeof(err)),
			 -O1_E_CONFIG);
	argc = 3;
	assert_int_equal(o1_config_parse_args(&c, &argc, a5, err, sizeof(err)),
			 -O1_E_CONFIG);
	assert_non_null(strstr(err, "page_tokens = '0'"));
	assert_int_equal(argc, 3);
	assert_string_equal(a5[2], "kv.page_tokens=0");
	assert_memory_equal(&c, &d, sizeof(c));
}

/* Loads TEXT as t.ini into the defaults; expects RET and, on an error,
 * WHAT in the message. */
static void load_expect(const char *text, int ret, const char *what,
			struct o1_config *c)
{
	struct o1_config d;
	char err[512] = "";

	defaults(c);
	d = *c;
	assert_int_equal(
	    o1_config_load_string(c, text, "t.ini", err, sizeof(err)), ret);
	if (ret) {
		if (!strstr(err, what))
			fail_msg("'%s' lacks '%s'", err, what);
		assert_memory_equal(c, &d, sizeof(d));
	}
}

static void test_tensor_parallel(void **state)
{
	struct o1_config c;
	uint32_t dev[O1_CONFIG_LIST_MAX];

	(void)state;
	defaults(&c);
	assert_int_equal(c.backend.tensor_parallel, 1);
	assert_int_equal(o1_config_cuda_devices(&c, dev), 1);
	assert_int_equal(dev[0], 0);
	load_expect("[backend]\ndevices = 0,1,2,3\ntensor_parallel = 4\n", 0,
		    NULL, &c);
	assert_int_equal(o1_config_cuda_devices(&c, dev), 4);
	assert_int_equal(dev[3], 3);
	load_expect("[backend]\ndevice = cuda:1\ndevices = 1, 3\n"
		    "tensor_parallel = 2\n",
		    0, NULL, &c);
	assert_int_equal(o1_config_cuda_devices(&c, dev), 2);
	assert_int_equal(dev[1], 3);
	/* the single-GPU form */
	load_expect("[backend]\ndevice = cuda:3\n", 0, NULL, &c);
	assert_int_equal(o1_config_cuda_devices(&c, dev), 1);
	assert_int_equal(dev[0], 3);
	/* the rules, at the line of the last key involved */
	load_expect("[backend]\ndevices = 0,1\n", -O1_E_CONFIG,
		    "t.ini:2: [backend] tensor_parallel = 1 but devices lists "
		    "2 GPUs",
		    &c);
	load_expect("[backend]\ntensor_parallel = 2\nthreads = 4\n"
		    "devices = 0,1,2\n",
		    -O1_E_CONFIG, "t.ini:4: [backend] tensor_parallel = 2", &c);
	load_expect("[backend]\ndevice = cpu\ndevices = 0,1\n"
		    "tensor_parallel = 2\n",
		    -O1_E_CONFIG,
		    "t.ini:4: [backend] tensor_parallel = 2 needs "
		    "the CUDA backend",
		    &c);
	load_expect("[backend]\ndevices = 1,2\ntensor_parallel = 2\n"
		    "device = cuda:0\n",
		    -O1_E_CONFIG,
		    "t.ini:4: [backend] device = cuda:0 but "
		    "devices starts with 1",
		    &c);
	load_expect("[backend]\ndevice = cuda:2\ndevices = 1\n", -O1_E_CONFIG,
		    "t.ini:3: [backend] device = cuda:2", &c);
	load_expect("[backend]\ndevices = 0,0\ntensor_parallel = 2\n",
		    -O1_E_CONFIG,
		    "t.ini:2: [backend] devices = '0,0': entry 2 "
		    "(0) given twice",
		    &c);
	load_expect("[backend]\ntensor_parallel = 9\n", -O1_E_CONFIG,
		    "t.ini:2: [backend] tensor_parallel = '9': out of range",
		    &c);
	load_expect("[backend]\ndevices = 64\n", -O1_E_CONFIG,
		    "not a whole number in range", &c);
}

/* Overrides are checked together: devices then tensor_parallel is fine;
 * one alone is not, and names itself. */
static void test_tensor_parallel_set(void **state)
{
	struct o1_config d, c;
	char err[512];
	char prog[] = "o1d", set[] = "--set", s1[] = "backend.devices=2,5",
	     s2[] = "backend.tensor_parallel=2", s3[] = "log.level=debug";
	char *a1[] = {prog, set, s1, set, s2, set, s3, NULL};
	char *a2[] = {prog, set, s1, set, s3, NULL};
	uint32_t dev[O1_CONFIG_LIST_MAX];
	int argc = 7;

	(void)state;
	defaults(&c);
	assert_int_equal(o1_config_parse_args(&c, &argc, a1, err, sizeof(err)),
			 0);
	assert_int_equal(o1_config_cuda_devices(&c, dev), 2);
	assert_int_equal(dev[0], 2);
	assert_int_equal(dev[1], 5);
	defaults(&c);
	d = c;
	argc = 5;
	assert_int_equal(o1_config_parse_args(&c, &argc, a2, err, sizeof(err)),
			 -O1_E_CONFIG);
	assert_non_null(strstr(err, "--set backend.devices=2,5: [backend] "
				    "tensor_parallel = 1 but devices lists 2"));
	assert_memory_equal(&c, &d, sizeof(c));
	assert_int_equal(
	    o1_config_set(&c, "backend.tensor_parallel=2", err, sizeof(err)),
	    -O1_E_CONFIG);
	assert_memory_equal(&c, &d, sizeof(c));
	assert_int_equal(
	    o1_config_set(&c, "backend.device=cuda:7", err, sizeof(err)), 0);
	assert_int_equal(o1_config_cuda_devices(&c, dev), 1);
	assert_int_equal(dev[0], 7);
}

static void test_dump_round_trip(void **state)
{
	static const char *const sets[] = {
	    "kv.memory_fraction=0.123456789",
	    "ipc.socket_mode=0640",
	    "graphs.buckets=2,4,1000",
	    "model.path=/m/x y.gguf",
	    "backend.device=cuda:2",
	    "ipc.admin_uids=0,1,2",
	    "graphs.enabled=no",
	    "model.dtype=f16",
	    "model.dequantize=bf16",
	    "ipc.arena_bytes=4294967296",
	    "sidecar.listen=[::1]:9000",
	    "scheduler.prefill_time_ratio=0.5",
	};
	struct o1_config c, back;
	char err[512], *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	defaults(&c);
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
		assert_int_equal(o1_config_set(&c, sets[i], err, sizeof(err)),
				 0);
	f = open_memstream(&text, &len);
	o1_config_dump(&c, f);
	fclose(f);
	assert_non_null(strstr(text, "[kv]\npage_tokens = 16\n"));
	assert_non_null(strstr(text, "socket_mode = 0640\n"));
	assert_non_null(strstr(text, "memory_fraction = 0.123456789\n"));
	assert_non_null(strstr(text, "prefill_time_ratio = 0.5\n"));
	defaults(&back);
	assert_int_equal(
	    o1_config_load_string(&back, text, "dump", err, sizeof(err)), 0);
	assert_memory_equal(&c, &back, sizeof(c));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_shipped_ini_equals_defaults),
	    cmocka_unit_test(test_shipped_ini_lists_every_key),
	    cmocka_unit_test(test_good_file),
	    cmocka_unit_test(test_bad_inputs),
	    cmocka_unit_test(test_missing_file),
	    cmocka_unit_test(test_set),
	    cmocka_unit_test(test_parse_args),
	    cmocka_unit_test(test_parse_args_errors),
	    cmocka_unit_test(test_tensor_parallel),
	    cmocka_unit_test(test_tensor_parallel_set),
	    cmocka_unit_test(test_dump_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
