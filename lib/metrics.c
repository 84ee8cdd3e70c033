/* SPDX-License-Identifier: MIT */
/*
 * metrics.c — the scheduler's latency histograms and delay estimate
 * (metrics.h): the timed dispatch and switch-out, weft_sched_delay,
 * weft_hist_bound and weft_stats_quantile.
 */
#include "metrics.h"

#include <errno.h>

#include "atomic.h"
#include "clock.h"
#include "coro.h"
#include "weft.h"
#include "worker.h"

unsigned weft__metrics_mask;
__thread unsigned weft__metrics_tick __attribute__((tls_model("initial-exec")));

/* Out of line and cold: the untimed path inlined at each stamp stays a
 * decrement and a branch. */
__attribute__((cold, noinline)) void weft__metrics_stamp(struct weft_co *co)
{
	weft__metrics_tick = weft__metrics_mask;
	co->ready_at = weft_now();
	co->timed = true;
}

/* The interval of the delay estimate closes at a timed dispatch that comes
 * WEFT__METRICS_INTERVAL_NS after it began: its least delay is published. */
static void delay_estimate(struct weft__worker *w, int64_t now, int64_t delay)
{
	if (w->delay_win_start && now - w->delay_win_start < WEFT__METRICS_INTERVAL_NS) {
		if (delay < w->delay_win_min)
			w->delay_win_min = delay;
		return;
	}
	if (w->delay_win_start) {
		at_store_i64(&w->delay_min_last, w->delay_win_min);
		at_store_i64(&w->delay_min_at, now);
	}
	w->delay_win_start = now;
	w->delay_win_min = delay;
}

void weft__metrics_dispatch(struct weft__worker *w, struct weft_co *co)
{
	co->timed = false;
	int64_t now = weft_now();
	int64_t delay = now - co->ready_at;
	weft__metrics_record(&w->delay, delay);
	delay_estimate(w, now, delay > 0 ? delay : 0);
	w->turn_at = now;
}

void weft__metrics_switch_out(struct weft__worker *w)
{
	weft__metrics_record(&w->turn, weft_now() - w->turn_at);
	w->turn_at = 0;
}

int64_t weft_sched_delay(void)
{
	if (!weft__rt_accepting())
		return 0;
	int64_t now = weft_now(), worst = 0;
	for (unsigned i = 0; i < weft__rt.nworkers; i++) {
		struct weft__worker *w = &weft__rt.workers[i];
		int64_t at = at_load_i64(&w->delay_min_at);
		int64_t d = at_load_i64(&w->delay_min_last);
		if (at && now - at < 2 * WEFT__METRICS_INTERVAL_NS && d > worst)
			worst = d;
	}
	return worst;
}

uint64_t weft_hist_bound(unsigned i)
{
	if (i >= WEFT_HIST_BUCKETS - 1)
		return UINT64_MAX;
	if (i < WEFT__METRICS_SUB)
		return i + 1;
	unsigned shift = (i - WEFT__METRICS_SUB) / WEFT__METRICS_SUB;
	unsigned sub = (i - WEFT__METRICS_SUB) % WEFT__METRICS_SUB;
	return (uint64_t)(WEFT__METRICS_SUB + sub + 1) << shift;
}

uint64_t weft_stats_quantile(const weft_hist *h, double q)
{
	if (!h || !(q >= 0 && q <= 1)) {
		errno = EINVAL;
		return UINT64_MAX;
	}
	if (!h->count)
		return 0;
	double r = q * (double)h->count;
	uint64_t rank = (uint64_t)r;
	if ((double)rank < r || rank == 0)
		rank++;
	uint64_t seen = 0;
	for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank)
			return weft_hist_bound(i);
	}
	return weft_hist_bound(WEFT_HIST_BUCKETS - 1);
}

