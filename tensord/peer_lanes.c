// SPDX-License-Identifier: MIT
/*
 * The transports of a UCX endpoint, from ucp_ep_print_info's text (peer_ucx.h): plain text
 * processing, compiled into the peers module and into the tests that check it without UCX.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "peer_ucx.h"

/* Append @s to @buf (of @n bytes, @used so far), truncating. */
static void put(char *buf, size_t n, size_t *used, const char *s, size_t len)
{
	for (size_t i = 0; i < len && *used + 1 < n; i++)
		buf[(*used)++] = s[i];
	if (n)
		buf[*used < n ? *used : n - 1] = '\0';
}

int tnd_ucx_parse_lanes(const char *info, char *buf, size_t n)
{
	/* "#  lane[2]:  5:cma/memory.0 md[4]  -> md[4]/cma/sysdev[255] rma_bw#0": the
	 * transport/device after "N:", without its ".K" suffix, and the lane's uses after the
	 * "-> ..." destination. */
	char am[256] = "", rma[256] = "";
	size_t nam = 0, nrma = 0;
	for (const char *line = info; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t ll = end ? (size_t)(end - line) : strlen(line);
		const char *l = memmem(line, ll, "lane[", 5);
		const char *arrow = l ? memmem(l, ll - (size_t)(l - line), "->", 2) : NULL;
		const char *colon = l ? memchr(l, ':', ll - (size_t)(l - line)) : NULL;
		if (l && arrow && colon && colon < arrow) {
			const char *t = colon + 1;
			while (t < arrow && *t == ' ')
				t++;
			while (t < arrow && *t >= '0' && *t <= '9')
				t++;
			if (t < arrow && *t == ':')
				t++;
			const char *te = t;
			while (te < arrow && *te != ' ' && *te != '.')
				te++;
			/* the uses: the words after the destination's first word */
			const char *u = arrow + 2;
			const char *le = line + ll;
			while (u < le && *u == ' ')
				u++;
			while (u < le && *u != ' ')
				u++;
			bool is_am = false, is_rma = false;
			while (u < le) {
				while (u < le && *u == ' ')
					u++;
				const char *w = u;
				while (u < le && *u != ' ')
					u++;
				if (u - w == 2 && !memcmp(w, "am", 2))
					is_am = true;
				if (u - w > 7 && !memcmp(w, "rma_bw#", 7))
					is_rma = true;
			}
			if (is_am && te > t) {
				if (nam)
					put(am, sizeof(am), &nam, ",", 1);
				put(am, sizeof(am), &nam, t, (size_t)(te - t));
			}
			if (is_rma && te > t) {
				if (nrma)
					put(rma, sizeof(rma), &nrma, ",", 1);
				put(rma, sizeof(rma), &nrma, t, (size_t)(te - t));
			}
		}
		line = end ? end + 1 : NULL;
	}
	if (!nam && !nrma)
		return -1;
	size_t used = 0;
	if (n)
		buf[0] = '\0';
	put(buf, n, &used, "am=", 3);
	put(buf, n, &used, nam ? am : "-", nam ? nam : 1);
	put(buf, n, &used, " rma=", 5);
	put(buf, n, &used, nrma ? rma : "-", nrma ? nrma : 1);
	return (int)used;
}

bool tnd_ucx_lanes_native_get(const char *lanes)
{
	const char *r = strstr(lanes, "rma=");
	if (!r || r[4] == '-')
		return false;
	static const char *const native[] = { "cma/", "knem/", "xpmem/", "rc_verbs/", "rc_mlx5/",
					      "dc_mlx5/", "ud_" };
	for (size_t i = 0; i < sizeof(native) / sizeof(native[0]); i++)
		if (strstr(r, native[i]))
			return true;
	return false;
}


bool tnd_ucx_lanes_local(const char *text)
{
	static const char *const tl[] = { "sysv/", "posix/", "cma/", "xpmem/", "knem/" };
	for (size_t i = 0; i < sizeof(tl) / sizeof(tl[0]); i++)
		if (strstr(text, tl[i]))
			return true;
	return false;
}
