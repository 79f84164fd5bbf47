/* SPDX-License-Identifier: MIT */
/*
 * Direct reads from a peer daemon of the same host (libtensor-peers(7), "Direct reads"): the
 * puller copies the holder's held block out of the holder's memory itself, with
 * process_vm_readv(2), instead of UCX's get. UCX 1.13 serves ucp_get between processes of one
 * host as software RMA over its shared-memory active messages (its cma lane is used for
 * rendezvous only): the holder packs fragments, the puller copies them, a wake-up each way.
 * process_vm_readv is what UCX's cma transport calls, once per chunk, by the puller alone.
 *
 * Trust: process_vm_readv needs the right to ptrace the holder (the same user, or
 * CAP_SYS_PTRACE): the right UCX's cma transport needs. A peer offers its pid and the address
 * of a token only a process that knows the shared secret can compute for this connection
 * (peer_auth.h); the reader opens a pidfd to that pid, reads the token there and checks it,
 * so that a peer cannot have this daemon read another process's memory. The pidfd then tells
 * after each copy whether that process still lived: a copy that ended before the holder died
 * read the held block (the holder's lease kept it), and a pid reused since then is never read.
 *
 * Large reads are split into chunks that a few reader threads copy; a read's completion wakes
 * the caller's event fd. Everything else runs on the caller's thread (the peers' thread).
 */
#ifndef TENSORD_PEER_READ_H
#define TENSORD_PEER_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct tnd_read;

/*
 * Check that process @pid (of this host and pid namespace) holds @n bytes equal to @expect at
 * @addr, and open a pidfd to it. Returns the pidfd, or -1 with the reason in @err.
 */
int tnd_read_probe(pid_t pid, uint64_t addr, const void *expect, size_t n, char *err,
		   size_t nerr);

/* Whether the process of @pidfd has exited (or the pidfd is bad). */
bool tnd_read_exited(int pidfd);

/*
 * Copy @n ranges at once, on the caller's thread, with one process_vm_readv(2) per 1024:
 * @remote[i] of process @pid (its pidfd @pidfd) into @local[i] (of the same lengths). For the
 * many small blocks of a batch. Returns 0 once every byte arrived and the holder lived past
 * the copy, or -1 with the reason in @err.
 */
struct iovec;
int tnd_read_now(pid_t pid, int pidfd, const struct iovec *local, const struct iovec *remote,
		 size_t n, char *err, size_t nerr);

/*
 * Start copying @len bytes at @src in process @pid (its pidfd @pidfd, from tnd_read_probe)
 * into @dst. Reads of up to 256 KiB are done before this returns; larger ones go to the
 * reader threads (started on the first, @wake_fd an eventfd written when a read ends).
 * Returns 0 with *@out set, or -1 with a message.
 */
int tnd_read_start(pid_t pid, int pidfd, void *dst, uint64_t src, size_t len, int wake_fd,
		   struct tnd_read **out, char *err, size_t nerr);

/* 1: still copying; 0: the bytes are in dst and the holder lived past the copy; -1: failed,
 * with the reason in @err. */
int tnd_read_test(struct tnd_read *r, char *err, size_t nerr);

/* Stop @r (chunks not started are dropped, those being copied are waited for) and free it. */
void tnd_read_free(struct tnd_read *r);

/* Stop the reader threads (no read may be left). */
void tnd_read_shutdown(void);

#endif /* TENSORD_PEER_READ_H */
