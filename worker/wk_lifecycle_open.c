/* wk_lifecycle_open: a message becomes a chunk and the chunk is opened (see
 * wk_lifecycle_open.h). */
#include "wk_lifecycle_open.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_clock.h"
#include "hr_log.h"
#include "hr_chunkmsg.h"
#include "wk_chunk_acks.h"
#include "wk_chunk_open.h"
#include "wk_consent.h"
#include "wk_lifecycle_end.h"
#include "wk_lifecycle_push.h"
#include "wk_lifecycle_stall.h"
#include "wk_task_cache.h"

/* ---- open ---------------------------------------------------------------------- */

static bool wk_lifecycle_active(const wk_lifecycle *l, const hr_chunkmsg *msg)
{
    const wk_chunk *c;

    TAILQ_FOREACH(c, &l->chunks, link)
    if (c->msg.task == msg->task && c->msg.seq == msg->seq)
        return true;
    return false;
}

/* Reports what a part of the open's read (RES) worked around: invalid
 * uids (the open's: dead-lettered, counted failed), user hashes that
 * answered an error, address members that do not parse. */
static void wk_lifecycle_open_anomalies(wk_lifecycle *l, wk_chunk *c, const wk_chunk_opened *res)
{
    if (res->invalid > 0) {
        wk_lifecycle_report_counters(l, c);
        hr_metrics_add(l->met->chans[c->task->ch_index].failed, (uint64_t)res->invalid);
        hr_metrics_add(l->met->anomalies[WK_ANOMALY_INVALID_UID], (uint64_t)res->invalid);
        hr_log_warn("invalid_uids", "task=%" PRId64 " seq=%" PRId64 " count=%" PRId64, c->msg.task,
                    c->msg.seq, res->invalid);
    }
    if (res->user_errors > 0) {
        hr_metrics_add(l->met->anomalies[WK_ANOMALY_USER_HASH], (uint64_t)res->user_errors);
        hr_log_warn("user_hash_error", "task=%" PRId64 " seq=%" PRId64 " count=%" PRId64 " %s",
                    c->msg.task, c->msg.seq, res->user_errors, res->user_error);
    }
    if (res->bad_addrs > 0)
        hr_log_warn("address_unreadable", "task=%" PRId64 " seq=%" PRId64 " count=%zu", c->msg.task,
                    c->msg.seq, res->bad_addrs);
}

/* What the consent decided of a part of the open's read (wk_consent.h):
 * the opted out and suppressed members are counted per channel and
 * reported (an event and a delivery-log row each), the deferred ones went
 * back to the wait set.
 * Without the events gate the open acknowledged them already; with it
 * (C->gate), their acknowledgements are buffered here, each behind its
 * event (wk_lifecycle_outcome moves C->ev_last), and flushed like the
 * pushes' (ack.lua under their stats fields, counting only uids still in
 * the set): a worker killed before Kafka confirmed the events leaves them
 * in the set, and the chunk's next holder reports them again.  The chunk's
 * end job comes after those flushes (its jobs keep their order).  0, or
 * -1 when C was dropped (not to be touched). */
static int wk_lifecycle_consent(wk_lifecycle *l, wk_chunk *c, const wk_chunk_opened *res)
{
    const wk_push_result none = {.delivered = false, .at_ms = hr_clock_now_ms()};
    wk_metrics_chan *mc = &l->met->chans[c->task->ch_index];
    int64_t opted_out = 0, suppressed = 0;
    int full = 0;

    if (res->verdicts == NULL)
        return 0;
    for (size_t k = 0; k < res->to - res->from; k++) {
        const char *uid = c->members->element[res->from + k]->str;
        wk_delivery status;
        wk_chunk_settled how;

        switch (res->verdicts[k]) {
        case WK_CONSENT_OPTED_OUT:
            hr_metrics_inc(mc->opted_out);
            opted_out++;
            status = WK_DELIVERY_OPTED_OUT;
            how = WK_CHUNK_OPTED_OUT;
            break;
        case WK_CONSENT_SUPPRESSED:
            hr_metrics_inc(mc->suppressed);
            suppressed++;
            status = WK_DELIVERY_SUPPRESSED;
            how = WK_CHUNK_SUPPRESSED;
            break;
        case WK_CONSENT_DEFER:
            hr_metrics_inc(mc->deferred);
            continue;
        default:
            continue;
        }
        if (wk_lifecycle_reports(l))
            wk_lifecycle_outcome(l, c, uid, NULL, status, &none);
        if (c->gate != NULL && (full = wk_chunk_ack(c, how, uid, NULL)) != 0 &&
            (full < 0 || wk_chunk_flush(l->rd, c) != 0))
            goto dropped;
    }
    if (c->gate != NULL && wk_chunk_flush(l->rd, c) != 0)
        goto dropped;
    if (opted_out > 0 || suppressed > 0 || res->deferred > 0) {
        wk_lifecycle_report_counters(l, c);
        hr_log_debug("chunk_consent",
                     "task=%" PRId64 " seq=%" PRId64 " opted_out=%" PRId64 " suppressed=%" PRId64
                     " deferred=%" PRId64,
                     c->msg.task, c->msg.seq, opted_out, suppressed, res->deferred);
    }
    return 0;
dropped:
    wk_lifecycle_drop(l, c, full < 0 ? "out of memory" : "the Redis thread took no job", NULL);
    return -1;
}

/* Submits C's open: control key, lease, members (and, for a channel that
 * pushes to addresses, the addresses); wk_lifecycle_opened goes on. */
void wk_lifecycle_open(wk_lifecycle *l, wk_chunk *c)
{
    hr_addr_platform platform;
    const char *app = NULL;
    bool addressed = wk_sender_addressed(l->sender, c->task->ch_index, &platform, &app);

    wk_lifecycle_set(c, WK_CHUNK_OPENING,
                     c->state == WK_CHUNK_NEW       ? "intake"
                     : c->state == WK_CHUNK_STALLED ? "stall over"
                                                    : "lease wait over");
    if (wk_chunk_open(l->rd, c, l->owner, l->cfg->worker.lease_ms, addressed ? &platform : NULL,
                      app) != 0)
        wk_lifecycle_drop(l, c, "the Redis thread took no job", NULL);
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
    }
    if (now < c->lease_wait_until_ms) {
        wk_lifecycle_set(c, WK_CHUNK_LEASE_WAIT, "lease held by another");
        return;
    }
    l->stats.busy_chunks++;
    hr_metrics_inc(l->met->chunks_redelivered);
    hr_log_info("chunk_busy", "task=%" PRId64 " seq=%" PRId64, c->msg.task, c->msg.seq);
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c, "busy");
}

/* What a part of C's open read (RES) comes to: its anomalies reported,
 * its consent's outcomes (wk_lifecycle_consent), its pushes counted open
 * and handed to the throttle's slices or queued on the sender (the caller
 * kicks it).  0, or -1 when C was dropped. */
static int wk_lifecycle_take(wk_lifecycle *l, wk_chunk *c, const wk_chunk_opened *res)
{
    size_t first = c->npushes - res->npushes;

    wk_lifecycle_open_anomalies(l, c, res);
    if (wk_lifecycle_consent(l, c, res) != 0)
        return -1;
    c->open += res->npushes;
    if (res->npushes == 0)
        return 0;
    if (c->task->throttle.limit > 0)
        return wk_lifecycle_throttle(l, c, first, res->npushes);
    for (size_t i = first; i < c->npushes; i++)
        wk_sender_submit(l->sender, &c->pushes[i]);
    return 0;
}

/* Submits the read of opened C's members after the open's first part, one
 * job per part, all at once: the Redis thread reads them back to back
 * (behind the first part's throttle slices) while the sender pushes.  0,
 * or -1 when C was dropped. */
static int wk_lifecycle_read_rest(wk_lifecycle *l, wk_chunk *c)
{
    hr_addr_platform platform;
    const char *app = NULL;
    bool addressed = wk_sender_addressed(l->sender, c->task->ch_index, &platform, &app);
    size_t n = c->members->elements;

    for (size_t i = 1; i < wk_chunk_parts(n); i++) {
        size_t from, to;

        wk_chunk_part_range(n, i, &from, &to);
        if (wk_chunk_read(l->rd, c, from, to, addressed ? &platform : NULL, app) != 0) {
            wk_lifecycle_drop(l, c, "the Redis thread took no job", NULL);
            return -1;
        }
    }
    return 0;
}

/* C's open answered: halt it (the control key, expire_at), wait for a
 * foreign lease, close an empty set, or start the pushes of its first
 * part — at once, or slice by slice as the throttle lets them through —
 * and read the rest of its members. */
static void wk_lifecycle_opened(wk_chunk *c, const wk_chunk_opened *res)
{
    wk_lifecycle *l = c->ctx;
    const hr_chunkmsg *msg = &c->msg;
    wk_chunk_halt halt = res->halt;
    int64_t now = hr_clock_now_ms();
    size_t n;

    if (wk_lifecycle_gone(l, c))
        return;
    /* Halted or abandoned while it opened: its end job, queued behind the
     * open, settles it. */
    if (c->state != WK_CHUNK_OPENING)
        return;
    if (res->rc < 0) {
        wk_lifecycle_drop(l, c, "open failed", res->errstr);
        return;
    }
    /* Paused, cancelled or expired before it started (a redelivery after
     * a worker died, a backlog): the whole chunk is parked, cancelled or
     * expires unpushed; a cancel or a pause holds it before expire_at. */
    if (halt == WK_CHUNK_RUN && hr_task_expired(c->task->row, now))
        halt = WK_CHUNK_EXPIRE;
    if (halt != WK_CHUNK_RUN) {
        wk_lifecycle_halt(l, c, halt); /* ends it: nothing of it is open */
        return;
    }
    switch (res->rc) {
    case WK_CHUNK_BUSY:
        wk_lifecycle_busy(l, c);
        return;
    case WK_CHUNK_EMPTY:
        hr_metrics_inc(l->met->chunks_redelivered);
        wk_lifecycle_end(l, c, WK_CHUNK_CLOSING, "empty");
        return;
    default:
        break;
    }
    wk_lifecycle_set(c, WK_CHUNK_PUSHING, "opened");
    c->opened_ms = now;
    n = c->members->elements;
    /* Until their parts answer, the members not read yet keep C open. */
    c->unread = n - res->to;
    c->open = c->unread;
    /* Fewer members than published: a redelivery, partly acknowledged. */
    if ((int64_t)n < msg->count)
        hr_metrics_inc(l->met->chunks_redelivered);
    /* The rest's reads go before the first part's outcomes, whose events
     * would hold every job of C behind them in the events gate; but after
     * a throttled chunk's first slices, which would otherwise wait for the
     * whole read. */
    if (c->task->throttle.limit > 0
            ? wk_lifecycle_take(l, c, res) != 0 || wk_lifecycle_read_rest(l, c) != 0
            : wk_lifecycle_read_rest(l, c) != 0 || wk_lifecycle_take(l, c, res) != 0)
        return;
    hr_log_info("chunk_start",
                "task=%" PRId64 " seq=%" PRId64 " recipients=%zu members=%zu read=%zu"
                " partition=%" PRId32 " offset=%" PRId64 " open_ms=%" PRId64
                " published_ms_ago=%" PRId64,
                msg->task, msg->seq, c->npushes, n, res->to, c->partition, c->offset,
                now - c->started_ms, now - msg->published_ms);
    if (c->open == 0) {
        wk_lifecycle_end(l, c, WK_CHUNK_CLOSING, "nobody to push");
        return;
    }
    /* May settle pushes, even finish or drop C: C is not touched after. */
    wk_sender_kick(l->sender);
}

/* A later part of C's open answered: its pushes go, and with the last
 * part every member of C is read (chunk_read: how many of its pushes had
 * settled by then), so C may be settled. */
static void wk_lifecycle_read(wk_chunk *c, const wk_chunk_opened *res)
{
    wk_lifecycle *l = c->ctx;

    if (wk_lifecycle_gone(l, c))
        return;
    /* Held, stalled or ending meanwhile: its members were counted out
     * when it held (wk_lifecycle_hold) and get no push; those the consent
     * did not settle in Redis stay in the set for its ending. */
    if (c->state != WK_CHUNK_PUSHING)
        return;
    if (res->rc < 0) {
        wk_lifecycle_drop(l, c, "read failed", res->errstr);
        return;
    }
    c->unread -= res->to - res->from;
    c->open -= res->to - res->from;
    if (wk_lifecycle_take(l, c, res) != 0)
        return;
    if (c->unread == 0)
        hr_log_info("chunk_read",
                    "task=%" PRId64 " seq=%" PRId64 " recipients=%zu members=%zu settled=%zu"
                    " read_ms=%" PRId64,
                    c->msg.task, c->msg.seq, c->npushes, c->members->elements, c->npushes - c->open,
                    hr_clock_now_ms() - c->opened_ms);
    if (c->open == 0) {
        wk_lifecycle_settled(l, c);
        return;
    }
    /* May settle pushes, even finish or drop C: C is not touched after. */
    wk_sender_kick(l->sender);
}

static const wk_chunk_hooks wk_lifecycle_chunk_hooks = {.opened = wk_lifecycle_opened,
                                                        .read = wk_lifecycle_read,
                                                        .checked = wk_lifecycle_checked,
                                                        .flushed = wk_lifecycle_flushed,
                                                        .ended = wk_lifecycle_ended};

/* Hands the chunk of MSG back without opening it, WHY in the log (a chunk with no task:
 * it goes straight to HANDING_BACK, whose job needs only its keys).  0, or
 * -1 when out of memory (the caller settles the offset; the sweeper
 * publishes the chunk after redelivery_timeout_s). */
static int wk_lifecycle_hand_back_message(wk_lifecycle *l, const hr_chunkmsg *msg,
                                          int32_t partition, int64_t offset, const char *why)
{
    wk_chunk *c = wk_chunk_new(wk_redis_prefix(l->rd), msg, partition, offset, NULL,
                               l->cfg->worker.ack_batch, &wk_lifecycle_chunk_hooks, l);

    if (c == NULL)
        return -1;
    c->started_ms = hr_clock_now_ms();
    TAILQ_INSERT_TAIL(&l->chunks, c, link);
    l->nchunks++;
    wk_lifecycle_hand_back(l, c, why);
    return 0;
}

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
             * chunk is handed back, and the dispatcher publishes it again
             * within a second (issue 34; it used to wait for the sweeper's
             * redelivery_timeout_s), for whichever worker then owns its
             * partition.  Nothing is pushed, acknowledged or failed here. */
            hr_metrics_inc(l->met->bad[WK_BAD_NO_CHANNEL]);
            hr_log_warn("channel_missing", "task=%" PRId64 " seq=%" PRId64 " error=%s", msg->task,
                        msg->seq, errstr);
            if (wk_lifecycle_hand_back_message(l, msg, partition, offset, "channel missing") == 0)
                return;
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
            /* MySQL is away (a restart, a primary's failover): handed
             * back, the chunk comes again within a second, until MySQL
             * answers (issue 34: not after redelivery_timeout_s). */
            else if (wk_lifecycle_hand_back_message(l, msg, partition, offset,
                                                    "task not loadable") == 0)
                return;
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
    c->gate = l->cfg->events.enabled ? &l->gate : NULL;
    TAILQ_INSERT_TAIL(&l->chunks, c, link);
    l->nchunks++;
    /* The channel's connections open while the Redis thread reads the
     * chunk's recipients (about 100 ms for 5,000), not after. */
    wk_sender_warm(l->sender, c->task->ch_index);
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
