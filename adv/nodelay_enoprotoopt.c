/* SPDX-License-Identifier: MIT */
/*
 * weft_accept on a stream socket that is not TCP and not Unix.
 * weft__io_nodelay treats only EOPNOTSUPP (a Unix socket's answer) as "not
 * TCP"; other families answer setsockopt(IPPROTO_TCP, TCP_NODELAY) with
 * ENOPROTOOPT: AF_VSOCK (vsock_connectible_setsockopt: a level other than
 * AF_VSOCK or SOL_SOCKET), TIPC, SCTP's one-to-one sockets (ip_setsockopt
 * for level 6), AF_ALG's operation sockets.  weft_accept then closes the
 * connection it accepted and fails with ENOPROTOOPT, for every connection:
 * a vsock server (a VM guest's agent) loses every client.
 *
 * Part 1 shows the kernel's answer on this machine (AF_VSOCK exists in this
 * VM but has no loopback transport, so no vsock connection can be made
 * here).  Part 2 makes it on a loopback TCP connection: this program
 * interposes setsockopt (libweft calls it through its PLT) and answers
 * ENOPROTOOPT for TCP_NODELAY, as a vsock socket does; the client then
 * reads end of file for the request it sent, and weft_accept fails.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "common.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

static int fake_vsock;	/* answer TCP_NODELAY as AF_VSOCK does */

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	static int (*real)(int, int, int, const void *, socklen_t);
	if (!real)
		real = (int (*)(int, int, int, const void *, socklen_t))dlsym(RTLD_NEXT, "setsockopt");
	if (fake_vsock && level == IPPROTO_TCP && name == TCP_NODELAY) {
		errno = ENOPROTOOPT;
		return -1;
	}
	return real(fd, level, name, val, len);
}

static void probe(const char *what, int family, int type)
{
	int fd = socket(family, type, 0);
	if (fd < 0) {
		printf("  %-12s socket: %s\n", what, strerror(errno));
		return;
	}
	int one = 1;
	int r = setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	printf("  %-12s setsockopt(IPPROTO_TCP, TCP_NODELAY): %s\n", what, r == 0 ? "0" : strerror(errno));
	close(fd);
}

static int port;
static int listener;

static void client(void *arg)
{
	(void)arg;
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(weft_connect(c, (struct sockaddr *)&a, sizeof a, -1) == 0);
	CHECK(weft_write(c, "GET / HTTP/1.0\r\n\r\n", 18, -1) == 18);
	char b[64];
	ssize_t n = weft_read(c, b, sizeof b, weft_now() + 5000 * 1000 * 1000LL);
	printf("  client: sent a request; its read returned %zd (%s)\n", n,
	       n == 0 ? "end of file: the connection was closed" : n < 0 ? strerror(errno) : "data");
	CHECK(weft_close(c) == 0);
}

static void main_co(void *arg)
{
	(void)arg;
	listener = weft_listen("127.0.0.1", "0", 16, 0);
	CHECK(listener >= 0);
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	CHECK(getsockname(listener, (struct sockaddr *)&a, &len) == 0);
	port = ntohs(a.sin_port);
	weft_co *c = weft_spawn(client, NULL);
	fake_vsock = 1;
	int s = weft_accept(listener, NULL, NULL, -1);
	int e = errno;
	printf("  weft_accept: %d (%s)\n", s, s < 0 ? strerror(e) : "accepted");
	if (s >= 0)
		CHECK(weft_write(s, "HTTP/1.0 200 OK\r\n\r\n", 19, -1) == 19 && weft_close(s) == 0);
	CHECK(weft_join(c) == 0);
	CHECK(weft_close(listener) == 0);
	fake_vsock = 0;
	exit(s < 0 ? 1 : 0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("part 1: the kernel's answers here\n");
	probe("AF_INET", AF_INET, SOCK_STREAM);
	probe("AF_INET6", AF_INET6, SOCK_STREAM);
	probe("AF_UNIX", AF_UNIX, SOCK_STREAM);
	probe("AF_VSOCK", AF_VSOCK, SOCK_STREAM);
	printf("part 2: weft_accept where TCP_NODELAY answers ENOPROTOOPT (as AF_VSOCK's)\n");
	CHECK(weft_main(main_co, NULL, &WEFT_CONFIG(.workers = 1)) == 0);
	return 0;
}
