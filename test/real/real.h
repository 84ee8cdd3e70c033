/* SPDX-License-Identifier: MIT */
/*
 * real.h — what the real-library tests (redis.c, pg.c, curl.c) share: a
 * server started on a free loopback port in a throwaway directory and always
 * stopped, the client coroutines run beside a 1 ms ticker, and the check
 * that the ticker was never held up by the clients' blocking calls.
 *
 * Each test is a plain program: exit 0 passed, 1 failed, 77 skipped (meson's
 * skip code, with the reason on stderr).  The process that starts the server
 * runs the weft part in a forked child and stops the server and removes the
 * directory whatever the child did (failed a check, crashed, was killed); the
 * server is also started with PR_SET_PDEATHSIG, so that it dies with the test
 * if the test itself is killed (meson's timeout).
 *
 * The check is relative, never a wall-clock threshold: the ticker's worst
 * gap, less the time its worker thread waited for a CPU (the kernel's run
 * delay: the OS's noise, not the clients'), must stay below 10 sessions'
 * worth of a worker's time in the same run (duration x workers / sessions).
 * Without the hooks a worker that runs a client is blocked for its whole
 * session, and the ticker waits for tens of them; with the hooks for a few
 * short turns of the others (real.c, verdict).  One session alone is timed
 * first and reported too.
 */
#ifndef WEFT_TEST_REAL_H
#define WEFT_TEST_REAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The server the test started, and what its clients need. */
struct real_env {
	char dir[64];	/* the throwaway directory (removed at the end) */
	int port;	/* the server's loopback port */
	pid_t pid;	/* the server */
	void *data;	/* the test's own */
};

struct real_test {
	const char *name;
	/* The server: starts it (real_spawn) and sets env->pid; returns 0, or
	 * -1 having said why on stderr. */
	int (*start)(struct real_env *env);
	/* Optional: whether the server, which accepts connections, is ready
	 * (asked every 10 ms until it is, for up to 60 s in all). */
	bool (*ready)(struct real_env *env);
	int stop_signal;	/* how the server is asked to stop */
	/* One client's whole session (connect, its round trips, close), in a
	 * coroutine; returns 0 with every reply checked, else -1 having said
	 * why on stderr. */
	int (*session)(struct real_env *env, unsigned client);
	unsigned clients;	/* concurrent sessions */
	size_t stack_size;	/* for the clients; 0: weft's default */
};

/* Exits 77 with "SKIP: name: why" on stderr. */
_Noreturn void real_skip(const char *name, const char *why);

/* The path of a PostgreSQL binary (/usr/lib/postgresql/N/bin/NAME, the
 * newest N; malloc'd), or NULL. */
char *real_pg_bin(const char *name);

/* Starts argv (argv[0] a path) with stdout and stderr in env->dir/log, as
 * the unprivileged user `nobody` when as_nobody and running as root, and
 * dying with this process; sets env->pid.  Returns 0, or -1. */
int real_spawn(struct real_env *env, char *const argv[], bool as_nobody);

/* Runs argv to completion as real_spawn would start it; 0 if it exited 0. */
int real_run_cmd(struct real_env *env, char *const argv[], bool as_nobody);

/* Makes env->dir owned by `nobody` when running as root. */
int real_give_dir(struct real_env *env);

/* The test: skips (77) unless every path in `needs` (NULL-terminated)
 * exists, then makes the directory, picks the port, starts the server,
 * waits until it accepts connections, runs the clients and the ticker in a
 * child, stops the server, removes the directory.  argv[1] "--unhooked":
 * built without libweft-hook, the run passes if every reply was right and
 * the ticker check failed (the workers were blocked: the proof that the
 * check can fail).  Returns the exit status for main. */
int real_main(const struct real_test *t, const char *const needs[], int argc, char **argv,
	      void *data);

#endif
