/* hk_endpoint: the event webhooks herald-hooks delivers to (push_hook
 * rows, re-read every events.hooks.reload_ms) and what each has waiting.
 *
 * Each endpoint splits the events it wants (its types filter; none =
 * every type, also types added later) over events.hooks.inflight_max
 * lanes, a uid's always in lane uid % inflight_max.  Each lane is a FIFO
 * with at most one delivery in flight: its first events.hooks.batch_max
 * events, sent when that many wait or the oldest has waited
 * events.hooks.batch_ms.  A delivery that fails (no 2xx, a timeout) is
 * sent again, the same batch, after the lane's back-off (retry_backoff_ms
 * doubling to retry_max_backoff_ms); a batch still failing after
 * retry_for_ms is dead-lettered (push_hook_dead) and the lane's next one
 * goes.  An endpoint failing without a success for disable_after_ms is
 * disabled (push_hook.state, disabled_reason, logged hook_disabled,
 * herald_hook_disabled_total; the alert HeraldEventHookDisabled watches
 * herald_hooks_disabled) and its lanes dead-lettered; a disabled
 * endpoint's events are dead-lettered as they come.  An endpoint that
 * holds the reading back (enabled, its secret usable, not failing for
 * retry_for_ms) never overflows: the loop reads no more events than its
 * fullest lane has room for (a lane's share of events.hooks.queue_max,
 * hk_endpoints_room), so Kafka holds what a slower endpoint has not taken
 * yet; any other endpoint's events beyond that share are dead-lettered.
 * Each endpoint keeps at most dead_letter_max (then dropped, counted).
 * Dead letters marked for a redrive are claimed and delivered (oldest
 * first, a batch at a time, on a lane of their own) while the endpoint is
 * enabled and every lane idle.
 *
 * Order: one uid's events reach an endpoint in the order they were
 * published (the events topic is keyed by uid, so one uid's events are in
 * one partition, read in order; one lane per uid, a FIFO; a lane's batch
 * is retried before its next one goes; other lanes' batches, other uids',
 * overtake it) — except across a dead letter: a batch given up, and the
 * events dead-lettered by overflow or while disabled, arrive later, when
 * redriven.
 *
 * Loop thread only; MySQL through the given connection (borrowed). */
#ifndef HK_ENDPOINT_H
#define HK_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "hk_event.h"
#include "hk_http.h"
#include "hk_metrics.h"
#include "hr_config.h"
#include "hr_mysql.h"

typedef struct hk_endpoints hk_endpoints;

/* A table for CFG (which must outlive it) on M; OWNER names this process
 * in dead-letter claims; MET and OFFSETS are borrowed.  NULL when out of
 * memory. */
hk_endpoints *hk_endpoints_new(const hr_config *cfg, const char *owner, hr_mysql *m,
                               hk_metrics *met, hk_offsets *offsets);
/* Puts every event still held and frees (deliveries in flight are the
 * caller's to stop first: hk_http_free).  Accepts NULL. */
void hk_endpoints_free(hk_endpoints *es);
/* The HTTP client's done callback: CTX is the endpoint. */
void hk_endpoints_answered(void *ctx, const hk_http_result *res);
/* Re-reads push_hook when due (NOW_MS); 0, or -1 (ERRSTR) when MySQL
 * failed (the table stays as it was). */
int hk_endpoints_reload(hk_endpoints *es, int64_t now_ms, char *errstr, size_t errlen);
/* Queues EV (its read time READ_MS) for every endpoint that wants it,
 * each taking a ref. */
void hk_endpoints_dispatch(hk_endpoints *es, hk_event *ev, int64_t read_ms);
/* Starts the deliveries that are due on HTTP, and dead-letters what must
 * be. */
void hk_endpoints_pump(hk_endpoints *es, hk_http *http, int64_t now_ms);
/* How many events may be read (NOW_MS) before a lane of an endpoint that
 * holds the reading back (enabled, not failing for retry_for_ms) holds its
 * share of events.hooks.queue_max: 0 = none now; SIZE_MAX when no
 * endpoint bounds it. */
size_t hk_endpoints_room(const hk_endpoints *es, int64_t now_ms);
/* Whether push_hook was read at least once: before, an event read would
 * have no endpoint and be finished without being delivered. */
bool hk_endpoints_loaded(const hk_endpoints *es);
/* Events held by endpoints (queued or in flight). */
size_t hk_endpoints_held(const hk_endpoints *es);

#endif
