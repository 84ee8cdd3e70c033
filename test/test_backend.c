/* SPDX-License-Identifier: MIT */
/* The I/O backend's selection (WEFT_IO, weft_config.io): auto, epoll,
 * uring, bad values, and a kernel that refuses io_uring_setup (a seccomp
 * filter, as Docker's default profile is). */
#include "harness.h"
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coro_test.h"

/* weft_init(cfg) with stderr captured into out; returns weft_init's
 * result, *err its errno, *backend the backend in use (0 if it failed). */
static int init_backend(const weft_config *cfg, char *out, size_t size, int *err, int *backend)
{
	struct stderr_capture cap = stderr_capture_begin();
	int r = weft_init(cfg);
	*err = errno;
	stderr_capture_end(&cap, out, size);
	*backend = 0;
	if (r == 0) {
		weft_stats st = { .size = sizeof st };
		cr_assert_eq(weft_stats_get(&st), 0);
		cr_assert_eq(st.version, WEFT_STATS_VERSION);
		*backend = st.io_backend;
		cr_assert_eq(weft_shutdown(), 0);
	}
	return r;
}

/* The backend WEFT_IO=value gives (it must start, silently). */
static int backend_of_env(const char *value)
{
	char out[512];
	int err, backend;
	setenv("WEFT_IO", value, 1);
	int r = init_backend(NULL, out, sizeof out, &err, &backend);
	unsetenv("WEFT_IO");
	cr_assert_eq(r, 0, "WEFT_IO=%s: errno %d, \"%s\"", value, err, out);
	cr_assert_str_eq(out, "", "WEFT_IO=%s is silent", value);
	return backend;
}

/* Whether WEFT_IO=uring starts here (the kernel and the build allow it). */
static bool uring_available(void)
{
	char out[512];
	int err, backend;
	setenv("WEFT_IO", "uring", 1);
	int r = init_backend(NULL, out, sizeof out, &err, &backend);
	unsetenv("WEFT_IO");
	return r == 0;
}

Test(backend, epoll_is_epoll)
{
	cr_assert_eq(backend_of_env("epoll"), WEFT_IO_EPOLL);
	weft_config cfg = WEFT_CONFIG_INIT;
	cfg.io = WEFT_IO_EPOLL;
	char out[512];
	int err, backend;
	cr_assert_eq(init_backend(&cfg, out, sizeof out, &err, &backend), 0);
	cr_assert_eq(backend, WEFT_IO_EPOLL);
}

Test(backend, auto_takes_uring_where_it_can_be_had)
{
	int expected = uring_available() ? WEFT_IO_URING : WEFT_IO_EPOLL;
	cr_assert_eq(backend_of_env("auto"), expected);
	char out[512];
	int err, backend;
	unsetenv("WEFT_IO");
	cr_assert_eq(init_backend(NULL, out, sizeof out, &err, &backend), 0);
	cr_assert_eq(backend, expected, "auto is the default");
	weft_config cfg = WEFT_CONFIG_INIT;
	cfg.size = offsetof(weft_config, io);	/* a caller that predates the field */
	cr_assert_eq(init_backend(&cfg, out, sizeof out, &err, &backend), 0);
	cr_assert_eq(backend, expected, "a field past the caller's size is the default");
}

Test(backend, uring_where_it_can_be_had)
{
	if (!uring_available())
		cr_skip_test("io_uring cannot be had here (kernel, sandbox or build)");
	cr_assert_eq(backend_of_env("uring"), WEFT_IO_URING);
	/* the field wins over the environment */
	setenv("WEFT_IO", "epoll", 1);
	weft_config cfg = WEFT_CONFIG_INIT;
	cfg.io = WEFT_IO_URING;
	char out[512];
	int err, backend;
	int r = init_backend(&cfg, out, sizeof out, &err, &backend);
	unsetenv("WEFT_IO");
	cr_assert_eq(r, 0);
	cr_assert_eq(backend, WEFT_IO_URING);
}

Test(backend, bad_values)
{
	static const char *const bad[] = { "", "Uring", "io_uring", "epoll ", "1", "none" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char out[512];
		int err, backend;
		setenv("WEFT_IO", bad[i], 1);
		int r = init_backend(NULL, out, sizeof out, &err, &backend);
		unsetenv("WEFT_IO");
		cr_assert_eq(r, -1, "WEFT_IO=\"%s\" was accepted", bad[i]);
		cr_assert_eq(err, EINVAL);
		cr_assert_not_null(strstr(out, "WEFT_IO"), "stderr names it: \"%s\"", out);
		char *nl = strchr(out, '\n');
		cr_assert(nl && nl[1] == 0, "exactly one line: \"%s\"", out);
	}
	static const int bad_fields[] = { -1, 4, 1000 };
	for (size_t i = 0; i < sizeof bad_fields / sizeof *bad_fields; i++) {
		weft_config cfg = WEFT_CONFIG_INIT;
		cfg.io = bad_fields[i];
		errno = 0;
		cr_assert_eq(weft_init(&cfg), -1, "io = %d was accepted", bad_fields[i]);
		cr_assert_eq(errno, EINVAL);
	}
	cr_assert_eq(weft_worker_count(), 0, "nothing left running");
}

/* Makes io_uring_setup fail with EPERM in this process, as Docker's
 * default seccomp profile does, for rings of more than `entries` entries
 * (0: every ring); false where seccomp is not available. */
static bool refuse_io_uring_setup_over(unsigned entries)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, entries, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof f / sizeof *f, .filter = f };
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
	       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

/* Exit codes of the refused-setup child. */
enum { CHILD_OK = 0, CHILD_NO_SECCOMP = 10, CHILD_AUTO_NOT_EPOLL, CHILD_URING_STARTED,
       CHILD_URING_ERRNO, CHILD_URING_LINE };

static bool refuse_io_uring_setup(void)
{
	return refuse_io_uring_setup_over(0);
}

static int refused_setup_child(void)
{
	if (!refuse_io_uring_setup())
		return CHILD_NO_SECCOMP;
	char out[512];
	int err, backend;
	setenv("WEFT_IO", "auto", 1);
	if (init_backend(NULL, out, sizeof out, &err, &backend) != 0 || backend != WEFT_IO_EPOLL ||
	    out[0])
		return CHILD_AUTO_NOT_EPOLL;
	setenv("WEFT_IO", "uring", 1);
	if (init_backend(NULL, out, sizeof out, &err, &backend) == 0)
		return CHILD_URING_STARTED;
	if (err != EPERM)
		return CHILD_URING_ERRNO;
	char *nl = strchr(out, '\n');
	fprintf(stderr, "child's line: %s", out);
	if (!strstr(out, "WEFT_IO=uring") || !strstr(out, "io_uring_setup") || !nl || nl[1])
		return CHILD_URING_LINE;
	return CHILD_OK;
}

Test(backend, refused_setup_falls_back_under_auto_and_fails_under_uring)
{
	if (!uring_available())
		cr_skip_test("io_uring cannot be had here: nothing to refuse");
	fflush(NULL);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(refused_setup_child());
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "the child died: status %#x", status);
	if (WEXITSTATUS(status) == CHILD_NO_SECCOMP)
		cr_skip_test("seccomp filters cannot be installed here");
	cr_assert_eq(WEXITSTATUS(status), CHILD_OK, "the child failed step %d", WEXITSTATUS(status));
}

/* ---- a worker's ring refused where the probe's small one was not (a
 * memlock limit on kernels before 5.12 does that): auto still starts, on
 * uring's backend, the worker's file transfers going to the offload pool;
 * uring fails with one line naming the worker's ring. */

static void pread_main(void *arg)
{
	char path[] = "/tmp/weft-backend-XXXXXX", buf[4];
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	CHECK(write(fd, "abcd", 4) == 4);
	*(ssize_t *)arg = weft_pread(fd, buf, sizeof buf, 0, -1);
	CHECK(weft_close(fd) == 0);
}

enum { CHILD_AUTO_FAILED = 20, CHILD_PREAD, CHILD_WORKER_LINE };

static int refused_ring_child(void)
{
	if (!refuse_io_uring_setup_over(8))	/* the probe's ring has 8 entries */
		return CHILD_NO_SECCOMP;
	char out[512];
	int err, backend;
	setenv("WEFT_IO", "auto", 1);
	if (init_backend(NULL, out, sizeof out, &err, &backend) != 0 || out[0])
		return CHILD_AUTO_FAILED;
	ssize_t n = -1;
	if (weft_main(pread_main, &n, NULL) != 0 || n != 4)
		return CHILD_PREAD;
	setenv("WEFT_IO", "uring", 1);
	if (init_backend(NULL, out, sizeof out, &err, &backend) == 0)
		return CHILD_URING_STARTED;
	if (err != EPERM)
		return CHILD_URING_ERRNO;
	char *nl = strchr(out, '\n');
	fprintf(stderr, "child's line: %s", out);
	if (!strstr(out, "WEFT_IO=uring") || !strstr(out, "worker's io_uring_setup") || !nl || nl[1])
		return CHILD_WORKER_LINE;
	return CHILD_OK;
}

Test(backend, a_refused_worker_ring_leaves_auto_running_and_fails_uring)
{
	if (!uring_available())
		cr_skip_test("io_uring cannot be had here: nothing to refuse");
	fflush(NULL);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(refused_ring_child());
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "the child died: status %#x", status);
	if (WEXITSTATUS(status) == CHILD_NO_SECCOMP)
		cr_skip_test("seccomp filters cannot be installed here");
	cr_assert_eq(WEXITSTATUS(status), CHILD_OK, "the child failed step %d", WEXITSTATUS(status));
}
