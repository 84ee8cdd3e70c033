/* SPDX-License-Identifier: MIT */
/*
 * real.c — the real functions behind the hooks: the next definition of each
 * name after this library in the lookup order (dlsym(RTLD_NEXT)), libc's
 * or a sanitizer's interceptor.  Looked up by a constructor, and on the
 * first use by whoever calls earlier.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hook.h"

struct weft__hook_real weft__hook_real;

/* Stores dlsym(RTLD_NEXT, name) into *slot; a missing one is fatal: a hook
 * with nothing behind it cannot do its job. */
static void resolve_one(void **slot, const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);
	if (!f) {
		static const char msg[] = "libweft-hook: a libc function is missing\n";
		if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0)
			abort();
		abort();
	}
	__atomic_store_n(slot, f, __ATOMIC_RELEASE);
}

#define RESOLVE(f) resolve_one((void **)&weft__hook_real.f, #f)

void weft__hook_resolve(void)
{
	RESOLVE(read);
	RESOLVE(write);
	RESOLVE(readv);
	RESOLVE(writev);
	RESOLVE(recv);
	RESOLVE(recvfrom);
	RESOLVE(recvmsg);
	RESOLVE(send);
	RESOLVE(sendto);
	RESOLVE(sendmsg);
	RESOLVE(socket);
	RESOLVE(socketpair);
	RESOLVE(pipe);
	RESOLVE(pipe2);
	RESOLVE(accept);
	RESOLVE(accept4);
	RESOLVE(connect);
	RESOLVE(close);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(fcntl);
	RESOLVE(ioctl);
	RESOLVE(poll);
	RESOLVE(ppoll);
	RESOLVE(select);
	RESOLVE(sleep);
	RESOLVE(usleep);
	RESOLVE(nanosleep);
	RESOLVE(clock_nanosleep);
	RESOLVE(getaddrinfo);
	RESOLVE(gethostbyname);
	RESOLVE(gethostbyname_r);
	RESOLVE(sigaction);
}

__attribute__((constructor)) static void resolve_at_load(void)
{
	weft__hook_resolve();
}
