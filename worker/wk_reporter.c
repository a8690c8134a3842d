/* wk_reporter: bounded event ring drained into MySQL by one thread (see
 * wk_reporter.h for the contract and the thread hand-off).  What goes into
 * which table is written by wk_deliveries (push_delivery) and wk_chunkrows
 * (push_chunk); the counters and the task failures are written here. */
#include "wk_reporter.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hr_finish.h"
#include "hr_log.h"
#include "hr_clock.h"
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

/* Counters of one task not yet written: sent .. retried absolute (-1 =
 * none), cancelled and expired absolute too, the largest seen (see wk_reporter.h). */
typedef struct wk_task_delta {
    int64_t task, sent, failed, throttled, retried, unregistered, opted_out, suppressed;
    int64_t cancelled, expired;
    int shard; /* HR_SHARD_NONE, or the shard of a sharded task */
} wk_task_delta;

typedef HR_VEC(wk_task_delta) wk_delta_vec;
typedef HR_VEC(wk_event) wk_event_vec;

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
    wk_task_fail fails[WK_REPORTER_FAILS]; /* deduplicated by task; full = dropped */
    size_t nfails;
    bool stopping;

    /* The writers and the connection: the reporter thread's only, so the
     * mutex does not cover them. */
    wk_deliveries *deliveries;
    wk_chunkrows *chunkrows;
    hr_mysql *m;
    wk_metrics *met;
    bool mysql_down;
};

static void wk_reporter_deadline(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static int wk_reporter_write_counters(wk_reporter *rp, const wk_task_delta *d, size_t nd,
                                      char *errstr, size_t errlen)
{
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

        if (hr_finish_raise_shard(rp->m, d[k].task, d[k].shard, &raised, errstr, errlen) != 0)
            return -1;
    }
    return 0;
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

/* What one transaction writes: the first N ring events and the taken
 * deltas and chunk events. */
typedef struct wk_batch {
    size_t n;
    wk_delta_vec deltas;
    wk_event_vec chunks;
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
    rp->deltas = (wk_delta_vec){0};
    rp->chunks = (wk_event_vec){0};
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
    hr_vec_free(&b->deltas);
    hr_vec_free(&b->chunks);
}

static bool wk_reporter_idle(const wk_reporter *rp)
{
    return rp->count == 0 && rp->deltas.n == 0 && rp->chunks.n == 0 && rp->nfails == 0;
}

/* Whether the thread waits before its next write (mutex held): for a full
 * batch or the flush interval, until a stop; after a stop only while
 * nothing but chunk ends waiting for their rows is left, which are written
 * again at the flush interval, not in a busy loop. */
static bool wk_reporter_should_wait(const wk_reporter *rp)
{
    if (rp->count >= rp->batch)
        return false;
    return !rp->stopping || (wk_reporter_idle(rp) && wk_chunkrows_waiting(rp->chunkrows) > 0);
}

static void *wk_reporter_main(void *arg)
{
    wk_reporter *rp = arg;
    int backoff_ms = 0;
    int64_t stop_seen_ms = -1;
    char errstr[512];

    for (;;) {
        struct timespec ts;
        wk_batch b;

        pthread_mutex_lock(&rp->mu);
        if (wk_reporter_should_wait(rp)) {
            wk_reporter_deadline(&ts, WK_REPORTER_FLUSH_MS);
            while (wk_reporter_should_wait(rp) &&
                   pthread_cond_timedwait(&rp->has_work, &rp->mu, &ts) != ETIMEDOUT)
                ;
        }
        if (rp->stopping && stop_seen_ms < 0)
            stop_seen_ms = hr_clock_now_ms();
        if (rp->stopping && wk_reporter_idle(rp) &&
            (wk_chunkrows_waiting(rp->chunkrows) == 0 ||
             hr_clock_now_ms() - stop_seen_ms > WK_REPORTER_STOP_ROW_WAIT_MS)) {
            pthread_mutex_unlock(&rp->mu);
            wk_chunkrows_give_up_all(rp->chunkrows);
            break;
        }
        wk_reporter_take(rp, &b);
        pthread_mutex_unlock(&rp->mu);
        if (b.n == 0 && b.deltas.n == 0 && b.chunks.n == 0 && b.nfails == 0 &&
            wk_chunkrows_waiting(rp->chunkrows) == 0)
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
                rp->count = rp->deltas.n = rp->chunks.n = rp->nfails = 0;
                pthread_mutex_unlock(&rp->mu);
                wk_chunkrows_give_up_all(rp->chunkrows);
                break;
            }
            pthread_mutex_unlock(&rp->mu);
            /* Always wait out the backoff: a full ring must not turn the
             * retries into a busy loop against a dead server. */
            backoff_ms = backoff_ms == 0 ? 100 : backoff_ms * 2;
            if (backoff_ms > WK_REPORTER_BACKOFF_MAX_MS)
                backoff_ms = WK_REPORTER_BACKOFF_MAX_MS;
            struct timespec d = {backoff_ms / 1000, (long)(backoff_ms % 1000) * 1000000L};

            nanosleep(&d, NULL);
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
                      wk_reporter **out, char *errstr, size_t errlen)
{
    wk_reporter *rp = calloc(1, sizeof *rp);

    *out = NULL;
    if (rp == NULL)
        goto oom;
    rp->cfg = cfg;
    rp->met = met;
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
        free(rp->ring);
        wk_deliveries_free(rp->deliveries);
        wk_chunkrows_free(rp->chunkrows);
        free(rp);
    }
    return -1;
}

void wk_reporter_push(wk_reporter *rp, const wk_event *ev)
{
    struct timespec ts;
    bool lost = false;

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
        wk_reporter_deadline(&ts, WK_REPORTER_PUSH_WAIT_MS);
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
    hr_mysql_free(rp->m);
    pthread_cond_destroy(&rp->has_room);
    pthread_cond_destroy(&rp->has_work);
    pthread_mutex_destroy(&rp->mu);
    wk_deliveries_free(rp->deliveries);
    wk_chunkrows_free(rp->chunkrows);
    free(rp->ring);
    hr_vec_free(&rp->deltas);
    hr_vec_free(&rp->chunks);
    free(rp);
}
