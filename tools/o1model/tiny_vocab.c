/* A small byte-level BPE vocabulary, learned at run time from a text held
 * in this file by bpe_train.c's deterministic trainer, so random test
 * models carry a real, working tokenizer.
 *
 * Invariant: only pairs that occur at least twice in the text are merged
 * (up to O1MODEL_TINY_MERGES; the text runs out of them first) and no BOS
 * is added, so the vocabulary, and every model file that carries it, is
 * byte-identical to the one the tool has always written. */
#include "tiny_vocab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_train.h"

static const char train_text[] =
    "o1d is a resident inference daemon for Linux. It keeps one language "
    "model on a GPU, or on the CPU, with a paged cache of keys and "
    "values, and it serves the processes on the same machine through "
    "shared memory rings. A client writes a request into its submission "
    "ring and publishes the tail with a release store; the daemon reads "
    "the entry, copies it out of shared memory before it checks it, "
    "turns the prompt into tokens, and queues it. The scheduler forms "
    "the next step from the running sequences and the waiting prompts, "
    "within a budget of tokens and the free pages of the cache. The "
    "engine runs the step, samples the next token of every sequence, and "
    "the daemon appends the tokens and the text they decode to to the "
    "completion ring of each client. When there is nothing to do, the "
    "daemon sleeps in io_uring until a client rings its doorbell.\n"
    "The model comes from a GGUF file or from a folder of safetensors "
    "files with a config.json beside them. Both load into one "
    "description: the architecture, the number of layers, the hidden "
    "size, the number of attention heads and of key and value heads, the "
    "size of each head, the size of the feed forward layer, the size of "
    "the vocabulary, the longest context, the rotary position settings "
    "and the norm epsilon. Every tensor is checked against the shape the "
    "description implies before the daemon trusts it. A file that is "
    "truncated, that lies about its sizes, or that names a type the "
    "daemon does not know is refused with a clear message, never a "
    "crash.\n"
    "Decode steps run as captured graphs, one for each bucket of batch "
    "sizes, so that launching a step costs one call. A batch that fits "
    "no bucket runs eagerly, and the daemon counts the hits, the misses "
    "and the fallbacks. Counters and latency histograms live in maps "
    "that the kernel keeps, so an operator can read them at any time "
    "without asking the daemon. The tool o1model makes random models "
    "with the shapes of real ones, converts between the two formats, and "
    "prints what a model file holds. The weights it writes are random "
    "numbers from a seeded generator, so the same arguments always give "
    "the same bytes, and tests can compare them bit for bit.\n"
    "Hello, world! How are you today? I am fine, thank you. What is the "
    "time? It is 12:30, and the weather is warm. The quick brown fox "
    "jumps over the lazy dog. 0 1 2 3 4 5 6 7 8 9 10 100 1000 2026.\n";

int o1model_tiny_vocab_build(struct o1_vocab **out)
{
	struct o1_vocab *v;
	int err = o1model_bpe_train(train_text, sizeof(train_text) - 1,
				    O1MODEL_TINY_MERGES, 2, &v);

	if (err)
		return err;
	v->add_bos = false; /* random models never asked for a BOS */
	*out = v;
	return 0;
}

static int grow(void **p, size_t elem, uint32_t n)
{
	void *q = realloc(*p, elem * n);

	if (!q)
		return -ENOMEM;
	*p = q;
	return 0;
}

int o1model_vocab_pad(struct o1_vocab *v, uint32_t n_tokens)
{
	char name[32];
	uint32_t old = v->n_tokens;

	if (n_tokens < old)
		return -EINVAL;
	if (grow((void **)&v->tokens, sizeof(char *), n_tokens) ||
	    (v->scores && grow((void **)&v->scores, sizeof(float), n_tokens)) ||
	    (v->types && grow((void **)&v->types, sizeof(int32_t), n_tokens)))
		return -ENOMEM;
	for (uint32_t i = old; i < n_tokens; i++) {
		snprintf(name, sizeof(name), "<|unused_%u|>", i - old);
		v->tokens[i] = o1_vocab_strdup(v, name, strlen(name));
		if (!v->tokens[i])
			return -ENOMEM;
		if (v->scores)
			v->scores[i] = 0;
		if (v->types)
			v->types[i] = O1_TOKEN_UNUSED;
		v->n_tokens = i + 1;
	}
	return 0;
}
