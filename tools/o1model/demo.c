/* The demo model: bigram counts of a text written as transformer weights
 * (demo.h states the model exactly).
 *
 * Invariants: the same texts give the same bytes (counting is a pure
 * function of the text and the built-in vocabulary); every tensor's data
 * lies in one heap block owned by the model (freed by its unload hook),
 * 64-byte aligned; the count matrix is [context i][next j]. */
#include "demo.h"

#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_train.h"
#include "common/error.h"
#include "common/log.h"
#include "tokenizer/tokenizer.h"

#define DEMO_HEAD_DIM 8
#define DEMO_FFN      8
#define DEMO_CTX      4096
#define DEMO_EPS      1e-5f

struct text {
	char *buf;
	size_t len, cap;
};

struct counts {
	uint32_t n;    /* vocab size */
	double *c;     /* [n][n]: c[i * n + j] = count of (i, j) */
	uint8_t *in_s; /* [n]: token may be emitted */
	int32_t *ids;  /* scratch for one paragraph */
	size_t ids_cap;
};

static int text_append(struct text *t, const char *p, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		size_t cap = (t->len + n + 1) * 2;
		char *b = realloc(t->buf, cap);

		if (!b)
			return -ENOMEM;
		t->buf = b;
		t->cap = cap;
	}
	memcpy(t->buf + t->len, p, n);
	t->len += n;
	t->buf[t->len] = 0;
	return 0;
}

static int text_add_file(struct text *t, const char *path)
{
	char chunk[65536];
	FILE *f = fopen(path, "rb");
	size_t n;
	int err = 0;

	if (!f) {
		err = -errno;
		o1_err("demo text %s: %s", path, strerror(-err));
		return -EINVAL;
	}
	if (t->len)
		err = text_append(t, "\n\n", 2);
	while (!err && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		err = text_append(t, chunk, n);
	if (!err && ferror(f)) {
		o1_err("demo text %s: read error", path);
		err = -EIO;
	}
	fclose(f);
	return err;
}

/* README.md, then the .md files of docs/ in name order. */
static int text_add_default(struct text *t)
{
	glob_t g;
	int err;

	err = text_add_file(t, O1_SOURCE_DIR "/README.md");
	if (err)
		return err;
	if (glob(O1_SOURCE_DIR "/docs/*.md", 0, NULL, &g) != 0)
		return 0;
	for (size_t i = 0; i < g.gl_pathc && !err; i++)
		err = text_add_file(t, g.gl_pathv[i]);
	globfree(&g);
	return err;
}

/* Blanks (with spaces) Markdown table rows (lines starting with '|') and
 * fenced code blocks, fence lines included: the model learns prose. */
static void text_drop_tables_and_code(struct text *t)
{
	char *p = t->buf, *end = t->buf + t->len;
	bool fence = false;

	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *eol = nl ? nl : end;
		bool is_fence = eol - p >= 3 && memcmp(p, "```", 3) == 0;

		if (is_fence)
			fence = !fence;
		if (is_fence || fence || *p == '|')
			memset(p, ' ', (size_t)(eol - p));
		p = nl ? nl + 1 : end;
	}
}

static int text_read(const struct o1model_demo_opts *o, struct text *t)
{
	int err = 0;

	if (o->n_texts > O1MODEL_DEMO_MAX_TEXTS) {
		o1_err("demo: %u texts (max %u)", o->n_texts,
		       O1MODEL_DEMO_MAX_TEXTS);
		return -EINVAL;
	}
	if (o->n_texts == 0)
		err = text_add_default(t);
	for (uint32_t i = 0; i < o->n_texts && !err; i++)
		err = text_add_file(t, o->texts[i]);
	if (!err)
		text_drop_tables_and_code(t);
	return err;
}

static bool line_blank(const char *p, const char *end)
{
	while (p < end && *p != '\n') {
		if (*p != ' ' && *p != '\t' && *p != '\r')
			return false;
		p++;
	}
	return true;
}

static const char *line_next(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));

	return nl ? nl + 1 : end;
}

/* Finds the paragraph at or after *AT: [*START, *START + *LEN), without
 * its final newline. Returns false at the end of the text. */
static bool paragraph_next(const struct text *t, const char **at,
			   const char **start, size_t *len)
{
	const char *p = *at, *end = t->buf + t->len;

	while (p < end && line_blank(p, end))
		p = line_next(p, end);
	if (p == end)
		return false;
	*start = p;
	while (p < end && !line_blank(p, end))
		p = line_next(p, end);
	*len = (size_t)(p - *start);
	if (*len && (*start)[*len - 1] == '\n')
		(*len)--;
	*at = p;
	return true;
}

static int encode_paragraph(const struct o1_tokenizer *tok, struct counts *k,
			    const char *p, size_t len, size_t offset)
{
	int n = o1_tokenizer_encode(tok, p, len, 0, k->ids, k->ids_cap);

	if (n > (int)k->ids_cap) {
		int32_t *ids = realloc(k->ids, (size_t)n * sizeof(*ids));

		if (!ids)
			return -ENOMEM;
		k->ids = ids;
		k->ids_cap = (size_t)n;
		n = o1_tokenizer_encode(tok, p, len, 0, k->ids, k->ids_cap);
	}
	if (n < 0)
		o1_err("demo text: paragraph at byte %zu (%zu bytes): %s",
		       offset, len, o1_strerror(n));
	return n;
}

static void count_pair(struct counts *k, int32_t i, int32_t j)
{
	k->c[(size_t)i * k->n + (size_t)j] += 1;
	k->in_s[j] = 1;
}

/* Counts the stream BOS, paragraph, EOS, paragraph, EOS, ... of T. */
static int count_text(const struct o1_tokenizer *tok, const struct text *t,
		      struct counts *k, uint32_t *n_paragraphs)
{
	const char *at = t->buf, *start;
	int32_t prev = o1_tokenizer_bos(tok), eos = o1_tokenizer_eos(tok);
	size_t len;
	int n;

	*n_paragraphs = 0;
	while (paragraph_next(t, &at, &start, &len)) {
		n = encode_paragraph(tok, k, start, len,
				     (size_t)(start - t->buf));
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			count_pair(k, prev, k->ids[i]);
			prev = k->ids[i];
		}
		count_pair(k, prev, eos);
		prev = eos;
		(*n_paragraphs)++;
	}
	return 0;
}

/* Column I of the LM head: log P(. | i), O1MODEL_DEMO_NEVER outside S. */
static void head_column(const struct counts *k, uint32_t i, uint32_t n_s,
			float *head)
{
	const double *row = k->c + (size_t)i * k->n;
	double total = 0;

	for (uint32_t j = 0; j < k->n; j++)
		total += row[j];
	for (uint32_t j = 0; j < k->n; j++)
		head[(size_t)j * k->n + i] =
		    k->in_s[j] ? (float)log((row[j] + O1MODEL_DEMO_K) /
					    (total + O1MODEL_DEMO_K * n_s))
			       : O1MODEL_DEMO_NEVER;
}

static void fill_desc(struct o1_model_desc *d, const struct o1_vocab *v)
{
	d->arch = O1_ARCH_LLAMA;
	snprintf(d->name, sizeof(d->name), "o1 demo bigram");
	d->n_layers = 1;
	d->dim = v->n_tokens;
	d->n_heads = 1;
	d->n_kv_heads = 1;
	d->head_dim = DEMO_HEAD_DIM;
	d->ffn_dim = DEMO_FFN;
	d->vocab_size = v->n_tokens;
	d->max_context_tokens = DEMO_CTX;
	d->norm_eps = DEMO_EPS;
	d->rope.theta = 1e4f;
	d->rope.dim = DEMO_HEAD_DIM;
	d->bos_id = v->bos_id;
	d->eos_id = v->eos_id;
}

static void set_tensor(struct o1_tensor *t, enum o1_tensor_role role, int layer,
		       uint64_t rows, uint64_t cols)
{
	t->role = role;
	t->layer = layer;
	t->n_dims = rows ? 2 : 1;
	t->shape[0] = rows ? rows : cols;
	t->shape[1] = rows ? cols : 0;
}

/* The tensor list, in llama.cpp's order; returns the count. */
static uint32_t list_tensors(const struct o1_model_desc *d, struct o1_tensor *t)
{
	uint64_t n = d->dim, h = d->head_dim, f = d->ffn_dim;
	uint32_t i = 0;

	set_tensor(&t[i++], O1_T_TOKEN_EMBD, -1, n, n);
	set_tensor(&t[i++], O1_T_ATTN_NORM, 0, 0, n);
	set_tensor(&t[i++], O1_T_WQ, 0, h, n);
	set_tensor(&t[i++], O1_T_WK, 0, h, n);
	set_tensor(&t[i++], O1_T_WV, 0, h, n);
	set_tensor(&t[i++], O1_T_WO, 0, n, h);
	set_tensor(&t[i++], O1_T_FFN_NORM, 0, 0, n);
	set_tensor(&t[i++], O1_T_W_GATE, 0, f, n);
	set_tensor(&t[i++], O1_T_W_UP, 0, f, n);
	set_tensor(&t[i++], O1_T_W_DOWN, 0, n, f);
	set_tensor(&t[i++], O1_T_OUTPUT_NORM, -1, 0, n);
	set_tensor(&t[i++], O1_T_OUTPUT, -1, n, n);
	return i;
}

static void demo_unload(struct o1_model *m)
{
	free(m->source);
	m->source = NULL;
}

/* F32 values of T (VALS, scratch, large enough for any tensor). */
static void tensor_values(const struct o1_model *m, const struct counts *k,
			  uint32_t n_s, const struct o1_tensor *t, float *vals)
{
	uint64_t n = o1_tensor_elements(t), dim = m->desc.dim;

	memset(vals, 0, n * sizeof(float));
	if (t->role == O1_T_TOKEN_EMBD)
		for (uint64_t i = 0; i < dim; i++)
			vals[i * dim + i] = 1.0f;
	if (t->role == O1_T_OUTPUT_NORM)
		for (uint64_t i = 0; i < dim; i++)
			vals[i] = (float)sqrt(1.0 / (double)dim +
					      (double)m->desc.norm_eps);
	if (t->role == O1_T_OUTPUT)
		for (uint32_t i = 0; i < k->n; i++)
			head_column(k, i, n_s, vals);
}

/* Lays the tensors out in one block and fills them in DTYPE. */
static int fill_weights(struct o1_model *m, const struct counts *k,
			enum o1_dtype dtype)
{
	uint32_t esize = dtype == O1_DTYPE_F32 ? 4 : 2, n_s = 0;
	size_t total = 0, at = 0;
	float *vals;
	int err = 0;

	for (uint32_t j = 0; j < k->n; j++)
		n_s += k->in_s[j];
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		m->tensors[i].dtype = dtype;
		m->tensors[i].n_bytes =
		    o1_tensor_elements(&m->tensors[i]) * esize;
		total += (m->tensors[i].n_bytes + 63) & ~(size_t)63;
	}
	m->source = aligned_alloc(64, total);
	m->unload = demo_unload;
	vals = malloc((size_t)k->n * k->n * sizeof(float));
	if (!m->source || !vals) {
		free(vals);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < m->n_tensors && !err; i++) {
		struct o1_tensor *t = &m->tensors[i];

		t->data = (char *)m->source + at;
		at += (t->n_bytes + 63) & ~(size_t)63;
		tensor_values(m, k, n_s, t, vals);
		err = o1_dtype_from_f32(dtype, vals, (void *)t->data,
					o1_tensor_elements(t));
	}
	free(vals);
	return err;
}

static int counts_init(struct counts *k, uint32_t n)
{
	k->n = n;
	k->c = calloc((size_t)n * n, sizeof(*k->c));
	k->in_s = calloc(n, 1);
	k->ids_cap = 4096;
	k->ids = malloc(k->ids_cap * sizeof(*k->ids));
	return k->c && k->in_s && k->ids ? 0 : -ENOMEM;
}

static void counts_fini(struct counts *k)
{
	free(k->c);
	free(k->in_s);
	free(k->ids);
}

/* The bigram counts of text T in vocabulary V. */
static int count_texts(const struct text *t, struct o1_vocab *v,
		       struct counts *k)
{
	struct o1_tokenizer *tok = NULL;
	uint32_t n_par = 0;
	int err = o1_tokenizer_create(v, &tok);

	if (!err)
		err = counts_init(k, v->n_tokens);
	if (!err)
		err = count_text(tok, t, k, &n_par);
	if (!err && n_par == 0) {
		o1_err("demo: the text (%zu bytes) holds no paragraph", t->len);
		err = -EINVAL;
	}
	if (!err)
		o1_info("demo: %zu bytes of text, %u paragraphs, %u tokens",
			t->len, n_par, v->n_tokens);
	o1_tokenizer_destroy(tok);
	return err;
}

int o1model_demo_create(const struct o1model_demo_opts *o,
			struct o1_model **out)
{
	struct counts k = {0};
	struct text t = {0};
	struct o1_model *m;
	int err;

	if (o->dtype != O1_DTYPE_F32 && o->dtype != O1_DTYPE_F16 &&
	    o->dtype != O1_DTYPE_BF16) {
		o1_err("dtype %s: make writes f32, f16 or bf16",
		       o1_dtype_name(o->dtype));
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	snprintf(m->path, sizeof(m->path), "(demo bigram)");
	err = text_read(o, &t);
	if (!err)
		err = o1model_bpe_train(t.buf, t.len, O1MODEL_DEMO_MERGES, 1,
					&m->vocab);
	if (err)
		goto out_close;
	fill_desc(&m->desc, m->vocab);
	err = count_texts(&t, m->vocab, &k);
	m->tensors = calloc(12, sizeof(*m->tensors));
	if (!err && !m->tensors)
		err = -ENOMEM;
	if (err)
		goto out_close;
	m->n_tensors = list_tensors(&m->desc, m->tensors);
	err = fill_weights(m, &k, o->dtype);
	if (!err)
		err = o1_model_validate(m);
	if (err)
		goto out_close;
	counts_fini(&k);
	free(t.buf);
	*out = m;
	return 0;
out_close:
	counts_fini(&k);
	free(t.buf);
	o1_model_close(m);
	return err;
}
