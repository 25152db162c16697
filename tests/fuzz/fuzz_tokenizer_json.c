/* libFuzzer harness for the tokenizer.json reader: the input is loaded
 * from a memfd (so no tokenizer_config.json sits beside it); a vocabulary
 * that loads must be complete, and writing and reloading it must give the
 * same vocabulary (except SentencePiece ones without merges, whose merges
 * the writer derives from scores). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/vocab.h"

static char out_dir[64];

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_vocab(const struct o1_vocab *a, const struct o1_vocab *b)
{
	bool ok = a->kind == b->kind && strcmp(a->pre, b->pre) == 0 &&
		  a->n_tokens == b->n_tokens && a->n_merges == b->n_merges &&
		  a->bos_id == b->bos_id && a->eos_id == b->eos_id &&
		  a->unk_id == b->unk_id && a->pad_id == b->pad_id &&
		  a->add_bos == b->add_bos && a->add_eos == b->add_eos &&
		  a->add_space_prefix == b->add_space_prefix &&
		  a->ignore_merges == b->ignore_merges &&
		  same_str(a->chat_template, b->chat_template);

	for (uint32_t i = 0; ok && i < a->n_tokens; i++)
		ok = same_str(a->tokens[i], b->tokens[i]) &&
		     a->types[i] == b->types[i] &&
		     memcmp(&a->scores[i], &b->scores[i], sizeof(float)) == 0;
	for (uint32_t i = 0; ok && i < a->n_merges; i++)
		ok = same_str(a->merges[i], b->merges[i]);
	return ok;
}

static void remove_out_dir(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/tokenizer.json", out_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/tokenizer_config.json", out_dir);
	unlink(path);
	rmdir(out_dir);
}

static void check(const struct o1_vocab *v)
{
	struct o1_vocab *back;
	char path[128];

	for (uint32_t i = 0; i < v->n_tokens; i++)
		if (!v->tokens[i])
			abort();
	if (v->bos_id >= (int32_t)v->n_tokens ||
	    v->eos_id >= (int32_t)v->n_tokens ||
	    v->unk_id >= (int32_t)v->n_tokens)
		abort();
	if (!out_dir[0]) {
		strcpy(out_dir, "/tmp/o1_fuzz_tj_XXXXXX");
		if (!mkdtemp(out_dir))
			abort();
		atexit(remove_out_dir);
	}
	if (o1_vocab_write_tokenizer_json(v, out_dir) != 0)
		abort();
	snprintf(path, sizeof(path), "%s/tokenizer.json", out_dir);
	if (o1_vocab_load_tokenizer_json(path, &back) != 0)
		abort();
	if ((v->kind != O1_VOCAB_SPM || v->n_merges) && !same_vocab(v, back))
		abort();
	o1_vocab_destroy(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct o1_vocab *v;
	char path[64];
	int fd = memfd_create("tokenizer.json", MFD_CLOEXEC);

	if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (o1_vocab_load_tokenizer_json(path, &v) == 0) {
		check(v);
		o1_vocab_destroy(v);
	}
	close(fd);
	return 0;
}
