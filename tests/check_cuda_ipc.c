// SPDX-License-Identifier: MIT
/*
 * CUDA tensors shared between processes through a real tensord (tn_cuda_ipc_export(3)).
 * Needs a GPU: without one it exits 77 (the daemon's side is tested without a GPU in
 * check_tensord). The consumers are this program run again (--consumer), never a fork of a
 * process that has used CUDA: CUDA does not survive a fork.
 *
 * The tests run without Check's fork for the same reason (the runner initialised CUDA when it
 * counted the devices).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tensor.h>
#include "testutil.h"

static const char *self_exe;
static char dir[64], sock[128], arena_dir[128], config[128], log_path[128];
static pid_t daemon_pid;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void daemon_up(void)
{
	snprintf(dir, sizeof(dir), "/tmp/check-cuda-ipc-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/s", dir);
	snprintf(config, sizeof(config), "%s/tensord.conf", dir);
	snprintf(log_path, sizeof(log_path), "%s/log", dir);
	snprintf(arena_dir, sizeof(arena_dir), "/dev/shm/check-cuda-ipc-%d", (int)getpid());
	FILE *f = fopen(config, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	daemon_pid = fork();
	ck_assert_int_ge(daemon_pid, 0);
	if (daemon_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(TN_TENSORD_BIN, "tensord", "--foreground", "--socket", sock, "--config",
		      config, "--arena-dir", arena_dir, (char *)NULL);
		_exit(127);
	}
	uint64_t deadline = now_ms() + 20000;
	for (;;) {
		tn_tensord *c;
		if (tn_tensord_connect(sock, &c) == 0) {
			tn_tensord_close(c);
			return;
		}
		ck_assert_msg(now_ms() < deadline, "tensord did not start; see %s", log_path);
		usleep(2000);
	}
}

static void daemon_down(void)
{
	int st;
	kill(daemon_pid, SIGTERM);
	ck_assert_int_eq(waitpid(daemon_pid, &st, 0), daemon_pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	unlink(config);
	unlink(log_path);
	rmdir(dir);
	rmdir(arena_dir); /* empty: no arenas, and the CUDA table goes when it is empty */
}

/* Run this program as a consumer; its stdout comes back through *ret_out. */
static pid_t consumer(const char *name, const char *mode, int *ret_out)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(p[1], 1);
		close(p[0]);
		execl(self_exe, self_exe, "--consumer", sock, name, mode, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	*ret_out = p[0];
	return pid;
}

static void read_line(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	while (n + 1 < cap) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ck_assert_msg(poll(&pf, 1, 60000) == 1, "the consumer said nothing for 60 s");
		ssize_t k = read(fd, buf + n, 1);
		if (k <= 0 || buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = 0;
}

static tn_tensor *gpu_iota(int64_t n)
{
	double *v = malloc((size_t)n * sizeof(double));
	for (int64_t i = 0; i < n; i++)
		v[i] = (double)(i % 1000);
	tn_tensor *c = tn_test_from_values(v, 1, &n, TN_FLOAT32);
	free(v);
	tn_tensor *g;
	ck_assert_tn_ok(tn_to_device(c, TN_CUDA(0), TN_FLOAT32, false, false, NULL, &g));
	tn_tensor_unref(c);
	return g;
}

/* ---- the consumer ---- */

#define CEXPECT(cond)                                                                        \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			printf("FAIL %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond,           \
			       tn_last_error());                                             \
			fflush(stdout);                                                      \
			return 1;                                                            \
		}                                                                            \
	} while (0)

static int consumer_main(const char *path, const char *name, const char *mode)
{
	tn_tensord *c;
	tn_tensor *t, *h;
	CEXPECT(tn_tensord_connect(path, &c) == 0);
	CEXPECT(tn_cuda_ipc_import(c, name, &t) == 0);
	CEXPECT(tn_tensor_device(t).type == TN_DEVICE_CUDA);
	if (!strcmp(mode, "hold")) {
		printf("holding\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	/* "verify": the producer's values, doubled in place on the device. */
	CEXPECT(tn_to_device(t, TN_CPU, TN_FLOAT32, false, false, NULL, &h) == 0);
	const float *v = tn_tensor_data(h);
	int64_t n = tn_tensor_numel(h);
	for (int64_t i = 0; i < n; i++)
		CEXPECT(v[i] == (float)(i % 1000));
	tn_tensor_unref(h);
	CEXPECT(tn_add_(t, t, (tn_scalar){ .kind = TN_SCALAR_INT, .v.i = 1 }) == 0);
	CEXPECT(tn_cuda_synchronize(-1) == 0);
	tn_tensor_unref(t); /* releases the hold */
	tn_tensord_close(c);
	printf("ok %lld\n", (long long)n);
	return 0;
}

/* ---- tests ---- */

START_TEST(test_share_and_write_back)
{
	daemon_up();
	tn_tensord *c;
	ck_assert_tn_ok(tn_tensord_connect(sock, &c));
	const int64_t n = 3 << 20;
	tn_tensor *x = gpu_iota(n);
	ck_assert_tn_ok(tn_cuda_ipc_export(c, "ipc/x", x, 0));
	ck_assert_tn_error_has(tn_cuda_ipc_export(c, "ipc/x", x, 0), TN_EEXIST, "exists");
	int out;
	pid_t pid = consumer("ipc/x", "verify", &out);
	char line[256];
	read_line(out, line, sizeof(line));
	ck_assert_msg(!strncmp(line, "ok ", 3), "consumer: %s", line);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(out);
	/* The consumer's writes are in our memory. */
	tn_tensor *h;
	ck_assert_tn_ok(tn_to_device(x, TN_CPU, TN_FLOAT32, false, false, NULL, &h));
	const float *v = tn_tensor_data(h);
	for (int64_t i = 0; i < n; i++)
		ck_assert_msg(v[i] == 2.0f * (float)(i % 1000), "x[%lld] = %g", (long long)i,
			      (double)v[i]);
	tn_tensor_unref(h);
	tn_tensord_cuda_export e;
	ck_assert_tn_ok(tn_tensord_cuda_stat(c, "ipc/x", &e));
	ck_assert_uint_eq(e.holders, 0);
	ck_assert_uint_eq(e.storage_bytes, (uint64_t)n * 4);
	/* Importing one's own export: a view of the same memory, no hold. */
	tn_tensor *self;
	ck_assert_tn_ok(tn_cuda_ipc_import(c, "ipc/x", &self));
	ck_assert_ptr_eq(tn_tensor_data(self), tn_tensor_data(x));
	ck_assert_tn_ok(tn_tensord_cuda_stat(c, "ipc/x", &e));
	ck_assert_uint_eq(e.holders, 0);
	tn_tensor_unref(self);
	ck_assert_tn_ok(tn_cuda_ipc_unexport(c, "ipc/x"));
	ck_assert_tn_error_has(tn_tensord_cuda_stat(c, "ipc/x", &e), TN_ENOENT, "no CUDA export");
	ck_assert_int_eq(tn_cuda_ipc_collect(), 0);
	tn_tensor_unref(x);
	tn_tensord_close(c);
	daemon_down();
}
END_TEST

/* A consumer killed while it holds the memory: once the daemon sees it gone, the producer's
 * collection frees the block, and the allocator's figures say so. */
START_TEST(test_killed_consumer_accounting)
{
	daemon_up();
	tn_tensord *c;
	ck_assert_tn_ok(tn_tensord_connect(sock, &c));
	tn_cuda_memory_stats s0, s1;
	ck_assert_tn_ok(tn_cuda_synchronize(-1));
	ck_assert_tn_ok(tn_cuda_allocator_stats(0, &s0));
	const int64_t n = 16 << 20; /* 64 MiB: a segment of its own */
	tn_tensor *x = gpu_iota(n);
	ck_assert_tn_ok(tn_cuda_ipc_export(c, "ipc/big", x, 0));
	tn_tensor_unref(x); /* the export keeps the storage */
	ck_assert_tn_ok(tn_cuda_allocator_stats(0, &s1));
	ck_assert_uint_eq(s1.allocated_bytes - s0.allocated_bytes, (uint64_t)n * 4);
	int out;
	pid_t pid = consumer("ipc/big", "hold", &out);
	char line[256];
	read_line(out, line, sizeof(line));
	ck_assert_str_eq(line, "holding");
	ck_assert_tn_ok(tn_cuda_ipc_unexport(c, "ipc/big"));
	ck_assert_int_eq(tn_cuda_ipc_collect(), 0); /* still held */
	ck_assert_tn_ok(tn_cuda_allocator_stats(0, &s1));
	ck_assert_uint_eq(s1.allocated_bytes - s0.allocated_bytes, (uint64_t)n * 4);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	close(out);
	uint64_t deadline = now_ms() + 5000;
	int64_t freed;
	while ((freed = tn_cuda_ipc_collect()) == 0) {
		ck_assert_msg(now_ms() < deadline, "the killed consumer's hold was not dropped");
		usleep(5000);
	}
	ck_assert_int_eq(freed, 1);
	ck_assert_tn_ok(tn_cuda_allocator_stats(0, &s1));
	ck_assert_uint_eq(s1.allocated_bytes, s0.allocated_bytes);
	tn_tensord_cuda_export e;
	ck_assert_tn_error_has(tn_tensord_cuda_stat(c, "ipc/big", &e), TN_ENOENT, "no CUDA export");
	tn_tensord_close(c);
	daemon_down();
}
END_TEST

int main(int argc, char **argv)
{
	self_exe = argv[0];
	if (argc == 5 && !strcmp(argv[1], "--consumer"))
		return consumer_main(argv[2], argv[3], argv[4]);
	if (tn_cuda_device_count() <= 0) {
		printf("check_cuda_ipc: no CUDA device: skipped (the daemon's bookkeeping is tested "
		       "by check_tensord)\n");
		return 77;
	}
	Suite *s = suite_create("cuda_ipc");
	TCase *tc = tcase_create("ipc");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_share_and_write_back);
	tcase_add_test(tc, test_killed_consumer_accounting);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK); /* CUDA is initialised: no fork */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
