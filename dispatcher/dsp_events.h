/* dsp_events: the dispatcher's events publisher (events.enabled;
 * docs/architecture.md "Events"), d->events: the events the dispatcher
 * decides — a pull (pulled), an engagement (opened, clicked: dsp_engage),
 * and the recipients a cancel or an expiry drops from the sets it holds
 * (cancelled, expired: dsp_drop).  The workers publish the rest from their
 * reporters.
 *
 * A request that publishes (a pull's ack, an open, a click) waits for
 * Kafka's confirmation before it changes anything, so the fact it records
 * has its event; a drop publishes its slices as drop_set.lua hands them
 * over and does not wait.  Any thread (hr_evpub is thread-safe). */
#ifndef DSP_EVENTS_H
#define DSP_EVENTS_H

#include <stdint.h>

#include "dsp.h"
#include "hr_event.h"
#include "hr_finish.h"

/* Starts the publisher when events.enabled (d->events, else NULL) and
 * registers its metrics.  0, or -1 (ERRSTR). */
int dsp_events_start(dsp *d, char *errstr, size_t errlen);
/* Waits (events.confirm_timeout_ms at most) for what is held, then frees;
 * the events still unconfirmed are logged as lost.  d->events may be NULL. */
void dsp_events_stop(dsp *d);
/* Produces again what failed (the tick). */
void dsp_events_retry(dsp *d);

/* Publishes EV and waits for Kafka's confirmation (events.confirm_timeout_ms):
 * 0 (also when events are off), or -1 when it did not come in time (the
 * event stays queued and goes when Kafka is back). */
int dsp_events_publish(dsp *d, const hr_event *ev);

/* The recipients a drop of task TASK takes, as events of TYPE (a drop's
 * hr_finish_dropped_fn context, dsp_events_dropped). */
typedef struct dsp_events_drop {
    dsp *d;
    int64_t task, due_ms;
    hr_event_type type;
    char channel[65];
} dsp_events_drop;

/* Fills *OUT for a drop of task TASK counted as OUTCOME (its channel and
 * due time read from push_task on M): 1, or 0 when events are off (nothing
 * to publish), -1 (ERRSTR). */
int dsp_events_drop_init(dsp *d, hr_mysql *m, int64_t task, hr_outcome outcome,
                         dsp_events_drop *out, char *errstr, size_t errlen);
/* hr_finish_dropped_fn: CTX a dsp_events_drop; publishes without waiting. */
void dsp_events_dropped(void *ctx, const uint64_t *uids, size_t n);

#endif
