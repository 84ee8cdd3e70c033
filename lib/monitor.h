/*
 * monitor.h — the monitor thread: it keeps a stuck worker's loop served.
 */
#ifndef WEFT_MONITOR_H
#define WEFT_MONITOR_H

int weft__monitor_start(void);
void weft__monitor_stop(void);
/* A worker left its sleep: wakes the monitor if it sleeps without a tick. */
void weft__monitor_worker_awake(void);

#endif
