/* o1model schema-check SCHEMA.json INSTANCE.json: does the grammar the
 * JSON Schema compiles to (daemon/grammar, grammar_schema.h) accept the
 * instance, written compactly in that grammar's canonical form? Exit 0
 * when it does, 1 when it does not (also for a schema that matches
 * nothing), 3 when the schema is outside the supported subset (the
 * keyword named on stderr), 2 for usage errors (arguments, unreadable
 * files, text that is not JSON). `format` is enforced, as for generation.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/file.h"
#include "grammar/grammar.h"
#include "grammar/grammar_schema.h"
#include "o1model.h"

#define FILE_MAX (16u << 20)

static int check(const char *schema, size_t slen, const char *inst,
		 size_t ilen)
{
	struct o1_grammar_error err;
	struct o1_grammar *g;
	struct o1_grammar_matcher *m;
	char *text;
	size_t n;
	int ret = o1_grammar_schema_canonical(schema, slen, inst, ilen, &text,
					      &n);

	if (ret) {
		fprintf(stderr, "o1model: schema or instance is not JSON\n");
		return 2;
	}
	ret = o1_grammar_compile_schema(schema, slen, NULL, &err, &g);
	if (ret) {
		fprintf(stderr, "o1model: %s\n", err.msg);
		free(text);
		return ret == -O1_E_UNSUPPORTED ? 3
		       : strstr(err.msg, "not JSON") ? 2
						       : 1;
	}
	ret = o1_grammar_matcher_create(g, NULL, NULL, &m);
	if (!ret) {
		ret = o1_grammar_matcher_accept_bytes(m, (const uint8_t *)text,
						      n);
		ret = !ret && o1_grammar_matcher_is_complete(m) ? 0 : 1;
		if (ret)
			fprintf(stderr, "o1model: rejected: %s\n", text);
		o1_grammar_matcher_destroy(m);
	} else {
		ret = 2;
	}
	o1_grammar_destroy(g);
	free(text);
	return ret;
}

int o1model_cmd_schema_check(int argc, char **argv)
{
	char *schema = NULL, *inst = NULL;
	size_t slen, ilen;
	int ret;

	if (argc != 3) {
		fprintf(stderr,
			"usage: o1model schema-check SCHEMA.json INSTANCE.json\n");
		return 2;
	}
	if (o1_file_read(argv[1], FILE_MAX, &schema, &slen) ||
	    o1_file_read(argv[2], FILE_MAX, &inst, &ilen)) {
		fprintf(stderr, "o1model: cannot read %s\n",
			schema ? argv[2] : argv[1]);
		free(schema);
		return 2;
	}
	ret = check(schema, slen, inst, ilen);
	free(schema);
	free(inst);
	return ret;
}
