/* wk_reporter: bounded event ring drained into MySQL by one thread (see
 * wk_reporter.h for the contract and the thread hand-off).  What goes into
 * which table is written by wk_deliveries (push_delivery), wk_chunkrows
 * (push_chunk) and wk_tally (the counters, the per-minute series, the task
 * failures); the transaction and the hand-off of the events to their
 * publisher (hr_evpub) are here.
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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hr_evpub.h"
#include "hr_log.h"
#include "hr_clock.h"
#include "hr_dlog.h"
#include "hr_mysql.h"
#include "hr_vec.h"
#include "wk_chunkrows.h"
#include "wk_deliveries.h"
#include "wk_tally.h"

#define WK_REPORTER_FLUSH_MS 200
#define WK_REPORTER_BACKOFF_MAX_MS 5000
/* After a stop request, how long a MySQL outage may hold the exit. */
#define WK_REPORTER_STOP_GIVEUP_MS 30000
/* How long wk_reporter_push waits for ring room before it drops an outcome
 * row: the loop thread must keep renewing leases and polling Kafka. */
#define WK_REPORTER_PUSH_WAIT_MS 20
/* Batches of ring slots whose pages stay resident when the ring empties. */
#define WK_REPORTER_RING_KEEP 2
/* After a stop request, how long chunk ends still waiting for their
 * push_chunk row are written again before they are given up: the
 * dispatcher writes its rows every 10 ms tick, so a row that is not there
 * after this is late for another reason (see wk_chunkrows.h). */
#define WK_REPORTER_STOP_ROW_WAIT_MS 2000
/* At a stop, how long the events still held wait for Kafka. */
#define WK_REPORTER_STOP_EVENTS_MS 10000

typedef HR_VEC(wk_event) wk_event_vec;

/* A round of events handed to the publisher: R, the reporter's number of
 * its last event, and E, the publisher's. */
typedef struct wk_ev_round {
    uint64_t r, e;
} wk_ev_round;
typedef HR_VEC(wk_ev_round) wk_ev_round_vec;

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
    size_t touched; /* slots written since the ring's pages were last given back */
    /* Counters per task and chunk events wait here, not in the ring,
     * so they never wait for room and are never dropped. */
    wk_event_vec chunks;
    wk_tally tally; /* the counters, the outcomes per minute and the failures */
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

/* What one transaction writes: the first N ring events and the taken
 * tally and chunk events. */
typedef struct wk_batch {
    size_t n;
    wk_event_vec chunks;
    wk_tally tally;
} wk_batch;

/* Writes batch B and the chunk ends waiting for their rows in one
 * transaction. */
static int wk_reporter_write(wk_reporter *rp, const wk_batch *b, char *errstr, size_t errlen)
{
    /* A worker frozen inside this transaction (SIGSTOP, a paused VM) must
     * not hold the task's counters row from the other workers and from
     * recover: the server ends the transaction and the batch is written
     * again when the worker runs (hr_mysql_limit_idle_txn). */
    if (rp->m == NULL && (hr_mysql_connect(rp->cfg, &rp->m, errstr, errlen) != 0 ||
                          hr_mysql_limit_idle_txn(rp->m, errstr, errlen) != 0))
        goto fail;
    if (hr_mysql_begin(rp->m, errstr, errlen) != 0)
        goto fail;
    if ((rp->delivery_log && wk_deliveries_write(rp->deliveries, rp->m, rp->ring, rp->cap, rp->head,
                                                 b->n, errstr, errlen) != 0) ||
        wk_tally_write_counters(&b->tally, rp->m, errstr, errlen) != 0 ||
        wk_tally_write_series(&b->tally, rp->m, errstr, errlen) != 0 ||
        wk_chunkrows_write(rp->chunkrows, rp->m, b->chunks.v, b->chunks.n, errstr, errlen) != 0 ||
        wk_tally_write_fails(&b->tally, rp->m, errstr, errlen) != 0 ||
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
 * ring until written, the tally and the chunk events move to B. */
static void wk_reporter_take(wk_reporter *rp, wk_batch *b)
{
    b->n = rp->count < rp->batch ? rp->count : rp->batch;
    b->chunks = rp->chunks;
    b->tally = rp->tally;
    rp->chunks = (wk_event_vec){0};
    rp->tally = (wk_tally){0};
}

/* A failed batch goes back (caller holds the mutex): its counters are
 * merged under the ones added meanwhile (those are newer), chunk events
 * keep their order. */
static void wk_reporter_giveback(wk_reporter *rp, wk_batch *b)
{
    wk_tally_giveback(&rp->tally, &b->tally);
    if (b->chunks.n > 0) {
        wk_event_vec newer = rp->chunks;

        rp->chunks = b->chunks;
        b->chunks = (wk_event_vec){0};
        if (newer.n > 0 && wk_reporter_add_chunks(rp, newer.v, newer.n) != 0)
            hr_log_error("reporter_chunks_lost", "count=%zu", newer.n);
        hr_vec_free(&newer);
    }
    hr_vec_free(&b->chunks);
}

/* Once the ring is empty (mutex held), gives the pages of its slots past
 * WK_REPORTER_RING_KEEP batches back to the kernel: a backlog (MySQL down
 * for a while) wrote them, and they would stay resident for the process's
 * life, a step in its RSS after each outage (tests/faults/soak).  The
 * slots hold nothing then, so their pages may come back zero-filled; the
 * first batches' pages, which a steady flow uses, are kept. */
static void wk_reporter_give_back_ring(wk_reporter *rp)
{
    size_t keep = WK_REPORTER_RING_KEEP * rp->batch;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), from, to;

    if (rp->count != 0 || rp->touched <= keep)
        return;
    from = ((uintptr_t)(rp->ring + keep) + page - 1) & ~(page - 1);
    to = (uintptr_t)(rp->ring + rp->touched) & ~(page - 1);
    if (to > from && madvise((void *)from, to - from, MADV_DONTNEED) != 0)
        hr_log_warn("reporter_madvise_failed", "error=%s", strerror(errno));
    rp->touched = keep;
}

static bool wk_reporter_idle(const wk_reporter *rp)
{
    return rp->count == 0 && rp->chunks.n == 0 && wk_tally_empty(&rp->tally) && rp->evq.n == 0;
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
        hr_event out = {.type = wk_delivery_event_type(ev->u.outcome.status),
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
        if (backoff || (b.n == 0 && b.chunks.n == 0 && wk_tally_empty(&b.tally) &&
                        wk_chunkrows_waiting(rp->chunkrows) == 0))
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
                             rp->count, rp->tally.deltas.n, rp->chunks.n, errstr);
                rp->count = rp->chunks.n = 0;
                wk_tally_clear(&rp->tally);
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
        hr_vec_free(&b.chunks);
        wk_tally_clear(&b.tally);
        pthread_mutex_lock(&rp->mu);
        rp->count -= b.n;
        /* An empty ring starts again at slot 0: the slots in use stay those
         * of the largest backlog, so the pages the ring touches (its RSS)
         * follow how far MySQL fell behind, not how many pushes were made. */
        rp->head = rp->count == 0 ? 0 : (rp->head + b.n) % rp->cap;
        wk_reporter_give_back_ring(rp);
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
    size_t slot;

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

        lost = wk_tally_merge(&rp->tally, &d, false) != 0;
        break;
    }
    case WK_EVENT_CHUNK_DONE:
        lost = wk_reporter_add_chunks(rp, ev, 1) != 0;
        break;
    case WK_EVENT_OUTCOME:
        lost = wk_tally_count(&rp->tally, ev->task, ev->u.outcome.channel, ev->u.outcome.status,
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
        /* The wait's deadline is read only when there is a wait: not
         * once per push. */
        if (rp->count == rp->cap)
            hr_clock_deadline(CLOCK_REALTIME, WK_REPORTER_PUSH_WAIT_MS, &ts);
        while (rp->count == rp->cap &&
               pthread_cond_timedwait(&rp->has_room, &rp->mu, &ts) != ETIMEDOUT)
            ;
        if (rp->count == rp->cap) {
            /* The delivery log is optional; the loop thread is not. */
            hr_metrics_inc(rp->met->reporter_dropped[WK_DROP_QUEUE_FULL]);
            break;
        }
        slot = (rp->head + rp->count) % rp->cap;
        rp->ring[slot] = *ev;
        rp->count++;
        if (slot >= rp->touched)
            rp->touched = slot + 1;
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
    wk_tally_add_fail(&rp->tally, task, why);
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
    hr_vec_free(&rp->chunks);
    wk_tally_clear(&rp->tally);
    free(rp);
}
