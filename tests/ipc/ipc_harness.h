/* Test helpers for IPC tests: start and stop the test server process,
 * read its stats, and a raw client that speaks the handshake by hand so
 * tests can misbehave on purpose. */
#ifndef O1_TEST_HARNESS_H
#define O1_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "shm/region.h"
#include "shm/wire.h"

struct test_server {
	pid_t pid;
	FILE *out; /* the server's stdout */
	char dir[64];
	char path[128];
	/* set before server_start: the server's stderr goes to this file
	 * (created or emptied), else to the test's */
	char log[128];
};

struct server_stats {
	unsigned long long connected, total, refused, deaths, violations,
	    kicked, requests, pings, sleeps;
	int futex;
	/* wake-up samples by path (count, sum), refused ones, and those
	 * ->observe_wakeup saw (count, largest) */
	unsigned long long wake_spin, wake_spin_ns, wake_sleep, wake_sleep_ns,
	    wake_invalid, observed, observed_max_ns;
	/* guards: empty doorbell wake-ups, storms throttled, silent
	 * connections evicted, connections over their uid's cap */
	unsigned long long wake_empty, storms, evicted, uid_refused;
	/* housekeeping ticks, posts refused for a full completion ring,
	 * wake-ups by readers that made room there */
	unsigned long long ticks, cq_full, room_wakes, tick_refills;
};

/* Starts the server binary with extra args (NULL-terminated); 0 or -1.
 * Zero *s first; a stopped server started again keeps its socket path. */
int server_start(struct test_server *s, const char *binary,
		 const char *const *args);
int server_stats(struct test_server *s, struct server_stats *st);
/* Waits (up to 5 s) until pred(stats) holds; returns 0 or -1. */
int server_wait(struct test_server *s,
		int (*pred)(const struct server_stats *, void *), void *arg,
		struct server_stats *st);
/* SIGTERM, reap; returns the exit status or -1. */
int server_stop(struct test_server *s);

struct raw_client {
	int sock;
	int memfd, efd;
	void *base;
	struct o1_region_layout l;
	struct o1_wire_welcome w;
};

/* Sends hello (with n_send_fds descriptors attached) and reads the
 * welcome; returns the welcome status (0: the region is mapped), 1 for a
 * good welcome without fds (admin), or -1000 on a local failure. */
int raw_connect(struct raw_client *r, const char *path,
		const struct o1_wire_hello *hello, const int *send_fds,
		int n_send_fds);
void raw_hello(struct o1_wire_hello *h);
void raw_close(struct raw_client *r);
/* Wakes the daemon as the region asks (futex or eventfd). */
void raw_ring(struct raw_client *r);
/* Waits up to ms for the daemon to hang up; 1 when it did. */
int raw_hung_up(struct raw_client *r, int ms);

#endif
