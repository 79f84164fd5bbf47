// SPDX-License-Identifier: MIT
/*
 * Direct reads from a peer daemon of the same host (peer_read.h): process_vm_readv(2) in
 * chunks, on a few reader threads, checked against the holder's pidfd.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "peer_read.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define CHUNK ((size_t)4 << 20)         /* what one reader thread copies at a time */
#define INLINE_MAX ((size_t)256 << 10)  /* reads done on the caller's thread */
#define MAX_READERS 4

struct tnd_read {
	struct tnd_read *next; /* in the queue while chunks are left to start */
	pid_t pid;
	int pidfd, wake_fd;
	char *dst;
	uint64_t src;
	size_t len;
	size_t next_off;   /* under R.lock: the first byte no chunk has taken */
	unsigned inflight; /* under R.lock: chunks being copied */
	bool queued;       /* under R.lock */
	int err;           /* under R.lock: the first chunk's errno that failed */
	_Atomic bool done; /* every chunk ended (or was dropped) */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	struct tnd_read *head, *tail;
	pthread_t threads[MAX_READERS];
	unsigned nthreads;
	bool stop;
} R = { .lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,
	.idle = PTHREAD_COND_INITIALIZER };

/* Copy @len bytes at @src of @pid to @dst; 0, or an errno. */
static int read_range(pid_t pid, char *dst, uint64_t src, size_t len)
{
	while (len) {
		struct iovec l = { .iov_base = dst, .iov_len = len };
		struct iovec r = { .iov_base = (void *)(uintptr_t)src, .iov_len = len };
		ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : EFAULT;
		dst += n;
		src += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

bool tnd_read_exited(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int r;
	while ((r = poll(&p, 1, 0)) < 0 && errno == EINTR)
		;
	return r != 0; /* readable: exited; an error or POLLNVAL: no process to trust */
}

int tnd_read_probe(pid_t pid, uint64_t addr, const void *expect, size_t n, char *err,
		   size_t nerr)
{
	if (pid <= 0 || n > 256) {
		snprintf(err, nerr, "no pid");
		return -1;
	}
	/* The pidfd first: if the token is then read there, the pidfd names the process that
	 * held it (a pid reused later is a different process, and the pidfd says the first
	 * one exited). */
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		snprintf(err, nerr, "pidfd_open(%d): %s", (int)pid, strerror(errno));
		return -1;
	}
	unsigned char got[256];
	int e = read_range(pid, (char *)got, addr, n);
	if (e) {
		snprintf(err, nerr, "process_vm_readv of pid %d: %s", (int)pid, strerror(e));
	} else if (memcmp(got, expect, n)) {
		snprintf(err, nerr, "pid %d does not hold this connection's token", (int)pid);
		e = EPERM;
	} else if (tnd_read_exited(pidfd)) {
		snprintf(err, nerr, "pid %d exited", (int)pid);
		e = ESRCH;
	}
	if (e) {
		close(pidfd);
		return -1;
	}
	return pidfd;
}

int tnd_read_now(pid_t pid, int pidfd, const struct iovec *local, const struct iovec *remote,
		 size_t n, char *err, size_t nerr)
{
	for (size_t i = 0; i < n;) {
		size_t k = n - i < 1024 ? n - i : 1024, want = 0;
		for (size_t m = 0; m < k; m++)
			want += local[i + m].iov_len;
		ssize_t got;
		while ((got = process_vm_readv(pid, local + i, k, remote + i, k, 0)) < 0 &&
		       errno == EINTR)
			;
		if (got < 0 || (size_t)got != want) {
			/* A short count: a range the holder does not map (EFAULT). */
			snprintf(err, nerr, "process_vm_readv of pid %d: %s", (int)pid,
				 strerror(got < 0 ? errno : EFAULT));
			return -1;
		}
		i += k;
	}
	if (tnd_read_exited(pidfd)) {
		snprintf(err, nerr, "pid %d exited during the copy", (int)pid);
		return -1;
	}
	return 0;
}

static void chunk_ended(struct tnd_read *r, int e)
{
	r->inflight--;
	if (e && !r->err)
		r->err = e;
	if (r->inflight || r->queued)
		return;
	atomic_store(&r->done, true);
	uint64_t one = 1;
	ssize_t w = write(r->wake_fd, &one, sizeof(one));
	(void)w;
	pthread_cond_broadcast(&R.idle);
}

/* Take @r off the queue (under R.lock): no chunk of it starts any more. */
static void dequeue(struct tnd_read *r)
{
	if (!r->queued)
		return;
	struct tnd_read **pp = &R.head, *prev = NULL;
	while (*pp != r) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = r->next;
	if (R.tail == r)
		R.tail = prev;
	r->queued = false;
	r->next_off = r->len;
}

static void *reader_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&R.lock);
	for (;;) {
		while (!R.stop && !R.head)
			pthread_cond_wait(&R.work, &R.lock);
		if (!R.head)
			break;
		struct tnd_read *r = R.head;
		size_t off = r->next_off, n = r->len - off < CHUNK ? r->len - off : CHUNK;
		r->next_off += n;
		r->inflight++;
		if (r->next_off == r->len)
			dequeue(r);
		else if (R.head->next) { /* round robin between reads */
			R.head = r->next;
			r->next = NULL;
			R.tail->next = r;
			R.tail = r;
		}
		pthread_mutex_unlock(&R.lock);
		int e = read_range(r->pid, r->dst + off, r->src + off, n);
		pthread_mutex_lock(&R.lock);
		if (e)
			dequeue(r); /* the rest is of no use */
		chunk_ended(r, e);
	}
	pthread_mutex_unlock(&R.lock);
	return NULL;
}

/* Start the reader threads (under R.lock); false when none could be. */
static bool start_readers(void)
{
	if (R.nthreads)
		return true;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned want = cpus < 2 ? 1 : cpus > MAX_READERS ? MAX_READERS : (unsigned)cpus;
	R.stop = false;
	while (R.nthreads < want &&
	       !pthread_create(&R.threads[R.nthreads], NULL, reader_main, NULL))
		R.nthreads++;
	return R.nthreads > 0;
}

int tnd_read_start(pid_t pid, int pidfd, void *dst, uint64_t src, size_t len, int wake_fd,
		   struct tnd_read **out, char *err, size_t nerr)
{
	struct tnd_read *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, nerr, "out of memory");
		return -1;
	}
	r->pid = pid;
	r->pidfd = pidfd;
	r->wake_fd = wake_fd;
	r->dst = dst;
	r->src = src;
	r->len = len;
	if (len <= INLINE_MAX) {
		r->err = read_range(pid, dst, src, len);
		r->next_off = len;
		atomic_store(&r->done, true);
		*out = r;
		return 0;
	}
	pthread_mutex_lock(&R.lock);
	if (!start_readers()) {
		pthread_mutex_unlock(&R.lock);
		free(r);
		snprintf(err, nerr, "no reader thread: %s", strerror(errno));
		return -1;
	}
	r->queued = true;
	if (R.tail)
		R.tail->next = r;
	else
		R.head = r;
	R.tail = r;
	pthread_cond_broadcast(&R.work);
	pthread_mutex_unlock(&R.lock);
	*out = r;
	return 0;
}

int tnd_read_test(struct tnd_read *r, char *err, size_t nerr)
{
	if (!atomic_load(&r->done))
		return 1;
	pthread_mutex_lock(&R.lock);
	int e = r->err;
	pthread_mutex_unlock(&R.lock);
	if (e) {
		snprintf(err, nerr, "process_vm_readv of pid %d: %s", (int)r->pid, strerror(e));
		return -1;
	}
	if (tnd_read_exited(r->pidfd)) {
		snprintf(err, nerr, "pid %d exited during the copy", (int)r->pid);
		return -1;
	}
	return 0;
}

void tnd_read_free(struct tnd_read *r)
{
	if (!r)
		return;
	if (!atomic_load(&r->done)) {
		pthread_mutex_lock(&R.lock);
		dequeue(r);
		while (r->inflight)
			pthread_cond_wait(&R.idle, &R.lock);
		pthread_mutex_unlock(&R.lock);
	}
	free(r);
}

void tnd_read_shutdown(void)
{
	pthread_mutex_lock(&R.lock);
	R.stop = true;
	pthread_cond_broadcast(&R.work);
	unsigned n = R.nthreads;
	R.nthreads = 0;
	pthread_mutex_unlock(&R.lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(R.threads[i], NULL);
}
