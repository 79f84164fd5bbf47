/* SPDX-License-Identifier: MIT */
/*
 * The child processes of the demos (tensord_demo.c, model_demo.c): start a program, wait for
 * one to succeed. @me prefixes the messages ("demo: exec: ...").
 */
#ifndef TN_EXAMPLES_DEMO_PROC_H
#define TN_EXAMPLES_DEMO_PROC_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Fork and exec @argv (stdout flushed first so that nothing prints twice). Exits the demo
 * when fork fails. */
static inline pid_t demo_spawn(const char *me, char *const argv[])
{
	fflush(stdout);
	pid_t p = fork();
	if (p < 0) {
		fprintf(stderr, "%s: fork: %s\n", me, strerror(errno));
		exit(1);
	}
	if (p == 0) {
		execv(argv[0], argv);
		fprintf(stderr, "%s: exec %s: %s\n", me, argv[0], strerror(errno));
		_exit(127);
	}
	return p;
}

/* Wait for @p; 0 when it exited with status 0, else -1 after a message naming @what. */
static inline int demo_wait_ok(const char *me, pid_t p, const char *what)
{
	int st;
	while (waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "%s: %s failed (status 0x%x)\n", me, what, st);
		return -1;
	}
	return 0;
}

#endif /* TN_EXAMPLES_DEMO_PROC_H */
