/* The compiled grammars of o1d's requests (structured output, issue 23):
 * one bounded cache keyed by a hash of (kind, bytes), filled by compile
 * threads, so that neither the front loop nor the engine thread ever
 * compiles a grammar and a repeated grammar costs nothing.
 *
 * An entry is one grammar: its key (kind and a copy of the bytes), then,
 * once compiled, either the o1_grammar with its token classes over the
 * model's vocabulary (o1_grammar_tokens), or the compiler's message.
 * Entries are referenced: a request holds its entry from submission until
 * its slot is freed (its matcher borrows the compiled objects), and a
 * referenced entry is never evicted. Unreferenced compiled entries stay
 * cached, the least recently used leaving first while there are more than
 * max_entries of them or the cache holds more than max_bytes; refusals
 * are cached too (a repeated bad grammar costs nothing), a lack of memory
 * is not.
 *
 * Threads: get and put on any thread (under the cache's mutex); each
 * compile runs on one of the compile threads. A request whose grammar is
 * still compiling waits on its entry through an intrusive link (nothing
 * is allocated per request) and is handed to the ready callback, on the
 * compile thread, once its entry is compiled or refused. o1_gcache_stop
 * hands the waiters of grammars not compiled yet to ready with
 * -O1_E_DRAINING.
 */
#ifndef O1_GRAMMAR_CACHE_H
#define O1_GRAMMAR_CACHE_H

#include <stdint.h>

#include "grammar/grammar.h"

struct o1_gcache;
struct o1_gentry;
struct o1_sampler;

/* A request's link while its grammar compiles; embed it. */
struct o1_gcache_waiter {
	struct o1_gcache_waiter *next;
};

struct o1_gcache_opts {
	const struct o1_grammar_vocab *vocab; /* the model's; borrowed */
	uint32_t max_entries;		      /* 0: 64 */
	uint64_t max_bytes;		      /* 0: 512 MiB */
	uint32_t threads;		      /* compile threads; 0: 1 */
	/* O1_GRAMMAR_TOOL_CALL: the tool-call format (enum o1_tool_format,
	 * tokenizer/tool_call.h) calls are written in; 0: refused */
	uint8_t tool_format;
	/* W's entry E is compiled or refused (o1_gentry_error): called on
	 * a compile thread, or by o1_gcache_stop */
	void (*ready)(void *ctx, struct o1_gcache_waiter *w,
		      struct o1_gentry *e);
	void *ctx;
};

struct o1_gcache_stats {
	uint64_t hits;	     /* gets that found the entry compiled */
	uint64_t joins;	     /* gets that found it compiling */
	uint64_t misses;     /* gets that started a compile */
	uint64_t refused;    /* compiles that failed */
	uint64_t evictions;  /* entries dropped for the bounds */
	uint32_t entries;    /* now, compiling and referenced included */
	uint64_t bytes;	     /* held by compiled entries now */
	uint64_t compile_ns; /* sum over compiles */
	uint64_t compile_max_ns;
};

int o1_gcache_create(const struct o1_gcache_opts *o, struct o1_gcache **out);
/* Stops (o1_gcache_stop) and frees; every entry must have been put.
 * Accepts NULL. */
void o1_gcache_destroy(struct o1_gcache *c);
/* Joins the compile threads (a compile under way finishes first); the
 * waiters of grammars still queued get ready() with -O1_E_DRAINING. Later
 * gets of grammars not cached fail with -O1_E_DRAINING. */
void o1_gcache_stop(struct o1_gcache *c);

/* The entry of LEN bytes of KIND (enum o1_grammar_kind, shm/wire.h),
 * referenced, into *OUT (set before W can reach ready). Returns 1 when it
 * is compiled or refused (see o1_gentry_error), 0 when it is compiling:
 * ready(W, entry) comes later; -ENOMEM or -O1_E_DRAINING (no entry). */
int o1_gcache_get(struct o1_gcache *c, uint8_t kind, const uint8_t *bytes,
		  uint32_t len, struct o1_gcache_waiter *w,
		  struct o1_gentry **out);
/* Drops a reference taken by o1_gcache_get. */
void o1_gcache_put(struct o1_gcache *c, struct o1_gentry *e);
void o1_gcache_stats(struct o1_gcache *c, struct o1_gcache_stats *out);

/* A compiled or refused entry: 0, or its error (-O1_E_GRAMMAR: refused,
 * *MSG the compiler's message; -ENOMEM; -O1_E_DRAINING). */
int o1_gentry_error(const struct o1_gentry *e, const char **msg);
/* Constrains SMP to compiled entry E's grammar with a new matcher at its
 * start (the sampler owns it). 0, -ENOMEM, or o1_sampler_constrain's
 * error. */
int o1_gentry_constrain(const struct o1_gentry *e, struct o1_sampler *smp);

#endif
