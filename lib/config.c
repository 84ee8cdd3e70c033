/* SPDX-License-Identifier: MIT */
/*
 * config.c — resolving weft_config against the environment and defaults.
 *
 * Precedence: an explicit non-zero field of weft_config (of those its size
 * covers), else the environment variable, else the default.  Environment
 * values are parsed strictly: decimal digits (and, for sizes, one k/m/g
 * suffix), nothing else; text, zero, out-of-range values and trailing junk
 * are EINVAL with one stderr line naming the variable and its valid range.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"

static int bad_env(const char *name, const char *value, const char *range)
{
	fprintf(stderr, "weft: %s=\"%s\" is invalid: expected %s\n", name, value, range);
	return -EINVAL;
}

/* Digits, then an optional k/m/g suffix when `scaled`; false on anything else. */
static bool parse_u64(const char *s, bool scaled, uint64_t *out)
{
	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return false;
	unsigned shift = 0;
	if (scaled && *end) {
		switch (tolower((unsigned char)*end)) {
		case 'k': shift = 10; break;
		case 'm': shift = 20; break;
		case 'g': shift = 30; break;
		default: return false;
		}
		end++;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

/* Reads name into *out if set: 0 unset, 1 set, -EINVAL invalid (reported). */
static int env_u64(const char *name, bool scaled, uint64_t min, uint64_t max,
		   const char *range, uint64_t *out)
{
	const char *s = getenv(name);
	if (!s)
		return 0;
	uint64_t v;
	if (!parse_u64(s, scaled, &v) || v < min || v > max)
		return bad_env(name, s, range);
	*out = v;
	return 1;
}

/* ceil(quota / period) of a cgroup v2 cpu.max file, 0 when unlimited. */
static unsigned read_cpu_max(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char quota[32];
	unsigned long long period = 0;
	unsigned cpus = 0;
	if (fscanf(f, "%31s %llu", quota, &period) == 2 && strcmp(quota, "max") != 0 && period) {
		unsigned long long q = strtoull(quota, NULL, 10);
		cpus = (unsigned)((q + period - 1) / period);
		if (cpus == 0)
			cpus = 1;
	}
	fclose(f);
	return cpus;
}

/* The tightest cpu.max quota on the path from our cgroup to the root. */
static unsigned cgroup_cpu_limit(void)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	if (!f)
		return 0;
	char line[4096], path[4096 + 64];
	unsigned limit = 0;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		line[strcspn(line, "\n")] = 0;
		char *rel = line + 3;
		for (;;) {
			snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max",
				 strcmp(rel, "/") == 0 ? "" : rel);
			unsigned c = read_cpu_max(path);
			if (c && (!limit || c < limit))
				limit = c;
			char *slash = strrchr(rel, '/');
			if (!slash || slash == rel)
				break;
			*slash = 0;
		}
		if (strcmp(rel, "/") != 0) {
			unsigned c = read_cpu_max("/sys/fs/cgroup/cpu.max");
			if (c && (!limit || c < limit))
				limit = c;
		}
	}
	fclose(f);
	return limit;
}

unsigned weft__config_default_workers(void)
{
	cpu_set_t mask;
	unsigned n = 1;
	if (sched_getaffinity(0, sizeof mask, &mask) == 0)
		n = (unsigned)CPU_COUNT(&mask);
	else
		n = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	unsigned quota = cgroup_cpu_limit();
	if (quota && quota < n)
		n = quota;
	if (n < 1)
		n = 1;
	return n > WEFT__CONFIG_WORKERS_MAX ? WEFT__CONFIG_WORKERS_MAX : n;
}

size_t weft__config_page_round(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (n + page - 1) & ~(page - 1);
}

/* Copies the fields of *cfg that lie wholly within cfg->size into *c (whose
 * other fields stay 0): a caller built against an older, smaller weft_config
 * gets the defaults for the fields it does not know, and one built against a
 * later, larger one has the fields this library does not know ignored. */
static int config_copy(const weft_config *cfg, weft_config *c)
{
	*c = (weft_config)WEFT_CONFIG_INIT;
	if (!cfg)
		return 0;
	if (cfg->size < sizeof cfg->size)
		return -EINVAL;
#define COPY_IF_COVERED(f) \
	if (cfg->size >= offsetof(weft_config, f) + sizeof c->f) \
		memcpy(&c->f, (const char *)cfg + offsetof(weft_config, f), sizeof c->f)
	COPY_IF_COVERED(workers);
	COPY_IF_COVERED(stack_size);
	COPY_IF_COVERED(pin);
	COPY_IF_COVERED(io);
	COPY_IF_COVERED(poller);
#undef COPY_IF_COVERED
	return 0;
}

/* The variable name, one of names[first..last] (NULL entries skipped),
 * into *out as its index if set: 0 unset, 1 set, -EINVAL invalid
 * (reported with range). */
static int env_choice(const char *name, const char *const *names, int first, int last,
		      const char *range, int *out)
{
	const char *s = getenv(name);
	if (!s)
		return 0;
	for (int i = first; i <= last; i++) {
		if (names[i] && strcmp(s, names[i]) == 0) {
			*out = i;
			return 1;
		}
	}
	return bad_env(name, s, range);
}

static const char *const io_names[] = {
	[WEFT_IO_AUTO] = "auto", [WEFT_IO_EPOLL] = "epoll", [WEFT_IO_URING] = "uring",
};
static const char *const poller_names[] = {
	[WEFT_POLLER_SHARED] = "shared", [WEFT_POLLER_WORKER] = "worker",
};

int weft__config_resolve(const weft_config *in, struct weft__config_settings *out)
{
	weft_config cfg;
	if (config_copy(in, &cfg) != 0)
		return -EINVAL;
	if (cfg.workers > WEFT__CONFIG_WORKERS_MAX || cfg.pin < -1 || cfg.pin > 1 ||
	    cfg.io < 0 || cfg.io > WEFT_IO_URING || cfg.poller < 0 || cfg.poller > WEFT_POLLER_WORKER ||
	    (cfg.stack_size && (cfg.stack_size < WEFT__CONFIG_STACK_MIN || cfg.stack_size > WEFT__CONFIG_STACK_MAX)))
		return -EINVAL;

	/* Every variable is validated even when a field overrides it: a typo in
	 * the environment is reported, not silently ignored. */
	uint64_t workers = 0, stack = 0, pin = 0;
	int rw = env_u64("WEFT_WORKERS", false, 1, WEFT__CONFIG_WORKERS_MAX, "an integer in 1..1024", &workers);
	int rs = env_u64("WEFT_STACK_SIZE", true, WEFT__CONFIG_STACK_MIN, WEFT__CONFIG_STACK_MAX,
			 "bytes in 16k..1g (optional k, m or g suffix)", &stack);
	int rp = env_u64("WEFT_PIN", false, 0, 1, "0 or 1", &pin);
	uint64_t guards = 0;
	int rg = env_u64("WEFT_STACK_GUARDS", false, 0, 1u << 30, "an integer in 0..1073741824", &guards);
	uint64_t blocking = WEFT__CONFIG_BLOCKING_THREADS_DEFAULT, stall = WEFT__CONFIG_STALL_MS_DEFAULT, stats = 0;
	int rb = env_u64("WEFT_BLOCKING_THREADS", false, 1, WEFT__CONFIG_BLOCKING_THREADS_MAX,
			 "an integer in 1..4096", &blocking);
	int rl = env_u64("WEFT_STALL_MS", false, 0, WEFT__CONFIG_STALL_MS_MAX,
			 "milliseconds in 0..3600000 (0 disables)", &stall);
	int rt = env_u64("WEFT_STATS", false, 0, 1, "0 or 1", &stats);
	uint64_t sockets = 0;
	int ru = env_u64("WEFT_URING_SOCKETS", false, 0, 1, "0 or 1", &sockets);
	uint64_t sample = WEFT__CONFIG_SCHED_SAMPLE_DEFAULT;
	int rm = env_u64("WEFT_SCHED_SAMPLE", false, 1, WEFT__CONFIG_SCHED_SAMPLE_MAX,
			 "a power of two in 1..65536", &sample);
	if (rm > 0 && (sample & (sample - 1)))
		rm = bad_env("WEFT_SCHED_SAMPLE", getenv("WEFT_SCHED_SAMPLE"), "a power of two in 1..65536");
	int io = WEFT_IO_AUTO;
	int ri = env_choice("WEFT_IO", io_names, WEFT_IO_AUTO, WEFT_IO_URING, "auto, epoll or uring", &io);
	int poller = WEFT_POLLER_SHARED;
	int ro = env_choice("WEFT_POLLER", poller_names, WEFT_POLLER_SHARED, WEFT_POLLER_WORKER,
			    "shared or worker", &poller);
	if (rw < 0 || rs < 0 || rp < 0 || rg < 0 || rb < 0 || rl < 0 || rt < 0 || rm < 0 || ri < 0 ||
	    ro < 0 || ru < 0)
		return -EINVAL;
	out->sched_sample = (unsigned)sample;
	out->io = cfg.io ? cfg.io : io;
	out->poller = cfg.poller ? cfg.poller : poller;
	out->stack_guards = rg ? (long)guards : -1;
	out->blocking_threads = (unsigned)blocking;
	out->stall_ms = (unsigned)stall;
	out->stats = stats != 0;
	out->uring_sockets = sockets != 0;

	out->workers = cfg.workers ? cfg.workers : rw ? (unsigned)workers
						      : weft__config_default_workers();
	out->stack_size = weft__config_page_round(cfg.stack_size ? cfg.stack_size
				    : rs ? (size_t)stack : (size_t)WEFT__CONFIG_STACK_DEFAULT);
	out->pin = cfg.pin ? cfg.pin : (rp && pin) ? 1 : -1;
	return 0;
}
