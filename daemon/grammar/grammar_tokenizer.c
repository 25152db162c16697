/* The grammar vocabulary of a tokenizer: every token's output bytes, the
 * tokens that end a turn as end tokens, the tool-call markers that are
 * control tokens as control tokens (a grammar allows one only where it
 * names it: grammar_tools.h), other control tokens ignored (a grammar
 * never allows them). Only the markers are nameable because only their
 * text reaches the client (the detokenizer keeps it for requests with
 * tools, tool_call.h); any other control token would vanish from the
 * output. Built once per model.
 */
#include "grammar/grammar_tokenizer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tool_call.h"

/* Control tokens that end the output besides the vocabulary's EOS. */
static const char *const end_names[] = {
	"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|endoftext|>",
	"<|im_end|>", "<|end|>",    "</s>",
};

static uint8_t kind_of(const struct o1_tokenizer *t, int32_t id)
{
	const char *text;

	if (!o1_tokenizer_is_special(t, id))
		return O1_GRAMMAR_TOKEN_TEXT;
	if (id == o1_tokenizer_eos(t))
		return O1_GRAMMAR_TOKEN_END;
	text = o1_tokenizer_token_text(t, id);
	for (size_t i = 0; i < sizeof(end_names) / sizeof(end_names[0]); i++)
		if (!strcmp(text, end_names[i]))
			return O1_GRAMMAR_TOKEN_END;
	for (const char *const *m = o1_tool_format_markers(); *m; m++)
		if (!strcmp(text, *m))
			return O1_GRAMMAR_TOKEN_CONTROL;
	return O1_GRAMMAR_TOKEN_IGNORE;
}

int o1_grammar_vocab_from_tokenizer(const struct o1_tokenizer *t,
				    struct o1_grammar_vocab **out)
{
	uint32_t n = o1_tokenizer_n_tokens(t);
	const uint8_t **bytes = malloc(n * sizeof(*bytes));
	uint32_t *lens = malloc(n * sizeof(*lens));
	uint8_t *kinds = malloc(n);
	int rc = -ENOMEM;

	*out = NULL;
	if (!bytes || !lens || !kinds)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		size_t len;

		kinds[i] = kind_of(t, (int32_t)i);
		if (kinds[i] == O1_GRAMMAR_TOKEN_CONTROL) { /* its name */
			bytes[i] = (const uint8_t *)o1_tokenizer_token_text(
			    t, (int32_t)i);
			len = strlen((const char *)bytes[i]);
		} else {
			bytes[i] =
			    o1_tokenizer_token_bytes(t, (int32_t)i, &len);
		}
		lens[i] = (uint32_t)len;
	}
	rc = o1_grammar_vocab_create(n, bytes, lens, kinds, out);
out:
	free(bytes);
	free(lens);
	free(kinds);
	return rc;
}
