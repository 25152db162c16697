/* See sidecar_backend.h. The pool is a mutex-guarded stack of idle
 * handles; a generation owns its handle from gen_start to gen_end, so no
 * handle is ever used by two threads at once. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "o1d/admin.h"
#include "common/error.h"
#include "common/log.h"
#include "sidecar_backend.h"

#define WAIT_SLICE_NS (20 * 1000 * 1000)
#define DRAIN_NS      (2000ll * 1000 * 1000)
#define STATUS_MAX    65536

struct o1_sidecar_backend {
	pthread_mutex_t lock;
	char *socket;
	unsigned cap, n_idle;
	uint32_t max_context; /* 0: the daemon's */
	struct o1_client **idle;
	uint64_t next_id;
};

uint64_t o1_sidecar_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int o1_sidecar_backend_create(const char *socket, unsigned cap,
			      uint32_t max_context,
			      struct o1_sidecar_backend **out)
{
	struct o1_sidecar_backend *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->socket = strdup(socket);
	b->idle = calloc(cap ? cap : 1, sizeof(*b->idle));
	if (!b->socket || !b->idle) {
		o1_sidecar_backend_destroy(b);
		return -ENOMEM;
	}
	b->cap = cap;
	b->max_context = max_context;
	pthread_mutex_init(&b->lock, NULL);
	*out = b;
	return 0;
}

void o1_sidecar_backend_destroy(struct o1_sidecar_backend *b)
{
	if (!b)
		return;
	for (unsigned i = 0; i < b->n_idle; i++)
		o1_client_close(b->idle[i]);
	free(b->idle);
	free(b->socket);
	free(b);
}

static int take(struct o1_sidecar_backend *b, struct o1_client **c,
		bool *reused)
{
	struct o1_client_opts o = {
	    .sz = sizeof(o), .socket_path = b->socket, .name = "o1-sidecar"};
	int ret;

	pthread_mutex_lock(&b->lock);
	*c = b->n_idle ? b->idle[--b->n_idle] : NULL;
	pthread_mutex_unlock(&b->lock);
	*reused = *c != NULL;
	if (*c)
		return 0;
	ret = o1_client_connect(&o, c);
	if (ret)
		o1_warn("sidecar: cannot connect to o1d at %s: %s (%s)",
			b->socket, o1_client_strerror(ret), o1_last_error());
	return ret;
}

static void give(struct o1_sidecar_backend *b, struct o1_client *c, bool ok)
{
	pthread_mutex_lock(&b->lock);
	if (ok && b->n_idle < b->cap) {
		b->idle[b->n_idle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&b->lock);
	o1_client_close(c);
}

static void parse_status(const char *reply, struct o1_sidecar_status *st)
{
	cJSON *r = cJSON_Parse(reply);
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "model");

	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"))) {
		st->up = true;
		st->draining =
		    cJSON_IsTrue(
			cJSON_GetObjectItemCaseSensitive(r, "draining")) ||
		    cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "ready"));
		if (cJSON_IsString(m))
			snprintf(st->model, sizeof(st->model), "%s",
				 m->valuestring);
	}
	cJSON_Delete(r);
}

static int ping(struct o1_sidecar_backend *b, struct o1_sidecar_status *st)
{
	struct o1_client *c;
	uint64_t rtt;
	bool reused;
	int ret = take(b, &c, &reused);

	if (ret)
		return 0;
	ret = o1_client_ping(c, &rtt);
	st->up = ret == 0;
	give(b, c, ret == 0);
	return 0;
}

uint64_t o1_sidecar_backend_epoch(const struct o1_sidecar_backend *b)
{
	struct stat st;

	if (stat(b->socket, &st) != 0)
		return 0;
	return ((uint64_t)st.st_ino << 32 ^
		((uint64_t)st.st_ctim.tv_sec * 1000000000ull +
		 (uint64_t)st.st_ctim.tv_nsec)) |
	       1;
}

int o1_sidecar_backend_status(struct o1_sidecar_backend *b,
			      struct o1_sidecar_status *st)
{
	char *buf;
	int fd, ret;

	memset(st, 0, sizeof(*st));
	ret = o1_admin_connect(b->socket, &fd);
	if (ret == -EACCES || ret == -EPERM)
		return ping(b, st);
	if (ret)
		return 0;
	buf = malloc(STATUS_MAX);
	if (buf &&
	    o1_admin_call(fd, "{\"op\":\"status\"}", buf, STATUS_MAX) > 0)
		parse_status(buf, st);
	free(buf);
	close(fd);
	return 0;
}

static void fill_opts(const struct o1_sidecar_request *r,
		      struct o1_sidecar_gen *g, struct o1_submit_opts *o,
		      struct o1_sampling *s)
{
	*s = r->sampling;
	if (r->logprobs) /* 1 at least: the sampled token's own logprob */
		s->n_logprobs = r->top_logprobs ? r->top_logprobs : 1;
	memset(o, 0, sizeof(*o));
	o->sz = sizeof(*o);
	o->req_id = g->req_id;
	o->text = r->prompt;
	o->text_len = r->prompt_len;
	o->ids = r->ids;
	o->n_ids = r->n_ids;
	o->sampling = s;
	o->max_tokens = r->max_tokens;
	o->stop_strings = (const char *const *)r->stop;
	o->n_stop_strings = r->n_stop;
	o->flags = r->kind == O1_SIDECAR_CHAT ? O1_FLAG_CHAT : O1_FLAG_ADD_BOS;
	o->refine_steps = r->refine_steps;
	if (r->chat_json)
		o->flags |= O1_FLAG_CHAT_JSON;
	if (r->grammar) { /* response_format as grammar text, or tools */
		o->grammar_type =
		    r->grammar_type ? r->grammar_type : O1_GRAMMAR_TYPE_TEXT;
		o->grammar = r->grammar;
		o->grammar_len = r->grammar_len;
	}
	if (r->ignore_eos)
		o->flags |= O1_FLAG_IGNORE_EOS;
}

/* No max_tokens (OpenAI: up to the end): the context of the daemon this
 * handle is connected to, as its welcome said (a restarted daemon may
 * serve another model). */
static void default_max_tokens(struct o1_sidecar_gen *g,
			       struct o1_submit_opts *o)
{
	struct o1_client_limits l = {.sz = sizeof(l)};

	if (g->req->max_tokens || o1_client_limits(g->c, &l))
		return;
	o->max_tokens = g->b->max_context && g->b->max_context < l.max_tokens
			    ? g->b->max_context
			    : l.max_tokens;
}

static bool dead(int err)
{
	return err == -ECONNRESET || err == -EPIPE || err == -ENOTCONN;
}

/* Takes a handle and submits; a dead pooled handle is dropped and the
 * submission made again on a fresh connection. */
static int submit(struct o1_sidecar_gen *g)
{
	struct o1_submit_opts o;
	struct o1_sampling s;
	int ret;

	fill_opts(g->req, g, &o, &s);
	for (;;) {
		ret = take(g->b, &g->c, &g->reused);
		if (ret)
			return ret;
		default_max_tokens(g, &o);
		g->refusal.sz = sizeof(g->refusal);
		ret = o1_client_check(g->c, &o, &g->refusal);
		if (!ret)
			ret = o1_client_submit(g->c, &o);
		if (!ret)
			return 0;
		if (!dead(ret) || !g->reused)
			break;
		o1_client_close(g->c); /* stale: the daemon restarted */
		g->c = NULL;
	}
	/* a refused request leaves the handle as good as it was */
	give(g->b, g->c,
	     ret == -EAGAIN || ret == -E2BIG || ret == O1_CLIENT_E_CONTEXT ||
		 ret == O1_CLIENT_E_BOUNDS);
	g->c = NULL;
	return ret;
}

int o1_sidecar_gen_start(struct o1_sidecar_gen *g, struct o1_sidecar_backend *b,
			 const struct o1_sidecar_request *req, int http_fd,
			 uint32_t timeout_ms)
{
	memset(g, 0, sizeof(*g));
	g->b = b;
	g->req = req;
	g->http_fd = http_fd;
	pthread_mutex_lock(&b->lock);
	g->req_id = ++b->next_id;
	pthread_mutex_unlock(&b->lock);
	g->t_submit_ns = o1_sidecar_now_ns();
	g->deadline_ns =
	    (int64_t)g->t_submit_ns + (int64_t)timeout_ms * 1000000;
	return submit(g);
}

static bool hung_up(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};

	return fd >= 0 && poll(&p, 1, 0) == 1 &&
	       (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Waits for the FINAL of a cancelled request, for up to DRAIN_NS. */
static void drain(struct o1_sidecar_gen *g)
{
	struct o1_event ev;
	int64_t until = (int64_t)o1_sidecar_now_ns() + DRAIN_NS;
	int ret;

	o1_client_cancel(g->c, g->req_id);
	while (!g->finished) {
		int64_t left = until - (int64_t)o1_sidecar_now_ns();

		ret = left > 0 ? o1_client_wait(g->c, &ev, left) : -ETIMEDOUT;
		if (ret < 0) {
			g->broken = true;
			return;
		}
		if (ev.type == O1_EVENT_FINAL && ev.req_id == g->req_id) {
			g->finished = true;
			g->prompt_tokens = ev.prompt_tokens;
			g->generated_tokens = ev.generated_tokens;
		}
	}
}

static int stop(struct o1_sidecar_gen *g, int why)
{
	drain(g);
	return why;
}

int o1_sidecar_gen_next(struct o1_sidecar_gen *g, struct o1_event *ev)
{
	int ret;

	if (!g->c || g->finished)
		return -EINVAL;
	for (;;) {
		if (hung_up(g->http_fd))
			return stop(g, -ECONNABORTED);
		if ((int64_t)o1_sidecar_now_ns() > g->deadline_ns)
			return stop(g, -ETIMEDOUT);
		ret = o1_client_wait(g->c, ev, WAIT_SLICE_NS);
		if (ret == -ETIMEDOUT)
			continue;
		if (dead(ret) && g->reused && !g->got_event) {
			o1_client_close(g->c); /* a pooled handle gone stale */
			g->c = NULL;
			ret = submit(g);
			if (!ret)
				continue;
			return ret;
		}
		if (ret < 0) {
			g->broken = true;
			return ret;
		}
		if (ev->req_id != g->req_id && ev->type != O1_EVENT_ERROR)
			continue;
		g->got_event = true;
		if (ev->type == O1_EVENT_TOKEN && !g->t_first_ns)
			g->t_first_ns = o1_sidecar_now_ns();
		if (ev->type == O1_EVENT_TOKEN)
			g->streamed_tokens += ev->n_ids;
		if (ev->type == O1_EVENT_FINAL) {
			g->finished = true;
			g->prompt_tokens = ev->prompt_tokens;
			g->generated_tokens = ev->generated_tokens;
			g->t_end_ns = o1_sidecar_now_ns();
			/* refusals count as violations against the handle */
			g->broken = ev->error == -O1_E_BOUNDS ||
				    ev->error == -O1_E_PROTOCOL;
		}
		return 1;
	}
}

void o1_sidecar_gen_end(struct o1_sidecar_gen *g)
{
	if (!g->c)
		return;
	if (!g->finished && !g->broken)
		drain(g);
	if (!g->t_end_ns)
		g->t_end_ns = o1_sidecar_now_ns();
	give(g->b, g->c, g->finished && !g->broken);
	g->c = NULL;
}
