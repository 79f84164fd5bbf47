// SPDX-License-Identifier: MIT
/*
 * SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104), the peers' secret file and their
 * challenge/response proofs (peer_auth.h). tests/check_peer_auth.c checks the digests against
 * the published vectors and Python's hashlib (tests/golden/gen_peer_auth.py).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer_auth.h"

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

static inline uint32_t ror(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

static void compress(uint32_t h[8], const unsigned char *p)
{
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) +
			      K[i] + w[i];
		uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		k = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void tnd_sha256_init(struct tnd_sha256 *s)
{
	static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	memcpy(s->h, iv, sizeof(iv));
	s->len = 0;
	s->nbuf = 0;
}

void tnd_sha256_update(struct tnd_sha256 *s, const void *data, size_t n)
{
	const unsigned char *p = data;
	s->len += n;
	if (s->nbuf) {
		size_t m = TND_SHA256_BLOCK - s->nbuf < n ? TND_SHA256_BLOCK - s->nbuf : n;
		memcpy(s->buf + s->nbuf, p, m);
		s->nbuf += m, p += m, n -= m;
		if (s->nbuf < TND_SHA256_BLOCK)
			return;
		compress(s->h, s->buf);
		s->nbuf = 0;
	}
	for (; n >= TND_SHA256_BLOCK; p += TND_SHA256_BLOCK, n -= TND_SHA256_BLOCK)
		compress(s->h, p);
	memcpy(s->buf, p, n);
	s->nbuf = n;
}

void tnd_sha256_final(struct tnd_sha256 *s, unsigned char out[TND_SHA256_SIZE])
{
	const uint64_t bits = s->len * 8;
	s->buf[s->nbuf++] = 0x80;
	if (s->nbuf > TND_SHA256_BLOCK - 8) {
		memset(s->buf + s->nbuf, 0, TND_SHA256_BLOCK - s->nbuf);
		compress(s->h, s->buf);
		s->nbuf = 0;
	}
	memset(s->buf + s->nbuf, 0, TND_SHA256_BLOCK - 8 - s->nbuf);
	for (int i = 0; i < 8; i++)
		s->buf[TND_SHA256_BLOCK - 1 - i] = (unsigned char)(bits >> (8 * i));
	compress(s->h, s->buf);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (unsigned char)(s->h[i] >> (24 - 8 * j));
	explicit_bzero(s, sizeof(*s));
}

void tnd_sha256(const void *data, size_t n, unsigned char out[TND_SHA256_SIZE])
{
	struct tnd_sha256 s;
	tnd_sha256_init(&s);
	tnd_sha256_update(&s, data, n);
	tnd_sha256_final(&s, out);
}

void tnd_hmac_sha256(const void *key, size_t nkey, const void *const *parts, const size_t *lens,
		     size_t nparts, unsigned char out[TND_SHA256_SIZE])
{
	unsigned char k[TND_SHA256_BLOCK] = { 0 }, pad[TND_SHA256_BLOCK], inner[TND_SHA256_SIZE];
	if (nkey > TND_SHA256_BLOCK)
		tnd_sha256(key, nkey, k); /* RFC 2104: a longer key is hashed first */
	else if (nkey)
		memcpy(k, key, nkey);
	struct tnd_sha256 s;
	for (int i = 0; i < TND_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	tnd_sha256_init(&s);
	tnd_sha256_update(&s, pad, sizeof(pad));
	for (size_t i = 0; i < nparts; i++)
		tnd_sha256_update(&s, parts[i], lens[i]);
	tnd_sha256_final(&s, inner);
	for (int i = 0; i < TND_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	tnd_sha256_init(&s);
	tnd_sha256_update(&s, pad, sizeof(pad));
	tnd_sha256_update(&s, inner, sizeof(inner));
	tnd_sha256_final(&s, out);
	explicit_bzero(k, sizeof(k));
	explicit_bzero(pad, sizeof(pad));
	explicit_bzero(inner, sizeof(inner));
}

bool tnd_equal_ct(const void *a, const void *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char d = 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(x[i] ^ y[i]);
	return d == 0;
}

void tnd_peer_secret_clear(struct tnd_peer_secret *s)
{
	explicit_bzero(s, sizeof(*s));
}

int tnd_peer_secret_load(const char *path, struct tnd_peer_secret *s, char *err, size_t nerr)
{
	tnd_peer_secret_clear(s);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		snprintf(err, nerr, "peer secret %s: %s", path,
			 errno == ELOOP ? "is a symbolic link" : strerror(errno));
		return -1;
	}
	struct stat st;
	const char *why = NULL;
	if (fstat(fd, &st) != 0)
		why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_uid != geteuid() && st.st_uid != 0)
		why = "owned by another user (it must be the daemon's user's or root's)";
	else if (st.st_mode & (S_IRWXG | S_IRWXO))
		why = "readable or writable by group or others (chmod 600 it)";
	else if (st.st_size > TND_PEER_SECRET_MAX + 2)
		why = "longer than 4096 bytes";
	ssize_t n = 0;
	unsigned char buf[TND_PEER_SECRET_MAX + 3];
	if (!why) {
		size_t got = 0;
		while (got < sizeof(buf)) {
			n = read(fd, buf + got, sizeof(buf) - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		if (n < 0)
			why = strerror(errno);
		while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
			got--;
		if (!why && got > TND_PEER_SECRET_MAX)
			why = "longer than 4096 bytes";
		else if (!why && got < TND_PEER_SECRET_MIN)
			why = "shorter than 16 bytes";
		if (!why) {
			memcpy(s->key, buf, got);
			s->len = got;
		}
	}
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	if (why) {
		snprintf(err, nerr, "peer secret %s: %s", path, why);
		tnd_peer_secret_clear(s);
		return -1;
	}
	return 0;
}

int tnd_peer_nonce(unsigned char nonce[TND_PEER_NONCE])
{
	size_t got = 0;
	while (got < TND_PEER_NONCE) {
		ssize_t n = getrandom(nonce + got, TND_PEER_NONCE - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* The label that makes these proofs this protocol's and no other's. */
static const char proof_label[] = "tensord peer v1";

void tnd_peer_proof(const struct tnd_peer_secret *s, enum tnd_peer_role role,
		    const unsigned char dialer_nonce[TND_PEER_NONCE],
		    const unsigned char listener_nonce[TND_PEER_NONCE],
		    unsigned char proof[TND_SHA256_SIZE])
{
	const unsigned char r = (unsigned char)role;
	const void *parts[] = { proof_label, &r, dialer_nonce, listener_nonce };
	const size_t lens[] = { sizeof(proof_label) - 1, 1, TND_PEER_NONCE, TND_PEER_NONCE };
	tnd_hmac_sha256(s->key, s->len, parts, lens, 4, proof);
}

bool tnd_peer_proof_ok(const struct tnd_peer_secret *s, enum tnd_peer_role role,
		       const unsigned char dialer_nonce[TND_PEER_NONCE],
		       const unsigned char listener_nonce[TND_PEER_NONCE],
		       const unsigned char proof[TND_SHA256_SIZE])
{
	unsigned char want[TND_SHA256_SIZE];
	tnd_peer_proof(s, role, dialer_nonce, listener_nonce, want);
	bool ok = s->len >= TND_PEER_SECRET_MIN && tnd_equal_ct(want, proof, sizeof(want));
	explicit_bzero(want, sizeof(want));
	return ok;
}
