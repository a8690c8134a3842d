/* wk_lifecycle: a chunk from intake to offset store (see wk_lifecycle.h).
 *
 * Read top-down as a chunk lives, backwards: the endings first (finish,
 * halt, abandon, drop — each settles the offset and unlinks), then the
 * pushes' outcomes, then intake and open, then the revoke/shutdown entry
 * points.  The timers' work (lease renewal, control, watchdog) is
 * wk_lifecycle_timers.c's. */
#include "wk_lifecycle_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_chunkmsg.h"
#include "hr_finish.h"
#include "hr_log.h"
#include "wk_clock.h"
#include "wk_control.h"

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

/* The stats hashes of every shard of C's sharded task, each as a counters
 * event of its shard (hr_finish_read_stats: absolute values), for the
 * finish of the task's last chunk.  0, or -1 on a Redis error (logged). */
static int wk_lifecycle_report_shards(wk_lifecycle *l, wk_chunk *c)
{
    char errstr[256];

    for (int k = 0; k < (int)c->task->row->shards; k++) {
        wk_event ev = {.kind = WK_EVENT_COUNTERS, .task = c->msg.task, .shard = k};
        hr_outcomes o;

        if (hr_finish_read_stats(l->redis, c->msg.task, k, &o, errstr, sizeof errstr) != 0) {
            hr_log_warn("shard_counters_unread", "task=%" PRId64 " shard=%d error=%s", c->msg.task,
                        k, errstr);
            return -1;
        }
        ev.u.counters.sent = o.sent;
        ev.u.counters.failed = o.failed;
        ev.u.counters.throttled = o.throttled;
        ev.u.counters.retried = o.retried;
        ev.u.counters.unregistered = o.unregistered;
        ev.u.counters.cancelled = o.cancelled;
        ev.u.counters.expired = o.expired;
        wk_reporter_push(l->reporter, &ev);
    }
    return 0;
}

/* Flushes C's acknowledgements and reports them; 0 or -1 (logged). */
static int wk_lifecycle_flush(wk_lifecycle *l, wk_chunk *c)
{
    char errstr[256];

    if (wk_chunk_flush(c, l->redis, errstr, sizeof errstr) != 0) {
        hr_log_error("ack_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", c->msg.task,
                     c->msg.seq, errstr);
        return -1;
    }
    wk_lifecycle_report_counters(l, c);
    return 0;
}

static void wk_lifecycle_unlink(wk_lifecycle *l, wk_chunk *c)
{
    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_cancel(l->sender, &c->pushes[i]);
    TAILQ_REMOVE(&l->chunks, c, link);
    l->nchunks--;
    wk_task_put(l->tasks, c->task);
    wk_chunk_free(c);
    l->hooks.wake(l->hooks.privdata);
}

/* Gives C up without finishing it: requests stop, delivered recipients are
 * acknowledged, the lease is released; the rest stay in the set.  With
 * SETTLE the offset counts as finished (the lease went to another worker,
 * which does the rest); without, it is not stored and the chunk is
 * redelivered to the partition's next owner. */
void wk_lifecycle_abandon(wk_lifecycle *l, wk_chunk *c, const char *why, bool settle)
{
    char errstr[256];

    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_cancel(l->sender, &c->pushes[i]);
    wk_lifecycle_flush(l, c);
    if (wk_chunk_release(c, l->redis, l->owner, errstr, sizeof errstr) != 0)
        hr_log_warn("lease_release_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s",
                    c->msg.task, c->msg.seq, errstr);
    hr_log_info("chunk_abandoned", "task=%" PRId64 " seq=%" PRId64 " reason=%s open=%zu",
                c->msg.task, c->msg.seq, why, c->open);
    if (settle)
        wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c);
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

/* Every recipient of C is settled: acknowledge, close, store the offset. */
static void wk_lifecycle_finish(wk_lifecycle *l, wk_chunk *c)
{
    int64_t res[3];
    char errstr[256];

    if (wk_lifecycle_flush(l, c) != 0) {
        wk_lifecycle_drop(l, c, "ack failed");
        return;
    }
    if (wk_chunk_close(c, l->redis, l->owner, res, errstr, sizeof errstr) != 0) {
        wk_lifecycle_drop(l, c, errstr);
        return;
    }
    /* Also for a redelivered, already empty chunk: its close reports what
     * a killed worker's reporter could not write. */
    wk_lifecycle_report_counters(l, c);
    if (res[0] < 0) {
        /* Members appeared after we read the set: leave them to a
         * redelivery by the sweeper. */
        hr_log_warn("chunk_not_empty", "task=%" PRId64 " seq=%" PRId64, c->msg.task, c->msg.seq);
        wk_chunk_release(c, l->redis, l->owner, errstr, sizeof errstr);
    } else {
        wk_event ev = {.kind = WK_EVENT_CHUNK_DONE, .task = c->msg.task, .shard = wk_chunk_row(c)};

        /* A sharded task's shard ran dry: the task's last chunk only when
         * every other shard did too (else the sweeper ends it), and then
         * every shard's counters go with it: the other shards' last
         * counters may still wait in other workers' reporters, and the
         * finish compares the rows' sum with the subscriptions. */
        if (c->msg.sharded && res[1] == 0 && res[2] == 0 &&
            (wk_chunk_task_left(c, l->redis, &res[1], &res[2], errstr, sizeof errstr) != 0 ||
             (res[1] == 0 && res[2] == 0 && wk_lifecycle_report_shards(l, c) != 0)))
            res[1] = -1;
        ev.u.chunk.state = WK_CHUNK_END_DONE;
        ev.u.chunk.seq = c->msg.seq;
        ev.u.chunk.done_ms = wk_clock_now_ms();
        ev.u.chunk.pending_left = res[1];
        ev.u.chunk.subs_left = res[2];
        wk_reporter_push(l->reporter, &ev);
        l->stats.chunks_done++;
        hr_metrics_inc(l->met->chunks_acked);
    }
    hr_log_info("chunk_done",
                "task=%" PRId64 " seq=%" PRId64 " recipients=%zu sent=%" PRId64 " failed=%" PRId64
                " throttled=%" PRId64 " unregistered=%" PRId64 " retried=%" PRId64
                " duration_ms=%" PRId64 " pending_left=%" PRId64,
                c->msg.task, c->msg.seq, c->npushes, c->sent, c->failed, c->throttled,
                c->unregistered, c->retried, wk_clock_now_ms() - c->started_ms, res[1]);
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
    wk_event ev = {.kind = WK_EVENT_CHUNK_DONE, .task = c->msg.task, .shard = wk_chunk_row(c)};
    int64_t dropped = 0, total = 0;
    char errstr[256];
    bool expire = c->halt == WK_CHUNK_EXPIRE;

    if (wk_lifecycle_flush(l, c) != 0) {
        wk_lifecycle_drop(l, c, "ack failed");
        return;
    }
    if (c->halt == WK_CHUNK_CANCEL || expire) {
        /* Only the outcome's counter (the stats hash's): sent .. retried
         * are not carried (-1). */
        wk_event counters = {
            .kind = WK_EVENT_COUNTERS,
            .task = c->msg.task,
            .shard = wk_chunk_row(c),
            .u.counters = {
                .sent = -1, .failed = -1, .throttled = -1, .retried = -1, .unregistered = -1}};

        if (hr_finish_drop(l->redis, c->msg.task, c->msg.shard, c->msg.seq,
                           expire ? HR_OUTCOME_EXPIRED : HR_OUTCOME_CANCELLED, l->owner, &dropped,
                           &total, errstr, sizeof errstr) != 0) {
            wk_lifecycle_drop(l, c, errstr);
            return;
        }
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
        if (wk_chunk_release(c, l->redis, l->owner, errstr, sizeof errstr) != 0) {
            wk_lifecycle_drop(l, c, errstr);
            return;
        }
        l->stats.parked_chunks++;
        ev.u.chunk.state = WK_CHUNK_END_PARKED;
    }
    ev.u.chunk.seq = c->msg.seq;
    ev.u.chunk.done_ms = wk_clock_now_ms();
    wk_reporter_push(l->reporter, &ev);
    hr_log_info(c->halt == WK_CHUNK_CANCEL ? "chunk_cancelled"
                : expire                   ? "chunk_expired"
                                           : "chunk_parked",
                "task=%" PRId64 " seq=%" PRId64 " sent=%" PRId64 " dropped=%" PRId64, c->msg.task,
                c->msg.seq, c->sent, dropped);
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c);
}

/* No new request of C starts: its pushes not yet started (ready, or
 * waiting for a retry) are taken back from the sender; those in flight
 * finish and are not retried. */
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
}

/* Stops starting requests for C (HALT: park, expire or cancel; each
 * overrides the ones before it under way); running requests finish and
 * are not retried. */
void wk_lifecycle_halt(wk_lifecycle *l, wk_chunk *c, wk_chunk_halt halt)
{
    /* A chunk being revoked is given up anyway; its next owner parks or
     * cancels it. */
    if (halt <= c->halt || c->revoked)
        return;
    c->halt = halt;
    wk_lifecycle_hold(l, c);
    if (c->open == 0)
        wk_lifecycle_halted(l, c);
}

/* Nothing of C is open any more (C->open == 0): a revoked chunk is given
 * up (its requests all answered and acknowledged, so the partition's next
 * owner pushes nobody twice), a halted one parked or cancelled, the others
 * are done.  Frees C. */
static void wk_lifecycle_settled(wk_lifecycle *l, wk_chunk *c)
{
    if (c->revoked)
        wk_lifecycle_abandon(l, c, "revoked", false);
    else if (c->halt != WK_CHUNK_RUN)
        wk_lifecycle_halted(l, c);
    else
        wk_lifecycle_finish(l, c);
}

/* ---- push outcomes ---------------------------------------------------------- */

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
    ev.u.outcome.at_ms = wk_clock_now_ms();
    wk_reporter_push(l->reporter, &ev);
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
        c->retried_unflushed += retries;
        hr_metrics_add(mc->retried, (uint64_t)retries);
        hr_metrics_add(l->met->retries, (uint64_t)retries);
    }
    if (res->held) {
        /* The sender refused to start a push of an expired task
         * (wk_chan_pump; a retry due past expire_at waited until then):
         * the rest of the chunk expires with it. */
        if (c->halt == WK_CHUNK_RUN && !c->revoked &&
            hr_task_expired(c->task->row, wk_clock_now_ms()))
            wk_lifecycle_halt(l, c, WK_CHUNK_EXPIRE); /* may free C */
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
                           (double)(wk_clock_now_ms() - c->msg.due_ms) / 1000.0);
        full = wk_chunk_ack(c, push->uid);
        break;
    case WK_DELIVERY_UNREGISTERED:
        hr_metrics_inc(mc->unregistered);
        full = wk_chunk_unregistered(c, push->uid);
        break;
    default:
        hr_metrics_inc(mc->failed);
        hr_log_debug("push_failed", "task=%" PRId64 " uid=%s reason=%s", c->msg.task, push->uid,
                     res->reason);
        full = wk_chunk_dead(c, push->uid, res->reason);
        break;
    }
    if (full < 0 || (full == 1 && wk_lifecycle_flush(l, c) != 0)) {
        wk_lifecycle_drop(l, c, full < 0 ? "out of memory" : "ack failed");
        return;
    }
    if (c->open == 0)
        wk_lifecycle_settled(l, c);
    if (l->stopping)
        l->hooks.wake(l->hooks.privdata);
}

/* ---- messages -------------------------------------------------------------- */

static bool wk_lifecycle_active(const wk_lifecycle *l, const hr_chunkmsg *msg)
{
    const wk_chunk *c;

    TAILQ_FOREACH(c, &l->chunks, link)
    if (c->msg.task == msg->task && c->msg.seq == msg->seq)
        return true;
    return false;
}

/* The throttle step of an opened chunk: blocked recipients are acknowledged
 * as throttled and reported; 0, or -1 when C was dropped. */
static int wk_lifecycle_throttle(wk_lifecycle *l, wk_chunk *c)
{
    static const wk_push_result none = {.delivered = false};
    wk_chunk_throttled thr;
    char errstr[512];

    if (wk_chunk_throttle(c, l->redis, &thr, errstr, sizeof errstr) != 0) {
        wk_lifecycle_drop(l, c, errstr);
        return -1;
    }
    wk_lifecycle_report_counters(l, c);
    hr_metrics_add(l->met->chans[c->task->ch_index].throttled, (uint64_t)thr.blocked);
    hr_metrics_add(l->met->throttled, (uint64_t)thr.blocked);
    if (l->cfg->worker.delivery_log && thr.blocked > 0)
        for (size_t i = 0; i < c->npushes; i++)
            if (c->verdicts[i] == HR_THROTTLE_BLOCKED)
                wk_lifecycle_outcome(l, c, &c->pushes[i], WK_DELIVERY_THROTTLED, &none);
    if (thr.key_missing > 0)
        hr_log_info("throttle_key_missing", "task=%" PRId64 " seq=%" PRId64 " count=%" PRId64,
                    c->msg.task, c->msg.seq, thr.key_missing);
    return 0;
}

/* For a channel that pushes to addresses: reads the chunk's from the
 * address book.  0, or -1 when C was dropped (Redis failed). */
static int wk_lifecycle_addresses(wk_lifecycle *l, wk_chunk *c)
{
    hr_addr_platform platform;
    const char *app;
    size_t bad = 0;
    char errstr[512];

    if (!wk_sender_addressed(l->sender, c->task->ch_index, &platform, &app))
        return 0;
    if (wk_chunk_fetch_addrs(c, l->redis, platform, app, &bad, errstr, sizeof errstr) != 0) {
        wk_lifecycle_drop(l, c, errstr);
        return -1;
    }
    if (bad > 0)
        hr_log_warn("address_unreadable", "task=%" PRId64 " seq=%" PRId64 " count=%zu", c->msg.task,
                    c->msg.seq, bad);
    return 0;
}

/* Address A of PUSH is dead (the provider said so): out of MySQL and
 * Redis, so no later campaign tries it.  A failure is logged; the next
 * campaign's answer prunes it then. */
void wk_lifecycle_prune(void *ctx, wk_push *push, const hr_addr *a)
{
    wk_lifecycle *l = ctx;
    wk_chunk *c = push->owner;
    char errstr[512];

    if (hr_addr_prune(l->mysql, l->redis, a, errstr, sizeof errstr) < 0) {
        hr_log_warn("address_prune_failed", "task=%" PRId64 " uid=%s error=\"%s\"", c->msg.task,
                    push->uid, errstr);
        return;
    }
    hr_metrics_inc(l->met->pruned);
    hr_log_debug("address_pruned", "task=%" PRId64 " uid=%s platform=%s", c->msg.task, push->uid,
                 hr_addr_platform_name(a->platform));
}

/* Reports what wk_chunk_open worked around: invalid uids (dead-lettered,
 * counted failed) and user hashes that answered an error. */
static void wk_lifecycle_open_anomalies(wk_lifecycle *l, wk_chunk *c)
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
}

/* Takes C's lease, reads its set and starts its pushes.  A lease another
 * process holds is usually a worker's that was killed: its partitions
 * came here after the group's session timeout, and its lease runs out at
 * most worker.lease_ms after its last renewal.  Skipping the chunk would
 * leave it to the dispatcher's sweeper (redelivery_timeout_s), so the
 * open is retried by the control timer (every 250 ms) until lease_ms has
 * passed; a lease still held then is a live holder's, and the chunk is
 * skipped (its offset counts as finished: the holder does the rest).
 * May free C. */
void wk_lifecycle_open(wk_lifecycle *l, wk_chunk *c)
{
    const hr_chunkmsg *msg = &c->msg;
    wk_task *task = c->task;
    int32_t partition = c->partition;
    int64_t offset = c->offset, now;
    char errstr[512];
    int rc;

    rc = wk_chunk_open(c, l->redis, l->owner, l->cfg->worker.lease_ms, errstr, sizeof errstr);
    switch (rc) {
    case WK_CHUNK_BUSY:
        now = wk_clock_now_ms();
        if (c->lease_wait_until_ms == 0) {
            c->lease_wait_until_ms = now + l->cfg->worker.lease_ms + WK_LIFECYCLE_CTL_MS;
            hr_log_info("chunk_lease_wait", "task=%" PRId64 " seq=%" PRId64 " wait_ms=%d",
                        msg->task, msg->seq, l->cfg->worker.lease_ms + WK_LIFECYCLE_CTL_MS);
            return;
        }
        if (now < c->lease_wait_until_ms)
            return;
        l->stats.busy_chunks++;
        hr_metrics_inc(l->met->chunks_redelivered);
        hr_log_info("chunk_busy", "task=%" PRId64 " seq=%" PRId64, msg->task, msg->seq);
        wk_lifecycle_settle_offset(l, partition, offset);
        wk_lifecycle_unlink(l, c);
        return;
    case WK_CHUNK_EMPTY:
        hr_metrics_inc(l->met->chunks_redelivered);
        wk_lifecycle_finish(l, c);
        return;
    case WK_CHUNK_STARTED:
        /* Fewer members than published: a redelivery, partly acknowledged. */
        if ((int64_t)c->npushes + c->invalid < msg->count)
            hr_metrics_inc(l->met->chunks_redelivered);
        wk_lifecycle_open_anomalies(l, c);
        break;
    default:
        wk_lifecycle_drop(l, c, errstr);
        return;
    }
    if (task->throttle.limit > 0 && wk_lifecycle_throttle(l, c) != 0)
        return;
    if (wk_lifecycle_addresses(l, c) != 0)
        return;
    hr_log_info("chunk_start",
                "task=%" PRId64 " seq=%" PRId64 " recipients=%zu partition=%" PRId32
                " offset=%" PRId64 " throttled=%" PRId64,
                msg->task, msg->seq, c->npushes, partition, offset, c->throttled);
    if (c->open == 0) {
        wk_lifecycle_finish(l, c);
        return;
    }
    for (size_t i = 0; i < c->npushes; i++)
        if (c->verdicts == NULL || c->verdicts[i] != HR_THROTTLE_BLOCKED)
            wk_sender_submit(l->sender, &c->pushes[i]);
    /* May settle pushes, even finish or drop C: C is not touched after. */
    wk_sender_kick(l->sender);
}

/* Starts work on a decoded chunk message; the offset is settled here for
 * every message that does not become an open chunk. */
static void wk_lifecycle_chunk(wk_lifecycle *l, const hr_chunkmsg *msg, int32_t partition,
                               int64_t offset)
{
    wk_task *task = NULL;
    wk_chunk *c;
    char errstr[512];
    int rc, halt;

    rc =
        wk_task_get(l->tasks, l->mysql, msg->task, wk_clock_now_ms(), &task, errstr, sizeof errstr);
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
    halt = wk_control_read(l->redis, msg->task, errstr, sizeof errstr);
    if (halt < 0 || wk_lifecycle_active(l, msg)) {
        if (halt < 0) {
            l->stats.errors++;
            hr_metrics_inc(l->met->backend_errors[WK_BACKEND_REDIS]);
            hr_log_error("ctl_read_failed", "task=%" PRId64 " error=%s", msg->task, errstr);
        } else {
            hr_log_info("chunk_duplicate", "task=%" PRId64 " seq=%" PRId64, msg->task, msg->seq);
        }
        wk_task_put(l->tasks, task);
        wk_lifecycle_settle_offset(l, partition, offset);
        return;
    }
    c = wk_chunk_new(l->redis, msg, partition, offset, task, l->cfg->worker.ack_batch);
    if (c == NULL) {
        wk_task_put(l->tasks, task);
        hr_log_error("out_of_memory", "task=%" PRId64 " seq=%" PRId64, msg->task, msg->seq);
        wk_lifecycle_settle_offset(l, partition, offset);
        return;
    }
    c->started_ms = wk_clock_now_ms();
    TAILQ_INSERT_TAIL(&l->chunks, c, link);
    l->nchunks++;
    /* Past expire_at (a redelivery after a worker died, a backlog): the
     * whole chunk expires unpushed, unless a cancel or a pause holds it. */
    if (halt == WK_CHUNK_RUN && hr_task_expired(task->row, c->started_ms))
        halt = WK_CHUNK_EXPIRE;
    if (halt != WK_CHUNK_RUN) {
        /* Paused, cancelled or expired before it started: no lease, no push. */
        c->halt = (wk_chunk_halt)halt;
        wk_lifecycle_halted(l, c);
        return;
    }
    wk_lifecycle_open(l, c);
}

/* ---- intake ------------------------------------------------------------- */

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
        wk_lifecycle_hold(l, c);
        if (c->open == 0)
            wk_lifecycle_abandon(l, c, "revoked", false); /* nothing in flight */
        else
            draining++;
    }
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

void wk_lifecycle_abandon_all(wk_lifecycle *l, const char *why)
{
    wk_chunk *c;

    while ((c = TAILQ_FIRST(&l->chunks)) != NULL)
        wk_lifecycle_abandon(l, c, why, false);
}
