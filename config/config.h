/* o1d configuration: one struct o1_config filled from built-in defaults, an
 * INI file (config/o1d.ini documents every key) and --set overrides.
 *
 * Invariants:
 * - A struct o1_config that any function here returned 0 for is fully
 *   valid: every field is within the range its key allows, lists hold at
 *   most O1_CONFIG_LIST_MAX entries, strings are NUL-terminated, and the
 *   rules between keys hold (backend.tensor_parallel equals the number of
 *   backend.devices; see o1_config_cuda_devices). Those rules are checked
 *   on the whole of one file, and on all --set overrides together, so an
 *   override may change several related keys one after the other.
 * - A failed load or set leaves the struct exactly as it was.
 * - Nothing is heap-allocated: the struct may be copied and needs no fini.
 * - Keys and their types, ranges and defaults live in one table in
 *   config.c, which drives parsing, validation, defaults and the dump.
 */
#ifndef O1_CONFIG_H
#define O1_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/log.h"

#define O1_CONFIG_LIST_MAX   64
#define O1_CONFIG_PATH_MAX   4096
#define O1_CONFIG_NAME_MAX   128
#define O1_CONFIG_SOCKET_MAX 108 /* sizeof(sockaddr_un.sun_path) */
/* A ratio given as "auto" (scheduler.prefill_time_ratio). */
#define O1_CONFIG_RATIO_AUTO (-1.0)

struct o1_config_list {
	uint32_t n;
	uint32_t v[O1_CONFIG_LIST_MAX];
};

enum o1_device_kind {
	O1_DEVICE_AUTO, /* the first CUDA device when there is one, else cpu */
	O1_DEVICE_CPU,
	O1_DEVICE_CUDA,
};

struct o1_config_device {
	enum o1_device_kind kind;
	uint32_t index; /* CUDA ordinal; 0 for cpu */
};

enum o1_config_sample_mode {
	O1_CONFIG_SAMPLE_AUTO, /* on for backends built to sample on the
				* device (cuda), off for cpu */
	O1_CONFIG_SAMPLE_ON,
	O1_CONFIG_SAMPLE_OFF,
};

/* model.dequantize: what becomes of weights in a GGUF block format. */
enum o1_config_dequantize {
	O1_CONFIG_DEQUANTIZE_NONE, /* kept in blocks, block products */
	O1_CONFIG_DEQUANTIZE_BF16, /* to the backend's float type at load */
};

/* cuda.quant_dot: how the CUDA backend's decode products multiply
 * weights in a GGUF block format. */
enum o1_config_quant_dot {
	O1_CONFIG_QUANT_DOT_INT8, /* inputs quantized per 32, __dp4a */
	O1_CONFIG_QUANT_DOT_F32,  /* weights dequantized, f32 arithmetic */
};

enum o1_config_dtype {
	O1_CONFIG_DTYPE_AUTO,
	O1_CONFIG_DTYPE_F32,
	O1_CONFIG_DTYPE_F16,
	O1_CONFIG_DTYPE_BF16,
};

enum o1_config_metrics_mode {
	O1_CONFIG_METRICS_AUTO, /* pinned maps, else the shm file */
	O1_CONFIG_METRICS_BPF,
	O1_CONFIG_METRICS_SHM,
};

struct o1_config {
	struct {
		uint32_t drain_timeout_ms;
	} daemon;
	struct {
		char path[O1_CONFIG_PATH_MAX]; /* "" = none given */
		char name[O1_CONFIG_NAME_MAX]; /* "" = from the model file */
		uint32_t max_context_tokens;   /* 0 = the model's own */
		enum o1_config_dtype dtype;    /* working weight type */
		enum o1_config_dequantize dequantize;
		/* a .jinja file rendering chats instead of the model's own
		 * template; "" = the model's */
		char chat_template[O1_CONFIG_PATH_MAX];
	} model;
	struct {
		struct o1_config_device device;
		uint32_t threads;	       /* 0 = online CPUs */
		struct o1_config_list devices; /* CUDA ordinals, distinct */
		uint32_t tensor_parallel;      /* = devices.n */
		enum o1_config_sample_mode sample_in_backend;
		uint32_t sample_penalty_entries; /* per step; 0 = derived */
	} backend;
	struct {
		uint32_t page_tokens;
		uint32_t pages; /* 0 = derive from memory_fraction */
		double memory_fraction;
	} kv;
	struct {
		uint32_t max_batch_tokens;
		uint32_t max_running;
		uint32_t prefill_chunk_tokens; /* beside decode rows */
		uint32_t prefill_tokens_per_decode; /* ... or this x rows */
		/* > 0: prefill beside decode rows costs at most this x the
		 * decode step's time (learnt); the two above cap it;
		 * O1_CONFIG_RATIO_AUTO: o1d picks (main.c: time_ratio) */
		double prefill_time_ratio;
		double prefill_whole_ratio;
		/* a burst's chunks; O1_CONFIG_RATIO_AUTO: the whole ratio */
		double prefill_burst_ratio;
		uint32_t sampler_threads; /* 0 = min(online CPUs, 8) */
		uint32_t max_running_per_client; /* 0 = fair share only */
		uint32_t stall_timeout_ms;	  /* 0 = never */
	} scheduler;
	struct {
		uint32_t max_steps;	     /* refine_steps bound; 0 = off */
		double confidence_threshold; /* mean logprob that ends it */
		char review_template[O1_CONFIG_PATH_MAX]; /* "" = built-in */
	} refine;
	struct {
		uint32_t max_bytes;	/* grammar bytes a request may carry */
		uint32_t cache_entries; /* compiled grammars kept */
		uint32_t cache_mb;	/* their memory, MiB */
		uint32_t threads;	/* compile threads */
	} grammar;
	struct {
		bool enabled;
		struct o1_config_list buckets; /* batch sizes, ascending */
		/* context lengths, ascending; empty: the backend's */
		struct o1_config_list context_spans;
	} graphs;
	struct {
		bool autotune;	      /* time the products' setups at load */
		uint32_t autotune_ms; /* load time it may take */
		enum o1_config_quant_dot quant_dot;
		uint32_t quant_pass_rows; /* block products in passes up to */
		uint32_t quant_i8_rows;	  /* int8 tensor-core products up to */
		uint32_t quant_wgmma_rows; /* wgmma block products up to */
		uint32_t attention_splits; /* decode attention on tensor cores:
					    * splits at most (0: its pick) */
		bool faster_row_counts; /* a product's row count measured
					 * slower than a larger one runs at
					 * that one */
	} cuda;
	struct {
		char socket[O1_CONFIG_SOCKET_MAX];
		uint32_t socket_mode; /* permission bits, e.g. 0660 */
		struct o1_config_list allowed_uids;
		struct o1_config_list allowed_gids;
		struct o1_config_list admin_uids;
		uint32_t spin_us;
		uint32_t front_threads; /* 0 = auto: one per 8 cores, 1..4 */
		uint32_t max_clients;
		uint32_t ring_entries;
		uint32_t max_inflight;
		uint32_t max_half_open;	      /* connections before hello */
		uint32_t max_clients_per_uid; /* 0 = no cap */
		uint32_t violation_decay_s;   /* one violation forgiven per */
		uint64_t arena_bytes;
		uint32_t max_prompt_tokens;
		uint32_t device_outputs;     /* CUDA IPC areas; 0 = off */
		uint32_t device_output_rows; /* logits rows per area */
	} ipc;
	struct {
		bool enabled;
		char bpf_dir[O1_CONFIG_PATH_MAX];
		char shm_path[O1_CONFIG_PATH_MAX]; /* "": from ipc.socket */
		char gid[O1_CONFIG_NAME_MAX];	   /* "": o1d's own group */
		enum o1_config_metrics_mode mode;
		uint32_t file_mode; /* pins and file, e.g. 0640 */
		bool unpin_on_exit;
		bool runq; /* run-queue delay BPF program */
	} metrics;
	struct {
		enum o1_log_level level;
		uint32_t requests; /* info line for 1 of N finished requests;
				    * 0: none */
	} log;
	struct {
		char listen[O1_CONFIG_NAME_MAX]; /* host:port */
		char daemon_socket[O1_CONFIG_SOCKET_MAX]; /* "": ipc.socket */
		uint32_t max_body_bytes;
		uint32_t max_concurrent; /* generations at once; more: 429 */
		uint32_t request_timeout_ms; /* whole request; then cancelled */
		uint32_t idle_timeout_s;     /* idle HTTP connection */
		uint32_t drain_delay_ms;   /* SIGTERM: still accepting */
		uint32_t drain_timeout_ms; /* then: for requests in flight */
		uint32_t read_timeout_ms; /* a request's head and body */
		uint32_t max_connections_per_address; /* 0: max_concurrent + 8 */
	} sidecar;
	struct {
		double success_rate;	    /* finished requests that succeed */
		uint32_t p99_ttft_ms;	    /* 0: no objective */
		uint32_t p99_itl_ms;	    /* 0: no objective */
		uint32_t p99_queue_wait_ms; /* 0: no objective */
		uint32_t window_s;	    /* o1ctl slo's default window */
	} slo;
	struct {
		bool enabled; /* o1ctl inject is refused unless set */
	} faults;
};

/* Fills C with the built-in defaults (those config/o1d.ini shows). */
int o1_config_init_defaults(struct o1_config *c);

/* Applies the INI file PATH over C. On error returns -errno (cannot read)
 * or -O1_E_CONFIG, writes "PATH:LINE: what is wrong; allowed: ..." into
 * ERR (ERR_LEN bytes; with ERR_LEN 0 it is logged instead) and
 * leaves C unchanged. */
int o1_config_load_file(struct o1_config *c, const char *path, char *err,
			size_t err_len);

/* Same, for INI text held in memory; NAME stands for the file in messages. */
int o1_config_load_string(struct o1_config *c, const char *text,
			  const char *name, char *err, size_t err_len);

/* Applies one "section.key=value" assignment over C (the rules between
 * keys must hold after it alone). */
int o1_config_set(struct o1_config *c, const char *assignment, char *err,
		  size_t err_len);

/* Handles the options every o1d binary shares: "-c FILE" (or --config
 * FILE, --config=FILE) once, and repeatable "--set section.key=value"
 * (or --set=...). The file is applied first, then the overrides in order,
 * wherever they stand on the command line. The options are removed from
 * ARGV (argv[0] and everything else keep their order; "--" ends the scan)
 * and *ARGC is updated. C should hold the defaults on entry. */
int o1_config_parse_args(struct o1_config *c, int *argc, char **argv, char *err,
			 size_t err_len);

/* Writes the effective configuration as INI text that loads back into an
 * identical struct. */
void o1_config_dump(const struct o1_config *c, FILE *f);

/* The CUDA devices the backend drives, one per tensor-parallel rank, into
 * OUT (O1_CONFIG_LIST_MAX entries); returns how many. backend.devices,
 * except that backend.device = cuda:N with backend.devices left at "0"
 * and tensor_parallel 1 means device N (the single-GPU form). */
uint32_t o1_config_cuda_devices(const struct o1_config *c, uint32_t *out);

/* Names used in dumps and messages. */
const char *o1_config_device_name(const struct o1_config_device *d, char *buf,
				  size_t len);

#endif
