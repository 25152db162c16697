/* Hand-built vocabularies: see tok_fixture.h. */
#include "tok_fixture.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* "left right" in the GPT-2 byte mapping (Ġ is a space). */
static const char *const bpe_merges[] = {
    "Ġ t",  "h e",     "Ġt he", "i n",	"Ġ w",	 "o r",	   "Ġw or",
    "l d",  "Ġwor ld", "H e",	"l l",	"He ll", "Hell o", "1 2",
    "12 3", "4 5",     "e r",	"Ġ Ġ",	"ĠĠ Ġ",	 "Ċ Ċ",	   "Ġ ð",
    "ð Ł",  "Ġt h",    "Ġ a",	"Ġa b", "a b",	 "b c",	   "' S",
};

static const struct {
	const char *text;
	float score;
} spm_pieces[] = {
    {"▁", -1},	    {"h", -2},	{"e", -2},  {"l", -2},	  {"o", -2},
    {"w", -2},	    {"r", -2},	{"d", -2},  {"a", -2},	  {"b", -2},
    {"c", -2},	    {"▁h", -3}, {"ll", -4}, {"▁he", -5},  {"▁hell", -6},
    {"▁hello", -7}, {"▁w", -3}, {"or", -4}, {"▁wor", -5}, {"ld", -4},
    {"▁world", -6}, {"ab", -3}, {"bc", -3}, {"é", -2},	  {"▁▁", -8},
    {"<user>", 0},
};

int tok_fixture_id(const struct o1_vocab *v, const char *text)
{
	for (uint32_t i = 0; i < v->n_tokens; i++)
		if (v->tokens[i] && strcmp(v->tokens[i], text) == 0)
			return (int)i;
	return -1;
}

static int set_token(struct o1_vocab *v, uint32_t id, const char *s,
		     int32_t type)
{
	v->tokens[id] = o1_vocab_strdup(v, s, strlen(s));
	v->types[id] = type;
	return v->tokens[id] ? 0 : -ENOMEM;
}

/* UTF-8 of the GPT-2 mapped character of byte B. */
static void byte_char(unsigned b, char out[4])
{
	unsigned cp = b;

	if (b <= 32)
		cp = 256 + b;
	else if (b >= 127 && b <= 160)
		cp = 289 + (b - 127);
	else if (b == 173)
		cp = 323;
	if (cp < 0x80) {
		out[0] = (char)cp;
		out[1] = 0;
	} else {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		out[2] = 0;
	}
}

static int bpe_merge_token(struct o1_vocab *v, uint32_t *n, const char *m)
{
	const char *sp = strchr(m, ' ');
	char joined[64];

	snprintf(joined, sizeof(joined), "%.*s%s", (int)(sp - m), m, sp + 1);
	if (tok_fixture_id(v, joined) >= 0)
		return 0;
	return set_token(v, (*n)++, joined, O1_TOKEN_NORMAL);
}

int tok_fixture_bpe(const char *pre, bool ignore_merges, struct o1_vocab **out)
{
	uint32_t nm = sizeof(bpe_merges) / sizeof(bpe_merges[0]), n = 256;
	struct o1_vocab *v;
	int ret = o1_vocab_create(256 + nm + 3, nm, &v);

	for (unsigned b = 0; !ret && b < 256; b++) {
		char s[4];

		byte_char(b, s);
		ret = set_token(v, b, s, O1_TOKEN_NORMAL);
	}
	for (uint32_t i = 0; !ret && i < nm; i++) {
		v->merges[i] =
		    o1_vocab_strdup(v, bpe_merges[i], strlen(bpe_merges[i]));
		ret = v->merges[i] ? bpe_merge_token(v, &n, bpe_merges[i])
				   : -ENOMEM;
	}
	if (!ret) /* a token no merge makes: reached through ignore_merges */
		ret = set_token(v, n++, "xyz", O1_TOKEN_NORMAL);
	if (!ret)
		ret = set_token(v, n++, "<|endoftext|>", O1_TOKEN_CONTROL);
	if (!ret)
		ret = set_token(v, n++, "<|user|>", O1_TOKEN_USER_DEFINED);
	if (ret) {
		o1_vocab_destroy(v);
		return ret;
	}
	v->n_tokens = n; /* merges that repeat a token left slots unused */
	v->kind = O1_VOCAB_BPE;
	snprintf(v->pre, sizeof(v->pre), "%s", pre);
	v->ignore_merges = ignore_merges;
	v->bos_id = v->eos_id = (int32_t)n - 2;
	*out = v;
	return 0;
}

int tok_fixture_spm(struct o1_vocab **out)
{
	uint32_t np = sizeof(spm_pieces) / sizeof(spm_pieces[0]);
	struct o1_vocab *v;
	int ret = o1_vocab_create(259 + np, 0, &v);

	if (!ret)
		ret = set_token(v, 0, "<unk>", O1_TOKEN_UNKNOWN);
	if (!ret)
		ret = set_token(v, 1, "<s>", O1_TOKEN_CONTROL);
	if (!ret)
		ret = set_token(v, 2, "</s>", O1_TOKEN_CONTROL);
	for (unsigned b = 0; !ret && b < 256; b++) {
		char s[8];

		snprintf(s, sizeof(s), "<0x%02X>", b);
		ret = set_token(v, 3 + b, s, O1_TOKEN_BYTE);
	}
	for (uint32_t i = 0; !ret && i < np; i++) {
		bool user = spm_pieces[i].text[0] == '<';

		ret = set_token(v, 259 + i, spm_pieces[i].text,
				user ? O1_TOKEN_USER_DEFINED : O1_TOKEN_NORMAL);
		v->scores[259 + i] = spm_pieces[i].score;
	}
	if (ret) {
		o1_vocab_destroy(v);
		return ret;
	}
	v->kind = O1_VOCAB_SPM;
	strcpy(v->pre, "default");
	v->unk_id = 0;
	v->bos_id = 1;
	v->eos_id = 2;
	v->add_bos = true;
	v->add_space_prefix = true;
	*out = v;
	return 0;
}
