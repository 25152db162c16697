/* Several front threads (ipc.front_threads): one loop (struct
 * o1_ipc_server, front.c) per thread, each with its own io_uring, client
 * table, live list, spin and sleep, serving a disjoint set of clients, so
 * that many busy clients are served side by side instead of in turn
 * (issue 19: one thread's pass costs ~0.3 us a busy client).
 *
 * The lead (front 0, the server o1_ipc_server_create returns, run on the
 * caller's thread) keeps everything that is one for the daemon: the
 * listener and hand-shakes, admin connections, signals, device output
 * areas, the caps on connections (guard.c), and serves clients too. A
 * client whose welcome went out moves to the front with the fewest
 * clients (the lead on a tie, so one client stays where it was) and stays
 * there until it is torn down.
 *
 * Invariants:
 * - A slot index names the same client on every front (its id is
 *   generation << 16 | index); each front has its own table, and a slot
 *   is live in at most one: the lead's while it connects, for admin
 *   connections, and for clients the lead serves; front k's from its
 *   adoption to its teardown, while the lead's copy is AWAY (not on its
 *   live list; read only to count established clients and their uids and
 *   to list them).
 * - Only the thread serving a client touches its slot, rings, doorbells
 *   and socket: its completion ring has that one producer (the consumer
 *   posts to it from that front's ->poll: o1_ipc_post on another front's
 *   srv finds no such client).
 * - Only the lead frees a slot (generation + 1, FREE), after front k gave
 *   it back; the copy handed over carries the generation, so a slot's
 *   generation only grows and io_uring completions armed for an earlier
 *   occupant are ignored on every front.
 * - Hand-over: the lead cancels its socket poll of the client, copies the
 *   slot into moving[idx], marks its own copy AWAY (fds, mapping and
 *   scratch now front k's) and queues idx to k under `lock`, then kicks
 *   k; k copies moving[idx] out under `lock` (which orders the copy),
 *   adds it to its live list; its pass then arms its own socket poll and
 *   doorbell and drains what the client published meanwhile.
 * - Give-back: front k's teardown (end of its pass, ->disconnect on its
 *   thread, mapping, fds and scratch released) queues idx to the lead and
 *   kicks it; the lead releases what its copy still holds (device output
 *   area, the connected count) and frees the slot.
 * - Teardown order within a front is front.c's; destroy tears down the
 *   other fronts' clients first, then the lead takes their slots back.
 * - Draining: the lead sets it on its own clients and in `draining`,
 *   bumps drain_seq (release) and kicks the others; each applies it at
 *   the kick and stores the seq it applied in drain_seen[f] (release).
 *   The lead waits for every running front to have applied it (at most
 *   DRAIN_ACK_NS: a front's pass is bounded by its quotas), so once
 *   o1_ipc_server_set_draining returns every client's ring shows it and
 *   new submissions are refused, as with one thread.
 * - Counters: each front other than the lead copies its own into its
 *   st_pub[f] (relaxed atomic stores; f writes only its own, on cache
 *   lines of its own) after every pass that did work, before every sleep
 *   and when it stops; the lead adds relaxed loads of them to its own,
 *   without a lock. So a count made in a pass is there once that pass
 *   ends, whether the front then sleeps, spins or stays busy (it no longer
 *   waits for a tick, which a front with work on every pass never
 *   submits); anything the front posted in a later pass (an answer the
 *   reader saw, then asked for stats) orders the copy before the read.
 *   Each counter is exact as of that copy; two counters of one front may
 *   come from copies a pass apart.
 * With one front thread there is no group: none of this runs, and the
 * loop's pass is what it was. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "front.h"

/* Every counter of struct o1_ipc_stats but the last (futex_wait) is a
 * uint64_t, summed over the fronts. */
_Static_assert(offsetof(struct o1_ipc_stats, futex_wait) % 8 == 0 &&
		   offsetof(struct o1_ipc_stats, futex_wait) +
			   sizeof(uint64_t) >=
		       sizeof(struct o1_ipc_stats),
	       "o1_ipc_stats: uint64_t counters, then futex_wait");

#define N_COUNTERS (offsetof(struct o1_ipc_stats, futex_wait) / 8)

/* A front's published counters, on cache lines no other front writes. */
struct shard_counters {
	_Alignas(64) _Atomic uint64_t v[N_COUNTERS];
};

struct o1_ipc_shards {
	uint32_t n;			/* front threads */
	struct o1_ipc_server **fronts;	/* [0]: the lead */
	pthread_t *threads;		/* [f] for f >= 1 */
	int threads_running;		/* the lead's: between start and join */
	pthread_mutex_t lock;
	/* under lock: slot indices queued to each front (to adopt; to the
	 * lead: given back), the copies on their way */
	uint32_t **inbox;
	uint32_t *n_inbox;
	struct o1_ipc_client *moving; /* n_slots */
	struct shard_counters *st_pub; /* [f]: written by f only (see head) */
	/* the lead's only: clients each front serves (for f >= 1), and the
	 * front each AWAY slot went to */
	uint32_t *served;
	uint32_t *away_front;
	atomic_int draining; /* written by the lead, read at kicks */
	_Atomic uint64_t drain_seq;
	_Atomic uint64_t *drain_seen; /* [f]: the drain_seq f applied */
};

#define DRAIN_ACK_NS 1000000000ull

uint32_t o1_ipc_server_fronts(const struct o1_ipc_server *srv)
{
	return srv->group ? srv->group->n : 1;
}

struct o1_ipc_server *o1_ipc_front_of(struct o1_ipc_server *lead, uint32_t f)
{
	return lead->group ? lead->group->fronts[f] : lead;
}

/* Wakes front F for its inbox or the draining state: its kick eventfd,
 * without o1_ipc_server_kick's time stamp, which dates the consumer's
 * posts for the front's cadence (cadence.h). */
static void wake(struct o1_ipc_shards *g, uint32_t f)
{
	uint64_t one = 1;
	ssize_t n = write(g->fronts[f]->kick_fd, &one, sizeof(one));

	(void)n; /* EAGAIN: a wake-up is already pending */
}

static void push(struct o1_ipc_shards *g, uint32_t f, uint32_t idx)
{
	pthread_mutex_lock(&g->lock);
	g->inbox[f][g->n_inbox[f]++] = idx;
	pthread_mutex_unlock(&g->lock);
	wake(g, f);
}

/* The lead's clients, not counting C (just welcomed). */
static uint32_t lead_served(struct o1_ipc_server *lead,
			    const struct o1_ipc_client *c)
{
	uint32_t n = 0;

	for (uint32_t i = lead->n_live; i-- > 0;) {
		const struct o1_ipc_client *x = o1_ipc_live(lead, i);

		n += x != c && x->state == O1_IPC_ACTIVE && !x->doomed;
	}
	return n;
}

/* The front with the fewest clients; the lowest index on a tie. */
static uint32_t fewest(struct o1_ipc_server *lead,
		       const struct o1_ipc_client *c)
{
	struct o1_ipc_shards *g = lead->group;
	uint32_t best = 0, best_n = lead_served(lead, c);

	for (uint32_t f = 1; f < g->n; f++)
		if (g->served[f] < best_n) {
			best = f;
			best_n = g->served[f];
		}
	return best;
}

void o1_ipc_hand_over(struct o1_ipc_server *lead, struct o1_ipc_client *c)
{
	struct o1_ipc_shards *g = lead->group;
	uint32_t idx = (uint32_t)(c - lead->clients), f;

	if (!g || c->state != O1_IPC_ACTIVE || c->doomed)
		return;
	f = fewest(lead, c);
	if (f == 0)
		return;
	o1_ipc_disarm(lead, c);
	pthread_mutex_lock(&g->lock);
	g->moving[idx] = *c;
	pthread_mutex_unlock(&g->lock);
	o1_ipc_live_remove(lead, c);
	c->state = O1_IPC_AWAY;
	c->fd = c->efd = -1;
	c->base = NULL;
	c->scratch = NULL;
	g->away_front[idx] = f;
	g->served[f]++;
	push(g, f, idx);
}

/* Front F takes slot IDX from moving[] (under lock). */
static void adopt(struct o1_ipc_server *srv, uint32_t idx)
{
	struct o1_ipc_client *c = &srv->clients[idx];
	struct o1_ring_ctrl *ctrl;

	*c = srv->group->moving[idx];
	o1_ipc_live_add(srv, c);
	ctrl = o1_region_sq_ctrl(c->base, &c->l);
	if (srv->draining)
		atomic_fetch_or(&ctrl->flags, O1_RING_DRAINING);
	else
		atomic_fetch_and(&ctrl->flags, ~(uint32_t)O1_RING_DRAINING);
}

/* The lead frees slot IDX, given back by the front that served it. */
static void reclaim(struct o1_ipc_server *lead, uint32_t idx)
{
	struct o1_ipc_shards *g = lead->group;
	struct o1_ipc_client *c = &lead->clients[idx];

	if (c->state != O1_IPC_AWAY)
		return; /* a broken invariant; never free a slot twice */
	o1_ipc_devout_release(lead, c->devout);
	lead->st.clients_connected--;
	g->served[g->away_front[idx]]--;
	o1_ipc_slot_free(c);
}

void o1_ipc_shard_inbox(struct o1_ipc_server *srv)
{
	struct o1_ipc_shards *g = srv->group;
	uint64_t seq = atomic_load_explicit(&g->drain_seq, memory_order_acquire);
	int drain = atomic_load(&g->draining);

	if (srv->front && drain != srv->draining)
		o1_ipc_set_draining_local(srv, drain);
	if (srv->front)
		atomic_store_explicit(&g->drain_seen[srv->front], seq,
				      memory_order_release);
	pthread_mutex_lock(&g->lock);
	for (uint32_t i = 0; i < g->n_inbox[srv->front]; i++) {
		uint32_t idx = g->inbox[srv->front][i];

		if (srv->front)
			adopt(srv, idx);
		else
			reclaim(srv, idx);
	}
	g->n_inbox[srv->front] = 0;
	pthread_mutex_unlock(&g->lock);
}

void o1_ipc_shard_give_back(struct o1_ipc_server *srv, uint32_t idx)
{
	push(srv->group, 0, idx);
}

uint32_t o1_ipc_away(const struct o1_ipc_server *lead, int by_uid, uid_t uid)
{
	uint32_t n = 0;

	for (uint32_t i = 0; lead->group && i < lead->n_slots; i++)
		n += lead->clients[i].state == O1_IPC_AWAY &&
		     (!by_uid || lead->clients[i].cred.uid == uid);
	return n;
}

void o1_ipc_shard_publish(struct o1_ipc_server *srv)
{
	const uint64_t *st = (const uint64_t *)&srv->st;
	_Atomic uint64_t *pub;

	if (!srv->front)
		return;
	pub = srv->group->st_pub[srv->front].v;
	for (size_t i = 0; i < N_COUNTERS; i++)
		atomic_store_explicit(&pub[i], st[i], memory_order_relaxed);
}

void o1_ipc_server_stats(const struct o1_ipc_server *srv,
			 struct o1_ipc_stats *out)
{
	struct o1_ipc_shards *g = srv->group;
	uint64_t *sum = (uint64_t *)out;

	*out = srv->st;
	if (!g || srv->front)
		return;
	for (uint32_t f = 1; f < g->n; f++)
		for (size_t i = 0; i < N_COUNTERS; i++)
			sum[i] += atomic_load_explicit(&g->st_pub[f].v[i],
						       memory_order_relaxed);
}

/* Waits until every running front applied drain_seq SEQ (see head). */
static void drain_ack(struct o1_ipc_shards *g, uint64_t seq)
{
	struct timespec nap = {.tv_nsec = 20000};
	uint64_t until = o1_ipc_now_ns() + DRAIN_ACK_NS;

	for (uint32_t f = 1; f < g->n; f++)
		while (atomic_load_explicit(&g->drain_seen[f],
					    memory_order_acquire) < seq &&
		       !atomic_load(&g->fronts[f]->stop) &&
		       o1_ipc_now_ns() < until)
			nanosleep(&nap, NULL);
}

void o1_ipc_server_set_draining(struct o1_ipc_server *srv, int on)
{
	struct o1_ipc_shards *g = srv->group;
	uint64_t seq;

	o1_ipc_set_draining_local(srv, on);
	if (!g)
		return;
	atomic_store(&g->draining, !!on);
	seq = atomic_fetch_add_explicit(&g->drain_seq, 1,
					memory_order_release) +
	      1;
	for (uint32_t f = 1; f < g->n; f++)
		wake(g, f);
	if (g->threads_running)
		drain_ack(g, seq);
}

/* Front F: the lead's options (no signals, no listener), consumer, and
 * a table of the same size. */
static int front_create(struct o1_ipc_server *lead, uint32_t f)
{
	struct o1_ipc_server *s =
	    aligned_alloc(_Alignof(struct o1_ipc_server), sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	memset(s, 0, sizeof(*s));
	s->o = lead->o; /* its pointers stay the lead's: borrowed */
	s->o.handle_signals = 0;
	s->cons = lead->cons;
	s->n_slots = lead->n_slots;
	s->lead = lead;
	s->group = lead->group;
	s->front = f;
	lead->group->fronts[f] = s;
	ret = o1_ipc_loop_setup(s);
	if (!ret)
		s->st.futex_wait = 0; /* the lead's says it */
	return ret;
}

/* Tears down front F's clients (their slots go back to the lead's inbox),
 * those handed to it but not yet taken too, and frees it. Not while it
 * runs. */
static void front_destroy(struct o1_ipc_server *s)
{
	if (!s)
		return;
	if (s->live)
		o1_ipc_shard_inbox(s);
	for (uint32_t i = s->n_live; s->live && i-- > 0;) {
		o1_ipc_client_doom(s, o1_ipc_live(s, i), NULL);
		o1_ipc_reap(s);
	}
	o1_ipc_loop_fini(s);
	free(s);
}

static int group_alloc(struct o1_ipc_server *lead, uint32_t n)
{
	struct o1_ipc_shards *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	lead->group = g;
	g->n = n;
	pthread_mutex_init(&g->lock, NULL);
	g->fronts = calloc(n, sizeof(*g->fronts));
	g->threads = calloc(n, sizeof(*g->threads));
	g->inbox = calloc(n, sizeof(*g->inbox));
	g->n_inbox = calloc(n, sizeof(*g->n_inbox));
	g->st_pub = aligned_alloc(_Alignof(struct shard_counters),
				  n * sizeof(*g->st_pub));
	if (g->st_pub)
		memset(g->st_pub, 0, n * sizeof(*g->st_pub));
	g->served = calloc(n, sizeof(*g->served));
	g->moving = calloc(lead->n_slots, sizeof(*g->moving));
	g->away_front = calloc(lead->n_slots, sizeof(*g->away_front));
	g->drain_seen = calloc(n, sizeof(*g->drain_seen));
	if (!g->fronts || !g->threads || !g->inbox || !g->n_inbox ||
	    !g->st_pub || !g->served || !g->moving || !g->away_front ||
	    !g->drain_seen)
		return -ENOMEM;
	g->fronts[0] = lead;
	for (uint32_t f = 0; f < n; f++) {
		g->inbox[f] = calloc(lead->n_slots, sizeof(uint32_t));
		if (!g->inbox[f])
			return -ENOMEM;
	}
	return 0;
}

int o1_ipc_shards_create(struct o1_ipc_server *lead)
{
	uint32_t n = lead->o.front_threads;
	int ret;

	if (n <= 1)
		return 0;
	if (n > O1_IPC_FRONTS_MAX) {
		o1_err("ipc: front_threads %u above %d", n, O1_IPC_FRONTS_MAX);
		return -EINVAL;
	}
	ret = group_alloc(lead, n);
	for (uint32_t f = 1; !ret && f < n; f++)
		ret = front_create(lead, f);
	return ret;
}

void o1_ipc_shards_destroy(struct o1_ipc_server *lead)
{
	struct o1_ipc_shards *g = lead->group;

	if (!g)
		return;
	for (uint32_t f = 1; g->fronts && f < g->n; f++)
		front_destroy(g->fronts[f]);
	if (g->inbox && g->n_inbox && g->fronts)
		o1_ipc_shard_inbox(lead); /* the slots they gave back */
	for (uint32_t f = 0; g->inbox && f < g->n; f++)
		free(g->inbox[f]);
	pthread_mutex_destroy(&g->lock);
	free(g->fronts);
	free(g->threads);
	free(g->inbox);
	free(g->n_inbox);
	free(g->st_pub);
	free(g->served);
	free(g->moving);
	free(g->away_front);
	free(g->drain_seen);
	free(g);
	lead->group = NULL;
}

static void *front_main(void *arg)
{
	struct o1_ipc_server *s = arg;
	int ret = o1_ipc_loop(s);

	if (ret)
		o1_err("ipc: front thread %u: %s", s->front, strerror(-ret));
	o1_ipc_shard_publish(s);
	return NULL;
}

int o1_ipc_shards_run(struct o1_ipc_server *lead)
{
	struct o1_ipc_shards *g = lead->group;
	uint32_t started = 1;
	int ret = 0;

	for (; started < g->n && !ret; started++) {
		ret = -pthread_create(&g->threads[started], NULL, front_main,
				      g->fronts[started]);
		if (ret) {
			o1_err("ipc: cannot start front thread %u: %s",
			       started, strerror(-ret));
			break;
		}
	}
	g->threads_running = 1;
	if (!ret)
		ret = o1_ipc_loop(lead);
	o1_ipc_server_stop(lead);
	for (uint32_t f = 1; f < started; f++)
		pthread_join(g->threads[f], NULL);
	g->threads_running = 0;
	return ret;
}
