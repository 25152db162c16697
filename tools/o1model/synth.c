/* Random models: preset shapes, xoshiro256** + Box-Muller values, and
 * weights staged in an unlinked scratch file mapped into memory, so even
 * the 8B preset needs disk, not RAM.
 *
 * Invariants: the same options give the same bytes (each tensor has its
 * own generator seeded from (seed, role, layer), so values do not depend
 * on the order tensors are filled, nor on the thread count: tensors are
 * filled in parallel, a tensor per task, largest first so the last ones
 * to finish are small); every tensor's data lies inside the one mapping,
 * 64-byte aligned. */
#include "synth.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/prng.h"
#include "kernels/threads.h"
#include "tiny_vocab.h"

enum { TIED_NO, TIED_YES, TIED_BY_ARCH };

struct preset {
	const char *name;
	enum o1_arch arch;
	uint32_t dim, layers, heads, kv_heads, head_dim, ffn, vocab, ctx;
	float eps, theta;
	int tied;
	enum o1_rope_scaling scaling;
	float factor, low, high;
	uint32_t original_ctx;
};

static const struct preset presets[] = {
    {.name = "tiny",
     .arch = O1_ARCH_LLAMA,
     .dim = 64,
     .layers = 2,
     .heads = 4,
     .kv_heads = 2,
     .head_dim = 16,
     .ffn = 128,
     .vocab = 0 /* the tokenizer's */,
     .ctx = 2048,
     .eps = 1e-5f,
     .theta = 1e4f,
     .tied = TIED_BY_ARCH},
    {.name = "qwen2.5-0.5b",
     .arch = O1_ARCH_QWEN2,
     .dim = 896,
     .layers = 24,
     .heads = 14,
     .kv_heads = 2,
     .head_dim = 64,
     .ffn = 4864,
     .vocab = 151936,
     .ctx = 32768,
     .eps = 1e-6f,
     .theta = 1e6f,
     .tied = TIED_YES},
    {.name = "llama3.2-1b",
     .arch = O1_ARCH_LLAMA,
     .dim = 2048,
     .layers = 16,
     .heads = 32,
     .kv_heads = 8,
     .head_dim = 64,
     .ffn = 8192,
     .vocab = 128256,
     .ctx = 131072,
     .eps = 1e-5f,
     .theta = 5e5f,
     .tied = TIED_YES,
     .scaling = O1_ROPE_SCALING_LLAMA3,
     .factor = 32,
     .low = 1,
     .high = 4,
     .original_ctx = 8192},
    {.name = "llama3-8b",
     .arch = O1_ARCH_LLAMA,
     .dim = 4096,
     .layers = 32,
     .heads = 32,
     .kv_heads = 8,
     .head_dim = 128,
     .ffn = 14336,
     .vocab = 128256,
     .ctx = 8192,
     .eps = 1e-5f,
     .theta = 5e5f,
     .tied = TIED_NO},
};
#define N_PRESETS (sizeof(presets) / sizeof(presets[0]))

/* The weights' backing store: an unlinked file mapped shared. */
struct scratch {
	int fd;
	void *map;
	size_t len;
};

struct rng {
	uint64_t s[4];
	double spare;
	bool has_spare;
};

static void rng_seed(struct rng *r, uint64_t seed, uint32_t role, int layer)
{
	uint64_t x = seed ^ ((uint64_t)role << 40) ^
		     ((uint64_t)(uint32_t)(layer + 1) << 8);

	o1_prng_seed(r->s, x);
	r->spare = 0;
	r->has_spare = false;
}

/* Standard normal by Box-Muller; u1 in (0, 1] keeps log finite. */
static double rng_normal(struct rng *r)
{
	double u1, u2, mag;

	if (r->has_spare) {
		r->has_spare = false;
		return r->spare;
	}
	u1 = ((o1_prng_next(r->s) >> 11) + 1) * 0x1.0p-53;
	u2 = o1_prng_uniform(r->s);
	mag = sqrt(-2.0 * log(u1));
	r->spare = mag * sin(2.0 * M_PI * u2);
	r->has_spare = true;
	return mag * cos(2.0 * M_PI * u2);
}

static const struct preset *preset_find(const char *name)
{
	for (size_t i = 0; i < N_PRESETS; i++)
		if (strcmp(presets[i].name, name) == 0)
			return &presets[i];
	return NULL;
}

static void fill_desc(const struct preset *p,
		      const struct o1model_synth_opts *o,
		      struct o1_model_desc *d)
{
	d->arch = o->arch_given ? o->arch : p->arch;
	snprintf(d->name, sizeof(d->name), "o1 random %s %s", p->name,
		 o1_arch_name(d->arch));
	d->n_layers = o->layers ? o->layers : p->layers;
	d->dim = p->dim;
	d->n_heads = p->heads;
	d->n_kv_heads = p->kv_heads;
	d->head_dim = p->head_dim;
	d->ffn_dim = p->ffn;
	d->vocab_size = o->vocab ? o->vocab : p->vocab;
	d->max_context_tokens = o->ctx ? o->ctx : p->ctx;
	d->norm_eps = p->eps;
	d->tied_embeddings = p->tied == TIED_BY_ARCH ? d->arch == O1_ARCH_QWEN2
						     : p->tied == TIED_YES;
	d->qkv_bias = d->arch == O1_ARCH_QWEN2;
	d->rope.theta = p->theta;
	d->rope.dim = p->head_dim;
	d->rope.scaling = p->scaling;
	d->rope.factor = p->factor;
	d->rope.low_freq_factor = p->low;
	d->rope.high_freq_factor = p->high;
	d->rope.original_max_positions = p->original_ctx;
}

/* Appends ROLE of LAYER to T (when T is not NULL) and counts it in *N.
 * Every role listed has a fixed shape, so the shape lookup cannot fail. */
static void add_tensor(const struct o1_model_desc *d, struct o1_tensor *t,
		       uint32_t *n, enum o1_tensor_role role, int layer)
{
	uint64_t rows, cols;

	if (t) {
		o1_model_expected_shape(d, role, &rows, &cols);
		t[*n].role = role;
		t[*n].layer = layer;
		t[*n].n_dims = rows ? 2 : 1;
		t[*n].shape[0] = rows ? rows : cols;
		t[*n].shape[1] = rows ? cols : 0;
	}
	(*n)++;
}

/* The tensor list of D, in llama.cpp's order, shapes only; returns the
 * count (T may be NULL to count). */
static uint32_t list_tensors(const struct o1_model_desc *d, struct o1_tensor *t)
{
	static const enum o1_tensor_role layer_roles[] = {
	    O1_T_ATTN_NORM, O1_T_WQ,	 O1_T_WK,   O1_T_WV,
	    O1_T_BQ,	    O1_T_BK,	 O1_T_BV,   O1_T_WO,
	    O1_T_FFN_NORM,  O1_T_W_GATE, O1_T_W_UP, O1_T_W_DOWN,
	};
	const size_t n_roles = sizeof(layer_roles) / sizeof(layer_roles[0]);
	uint32_t n = 0;

	add_tensor(d, t, &n, O1_T_TOKEN_EMBD, -1);
	for (int l = 0; l < (int)d->n_layers; l++)
		for (size_t i = 0; i < n_roles; i++) {
			enum o1_tensor_role r = layer_roles[i];

			if (d->qkv_bias ||
			    (r != O1_T_BQ && r != O1_T_BK && r != O1_T_BV))
				add_tensor(d, t, &n, r, l);
		}
	add_tensor(d, t, &n, O1_T_OUTPUT_NORM, -1);
	if (!d->tied_embeddings)
		add_tensor(d, t, &n, O1_T_OUTPUT, -1);
	return n;
}

static int scratch_open(const char *dir, size_t len, struct scratch *s)
{
	char path[4096];
	int err;

	s->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (s->fd < 0) {
		snprintf(path, sizeof(path), "%s/.o1model-XXXXXX", dir);
		s->fd = mkstemp(path);
		if (s->fd >= 0)
			unlink(path);
	}
	if (s->fd < 0) {
		err = -errno;
		o1_err("scratch file in %s: %s", dir, strerror(-err));
		return err;
	}
	if (ftruncate(s->fd, (off_t)len) != 0) {
		err = -errno;
		o1_err("scratch file of %zu bytes in %s: %s", len, dir,
		       strerror(-err));
		goto out_close;
	}
	s->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->map == MAP_FAILED) {
		err = -errno;
		o1_err("mmap %zu bytes: %s", len, strerror(-err));
		goto out_close;
	}
	s->len = len;
	return 0;
out_close:
	close(s->fd);
	return err;
}

static void synth_unload(struct o1_model *m)
{
	struct scratch *s = m->source;

	if (!s)
		return;
	munmap(s->map, s->len);
	close(s->fd);
	free(s);
	m->source = NULL;
}

static bool is_norm(enum o1_tensor_role r)
{
	return r == O1_T_ATTN_NORM || r == O1_T_FFN_NORM ||
	       r == O1_T_OUTPUT_NORM;
}

/* Fills T's data with its values, converted to T's dtype in chunks. */
static int fill_tensor(const struct o1_tensor *t, uint64_t seed)
{
	enum { CHUNK = 65536 };
	float buf[CHUNK];
	uint64_t n = o1_tensor_elements(t), done = 0;
	uint32_t esize = t->dtype == O1_DTYPE_F32 ? 4 : 2;
	double base = is_norm(t->role) ? 1.0 : 0.0;
	struct rng r;
	int err;

	rng_seed(&r, seed, t->role, t->layer);
	while (done < n) {
		uint64_t k = n - done < CHUNK ? n - done : CHUNK;

		for (uint64_t i = 0; i < k; i++)
			buf[i] = (float)(base + 0.02 * rng_normal(&r));
		err = o1_dtype_from_f32(t->dtype, buf,
					(char *)t->data + done * esize, k);
		if (err)
			return err;
		done += k;
	}
	return 0;
}

struct fill_args {
	const struct o1_model *m;
	const uint32_t *order; /* tensor indices, largest first */
	uint64_t seed;
	_Atomic int err;
};

static void fill_task(void *arg, uint32_t task, uint32_t worker)
{
	struct fill_args *a = arg;
	int err = fill_tensor(&a->m->tensors[a->order[task]], a->seed);

	(void)worker;
	if (err)
		a->err = err;
}

/* Larger n_bytes first; equal ones by index (any order would do: each
 * tensor's bytes are its own). M is the model. */
static int by_size(const void *x, const void *y, void *m)
{
	const struct o1_tensor *t = ((const struct o1_model *)m)->tensors;
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	uint64_t a = t[i].n_bytes, b = t[j].n_bytes;

	return a != b ? (a < b ? 1 : -1) : (i > j) - (i < j);
}

/* Fills every tensor on N_THREADS threads (0: online CPUs). */
static int fill_all(struct o1_model *m, uint64_t seed, uint32_t n_threads)
{
	struct fill_args a = {m, NULL, seed, 0};
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t *order = malloc(m->n_tensors * sizeof(*order));
	struct o1_threads *tp = NULL;
	int err;

	if (!n_threads)
		n_threads = cpus > 1 ? (uint32_t)(cpus < 256 ? cpus : 256) : 1;
	err = order ? o1_threads_create(n_threads, &tp) : -ENOMEM;
	if (err) {
		free(order);
		return err;
	}
	for (uint32_t i = 0; i < m->n_tensors; i++)
		order[i] = i;
	qsort_r(order, m->n_tensors, sizeof(*order), by_size, m);
	a.order = order;
	o1_threads_run(tp, m->n_tensors, fill_task, &a);
	o1_threads_destroy(tp);
	free(order);
	return a.err;
}

/* Lays the tensors out in one scratch mapping and fills them. */
static int fill_weights(struct o1_model *m, const struct o1model_synth_opts *o)
{
	struct scratch *s = calloc(1, sizeof(*s));
	uint32_t esize = o->dtype == O1_DTYPE_F32 ? 4 : 2;
	size_t total = 0;
	int err;

	if (!s)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		m->tensors[i].dtype = o->dtype;
		m->tensors[i].n_bytes =
		    o1_tensor_elements(&m->tensors[i]) * esize;
		total += (m->tensors[i].n_bytes + 63) & ~(size_t)63;
	}
	err = scratch_open(o->scratch_dir, total, s);
	if (err) {
		free(s);
		return err;
	}
	m->source = s;
	m->unload = synth_unload;
	total = 0;
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		m->tensors[i].data = (char *)s->map + total;
		total += (m->tensors[i].n_bytes + 63) & ~(size_t)63;
	}
	return fill_all(m, o->seed, o->n_threads);
}

static int load_tokenizer(const char *path, struct o1_vocab **out)
{
	char json[4096];
	struct stat st;
	size_t len = strlen(path);

	if (len > 5 && strcmp(path + len - 5, ".gguf") == 0)
		return o1_vocab_load_gguf(path, out);
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(json, sizeof(json), "%s/tokenizer.json", path);
		return o1_vocab_load_tokenizer_json(json, out);
	}
	return o1_vocab_load_tokenizer_json(path, out);
}

/* The vocabulary, padded to the model's size (tiny: the tokenizer's). */
static int make_vocab(const struct o1model_synth_opts *o,
		      struct o1_model_desc *d, struct o1_vocab **out)
{
	struct o1_vocab *v;
	int err = o->tokenizer ? load_tokenizer(o->tokenizer, &v)
			       : o1model_tiny_vocab_build(&v);

	if (err)
		return err;
	if (!o->tokenizer)
		v->add_bos = d->arch != O1_ARCH_QWEN2;
	if (d->vocab_size == 0)
		d->vocab_size = v->n_tokens;
	if (d->vocab_size < v->n_tokens) {
		o1_err(
		    "vocab size %u is smaller than the tokenizer's %u tokens",
		    d->vocab_size, v->n_tokens);
		o1_vocab_destroy(v);
		return -EINVAL;
	}
	err = o1model_vocab_pad(v, d->vocab_size);
	if (err) {
		o1_vocab_destroy(v);
		return err;
	}
	d->bos_id = v->bos_id;
	d->eos_id = v->eos_id;
	*out = v;
	return 0;
}

static int check_opts(const struct o1model_synth_opts *o,
		      const struct preset **p)
{
	*p = preset_find(o->preset ? o->preset : "");
	if (!*p) {
		o1_err("unknown preset '%s' (tiny|qwen2.5-0.5b|llama3.2-1b|"
		       "llama3-8b)",
		       o->preset ? o->preset : "");
		return -EINVAL;
	}
	if (o->layers > 1024 || o->vocab > (1u << 24) || o->ctx > (1u << 24)) {
		o1_err("layers %u (max 1024), vocab %u or ctx %u (max %u) "
		       "out of range",
		       o->layers, o->vocab, o->ctx, 1u << 24);
		return -EINVAL;
	}
	if (o->dtype != O1_DTYPE_F32 && o->dtype != O1_DTYPE_F16 &&
	    o->dtype != O1_DTYPE_BF16) {
		o1_err("dtype %s: make writes f32, f16 or bf16",
		       o1_dtype_name(o->dtype));
		return -EINVAL;
	}
	return 0;
}

int o1model_synth_create(const struct o1model_synth_opts *o,
			 struct o1_model **out)
{
	const struct preset *p;
	struct o1_model *m;
	int err = check_opts(o, &p);

	if (err)
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	fill_desc(p, o, &m->desc);
	snprintf(m->path, sizeof(m->path), "(random %s)", p->name);
	err = make_vocab(o, &m->desc, &m->vocab);
	if (err)
		goto out_close;
	m->n_tensors = list_tensors(&m->desc, NULL);
	m->tensors = calloc(m->n_tensors, sizeof(*m->tensors));
	if (!m->tensors) {
		err = -ENOMEM;
		goto out_close;
	}
	list_tensors(&m->desc, m->tensors);
	err = fill_weights(m, o);
	if (!err)
		err = o1_model_validate(m);
	if (err)
		goto out_close;
	*out = m;
	return 0;
out_close:
	o1_model_close(m);
	return err;
}
