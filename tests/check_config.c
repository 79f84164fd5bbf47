/* SPDX-License-Identifier: MIT */
/*
 * tensord.conf: the shipped example (tensord/tensord.conf.example) shows every key with the
 * default compiled into the daemon, and names the keys tensord.conf(5) documents, so neither
 * can drift from the parser (tensord/config.c).
 */
#include <stdio.h>

#include "daemon.h"
#include "testutil.h"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	ck_assert_uint_lt(n, sizeof(buf) - 1);
	buf[n] = 0;
	*len = n;
	return buf;
}

#define MAX_KEYS 64

/* The keys of the example's "#key = value" lines, in order; @text gets the file with those
 * lines uncommented. */
static int example_keys(char keys[MAX_KEYS][32], char *text, size_t cap)
{
	size_t len;
	const char *src = slurp(TN_CONF_EXAMPLE, &len);
	int n = 0;
	size_t out = 0;
	for (const char *p = src; *p;) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		char line[512];
		ck_assert_uint_lt(l, sizeof(line));
		memcpy(line, p, l);
		line[l] = 0;
		char key[32];
		int kl = 0;
		if (line[0] == '#' && sscanf(line + 1, "%31[a-z_] =%n", key, &kl) == 1 && kl > 0) {
			ck_assert_int_lt(n, MAX_KEYS);
			for (int i = 0; i < n; i++)
				ck_assert_msg(strcmp(keys[i], key), "%s shown twice", key);
			strcpy(keys[n++], key);
			out += (size_t)snprintf(text + out, cap - out, "%s\n", line + 1);
		}
		p += l + (nl != NULL);
	}
	return n;
}

/* Uncommenting every line of the example changes nothing: each shows its default. */
START_TEST(test_example_shows_defaults)
{
	char keys[MAX_KEYS][32], text[8192], err[600];
	int n = example_keys(keys, text, sizeof(text));
	ck_assert_int_ge(n, 15);
	struct tnd_config d, c;
	tnd_config_defaults(&d);
	tnd_config_defaults(&c);
	ck_assert_msg(tnd_config_parse(&c, text, strlen(text), "example", err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_str_eq(c.socket, d.socket);
	ck_assert_str_eq(c.arena_dir, d.arena_dir);
	ck_assert_str_eq(c.hugepage_dir, d.hugepage_dir);
	ck_assert_uint_eq(c.default_arena_size, d.default_arena_size);
	ck_assert_uint_eq(c.max_arena_size, d.max_arena_size);
	ck_assert_uint_eq(c.max_arenas, d.max_arenas);
	ck_assert_uint_eq(c.max_clients, d.max_clients);
	ck_assert_uint_eq(c.max_clients_per_user, d.max_clients_per_user);
	ck_assert_uint_eq(c.max_arenas_per_user, d.max_arenas_per_user);
	ck_assert_uint_eq(c.max_bytes_per_user, d.max_bytes_per_user);
	ck_assert_int_eq(c.create_all, d.create_all);
	ck_assert_uint_eq(c.ncreate_uids, d.ncreate_uids);
	ck_assert_uint_eq(c.ncreate_gids, d.ncreate_gids);
	ck_assert_int_eq(c.numa_policy, d.numa_policy);
	ck_assert_uint_eq(c.numa_nodes, d.numa_nodes);
	ck_assert_int_eq(c.hugepages, d.hugepages);
	ck_assert_uint_eq(c.reclaim_interval_ms, d.reclaim_interval_ms);
	ck_assert_int_eq(c.log_level, d.log_level);
	ck_assert_int_eq(c.log_target, d.log_target);
	/* Computed defaults stay computed: the daemon still works them out. */
	ck_assert(!c.set_socket);
	ck_assert(!c.set_log_target);
	/* Every value differs from some other value the key takes: a wrong default would show. */
	tnd_config_defaults(&c);
	const char *other = "socket = /x\narena_dir = /y\nhugepage_dir = /z\nlog_target = syslog\n";
	ck_assert_int_eq(tnd_config_parse(&c, other, strlen(other), "other", err, sizeof(err)), 0);
	ck_assert_int_eq(tnd_config_parse(&c, text, strlen(text), "example", err, sizeof(err)), 0);
	ck_assert_str_eq(c.socket, "");
	ck_assert_str_eq(c.arena_dir, "");
	ck_assert_str_eq(c.hugepage_dir, "");
	ck_assert(!c.set_socket && !c.set_log_target);
}
END_TEST

/* The example shows exactly the keys tensord.conf(5) documents, and the parser takes each. */
START_TEST(test_example_keys_documented)
{
	char keys[MAX_KEYS][32], text[8192], err[600];
	int n = example_keys(keys, text, sizeof(text));
	size_t len;
	const char *man = slurp(TN_CONF_MAN, &len);
	const char *sec = strstr(man, "\n.SH KEYS\n");
	const char *end = strstr(man, "\n.SH FILES\n");
	ck_assert(sec && end && sec < end);
	/* The keys are the ".TP" ".B key" entries outside indented lists (.RS/.RE). */
	int documented = 0, depth = 0;
	for (const char *p = sec + 1; p < end; p = strchr(p, '\n') + 1) {
		if (!strncmp(p, ".RS", 3))
			depth++;
		else if (!strncmp(p, ".RE", 3))
			depth--;
		else if (!depth && !strncmp(p, ".TP\n.B ", 7)) {
			char key[32];
			ck_assert_int_eq(sscanf(p + 7, "%31[a-z_]", key), 1);
			bool shown = false;
			for (int i = 0; i < n; i++)
				shown |= !strcmp(keys[i], key);
			ck_assert_msg(shown, "tensord.conf(5) documents %s; the example does not "
				      "show it", key);
			documented++;
		}
	}
	ck_assert_int_eq(documented, n);
	struct tnd_config c;
	for (int i = 0; i < n; i++) {
		char line[64];
		snprintf(line, sizeof(line), "%.31s = ", keys[i]);
		tnd_config_defaults(&c);
		/* A key the parser does not know is refused as unknown, whatever its value. */
		tnd_config_parse(&c, line, strlen(line), "k", err, sizeof(err));
		ck_assert_msg(!strstr(err, "unknown key"), "%s: %s", keys[i], err);
	}
	tnd_config_defaults(&c);
	ck_assert_int_eq(tnd_config_parse(&c, "no_such_key = 1", 15, "k", err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "unknown key"), "%s", err);
}
END_TEST

/* "auto" puts back the default a key computes; other keys refuse it. */
START_TEST(test_auto)
{
	struct tnd_config c;
	char err[600];
	tnd_config_defaults(&c);
	const char *t = "socket = /s\nsocket = auto\nlog_target = syslog\nlog_target = auto\n"
			"hugepage_dir = /h\nhugepage_dir = auto\narena_dir = /a\narena_dir = auto\n";
	ck_assert_int_eq(tnd_config_parse(&c, t, strlen(t), "t", err, sizeof(err)), 0);
	ck_assert_str_eq(c.socket, "");
	ck_assert_str_eq(c.hugepage_dir, "");
	ck_assert_str_eq(c.arena_dir, "");
	ck_assert(!c.set_socket && !c.set_log_target);
	ck_assert_int_eq(tnd_config_parse(&c, "max_arenas = auto", 17, "t", err, sizeof(err)), -1);
	ck_assert_int_eq(tnd_config_parse(&c, "arena_dir = rel", 15, "t", err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "auto or an absolute path"), "%s", err);
}
END_TEST

/* The keys of spilling, quotas and the HTTP endpoint: their forms, and the refusals. */
START_TEST(test_spill_http_keys)
{
	struct tnd_config c;
	char err[600];
	tnd_config_defaults(&c);
	ck_assert_str_eq(c.spill_dir, "");
	ck_assert_str_eq(c.metrics_http, "");
	const char *t = "spill_dir = /var/spill\nmetrics_http = 9464\nmax_names_per_user = 5000\n"
			"max_spill_bytes_per_user = 2G\n";
	ck_assert_int_eq(tnd_config_parse(&c, t, strlen(t), "t", err, sizeof(err)), 0);
	ck_assert_str_eq(c.spill_dir, "/var/spill");
	ck_assert_str_eq(c.metrics_http, "9464");
	ck_assert_uint_eq(c.max_names_per_user, 5000);
	ck_assert_uint_eq(c.max_spill_bytes_per_user, (uint64_t)2 << 30);
	t = "metrics_http = [::1]:9464\nspill_dir = none\n";
	ck_assert_int_eq(tnd_config_parse(&c, t, strlen(t), "t", err, sizeof(err)), 0);
	ck_assert_str_eq(c.metrics_http, "[::1]:9464");
	ck_assert_str_eq(c.spill_dir, "");
	ck_assert_int_eq(tnd_config_parse(&c, "metrics_http = none", 19, "t", err, sizeof(err)), 0);
	ck_assert_str_eq(c.metrics_http, "");
	const char *bad[] = { "metrics_http = localhost:", "spill_dir = rel/ative",
			      "max_spill_bytes_per_user = lots", "max_names_per_user = -1" };
	const char *why[] = { "metrics_http must be", "spill_dir must be", "bad size",
			      "max_names_per_user must be" };
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(tnd_config_parse(&c, bad[i], strlen(bad[i]), "t", err, sizeof(err)),
				 -1);
		ck_assert_msg(strstr(err, why[i]), "%s: %s", bad[i], err);
	}
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("example");
	tcase_add_test(tc, test_example_shows_defaults);
	tcase_add_test(tc, test_example_keys_documented);
	tcase_add_test(tc, test_auto);
	tcase_add_test(tc, test_spill_http_keys);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(config_suite)
