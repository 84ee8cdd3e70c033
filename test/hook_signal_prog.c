/* SPDX-License-Identifier: MIT */
/*
 * hook_signal_prog.c — test_hook's signal scenarios, each in a process of
 * its own (they install handlers, fork, and hang when they fail): linked
 * with libweft-hook, run as `hook_signal_prog SCENARIO`.  Exits 0 when the
 * hooks behave as the kernel and glibc do, 1 (with a line on stderr) when
 * not, 2 when the scenario could not be set up; a scenario that cannot
 * decide here prints SKIP and its reason, and exits 77.  A hang is turned
 * into exit 1 by a watchdog whose wait is far beyond any correct run's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "weft.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"	/* sigset */

/* glibc exports it; its header declares it only for old X/Open. */
extern __sighandler_t bsd_signal(int sig, __sighandler_t handler);

enum { OK = 0, FAIL = 1, SETUP = 2, SKIPPED = 77, WATCHDOG_S = 20 };

/* Under ThreadSanitizer, whose own interceptors of signal and sigaction
 * answer the application (they keep their own copy of each action, and
 * reject nothing) before the hooks' are reached, and which runs an
 * asynchronous signal's handler late, at the thread's next interceptor. */
#if defined(__SANITIZE_THREAD__)
#define TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN 1
#endif
#endif

static int skip_under_tsan(const char *why)
{
#ifdef TSAN
	printf("SKIP: under ThreadSanitizer %s\n", why);
	return SKIPPED;
#else
	(void)why;
	return OK;
#endif
}

static const char *const TSAN_ANSWERS = "its interceptors of signal and sigaction answer first";

static void die(const char *what)
{
	perror(what);
	_exit(SETUP);
}

static void *watchdog(void *arg)
{
	sleep(WATCHDOG_S);
	fprintf(stderr, "HANG: %s\n", (const char *)arg);
	_exit(FAIL);
}

static void start_watchdog(const char *what)
{
	pthread_t t;
	if (pthread_create(&t, NULL, watchdog, (void *)what) != 0)
		die("pthread_create");
	pthread_detach(t);
}

static void handle(int sig, void (*fn)(int), int flags)
{
	struct sigaction sa = { .sa_handler = fn, .sa_flags = flags };
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0)
		die("sigaction");
}

/* ------------------------------------- an SA_NODEFER handler left by siglongjmp */

static sigjmp_buf env;
static int fds[2];

static void jump(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

/* SIGUSR1 raised here (the worker blocks it otherwise), its handler left
 * by siglongjmp. */
static void raise_and_jump(void)
{
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	weft_lock_thread();
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	if (sigsetjmp(env, 1) == 0)
		raise(SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	weft_unlock_thread();
}

static void write_later(void *arg)
{
	weft_sleep(weft_now() + 20 * 1000 * 1000);
	if (write(*(int *)arg, "x", 1) != 1)
		die("write");
}

/* A blocking read of a tracked pipe whose data a coroutine writes later:
 * it must park (one worker: blocking it would starve the writer). */
static void read_parks(void *arg)
{
	(void)arg;
	weft_co *w = weft_spawn(write_later, &fds[1]);
	char c;
	if (!w || read(fds[0], &c, 1) != 1)
		die("read");
	weft_join(w);
}

/* After the handler: another coroutine's read on that worker, then this
 * coroutine's own, each parks. */
static void nodefer_coroutine(void *arg)
{
	(void)arg;
	if (pipe(fds) != 0)	/* made in a coroutine: tracked */
		die("pipe");
	handle(SIGUSR1, jump, SA_NODEFER);
	raise_and_jump();
	weft_join(weft_spawn(read_parks, NULL));
	read_parks(NULL);
}

static int nodefer_in_coroutine(void)
{
	start_watchdog("a read after an SA_NODEFER handler left by siglongjmp blocked its worker");
	return weft_main(nodefer_coroutine, NULL, &WEFT_CONFIG(.workers = 1)) == 0 ? OK : SETUP;
}

/* A socket pair made in a coroutine, read after it had to wait (so
 * registered in weft). */
static void pair_and_wait(void *arg)
{
	(void)arg;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
		die("socketpair");
	read_parks(NULL);
}

/* A plain thread's close after the handler goes through weft: the next
 * socket of that number parks and wakes as a new one. */
static int nodefer_plain_close(void)
{
	if (weft_init(&WEFT_CONFIG(.workers = 2)) != 0)
		return SETUP;
	weft_join(weft_spawn(pair_and_wait, NULL));
	handle(SIGUSR1, jump, SA_NODEFER);
	if (sigsetjmp(env, 1) == 0)
		raise(SIGUSR1);
	close(fds[0]);
	close(fds[1]);
	start_watchdog("the next socket of a number a plain thread closed after an SA_NODEFER "
		       "handler never woke");
	weft_join(weft_spawn(pair_and_wait, NULL));
	weft_shutdown();
	return OK;
}

/* ------------------------------------ a handler interrupts a plain thread's loop */

/* A plain thread runs loop_body until told to stop while another signals
 * it SIGUSR1 `kicks` times; a loop that stops making progress for
 * WATCHDOG_S is a deadlock. */
static atomic_ulong loops, handled;
static atomic_int stop, finished;
static pthread_t looper;
static void (*loop_body)(void);

static void *loop(void *arg)
{
	(void)arg;
	while (!stop) {
		loop_body();
		loops++;
	}
	finished = 1;
	return NULL;
}

static int kick_loop(void (*body)(void), int kicks, unsigned gap_us)
{
	loop_body = body;
	if (pthread_create(&looper, NULL, loop, NULL) != 0)
		die("pthread_create");
	for (int i = 0; i < kicks; i++) {
		pthread_kill(looper, SIGUSR1);
		usleep(gap_us);
	}
	stop = 1;
	unsigned long last = loops;
	for (int still = 0; !finished; last = loops) {
		sleep(1);
		still = loops == last ? still + 1 : 0;
		if (still >= WATCHDOG_S) {
			fprintf(stderr, "HANG: the interrupted thread made no progress "
				"(%lu loops, %lu handled)\n", loops, handled);
			_exit(FAIL);
		}
	}
	pthread_join(looper, NULL);
	return OK;
}

static void make_pipe(void *arg)
{
	(void)arg;
	if (pipe(fds) != 0)	/* made in a coroutine: tracked */
		die("pipe");
}

static void dup_close(void)
{
	close(dup(fds[0]));
}

static void on_usr1_dup_close(int sig)
{
	(void)sig;
	int saved = errno;
	dup_close();
	handled++;
	errno = saved;
}

/* dup and close of a tracked fd in a handler installed by `how` (sigset
 * or bsd_signal), which interrupts the same on a plain thread (the fd
 * table's lock). */
static int close_in_handler(const char *how)
{
	/* TSan runs the handler late, from its own interceptor of the
	 * interrupted thread's next call: with clang's runtime the scene's
	 * thread then makes no progress, which judges TSan, not the hooks */
	if (skip_under_tsan("runs the handler late, at the thread's next interceptor"))
		return SKIPPED;
	if (strcmp(how, "sigset") == 0)
		sigset(SIGUSR1, on_usr1_dup_close);
	else
		bsd_signal(SIGUSR1, on_usr1_dup_close);
	if (weft_init(&WEFT_CONFIG(.workers = 1)) != 0)
		return SETUP;
	weft_join(weft_spawn(make_pipe, NULL));
	return kick_loop(dup_close, 3000, 200);
}

static void on_usr1_fork(int sig)
{
	(void)sig;
	int saved = errno;
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	if (p > 0)
		waitpid(p, NULL, 0);
	handled++;
	errno = saved;
}

static int fork_in_handler(void)
{
	/* TSan runs the handler late, from an interceptor: from the one that
	 * gives back the fd table's signal mask, the fork's prepare handler
	 * then waits for the lock its own thread holds */
	if (skip_under_tsan("runs the handler late, at the thread's next interceptor"))
		return SKIPPED;
	signal(SIGUSR1, on_usr1_fork);
	if (weft_init(&WEFT_CONFIG(.workers = 1)) != 0)
		return SETUP;
	weft_join(weft_spawn(make_pipe, NULL));
	return kick_loop(dup_close, 1000, 500);
}

/* sendmsg of more than the socket takes at once, in a handler that
 * interrupts malloc and free. */
enum { NIOV = 100, PIECE = 4000 };
static char data[NIOV * PIECE];

static void on_usr1_sendmsg(int sig)
{
	(void)sig;
	struct iovec iov[NIOV];
	for (int i = 0; i < NIOV; i++)
		iov[i] = (struct iovec){ data + i * PIECE, PIECE };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = NIOV };
	int saved = errno;
	if (sendmsg(fds[0], &m, 0) != (ssize_t)sizeof data)
		_exit(SETUP);
	handled++;
	errno = saved;
}

static void malloc_free(void)
{
	void *volatile p = malloc(4000 + (loops & 255));	/* not optimised away */
	free(p);
}

static void *drain(void *arg)
{
	(void)arg;
	static char buf[1 << 16];
	while (read(fds[1], buf, sizeof buf) > 0)
		;
	return NULL;
}

static void small_pair(void *arg)
{
	(void)arg;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)	/* tracked */
		die("socketpair");
	int small = 16384;
	setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
}

static int sendmsg_in_handler(void)
{
	signal(SIGUSR1, on_usr1_sendmsg);
	if (weft_init(&WEFT_CONFIG(.workers = 1)) != 0)
		return SETUP;
	weft_join(weft_spawn(small_pair, NULL));
	pthread_t d;
	if (pthread_create(&d, NULL, drain, NULL) != 0)
		die("pthread_create");
	return kick_loop(malloc_free, 2000, 300);
}

/* ------------------------------------------------ what the old action says */

static volatile int caught;

static void count(int sig)
{
	(void)sig;
	caught++;
}

static void count_info(int sig, siginfo_t *i, void *c)
{
	(void)sig;
	(void)i;
	(void)c;
	caught++;
}

/* Each of glibc's calls that installs a handler returns the application's
 * handler, and handing it back installs that handler. */
static int old_handlers(void)
{
	void (*(*calls[])(int, void (*)(int)))(int) = { sysv_signal, bsd_signal, sigset,
							   signal };
	const char *names[] = { "sysv_signal", "bsd_signal", "sigset", "signal" };
	for (int i = 0; i < 4; i++) {
		signal(SIGUSR1, count);
		void (*saved)(int) = calls[i](SIGUSR1, SIG_IGN);
		if (saved != count) {
			fprintf(stderr, "%s returned another function than the handler\n",
				names[i]);
			return FAIL;
		}
		signal(SIGUSR1, saved);
		caught = 0;
		raise(SIGUSR1);
		if (caught != 1) {
			fprintf(stderr, "the handler %s returned, reinstalled: caught %d\n",
				names[i], caught);
			return FAIL;
		}
	}
	return OK;
}

static int signal_answers(void)
{
	if (skip_under_tsan(TSAN_ANSWERS))
		return SKIPPED;
	errno = 0;
	void (*p)(int) = signal(SIGUSR1, SIG_ERR);
	if (p != SIG_ERR || errno != EINVAL) {
		fprintf(stderr, "signal(SIG_ERR): not SIG_ERR/EINVAL (errno %d)\n", errno);
		return FAIL;
	}
	struct sigaction a = { .sa_sigaction = count_info, .sa_flags = SA_SIGINFO | SA_RESETHAND },
			 o;
	sigemptyset(&a.sa_mask);
	if (sigaction(SIGUSR1, &a, NULL) != 0 || raise(SIGUSR1) != 0 ||
	    sigaction(SIGUSR1, NULL, &o) != 0)
		return SETUP;
	a.sa_handler = count;	/* the trampoline's SA_SIGINFO must not show */
	a.sa_flags = SA_RESETHAND;
	if (sigaction(SIGUSR1, &a, NULL) != 0 || raise(SIGUSR1) != 0 ||
	    sigaction(SIGUSR1, NULL, &o) != 0)
		return SETUP;
	if (o.sa_handler != SIG_DFL || (o.sa_flags & SA_SIGINFO)) {
		fprintf(stderr, "after an SA_RESETHAND delivery: %s, flags %#x\n",
			o.sa_handler == SIG_DFL ? "SIG_DFL" : "not SIG_DFL", o.sa_flags);
		return FAIL;
	}
	return caught == 2 ? OK : SETUP;
}

static int fork_errno(void)
{
	if (skip_under_tsan("with a suppressions file, errno is ENOENT after fork in the "
			    "parent (where it is set is not yet traced)"))
		return SKIPPED;
	errno = 0;
	pid_t p = fork();
	int e = errno;
	if (p == 0)
		_exit(e);
	int st;
	if (p < 0 || waitpid(p, &st, 0) != p)
		return SETUP;
	if (e || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "errno after a fork: parent %d, child %d\n", e,
			WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return FAIL;
	}
	return OK;
}

/* --------------------------------------------------- concurrent sigaction */

static void h2(int s, siginfo_t *i, void *c)
{
	(void)s;
	(void)i;
	(void)c;
}

/* A spinning barrier for three threads: the installers leave it within
 * nanoseconds of each other. */
static unsigned arrived, generation;
static long rounds;

static void barrier(void)
{
	unsigned g = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
	if (__atomic_add_fetch(&arrived, 1, __ATOMIC_ACQ_REL) == 3) {
		__atomic_store_n(&arrived, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&generation, g + 1, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(&generation, __ATOMIC_ACQUIRE) == g)
		sched_yield();
}

static void *installer(void *arg)
{
	struct sigaction a = { .sa_handler = count, .sa_flags = SA_RESTART };
	sigemptyset(&a.sa_mask);
	if (arg) {
		a.sa_sigaction = h2;
		a.sa_flags = SA_SIGINFO;
		sigaddset(&a.sa_mask, SIGUSR2);
	}
	for (long i = 0; i < rounds; i++) {
		barrier();
		sigaction(SIGUSR1, &a, NULL);
		barrier();
		barrier();	/* the main thread checks */
	}
	return NULL;
}

/* Two threads install their own action at once: afterwards it is one
 * thread's whole, as the kernel's sigaction makes it. */
static int sigaction_race(void)
{
	if (skip_under_tsan(TSAN_ANSWERS))
		return SKIPPED;
	rounds = 300000;
	pthread_t t1, t2;
	if (pthread_create(&t1, NULL, installer, NULL) != 0 ||
	    pthread_create(&t2, NULL, installer, &t1) != 0)
		die("pthread_create");
	long bad = 0;
	for (long i = 0; i < rounds; i++) {
		barrier();
		barrier();
		struct sigaction o;
		sigaction(SIGUSR1, NULL, &o);
		bool siginfo = o.sa_flags & SA_SIGINFO, restart = o.sa_flags & SA_RESTART;
		bool usr2 = sigismember(&o.sa_mask, SIGUSR2);
		bool ok = o.sa_handler == count ? !siginfo && restart && !usr2
						: o.sa_sigaction == h2 && siginfo && !restart && usr2;
		bad += !ok;
		barrier();
	}
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	if (bad)
		fprintf(stderr, "%ld of %ld rounds left a mixed action\n", bad, rounds);
	return bad ? FAIL : OK;
}

/* ------------------------------------------------ EINTR from the call's start */

/* A plain thread's blocking read of a tracked pipe, interrupted by a
 * handler without SA_RESTART: EINTR, as the kernel's read, whenever the
 * handler ran inside the call.  The handler records the code it
 * interrupted; the rounds where that was the call's first attempt or its
 * timeout query (libc's read or getsockopt, which the hooks call once the
 * call has begun) decide, the others are ended by a byte written at once.
 * A decided read the signal did not end is ended by a byte written
 * WATCHDOG_S later, and fails. */
static pthread_t reader_thread;
static int about_to_read, round_done;	/* __atomic builtins */
static atomic_long result, err;
static _Atomic(void *) interrupted;
static int noted;	/* __atomic builtins */

static void on_usr1_note(int sig, siginfo_t *info, void *ctx)
{
	(void)sig;
	(void)info;
#if defined(__x86_64__)
	interrupted = (void *)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	interrupted = (void *)((ucontext_t *)ctx)->uc_mcontext.pc;
#else
	(void)ctx;
#endif
	__atomic_store_n(&noted, 1, __ATOMIC_SEQ_CST);
}

static void *reader(void *arg)
{
	(void)arg;
	for (long i = 0; i < rounds; i++) {
		char c;
		while (__atomic_load_n(&round_done, __ATOMIC_SEQ_CST))
			;
		__atomic_store_n(&about_to_read, 1, __ATOMIC_SEQ_CST);
		ssize_t n = read(fds[0], &c, 1);
		result = n;
		err = n < 0 ? errno : 0;
		__atomic_store_n(&round_done, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void spin_ns(long ns)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

/* Where pc lies: in the call's first attempt or timeout query (libc's
 * read or getsockopt: 0), in its poll (1: the signal came late), else
 * (-1: early). */
static int landed(void *pc)
{
	Dl_info di;
	if (!pc || !dladdr(pc, &di) || !di.dli_fname || !di.dli_sname ||
	    !strstr(di.dli_fname, "libc.so"))
		return -1;
	const char *s = di.dli_sname;
	while (*s == '_')
		s++;
	if (strcmp(s, "read") == 0 || strcmp(s, "libc_read") == 0 ||
	    strcmp(s, "getsockopt") == 0)
		return 0;
	return strstr(s, "poll") ? 1 : -1;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int eintr_from_start(void)
{
	if (skip_under_tsan("a handler runs late, at the thread's next interceptor: the "
			    "read it should end may be over, the test waits for it"))
		return SKIPPED;
	struct sigaction sa = { .sa_sigaction = on_usr1_note, .sa_flags = SA_SIGINFO };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		die("sigaction");
	if (weft_init(&WEFT_CONFIG(.workers = 1)) != 0)
		return SETUP;
	weft_join(weft_spawn(make_pipe, NULL));
	rounds = 1000;
	if (pthread_create(&reader_thread, NULL, reader, NULL) != 0)
		die("pthread_create");
	long decided = 0, delay = 500;	/* ns: steered towards the first attempt */
	srand(1);
	for (long i = 0; i < rounds; i++) {
		while (!__atomic_load_n(&about_to_read, __ATOMIC_SEQ_CST))
			;
		about_to_read = 0;
		interrupted = NULL;
		noted = 0;
		spin_ns(delay + rand() % 200);
		pthread_kill(reader_thread, SIGUSR1);
		while (!__atomic_load_n(&noted, __ATOMIC_SEQ_CST))
			sched_yield();
		int where = landed(interrupted);
		bool decides = where == 0;
		delay = where < 0 ? delay + 20 : where > 0 && delay >= 20 ? delay - 20 : delay;
		if (!decides && write(fds[1], "x", 1) != 1)
			die("write");
		bool rescued = false;
		for (double t0 = now_s(); !__atomic_load_n(&round_done, __ATOMIC_SEQ_CST);) {
			if (!rescued && now_s() - t0 > WATCHDOG_S) {
				rescued = true;
				if (write(fds[1], "x", 1) != 1)
					die("write");
			}
			sched_yield();
		}
		int left = 0;
		char buf[2];
		if (ioctl(fds[0], FIONREAD, &left) != 0 || (left && read(fds[0], buf, left) != left))
			die("drain");
		if (decides && !(result == -1 && err == EINTR)) {
			fprintf(stderr, "round %ld: a read interrupted in its first attempt "
				"lost its EINTR (%s)\n", i, result == 1 ? "it read data" : "error");
			return FAIL;
		}
		decided += decides;
		__atomic_store_n(&round_done, 0, __ATOMIC_SEQ_CST);
	}
	pthread_join(reader_thread, NULL);
	if (!decided) {
		printf("SKIP: no signal landed in a read's first attempt in %ld rounds\n", rounds);
		return SKIPPED;
	}
	printf("%ld of %ld rounds decided: each read ended on EINTR\n", decided, rounds);
	return OK;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} plain[] = {
		{ "nodefer-coroutine", nodefer_in_coroutine },
		{ "nodefer-plain-close", nodefer_plain_close },
		{ "fork-in-handler", fork_in_handler },
		{ "sendmsg-in-handler", sendmsg_in_handler },
		{ "old-handlers", old_handlers },
		{ "signal-answers", signal_answers },
		{ "fork-errno", fork_errno },
		{ "sigaction-race", sigaction_race },
		{ "eintr-from-start", eintr_from_start },
	};
	if (argc == 3 && strcmp(argv[1], "close-in-handler") == 0)
		return close_in_handler(argv[2]);
	for (size_t i = 0; argc == 2 && i < sizeof plain / sizeof plain[0]; i++)
		if (strcmp(argv[1], plain[i].name) == 0)
			return plain[i].fn();
	fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
	return SETUP;
}
