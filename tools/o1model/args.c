/* Option parsing and output shared by the o1model subcommands. */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/log.h"

int o1model_parse_u64(const char *cmd, const char *opt, const char *s,
		      uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = isdigit((unsigned char)s[0]) ? strtoull(s, &end, 10) : 0;
	if (!isdigit((unsigned char)s[0]) || errno || *end || x < min ||
	    x > max) {
		fprintf(stderr,
			"o1model %s: %s '%s': expected a whole number "
			"%llu..%llu\n",
			cmd, opt, s, (unsigned long long)min,
			(unsigned long long)max);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

int o1model_parse_dtype(const char *cmd, const char *s, enum o1_dtype *out)
{
	static const struct {
		const char *name;
		enum o1_dtype dtype;
	} names[] = {{"f32", O1_DTYPE_F32},
		     {"f16", O1_DTYPE_F16},
		     {"bf16", O1_DTYPE_BF16}};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0) {
			*out = names[i].dtype;
			return 0;
		}
	fprintf(stderr, "o1model %s: --dtype '%s': expected f32|f16|bf16\n",
		cmd, s);
	return -EINVAL;
}

int o1model_parse_format(const char *cmd, const char *s,
			 enum o1model_format *out)
{
	if (strcmp(s, "gguf") == 0)
		*out = O1MODEL_FORMAT_GGUF;
	else if (strcmp(s, "safetensors") == 0 || strcmp(s, "hf") == 0)
		*out = O1MODEL_FORMAT_SAFETENSORS;
	else {
		fprintf(stderr,
			"o1model %s: --format '%s': expected "
			"gguf|safetensors\n",
			cmd, s);
		return -EINVAL;
	}
	return 0;
}

enum o1model_format o1model_format_for_path(const char *path)
{
	size_t n = strlen(path);

	return n > 5 && strcmp(path + n - 5, ".gguf") == 0
		   ? O1MODEL_FORMAT_GGUF
		   : O1MODEL_FORMAT_SAFETENSORS;
}

int o1model_write(const struct o1_model *m, enum o1model_format format,
		  enum o1_dtype dtype, const char *out)
{
	int err;

	if (format == O1MODEL_FORMAT_GGUF)
		return o1_model_write_gguf(m, dtype, out);
	if (mkdir(out, 0755) != 0 && errno != EEXIST) {
		err = -errno;
		o1_err("mkdir %s: %s", out, strerror(errno));
		return err;
	}
	return o1_model_write_hf(m, dtype, out);
}

void o1model_report(const struct o1_model *m, enum o1model_format format,
		    enum o1_dtype dtype, const char *out, const char *note)
{
	uint64_t params = 0;

	for (uint32_t i = 0; i < m->n_tensors; i++)
		params += o1_tensor_elements(&m->tensors[i]);
	printf("wrote %s: %s, %s, %u layers, %llu parameters, %s%s%s\n", out,
	       format == O1MODEL_FORMAT_GGUF ? "gguf" : "safetensors",
	       o1_arch_name(m->desc.arch), m->desc.n_layers,
	       (unsigned long long)params, o1_dtype_name(dtype),
	       note ? ", " : "", note ? note : "");
}
