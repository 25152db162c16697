/* The grammar cache of o1d (daemon/o1d/grammar_cache.c) over a byte
 * vocabulary: a grammar compiles once and later gets are hits; a refusal
 * is cached with the compiler's message; requests for a grammar that is
 * compiling join it and are handed over in order when it is; stopping
 * hands queued grammars' requests over with -O1_E_DRAINING; the least
 * recently used unreferenced entry leaves first past max_entries or
 * max_bytes, a referenced one never; a compiled entry constrains a
 * sampler; and threads getting and putting at once leave it consistent.
 * Waits poll with generous deadlines; the order of events is forced by a
 * ready callback that can be held. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "o1d/grammar_cache.h"
#include "sampler/sampler.h"
#include "shm/wire.h"

#define V   257 /* the bytes, then an end token */
#define EOS 256

struct req {
	struct o1_gcache_waiter w;
	struct o1_gentry *e;
	struct o1_gentry *handed; /* what ready() got */
	int err;
	int order; /* when it was handed over, from 1 */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int n_ready;
static bool hold; /* ready() waits while set */
static bool held; /* a ready() is waiting */
static struct o1_grammar_vocab *vocab;

static void on_ready(void *ctx, struct o1_gcache_waiter *w, struct o1_gentry *e)
{
	struct req *r = (struct req *)w;

	(void)ctx;
	pthread_mutex_lock(&lock);
	while (hold) {
		held = true;
		pthread_cond_broadcast(&cond);
		pthread_cond_wait(&cond, &lock);
	}
	held = false;
	r->handed = e;
	r->err = o1_gentry_error(e, NULL);
	r->order = ++n_ready;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* Waits (up to 60 s) until PRED holds; under the lock. */
static void wait_for(bool (*pred)(void *), void *arg)
{
	struct timespec ts;
	bool ok;

	pthread_mutex_lock(&lock);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 60;
	while (!pred(arg))
		if (pthread_cond_timedwait(&cond, &lock, &ts) == ETIMEDOUT)
			break;
	ok = pred(arg);
	pthread_mutex_unlock(&lock);
	assert_true(ok);
}

static bool is_ready(void *arg)
{
	return ((struct req *)arg)->order != 0;
}

static bool is_held(void *arg)
{
	(void)arg;
	return held;
}

static struct o1_gcache *make(uint32_t entries, uint64_t bytes,
			      uint32_t threads)
{
	struct o1_gcache_opts o = {.vocab = vocab,
				   .max_entries = entries,
				   .max_bytes = bytes,
				   .threads = threads,
				   .ready = on_ready};
	struct o1_gcache *c;

	n_ready = 0;
	assert_int_equal(o1_gcache_create(&o, &c), 0);
	return c;
}

/* Gets TEXT of KIND for R; waits for it when it compiles. Returns get's
 * result (1 hit, 0 compiled meanwhile). */
static int get(struct o1_gcache *c, uint8_t kind, const char *text,
	       struct req *r)
{
	int ret;

	memset(r, 0, sizeof(*r));
	ret = o1_gcache_get(c, kind, (const uint8_t *)text,
			    (uint32_t)strlen(text), &r->w, &r->e);
	assert_true(ret == 0 || ret == 1);
	if (ret == 0) {
		wait_for(is_ready, r);
		assert_ptr_equal(r->handed, r->e);
	} else
		r->err = o1_gentry_error(r->e, NULL);
	return ret;
}

static void test_hit_and_constrain(void **state)
{
	struct o1_gcache *c = make(0, 0, 2);
	struct o1_gcache_stats st;
	struct o1_sampler_params p;
	struct o1_sampler_out out;
	struct o1_sampler *s;
	struct req a, b;
	float l[V] = {0};
	char got[8] = {0};

	(void)state;
	assert_int_equal(
	    get(c, O1_GRAMMAR_GBNF, "root ::= \"yes\" | \"no\"", &a), 0);
	assert_int_equal(a.err, 0);
	assert_int_equal(
	    get(c, O1_GRAMMAR_GBNF, "root ::= \"yes\" | \"no\"", &b), 1);
	assert_ptr_equal(a.e, b.e);
	/* the same bytes of another kind are another grammar */
	assert_int_equal(
	    get(c, O1_GRAMMAR_JSON_SCHEMA, "{\"type\":\"integer\"}", &b), 0);
	assert_ptr_not_equal(a.e, b.e);
	o1_gcache_stats(c, &st);
	assert_int_equal(st.misses, 2);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.entries, 2);
	assert_true(st.bytes > 0);
	/* greedy prefers 'z' and then 'o'; the grammar says "no" */
	o1_sampler_params_init(&p);
	p.eos_id = EOS;
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_gentry_constrain(a.e, s), 0);
	l['z'] = 5;
	l['o'] = 4;
	l['n'] = 3;
	l['y'] = 2;
	l[EOS] = 1;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(o1_sampler_sample(s, l, &out), 0);
		if (out.id != EOS)
			got[i] = (char)out.id;
	}
	assert_string_equal(got, "no");
	assert_int_equal(out.end, O1_SAMPLER_END_EOS);
	o1_sampler_destroy(s);
	o1_gcache_put(c, a.e);
	o1_gcache_put(c, a.e);
	o1_gcache_put(c, b.e);
	o1_gcache_destroy(c);
}

static void test_refused(void **state)
{
	struct o1_gcache *c = make(0, 0, 1);
	struct o1_gcache_stats st;
	struct req a, b, d;
	const char *msg;

	(void)state;
	assert_int_equal(get(c, O1_GRAMMAR_GBNF, "root ::= (\"x\"", &a), 0);
	assert_int_equal(a.err, -O1_E_GRAMMAR);
	assert_int_equal(o1_gentry_error(a.e, &msg), -O1_E_GRAMMAR);
	assert_non_null(strstr(msg, "1:")); /* line:col of the text */
	/* cached: the same message, no second compile */
	assert_int_equal(get(c, O1_GRAMMAR_GBNF, "root ::= (\"x\"", &b), 1);
	assert_int_equal(b.err, -O1_E_GRAMMAR);
	assert_ptr_equal(a.e, b.e);
	assert_int_equal(get(c, O1_GRAMMAR_JSON_SCHEMA,
			     "{\"type\":\"object\",\"not\":{}}", &d),
			 0);
	assert_int_equal(o1_gentry_error(d.e, &msg), -O1_E_GRAMMAR);
	assert_non_null(strstr(msg, "not"));
	o1_gcache_put(c, d.e);
	assert_int_equal(get(c, O1_GRAMMAR_JSON_SCHEMA, "{\"type\":", &d), 0);
	assert_int_equal(o1_gentry_error(d.e, &msg), -O1_E_GRAMMAR);
	assert_true(msg[0] != 0);
	o1_gcache_put(c, d.e);
	assert_int_equal(get(c, O1_GRAMMAR_JSON_OBJECT, "", &d), 0);
	assert_int_equal(d.err, 0);
	o1_gcache_put(c, d.e);
	o1_gcache_stats(c, &st);
	assert_int_equal(st.misses, 4);
	assert_int_equal(st.refused, 3);
	assert_int_equal(st.hits, 1);
	o1_gcache_put(c, a.e);
	o1_gcache_put(c, b.e);
	o1_gcache_destroy(c);
}

/* One compile thread, held in the ready() of grammar A: gets of B queue
 * and join, and are handed over in their order once A is let go. */
static void test_joins(void **state)
{
	struct o1_gcache *c = make(0, 0, 1);
	struct o1_gcache_stats st;
	struct req a, b[3];

	(void)state;
	hold = true;
	memset(&a, 0, sizeof(a));
	assert_int_equal(o1_gcache_get(c, O1_GRAMMAR_GBNF,
				       (const uint8_t *)"root ::= \"a\"", 12,
				       &a.w, &a.e),
			 0);
	wait_for(is_held, NULL);
	for (int i = 0; i < 3; i++) {
		memset(&b[i], 0, sizeof(b[i]));
		assert_int_equal(
		    o1_gcache_get(c, O1_GRAMMAR_GBNF,
				  (const uint8_t *)"root ::= \"b\"", 12,
				  &b[i].w, &b[i].e),
		    0);
	}
	o1_gcache_stats(c, &st);
	assert_int_equal(st.misses, 2);
	assert_int_equal(st.joins, 2);
	pthread_mutex_lock(&lock);
	hold = false;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < 3; i++) {
		wait_for(is_ready, &b[i]);
		assert_int_equal(b[i].err, 0);
		assert_int_equal(b[i].order, 2 + i);
		assert_ptr_equal(b[i].e, b[0].e);
		o1_gcache_put(c, b[i].e);
	}
	wait_for(is_ready, &a);
	o1_gcache_put(c, a.e);
	o1_gcache_destroy(c);
}

static void *stopper(void *arg)
{
	o1_gcache_stop(arg);
	return NULL;
}

/* Stopping while grammar B waits in the queue behind a held A: B's
 * requests get -O1_E_DRAINING, and so do new grammars from then on. */
static void test_stop_drains(void **state)
{
	static struct req more[4096];
	struct o1_gcache *c = make(0, 0, 1);
	struct req a, b;
	pthread_t t;
	int n = 0, ret;

	(void)state;
	hold = true;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	assert_int_equal(o1_gcache_get(c, O1_GRAMMAR_GBNF,
				       (const uint8_t *)"root ::= \"a\"", 12,
				       &a.w, &a.e),
			 0);
	wait_for(is_held, NULL);
	assert_int_equal(o1_gcache_get(c, O1_GRAMMAR_GBNF,
				       (const uint8_t *)"root ::= \"b\"", 12,
				       &b.w, &b.e),
			 0);
	assert_int_equal(pthread_create(&t, NULL, stopper, c), 0);
	/* until the stop is seen: each try before it queues a new grammar */
	do {
		char text[32];

		assert_true(n < 4096);
		snprintf(text, sizeof(text), "root ::= \"c%d\"", n);
		memset(&more[n], 0, sizeof(more[n]));
		ret = o1_gcache_get(c, O1_GRAMMAR_GBNF, (const uint8_t *)text,
				    (uint32_t)strlen(text), &more[n].w,
				    &more[n].e);
		if (ret != -O1_E_DRAINING) {
			assert_int_equal(ret, 0);
			n++;
			usleep(1000);
		}
	} while (ret != -O1_E_DRAINING);
	pthread_mutex_lock(&lock);
	hold = false;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	pthread_join(t, NULL);
	assert_int_equal(a.err, 0);
	assert_int_equal(b.err, -O1_E_DRAINING);
	for (int i = 0; i < n; i++) {
		assert_int_equal(more[i].err, -O1_E_DRAINING);
		o1_gcache_put(c, more[i].e);
	}
	o1_gcache_put(c, a.e);
	o1_gcache_put(c, b.e);
	o1_gcache_destroy(c);
}

static void get_put(struct o1_gcache *c, const char *text)
{
	struct req r;

	get(c, O1_GRAMMAR_GBNF, text, &r);
	assert_int_equal(r.err, 0);
	o1_gcache_put(c, r.e);
}

static void test_lru(void **state)
{
	struct o1_gcache *c = make(2, 0, 1);
	struct o1_gcache_stats st;
	struct req held_a, r;

	(void)state;
	get_put(c, "root ::= \"a\"");
	get_put(c, "root ::= \"b\"");
	get_put(c, "root ::= \"a\""); /* a is now the most recent */
	get_put(c, "root ::= \"c\""); /* b leaves */
	o1_gcache_stats(c, &st);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(get(c, O1_GRAMMAR_GBNF, "root ::= \"a\"", &held_a), 1);
	assert_int_equal(get(c, O1_GRAMMAR_GBNF, "root ::= \"b\"", &r), 0);
	o1_gcache_put(c, r.e); /* c leaves: a is referenced */
	get_put(c, "root ::= \"d\"");
	get_put(c, "root ::= \"e\"");
	assert_int_equal(get(c, O1_GRAMMAR_GBNF, "root ::= \"a\"", &r), 1);
	o1_gcache_put(c, r.e);
	o1_gcache_put(c, held_a.e);
	o1_gcache_stats(c, &st);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.misses, 6);
	o1_gcache_destroy(c);

	/* a byte budget below one grammar keeps only referenced ones */
	c = make(64, 1, 1);
	assert_int_equal(get(c, O1_GRAMMAR_GBNF, "root ::= \"a\"", &held_a), 0);
	get_put(c, "root ::= \"b\"");
	o1_gcache_stats(c, &st);
	assert_int_equal(st.entries, 1);
	assert_true(st.bytes > 1);
	o1_gcache_put(c, held_a.e);
	o1_gcache_stats(c, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	o1_gcache_destroy(c);
}

static _Atomic int hammer_bad;

/* 150 gets and puts of 7 grammars; no cmocka asserts off the main
 * thread: mistakes are counted in hammer_bad. */
static void *hammer(void *arg)
{
	struct o1_gcache *c = arg;
	char text[32];

	for (int i = 0; i < 150; i++) {
		struct req r = {0};
		int ret;

		snprintf(text, sizeof(text), "root ::= \"%d\"+", i % 7);
		ret = o1_gcache_get(c, O1_GRAMMAR_GBNF, (const uint8_t *)text,
				    (uint32_t)strlen(text), &r.w, &r.e);
		if (ret < 0) {
			hammer_bad++;
			continue;
		}
		pthread_mutex_lock(&lock);
		while (ret == 0 && !r.order)
			pthread_cond_wait(&cond, &lock);
		pthread_mutex_unlock(&lock);
		if (o1_gentry_error(r.e, NULL) || (ret == 0 && r.handed != r.e))
			hammer_bad++;
		o1_gcache_put(c, r.e);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct o1_gcache *c = make(4, 0, 3);
	struct o1_gcache_stats st;
	pthread_t t[4];

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer, c), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	o1_gcache_stats(c, &st);
	assert_int_equal(hammer_bad, 0);
	assert_int_equal(st.hits + st.joins + st.misses, 600);
	assert_true(st.entries <= 4);
	assert_int_equal(st.refused, 0);
	o1_gcache_destroy(c);
}

static int setup(void **state)
{
	static uint8_t all[256];
	const uint8_t *bytes[V];
	uint32_t lens[V];
	uint8_t kinds[V] = {0};

	(void)state;
	for (int b = 0; b < 256; b++) {
		all[b] = (uint8_t)b;
		bytes[b] = &all[b];
		lens[b] = 1;
	}
	bytes[EOS] = (const uint8_t *)"</s>";
	lens[EOS] = 4;
	kinds[EOS] = O1_GRAMMAR_TOKEN_END;
	return o1_grammar_vocab_create(V, bytes, lens, kinds, &vocab);
}

static int teardown(void **state)
{
	(void)state;
	o1_grammar_vocab_destroy(vocab);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hit_and_constrain),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_joins),
	    cmocka_unit_test(test_stop_drains),
	    cmocka_unit_test(test_lru),
	    cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
