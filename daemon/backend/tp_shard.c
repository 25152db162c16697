/* Tensor-parallel sharding plan and the rank's model (tp_shard.h).
 * Invariant of a shard model: its tensors are in the order of the whole
 * model's, each the whole model's tensor cut to o1_tp_shard_slice(), and
 * its description differs only in n_heads, n_kv_heads and ffn_dim, so
 * o1_model_validate() accepts it whenever it accepts the whole model. */
#include "tp_shard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

static int split_fail(const char *what, uint32_t n, uint32_t size)
{
	o1_err("tensor parallel: %s %u cannot be split over %u GPUs", what, n,
	       size);
	return -O1_E_UNSUPPORTED;
}

static int check_split(const struct o1_model_desc *d, uint32_t size,
		       uint32_t align)
{
	uint64_t q_cols = (uint64_t)d->n_heads / size * d->head_dim;

	if (!d->n_kv_heads || d->n_heads % d->n_kv_heads)
		return split_fail("query heads", d->n_heads, size);
	if (d->n_heads % size)
		return split_fail("query heads", d->n_heads, size);
	if (d->n_kv_heads % size) {
		o1_err("tensor parallel: kv heads %u cannot be split over %u "
		       "GPUs (each GPU holds whole kv heads; replicating kv "
		       "heads is not supported)",
		       d->n_kv_heads, size);
		return -O1_E_UNSUPPORTED;
	}
	if (d->ffn_dim % size)
		return split_fail("FFN columns", d->ffn_dim, size);
	if ((d->ffn_dim / size) % align || q_cols % align) {
		o1_err("tensor parallel: over %u GPUs each holds %u FFN "
		       "columns and %llu query columns; both must be "
		       "multiples of %u (the decode kernels' alignment)",
		       size, d->ffn_dim / size, (unsigned long long)q_cols,
		       align);
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

int o1_tp_shard_plan(const struct o1_model_desc *d, uint32_t rank,
		     uint32_t size, uint32_t align, struct o1_tp_shard *out)
{
	int err;

	if (!size || size > O1_TP_MAX_RANKS || rank >= size || !align) {
		o1_err("tensor parallel: rank %u of %u (at most %u), alignment "
		       "%u",
		       rank, size, O1_TP_MAX_RANKS, align);
		return -EINVAL;
	}
	err = check_split(d, size, align);
	if (err)
		return err;
	out->rank = rank;
	out->size = size;
	out->n_q_heads = d->n_heads / size;
	out->q_head0 = rank * out->n_q_heads;
	out->n_kv_heads = d->n_kv_heads / size;
	out->kv_head0 = rank * out->n_kv_heads;
	out->n_ffn = d->ffn_dim / size;
	out->ffn0 = rank * out->n_ffn;
	return 0;
}

/* Rows [FIRST, FIRST + N) of a matrix, or elements of a vector. */
static void take_rows(const struct o1_tensor *t, uint64_t first, uint64_t n,
		      struct o1_tp_slice *out)
{
	out->split = true;
	if (t->n_dims == 1) {
		out->col0 = first;
		out->n_cols = n;
	} else {
		out->row0 = first;
		out->n_rows = n;
	}
}

void o1_tp_shard_slice(const struct o1_tp_shard *s,
		       const struct o1_model_desc *d, const struct o1_tensor *t,
		       struct o1_tp_slice *out)
{
	uint64_t hd = d->head_dim;

	*out = (struct o1_tp_slice){0, t->n_dims == 1 ? 1 : t->shape[0], 0,
				    t->shape[t->n_dims - 1], false};
	switch (t->role) {
	case O1_T_WQ:
	case O1_T_BQ:
		take_rows(t, s->q_head0 * hd, s->n_q_heads * hd, out);
		break;
	case O1_T_WK:
	case O1_T_WV:
	case O1_T_BK:
	case O1_T_BV:
		take_rows(t, s->kv_head0 * hd, s->n_kv_heads * hd, out);
		break;
	case O1_T_W_GATE:
	case O1_T_W_UP:
		take_rows(t, s->ffn0, s->n_ffn, out);
		break;
	case O1_T_WO:
		out->split = true;
		out->col0 = s->q_head0 * hd;
		out->n_cols = s->n_q_heads * hd;
		break;
	case O1_T_W_DOWN:
		out->split = true;
		out->col0 = s->ffn0;
		out->n_cols = s->n_ffn;
		break;
	default:
		break;
	}
}

uint64_t o1_tp_shard_elements(const struct o1_model *m,
			      const struct o1_tp_shard *s)
{
	struct o1_tp_slice sl;
	uint64_t n = 0;

	for (uint32_t i = 0; i < m->n_tensors; i++) {
		o1_tp_shard_slice(s, &m->desc, &m->tensors[i], &sl);
		n += sl.n_rows * sl.n_cols;
	}
	return n;
}

/* Bytes of one row of a slice's columns in T's dtype, and the byte offset
 * of column COL0 in a row; -O1_E_SHAPE when either is not whole blocks. */
static int col_bytes(const struct o1_tensor *t, const struct o1_tp_slice *sl,
		     uint64_t *off, uint64_t *bytes)
{
	int err = o1_dtype_row_bytes(t->dtype, sl->col0, off);

	return err ? err : o1_dtype_row_bytes(t->dtype, sl->n_cols, bytes);
}

/* Is the slice a contiguous range of T's bytes (whole rows, or a vector's
 * elements in whole blocks)? */
static bool contiguous(const struct o1_tensor *t, const struct o1_tp_slice *sl)
{
	uint64_t off, bytes;

	if (t->n_dims == 1)
		return col_bytes(t, sl, &off, &bytes) == 0;
	return sl->col0 == 0 && sl->n_cols == t->shape[t->n_dims - 1];
}

/* Bytes a gathered slice takes: in T's dtype when its columns are whole
 * blocks, else f32. */
static uint64_t gathered_bytes(const struct o1_tensor *t,
			       const struct o1_tp_slice *sl)
{
	uint64_t off, bytes;

	if (col_bytes(t, sl, &off, &bytes) == 0)
		return bytes * sl->n_rows;
	return sl->n_cols * sl->n_rows * sizeof(float);
}

/* The slice's tensor header: shape and byte count for DTYPE. */
static void cut_header(struct o1_tensor *dst, const struct o1_tp_slice *sl,
		       enum o1_dtype dtype, uint64_t n_bytes)
{
	dst->dtype = dtype;
	if (dst->n_dims == 1) {
		dst->shape[0] = sl->n_cols;
	} else {
		dst->shape[0] = sl->n_rows;
		dst->shape[1] = sl->n_cols;
	}
	dst->n_bytes = n_bytes;
}

/* Points DST at the contiguous slice of T's data. */
static void cut_view(struct o1_tensor *dst, const struct o1_tensor *t,
		     const struct o1_tp_slice *sl)
{
	uint64_t row_bytes = 0, off = 0, bytes = 0;
	uint64_t cols = t->shape[t->n_dims - 1];

	if (t->n_dims == 1) {
		col_bytes(t, sl, &off, &bytes);
	} else {
		o1_dtype_row_bytes(t->dtype, cols, &row_bytes);
		off = sl->row0 * row_bytes;
		bytes = sl->n_rows * row_bytes;
	}
	cut_header(dst, sl, t->dtype, bytes);
	dst->data = (const char *)t->data + off;
}

/* Gathers the slice's columns of every row of T (a matrix whose rows are
 * not permuted: O or down) into BUF. */
static int cut_gather(struct o1_tensor *dst, const struct o1_tensor *t,
		      const struct o1_tp_slice *sl, char *buf)
{
	uint64_t cols = t->shape[t->n_dims - 1], row_bytes, off, bytes;
	float *row;

	o1_dtype_row_bytes(t->dtype, cols, &row_bytes);
	dst->data = buf;
	if (col_bytes(t, sl, &off, &bytes) == 0) {
		for (uint64_t r = 0; r < sl->n_rows; r++)
			memcpy(buf + r * bytes,
			       (const char *)t->data + r * row_bytes + off,
			       bytes);
		cut_header(dst, sl, t->dtype, bytes * sl->n_rows);
		return 0;
	}
	row = malloc(cols * sizeof(float));
	if (!row)
		return -ENOMEM;
	for (uint64_t r = 0; r < sl->n_rows; r++) {
		o1_dtype_to_f32(t->dtype, (const char *)t->data + r * row_bytes,
				row, cols);
		memcpy(buf + r * sl->n_cols * sizeof(float), row + sl->col0,
		       sl->n_cols * sizeof(float));
	}
	free(row);
	cut_header(dst, sl, O1_DTYPE_F32, sl->n_cols * sl->n_rows * 4);
	return 0;
}

static void shard_unload(struct o1_model *m)
{
	free(m->source);
	m->source = NULL;
}

/* Cuts every tensor; gathered slices go one after another into BUF. */
static int cut_all(struct o1_model *sm, const struct o1_model *m,
		   const struct o1_tp_shard *s, char *buf)
{
	struct o1_tp_slice sl;
	int err = 0;

	for (uint32_t i = 0; !err && i < m->n_tensors; i++) {
		const struct o1_tensor *t = &m->tensors[i];

		sm->tensors[i] = *t;
		o1_tp_shard_slice(s, &m->desc, t, &sl);
		if (!sl.split)
			continue;
		if (contiguous(t, &sl)) {
			cut_view(&sm->tensors[i], t, &sl);
			continue;
		}
		err = cut_gather(&sm->tensors[i], t, &sl, buf);
		buf += (gathered_bytes(t, &sl) + 63) / 64 * 64;
	}
	return err;
}

static uint64_t gather_total(const struct o1_model *m,
			     const struct o1_tp_shard *s)
{
	struct o1_tp_slice sl;
	uint64_t n = 0;

	for (uint32_t i = 0; i < m->n_tensors; i++) {
		o1_tp_shard_slice(s, &m->desc, &m->tensors[i], &sl);
		if (sl.split && !contiguous(&m->tensors[i], &sl))
			n += (gathered_bytes(&m->tensors[i], &sl) + 63) / 64 *
			     64;
	}
	return n;
}

int o1_tp_shard_model(const struct o1_model *m, const struct o1_tp_shard *s,
		      struct o1_model **out)
{
	struct o1_model *sm = calloc(1, sizeof(*sm));
	uint64_t bytes = gather_total(m, s);
	int err;

	if (!sm)
		return -ENOMEM;
	sm->desc = m->desc;
	sm->desc.n_heads = s->n_q_heads;
	sm->desc.n_kv_heads = s->n_kv_heads;
	sm->desc.ffn_dim = s->n_ffn;
	memcpy(sm->path, m->path, sizeof(sm->path));
	sm->unload = shard_unload;
	sm->n_tensors = m->n_tensors;
	sm->tensors = calloc(m->n_tensors, sizeof(*sm->tensors));
	sm->source = aligned_alloc(64, bytes ? bytes : 64);
	err = sm->tensors && sm->source ? 0 : -ENOMEM;
	if (err)
		o1_err("tensor parallel: no memory for rank %u's %.1f MiB of "
		       "gathered weights",
		       s->rank, bytes / 1048576.0);
	err = err ? err : cut_all(sm, m, s, sm->source);
	if (err) {
		o1_model_close(sm);
		return err;
	}
	*out = sm;
	return 0;
}
