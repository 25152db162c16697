/* The sampler (see sampler.h): the per-request state around the row
 * sampling of kernels/sample.c. State per request: the PRNG, the list of
 * distinct tokens seen with their generated counts and prompt flags (the
 * penalty list of sample.h, kept as it is sent, with each token's place in
 * it) and the scratch o1_sample_rows needs for the request's parameters,
 * all allocated at create. A token is o1_sampler_row (one uniform drawn
 * unless greedy), o1_sample_rows here or in a backend, o1_sampler_accept.
 */
#include "sampler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/prng.h"
#include "sampler_grammar.h"

_Static_assert(O1_SAMPLER_MAX_LOGPROBS == O1_SAMPLE_MAX_TOP,
	       "one top-n bound for the sampler and the kernels");

struct o1_sampler {
	struct o1_sampler_params p;
	uint32_t vocab;
	uint64_t rng[4];
	uint32_t n_generated;
	bool penalties;
	uint32_t *place;		/* per token: 1 + its entry in seen,
					 * 0 = unseen (penalties only) */
	struct o1_sample_penalty *seen; /* distinct tokens of prompt and
					 * output, in order of appearance */
	uint32_t n_seen;
	void *scratch; /* o1_sample_row_scratch_bytes of this request */
	struct sampler_grammar *gram; /* structured output, or NULL */
};

void o1_sampler_params_init(struct o1_sampler_params *p)
{
	memset(p, 0, sizeof(*p));
	p->top_p = 1.0f;
	p->repetition_penalty = 1.0f;
	p->eos_id = -1;
}

static int check_params(const struct o1_sampler_params *p, uint32_t vocab)
{
	if (!(p->temperature >= 0) || !(p->top_p >= 0 && p->top_p <= 1) ||
	    !(p->min_p >= 0 && p->min_p <= 1) ||
	    !(p->repetition_penalty >= 0) || !isfinite(p->presence_penalty) ||
	    !isfinite(p->frequency_penalty) || !isfinite(p->temperature) ||
	    p->n_logprobs > O1_SAMPLER_MAX_LOGPROBS ||
	    p->n_stop_ids > O1_SAMPLER_MAX_STOP_IDS || !vocab) {
		o1_err("sampler: bad parameters: temperature %g top_p %g "
		       "min_p %g repetition %g presence %g frequency %g "
		       "logprobs %u stop ids %u vocab %u",
		       p->temperature, p->top_p, p->min_p,
		       p->repetition_penalty, p->presence_penalty,
		       p->frequency_penalty, p->n_logprobs, p->n_stop_ids,
		       vocab);
		return -O1_E_CONFIG;
	}
	return 0;
}

static bool is_greedy(const struct o1_sampler_params *p)
{
	return p->temperature == 0 || p->top_k == 1;
}

/* A row of P's parameters with U and the N penalty entries at 0. */
static struct o1_sample_row row_of(const struct o1_sampler_params *p, double u,
				   uint32_t n)
{
	return (struct o1_sample_row){
	    .u = u,
	    .temperature = p->temperature,
	    .top_p = p->top_p,
	    .min_p = p->min_p,
	    .repetition_penalty = p->repetition_penalty,
	    .presence_penalty = p->presence_penalty,
	    .frequency_penalty = p->frequency_penalty,
	    .top_k = p->top_k,
	    .n_logprobs = p->n_logprobs,
	    .pen_off = 0,
	    .n_pen = n,
	};
}

/* The next token's row: U drawn unless greedy. */
static void make_row(struct o1_sampler *s, struct o1_sample_row *row,
		     uint32_t n)
{
	*row = row_of(&s->p, is_greedy(&s->p) ? 0 : o1_prng_uniform(s->rng), n);
}

/* The penalty list (vocabulary-sized: a token is listed once) and the
 * scratch for these parameters' rows. */
static int alloc_state(struct o1_sampler *s)
{
	struct o1_sample_row row = row_of(&s->p, 0, 0);
	size_t bytes = o1_sample_row_scratch_bytes(&row, s->vocab);

	s->scratch = aligned_alloc(64, bytes ? bytes : 64);
	if (s->penalties) {
		s->place = calloc(s->vocab, sizeof(*s->place));
		s->seen = malloc(s->vocab * sizeof(*s->seen));
	}
	if (!s->scratch || (s->penalties && (!s->place || !s->seen)))
		return -ENOMEM;
	return 0;
}

int o1_sampler_create(const struct o1_sampler_params *p, uint32_t vocab,
		      struct o1_sampler **out)
{
	struct o1_sampler *s;
	int err = check_params(p, vocab);

	if (err)
		return err;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->p = *p;
	s->vocab = vocab;
	s->penalties =
	    (p->repetition_penalty > 0 && p->repetition_penalty != 1) ||
	    p->frequency_penalty != 0 || p->presence_penalty != 0;
	o1_prng_seed(s->rng, p->seed);
	err = alloc_state(s);
	if (err) {
		o1_sampler_destroy(s);
		return err;
	}
	*out = s;
	return 0;
}

void o1_sampler_destroy(struct o1_sampler *s)
{
	if (!s)
		return;
	free(s->place);
	free(s->seen);
	free(s->scratch);
	sampler_grammar_destroy(s->gram);
	free(s);
}

/* A constrained sampler's rows are masked: their scratch holds the
 * masked copy too (kernels/sample.c). */
static int grow_scratch(struct o1_sampler *s)
{
	struct o1_sample_row row = row_of(&s->p, 0, 0);
	void *p;

	row.mask = 1;
	p = aligned_alloc(64, o1_sample_row_scratch_bytes(&row, s->vocab));
	if (!p)
		return -ENOMEM;
	free(s->scratch);
	s->scratch = p;
	return 0;
}

int o1_sampler_constrain(struct o1_sampler *s, struct o1_grammar_matcher *m)
{
	uint32_t words = o1_grammar_matcher_mask_words(m);
	int err = s->gram ? -EBUSY : words ? 0 : -EINVAL;

	err = err ?: grow_scratch(s);
	err = err ?: sampler_grammar_create(m, s->vocab, words, &s->gram);
	if (err)
		o1_grammar_matcher_destroy(m);
	return err;
}

bool o1_sampler_constrained(const struct o1_sampler *s)
{
	return s->gram != NULL;
}

int o1_sampler_prepare(struct o1_sampler *s)
{
	return s->gram ? sampler_grammar_prepare(s->gram) : 0;
}

/* ID's entry in the penalty list, appended when new; NULL when no
 * penalty is on. */
static struct o1_sample_penalty *entry(struct o1_sampler *s, uint32_t id)
{
	if (!s->penalties)
		return NULL;
	if (!s->place[id]) {
		s->seen[s->n_seen] =
		    (struct o1_sample_penalty){(int32_t)id, 0, 0};
		s->place[id] = ++s->n_seen;
	}
	return &s->seen[s->place[id] - 1];
}

int o1_sampler_add_prompt(struct o1_sampler *s, const int32_t *ids, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		struct o1_sample_penalty *e;

		if (ids[i] < 0 || (uint32_t)ids[i] >= s->vocab) {
			o1_err("sampler: prompt id %d at %u outside the "
			       "vocabulary of %u",
			       ids[i], i, s->vocab);
			return -O1_E_BOUNDS;
		}
		e = entry(s, (uint32_t)ids[i]);
		if (e)
			e->in_prompt = 1;
	}
	return 0;
}

uint32_t o1_sampler_generated(const struct o1_sampler *s)
{
	return s->n_generated;
}

int o1_sampler_row_masked(struct o1_sampler *s, struct o1_sample_row *row,
			  struct o1_sample_penalty *pens, uint32_t cap,
			  uint32_t *n_pens, uint32_t *mask)
{
	uint32_t n = s->penalties ? s->n_seen : 0;
	const uint32_t *m = NULL;
	int err;

	if (s->gram && !mask)
		return -EOPNOTSUPP; /* no room for the mask: on the host */
	if (n > cap)
		return -ENOSPC;
	if (s->gram && mask) { /* before the draw, as o1_sampler_sample */
		err = sampler_grammar_mask(s->gram, &m);
		if (err)
			return err;
		memcpy(mask, m, o1_sample_mask_words(s->vocab) * sizeof(*m));
	}
	if (n)
		memcpy(pens, s->seen, n * sizeof(*pens));
	make_row(s, row, n);
	row->mask = m ? 1 : 0;
	*n_pens = n;
	return 0;
}

int o1_sampler_row(struct o1_sampler *s, struct o1_sample_row *row,
		   struct o1_sample_penalty *pens, uint32_t cap,
		   uint32_t *n_pens)
{
	return o1_sampler_row_masked(s, row, pens, cap, n_pens, NULL);
}

static enum o1_sampler_end end_of(const struct o1_sampler *s, int32_t id)
{
	if (!s->p.ignore_eos && s->p.eos_id >= 0 && id == s->p.eos_id)
		return O1_SAMPLER_END_EOS;
	for (uint32_t i = 0; i < s->p.n_stop_ids; i++)
		if (id == s->p.stop_ids[i])
			return O1_SAMPLER_END_STOP_ID;
	if (s->p.max_tokens && s->n_generated >= s->p.max_tokens)
		return O1_SAMPLER_END_LENGTH;
	return O1_SAMPLER_CONTINUE;
}

/* R's ids are in the vocabulary and its top-n within bounds. */
static bool result_ok(const struct o1_sampler *s,
		      const struct o1_sample_result *r)
{
	if (r->id < 0 || (uint32_t)r->id >= s->vocab ||
	    r->n_top > O1_SAMPLER_MAX_LOGPROBS)
		return false;
	for (uint32_t j = 0; j < r->n_top; j++)
		if (r->top_id[j] < 0 || (uint32_t)r->top_id[j] >= s->vocab)
			return false;
	return true;
}

int o1_sampler_accept(struct o1_sampler *s, const struct o1_sample_result *r,
		      struct o1_sampler_out *out)
{
	struct o1_sample_penalty *e;
	int end_token = 0;

	if (s->gram && r->id == O1_SAMPLE_NO_TOKEN)
		return -O1_E_GRAMMAR; /* a masked row that allowed nothing */
	if (!result_ok(s, r)) {
		o1_err("sampler: result id %d (%u alternatives) outside the "
		       "vocabulary of %u",
		       r->id, r->n_top, s->vocab);
		return -O1_E_BOUNDS;
	}
	if (s->gram) {
		end_token = sampler_grammar_accept(s->gram, r->id);
		if (end_token < 0)
			return end_token;
	}
	out->id = r->id;
	out->logprob = r->logprob;
	out->entropy = r->entropy;
	out->n_top = r->n_top;
	for (uint32_t j = 0; j < r->n_top; j++)
		out->top[j] =
		    (struct o1_sampler_logprob){r->top_id[j], r->top_logprob[j]};
	e = entry(s, (uint32_t)r->id);
	if (e)
		e->count++;
	s->n_generated++;
	out->end = end_of(s, out->id);
	if (end_token && out->end == O1_SAMPLER_CONTINUE)
		out->end = O1_SAMPLER_END_EOS; /* the grammar's output ended */
	return 0;
}

int o1_sampler_sample(struct o1_sampler *s, const float *logits,
		      struct o1_sampler_out *out)
{
	struct o1_sample_row row;
	struct o1_sample_result r;
	const uint32_t *mask = NULL;
	int err = s->gram ? sampler_grammar_mask(s->gram, &mask) : 0;

	if (err)
		return err;
	make_row(s, &row, s->penalties ? s->n_seen : 0);
	row.mask = mask ? 1 : 0;
	err = o1_sample_rows_masked(&r, logits, 1, s->vocab, &row, s->seen,
				    mask, mask ? 1 : 0, s->scratch);
	return err ? err : o1_sampler_accept(s, &r, out);
}
