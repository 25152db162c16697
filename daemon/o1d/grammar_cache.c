/* The grammar cache (grammar_cache.h).
 *
 * Invariants, all under c->lock:
 * - every entry is in the hash table from its get until it is freed;
 * - an entry is queued (c->queue) from its first get until a compile
 *   thread takes it; it is done once compiled or refused, and only done
 *   entries have no waiters;
 * - an entry is in the LRU list exactly when it is done and unreferenced;
 *   only those are evicted (from the tail, the least recently used);
 * - c->bytes is the sum of the done entries' sizes.
 * Compiling runs without the lock: a queued or compiling entry is only
 * touched by the thread that took it, and its key never changes.
 */
#include "grammar_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"
#include "grammar/grammar_schema.h"
#include "grammar/grammar_tools.h"
#include "sampler/sampler.h"
#include "shm/wire.h"

#define BUCKETS	    1024 /* power of two */
#define MAX_THREADS 64

struct o1_gentry {
	uint64_t hash;
	uint8_t kind;
	uint32_t len;
	uint8_t *bytes;
	bool done;
	int err; /* when done */
	char msg[256];
	struct o1_grammar *g;
	struct o1_grammar_tokens *t;
	uint64_t size; /* bytes it holds when done */
	uint32_t refs;
	struct o1_gentry *hnext;
	struct o1_gentry *prev, *next; /* LRU list, or the queue (next) */
	struct o1_gcache_waiter *wait_head, *wait_tail;
};

struct o1_gcache {
	struct o1_gcache_opts o;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t threads[MAX_THREADS];
	uint32_t n_threads;
	bool stopping;
	struct o1_gentry *buckets[BUCKETS];
	struct o1_gentry *queue, *queue_tail;
	struct o1_gentry *lru_head, *lru_tail; /* head: most recent */
	uint32_t n_lru;
	uint64_t bytes;
	struct o1_gcache_stats st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* FNV-1a over the kind and the bytes. */
static uint64_t key_hash(uint8_t kind, const uint8_t *b, uint32_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = (h ^ kind) * 0x100000001b3ull;
	for (uint32_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static const char *kind_name(uint8_t kind)
{
	switch (kind) {
	case O1_GRAMMAR_GBNF:
		return "grammar text";
	case O1_GRAMMAR_JSON_SCHEMA:
		return "JSON schema";
	case O1_GRAMMAR_JSON_OBJECT:
		return "json_object";
	case O1_GRAMMAR_TOOL_CALL:
		return "tool call";
	default:
		return "?";
	}
}

/* ---- lists (under the lock) ---- */

static void lru_remove(struct o1_gcache *c, struct o1_gentry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->lru_head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->lru_tail = e->prev;
	e->prev = e->next = NULL;
	c->n_lru--;
}

static void lru_push(struct o1_gcache *c, struct o1_gentry *e)
{
	e->prev = NULL;
	e->next = c->lru_head;
	if (c->lru_head)
		c->lru_head->prev = e;
	else
		c->lru_tail = e;
	c->lru_head = e;
	c->n_lru++;
}

static struct o1_gentry **slot_of(struct o1_gcache *c, uint64_t hash)
{
	return &c->buckets[hash & (BUCKETS - 1)];
}

static struct o1_gentry *find(struct o1_gcache *c, uint64_t hash, uint8_t kind,
			      const uint8_t *b, uint32_t len)
{
	for (struct o1_gentry *e = *slot_of(c, hash); e; e = e->hnext)
		if (e->hash == hash && e->kind == kind && e->len == len &&
		    (!len || !memcmp(e->bytes, b, len)))
			return e;
	return NULL;
}

static void entry_free(struct o1_gentry *e)
{
	o1_grammar_tokens_destroy(e->t);
	o1_grammar_destroy(e->g);
	free(e->bytes);
	free(e);
}

static void unhash(struct o1_gcache *c, struct o1_gentry *e)
{
	struct o1_gentry **p = slot_of(c, e->hash);

	while (*p != e)
		p = &(*p)->hnext;
	*p = e->hnext;
	c->st.entries--;
}

/* Drops unreferenced entries, least recently used first, while the cache
 * is over its bounds. */
static void evict(struct o1_gcache *c)
{
	while (c->lru_tail && (c->st.entries > c->o.max_entries ||
			       c->bytes > c->o.max_bytes)) {
		struct o1_gentry *e = c->lru_tail;

		lru_remove(c, e);
		unhash(c, e);
		c->bytes -= e->size;
		c->st.evictions++;
		entry_free(e);
	}
}

/* ---- compiling (no lock) ---- */

static int compile_text(const struct o1_gcache *c, const struct o1_gentry *e,
			struct o1_grammar_error *ge, struct o1_grammar **g)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	switch (e->kind) {
	case O1_GRAMMAR_GBNF:
		return o1_grammar_compile((const char *)e->bytes, e->len, ge,
					  g);
	case O1_GRAMMAR_JSON_SCHEMA:
		return o1_grammar_compile_schema((const char *)e->bytes, e->len,
						 NULL, ge, g);
	case O1_GRAMMAR_JSON_OBJECT:
		rc = o1_grammar_json_object(NULL, &text, &len);
		rc = rc ?: o1_grammar_compile(text, len, ge, g);
		free(text);
		return rc;
	case O1_GRAMMAR_TOOL_CALL:
		return o1_grammar_compile_tools_for(
		    (enum o1_tool_format)c->o.tool_format,
		    (const char *)e->bytes, e->len, c->o.vocab, ge, g);
	default:
		snprintf(ge->msg, sizeof(ge->msg), "unknown grammar kind %u",
			 e->kind);
		return -O1_E_FORMAT;
	}
}

/* Compiles E: its grammar, then the token classes. A refusal keeps the
 * compiler's message (with its place in grammar text). */
static void compile(struct o1_gcache *c, struct o1_gentry *e)
{
	struct o1_grammar_error ge = {0};
	uint64_t t0 = now_ns(), t1, t2;
	int rc = compile_text(c, e, &ge, &e->g);

	t1 = now_ns();
	if (!rc)
		rc = o1_grammar_tokens_create(e->g, c->o.vocab, 1, &e->t);
	t2 = now_ns();
	if (rc && !ge.msg[0])
		snprintf(ge.msg, sizeof(ge.msg), "%s", o1_strerror(rc));
	e->err = rc == -ENOMEM ? rc : rc ? -O1_E_GRAMMAR : 0;
	if (rc && ge.line)
		snprintf(e->msg, sizeof(e->msg), "%u:%u: %.230s", ge.line,
			 ge.col, ge.msg);
	else if (rc)
		snprintf(e->msg, sizeof(e->msg), "%s", ge.msg);
	if (!rc)
		e->size = sizeof(*e) + e->len + o1_grammar_bytes(e->g) +
			  o1_grammar_tokens_bytes(e->t);
	else
		e->size = sizeof(*e) + e->len;
	if (rc)
		o1_info("grammar: %s of %u bytes refused after %.1f ms: %s",
			kind_name(e->kind), e->len, (double)(t2 - t0) / 1e6,
			e->msg);
	else
		o1_info("grammar: %s of %u bytes compiled: %u rules, %u "
			"states, %.2f MiB; %.1f ms to compile, %.1f ms to "
			"classify the tokens",
			kind_name(e->kind), e->len, o1_grammar_n_rules(e->g),
			o1_grammar_n_states(e->g), (double)e->size / 1048576.0,
			(double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6);
}

/* E is compiled or refused: record it, hand its waiters over (outside
 * the lock: each holds a reference, so E outlives the calls). */
static void finish(struct o1_gcache *c, struct o1_gentry *e, uint64_t ns)
{
	struct o1_gcache_waiter *w, *next;

	pthread_mutex_lock(&c->lock);
	if (e->err == -ENOMEM) /* not a property of the grammar */
		unhash(c, e);
	e->done = true;
	c->bytes += e->err == -ENOMEM ? 0 : e->size;
	c->st.refused += e->err != 0;
	c->st.compile_ns += ns;
	if (ns > c->st.compile_max_ns)
		c->st.compile_max_ns = ns;
	w = e->wait_head;
	e->wait_head = e->wait_tail = NULL;
	pthread_mutex_unlock(&c->lock);
	for (; w; w = next) {
		next = w->next;
		c->o.ready(c->o.ctx, w, e);
	}
}

static void *compile_main(void *arg)
{
	struct o1_gcache *c = arg;

	for (;;) {
		struct o1_gentry *e;
		uint64_t t0;

		pthread_mutex_lock(&c->lock);
		while (!c->stopping && !c->queue)
			pthread_cond_wait(&c->cond, &c->lock);
		if (c->stopping) {
			pthread_mutex_unlock(&c->lock);
			return NULL;
		}
		e = c->queue;
		c->queue = e->next;
		if (!c->queue)
			c->queue_tail = NULL;
		e->next = NULL;
		pthread_mutex_unlock(&c->lock);
		t0 = now_ns();
		compile(c, e);
		finish(c, e, now_ns() - t0);
	}
}

/* ---- the interface ---- */

int o1_gcache_create(const struct o1_gcache_opts *o, struct o1_gcache **out)
{
	struct o1_gcache *c;
	int err = 0;

	if (!o->vocab || !o->ready || o->threads > MAX_THREADS)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->o = *o;
	if (!c->o.max_entries)
		c->o.max_entries = 64;
	if (!c->o.max_bytes)
		c->o.max_bytes = 512ull << 20;
	if (!c->o.threads)
		c->o.threads = 1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	for (uint32_t i = 0; i < c->o.threads && !err; i++) {
		err = -pthread_create(&c->threads[i], NULL, compile_main, c);
		c->n_threads += !err;
	}
	if (err) {
		o1_gcache_destroy(c);
		return err;
	}
	*out = c;
	return 0;
}

void o1_gcache_stop(struct o1_gcache *c)
{
	struct o1_gentry *q;

	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	for (uint32_t i = 0; i < c->n_threads; i++)
		pthread_join(c->threads[i], NULL);
	c->n_threads = 0;
	pthread_mutex_lock(&c->lock);
	q = c->queue;
	c->queue = c->queue_tail = NULL;
	pthread_mutex_unlock(&c->lock);
	while (q) {
		struct o1_gentry *e = q;

		q = e->next;
		e->next = NULL;
		e->err = -O1_E_DRAINING;
		e->size = sizeof(*e) + e->len;
		snprintf(e->msg, sizeof(e->msg), "the daemon stopped");
		finish(c, e, 0);
	}
}

void o1_gcache_destroy(struct o1_gcache *c)
{
	if (!c)
		return;
	o1_gcache_stop(c);
	for (uint32_t b = 0; b < BUCKETS; b++)
		while (c->buckets[b]) {
			struct o1_gentry *e = c->buckets[b];

			c->buckets[b] = e->hnext;
			if (e->refs)
				o1_warn("grammar cache: an entry still has %u "
					"references at exit",
					e->refs);
			entry_free(e);
		}
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

static void wait_on(struct o1_gentry *e, struct o1_gcache_waiter *w)
{
	w->next = NULL;
	if (e->wait_tail)
		e->wait_tail->next = w;
	else
		e->wait_head = w;
	e->wait_tail = w;
}

/* A new entry for the key, queued for a compile thread; NULL: ENOMEM. */
static struct o1_gentry *add(struct o1_gcache *c, uint64_t hash, uint8_t kind,
			     const uint8_t *bytes, uint32_t len)
{
	struct o1_gentry *e = calloc(1, sizeof(*e));
	struct o1_gentry **slot = slot_of(c, hash);

	if (!e || !(e->bytes = malloc(len ? len : 1))) {
		free(e);
		return NULL;
	}
	if (len)
		memcpy(e->bytes, bytes, len);
	e->hash = hash;
	e->kind = kind;
	e->len = len;
	e->hnext = *slot;
	*slot = e;
	c->st.entries++;
	if (c->queue_tail)
		c->queue_tail->next = e;
	else
		c->queue = e;
	c->queue_tail = e;
	pthread_cond_signal(&c->cond);
	return e;
}

int o1_gcache_get(struct o1_gcache *c, uint8_t kind, const uint8_t *bytes,
		  uint32_t len, struct o1_gcache_waiter *w,
		  struct o1_gentry **out)
{
	uint64_t hash = key_hash(kind, bytes, len);
	struct o1_gentry *e;
	int ret = 1;

	pthread_mutex_lock(&c->lock);
	e = find(c, hash, kind, bytes, len);
	if (e && e->done) {
		c->st.hits++;
		if (!e->refs)
			lru_remove(c, e);
	} else if (e) {
		c->st.joins++;
	} else if (c->stopping) {
		ret = -O1_E_DRAINING;
	} else {
		e = add(c, hash, kind, bytes, len);
		c->st.misses += e != NULL;
		ret = e ? 1 : -ENOMEM;
	}
	if (e) {
		e->refs++;
		if (!e->done) {
			wait_on(e, w);
			ret = 0;
		}
		*out = e; /* before a compile thread can hand W over */
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

void o1_gcache_put(struct o1_gcache *c, struct o1_gentry *e)
{
	pthread_mutex_lock(&c->lock);
	if (--e->refs == 0 && e->done) {
		if (e->err == -ENOMEM) {
			entry_free(e); /* never cached: not in the table */
		} else {
			lru_push(c, e);
			evict(c);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

void o1_gcache_stats(struct o1_gcache *c, struct o1_gcache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->st;
	out->bytes = c->bytes;
	pthread_mutex_unlock(&c->lock);
}

int o1_gentry_error(const struct o1_gentry *e, const char **msg)
{
	if (msg)
		*msg = e->msg;
	return e->err;
}

int o1_gentry_constrain(const struct o1_gentry *e, struct o1_sampler *smp)
{
	struct o1_grammar_matcher *m;
	int err;

	if (e->err || !e->t)
		return -EINVAL;
	err = o1_grammar_matcher_create(e->g, e->t, NULL, &m);
	return err ? err : o1_sampler_constrain(smp, m);
}
