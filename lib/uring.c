/* SPDX-License-Identifier: MIT */
/*
 * uring.c — choosing the I/O backend at weft_init.
 *
 * io_uring is an option that must fall back cleanly: many kernels are too
 * old for the flags or opcodes weft wants, and many sandboxes refuse the
 * system calls outright (Docker's default seccomp profile answers EPERM;
 * kernel.io_uring_disabled).  So weft_init probes: it sets up a ring with
 * the setup flags wanted, dropping those the kernel refuses (EINVAL) one by
 * one, newest first (DEFER_TASKRUN needs SINGLE_ISSUER, so it goes first),
 * then asks the ring which opcodes it supports.  The flags kept are those
 * the workers' rings are to be set up with.
 *
 * The workers' rings are not built yet: under either backend, file I/O
 * goes through the offload pool (io.c, file_call) and sockets through the
 * shared epoll poller.  docs/tuning.md says so.
 */
#include "uring.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "weft.h"

#ifdef WEFT_HAVE_LIBURING
#include <liburing.h>
#endif

static int backend = WEFT_IO_EPOLL;

int weft__uring_backend(void)
{
	return backend;
}

#ifdef WEFT_HAVE_LIBURING
/* The setup flags wanted, oldest kernel first: the probe drops from the end
 * while the kernel says EINVAL. */
static const unsigned wanted_flags[] = {
	IORING_SETUP_SUBMIT_ALL,	/* a bad SQE does not stop the batch */
	IORING_SETUP_COOP_TASKRUN,	/* no IPI for completions: the worker reaps */
	IORING_SETUP_SINGLE_ISSUER,	/* only its worker submits */
	IORING_SETUP_DEFER_TASKRUN,	/* completions run when the worker asks */
};
enum { NFLAGS = sizeof wanted_flags / sizeof *wanted_flags, PROBE_ENTRIES = 8 };

/* The opcodes every file call needs (and the cancel of one in flight). */
static const struct { unsigned char op; const char *name; } needed_ops[] = {
	{ IORING_OP_READ, "IORING_OP_READ" },
	{ IORING_OP_WRITE, "IORING_OP_WRITE" },
	{ IORING_OP_ASYNC_CANCEL, "IORING_OP_ASYNC_CANCEL" },
};

static unsigned setup_flags;	/* the wanted flags the probe's kernel took */

/* Sets up ring with as many of wanted_flags as the kernel takes: 0, or the
 * setup's -errno (the flags left out are those refused). */
static int ring_setup(struct io_uring *ring, unsigned *flags)
{
	for (unsigned n = NFLAGS;; n--) {
		struct io_uring_params p;
		memset(&p, 0, sizeof p);
		for (unsigned i = 0; i < n; i++)
			p.flags |= wanted_flags[i];
		int r = io_uring_queue_init_params(PROBE_ENTRIES, ring, &p);
		if (r == 0)
			*flags = p.flags;
		if (r != -EINVAL || n == 0)
			return r;
	}
}

/* 0 if io_uring can be had; else -errno and *why. */
static int probe(const char **why)
{
	struct io_uring ring;
	int r = ring_setup(&ring, &setup_flags);
	if (r < 0) {
		*why = "io_uring_setup failed";
		return r;
	}
	struct io_uring_probe *p = io_uring_get_probe_ring(&ring);
	r = p ? 0 : -ENOMEM;
	*why = "io_uring_register(IORING_REGISTER_PROBE) failed";
	for (size_t i = 0; p && i < sizeof needed_ops / sizeof *needed_ops; i++) {
		if (!io_uring_opcode_supported(p, needed_ops[i].op)) {
			*why = needed_ops[i].name;
			r = -ENOSYS;
			break;
		}
	}
	io_uring_free_probe(p);
	io_uring_queue_exit(&ring);
	return r;
}
#else
static int probe(const char **why)
{
	*why = "weft was built without liburing";
	return -ENOSYS;
}
#endif

int weft__uring_select(int asked)
{
	backend = WEFT_IO_EPOLL;
	if (asked == WEFT_IO_EPOLL)
		return 0;
	const char *why = "";
	int r = probe(&why);
	if (r == 0) {
		backend = WEFT_IO_URING;
		return 0;
	}
	if (asked == WEFT_IO_AUTO)
		return 0;
	if (r == -ENOSYS && strncmp(why, "IORING_OP_", 10) == 0)
		fprintf(stderr, "weft: WEFT_IO=uring cannot be had: the kernel lacks %s\n", why);
	else if (r == -ENOSYS)
		fprintf(stderr, "weft: WEFT_IO=uring cannot be had: %s\n", why);
	else
		fprintf(stderr, "weft: WEFT_IO=uring cannot be had: %s: %s\n", why, strerror(-r));
	return r;
}
