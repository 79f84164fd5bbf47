// SPDX-License-Identifier: MIT
/*
 * tnd_load and tnd_save (loadsave.h): the data movement of tensord's LOAD and SAVE requests.
 *
 * One engine moves the bytes for both: a private io_uring with up to XFER_OPS reads or writes
 * in flight, each at most TND_XFER_CHUNK bytes, and at most TND_XFER_DEPTH staging buffers.
 * Loading walks the file's data section in windows of TND_XFER_CHUNK bytes aligned to
 * XFER_DIO_ALIGN. A window whose pages are in the page cache (mincore on a mapping of the
 * file, a few pages per window) is read with buffered reads straight into the tensors' blocks,
 * one read per tensor piece, each flagged IOSQE_ASYNC on a machine with more than one CPU: a
 * read of cached pages is a copy by the kernel, and io_uring would otherwise make every copy
 * inline in this thread, one after the other, where io-wq's workers make them on every CPU at
 * once. (The copy runs a third slower than for aligned chunks because a tensor's offset in the
 * file and its 64-byte aligned block differ modulo 32 bytes; nothing on our side changes that.) Any other window is read with one O_DIRECT read into a registered staging buffer and
 * copied into the tensors it covers: the copy runs while the next reads are in flight, and
 * O_DIRECT is what reaches the device's speed without leaving a second copy of the file in
 * the page cache. Saving writes contiguous tensors straight from the arena and gathers the
 * others into staging buffers, in C order.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include "../shm/shm.h"
#include "internal.h"
#include "formats.h"
#include "loadsave.h"

#define XFER_OPS 32            /* requests in flight (and the ring's size) */
#define XFER_DIO_ALIGN 4096u   /* O_DIRECT offsets, lengths and buffers are aligned to this */
#define XFER_PAGE 4096u        /* mincore's granule */
#define XFER_HEAD 4096u        /* bytes read first to tell the format and find the header */

static_assert(TND_XFER_DEPTH <= 32, "staging slots are a 32-bit mask");
static_assert(TND_XFER_CHUNK % XFER_DIO_ALIGN == 0, "windows are aligned");

/* OP_READ: buffered, into a tensor; OP_READ_STAGE: O_DIRECT into a staging buffer;
 * OP_READ_DIRECT: O_DIRECT straight into a tensor (a window inside one tensor whose bytes lie
 * page-aligned in memory and in the file); OP_WRITE. */
enum op_kind { OP_READ, OP_READ_STAGE, OP_READ_DIRECT, OP_WRITE };

struct op {
	uint8_t kind;
	bool busy;
	int slot;           /* staging slot, or -1 */
	uint64_t off;       /* file offset of buf[0] */
	unsigned char *buf;
	size_t len;         /* bytes to move */
	size_t moved;       /* bytes moved so far */
	size_t need;        /* OP_READ_STAGE: bytes of the window wanted (the rest lies past the
			     * data) */
	uint64_t count;     /* data bytes this op accounts for, for progress */
};

/* A tensor of a load: its bytes in the file and the block they go to. */
struct load_item {
	uint64_t off, nbytes;
	unsigned char *dest;
};

struct xfer {
	const char *fn;
	struct io_uring ring;
	bool ring_ok;
	int fd;  /* the caller's */
	int dfd; /* the same file opened with O_DIRECT, or -1 */
	struct op ops[XFER_OPS];
	unsigned inflight, queued;
	unsigned char *stage; /* TND_XFER_DEPTH slots of TND_XFER_CHUNK bytes */
	uint32_t stage_used;
	bool stage_fixed; /* registered with the ring */
	tnd_progress_fn progress;
	void *ctx;
	const _Atomic bool *cancel;
	uint64_t done, total, reported;
	int err; /* the first failure; nothing is submitted after it */
	bool async_reads; /* buffered reads go to io-wq's workers (more than one CPU) */
	/* load: the tensors in file order and the data section, for staged windows */
	struct load_item *items;
	size_t nitems;
	uint64_t lo, hi;
};

_Atomic uint64_t tnd_direct_reads;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int xfer_init(struct xfer *x, const char *fn, int fd, tnd_progress_fn progress, void *ctx,
		     const _Atomic bool *cancel)
{
	memset(x, 0, sizeof(*x));
	x->fn = fn;
	x->fd = fd;
	x->dfd = -1;
	x->progress = progress;
	x->ctx = ctx;
	x->cancel = cancel;
	for (int i = 0; i < XFER_OPS; i++)
		x->ops[i].slot = -1;
	int r = io_uring_queue_init(XFER_OPS, &x->ring, 0);
	if (r < 0)
		return tn__error(r == -ENOMEM ? TN_ENOMEM : TN_EIO, "%s: io_uring_queue_init: %s",
				 fn, strerror(-r));
	x->ring_ok = true;
	x->async_reads = sysconf(_SC_NPROCESSORS_ONLN) > 1;
	return 0;
}

static void xfer_fini(struct xfer *x)
{
	if (x->ring_ok)
		io_uring_queue_exit(&x->ring);
	if (x->stage)
		munmap(x->stage, (size_t)TND_XFER_DEPTH * TND_XFER_CHUNK);
	if (x->dfd >= 0)
		close(x->dfd);
}

static bool cancelled(struct xfer *x)
{
	/* Relaxed is enough: the flag carries no data, and a late look only costs a chunk. */
	if (x->err == 0 && x->cancel && atomic_load_explicit(x->cancel, memory_order_relaxed))
		x->err = tn__error(TN_EIO, "%s: cancelled", x->fn);
	return x->err != 0;
}

static void account(struct xfer *x, uint64_t bytes)
{
	x->done += bytes;
	if (x->progress && x->done - x->reported >= TND_XFER_PROGRESS_STEP && x->done < x->total) {
		x->reported = x->done;
		x->progress(x->ctx, x->done, x->total);
	}
}

/* The staging buffers, mapped and registered on first use (a load of a cached file needs
 * none). Registering pins them once rather than once per read. */
static int stage_setup(struct xfer *x)
{
	size_t size = (size_t)TND_XFER_DEPTH * TND_XFER_CHUNK;
	if (x->stage)
		return 0;
	if (tn__fault_fires())
		return tn__error(TN_ENOMEM, "%s: out of memory for %zu bytes of staging buffers",
				 x->fn, size);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return tn__error(TN_ENOMEM, "%s: out of memory for %zu bytes of staging buffers",
				 x->fn, size);
	x->stage = p;
	struct iovec iov[TND_XFER_DEPTH];
	for (int i = 0; i < TND_XFER_DEPTH; i++)
		iov[i] = (struct iovec){ x->stage + (size_t)i * TND_XFER_CHUNK, TND_XFER_CHUNK };
	x->stage_fixed = io_uring_register_buffers(&x->ring, iov, TND_XFER_DEPTH) == 0;
	return 0;
}

static struct op *op_new(struct xfer *x, enum op_kind kind)
{
	for (int i = 0; i < XFER_OPS; i++) {
		struct op *op = &x->ops[i];
		if (!op->busy) {
			*op = (struct op){ .kind = (uint8_t)kind, .busy = true, .slot = -1 };
			return op;
		}
	}
	return NULL;
}

static void op_free(struct xfer *x, struct op *op)
{
	if (op->slot >= 0)
		x->stage_used &= ~(1u << op->slot);
	op->busy = false;
	op->slot = -1;
}

/* Queue the rest of @op's transfer; submitted by the next xfer_flush or wait. */
static void op_queue(struct xfer *x, struct op *op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&x->ring);
	if (!sqe) {
		io_uring_submit(&x->ring);
		x->queued = 0;
		sqe = io_uring_get_sqe(&x->ring);
	}
	/* The ring has XFER_OPS entries and at most XFER_OPS ops exist. */
	unsigned char *buf = op->buf + op->moved;
	unsigned len = (unsigned)(op->len - op->moved);
	uint64_t off = op->off + op->moved;
	switch (op->kind) {
	case OP_READ:
		io_uring_prep_read(sqe, x->fd, buf, len, off);
		/* A read of cached pages would run inline, in this thread, one after the
		 * other; io-wq's workers run them on every CPU at once (see the top). */
		if (x->async_reads)
			sqe->flags |= IOSQE_ASYNC;
		break;
	case OP_READ_DIRECT:
		io_uring_prep_read(sqe, x->dfd, buf, len, off);
		atomic_fetch_add_explicit(&tnd_direct_reads, 1, memory_order_relaxed);
		break;
	case OP_READ_STAGE:
		if (x->stage_fixed)
			io_uring_prep_read_fixed(sqe, x->dfd, buf, len, off, op->slot);
		else
			io_uring_prep_read(sqe, x->dfd, buf, len, off);
		break;
	case OP_WRITE:
		io_uring_prep_write(sqe, x->fd, buf, len, off);
		break;
	}
	io_uring_sqe_set_data(sqe, op);
	x->inflight++;
	x->queued++;
}

static void xfer_flush(struct xfer *x)
{
	if (x->queued) {
		io_uring_submit(&x->ring);
		x->queued = 0;
	}
}

/* The first tensor whose bytes end after @off (the items are sorted by offset and do not
 * overlap, so their ends never decrease). */
static size_t item_search(const struct xfer *x, uint64_t off)
{
	size_t lo = 0, hi = x->nitems;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->items[mid].off + x->items[mid].nbytes <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Copy a staged window's bytes into the tensors it covers. */
static void scatter(struct xfer *x, const struct op *op)
{
	uint64_t s = op->off > x->lo ? op->off : x->lo, e = op->off + op->need;
	for (size_t i = item_search(x, s); i < x->nitems && x->items[i].off < e; i++) {
		const struct load_item *it = &x->items[i];
		uint64_t a = it->off > s ? it->off : s;
		uint64_t b = it->off + it->nbytes < e ? it->off + it->nbytes : e;
		if (a < b)
			memcpy(it->dest + (a - it->off), op->buf + (a - op->off), b - a);
	}
}

/* Finish a staged read synchronously with buffered reads: O_DIRECT stopped short of what is
 * needed somewhere other than at an aligned boundary, or failed. */
static int stage_fallback(struct xfer *x, struct op *op)
{
	while (op->moved < op->need) {
		ssize_t n = pread(x->fd, op->buf + op->moved, op->need - op->moved,
				  (off_t)(op->off + op->moved));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return tn__error(TN_EIO, "%s: read of %zu bytes at offset %" PRIu64 ": %s",
					 x->fn, op->need - op->moved, op->off + op->moved,
					 strerror(errno));
		if (n == 0)
			return tn__error(TN_EIO, "%s: the file ends at byte %" PRIu64 ", before its "
					 "data does (did it shrink?)", x->fn, op->off + op->moved);
		op->moved += (size_t)n;
	}
	return 0;
}

/* Handle one completion: resubmit what is left, or finish the op. */
static void complete(struct xfer *x, struct op *op, int res)
{
	bool direct = op->kind == OP_READ_STAGE || op->kind == OP_READ_DIRECT;
	size_t want = op->kind == OP_READ_STAGE ? op->need : op->len;

	x->inflight--; /* op_queue counts it again when it goes back */
	if (x->err) {
		op_free(x, op);
		return;
	}
	if (res == -EAGAIN || res == -EINTR) {
		op_queue(x, op);
		return;
	}
	if (res > 0)
		op->moved += (size_t)res;
	if (op->moved < want && direct) {
		/* O_DIRECT ends short at the end of the file, and may fail on odd file systems:
		 * what is still wanted is read the plain way, here. */
		if (res < 0) {
			close(x->dfd);
			x->dfd = -1;
		}
		if (res > 0 && op->moved % XFER_DIO_ALIGN == 0 && x->dfd >= 0) {
			op_queue(x, op);
			return;
		}
		int r = stage_fallback(x, op);
		if (r)
			x->err = r;
	} else if (res < 0) {
		int code = op->kind == OP_WRITE && (res == -ENOSPC || res == -EDQUOT) ? TN_ENOSPC
										       : TN_EIO;
		x->err = tn__error(code, "%s: %s of %zu bytes at offset %" PRIu64 ": %s", x->fn,
				   op->kind == OP_WRITE ? "write" : "read", op->len - op->moved,
				   op->off + op->moved, strerror(-res));
	} else if (res == 0 && op->moved < want) {
		x->err = op->kind == OP_WRITE
				 ? tn__error(TN_EIO, "%s: a write at offset %" PRIu64 " wrote nothing",
					     x->fn, op->off + op->moved)
				 : tn__error(TN_EIO, "%s: the file ends at byte %" PRIu64 ", before its "
					     "data does (did it shrink?)", x->fn,
					     op->off + op->moved);
	} else if (op->moved < want) {
		op_queue(x, op);
		return;
	}
	if (!x->err) {
		if (op->kind == OP_READ_STAGE)
			scatter(x, op);
		account(x, op->count);
	}
	op_free(x, op);
}

/* Submit what is queued and handle completions: at least one when @wait (and something is in
 * flight), else those already there. */
static void xfer_reap(struct xfer *x, bool wait)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	if (wait && x->inflight) {
		int r;
		do
			r = io_uring_submit_and_wait(&x->ring, 1);
		while (r == -EINTR);
		x->queued = 0;
		if (r < 0 && !x->err)
			x->err = tn__error(TN_EIO, "%s: io_uring_submit_and_wait: %s", x->fn,
					   strerror(-r));
	} else {
		xfer_flush(x);
	}
	io_uring_for_each_cqe(&x->ring, head, cqe)
	{
		struct op *op = io_uring_cqe_get_data(cqe);
		n++;
		complete(x, op, cqe->res);
	}
	io_uring_cq_advance(&x->ring, n);
}

/* Wait until nothing is in flight: buffers are not freed under the kernel's feet. */
static void xfer_drain(struct xfer *x)
{
	while (x->inflight) {
		unsigned before = x->inflight;
		xfer_reap(x, true);
		if (x->inflight == before && x->err && x->ring_ok) {
			/* Submission itself fails: nothing queued reached the kernel, and what did
			 * completes; wait for it directly. */
			struct io_uring_cqe *cqe;
			if (io_uring_wait_cqe(&x->ring, &cqe) < 0)
				break;
			complete(x, io_uring_cqe_get_data(cqe), cqe->res);
			io_uring_cqe_seen(&x->ring, cqe);
		}
	}
}

/* A free op (and, for @slot, a free staging slot), waiting for completions as needed. NULL
 * once x->err is set. */
static struct op *op_wait(struct xfer *x, enum op_kind kind, bool slot)
{
	for (;;) {
		if (cancelled(x))
			return NULL;
		if (!slot || x->stage_used != (1u << TND_XFER_DEPTH) - 1) {
			struct op *op = op_new(x, kind);
			if (op) {
				if (slot) {
					op->slot = __builtin_ctz(~x->stage_used);
					x->stage_used |= 1u << op->slot;
					op->buf = x->stage + (size_t)op->slot * TND_XFER_CHUNK;
				}
				return op;
			}
		}
		xfer_reap(x, true);
	}
}

static void report_end(struct xfer *x)
{
	if (x->progress)
		x->progress(x->ctx, x->total, x->total);
}

/* ---- files ------------------------------------------------------------------------------- */

/* A regular file open for reading (@write false) or writing; its size. */
static int check_file(const char *fn, int fd, bool write, uint64_t *ret_size)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fstat(fd, &st) < 0)
		return tn__error(TN_EINVAL, "%s: file descriptor %d: %s", fn, fd, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return tn__error(TN_EINVAL, "%s: file descriptor %d is not a regular file", fn, fd);
	if (fl & O_PATH)
		return tn__error(TN_EACCES, "%s: file descriptor %d is an O_PATH descriptor, not "
				 "open for %s", fn, fd, write ? "writing" : "reading");
	if ((fl & O_ACCMODE) == (write ? O_RDONLY : O_WRONLY))
		return tn__error(TN_EACCES, "%s: file descriptor %d is not open for %s", fn, fd,
				 write ? "writing" : "reading");
	*ret_size = (uint64_t)st.st_size;
	return 0;
}

static int pread_all(const char *fn, int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return tn__error(TN_EIO, "%s: read of %zu bytes at offset %" PRIu64 ": %s", fn,
					 len - got, off + got, strerror(errno));
		if (n == 0)
			return tn__error(TN_EIO, "%s: the file ends at byte %" PRIu64 " (did it "
					 "shrink?)", fn, off + got);
		got += (size_t)n;
	}
	return 0;
}

/* Which windows of the file are in the page cache, told one window at a time, just before it
 * is read: mincore() on a mapping of the file that is never touched (mapping it populates
 * nothing). mincore costs a page-cache lookup per page, which for a whole warm 1 GiB file is a
 * sixth of the time of the load itself, so a window is judged by RESIDENCY_SAMPLES pages
 * spread over it, first and last included. A wrong guess costs speed, never bytes: a window
 * taken for cached is read buffered all the same (the kernel reads what is missing), one taken
 * for uncached with O_DIRECT (which the kernel keeps coherent with the page cache).
 */
#define RESIDENCY_SAMPLES 5

struct residency {
	unsigned char *map; /* NULL: cannot be told, every window counts as cached */
	size_t len;
};

static void residency_init(struct residency *res, int fd, uint64_t size)
{
	res->map = NULL;
	res->len = 0;
	if (size == 0 || size > SIZE_MAX - XFER_PAGE)
		return;
	void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return;
	res->map = map;
	res->len = (size_t)size;
}

static void residency_fini(struct residency *res)
{
	if (res->map)
		munmap(res->map, res->len);
}

/* Whether the pages of [s, e) seem to be cached (see above). */
static bool window_cached(const struct residency *res, uint64_t s, uint64_t e)
{
	if (!res->map)
		return true;
	if (e > res->len)
		e = res->len;
	if (s >= e)
		return true;
	uint64_t p0 = s / XFER_PAGE, p1 = (e - 1) / XFER_PAGE;
	for (int k = 0; k < RESIDENCY_SAMPLES; k++) {
		uint64_t p = p0 + (p1 - p0) * (uint64_t)k / (RESIDENCY_SAMPLES - 1);
		unsigned char v = 0;
		if (mincore(res->map + p * XFER_PAGE, 1, &v) == 0 && !(v & 1))
			return false;
	}
	return true;
}

/* ---- load -------------------------------------------------------------------------------- */

/* Read the data section [x->lo, x->hi) of a file of @size bytes into the items. */
static void load_data(struct xfer *x, uint64_t size)
{
	struct residency res;
	size_t first = 0;
	bool tried_direct = false;

	residency_init(&res, x->fd, size);
	for (uint64_t w = x->lo / XFER_DIO_ALIGN * XFER_DIO_ALIGN; w < x->hi && !x->err;) {
		uint64_t we = w + TND_XFER_CHUNK < x->hi ? w + TND_XFER_CHUNK : x->hi;
		uint64_t s = w > x->lo ? w : x->lo;
		bool staged = !window_cached(&res, w, we);
		if (staged && !tried_direct) {
			/* The reopened descriptor reads the same file; the caller's access mode
			 * was checked, and O_RDONLY asks for nothing more. */
			char path[64];
			snprintf(path, sizeof(path), "/proc/self/fd/%d", x->fd);
			x->dfd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
			tried_direct = true;
		}
		staged = staged && x->dfd >= 0;
		/* A window inside one tensor, page-aligned in the file and in memory (a spill
		 * file and its large block are): read straight into it, no staging, no copy. */
		while (staged && first < x->nitems && x->items[first].off + x->items[first].nbytes <= s)
			first++;
		const struct load_item *in = staged && first < x->nitems ? &x->items[first] : NULL;
		if (in && in->off <= w && in->off + in->nbytes >= we && (we - w) % XFER_DIO_ALIGN == 0 &&
		    (uintptr_t)(in->dest + (w - in->off)) % XFER_DIO_ALIGN == 0) {
			struct op *op = op_wait(x, OP_READ_DIRECT, false);
			if (!op)
				break;
			op->off = w;
			op->buf = in->dest + (w - in->off);
			op->len = op->need = (size_t)(we - w);
			op->count = we - s;
			op_queue(x, op);
			w = we;
			continue;
		}
		if (staged && !x->stage) {
			int r = stage_setup(x);
			if (r) {
				x->err = r;
				break;
			}
		}
		if (staged) {
			struct op *op = op_wait(x, OP_READ_STAGE, true);
			if (!op)
				break;
			op->off = w;
			op->need = (size_t)(we - w);
			op->len = (op->need + XFER_DIO_ALIGN - 1) / XFER_DIO_ALIGN * XFER_DIO_ALIGN;
			op->count = we - s;
			op_queue(x, op);
			w = we;
			continue;
		}
		while (first < x->nitems && x->items[first].off + x->items[first].nbytes <= s)
			first++;
		for (size_t i = first; i < x->nitems && x->items[i].off < we && !x->err; i++) {
			struct load_item *it = &x->items[i];
			uint64_t a = it->off > s ? it->off : s;
			uint64_t b = it->off + it->nbytes < we ? it->off + it->nbytes : we;
			if (a >= b)
				continue;
			struct op *op = op_wait(x, OP_READ, false);
			if (!op)
				break;
			op->off = a;
			op->buf = it->dest + (a - it->off);
			op->len = (size_t)(b - a);
			op->count = b - a;
			op_queue(x, op);
		}
		xfer_flush(x);
		w = we;
	}
	xfer_drain(x);
	residency_fini(&res);
}

/* A safetensors file's "__metadata__" travels with the arena's names: a load publishes it as
 * the uint8 tensor PREFIX__metadata__ holding the JSON header of a file of no tensors,
 * {"__metadata__":{...}}, and a save of PREFIX writes it back (loadsave.h). No tensor of a
 * file can have that name: the format reserves it. */
#define META_NAME "__metadata__"

/* The JSON text that holds @st's metadata; NULL with 0 when it has none. */
static int meta_text(const struct tn__safetensors *st, void **ret_header, const char **ret_text,
		     size_t *ret_len)
{
	uint64_t fsz;
	size_t len;
	*ret_header = NULL;
	*ret_text = NULL;
	*ret_len = 0;
	if (!st->has_metadata || !st->nmeta)
		return 0;
	int r = tn__safetensors_write(NULL, 0, st->meta, st->nmeta, ret_header, &len, &fsz);
	if (r)
		return r;
	const char *t = (const char *)*ret_header + TN__SAFETENSORS_PREFIX;
	len -= TN__SAFETENSORS_PREFIX;
	while (len && t[len - 1] == ' ')
		len--;
	*ret_text = t;
	*ret_len = len;
	return 0;
}

struct load_name {
	char *name;          /* the full name */
	tn_tensor *tensor;   /* the new tensor */
	tn_tensor *old;      /* the tensor it replaces, held to publish again on failure */
	bool published;
	bool backed;         /* @old is published under its backup name */
};

/* ---- the load's transaction ---------------------------------------------------------------
 *
 * A load publishes all of the file's names or none, also when the daemon dies in the middle
 * (tnd_load_txn). Until the names are published the new tensors' blocks are held only by the
 * daemon's slot, whose reclamation at the next start frees them: a crash before publishing
 * leaves nothing. Before the first name is published, a journal (a file beside the arena's
 * record) lists every name with the block of its new tensor; each tensor being replaced is
 * published under a backup name (TND_LOAD_BACKUP_PREFIX, the load's id, its index), so that
 * its block outlives the daemon. Then the names are published, and removing the journal
 * commits the load; the backups go after. At the next start, a journal left over means the
 * load did not commit: every name that still names its new block is unpublished, or given its
 * backup back (tnd_load_rollback), and backup names with no journal are removed
 * (tnd_load_sweep_backups). Every step is idempotent, so a crash during recovery is
 * recovered the same way. The journal needs to outlive the daemon, not the machine (the arena
 * does not either), so it is renamed into place but not synced.
 */

#define JOURNAL_MAGIC "tensord load journal 1\n"

struct journal_head {
	char magic[24];
	char arena[TND_NAME_SIZE];
	uint64_t id;
	uint64_t count;
};

struct journal_entry {
	uint64_t block;    /* the new tensor's block */
	uint32_t flags;    /* JOURNAL_OLD: the name had a tensor, kept under its backup name */
	uint32_t name_len; /* the name's bytes follow, without a NUL */
};
#define JOURNAL_OLD 1u

static void backup_name(char *buf, size_t cap, uint64_t id, size_t i)
{
	snprintf(buf, cap, "%s%016" PRIx64 "/%zu", TND_LOAD_BACKUP_PREFIX, id, i);
}

/* Write the journal of a load of @n names (@blocks: their new blocks) atomically. */
static int journal_write(const char *fn, const struct tnd_load_journal *j,
			 const struct load_name *names, const uint64_t *blocks, size_t n)
{
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", j->path);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return tn__error(TN_EIO, "%s: cannot write the load's journal %s: %s", fn, tmp,
				 strerror(errno));
	struct journal_head h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, JOURNAL_MAGIC, sizeof(h.magic));
	snprintf(h.arena, sizeof(h.arena), "%s", j->arena);
	h.id = j->id;
	h.count = n;
	bool ok = fwrite(&h, sizeof(h), 1, f) == 1;
	for (size_t i = 0; ok && i < n; i++) {
		struct journal_entry e = { blocks[i], names[i].old ? JOURNAL_OLD : 0,
					   (uint32_t)strlen(names[i].name) };
		ok = fwrite(&e, sizeof(e), 1, f) == 1 && fwrite(names[i].name, 1, e.name_len, f) ==
								  e.name_len;
	}
	int e = ok && fflush(f) == 0 ? 0 : errno ? errno : EIO;
	if (fclose(f) && !e)
		e = errno;
	if (!e && rename(tmp, j->path))
		e = errno;
	if (e) {
		unlink(tmp);
		return tn__error(e == ENOSPC ? TN_ENOSPC : TN_EIO, "%s: cannot write the load's "
				 "journal %s: %s", fn, j->path, strerror(e));
	}
	return 0;
}

/* The block of the tensor @name names in @a into *ret (0: no such name); 0 or the lookup's
 * error. */
static int block_named(tn_arena *a, const char *name, uint64_t *ret)
{
	tn_tensor *t;
	int r = tn_arena_lookup(a, name, &t, NULL);
	*ret = 0;
	if (r == TN_ENOENT)
		return 0;
	if (r)
		return r;
	*ret = tn__arena_block_of(a, tn_storage_data(tn_tensor_storage(t)), NULL);
	tn_tensor_unref(t);
	return 0;
}

int tnd_load_journal_arena(const char *path, char ret_arena[TND_NAME_SIZE])
{
	struct journal_head h;
	FILE *f = fopen(path, "re");
	if (!f)
		return tn__error(TN_EIO, "%s: %s", path, strerror(errno));
	bool ok = fread(&h, sizeof(h), 1, f) == 1 && !memcmp(h.magic, JOURNAL_MAGIC, sizeof(h.magic)) &&
		  memchr(h.arena, 0, sizeof(h.arena));
	fclose(f);
	if (!ok)
		return tn__error(TN_EINVAL, "%s: not a load journal", path);
	memcpy(ret_arena, h.arena, TND_NAME_SIZE);
	return 0;
}

int tnd_load_rollback(tn_arena *a, const char *path, uint64_t *ret_names)
{
	static const char fn[] = "tnd_load_rollback";
	struct journal_head h;
	uint64_t undone = 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return tn__error(TN_EIO, "%s: %s: %s", fn, path, strerror(errno));
	if (fread(&h, sizeof(h), 1, f) != 1 || memcmp(h.magic, JOURNAL_MAGIC, sizeof(h.magic))) {
		fclose(f);
		return tn__error(TN_EINVAL, "%s: %s is not a load journal", fn, path);
	}
	/* A journal cut short was being written: nothing was published yet. A name that cannot
	 * be looked up or changed (the arena's lock held too long, damage) stops the rollback
	 * and keeps the journal for the next try: it is idempotent. */
	int err = 0;
	for (uint64_t i = 0; !err && i < h.count; i++) {
		struct journal_entry e;
		char name[TN_ARENA_NAME_MAX + 1], bname[96];
		if (fread(&e, sizeof(e), 1, f) != 1 || e.name_len == 0 ||
		    e.name_len > TN_ARENA_NAME_MAX || fread(name, 1, e.name_len, f) != e.name_len)
			break;
		name[e.name_len] = 0;
		backup_name(bname, sizeof(bname), h.id, (size_t)i);
		/* Only a name that still names the load's own block is the load's to undo. */
		uint64_t b;
		if ((err = block_named(a, name, &b)))
			break;
		if (e.block && b == e.block) {
			tn_tensor *old = NULL;
			int r = (e.flags & JOURNAL_OLD) ? tn_arena_lookup(a, bname, &old, NULL) : 0;
			if (r && r != TN_ENOENT) {
				err = r;
				break;
			}
			r = tn_arena_unpublish(a, name);
			if (!r && old)
				r = tn_arena_publish(a, name, old, 0, NULL);
			tn_tensor_unref(old);
			if (r && r != TN_ENOENT) {
				err = r;
				break;
			}
			undone++;
		}
		if ((e.flags & JOURNAL_OLD) && (err = tn_arena_unpublish(a, bname)) == TN_ENOENT)
			err = 0;
	}
	fclose(f);
	if (err)
		return tn__error(err, "%s: %s: the rollback stopped (%s); it is tried again at the "
				 "next start", fn, path, tn_last_error());
	if (unlink(path) && errno != ENOENT)
		return tn__error(TN_EIO, "%s: cannot remove %s: %s", fn, path, strerror(errno));
	if (ret_names)
		*ret_names = undone;
	return 0;
}

int tnd_load_sweep_backups(tn_arena *a)
{
	tn_arena_entry *e;
	size_t n;
	int r = tn_arena_list(a, TND_LOAD_BACKUP_PREFIX, &e, &n);
	if (r)
		return r;
	for (size_t i = 0; i < n; i++)
		tn_arena_unpublish(a, e[i].name);
	free(e);
	return (int)n;
}

int tnd_load(tn_arena *a, int fd, unsigned format, const char *prefix, unsigned flags,
	     tnd_progress_fn progress, void *ctx, const _Atomic bool *cancel,
	     struct tnd_xfer_result *ret)
{
	return tnd_load_txn(a, fd, format, prefix, flags, progress, ctx, cancel, NULL, ret);
}

int tnd_load_txn(tn_arena *a, int fd, unsigned format, const char *prefix, unsigned flags,
		 tnd_progress_fn progress, void *ctx, const _Atomic bool *cancel,
		 const struct tnd_load_journal *journal, struct tnd_xfer_result *ret)
{
	static const char fn[] = "tnd_load";
	bool journaled = false;
	char bname[96];
	uint64_t start = now_ns(), size;
	unsigned char head[XFER_HEAD];
	struct tn__safetensors *st = NULL;
	struct tn__fmt_tensor npy, *descs;
	struct load_name *names = NULL;
	struct xfer x;
	size_t n = 0, nn = 0, plen, mlen = 0;
	void *header = NULL, *mheader = NULL;
	const char *mtext = NULL;
	char *namebuf = NULL;
	int r;

	if (!tn_arena_allocator(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (format > TND_FORMAT_NPY)
		return tn__error(TN_EINVAL, "%s: unknown format %u", fn, format);
	if (flags & ~TND_XFER_ALL)
		return tn__error(TN_EINVAL, "%s: unknown flags 0x%x", fn, flags & ~TND_XFER_ALL);
	if (!prefix)
		prefix = "";
	plen = strlen(prefix);
	if (plen > TN_ARENA_NAME_MAX)
		return tn__error(TN_EINVAL, "%s: the prefix is %zu bytes long; a name has at most %d",
				 fn, plen, TN_ARENA_NAME_MAX);
	if ((r = check_file(fn, fd, false, &size)))
		return r;
	size_t hn = size < XFER_HEAD ? (size_t)size : XFER_HEAD;
	if ((r = pread_all(fn, fd, head, hn, 0)))
		return r;
	if (format == TND_FORMAT_AUTO)
		format = hn >= 6 && memcmp(head, "\x93NUMPY", 6) == 0 ? TND_FORMAT_NPY
								       : TND_FORMAT_SAFETENSORS;

	/* The header, then the descriptors. */
	if (format == TND_FORMAT_NPY) {
		size_t end;
		if (!plen)
			return tn__error(TN_EINVAL, "%s: a .npy file holds one unnamed array: the "
					 "prefix is its name and cannot be empty", fn);
		r = tn__npy_prefix(head, hn < TN__NPY_PREFIX_MAX ? hn : TN__NPY_PREFIX_MAX, size,
				   &end);
		if (r)
			return r;
		if (end > hn) {
			if (!(header = tn__malloc(end)))
				return tn__error(TN_ENOMEM, "%s: out of memory", fn);
			if ((r = pread_all(fn, fd, header, end, 0)))
				goto out;
		}
		if ((r = tn__npy_parse(header ? header : head, end, size, &npy)))
			goto out;
		descs = &npy;
		n = 1;
	} else {
		uint64_t hlen;
		r = tn__safetensors_prefix(head, hn < 8 ? hn : 8, size, &hlen);
		if (r)
			return r;
		if (!(header = tn__malloc(hlen ? (size_t)hlen : 1)))
			return tn__error(TN_ENOMEM, "%s: out of memory for a %" PRIu64 "-byte header",
					 fn, hlen);
		if (8 + hlen <= hn)
			memcpy(header, head + 8, (size_t)hlen);
		else if ((r = pread_all(fn, fd, header, (size_t)hlen, 8)))
			goto out;
		if ((r = tn__safetensors_parse(header, (size_t)hlen, size,
					       TN__SAFETENSORS_KEEP_METADATA, &st)) ||
		    (r = meta_text(st, &mheader, &mtext, &mlen)))
			goto out;
		descs = st->tensors;
		n = st->ntensors;
	}
	/* names[n], when the file has metadata, is PREFIX__metadata__. */
	nn = n + (mtext != NULL);
#define LOAD_NAME(i) ((i) < n ? (descs[i].name ? descs[i].name : "") : META_NAME)

	/* The names, every one checked before anything is allocated in the arena. */
	size_t total_len = 0;
	for (size_t i = 0; i < nn; i++) {
		size_t len = plen + strlen(LOAD_NAME(i));
		if (len > TN_ARENA_NAME_MAX) {
			r = tn__error(TN_EINVAL, "%s: the name '%s%s' is %zu bytes long; a name has "
				      "at most %d", fn, prefix, LOAD_NAME(i), len,
				      TN_ARENA_NAME_MAX);
			goto out;
		}
		total_len += len + 1;
	}
	names = tn__calloc(nn ? nn : 1, sizeof(*names));
	namebuf = tn__malloc(total_len ? total_len : 1);
	if (!names || !namebuf) {
		r = tn__error(TN_ENOMEM, "%s: out of memory for %zu names", fn, n);
		goto out;
	}
	char *p = namebuf;
	for (size_t i = 0; i < nn; i++) {
		tn_arena_entry e;
		names[i].name = p;
		p = stpcpy(stpcpy(p, prefix), LOAD_NAME(i)) + 1;
		r = tn_arena_info(a, names[i].name, &e);
		if (r == TN_ENOENT)
			continue;
		if (r)
			goto out;
		if (!(flags & TND_XFER_REPLACE) || (e.flags & TN_ARENA_ENTRY_SEALED)) {
			r = tn__error(TN_EEXIST, "%s: '%s' is already published in arena %s%s", fn,
				      names[i].name, tn_arena_path(a),
				      e.flags & TN_ARENA_ENTRY_SEALED
					      ? " and sealed"
					      : " (TN_TENSORD_REPLACE, tensorctl load --replace, "
						"replaces it)");
			goto out;
		}
		if ((r = tn_arena_lookup(a, names[i].name, &names[i].old, NULL)))
			goto out;
	}

	/* The blocks. */
	if ((r = xfer_init(&x, fn, fd, progress, ctx, cancel)))
		goto out;
	x.items = tn__malloc((n ? n : 1) * sizeof(*x.items));
	if (!x.items) {
		r = tn__error(TN_ENOMEM, "%s: out of memory for %zu tensors", fn, n);
		goto out_x;
	}
	for (size_t i = 0; i < n; i++) {
		const struct tn__fmt_tensor *d = &descs[i];
		int64_t strides[TN_ARENA_MAX_DIMS];
		tn_storage *s;
		r = tn_storage_new_with_allocator(TN_CPU, d->nbytes ? (size_t)d->nbytes : 1,
						  tn_arena_allocator(a), &s);
		if (r)
			goto out_x;
		tn__fmt_strides(d, strides);
		x.items[i] = (struct load_item){ d->offset, d->nbytes, tn_storage_data(s) };
		r = tn_tensor_new(s, 0, d->ndim, d->sizes, strides, d->dtype, &names[i].tensor);
		tn_storage_unref(s);
		if (r)
			goto out_x;
	}
	if (mtext) {
		tn_storage *s;
		int64_t len = (int64_t)mlen, one = 1;
		r = tn_storage_new_with_allocator(TN_CPU, mlen, tn_arena_allocator(a), &s);
		if (r)
			goto out_x;
		memcpy(tn_storage_data(s), mtext, mlen);
		r = tn_tensor_new(s, 0, 1, &len, &one, TN_UINT8, &names[n].tensor);
		tn_storage_unref(s);
		if (r)
			goto out_x;
	}
	x.nitems = n;
	if (format == TND_FORMAT_NPY) {
		x.lo = npy.offset;
		x.hi = npy.offset + npy.nbytes;
	} else {
		x.lo = st->data_offset;
		x.hi = st->data_offset + st->data_len;
	}
	x.total = x.hi - x.lo;

	/* The data. */
	load_data(&x, size);
	if ((r = x.err))
		goto out_x;
	for (size_t i = 0; i < n; i++)
		if (descs[i].byteswap)
			tn__fmt_byteswap(x.items[i].dest, descs[i].nbytes,
					 tn_dtype_size(descs[i].dtype));

	/* The names: the journal and the backups first (see the top of the transaction's
	 * section), then the names, and the journal's removal commits them. */
	if (journal) {
		uint64_t *blocks = tn__malloc((n ? n : 1) * sizeof(*blocks));
		if (!blocks) {
			r = tn__error(TN_ENOMEM, "%s: out of memory for %zu tensors", fn, n);
			goto out_x;
		}
		for (size_t i = 0; i < n; i++)
			blocks[i] = tn__arena_block_of(a, x.items[i].dest, NULL);
		r = journal_write(fn, journal, names, blocks, n);
		tn__free(blocks);
		if (r)
			goto out_x;
		journaled = true;
		for (size_t i = 0; i < n; i++) {
			if (!names[i].old)
				continue;
			backup_name(bname, sizeof(bname), journal->id, i);
			if ((r = tn_arena_publish(a, bname, names[i].old, 0, NULL)))
				goto out_x;
			names[i].backed = true;
		}
	}
	unsigned pflags = (flags & TND_XFER_SEAL ? TN_ARENA_SEAL : 0) |
			  (flags & TND_XFER_REPLACE ? TN_ARENA_REPLACE : 0) |
			  (flags & TND_XFER_EVICTABLE ? TN_ARENA_EVICTABLE : 0);
	for (size_t i = 0; i < nn; i++) {
		if ((r = tn_arena_publish(a, names[i].name, names[i].tensor, pflags, NULL)))
			goto out_x;
		names[i].published = true;
	}
	if (journaled) {
		if (unlink(journal->path)) {
			r = tn__error(TN_EIO, "%s: cannot remove the load's journal %s: %s", fn,
				      journal->path, strerror(errno));
			goto out_x;
		}
		journaled = false;
		for (size_t i = 0; i < n; i++)
			if (names[i].backed) {
				backup_name(bname, sizeof(bname), journal->id, i);
				tn_arena_unpublish(a, bname);
				names[i].backed = false;
			}
	}
	report_end(&x);
	if (ret)
		*ret = (struct tnd_xfer_result){ n, x.total, size, now_ns() - start };
out_x:
	if (r) {
		/* Undo: the names published go, the tensors they replaced come back. The
		 * message of the first failure is kept. */
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", tn_last_error());
		for (size_t i = 0; i < nn; i++) {
			if (!names[i].published)
				continue;
			/* Unpublished first: a sealed entry cannot be replaced. */
			tn_arena_unpublish(a, names[i].name);
			if (names[i].old)
				tn_arena_publish(a, names[i].name, names[i].old, 0, NULL);
		}
		for (size_t i = 0; i < n; i++)
			if (names[i].backed) {
				backup_name(bname, sizeof(bname), journal->id, i);
				tn_arena_unpublish(a, bname);
			}
		/* Undone: nothing is left for a recovery to roll back. */
		if (journaled)
			unlink(journal->path);
		tn__error(r, "%s", msg);
	}
	tn__free(x.items);
	xfer_fini(&x);
out:
	if (names)
		for (size_t i = 0; i < nn; i++) {
			tn_tensor_unref(names[i].tensor);
			tn_tensor_unref(names[i].old);
		}
#undef LOAD_NAME
	tn__free(names);
	tn__free(namebuf);
	tn__free(header);
	free(mheader);
	tn__safetensors_free(st);
	return r;
}

/* ---- save -------------------------------------------------------------------------------- */

/* Reads a strided tensor's elements in C order, a buffer at a time. */
struct gather {
	const unsigned char *base;
	int ndim;
	size_t itemsize;
	int64_t sizes[TN_ARENA_MAX_DIMS];
	int64_t bstrides[TN_ARENA_MAX_DIMS]; /* in bytes */
	int64_t idx[TN_ARENA_MAX_DIMS];
	bool end;
};

static void gather_init(struct gather *g, const tn_tensor *t)
{
	memset(g, 0, sizeof(*g));
	g->base = tn_tensor_data(t);
	g->itemsize = tn_tensor_itemsize(t);
	g->ndim = tn_tensor_ndim(t);
	for (int d = 0; d < g->ndim; d++) {
		g->sizes[d] = tn_tensor_sizes(t)[d];
		g->bstrides[d] = tn_tensor_strides(t)[d] * (int64_t)g->itemsize;
	}
	if (g->ndim == 0) { /* a scalar: one element */
		g->ndim = 1;
		g->sizes[0] = 1;
		g->bstrides[0] = (int64_t)g->itemsize;
	}
	g->end = tn_tensor_numel(t) == 0;
}

/* Fill up to @cap bytes (a multiple of the item size) of @out; returns the bytes written. */
static size_t gather_fill(struct gather *g, unsigned char *out, size_t cap)
{
	size_t n = 0, is = g->itemsize;
	int last = g->ndim - 1;

	while (!g->end && n < cap) {
		const unsigned char *src = g->base;
		for (int d = 0; d < g->ndim; d++)
			src += g->idx[d] * g->bstrides[d];
		int64_t m = g->sizes[last] - g->idx[last];
		if ((size_t)m > (cap - n) / is)
			m = (int64_t)((cap - n) / is);
		int64_t bs = g->bstrides[last];
		if (bs == (int64_t)is) {
			memcpy(out + n, src, (size_t)m * is);
		} else {
			unsigned char *o = out + n;
			switch (is) {
			case 1:
				for (int64_t i = 0; i < m; i++)
					o[i] = src[i * bs];
				break;
			case 2:
				for (int64_t i = 0; i < m; i++)
					memcpy(o + i * 2, src + i * bs, 2);
				break;
			case 4:
				for (int64_t i = 0; i < m; i++)
					memcpy(o + i * 4, src + i * bs, 4);
				break;
			default:
				for (int64_t i = 0; i < m; i++)
					memcpy(o + i * (int64_t)is, src + i * bs, is);
			}
		}
		n += (size_t)m * is;
		g->idx[last] += m;
		if (g->idx[last] < g->sizes[last])
			continue;
		g->idx[last] = 0;
		int d = last - 1;
		while (d >= 0 && ++g->idx[d] == g->sizes[d])
			g->idx[d--] = 0;
		if (d < 0)
			g->end = true;
	}
	return n;
}

/* Whether @t's elements lie densely in column-major order (and not also in row-major order,
 * which the caller checked first). */
static bool fortran_contiguous(const tn_tensor *t)
{
	int64_t expect = 1;
	int nd = tn_tensor_ndim(t);
	if (nd < 2)
		return false;
	for (int d = 0; d < nd; d++) {
		int64_t sz = tn_tensor_sizes(t)[d];
		if (sz != 1 && tn_tensor_strides(t)[d] != expect)
			return false;
		expect *= sz;
	}
	return true;
}

struct save_item {
	tn_tensor *tensor;
	struct tn__fmt_tensor desc;
	bool direct; /* its bytes are written straight from the arena */
};

static int cmp_save_offset(const void *pa, const void *pb)
{
	const struct save_item *a = *(struct save_item *const *)pa, *b = *(struct save_item *const *)pb;
	return (a->desc.offset > b->desc.offset) - (a->desc.offset < b->desc.offset);
}

/* Write the header and then every item's bytes at their offsets. */
static void save_data(struct xfer *x, const void *header, size_t header_len,
		      struct save_item **order, size_t n)
{
	struct op *op = op_wait(x, OP_WRITE, false);
	if (!op)
		goto out;
	op->buf = (unsigned char *)header;
	op->len = header_len;
	op_queue(x, op);
	for (size_t i = 0; i < n && !x->err; i++) {
		struct save_item *it = order[i];
		uint64_t off = it->desc.offset, left = it->desc.nbytes;
		struct gather g;
		if (it->direct) {
			const unsigned char *src = tn_tensor_data(it->tensor);
			while (left && (op = op_wait(x, OP_WRITE, false))) {
				size_t len = left < TND_XFER_CHUNK ? (size_t)left : TND_XFER_CHUNK;
				op->buf = (unsigned char *)src;
				op->off = off;
				op->len = op->count = len;
				op_queue(x, op);
				src += len;
				off += len;
				left -= len;
			}
			continue;
		}
		gather_init(&g, it->tensor);
		if (left && !x->stage && (x->err = stage_setup(x)))
			break;
		while (left && (op = op_wait(x, OP_WRITE, true))) {
			size_t is = tn_dtype_size(it->desc.dtype);
			size_t len = gather_fill(&g, op->buf, TND_XFER_CHUNK / is * is);
			op->off = off;
			op->len = op->count = len;
			op_queue(x, op);
			off += len;
			left -= len;
		}
	}
	xfer_flush(x);
out:
	xfer_drain(x);
}

/* The metadata a load kept as the tensor @name (META_NAME), parsed back. */
static int save_meta(tn_arena *a, const char *fn, const char *name, struct tn__safetensors **ret)
{
	tn_tensor *t;
	int r = tn_arena_lookup(a, name, &t, NULL);
	if (r)
		return r;
	size_t len = (size_t)tn_tensor_numel(t);
	if (tn_tensor_dtype(t) != TN_UINT8 || tn_tensor_ndim(t) != 1 ||
	    !tn_tensor_is_contiguous(t))
		r = tn__error(TN_EINVAL, "%s: '%s' is not the uint8 vector of a file's metadata",
			      fn, name);
	else
		r = tn__safetensors_parse(tn_tensor_data(t), len, TN__SAFETENSORS_PREFIX + len,
					  TN__SAFETENSORS_KEEP_METADATA, ret);
	tn_tensor_unref(t);
	if (!r && (*ret)->ntensors) {
		tn__safetensors_free(*ret);
		*ret = NULL;
		r = tn__error(TN_EINVAL, "%s: '%s' is not a file's metadata", fn, name);
	}
	return r;
}

int tnd_save(tn_arena *a, int fd, unsigned format, const char *prefix, unsigned flags,
	     tnd_progress_fn progress, void *ctx, const _Atomic bool *cancel,
	     struct tnd_xfer_result *ret)
{
	static const char fn[] = "tnd_save";
	uint64_t start = now_ns(), size, file_size = 0;
	tn_arena_entry *entries = NULL, one;
	struct save_item *items = NULL, **order = NULL;
	struct tn__fmt_tensor *descs = NULL;
	unsigned char npy_header[TN__NPY_HEADER_MAX];
	void *header = NULL;
	size_t n = 0, plen, header_len = 0;
	struct tn__safetensors *meta = NULL;
	struct xfer x;
	bool x_ok = false, exact = false;
	int r;

	if (!tn_arena_allocator(a))
		return tn__error(TN_EBADF, "%s: not an arena handle of this process", fn);
	if (format != TND_FORMAT_SAFETENSORS && format != TND_FORMAT_NPY)
		return tn__error(TN_EINVAL, "%s: format %u: saving needs TND_FORMAT_SAFETENSORS or "
				 "TND_FORMAT_NPY", fn, format);
	if (flags & ~TND_SAVE_ALIGN_PAGES)
		return tn__error(TN_EINVAL, "%s: flags 0x%x: saving takes TND_SAVE_ALIGN_PAGES only",
				 fn, flags);
	if (!prefix)
		prefix = "";
	plen = strlen(prefix);
	if ((r = check_file(fn, fd, true, &size)))
		return r;
	if (size)
		return tn__error(TN_EINVAL, "%s: the file is not empty (%" PRIu64 " bytes)", fn,
				 size);

	/* The tensors, held for the whole save. */
	if (format == TND_FORMAT_NPY) {
		if (!plen)
			return tn__error(TN_EINVAL, "%s: a .npy file holds one array: the prefix must "
					 "name it", fn);
		if ((r = tn_arena_info(a, prefix, &one)))
			return r;
		entries = &one;
		n = 1;
	} else if (plen && tn_arena_info(a, prefix, &one) == 0) {
		/* A prefix that is a tensor's whole name: that tensor alone, under its name. */
		entries = &one;
		n = 1;
		exact = true;
	} else {
		if ((r = tn_arena_list(a, prefix, &entries, &n)))
			return r;
		if (n == 0 && plen)
			return tn__error(TN_ENOENT, "%s: no tensor of arena %s has a name that starts "
					 "with '%s'", fn, tn_arena_path(a), prefix);
		/* PREFIX__metadata__, kept by a load, is the file's metadata, not a tensor. */
		for (size_t i = 0; i < n; i++) {
			if (strcmp(entries[i].name + plen, META_NAME))
				continue;
			if ((r = save_meta(a, fn, entries[i].name, &meta)))
				goto out;
			memmove(&entries[i], &entries[i + 1], (n - i - 1) * sizeof(*entries));
			n--;
			break;
		}
	}
	items = tn__calloc(n ? n : 1, sizeof(*items));
	order = tn__calloc(n ? n : 1, sizeof(*order));
	descs = tn__calloc(n ? n : 1, sizeof(*descs));
	if (!items || !order || !descs) {
		r = tn__error(TN_ENOMEM, "%s: out of memory for %zu tensors", fn, n);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct save_item *it = &items[i];
		const char *rel = entries[i].name + (format == TND_FORMAT_NPY || exact ? 0 : plen);
		if (format == TND_FORMAT_SAFETENSORS && !*rel) {
			r = tn__error(TN_EINVAL, "%s: the tensor '%s' would have an empty name in the "
				      "file: its name is the prefix itself", fn, entries[i].name);
			goto out;
		}
		if ((r = tn_arena_lookup(a, entries[i].name, &it->tensor, NULL)))
			goto out;
		it->desc.name = rel;
		it->desc.dtype = tn_tensor_dtype(it->tensor);
		it->desc.ndim = tn_tensor_ndim(it->tensor);
		memcpy(it->desc.sizes, tn_tensor_sizes(it->tensor),
		       (size_t)it->desc.ndim * sizeof(int64_t));
		it->direct = tn_tensor_is_contiguous(it->tensor);
		if (!it->direct && format == TND_FORMAT_NPY && fortran_contiguous(it->tensor))
			it->direct = it->desc.fortran_order = true;
		order[i] = it;
	}

	/* The header; the writers fill in the offsets. */
	if (format == TND_FORMAT_NPY) {
		if ((r = tn__npy_write(&items[0].desc, npy_header, sizeof(npy_header),
				       &header_len)))
			goto out;
		file_size = items[0].desc.offset + items[0].desc.nbytes;
	} else {
		for (size_t i = 0; i < n; i++)
			descs[i] = items[i].desc;
		if ((r = tn__safetensors_write_aligned(descs, n, meta ? meta->meta : NULL,
						       meta ? meta->nmeta : 0,
						       flags & TND_SAVE_ALIGN_PAGES ? XFER_DIO_ALIGN
										    : 8,
						       &header, &header_len, &file_size)))
			goto out;
		for (size_t i = 0; i < n; i++)
			items[i].desc = descs[i];
		qsort(order, n, sizeof(*order), cmp_save_offset);
	}

	/* The bytes. */
	if ((r = xfer_init(&x, fn, fd, progress, ctx, cancel)))
		goto out;
	x_ok = true;
	x.total = file_size - header_len;
	save_data(&x, header ? header : npy_header, header_len, order, n);
	if ((r = x.err))
		goto out;
	report_end(&x);
	if (ret)
		*ret = (struct tnd_xfer_result){ n, x.total, file_size, now_ns() - start };
out:
	if (r && x_ok && ftruncate(fd, 0) != 0) {
		/* The message of the first failure stays; the file may hold part of the save. */
	}
	if (x_ok)
		xfer_fini(&x);
	if (items)
		for (size_t i = 0; i < n; i++)
			tn_tensor_unref(items[i].tensor);
	tn__free(items);
	tn__free(order);
	tn__free(descs);
	free(header);
	tn__safetensors_free(meta);
	if (entries != &one)
		free(entries);
	return r;
}

/* ---- one tensor back from a file (spill.c's restores) ---------------------------------------- */

int tnd_read_tensor(int fd, const char *name, tn_tensor *dest, const _Atomic bool *cancel)
{
	static const char fn[] = "tnd_read_tensor";
	uint64_t size, hlen;
	unsigned char head[8];
	void *header = NULL;
	struct tn__safetensors *st = NULL;
	struct xfer x;
	bool x_ok = false;
	int r;

	if ((r = check_file(fn, fd, false, &size)) || (r = pread_all(fn, fd, head, 8, 0)) ||
	    (r = tn__safetensors_prefix(head, 8, size, &hlen)))
		return r;
	if (!(header = tn__malloc(hlen ? (size_t)hlen : 1)))
		return tn__error(TN_ENOMEM, "%s: out of memory for a %" PRIu64 "-byte header", fn,
				 hlen);
	if ((r = pread_all(fn, fd, header, (size_t)hlen, 8)) ||
	    (r = tn__safetensors_parse(header, (size_t)hlen, size, 0, &st)))
		goto out;
	const struct tn__fmt_tensor *d = st->ntensors == 1 ? &st->tensors[0] : NULL;
	int ndim = tn_tensor_ndim(dest);
	if (!d || strcmp(d->name, name) || d->dtype != tn_tensor_dtype(dest) || d->ndim != ndim ||
	    memcmp(d->sizes, tn_tensor_sizes(dest), (size_t)ndim * sizeof(int64_t)) ||
	    d->nbytes != tn_tensor_nbytes(dest) || !tn_tensor_is_contiguous(dest)) {
		r = tn__error(TN_EINVAL, "%s: the file does not hold '%s' alone with the dtype and "
			      "sizes of its entry", fn, name);
		goto out;
	}
	if ((r = xfer_init(&x, fn, fd, NULL, NULL, cancel)))
		goto out;
	x_ok = true;
	struct load_item item = { d->offset, d->nbytes, tn_tensor_data(dest) };
	x.items = &item;
	x.nitems = 1;
	x.lo = st->data_offset;
	x.hi = st->data_offset + st->data_len;
	x.total = x.hi - x.lo;
	load_data(&x, size);
	r = x.err;
out:
	if (x_ok)
		xfer_fini(&x);
	tn__safetensors_free(st);
	free(header);
	return r;
}
