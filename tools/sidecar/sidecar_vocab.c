/* See sidecar_vocab.h. The model stays open (its vocabulary backs the
 * tokenizer); its tensors are never read. */
#include <errno.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/log.h"
#include "model/model.h"
#include "sidecar_vocab.h"
#include "tokenizer/tokenizer.h"

struct o1_sidecar_vocab {
	struct o1_model *model;
	struct o1_tokenizer *tok;
	uint32_t ctx;
};

int o1_sidecar_vocab_open(const char *path, uint32_t max_context,
			  struct o1_sidecar_vocab **out)
{
	struct o1_sidecar_vocab *v = calloc(1, sizeof(*v));
	int err;

	if (!v)
		return -ENOMEM;
	err = o1_model_open(path, &v->model);
	if (err)
		goto fail;
	if (!v->model->vocab) {
		o1_warn("sidecar: %s has no vocabulary", path);
		err = -O1_E_MISSING;
		goto fail;
	}
	err = o1_tokenizer_create(v->model->vocab, &v->tok);
	if (err)
		goto fail;
	v->ctx = v->model->desc.max_context_tokens;
	if (max_context && max_context < v->ctx)
		v->ctx = max_context;
	*out = v;
	return 0;
fail:
	o1_sidecar_vocab_close(v);
	return err;
}

void o1_sidecar_vocab_close(struct o1_sidecar_vocab *v)
{
	if (!v)
		return;
	o1_tokenizer_destroy(v->tok);
	o1_model_close(v->model);
	free(v);
}

uint32_t o1_sidecar_vocab_context(const struct o1_sidecar_vocab *v)
{
	return v->ctx;
}

int o1_sidecar_vocab_text(const void *vp, uint32_t id, char *buf, size_t cap)
{
	const struct o1_sidecar_vocab *v = vp;
	int32_t one = (int32_t)id;
	int n;

	if (id >= o1_tokenizer_n_tokens(v->tok))
		return -O1_E_BOUNDS;
	n = o1_tokenizer_decode(v->tok, &one, 1, 0, buf, cap);
	return n < 0 ? n : (size_t)n < cap ? n : (int)cap - 1;
}
