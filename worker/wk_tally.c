/* wk_tally: the counts kept between the reporter's rounds and their writes
 * (see wk_tally.h). */
#include "wk_tally.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_finish.h"
#include "hr_log.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_stats.h"

/* The absolute value NEWER unless it is none (-1), then OLDER. */
static int64_t wk_tally_newest(int64_t older, int64_t newer)
{
    return newer >= 0 ? newer : older;
}

int wk_tally_merge(wk_tally *t, const wk_task_delta *d, bool older)
{
    wk_task_delta *e, lo, hi;
    size_t k;

    for (k = 0;
         k < t->deltas.n && (t->deltas.v[k].task != d->task || t->deltas.v[k].shard != d->shard);
         k++)
        ;
    if (k == t->deltas.n && hr_vec_push(&t->deltas, ((wk_task_delta){.task = d->task,
                                                                     .shard = d->shard,
                                                                     .sent = -1,
                                                                     .failed = -1,
                                                                     .throttled = -1,
                                                                     .retried = -1,
                                                                     .unregistered = -1,
                                                                     .opted_out = -1,
                                                                     .suppressed = -1})) != 0)
        return -1;
    e = &t->deltas.v[k];
    lo = older ? *d : *e;
    hi = older ? *e : *d;
    e->sent = wk_tally_newest(lo.sent, hi.sent);
    e->failed = wk_tally_newest(lo.failed, hi.failed);
    e->throttled = wk_tally_newest(lo.throttled, hi.throttled);
    e->retried = wk_tally_newest(lo.retried, hi.retried);
    e->unregistered = wk_tally_newest(lo.unregistered, hi.unregistered);
    e->opted_out = wk_tally_newest(lo.opted_out, hi.opted_out);
    e->suppressed = wk_tally_newest(lo.suppressed, hi.suppressed);
    e->cancelled = lo.cancelled > hi.cancelled ? lo.cancelled : hi.cancelled;
    e->expired = lo.expired > hi.expired ? lo.expired : hi.expired;
    return 0;
}

int wk_tally_count(wk_tally *t, int64_t task, const char *channel, wk_delivery status,
                   int64_t at_ms, const char *variant, int64_t n)
{
    int64_t minute = at_ms - at_ms % 60000;
    wk_series add = {
        .task = task, .minute_ms = minute, .n = n, .channel = channel, .status = status};

    for (size_t i = 0; i < t->series.n; i++) {
        wk_series *s = &t->series.v[i];

        if (s->task == task && s->minute_ms == minute && s->status == status &&
            s->channel == channel && strcmp(s->variant, variant) == 0) {
            s->n += n;
            return 0;
        }
    }
    snprintf(add.variant, sizeof add.variant, "%s", variant);
    return hr_vec_push(&t->series, add);
}

void wk_tally_add_fail(wk_tally *t, int64_t task, const char *why)
{
    for (size_t i = 0; i < t->nfails; i++)
        if (t->fails[i].task == task)
            return;
    if (t->nfails == WK_TALLY_FAILS)
        return;
    t->fails[t->nfails].task = task;
    snprintf(t->fails[t->nfails].why, sizeof t->fails[t->nfails].why, "%s", why);
    t->nfails++;
}

void wk_tally_giveback(wk_tally *t, wk_tally *older)
{
    for (size_t k = 0; k < older->deltas.n; k++)
        if (wk_tally_merge(t, &older->deltas.v[k], true) != 0)
            hr_log_error("reporter_counters_lost", "task=%" PRId64, older->deltas.v[k].task);
    for (size_t i = 0; i < older->nfails; i++)
        wk_tally_add_fail(t, older->fails[i].task, older->fails[i].why);
    for (size_t i = 0; i < older->series.n; i++) {
        const wk_series *s = &older->series.v[i];

        if (wk_tally_count(t, s->task, s->channel, s->status, s->minute_ms, s->variant, s->n) != 0)
            hr_log_error("reporter_series_lost", "task=%" PRId64, s->task);
    }
    wk_tally_clear(older);
}

bool wk_tally_empty(const wk_tally *t)
{
    return t->deltas.n == 0 && t->series.n == 0 && t->nfails == 0;
}

void wk_tally_clear(wk_tally *t)
{
    hr_vec_free(&t->deltas);
    hr_vec_free(&t->series);
    t->nfails = 0;
}

int wk_tally_write_counters(const wk_tally *t, hr_mysql *m, char *errstr, size_t errlen)
{
    const wk_task_delta *d = t->deltas.v;
    size_t nd = t->deltas.n, n = 0;
    hr_finish_raise_row *rows = calloc(nd + 1, sizeof *rows);
    int rc = -1;

    if (rows == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < nd; k++) {
        /* The worker does not count pulls: -1 leaves pulled as it is. */
        const hr_outcomes raised = {.sent = d[k].sent,
                                    .failed = d[k].failed,
                                    .throttled = d[k].throttled,
                                    .pulled = -1,
                                    .cancelled = d[k].cancelled,
                                    .retried = d[k].retried,
                                    .unregistered = d[k].unregistered,
                                    .expired = d[k].expired,
                                    .opted_out = d[k].opted_out,
                                    .suppressed = d[k].suppressed};

        /* A sharded task's shard row, then push_task the rows' sum; the
         * tasks of one set all in one statement. */
        if (d[k].shard == HR_SHARD_NONE)
            rows[n++] = (hr_finish_raise_row){d[k].task, raised};
        else if (hr_finish_raise_shard(m, d[k].task, d[k].shard, &raised, errstr, errlen) != 0)
            goto done;
    }
    rc = hr_finish_raise_batch(m, rows, n, errstr, errlen);
done:
    free(rows);
    return rc;
}

int wk_tally_write_series(const wk_tally *t, hr_mysql *m, char *errstr, size_t errlen)
{
    hr_stats_add *rows = malloc((t->series.n ? t->series.n : 1) * sizeof *rows);
    int rc = -1;

    if (rows == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < t->series.n; i++) {
        const wk_series *s = &t->series.v[i];

        /* The outcome's name in push_task_series: its event type's. */
        rows[i] = (hr_stats_add){.task = s->task,
                                 .channel = s->channel,
                                 .outcome = hr_event_type_name(wk_delivery_event_type(s->status)),
                                 .minute_ms = s->minute_ms,
                                 .n = s->n};
    }
    /* Every task's minutes in a statement per channel and outcome. */
    if (hr_stats_add_rows(m, rows, t->series.n, errstr, errlen) != 0)
        goto done;
    for (size_t i = 0; i < t->series.n; i++) {
        const wk_series *s = &t->series.v[i];
        const hr_variant_count vc = {
            .task = s->task, .key = s->variant, .outcome = rows[i].outcome, .n = s->n};

        if (s->variant[0] != '\0' && hr_variant_count_add(m, &vc, 1, errstr, errlen) != 0)
            goto done;
    }
    rc = 0;
done:
    free(rows);
    return rc;
}

int wk_tally_write_fails(const wk_tally *t, hr_mysql *m, char *errstr, size_t errlen)
{
    for (size_t i = 0; i < t->nfails; i++) {
        const wk_task_fail *f = &t->fails[i];
        int moved = hr_state_fail(m, f->task, HR_STATE_DISPATCHED, f->why, errstr, errlen);

        if (moved < 0)
            return -1;
        if (moved > 0)
            hr_log_warn("task_failed", "task=%" PRId64 " error=%s", f->task, f->why);
    }
    return 0;
}
