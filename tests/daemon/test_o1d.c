/* o1d end to end on the CPU backend with a tiny model made by o1model:
 * real daemon and client processes. Every token sequence is checked
 * against `o1model run` with the same parameters, every request must get
 * exactly one FINAL, and at idle every KV page must be free (or held by
 * the prefix cache alone).
 * argv: o1d o1model o1ctl */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tokenizer/chat_template.h"
#include "common/error.h"
#include "daemon_harness.h"
#include "model/model.h"
#include "o1/client.h"
#include "tokenizer/tokenizer.h"

static const char *o1d_bin, *o1model_bin, *o1ctl_bin;

#define N_SPECS 20

static struct result refs[N_SPECS];
static struct spec specs[N_SPECS];

static int setup(void **state)
{
	static struct daemon_proc d;

	if (harness_init(&d, o1model_bin))
		return -1;
	for (unsigned i = 0; i < N_SPECS; i++) {
		spec_make(&specs[i], i);
		if (spec_reference(o1model_bin, d.model, &specs[i], &refs[i]))
			return -1;
	}
	*state = &d;
	return 0;
}

static int teardown(void **state)
{
	harness_fini(*state);
	return 0;
}

static void expect_idle(struct daemon_proc *d)
{
	struct kv_status st;

	assert_int_equal(admin_wait_idle(d->socket, 5000, &st), 0);
	assert_int_equal(st.pages_free + st.pages_cached, st.pages_total);
}

static void test_single(void **state)
{
	struct daemon_proc *d = *state;
	struct result r;

	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(spec_run(d->socket, &specs[i], &r), 0);
		assert_int_equal(result_same(&r, &refs[i], "single"), 0);
		assert_int_equal(r.prompt_tokens, specs[i].n_ids);
		assert_int_equal(r.generated, r.n_ids);
	}
	expect_idle(d);
	assert_int_equal(daemon_stop(d), 0);
}

/* Runs specs[idx[k]] for k < n on one connection, up to INFLIGHT at a
 * time; res[k] gets each outcome. Returns 0, or -1 when the connection
 * failed. */
static int ready_fd = -1; /* run_many writes a byte there once connected */

static int run_many(const char *socket, const unsigned *idx, unsigned n,
		    unsigned inflight, struct result *res)
{
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = socket, .name = "many"};
	struct o1_client *c;
	struct o1_event ev;
	unsigned sent = 0, done = 0;
	int err = 0;

	memset(res, 0, n * sizeof(*res));
	if (o1_client_connect(&co, &c))
		return -1;
	if (ready_fd >= 0 && write(ready_fd, "r", 1) != 1)
		return -1;
	while (!err && done < n) {
		while (sent < n && sent - done < inflight) {
			const struct spec *s = &specs[idx[sent]];
			struct o1_sampling smp = {.sz = sizeof(smp),
						  .temperature = s->temperature,
						  .top_p = s->top_p,
						  .top_k = s->top_k,
						  .seed = s->seed};
			struct o1_submit_opts so = {
			    .sz = sizeof(so),
			    .req_id = sent,
			    .ids = s->ids,
			    .n_ids = s->n_ids,
			    .sampling = &smp,
			    .max_tokens = s->max_tokens,
			    .flags = s->ignore_eos ? O1_FLAG_IGNORE_EOS : 0};

			if (o1_client_submit(c, &so))
				break;
			sent++;
		}
		err = o1_client_wait(c, &ev, 60000000000ll);
		if (err != 1)
			break;
		err = 0;
		if (ev.req_id >= n)
			continue;
		done += ev.type == O1_EVENT_FINAL;
		result_add_event(&res[ev.req_id], &ev);
	}
	o1_client_close(c);
	return err < 0 ? -1 : 0;
}

/* A child process: runs the N_SPECS specs in its own order and checks
 * every result; exit status 0 when all match. */
static int child_client(const char *socket, unsigned who, unsigned inflight)
{
	unsigned idx[N_SPECS];
	struct result res[N_SPECS];
	char what[64];
	int bad = 0;

	for (unsigned k = 0; k < N_SPECS; k++)
		idx[k] = (k + who * 3) % N_SPECS;
	if (run_many(socket, idx, N_SPECS, inflight, res))
		return 2;
	for (unsigned k = 0; k < N_SPECS; k++) {
		snprintf(what, sizeof(what), "client %u spec %u", who, idx[k]);
		bad |= result_same(&res[k], &refs[idx[k]], what);
	}
	return bad ? 1 : 0;
}

static pid_t spawn_client(const char *socket, unsigned who, unsigned inflight)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(child_client(socket, who, inflight));
	return pid;
}

static int reap(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void test_many_clients(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"scheduler.max_batch_tokens=64",
			      "scheduler.prefill_chunk_tokens=16", NULL};
	pid_t pids[8];

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	for (unsigned c = 0; c < 8; c++)
		pids[c] = spawn_client(d->socket, c, 1 + c % 4);
	for (unsigned c = 0; c < 8; c++)
		assert_int_equal(reap(pids[c]), 0);
	expect_idle(d);
	assert_int_equal(daemon_stop(d), 0);
}

/* A pool of 10 pages of 16 tokens for 4 clients whose requests need up
 * to 5 pages each: sequences must be preempted and recomputed. */
static void test_preemption(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"kv.pages=10", "kv.page_tokens=16",
			      "model.max_context_tokens=160", "log.level=debug",
			      NULL};
	struct kv_status st;
	pid_t pids[4];

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	/* the start-up line names the bound that decided the pool */
	assert_true(log_has(d->log, "kv: 10 pages of "));
	assert_true(log_has(d->log, "(160 tokens, 0 full contexts of 160 tokens), set by kv.pages"));
	/* the time budget's "auto" on the CPU backend */
	assert_true(log_has(d->log, "scheduler: prefill_time_ratio auto: 0.15"));
	for (unsigned c = 0; c < 4; c++)
		pids[c] = spawn_client(d->socket, c, 4);
	for (unsigned c = 0; c < 4; c++)
		assert_int_equal(reap(pids[c]), 0);
	expect_idle(d);
	assert_int_equal(admin_status(d->socket, &st), 0);
	assert_int_equal(st.pages_total, 10);
	assert_true(st.preemptions > 0);
	/* at debug, each admission, resumption and preemption has its line */
	assert_true(log_has(d->log, "admitting request "));
	assert_true(log_has(d->log, "preempting request "));
	assert_true(log_has(d->log, "resuming request "));
	assert_int_equal(daemon_stop(d), 0);
}

/* A long request on its own connection: streams until killed. */
static pid_t spawn_streamer(const char *socket)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct spec s = specs[4];
		struct result r;

		s.max_tokens = 1500;
		s.ignore_eos = true;
		_exit(spec_run(socket, &s, &r) ? 2 : 0);
	}
	return pid;
}

static void wait_running(const char *socket, int n)
{
	struct kv_status st = {0};

	for (int i = 0; i < 500; i++) {
		assert_int_equal(admin_status(socket, &st), 0);
		if (st.running >= n)
			return;
		usleep(10000);
	}
	fail_msg("only %d sequences running, expected %d", st.running, n);
}

/* Two clients SIGKILLed mid-stream while four others complete. */
static void test_client_death(void **state)
{
	struct daemon_proc *d = *state;
	pid_t killed[2], pids[4];

	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	for (unsigned c = 0; c < 2; c++)
		killed[c] = spawn_streamer(d->socket);
	wait_running(d->socket, 2);
	for (unsigned c = 0; c < 4; c++)
		pids[c] = spawn_client(d->socket, c, 2);
	kill(killed[0], SIGKILL);
	kill(killed[1], SIGKILL);
	for (unsigned c = 0; c < 4; c++)
		assert_int_equal(reap(pids[c]), 0);
	assert_int_equal(reap(killed[0]), 128);
	assert_int_equal(reap(killed[1]), 128);
	expect_idle(d);
	assert_int_equal(daemon_stop(d), 0);
}

static void test_cancel(void **state)
{
	struct daemon_proc *d = *state;
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = d->socket};
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 42,
				    .ids = specs[1].ids,
				    .n_ids = specs[1].n_ids,
				    .max_tokens = 1500,
				    .flags = O1_FLAG_IGNORE_EOS};
	struct o1_client *c;
	struct o1_event ev;
	struct result r = {0};

	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_submit(c, &so), 0);
	while (r.n_ids < 3) {
		assert_int_equal(o1_client_wait(c, &ev, 10000000000ll), 1);
		result_add_event(&r, &ev);
	}
	assert_int_equal(o1_client_cancel(c, 42), 0);
	while (!r.finals) {
		assert_int_equal(o1_client_wait(c, &ev, 10000000000ll), 1);
		assert_int_equal(ev.req_id, 42);
		result_add_event(&r, &ev);
	}
	assert_int_equal(r.finish, O1_FINISH_REASON_CANCELLED);
	assert_true(r.generated < 1500);
	assert_int_equal(r.generated, r.n_ids);
	usleep(20000);
	assert_int_equal(o1_client_poll(c, &ev), 0);
	o1_client_close(c);
	expect_idle(d);
	assert_int_equal(daemon_stop(d), 0);
}

/* The prompt of spec 19 has 45 tokens: two full pages of 16 come back
 * from the cache for the same uid, none for another uid. */
static void test_prefix_cache(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"ipc.allowed_uids=65534", "ipc.socket_mode=0666",
			      NULL};
	struct kv_status a, b, c;
	struct result r;
	pid_t pid;

	assert_true(specs[19].n_ids >= 33);
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	assert_int_equal(spec_run(d->socket, &specs[19], &r), 0);
	assert_int_equal(result_same(&r, &refs[19], "first"), 0);
	assert_int_equal(admin_status(d->socket, &a), 0);
	assert_int_equal(spec_run(d->socket, &specs[19], &r), 0);
	assert_int_equal(result_same(&r, &refs[19], "cached"), 0);
	assert_int_equal(admin_status(d->socket, &b), 0);
	assert_int_equal(b.prefix_hits - a.prefix_hits, 2);
	if (geteuid() != 0) {
		assert_int_equal(daemon_stop(d), 0);
		skip();
	}
	pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(3);
		_exit(spec_run(d->socket, &specs[19], &r) ||
			      result_same(&r, &refs[19], "other uid")
			  ? 1
			  : 0);
	}
	assert_int_equal(reap(pid), 0);
	assert_int_equal(admin_status(d->socket, &c), 0);
	assert_int_equal(c.prefix_hits, b.prefix_hits);
	assert_int_equal(c.prefix_misses - b.prefix_misses, 2);
	assert_int_equal(daemon_stop(d), 0);
}

/* A child under SIGTERM: submits every spec, then reads until the daemon
 * is gone. Each request must end with exactly one FINAL: complete and
 * right, or refused/cut off by the drain. Exit 0 when so. */
static int child_drain(const char *socket, unsigned who)
{
	unsigned idx[N_SPECS];
	struct result res[N_SPECS];
	int bad = 0;

	for (unsigned k = 0; k < N_SPECS; k++)
		idx[k] = (k + who) % N_SPECS;
	if (run_many(socket, idx, N_SPECS, N_SPECS, res))
		return 2;
	for (unsigned k = 0; k < N_SPECS; k++) {
		const struct result *r = &res[k];

		if (r->finals != 1)
			bad = 1;
		else if (r->finish == O1_FINISH_REASON_ERROR ||
			 r->finish == O1_FINISH_REASON_CANCELLED)
			bad |= r->error != -O1_E_DRAINING;
		else
			bad |= result_same(r, &refs[idx[k]], "drain") != 0;
	}
	return bad;
}

static void test_drain(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"scheduler.max_batch_tokens=32", NULL};
	struct result r;
	pid_t pids[4];
	int fds[2];
	char b;

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	assert_int_equal(pipe(fds), 0);
	for (unsigned c = 0; c < 4; c++) {
		pids[c] = fork();
		if (pids[c] == 0) {
			ready_fd = fds[1];
			_exit(child_drain(d->socket, c));
		}
	}
	for (unsigned c = 0; c < 4; c++)
		assert_int_equal(read(fds[0], &b, 1), 1);
	close(fds[0]);
	close(fds[1]);
	kill(d->pid, SIGTERM);
	usleep(2000);
	if (!spec_run(d->socket, &specs[0], &r)) {
		assert_int_equal(r.finals, 1);
		assert_int_equal(r.error, -O1_E_DRAINING);
	}
	for (unsigned c = 0; c < 4; c++)
		assert_int_equal(reap(pids[c]), 0);
	assert_int_equal(daemon_stop(d), 0);
}

/* SIGTERM with daemon.drain_timeout_ms=0: a request still generating is
 * failed at the drain deadline. Its reader (stopped after the first token,
 * so the stream parks instead of finishing) then reads an exact prefix and
 * one FINAL that libo1client's decoder takes: reason ERROR with
 * -O1_E_DRAINING (an error code with any other reason is a bad event). */
static void test_drain_deadline(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"daemon.drain_timeout_ms=0", NULL};
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = d->socket};
	const struct spec *sp = &specs[0];
	struct o1_sampling smp = {.sz = sizeof(smp)};
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 3,
				    .ids = sp->ids,
				    .n_ids = sp->n_ids,
				    .sampling = &smp,
				    .max_tokens = 1500,
				    .flags = O1_FLAG_IGNORE_EOS};
	struct o1_client *c;
	struct o1_event ev;
	struct result r = {0};
	uint32_t n;

	assert_true(sp->temperature == 0);
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_submit(c, &so), 0);
	while (!r.n_ids && !r.finals) {
		assert_int_equal(o1_client_wait(c, &ev, 30000000000ll), 1);
		result_add_event(&r, &ev);
	}
	kill(d->pid, SIGTERM);
	while (!r.finals) {
		assert_int_equal(o1_client_wait(c, &ev, 30000000000ll), 1);
		result_add_event(&r, &ev);
	}
	o1_client_close(c);
	assert_int_equal(r.finish, O1_FINISH_REASON_ERROR);
	assert_int_equal(r.error, -O1_E_DRAINING);
	assert_true(r.n_ids > 0 && r.n_ids < 1500);
	n = r.n_ids < refs[0].n_ids ? r.n_ids : refs[0].n_ids;
	assert_memory_equal(r.ids, refs[0].ids, n * sizeof(uint32_t));
	assert_int_equal(daemon_stop(d), 0);
}

/* o1model run --prompt TEXT: ids into ref, the decoded text into *text
 * (malloc'd; the last newline removed). */
static int text_reference(const struct daemon_proc *d, const char *prompt,
			  unsigned max_tokens, struct result *ref, char **text)
{
	char cmd[1024], line[8192];
	size_t n = 0, cap = 1 << 16;
	FILE *f;
	int k = 0;

	snprintf(cmd, sizeof(cmd),
		 "%s run %s --threads 2 --max-tokens %u --prompt '%s' "
		 "2>/dev/null",
		 o1model_bin, d->model, max_tokens, prompt);
	memset(ref, 0, sizeof(*ref));
	f = popen(cmd, "r");
	if (!f || !fgets(line, sizeof(line), f))
		return -1;
	for (char *t = strtok(line, " \n"); t; t = strtok(NULL, " \n"))
		ref->ids[k++] = (uint32_t)strtoul(t, NULL, 10);
	ref->n_ids = (uint32_t)k;
	*text = calloc(1, cap);
	n = fread(*text, 1, cap - 1, f);
	if (n && (*text)[n - 1] == '\n')
		(*text)[--n] = 0;
	return pclose(f) == 0 ? 0 : -1;
}

static void run_text(const struct daemon_proc *d, struct o1_submit_opts *so,
		     struct result *r)
{
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = d->socket};
	struct o1_client *c;
	struct o1_event ev;

	memset(r, 0, sizeof(*r));
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_submit(c, so), 0);
	while (!r->finals) {
		assert_int_equal(o1_client_wait(c, &ev, 30000000000ll), 1);
		result_add_event(r, &ev);
	}
	o1_client_close(c);
	assert_false(r->bad_utf8);
	r->text[r->text_len] = 0;
}

/* Chat ids as the daemon must build them: the model's template (which
 * writes BOS where the model wants one), then encoding with special tokens
 * parsed and nothing added. */
static uint32_t chat_ids(const char *model, const char *user, int32_t *ids,
			 uint32_t cap)
{
	struct o1_model *m;
	struct o1_tokenizer *t;
	struct o1_chat_template *ct;
	struct o1_chat_message msg[2] = {{"system", "Be brief."},
					 {"user", user}};
	char buf[4096];
	int n, len;

	assert_int_equal(o1_model_open(model, &m), 0);
	assert_int_equal(o1_tokenizer_create(m->vocab, &t), 0);
	assert_int_equal(o1_chat_template_load(m->vocab, model, NULL, &ct), 0);
	len = o1_chat_template_render(ct, msg, 2, true, buf, sizeof(buf),
				      NULL);
	assert_true(len > 0 && len < (int)sizeof(buf));
	n = o1_tokenizer_encode(t, buf, (size_t)len, O1_ENCODE_PARSE_SPECIAL,
				ids, cap);
	assert_true(n > 0 && n <= (int)cap);
	o1_chat_template_destroy(ct);
	o1_tokenizer_destroy(t);
	o1_model_close(m);
	return (uint32_t)n;
}

/* Text prompts: the streamed text is the detokenized reference; a stop
 * string cuts it right before its first occurrence; a chat request is
 * the template's ids. */
static void test_text_stop_chat(void **state)
{
	struct daemon_proc *d = *state;
	static const char chat[] = "system\0Be brief.\0user\0hello there";
	const char *stops[1];
	char *text = NULL, stop[8];
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 3,
				    .text = "hello world",
				    .text_len = 11,
				    .max_tokens = 24,
				    .flags = O1_FLAG_ADD_BOS};
	struct result ref, r;
	struct spec sp;
	size_t at;

	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	assert_int_equal(text_reference(d, "hello world", 24, &ref, &text), 0);
	run_text(d, &so, &r);
	assert_int_equal(result_same(&r, &ref, "text"), 0);
	assert_string_equal(r.text, text);
	/* a stop string of 3 bytes from the middle, on char boundaries */
	at = strlen(text) / 2;
	while (at && ((unsigned char)text[at] & 0xc0) == 0x80)
		at--;
	snprintf(stop, sizeof(stop), "%.3s", text + at);
	while (strlen(stop) > 1 &&
	       ((unsigned char)text[at + strlen(stop)] & 0xc0) == 0x80)
		stop[strlen(stop) - 1] = 0;
	at = (size_t)(strstr(text, stop) - text);
	stops[0] = stop;
	so.stop_strings = stops;
	so.n_stop_strings = 1;
	run_text(d, &so, &r);
	assert_int_equal(r.finish, O1_FINISH_REASON_STOP);
	assert_int_equal(r.text_len, at);
	assert_memory_equal(r.text, text, at);
	free(text);
	/* chat */
	memset(&sp, 0, sizeof(sp));
	sp.n_ids =
	    chat_ids(d->model, "hello there", (int32_t *)sp.ids, SPEC_IDS_MAX);
	sp.max_tokens = 10;
	sp.top_p = 1;
	assert_int_equal(spec_reference(o1model_bin, d->model, &sp, &ref), 0);
	so = (struct o1_submit_opts){.sz = sizeof(so),
				     .req_id = 4,
				     .text = chat,
				     .text_len = sizeof(chat) - 1,
				     .max_tokens = 10,
				     .flags = O1_FLAG_CHAT};
	run_text(d, &so, &r);
	assert_int_equal(r.prompt_tokens, sp.n_ids);
	assert_int_equal(result_same(&r, &ref, "chat"), 0);
	expect_idle(d);
	assert_int_equal(daemon_stop(d), 0);
}

static int notify_socket(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

	assert_true(strlen(path) < sizeof(a.sun_path));
	memcpy(a.sun_path, path, strlen(path));
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void expect_notify(int fd, const char *what)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[64] = "";
	ssize_t n;

	assert_int_equal(poll(&p, 1, 10000), 1);
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	assert_string_equal(buf, what);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* sd_notify READY=1 and STOPPING=1; SIGHUP applies the file's scheduler
 * knobs and says which changes need a restart. */
static void test_notify_and_reload(void **state)
{
	struct daemon_proc *d = *state;
	char path[100];
	struct result r;
	int fd;

	snprintf(path, sizeof(path), "%s/notify.sock", d->dir);
	fd = notify_socket(path);
	setenv("NOTIFY_SOCKET", path, 1);
	snprintf(d->config, sizeof(d->config), "%s/o1d.ini", d->dir);
	write_file(d->config, "[scheduler]\nmax_running = 4\n");
	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	unsetenv("NOTIFY_SOCKET");
	expect_notify(fd, "READY=1");
	/* host memory gives more than 4 sequences can use: the cap is said */
	assert_true(log_has(d->log, "4 full contexts of"));
	assert_true(log_has(d->log, "set by scheduler.max_running"));
	write_file(d->config, "[scheduler]\nmax_running = 1\n"
			      "[kv]\npage_tokens = 32\n");
	kill(d->pid, SIGHUP);
	for (int i = 0; i < 500 && !log_has(d->log, "SIGHUP: reloaded"); i++)
		usleep(10000);
	assert_true(log_has(d->log, "max_running=1"));
	assert_true(log_has(d->log, "need a restart"));
	assert_int_equal(spec_run(d->socket, &specs[2], &r), 0);
	assert_int_equal(result_same(&r, &refs[2], "after reload"), 0);
	assert_int_equal(daemon_stop(d), 0);
	expect_notify(fd, "STOPPING=1");
	close(fd);
	d->config[0] = 0;
}

/* A client with an 8-entry completion ring that does not read: its
 * request waits (others complete meanwhile), then every event arrives in
 * order once it reads. Logprobs: each token carries its own and the 3
 * best alternatives, the greedy token first. */
static void test_backpressure_logprobs(void **state)
{
	struct daemon_proc *d = *state;
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = d->socket, .cq_entries = 8};
	struct o1_sampling smp = {.sz = sizeof(smp), .n_logprobs = 3};
	const struct spec *sp = &specs[3];
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 9,
				    .ids = sp->ids,
				    .n_ids = sp->n_ids,
				    .sampling = &smp,
				    .max_tokens = sp->max_tokens};
	struct o1_client *c;
	struct o1_event ev;
	struct result r = {0}, other;
	uint32_t lp_pos = 0;

	assert_true(sp->temperature == 0 && refs[3].n_ids > 4);
	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_submit(c, &so), 0);
	usleep(100000);
	assert_int_equal(spec_run(d->socket, &specs[0], &other), 0);
	assert_int_equal(result_same(&other, &refs[0], "other"), 0);
	while (!r.finals) {
		assert_int_equal(o1_client_wait(c, &ev, 10000000000ll), 1);
		if (ev.type == O1_EVENT_LOGPROBS) {
			assert_int_equal(ev.position, lp_pos++);
			assert_int_equal(ev.n_top, 3);
			assert_int_equal(ev.top_ids[0], r.ids[r.n_ids - 1]);
			assert_true(ev.top_logprobs[0] >= ev.top_logprobs[1]);
			continue;
		}
		if (ev.type == O1_EVENT_TOKEN && ev.n_ids)
			assert_true(ev.has_logprobs && ev.logprobs[0] <= 0);
		result_add_event(&r, &ev);
	}
	o1_client_close(c);
	assert_int_equal(result_same(&r, &refs[3], "backpressure"), 0);
	assert_int_equal(lp_pos, r.n_ids);
	expect_idle(d);
	assert_int_equal(daemon_stop(d), 0);
}

/* reference.json of an hf test model: greedy prompt and new ids. */
static int hf_reference(const char *dir, struct spec *sp, struct result *ref)
{
	char path[512], *text = NULL;
	cJSON *o = NULL;
	const cJSON *p, *g, *it;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/reference.json", dir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	if (text && fread(text, 1, (size_t)n, f) == (size_t)n)
		o = cJSON_Parse(text);
	fclose(f);
	free(text);
	p = cJSON_GetObjectItemCaseSensitive(o, "greedy_prompt_ids");
	g = cJSON_GetObjectItemCaseSensitive(o, "greedy_new_ids");
	memset(sp, 0, sizeof(*sp));
	memset(ref, 0, sizeof(*ref));
	cJSON_ArrayForEach(it, p) sp->ids[sp->n_ids++] = (uint32_t)it->valueint;
	cJSON_ArrayForEach(it, g) ref->ids[ref->n_ids++] =
	    (uint32_t)it->valueint;
	cJSON_Delete(o);
	sp->max_tokens = ref->n_ids;
	sp->top_p = 1;
	sp->ignore_eos = true;
	return sp->n_ids && ref->n_ids ? 0 : -1;
}

/* The transformers references in the shared test data: greedy ids from
 * o1d, 4 clients at once with small prefill chunks, equal theirs. */
static void test_hf_reference(void **state)
{
	static const char *const models[] = {"qwen2-tiny", "llama-tiny"};
	const char *sets[] = {"scheduler.prefill_chunk_tokens=5", NULL};
	struct daemon_proc *d = *state;
	char saved[sizeof(d->model)];

	if (access(O1_SHARED_DIR "/testdata/hf", R_OK))
		skip();
	memcpy(saved, d->model, sizeof(saved));
	for (unsigned m = 0; m < 2; m++) {
		struct spec sp;
		struct result ref, r[4];
		pid_t pids[4];

		snprintf(d->model, sizeof(d->model), "%s/testdata/hf/%s",
			 O1_SHARED_DIR, models[m]);
		assert_int_equal(hf_reference(d->model, &sp, &ref), 0);
		assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
		for (unsigned c = 0; c < 4; c++) {
			pids[c] = fork();
			if (pids[c] == 0)
				_exit(spec_run(d->socket, &sp, &r[c]) ||
				      result_same(&r[c], &ref, models[m]));
		}
		for (unsigned c = 0; c < 4; c++)
			assert_int_equal(reap(pids[c]), 0);
		expect_idle(d);
		assert_int_equal(daemon_stop(d), 0);
	}
	memcpy(d->model, saved, sizeof(saved));
}

/* Requests that cannot run get one typed FINAL and a log line; the
 * daemon serves the next one. */
static void test_bad_requests(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"model.max_context_tokens=32", NULL};
	static const char bad_chat[] = "system\0Be brief.\0user";
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 5,
				    .text = bad_chat,
				    .text_len = sizeof(bad_chat) - 1,
				    .max_tokens = 4,
				    .flags = O1_FLAG_CHAT};
	struct spec sp = specs[19];
	struct result r;

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	run_text(d, &so, &r);
	assert_int_equal(r.finish, O1_FINISH_REASON_ERROR);
	assert_int_equal(r.error, -O1_E_FORMAT);
	assert_true(log_has(d->log, "a role without content"));
	sp.n_ids = 32;
	assert_int_equal(spec_run(d->socket, &sp, &r), 0);
	assert_int_equal(r.finals, 1);
	assert_int_equal(r.finish, O1_FINISH_REASON_ERROR);
	assert_int_equal(r.error, -O1_E_CONTEXT);
	sp.n_ids = 30;
	sp.max_tokens = 10;
	sp.ignore_eos = true;
	assert_int_equal(spec_run(d->socket, &sp, &r), 0);
	assert_int_equal(r.finals, 1);
	assert_int_equal(r.finish, O1_FINISH_REASON_LENGTH);
	assert_int_equal(r.generated, 2); /* 30 + 2 = the context of 32 */
	assert_int_equal(spec_run(d->socket, &specs[0], &r), 0);
	assert_int_equal(result_same(&r, &refs[0], "after bad ones"), 0);
	expect_idle(d);
	assert_int_equal(daemon_stop(d), 0);
}

/* Device outputs on the CPU backend (issue 7): o1d starts with
 * ipc.device_outputs set and logs that it has none; a client asking at
 * connect is connected and told O1_CLIENT_E_NO_DEVOUT; its device-logits
 * request is not lost: exactly one event, a FINAL with that error; then
 * an ordinary request is served exactly. */
static void test_device_outputs_cpu(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"ipc.device_outputs=2", NULL};
	struct o1_client_opts co = {.sz = sizeof(co),
				    .socket_path = d->socket,
				    .flags = O1_CONNECT_DEVICE_OUT};
	struct o1_device_output info = {.sz = sizeof(info)};
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 9,
				    .ids = specs[0].ids,
				    .n_ids = specs[0].n_ids,
				    .max_tokens = 4,
				    .flags = O1_FLAG_DEVICE_LOGITS};
	struct o1_client *c;
	struct o1_event ev;
	struct result r;
	int n = 0;

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	assert_true(log_has(d->log, "has no device outputs"));
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_device_output(c, &info),
			 O1_CLIENT_E_NO_DEVOUT);
	assert_int_equal(o1_client_submit(c, &so), 0);
	do {
		assert_int_equal(o1_client_wait(c, &ev, 10000000000ll), 1);
		n++;
	} while (ev.type != O1_EVENT_FINAL);
	assert_int_equal(n, 1);
	assert_int_equal(ev.req_id, 9);
	assert_int_equal(ev.finish, O1_FINISH_REASON_ERROR);
	assert_int_equal(ev.error, O1_CLIENT_E_NO_DEVOUT);
	assert_int_equal(o1_client_wait(c, &ev, 200000000ll), -ETIMEDOUT);
	assert_int_equal(o1_client_inflight(c), 0);
	o1_client_close(c);
	assert_int_equal(spec_run(d->socket, &specs[0], &r), 0);
	assert_int_equal(result_same(&r, &refs[0], "after a device request"),
			 0);
	expect_idle(d);
	assert_int_equal(daemon_stop(d), 0);
}

static int o1ctl(const struct daemon_proc *d, const char *args)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "%s %s --socket %s >/dev/null", o1ctl_bin,
		 args, d->socket);
	return system(cmd);
}

/* o1ctl status/drain/resume, and admin requests + cancel of a stream. */
static void test_admin(void **state)
{
	struct daemon_proc *d = *state;
	char buf[8192], req[128];
	struct result r;
	unsigned long long client;
	const char *at;
	pid_t pid;

	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	assert_int_equal(o1ctl(d, "status"), 0);
	/* the weight bytes by type (the tiny test model: all f32) */
	assert_int_equal(
	    admin_send(d->socket, "{\"op\":\"status\"}", buf, sizeof(buf)), 0);
	at = strstr(buf, "\"weights\":\"");
	assert_non_null(at);
	assert_non_null(strstr(at, "B: F32 "));
	assert_int_equal(o1ctl(d, "drain"), 0);
	assert_int_equal(spec_run(d->socket, &specs[0], &r), 0);
	assert_int_equal(r.finals, 1);
	assert_int_equal(r.error, -O1_E_DRAINING);
	assert_int_equal(o1ctl(d, "resume"), 0);
	assert_int_equal(spec_run(d->socket, &specs[0], &r), 0);
	assert_int_equal(result_same(&r, &refs[0], "resumed"), 0);
	pid = spawn_streamer(d->socket);
	wait_running(d->socket, 1);
	assert_int_equal(
	    admin_send(d->socket, "{\"op\":\"requests\"}", buf, sizeof(buf)),
	    0);
	at = strstr(buf, "\"client\":");
	assert_non_null(at);
	client = strtoull(at + 9, NULL, 10);
	assert_non_null(strstr(buf, "\"req_id\":7"));
	snprintf(req, sizeof(req), "cancel %llu 7", client);
	assert_int_equal(o1ctl(d, req), 0);
	assert_int_not_equal(o1ctl(d, "cancel 1 2 3x"), 0);
	assert_int_equal(reap(pid), 0);
	expect_idle(d);
	assert_int_equal(daemon_stop(d), 0);
}

/* backend.tensor_parallel > 1 is refused on the CPU backend (a config
 * error naming the rule), and with device auto it never falls back to
 * the CPU: o1d exits without two GPUs (and NCCL), serves with them. */
static void test_tensor_parallel_refused(void **state)
{
	struct daemon_proc *d = *state;
	const char *const cpu[] = {"backend.devices=0,1",
				   "backend.tensor_parallel=2", NULL};
	const char *const autodev[] = {"backend.device=auto",
				       "backend.devices=0,1",
				       "backend.tensor_parallel=2", NULL};

	assert_int_equal(daemon_start(d, o1d_bin, cpu), -1);
	assert_true(log_has(d->log, "tensor_parallel = 2 needs the CUDA "
				    "backend"));
	if (daemon_start(d, o1d_bin, autodev) == 0) {
		/* two GPUs and NCCL: it serves over both */
		assert_true(log_has(d->log, "tensor parallel: 2 ranks of the "
					    "cuda backend"));
		assert_int_equal(daemon_stop(d), 0);
	} else {
		assert_true(log_has(d->log, "start-up failed"));
	}
	assert_false(log_has(d->log, "using cpu"));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_single),
	    cmocka_unit_test(test_many_clients),
	    cmocka_unit_test(test_preemption),
	    cmocka_unit_test(test_client_death),
	    cmocka_unit_test(test_cancel),
	    cmocka_unit_test(test_prefix_cache),
	    cmocka_unit_test(test_drain),
	    cmocka_unit_test_teardown(test_drain_deadline, harness_stop),
	    cmocka_unit_test(test_admin),
	    cmocka_unit_test(test_text_stop_chat),
	    cmocka_unit_test(test_notify_and_reload),
	    cmocka_unit_test(test_backpressure_logprobs),
	    cmocka_unit_test(test_hf_reference),
	    cmocka_unit_test(test_bad_requests),
	    cmocka_unit_test(test_tensor_parallel_refused),
	    cmocka_unit_test(test_device_outputs_cpu),
	};

	if (argc < 4) {
		fprintf(stderr, "usage: test_o1d O1D O1MODEL O1CTL\n");
		return 2;
	}
	o1ctl_bin = argv[3];
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	return cmocka_run_group_tests(tests, setup, teardown);
}
