/* o1model quant / dequant: raw rows through the GGUF block formats of
 * kernels/quant.h, so that any outside vector set can be checked against
 * the project's code:
 *   o1model quant TYPE --cols N IN.f32 OUT.bin
 *   o1model dequant TYPE --cols N IN.bin OUT.f32
 * IN.f32 / OUT.f32 are rows of N little-endian f32 values, row after row;
 * IN.bin / OUT.bin the rows' blocks, as a GGUF tensor of TYPE holds them.
 * A file that is not a whole number of rows is refused before anything is
 * written. Exit 0 ok, 1 failure, 2 bad arguments. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "kernels/quant.h"
#include "o1model.h"

struct quant_args {
	const char *cmd;
	enum o1_quant_type type;
	uint64_t cols;
	const char *in, *out;
	bool quantize; /* quant; false: dequant */
};

static void quant_usage(FILE *f, const char *cmd)
{
	fprintf(f,
		"usage: o1model %s q8_0|q4_0|q5_0|q4_k|q6_k --cols N IN OUT\n"
		"quant: IN rows of N f32 (little-endian, row-major) -> OUT the "
		"rows' GGUF blocks.\ndequant: the other way. N must be a "
		"multiple of the type's block (32; 256 for\nq4_k and q6_k).\n",
		cmd);
}

static int quant_parse(int argc, char **argv, struct quant_args *a)
{
	static const struct option longopts[] = {
	    {"cols", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int opt, err = 0;

	optind = 0;
	while (!err &&
	       (opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			quant_usage(stdout, a->cmd);
			exit(0);
		}
		err = opt == 'c' ? o1model_parse_u64(a->cmd, "--cols", optarg,
						     1, 1ull << 32, &a->cols)
				 : -EINVAL;
	}
	if (err)
		return err;
	if (argc - optind != 3 || !a->cols) {
		fprintf(stderr,
			"o1model %s: expected TYPE, --cols N, IN and "
			"OUT\n",
			a->cmd);
		return -EINVAL;
	}
	if (o1_quant_parse(argv[optind], &a->type)) {
		fprintf(stderr,
			"o1model %s: type '%s': expected "
			"q8_0|q4_0|q5_0|q4_k|q6_k\n",
			a->cmd, argv[optind]);
		return -EINVAL;
	}
	if (a->cols % o1_quant_block_elements(a->type)) {
		fprintf(stderr,
			"o1model %s: --cols %llu is not a multiple of "
			"%s's block of %u\n",
			a->cmd, (unsigned long long)a->cols,
			o1_quant_name(a->type),
			o1_quant_block_elements(a->type));
		return -EINVAL;
	}
	a->in = argv[optind + 1];
	a->out = argv[optind + 2];
	return 0;
}

/* Opens IN and checks that it holds whole rows of IN_ROW bytes; the row
 * count goes to *ROWS. */
static FILE *open_input(const struct quant_args *a, uint64_t in_row,
			uint64_t *rows)
{
	FILE *f = fopen(a->in, "rb");
	struct stat st;

	if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "o1model %s: %s: %s\n", a->cmd, a->in,
			f ? "not a regular file" : strerror(errno));
		if (f)
			fclose(f);
		return NULL;
	}
	if ((uint64_t)st.st_size % in_row != 0) {
		fprintf(stderr,
			"o1model %s: %s: %llu bytes is not a whole number of "
			"rows of %llu bytes (%llu columns of %s)\n",
			a->cmd, a->in, (unsigned long long)st.st_size,
			(unsigned long long)in_row, (unsigned long long)a->cols,
			a->quantize ? "f32" : o1_quant_name(a->type));
		fclose(f);
		return NULL;
	}
	*rows = (uint64_t)st.st_size / in_row;
	return f;
}

/* Converts one row from SRC into DST; -ERANGE names the row. */
static int convert_row(const struct quant_args *a, void *src, void *dst,
		       uint64_t r)
{
	int err = 0;

	if (a->quantize)
		err = o1_quant_quantize(a->type, src, dst, a->cols);
	else
		o1_quant_dequantize(a->type, src, dst, a->cols);
	if (err)
		fprintf(stderr,
			"o1model %s: %s: row %llu holds a NaN or an "
			"infinity\n",
			a->cmd, a->in, (unsigned long long)r);
	return err;
}

static int convert_rows(const struct quant_args *a, FILE *in, FILE *out,
			uint64_t rows, uint64_t in_row, uint64_t out_row)
{
	char *src = malloc(in_row), *dst = malloc(out_row);
	int err = src && dst ? 0 : -ENOMEM;

	for (uint64_t r = 0; !err && r < rows; r++) {
		if (fread(src, 1, in_row, in) != in_row) {
			fprintf(stderr,
				"o1model %s: %s: short read at row "
				"%llu\n",
				a->cmd, a->in, (unsigned long long)r);
			err = -EIO;
		}
		if (!err)
			err = convert_row(a, src, dst, r);
		if (!err && fwrite(dst, 1, out_row, out) != out_row) {
			fprintf(stderr, "o1model %s: %s: %s\n", a->cmd, a->out,
				strerror(errno));
			err = -EIO;
		}
	}
	free(src);
	free(dst);
	return err;
}

static int run(const struct quant_args *a)
{
	uint64_t qrow, frow = a->cols * sizeof(float), rows;
	uint64_t in_row, out_row;
	FILE *in, *out;
	int err;

	o1_quant_row_bytes(a->type, a->cols, &qrow);
	in_row = a->quantize ? frow : qrow;
	out_row = a->quantize ? qrow : frow;
	in = open_input(a, in_row, &rows);
	if (!in)
		return -EINVAL;
	out = fopen(a->out, "wb");
	if (!out) {
		err = -errno;
		fprintf(stderr, "o1model %s: %s: %s\n", a->cmd, a->out,
			strerror(-err));
		fclose(in);
		return err;
	}
	err = convert_rows(a, in, out, rows, in_row, out_row);
	fclose(in);
	if (fclose(out) != 0 && !err)
		err = -EIO;
	if (err)
		remove(a->out);
	else
		printf("%s %llu rows of %llu columns: %s -> %s\n",
		       o1_quant_name(a->type), (unsigned long long)rows,
		       (unsigned long long)a->cols, a->in, a->out);
	return err;
}

static int quant_main(int argc, char **argv, bool quantize)
{
	struct quant_args a = {.cmd = quantize ? "quant" : "dequant",
			       .quantize = quantize};

	if (quant_parse(argc, argv, &a)) {
		quant_usage(stderr, a.cmd);
		return 2;
	}
	return run(&a) ? 1 : 0;
}

int o1model_cmd_quant(int argc, char **argv)
{
	return quant_main(argc, argv, true);
}

int o1model_cmd_dequant(int argc, char **argv)
{
	return quant_main(argc, argv, false);
}
