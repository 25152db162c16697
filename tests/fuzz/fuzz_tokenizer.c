/* Fuzz harness for the tokenizer over built-in vocabularies (no files).
 *
 * Input: byte 0 picks the vocabulary (GPT-2 BPE, Llama-3 BPE with
 * ignore_merges, SentencePiece) and the encode flags; the rest is text.
 * With bit 7 of byte 0 set, the rest is NUL-separated role/content pairs
 * rendered by three real chat templates (chatml, llama3, mistral) instead,
 * whole and into a short buffer, which must hold the same prefix.
 * Checks: encode fails only on invalid UTF-8 and then with
 * -O1_E_TOKENIZER; decode(encode(text)) == text where the algorithm keeps
 * text exactly; the same bytes read as token ids stream-decode to valid
 * UTF-8. Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer/tok_fixture.h"
#include "tokenizer/chat_template.h"
#include "common/error.h"
#include "common/log.h"
#include "tokenizer/tokenizer.h"

static struct o1_tokenizer *toks[3];

static void init(void)
{
	struct o1_vocab *v[3] = {NULL, NULL, NULL};

	o1_log_set_level(O1_LOG_ERROR);
	if (tok_fixture_bpe("gpt2", false, &v[0]) ||
	    tok_fixture_bpe("llama-bpe", true, &v[1]) || tok_fixture_spm(&v[2]))
		abort();
	for (int i = 0; i < 3; i++) {
		if (o1_tokenizer_create(v[i], &toks[i]))
			abort();
		o1_vocab_destroy(v[i]);
	}
}

/* Independent check of RFC 3629 UTF-8. */
static int utf8_ok(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint32_t cp, len = s[i] < 0x80	 ? 1
				   : s[i] < 0xc0 ? 0
				   : s[i] < 0xe0 ? 2
				   : s[i] < 0xf0 ? 3
				   : s[i] < 0xf8 ? 4
						 : 0;

		if (!len || i + len > n)
			return 0;
		cp = len == 1 ? s[i] : s[i] & (0xff >> (len + 1));
		for (uint32_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += len;
	}
	return 1;
}

static void check_round_trip(int which, const uint8_t *text, size_t len,
			     unsigned flags)
{
	const struct o1_tokenizer *t = toks[which];
	unsigned dflags =
	    O1_DECODE_STRIP_PREFIX |
	    (flags & O1_ENCODE_ADD_SPECIAL ? O1_DECODE_SKIP_SPECIAL : 0);
	size_t cap = len + 8;
	int32_t *ids = malloc(cap * sizeof(*ids));
	char *back;
	int n, m;

	if (!ids)
		abort();
	n = o1_tokenizer_encode(t, (const char *)text, len, flags, ids, cap);
	if (n < 0) {
		if (n != -O1_E_TOKENIZER || utf8_ok(text, len))
			abort();
		free(ids);
		return;
	}
	if ((size_t)n > cap || !utf8_ok(text, len))
		abort();
	back = malloc(4 * len + 64);
	m = back ? o1_tokenizer_decode(t, ids, (size_t)n, dflags, back,
				       4 * len + 64)
		 : -1;
	if (m < 0 || !utf8_ok((const uint8_t *)back, (size_t)m))
		abort();
	/* SentencePiece adds a space after each special token it meets and
	 * reads U+2581 in the text as a space */
	if (!(flags & O1_ENCODE_PARSE_SPECIAL) &&
	    (which < 2 || (!memchr(text, '<', len) &&
			   !memmem(text, len, "\xe2\x96\x81", 3))) &&
	    ((size_t)m != len || memcmp(back, text, len)))
		abort();
	free(back);
	free(ids);
}

static void check_stream(int which, const uint8_t *data, size_t size)
{
	const struct o1_tokenizer *t = toks[which];
	size_t room = 4 * (o1_tokenizer_max_piece(t) + 4);
	char *out = malloc(room);
	struct o1_detok d;
	int n;

	if (!out)
		abort();
	o1_tokenizer_decode_init(&d,
				 data[0] & 0x40 ? O1_DECODE_SKIP_SPECIAL : 0);
	for (size_t i = 0; i + 1 < size; i += 2) {
		int32_t id = (int32_t)((data[i] | data[i + 1] << 8) %
				       o1_tokenizer_n_tokens(t));

		n = o1_tokenizer_decode_step(t, &d, id, out, room);
		if (n < 0 || !utf8_ok((const uint8_t *)out, (size_t)n))
			abort();
	}
	n = o1_tokenizer_decode_flush(&d, out, room);
	if (n < 0 || !utf8_ok((const uint8_t *)out, (size_t)n))
		abort();
	free(out);
}

/* Chat templates of three families, parsed once. */
static const char *const chat_texts[] = {
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + "
    "'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}",
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token "
    "+ content %}{% endif %}{{ content }}{% endfor %}",
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] "
    "== 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Roles "
    "must alternate') }}{% endif %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}"
    "{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
};
static struct o1_chat_template *chats[3];

static void render_all(const struct o1_chat_message *m, size_t n,
		       size_t short_cap)
{
	static char whole[1 << 17], part[64];

	for (int f = 0; f < 3; f++) {
		int a, b;

		if (!chats[f] &&
		    o1_chat_template_create(chat_texts[f],
					    strlen(chat_texts[f]), "fuzz",
					    "<s>", "</s>", &chats[f], NULL))
			abort();
		a = o1_chat_template_render(chats[f], m, n, true, whole,
					    sizeof(whole), NULL);
		b = o1_chat_template_render(chats[f], m, n, true, part,
					    short_cap, NULL);
		if (a != b || (a >= 0 && (size_t)a < sizeof(whole) &&
			       strncmp(whole, part, short_cap - 1)))
			abort();
	}
}

/* Roles and contents alternate, each NUL-terminated inside the input. */
static void check_chat(const uint8_t *data, size_t size)
{
	struct o1_chat_message m[16];
	char *copy = malloc(size + 1), *p, *end;
	size_t n = 0;

	if (!copy)
		abort();
	memcpy(copy, data, size);
	copy[size] = 0;
	end = copy + size;
	for (p = copy + 1; p < end && n < 16; n++) {
		m[n].role = p;
		p += strlen(p) + 1;
		m[n].content = p < end ? p : "";
		p += p < end ? strlen(p) + 1 : 0;
	}
	render_all(m, n, 1 + data[0] % 63);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int which;

	if (!toks[0])
		init();
	if (!size)
		return 0;
	if (data[0] & 0x80) {
		check_chat(data, size);
		return 0;
	}
	which = data[0] % 3;
	check_round_trip(which, data + 1, size - 1, (data[0] >> 2) & 3);
	check_stream(which, data, size);
	return 0;
}
