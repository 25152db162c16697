/* Helpers the o1model subcommands share: strict option values and the
 * output step. Parsers print "o1model CMD: ..." on stderr and return
 * -EINVAL on bad input, for an exit status of 2. */
#ifndef O1MODEL_ARGS_H
#define O1MODEL_ARGS_H

#include <stdint.h>

#include "model/model.h"

enum o1model_format {
	O1MODEL_FORMAT_GGUF,
	O1MODEL_FORMAT_SAFETENSORS,
};

int o1model_parse_u64(const char *cmd, const char *opt, const char *s,
		      uint64_t min, uint64_t max, uint64_t *out);
/* f32|f16|bf16 */
int o1model_parse_dtype(const char *cmd, const char *s, enum o1_dtype *out);
/* gguf|safetensors */
int o1model_parse_format(const char *cmd, const char *s,
			 enum o1model_format *out);
/* gguf for a name ending in .gguf, else safetensors (a folder). */
enum o1model_format o1model_format_for_path(const char *path);

/* Writes M to OUT (a .gguf file or a folder, created when missing). */
int o1model_write(const struct o1_model *m, enum o1model_format format,
		  enum o1_dtype dtype, const char *out);

/* Prints "wrote OUT: FORMAT, ARCH, N layers, P parameters, DTYPE" and
 * NOTE (may be NULL) as one line on stdout. */
void o1model_report(const struct o1_model *m, enum o1model_format format,
		    enum o1_dtype dtype, const char *out, const char *note);

#endif
