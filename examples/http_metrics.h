/* SPDX-License-Identifier: MIT */
/*
 * http_metrics.h — weft-http's routes besides "hello": GET /metrics (the
 * runtime's stats in the Prometheus text format, weft_stats_prometheus),
 * and load shedding: while the runtime's scheduling delay
 * (weft_sched_delay) is over $WEFT_HTTP_SHED_MS milliseconds (unset or 0:
 * never), every request is answered "503 Service Unavailable" at once,
 * CoDel-style: a standing queue is cut at its entry instead of growing.
 * Both answers close the connection.
 */
#ifndef WEFT_EXAMPLE_HTTP_METRICS_H
#define WEFT_EXAMPLE_HTTP_METRICS_H

#include <stdbool.h>

#include "http_proto.h"

/* Answers the request at the start of c->in on fd if it is one of these
 * routes: true then (the caller closes fd); false leaves c as it was. */
bool http_metrics_route(int fd, struct http_conn *c);

#endif
