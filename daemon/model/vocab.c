/* struct o1_vocab storage: arrays sized at creation, strings malloc'd. */
#include "vocab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int o1_vocab_create(uint32_t n_tokens, uint32_t n_merges,
		    struct o1_vocab **out)
{
	struct o1_vocab *v = calloc(1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	v->n_tokens = n_tokens;
	v->n_merges = n_merges;
	v->tokens = calloc(n_tokens ? n_tokens : 1, sizeof(char *));
	v->scores = calloc(n_tokens ? n_tokens : 1, sizeof(float));
	v->types = calloc(n_tokens ? n_tokens : 1, sizeof(int32_t));
	v->merges = calloc(n_merges ? n_merges : 1, sizeof(char *));
	if (!v->tokens || !v->scores || !v->types || !v->merges) {
		o1_vocab_destroy(v);
		return -ENOMEM;
	}
	v->bos_id = v->eos_id = v->unk_id = v->pad_id = -1;
	strcpy(v->pre, "default");
	*out = v;
	return 0;
}

void o1_vocab_destroy(struct o1_vocab *v)
{
	if (!v)
		return;
	for (uint32_t i = 0; v->tokens && i < v->n_tokens; i++)
		free(v->tokens[i]);
	for (uint32_t i = 0; v->merges && i < v->n_merges; i++)
		free(v->merges[i]);
	free(v->tokens);
	free(v->scores);
	free(v->types);
	free(v->merges);
	free(v->chat_template);
	free(v);
}

char *o1_vocab_strdup(struct o1_vocab *v, const char *s, uint64_t len)
{
	char *copy;

	(void)v;
	copy = malloc(len + 1);
	if (!copy)
		return NULL;
	memcpy(copy, s, len);
	copy[len] = 0;
	return copy;
}

int o1_vocab_fill_holes(struct o1_vocab *v)
{
	char name[32];

	for (uint32_t id = 0; id < v->n_tokens; id++) {
		if (v->tokens[id])
			continue;
		snprintf(name, sizeof(name), "<|unused_%u|>", id);
		v->tokens[id] = o1_vocab_strdup(v, name, strlen(name));
		if (!v->tokens[id])
			return -ENOMEM;
		v->types[id] = O1_TOKEN_UNUSED;
	}
	return 0;
}
