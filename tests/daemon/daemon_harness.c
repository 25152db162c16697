/* Daemon test helpers (see daemon_harness.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "o1d/admin.h"
#include "daemon_harness.h"
#include "o1/client.h"

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

int harness_init(struct daemon_proc *d, const char *o1model)
{
	char cmd[512];

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/o1d-test-XXXXXX");
	if (!mkdtemp(d->dir) || chmod(d->dir, 0755))
		return -1;
	snprintf(d->socket, sizeof(d->socket), "%s/o1d.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/o1d.log", d->dir);
	snprintf(d->model, sizeof(d->model), "%s/tiny.gguf", d->dir);
	snprintf(cmd, sizeof(cmd),
		 "%s make --preset tiny --out %s >/dev/null 2>&1", o1model,
		 d->model);
	return system(cmd) == 0 ? 0 : -1;
}

void harness_fini(struct daemon_proc *d)
{
	char cmd[128];

	if (d->pid > 0)
		daemon_stop(d);
	if (getenv("O1_TEST_KEEP"))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", d->dir);
}

const char *harness_o1model;

int harness_setup(void **state)
{
	static struct daemon_proc d;

	if (harness_init(&d, harness_o1model))
		return -1;
	*state = &d;
	return 0;
}

int harness_teardown(void **state)
{
	harness_fini(*state);
	return 0;
}

int harness_stop(void **state)
{
	struct daemon_proc *d = *state;

	if (d->pid > 0)
		daemon_stop(d);
	return 0;
}

int harness_run(const char *cmd, char *out, size_t cap)
{
	char sink[4096];
	FILE *f = popen(cmd, "r");
	size_t n = 0;
	int st;

	if (!f)
		return -1;
	if (out && cap) {
		n = fread(out, 1, cap - 1, f);
		out[n] = 0;
	}
	while (fread(sink, 1, sizeof(sink), f) > 0)
		;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool log_has(const char *path, const char *what)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return found;
}

static void exec_daemon(const struct daemon_proc *d, const char *o1d,
			const char *const *sets)
{
	const char *argv[64];
	char sock[192], model[192], fronts[64];
	int n = 0, fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);

	if (fd < 0 || dup2(fd, 2) < 0)
		_exit(127);
	snprintf(sock, sizeof(sock), "ipc.socket=%s", d->socket);
	snprintf(model, sizeof(model), "model.path=%s", d->model);
	argv[n++] = o1d;
	if (d->config[0]) {
		argv[n++] = "-c";
		argv[n++] = d->config;
	}
	argv[n++] = "--set";
	argv[n++] = sock;
	argv[n++] = "--set";
	argv[n++] = model;
	argv[n++] = "--set";
	argv[n++] = "metrics.enabled=false";
	argv[n++] = "--set";
	argv[n++] = "backend.device=cpu";
	argv[n++] = "--set";
	argv[n++] = "backend.threads=2";
	for (int i = 0; sets && sets[i] && n < 58; i++) {
		argv[n++] = "--set";
		argv[n++] = sets[i];
	}
	/* the same tests with several front threads (ctest's *_fronts) */
	if (getenv("O1_TEST_FRONT_THREADS")) {
		snprintf(fronts, sizeof(fronts), "ipc.front_threads=%s",
			 getenv("O1_TEST_FRONT_THREADS"));
		argv[n++] = "--set";
		argv[n++] = fronts;
	}
	argv[n] = NULL;
	execv(o1d, (char *const *)argv);
	_exit(127);
}

int daemon_start(struct daemon_proc *d, const char *o1d,
		 const char *const *sets)
{
	int status;

	if (truncate(d->log, 0) != 0 && errno != ENOENT)
		return -1;
	d->exit_status = -1;
	d->pid = fork();
	if (d->pid < 0)
		return -1;
	if (d->pid == 0)
		exec_daemon(d, o1d, sets);
	for (int i = 0; i < 3000; i++) {
		if (log_has(d->log, "o1d: ready socket="))
			return 0;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			fprintf(stderr, "o1d exited at start-up; log %s\n",
				d->log);
			d->pid = 0;
			d->exit_status =
			    WIFEXITED(status) ? WEXITSTATUS(status) : -1;
			return -1;
		}
		msleep(10);
	}
	fprintf(stderr, "o1d not ready after 30 s; log %s\n", d->log);
	return -1;
}

int daemon_stop(struct daemon_proc *d)
{
	int status;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	if (waitpid(d->pid, &status, 0) != d->pid)
		return -1;
	d->pid = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void spec_make(struct spec *s, unsigned i)
{
	memset(s, 0, sizeof(*s));
	s->n_ids = 2 + (i * 7) % 45;
	for (uint32_t j = 0; j < s->n_ids; j++)
		s->ids[j] = (i * 31 + j * 17 + j * j) % 490;
	s->max_tokens = 3 + (i * 5) % 18;
	s->temperature = i % 3 == 0 ? 0.0f : 0.9f;
	s->top_k = i % 4 == 1 ? 20 : 0;
	s->top_p = i % 5 == 2 ? 0.9f : 1.0f;
	s->seed = 1000 + i;
}

int spec_reference(const char *o1model, const char *model, const struct spec *s,
		   struct result *ref)
{
	char cmd[2048], *p = cmd, line[8192];
	FILE *f;
	int n = 0;

	p += sprintf(p,
		     "%s run %s --ids-only --threads 2 --max-tokens %u "
		     "--temperature %g --top-k %u --top-p %g --seed %llu "
		     "--ids \"",
		     o1model, model, s->max_tokens, s->temperature, s->top_k,
		     s->top_p, (unsigned long long)s->seed);
	for (uint32_t i = 0; i < s->n_ids; i++)
		p += sprintf(p, "%s%u", i ? " " : "", s->ids[i]);
	sprintf(p, "\" 2>/dev/null");
	memset(ref, 0, sizeof(*ref));
	f = popen(cmd, "r");
	if (!f || !fgets(line, sizeof(line), f)) {
		if (f)
			pclose(f);
		return -1;
	}
	for (char *t = strtok(line, " \n"); t && n < SPEC_GEN_MAX;
	     t = strtok(NULL, " \n"))
		ref->ids[n++] = (uint32_t)strtoul(t, NULL, 10);
	ref->n_ids = (uint32_t)n;
	return pclose(f) == 0 ? 0 : -1;
}

static bool utf8_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t len = c < 0x80	      ? 1
			     : (c >> 5) == 6  ? 2
			     : (c >> 4) == 14 ? 3
			     : (c >> 3) == 30 ? 4
					      : 0;

		if (!len || i + len > n)
			return false;
		for (size_t k = 1; k < len; k++)
			if (((unsigned char)s[i + k] & 0xc0) != 0x80)
				return false;
		i += len;
	}
	return true;
}

void result_add_event(struct result *r, const struct o1_event *ev)
{
	if (ev->type == O1_EVENT_TOKEN) {
		for (uint32_t i = 0; i < ev->n_ids && r->n_ids < SPEC_GEN_MAX;
		     i++)
			r->ids[r->n_ids++] = ev->ids[i];
		if (!utf8_ok(ev->text, ev->text_len))
			r->bad_utf8 = true;
		if (r->text_len + ev->text_len < sizeof(r->text)) {
			memcpy(r->text + r->text_len, ev->text, ev->text_len);
			r->text_len += ev->text_len;
		}
	} else if (ev->type == O1_EVENT_FINAL) {
		r->finals++;
		r->finish = ev->finish;
		r->error = ev->error;
		r->generated = ev->generated_tokens;
		r->prompt_tokens = ev->prompt_tokens;
	}
}

int spec_run(const char *socket, const struct spec *s, struct result *out)
{
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = socket, .name = "test"};
	struct o1_sampling smp = {.sz = sizeof(smp),
				  .temperature = s->temperature,
				  .top_p = s->top_p,
				  .top_k = s->top_k,
				  .seed = s->seed};
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 7,
				    .ids = s->ids,
				    .n_ids = s->n_ids,
				    .sampling = &smp,
				    .max_tokens = s->max_tokens,
				    .flags =
					s->ignore_eos ? O1_FLAG_IGNORE_EOS : 0};
	struct o1_client *c;
	struct o1_event ev;
	int err;

	memset(out, 0, sizeof(*out));
	if (o1_client_connect(&co, &c))
		return -1;
	err = o1_client_submit(c, &so);
	while (!err && !out->finals) {
		err = o1_client_wait(c, &ev, 30000000000ll);
		if (err == 1) {
			result_add_event(out, &ev);
			err = 0;
		}
	}
	/* nothing may follow the FINAL */
	for (int i = 0; !err && i < 5; i++) {
		if (o1_client_poll(c, &ev) == 1)
			result_add_event(out, &ev);
		msleep(2);
	}
	o1_client_close(c);
	return err ? -1 : 0;
}

int result_same(const struct result *a, const struct result *ref,
		const char *what)
{
	bool same = a->n_ids == ref->n_ids &&
		    !memcmp(a->ids, ref->ids, a->n_ids * sizeof(uint32_t));

	if (same && a->finals == 1 && !a->bad_utf8)
		return 0;
	fprintf(stderr, "%s: %u ids (ref %u), %d finals, utf8 %s:", what,
		a->n_ids, ref->n_ids, a->finals, a->bad_utf8 ? "bad" : "ok");
	for (uint32_t i = 0; i < a->n_ids || i < ref->n_ids; i++)
		fprintf(stderr, " %d/%d", i < a->n_ids ? (int)a->ids[i] : -1,
			i < ref->n_ids ? (int)ref->ids[i] : -1);
	fprintf(stderr, "\n");
	return -1;
}

int admin_send(const char *socket, const char *req, char *buf, size_t cap)
{
	int fd, n;

	if (o1_admin_connect(socket, &fd))
		return -1;
	n = o1_admin_call(fd, req, buf, cap);
	close(fd);
	return n > 0 ? 0 : -1;
}

static int num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? (int)v->valuedouble : -1;
}

int admin_status(const char *socket, struct kv_status *st)
{
	char buf[8192];
	cJSON *o, *kv;

	if (admin_send(socket, "{\"op\":\"status\"}", buf, sizeof(buf)))
		return -1;
	o = cJSON_Parse(buf);
	kv = cJSON_GetObjectItemCaseSensitive(o, "kv");
	if (!cJSON_IsObject(kv)) {
		cJSON_Delete(o);
		return -1;
	}
	st->pages_total = num(kv, "pages_total");
	st->pages_free = num(kv, "pages_free");
	st->pages_used = num(kv, "pages_used");
	st->pages_cached = num(kv, "pages_cached");
	st->running = num(o, "running");
	st->waiting = num(o, "waiting");
	st->active = num(o, "active");
	st->clients = num(o, "clients");
	st->parked = num(o, "parked");
	st->stalled = num(o, "stalled");
	st->steps = num(o, "steps");
	st->preemptions = num(o, "preemptions");
	st->prefix_hits = num(o, "prefix_hits");
	st->prefix_misses = num(o, "prefix_misses");
	st->front_sleeps =
	    num(cJSON_GetObjectItemCaseSensitive(o, "front"), "sleeps");
	st->front_ticks =
	    num(cJSON_GetObjectItemCaseSensitive(o, "front"), "ticks");
	st->draining =
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "draining"));
	cJSON_Delete(o);
	return 0;
}

int admin_wait_idle(const char *socket, int ms, struct kv_status *st)
{
	for (int i = 0; i < ms / 10; i++) {
		if (admin_status(socket, st))
			return -1;
		if (!st->active && !st->running && !st->waiting &&
		    !st->pages_used)
			return 0;
		msleep(10);
	}
	fprintf(stderr, "not idle: active %d running %d waiting %d used %d\n",
		st->active, st->running, st->waiting, st->pages_used);
	return -1;
}
