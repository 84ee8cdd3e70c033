/* SPDX-License-Identifier: MIT */
/*
 * harness.c — the stand-in for Criterion's runner in TSan builds (see
 * harness.h).  Each test runs in a forked child of a single-threaded parent;
 * a test passes when the child exits 0 (or dies of the expected signal)
 * within its timeout.  Prints one line per test and a closing
 * "N passed, N failed" line.
 */
#include "harness.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { DEFAULT_TIMEOUT = 600 };

static struct harness_test *tests;

void harness_register(struct harness_test *t)
{
	t->next = tests;
	tests = t;
}

void harness_check(bool ok, const char *expr, const char *file, int line, const char *fmt, ...)
{
	if (ok)
		return;
	fprintf(stderr, "%s:%d: assertion failed: %s", file, line, expr);
	if (fmt[1]) {	/* every format starts with the blank HARNESS_CHECK adds */
		va_list ap;
		va_start(ap, fmt);
		fputc(':', stderr);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
	exit(1);
}

static bool run_one(const struct harness_test *t)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return false;
	}
	if (pid == 0) {
		alarm((unsigned)(t->timeout ? t->timeout : DEFAULT_TIMEOUT));
		t->fn();
		exit(0);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return false;
	if (t->signal)
		return WIFSIGNALED(status) && WTERMSIG(status) == t->signal;
	if (WIFSIGNALED(status))
		fprintf(stderr, "%s::%s: killed by signal %d%s\n", t->suite, t->name,
			WTERMSIG(status), WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;	/* Criterion's options (--jobs) do not apply */
	unsigned passed = 0, failed = 0;
	for (const struct harness_test *t = tests; t; t = t->next) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		bool ok = run_one(t);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("[%s] %s::%s (%.2fs)\n", ok ? "PASS" : "FAIL", t->suite, t->name,
		       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
		ok ? passed++ : failed++;
	}
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
