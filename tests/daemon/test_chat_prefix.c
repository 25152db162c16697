/* Prefix caching across the turns of one chat conversation, through a
 * real o1d on the CPU backend (argv: o1d, o1model): the tiny model with a
 * Hermes-style template (model.chat_template), chat requests in JSON with
 * tools, as the sidecar and clients send them. Turn 2 is turn 1's
 * messages, the answer as an assistant message and a new user message, so
 * turn 1's rendered prompt is the start of turn 2's: the FINAL of turn 2
 * counts cached tokens covering turn 1's prompt but for its last partial
 * page and one more (the boundary's tokens may differ), and the admin
 * status's prefix hits grow by as many pages. A third, unrelated
 * conversation (another system message) gets nothing from the cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <o1/client.h>

#include "daemon_harness.h"

#define TEMPLATE O1_SOURCE_DIR "/tests/tools/sidecar/data/hermes_tools.jinja"
#define PAGE	 16

static const char *o1d_bin;

static const char tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"description\":\"Current weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
    "\"required\":[\"city\"]}}}]";

struct turn {
	char text[4096];
	size_t len;
	struct o1_event fin;
};

static int collect(void *arg, const struct o1_event *ev)
{
	struct turn *t = arg;

	if (t->len + ev->text_len < sizeof(t->text)) {
		memcpy(t->text + t->len, ev->text, ev->text_len);
		t->len += ev->text_len;
		t->text[t->len] = 0;
	}
	return 0;
}

/* Sends MSGS (a JSON list) with the tools as a chat request in JSON. */
static void send_turn(struct o1_client *c, const cJSON *msgs, struct turn *t)
{
	struct o1_sampling sp = {.sz = sizeof(sp)};
	struct o1_submit_opts o = {.sz = sizeof(o),
				   .req_id = 1,
				   .sampling = &sp,
				   .max_tokens = 24,
				   .flags = O1_FLAG_CHAT | O1_FLAG_CHAT_JSON};
	cJSON *req = cJSON_CreateObject();
	char *json;

	cJSON_AddItemToObject(req, "messages", cJSON_Duplicate(msgs, 1));
	cJSON_AddItemToObject(req, "tools", cJSON_Parse(tools));
	json = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	assert_non_null(json);
	o.text = json;
	o.text_len = strlen(json);
	memset(t, 0, sizeof(*t));
	assert_int_equal(o1_client_generate(c, &o, collect, t, &t->fin), 0);
	free(json);
	if (t->fin.finish == O1_FINISH_REASON_ERROR)
		fail_msg("turn failed: %s", o1_client_strerror(t->fin.error));
}

static void add_msg(cJSON *msgs, const char *role, const char *content)
{
	cJSON *m = cJSON_CreateObject();

	cJSON_AddStringToObject(m, "role", role);
	cJSON_AddStringToObject(m, "content", content);
	cJSON_AddItemToArray(msgs, m);
}

static void test_turns_hit(void **state)
{
	static const char *const sets[] = {"model.chat_template=" TEMPLATE,
					   "kv.page_tokens=16", "kv.pages=256",
					   NULL};
	struct daemon_proc *d = *state;
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = d->socket, .name = "test"};
	struct kv_status s0, s1, s2, s3;
	struct o1_client *c;
	struct turn t1, t2, t3;
	cJSON *msgs = cJSON_CreateArray(), *other = cJSON_CreateArray();
	uint32_t want;

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	add_msg(msgs, "system",
		"You are a weather assistant. Answer briefly, in one "
		"sentence, and call get_weather when a city is named.");
	add_msg(msgs, "user", "What is the weather in Paris today?");
	assert_int_equal(admin_status(d->socket, &s0), 0);
	send_turn(c, msgs, &t1);
	assert_int_equal(admin_status(d->socket, &s1), 0);
	print_message("turn 1: %u prompt tokens, %u cached: %s\n",
		      t1.fin.prompt_tokens, t1.fin.cached_tokens, t1.text);
	assert_int_equal(t1.fin.cached_tokens, 0);

	add_msg(msgs, "assistant", t1.text);
	add_msg(msgs, "user", "And in Oslo?");
	send_turn(c, msgs, &t2);
	assert_int_equal(admin_status(d->socket, &s2), 0);
	print_message("turn 2: %u prompt tokens, %u cached, prefix hits "
		      "%lld -> %lld\n",
		      t2.fin.prompt_tokens, t2.fin.cached_tokens,
		      s1.prefix_hits, s2.prefix_hits);
	want = (t1.fin.prompt_tokens / PAGE) * PAGE - PAGE;
	assert_true(t2.fin.prompt_tokens > t1.fin.prompt_tokens);
	if (t2.fin.cached_tokens < want || !t2.fin.cached_tokens ||
	    t2.fin.cached_tokens % PAGE ||
	    t2.fin.cached_tokens >= t2.fin.prompt_tokens)
		fail_msg("turn 2 cached %u of %u, want at least %u",
			 t2.fin.cached_tokens, t2.fin.prompt_tokens, want);
	assert_int_equal(s2.prefix_hits - s1.prefix_hits,
			 t2.fin.cached_tokens / PAGE);

	/* another conversation: nothing in common but the template's head */
	add_msg(other, "system", "Quote a line of poetry, then stop.");
	add_msg(other, "user", "Go.");
	send_turn(c, other, &t3);
	assert_int_equal(admin_status(d->socket, &s3), 0);
	assert_true(t3.fin.cached_tokens < PAGE * 2);
	(void)s0;
	cJSON_Delete(msgs);
	cJSON_Delete(other);
	o1_client_close(c);
	assert_int_equal(daemon_stop(d), 0);
}

/* JSON's chat request through libo1client; the FINAL into *FIN. */
static int send_json(struct o1_client *c, const char *json,
		     struct o1_event *fin)
{
	struct o1_sampling sp = {.sz = sizeof(sp)};
	struct o1_submit_opts o = {.sz = sizeof(o),
				   .req_id = 2,
				   .sampling = &sp,
				   .max_tokens = 4,
				   .text = json,
				   .text_len = strlen(json),
				   .flags = O1_FLAG_CHAT | O1_FLAG_CHAT_JSON};
	struct turn t;

	return o1_client_generate(c, &o, collect, &t, fin);
}

/* A chat request o1d refuses says why, to the client that sent it (an
 * ERROR event before the FINAL: libo1client's last error), not only in
 * the daemon's log; the same for a template that raises. The daemon
 * serves on. */
static void test_refused_with_reason(void **state)
{
	static const char bad_tools[] =
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
	    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
	    "\"f\",\"parameters\":5}}]}";
	static const char fine[] =
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
	static const char *const with[] = {"model.chat_template=" TEMPLATE,
					   NULL};
	struct daemon_proc *d = *state;
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = d->socket, .name = "test"};
	struct o1_client *c;
	struct o1_event fin;
	char path[200], set[240];
	const char *raising[] = {set, NULL};
	FILE *f;

	assert_int_equal(daemon_start(d, o1d_bin, with), 0);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(send_json(c, bad_tools, &fin), 0);
	assert_int_equal(fin.finish, O1_FINISH_REASON_ERROR);
	if (!strstr(o1_last_error(), "tools[0]: not {"))
		fail_msg("the client was told '%s'", o1_last_error());
	assert_int_equal(send_json(c, fine, &fin), 0);
	assert_int_not_equal(fin.finish, O1_FINISH_REASON_ERROR);
	o1_client_close(c);
	assert_int_equal(daemon_stop(d), 0);

	/* a template that raises: its message reaches the client */
	snprintf(path, sizeof(path), "%s/raises.jinja", d->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{{ raise_exception('no chat here, send a prompt') }}", f);
	fclose(f);
	snprintf(set, sizeof(set), "model.chat_template=%s", path);
	assert_int_equal(daemon_start(d, o1d_bin, raising), 0);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(send_json(c, fine, &fin), 0);
	assert_int_equal(fin.finish, O1_FINISH_REASON_ERROR);
	if (!strstr(o1_last_error(), "chat template: no chat here, send a "
				     "prompt"))
		fail_msg("the client was told '%s'", o1_last_error());
	o1_client_close(c);
	assert_int_equal(daemon_stop(d), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_turns_hit, harness_stop),
	    cmocka_unit_test_teardown(test_refused_with_reason, harness_stop),
	};

	if (argc < 3) {
		fprintf(stderr, "usage: %s O1D O1MODEL\n", argv[0]);
		return 2;
	}
	o1d_bin = argv[1];
	harness_o1model = argv[2];
	return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}
