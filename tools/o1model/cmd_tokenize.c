/* o1model tokenize / detokenize / test-vectors: the tokenizer from the
 * command line, and the runner of llama.cpp's .inp/.out test vectors
 * (format in shared/testdata/vocab/README.txt). VOCAB arguments are
 * anything o1_vocab_load_any accepts. test-vectors exits 77 (skipped) when
 * one of its paths does not exist.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/file.h"
#include "o1model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gpt2.h"

#define VECTORS_MAX_BYTES (64u << 20) /* one .inp or .out file */

static const char vector_sep[] = "\n__ggml_vocab_test__\n";

static int read_stream(FILE *f, char **buf, size_t *len)
{
	size_t cap = 1 << 16, n = 0, got;
	char *b = malloc(cap), *nb;

	while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n < cap)
			continue;
		nb = realloc(b, cap *= 2);
		if (!nb)
			break;
		b = nb;
	}
	if (!b || ferror(f) || n == cap) {
		free(b);
		return -ENOMEM;
	}
	b[n] = 0;
	*buf = b;
	*len = n;
	return 0;
}

/* Loads VOCAB_PATH; PRE, when given, replaces the pre-tokenizer name. */
static int load(const char *vocab_path, const char *pre,
		struct o1_tokenizer **out)
{
	struct o1_vocab *v;
	int ret = o1_vocab_load_any(vocab_path, &v);

	if (ret) {
		fprintf(stderr, "o1model: %s: %s\n", vocab_path,
			o1_strerror(ret));
		return ret;
	}
	if (pre)
		snprintf(v->pre, sizeof(v->pre), "%s", pre);
	ret = o1_tokenizer_create(v, out);
	if (ret)
		fprintf(stderr, "o1model: %s: tokenizer: %s\n", vocab_path,
			o1_strerror(ret));
	o1_vocab_destroy(v);
	return ret;
}

struct tok_opts {
	const char *path, *pre;
	unsigned flags; /* enum o1_encode_flags or enum o1_decode_flags */
};

/* One flag option, for encoding (DECODE false) or decoding. */
static bool flag_opt(const char *arg, bool decode, unsigned *flags)
{
	if (!decode && !strcmp(arg, "--add-special"))
		*flags |= O1_ENCODE_ADD_SPECIAL;
	else if (!decode && !strcmp(arg, "--parse-special"))
		*flags |= O1_ENCODE_PARSE_SPECIAL;
	else if (decode && !strcmp(arg, "--skip-special"))
		*flags |= O1_DECODE_SKIP_SPECIAL;
	else
		return false;
	return true;
}

static int parse_opts(int argc, char **argv, bool decode, struct tok_opts *o,
		      const char *usage)
{
	bool bad = false;

	memset(o, 0, sizeof(*o));
	for (int i = 1; i < argc && !bad; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: o1model %s\n", usage);
			return -1; /* answered: exit 0 */
		}
		if (flag_opt(argv[i], decode, &o->flags))
			continue;
		if (!strcmp(argv[i], "--pre") && i + 1 < argc)
			o->pre = argv[++i];
		else if (argv[i][0] != '-' && !o->path)
			o->path = argv[i];
		else
			bad = true;
	}
	if (bad || !o->path) {
		fprintf(stderr, "usage: o1model %s\n", usage);
		return 2;
	}
	return 0;
}

/* Encodes TEXT into a malloc'd array, growing it once if needed. */
static int encode_all(const struct o1_tokenizer *t, const char *text,
		      size_t len, unsigned flags, int32_t **ids)
{
	size_t cap = len + 16;
	int n;

	*ids = malloc(cap * sizeof(**ids));
	if (!*ids)
		return -ENOMEM;
	n = o1_tokenizer_encode(t, text, len, flags, *ids, cap);
	if (n > (int)cap) {
		int32_t *more = realloc(*ids, (size_t)n * sizeof(**ids));

		if (!more)
			return -ENOMEM;
		*ids = more;
		n = o1_tokenizer_encode(t, text, len, flags, *ids, (size_t)n);
	}
	return n;
}

int o1model_cmd_tokenize(int argc, char **argv)
{
	struct o1_tokenizer *t = NULL;
	struct tok_opts o;
	int32_t *ids = NULL;
	char *text = NULL;
	size_t len;
	int n, ret = parse_opts(argc, argv, false, &o,
				"tokenize VOCAB [--add-special] "
				"[--parse-special] [--pre NAME] < text");

	if (ret)
		return ret < 0 ? 0 : ret;
	if (load(o.path, o.pre, &t) || read_stream(stdin, &text, &len)) {
		ret = 1;
		goto out;
	}
	n = encode_all(t, text, len, o.flags, &ids);
	if (n < 0) {
		fprintf(stderr, "o1model: encode: %s\n", o1_strerror(n));
		ret = 1;
		goto out;
	}
	for (int i = 0; i < n; i++)
		printf("%s%d", i ? " " : "", ids[i]);
	printf("\n");
out:
	free(ids);
	free(text);
	o1_tokenizer_destroy(t);
	return ret;
}

/* Parses whitespace-separated ids; -EINVAL (reported) on anything else. */
static int parse_ids(char *s, int32_t **ids, size_t *n)
{
	size_t cap = 0;
	char *end, *tok;

	*n = 0;
	*ids = NULL;
	for (tok = strtok(s, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
		long v = strtol(tok, &end, 10);

		if (*end || v < 0 || v > INT32_MAX) {
			fprintf(stderr, "o1model: '%s' is not a token id\n",
				tok);
			return -EINVAL;
		}
		if (*n == cap) {
			int32_t *m =
			    realloc(*ids, (cap = cap * 2 + 64) * sizeof(**ids));

			if (!m)
				return -ENOMEM;
			*ids = m;
		}
		(*ids)[(*n)++] = (int32_t)v;
	}
	return 0;
}

int o1model_cmd_detokenize(int argc, char **argv)
{
	struct o1_tokenizer *t = NULL;
	struct tok_opts o;
	int32_t *ids = NULL;
	char *text = NULL, *out = NULL;
	size_t len, n;
	int got, ret = parse_opts(argc, argv, true, &o,
				  "detokenize VOCAB [--skip-special] < ids");

	if (ret)
		return ret < 0 ? 0 : ret;
	ret = 1;
	if (load(o.path, o.pre, &t) || read_stream(stdin, &text, &len) ||
	    parse_ids(text, &ids, &n))
		goto out;
	got = o1_tokenizer_decode(t, ids, n, o.flags | O1_DECODE_STRIP_PREFIX,
				  NULL, 0);
	out = got >= 0 ? malloc((size_t)got + 1) : NULL;
	if (out)
		got = o1_tokenizer_decode(t, ids, n,
					  o.flags | O1_DECODE_STRIP_PREFIX, out,
					  (size_t)got + 1);
	if (got < 0 || !out) {
		fprintf(stderr, "o1model: decode: %s\n",
			o1_strerror(got < 0 ? got : -ENOMEM));
		goto out;
	}
	fwrite(out, 1, (size_t)got, stdout);
	ret = 0;
out:
	free(out);
	free(ids);
	free(text);
	o1_tokenizer_destroy(t);
	return ret;
}

/* Compares one vector; prints it when it fails. */
static bool check_vector(const struct o1_tokenizer *t, const char *in,
			 size_t len, char *expect)
{
	int32_t *ids = NULL, *want = NULL;
	size_t n_want = 0;
	int n = encode_all(t, in, len, 0, &ids);
	bool ok = n >= 0 && !parse_ids(expect, &want, &n_want) &&
		  (size_t)n == n_want &&
		  (!n_want || !memcmp(ids, want, n_want * sizeof(*ids)));

	if (!ok) {
		printf("FAIL input '%.*s'\n  expected:", (int)len, in);
		for (size_t i = 0; i < n_want; i++)
			printf(" %d", want[i]);
		printf("\n  got:     ");
		for (int i = 0; i < n; i++)
			printf(" %d", ids[i]);
		if (n < 0)
			printf(" error %s", o1_strerror(n));
		printf("\n");
	}
	free(ids);
	free(want);
	return ok;
}

/* Runs every vector; fails unless all pass (and EXPECT of them, when
 * EXPECT > 0). */
static int run_vectors(const struct o1_tokenizer *t, char *inp, size_t ilen,
		       char *outs, int expect)
{
	size_t sep = sizeof(vector_sep) - 1;
	int passed = 0, failed = 0;
	char *p = inp, *end = inp + ilen, *line = outs;

	while (p < end) {
		char *s = memmem(p, (size_t)(end - p), vector_sep, sep);
		char *nl = line ? strchr(line, '\n') : NULL;

		if (!s)
			break;
		if (nl)
			*nl = 0;
		if (line && check_vector(t, p, (size_t)(s - p), line))
			passed++;
		else
			failed++;
		line = nl ? nl + 1 : NULL;
		p = s + sep;
	}
	printf("%d passed, %d failed\n", passed, failed);
	if (expect > 0 && passed != expect)
		fprintf(stderr, "o1model: %d vectors expected\n", expect);
	return failed || !passed || (expect > 0 && passed != expect);
}

int o1model_cmd_test_vectors(int argc, char **argv)
{
	struct o1_tokenizer *t = NULL;
	char *inp = NULL, *outs = NULL;
	size_t ilen, olen;
	const char *pre = NULL;
	int ret = 1, expect = 0;
	struct stat st;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: o1model test-vectors VOCAB INP OUT [--pre NAME] "
		       "[--expect N]\n");
		return 0;
	}
	for (int i = 4; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--pre"))
			pre = argv[i + 1];
		else if (!strcmp(argv[i], "--expect"))
			expect = atoi(argv[i + 1]);
		else
			argc = 0;
	}
	if (argc < 4 || argc % 2) {
		fprintf(stderr, "usage: o1model test-vectors VOCAB INP OUT "
				"[--pre NAME] [--expect N]\n");
		return 2;
	}
	for (int i = 1; i < 4; i++)
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "o1model: %s missing: skipped\n",
				argv[i]);
			return 77;
		}
	if (load(argv[1], pre, &t) ||
	    o1_file_read(argv[2], VECTORS_MAX_BYTES, &inp, &ilen) ||
	    o1_file_read(argv[3], VECTORS_MAX_BYTES, &outs, &olen))
		goto out;
	ret = run_vectors(t, inp, ilen, outs, expect);
out:
	free(inp);
	free(outs);
	o1_tokenizer_destroy(t);
	return ret;
}
