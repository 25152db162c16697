/* Backend dispatch: the ops table, configuration defaults and the checks
 * every step passes before a backend sees it. */
#include "backend.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "tp_backend.h"

#ifdef O1_WITH_CUDA_BACKEND
extern const struct o1_backend_ops o1_cuda_backend_ops;
#endif

static const struct o1_backend_ops *const o1_backend_table[] = {
    [O1_BACKEND_CPU] = &o1_cpu_backend_ops,
#ifdef O1_WITH_CUDA_BACKEND
    [O1_BACKEND_CUDA] = &o1_cuda_backend_ops,
#else
    [O1_BACKEND_CUDA] = NULL,
#endif
};
_Static_assert(sizeof(o1_backend_table) / sizeof(o1_backend_table[0]) ==
		   O1_BACKEND_COUNT,
	       "one entry per backend kind");

static const char *const o1_backend_names[] = {
    [O1_BACKEND_CPU] = "cpu",
    [O1_BACKEND_CUDA] = "cuda",
};
_Static_assert(sizeof(o1_backend_names) / sizeof(o1_backend_names[0]) ==
		   O1_BACKEND_COUNT,
	       "one name per backend kind");

struct o1_backend {
	const struct o1_backend_ops *ops;
	void *state;
	struct o1_backend_config cfg;
	struct o1_kv_layout layout;
	uint32_t vocab;
};

int o1_backend_parse(const char *name, enum o1_backend_kind *out)
{
	for (int k = 0; k < O1_BACKEND_COUNT; k++)
		if (strcmp(name, o1_backend_names[k]) == 0) {
			*out = k;
			return 0;
		}
	return -EINVAL;
}

const char *o1_backend_name(enum o1_backend_kind kind)
{
	return (unsigned)kind < O1_BACKEND_COUNT ? o1_backend_names[kind] : "?";
}

static int resolve_config(const struct o1_model_desc *d,
			  const struct o1_backend_config *in,
			  struct o1_backend_config *c)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	*c = *in;
	if (!c->n_threads)
		c->n_threads = cpus > 0 ? (uint32_t)cpus : 1;
	if (!c->page_tokens)
		c->page_tokens = O1_KV_PAGE_TOKENS_DEFAULT;
	if (!c->max_context_tokens)
		c->max_context_tokens = d->max_context_tokens;
	if (!c->max_sample_pens) {
		uint64_t per_seq = d->vocab_size < c->max_context_tokens
				       ? d->vocab_size
				       : c->max_context_tokens;
		uint64_t n = per_seq * c->max_seqs;

		c->max_sample_pens = n < O1_BACKEND_SAMPLE_PENS_DEFAULT_MAX
					 ? (uint32_t)n
					 : O1_BACKEND_SAMPLE_PENS_DEFAULT_MAX;
	}
	if (!c->max_sample_masks)
		c->max_sample_masks = c->max_seqs;
	if (!c->max_batch_tokens || !c->max_seqs || !c->n_pages ||
	    !c->max_context_tokens || c->max_seqs > c->max_batch_tokens ||
	    c->n_threads > 256 || c->tensor_parallel > O1_BACKEND_DEVICES_MAX ||
	    c->tp_size) {
		o1_err("backend: bad config: batch tokens %u seqs %u pages %u "
		       "context %u threads %u tensor parallel %u (at most %u)",
		       c->max_batch_tokens, c->max_seqs, c->n_pages,
		       c->max_context_tokens, c->n_threads, c->tensor_parallel,
		       O1_BACKEND_DEVICES_MAX);
		return -O1_E_CONFIG;
	}
	return 0;
}

static int create_state(enum o1_backend_kind kind, const struct o1_model *m,
			struct o1_backend *b)
{
	if (!b->cfg.tensor_parallel)
		return b->ops->create(m, &b->cfg, &b->state);
	b->ops = &o1_tp_backend_ops;
	return o1_tp_backend_create(kind, o1_backend_table[kind], m, &b->cfg,
				    &b->state);
}

static int check_devout_config(const struct o1_backend *b)
{
	uint32_t n = b->cfg.devout_areas, rows = b->cfg.devout_rows;

	if (!n)
		return 0;
	if (!b->ops->devout || b->cfg.tensor_parallel) {
		o1_err("%s backend%s: no device output areas", b->ops->name,
		       b->cfg.tensor_parallel ? " (tensor-parallel)" : "");
		return -O1_E_UNSUPPORTED;
	}
	if (n > O1_BACKEND_DEVOUT_AREAS_MAX || !rows || (rows & (rows - 1)) ||
	    rows > O1_BACKEND_DEVOUT_ROWS_MAX) {
		o1_err("backend: %u device output areas of %u rows (at most "
		       "%u areas, rows a power of two up to %u)",
		       n, rows, O1_BACKEND_DEVOUT_AREAS_MAX,
		       O1_BACKEND_DEVOUT_ROWS_MAX);
		return -O1_E_CONFIG;
	}
	return 0;
}

int o1_backend_create(enum o1_backend_kind kind, const struct o1_model *m,
		      const struct o1_backend_config *cfg,
		      struct o1_backend **out)
{
	struct o1_backend *b;
	uint64_t elems;
	int err;

	if ((unsigned)kind >= O1_BACKEND_COUNT || !o1_backend_table[kind]) {
		o1_err("%s backend not built/available",
		       kind == O1_BACKEND_CUDA ? "CUDA" : "requested");
		return -O1_E_UNSUPPORTED;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->ops = o1_backend_table[kind];
	err = resolve_config(&m->desc, cfg, &b->cfg);
	if (!err && cfg->sampling && !b->ops->can_sample) {
		o1_err("%s backend cannot sample", b->ops->name);
		err = -O1_E_UNSUPPORTED;
	}
	b->layout = (struct o1_kv_layout){b->cfg.n_pages, m->desc.n_layers,
					  m->desc.n_kv_heads,
					  b->cfg.page_tokens, m->desc.head_dim};
	b->vocab = m->desc.vocab_size;
	if (!err)
		err = o1_kv_layout_check(&b->layout, &elems);
	if (!err)
		err = check_devout_config(b);
	if (!err)
		err = create_state(kind, m, b);
	if (err) {
		free(b);
		return err;
	}
	*out = b;
	return 0;
}

void o1_backend_destroy(struct o1_backend *b)
{
	if (!b)
		return;
	b->ops->destroy(b->state);
	free(b);
}

static int check_seq(const struct o1_backend *b, const struct o1_step_seq *s,
		     uint32_t i)
{
	const struct o1_backend_config *c = &b->cfg;
	uint64_t end = (uint64_t)s->start_pos + s->n_tokens;

	if (!s->n_tokens || !s->tokens || (s->n_pages && !s->pages) ||
	    end > c->max_context_tokens ||
	    end > (uint64_t)s->n_pages * c->page_tokens) {
		o1_err("backend step: sequence %u: %u tokens at position %u, "
		       "context limit %u, block table %u pages of %u",
		       i, s->n_tokens, s->start_pos, c->max_context_tokens,
		       s->n_pages, c->page_tokens);
		return -O1_E_CONTEXT;
	}
	for (uint32_t p = 0; p < s->n_pages; p++)
		if (s->pages[p] >= c->n_pages) {
			o1_err("backend step: sequence %u: page %u at %u is "
			       "outside the pool of %u",
			       i, s->pages[p], p, c->n_pages);
			return -O1_E_BOUNDS;
		}
	return 0;
}

/* Every device output entry names one of the step's ROWS logits rows and
 * an existing area. */
static int check_devout(const struct o1_backend *b, const struct o1_step *st,
			uint32_t rows)
{
	if (st->n_devout && !st->devout)
		return -O1_E_CONFIG;
	/* at most one entry per row: the CUDA backend stages one stamp per
	 * entry in max_batch_tokens slots */
	if (st->n_devout > rows) {
		o1_err("backend step: %u device outputs for %u logits rows",
		       st->n_devout, rows);
		return -O1_E_BOUNDS;
	}
	for (uint32_t i = 0; i < st->n_devout; i++)
		if (st->devout[i].row >= rows ||
		    st->devout[i].area >= b->cfg.devout_areas) {
			o1_err("backend step: device output %u: row %u of %u, "
			       "area %u of %u",
			       i, st->devout[i].row, rows, st->devout[i].area,
			       b->cfg.devout_areas);
			return -O1_E_BOUNDS;
		}
	return 0;
}

/* Row I's parameters: those o1_sample_rows refuses, and U. */
static int check_sample_row(const struct o1_sample_row *r, uint32_t i)
{
	if (!(r->u >= 0 && r->u < 1) || !(r->temperature >= 0) ||
	    !isfinite(r->temperature) || !(r->top_p >= 0 && r->top_p <= 1) ||
	    !(r->min_p >= 0 && r->min_p <= 1) ||
	    !(r->repetition_penalty >= 0) || !isfinite(r->presence_penalty) ||
	    !isfinite(r->frequency_penalty) ||
	    r->n_logprobs > O1_SAMPLE_MAX_TOP) {
		o1_err("backend step: sample row %u: u %g temperature %g "
		       "top_p %g min_p %g repetition %g presence %g "
		       "frequency %g logprobs %u",
		       i, r->u, r->temperature, r->top_p, r->min_p,
		       r->repetition_penalty, r->presence_penalty,
		       r->frequency_penalty, r->n_logprobs);
		return -O1_E_CONFIG;
	}
	return 0;
}

/* The sampling half of a step: ROWS rows and the penalty entries. */
static int check_samples(const struct o1_backend *b, const struct o1_step *st,
			 uint64_t rows)
{
	int err;

	if (!b->cfg.sampling || !st->sample_rows || (st->n_pens && !st->pens)) {
		o1_err("backend step: samples asked of a backend created "
		       "without sampling (%d) or without rows (%d) or "
		       "penalties (%d)",
		       !b->cfg.sampling, !st->sample_rows,
		       st->n_pens && !st->pens);
		return -O1_E_CONFIG;
	}
	if (st->n_pens > b->cfg.max_sample_pens ||
	    st->n_masks > b->cfg.max_sample_masks ||
	    (st->n_masks && !st->masks)) {
		o1_err("backend step: %u penalty entries (room for %u), %u "
		       "token masks (room for %u)%s",
		       st->n_pens, b->cfg.max_sample_pens, st->n_masks,
		       b->cfg.max_sample_masks,
		       st->n_masks && !st->masks ? ", masks NULL" : "");
		return -O1_E_BOUNDS;
	}
	for (uint64_t i = 0; i < rows; i++) {
		const struct o1_sample_row *r = &st->sample_rows[i];

		err = check_sample_row(r, (uint32_t)i);
		if (err)
			return err;
		if (r->mask > st->n_masks) {
			o1_err("backend step: sample row %u: mask %u of %u",
			       (uint32_t)i, r->mask, st->n_masks);
			return -O1_E_BOUNDS;
		}
		if ((uint64_t)r->pen_off + r->n_pen > st->n_pens) {
			o1_err("backend step: sample row %u: penalties "
			       "[%u, +%u) outside the %u entries",
			       (uint32_t)i, r->pen_off, r->n_pen, st->n_pens);
			return -O1_E_BOUNDS;
		}
	}
	for (uint32_t j = 0; j < st->n_pens; j++)
		if (st->pens[j].id < 0 ||
		    (uint32_t)st->pens[j].id >= b->vocab) {
			o1_err("backend step: penalty entry %u: id %d outside "
			       "the vocabulary of %u",
			       j, st->pens[j].id, b->vocab);
			return -O1_E_BOUNDS;
		}
	return 0;
}

static int check_step(const struct o1_backend *b, const struct o1_step *st)
{
	uint64_t tokens = 0, rows = 0;
	int err;

	if (!st->n_seqs || st->n_seqs > b->cfg.max_seqs ||
	    (!st->logits && !st->samples)) {
		o1_err("backend step: %u sequences (limit %u), logits %s, "
		       "samples %s",
		       st->n_seqs, b->cfg.max_seqs,
		       st->logits ? "asked" : "not asked",
		       st->samples ? "asked" : "not asked");
		return -O1_E_CONFIG;
	}
	for (uint32_t i = 0; i < st->n_seqs; i++) {
		err = check_seq(b, &st->seqs[i], i);
		if (err)
			return err;
		tokens += st->seqs[i].n_tokens;
		rows += st->seqs[i].all_logits ? st->seqs[i].n_tokens : 1;
	}
	if (tokens > b->cfg.max_batch_tokens ||
	    (st->logits && rows > st->logits_rows)) {
		o1_err("backend step: %llu tokens (limit %u), %llu logits "
		       "rows (room for %u)",
		       (unsigned long long)tokens, b->cfg.max_batch_tokens,
		       (unsigned long long)rows, st->logits_rows);
		return -O1_E_CONFIG;
	}
	err = check_devout(b, st, (uint32_t)rows);
	return !err && st->samples ? check_samples(b, st, rows) : err;
}

int o1_backend_step(struct o1_backend *b, const struct o1_step *st)
{
	int err = check_step(b, st);

	return err ? err : b->ops->step(b->state, st);
}

const struct o1_kv_layout *o1_backend_kv_layout(const struct o1_backend *b)
{
	return &b->layout;
}

const struct o1_backend_config *o1_backend_config(const struct o1_backend *b)
{
	return &b->cfg;
}

int o1_backend_devout(const struct o1_backend *b, uint32_t area,
		      struct o1_backend_devout *out)
{
	if (!b->ops->devout)
		return -O1_E_UNSUPPORTED;
	if (area >= b->cfg.devout_areas)
		return -O1_E_BOUNDS;
	return b->ops->devout(b->state, area, out);
}

uint32_t o1_backend_vocab_size(const struct o1_backend *b)
{
	return b->vocab;
}

bool o1_backend_can_sample(const struct o1_backend *b)
{
	return b->cfg.sampling;
}

bool o1_backend_kind_can_sample(enum o1_backend_kind kind)
{
	return (unsigned)kind < O1_BACKEND_COUNT && o1_backend_table[kind] &&
	       o1_backend_table[kind]->can_sample;
}

uint64_t o1_backend_kind_kv_page_bytes(enum o1_backend_kind kind,
				       const struct o1_kv_layout *l)
{
	if ((unsigned)kind >= O1_BACKEND_COUNT || !o1_backend_table[kind])
		return 0;
	return o1_kv_layout_page_elems(l) *
	       o1_backend_table[kind]->kv_elem_bytes;
}

void o1_backend_graph_stats(const struct o1_backend *b,
			    struct o1_backend_graph_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (b->ops->graph_stats)
		b->ops->graph_stats(b->state, out);
}

int o1_backend_fail_replays(struct o1_backend *b, uint32_t every)
{
	if (!b->ops->fail_replays)
		return -O1_E_UNSUPPORTED;
	return b->ops->fail_replays(b->state, every);
}
