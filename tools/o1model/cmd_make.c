/* o1model make: writes a model with deterministic random weights, the
 * shape of a preset, and a working tokenizer; or, with --preset demo, the
 * bigram model of a text (demo.h). Exit 0 ok, 1 failure, 2 bad
 * arguments. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "demo.h"
#include "common/error.h"
#include "o1model.h"
#include "synth.h"

struct make_args {
	struct o1model_synth_opts synth;
	struct o1model_demo_opts demo;
	bool shape_given; /* an option --preset demo does not take */
	enum o1model_format format;
	bool format_given;
	const char *out;
};

static void make_usage(FILE *f)
{
	fprintf(f,
		"usage: o1model make --preset tiny|qwen2.5-0.5b|llama3.2-1b|"
		"llama3-8b --out PATH\n"
		"                    [--arch llama|qwen2|mistral] [--layers N] "
		"[--vocab N] [--ctx N]\n"
		"                    [--seed N] [--dtype f32|f16|bf16] "
		"[--format gguf|safetensors]\n"
		"                    [--tokenizer FILE] [--threads N]\n"
		"       o1model make --preset demo [--from-text FILE]... "
		"--out PATH\n"
		"                    [--dtype f32|f16|bf16] "
		"[--format gguf|safetensors]\n"
		"Writes random weights (normal, std 0.02; same arguments, same "
		"bytes, whatever\n--threads). Defaults: --seed 0, --dtype f32, "
		"--format from PATH (.gguf or a\nfolder), the preset's family and "
		"sizes, a small built-in byte-level BPE\ntokenizer, --threads "
		"the online CPUs.\n"
		"--preset demo writes a bigram model of the texts (default: "
		"README.md and\ndocs/*.md of the source tree) as transformer "
		"weights: it writes readable\ntext without any training.\n");
}

static int parse_arch(const char *s, enum o1_arch *out)
{
	for (int a = 0; a < O1_ARCH_COUNT; a++)
		if (strcmp(s, o1_arch_name((enum o1_arch)a)) == 0) {
			*out = (enum o1_arch)a;
			return 0;
		}
	fprintf(stderr,
		"o1model make: --arch '%s': expected "
		"llama|qwen2|mistral\n",
		s);
	return -EINVAL;
}

static int make_option(int opt, struct make_args *a)
{
	struct o1model_synth_opts *s = &a->synth;
	uint64_t x;
	int err;

	if (opt != 'p' && opt != 'd' && opt != 'f' && opt != 'o' && opt != 'x')
		a->shape_given = true;
	switch (opt) {
	case 'x':
		if (a->demo.n_texts == O1MODEL_DEMO_MAX_TEXTS) {
			fprintf(stderr,
				"o1model make: more than %d --from-text\n",
				O1MODEL_DEMO_MAX_TEXTS);
			return -EINVAL;
		}
		a->demo.texts[a->demo.n_texts++] = optarg;
		return 0;
	case 'a':
		s->arch_given = true;
		return parse_arch(optarg, &s->arch);
	case 'p':
		s->preset = optarg;
		return 0;
	case 'l':
		err =
		    o1model_parse_u64("make", "--layers", optarg, 1, 1024, &x);
		s->layers = (uint32_t)x;
		return err;
	case 'v':
		err = o1model_parse_u64("make", "--vocab", optarg, 1, 1u << 24,
					&x);
		s->vocab = (uint32_t)x;
		return err;
	case 'c':
		err =
		    o1model_parse_u64("make", "--ctx", optarg, 1, 1u << 24, &x);
		s->ctx = (uint32_t)x;
		return err;
	case 's':
		return o1model_parse_u64("make", "--seed", optarg, 0,
					 UINT64_MAX, &s->seed);
	case 'd':
		return o1model_parse_dtype("make", optarg, &s->dtype);
	case 'f':
		a->format_given = true;
		return o1model_parse_format("make", optarg, &a->format);
	case 'o':
		a->out = optarg;
		return 0;
	case 't':
		s->tokenizer = optarg;
		return 0;
	case 'j':
		err = o1model_parse_u64("make", "--threads", optarg, 1, 256,
					&x);
		s->n_threads = (uint32_t)x;
		return err;
	default:
		return -EINVAL;
	}
}

static bool is_demo(const struct make_args *a)
{
	return strcmp(a->synth.preset, "demo") == 0;
}

static int demo_check(const struct make_args *a)
{
	if (is_demo(a) && a->shape_given) {
		fprintf(stderr, "o1model make: --preset demo takes only "
				"--from-text, --dtype, --format and --out\n");
		return -EINVAL;
	}
	if (!is_demo(a) && a->demo.n_texts) {
		fprintf(stderr,
			"o1model make: --from-text needs --preset demo\n");
		return -EINVAL;
	}
	return 0;
}

static int make_parse(int argc, char **argv, struct make_args *a)
{
	static const struct option longopts[] = {
	    {"arch", required_argument, NULL, 'a'},
	    {"preset", required_argument, NULL, 'p'},
	    {"layers", required_argument, NULL, 'l'},
	    {"vocab", required_argument, NULL, 'v'},
	    {"ctx", required_argument, NULL, 'c'},
	    {"seed", required_argument, NULL, 's'},
	    {"dtype", required_argument, NULL, 'd'},
	    {"format", required_argument, NULL, 'f'},
	    {"out", required_argument, NULL, 'o'},
	    {"tokenizer", required_argument, NULL, 't'},
	    {"from-text", required_argument, NULL, 'x'},
	    {"threads", required_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int opt;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			make_usage(stdout);
			exit(0);
		}
		if (opt == '?' || make_option(opt, a))
			return -EINVAL;
	}
	if (optind < argc || !a->synth.preset || !a->out) {
		fprintf(stderr, "o1model make: %s\n",
			optind < argc ? "unexpected argument"
				      : "--preset and --out are required");
		return -EINVAL;
	}
	if (!a->format_given)
		a->format = o1model_format_for_path(a->out);
	return demo_check(a);
}

int o1model_cmd_make(int argc, char **argv)
{
	struct make_args a = {.synth.dtype = O1_DTYPE_F32};
	struct o1_model *m;
	char *dir_copy, note[64];
	int err;

	if (make_parse(argc, argv, &a)) {
		make_usage(stderr);
		return 2;
	}
	dir_copy = strdup(a.out);
	if (!dir_copy)
		return 1;
	a.synth.scratch_dir = dirname(dir_copy);
	a.demo.dtype = a.synth.dtype;
	if (is_demo(&a))
		err = o1model_demo_create(&a.demo, &m);
	else
		err = o1model_synth_create(&a.synth, &m);
	if (err == -EINVAL) {
		free(dir_copy);
		return 2;
	}
	if (!err) {
		err = o1model_write(m, a.format, a.synth.dtype, a.out);
		snprintf(note, sizeof(note), "random weights, seed %llu",
			 (unsigned long long)a.synth.seed);
		if (is_demo(&a))
			snprintf(note, sizeof(note), "bigram demo model");
		if (!err)
			o1model_report(m, a.format, a.synth.dtype, a.out, note);
		o1_model_close(m);
	}
	free(dir_copy);
	if (err) {
		fprintf(stderr, "o1model make: %s: %s\n", a.out,
			o1_strerror(err));
		return 1;
	}
	return 0;
}
