/* libFuzzer harness for the entry decoders: any 128 bytes (padded or cut)
 * decode without crashing, and an accepted submission lies inside the
 * arena the limits describe, so the daemon's copy-out cannot overrun.
 * Bytes past the slot are also read as a stop-string list and as a
 * welcome's device output description, whose accepted geometry must fit
 * the area it names (libo1client-cuda reads rows and stamps there). An
 * accepted grammar (wire version 5) has a known kind, at most the limit's
 * bytes, all inside the arena; without O1_SUBMIT_GRAMMAR its fields are
 * zero. Version 6: CHAT_JSON only with CHAT on a text prompt; an accepted
 * TOP_TEXT entry walks to exactly its n items inside its data. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shm/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_submit(const struct o1_wire_submit *s,
			 const struct o1_wire_limits *lim)
{
	uint64_t pb = s->prompt_kind == O1_PROMPT_IDS ? s->prompt_len * 4ull
						      : s->prompt_len;

	if ((uint64_t)s->prompt_off + pb > lim->arena_bytes ||
	    (uint64_t)s->stop_ids_off * (s->n_stop_ids != 0) +
		    s->n_stop_ids * 4ull >
		lim->arena_bytes ||
	    (uint64_t)s->stop_str_off * (s->stop_str_len != 0) +
		    s->stop_str_len >
		lim->arena_bytes ||
	    s->n_stop_ids > lim->max_stop_ids || s->max_tokens == 0 ||
	    !(s->temperature >= 0.0f) || !(s->top_p > 0.0f) ||
	    s->refine_steps > O1_WIRE_REFINE_MAX ||
	    (s->refine_steps && !(s->flags & O1_SUBMIT_CHAT)) ||
	    ((s->flags & O1_SUBMIT_CHAT_JSON) &&
	     (!(s->flags & O1_SUBMIT_CHAT) ||
	      s->prompt_kind != O1_PROMPT_TEXT)))
		abort();
	if (!(s->flags & O1_SUBMIT_GRAMMAR)) {
		if (s->grammar_off || s->grammar_len || s->grammar_kind)
			abort();
		return;
	}
	if (s->grammar_kind == O1_GRAMMAR_NONE ||
	    s->grammar_kind >= O1_GRAMMAR_KIND_COUNT ||
	    s->grammar_len > lim->max_grammar_bytes ||
	    (uint64_t)s->grammar_off + s->grammar_len > lim->arena_bytes ||
	    (s->grammar_kind == O1_GRAMMAR_JSON_OBJECT) != !s->grammar_len)
		abort();
}

static void check_devout(const uint8_t *data, size_t size)
{
	struct o1_wire_devout d = {0};

	memcpy(&d, data, size < sizeof(d) ? size : sizeof(d));
	if (o1_wire_devout_check(&d, 1000) || !d.rows)
		return;
	if ((uint64_t)d.rows * d.row_stride_bytes > d.stamps_off ||
	    d.stamps_off + d.rows * 4ull > d.area_bytes ||
	    d.row_stride_bytes < 4000 || (d.rows & (d.rows - 1)))
		abort();
}

static void check_top_text(const struct o1_wire_top_text *t)
{
	uint32_t at = 0, len, n = 0;
	const uint8_t *b;
	int cut;

	while (n < t->n && !o1_wire_top_text_next(t, &at, &b, &len, &cut)) {
		if (b < t->data || b + len > t->data + O1_WIRE_TOP_TEXT_MAX)
			abort();
		n++;
	}
	if (n != t->n || t->first + t->n > O1_WIRE_LOGPROBS_MAX)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct o1_wire_limits lim = {.arena_bytes = 65536,
						  .max_prompt_bytes = 32768,
						  .max_prompt_tokens = 8192,
						  .max_tokens = 4096,
						  .max_stop_ids = 16,
						  .max_stop_bytes = 1024,
						  .vocab_size = 32000,
						  .max_grammar_bytes = 8192};
	uint8_t slot[O1_WIRE_ENTRY_BYTES] = {0};
	union o1_wire_entry out;
	const char *why;

	memcpy(slot, data, size < sizeof(slot) ? size : sizeof(slot));
	if (o1_wire_decode_sub(slot, &lim, &out, &why) == 0 &&
	    out.op == O1_OP_SUBMIT)
		check_submit(&out.submit, &lim);
	if (o1_wire_decode_ev(slot, &out, &why) == 0 &&
	    out.op == O1_EV_TOP_TEXT)
		check_top_text(&out.top_text);
	if (size > sizeof(slot)) {
		o1_wire_stop_strings_check(data + sizeof(slot),
					   (uint32_t)(size - sizeof(slot)), 16);
		check_devout(data + sizeof(slot), size - sizeof(slot));
	}
	return 0;
}
