/* hk: herald-hooks, the daemon that delivers the events topic to signed
 * event webhooks (docs/architecture.md "Event webhooks").
 *
 * One thread runs the loop: it polls the Kafka consumer (group
 * events.hooks.group; several processes share the topic's partitions, one
 * uid's events in one partition), reads each record into an event
 * (hk_event; a repeat of an id inside the window is counted and skipped),
 * queues it for every endpoint that wants it (hk_endpoint), starts the
 * deliveries that are due (curl multi: hk_http), re-reads the endpoints
 * from MySQL every events.hooks.reload_ms, and stores each partition's
 * offset up to its first event not yet finished by every endpoint (the
 * consumer auto-commits what is stored).  It reads no more records than
 * the endpoints have room for (hk_endpoints_room) and pauses the assigned
 * partitions while there is none, so Kafka, not a dead letter, holds what
 * a slower endpoint has not taken yet.  A crash re-reads what was not
 * finished: at least once per endpoint; the receiver deduplicates on the
 * event id (the window here catches the repeats the publishers make).
 * SIGTERM/SIGINT: stop reading, let the deliveries in flight answer and
 * what is due go (at most HK_STOP_GRACE_MS), store the offsets, close the
 * consumer (which commits them), exit 0.
 *
 * Threads: the loop; librdkafka's own; libmicrohttpd's for the probes
 * (they read the metric registry and hk_metrics' atomics only).
 *
 * Layers (checked by scripts/check-graph):
 *   hk_metrics hk_http hk_store hk_event
 *   hk_body
 *   hk_endpoint
 *   hk */
#ifndef HK_H
#define HK_H

#include "hr_config.h"

/* The grace of a stop for the deliveries under way. */
#define HK_STOP_GRACE_MS 10000

/* Runs herald-hooks on CFG until a signal: 0, or 1 when it could not
 * start. */
int hk_run(const hr_config *cfg);

#endif
