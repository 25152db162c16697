/* The served model's vocabulary and context length, read by the sidecar
 * itself from model.path (the config o1d reads): names for top_logprobs
 * alternatives, and the default max_tokens (the context, as
 * model.max_context_tokens bounds it, like o1d's per-request limit).
 * Optional: without it alternatives are named "<id>" and a request without
 * max_tokens gets libo1client's default. Read-only once open, so every
 * connection thread may use it. */
#ifndef O1_SIDECAR_VOCAB_H
#define O1_SIDECAR_VOCAB_H

#include <stddef.h>
#include <stdint.h>

struct o1_sidecar_vocab;

/* Opens the model at PATH for its vocabulary (tensors are not read).
 * MAX_CONTEXT: model.max_context_tokens (0: the model's own). Returns 0,
 * -O1_E_MISSING (no vocabulary) or the loader's error (logged). */
int o1_sidecar_vocab_open(const char *path, uint32_t max_context,
			  struct o1_sidecar_vocab **out);
void o1_sidecar_vocab_close(struct o1_sidecar_vocab *v);
uint32_t o1_sidecar_vocab_context(const struct o1_sidecar_vocab *v);
/* The text of token ID (special tokens included) into BUF (CAP bytes,
 * NUL-terminated, cut when longer). Returns its length or a negative
 * error (-O1_E_BOUNDS for an id out of range). V is a const void * so it
 * fits o1_sidecar_out's name callback. */
int o1_sidecar_vocab_text(const void *v, uint32_t id, char *buf, size_t cap);

#endif
