/* Guards of the front loop against hostile or careless clients: what a
 * connection may cost before and after its hello.
 *
 * Connections: a connection that has not said hello holds a slot of its
 * own small budget (max_half_open), apart from the max_clients of
 * established ones, so silent sockets cannot keep clients out: a new
 * connection beyond the budget evicts the oldest silent one, and a client
 * that sends its hello at once (as libo1client does) is served before a
 * silent one ages. All connections of one uid, hello or not, are capped
 * (max_clients_per_uid).
 *
 * Wake-ups: every doorbell wake-up costs the loop a pass and a spin. One
 * that finds no entry is counted; O1_IPC_STORM_WAKES of them within a
 * tick is a storm: a violation, and the client's doorbell is not armed
 * for O1_IPC_THROTTLE_NS (its ring is still read on every pass and at
 * least every tick, so it only slows itself down).
 *
 * Violations leak: one is forgiven per violation_decay_ms, so a client
 * is cut off only for abuse that goes on, not for rare slips.
 *
 * Every walk here is over the live list (cost follows the connected
 * clients), and runs once per connection, wake-up or tick, never per
 * entry. */
#include <errno.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"
#include "front.h"

uint64_t o1_ipc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint32_t o1_ipc_established(struct o1_ipc_server *srv)
{
	uint32_t n = 0;

	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		n += !c->doomed && (c->state == O1_IPC_ACTIVE ||
				    c->state == O1_IPC_ADMIN);
	}
	return n + o1_ipc_away(srv, 0, 0);
}

/* The oldest connection still waiting for its hello, or NULL. */
static struct o1_ipc_client *oldest_silent(struct o1_ipc_server *srv)
{
	struct o1_ipc_client *oldest = NULL;

	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		if (c->state == O1_IPC_HELLO && !c->doomed &&
		    (!oldest || c->hello_deadline_ns < oldest->hello_deadline_ns))
			oldest = c;
	}
	return oldest;
}

/* Makes room in the half-open budget: the oldest connection whose hello
 * has not come is refused, and its slot freed at once (a burst of new
 * connections must not run out of slots). One whose hello is queued but
 * not read yet (its poll completion still on the way) is served instead,
 * or refused for it, and the next oldest is tried. */
static void evict_silent(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	for (uint32_t tries = 0; c && tries <= srv->o.max_half_open; tries++) {
		o1_ipc_handshake(srv, c);
		if (c->state == O1_IPC_HELLO && !c->doomed) {
			srv->st.half_open_evicted++;
			o1_ipc_refuse(srv, c, -O1_E_QUOTA,
				      "no hello yet and a newer connection "
				      "came (ipc.max_half_open)");
			o1_ipc_drop_silent(srv, c);
			return;
		}
		o1_ipc_drop_silent(srv, c); /* its hello was refused */
		c = oldest_silent(srv);
	}
}

int o1_ipc_admit(struct o1_ipc_server *srv, const struct ucred *cred)
{
	uint32_t same_uid = 0, half_open = 0;

	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		if (c->doomed)
			continue;
		same_uid += c->cred.uid == cred->uid;
		half_open += c->state == O1_IPC_HELLO;
	}
	same_uid += o1_ipc_away(srv, 1, cred->uid);
	if (srv->o.max_clients_per_uid &&
	    same_uid >= srv->o.max_clients_per_uid) {
		srv->st.uid_refused++;
		o1_log_limited(O1_LOG_WARN, cred->uid,
			       "ipc: refusing a connection of pid %d uid %u: "
			       "it has %u, ipc.max_clients_per_uid",
			       (int)cred->pid, (unsigned)cred->uid, same_uid);
		return -O1_E_QUOTA;
	}
	if (half_open >= srv->o.max_half_open)
		evict_silent(srv, oldest_silent(srv));
	return 0;
}

void o1_ipc_empty_wake(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	srv->st.wakeups_empty++;
	if (++c->empty_wakes != O1_IPC_STORM_WAKES)
		return;
	srv->st.wake_storms++;
	c->throttle_until_ns = o1_ipc_now_ns() + O1_IPC_THROTTLE_NS;
	o1_ipc_violation(srv, c, -O1_E_PROTOCOL,
			 "wake-up storm: doorbell rung without entries");
}

void o1_ipc_guard_tick(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		       uint64_t now)
{
	uint64_t period = srv->o.violation_decay_ms * 1000000ull;

	c->empty_wakes = 0;
	if (c->violations && now - c->violation_leak_ns >= period) {
		c->violations--;
		c->violation_leak_ns = now;
	}
}
