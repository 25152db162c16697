/* Mistral v3's shape as a tokenizer.json: see tok_fixture_mistral.h. */
#include "tok_fixture_mistral.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const controls[TOK_MISTRAL_N_CONTROLS] = {
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[TOOL_CALLS]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[ARGS]",
};

/* The tokenizer.json: added tokens (all special), the byte tokens, U+2581,
 * no merges; a Prepend/Replace normalizer and a ByteFallback decoder. */
static char *mistral_json(void)
{
	cJSON *root = cJSON_CreateObject(), *added, *model, *vocab, *norm;
	char name[8], *s;

	added = cJSON_AddArrayToObject(root, "added_tokens");
	model = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(model, "type", "BPE");
	cJSON_AddStringToObject(model, "unk_token", "<unk>");
	cJSON_AddBoolToObject(model, "byte_fallback", 1);
	vocab = cJSON_AddObjectToObject(model, "vocab");
	cJSON_AddArrayToObject(model, "merges");
	for (int i = 0; i < TOK_MISTRAL_N_CONTROLS; i++) {
		cJSON *t = cJSON_CreateObject();

		cJSON_AddNumberToObject(t, "id", i);
		cJSON_AddStringToObject(t, "content", controls[i]);
		cJSON_AddBoolToObject(t, "special", 1);
		cJSON_AddItemToArray(added, t);
		cJSON_AddNumberToObject(vocab, controls[i], i);
	}
	for (int b = 0; b < 256; b++) {
		snprintf(name, sizeof(name), "<0x%02X>", b);
		cJSON_AddNumberToObject(vocab, name, TOK_MISTRAL_BYTE(b));
	}
	cJSON_AddNumberToObject(vocab, "\xe2\x96\x81", TOK_MISTRAL_SPACE);
	norm =
	    cJSON_Parse("{\"type\":\"Sequence\",\"normalizers\":["
			"{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
			"{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
			"\"content\":\"\xe2\x96\x81\"}]}");
	cJSON_AddItemToObject(root, "normalizer", norm);
	cJSON_AddNullToObject(root, "pre_tokenizer");
	cJSON_AddItemToObject(
	    root, "decoder",
	    cJSON_Parse("{\"type\":\"Sequence\",\"decoders\":[{\"type\":"
			"\"ByteFallback\"}]}"));
	s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return s;
}

int tok_fixture_mistral_v3(struct o1_vocab **out)
{
	char path[] = "/tmp/o1-test-mistral-XXXXXX";
	char *json = mistral_json();
	int fd = mkstemp(path), ret = -1;

	*out = NULL;
	if (json && fd >= 0)
		ret = write(fd, json, strlen(json)) == (ssize_t)strlen(json)
			  ? 0
			  : -1;
	if (fd >= 0)
		close(fd);
	if (!ret && o1_vocab_load_tokenizer_json(path, out))
		ret = -1;
	if (fd >= 0)
		unlink(path);
	free(json);
	return ret;
}
