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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic.h"
#include "clock.h"
#include "errors.h"
#include "loop.h"
#include "metrics.h"
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

static void read_hist(const struct weft__metrics_hist *src, weft_hist *o)
{
	o->count = 0;
	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++) {
		o->buckets[i] = at_load_64(&src->buckets[i]);
		o->count += o->buckets[i];
	}
	o->sum_ns = at_load_64(&src->sum);
}

static void add_hist(weft_hist *sum, const weft_hist *one)
{
	sum->count += one->count;
	sum->sum_ns += one->sum_ns;
	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
		sum->buckets[i] += one->buckets[i];
}

/* What w has queued now: its LIFO end, its FIFOs (racy loads: a gauge). */
static uint64_t worker_runnable(struct weft__worker *w)
{
	int64_t deque = at_load_i64(&w->deque.bottom) - at_load_i64(&w->deque.top);
	return (uint64_t)(deque > 0 ? deque : 0) + (at_load_ptr((void **)&w->runnext) != NULL) +
	       at_load_64(&w->ready.len) + at_load_64(&w->pinned.len) + at_load_64(&w->nyielders);
}

/* The histograms and gauges of s (version 3); running counts the workers
 * in a coroutine now. */
static void snapshot_sched(weft_stats *s, uint64_t *running)
{
	memset(&s->sched_delay, 0, sizeof s->sched_delay);
	memset(&s->turn_time, 0, sizeof s->turn_time);
	s->runnable = 0;
	*running = 0;
	for (unsigned i = 0; i < weft__rt.nworkers; i++) {
		struct weft__worker *w = &weft__rt.workers[i];
		weft_worker_sched one;
		one.runnable = worker_runnable(w);
		read_hist(&w->delay, &one.delay);
		read_hist(&w->turn, &one.turn);
		add_hist(&s->sched_delay, &one.delay);
		add_hist(&s->turn_time, &one.turn);
		s->runnable += one.runnable;
		*running += at_load_ptr((void **)&w->current) != NULL;
		if (s->per_worker_sched && i < s->per_worker_len)
			s->per_worker_sched[i] = one;
	}
	s->sched_sample = weft__metrics_mask + 1;
	s->inject_queued = at_load_64(&weft__rt.inject.len);
	s->stack_bytes = weft__co_census(s->parked_by, &s->stack_bytes_live);
	s->registered_fds = weft__loop_nfds();
}

/* ------------------------------------------------------ snapshots */

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
	struct weft__uring_counts rc;
	weft__uring_counts(&rc);
	s->ring_sqes = rc.sqes;
	s->ring_enters = rc.enters;
	s->ring_cqes = rc.cqes;
	s->ring_cancels = rc.cancels;
	s->poller = weft__loop_poller();
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
	uint64_t running;
	snapshot_sched(s, &running);
	/* neither running nor queued: parked (racy sums, clamped) */
	uint64_t busy = running + s->runnable + s->inject_queued;
	s->parked = s->live > busy ? s->live - busy : 0;
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
	if (out->size >= offsetof(weft_stats, sched_sample))	/* version 3 */
		s.per_worker_sched = out->per_worker_sched;
	snapshot(&s);
	memcpy(out, &s, out->size < sizeof s ? out->size : sizeof s);	/* only what fits */
	return 0;
}

/* The names of WEFT_PARK_* (WEFT_STATS=1's line, Prometheus's label). */
static const char *const park_causes[WEFT_PARK_CAUSES] = {
	[WEFT_PARK_IO] = "io", [WEFT_PARK_TIMER] = "timer", [WEFT_PARK_SYNC] = "sync",
	[WEFT_PARK_JOIN] = "join", [WEFT_PARK_OFFLOAD] = "offload",
};

/* weft_stats.poller's name (WEFT_POLLER's value; Prometheus's label). */
static const char *poller_name(int poller)
{
	return poller == WEFT_POLLER_WORKER ? "worker" : "shared";
}

static void print_hist(FILE *f, const char *name, const weft_hist *h)
{
	fprintf(f, "%-20s %14" PRIu64 " timed, p50 < %" PRIu64 " ns, p99 < %" PRIu64
		" ns, p99.9 < %" PRIu64 " ns\n", name, h->count, weft_stats_quantile(h, 0.5),
		weft_stats_quantile(h, 0.99), weft_stats_quantile(h, 0.999));
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
		PRIu64 " monitor wakeups, %s, %s poller\n",
		n, s.live, s.stacks_allocated, s.offload_calls, s.blocking_threads,
		s.blocking_threads_max, s.monitor_wakeups,
		s.io_backend == WEFT_IO_URING ? "io_uring" : "epoll", poller_name(s.poller));
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
	print_hist(f, "sched_delay", &s.sched_delay);
	print_hist(f, "turn_time", &s.turn_time);
	fprintf(f, "%-20s %14" PRIu64 " runnable, %" PRIu64 " parked:", "coroutines", s.runnable,
		s.parked);
	for (unsigned c = 0; c < WEFT_PARK_CAUSES; c++)
		fprintf(f, " %s %" PRIu64, park_causes[c], s.parked_by[c]);
	fprintf(f, "\n%-20s %14" PRIu64 " bytes, %" PRIu64 " of them in use by live coroutines\n",
		"stacks", s.stack_bytes, s.stack_bytes_live);
	fprintf(f, "%-20s %14" PRIu64 " SQEs, %" PRIu64 " submissions, %" PRIu64 " CQEs, %" PRIu64
		" cancels\n", "rings", s.ring_sqes, s.ring_enters, s.ring_cqes, s.ring_cancels);
	free(per);
}

/* ------------------------------------------------------ Prometheus */

/* An snprintf that appends: pos counts every byte asked for, so the
 * caller learns the size it needs however little room there was. */
struct out {
	char *buf;
	size_t len, pos;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t room = o->pos < o->len ? o->len - o->pos : 0;
	int n = vsnprintf(room ? o->buf + o->pos : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

static void put_metric(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP weft_%s %s\n# TYPE weft_%s %s\n", name, help, name, type);
}

/* Nanoseconds as seconds, exactly. */
static void put_seconds(struct out *o, uint64_t ns)
{
	put(o, "%" PRIu64 ".%09" PRIu64, ns / 1000000000u, ns % 1000000000u);
}

/* The buckets from 1 us up, cumulative, as Prometheus wants them: the
 * same set at every scrape, so that rates over them compare. */
enum { PROM_FIRST_NS = 1024 };

/* One histogram series; labels: "" or `worker="N"`. */
static void put_hist_series(struct out *o, const char *name, const char *labels, const weft_hist *h)
{
	const char *sep = *labels ? "," : "";
	const char *open = *labels ? "{" : "", *close = *labels ? "}" : "";
	uint64_t below = 0;
	for (unsigned i = 0; i < WEFT_HIST_BUCKETS - 1; i++) {
		below += h->buckets[i];
		if (weft_hist_bound(i) < PROM_FIRST_NS)
			continue;
		put(o, "weft_%s_bucket{%s%sle=\"", name, labels, sep);
		put_seconds(o, weft_hist_bound(i));
		put(o, "\"} %" PRIu64 "\n", below);
	}
	put(o, "weft_%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\nweft_%s_sum%s%s%s ", name, labels, sep,
	    h->count, name, open, labels, close);
	put_seconds(o, h->sum_ns);
	put(o, "\nweft_%s_count%s%s%s %" PRIu64 "\n", name, open, labels, close, h->count);
}

static void put_hist(struct out *o, const char *name, const char *help, const weft_hist *h)
{
	put_metric(o, name, "histogram", help);
	put_hist_series(o, name, "", h);
}

/* The entries of st->per_worker_sched that hold a worker. */
static unsigned workers_sched(const weft_stats *st)
{
	if (!st->per_worker_sched)
		return 0;
	return st->per_worker_len < st->workers ? st->per_worker_len : st->workers;
}

/* The family of one histogram of weft_worker_sched (at offset), a series
 * per worker. */
static void put_worker_hist(struct out *o, const weft_stats *st, const char *name, const char *help,
			    size_t offset)
{
	put_metric(o, name, "histogram", help);
	for (unsigned i = 0; i < workers_sched(st); i++) {
		char label[32];
		snprintf(label, sizeof label, "worker=\"%u\"", i);
		const char *one = (const char *)&st->per_worker_sched[i];
		put_hist_series(o, name, label, (const weft_hist *)(const void *)(one + offset));
	}
}

/* The per-worker series (weft_stats.per_worker_sched, where given): their
 * own families, so that summing a family never counts a value twice. */
static void put_per_worker(struct out *o, const weft_stats *st)
{
	unsigned n = workers_sched(st);
	if (!n)
		return;
	put_worker_hist(o, st, "worker_sched_delay_seconds", "The scheduling delay, per worker.",
			offsetof(weft_worker_sched, delay));
	put_worker_hist(o, st, "worker_turn_seconds", "The turn time, per worker.",
			offsetof(weft_worker_sched, turn));
	put_metric(o, "worker_runnable_coroutines", "gauge", "Coroutines queued on the worker.");
	for (unsigned i = 0; i < n; i++)
		put(o, "weft_worker_runnable_coroutines{worker=\"%u\"} %" PRIu64 "\n", i,
		    st->per_worker_sched[i].runnable);
}

static void put_gauge(struct out *o, const char *name, const char *help, uint64_t v)
{
	put_metric(o, name, "gauge", help);
	put(o, "weft_%s %" PRIu64 "\n", name, v);
}

size_t weft_stats_prometheus(const weft_stats *st, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };
	if (len)
		buf[0] = '\0';
	if (!st || st->size < sizeof *st || (!buf && len)) {
		errno = EINVAL;
		return 0;
	}
	put_hist(&o, "sched_delay_seconds",
		 "From a coroutine becoming runnable to its dispatch (the timed sample).",
		 &st->sched_delay);
	put_hist(&o, "turn_seconds", "From a timed dispatch to the coroutine's switch-out.",
		 &st->turn_time);
	put_gauge(&o, "sched_sample", "One runnable period in this many is timed.", st->sched_sample);
	put_gauge(&o, "workers", "Worker threads.", st->workers);
	put_gauge(&o, "live_coroutines", "Coroutines spawned and not finished.", st->live);
	put_gauge(&o, "runnable_coroutines", "Coroutines queued on the workers.", st->runnable);
	put_gauge(&o, "inject_queued_coroutines", "Coroutines queued by plain threads.", st->inject_queued);
	put_gauge(&o, "parked_coroutines", "Coroutines parked (waiting).", st->parked);
	put_metric(&o, "parked_by_cause_coroutines", "gauge", "Coroutines parked, by what they wait for.");
	for (unsigned c = 0; c < WEFT_PARK_CAUSES; c++)
		put(&o, "weft_parked_by_cause_coroutines{cause=\"%s\"} %" PRIu64 "\n", park_causes[c],
		    st->parked_by[c]);
	put_gauge(&o, "stacks", "Stacks held, in use or cached.", st->stacks_allocated);
	put_gauge(&o, "stack_bytes", "Bytes of the stacks held.", st->stack_bytes);
	put_gauge(&o, "stack_bytes_live", "Bytes of the stacks of live coroutines.",
		  st->stack_bytes_live);
	put_gauge(&o, "registered_fds", "Fds in the runtime's poller.", st->registered_fds);
	put_gauge(&o, "blocking_threads", "weft_offload helper threads alive.", st->blocking_threads);
	put_metric(&o, "poller_info", "gauge", "The poller in use (WEFT_POLLER), as its label.");
	put(&o, "weft_poller_info{poller=\"%s\"} 1\n", poller_name(st->poller));
	for (unsigned i = 0; i < NFIELDS; i++) {
		put(&o, "# TYPE weft_%s_total counter\nweft_%s_total %" PRIu64 "\n", fields[i].name,
		    fields[i].name, *field((weft_worker_stats *)&st->total, i));
	}
	put(&o, "# TYPE weft_offload_calls_total counter\nweft_offload_calls_total %" PRIu64
		"\n# TYPE weft_monitor_wakeups_total counter\nweft_monitor_wakeups_total %" PRIu64 "\n",
	    st->offload_calls, st->monitor_wakeups);
	put(&o, "# TYPE weft_ring_sqes_total counter\nweft_ring_sqes_total %" PRIu64
		"\n# TYPE weft_ring_enters_total counter\nweft_ring_enters_total %" PRIu64
		"\n# TYPE weft_ring_cqes_total counter\nweft_ring_cqes_total %" PRIu64
		"\n# TYPE weft_ring_cancels_total counter\nweft_ring_cancels_total %" PRIu64 "\n",
	    st->ring_sqes, st->ring_enters, st->ring_cqes, st->ring_cancels);
	put_per_worker(&o, st);
	return o.pos;
}
