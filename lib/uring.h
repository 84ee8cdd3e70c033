/* SPDX-License-Identifier: MIT */
/*
 * uring.h — the I/O backend chosen at weft_init ($WEFT_IO, weft_config.io):
 * epoll, or io_uring where the kernel gives it (docs/tuning.md, WEFT_IO).
 */
#ifndef WEFT_URING_H
#define WEFT_URING_H

/*
 * Resolves the backend asked for (WEFT_IO_AUTO, WEFT_IO_EPOLL or
 * WEFT_IO_URING) and makes it the one in use: auto probes io_uring (a ring
 * set up with the flags wanted, the refused ones dropped one by one, and
 * every opcode needed supported) and takes epoll where the probe fails;
 * uring fails where it does: -errno (ENOSYS for a build without liburing or
 * a kernel without an opcode, else the setup's errno) after one stderr
 * line saying why.  0 on success.
 */
int weft__uring_select(int asked);

/* The backend in use: WEFT_IO_EPOLL or WEFT_IO_URING. */
int weft__uring_backend(void);

#endif
