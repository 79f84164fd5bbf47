// SPDX-License-Identifier: MIT
/*
 * tensord's reclamation of client slots (daemon.h). The daemon assigns client slots
 * (shm/arena_remote.h) and remembers, per connection, each slot and its state word. When the
 * connection closes, its slots wait on a pending list and are reclaimed as soon as the process
 * is gone (checked every 10 ms for 5 s); every reclaim_interval_ms, dead processes' slots in
 * every arena are reclaimed whoever attached them. The CUDA export table of processes that
 * closed a connection is swept at the same pace (cudashare.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../shm/arena_remote.h"
#include "../shm/shm.h"
#include "daemon.h"

/* A connection closed while its process may still be exiting: its slots wait here. */
struct pending {
	struct pending *next;
	struct tnd_arena *arena;
	int slot;
	uint64_t state;
	pid_t pid;
	uint64_t start_time;
	uint64_t deadline_ns;
};

static struct pending *pending_list;
static bool cuda_waiting; /* CUDA records of a closed connection's process: poll it */

/* Reclaim @slot of @ar if its state word is still @state: a slot released and assigned again
 * since has another and is left alone. @pid, whose slot it was, is for the log. */
void tnd_reclaim_slot(struct tnd_arena *ar, int slot, uint64_t state, pid_t pid)
{
	uint64_t freed = 0;
	/* An arena whose lock a process keeps is left to the periodic sweep, which reclaims
	 * every dead process's slot once the lock is free. */
	if (!tnd_arena_intact(ar) || !tnd_arena_lockable(ar))
		return;
	int r = tnd_arena_locked(ar, tn__arena_reclaim_if(ar->a, slot, state, &freed));
	if (r >= 0 && slot >= 0 && slot < TN_ARENA_MAX_CLIENTS && ar->owners[slot].state == state) {
		ar->owners[slot].state = 0;
		tnd_ledger_owner(ar, slot);
	}
	if (r == 1) {
		tnd_d.reclaimed_slots++;
		/* A process that exits or detaches holding nothing is the normal case: info
		 * is for slots that held memory (a crash, an exit without freeing). */
		if (freed)
			tnd_info("arena %s: reclaimed slot %d of pid %d (%" PRIu64 " bytes freed)",
				 ar->name, slot, (int)pid, freed);
		else
			tnd_debug("arena %s: released slot %d of pid %d (it held nothing)",
				  ar->name, slot, (int)pid);
	} else if (r < 0) {
		tnd_warn("arena %s: reclaiming slot %d: %s", ar->name, slot, tn_last_error());
	}
}

/* Check the pending slots of closed connections: reclaim those whose process is gone. A
 * process still alive after the deadline closed its connection but lives on; its slot is
 * left to the periodic sweep, which reclaims it when it dies. */
void tnd_reclaim_check(void)
{
	cuda_waiting = tnd_cuda_sweep();
	uint64_t now = tnd_now_ns();
	for (struct pending **pp = &pending_list; *pp;) {
		struct pending *p = *pp;
		uint64_t st = tn__proc_start_time(p->pid);
		bool dead = st == 0 || (st != UINT64_MAX && st != p->start_time);
		if (dead)
			tnd_reclaim_slot(p->arena, p->slot, p->state, p->pid);
		if (dead || now > p->deadline_ns) {
			*pp = p->next;
			free(p);
		} else {
			pp = &p->next;
		}
	}
}

/* Hand the slots of a closing connection to the pending list, to be reclaimed once its
 * process is gone. */
void tnd_reclaim_later(const struct tnd_client *c)
{
	uint64_t deadline = tnd_now_ns() + 5000000000u;
	for (size_t i = 0; i < c->nslots; i++) {
		struct pending *p = malloc(sizeof(*p));
		if (!p)
			continue; /* the periodic sweep still reclaims it */
		*p = (struct pending){ pending_list, c->slots[i].arena, c->slots[i].slot,
				       c->slots[i].state, c->pid, c->start_time, deadline };
		pending_list = p;
	}
}

/* Whether slots or CUDA records wait for a process to go (then the loop polls every 10 ms). */
bool tnd_reclaim_waiting(void)
{
	return pending_list || cuda_waiting;
}

/* The slots of dead processes in @ar; returns how many were reclaimed, or a TN_E* code. A
 * slot the daemon assigned is judged by the daemon's record of its process (ar->owners):
 * a grantee that forges the pid or start time of another client's record in the file cannot
 * have that live client's slot, and its blocks, reclaimed. Other slots (attached without the
 * daemon) are judged by the file's record, the only one there is. */
static int sweep_arena(struct tnd_arena *ar)
{
	tn_arena_client cl[TN_ARENA_MAX_CLIENTS];
	int n = tn_arena_clients(ar->a, cl, TN_ARENA_MAX_CLIENTS), done = 0;
	if (n < 0)
		return n;
	for (int i = 0; i < n && i < TN_ARENA_MAX_CLIENTS; i++) {
		int slot = cl[i].slot, r;
		if (slot < 0 || slot >= TN_ARENA_MAX_CLIENTS)
			continue;
		struct tnd_slot_owner *o = &ar->owners[slot];
		if (o->state) {
			uint64_t st = tn__proc_start_time(o->pid);
			if (st != 0 && (st == UINT64_MAX || st == o->start_time))
				continue; /* its process lives (or cannot be told): keep it */
			r = tn__arena_reclaim_if(ar->a, slot, o->state, NULL);
			if (r >= 0) {
				o->state = 0; /* reclaimed, or released and reassigned since */
				tnd_ledger_owner(ar, slot);
			}
		} else {
			if (cl[i].alive)
				continue;
			r = tn_arena_reclaim(ar->a, slot);
			if (r == TN_EINVAL || (r == TN_EBUSY && strstr(tn_last_error(), "alive")))
				continue; /* the daemon's own slot; alive after all */
			r = r >= 0;
		}
		if (r < 0)
			return r;
		done += r;
	}
	return done;
}

uint64_t tnd_fsck_owners(struct tnd_arena *ar, bool repair, tn_arena_fsck_report *rep)
{
	tn_arena_client cl[TN_ARENA_MAX_CLIENTS];
	int n = tn_arena_clients(ar->a, cl, TN_ARENA_MAX_CLIENTS);
	uint64_t left = 0;
	for (int i = 0; i < n && i < TN_ARENA_MAX_CLIENTS; i++) {
		int slot = cl[i].slot;
		if (slot < 0 || slot >= TN_ARENA_MAX_CLIENTS || !ar->owners[slot].state)
			continue;
		const struct tnd_slot_owner *o = &ar->owners[slot];
		if (cl[i].pid == o->pid && cl[i].start_time == o->start_time)
			continue;
		/* The daemon's record, from the socket's credentials, is the truth: the repair
		 * writes it back, so that nothing judges the slot from the forgery. */
		bool mended = repair && tnd_arena_locked(ar, tn__arena_slot_restore(
								     ar->a, slot, o->state, o->pid,
								     o->start_time)) == 1;
		if (!rep->problems++)
			snprintf(rep->first_problem, sizeof(rep->first_problem),
				 "slot %d records pid %d started at %" PRIu64 "; tensord assigned "
				 "it to pid %d started at %" PRIu64 " (written by another process; "
				 "%s)",
				 slot, (int)cl[i].pid, cl[i].start_time, (int)o->pid,
				 o->start_time, mended ? "tensord's record written back" : "not repaired");
		if (mended)
			rep->repaired++;
		else
			left++;
	}
	return left;
}

/* Every reclaim_interval_ms: the slots of dead processes in every arena, whoever attached
 * them (a connection's pending slots whose process outlived the deadline end up here). */
void tnd_reclaim_sweep(void)
{
	for (struct tnd_arena *ar = tnd_d.arenas; ar; ar = ar->next) {
		tn_arena_stats before, after;
		if (!tnd_arena_intact(ar) || !tnd_arena_lockable(ar) ||
		    tnd_arena_locked(ar, tn_arena_stat(ar->a, &before)))
			continue;
		int n = tnd_arena_locked(ar, sweep_arena(ar));
		tnd_ledger_sweep(ar);
		if (n > 0 && !tnd_arena_locked(ar, tn_arena_stat(ar->a, &after))) {
			tnd_d.reclaimed_slots += (uint64_t)n;
			uint64_t freed = after.free_bytes - before.free_bytes;
			tnd_log(freed ? TND_LOG_INFO : TND_LOG_DEBUG,
				"arena %s: reclaimed %d slots of dead processes (%" PRIu64
				" bytes freed)", ar->name, n, freed);
		}
	}
}

void tnd_evict_check(void)
{
	for (struct tnd_arena *ar = tnd_d.arenas; ar; ar = ar->next) {
		if (!tnd_arena_intact(ar) || !tnd_arena_lockable(ar))
			continue;
		/* An arena in spill mode is the spill jobs' (spill.c). */
		struct tn__spill_state st;
		if (tnd_arena_locked(ar, tn__arena_spill_state(ar->a, &st)) == 0 && st.spill) {
			tnd_spill_consider(ar, false);
			continue;
		}
		uint64_t used, high, low;
		if (tnd_arena_locked(ar, tn__arena_water(ar->a, &used, &high, &low)) || used <= high)
			continue;
		tn_arena_evict_report rep;
		if (tnd_arena_locked(ar, tn_arena_evict(ar->a, low, &rep)) != 0) {
			tnd_warn("arena %s: eviction: %s", ar->name, tn_last_error());
			continue;
		}
		tnd_d.evictions += rep.evicted;
		tnd_d.evicted_bytes += rep.evicted_bytes;
		tnd_log(rep.evicted ? TND_LOG_INFO : TND_LOG_DEBUG,
			"arena %s: %" PRIu64 " bytes used, above the high watermark (%" PRIu64
			"): evicted %" PRIu64 " tensors (%" PRIu64 " bytes), %" PRIu64 " bytes used "
			"(low watermark %" PRIu64 ")", ar->name, used, high, rep.evicted,
			rep.evicted_bytes, rep.used_bytes, low);
	}
}

/* Forget every connection's record of an arena (it is being destroyed). */
void tnd_forget_arena(struct tnd_arena *ar)
{
	for (struct tnd_client *c = tnd_d.clients; c; c = c->next)
		for (size_t i = 0; i < c->nslots;)
			if (c->slots[i].arena == ar)
				tnd_slot_drop(c, &c->slots[i]);
			else
				i++;
	for (struct pending **pp = &pending_list; *pp;) {
		if ((*pp)->arena == ar) {
			struct pending *p = *pp;
			*pp = p->next;
			free(p);
		} else {
			pp = &(*pp)->next;
		}
	}
}
