/* SPDX-License-Identifier: MIT */
/*
 * stats.c — weft_stats_get and the WEFT_STATS=1 table.
 *
 * Every counter has one writer (its worker, the monitor, or a lock holder)
 * and is read here with plain atomic loads, so a snapshot never slows a
 * worker down: there is no shared counter line on any hot path.  The only
 * cross-counter promise is finished <= spawned: all `finished` counters are
 * read before all `spawned` ones, with an acquire fence between, and a
 * coroutine's spawn is counted before it can run (weft_spawn).
 */
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic.h"
#include "errors.h"
#include "monitor.h"
#include "offload.h"
#include "stack.h"
#include "uring.h"
#include "weft.h"
#include "worker.h"

static void read_worker(struct weft__worker *w, weft_worker_stats *o)
{
	const struct weft__counters *c = &w->c;
	*o = (weft_worker_stats){
		.finished = at_load_64(&c->finished),
		.dispatches = at_load_64(&c->dispatches),
		.steals = at_load_64(&c->steals),
		.steal_attempts = at_load_64(&c->steal_attempts),
		.parks = at_load_64(&c->parks),
		.wakeups = at_load_64(&c->wakeups),
		.sleeps = at_load_64(&c->sleeps),
		.polls = at_load_64(&c->polls),
		.ready_events = at_load_64(&c->ready_events),
		.timers_fired = at_load_64(&w->timers.fired),
		.lifo_hits = at_load_64(&c->lifo_hits),
		.inject_pops = at_load_64(&c->inject_pops),
		.ready_pops = at_load_64(&c->ready_pops),
		.stack_cache_hits = at_load_64(&w->stacks.hits),
		.stack_cache_misses = at_load_64(&w->stacks.misses),
		.stalls = at_load_64(&c->stalls),
	};
}

/* The counters in weft_worker_stats, in order, for summing and printing. */
static const struct { const char *name; size_t offset; } fields[] = {
#define F(n) { #n, offsetof(weft_worker_stats, n) }
	F(spawned), F(finished), F(dispatches), F(steals), F(steal_attempts),
	F(parks), F(wakeups), F(sleeps), F(polls), F(ready_events),
	F(timers_fired), F(lifo_hits), F(inject_pops), F(ready_pops),
	F(stack_cache_hits), F(stack_cache_misses), F(stalls),
#undef F
};
enum { NFIELDS = sizeof fields / sizeof fields[0] };
_Static_assert(NFIELDS * sizeof(uint64_t) == sizeof(weft_worker_stats), "every counter is listed");

static uint64_t *field(weft_worker_stats *s, unsigned i)
{
	return (uint64_t *)(void *)((char *)s + fields[i].offset);
}

static void add(weft_worker_stats *sum, weft_worker_stats *one)
{
	for (unsigned i = 0; i < NFIELDS; i++)
		*field(sum, i) += *field(one, i);
}

/* Fills s (per_worker as given); the runtime must be running. */
static void snapshot(weft_stats *s)
{
	unsigned n = weft__rt.nworkers;
	weft_worker_stats sum = { 0 };
	for (unsigned i = 0; i < n; i++) {
		weft_worker_stats one;
		read_worker(&weft__rt.workers[i], &one);
		add(&sum, &one);
		if (s->per_worker && i < s->per_worker_len)
			s->per_worker[i] = one;
	}
	at_fence_acquire();	/* finished above, spawned below */
	sum.spawned = at_load_64(&weft__rt.ext_spawned);
	for (unsigned i = 0; i < n; i++) {
		uint64_t sp = at_load_64(&weft__rt.workers[i].c.spawned);
		sum.spawned += sp;
		if (s->per_worker && i < s->per_worker_len)
			s->per_worker[i].spawned = sp;
	}
	sum.wakeups += at_load_64(&weft__rt.ext_wakeups);
	s->monitor_wakeups = weft__monitor_wakeups();
	s->io_backend = weft__uring_backend();
	struct weft__offload_stats off;
	weft__offload_stats(&off);
	s->version = WEFT_STATS_VERSION;
	s->workers = n;
	s->total = sum;
	s->live = sum.spawned - sum.finished;
	s->stacks_allocated = weft__stack_pool_allocated();
	s->offload_calls = off.calls;
	s->blocking_threads = off.threads;
	s->blocking_threads_max = off.threads_max;
}

/* The size of version 1, the smallest a caller may pass. */
enum { STATS_V1_SIZE = offsetof(weft_stats, monitor_wakeups) };

int weft_stats_get(weft_stats *out)
{
	if (!out || out->size < STATS_V1_SIZE)
		return weft__err_fail(EINVAL);
	if (!weft__rt_accepting())
		return weft__err_fail(ESRCH);
	weft_stats s = { .size = out->size, .per_worker = out->per_worker,
			 .per_worker_len = out->per_worker_len };
	snapshot(&s);
	memcpy(out, &s, out->size < sizeof s ? out->size : sizeof s);	/* only what fits */
	return 0;
}

void weft__stats_print(FILE *f)
{
	unsigned n = weft__rt.nworkers;
	weft_worker_stats *per = calloc(n, sizeof *per);
	if (!per)
		return;
	weft_stats s = { .size = sizeof s, .per_worker = per, .per_worker_len = n };
	snapshot(&s);
	fprintf(f, "weft stats: %u workers, %" PRIu64 " live coroutines, %" PRIu64
		" stacks allocated, %" PRIu64 " offloaded calls on %u/%u helper threads, %"
		PRIu64 " monitor wakeups, %s\n",
		n, s.live, s.stacks_allocated, s.offload_calls, s.blocking_threads,
		s.blocking_threads_max, s.monitor_wakeups,
		s.io_backend == WEFT_IO_URING ? "io_uring" : "epoll");
	fprintf(f, "%-20s %14s", "counter", "total");
	for (unsigned w = 0; w < n; w++)
		fprintf(f, " %12s%-2u", "worker ", w);
	fputc('\n', f);
	for (unsigned i = 0; i < NFIELDS; i++) {
		fprintf(f, "%-20s %14" PRIu64, fields[i].name, *field(&s.total, i));
		for (unsigned w = 0; w < n; w++)
			fprintf(f, " %14" PRIu64, *field(&per[w], i));
		fputc('\n', f);
	}
	free(per);
}
