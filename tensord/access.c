// SPDX-License-Identifier: MIT
/*
 * tensord's access control (daemon.h). A peer's uid, gid and groups come from SO_PEERCRED and
 * SO_PEERGROUPS (clients.c). Root and the daemon's own user may do anything, and an arena's
 * owner anything with it; others get what the arena's mode bits for its group and for others,
 * and its grants, give them. create_users in tensord.conf says who may create arenas, and the
 * per-user quotas keep one user from taking what the others need. Someone who may not even
 * read an arena is told that it does not exist.
 */
#include <inttypes.h>

#include "../shm/shm.h"
#include "daemon.h"

/* ---- who may do what ------------------------------------------------------------------------- */

bool tnd_privileged(const struct tnd_client *c)
{
	return c->uid == 0 || c->uid == tnd_d.uid;
}

static bool in_group(const struct tnd_client *c, uint32_t gid)
{
	if (c->gid == gid)
		return true;
	for (int i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

unsigned tnd_access_of(const struct tnd_arena *ar, const struct tnd_client *c)
{
	if (tnd_privileged(c) || c->uid == ar->owner_uid)
		return TND_ACC_READ | TND_ACC_WRITE | TND_ACC_ADMIN;
	unsigned bits = in_group(c, ar->owner_gid) ? (ar->mode >> 3) & 7 : ar->mode & 7;
	unsigned acc =
		(bits & 4 ? TND_ACC_READ : 0) | (bits & 2 ? TND_ACC_READ | TND_ACC_WRITE : 0);
	for (uint32_t i = 0; i < ar->ngrants; i++) {
		const struct tnd_grant *g = &ar->grants[i];
		bool match = g->kind == TND_GRANT_USER ? g->id == c->uid : in_group(c, g->id);
		if (match)
			acc |= g->access == TND_ACCESS_READ_WRITE ? TND_ACC_READ | TND_ACC_WRITE
								  : TND_ACC_READ;
	}
	return acc;
}

bool tnd_may_create(const struct tnd_client *c)
{
	if (tnd_privileged(c) || tnd_d.cfg.create_all)
		return true;
	for (unsigned i = 0; i < tnd_d.cfg.ncreate_uids; i++)
		if (tnd_d.cfg.create_uids[i] == c->uid)
			return true;
	for (unsigned i = 0; i < tnd_d.cfg.ncreate_gids; i++)
		if (in_group(c, tnd_d.cfg.create_gids[i]))
			return true;
	return false;
}

struct tnd_arena *tnd_arena_for(struct tnd_client *c, const struct tnd_hdr *h, const char *name,
				unsigned need)
{
	struct tnd_arena *ar = tnd_arena_find(name);
	/* Someone who may not even see the arena learns nothing about it: both errors read
	 * "no arena". */
	if (!ar || !(tnd_access_of(ar, c) & (TND_ACC_READ | TND_ACC_ADMIN))) {
		tnd_reply_error(c, h, TN_ENOENT, "no arena \"%s\"", name);
		return NULL;
	}
	if (!tnd_arena_intact(ar) && !(need & TND_ACC_ADMIN)) {
		tnd_reply_error(c, h, TN_EIO, "arena \"%s\" is damaged (its file shrank under the "
				"mapping); only destroy --force is served", name);
		return NULL;
	}
	if ((tnd_access_of(ar, c) & need) != need) {
		tnd_reply_error(c, h, TN_EACCES, "arena \"%s\": permission denied (uid %u needs %s "
				"access)", name, (unsigned)c->uid,
				need & TND_ACC_ADMIN   ? "owner"
				: need & TND_ACC_WRITE ? "read-write"
						       : "read");
		return NULL;
	}
	return ar;
}

/* ---- quotas ---------------------------------------------------------------------------------- */

/* The per-user quotas: each answers @h and returns false when @c is over its limit. */

/* Root and the daemon's own user are not held to the per-user quotas. */
bool tnd_unlimited_user(uid_t uid)
{
	return uid == 0 || uid == tnd_d.uid;
}

/* One more arena of @size bytes and @names names (max_arenas_per_user, max_bytes_per_user,
 * max_names_per_user). */
bool tnd_quota_arena(struct tnd_client *c, const struct tnd_hdr *h, uint64_t size,
		     uint64_t names)
{
	if (tnd_unlimited_user(c->uid))
		return true;
	unsigned owned = 0;
	uint64_t bytes = 0, owned_names = 0;
	for (struct tnd_arena *a = tnd_d.arenas; a; a = a->next)
		if (a->owner_uid == c->uid) {
			owned++;
			bytes += a->size;
			owned_names += a->a ? tn__arena_max_names(a->a) : 0;
		}
	uint64_t max_names = tnd_d.cfg.max_names_per_user;
	if (max_names && (names > max_names || owned_names > max_names - names)) {
		tnd_reply_error(c, h, TN_ENOSPC, "uid %u owns arenas of %" PRIu64 " names: %" PRIu64
				" more would pass its limit of %" PRIu64 " (max_names_per_user)",
				(unsigned)c->uid, owned_names, names, max_names);
		return false;
	}
	if (owned >= tnd_d.cfg.max_arenas_per_user) {
		tnd_reply_error(c, h, TN_ENOSPC, "uid %u owns %u arenas, its limit "
				"(max_arenas_per_user)", (unsigned)c->uid, owned);
		return false;
	}
	if (tnd_d.cfg.max_bytes_per_user && (size > tnd_d.cfg.max_bytes_per_user ||
					     bytes > tnd_d.cfg.max_bytes_per_user - size)) {
		tnd_reply_error(c, h, TN_ENOSPC, "uid %u owns arenas of %" PRIu64 " bytes: "
				"%" PRIu64 " more would pass its limit of %" PRIu64
				" (max_bytes_per_user)", (unsigned)c->uid, bytes, size,
				tnd_d.cfg.max_bytes_per_user);
		return false;
	}
	return true;
}

/* One more client slot of @ar. An arena has 256 client slots; someone who only has a grant or
 * a mode bit may not take them all from its owner: one such user holds at most
 * max_slots_per_user of them, and the last reserved_slots free ones are kept for the owner
 * and root. */
bool tnd_quota_slots(struct tnd_client *c, const struct tnd_hdr *h, struct tnd_arena *ar)
{
	if (tnd_access_of(ar, c) & TND_ACC_ADMIN)
		return true;
	unsigned mine = 0, assigned = 0;
	for (struct tnd_client *o = tnd_d.clients; o; o = o->next)
		for (size_t i = 0; i < o->nslots; i++)
			if (o->slots[i].arena == ar) {
				assigned++;
				mine += o->uid == c->uid;
			}
	if (mine >= tnd_d.cfg.max_slots_per_user) {
		tnd_reply_error(c, h, TN_EBUSY, "arena \"%s\": uid %u has %u of its client slots "
				"open already, the most a user other than its owner may "
				"(max_slots_per_user)", ar->name, (unsigned)c->uid, mine);
		return false;
	}
	/* The slots taken: the arena's count (its lock's back-off aside), which includes
	 * processes that attached on their own, else those the daemon assigned. */
	uint64_t taken = assigned + 1; /* the daemon's own */
	tn_arena_stats s;
	if (tnd_arena_lockable(ar) && tnd_arena_locked(ar, tn_arena_stat(ar->a, &s)) == 0 &&
	    s.clients > taken)
		taken = s.clients;
	if (taken + tnd_d.cfg.reserved_slots >= TN_ARENA_MAX_CLIENTS) {
		tnd_reply_error(c, h, TN_EBUSY, "arena \"%s\": %" PRIu64 " of its %d client slots "
				"are taken; the last %u are kept for its owner and root "
				"(reserved_slots)", ar->name, taken, TN_ARENA_MAX_CLIENTS,
				tnd_d.cfg.reserved_slots);
		return false;
	}
	return true;
}

bool tnd_quota_accept(uid_t uid, const char **ret_why)
{
	/* Root and the daemon's own user are always served (as far as descriptors go): no
	 * flood of other users' connections may lock them out. */
	if (tnd_unlimited_user(uid))
		return true;
	if (tnd_d.nclients >= tnd_d.cfg.max_clients) {
		*ret_why = "max_clients";
		return false;
	}
	/* Connections that said HELLO are held to max_clients_per_user there (with a message
	 * saying so); those that have not are bounded here, per user. */
	unsigned pending = 0;
	for (struct tnd_client *o = tnd_d.clients; o; o = o->next)
		pending += o->uid == uid && !o->hello_done && !o->closing;
	if (pending >= tnd_d.cfg.max_hello_pending) {
		*ret_why = "max_hello_pending (its connections that have not said HELLO)";
		return false;
	}
	return true;
}

/* One more connection that said HELLO (max_clients_per_user). */
bool tnd_quota_clients(struct tnd_client *c, const struct tnd_hdr *h)
{
	if (tnd_unlimited_user(c->uid))
		return true;
	unsigned n = 0;
	for (struct tnd_client *o = tnd_d.clients; o; o = o->next)
		n += o != c && o->uid == c->uid && o->hello_done && !o->closing;
	if (n >= tnd_d.cfg.max_clients_per_user) {
		tnd_reply_error(c, h, TN_EBUSY, "uid %u has %u connections open, its limit "
				"(max_clients_per_user)", (unsigned)c->uid, n);
		return false;
	}
	return true;
}
