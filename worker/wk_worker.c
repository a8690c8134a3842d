/* wk_worker: the loop thread of herald-worker (see wk_worker.h).
 *
 * Handles on the loop: the Kafka queue's io-event pipe (uv_poll), a kick
 * timer that polls the consumer queue as a fallback and after fetching was
 * paused, an idle handle that runs deferred work outside callbacks (fetch
 * more, finish the shutdown), the lease renewal timer, the shutdown grace
 * timer and the two signals.  The sender adds its own.
 *
 * Ownership: the worker owns every wk_chunk in w->chunks; a chunk owns its
 * pushes; the sender only links them.  A chunk leaves the list through
 * wk_worker_finish (all settled), wk_worker_abandon (revoke, shutdown) or
 * wk_worker_drop (a Redis error: the chunk's offset counts as finished, the
 * dispatcher's sweeper republishes it once its lease expired). */
#include "wk_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "hr_chunkmsg.h"
#include "hr_kafka.h"
#include "hr_log.h"
#include "wk_clock.h"
#include "hr_mysql.h"
#include "hr_redis.h"
#include "wk_chunk.h"
#include "wk_metrics.h"
#include "wk_offsets.h"
#include "wk_reporter.h"
#include "wk_sender.h"
#include "wk_task.h"

#define WK_WORKER_KICK_MS 250
#define WK_WORKER_CLOSE_TIMEOUT_MS 10000
/* Control keys are re-read this often while chunks are open, so a pause
 * or cancel stops new requests well within 2 s. */
#define WK_WORKER_CTL_MS 250
/* A revoke waits at most this for its chunks' running requests. */
#define WK_WORKER_REVOKE_GRACE_MAX_MS 4000
/* The config's bound on worker.max_chunks_in_flight. */
#define WK_WORKER_MAX_CHUNKS 64

struct wk_worker {
    const hr_config *cfg;
    char owner[160];
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    uv_timer_t kick, renew, grace, ctl;
    uv_idle_t idle;
    uv_poll_t kpoll;
    int kpipe[2];
    bool handles_ready;
    rd_kafka_t *rk;
    rd_kafka_queue_t *kq;
    hr_redis *redis;
    hr_mysql *mysql;
    wk_task_cache *tasks;
    wk_sender *sender;
    wk_reporter *reporter;
    wk_metrics *met;
    wk_offsets *offsets;
    TAILQ_HEAD(, wk_chunk) chunks;
    size_t nchunks;
    bool stopping, finished;
    bool paused; /* the assignment is paused: max_chunks_in_flight open */
    /* A revoke being drained (wk_worker_revoke): the revoked partitions,
     * unassigned once their chunks are given up or the grace ran out. */
    rd_kafka_topic_partition_list_t *revoking;
    uv_timer_t revoke_grace;
    wk_worker_stats stats;
};

static void wk_worker_fetch(wk_worker *w);

/* ---- offsets ------------------------------------------------------------ */

static void wk_worker_store(wk_worker *w, int32_t partition, int64_t offset)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_resp_err_t err;

    rd_kafka_topic_partition_list_add(l, w->cfg->kafka.topic, partition)->offset = offset;
    err = rd_kafka_offsets_store(w->rk, l);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        err = l->elems[0].err;
    /* __STATE: the partition was revoked meanwhile, which is expected. */
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__STATE)
        hr_log_warn("offset_store_failed", "partition=%" PRId32 " offset=%" PRId64 " error=%s",
                    partition, offset, rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(l);
}

/* True when PARTITION is in the revoke being drained. */
static bool wk_worker_revoking(const wk_worker *w, int32_t partition)
{
    if (w->revoking == NULL)
        return false;
    for (int i = 0; i < w->revoking->cnt; i++)
        if (w->revoking->elems[i].partition == partition)
            return true;
    return false;
}

/* The message at PARTITION/OFFSET needs nothing more. */
static void wk_worker_settle_offset(wk_worker *w, int32_t partition, int64_t offset)
{
    int64_t store;

    if (wk_offsets_finish(w->offsets, partition, offset, &store) == 1)
        wk_worker_store(w, partition, store);
}

static void wk_worker_soon(wk_worker *w);

/* ---- chunk endings ------------------------------------------------------ */

/* Hands the stats hash counters C's last script call answered to the
 * reporter (absolute values: see wk_reporter.h). */
static void wk_worker_report_counters(wk_worker *w, wk_chunk *c)
{
    wk_event ev = {.kind = WK_EVENT_COUNTERS, .task = c->msg.task};

    if (!c->counters_new)
        return;
    ev.u.counters.sent = c->counters.sent;
    ev.u.counters.failed = c->counters.failed;
    ev.u.counters.throttled = c->counters.throttled;
    ev.u.counters.retried = c->counters.retried;
    wk_reporter_push(w->reporter, &ev);
    c->counters_new = false;
}

/* Flushes C's acknowledgements and reports them; 0 or -1 (logged). */
static int wk_worker_flush(wk_worker *w, wk_chunk *c)
{
    char errstr[256];

    if (wk_chunk_flush(c, w->redis, errstr, sizeof errstr) != 0) {
        hr_log_error("ack_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", c->msg.task,
                     c->msg.seq, errstr);
        return -1;
    }
    wk_worker_report_counters(w, c);
    return 0;
}

static void wk_worker_unlink(wk_worker *w, wk_chunk *c)
{
    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_cancel(w->sender, &c->pushes[i]);
    TAILQ_REMOVE(&w->chunks, c, link);
    w->nchunks--;
    wk_task_put(w->tasks, c->task);
    wk_chunk_free(c);
    wk_worker_soon(w);
}

/* Gives C up without finishing it: requests stop, delivered recipients are
 * acknowledged, the lease is released; the rest stay in the set.  With
 * SETTLE the offset counts as finished (the lease went to another worker,
 * which does the rest); without, it is not stored and the chunk is
 * redelivered to the partition's next owner. */
static void wk_worker_abandon(wk_worker *w, wk_chunk *c, const char *why, bool settle)
{
    char errstr[256];

    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_cancel(w->sender, &c->pushes[i]);
    wk_worker_flush(w, c);
    if (wk_chunk_release(c, w->redis, w->owner, errstr, sizeof errstr) != 0)
        hr_log_warn("lease_release_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s",
                    c->msg.task, c->msg.seq, errstr);
    hr_log_info("chunk_abandoned", "task=%" PRId64 " seq=%" PRId64 " reason=%s open=%zu",
                c->msg.task, c->msg.seq, why, c->open);
    if (settle)
        wk_worker_settle_offset(w, c->partition, c->offset);
    wk_worker_unlink(w, c);
}

/* A Redis error: the lease is left to expire and the offset counts as
 * finished; the sweeper republishes the chunk (pending still holds it). */
static void wk_worker_drop(wk_worker *w, wk_chunk *c, const char *why)
{
    w->stats.errors++;
    hr_metrics_inc(w->met->backend_errors[WK_BACKEND_REDIS]);
    atomic_store(&w->met->redis_ok, false);
    hr_log_error("chunk_dropped", "task=%" PRId64 " seq=%" PRId64 " reason=%s", c->msg.task,
                 c->msg.seq, why);
    wk_worker_settle_offset(w, c->partition, c->offset);
    wk_worker_unlink(w, c);
}

/* Every recipient of C is settled: acknowledge, close, store the offset. */
static void wk_worker_finish(wk_worker *w, wk_chunk *c)
{
    int64_t res[3];
    char errstr[256];

    if (wk_worker_flush(w, c) != 0) {
        wk_worker_drop(w, c, "ack failed");
        return;
    }
    if (wk_chunk_close(c, w->redis, w->owner, res, errstr, sizeof errstr) != 0) {
        wk_worker_drop(w, c, errstr);
        return;
    }
    /* Also for a redelivered, already empty chunk: its close reports what
     * a killed worker's reporter could not write. */
    wk_worker_report_counters(w, c);
    if (res[0] < 0) {
        /* Members appeared after we read the set: leave them to a
         * redelivery by the sweeper. */
        hr_log_warn("chunk_not_empty", "task=%" PRId64 " seq=%" PRId64, c->msg.task, c->msg.seq);
        wk_chunk_release(c, w->redis, w->owner, errstr, sizeof errstr);
    } else {
        wk_event ev = {.kind = WK_EVENT_CHUNK_DONE, .task = c->msg.task};

        ev.u.chunk.state = "done";
        ev.u.chunk.seq = c->msg.seq;
        ev.u.chunk.done_ms = wk_clock_now_ms();
        ev.u.chunk.pending_left = res[1];
        ev.u.chunk.subs_left = res[2];
        wk_reporter_push(w->reporter, &ev);
        w->stats.chunks_done++;
        hr_metrics_inc(w->met->chunks_acked);
    }
    hr_log_info("chunk_done",
                "task=%" PRId64 " seq=%" PRId64 " recipients=%zu sent=%" PRId64 " failed=%" PRId64
                " throttled=%" PRId64 " retried=%" PRId64 " duration_ms=%" PRId64
                " pending_left=%" PRId64,
                c->msg.task, c->msg.seq, c->npushes, c->sent, c->failed, c->throttled, c->retried,
                wk_clock_now_ms() - c->started_ms, res[1]);
    wk_worker_settle_offset(w, c->partition, c->offset);
    wk_worker_unlink(w, c);
}

/* C stopped by its task's control key and nothing of it is in flight:
 * acknowledge what was delivered, then park it (lease released, the rest
 * stays in the set and pending for the dispatcher to republish on resume)
 * or cancel it (chunk_cancel.lua); the offset counts as finished. */
static void wk_worker_halted(wk_worker *w, wk_chunk *c)
{
    wk_event ev = {.kind = WK_EVENT_CHUNK_DONE, .task = c->msg.task};
    int64_t cancelled = 0, total = 0;
    char errstr[256];

    if (wk_worker_flush(w, c) != 0) {
        wk_worker_drop(w, c, "ack failed");
        return;
    }
    if (c->halt == WK_CHUNK_CANCEL) {
        /* Only cancelled (the stats hash's counter): sent .. retried are
         * not carried (-1). */
        wk_event counters = {.kind = WK_EVENT_COUNTERS,
                             .task = c->msg.task,
                             .u.counters = {.sent = -1, .failed = -1, .throttled = -1,
                                            .retried = -1}};

        if (wk_chunk_cancel(c, w->redis, w->owner, &cancelled, &total, errstr, sizeof errstr) !=
            0) {
            wk_worker_drop(w, c, errstr);
            return;
        }
        if (cancelled < 0) {
            /* Another worker holds the lease: it cancels the chunk. */
            hr_log_info("chunk_cancel_foreign", "task=%" PRId64 " seq=%" PRId64, c->msg.task,
                        c->msg.seq);
            wk_worker_settle_offset(w, c->partition, c->offset);
            wk_worker_unlink(w, c);
            return;
        }
        counters.u.counters.cancelled = total;
        if (total > 0)
            wk_reporter_push(w->reporter, &counters);
        ev.u.chunk.state = "cancelled";
    } else {
        if (wk_chunk_release(c, w->redis, w->owner, errstr, sizeof errstr) != 0) {
            wk_worker_drop(w, c, errstr);
            return;
        }
        w->stats.parked_chunks++;
        ev.u.chunk.state = "parked";
    }
    ev.u.chunk.seq = c->msg.seq;
    ev.u.chunk.done_ms = wk_clock_now_ms();
    wk_reporter_push(w->reporter, &ev);
    hr_log_info(c->halt == WK_CHUNK_CANCEL ? "chunk_cancelled" : "chunk_parked",
                "task=%" PRId64 " seq=%" PRId64 " sent=%" PRId64 " cancelled=%" PRId64, c->msg.task,
                c->msg.seq, c->sent, cancelled);
    wk_worker_settle_offset(w, c->partition, c->offset);
    wk_worker_unlink(w, c);
}

/* No new request of C starts: its pushes not yet started (ready, or
 * waiting for a retry) are taken back from the sender; those in flight
 * finish and are not retried. */
static void wk_worker_hold(wk_worker *w, wk_chunk *c)
{
    c->held = true;
    for (size_t i = 0; i < c->npushes; i++) {
        wk_push *p = &c->pushes[i];

        if (p->state == WK_PUSH_READY || p->state == WK_PUSH_DELAYED) {
            wk_sender_cancel(w->sender, p);
            c->open--;
        }
    }
}

/* Stops starting requests for C (HALT: park or cancel; cancel overrides a
 * park under way); running requests finish and are not retried. */
static void wk_worker_halt(wk_worker *w, wk_chunk *c, wk_chunk_halt halt)
{
    /* A chunk being revoked is given up anyway; its next owner parks or
     * cancels it. */
    if (halt <= c->halt || c->revoked)
        return;
    c->halt = halt;
    wk_worker_hold(w, c);
    if (c->open == 0)
        wk_worker_halted(w, c);
}

/* Nothing of C is open any more (C->open == 0): a revoked chunk is given
 * up (its requests all answered and acknowledged, so the partition's next
 * owner pushes nobody twice), a halted one parked or cancelled, the others
 * are done.  Frees C. */
static void wk_worker_settled(wk_worker *w, wk_chunk *c)
{
    if (c->revoked)
        wk_worker_abandon(w, c, "revoked", false);
    else if (c->halt != WK_CHUNK_RUN)
        wk_worker_halted(w, c);
    else
        wk_worker_finish(w, c);
}

/* ---- push outcomes ---------------------------------------------------------- */

static void wk_worker_outcome(wk_worker *w, const wk_chunk *c, const wk_push *p,
                              wk_delivery status, const wk_push_result *res)
{
    wk_event ev = {.kind = WK_EVENT_OUTCOME, .task = c->msg.task};

    /* wk_chunk_open pushes only valid uids (1..INT64_MAX). */
    ev.u.outcome.uid = strtoull(p->uid, NULL, 10);
    ev.u.outcome.status = status;
    ev.u.outcome.attempts = p->attempts;
    ev.u.outcome.http_status = (int)res->http_status;
    ev.u.outcome.latency_ms = res->latency_ms;
    ev.u.outcome.at_ms = wk_clock_now_ms();
    wk_reporter_push(w->reporter, &ev);
}

static void wk_worker_push_done(void *ctx, wk_push *p, const wk_push_result *res)
{
    wk_worker *w = ctx;
    wk_chunk *c = p->owner;
    wk_metrics_chan *mc = &w->met->chans[c->task->ch_index];

    c->open--;
    if (p->attempts > 1) {
        c->retried += p->attempts - 1;
        c->retried_unflushed += p->attempts - 1;
        hr_metrics_add(mc->retried, (uint64_t)(p->attempts - 1));
        hr_metrics_add(w->met->retries, (uint64_t)(p->attempts - 1));
    }
    if (res->held) {
        if (c->open == 0)
            wk_worker_settled(w, c);
        return;
    }
    if (res->delivered) {
        hr_metrics_inc(mc->sent);
        hr_metrics_observe(w->met->due_to_delivery,
                           (double)(wk_clock_now_ms() - c->msg.due_ms) / 1000.0);
    } else {
        hr_metrics_inc(mc->failed);
    }
    if (w->cfg->worker.delivery_log)
        wk_worker_outcome(w, c, p, res->delivered ? WK_DELIVERY_SENT : WK_DELIVERY_FAILED, res);
    if (res->delivered) {
        if (wk_chunk_ack(c, p->uid) && wk_worker_flush(w, c) != 0) {
            wk_worker_drop(w, c, "ack failed");
            return;
        }
    } else {
        int full = wk_chunk_dead(c, p->uid, res->reason);

        hr_log_debug("push_failed", "task=%" PRId64 " uid=%s reason=%s", c->msg.task, p->uid,
                     res->reason);
        if (full < 0 || (full == 1 && wk_worker_flush(w, c) != 0)) {
            wk_worker_drop(w, c, full < 0 ? "out of memory" : "ack failed");
            return;
        }
    }
    if (c->open == 0)
        wk_worker_settled(w, c);
    if (w->stopping)
        wk_worker_soon(w);
}

/* ---- messages -------------------------------------------------------------- */

static bool wk_worker_active(const wk_worker *w, const hr_chunkmsg *msg)
{
    const wk_chunk *c;

    TAILQ_FOREACH(c, &w->chunks, link)
        if (c->msg.task == msg->task && c->msg.seq == msg->seq)
            return true;
    return false;
}

/* What a GET of the control key says: run unless pause or cancel. */
static wk_chunk_halt wk_worker_ctl_parse(const redisReply *reply)
{
    if (reply->type != REDIS_REPLY_STRING)
        return WK_CHUNK_RUN;
    if (strcmp(reply->str, "pause") == 0)
        return WK_CHUNK_PARK;
    if (strcmp(reply->str, "cancel") == 0)
        return WK_CHUNK_CANCEL;
    return WK_CHUNK_RUN;
}

/* The task's control key as a wk_chunk_halt, or -1 on error. */
static int wk_worker_ctl_read(wk_worker *w, int64_t task, char *errstr, size_t errlen)
{
    char key[WK_CHUNK_KEY_MAX];
    const char *argv[] = {"GET", key};
    redisReply *reply;
    wk_chunk_halt halt;

    hr_redis_task_key(w->redis, key, sizeof key, task, "ctl");
    reply = hr_redis_cmd(w->redis, errstr, errlen, 2, argv, NULL);
    if (reply == NULL)
        return -1;
    halt = wk_worker_ctl_parse(reply);
    freeReplyObject(reply);
    return (int)halt;
}

/* The throttle step of an opened chunk: blocked recipients are acknowledged
 * as throttled and reported; 0, or -1 when C was dropped. */
static int wk_worker_throttle(wk_worker *w, wk_chunk *c)
{
    static const wk_push_result none = {.delivered = false};
    wk_chunk_throttled thr;
    char errstr[512];

    if (wk_chunk_throttle(c, w->redis, &thr, errstr, sizeof errstr) != 0) {
        wk_worker_drop(w, c, errstr);
        return -1;
    }
    wk_worker_report_counters(w, c);
    hr_metrics_add(w->met->chans[c->task->ch_index].throttled, (uint64_t)thr.blocked);
    hr_metrics_add(w->met->throttled, (uint64_t)thr.blocked);
    if (w->cfg->worker.delivery_log && thr.blocked > 0)
        for (size_t i = 0; i < c->npushes; i++)
            if (c->verdicts[i] == HR_THROTTLE_BLOCKED)
                wk_worker_outcome(w, c, &c->pushes[i], WK_DELIVERY_THROTTLED, &none);
    if (thr.key_missing > 0)
        hr_log_info("throttle_key_missing", "task=%" PRId64 " seq=%" PRId64 " count=%" PRId64,
                    c->msg.task, c->msg.seq, thr.key_missing);
    return 0;
}

/* Reports what wk_chunk_open worked around: invalid uids (dead-lettered,
 * counted failed) and user hashes that answered an error. */
static void wk_worker_open_anomalies(wk_worker *w, wk_chunk *c)
{
    if (c->invalid > 0) {
        wk_worker_report_counters(w, c);
        hr_metrics_add(w->met->chans[c->task->ch_index].failed, (uint64_t)c->invalid);
        hr_metrics_add(w->met->anomalies[WK_ANOMALY_INVALID_UID], (uint64_t)c->invalid);
        hr_log_warn("invalid_uids", "task=%" PRId64 " seq=%" PRId64 " count=%" PRId64,
                    c->msg.task, c->msg.seq, c->invalid);
    }
    if (c->user_errors > 0) {
        hr_metrics_add(w->met->anomalies[WK_ANOMALY_USER_HASH], (uint64_t)c->user_errors);
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
static void wk_worker_open(wk_worker *w, wk_chunk *c)
{
    const hr_chunkmsg *msg = &c->msg;
    wk_task *task = c->task;
    int32_t partition = c->partition;
    int64_t offset = c->offset, now;
    char errstr[512];
    int rc;

    rc = wk_chunk_open(c, w->redis, w->owner, w->cfg->worker.lease_ms, errstr, sizeof errstr);
    switch (rc) {
    case WK_CHUNK_BUSY:
        now = wk_clock_now_ms();
        if (c->lease_wait_until_ms == 0) {
            c->lease_wait_until_ms = now + w->cfg->worker.lease_ms + WK_WORKER_CTL_MS;
            hr_log_info("chunk_lease_wait", "task=%" PRId64 " seq=%" PRId64 " wait_ms=%d",
                        msg->task, msg->seq, w->cfg->worker.lease_ms + WK_WORKER_CTL_MS);
            return;
        }
        if (now < c->lease_wait_until_ms)
            return;
        w->stats.busy_chunks++;
        hr_metrics_inc(w->met->chunks_redelivered);
        hr_log_info("chunk_busy", "task=%" PRId64 " seq=%" PRId64, msg->task, msg->seq);
        wk_worker_settle_offset(w, partition, offset);
        wk_worker_unlink(w, c);
        return;
    case WK_CHUNK_EMPTY:
        hr_metrics_inc(w->met->chunks_redelivered);
        wk_worker_finish(w, c);
        return;
    case WK_CHUNK_STARTED:
        /* Fewer members than published: a redelivery, partly acknowledged. */
        if ((int64_t)c->npushes + c->invalid < msg->count)
            hr_metrics_inc(w->met->chunks_redelivered);
        wk_worker_open_anomalies(w, c);
        break;
    default:
        wk_worker_drop(w, c, errstr);
        return;
    }
    if (task->throttle.limit > 0 && wk_worker_throttle(w, c) != 0)
        return;
    hr_log_info("chunk_start", "task=%" PRId64 " seq=%" PRId64 " recipients=%zu partition=%" PRId32
                " offset=%" PRId64 " throttled=%" PRId64,
                msg->task, msg->seq, c->npushes, partition, offset, c->throttled);
    if (c->open == 0) {
        wk_worker_finish(w, c);
        return;
    }
    for (size_t i = 0; i < c->npushes; i++)
        if (c->verdicts == NULL || c->verdicts[i] != HR_THROTTLE_BLOCKED)
            wk_sender_submit(w->sender, &c->pushes[i]);
    /* May settle pushes, even finish or drop C: C is not touched after. */
    wk_sender_kick(w->sender);
}

/* Starts work on a decoded chunk message; the offset is settled here for
 * every message that does not become an open chunk. */
static void wk_worker_chunk(wk_worker *w, const hr_chunkmsg *msg, int32_t partition,
                            int64_t offset)
{
    wk_task *task = NULL;
    wk_chunk *c;
    char errstr[512];
    int rc, halt;

    rc = wk_task_get(w->tasks, w->mysql, msg->task, wk_clock_now_ms(), &task, errstr,
                     sizeof errstr);
    if (rc != 0) {
        if (rc == WK_TASK_NO_CHANNEL) {
            /* Not the task's fault (a rolling configuration change): the
             * chunk stays pending and the sweeper publishes it again after
             * redelivery_timeout_s, for whichever worker then owns its
             * partition.  Nothing is pushed, acknowledged or failed here. */
            hr_metrics_inc(w->met->bad[WK_BAD_NO_CHANNEL]);
            hr_log_warn("channel_missing", "task=%" PRId64 " seq=%" PRId64 " error=%s",
                        msg->task, msg->seq, errstr);
        } else if (rc == 1) {
            w->stats.unknown_tasks++;
            hr_metrics_inc(w->met->bad[WK_BAD_UNKNOWN_TASK]);
            hr_log_warn("unknown_task", "task=%" PRId64 " seq=%" PRId64 " partition=%" PRId32
                        " offset=%" PRId64 " unknown_tasks=%" PRId64,
                        msg->task, msg->seq, partition, offset, w->stats.unknown_tasks);
        } else {
            w->stats.errors++;
            hr_metrics_inc(rc == 2 ? w->met->bad[WK_BAD_INVALID_TASK]
                                   : w->met->backend_errors[WK_BACKEND_MYSQL]);
            hr_log_error("task_load_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s",
                         msg->task, msg->seq, errstr);
            /* Redelivering its chunks would never help: fail the task. */
            if (rc == 2)
                wk_reporter_fail_task(w->reporter, msg->task, errstr);
        }
        wk_worker_settle_offset(w, partition, offset);
        return;
    }
    halt = wk_worker_ctl_read(w, msg->task, errstr, sizeof errstr);
    if (halt < 0 || wk_worker_active(w, msg)) {
        if (halt < 0) {
            w->stats.errors++;
            hr_metrics_inc(w->met->backend_errors[WK_BACKEND_REDIS]);
            hr_log_error("ctl_read_failed", "task=%" PRId64 " error=%s", msg->task, errstr);
        } else {
            hr_log_info("chunk_duplicate", "task=%" PRId64 " seq=%" PRId64, msg->task, msg->seq);
        }
        wk_task_put(w->tasks, task);
        wk_worker_settle_offset(w, partition, offset);
        return;
    }
    c = wk_chunk_new(w->redis, msg, partition, offset, task, w->cfg->worker.ack_batch);
    if (c == NULL) {
        wk_task_put(w->tasks, task);
        hr_log_error("out_of_memory", "task=%" PRId64 " seq=%" PRId64, msg->task, msg->seq);
        wk_worker_settle_offset(w, partition, offset);
        return;
    }
    c->started_ms = wk_clock_now_ms();
    TAILQ_INSERT_TAIL(&w->chunks, c, link);
    w->nchunks++;
    if (halt != WK_CHUNK_RUN) {
        /* Paused or cancelled before it started: no lease, no push. */
        c->halt = (wk_chunk_halt)halt;
        wk_worker_halted(w, c);
        return;
    }
    wk_worker_open(w, c);
}

static void wk_worker_message(wk_worker *w, const rd_kafka_message_t *m)
{
    hr_chunkmsg msg;
    char errstr[256];

    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            hr_metrics_inc(w->met->backend_errors[WK_BACKEND_KAFKA]);
            hr_log_warn("kafka_error", "error=%s", rd_kafka_message_errstr(m));
        }
        return;
    }
    /* Fetched before the revoke paused it: the next owner consumes it. */
    if (wk_worker_revoking(w, m->partition))
        return;
    if (wk_offsets_begin(w->offsets, m->partition, m->offset) != 0) {
        hr_log_warn("offset_out_of_order", "partition=%" PRId32 " offset=%" PRId64, m->partition,
                    m->offset);
        return;
    }
    if (hr_chunkmsg_decode(m->payload, m->len, &msg, errstr, sizeof errstr) != 0) {
        w->stats.bad_messages++;
        hr_metrics_inc(w->met->bad[WK_BAD_DECODE]);
        hr_log_warn("bad_message", "partition=%" PRId32 " offset=%" PRId64
                    " reason=%s bad_messages=%" PRId64,
                    m->partition, m->offset, errstr, w->stats.bad_messages);
        wk_worker_settle_offset(w, m->partition, m->offset);
        return;
    }
    wk_worker_chunk(w, &msg, m->partition, m->offset);
}

/* Pauses (PAUSE) or resumes every assigned partition. */
static void wk_worker_pause(wk_worker *w, bool pause)
{
    rd_kafka_topic_partition_list_t *parts = NULL;
    rd_kafka_resp_err_t err = rd_kafka_assignment(w->rk, &parts);

    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        err = pause ? rd_kafka_pause_partitions(w->rk, parts)
                    : rd_kafka_resume_partitions(w->rk, parts);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn(pause ? "pause_failed" : "resume_failed", "error=%s", rd_kafka_err2str(err));
    else
        w->paused = pause;
    if (parts != NULL)
        rd_kafka_topic_partition_list_destroy(parts);
}

/* Polls the consumer.  While max_chunks_in_flight chunks are open the
 * assignment is paused but still polled: a consumer that is not polled for
 * max.poll.interval.ms leaves the group, and rebalances wait for it.
 * librdkafka drops what it fetched for a paused partition and fetches it
 * again from the consumed position on resume, so a message rarely arrives
 * while full; one that does is started anyway (the cap is soft by that). */
static void wk_worker_fetch(wk_worker *w)
{
    while (!w->stopping) {
        bool full = w->nchunks >= (size_t)w->cfg->worker.max_chunks_in_flight;
        rd_kafka_message_t *m;

        /* While a revoke drains, the assignment's pause flags are the
         * revoke's (wk_worker_revoke). */
        if (full != w->paused && w->revoking == NULL)
            wk_worker_pause(w, full);
        m = rd_kafka_consumer_poll(w->rk, 0);
        if (m == NULL)
            break;
        wk_worker_message(w, m);
        rd_kafka_message_destroy(m);
    }
}

/* Ends the revoke being drained: what is left of its chunks is abandoned
 * (requests still running are aborted: those recipients may be pushed
 * again by the next owner), the partitions' unsettled messages are
 * forgotten (consumed again by the next owner) and the assignment is
 * dropped, which lets the group's rebalance go on. */
static void wk_worker_revoke_finish(wk_worker *w)
{
    rd_kafka_topic_partition_list_t *parts = w->revoking;
    rd_kafka_resp_err_t err;
    wk_chunk *c, *next;

    if (parts == NULL)
        return;
    w->revoking = NULL;
    uv_timer_stop(&w->revoke_grace);
    for (c = TAILQ_FIRST(&w->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        if (c->revoked)
            wk_worker_abandon(w, c, "revoke grace expired", false);
    }
    for (int i = 0; i < parts->cnt; i++) {
        int32_t partition = parts->elems[i].partition;
        size_t pending = wk_offsets_pending(w->offsets, partition);

        /* Messages received but not settled are consumed again by the
         * partition's next owner. */
        if (pending > 0)
            hr_log_info("partition_unsettled", "partition=%" PRId32 " messages=%zu", partition,
                        pending);
        wk_offsets_drop(w->offsets, partition);
    }
    hr_log_info("partitions_revoked", "count=%d", parts->cnt);
    err = rd_kafka_assign(w->rk, NULL);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn("unassign_failed", "error=%s", rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(parts);
    w->paused = false;
}

static void wk_worker_revoke_grace_cb(uv_timer_t *t)
{
    wk_worker *w = t->data;

    hr_log_warn("revoke_grace_expired", "in_flight=%zu", wk_sender_in_flight(w->sender));
    wk_worker_revoke_finish(w);
}

/* The longest a revoke waits for its chunks' running requests: the
 * slowest channel's request timeout and a second for the answers, at most
 * WK_WORKER_REVOKE_GRACE_MAX_MS — the whole group waits in the rebalance
 * meanwhile, and librdkafka wants the unassign well within the session
 * timeout (6 s). */
static uint64_t wk_worker_revoke_grace_ms(const wk_worker *w)
{
    int ms = 0;

    for (size_t i = 0; i < w->cfg->nchannels; i++)
        if (w->cfg->channels[i].timeout_ms > ms)
            ms = w->cfg->channels[i].timeout_ms;
    ms += 1000;
    return (uint64_t)(ms < WK_WORKER_REVOKE_GRACE_MAX_MS ? ms : WK_WORKER_REVOKE_GRACE_MAX_MS);
}

/* A revoke (eager protocol: every partition, on every scale event).
 * Giving the chunks up at once would abort requests the provider already
 * received, and the next owner would push those recipients again.  So the
 * revoke is drained: the revoked partitions are paused and their messages
 * no longer started, their chunks start no new request (held), the running
 * ones finish and are acknowledged, then each chunk is given up (lease
 * released, the rest stays in the set, offset not stored) and, once none
 * is left, the partitions are unassigned — librdkafka waits for that call
 * (the other members wait in the rebalance, at most max.poll.interval.ms),
 * and the worker keeps polling meanwhile.  Bounded by the slowest
 * channel's timeout_ms + 1 s, at most 4 s.  A planned scale event thus
 * duplicates nothing. */
static void wk_worker_revoke(wk_worker *w, rd_kafka_topic_partition_list_t *parts)
{
    wk_chunk *c, *next;
    size_t draining = 0;

    if (w->revoking != NULL) /* not expected: librdkafka waits for the unassign */
        wk_worker_revoke_finish(w);
    w->revoking = rd_kafka_topic_partition_list_copy(parts);
    if (w->revoking == NULL) {
        rd_kafka_assign(w->rk, NULL);
        return;
    }
    rd_kafka_pause_partitions(w->rk, parts);
    for (c = TAILQ_FIRST(&w->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        if (!wk_worker_revoking(w, c->partition))
            continue;
        c->revoked = true;
        wk_worker_hold(w, c);
        if (c->open == 0)
            wk_worker_abandon(w, c, "revoked", false); /* nothing in flight */
        else
            draining++;
    }
    if (draining == 0 || w->stopping) {
        wk_worker_revoke_finish(w);
        return;
    }
    hr_log_info("revoke_draining", "partitions=%d chunks=%zu in_flight=%zu", parts->cnt,
                draining, wk_sender_in_flight(w->sender));
    uv_timer_start(&w->revoke_grace, wk_worker_revoke_grace_cb, wk_worker_revoke_grace_ms(w), 0);
}

static void wk_worker_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    wk_worker *w = opaque;

    /* A new assignment starts unpaused; the next fetch pauses it if full.
     * librdkafka keeps a partition's pause flag across a revoke and a new
     * assign, so partitions paused before a rebalance are resumed
     * explicitly: otherwise they would never be fetched again. */
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        w->paused = false;
        hr_log_info("partitions_assigned", "count=%d", parts->cnt);
        rd_kafka_assign(rk, parts);
        rd_kafka_resume_partitions(rk, parts);
        return;
    }
    if (err != RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS)
        hr_log_error("rebalance_error", "error=%s", rd_kafka_err2str(err));
    wk_worker_revoke(w, parts);
}

/* ---- loop callbacks ------------------------------------------------------------ */

static void wk_worker_kpoll_cb(uv_poll_t *h, int status, int events)
{
    wk_worker *w = h->data;
    char buf[64];

    (void)status;
    (void)events;
    while (read(w->kpipe[0], buf, sizeof buf) > 0)
        ;
    wk_worker_fetch(w);
}

static void wk_worker_kick_cb(uv_timer_t *t)
{
    wk_worker_fetch(t->data);
}

static void wk_worker_renew_cb(uv_timer_t *t)
{
    wk_worker *w = t->data;
    char ms[24], errstr[256];
    wk_chunk *c, *held[WK_WORKER_MAX_CHUNKS], *lost[WK_WORKER_MAX_CHUNKS],
        *again[WK_WORKER_MAX_CHUNKS];
    size_t n = 0, nlost = 0, nagain = 0;

    snprintf(ms, sizeof ms, "%d", w->cfg->worker.lease_ms);
    TAILQ_FOREACH(c, &w->chunks, link) {
        const char *argv[] = {c->k_lease, w->owner, ms};

        /* A chunk waiting for a foreign lease holds none to renew. */
        if (c->lease_wait_until_ms > 0 && c->members == NULL)
            continue;
        if (n < WK_WORKER_MAX_CHUNKS &&
            hr_redis_pipe_eval(w->redis, HR_LUA_LEASE_RENEW, 1, 3, argv, NULL) == 0)
            held[n++] = c;
    }
    for (size_t i = 0; i < n; i++) {
        redisReply *reply = hr_redis_pipe_reply(w->redis, errstr, sizeof errstr);

        c = held[i];

        if (reply == NULL && strncmp(errstr, "NOSCRIPT", 8) == 0 &&
            nagain < WK_WORKER_MAX_CHUNKS) {
            again[nagain++] = c; /* Redis lost its scripts: reload, renew again */
        } else if (reply == NULL) {
            hr_metrics_inc(w->met->backend_errors[WK_BACKEND_REDIS]);
            hr_log_warn("lease_renew_failed", "error=%s", errstr);
        } else if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0 &&
                   nlost < WK_WORKER_MAX_CHUNKS) {
            lost[nlost++] = c;
        }
        if (reply != NULL)
            freeReplyObject(reply);
    }
    if (nagain > 0 && hr_redis_reload_scripts(w->redis, errstr, sizeof errstr) != 0) {
        hr_metrics_inc(w->met->backend_errors[WK_BACKEND_REDIS]);
        hr_log_warn("lease_renew_failed", "error=%s", errstr);
        nagain = 0;
    }
    for (size_t i = 0; i < nagain; i++) {
        const char *argv[] = {again[i]->k_lease, w->owner, ms};
        redisReply *reply = hr_redis_eval(w->redis, HR_LUA_LEASE_RENEW, 1, 3, argv, NULL, errstr,
                                          sizeof errstr);

        if (reply == NULL) {
            hr_metrics_inc(w->met->backend_errors[WK_BACKEND_REDIS]);
            hr_log_warn("lease_renew_failed", "error=%s", errstr);
            continue;
        }
        if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0 &&
            nlost < WK_WORKER_MAX_CHUNKS)
            lost[nlost++] = again[i];
        freeReplyObject(reply);
    }
    /* The lease expired and may be someone else's now: pushing on would
     * only send duplicates, so the chunk is given up like a revoke, and its
     * offset counts as finished since the new holder does the rest. */
    for (size_t i = 0; i < nlost; i++) {
        hr_log_warn("lease_lost", "task=%" PRId64 " seq=%" PRId64, lost[i]->msg.task,
                    lost[i]->msg.seq);
        wk_worker_abandon(w, lost[i], "lease lost", true);
    }
}

/* The pump watchdog: an opened, running chunk with recipients left whose
 * channel has nothing in flight and nothing armed to wake it is stalled —
 * no event would ever push it again (its lease is renewed all the same,
 * so the sweeper would never step in).  Counted, logged, and healed by a
 * kick.  Every path that frees sender slots kicks the sender (the idle
 * callback after wk_worker_unlink), so this should stay at 0. */
static void wk_worker_watchdog(wk_worker *w)
{
    wk_chunk *c;
    size_t stalled = 0;

    if (w->stopping)
        return;
    TAILQ_FOREACH(c, &w->chunks, link)
        if (c->members != NULL && c->halt == WK_CHUNK_RUN && c->open > 0 &&
            wk_sender_stuck(w->sender, c->task->ch_index))
            stalled++;
    hr_metrics_set(w->met->stalled_chunks, (double)stalled);
    if (stalled == 0)
        return;
    hr_metrics_inc(w->met->stalls);
    hr_log_warn("chunks_stalled", "chunks=%zu open_chunks=%zu in_flight=%zu", stalled,
                w->nchunks, wk_sender_in_flight(w->sender));
    wk_worker_soon(w);
}

/* Retries the open of the chunks waiting for a foreign lease
 * (wk_worker_open).  They are collected first: an open kicks the sender,
 * which may finish other chunks, never a waiting one (it has no pushes). */
static void wk_worker_reopen(wk_worker *w)
{
    wk_chunk *c, *waiting[WK_WORKER_MAX_CHUNKS];
    size_t n = 0;

    TAILQ_FOREACH(c, &w->chunks, link)
        if (c->lease_wait_until_ms > 0 && c->members == NULL && c->halt == WK_CHUNK_RUN &&
            n < WK_WORKER_MAX_CHUNKS)
            waiting[n++] = c;
    for (size_t i = 0; i < n; i++)
        wk_worker_open(w, waiting[i]);
}

/* Reads the control key of every task with an open chunk (one pipelined GET
 * per task) and halts the chunks of paused or cancelled tasks. */
static void wk_worker_ctl_cb(uv_timer_t *t)
{
    wk_worker *w = t->data;
    int64_t tasks[WK_WORKER_MAX_CHUNKS];
    wk_chunk_halt halts[WK_WORKER_MAX_CHUNKS];
    size_t ntasks = 0, queued = 0;
    char key[WK_CHUNK_KEY_MAX], errstr[256];
    wk_chunk *c, *next;
    bool failed = false;

    TAILQ_FOREACH(c, &w->chunks, link) {
        size_t i;

        for (i = 0; i < ntasks && tasks[i] != c->msg.task; i++)
            ;
        if (i == ntasks && ntasks < WK_WORKER_MAX_CHUNKS)
            tasks[ntasks++] = c->msg.task;
    }
    for (size_t i = 0; i < ntasks; i++) {
        const char *argv[] = {"GET", key};

        hr_redis_task_key(w->redis, key, sizeof key, tasks[i], "ctl");
        if (hr_redis_pipe_cmd(w->redis, 2, argv, NULL) != 0)
            break;
        queued++;
    }
    if (ntasks == 0) {
        /* Nothing open: a PING keeps /readyz's view of Redis current. */
        const char *ping[] = {"PING"};
        redisReply *reply = hr_redis_cmd(w->redis, errstr, sizeof errstr, 1, ping, NULL);

        atomic_store(&w->met->redis_ok, reply != NULL);
        if (reply != NULL)
            freeReplyObject(reply);
        return;
    }
    /* Every queued reply is read, so the connection stays in step. */
    for (size_t i = 0; i < queued; i++) {
        redisReply *reply = hr_redis_pipe_reply(w->redis, errstr, sizeof errstr);

        halts[i] = WK_CHUNK_RUN;
        if (reply == NULL) {
            failed = true;
            continue;
        }
        halts[i] = wk_worker_ctl_parse(reply);
        freeReplyObject(reply);
    }
    if (failed) {
        hr_metrics_inc(w->met->backend_errors[WK_BACKEND_REDIS]);
        hr_log_warn("ctl_read_failed", "error=%s", errstr);
    }
    atomic_store(&w->met->redis_ok, !failed);
    for (c = TAILQ_FIRST(&w->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        for (size_t i = 0; i < queued; i++)
            if (tasks[i] == c->msg.task && halts[i] != WK_CHUNK_RUN) {
                /* May free C (nothing in flight): do not look at it again. */
                wk_worker_halt(w, c, halts[i]);
                break;
            }
    }
    wk_worker_watchdog(w);
    wk_worker_reopen(w);
}

static void wk_worker_close_handles(wk_worker *w);

/* Abandons what is left, commits offsets, leaves the group. */
static void wk_worker_shutdown_now(wk_worker *w)
{
    rd_kafka_resp_err_t err;
    wk_chunk *c;

    if (w->finished)
        return;
    w->finished = true;
    while ((c = TAILQ_FIRST(&w->chunks)) != NULL)
        wk_worker_abandon(w, c, "shutdown", false);
    wk_worker_revoke_finish(w);
    err = rd_kafka_commit(w->rk, NULL, 0);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
        hr_log_warn("offset_commit_failed", "error=%s", rd_kafka_err2str(err));
    err = rd_kafka_consumer_close(w->rk);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn("consumer_close_failed", "error=%s", rd_kafka_err2str(err));
    wk_worker_close_handles(w);
}

static void wk_worker_idle_cb(uv_idle_t *h)
{
    wk_worker *w = h->data;

    uv_idle_stop(h);
    if (w->stopping) {
        if (wk_sender_in_flight(w->sender) == 0)
            wk_worker_shutdown_now(w);
        return;
    }
    if (w->revoking != NULL) {
        const wk_chunk *c;
        bool left = false;

        TAILQ_FOREACH(c, &w->chunks, link)
            left = left || c->revoked;
        if (!left)
            wk_worker_revoke_finish(w);
    }
    /* A chunk that left (finished, abandoned, dropped, halted) may have
     * freed sender slots by cancelling its requests; no transfer or timer
     * would start the other chunks' waiting pushes. */
    wk_sender_kick(w->sender);
    wk_worker_fetch(w);
}

/* Runs the idle callback once the current callback has returned. */
static void wk_worker_soon(wk_worker *w)
{
    if (!w->finished)
        uv_idle_start(&w->idle, wk_worker_idle_cb);
}

static void wk_worker_grace_cb(uv_timer_t *t)
{
    wk_worker *w = t->data;

    hr_log_warn("shutdown_grace_expired", "in_flight=%zu", wk_sender_in_flight(w->sender));
    wk_worker_shutdown_now(w);
}

static void wk_worker_signal_cb(uv_signal_t *h, int signum)
{
    wk_worker *w = h->data;

    if (w->stopping)
        return;
    w->stopping = true;
    atomic_store(&w->met->assigned, false);
    hr_log_info("worker_stopping", "signal=%d chunks=%zu in_flight=%zu", signum, w->nchunks,
                wk_sender_in_flight(w->sender));
    uv_poll_stop(&w->kpoll);
    uv_timer_stop(&w->kick);
    wk_sender_drain(w->sender);
    uv_timer_start(&w->grace, wk_worker_grace_cb, (uint64_t)w->cfg->worker.shutdown_grace_ms, 0);
    wk_worker_soon(w);
}

static void wk_worker_close_handles(wk_worker *w)
{
    uv_close((uv_handle_t *)&w->sigterm, NULL);
    uv_close((uv_handle_t *)&w->sigint, NULL);
    uv_close((uv_handle_t *)&w->kick, NULL);
    uv_close((uv_handle_t *)&w->renew, NULL);
    uv_close((uv_handle_t *)&w->grace, NULL);
    uv_close((uv_handle_t *)&w->ctl, NULL);
    uv_close((uv_handle_t *)&w->revoke_grace, NULL);
    uv_close((uv_handle_t *)&w->idle, NULL);
    uv_close((uv_handle_t *)&w->kpoll, NULL);
    wk_sender_close(w->sender);
}

/* ---- setup ------------------------------------------------------------------- */

int wk_worker_new(const hr_config *cfg, wk_worker **out, char *errstr, size_t errlen)
{
    wk_worker *w = calloc(1, sizeof *w);

    *out = NULL;
    if (w == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    w->cfg = cfg;
    w->kpipe[0] = w->kpipe[1] = -1;
    TAILQ_INIT(&w->chunks);
    snprintf(w->owner, sizeof w->owner, "%s/%ld", cfg->instance, (long)getpid());
    if (uv_loop_init(&w->loop) != 0) {
        snprintf(errstr, errlen, "uv_loop_init failed");
        free(w);
        return -1;
    }
    if (hr_redis_connect(cfg, &w->redis, errstr, errlen) != 0 ||
        hr_mysql_connect(cfg, &w->mysql, errstr, errlen) != 0)
        goto fail;
    if (wk_task_cache_new(cfg, &w->tasks) != 0 || wk_offsets_new(&w->offsets) != 0) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    w->met = wk_metrics_new(cfg, errstr, errlen);
    if (w->met == NULL)
        goto fail;
    if (wk_sender_new(&w->loop, cfg, w->redis, w->met, wk_worker_push_done, w, &w->sender,
                      errstr, errlen) != 0 ||
        wk_reporter_start(cfg, w->owner, w->met, &w->reporter, errstr, errlen) != 0)
        goto fail;
    if (wk_metrics_serve(w->met, cfg->worker.listen, errstr, errlen) != 0)
        goto fail;
    hr_log_info("metrics_listening", "listen=%s port=%d", cfg->worker.listen,
                hr_httpd_port(w->met->httpd));
    *out = w;
    return 0;
fail:
    wk_worker_free(w);
    return -1;
}

/* librdkafka statistics (served by the consumer poll on the loop thread):
 * consumer lag and broker health for /metrics and /readyz. */
static int wk_worker_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    wk_worker *w = opaque;

    (void)rk;
    if (wk_metrics_kafka_stats(w->met, json, len) != 0)
        hr_log_warn("kafka_stats_unparsed", "bytes=%zu", len);
    return 0; /* librdkafka frees JSON */
}

static void wk_worker_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    wk_worker *w = opaque;

    (void)rk;
    hr_metrics_inc(w->met->backend_errors[WK_BACKEND_KAFKA]);
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        atomic_store(&w->met->kafka_ok, false);
    hr_log_warn("kafka_error", "error=%s reason=%s", rd_kafka_err2name(err), reason);
}

/* The consumer, its io-event pipe and the loop handles. */
static int wk_worker_setup(wk_worker *w, char *errstr, size_t errlen)
{
    rd_kafka_conf_t *conf = hr_kafka_conf_new(w->cfg, HR_KAFKA_CONSUMER, errstr, errlen);
    rd_kafka_topic_partition_list_t *topics;
    rd_kafka_resp_err_t err;

    if (conf == NULL)
        return -1;
    rd_kafka_conf_set_rebalance_cb(conf, wk_worker_rebalance);
    rd_kafka_conf_set_stats_cb(conf, wk_worker_stats_cb);
    rd_kafka_conf_set_error_cb(conf, wk_worker_error_cb);
    if (rd_kafka_conf_set(conf, "statistics.interval.ms", "5000", errstr, errlen) !=
        RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_conf_set_opaque(conf, w);
    w->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, errlen);
    if (w->rk == NULL) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_poll_set_consumer(w->rk);
    w->kq = rd_kafka_queue_get_consumer(w->rk);
    if (pipe2(w->kpipe, O_NONBLOCK | O_CLOEXEC) != 0) {
        snprintf(errstr, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    rd_kafka_queue_io_event_enable(w->kq, w->kpipe[1], "1", 1);
    topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, w->cfg->kafka.topic, RD_KAFKA_PARTITION_UA);
    err = rd_kafka_subscribe(w->rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(errstr, errlen, "subscribe %s: %s", w->cfg->kafka.topic, rd_kafka_err2str(err));
        return -1;
    }
    atomic_store(&w->met->assigned, true);

    uv_signal_init(&w->loop, &w->sigterm);
    uv_signal_init(&w->loop, &w->sigint);
    uv_timer_init(&w->loop, &w->kick);
    uv_timer_init(&w->loop, &w->renew);
    uv_timer_init(&w->loop, &w->grace);
    uv_timer_init(&w->loop, &w->ctl);
    uv_timer_init(&w->loop, &w->revoke_grace);
    uv_idle_init(&w->loop, &w->idle);
    uv_poll_init(&w->loop, &w->kpoll, w->kpipe[0]);
    w->handles_ready = true;
    w->sigterm.data = w->sigint.data = w;
    w->kick.data = w->renew.data = w->grace.data = w->ctl.data = w->revoke_grace.data = w;
    w->idle.data = w->kpoll.data = w;
    uv_signal_start(&w->sigterm, wk_worker_signal_cb, SIGTERM);
    uv_signal_start(&w->sigint, wk_worker_signal_cb, SIGINT);
    uv_timer_start(&w->kick, wk_worker_kick_cb, WK_WORKER_KICK_MS, WK_WORKER_KICK_MS);
    uv_timer_start(&w->renew, wk_worker_renew_cb, (uint64_t)w->cfg->worker.lease_ms / 3,
                   (uint64_t)w->cfg->worker.lease_ms / 3);
    uv_timer_start(&w->ctl, wk_worker_ctl_cb, WK_WORKER_CTL_MS, WK_WORKER_CTL_MS);
    uv_poll_start(&w->kpoll, UV_READABLE, wk_worker_kpoll_cb);
    return 0;
}

int wk_worker_run(wk_worker *w, char *errstr, size_t errlen)
{
    if (wk_worker_setup(w, errstr, errlen) != 0)
        return -1;
    hr_log_info("worker_started", "owner=%s topic=%s group=%s max_chunks_in_flight=%d", w->owner,
                w->cfg->kafka.topic, w->cfg->kafka.group, w->cfg->worker.max_chunks_in_flight);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    hr_log_info("worker_stopped", "chunks_done=%" PRId64 " bad_messages=%" PRId64
                " unknown_tasks=%" PRId64 " busy_chunks=%" PRId64 " parked_chunks=%" PRId64,
                w->stats.chunks_done, w->stats.bad_messages, w->stats.unknown_tasks,
                w->stats.busy_chunks, w->stats.parked_chunks);
    return 0;
}

void wk_worker_get_stats(const wk_worker *w, wk_worker_stats *out)
{
    *out = w->stats;
}

void wk_worker_free(wk_worker *w)
{
    if (w == NULL)
        return;
    if (!w->finished && w->handles_ready) {
        /* Run failed half way or never finished: close what was opened. */
        w->finished = true;
        wk_worker_close_handles(w);
    } else if (!w->handles_ready && w->sender != NULL) {
        wk_sender_close(w->sender);
    }
    uv_run(&w->loop, UV_RUN_DEFAULT);
    /* The scrape callbacks read the reporter: stop serving first. */
    if (w->met != NULL)
        wk_metrics_stop(w->met);
    wk_sender_free(w->sender);
    wk_reporter_stop(w->reporter);
    if (w->kq != NULL)
        rd_kafka_queue_destroy(w->kq);
    if (w->rk != NULL)
        rd_kafka_destroy(w->rk);
    if (w->kpipe[0] >= 0)
        close(w->kpipe[0]);
    if (w->kpipe[1] >= 0)
        close(w->kpipe[1]);
    if (w->revoking != NULL)
        rd_kafka_topic_partition_list_destroy(w->revoking);
    wk_offsets_free(w->offsets);
    wk_task_cache_free(w->tasks);
    hr_mysql_free(w->mysql);
    hr_redis_free(w->redis);
    wk_metrics_free(w->met);
    uv_loop_close(&w->loop);
    free(w);
}
