/* Per-client counts (see client_share.h). ent[] is a power-of-two table of
 * 2 x max_clients entries or more; a free entry has held 0. Deletion moves
 * later entries of the same probe run back, so a lookup stops at the first
 * free entry and no tombstones build up. */
#include <errno.h>
#include <stdlib.h>

#include "client_share.h"
#include "common/log.h"

struct ent {
	uint32_t client;
	uint32_t held, running, pages;
};

struct o1_client_share {
	struct ent *ent;
	uint32_t mask; /* entries - 1 */
	uint32_t n_clients, max_clients;
};

static uint32_t hash(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

int o1_client_share_create(uint32_t max_clients, struct o1_client_share **out)
{
	struct o1_client_share *c;
	uint32_t n = 2;

	if (!max_clients || max_clients > (1u << 30))
		return -EINVAL;
	while (n < 2 * max_clients)
		n <<= 1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->ent = calloc(n, sizeof(*c->ent));
	if (!c->ent) {
		free(c);
		return -ENOMEM;
	}
	c->mask = n - 1;
	c->max_clients = max_clients;
	*out = c;
	return 0;
}

void o1_client_share_destroy(struct o1_client_share *c)
{
	if (!c)
		return;
	free(c->ent);
	free(c);
}

/* CLIENT's entry index, or the free entry where it would go. */
static uint32_t find(const struct o1_client_share *c, uint32_t client)
{
	uint32_t i = hash(client) & c->mask;

	while (c->ent[i].held && c->ent[i].client != client)
		i = (i + 1) & c->mask;
	return i;
}

static struct ent *lookup(const struct o1_client_share *c, uint32_t client)
{
	struct ent *e = &c->ent[find(c, client)];

	return e->held ? e : NULL;
}

void o1_client_share_hold(struct o1_client_share *c, uint32_t client)
{
	struct ent *e = &c->ent[find(c, client)];

	if (!e->held) {
		if (c->n_clients == c->max_clients) {
			o1_err("client_share: more than %u clients hold work",
			       c->max_clients);
			return;
		}
		*e = (struct ent){.client = client};
		c->n_clients++;
	}
	e->held++;
}

/* Empties entry I and moves back the entries after it that belong at or
 * before I (their probe run passes through it). */
static void remove_at(struct o1_client_share *c, uint32_t i)
{
	uint32_t j = i;

	c->ent[i].held = 0;
	for (;;) {
		uint32_t home;

		j = (j + 1) & c->mask;
		if (!c->ent[j].held)
			return;
		home = hash(c->ent[j].client) & c->mask;
		/* J stays when its home lies cyclically in (I, J] */
		if (((j - home) & c->mask) < ((j - i) & c->mask))
			continue;
		c->ent[i] = c->ent[j];
		c->ent[j].held = 0;
		i = j;
	}
}

void o1_client_share_drop(struct o1_client_share *c, uint32_t client)
{
	uint32_t i = find(c, client);
	struct ent *e = &c->ent[i];

	if (!e->held) {
		o1_err("client_share: client %u drops work it does not hold",
		       client);
		return;
	}
	if (--e->held)
		return;
	remove_at(c, i);
	c->n_clients--;
}

void o1_client_share_run(struct o1_client_share *c, uint32_t client, int delta)
{
	struct ent *e = lookup(c, client);

	if (!e || (delta < 0 && !e->running) ||
	    (delta > 0 && e->running == e->held)) {
		o1_err("client_share: client %u running %+d breaks its counts",
		       client, delta);
		return;
	}
	e->running += (uint32_t)delta;
}

uint32_t o1_client_share_running(const struct o1_client_share *c,
				 uint32_t client)
{
	const struct ent *e = lookup(c, client);

	return e ? e->running : 0;
}

uint32_t o1_client_share_clients(const struct o1_client_share *c)
{
	return c->n_clients;
}

uint32_t o1_client_share_fair(const struct o1_client_share *c, uint32_t n)
{
	uint32_t k = c->n_clients ? c->n_clients : 1;
	uint32_t f = n / k + (n % k != 0);

	return f ? f : 1;
}

void o1_client_share_clear_pages(struct o1_client_share *c)
{
	for (uint32_t i = 0; i <= c->mask; i++)
		c->ent[i].pages = 0;
}

void o1_client_share_add_pages(struct o1_client_share *c, uint32_t client,
			       uint32_t pages)
{
	struct ent *e = lookup(c, client);

	if (e)
		e->pages += pages;
}

uint32_t o1_client_share_pages(const struct o1_client_share *c,
			       uint32_t client)
{
	const struct ent *e = lookup(c, client);

	return e ? e->pages : 0;
}
