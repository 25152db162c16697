/* o1model convert: reads any model o1_model_open takes and writes it as
 * GGUF or as a safetensors folder, keeping the tokenizer. The output dtype
 * is --dtype, else the source's float type (F16 for quantized sources);
 * --quantize writes GGUF in llama.cpp's block formats and type recipe
 * (quant_recipe.h). Exit 0 ok, 1 failure, 2 bad arguments. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "common/error.h"
#include "common/log.h"
#include "o1model.h"
#include "quant_recipe.h"

struct convert_args {
	const char *in, *out;
	enum o1model_format format;
	bool format_given;
	enum o1_dtype dtype;
	bool dtype_given;
	enum o1model_quant quant;
	bool quant_given;
};

static void convert_usage(FILE *f)
{
	fprintf(f, "usage: o1model convert IN OUT [--format gguf|safetensors] "
		   "[--dtype f32|f16|bf16]\n"
		   "                       [--quantize q8_0|q4_0|q5_0|q4_k_m|q6_k]\n"
		   "IN: a .gguf file or a Hugging Face folder. OUT: a .gguf "
		   "file or a folder\n(--format defaults from OUT's name). "
		   "--dtype defaults to the source's float\ntype, f16 for "
		   "quantized sources. --quantize writes GGUF in llama.cpp's\n"
		   "block formats and its per-tensor recipe (q4_k_m: Q4_K with "
		   "Q6_K for the LM\nhead and half of attn_v and ffn_down).\n");
}

static int parse_quant(const char *s, enum o1model_quant *out)
{
	if (o1model_quant_parse(s, out) == 0)
		return 0;
	fprintf(stderr,
		"o1model convert: --quantize '%s': expected "
		"q8_0|q4_0|q5_0|q4_k_m|q6_k\n",
		s);
	return -EINVAL;
}

/* --quantize writes GGUF, and takes no --dtype. */
static int check_quant(const struct convert_args *a)
{
	if (!a->quant_given)
		return 0;
	if (a->format != O1MODEL_FORMAT_GGUF || a->dtype_given) {
		fprintf(stderr, "o1model convert: --quantize writes GGUF (OUT "
				"ending in .gguf, or --format gguf) and takes "
				"no --dtype\n");
		return -EINVAL;
	}
	return 0;
}

static int convert_parse(int argc, char **argv, struct convert_args *a)
{
	static const struct option longopts[] = {
	    {"format", required_argument, NULL, 'f'},
	    {"dtype", required_argument, NULL, 'd'},
	    {"quantize", required_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int opt, err = 0;

	optind = 0;
	while (!err &&
	       (opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			convert_usage(stdout);
			exit(0);
		} else if (opt == 'f') {
			a->format_given = true;
			err =
			    o1model_parse_format("convert", optarg, &a->format);
		} else if (opt == 'd') {
			a->dtype_given = true;
			err = o1model_parse_dtype("convert", optarg, &a->dtype);
		} else if (opt == 'q') {
			a->quant_given = true;
			err = parse_quant(optarg, &a->quant);
		} else {
			err = -EINVAL;
		}
	}
	if (err)
		return err;
	if (argc - optind != 2) {
		fprintf(stderr, "o1model convert: expected IN and OUT\n");
		return -EINVAL;
	}
	a->in = argv[optind];
	a->out = argv[optind + 1];
	if (!a->format_given)
		a->format = o1model_format_for_path(a->out);
	return check_quant(a);
}

/* The source's float type: that of its token embedding (quantized: F16). */
static enum o1_dtype source_dtype(const struct o1_model *m)
{
	const struct o1_tensor *t = o1_model_tensor(m, O1_T_TOKEN_EMBD, -1);
	enum o1_dtype d = t ? t->dtype : O1_DTYPE_F32;

	if (d == O1_DTYPE_F32 || d == O1_DTYPE_F16 || d == O1_DTYPE_BF16)
		return d;
	o1_info("%s: token embedding is %s; writing f16 (use --dtype to "
		"choose)",
		m->path, o1_dtype_name(d));
	return O1_DTYPE_F16;
}

/* "wrote OUT: gguf, ARCH, N layers, P parameters, MIX (TYPE count, ...)" */
static void report_mix(const struct o1_model *m, enum o1model_quant q,
		       const enum o1_dtype *types, const char *out)
{
	uint32_t count[O1_DTYPE_BF16 + 1] = {0};
	uint64_t params = 0;

	for (uint32_t i = 0; i < m->n_tensors; i++) {
		params += o1_tensor_elements(&m->tensors[i]);
		if (m->tensors[i].n_dims > 1 && types[i] <= O1_DTYPE_BF16)
			count[types[i]]++;
	}
	printf("wrote %s: gguf, %s, %u layers, %llu parameters, %s (", out,
	       o1_arch_name(m->desc.arch), m->desc.n_layers,
	       (unsigned long long)params, o1model_quant_name(q));
	for (int t = 0, first = 1; t <= O1_DTYPE_BF16; t++)
		if (count[t]) {
			printf("%s%s %u", first ? "" : ", ",
			       o1_dtype_name((enum o1_dtype)t), count[t]);
			first = 0;
		}
	printf(" matrices)\n");
}

/* M as GGUF in the mix Q: the types of quant_recipe.h. */
static int write_quantized(const struct o1_model *m, enum o1model_quant q,
			   const char *out)
{
	enum o1_dtype *types = malloc(m->n_tensors * sizeof(*types));
	uint32_t ftype;
	int err;

	if (!types)
		return -ENOMEM;
	ftype = o1model_quant_types(m, q, types);
	err = o1_model_write_gguf_as(m, types, ftype, out);
	if (!err)
		report_mix(m, q, types, out);
	free(types);
	return err;
}

int o1model_cmd_convert(int argc, char **argv)
{
	struct convert_args a = {0};
	struct o1_model *m;
	int err;

	if (convert_parse(argc, argv, &a)) {
		convert_usage(stderr);
		return 2;
	}
	if (strcmp(a.in, a.out) == 0) {
		fprintf(stderr, "o1model convert: IN and OUT are the same\n");
		return 2;
	}
	err = o1_model_open(a.in, &m);
	if (err) {
		fprintf(stderr, "o1model convert: %s: %s\n", a.in,
			o1_strerror(err));
		return 1;
	}
	if (a.quant_given) {
		err = write_quantized(m, a.quant, a.out);
	} else {
		if (!a.dtype_given)
			a.dtype = source_dtype(m);
		err = o1model_write(m, a.format, a.dtype, a.out);
		if (!err)
			o1model_report(m, a.format, a.dtype, a.out, NULL);
	}
	o1_model_close(m);
	if (err) {
		fprintf(stderr, "o1model convert: %s: %s\n", a.out,
			o1_strerror(err));
		return 1;
	}
	return 0;
}
