/* o1bench soak: many clients for a long time, some SIGKILLed, every
 * surviving answer checked.
 *
 *   o1bench soak --socket PATH --model FILE [--o1model PATH]
 *                [--clients N] [--duration S] [--kill-fraction F]
 *                [--round-ms R] [--max-tokens M] [--inflight K]
 *                [--prompts P] [--seed S]
 *
 * P token-id prompts get their greedy continuation from `o1model run` on
 * the daemon's model file first (the reference). Then N client processes
 * (fork) each keep K requests in flight until the duration ends, each
 * request one of the prompts, and check every answer: exactly one FINAL
 * per request, finished normally, its ids those of the reference, and no
 * event for a request already finished. Every round (R ms), F x N random
 * clients are SIGKILLed at random moments and replaced; their requests
 * are not counted (o1d cancels them when it sees the hang-up). At the end
 * o1d must be idle with every KV page free, hold as many descriptors as
 * after the warm-up and about the same memory (at most 10% or 32 MB
 * more): nothing leaked for the killed clients.
 *
 * Prints one key=value line; exit 0 when every check held, 1 otherwise,
 * 2 on bad arguments. o1d must run as this uid (admin status).
 *
 * Processes: the parent forks the clients and kills some; each client
 * writes its tally to its own pipe when done (a killed one writes
 * nothing). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "o1/client.h"
#include "o1bench.h"

#define CMD	      "soak"
#define MAX_PROMPT    24
#define MAX_CLIENTS   512
#define DRAIN_MS      60000
#define RSS_SLACK_KB  (32 * 1024)

struct soak_args {
	const char *socket, *model, *o1model;
	long clients, duration_s, round_ms, max_tokens, inflight, prompts;
	double kill;
	long seed;
};

/* One prompt and its reference continuation. */
struct ref {
	uint32_t ids[MAX_PROMPT];
	uint32_t n_ids;
	uint32_t *gen;
	uint32_t n_gen;
};

/* What a client found, written to its pipe when it is done. */
struct tally {
	uint64_t submitted, exact, mismatched, errors, doubled, lost;
	int32_t transport; /* a client-library failure (-errno), 0: none */
};

/* A client process of the parent. */
struct child {
	pid_t pid; /* 0: none */
	int fd;	   /* its tally pipe */
};

static void soak_usage(FILE *f)
{
	fprintf(f,
		"usage: o1bench soak --socket PATH --model FILE "
		"[--o1model PATH]\n"
		"                    [--clients N] [--duration S] "
		"[--kill-fraction F] [--round-ms R]\n"
		"                    [--max-tokens M] [--inflight K] "
		"[--prompts P] [--seed S]\n"
		"N client processes (16) keep K requests (4) in flight for S "
		"seconds (600),\neach greedy on one of P prompts (8) and "
		"checked against `o1model run FILE`;\nevery R ms (2000) F x N "
		"random clients (0.1) are SIGKILLed and replaced.\nAt the end "
		"o1d must be idle, its KV pages free, its descriptors and "
		"memory\nas after the warm-up. Exit 0 all checks held, 1 "
		"not, 2 bad arguments.\n");
}

static int soak_value(struct soak_args *a, const char *opt, const char *v)
{
	if (!strcmp(opt, "--socket"))
		a->socket = v;
	else if (!strcmp(opt, "--model"))
		a->model = v;
	else if (!strcmp(opt, "--o1model"))
		a->o1model = v;
	else if (!strcmp(opt, "--clients"))
		return o1bench_parse_long(CMD, opt, v, 1, MAX_CLIENTS,
					  &a->clients);
	else if (!strcmp(opt, "--duration"))
		return o1bench_parse_long(CMD, opt, v, 1, 86400 * 7,
					  &a->duration_s);
	else if (!strcmp(opt, "--round-ms"))
		return o1bench_parse_long(CMD, opt, v, 100, 3600000,
					  &a->round_ms);
	else if (!strcmp(opt, "--max-tokens"))
		return o1bench_parse_long(CMD, opt, v, 1, 4096, &a->max_tokens);
	else if (!strcmp(opt, "--inflight"))
		return o1bench_parse_long(CMD, opt, v, 1, 1024, &a->inflight);
	else if (!strcmp(opt, "--prompts"))
		return o1bench_parse_long(CMD, opt, v, 1, 1024, &a->prompts);
	else if (!strcmp(opt, "--seed"))
		return o1bench_parse_long(CMD, opt, v, 0, 1L << 30, &a->seed);
	else if (!strcmp(opt, "--kill-fraction"))
		return o1bench_parse_double(CMD, opt, v, 0, 1, &a->kill);
	else {
		fprintf(stderr, "o1bench soak: unknown option %s\n", opt);
		return -EINVAL;
	}
	return 0;
}

static int soak_parse(int argc, char **argv, struct soak_args *a)
{
	*a = (struct soak_args){.o1model = "o1model",
				.clients = 16,
				.duration_s = 600,
				.round_ms = 2000,
				.max_tokens = 32,
				.inflight = 4,
				.prompts = 8,
				.kill = 0.1,
				.seed = 1};
	for (int i = 1; i < argc; i += 2) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			soak_usage(stdout);
			exit(0);
		}
		if (i + 1 == argc) {
			fprintf(stderr, "o1bench soak: %s needs a value\n",
				argv[i]);
			return -EINVAL;
		}
		if (soak_value(a, argv[i], argv[i + 1]))
			return -EINVAL;
	}
	if (!a->socket)
		a->socket = o1bench_socket;
	if (!a->socket || !a->model) {
		fprintf(stderr, "o1bench soak: --socket and --model are "
				"required\n");
		return -EINVAL;
	}
	return 0;
}

/* ---- references ---- */

/* Prompt P: 4..16 ids below VOCAB, none the same for two prompts. */
static void make_prompt(struct ref *r, uint32_t p, uint32_t vocab)
{
	uint32_t span = vocab > 1024 ? 1024 : vocab > 16 ? vocab : 16;

	r->n_ids = 4 + (p * 5) % 13;
	for (uint32_t j = 0; j < r->n_ids; j++)
		r->ids[j] = (p * 131 + j * 17 + j * j + 3) % span;
	r->ids[0] = p % span;
}

/* R's continuation from `o1model run` (greedy, M tokens at most). */
static int reference(const struct soak_args *a, struct ref *r)
{
	char cmd[2048], line[65536], *p = cmd, *tok, *save;
	FILE *f;

	p += snprintf(p, 512,
		      "'%s' run '%s' --ids-only --threads 2 --max-tokens %ld "
		      "--ids \"",
		      a->o1model, a->model, a->max_tokens);
	for (uint32_t i = 0; i < r->n_ids; i++)
		p += sprintf(p, "%s%u", i ? " " : "", r->ids[i]);
	sprintf(p, "\"");
	r->gen = calloc((size_t)a->max_tokens, sizeof(uint32_t));
	f = r->gen ? popen(cmd, "r") : NULL;
	if (!f || !fgets(line, sizeof(line), f)) {
		if (f)
			pclose(f);
		fprintf(stderr, "o1bench soak: no reference from: %s\n", cmd);
		return -1;
	}
	for (tok = strtok_r(line, " \n", &save);
	     tok && r->n_gen < a->max_tokens; tok = strtok_r(NULL, " \n", &save))
		r->gen[r->n_gen++] = (uint32_t)strtoul(tok, NULL, 10);
	return pclose(f) == 0 ? 0 : -1;
}

/* ---- a client process ---- */

struct slot {
	bool busy;
	uint64_t req_id;
	uint32_t prompt, n, finals;
	bool bad; /* ids differ or overflow */
	uint32_t *ids;
};

struct client {
	const struct soak_args *a;
	const struct ref *refs;
	struct o1_client *c;
	struct slot *s;
	struct tally t;
	uint64_t next_id;
	unsigned rng;
};

static struct slot *slot_of(struct client *cl, uint64_t req_id)
{
	for (long i = 0; i < cl->a->inflight; i++)
		if (cl->s[i].busy && cl->s[i].req_id == req_id)
			return &cl->s[i];
	return NULL;
}

static int submit(struct client *cl, struct slot *s)
{
	const struct ref *r;
	struct o1_submit_opts o = {.sz = sizeof(o)};
	int err;

	s->prompt = (uint32_t)(rand_r(&cl->rng) % cl->a->prompts);
	r = &cl->refs[s->prompt];
	s->req_id = ++cl->next_id;
	o.req_id = s->req_id;
	o.ids = r->ids;
	o.n_ids = r->n_ids;
	o.max_tokens = (uint32_t)cl->a->max_tokens;
	o.flags = O1_FLAG_NO_TEXT;
	err = o1_client_submit(cl->c, &o);
	if (err)
		return err;
	s->busy = true;
	s->n = s->finals = 0;
	s->bad = false;
	cl->t.submitted++;
	return 0;
}

static void on_final(struct client *cl, struct slot *s,
		     const struct o1_event *ev)
{
	const struct ref *r = &cl->refs[s->prompt];

	if (ev->finish == O1_FINISH_REASON_ERROR ||
	    ev->finish == O1_FINISH_REASON_CANCELLED) {
		cl->t.errors++;
		fprintf(stderr, "o1bench soak: request %llu: %s\n",
			(unsigned long long)s->req_id,
			o1_client_strerror(ev->error));
	} else if (s->bad || s->n != r->n_gen ||
		   memcmp(s->ids, r->gen, s->n * sizeof(uint32_t))) {
		cl->t.mismatched++;
	} else {
		cl->t.exact++;
	}
	s->busy = false;
}

static void on_event(struct client *cl, const struct o1_event *ev)
{
	struct slot *s = slot_of(cl, ev->req_id);

	if (!s) { /* an event for a request already finished */
		cl->t.doubled += ev->type == O1_EVENT_FINAL;
		return;
	}
	if (ev->type == O1_EVENT_TOKEN) {
		for (uint32_t i = 0; i < ev->n_ids; i++) {
			if (s->n == cl->a->max_tokens) {
				s->bad = true;
				break;
			}
			s->ids[s->n++] = ev->ids[i];
		}
	} else if (ev->type == O1_EVENT_FINAL) {
		on_final(cl, s, ev);
	}
}

static uint32_t busy(const struct client *cl)
{
	uint32_t n = 0;

	for (long i = 0; i < cl->a->inflight; i++)
		n += cl->s[i].busy;
	return n;
}

/* Keeps the slots busy until DEADLINE, then waits for what is in flight
 * and for stray events a while. */
static void client_run(struct client *cl, uint64_t deadline)
{
	uint64_t drain_end = 0;
	struct o1_event ev;
	int ret;

	for (;;) {
		uint64_t now = o1bench_now_ns();

		if (now < deadline)
			for (long i = 0; i < cl->a->inflight; i++)
				if (!cl->s[i].busy && submit(cl, &cl->s[i]))
					break;
		if (now >= deadline && !drain_end)
			drain_end = now + DRAIN_MS * 1000000ull;
		if (drain_end && (!busy(cl) || now > drain_end))
			break;
		ret = o1_client_wait(cl->c, &ev, 100000000);
		if (ret == 1)
			on_event(cl, &ev);
		else if (ret != -ETIMEDOUT) {
			cl->t.transport = ret;
			return;
		}
	}
	cl->t.lost = busy(cl);
	for (int i = 0; i < 20; i++) { /* 100 ms for doubles */
		while (o1_client_poll(cl->c, &ev) == 1)
			on_event(cl, &ev);
		o1bench_sleep_ms(5);
	}
}

static void child_main(const struct soak_args *a, const struct ref *refs,
		       unsigned seed, uint64_t deadline, int fd)
{
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = a->socket, .name = "soak"};
	struct client cl = {.a = a, .refs = refs, .rng = seed};
	int err;

	cl.s = calloc((size_t)a->inflight, sizeof(*cl.s));
	for (long i = 0; cl.s && i < a->inflight; i++)
		cl.s[i].ids = calloc((size_t)a->max_tokens, sizeof(uint32_t));
	err = cl.s ? o1_client_connect(&co, &cl.c) : -ENOMEM;
	if (err)
		cl.t.transport = err;
	else
		client_run(&cl, deadline);
	o1_client_close(cl.c);
	if (write(fd, &cl.t, sizeof(cl.t)) != sizeof(cl.t))
		_exit(1);
	_exit(0);
}

/* ---- the parent ---- */

static int spawn(const struct soak_args *a, const struct ref *refs,
		 unsigned seed, uint64_t deadline, struct child *ch)
{
	int p[2];

	if (pipe(p))
		return -errno;
	fflush(NULL);
	ch->pid = fork();
	if (ch->pid < 0) {
		close(p[0]);
		close(p[1]);
		ch->pid = 0;
		return -errno;
	}
	if (ch->pid == 0) {
		close(p[0]);
		child_main(a, refs, seed, deadline, p[1]);
	}
	close(p[1]);
	ch->fd = p[0];
	return 0;
}

/* Waits for CH and adds its tally to SUM (a killed one adds nothing). */
static void reap(struct child *ch, struct tally *sum, bool killed)
{
	struct tally t;

	waitpid(ch->pid, NULL, 0);
	if (!killed && read(ch->fd, &t, sizeof(t)) == sizeof(t)) {
		sum->submitted += t.submitted;
		sum->exact += t.exact;
		sum->mismatched += t.mismatched;
		sum->errors += t.errors;
		sum->doubled += t.doubled;
		sum->lost += t.lost;
		if (t.transport && !sum->transport)
			sum->transport = t.transport;
	} else if (!killed) {
		sum->transport = -EPIPE; /* died on its own */
	}
	close(ch->fd);
	ch->pid = 0;
}

/* Runs the clients until the duration ends, killing some each round;
 * returns the kills. */
static long run_clients(const struct soak_args *a, const struct ref *refs,
			struct child *ch, struct tally *sum)
{
	uint64_t deadline = o1bench_now_ns() +
			    (uint64_t)a->duration_s * 1000000000ull;
	unsigned rng = (unsigned)a->seed;
	long kills = 0, per_round = (long)(a->kill * a->clients + 0.5);

	for (long i = 0; i < a->clients; i++)
		if (spawn(a, refs, rand_r(&rng), deadline, &ch[i]))
			return -1;
	while (o1bench_now_ns() + (uint64_t)a->round_ms * 1000000ull <
	       deadline) {
		long at = rand_r(&rng) % a->round_ms;

		o1bench_sleep_ms(at);
		for (long k = 0; k < per_round; k++) {
			struct child *c = &ch[rand_r(&rng) % a->clients];

			kill(c->pid, SIGKILL);
			reap(c, sum, true);
			kills++;
			if (spawn(a, refs, rand_r(&rng), deadline, c))
				return -1;
		}
		o1bench_sleep_ms(a->round_ms - at);
	}
	for (long i = 0; i < a->clients; i++)
		reap(&ch[i], sum, false);
	return kills;
}

/* The prompts' references and a warm-up through one connection (every
 * prompt once, checked), so the baseline memory is the loaded daemon's. */
static int prepare(const struct soak_args *a, struct ref *refs)
{
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = a->socket, .name = "soak"};
	struct o1_client_limits l = {.sz = sizeof(l)};
	struct o1_client *c;

	if (o1_client_connect(&co, &c)) {
		fprintf(stderr, "o1bench soak: cannot connect to %s: %s\n",
			a->socket, o1_last_error());
		return -1;
	}
	if (o1_client_limits(c, &l))
		l.vocab_size = 256;
	o1_client_close(c);
	for (long p = 0; p < a->prompts; p++) {
		make_prompt(&refs[p], (uint32_t)p, l.vocab_size);
		if (reference(a, &refs[p]))
			return -1;
	}
	return 0;
}

/* Baseline: after a short warm-up round, o1d idle. */
static int baseline(const struct soak_args *a, const struct ref *refs,
		    pid_t *pid, uint64_t *rss, uint32_t *fds)
{
	struct soak_args w = *a;
	struct child c;
	struct tally t = {0};
	struct o1bench_status st;

	w.clients = 1;
	if (spawn(&w, refs, 7, o1bench_now_ns() + 1000000000ull, &c))
		return -1;
	reap(&c, &t, false);
	if (t.transport || t.mismatched || t.errors || !t.exact) {
		fprintf(stderr,
			"o1bench soak: warm-up failed: %llu exact, %llu "
			"differ from o1model run, %llu errors, transport %s\n",
			(unsigned long long)t.exact,
			(unsigned long long)t.mismatched,
			(unsigned long long)t.errors,
			o1_client_strerror(t.transport));
		return -1;
	}
	if (o1bench_wait_idle(a->socket, 30000, &st) || st.pid <= 0) {
		fprintf(stderr, "o1bench soak: no idle admin status from %s "
				"(o1d must run as this uid)\n",
			a->socket);
		return -1;
	}
	*pid = st.pid;
	return o1bench_proc_usage(*pid, rss, fds) ? -1 : 0;
}

/* The end: idle, pages free, descriptors back (waited for), memory
 * within the slack. */
static bool end_state(const struct soak_args *a, pid_t pid, uint64_t rss0,
		      uint32_t fds0, uint64_t *rss1, uint32_t *fds1,
		      long long *pages)
{
	struct o1bench_status st;
	bool idle = !o1bench_wait_idle(a->socket, 60000, &st);

	*pages = st.pages_used;
	for (int i = 0; i < 500; i++) {
		if (o1bench_proc_usage(pid, rss1, fds1))
			return false;
		if (*fds1 <= fds0)
			break;
		o1bench_sleep_ms(20);
	}
	return idle && !*pages && *fds1 <= fds0 &&
	       *rss1 <= rss0 + (rss0 / 10 > RSS_SLACK_KB ? rss0 / 10
							 : RSS_SLACK_KB);
}

int o1bench_cmd_soak(int argc, char **argv)
{
	struct soak_args a;
	struct ref *refs;
	struct child *ch;
	struct tally sum = {0};
	uint64_t rss0, rss1 = 0;
	uint32_t fds0, fds1 = 0;
	long long pages = -1;
	long kills;
	pid_t pid;
	bool ok;

	if (soak_parse(argc, argv, &a))
		return 2;
	signal(SIGPIPE, SIG_IGN);
	refs = calloc((size_t)a.prompts, sizeof(*refs));
	ch = calloc((size_t)a.clients, sizeof(*ch));
	if (!refs || !ch || prepare(&a, refs) ||
	    baseline(&a, refs, &pid, &rss0, &fds0))
		return 1;
	kills = run_clients(&a, refs, ch, &sum);
	ok = kills >= 0 &&
	     end_state(&a, pid, rss0, fds0, &rss1, &fds1, &pages);
	ok = ok && !sum.transport && !sum.mismatched && !sum.errors &&
	     !sum.doubled && !sum.lost && sum.exact == sum.submitted &&
	     sum.exact > 0;
	printf("soak %s clients=%ld duration_s=%ld kills=%ld requests=%llu "
	       "exact=%llu mismatched=%llu errors=%llu doubled=%llu "
	       "lost=%llu transport=%s pages_used=%lld rss_kb=%llu->%llu "
	       "fds=%u->%u\n",
	       ok ? "ok" : "FAILED", a.clients, a.duration_s, kills,
	       (unsigned long long)sum.submitted,
	       (unsigned long long)sum.exact,
	       (unsigned long long)sum.mismatched,
	       (unsigned long long)sum.errors,
	       (unsigned long long)sum.doubled, (unsigned long long)sum.lost,
	       sum.transport ? o1_client_strerror(sum.transport) : "ok",
	       pages, (unsigned long long)rss0, (unsigned long long)rss1, fds0,
	       fds1);
	for (long p = 0; p < a.prompts; p++)
		free(refs[p].gen);
	free(refs);
	free(ch);
	return ok ? 0 : 1;
}
