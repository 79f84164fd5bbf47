/* SPDX-License-Identifier: MIT */
/*
 * The peers' authentication (tensord/peer_auth.c): SHA-256 against FIPS 180's "abc" and
 * Python's hashlib on messages around the block boundaries (whole and in every split of two
 * updates), HMAC-SHA256 against RFC 4231's case 2 and hashlib's hmac (keys shorter than, as
 * long as and longer than a block), the handshake's proofs (goldens; a proof of the other
 * role, of other nonces, of another secret or with one bit flipped is refused), nonces, and
 * the secret file's checks on real files.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer_auth.h"
#include "testutil.h"
#include "golden/peer_auth_golden.h"

/* gen_peer_auth.py's pattern(n, seed). */
static unsigned char *pattern(size_t n, unsigned seed)
{
	unsigned char *p = malloc(n ? n : 1);
	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 8)) & 0xff);
	return p;
}

static void hex(const unsigned char *d, char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

START_TEST(test_sha256)
{
	unsigned char d[32];
	char h[65];
	tnd_sha256("abc", 3, d);
	hex(d, h);
	ck_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	for (size_t k = 0; k < sizeof(sha_golden) / sizeof(sha_golden[0]); k++) {
		const size_t n = sha_golden[k].len;
		unsigned char *m = pattern(n, (unsigned)(n % 251));
		tnd_sha256(m, n, d);
		ck_assert_msg(!memcmp(d, sha_golden[k].digest, 32), "SHA-256 of %zu bytes", n);
		/* Two updates split at every point (every point up to 130 bytes, some beyond). */
		for (size_t cut = 0; cut <= n; cut += n <= 130 ? 1 : 997) {
			struct tnd_sha256 s;
			tnd_sha256_init(&s);
			tnd_sha256_update(&s, m, cut);
			tnd_sha256_update(&s, m + cut, n - cut);
			tnd_sha256_final(&s, d);
			ck_assert_msg(!memcmp(d, sha_golden[k].digest, 32),
				      "SHA-256 of %zu bytes in updates of %zu and %zu", n, cut,
				      n - cut);
		}
		free(m);
	}
}
END_TEST

START_TEST(test_hmac_sha256)
{
	unsigned char d[32];
	char h[65];
	const char *data = "what do ya want for nothing?";
	const void *parts[] = { data };
	const size_t lens[] = { strlen(data) };
	tnd_hmac_sha256("Jefe", 4, parts, lens, 1, d);
	hex(d, h);
	ck_assert_str_eq(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	for (size_t k = 0; k < sizeof(hmac_golden) / sizeof(hmac_golden[0]); k++) {
		unsigned char *key = pattern(hmac_golden[k].klen, hmac_golden[k].kseed);
		unsigned char *msg = pattern(hmac_golden[k].mlen, hmac_golden[k].mseed);
		const void *one[] = { msg };
		const size_t l1[] = { hmac_golden[k].mlen };
		tnd_hmac_sha256(key, hmac_golden[k].klen, one, l1, 1, d);
		ck_assert_msg(!memcmp(d, hmac_golden[k].mac, 32), "HMAC, key %u bytes, message %u",
			      hmac_golden[k].klen, hmac_golden[k].mlen);
		/* The message in three parts gives the same. */
		const size_t a = hmac_golden[k].mlen / 3, b = hmac_golden[k].mlen / 2;
		const void *three[] = { msg, msg + a, msg + b };
		const size_t l3[] = { a, b - a, hmac_golden[k].mlen - b };
		tnd_hmac_sha256(key, hmac_golden[k].klen, three, l3, 3, d);
		ck_assert(!memcmp(d, hmac_golden[k].mac, 32));
		free(key);
		free(msg);
	}
}
END_TEST

START_TEST(test_proofs)
{
	struct tnd_peer_secret s, other;
	unsigned char *key = pattern(48, 21), *nd = pattern(32, 22), *nl = pattern(32, 23);
	memcpy(s.key, key, 48);
	s.len = 48;
	other = s;
	other.key[47] ^= 1;
	unsigned char pd[32], pl[32];
	tnd_peer_proof(&s, TND_PEER_DIALER, nd, nl, pd);
	tnd_peer_proof(&s, TND_PEER_LISTENER, nd, nl, pl);
	ck_assert(!memcmp(pd, proof_golden_D, 32));
	ck_assert(!memcmp(pl, proof_golden_L, 32));
	ck_assert(tnd_peer_proof_ok(&s, TND_PEER_DIALER, nd, nl, pd));
	ck_assert(tnd_peer_proof_ok(&s, TND_PEER_LISTENER, nd, nl, pl));
	/* Reflection: one role's proof is not the other's. */
	ck_assert(!tnd_peer_proof_ok(&s, TND_PEER_LISTENER, nd, nl, pd));
	ck_assert(!tnd_peer_proof_ok(&s, TND_PEER_DIALER, nd, nl, pl));
	/* Replay against fresh nonces, or the nonces swapped. */
	unsigned char fresh[TND_PEER_NONCE];
	ck_assert_int_eq(tnd_peer_nonce(fresh), 0);
	ck_assert(!tnd_peer_proof_ok(&s, TND_PEER_DIALER, nd, fresh, pd));
	ck_assert(!tnd_peer_proof_ok(&s, TND_PEER_DIALER, fresh, nl, pd));
	ck_assert(!tnd_peer_proof_ok(&s, TND_PEER_DIALER, nl, nd, pd));
	/* Another secret, and every single flipped bit. */
	ck_assert(!tnd_peer_proof_ok(&other, TND_PEER_DIALER, nd, nl, pd));
	for (int bit = 0; bit < 256; bit++) {
		unsigned char bad[32];
		memcpy(bad, pd, 32);
		bad[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		ck_assert_msg(!tnd_peer_proof_ok(&s, TND_PEER_DIALER, nd, nl, bad), "bit %d", bit);
	}
	/* A cleared secret proves nothing, even its own proof. */
	struct tnd_peer_secret empty;
	memset(&empty, 0, sizeof(empty));
	unsigned char pe[32];
	tnd_peer_proof(&empty, TND_PEER_DIALER, nd, nl, pe);
	ck_assert(!tnd_peer_proof_ok(&empty, TND_PEER_DIALER, nd, nl, pe));
	free(key);
	free(nd);
	free(nl);
}
END_TEST

START_TEST(test_nonces)
{
	unsigned char a[TND_PEER_NONCE], b[TND_PEER_NONCE], z[TND_PEER_NONCE] = { 0 };
	ck_assert_int_eq(tnd_peer_nonce(a), 0);
	ck_assert_int_eq(tnd_peer_nonce(b), 0);
	ck_assert(memcmp(a, b, sizeof(a)) != 0);
	ck_assert(memcmp(a, z, sizeof(a)) != 0);
	ck_assert(tnd_equal_ct(a, a, sizeof(a)));
	ck_assert(!tnd_equal_ct(a, b, sizeof(a)));
}
END_TEST

static char dir[64];

static void write_file(const char *path, const void *data, size_t n, mode_t mode)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

/* tnd_peer_secret_load of @path fails with a message containing @part, the secret cleared. */
static void refused(const char *path, const char *part)
{
	struct tnd_peer_secret s;
	char err[512];
	memset(&s, 0xa5, sizeof(s));
	ck_assert_int_eq(tnd_peer_secret_load(path, &s, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, part) != NULL, "%s: \"%s\" lacks \"%s\"", path, err, part);
	ck_assert_msg(strstr(err, path) != NULL, "\"%s\" does not name the file", err);
	ck_assert_uint_eq(s.len, 0);
	ck_assert_int_eq(s.key[0], 0);
}

START_TEST(test_secret_file)
{
	strcpy(dir, "/tmp/tn-peer-auth-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char good[128], path[128];
	snprintf(good, sizeof(good), "%s/secret", dir);
	const char text[] = "correct horse battery staple\n\n";
	write_file(good, text, sizeof(text) - 1, 0600);
	struct tnd_peer_secret s;
	char err[512];
	ck_assert_int_eq(tnd_peer_secret_load(good, &s, err, sizeof(err)), 0);
	ck_assert_uint_eq(s.len, strlen("correct horse battery staple"));
	ck_assert(!memcmp(s.key, "correct horse battery staple", s.len));
	tnd_peer_secret_clear(&s);
	ck_assert_uint_eq(s.len, 0);
	/* Read-only for its owner is fine too. */
	ck_assert_int_eq(chmod(good, 0400), 0);
	ck_assert_int_eq(tnd_peer_secret_load(good, &s, err, sizeof(err)), 0);

	snprintf(path, sizeof(path), "%s/group", dir);
	write_file(path, text, sizeof(text) - 1, 0640);
	refused(path, "group or others");
	snprintf(path, sizeof(path), "%s/world", dir);
	write_file(path, text, sizeof(text) - 1, 0604);
	refused(path, "group or others");
	snprintf(path, sizeof(path), "%s/short", dir);
	write_file(path, "fifteen bytes!!\n", 16, 0600);
	refused(path, "shorter than 16 bytes");
	snprintf(path, sizeof(path), "%s/empty", dir);
	write_file(path, "", 0, 0600);
	refused(path, "shorter than 16 bytes");
	char *big = malloc(5000);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', 5000);
	snprintf(path, sizeof(path), "%s/long", dir);
	write_file(path, big, 4097, 0600);
	refused(path, "longer than 4096 bytes");
	write_file(path, big, 4096, 0600); /* exactly the most */
	ck_assert_int_eq(tnd_peer_secret_load(path, &s, err, sizeof(err)), 0);
	ck_assert_uint_eq(s.len, 4096);
	free(big);
	snprintf(path, sizeof(path), "%s/link", dir);
	ck_assert_int_eq(symlink(good, path), 0);
	refused(path, "symbolic link");
	snprintf(path, sizeof(path), "%s/sub", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	refused(path, "not a regular file");
	snprintf(path, sizeof(path), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	refused(path, "not a regular file"); /* and the open does not wait for a writer */
	snprintf(path, sizeof(path), "%s/missing", dir);
	refused(path, "No such file");
	if (geteuid() == 0) { /* a file of another user's, which only root can make here */
		snprintf(path, sizeof(path), "%s/theirs", dir);
		write_file(path, text, sizeof(text) - 1, 0600);
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		refused(path, "owned by another user");
	}
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *peer_auth_suite(void)
{
	Suite *s = suite_create("peer_auth");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_sha256);
	tcase_add_test(tc, test_hmac_sha256);
	tcase_add_test(tc, test_proofs);
	tcase_add_test(tc, test_nonces);
	tcase_add_test(tc, test_secret_file);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(peer_auth_suite)
