/* The admin handler (see admin.h), on the front thread: JSON in, JSON out
 * through cJSON. Request-slot fields read here are the front's own or
 * relaxed atomics the engine publishes; scheduler counts come from the
 * stats the engine publishes under lock. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "engine_int.h"
#include "common/error.h"
#include "faults.h"
#include "common/log.h"
#include "metrics/metrics_writer.h"

#define LIST_MAX 256

static const char *phase_name(int p)
{
	static const char *const names[] = {"queued", "waiting", "running",
					    "finished"};

	return p >= 0 && p < 4 ? names[p] : "?";
}

/* ready: the model is loaded, every configured graph captured and the
 * warm-up generation succeeded, and o1d is not draining. */
static void add_readiness(struct o1_engine *e, cJSON *o)
{
	bool graphs = e->graphs_captured >= e->graphs_total;
	bool drain = e->exiting || e->admin_drain;

	cJSON_AddBoolToObject(o, "ready",
			      e->sched && graphs && e->warmup_ok && !drain);
	cJSON_AddBoolToObject(o, "warmup_ok", e->warmup_ok);
	cJSON_AddNumberToObject(o, "warmup_ms", (double)e->warmup_ns / 1e6);
	cJSON_AddNumberToObject(o, "graphs_total", e->graphs_total);
	cJSON_AddNumberToObject(o, "graphs_captured", e->graphs_captured);
	cJSON_AddNumberToObject(o, "max_context_tokens",
				e->o.sched.max_context);
	cJSON_AddNumberToObject(o, "vocab_size", e->o.sched.vocab_size);
	cJSON_AddBoolToObject(o, "tokenizer", e->o.sched.tok != NULL);
	cJSON_AddBoolToObject(o, "sample_in_backend",
			      e->o.sched.sample_in_backend);
}

static void add_faults(struct o1_engine *e, cJSON *o)
{
	struct o1_faults_stats st;
	cJSON *f, *on;

	if (!e->o.faults)
		return;
	o1_faults_stats(e->o.faults, &st);
	f = cJSON_AddObjectToObject(o, "faults");
	on = cJSON_AddObjectToObject(f, "on");
	for (int k = 0; k < O1_FAULT__COUNT; k++)
		if (st.on[k])
			cJSON_AddNumberToObject(on, o1_faults_name(k),
						(double)st.param[k]);
	cJSON_AddNumberToObject(f, "delayed_steps", (double)st.delayed_steps);
	cJSON_AddNumberToObject(f, "failed_steps", (double)st.failed_steps);
	cJSON_AddNumberToObject(f, "stalled_polls", (double)st.stalled_polls);
	cJSON_AddNumberToObject(f, "kv_pages_held", st.kv_pages_held);
}

/* CUDA graph use since start (all zero without graphs). */
static void add_graphs(const struct o1_engine_graphs *g, cJSON *o)
{
	cJSON *j = cJSON_AddObjectToObject(o, "graphs");

	cJSON_AddNumberToObject(j, "hits", (double)g->hits);
	cJSON_AddNumberToObject(j, "misses", (double)g->misses);
	cJSON_AddNumberToObject(j, "fallbacks", (double)g->fallbacks);
	cJSON_AddNumberToObject(j, "oversize", (double)g->oversize);
	cJSON_AddNumberToObject(j, "prefill", (double)g->prefill);
}

/* The front loop's sleeps and housekeeping ticks: with every stream
 * parked, sleeps grow with the ticks (and the admin requests), no faster. */
static void add_front(const struct o1_ipc_stats *ist, cJSON *o)
{
	cJSON *f = cJSON_AddObjectToObject(o, "front");

	cJSON_AddNumberToObject(f, "sleeps", (double)ist->sleeps);
	cJSON_AddNumberToObject(f, "ticks", (double)ist->ticks);
	cJSON_AddNumberToObject(f, "room_wakes", (double)ist->room_wakes);
	cJSON_AddNumberToObject(f, "tick_refills", (double)ist->tick_refills);
	/* the engine's steps the loop spun through (shm/cadence.h) */
	cJSON_AddNumberToObject(f, "cadence_wakes", (double)ist->cadence_wakes);
	cJSON_AddNumberToObject(f, "cadence_caught",
				(double)ist->cadence_caught);
	cJSON_AddNumberToObject(f, "cadence_spin_us",
				(double)(ist->cadence_spin_ns / 1000));
}

static void add_status(struct o1_engine *e, cJSON *o)
{
	struct o1_sched_stats st;
	struct o1_engine_graphs gr;
	struct o1_ipc_stats ist;
	cJSON *kv = cJSON_AddObjectToObject(o, "kv");

	pthread_mutex_lock(&e->lock);
	st = e->stats;
	gr = e->graphs;
	pthread_mutex_unlock(&e->lock);
	o1_ipc_server_stats(e->srv, &ist);
	cJSON_AddStringToObject(o, "model", e->model_name);
	cJSON_AddStringToObject(o, "weights", e->weights);
	cJSON_AddBoolToObject(o, "model_loaded", e->sched != NULL);
	cJSON_AddStringToObject(o, "backend", e->backend_name);
	cJSON_AddNumberToObject(
	    o, "uptime_s", (double)(o1_engine_now_ns() - e->start_ns) / 1e9);
	cJSON_AddBoolToObject(o, "draining", e->exiting || e->admin_drain);
	add_readiness(e, o);
	cJSON_AddNumberToObject(o, "running", st.running);
	cJSON_AddNumberToObject(o, "waiting", st.waiting);
	cJSON_AddNumberToObject(o, "parked", st.parked);
	cJSON_AddNumberToObject(o, "stalled", (double)st.stalled);
	cJSON_AddNumberToObject(o, "active", o1_engine_held(e));
	cJSON_AddNumberToObject(o, "clients", (double)ist.clients_connected);
	cJSON_AddNumberToObject(kv, "pages_total", st.pages_total);
	cJSON_AddNumberToObject(kv, "pages_free", st.pages_free);
	cJSON_AddNumberToObject(
	    kv, "pages_used", st.pages_total - st.pages_free - st.pages_cached);
	cJSON_AddNumberToObject(kv, "pages_cached", st.pages_cached);
	cJSON_AddNumberToObject(o, "steps", (double)st.steps);
	cJSON_AddNumberToObject(o, "preemptions", (double)st.preemptions);
	cJSON_AddNumberToObject(o, "prefix_hits", (double)st.prefix_hits);
	cJSON_AddNumberToObject(o, "prefix_misses", (double)st.prefix_misses);
	cJSON_AddNumberToObject(o, "refine_rounds", (double)st.refine_rounds);
	cJSON_AddNumberToObject(o, "refine_cached_tokens",
				(double)st.refine_cached_tokens);
	add_graphs(&gr, o);
	add_faults(e, o);
	add_front(&ist, o);
}

static void add_request(struct o1_engine *e, cJSON *list,
			const struct o1_req *r, uint64_t now)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "client", r->client_id);
	cJSON_AddNumberToObject(o, "req_id", (double)r->req_id);
	cJSON_AddNumberToObject(o, "pid", r->pid);
	cJSON_AddNumberToObject(o, "uid", r->uid);
	cJSON_AddStringToObject(
	    o, "phase",
	    phase_name(atomic_load_explicit(&r->phase, memory_order_relaxed)));
	cJSON_AddNumberToObject(
	    o, "prompt_tokens",
	    atomic_load_explicit(&r->n_prompt, memory_order_relaxed));
	cJSON_AddNumberToObject(
	    o, "generated",
	    atomic_load_explicit(&r->generated, memory_order_relaxed));
	cJSON_AddNumberToObject(o, "age_ms",
				(double)(now - r->submit_ns) / 1e6);
	cJSON_AddItemToArray(list, o);
	(void)e;
}

static void add_requests(struct o1_engine *e, cJSON *o)
{
	cJSON *list = cJSON_AddArrayToObject(o, "requests");
	uint64_t now = o1_engine_now_ns();
	uint32_t n = 0;

	for (uint32_t i = 0; i < e->n_slots; i++) {
		if (!e->slots[i].active || e->slots[i].dead)
			continue;
		if (n++ < LIST_MAX)
			add_request(e, list, &e->slots[i], now);
	}
	cJSON_AddBoolToObject(o, "truncated", n > LIST_MAX);
}

static int do_cancel(struct o1_engine *e, const cJSON *req, const char **why)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(req, "client");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(req, "req_id");

	if (!cJSON_IsNumber(c) || !cJSON_IsNumber(id) || c->valuedouble < 0 ||
	    id->valuedouble < 0) {
		*why = "cancel needs numbers \"client\" and \"req_id\"";
		return -EINVAL;
	}
	if (o1_engine_cancel_req(e, (uint32_t)c->valuedouble,
				 (uint64_t)id->valuedouble, O1_REQ_CANCEL)) {
		*why = "no such request";
		return -ENOENT;
	}
	o1_info("admin: cancelled client %u request %llu",
		(uint32_t)c->valuedouble, (unsigned long long)id->valuedouble);
	return 0;
}

/* A comma-separated list as a JSON array of strings. */
static void add_list(cJSON *o, const char *key, const char *list)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);
	char buf[256], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		cJSON_AddItemToArray(a, cJSON_CreateString(tok));
}

static int do_reload(struct o1_engine *e, cJSON *out, const char **why)
{
	static char err[sizeof(((struct o1_reload_report *)0)->error)];
	struct o1_reload_report rep;

	if (!e->o.reload) {
		*why = "this o1d cannot reload";
		return -O1_E_UNSUPPORTED;
	}
	o1_info("admin: reload");
	e->o.reload(e->o.reload_ctx, e, &rep);
	if (rep.error[0]) {
		memcpy(err, rep.error, sizeof(err));
		*why = err;
		return -O1_E_CONFIG;
	}
	add_list(out, "reloaded", rep.applied);
	add_list(out, "not_reloaded", rep.not_applied);
	return 0;
}

static int do_config(struct o1_engine *e, cJSON *out, const char **why)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	if (!e->o.dump_config) {
		*why = "this o1d cannot show its configuration";
		return -O1_E_UNSUPPORTED;
	}
	f = open_memstream(&text, &len);
	if (!f) {
		*why = "out of memory";
		return -ENOMEM;
	}
	e->o.dump_config(e->o.reload_ctx, f);
	if (fclose(f) || !text) {
		free(text);
		*why = "out of memory";
		return -ENOMEM;
	}
	cJSON_AddStringToObject(out, "config", text);
	free(text);
	return 0;
}

/* {"op":"inject","fault":NAME,"on":BOOL[,"param":N]}: admin uids only
 * (the admin socket's rule), refused unless [faults] enabled. */
static int do_inject(struct o1_engine *e, const cJSON *req, const char **why)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(req, "fault");
	const cJSON *on = cJSON_GetObjectItemCaseSensitive(req, "on");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(req, "param");
	int err;

	if (!e->o.faults) {
		*why = "fault injection is off (set [faults] enabled = true "
		       "in a test deployment)";
		return -EPERM;
	}
	if (!cJSON_IsString(name) || !cJSON_IsBool(on) ||
	    (p && (!cJSON_IsNumber(p) || p->valuedouble < 0 ||
		   p->valuedouble > 4294967295.0))) {
		*why = "inject needs \"fault\" (string), \"on\" (bool) and "
		       "an optional \"param\" (0..2^32-1)";
		return -EINVAL;
	}
	err = o1_faults_set(e->o.faults, name->valuestring, cJSON_IsTrue(on),
			    p ? (uint64_t)p->valuedouble : 0, why);
	if (err)
		return err;
	pthread_mutex_lock(&e->lock);
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
	return 0;
}

/* Where this daemon publishes its metrics, so readers need not guess
 * from a configuration (and never read another daemon's). */
static void add_metrics(struct o1_engine *e, cJSON *o)
{
	const struct o1_metrics *m = e->metrics;
	cJSON *j = cJSON_AddObjectToObject(o, "metrics");

	cJSON_AddNumberToObject(o, "pid", (double)getpid());
	cJSON_AddStringToObject(
	    j, "backend", m ? o1_metrics_backend_name(m->maps.backend) : "off");
	cJSON_AddStringToObject(j, "path", m ? o1_metrics_path(m) : "");
}

static int dispatch(struct o1_engine *e, const cJSON *req, cJSON *out,
		    const char **why)
{
	const cJSON *op = cJSON_GetObjectItemCaseSensitive(req, "op");
	const char *s = cJSON_IsString(op) ? op->valuestring : "";

	if (!strcmp(s, "status"))
		add_status(e, out);
	else if (!strcmp(s, "requests"))
		add_requests(e, out);
	else if (!strcmp(s, "metrics"))
		add_metrics(e, out);
	else if (!strcmp(s, "cancel"))
		return do_cancel(e, req, why);
	else if (!strcmp(s, "reload"))
		return do_reload(e, out, why);
	else if (!strcmp(s, "config"))
		return do_config(e, out, why);
	else if (!strcmp(s, "inject"))
		return do_inject(e, req, why);
	else if (!strcmp(s, "drain") || !strcmp(s, "resume")) {
		if (e->exiting) {
			*why = "o1d is shutting down";
			return -O1_E_DRAINING;
		}
		o1_info("admin: %s", s);
		o1_engine_drain(e, s[0] == 'd', false);
	} else {
		*why = "unknown op (status, requests, metrics, cancel, drain, "
		       "resume, reload, config, inject)";
		return -EINVAL;
	}
	return 0;
}

int o1_engine_admin(void *ctx, struct o1_ipc_server *srv,
		    const struct o1_ipc_client_info *peer, const void *req,
		    size_t len, void *reply, size_t cap)
{
	struct o1_engine *e = ctx;
	cJSON *in = cJSON_ParseWithLength(req, len);
	cJSON *out = cJSON_CreateObject();
	const char *why = "request is not a JSON object";
	int err = cJSON_IsObject(in) ? dispatch(e, in, out, &why) : -EINVAL;

	(void)srv;
	if (err) {
		o1_info("admin (uid %u, pid %d): %s", (unsigned)peer->uid,
			(int)peer->pid, why);
		cJSON_Delete(out);
		out = cJSON_CreateObject();
		cJSON_AddBoolToObject(out, "ok", 0);
		cJSON_AddStringToObject(out, "error", why);
	} else {
		cJSON_AddBoolToObject(out, "ok", 1);
	}
	cJSON_AddNumberToObject(out, "admin_version", O1_ADMIN_VERSION);
	err = cJSON_PrintPreallocated(out, reply, (int)cap, 0) ? 0 : -E2BIG;
	cJSON_Delete(in);
	cJSON_Delete(out);
	return err ? err : (int)strlen(reply);
}
