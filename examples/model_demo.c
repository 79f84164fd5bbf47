/* SPDX-License-Identifier: MIT */
/*
 * The second part of `make demo`: a model served from an arena to several processes.
 *
 *   1. Start a private tensord; create arena "gpt2" and have tensorctl load the GPT-2 weights
 *      (models/gen_models.py wrote them) into it, sealed, with its progress bar; load
 *      torch's answers beside them. Create arena "serve" for the prompts, the answers and the
 *      workers' key/value caches.
 *   2. Start four worker processes. Each maps the weights read-only and zero-copy (the daemon
 *      hands it the arena's descriptor), binds the model to them by name, and waits in the
 *      arena for its prompt.
 *   3. Publish one prompt per worker. Each worker decodes 24 tokens greedily with its
 *      key/value cache in arena tensors (tn_arena_use), publishes its answer and its figures,
 *      and exits.
 *   4. Check every answer against torch 1.13's on the same weights; print each worker's
 *      tokens/s and its PSS beside its RSS: the weights are mapped by four processes and
 *      counted once (a quarter in each PSS), where four private copies would count four times.
 *
 * Usage: model_demo TENSORD TENSORCTL MODELS_DIR. The binary runs itself again as
 * "--worker I SOCKET".
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tensor.h>

#include "demo_proc.h"

#include "../models/gpt2.h"

#define NWORKERS 4
#define NEW_TOKENS 24

#define CHECK(call)                                                                        \
	do {                                                                               \
		int r_ = (call);                                                           \
		if (r_ < 0) {                                                              \
			fprintf(stderr, "model_demo[%d]: %s failed: %s (%s)\n", (int)getpid(), \
				#call, tn_last_error(), tn_strerror(r_));                  \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

static const struct gpt2_config CFG = { 4, 256, 4, 8192, 256 };

/* The private daemon, stopped whenever the demo exits (a CHECK failing included). */
static pid_t daemon_pid;
static char daemon_dir[256], daemon_arenas[256];

static void stop_daemon(void)
{
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGTERM);
		waitpid(daemon_pid, NULL, 0);
		daemon_pid = 0;
	}
	if (daemon_dir[0]) {
		/* The daemon's socket and its lock file (a stopped daemon leaves the lock). */
		char path[300];
		snprintf(path, sizeof(path), "%s/tensord.sock", daemon_dir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/tensord.sock.lock", daemon_dir);
		unlink(path);
		rmdir(daemon_dir);
	}
	if (daemon_arenas[0])
		rmdir(daemon_arenas); /* empty once its arenas are destroyed */
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* RSS and PSS of this process in KiB, from /proc/self/smaps_rollup. */
static void memory_kb(double *rss, double *pss)
{
	char line[256];
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	*rss = *pss = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		long v;
		if (sscanf(line, "Rss: %ld kB", &v) == 1)
			*rss = (double)v;
		else if (sscanf(line, "Pss: %ld kB", &v) == 1)
			*pss = (double)v;
	}
	fclose(f);
}

static int get_weight(void *ctx, const char *name, tn_tensor **ret)
{
	char full[160];
	snprintf(full, sizeof(full), "w/%s", name);
	return tn_arena_lookup(ctx, full, ret, NULL);
}

static int worker(int i, const char *sock)
{
	tn_tensord *c;
	tn_arena *weights, *serve;
	char name[64];
	CHECK(tn_tensord_connect(sock, &c));
	CHECK(tn_tensord_arena_open(c, "gpt2", TN_TENSORD_READ_ONLY, &weights));
	CHECK(tn_tensord_arena_open(c, "serve", 0, &serve));

	struct gpt2 m;
	if (gpt2_load(&m, &CFG, get_weight, weights) < 0) {
		fprintf(stderr, "worker %d: %s\n", i, gpt2_last_error());
		return 1;
	}
	/* The key/value cache (and every activation) in the serve arena. */
	CHECK(tn_arena_use(serve));
	struct gpt2_cache cache;
	CHECK(gpt2_cache_init(&m, &cache));

	tn_tensor *prompt;
	tn_arena_lookup_options lo = { .timeout_ns = 60 * 1000000000LL };
	snprintf(name, sizeof(name), "prompt/%d", i);
	CHECK(tn_arena_lookup_wait(serve, name, &lo, &prompt, NULL));
	int64_t out[NEW_TOKENS];
	double t0 = now_s();
	if (gpt2_generate(&m, &cache, tn_tensor_data(prompt), tn_tensor_numel(prompt), NEW_TOKENS,
			  out, NULL) < 0) {
		fprintf(stderr, "worker %d: %s\n", i, gpt2_last_error());
		return 1;
	}
	double dt = now_s() - t0;

	/* The answer and the figures: tokens/s, RSS, PSS. */
	int64_t n = NEW_TOKENS, three = 3;
	tn_tensor *ans, *fig;
	CHECK(tn_empty(1, &n, TN_INT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &ans));
	memcpy(tn_tensor_data(ans), out, sizeof(out));
	CHECK(tn_empty(1, &three, TN_FLOAT64, TN_CPU, TN_CONTIGUOUS_FORMAT, &fig));
	double *f = tn_tensor_data(fig);
	f[0] = NEW_TOKENS / dt;
	memory_kb(&f[1], &f[2]);
	snprintf(name, sizeof(name), "answer/%d", i);
	CHECK(tn_arena_publish(serve, name, ans, 0, NULL));
	snprintf(name, sizeof(name), "figures/%d", i);
	CHECK(tn_arena_publish(serve, name, fig, 0, NULL));
	tn_tensor_unref(ans);
	tn_tensor_unref(fig);
	tn_tensor_unref(prompt);
	gpt2_cache_free(&cache);
	gpt2_free(&m);
	CHECK(tn_arena_use(NULL));
	tn_arena_unref(serve);
	tn_arena_unref(weights);
	tn_tensord_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "--worker"))
		return worker(atoi(argv[2]), argv[3]);
	if (argc != 4) {
		fprintf(stderr, "usage: model_demo TENSORD TENSORCTL MODELS_DIR\n");
		return 2;
	}
	char self[4096];
	ssize_t sn = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (sn <= 0) {
		perror("model_demo: /proc/self/exe");
		return 1;
	}
	self[sn] = 0;

	/* 1. A private tensord, the weights loaded by tensorctl. */
	char dir[] = "/tmp/model-demo.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("model_demo: mkdtemp");
		return 1;
	}
	char sock[256], arenas[256], weights[512], answers[512];
	snprintf(sock, sizeof(sock), "%s/tensord.sock", dir);
	snprintf(arenas, sizeof(arenas), "/dev/shm/model-demo-%d", (int)getpid());
	snprintf(weights, sizeof(weights), "%s/gpt2.safetensors", argv[3]);
	snprintf(answers, sizeof(answers), "%s/gpt2_expected.safetensors", argv[3]);
	setenv("TENSORD_SOCKET", sock, 1);
	printf("\nlibtensor %s: a GPT-2 served from an arena to %d processes\n\n", tn_version(),
	       NWORKERS);
	char *dargv[] = { argv[1], "--foreground", "--socket", sock, "--arena-dir", arenas,
			  "--log-level", "warn", NULL };
	pid_t daemon = demo_spawn("model_demo", dargv);
	daemon_pid = daemon;
	snprintf(daemon_dir, sizeof(daemon_dir), "%s", dir);
	snprintf(daemon_arenas, sizeof(daemon_arenas), "%s", arenas);
	atexit(stop_daemon);
	/* Four workers share the machine's cores: one thread each, unless told otherwise. */
	setenv("TN_NUM_THREADS", "1", 0);
	tn_tensord *c = NULL;
	for (int i = 0; i < 500 && tn_tensord_connect(NULL, &c); i++)
		usleep(10000);
	if (!c) {
		fprintf(stderr, "model_demo: tensord did not come up: %s\n", tn_last_error());
		kill(daemon, SIGKILL);
		return 1;
	}
	int bad = 0;
	tn_tensord_arena_options o;
	tn_tensord_arena_options_init(&o);
	o.size = 32 << 20;
	CHECK(tn_tensord_arena_create(c, "gpt2", &o));
	o.size = 64 << 20;
	CHECK(tn_tensord_arena_create(c, "serve", &o));
	printf("tensorctl load gpt2 %s --prefix w/ --seal\n", weights);
	char *largv[] = { argv[2], "load", "gpt2", weights, "--prefix", "w/", "--seal", NULL };
	if (demo_wait_ok("model_demo", demo_spawn("model_demo", largv), "tensorctl load"))
		goto fail;
	char *xargv[] = { argv[2], "load", "gpt2", answers, "--prefix", "x/", "--seal", NULL };
	if (demo_wait_ok("model_demo", demo_spawn("model_demo", xargv),
			 "tensorctl load (torch's answers)"))
		goto fail;

	/* 2. The workers, which wait for their prompts. */
	pid_t w[NWORKERS];
	char idx[NWORKERS][8];
	for (int i = 0; i < NWORKERS; i++) {
		snprintf(idx[i], sizeof(idx[i]), "%d", i);
		char *wargv[] = { self, "--worker", idx[i], sock, NULL };
		w[i] = demo_spawn("model_demo", wargv);
	}

	/* 3. The prompts: torch's, from the weights arena. */
	tn_arena *g, *serve;
	CHECK(tn_tensord_arena_open(c, "gpt2", TN_TENSORD_READ_ONLY, &g));
	CHECK(tn_tensord_arena_open(c, "serve", 0, &serve));
	for (int i = 0; i < NWORKERS; i++) {
		char name[64];
		tn_tensor *p, *copy;
		snprintf(name, sizeof(name), "x/demo.%d.prompt", i);
		CHECK(tn_arena_lookup(g, name, &p, NULL));
		CHECK(tn_arena_use(serve)); /* the copy is a block of the serve arena */
		CHECK(tn_clone(p, TN_CONTIGUOUS_FORMAT, &copy));
		CHECK(tn_arena_use(NULL));
		snprintf(name, sizeof(name), "prompt/%d", i);
		CHECK(tn_arena_publish(serve, name, copy, 0, NULL));
		tn_tensor_unref(copy);
		tn_tensor_unref(p);
	}
	for (int i = 0; i < NWORKERS; i++)
		bad |= demo_wait_ok("model_demo", w[i], "worker");
	if (bad)
		goto fail;

	/* 4. The answers against torch's, and the figures. */
	printf("\n%-8s %-40s %10s %9s %9s\n", "worker", "answer (first tokens)", "tokens/s",
	       "RSS MiB", "PSS MiB");
	double rss_sum = 0, pss_sum = 0;
	for (int i = 0; i < NWORKERS; i++) {
		char name[64], text[64];
		tn_tensor *ans, *want, *fig;
		snprintf(name, sizeof(name), "answer/%d", i);
		CHECK(tn_arena_lookup(serve, name, &ans, NULL));
		snprintf(name, sizeof(name), "x/demo.%d.generated", i);
		CHECK(tn_arena_lookup(g, name, &want, NULL));
		snprintf(name, sizeof(name), "figures/%d", i);
		CHECK(tn_arena_lookup(serve, name, &fig, NULL));
		const int64_t *a = tn_tensor_data(ans), *e = tn_tensor_data(want);
		bool same = tn_tensor_numel(ans) == tn_tensor_numel(want) &&
			    !memcmp(a, e, sizeof(int64_t) * (size_t)tn_tensor_numel(ans));
		snprintf(text, sizeof(text), "%" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " ... %s", a[0],
			 a[1], a[2], a[3], same ? "= torch" : "!= torch");
		const double *f = tn_tensor_data(fig);
		printf("%-8d %-40s %10.0f %9.1f %9.1f\n", i, text, f[0], f[1] / 1024, f[2] / 1024);
		rss_sum += f[1];
		pss_sum += f[2];
		bad |= !same;
		tn_tensor_unref(ans);
		tn_tensor_unref(want);
		tn_tensor_unref(fig);
	}
	printf("\nall %d: RSS %.1f MiB, PSS %.1f MiB: the %.1f MiB of weights are mapped by every "
	       "worker and counted once in the PSS (%d threads per worker)\n", NWORKERS,
	       rss_sum / 1024, pss_sum / 1024, 21293560.0 / (1 << 20),
	       atoi(getenv("TN_NUM_THREADS")));
	printf("answers: %s\n", bad ? "DIFFERENT from torch's" : "equal to torch 1.13's, all four");
	tn_arena_unref(g);
	tn_arena_unref(serve);
	CHECK(tn_tensord_arena_destroy(c, "serve", 0));
	CHECK(tn_tensord_arena_destroy(c, "gpt2", 0));
	CHECK(tn_tensord_shutdown(c));
	tn_tensord_close(c);
	demo_wait_ok("model_demo", daemon, "tensord");
	daemon_pid = 0;
	stop_daemon();
	return bad ? 1 : 0;
fail:
	tn_tensord_close(c);
	return 1;
}
