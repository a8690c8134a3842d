/* dsp_events: the dispatcher's events publisher (see dsp_events.h). */
#include "dsp_events.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "hr_clock.h"
#include "hr_evpub.h"
#include "hr_log.h"

/* How long the stop waits for the events still held. */
#define DSP_EVENTS_STOP_MS 5000

struct dsp_events {
    hr_evpub *pub;
};

int dsp_events_start(dsp *d, char *errstr, size_t errlen)
{
    struct dsp_events *ev;

    if (!d->cfg->events.enabled)
        return 0;
    if ((ev = calloc(1, sizeof *ev)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    if (hr_evpub_new(d->cfg, NULL, &ev->pub, errstr, errlen) < 0 ||
        hr_evpub_metrics(ev->pub, d->met.reg, errstr, errlen) < 0) {
        hr_evpub_free(ev->pub, 0, NULL);
        free(ev);
        return -1;
    }
    d->events = ev;
    return 0;
}

void dsp_events_stop(dsp *d)
{
    uint64_t lost = 0;

    if (d->events == NULL)
        return;
    hr_evpub_free(d->events->pub, DSP_EVENTS_STOP_MS, &lost);
    if (lost > 0)
        hr_log_error("events_lost", "count=%" PRIu64 " reason=kafka_unconfirmed_at_stop", lost);
    free(d->events);
    d->events = NULL;
}

void dsp_events_retry(dsp *d)
{
    if (d->events != NULL)
        hr_evpub_retry(d->events->pub);
}

int dsp_events_publish(dsp *d, const hr_event *ev)
{
    if (d->events == NULL)
        return 0;
    return hr_evpub_wait(d->events->pub, hr_evpub_publish(d->events->pub, ev),
                         d->cfg->events.confirm_timeout_ms);
}

int dsp_events_drop_init(dsp *d, hr_mysql *m, int64_t task, hr_outcome outcome,
                         dsp_events_drop *out, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(task)};
    hr_mysql_rows *rows = NULL;
    int rc = -1;

    if (d->events == NULL)
        return 0;
    if (hr_mysql_query(m,
                       "SELECT channel, CAST(UNIX_TIMESTAMP(due_at) * 1000 AS SIGNED) "
                       "FROM push_task WHERE id = ?",
                       p, 1, &rows, errstr, errlen) < 0)
        return -1;
    if (rows->nrows != 1) {
        snprintf(errstr, errlen, "task %" PRId64 " does not exist", task);
        goto done;
    }
    *out = (dsp_events_drop){.d = d,
                             .task = task,
                             .type = outcome == HR_OUTCOME_EXPIRED ? HR_EVENT_EXPIRED
                                                                   : HR_EVENT_CANCELLED};
    snprintf(out->channel, sizeof out->channel, "%s", hr_mysql_cell(rows, 0, 0));
    if (hr_mysql_cell(rows, 0, 1) != NULL)
        out->due_ms = strtoll(hr_mysql_cell(rows, 0, 1), NULL, 10);
    rc = 1;
done:
    hr_mysql_rows_free(rows);
    return rc;
}

void dsp_events_dropped(void *ctx, const uint64_t *uids, size_t n)
{
    const dsp_events_drop *drop = ctx;
    hr_event ev = {.type = drop->type,
                   .task = drop->task,
                   .channel = drop->channel,
                   .at_ms = hr_clock_now_ms(),
                   .due_ms = drop->due_ms};

    for (size_t i = 0; i < n; i++) {
        ev.uid = uids[i];
        hr_evpub_publish(drop->d->events->pub, &ev);
    }
}
