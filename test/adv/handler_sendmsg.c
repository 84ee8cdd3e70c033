/* Adversarial repro (issue 44 hooks review): sendmsg (async-signal-safe in
 * POSIX) from a signal handler, on a socket the hooks track (made in a
 * coroutine, believed blocking).  When the send is partial, io.c's
 * iov_rest mallocs the rest of the iovec (and finish frees it) inside the
 * handler: if the handler interrupted malloc or free, the thread deadlocks
 * on the arena's lock.  A plain thread mallocs and frees in a loop;
 * another signals it; its handler sends 100 iovecs of 4000 bytes (more
 * than the socket buffer: partial); a third thread drains the peer.
 * Usage: handler_sendmsg [send|sendmsg]   (exit 0: ok, 1: deadlock)
 *   send: the control (one buffer, no iovec copy)
 * Build: see test/adv/README.md. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weft.h"

enum { NIOV = 100, PIECE = 4000 };

static int sv[2];
static int use_sendmsg = 1;
static volatile unsigned long loops, handled;
static volatile int stop, kicked, finished;
static pthread_t looper;
static char data[NIOV * PIECE];

static void on_usr1(int sig)
{
	(void)sig;
	struct iovec iov[NIOV];
	for (int i = 0; i < NIOV; i++)
		iov[i] = (struct iovec){ data + i * PIECE, PIECE };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = NIOV };
	if (use_sendmsg)
		sendmsg(sv[0], &m, 0);
	else
		send(sv[0], data, sizeof data, 0);
	handled++;
}

static void *loop(void *arg)
{
	(void)arg;
	while (!stop) {
		void *p = malloc(4000 + (loops & 255));
		free(p);
		loops++;
	}
	finished = 1;
	return NULL;
}

static void *drain(void *arg)
{
	(void)arg;
	static char buf[1 << 16];
	for (;;)
		if (read(sv[1], buf, sizeof buf) <= 0)
			return NULL;
}

static void *kicker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 3000; i++) {
		pthread_kill(looper, SIGUSR1);
		usleep(300);
	}
	kicked = 1;
	return NULL;
}

static void body(void *arg)
{
	(void)arg;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)	/* tracked */
		exit(2);
	int small = 16384;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "send") == 0)
		use_sendmsg = 0;
	signal(SIGUSR1, on_usr1);
	if (weft_init(&WEFT_CONFIG(.workers = 1)) != 0)
		return 3;
	weft_join(weft_spawn(body, NULL));
	pthread_t k, d;
	pthread_create(&d, NULL, drain, NULL);
	pthread_create(&looper, NULL, loop, NULL);
	pthread_create(&k, NULL, kicker, NULL);
	unsigned long last = ~0ul;
	for (int still = 0; !finished; ) {
		if (kicked)
			stop = 1;
		sleep(1);
		if (loops == last && ++still >= 5) {
			fprintf(stderr, "HANG: the looping thread made no progress for 5 s "
				"(%lu loops, %lu handled)\n", loops, handled);
			_exit(1);
		}
		if (loops != last)
			still = 0;
		last = loops;
	}
	fprintf(stderr, "ok: %lu loops, %lu handled\n", loops, handled);
	_exit(0);
}
