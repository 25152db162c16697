/* See sidecar_harness.h. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "sidecar_harness.h"
#include "tests/common/test_util.h"

const char *o1d_bin, *o1model_bin, *sidecar_bin;
char dir[64], sock[128], model[128], metrics[128];
struct proc daemon_p;
const char *daemon_sets[5];
const char *harness_preset = "demo";

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

char *slurp(const char *path)
{
	size_t n;
	char *s = o1_test_file_read(path, &n);

	return s;
}

bool log_has(const char *path, const char *what)
{
	FILE *f = fopen(path, "r");
	char *s;
	bool has;

	if (!f)
		return false;
	fclose(f);
	s = slurp(path);
	has = strstr(s, what) != NULL;
	free(s);
	return has;
}

/* Forks ARGV with stdout and stderr to P->log; waits for READY in it. */
void spawn(struct proc *p, char *const *argv, const char *ready)
{
	uint64_t until = now_ms() + 60000;
	char *s, *at;

	unlink(p->log); /* a restart must not see the last run's line */
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	while (now_ms() < until) {
		if (log_has(p->log, ready)) {
			s = slurp(p->log);
			at = strstr(s, "listen=127.0.0.1:");
			p->port = at ? atoi(at + 17) : 0;
			free(s);
			return;
		}
		if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
			p->pid = 0;
			fail_msg("%s exited before ready:\n%s", argv[0],
				 slurp(p->log));
		}
		sleep_ms(20);
	}
	fail_msg("%s not ready in 60 s:\n%s", argv[0], slurp(p->log));
}

int stop(struct proc *p)
{
	int st = -1;

	if (p->pid <= 0)
		return -1;
	kill(p->pid, SIGTERM);
	waitpid(p->pid, &st, 0);
	p->pid = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void start_daemon(void)
{
	char set_model[192], set_sock[192], set_shm[192];
	char *argv[32] = {(char *)o1d_bin,
			  "--set",
			  set_model,
			  "--set",
			  set_sock,
			  "--set",
			  "kv.pages=512",
			  "--set",
			  "metrics.mode=shm",
			  "--set",
			  set_shm,
			  "--set",
			  "backend.device=cpu",
			  "--set",
			  "backend.threads=2",
			  "--set",
			  "ipc.max_clients=256",
			  NULL};
	int n = 0;

	snprintf(set_model, sizeof(set_model), "model.path=%s", model);
	snprintf(set_sock, sizeof(set_sock), "ipc.socket=%s", sock);
	snprintf(set_shm, sizeof(set_shm), "metrics.shm_path=%s", metrics);
	while (argv[n])
		n++;
	for (int i = 0; i < 4 && daemon_sets[i]; i++) {
		argv[n++] = "--set";
		argv[n++] = (char *)daemon_sets[i];
	}
	argv[n] = NULL;
	snprintf(daemon_p.log, sizeof(daemon_p.log), "%s/o1d.log", dir);
	spawn(&daemon_p, argv, "o1d: ready socket=");
}

/* A sidecar with extra "--set" values (NULL-terminated, at most 4). */
void start_sidecar(struct proc *p, const char *name, const char *const *sets)
{
	char set_shm[192], alog[192];
	char *argv[24] = {
	    (char *)sidecar_bin, "--daemon",	 sock,	 "--listen",
	    "127.0.0.1:0",	 "--access-log", alog,	 "--set",
	    "metrics.mode=shm",	 "--set",	 set_shm};
	int n = 11;

	snprintf(set_shm, sizeof(set_shm), "metrics.shm_path=%s", metrics);
	snprintf(alog, sizeof(alog), "%s/%s.access", dir, name);
	for (; sets && *sets && n < 20; sets++) {
		argv[n++] = "--set";
		argv[n++] = (char *)*sets;
	}
	argv[n] = NULL;
	snprintf(p->log, sizeof(p->log), "%s/%s.log", dir, name);
	spawn(p, argv, "o1-sidecar: ready listen=");
	assert_true(p->port > 0);
}

static int on_token(void *arg, const struct o1_event *ev)
{
	struct direct *d = arg;

	if (d->len + ev->text_len < sizeof(d->text)) {
		memcpy(d->text + d->len, ev->text, ev->text_len);
		d->len += ev->text_len;
		d->text[d->len] = 0;
	}
	return 0;
}

void direct(const char *text, size_t len, uint32_t flags, uint32_t max_tokens,
	    const char *stop, struct direct *d)
{
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = sock};
	const char *stops[1] = {stop};
	struct o1_submit_opts o = {.sz = sizeof(o),
				   .req_id = 1,
				   .text = text,
				   .text_len = len,
				   .max_tokens = max_tokens,
				   .stop_strings = stops,
				   .n_stop_strings = stop ? 1 : 0,
				   .flags = flags};
	struct o1_client *c;

	memset(d, 0, sizeof(*d));
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_generate(c, &o, on_token, d, &d->final), 0);
	assert_int_equal(d->final.error, 0);
	o1_client_close(c);
}

int harness_setup(const char *o1d, const char *o1model, const char *sidecar)
{
	char cmd[512];

	o1d_bin = o1d;
	o1model_bin = o1model;
	sidecar_bin = sidecar;
	o1_test_dir_make(dir, sizeof(dir), "sidecar");
	snprintf(sock, sizeof(sock), "%s/o1d.sock", dir);
	snprintf(model, sizeof(model), "%s/%s.gguf", dir, harness_preset);
	snprintf(metrics, sizeof(metrics), "%s/metrics", dir);
	snprintf(cmd, sizeof(cmd), "%s make --preset %s --out %s 2>&1",
		 o1model_bin, harness_preset, model);
	if (system(cmd) != 0)
		return -1;
	start_daemon();
	return 0;
}

int harness_teardown(struct proc *const *sidecars, size_t n)
{
	int bad = 0, code;

	for (size_t i = 0; i < n; i++) {
		code = stop(sidecars[i]);
		if (code) {
			fprintf(stderr, "sidecar exit code %d (%s)\n", code,
				sidecars[i]->log);
			bad = 1;
		}
	}
	code = stop(&daemon_p);
	if (code) {
		fprintf(stderr, "o1d exit code %d (%s)\n", code, daemon_p.log);
		bad = 1;
	}
	return bad ? -1 : o1_test_dir_remove(dir);
}

int harness_args(int argc, char **argv, int min_extra, int max_extra,
		 const char *extra)
{
	if (argc < 4 + min_extra || argc > 4 + max_extra) {
		fprintf(stderr, "usage: %s O1D O1MODEL O1_SIDECAR%s%s\n",
			argv[0], extra ? " " : "", extra ? extra : "");
		return 2;
	}
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	sidecar_bin = argv[3];
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

int http_to(const struct proc *p, const char *method, const char *path,
	    const char *body, char **out)
{
	char cmd[1024], data[128] = "", *res = malloc(1 << 20), *nl;
	int code;

	assert_non_null(res);
	if (body) {
		o1_test_file_put(dir, "body.json", body);
		snprintf(data, sizeof(data), "--data-binary @%s/body.json",
			 dir);
	}
	snprintf(cmd, sizeof(cmd),
		 "curl -sN --max-time 120 -X %s %s "
		 "-H 'Content-Type: application/json' -w '\\n%%{http_code}' "
		 "http://127.0.0.1:%d%s",
		 method, data, p->port, path);
	assert_int_equal(o1_test_run(cmd, res, 1 << 20), 0);
	nl = strrchr(res, '\n');
	assert_non_null(nl);
	code = atoi(nl + 1);
	*nl = 0;
	*out = res;
	return code;
}

const cJSON *json_at(const cJSON *j, const char *path)
{
	char buf[128], *tok, *save;
	const cJSON *j0 = j;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && j;
	     tok = strtok_r(NULL, ".", &save))
		j = *tok >= '0' && *tok <= '9'
			? cJSON_GetArrayItem(j, atoi(tok))
			: cJSON_GetObjectItemCaseSensitive(j, tok);
	if (!j)
		fail_msg("no %s in %s", path, cJSON_PrintUnformatted(j0));
	return j;
}

const char *json_str(const cJSON *j, const char *path)
{
	const cJSON *v = json_at(j, path);

	if (!cJSON_IsString(v))
		fail_msg("%s is not a string", path);
	return v->valuestring;
}

double json_num(const cJSON *j, const char *path)
{
	const cJSON *v = json_at(j, path);

	if (!cJSON_IsNumber(v))
		fail_msg("%s is not a number", path);
	return v->valuedouble;
}
