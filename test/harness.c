/* SPDX-License-Identifier: MIT */
/*
 * harness.c — the stand-in for Criterion's runner in TSan builds (see
 * harness.h).  Each test runs in a forked child of a single-threaded parent;
 * a test passes when the child exits 0 (or dies of the expected signal)
 * within its timeout, and is skipped when it calls cr_skip_test (the child
 * prints the reason and exits SKIPPED).  Prints one line per test and a
 * closing "N passed, N failed, N skipped" line.
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

enum { DEFAULT_TIMEOUT = 600, SKIPPED = 77 };

enum outcome { PASSED, FAILED, SKIP };

static struct harness_test *tests;
static const struct harness_test *current;	/* the test this child runs */

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

/* Ends the child at once (_exit: a skip may come from any thread, with a
 * runtime running), as Criterion's cr_skip_test does. */
void harness_skip(const char *fmt, ...)
{
	printf("[SKIP] %s::%s: ", current->suite, current->name);
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(NULL);
	_exit(SKIPPED);
}

static enum outcome run_one(const struct harness_test *t)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return FAILED;
	}
	if (pid == 0) {
		current = t;
		alarm((unsigned)(t->timeout ? t->timeout : DEFAULT_TIMEOUT));
		t->fn();
		exit(0);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return FAILED;
	if (WIFEXITED(status) && WEXITSTATUS(status) == SKIPPED)
		return SKIP;
	if (t->signal)
		return WIFSIGNALED(status) && WTERMSIG(status) == t->signal ? PASSED : FAILED;
	if (WIFSIGNALED(status))
		fprintf(stderr, "%s::%s: killed by signal %d%s\n", t->suite, t->name,
			WTERMSIG(status), WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? PASSED : FAILED;
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;	/* Criterion's options (--jobs) do not apply */
	unsigned count[3] = { 0 };
	for (const struct harness_test *t = tests; t; t = t->next) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		enum outcome o = run_one(t);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		count[o]++;
		if (o == SKIP)
			continue;	/* the child printed its line, with the reason */
		printf("[%s] %s::%s (%.2fs)\n", o == PASSED ? "PASS" : "FAIL", t->suite, t->name,
		       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	}
	printf("%u passed, %u failed, %u skipped\n", count[PASSED], count[FAILED], count[SKIP]);
	return count[FAILED] ? 1 : 0;
}
