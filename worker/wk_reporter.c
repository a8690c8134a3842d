/* wk_reporter: bounded event ring drained into MySQL by one thread (see
 * wk_reporter.h for the contract and the thread hand-off).  What goes into
 * which table is written by wk_deliveries (push_delivery) and wk_chunkrows
 * (push_chunk); the counters, the task failures and the hand-off of the
 * events to their publisher (hr_evpub) are written here.
 *
 * The events' numbers: wk_reporter_push numbers them in the order the
 * loop pushed them, the thread publishes them in that order, and records
 * per round which publisher number its last event got (a lost event gets
 * the one before it: hr_evpub.h).  When the publisher's watermark passes a
 * round's number, every event of the round and before is confirmed. */
#include "wk_reporter.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hr_clock.h"
#include "hr_evpub.h"
#include "hr_finish.h"
#include "hr_log.h"
#include "hr_clock.h"
#include "hr_dlog.h"
#include "hr_stats.h"
#include "hr_mysql.h"
#include "hr_state.h"
#include "hr_vec.h"
#include "wk_chunkrows.h"
#include "wk_deliveries.h"

#define WK_REPORTER_FLUSH_MS 200
#define WK_REPORTER_BACKOFF_MAX_MS 5000
/* After a stop request, how long a MySQL outage may hold the exit. */
#define WK_REPORTER_STOP_GIVEUP_MS 30000
/* How long wk_reporter_push waits for ring room before it drops an outcome
 * row: the loop thread must keep renewing leases and polling Kafka. */
#define WK_REPORTER_PUSH_WAIT_MS 20
/* After a stop request, how long chunk ends still waiting for their
 * push_chunk row are written again before they are given up: the
 * dispatcher writes its rows every 10 ms tick, so a row that is not there
 * after this is late for another reason (see wk_chunkrows.h). */
#define WK_REPORTER_STOP_ROW_WAIT_MS 2000
/* Task failures waiting to be written (each is re-reported by the next
 * chunk of the task when this overflows). */
#define WK_REPORTER_FAILS 16
/* At a stop, how long the events still held wait for Kafka. */
#define WK_REPORTER_STOP_EVENTS_MS 10000

/* Counters of one task not yet written: sent .. retried absolute (-1 =
 * none), cancelled and expired absolute too, the largest seen (see wk_reporter.h). */
typedef struct wk_task_delta {
    int64_t task, sent, failed, throttled, retried, unregistered, opted_out, suppressed;
    int64_t cancelled, expired;
    int shard; /* HR_SHARD_NONE, or the shard of a sharded task */
} wk_task_delta;

typedef HR_VEC(wk_task_delta) wk_delta_vec;

/* Recipients of a task that got an outcome in one minute: a row of
 * push_task_series to add (hr_stats.h). */
typedef struct wk_series {
    int64_t task, minute_ms, n;
    const char *channel; /* the config's */
    wk_delivery status;
    /* the outcome event's variant: also a row of push_task_variant_count
     * to add when not "" */
    char variant[HR_VARIANT_KEY_MAX + 1];
} wk_series;
typedef HR_VEC(wk_series) wk_series_vec;
typedef HR_VEC(wk_event) wk_event_vec;

/* A round of events handed to the publisher: R, the reporter's number of
 * its last event, and E, the publisher's. */
typedef struct wk_ev_round {
    uint64_t r, e;
} wk_ev_round;
typedef HR_VEC(wk_ev_round) wk_ev_round_vec;

/* A task the worker cannot push, to be marked failed. */
typedef struct wk_task_fail {
    int64_t task;
    char why[256];
} wk_task_fail;

struct wk_reporter {
    const hr_config *cfg;
    bool delivery_log;
    size_t batch;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t has_work;
    pthread_cond_t has_room;
    wk_event *ring; /* outcome events only */
    size_t cap, head, count;
    /* Counters per task and chunk events wait here, not in the ring,
     * so they never wait for room and are never dropped. */
    wk_delta_vec deltas;
    wk_event_vec chunks;
    wk_series_vec series; /* the outcomes per task and minute, beside the ring too */
    wk_task_fail fails[WK_REPORTER_FAILS]; /* deduplicated by task; full = dropped */
    size_t nfails;
    bool stopping;
    /* Events (events.enabled): outcomes waiting for the publisher, and the
     * number the last one pushed got. */
    wk_event_vec evq;
    uint64_t ev_pushed;
    int64_t mysql_retry_ms; /* the thread's: no MySQL write before (a backoff) */

    /* The publisher and what the rounds handed to it wait for (ev_mu,
     * taken alone: the publisher's thread takes it in the confirmed hook). */
    hr_evpub *evpub;
    uint64_t ev_published; /* the thread's: events handed over */
    pthread_mutex_t ev_mu;
    wk_ev_round_vec rounds;
    _Atomic uint64_t ev_confirmed;
    wk_reporter_hooks hooks;

    /* The writers and the connection: the reporter thread's only, so the
     * mutex does not cover them. */
    wk_deliveries *deliveries;
    wk_chunkrows *chunkrows;
    hr_mysql *m;
    wk_metrics *met;
    bool mysql_down;
};

static int wk_reporter_write_counters(wk_reporter *rp, const wk_task_delta *d, size_t nd,
                                      char *errstr, size_t errlen)
{
    hr_finish_raise_row *rows = calloc(nd + 1, sizeof *rows);
    size_t n = 0;
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
        else if (hr_finish_raise_shard(rp->m, d[k].task, d[k].shard, &raised, errstr, errlen) != 0)
            goto done;
    }
    rc = hr_finish_raise_batch(rp->m, rows, n, errstr, errlen);
done:
    free(rows);
    return rc;
}

static int wk_reporter_write_fails(wk_reporter *rp, const wk_task_fail *f, size_t n, char *errstr,
                                   size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        int moved = hr_state_fail(rp->m, f[i].task, HR_STATE_DISPATCHED, f[i].why, errstr, errlen);

        if (moved < 0)
            return -1;
        if (moved > 0)
            hr_log_warn("task_failed", "task=%" PRId64 " error=%s", f[i].task, f[i].why);
    }
    return 0;
}

/* The event type of an outcome. */
static hr_event_type wk_reporter_event_type(wk_delivery status)
{
    static const hr_event_type types[] = {
        [WK_DELIVERY_SENT] = HR_EVENT_SENT,
        [WK_DELIVERY_FAILED] = HR_EVENT_FAILED,
        [WK_DELIVERY_THROTTLED] = HR_EVENT_THROTTLED,
        [WK_DELIVERY_UNREGISTERED] = HR_EVENT_UNREGISTERED,
        [WK_DELIVERY_OPTED_OUT] = HR_EVENT_OPTED_OUT,
        [WK_DELIVERY_SUPPRESSED] = HR_EVENT_SUPPRESSED,
        [WK_DELIVERY_EXPIRED] = HR_EVENT_EXPIRED,
        [WK_DELIVERY_CANCELLED] = HR_EVENT_CANCELLED,
    };

    return types[status];
}

/* The outcome's name in push_task_series: its event type's. */
static const char *wk_reporter_outcome_name(wk_delivery status)
{
    return hr_event_type_name(wk_reporter_event_type(status));
}

/* Adds the N per-minute counts S to push_task_series. */
static int wk_reporter_write_series(wk_reporter *rp, const wk_series *s, size_t n, char *errstr,
                                    size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const hr_stats_add row = {.task = s[i].task,
                                  .channel = s[i].channel,
                                  .outcome = wk_reporter_outcome_name(s[i].status),
                                  .minute_ms = s[i].minute_ms,
                                  .n = s[i].n};
        const hr_variant_count vc = {
            .task = s[i].task, .key = s[i].variant, .outcome = row.outcome, .n = s[i].n};

        if (hr_stats_add_rows(rp->m, &row, 1, errstr, errlen) != 0 ||
            (s[i].variant[0] != '\0' && hr_variant_count_add(rp->m, &vc, 1, errstr, errlen) != 0))
            return -1;
    }
    return 0;
}

/* Adds N recipients of TASK that got STATUS on CHANNEL in the minute of
 * AT_MS, with content VARIANT ("" for a task without variants), to
 * rp->series (caller holds the mutex); -1 when out of memory. */
static int wk_reporter_count(wk_reporter *rp, int64_t task, const char *channel, wk_delivery status,
                             int64_t at_ms, const char *variant, int64_t n)
{
    int64_t minute = at_ms - at_ms % 60000;
    wk_series add = {
        .task = task, .minute_ms = minute, .n = n, .channel = channel, .status = status};

    for (size_t i = 0; i < rp->series.n; i++) {
        wk_series *s = &rp->series.v[i];

        if (s->task == task && s->minute_ms == minute && s->status == status &&
            s->channel == channel && strcmp(s->variant, variant) == 0) {
            s->n += n;
            return 0;
        }
    }
    snprintf(add.variant, sizeof add.variant, "%s", variant);
    return hr_vec_push(&rp->series, add);
}

/* What one transaction writes: the first N ring events and the taken
 * deltas, chunk events and series counts. */
typedef struct wk_batch {
    size_t n;
    wk_delta_vec deltas;
    wk_event_vec chunks;
    wk_series_vec series;
    wk_task_fail fails[WK_REPORTER_FAILS];
    size_t nfails;
} wk_batch;

/* Writes batch B and the chunk ends waiting for their rows in one
 * transaction. */
static int wk_reporter_write(wk_reporter *rp, const wk_batch *b, char *errstr, size_t errlen)
{
    if (rp->m == NULL && hr_mysql_connect(rp->cfg, &rp->m, errstr, errlen) != 0)
        return -1;
    if (hr_mysql_begin(rp->m, errstr, errlen) != 0)
        goto fail;
    if ((rp->delivery_log && wk_deliveries_write(rp->deliveries, rp->m, rp->ring, rp->cap, rp->head,
                                                 b->n, errstr, errlen) != 0) ||
        wk_reporter_write_counters(rp, b->deltas.v, b->deltas.n, errstr, errlen) != 0 ||
        wk_reporter_write_series(rp, b->series.v, b->series.n, errstr, errlen) != 0 ||
        wk_chunkrows_write(rp->chunkrows, rp->m, b->chunks.v, b->chunks.n, errstr, errlen) != 0 ||
        wk_reporter_write_fails(rp, b->fails, b->nfails, errstr, errlen) != 0 ||
        hr_mysql_commit(rp->m, errstr, errlen) != 0) {
        hr_mysql_rollback(rp->m);
        goto fail;
    }
    wk_chunkrows_committed(rp->chunkrows);
    return 0;
fail:
    /* Rolled back: the waiting ends stay as they were. */
    wk_chunkrows_rolled_back(rp->chunkrows);
    /* A fresh connection next time: the old one may be half broken. */
    hr_mysql_free(rp->m);
    rp->m = NULL;
    return -1;
}

/* The absolute value NEWER unless it is none (-1), then OLDER. */
static int64_t wk_reporter_newest(int64_t older, int64_t newer)
{
    return newer >= 0 ? newer : older;
}

/* Adds the counters of task D into rp->deltas (caller holds the mutex):
 * D's absolute values replace the kept ones, unless D is OLDER (a failed
 * batch given back), whose values only fill in what nothing newer set;
 * -1 when out of memory. */
static int wk_reporter_merge(wk_reporter *rp, const wk_task_delta *d, bool older)
{
    wk_task_delta *e, lo, hi;
    size_t k;

    for (k = 0;
         k < rp->deltas.n && (rp->deltas.v[k].task != d->task || rp->deltas.v[k].shard != d->shard);
         k++)
        ;
    if (k == rp->deltas.n && hr_vec_push(&rp->deltas, ((wk_task_delta){.task = d->task,
                                                                       .shard = d->shard,
                                                                       .sent = -1,
                                                                       .failed = -1,
                                                                       .throttled = -1,
                                                                       .retried = -1,
                                                                       .unregistered = -1,
                                                                       .opted_out = -1,
                                                                       .suppressed = -1})) != 0)
        return -1;
    e = &rp->deltas.v[k];
    lo = older ? *d : *e;
    hi = older ? *e : *d;
    e->sent = wk_reporter_newest(lo.sent, hi.sent);
    e->failed = wk_reporter_newest(lo.failed, hi.failed);
    e->throttled = wk_reporter_newest(lo.throttled, hi.throttled);
    e->retried = wk_reporter_newest(lo.retried, hi.retried);
    e->unregistered = wk_reporter_newest(lo.unregistered, hi.unregistered);
    e->opted_out = wk_reporter_newest(lo.opted_out, hi.opted_out);
    e->suppressed = wk_reporter_newest(lo.suppressed, hi.suppressed);
    e->cancelled = lo.cancelled > hi.cancelled ? lo.cancelled : hi.cancelled;
    e->expired = lo.expired > hi.expired ? lo.expired : hi.expired;
    return 0;
}

/* Appends N chunk events to rp->chunks (caller holds the mutex). */
static int wk_reporter_add_chunks(wk_reporter *rp, const wk_event *evs, size_t n)
{
    if (hr_vec_reserve(&rp->chunks, rp->chunks.n + n) != 0)
        return -1;
    memcpy(rp->chunks.v + rp->chunks.n, evs, n * sizeof *evs);
    rp->chunks.n += n;
    return 0;
}

/* Takes the next batch (caller holds the mutex): ring events stay in the
 * ring until written, deltas and chunk events move to B. */
static void wk_reporter_take(wk_reporter *rp, wk_batch *b)
{
    b->n = rp->count < rp->batch ? rp->count : rp->batch;
    b->deltas = rp->deltas;
    b->chunks = rp->chunks;
    b->series = rp->series;
    rp->deltas = (wk_delta_vec){0};
    rp->chunks = (wk_event_vec){0};
    rp->series = (wk_series_vec){0};
    memcpy(b->fails, rp->fails, rp->nfails * sizeof *rp->fails);
    b->nfails = rp->nfails;
    rp->nfails = 0;
}

/* Queues the failure of TASK unless it is queued already (mutex held). */
static void wk_reporter_add_fail(wk_reporter *rp, int64_t task, const char *why)
{
    for (size_t i = 0; i < rp->nfails; i++)
        if (rp->fails[i].task == task)
            return;
    if (rp->nfails == WK_REPORTER_FAILS)
        return;
    rp->fails[rp->nfails].task = task;
    snprintf(rp->fails[rp->nfails].why, sizeof rp->fails[rp->nfails].why, "%s", why);
    rp->nfails++;
}

/* A failed batch goes back (caller holds the mutex): its counters are
 * merged under the ones added meanwhile (those are newer), chunk events
 * keep their order. */
static void wk_reporter_giveback(wk_reporter *rp, wk_batch *b)
{
    for (size_t k = 0; k < b->deltas.n; k++)
        if (wk_reporter_merge(rp, &b->deltas.v[k], true) != 0)
            hr_log_error("reporter_counters_lost", "task=%" PRId64, b->deltas.v[k].task);
    if (b->chunks.n > 0) {
        wk_event_vec newer = rp->chunks;

        rp->chunks = b->chunks;
        b->chunks = (wk_event_vec){0};
        if (newer.n > 0 && wk_reporter_add_chunks(rp, newer.v, newer.n) != 0)
            hr_log_error("reporter_chunks_lost", "count=%zu", newer.n);
        hr_vec_free(&newer);
    }
    for (size_t i = 0; i < b->nfails; i++)
        wk_reporter_add_fail(rp, b->fails[i].task, b->fails[i].why);
    for (size_t i = 0; i < b->series.n; i++) {
        const wk_series *s = &b->series.v[i];

        if (wk_reporter_count(rp, s->task, s->channel, s->status, s->minute_ms, s->variant, s->n) !=
            0)
            hr_log_error("reporter_series_lost", "task=%" PRId64, s->task);
    }
    hr_vec_free(&b->deltas);
    hr_vec_free(&b->chunks);
    hr_vec_free(&b->series);
}

static bool wk_reporter_idle(const wk_reporter *rp)
{
    return rp->count == 0 && rp->deltas.n == 0 && rp->chunks.n == 0 && rp->nfails == 0 &&
           rp->evq.n == 0 && rp->series.n == 0;
}

/* Whether the thread waits before its next round (mutex held): for a full
 * batch or the flush interval, until a stop; after a stop only while
 * nothing but chunk ends waiting for their rows is left, which are written
 * again at the flush interval, not in a busy loop.  In a MySQL backoff
 * (BACKOFF) only events end the wait early. */
static bool wk_reporter_should_wait(const wk_reporter *rp, bool backoff)
{
    if (rp->evq.n >= WK_REPORTER_EVENTS)
        return false;
    if (backoff)
        return true;
    if (rp->count >= rp->batch)
        return false;
    return !rp->stopping || (wk_reporter_idle(rp) && wk_chunkrows_waiting(rp->chunkrows) > 0);
}

/* ---- events -------------------------------------------------------------------- */

/* Every round whose publisher number is up to UPTO is confirmed: the
 * reporter's watermark moves to the last of them (any thread). */
static void wk_reporter_ev_advance(wk_reporter *rp, uint64_t upto)
{
    uint64_t r = 0;
    size_t k = 0;

    pthread_mutex_lock(&rp->ev_mu);
    while (k < rp->rounds.n && rp->rounds.v[k].e <= upto)
        r = rp->rounds.v[k++].r;
    if (k > 0) {
        memmove(rp->rounds.v, rp->rounds.v + k, (rp->rounds.n - k) * sizeof *rp->rounds.v);
        rp->rounds.n -= k;
        atomic_store(&rp->ev_confirmed, r);
    }
    pthread_mutex_unlock(&rp->ev_mu);
    if (k > 0 && rp->hooks.confirmed != NULL)
        rp->hooks.confirmed(rp->hooks.ctx, r);
}

/* The publisher's watermark moved (its thread). */
static void wk_reporter_ev_confirmed(void *ctx, uint64_t upto)
{
    wk_reporter_ev_advance(ctx, upto);
}

/* Hands the N outcome events EVS to the publisher, in order (reporter
 * thread). */
static void wk_reporter_publish(wk_reporter *rp, const wk_event *evs, size_t n)
{
    uint64_t e = 0;

    for (size_t i = 0; i < n; i++) {
        const wk_event *ev = &evs[i];
        hr_event out = {.type = wk_reporter_event_type(ev->u.outcome.status),
                        .task = ev->task,
                        .uid = ev->u.outcome.uid,
                        .channel = ev->u.outcome.channel,
                        .has_hash = ev->u.outcome.has_hash,
                        .provider_status = ev->u.outcome.http_status,
                        .attempt = ev->u.outcome.attempts,
                        .at_ms = ev->u.outcome.at_ms,
                        .due_ms = ev->u.outcome.due_ms};

        memcpy(out.address_hash, ev->u.outcome.hash, sizeof out.address_hash);
        e = hr_evpub_publish(rp->evpub, &out);
    }
    rp->ev_published += n;
    pthread_mutex_lock(&rp->ev_mu);
    if (hr_vec_push(&rp->rounds, ((wk_ev_round){rp->ev_published, e})) != 0) {
        /* Out of memory: the round is not tracked, so wait for it here
         * (its events are in the publisher's hands either way). */
        pthread_mutex_unlock(&rp->ev_mu);
        hr_evpub_wait(rp->evpub, e, rp->cfg->events.confirm_timeout_ms);
        atomic_store(&rp->ev_confirmed, rp->ev_published);
        if (rp->hooks.confirmed != NULL)
            rp->hooks.confirmed(rp->hooks.ctx, rp->ev_published);
        return;
    }
    pthread_mutex_unlock(&rp->ev_mu);
    /* Already confirmed (every event of it lost, or the reports were
     * quick): no report would move the watermark for it. */
    wk_reporter_ev_advance(rp, hr_evpub_confirmed(rp->evpub));
}

/* The deadline of the thread's wait (mutex held): the flush interval, or
 * the end of a MySQL backoff, or events.flush_ms after the first event
 * that waits, whichever comes first. */
static void wk_reporter_wait(wk_reporter *rp, bool backoff)
{
    int64_t now = hr_clock_mono_ms();
    int64_t until = backoff ? rp->mysql_retry_ms : now + WK_REPORTER_FLUSH_MS;
    bool events = false;

    while (wk_reporter_should_wait(rp, backoff)) {
        struct timespec ts;

        if (rp->evq.n > 0 && !events) {
            events = true;
            if (now + rp->cfg->events.flush_ms < until)
                until = now + rp->cfg->events.flush_ms;
        }
        if (hr_clock_mono_ms() >= until)
            return;
        hr_clock_deadline(CLOCK_REALTIME, until - hr_clock_mono_ms(), &ts);
        if (pthread_cond_timedwait(&rp->has_work, &rp->mu, &ts) == ETIMEDOUT && !events)
            return;
    }
}

static void *wk_reporter_main(void *arg)
{
    wk_reporter *rp = arg;
    int backoff_ms = 0;
    int64_t stop_seen_ms = -1;
    char errstr[512];

    for (;;) {
        wk_batch b = {0};
        wk_event_vec evs;
        bool backoff;

        pthread_mutex_lock(&rp->mu);
        backoff = hr_clock_mono_ms() < rp->mysql_retry_ms;
        wk_reporter_wait(rp, backoff);
        backoff = hr_clock_mono_ms() < rp->mysql_retry_ms;
        if (rp->stopping && stop_seen_ms < 0)
            stop_seen_ms = hr_clock_now_ms();
        if (rp->stopping && wk_reporter_idle(rp) &&
            (wk_chunkrows_waiting(rp->chunkrows) == 0 ||
             hr_clock_now_ms() - stop_seen_ms > WK_REPORTER_STOP_ROW_WAIT_MS)) {
            pthread_mutex_unlock(&rp->mu);
            wk_chunkrows_give_up_all(rp->chunkrows);
            break;
        }
        evs = rp->evq;
        rp->evq = (wk_event_vec){0};
        if (!backoff)
            wk_reporter_take(rp, &b);
        pthread_mutex_unlock(&rp->mu);
        /* Events first, whatever MySQL does. */
        if (rp->evpub != NULL) {
            if (evs.n > 0)
                wk_reporter_publish(rp, evs.v, evs.n);
            hr_evpub_retry(rp->evpub);
        }
        hr_vec_free(&evs);
        if (backoff || (b.n == 0 && b.deltas.n == 0 && b.chunks.n == 0 && b.nfails == 0 &&
                        b.series.n == 0 && wk_chunkrows_waiting(rp->chunkrows) == 0))
            continue;

        int64_t started_ms = hr_clock_now_ms();

        if (wk_reporter_write(rp, &b, errstr, sizeof errstr) != 0) {
            hr_metrics_inc(rp->met->backend_errors[WK_BACKEND_MYSQL]);
            atomic_store(&rp->met->mysql_ok, false);
            if (!rp->mysql_down)
                hr_log_error("reporter_mysql_down", "error=%s queued=%zu", errstr, b.n);
            rp->mysql_down = true;
            pthread_mutex_lock(&rp->mu);
            wk_reporter_giveback(rp, &b);
            if (stop_seen_ms >= 0 &&
                hr_clock_now_ms() - stop_seen_ms > WK_REPORTER_STOP_GIVEUP_MS) {
                hr_log_error("reporter_events_lost", "outcomes=%zu tasks=%zu chunks=%zu error=%s",
                             rp->count, rp->deltas.n, rp->chunks.n, errstr);
                rp->count = rp->deltas.n = rp->chunks.n = rp->nfails = rp->series.n = 0;
                pthread_mutex_unlock(&rp->mu);
                wk_chunkrows_give_up_all(rp->chunkrows);
                break;
            }
            /* Always wait out the backoff (events still go meanwhile): a
             * full ring must not turn the retries into a busy loop against
             * a dead server. */
            backoff_ms = backoff_ms == 0 ? 100 : backoff_ms * 2;
            if (backoff_ms > WK_REPORTER_BACKOFF_MAX_MS)
                backoff_ms = WK_REPORTER_BACKOFF_MAX_MS;
            rp->mysql_retry_ms = hr_clock_mono_ms() + backoff_ms;
            pthread_mutex_unlock(&rp->mu);
            continue;
        }
        hr_metrics_observe(rp->met->reporter_flush, (hr_clock_now_ms() - started_ms) / 1000.0);
        atomic_store(&rp->met->mysql_ok, true);
        if (rp->mysql_down)
            hr_log_info("reporter_mysql_up", "queued=%zu", b.n);
        rp->mysql_down = false;
        backoff_ms = 0;
        hr_vec_free(&b.deltas);
        hr_vec_free(&b.chunks);
        hr_vec_free(&b.series);
        pthread_mutex_lock(&rp->mu);
        rp->count -= b.n;
        /* An empty ring starts again at slot 0: the slots in use stay those
         * of the largest backlog, so the pages the ring touches (its RSS)
         * follow how far MySQL fell behind, not how many pushes were made. */
        rp->head = rp->count == 0 ? 0 : (rp->head + b.n) % rp->cap;
        pthread_cond_broadcast(&rp->has_room);
        pthread_mutex_unlock(&rp->mu);
    }
    return NULL;
}

/* herald_reporter_queue_depth, at scrape time (any thread). */
static double wk_reporter_depth(void *ctx)
{
    wk_reporter *rp = ctx;
    size_t n;

    pthread_mutex_lock(&rp->mu);
    n = rp->count;
    pthread_mutex_unlock(&rp->mu);
    return (double)n;
}

int wk_reporter_start(const hr_config *cfg, const char *owner, int64_t row_wait_ms, wk_metrics *met,
                      const wk_reporter_hooks *hooks, wk_reporter **out, char *errstr,
                      size_t errlen)
{
    wk_reporter *rp = calloc(1, sizeof *rp);
    const hr_evpub_hooks evhooks = {.ctx = rp, .confirmed = wk_reporter_ev_confirmed};

    *out = NULL;
    if (rp == NULL)
        goto oom;
    rp->cfg = cfg;
    rp->met = met;
    if (hooks != NULL)
        rp->hooks = *hooks;
    pthread_mutex_init(&rp->ev_mu, NULL);
    if (cfg->events.enabled && (hr_evpub_new(cfg, &evhooks, &rp->evpub, errstr, errlen) != 0 ||
                                hr_evpub_metrics(rp->evpub, met->reg, errstr, errlen) != 0))
        goto fail;
    rp->delivery_log = cfg->worker.delivery_log;
    rp->batch = (size_t)cfg->worker.reporter_batch;
    rp->cap = (size_t)cfg->worker.reporter_queue;
    rp->ring = calloc(rp->cap, sizeof *rp->ring);
    rp->deliveries = wk_deliveries_new(rp->batch, met);
    rp->chunkrows = wk_chunkrows_new(owner, row_wait_ms, met);
    if (rp->ring == NULL || rp->deliveries == NULL || rp->chunkrows == NULL)
        goto oom;
    pthread_mutex_init(&rp->mu, NULL);
    pthread_cond_init(&rp->has_work, NULL);
    pthread_cond_init(&rp->has_room, NULL);
    if (pthread_create(&rp->thread, NULL, wk_reporter_main, rp) != 0) {
        snprintf(errstr, errlen, "cannot start the reporter thread");
        pthread_cond_destroy(&rp->has_room);
        pthread_cond_destroy(&rp->has_work);
        pthread_mutex_destroy(&rp->mu);
        goto fail;
    }
    hr_metrics_gauge_fn(met->reporter_queue, wk_reporter_depth, rp);
    *out = rp;
    return 0;
oom:
    snprintf(errstr, errlen, "out of memory");
fail:
    if (rp != NULL) {
        hr_evpub_free(rp->evpub, 0, NULL);
        pthread_mutex_destroy(&rp->ev_mu);
        free(rp->ring);
        wk_deliveries_free(rp->deliveries);
        wk_chunkrows_free(rp->chunkrows);
        free(rp);
    }
    return -1;
}

uint64_t wk_reporter_push(wk_reporter *rp, const wk_event *ev)
{
    struct timespec ts;
    bool lost = false;
    uint64_t num = 0;

    pthread_mutex_lock(&rp->mu);
    switch (ev->kind) {
    case WK_EVENT_COUNTERS: {
        wk_task_delta d = {.task = ev->task,
                           .shard = ev->shard,
                           .sent = ev->u.counters.sent,
                           .failed = ev->u.counters.failed,
                           .throttled = ev->u.counters.throttled,
                           .retried = ev->u.counters.retried,
                           .unregistered = ev->u.counters.unregistered,
                           .opted_out = ev->u.counters.opted_out,
                           .suppressed = ev->u.counters.suppressed,
                           .cancelled = ev->u.counters.cancelled,
                           .expired = ev->u.counters.expired};

        lost = wk_reporter_merge(rp, &d, false) != 0;
        break;
    }
    case WK_EVENT_CHUNK_DONE:
        lost = wk_reporter_add_chunks(rp, ev, 1) != 0;
        break;
    case WK_EVENT_OUTCOME:
        lost = wk_reporter_count(rp, ev->task, ev->u.outcome.channel, ev->u.outcome.status,
                                 ev->u.outcome.at_ms, ev->u.outcome.variant, 1) != 0;
        if (rp->evpub != NULL) {
            if (hr_vec_push(&rp->evq, *ev) != 0) {
                lost = true;
            } else {
                num = ++rp->ev_pushed;
                /* The first event waiting shortens the thread's wait to
                 * events.flush_ms; a full round wakes it at once. */
                if (rp->evq.n == 1 || rp->evq.n == WK_REPORTER_EVENTS)
                    pthread_cond_signal(&rp->has_work);
            }
        }
        /* Dropped recipients have no push_delivery row (the stats hash
         * counts them). */
        if (!rp->delivery_log || ev->u.outcome.status == WK_DELIVERY_EXPIRED ||
            ev->u.outcome.status == WK_DELIVERY_CANCELLED)
            break;
        hr_clock_deadline(CLOCK_REALTIME, WK_REPORTER_PUSH_WAIT_MS, &ts);
        while (rp->count == rp->cap &&
               pthread_cond_timedwait(&rp->has_room, &rp->mu, &ts) != ETIMEDOUT)
            ;
        if (rp->count == rp->cap) {
            /* The delivery log is optional; the loop thread is not. */
            hr_metrics_inc(rp->met->reporter_dropped[WK_DROP_QUEUE_FULL]);
            break;
        }
        rp->ring[(rp->head + rp->count) % rp->cap] = *ev;
        rp->count++;
        if (rp->count >= rp->batch)
            pthread_cond_signal(&rp->has_work);
        break;
    }
    pthread_mutex_unlock(&rp->mu);
    if (lost)
        hr_log_error("reporter_event_lost", "task=%" PRId64 " kind=%d reason=out_of_memory",
                     ev->task, (int)ev->kind);
    return num;
}

uint64_t wk_reporter_events_confirmed(wk_reporter *rp)
{
    return atomic_load(&rp->ev_confirmed);
}

void wk_reporter_fail_task(wk_reporter *rp, int64_t task, const char *why)
{
    pthread_mutex_lock(&rp->mu);
    wk_reporter_add_fail(rp, task, why);
    pthread_mutex_unlock(&rp->mu);
}

void wk_reporter_stop(wk_reporter *rp)
{
    if (rp == NULL)
        return;
    pthread_mutex_lock(&rp->mu);
    rp->stopping = true;
    pthread_cond_signal(&rp->has_work);
    pthread_mutex_unlock(&rp->mu);
    pthread_join(rp->thread, NULL);
    if (rp->evpub != NULL) {
        uint64_t lost = 0;

        hr_evpub_free(rp->evpub, WK_REPORTER_STOP_EVENTS_MS, &lost);
        if (lost > 0)
            hr_log_error("events_lost", "count=%" PRIu64 " reason=kafka_unconfirmed_at_stop", lost);
    }
    pthread_mutex_destroy(&rp->ev_mu);
    hr_vec_free(&rp->rounds);
    hr_vec_free(&rp->evq);
    hr_mysql_free(rp->m);
    pthread_cond_destroy(&rp->has_room);
    pthread_cond_destroy(&rp->has_work);
    pthread_mutex_destroy(&rp->mu);
    wk_deliveries_free(rp->deliveries);
    wk_chunkrows_free(rp->chunkrows);
    free(rp->ring);
    hr_vec_free(&rp->deltas);
    hr_vec_free(&rp->chunks);
    hr_vec_free(&rp->series);
    free(rp);
}
