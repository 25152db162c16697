/* bench_tokenize: encode and decode speed of the tokenizer on one core.
 *
 * usage: bench_tokenize [--mb N] [--file PATH] [--save PATH] VOCAB...
 * The text is English-like prose generated from a fixed word list with a
 * fixed seed (N MiB, default 8), or the contents of PATH. Each VOCAB
 * (anything o1_vocab_load_any takes) encodes the whole text in one call,
 * repeated until a second has passed; the best run, in this thread's CPU
 * time, is reported, then the ids are stream-decoded the same way. --save
 * writes the text used, to time other tokenizers on the same input. Exits
 * 77 when a VOCAB is missing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gpt2.h"

static const char *const words[] = {
    "the",	 "of",	       "and",	     "to",	   "in",
    "a",	 "is",	       "that",	     "for",	   "it",
    "as",	 "was",	       "with",	     "be",	   "by",
    "on",	 "not",	       "he",	     "I",	   "this",
    "are",	 "or",	       "his",	     "from",	   "at",
    "which",	 "but",	       "have",	     "an",	   "had",
    "they",	 "you",	       "were",	     "their",	   "one",
    "all",	 "we",	       "can",	     "her",	   "has",
    "there",	 "been",       "if",	     "more",	   "when",
    "will",	 "would",      "who",	     "so",	   "no",
    "daemon",	 "tokenizer",  "memory",     "request",	   "sequence",
    "model",	 "pages",      "latency",    "throughput", "kernel",
    "scheduler", "benchmark",  "vocabulary", "shared",	   "client",
    "process",	 "attention",  "inference",  "quickly",	   "without",
    "between",	 "different",  "important",  "government", "information",
    "something", "understand", "particular", "experience", "development",
    "it's",	 "don't",      "we're",	     "they've",	   "I'll",
};

static unsigned next(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return *seed >> 8;
}

/* Appends one sentence: 5-24 words, an occasional number or comma. */
static size_t sentence(unsigned *seed, char *out)
{
	size_t n = 0, count = 5 + next(seed) % 20;

	for (size_t i = 0; i < count; i++) {
		const char *w =
		    words[next(seed) % (sizeof(words) / sizeof(words[0]))];

		if (i)
			out[n++] = ' ';
		if (next(seed) % 23 == 0)
			n += (size_t)sprintf(out + n, "%u", next(seed) % 5000);
		else
			n += (size_t)sprintf(out + n, "%s%s", w,
					     next(seed) % 11 == 0 ? "," : "");
	}
	if (n)
		out[0] = (char)(out[0] >= 'a' && out[0] <= 'z' ? out[0] - 32
							       : out[0]);
	out[n++] = next(seed) % 9 == 0 ? '?' : '.';
	out[n++] = next(seed) % 6 == 0 ? '\n' : ' ';
	return n;
}

static char *make_text(size_t size, size_t *len)
{
	char *text = malloc(size + 1024);
	unsigned seed = 42;
	size_t n = 0;

	while (text && n < size)
		n += sentence(&seed, text + n);
	if (text)
		text[n] = 0;
	*len = n;
	return text;
}

static char *read_text(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	long size;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (size = ftell(f)) > 0 &&
	    !fseek(f, 0, SEEK_SET)) {
		text = malloc((size_t)size + 1);
		if (text && fread(text, 1, (size_t)size, f) != (size_t)size) {
			free(text);
			text = NULL;
		}
		*len = (size_t)size;
	}
	fclose(f);
	return text;
}

static int save_text(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(text, 1, len, f) == len;

	if (f && fclose(f))
		ok = 0;
	if (!ok)
		fprintf(stderr, "bench_tokenize: cannot write %s\n", path);
	return ok ? 0 : -EIO;
}

static double clock_s(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall time bounds the loops; each run is timed in this thread's CPU
 * time, so other processes on a shared machine do not count. */
static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

static double cpu_s(void)
{
	return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

/* Best seconds of encoding TEXT; the ids of the last run stay in IDS. */
static double time_encode(const struct o1_tokenizer *t, const char *text,
			  size_t len, int32_t *ids, int *n)
{
	double best = 1e30, start = now_s();

	do {
		double t0 = cpu_s(), dt;

		*n = o1_tokenizer_encode(t, text, len, 0, ids, len + 1);
		if (*n < 0)
			return -1;
		dt = cpu_s() - t0;
		if (dt < best)
			best = dt;
	} while (now_s() - start < 1.0);
	return best;
}

static double time_decode(const struct o1_tokenizer *t, const int32_t *ids,
			  int n, char *buf, size_t room)
{
	double best = 1e30, start = now_s();
	struct o1_detok d;

	do {
		double t0 = cpu_s(), dt;

		o1_tokenizer_decode_init(&d, 0);
		for (int i = 0; i < n; i++)
			if (o1_tokenizer_decode_step(t, &d, ids[i], buf, room) <
			    0)
				return -1;
		dt = cpu_s() - t0;
		if (dt < best)
			best = dt;
	} while (now_s() - start < 1.0);
	return best;
}

static int bench(const char *path, const char *text, size_t len)
{
	struct o1_tokenizer *t = NULL;
	struct o1_vocab *v;
	int32_t *ids = malloc((len + 1) * sizeof(*ids));
	char *buf = NULL;
	double enc, dec;
	int n, ret = o1_vocab_load_any(path, &v);

	if (ret || !ids)
		goto out;
	ret = o1_tokenizer_create(v, &t);
	o1_vocab_destroy(v);
	if (ret)
		goto out;
	buf = malloc(4 * (o1_tokenizer_max_piece(t) + 4));
	enc = buf ? time_encode(t, text, len, ids, &n) : -1;
	dec = enc > 0 ? time_decode(t, ids, n, buf,
				    4 * (o1_tokenizer_max_piece(t) + 4))
		      : -1;
	if (enc <= 0 || dec <= 0) {
		ret = -O1_E_TOKENIZER;
		goto out;
	}
	printf("%-60s encode %7.2f MB/s (%.2f M tokens/s, %.2f bytes/token)"
	       "  decode %7.1f MB/s\n",
	       path, (double)len / enc / 1e6, n / enc / 1e6, (double)len / n,
	       (double)len / dec / 1e6);
out:
	if (ret)
		fprintf(stderr, "bench_tokenize: %s: %s\n", path,
			o1_strerror(ret));
	free(buf);
	free(ids);
	o1_tokenizer_destroy(t);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *file = NULL, *save = NULL;
	size_t len, mb = 8;
	struct stat st;
	char *text;
	int i, ret = 0;

	for (i = 1; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "--mb"))
			mb = (size_t)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--file"))
			file = argv[i + 1];
		else if (!strcmp(argv[i], "--save"))
			save = argv[i + 1];
		else
			break;
	}
	if (i >= argc || argv[i][0] == '-' || !mb) {
		fprintf(stderr, "usage: bench_tokenize [--mb N] [--file PATH] "
				"[--save PATH] VOCAB...\n");
		return 2;
	}
	for (int k = i; k < argc; k++)
		if (stat(argv[k], &st) != 0) {
			fprintf(stderr, "bench_tokenize: %s missing: skipped\n",
				argv[k]);
			return 77;
		}
	o1_log_set_level(O1_LOG_WARN);
	text = file ? read_text(file, &len) : make_text(mb << 20, &len);
	if (!text) {
		fprintf(stderr, "bench_tokenize: no text: %s\n",
			file ? file : "out of memory");
		return 1;
	}
	printf("text: %s, %zu bytes\n", file ? file : "generated English", len);
	if (save && save_text(save, text, len))
		ret = 1;
	for (; i < argc; i++)
		ret |= bench(argv[i], text, len);
	free(text);
	return ret;
}
