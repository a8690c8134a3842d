/* hr_evpub: publishes events (hr_event.h) to events.topic, at least once.
 *
 * Every event gets a sequence number (1, 2, ...) in the order it was
 * published, and is kept, encoded, until Kafka confirmed it (its delivery
 * report, acks=all, idempotent producer); a report that failed puts it
 * back to be produced again (hr_evpub_retry), so an event is confirmed or
 * still held, never dropped quietly.  The watermark — every event up to
 * it confirmed — is what callers wait on: the worker holds a chunk's
 * acknowledgements until the events of their recipients are below it
 * (docs/architecture.md "Events"), a request of the dispatcher's API waits
 * for its one event (hr_evpub_wait).
 *
 * Bounds: at most events.queue_max events are held; an event published
 * beyond that (or one that cannot be encoded, or one to produce again
 * whose value finds no memory for its copy) is lost, counted in the stats,
 * and its number counts as confirmed so that nobody waits on it.
 * The worker never gets there (the events it holds are those of recipients
 * not yet acknowledged, at most its open chunks' members).
 *
 * Order: one uid's events are keyed alike, so they share a partition and
 * keep the order they were published in — unless a failed report sends one
 * again after later ones (the idempotent producer itself never reorders).
 *
 * Threads: any thread may publish, wait and read; the publisher's own
 * thread serves the delivery reports and calls the confirmed hook, which
 * must not block.  One mutex guards the slots; the
 * hook is called without it.  Libraries do not log: what went wrong is in
 * the stats and the hooks. */
#ifndef HR_EVPUB_H
#define HR_EVPUB_H

#include <stddef.h>
#include <stdint.h>

#include "hr_config.h"
#include "hr_event.h"
#include "hr_metrics.h"

typedef struct hr_evpub hr_evpub;

typedef struct hr_evpub_hooks {
    void *ctx;
    /* Every event up to UPTO is confirmed (the watermark moved); on the
     * publisher's thread.  May be NULL. */
    void (*confirmed)(void *ctx, uint64_t upto);
} hr_evpub_hooks;

typedef struct hr_evpub_stats {
    uint64_t published; /* confirmed by Kafka */
    uint64_t retried;   /* produced again after a failed report or a full local queue */
    uint64_t lost;      /* over queue_max, or not encodable: never published */
    uint64_t held;      /* published, not yet confirmed */
} hr_evpub_stats;

/* A publisher for CFG's events.topic (CFG must outlive it); HOOKS is
 * copied (NULL: none).  0, or -1 with ERRSTR. */
int hr_evpub_new(const hr_config *cfg, const hr_evpub_hooks *hooks, hr_evpub **out, char *errstr,
                 size_t errlen);
/* Encodes and produces EV; its sequence number (> 0).  A lost event (see
 * above) gets none: the answer is then the number of the last one before
 * it (0: none), which is what waiting on it means.  Never blocks. */
uint64_t hr_evpub_publish(hr_evpub *p, const hr_event *ev);
/* The watermark: every event numbered up to it is confirmed (or lost). */
uint64_t hr_evpub_confirmed(hr_evpub *p);
/* Waits until event SEQ is below the watermark, at most TIMEOUT_MS: 0, or
 * -1 when the time ran out. */
int hr_evpub_wait(hr_evpub *p, uint64_t seq, int timeout_ms);
/* Produces again the events whose report failed (or that found
 * librdkafka's queue full), at most once per EVPUB_RETRY_MS; call it now
 * and then (the worker's reporter every round, the dispatcher's tick). */
void hr_evpub_retry(hr_evpub *p);
void hr_evpub_stats_get(hr_evpub *p, hr_evpub_stats *out);
/* Registers herald_events_published_total, herald_events_retried_total,
 * herald_events_lost_total and herald_events_held in REG, read from P's
 * stats at scrape time (so stop serving REG before freeing P).  0, or -1
 * with ERRSTR. */
int hr_evpub_metrics(hr_evpub *p, hr_metrics *reg, char *errstr, size_t errlen);
/* Waits up to TIMEOUT_MS for the events still held to be confirmed, then
 * frees (what is still held then is lost, and counted before the free:
 * *LOST, when not NULL).  Accepts NULL. */
void hr_evpub_free(hr_evpub *p, int timeout_ms, uint64_t *lost);

#endif
