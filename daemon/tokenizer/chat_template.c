/* Built-in chat templates, one renderer per family, written to match what
 * the families' own Jinja templates produce (BOS left to the encoder).
 * Rendering only appends to a bounded buffer and counts what did not fit,
 * so the caller can size the buffer from the return value.
 */
#include "chat_template.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

static const char *const family_names[O1_CHAT_N] = {
    [O1_CHAT_CHATML] = "chatml",
    [O1_CHAT_LLAMA3] = "llama3",
    [O1_CHAT_LLAMA2] = "llama2",
    [O1_CHAT_MISTRAL] = "mistral",
};

static const char qwen25_system[] =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
static const char qwen2_system[] = "You are a helpful assistant.";
static const char llama31_preamble[] = "Cutting Knowledge Date: December 2023\n"
				       "Today Date: 26 Jul 2024\n\n";

const char *o1_chat_template_family_name(enum o1_chat_family f)
{
	return (unsigned)f < O1_CHAT_N ? family_names[f] : NULL;
}

static int family_by_name(const char *name, enum o1_chat_family *out)
{
	for (int f = 0; f < O1_CHAT_N; f++)
		if (strcmp(name, family_names[f]) == 0) {
			*out = (enum o1_chat_family)f;
			return 0;
		}
	if (strcmp(name, "qwen") == 0 || strcmp(name, "qwen2") == 0) {
		*out = O1_CHAT_CHATML;
		return 0;
	}
	o1_err("chat template: unknown family '%s' (known: chatml, qwen, "
	       "llama3, llama2, mistral)",
	       name);
	return -O1_E_UNSUPPORTED;
}

static int recognise(const char *tmpl, enum o1_chat_family *out)
{
	if (strstr(tmpl, "<|im_start|>"))
		*out = O1_CHAT_CHATML;
	else if (strstr(tmpl, "<|start_header_id|>"))
		*out = O1_CHAT_LLAMA3;
	else if (strstr(tmpl, "[INST]") && strstr(tmpl, "<<SYS>>"))
		*out = O1_CHAT_LLAMA2;
	else if (strstr(tmpl, "[INST]") && strstr(tmpl, " [/INST]"))
		*out = O1_CHAT_MISTRAL;
	else {
		o1_err("chat template: not a known family (%zu bytes, starts "
		       "'%.60s'); name one in the config",
		       strlen(tmpl), tmpl);
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

int o1_chat_template_init(struct o1_chat_template *ct,
			  const char *model_template, const char *family)
{
	int ret;

	memset(ct, 0, sizeof(*ct));
	if (family)
		ret = family_by_name(family, &ct->family);
	else if (model_template)
		ret = recognise(model_template, &ct->family);
	else {
		o1_err("chat template: the model has none and no family is "
		       "named");
		ret = -O1_E_MISSING;
	}
	if (ret || !model_template)
		return ret;
	if (ct->family == O1_CHAT_LLAMA3 &&
	    strstr(model_template, "Cutting Knowledge Date"))
		ct->system_preamble = llama31_preamble;
	if (ct->family != O1_CHAT_CHATML)
		return 0;
	if (strstr(model_template, qwen25_system))
		ct->default_system = qwen25_system;
	else if (strstr(model_template, qwen2_system))
		ct->default_system = qwen2_system;
	return 0;
}

struct writer {
	char *out;
	size_t cap, n;
};

static void put_n(struct writer *w, const char *s, size_t len)
{
	if (w->n < w->cap)
		memcpy(w->out + w->n, s,
		       w->n + len <= w->cap ? len : w->cap - w->n);
	w->n += len;
}

static void put(struct writer *w, const char *s)
{
	put_n(w, s, strlen(s));
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
	       c == '\v';
}

static void put_rtrimmed(struct writer *w, const char *s)
{
	size_t len = strlen(s);

	while (len && is_space(s[len - 1]))
		len--;
	put_n(w, s, len);
}

/* Jinja's trim / Python's strip() on ASCII whitespace. */
static void put_trimmed(struct writer *w, const char *s)
{
	while (is_space(*s))
		s++;
	put_rtrimmed(w, s);
}

static bool role_is(const struct o1_chat_message *m, const char *role)
{
	return strcmp(m->role, role) == 0;
}

static void render_chatml(const struct o1_chat_template *ct,
			  const struct o1_chat_message *m, size_t n, bool gen,
			  struct writer *w)
{
	if (ct->default_system && (!n || !role_is(&m[0], "system"))) {
		put(w, "<|im_start|>system\n");
		put(w, ct->default_system);
		put(w, "<|im_end|>\n");
	}
	for (size_t i = 0; i < n; i++) {
		put(w, "<|im_start|>");
		put(w, m[i].role);
		put(w, "\n");
		put(w, m[i].content);
		put(w, "<|im_end|>\n");
	}
	if (gen)
		put(w, "<|im_start|>assistant\n");
}

static void llama3_turn(const char *role, const char *content, struct writer *w)
{
	put(w, "<|start_header_id|>");
	put(w, role);
	put(w, "<|end_header_id|>\n\n");
	put_trimmed(w, content);
	put(w, "<|eot_id|>");
}

/* With a preamble (3.1+) the system turn is always there: preamble, then
 * the system message if any. */
static void render_llama3(const struct o1_chat_template *ct,
			  const struct o1_chat_message *m, size_t n, bool gen,
			  struct writer *w)
{
	size_t i = 0;

	if (ct->system_preamble) {
		put(w, "<|start_header_id|>system<|end_header_id|>\n\n");
		put(w, ct->system_preamble);
		if (n && role_is(&m[0], "system"))
			put_trimmed(w, m[i++].content);
		put(w, "<|eot_id|>");
	}
	for (; i < n; i++)
		llama3_turn(m[i].role, m[i].content, w);
	if (gen)
		put(w, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Llama 2 and Mistral: the system message goes into the first user turn;
 * only user and assistant turns may follow it. */
static int check_inst_roles(enum o1_chat_family f,
			    const struct o1_chat_message *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (role_is(&m[i], "user") || role_is(&m[i], "assistant") ||
		    (i == 0 && role_is(&m[i], "system")))
			continue;
		o1_err("chat template %s: message %zu has role '%s' (only a "
		       "first system message, then user and assistant)",
		       family_names[f], i, m[i].role);
		return -EINVAL;
	}
	return 0;
}

static void render_llama2(const struct o1_chat_message *m, size_t n,
			  struct writer *w)
{
	const char *sys = n && role_is(&m[0], "system") ? m[0].content : NULL;
	bool first = true;

	for (size_t i = sys ? 1 : 0; i < n; i++) {
		if (role_is(&m[i], "assistant")) {
			put(w, " ");
			put_trimmed(w, m[i].content);
			put(w, " </s>");
			continue;
		}
		put(w, first ? "[INST] " : "<s>[INST] ");
		if (first && sys) {
			/* strip() applies to the joined text: only the user
			 * content's tail is trimmed */
			put(w, "<<SYS>>\n");
			put(w, sys);
			put(w, "\n<</SYS>>\n\n");
			put_rtrimmed(w, m[i].content);
		} else {
			put_trimmed(w, m[i].content);
		}
		put(w, " [/INST]");
		first = false;
	}
}

static void render_mistral(const struct o1_chat_message *m, size_t n,
			   struct writer *w)
{
	const char *sys = n && role_is(&m[0], "system") ? m[0].content : NULL;

	for (size_t i = sys ? 1 : 0; i < n; i++) {
		if (role_is(&m[i], "assistant")) {
			put(w, m[i].content);
			put(w, "</s>");
			continue;
		}
		put(w, "[INST] ");
		if (sys) {
			put(w, sys);
			put(w, "\n\n");
			sys = NULL;
		}
		put(w, m[i].content);
		put(w, " [/INST]");
	}
}

static int check_messages(const struct o1_chat_message *m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!m[i].role || !m[i].content) {
			o1_err("chat template: message %zu has no %s", i,
			       m[i].role ? "content" : "role");
			return -EINVAL;
		}
	return 0;
}

int o1_chat_template_render(const struct o1_chat_template *ct,
			    const struct o1_chat_message *msgs, size_t n,
			    bool add_generation_prompt, char *out, size_t cap)
{
	struct writer w = {out, out && cap ? cap - 1 : 0, 0};
	int ret = check_messages(msgs, n);

	if (!ret &&
	    (ct->family == O1_CHAT_LLAMA2 || ct->family == O1_CHAT_MISTRAL))
		ret = check_inst_roles(ct->family, msgs, n);
	if (ret)
		return ret;
	switch (ct->family) {
	case O1_CHAT_CHATML:
		render_chatml(ct, msgs, n, add_generation_prompt, &w);
		break;
	case O1_CHAT_LLAMA3:
		render_llama3(ct, msgs, n, add_generation_prompt, &w);
		break;
	case O1_CHAT_LLAMA2:
		render_llama2(msgs, n, &w);
		break;
	case O1_CHAT_MISTRAL:
		render_mistral(msgs, n, &w);
		break;
	default:
		return -EINVAL;
	}
	if (out && cap)
		out[w.n < w.cap ? w.n : w.cap] = 0;
	return w.n > INT32_MAX ? -O1_E_BOUNDS : (int)w.n;
}
