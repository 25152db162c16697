/* Test helpers for the daemon: a tiny model made with o1model, an o1d
 * process (stderr to a log file, started and stopped), reference outputs
 * from `o1model run`, a request runner through libo1client and admin
 * status through the admin protocol. */
#ifndef O1_DAEMON_HARNESS_H
#define O1_DAEMON_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPEC_IDS_MAX 96
#define SPEC_GEN_MAX 256
/* o1ctl smoke's --cancel-bound-ms in tests: tests assume no timing, and a
 * loaded 2-core CI machine has missed the default 1000 ms. */
#define SMOKE_CANCEL_BOUND_MS 30000

struct daemon_proc {
	pid_t pid;
	char dir[64];
	char socket[128];
	char log[128];
	char model[128];
	char config[128]; /* "-c" file when not empty */
	int exit_status;  /* after daemon_start failed: o1d's exit code, or
			   * -1 (killed, or not exited) */
};

/* One request: a token-id prompt and sampling parameters o1model run
 * also takes. */
struct spec {
	uint32_t ids[SPEC_IDS_MAX];
	uint32_t n_ids;
	uint32_t max_tokens;
	float temperature, top_p;
	uint32_t top_k;
	uint64_t seed;
	bool ignore_eos;
};

struct result {
	uint32_t ids[SPEC_GEN_MAX];
	uint32_t n_ids;
	int finals;
	int finish;
	int error;
	uint32_t generated, prompt_tokens;
	bool bad_utf8;
	char text[4096];
	size_t text_len;
};

struct kv_status {
	int pages_total, pages_free, pages_used, pages_cached;
	int running, waiting, active, clients;
	int parked;    /* waiting for their reader */
	int stalled;   /* streams cancelled: their reader stalled */
	long long steps;
	long long preemptions, prefix_hits, prefix_misses;
	long long front_sleeps, front_ticks; /* the front loop's */
	bool draining;
};

/* Makes DIR (world-readable) and the tiny model in it; 0 or -1. */
int harness_init(struct daemon_proc *d, const char *o1model);
/* Starts o1d with extra "--set k=v" values (NULL-terminated) and waits
 * for its ready line; 0 or -1. */
int daemon_start(struct daemon_proc *d, const char *o1d,
		 const char *const *sets);
/* Whether the file at PATH has a line containing WHAT. */
bool log_has(const char *path, const char *what);
/* SIGTERM and reap; returns the exit status, -1 on a signal death. */
int daemon_stop(struct daemon_proc *d);
void harness_fini(struct daemon_proc *d);

/* o1model, which makes the tiny model of harness_setup: the test's main
 * sets it from its command line before the group runs. */
extern const char *harness_o1model;
/* cmocka group setup and teardown of the tests that share one daemon_proc
 * (in static storage): harness_init with harness_o1model into *STATE, and
 * harness_fini (stops a daemon left running, removes the directory). */
int harness_setup(void **state);
int harness_teardown(void **state);
/* cmocka per-test teardown: stops the daemon a test left running (a failed
 * assertion skips the test's own daemon_stop), so the next test's daemon
 * does not orphan it. */
int harness_stop(void **state);
/* Runs CMD with /bin/sh; its stdout goes to OUT (at most CAP - 1 bytes,
 * NUL-terminated; the rest is read and dropped) or, when OUT is NULL, is
 * dropped. Returns its exit code, -1 when it could not run or died of a
 * signal. */
int harness_run(const char *cmd, char *out, size_t cap);

/* Deterministic mixed spec number I. */
void spec_make(struct spec *s, unsigned i);
/* The reference ids from o1model run; 0 or -1. */
int spec_reference(const char *o1model, const char *model, const struct spec *s,
		   struct result *ref);
/* Runs S through a fresh client connection on SOCKET; 0 or -1. */
int spec_run(const char *socket, const struct spec *s, struct result *out);
struct o1_event;
/* Adds a TOKEN's ids and text (checking it is whole UTF-8) or counts a
 * FINAL. */
void result_add_event(struct result *r, const struct o1_event *ev);
/* Same ids, same count: 0; prints the difference otherwise. */
int result_same(const struct result *a, const struct result *ref,
		const char *what);

/* Admin status; 0 or -1. */
int admin_status(const char *socket, struct kv_status *st);
/* Waits (up to ms) until no request is active; 0 or -1. */
int admin_wait_idle(const char *socket, int ms, struct kv_status *st);
/* Sends one admin JSON request, reply into buf; 0 or -1. */
int admin_send(const char *socket, const char *req, char *buf, size_t cap);

#endif
