/* SPDX-License-Identifier: MIT */
/*
 * Authentication of tensord peers (libtensor-peers(7), once the peers land): SHA-256 and
 * HMAC-SHA256 (FIPS 180-4, RFC 2104), the shared secret file, and the challenge/response
 * that both ends of a peer connection run before anything else is served.
 *
 * The handshake, over the peers' TCP control connection:
 *   1. each side sends a fresh TND_PEER_NONCE-byte nonce (getrandom);
 *   2. each side sends its proof, HMAC(secret, label || role || nonce_of_dialer ||
 *      nonce_of_listener), role 'D' from the side that dialled and 'L' from the side that
 *      listened, so that neither proof can be reflected back as the other's;
 *   3. each side checks the other's proof in constant time and closes on a mismatch.
 * A passive observer learns nothing about the secret (HMAC is a PRF), a replayed proof fails
 * against the fresh nonce of the side that checks it, and a peer that does not know the
 * secret cannot produce a proof for either role. The proofs authenticate the connection's
 * start only: this is not a secure channel (the data that follows is neither encrypted nor
 * integrity-protected), as the peers' threat model states.
 *
 * Everything here is pure computation but tnd_peer_secret_load (one file) and
 * tnd_peer_nonce (getrandom).
 */
#ifndef TENSORD_PEER_AUTH_H
#define TENSORD_PEER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TND_SHA256_SIZE 32
#define TND_SHA256_BLOCK 64
#define TND_PEER_NONCE 32
/* A secret file holds 16 to 4096 bytes (trailing newlines are not part of the secret). */
#define TND_PEER_SECRET_MIN 16
#define TND_PEER_SECRET_MAX 4096

struct tnd_sha256 {
	uint32_t h[8];
	uint64_t len; /* bytes hashed so far */
	unsigned char buf[TND_SHA256_BLOCK];
	size_t nbuf;
};

void tnd_sha256_init(struct tnd_sha256 *s);
void tnd_sha256_update(struct tnd_sha256 *s, const void *data, size_t n);
void tnd_sha256_final(struct tnd_sha256 *s, unsigned char out[TND_SHA256_SIZE]);
void tnd_sha256(const void *data, size_t n, unsigned char out[TND_SHA256_SIZE]);

/* HMAC-SHA256 of the @nparts buffers @parts (of @lens bytes) concatenated, under @key. */
void tnd_hmac_sha256(const void *key, size_t nkey, const void *const *parts, const size_t *lens,
		     size_t nparts, unsigned char out[TND_SHA256_SIZE]);

/* @a and @b equal, in a time that depends on @n only. */
bool tnd_equal_ct(const void *a, const void *b, size_t n);

struct tnd_peer_secret {
	unsigned char key[TND_PEER_SECRET_MAX];
	size_t len;
};

/*
 * Read the shared secret from @path: a regular file (not a link), owned by the daemon's user
 * or root, readable by no one else (no group or other permission bits), of
 * TND_PEER_SECRET_MIN to TND_PEER_SECRET_MAX bytes once trailing newlines are dropped.
 * Returns 0, or -1 with a message in @err (of @nerr bytes) and *@s cleared.
 */
int tnd_peer_secret_load(const char *path, struct tnd_peer_secret *s, char *err, size_t nerr);

/* Wipe a secret (explicit_bzero). */
void tnd_peer_secret_clear(struct tnd_peer_secret *s);

/* A fresh nonce from getrandom. Returns 0, or -1 with errno set. */
int tnd_peer_nonce(unsigned char nonce[TND_PEER_NONCE]);

/* D and L: the handshake's proofs; d and l: the tokens a daemon shows in its memory for a peer
 * of the same host to read directly (peer_read.h). */
enum tnd_peer_role {
	TND_PEER_DIALER = 'D',
	TND_PEER_LISTENER = 'L',
	TND_PEER_DIALER_TOKEN = 'd',
	TND_PEER_LISTENER_TOKEN = 'l'
};

/* The proof that the side of @role knows @s, for the nonces of the dialer and listener. */
void tnd_peer_proof(const struct tnd_peer_secret *s, enum tnd_peer_role role,
		    const unsigned char dialer_nonce[TND_PEER_NONCE],
		    const unsigned char listener_nonce[TND_PEER_NONCE],
		    unsigned char proof[TND_SHA256_SIZE]);

/* @proof is the other side's (of @role) proof for these nonces, checked in constant time. */
bool tnd_peer_proof_ok(const struct tnd_peer_secret *s, enum tnd_peer_role role,
		       const unsigned char dialer_nonce[TND_PEER_NONCE],
		       const unsigned char listener_nonce[TND_PEER_NONCE],
		       const unsigned char proof[TND_SHA256_SIZE]);

#endif /* TENSORD_PEER_AUTH_H */
