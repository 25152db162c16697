/* libFuzzer harness for the JSON Schema compiler: any input either becomes
 * grammar text or is refused with a message. Text it writes must compile
 * unless the grammar compiler refuses the schema itself (a recursion
 * without a base case, a grammar too large): a syntax error in generated
 * text is a bug. The compiled grammar then takes the input's own bytes
 * one at a time (most are refused; none may crash). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_schema.h"

#define MAX_INPUT 8192

static void feed(struct o1_grammar *g, const uint8_t *data, size_t size)
{
	struct o1_grammar_matcher *m;

	if (o1_grammar_matcher_create(g, NULL, NULL, &m))
		return;
	for (size_t i = 0; i < size && i < 256; i++)
		o1_grammar_matcher_accept_bytes(m, data + i, 1);
	o1_grammar_matcher_destroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct o1_grammar_schema_opts opts = {.sz = sizeof(opts),
					      .ws_max = size % 3};
	struct o1_grammar_error err;
	struct o1_grammar *g;
	char *text;
	size_t n;
	int rc;

	if (size > MAX_INPUT)
		return 0;
	rc = o1_grammar_from_schema((const char *)data, size, &opts, &err,
				    &text, &n);
	if (rc) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	rc = o1_grammar_compile(text, n, &err, &g);
	if (rc && rc != -O1_E_BOUNDS && !strstr(err.msg, "can never finish") &&
	    !strstr(err.msg, "left recursive"))
		abort();
	free(text);
	if (!rc) {
		feed(g, data, size);
		o1_grammar_destroy(g);
	}
	return 0;
}
