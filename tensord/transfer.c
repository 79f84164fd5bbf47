// SPDX-License-Identifier: MIT
/*
 * LOAD and SAVE on worker threads (daemon.h). Each runs on a detached thread of its own, one
 * per connection at a time, while loadsave.c moves the data between the file the client passed
 * and the arena. The thread reports progress and its end on a list under a mutex and wakes the
 * loop through the eventfd, so that replies are queued by the loop's thread only. A transfer
 * keeps its arena from being destroyed and its connection's record from being freed until the
 * loop has seen it end.
 */
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "loadsave.h"

/* Events from worker threads. */
struct event {
	struct event *next;
	struct tnd_client *client; /* may be closing, never freed while a transfer runs */
	uint32_t seq;
	unsigned op;
	bool done;
	int status;
	char message[TND_MESSAGE_SIZE];
	struct tnd_progress progress;
	struct tnd_transfer_reply reply;
};

/* Workers push their events on this list, newest first, under the lock; the loop takes the
 * whole list at once. */
static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;
static struct event *events;
static _Atomic int workers; /* started and not yet seen to end by the loop */

struct job {
	struct tnd_client *client;
	struct tnd_arena *arena;
	unsigned op;
	uint32_t seq;
	int fd;
	struct tnd_transfer req;
	uint64_t last_progress;
	char journal[PATH_MAX]; /* LOAD: its journal (tnd_load_txn) */
	char arena_name[TND_NAME_SIZE];
	uint64_t load_id;
};

static void post_event(struct event *ev)
{
	pthread_mutex_lock(&event_lock);
	ev->next = events;
	events = ev;
	pthread_mutex_unlock(&event_lock);
	uint64_t one = 1;
	ssize_t n = write(tnd_d.event_fd, &one, sizeof(one));
	(void)n;
}

static void job_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct job *j = ctx;
	struct event *ev = calloc(1, sizeof(*ev));
	if (!ev)
		return; /* a progress report is not worth failing for */
	ev->client = j->client;
	ev->seq = j->seq;
	ev->op = j->op;
	ev->progress.done = done;
	ev->progress.total = total;
	post_event(ev);
}

static void *job_run(void *arg)
{
	struct job *j = arg;
	struct tnd_xfer_result res = { 0 };
	struct tnd_load_journal jl = { j->journal, j->arena_name, j->load_id };
	int r = j->op == TND_OP_LOAD
			? tnd_load_txn(j->arena->a, j->fd, j->req.format, j->req.prefix,
				       j->req.flags, job_progress, j, &j->client->cancel, &jl, &res)
			: tnd_save(j->arena->a, j->fd, j->req.format, j->req.prefix, j->req.flags,
				   job_progress, j, &j->client->cancel, &res);
	close(j->fd);
	/* The final event is preallocated by the loop (struct event follows the job). */
	struct event *ev = (struct event *)(j + 1);
	ev->client = j->client;
	ev->seq = j->seq;
	ev->op = j->op;
	ev->done = true;
	ev->status = r;
	if (r)
		snprintf(ev->message, sizeof(ev->message), "%s", tn_last_error());
	ev->reply.tensors = res.tensors;
	ev->reply.bytes = res.bytes;
	ev->reply.file_bytes = res.file_bytes;
	ev->reply.elapsed_ns = res.elapsed_ns;
	tn_arena_trim(j->arena->a); /* this thread's cache goes back before it exits */
	post_event(ev);
	return NULL;
}

/* Start a LOAD or SAVE of @m for @c on a worker thread, which owns @fd (the client's file)
 * from then on; a refusal closes @fd and answers @h. */
int tnd_transfer_start(struct tnd_client *c, const struct tnd_hdr *h,
		       const struct tnd_transfer *m, int fd)
{
	struct tnd_arena *ar =
		tnd_arena_for(c, h, m->name, h->op == TND_OP_LOAD ? TND_ACC_WRITE : TND_ACC_READ);
	if (!ar) {
		tnd_close_passed(fd);
		return 0;
	}
	if (tnd_d.stop) {
		tnd_close_passed(fd);
		return tnd_reply_error(c, h, TN_EIO, "tensord is stopping");
	}
	if (c->transfer) {
		tnd_close_passed(fd);
		return tnd_reply_error(c, h, TN_EBUSY, "a load or save is running on this "
				       "connection");
	}
	struct job *j = calloc(1, sizeof(*j) + sizeof(struct event));
	if (!j) {
		tnd_close_passed(fd);
		return tnd_reply_error(c, h, TN_ENOMEM, "out of memory");
	}
	j->client = c;
	j->arena = ar;
	j->op = h->op;
	j->seq = h->seq;
	j->fd = fd;
	j->req = *m;
	if (h->op == TND_OP_LOAD) {
		/* Unique across restarts too: the instance is drawn at each start. */
		static uint64_t loads;
		j->load_id = tnd_d.instance + ++loads;
		memcpy(j->arena_name, ar->name, sizeof(j->arena_name));
		snprintf(j->journal, sizeof(j->journal), "%.3800s/load-%016" PRIx64 ".journal",
			 tnd_d.cfg.arena_dir, j->load_id);
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	c->transfer = true;
	ar->transfers++;
	atomic_fetch_add(&workers, 1);
	int e = pthread_create(&t, &attr, job_run, j);
	pthread_attr_destroy(&attr);
	if (e) {
		c->transfer = false;
		ar->transfers--;
		atomic_fetch_sub(&workers, 1);
		tnd_close_passed(fd);
		free(j);
		return tnd_reply_error(c, h, TN_ENOMEM, "cannot start a worker: %s", strerror(e));
	}
	tnd_info("%s of arena %s for pid %d started", tnd_op_name(h->op), ar->name, (int)c->pid);
	return 0;
}

void tnd_transfer_events(void)
{
	pthread_mutex_lock(&event_lock);
	struct event *list = events;
	events = NULL;
	pthread_mutex_unlock(&event_lock);
	/* The list is newest first: reverse it so progress goes out in order. */
	struct event *rev = NULL;
	while (list) {
		struct event *n = list->next;
		list->next = rev;
		rev = list;
		list = n;
	}
	for (struct event *ev = rev, *next; ev; ev = next) {
		next = ev->next;
		struct tnd_client *c = ev->client;
		if (!ev->done) {
			tnd_queue_msg(c, ev->op, ev->seq, 0, TND_F_PROGRESS, &ev->progress,
				      sizeof(ev->progress), -1);
			free(ev);
			continue;
		}
		struct job *j = (struct job *)ev - 1;
		j->arena->transfers--;
		atomic_fetch_sub(&workers, 1);
		c->transfer = false;
		if (!ev->status && !tnd_arena_intact(j->arena)) {
			/* The file shrank under the transfer: what was read past its new end
			 * were zeros the guard put there. */
			ev->status = TN_EIO;
			snprintf(ev->message, sizeof(ev->message), "arena \"%s\" is damaged: its "
				 "file shrank during the %s; what it %s is not to be trusted",
				 j->arena->name, ev->op == TND_OP_LOAD ? "load" : "save",
				 ev->op == TND_OP_LOAD ? "loaded" : "saved");
		}
		if (ev->status == TN_EIO && tnd_d.stop && atomic_load(&c->cancel) && !c->closing)
			snprintf(ev->message, sizeof(ev->message), "%s of arena \"%s\" cancelled: "
				 "tensord is stopping; nothing of it was kept",
				 ev->op == TND_OP_LOAD ? "the load" : "the save", j->arena->name);
		if (ev->status) {
			struct tnd_error e;
			memcpy(e.message, ev->message, sizeof(e.message));
			tnd_info("%s of arena %s for pid %d failed: %s", tnd_op_name(ev->op),
				 j->arena->name, (int)c->pid, ev->message);
			tnd_queue_msg(c, ev->op, ev->seq, ev->status, 0, &e, sizeof(e), -1);
		} else {
			if (ev->op == TND_OP_LOAD)
				tnd_ledger_sweep(j->arena); /* records what it sealed */
			tnd_info("%s of arena %s for pid %d: %" PRIu64 " tensors, %" PRIu64
				 " bytes in %.3f s", tnd_op_name(ev->op), j->arena->name,
				 (int)c->pid, ev->reply.tensors, ev->reply.bytes,
				 (double)ev->reply.elapsed_ns / 1e9);
			tnd_queue_msg(c, ev->op, ev->seq, 0, 0, &ev->reply, sizeof(ev->reply), -1);
		}
		free(j);
		tnd_client_maybe_free(c);
	}
}

bool tnd_transfers_running(void)
{
	return atomic_load(&workers) > 0;
}

/* Give the workers up to 3 s to see their cancel flags and end. */
void tnd_transfer_wait(void)
{
	for (int i = 0; i < 3000 && atomic_load(&workers) > 0; i++)
		usleep(1000);
}
