/* wk_lifecycle: a chunk from intake to offset store (see wk_lifecycle.h).
 *
 * Read top-down as a chunk lives, backwards: the endings first (finish,
 * halt, abandon, drop — each submits the chunk's end job, and its answer
 * settles the offset and unlinks), then the pushes' outcomes and the
 * acknowledgements, then the throttle slices, then intake and open, then
 * the revoke/shutdown entry points.  The timers' work (lease renewal,
 * control, watchdog) is wk_lifecycle_timers.c's. */
#include "wk_lifecycle_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_chunkmsg.h"
#include "hr_log.h"
#include "hr_clock.h"

static const wk_chunk_hooks wk_lifecycle_chunk_hooks;

void wk_lifecycle_init(wk_lifecycle *l, const hr_config *cfg, const char *owner,
                       const wk_lifecycle_hooks *hooks)
{
    l->cfg = cfg;
    l->owner = owner;
    l->hooks = *hooks;
    TAILQ_INIT(&l->chunks);
}

/* ---- offsets ------------------------------------------------------------ */

/* The message at PARTITION/OFFSET needs nothing more. */
static void wk_lifecycle_settle_offset(wk_lifecycle *l, int32_t partition, int64_t offset)
{
    int64_t store;

    if (wk_offsets_finish(l->offsets, partition, offset, &store) == 1)
        l->hooks.store_offset(l->hooks.privdata, partition, store);
}

/* ---- chunk endings ------------------------------------------------------ */

/* Hands the stats hash counters C's last script call answered to the
 * reporter (absolute values: see wk_reporter.h). */
static void wk_lifecycle_report_counters(wk_lifecycle *l, wk_chunk *c)
{
    wk_event ev = {.kind = WK_EVENT_COUNTERS, .task = c->msg.task, .shard = wk_chunk_row(c)};

    if (!c->counters_new)
        return;
    ev.u.counters.sent = c->counters.sent;
    ev.u.counters.failed = c->counters.failed;
    ev.u.counters.throttled = c->counters.throttled;
    ev.u.counters.retried = c->counters.retried;
    ev.u.counters.unregistered = c->counters.unregistered;
    wk_reporter_push(l->reporter, &ev);
    c->counters_new = false;
}

static void wk_lifecycle_free(wk_lifecycle *l, wk_chunk *c)
{
    wk_task_put(l->tasks, c->task);
    wk_chunk_free(c);
}

/* A job of C answered: true when the lifecycle was done with C already
 * (the answer is dropped; C is freed once no job points at it). */
static bool wk_lifecycle_gone(wk_lifecycle *l, wk_chunk *c)
{
    if (!c->gone)
        return false;
    if (c->jobs == 0)
        wk_lifecycle_free(l, c);
    return true;
}

/* Takes C off the list: no request of it runs any more, no job of it is
 * waited for (those in flight keep it allocated). */
static void wk_lifecycle_unlink(wk_lifecycle *l, wk_chunk *c)
{
    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_cancel(l->sender, &c->pushes[i]);
    TAILQ_REMOVE(&l->chunks, c, link);
    l->nchunks--;
    c->gone = true;
    if (c->jobs == 0)
        wk_lifecycle_free(l, c);
    l->hooks.wake(l->hooks.privdata);
}

/* A Redis error: the lease is left to expire and the offset counts as
 * finished; the sweeper republishes the chunk (pending still holds it). */
static void wk_lifecycle_drop(wk_lifecycle *l, wk_chunk *c, const char *why)
{
    l->stats.errors++;
    hr_metrics_inc(l->met->backend_errors[WK_BACKEND_REDIS]);
    atomic_store(&l->met->redis_ok, false);
    hr_log_error("chunk_dropped", "task=%" PRId64 " seq=%" PRId64 " reason=%s", c->msg.task,
                 c->msg.seq, why);
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c);
}

/* Starts C's end in Redis (HOW): its pushes are unlinked first (a request
 * in flight is aborted: only an abandon has any), and nothing of C starts
 * any more; wk_lifecycle_ended acts on the answer. */
static void wk_lifecycle_end(wk_lifecycle *l, wk_chunk *c, wk_chunk_ending how)
{
    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_cancel(l->sender, &c->pushes[i]);
    c->held = true;
    if (wk_chunk_finalize(l->rd, c, how, l->owner) != 0)
        wk_lifecycle_drop(l, c, "the Redis thread took no job");
}

/* Gives C up without finishing it: requests stop, delivered recipients are
 * acknowledged, the lease is released; the rest stay in the set.  With
 * SETTLE the offset counts as finished (the lease went to another worker,
 * which does the rest); without, it is not stored and the chunk is
 * redelivered to the partition's next owner.  WHY is a static string. */
void wk_lifecycle_abandon(wk_lifecycle *l, wk_chunk *c, const char *why, bool settle)
{
    if (c->phase == WK_CHUNK_ENDING)
        return;
    c->end_why = why;
    c->end_settle = settle;
    wk_lifecycle_end(l, c, WK_CHUNK_RELEASE);
}

static void wk_lifecycle_abandoned(wk_lifecycle *l, wk_chunk *c, const wk_chunk_ended *res)
{
    wk_lifecycle_report_counters(l, c);
    if (res->ack_failed)
        hr_log_error("ack_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", c->msg.task,
                     c->msg.seq, res->errstr);
    else if (res->rc != 0)
        hr_log_warn("lease_release_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s",
                    c->msg.task, c->msg.seq, res->errstr);
    hr_log_info("chunk_abandoned", "task=%" PRId64 " seq=%" PRId64 " reason=%s open=%zu",
                c->msg.task, c->msg.seq, c->end_why, c->open);
    if (c->end_settle)
        wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c);
}

/* Every recipient of C is settled: acknowledge, close, store the offset. */
static void wk_lifecycle_finish(wk_lifecycle *l, wk_chunk *c)
{
    wk_lifecycle_end(l, c, WK_CHUNK_CLOSE);
}

static void wk_lifecycle_finished(wk_lifecycle *l, wk_chunk *c, const wk_chunk_ended *res)
{
    /* Also for a redelivered, already empty chunk: its close reports what
     * a killed worker's reporter could not write. */
    wk_lifecycle_report_counters(l, c);
    if (res->ack_failed || res->rc != 0) {
        /* The set still holds what the failed flush was to remove: the
         * close changed nothing, and the sweeper redelivers the chunk. */
        wk_lifecycle_drop(l, c, res->ack_failed ? "ack failed" : res->errstr);
        return;
    }
    if (res->res[0] < 0) {
        /* Members appeared after we read the set: leave them to a
         * redelivery by the sweeper (the end job released the lease). */
        hr_log_warn("chunk_not_empty", "task=%" PRId64 " seq=%" PRId64, c->msg.task, c->msg.seq);
    } else {
        wk_event ev = {.kind = WK_EVENT_CHUNK_DONE, .task = c->msg.task, .shard = wk_chunk_row(c)};

        /* A sharded task's last chunk: every shard's counters go before
         * its done (wk_chunk_ended.stats). */
        for (int k = 0; k < res->nstats; k++) {
            wk_event shard = {.kind = WK_EVENT_COUNTERS, .task = c->msg.task, .shard = k};
            const hr_outcomes *o = &res->stats[k];

            shard.u.counters.sent = o->sent;
            shard.u.counters.failed = o->failed;
            shard.u.counters.throttled = o->throttled;
            shard.u.counters.retried = o->retried;
            shard.u.counters.unregistered = o->unregistered;
            shard.u.counters.cancelled = o->cancelled;
            shard.u.counters.expired = o->expired;
            wk_reporter_push(l->reporter, &shard);
        }
        ev.u.chunk.state = WK_CHUNK_END_DONE;
        ev.u.chunk.seq = c->msg.seq;
        ev.u.chunk.done_ms = hr_clock_now_ms();
        ev.u.chunk.pending_left = res->res[1];
        ev.u.chunk.subs_left = res->res[2];
        wk_reporter_push(l->reporter, &ev);
        l->stats.chunks_done++;
        hr_metrics_inc(l->met->chunks_acked);
    }
    if (c->key_missing > 0)
        hr_log_info("throttle_key_missing", "task=%" PRId64 " seq=%" PRId64 " count=%" PRId64,
                    c->msg.task, c->msg.seq, c->key_missing);
    hr_log_info("chunk_done",
                "task=%" PRId64 " seq=%" PRId64 " recipients=%zu sent=%" PRId64 " failed=%" PRId64
                " throttled=%" PRId64 " unregistered=%" PRId64 " retried=%" PRId64
                " duration_ms=%" PRId64 " pending_left=%" PRId64,
                c->msg.task, c->msg.seq, c->npushes, c->sent, c->failed, c->throttled,
                c->unregistered, c->retried, hr_clock_now_ms() - c->started_ms, res->res[1]);
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c);
}

/* C stopped by its task's control key or expire_at and nothing of it is
 * in flight: acknowledge what was delivered, then park it (lease released,
 * the rest stays in the set and pending for the dispatcher to republish on
 * resume) or drop the rest counted as cancelled or expired (drop_set.lua);
 * the offset counts as finished. */
static void wk_lifecycle_halted(wk_lifecycle *l, wk_chunk *c)
{
    wk_lifecycle_end(l, c, c->halt == WK_CHUNK_PARK ? WK_CHUNK_RELEASE : WK_CHUNK_DROP);
}

static void wk_lifecycle_halt_ended(wk_lifecycle *l, wk_chunk *c, const wk_chunk_ended *res)
{
    wk_event ev = {.kind = WK_EVENT_CHUNK_DONE, .task = c->msg.task, .shard = wk_chunk_row(c)};
    int64_t dropped = 0;
    bool expire = c->halt == WK_CHUNK_EXPIRE;

    wk_lifecycle_report_counters(l, c);
    if (res->ack_failed || res->rc != 0) {
        wk_lifecycle_drop(l, c, res->ack_failed ? "ack failed" : res->errstr);
        return;
    }
    if (c->halt != WK_CHUNK_PARK) {
        /* Only the outcome's counter (the stats hash's): sent .. retried
         * are not carried (-1). */
        wk_event counters = {
            .kind = WK_EVENT_COUNTERS,
            .task = c->msg.task,
            .shard = wk_chunk_row(c),
            .u.counters = {
                .sent = -1, .failed = -1, .throttled = -1, .retried = -1, .unregistered = -1}};
        int64_t total = res->res[1];

        dropped = res->res[0];
        if (dropped < 0) {
            /* Another worker holds the lease: it drops the chunk. */
            hr_log_info(expire ? "chunk_expire_foreign" : "chunk_cancel_foreign",
                        "task=%" PRId64 " seq=%" PRId64, c->msg.task, c->msg.seq);
            wk_lifecycle_settle_offset(l, c->partition, c->offset);
            wk_lifecycle_unlink(l, c);
            return;
        }
        if (expire) {
            counters.u.counters.expired = total;
            hr_metrics_add(l->met->chans[c->task->ch_index].expired, (uint64_t)dropped);
        } else {
            counters.u.counters.cancelled = total;
        }
        if (total > 0)
            wk_reporter_push(l->reporter, &counters);
        ev.u.chunk.state = expire ? WK_CHUNK_END_EXPIRED : WK_CHUNK_END_CANCELLED;
    } else {
        l->stats.parked_chunks++;
        ev.u.chunk.state = WK_CHUNK_END_PARKED;
    }
    ev.u.chunk.seq = c->msg.seq;
    ev.u.chunk.done_ms = hr_clock_now_ms();
    wk_reporter_push(l->reporter, &ev);
    hr_log_info(c->halt == WK_CHUNK_CANCEL ? "chunk_cancelled"
                : expire                   ? "chunk_expired"
                                           : "chunk_parked",
                "task=%" PRId64 " seq=%" PRId64 " sent=%" PRId64 " dropped=%" PRId64, c->msg.task,
                c->msg.seq, c->sent, dropped);
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c);
}

/* C's end job answered. */
static void wk_lifecycle_ended(wk_chunk *c, const wk_chunk_ended *res)
{
    wk_lifecycle *l = c->ctx;

    if (wk_lifecycle_gone(l, c))
        return;
    if (c->ending == WK_CHUNK_CLOSE)
        wk_lifecycle_finished(l, c, res);
    else if (c->ending == WK_CHUNK_RELEASE && c->end_why != NULL)
        wk_lifecycle_abandoned(l, c, res);
    else
        wk_lifecycle_halt_ended(l, c, res);
}

/* No new request of C starts: its pushes not yet started (ready, waiting
 * for a retry, or for their throttle slice) are taken back; those in
 * flight finish and are not retried. */
static void wk_lifecycle_hold(wk_lifecycle *l, wk_chunk *c)
{
    c->held = true;
    for (size_t i = 0; i < c->npushes; i++) {
        wk_push *push = &c->pushes[i];

        if (push->state == WK_PUSH_READY || push->state == WK_PUSH_DELAYED) {
            wk_sender_cancel(l->sender, push);
            c->open--;
        }
    }
    /* Their slices' verdicts are only counted when they come. */
    c->open -= c->unchecked;
    c->unchecked = 0;
}

/* Stops starting requests for C (HALT: park, expire or cancel; each
 * overrides the ones before it under way); running requests finish and
 * are not retried. */
void wk_lifecycle_halt(wk_lifecycle *l, wk_chunk *c, wk_chunk_halt halt)
{
    /* A chunk being revoked is given up anyway; its next owner parks or
     * cancels it.  One ending already is past halting. */
    if (halt <= c->halt || c->revoked || c->phase == WK_CHUNK_ENDING)
        return;
    c->halt = halt;
    wk_lifecycle_hold(l, c);
    if (c->open == 0)
        wk_lifecycle_halted(l, c);
}

/* Nothing of C is open any more (C->open == 0): a revoked chunk is given
 * up (its requests all answered and acknowledged, so the partition's next
 * owner pushes nobody twice), a halted one parked or cancelled, the others
 * are done. */
static void wk_lifecycle_settled(wk_lifecycle *l, wk_chunk *c)
{
    if (c->revoked)
        wk_lifecycle_abandon(l, c, "revoked", false);
    else if (c->halt != WK_CHUNK_RUN)
        wk_lifecycle_halted(l, c);
    else
        wk_lifecycle_finish(l, c);
}

/* ---- push outcomes and acknowledgements -------------------------------------- */

static void wk_lifecycle_outcome(wk_lifecycle *l, const wk_chunk *c, const wk_push *push,
                                 wk_delivery status, const wk_push_result *res)
{
    wk_event ev = {.kind = WK_EVENT_OUTCOME, .task = c->msg.task, .shard = wk_chunk_row(c)};

    /* wk_chunk_open pushes only valid uids (1..INT64_MAX). */
    ev.u.outcome.uid = strtoull(push->uid, NULL, 10);
    ev.u.outcome.status = status;
    ev.u.outcome.attempts = push->attempts;
    ev.u.outcome.http_status = (int)res->http_status;
    ev.u.outcome.latency_ms = res->latency_ms;
    ev.u.outcome.at_ms = hr_clock_now_ms();
    wk_reporter_push(l->reporter, &ev);
}

/* A flush of C answered: the counters go to the reporter; a failure drops
 * the chunk (one ending already sees it in its own answer). */
static void wk_lifecycle_flushed(wk_chunk *c, int rc, const char *errstr)
{
    wk_lifecycle *l = c->ctx;

    if (wk_lifecycle_gone(l, c))
        return;
    wk_lifecycle_report_counters(l, c);
    if (rc == 0 || c->phase == WK_CHUNK_ENDING)
        return;
    hr_log_error("ack_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", c->msg.task, c->msg.seq,
                 errstr);
    wk_lifecycle_drop(l, c, "ack failed");
}

void wk_lifecycle_push_done(void *ctx, wk_push *push, const wk_push_result *res)
{
    wk_lifecycle *l = ctx;
    wk_chunk *c = push->owner;
    wk_metrics_chan *mc = &l->met->chans[c->task->ch_index];
    int retries = push->attempts - push->firsts; /* an address's first request is no retry */
    wk_delivery status = res->delivered      ? WK_DELIVERY_SENT
                         : res->unregistered ? WK_DELIVERY_UNREGISTERED
                                             : WK_DELIVERY_FAILED;
    int full;

    c->open--;
    if (retries > 0) {
        c->retried += retries;
        c->acks.retried += retries;
        hr_metrics_add(mc->retried, (uint64_t)retries);
        hr_metrics_add(l->met->retries, (uint64_t)retries);
    }
    if (res->held) {
        /* The sender refused to start a push of an expired task
         * (wk_chan_pump; a retry due past expire_at waited until then):
         * the rest of the chunk expires with it. */
        if (c->halt == WK_CHUNK_RUN && !c->revoked &&
            hr_task_expired(c->task->row, hr_clock_now_ms()))
            wk_lifecycle_halt(l, c, WK_CHUNK_EXPIRE);
        else if (c->open == 0)
            wk_lifecycle_settled(l, c);
        return;
    }
    if (l->cfg->worker.delivery_log)
        wk_lifecycle_outcome(l, c, push, status, res);
    switch (status) {
    case WK_DELIVERY_SENT:
        hr_metrics_inc(mc->sent);
        hr_metrics_observe(l->met->due_to_delivery,
                           (double)(hr_clock_now_ms() - c->msg.due_ms) / 1000.0);
        full = wk_chunk_ack(c, WK_CHUNK_SENT, push->uid, NULL);
        break;
    case WK_DELIVERY_UNREGISTERED:
        hr_metrics_inc(mc->unregistered);
        full = wk_chunk_ack(c, WK_CHUNK_UNREGISTERED, push->uid, NULL);
        break;
    default:
        hr_metrics_inc(mc->failed);
        hr_log_debug("push_failed", "task=%" PRId64 " uid=%s reason=%s", c->msg.task, push->uid,
                     res->reason);
        full = wk_chunk_ack(c, WK_CHUNK_DEAD, push->uid, res->reason);
        break;
    }
    if (full < 0 || (full == 1 && wk_chunk_flush(l->rd, c) != 0)) {
        wk_lifecycle_drop(l, c, full < 0 ? "out of memory" : "the Redis thread took no job");
        return;
    }
    if (c->open == 0)
        wk_lifecycle_settled(l, c);
    if (l->stopping)
        l->hooks.wake(l->hooks.privdata);
}

/* ---- throttle ------------------------------------------------------------------ */

/* Checks C's pushes through the throttle in slices (the first one small),
 * all submitted at once: the Redis thread runs them back to back, and the
 * pushes of a slice start as soon as its verdicts are back.  0, or -1 when
 * C was dropped. */
static int wk_lifecycle_throttle(wk_lifecycle *l, wk_chunk *c)
{
    size_t first = 0, n = WK_CHUNK_FIRST_SLICE;

    c->unchecked = c->npushes;
    for (; first < c->npushes; first += n, n = HR_THROTTLE_PIPE_MAX) {
        if (n > c->npushes - first)
            n = c->npushes - first;
        if (wk_chunk_check(l->rd, c, first, n) != 0) {
            wk_lifecycle_drop(l, c, "the Redis thread took no job");
            return -1;
        }
    }
    return 0;
}

/* A throttle slice of C answered: blocked recipients were acknowledged as
 * throttled and are reported; the others are pushed. */
static void wk_lifecycle_checked(wk_chunk *c, const wk_chunk_checked *res)
{
    static const wk_push_result none = {.delivered = false};
    wk_lifecycle *l = c->ctx;
    size_t submitted = 0;

    if (wk_lifecycle_gone(l, c))
        return;
    wk_lifecycle_report_counters(l, c);
    if (res->rc != 0) {
        if (c->phase != WK_CHUNK_ENDING)
            wk_lifecycle_drop(l, c, res->errstr);
        return;
    }
    hr_metrics_add(l->met->chans[c->task->ch_index].throttled, (uint64_t)res->blocked);
    hr_metrics_add(l->met->throttled, (uint64_t)res->blocked);
    if (l->cfg->worker.delivery_log && res->blocked > 0)
        for (size_t i = res->first; i < res->first + res->n; i++)
            if (c->verdicts[i] == HR_THROTTLE_BLOCKED)
                wk_lifecycle_outcome(l, c, &c->pushes[i], WK_DELIVERY_THROTTLED, &none);
    /* Halted, revoked or ending meanwhile: these pushes were counted out
     * when it held (wk_lifecycle_hold). */
    if (c->held)
        return;
    c->unchecked -= res->n;
    c->open -= (size_t)res->blocked;
    for (size_t i = res->first; i < res->first + res->n; i++)
        if (c->verdicts[i] != HR_THROTTLE_BLOCKED) {
            wk_sender_submit(l->sender, &c->pushes[i]);
            submitted++;
        }
    if (c->open == 0) {
        wk_lifecycle_settled(l, c);
        return;
    }
    /* May settle pushes, even finish or drop C: C is not touched after. */
    if (submitted > 0)
        wk_sender_kick(l->sender);
}

/* ---- open ---------------------------------------------------------------------- */

static bool wk_lifecycle_active(const wk_lifecycle *l, const hr_chunkmsg *msg)
{
    const wk_chunk *c;

    TAILQ_FOREACH(c, &l->chunks, link)
    if (c->msg.task == msg->task && c->msg.seq == msg->seq)
        return true;
    return false;
}

/* Address A of PUSH is dead (the provider said so): out of Redis (on the
 * Redis thread), then out of MySQL, so no later campaign tries it.  A
 * failure is logged; the next campaign's answer prunes it then. */
typedef struct wk_lifecycle_prune_job {
    wk_lifecycle *l;
    int64_t task;
    hr_addr a; /* APP and ADDRESS point into STRINGS */
    char *strings;
    int rc;
    char errstr[512];
} wk_lifecycle_prune_job;

static void wk_lifecycle_prune_run(hr_redis *r, void *arg)
{
    wk_lifecycle_prune_job *p = arg;

    p->rc = hr_addr_unlist(r, &p->a, p->errstr, sizeof p->errstr);
}

static void wk_lifecycle_prune_done(void *arg)
{
    wk_lifecycle_prune_job *p = arg;
    wk_lifecycle *l = p->l;

    if (p->rc == 0)
        p->rc = hr_addr_forget(l->mysql, &p->a, p->errstr, sizeof p->errstr);
    if (p->rc < 0) {
        hr_log_warn("address_prune_failed", "task=%" PRId64 " uid=%" PRId64 " error=\"%s\"",
                    p->task, p->a.uid, p->errstr);
    } else {
        hr_metrics_inc(l->met->pruned);
        hr_log_debug("address_pruned", "task=%" PRId64 " uid=%" PRId64 " platform=%s", p->task,
                     p->a.uid, hr_addr_platform_name(p->a.platform));
    }
    free(p->strings);
    free(p);
}

void wk_lifecycle_prune(void *ctx, wk_push *push, const hr_addr *a)
{
    wk_lifecycle *l = ctx;
    wk_chunk *c = push->owner;
    wk_lifecycle_prune_job *p = calloc(1, sizeof *p);
    size_t napp = strlen(a->app) + 1, naddr = strlen(a->address) + 1;

    if (p == NULL || (p->strings = malloc(napp + naddr)) == NULL) {
        free(p);
        hr_log_warn("address_prune_failed", "task=%" PRId64 " uid=%s error=\"out of memory\"",
                    c->msg.task, push->uid);
        return;
    }
    p->l = l;
    p->task = c->msg.task;
    p->a = *a;
    p->a.app = memcpy(p->strings, a->app, napp);
    p->a.address = memcpy(p->strings + napp, a->address, naddr);
    if (wk_redis_call(l->rd, wk_lifecycle_prune_run, wk_lifecycle_prune_done, p) != 0) {
        hr_log_warn("address_prune_failed",
                    "task=%" PRId64 " uid=%s error=\"the Redis thread took no job\"", c->msg.task,
                    push->uid);
        free(p->strings);
        free(p);
    }
}

/* Reports what the open worked around: invalid uids (dead-lettered,
 * counted failed), user hashes that answered an error, address members
 * that do not parse. */
static void wk_lifecycle_open_anomalies(wk_lifecycle *l, wk_chunk *c, size_t bad_addrs)
{
    if (c->invalid > 0) {
        wk_lifecycle_report_counters(l, c);
        hr_metrics_add(l->met->chans[c->task->ch_index].failed, (uint64_t)c->invalid);
        hr_metrics_add(l->met->anomalies[WK_ANOMALY_INVALID_UID], (uint64_t)c->invalid);
        hr_log_warn("invalid_uids", "task=%" PRId64 " seq=%" PRId64 " count=%" PRId64, c->msg.task,
                    c->msg.seq, c->invalid);
    }
    if (c->user_errors > 0) {
        hr_metrics_add(l->met->anomalies[WK_ANOMALY_USER_HASH], (uint64_t)c->user_errors);
        hr_log_warn("user_hash_error", "task=%" PRId64 " seq=%" PRId64 " count=%" PRId64 " %s",
                    c->msg.task, c->msg.seq, c->user_errors, c->user_error);
    }
    if (bad_addrs > 0)
        hr_log_warn("address_unreadable", "task=%" PRId64 " seq=%" PRId64 " count=%zu", c->msg.task,
                    c->msg.seq, bad_addrs);
}

/* Submits C's open: control key, lease, members (and, for a channel that
 * pushes to addresses, the addresses); wk_lifecycle_opened goes on. */
void wk_lifecycle_open(wk_lifecycle *l, wk_chunk *c)
{
    hr_addr_platform platform;
    const char *app = NULL;
    bool addressed = wk_sender_addressed(l->sender, c->task->ch_index, &platform, &app);

    if (wk_chunk_open(l->rd, c, l->owner, l->cfg->worker.lease_ms, addressed ? &platform : NULL,
                      app) != 0)
        wk_lifecycle_drop(l, c, "the Redis thread took no job");
}

/* A lease another process holds is usually a worker's that was killed:
 * its partitions came here after the group's session timeout, and its
 * lease runs out at most worker.lease_ms after its last renewal.  Skipping
 * the chunk would leave it to the dispatcher's sweeper
 * (redelivery_timeout_s), so the open is retried by the control timer
 * (every 250 ms) until lease_ms has passed; a lease still held then is a
 * live holder's, and the chunk is skipped (its offset counts as finished:
 * the holder does the rest). */
static void wk_lifecycle_busy(wk_lifecycle *l, wk_chunk *c)
{
    int64_t now = hr_clock_now_ms();

    if (c->lease_wait_until_ms == 0) {
        c->lease_wait_until_ms = now + l->cfg->worker.lease_ms + WK_LIFECYCLE_CTL_MS;
        hr_log_info("chunk_lease_wait", "task=%" PRId64 " seq=%" PRId64 " wait_ms=%d", c->msg.task,
                    c->msg.seq, l->cfg->worker.lease_ms + WK_LIFECYCLE_CTL_MS);
        return;
    }
    if (now < c->lease_wait_until_ms)
        return;
    l->stats.busy_chunks++;
    hr_metrics_inc(l->met->chunks_redelivered);
    hr_log_info("chunk_busy", "task=%" PRId64 " seq=%" PRId64, c->msg.task, c->msg.seq);
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c);
}

/* C's open answered: halt it (the control key, expire_at), wait for a
 * foreign lease, close an empty set, or start its pushes — at once, or
 * slice by slice as the throttle lets them through. */
static void wk_lifecycle_opened(wk_chunk *c, const wk_chunk_opened *res)
{
    wk_lifecycle *l = c->ctx;
    const hr_chunkmsg *msg = &c->msg;
    wk_chunk_halt halt = res->halt;
    int64_t now = hr_clock_now_ms();

    if (wk_lifecycle_gone(l, c))
        return;
    /* Halted or abandoned while it opened: its end job, queued behind the
     * open, settles it. */
    if (c->phase == WK_CHUNK_ENDING)
        return;
    if (res->rc < 0) {
        wk_lifecycle_drop(l, c, res->errstr);
        return;
    }
    /* Paused, cancelled or expired before it started (a redelivery after
     * a worker died, a backlog): the whole chunk is parked, cancelled or
     * expires unpushed; a cancel or a pause holds it before expire_at. */
    if (halt == WK_CHUNK_RUN && hr_task_expired(c->task->row, now))
        halt = WK_CHUNK_EXPIRE;
    if (halt != WK_CHUNK_RUN) {
        c->halt = halt;
        wk_lifecycle_halted(l, c);
        return;
    }
    switch (res->rc) {
    case WK_CHUNK_BUSY:
        wk_lifecycle_busy(l, c);
        return;
    case WK_CHUNK_EMPTY:
        hr_metrics_inc(l->met->chunks_redelivered);
        wk_lifecycle_finish(l, c);
        return;
    default:
        break;
    }
    c->phase = WK_CHUNK_OPEN;
    c->opened_ms = now;
    c->open = c->npushes;
    /* Fewer members than published: a redelivery, partly acknowledged. */
    if ((int64_t)c->npushes + c->invalid < msg->count)
        hr_metrics_inc(l->met->chunks_redelivered);
    wk_lifecycle_open_anomalies(l, c, res->bad_addrs);
    hr_log_info("chunk_start",
                "task=%" PRId64 " seq=%" PRId64 " recipients=%zu partition=%" PRId32
                " offset=%" PRId64 " open_ms=%" PRId64 " published_ms_ago=%" PRId64,
                msg->task, msg->seq, c->npushes, c->partition, c->offset, now - c->started_ms,
                now - msg->published_ms);
    if (c->open == 0) {
        wk_lifecycle_finish(l, c);
        return;
    }
    if (c->task->throttle.limit > 0) {
        wk_lifecycle_throttle(l, c);
        return;
    }
    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_submit(l->sender, &c->pushes[i]);
    /* May settle pushes, even finish or drop C: C is not touched after. */
    wk_sender_kick(l->sender);
}

static const wk_chunk_hooks wk_lifecycle_chunk_hooks = {.opened = wk_lifecycle_opened,
                                                        .checked = wk_lifecycle_checked,
                                                        .flushed = wk_lifecycle_flushed,
                                                        .ended = wk_lifecycle_ended};

/* Starts work on a decoded chunk message; the offset is settled here for
 * every message that does not become a chunk. */
static void wk_lifecycle_chunk(wk_lifecycle *l, const hr_chunkmsg *msg, int32_t partition,
                               int64_t offset)
{
    wk_task *task = NULL;
    wk_chunk *c;
    char errstr[512];
    int rc;

    rc =
        wk_task_get(l->tasks, l->mysql, msg->task, hr_clock_now_ms(), &task, errstr, sizeof errstr);
    if (rc != 0) {
        if (rc == WK_TASK_NO_CHANNEL) {
            /* Not the task's fault (a rolling configuration change): the
             * chunk stays pending and the sweeper publishes it again after
             * redelivery_timeout_s, for whichever worker then owns its
             * partition.  Nothing is pushed, acknowledged or failed here. */
            hr_metrics_inc(l->met->bad[WK_BAD_NO_CHANNEL]);
            hr_log_warn("channel_missing", "task=%" PRId64 " seq=%" PRId64 " error=%s", msg->task,
                        msg->seq, errstr);
        } else if (rc == 1) {
            l->stats.unknown_tasks++;
            hr_metrics_inc(l->met->bad[WK_BAD_UNKNOWN_TASK]);
            hr_log_warn("unknown_task",
                        "task=%" PRId64 " seq=%" PRId64 " partition=%" PRId32 " offset=%" PRId64
                        " unknown_tasks=%" PRId64,
                        msg->task, msg->seq, partition, offset, l->stats.unknown_tasks);
        } else {
            l->stats.errors++;
            hr_metrics_inc(rc == 2 ? l->met->bad[WK_BAD_INVALID_TASK]
                                   : l->met->backend_errors[WK_BACKEND_MYSQL]);
            hr_log_error("task_load_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", msg->task,
                         msg->seq, errstr);
            /* Redelivering its chunks would never help: fail the task. */
            if (rc == 2)
                wk_reporter_fail_task(l->reporter, msg->task, errstr);
        }
        wk_lifecycle_settle_offset(l, partition, offset);
        return;
    }
    if (wk_lifecycle_active(l, msg)) {
        hr_log_info("chunk_duplicate", "task=%" PRId64 " seq=%" PRId64, msg->task, msg->seq);
        wk_task_put(l->tasks, task);
        wk_lifecycle_settle_offset(l, partition, offset);
        return;
    }
    c = wk_chunk_new(wk_redis_prefix(l->rd), msg, partition, offset, task, l->cfg->worker.ack_batch,
                     &wk_lifecycle_chunk_hooks, l);
    if (c == NULL) {
        wk_task_put(l->tasks, task);
        hr_log_error("out_of_memory", "task=%" PRId64 " seq=%" PRId64, msg->task, msg->seq);
        wk_lifecycle_settle_offset(l, partition, offset);
        return;
    }
    c->started_ms = hr_clock_now_ms();
    TAILQ_INSERT_TAIL(&l->chunks, c, link);
    l->nchunks++;
    wk_lifecycle_open(l, c);
}

/* ---- intake ------------------------------------------------------------- */

void wk_lifecycle_prefetch(wk_lifecycle *l, const wk_inbox_msg *msgs, size_t n)
{
    int64_t ids[WK_TASK_PREFETCH_MAX];
    size_t k = 0;
    char errstr[256];

    for (size_t i = 0; i < n && k < WK_TASK_PREFETCH_MAX; i++) {
        hr_chunkmsg msg;

        /* A bad one is counted when it is started. */
        if (hr_chunkmsg_decode(msgs[i].payload, msgs[i].len, &msg, errstr, sizeof errstr) == 0)
            ids[k++] = msg.task;
    }
    wk_task_prefetch(l->tasks, l->mysql, ids, k, hr_clock_now_ms());
}

void wk_lifecycle_intake(wk_lifecycle *l, int32_t partition, int64_t offset, const void *payload,
                         size_t len)
{
    hr_chunkmsg msg;
    char errstr[256];

    if (wk_offsets_begin(l->offsets, partition, offset) != 0) {
        hr_log_warn("offset_out_of_order", "partition=%" PRId32 " offset=%" PRId64, partition,
                    offset);
        return;
    }
    if (hr_chunkmsg_decode(payload, len, &msg, errstr, sizeof errstr) != 0) {
        l->stats.bad_messages++;
        hr_metrics_inc(l->met->bad[WK_BAD_DECODE]);
        hr_log_warn("bad_message",
                    "partition=%" PRId32 " offset=%" PRId64 " reason=%s bad_messages=%" PRId64,
                    partition, offset, errstr, l->stats.bad_messages);
        wk_lifecycle_settle_offset(l, partition, offset);
        return;
    }
    wk_lifecycle_chunk(l, &msg, partition, offset);
}

/* ---- revoke and shutdown ---------------------------------------------------- */

size_t wk_lifecycle_revoke(wk_lifecycle *l, int32_t partition)
{
    wk_chunk *c, *next;
    size_t draining = 0;

    for (c = TAILQ_FIRST(&l->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        if (c->partition != partition)
            continue;
        c->revoked = true;
        if (c->phase != WK_CHUNK_ENDING) {
            wk_lifecycle_hold(l, c);
            if (c->open == 0)
                wk_lifecycle_abandon(l, c, "revoked", false); /* nothing in flight */
        }
    }
    /* What is left: requests in flight, or an end under way (an abandon
     * writing its acknowledgements, which the next owner must see). */
    TAILQ_FOREACH(c, &l->chunks, link)
    if (c->partition == partition && c->revoked)
        draining++;
    return draining;
}

bool wk_lifecycle_revoke_draining(const wk_lifecycle *l)
{
    const wk_chunk *c;

    TAILQ_FOREACH(c, &l->chunks, link)
    if (c->revoked)
        return true;
    return false;
}

void wk_lifecycle_abandon_revoked(wk_lifecycle *l, const char *why)
{
    wk_chunk *c, *next;

    for (c = TAILQ_FIRST(&l->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        if (c->revoked)
            wk_lifecycle_abandon(l, c, why, false);
    }
}

void wk_lifecycle_forget(wk_lifecycle *l, int32_t partition)
{
    size_t pending = wk_offsets_pending(l->offsets, partition);

    /* Messages received but not settled are consumed again by the
     * partition's next owner. */
    if (pending > 0)
        hr_log_info("partition_unsettled", "partition=%" PRId32 " messages=%zu", partition,
                    pending);
    wk_offsets_drop(l->offsets, partition);
}

bool wk_lifecycle_ending(const wk_lifecycle *l)
{
    const wk_chunk *c;

    TAILQ_FOREACH(c, &l->chunks, link)
    if (c->phase == WK_CHUNK_ENDING)
        return true;
    return false;
}

void wk_lifecycle_abandon_all(wk_lifecycle *l, const char *why)
{
    wk_chunk *c, *next;

    for (c = TAILQ_FIRST(&l->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        wk_lifecycle_abandon(l, c, why, false);
    }
}
