/* dsp_chunk: the chunker and what delivery reports change (DESIGN.md
 * "Chunker"), on the loop thread, for the tasks this dispatcher owns
 * (dsp_owned.c); the producer is dsp_kafka.c.
 *
 * - Chunker: per owned task, at most one chunk per tick: take the rate
 *   limit's grant, INCR seq, chunk_move.lua (SPOP -> chunk set -> pending),
 *   produce.  A local-time or windowed task first releases its due
 *   recipients from the wait set into subs (dsp_wait.c) and is not
 *   finished while any wait.  A chunk counts as published only on its delivery report,
 *   which queues a dsp_report; the reports become push_chunk rows and
 *   push_task.total in dsp_report.c.  Empty subs and no report outstanding ->
 *   `dispatched`.  Past the task's expire_at nothing more is chunked: what
 *   is left counts expired (dsp_chunk_expire).
 * - At exit: flush the producer, write the reports, mark finished tasks,
 *   release the leases.
 *
 * A sharded task (docs/architecture.md "Sharded tasks"): its coordinator
 * entry chunks nothing; after the reconciliation it looks every
 * DSP_SHARD_CHECK_MS whether every shard is chunked, then `dispatched`.
 * Each claimed shard is an entry chunked here on the shard's keys (its own
 * seq, striped chunk numbers, the shard in the message) under the task's
 * one rate limit; its subs empty and its reports written -> the shard is
 * chunked (dsp_shard.c).
 *
 * An owner's first chunk waits for the task's reconciliation
 * (dsp_reconcile.c), which makes the set complete under the prepare lock
 * and creates seq (or checks it did not go backwards):
 * once seq exists refill_add.lua refuses to add, so a refill can never put
 * back recipients that were already moved into chunks. */
#include "dsp_chunk.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_ahead.h"
#include "dsp_conn.h"
#include "dsp_drop.h"
#include "dsp_owned.h"
#include "dsp_reconcile.h"
#include "dsp_report.h"
#include "dsp_shard.h"
#include "dsp_store.h"
#include "dsp_ab.h"
#include "dsp_wait.h"
#include "hr_clock.h"
#include "hr_finish.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_pipe.h"
#include "hr_ratelimit.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_vec.h"

/* Chunk moves per tick, all tasks: their Redis steps are a pipeline each
 * (dsp_chunk_batch), so many small tasks are moved in a few ticks. */
#define DSP_CHUNKS_PER_TICK 256
#define DSP_OUTSTANDING_MAX 32  /* unconfirmed chunks per task */
#define DSP_AHEAD_RECHECK_MS 50 /* a task that ran ahead looks again */
#define DSP_CTL_RECHECK_MS 100  /* a task held by its ctl key looks again */
#define DSP_SHARD_CHECK_MS 250  /* a coordinator looks whether every shard is chunked */
#define DSP_FLUSH_MS 10000      /* bound of the producer flush at exit */

void dsp_chunk_delivered(void *ctx, const dsp_kafka_msg *msg, const char *err)
{
    dsp *d = ctx;
    dsp_task *dt = msg->republish ? NULL : dsp_owned_find(d, msg->task, msg->shard);

    /* A report of an earlier ownership (the task was dropped and owned
     * again meanwhile) was never counted in this one's outstanding. */
    if (dt != NULL && dt->gen == msg->gen)
        dt->outstanding--;
    if (err != NULL) {
        /* pending[seq] stays: the sweeper republishes the chunk. */
        dsp_health_fail(d, DSP_KAFKA, err);
        hr_log_warn("chunk_publish_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", msg->task,
                    msg->seq, err);
        return;
    }
    dsp_health_ok(d, DSP_KAFKA);
    if (!msg->republish)
        hr_metrics_inc(d->met.chunks_published);
    dsp_report_add(d, &(dsp_report){.task = msg->task,
                                    .seq = msg->seq,
                                    .size = msg->count,
                                    .published_ms = msg->published_ms,
                                    .shard = msg->shard});
}

static int dsp_task_cmp(const void *a, const void *b)
{
    int64_t x = (*(dsp_task *const *)a)->id, y = (*(dsp_task *const *)b)->id;

    return (x > y) - (x < y);
}

/* Subs is empty and every chunk's report was served: the N tasks DONE
 * become `dispatched` in one statement (many small tasks end in the same
 * tick, and a statement each held the loop thread for most of it) and
 * are dropped.  On a MySQL failure they stay, and the next tick tries
 * again. */
static void dsp_finish(dsp *d, dsp_task **done, size_t n)
{
    dsp_conn *conn = &d->loop_conn;
    int64_t *ids = calloc(n, sizeof *ids);
    bool *mine = calloc(n, sizeof *mine);
    uint64_t moved = 0;
    char err[512];
    size_t i;

    if (ids == NULL || mine == NULL) {
        snprintf(err, sizeof err, "out of memory");
        goto failed;
    }
    qsort(done, n, sizeof *done, dsp_task_cmp);
    for (i = 0; i < n; i++)
        ids[i] = done[i]->id;
    if (hr_state_dispatched(conn->m, ids, n, d->owner, &moved, err, sizeof err) < 0)
        goto failed;
    /* Not all moved: find out which are ours and dispatched now. */
    for (i = 0; i < n; i++)
        mine[i] = moved == n;
    if (moved < n &&
        dsp_store_mine(d, conn->m, ids, n, HR_STATE_DISPATCHED, mine, err, sizeof err) < 0)
        hr_log_warn("task_dispatched_unknown", "tasks=%zu moved=%" PRIu64 " error=%s", n, moved,
                    err);
    for (i = 0; i < n; i++) {
        if (mine[i])
            hr_log_info("task_dispatched", "task=%" PRId64 " chunks=%" PRId64, done[i]->id,
                        done[i]->chunks);
        else
            hr_log_warn("task_lost", "task=%" PRId64 " reason=not dispatching or not ours",
                        done[i]->id);
        dsp_owned_drop(d, done[i]);
    }
    goto out;
failed:
    dsp_conn_failed(d, conn, DSP_MYSQL, err);
out:
    free(mine);
    free(ids);
}

/* Before an owner's first chunk: the task's reconciliation (dsp_reconcile.c)
 * makes the set complete and creates seq under the prepare lock, or, for a
 * task an earlier owner started, checks that seq did not go backwards.  It
 * is queued here and the task waits for its outcome (t->reconciling). */
static void dsp_start(dsp *d, dsp_task *dt)
{
    if (!dsp_reconcile_want(d, dt)) {
        hr_log_error("reconcile_not_queued", "task=%" PRId64 " error=out of memory", dt->id);
        dt->next_ms = hr_clock_now_ms() + 1000;
        return;
    }
}

/* The rate limiter's grant for one chunk; 0 = wait (T->next_ms is set). */
static int64_t dsp_grant(dsp *d, dsp_task *dt, int64_t now, bool *failed, char *errstr,
                         size_t errlen)
{
    char scope[64];
    int64_t want, granted = 0, wait_ms = 0, after;

    *failed = false;
    if (dt->rate_limit <= 0 && dt->finish_ms <= 0)
        return dt->chunk_size;
    want = dt->rate_limit > 0 && dt->rate_limit < dt->chunk_size ? dt->rate_limit : dt->chunk_size;
    snprintf(scope, sizeof scope, "task%" PRId64, dt->id);
    /* A paced task's limit is derived by the script: dt->rate_limit gets
     * the rate in force (its gauges: dsp_owned_gauges). */
    if ((dt->finish_ms > 0
             ? hr_ratelimit_take_paced(d->loop_conn.r, dt->id, "chunk", dt->cap, dt->finish_ms,
                                       want, &granted, &wait_ms, &dt->rate_limit, errstr, errlen)
             : hr_ratelimit_take(d->loop_conn.r, scope, dt->rate_limit, want, &granted, &wait_ms,
                                 errstr, errlen)) < 0) {
        *failed = true;
        return 0;
    }
    if (dt->finish_ms > 0)
        dsp_owned_gauges(d);
    after = hr_clock_now_ms();
    /* The limiter counted the grant against the second it read before its
     * call; when the clock crossed a second meanwhile, the chunk's
     * published_ms could land in the next second on top of that second's
     * own budget.  Give such a grant up: under-use, not overshoot.  (The
     * seq and move round trips after it can still carry the tick's chunk
     * past a second's end: one chunk a task per second's end, since the
     * ticks run one after another; test_rate_limit's bound.) */
    if (after / 1000 != now / 1000) {
        dt->next_ms = after;
        return 0;
    }
    if (granted < want) {
        dt->next_ms = now + (wait_ms > 0 ? wait_ms : 1);
        hr_metrics_inc(d->met.ratelimit_waits);
    }
    return granted;
}

/* At or after the task's expire_at nothing more is chunked (also for a
 * task that wakes up after it, its subs complete since the reconciliation
 * ran first): what is left in subs and in the pending chunks no worker
 * holds counts expired (drop_set.lua); a chunk a worker holds is expired
 * by that worker, which checks before every push it starts, and one whose
 * worker died is expired by the worker the sweeper's republish reaches.
 * The task then goes on as one whose subs ran out: dispatched, and done
 * when no chunk is pending, every subscription accounted.
 * Recipients still parked in the wait set (local time, send windows) are
 * dropped first, so a release racing the expiry lands in subs, dropped
 * next (dsp_drop_shard). */
static void dsp_chunk_expire(dsp *d, dsp_task *dt)
{
    dsp_conn *conn = &d->loop_conn;
    int64_t dropped = 0, total = 0;
    int shard = dt->shard != HR_SHARD_NONE ? dt->shard : 0, events;
    bool held = false;
    dsp_events_drop ev;
    char err[512];

    /* A shard's chunker expires its own shard: the wait set, subs, unheld
     * chunks and the counter of its row. */
    if ((events = dsp_events_drop_init(d, conn->m, dt->id, HR_OUTCOME_EXPIRED, &ev, err,
                                       sizeof err)) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return;
    }
    if (dsp_drop_shard(conn, dt->id, shard, HR_OUTCOME_EXPIRED, events ? &ev : NULL, &dropped,
                       &total, &held, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return;
    }
    /* Without it the stats hash keeps the count, and the finish
     * (hr_finish_tasks) raises MySQL to it. */
    if (hr_finish_count(conn->m, dt->id, dt->shard, HR_OUTCOME_EXPIRED, total, err, sizeof err) < 0)
        hr_log_warn("expired_count_lost", "task=%" PRId64 " expired=%" PRId64 " error=%s", dt->id,
                    total, err);
    hr_metrics_add(d->met.expired, (uint64_t)dropped);
    hr_log_info("task_expired",
                "task=%" PRId64 " shard=%d dropped=%" PRId64 " expired=%" PRId64
                " held=%d late_ms=%" PRId64,
                dt->id, dt->shard, dropped, total, held, hr_clock_now_ms() - dt->expire_ms);
    dt->subs_empty = true;
}

/* A local-time or windowed task (dsp_wait.c): releases up to N due
 * recipients into subs for the chunk about to move, and notes when the next
 * ones are due (wait_next_ms: the earliest release still waiting, 0 when
 * due ones are left) and how many still wait.  0 or -1 (ERRSTR). */
static int dsp_chunk_release(dsp *d, dsp_task *dt, int64_t now, int64_t n, char *errstr,
                             size_t errlen)
{
    int64_t next = -1, left = 0;

    if (dsp_wait_release(&d->loop_conn, dt, now, n, &next, &left, errstr, errlen) < 0)
        return -1;
    dt->wait_left = left;
    dt->wait_next_ms = next > now ? next : 0;
    return 0;
}

/* One move of a tick's batch: the task, the recipients its grant allows
 * and, once INCR answered, the chunk's number. */
typedef struct dsp_move {
    dsp_task *dt;
    int64_t n, seq;
} dsp_move;

/* When DT's chunker looks at its wait set next: its next release instant,
 * or while an A/B test's winner step holds the rest, the step's (dsp_ab.c:
 * it may release the rest now, DT->wait_next_ms 0); never past expire_at,
 * where what waits counts expired. */
static void dsp_chunk_next_release(dsp *d, dsp_task *dt, int64_t now)
{
    dt->next_ms = dt->wait_next_ms;
    if (dsp_ab_holds(dt))
        dsp_ab_step(d, dt, now);
    if (dt->expire_ms > 0 && dt->next_ms > dt->expire_ms)
        dt->next_ms = dt->expire_ms;
}

/* DT's subs ran out: true when nothing waits in its wait set either (the
 * task is finished), false with DT->next_ms at the next release (never
 * past its expire_at, where what waits counts expired).  A task that
 * plans no wait set is looked at too: recipients a worker put off to their
 * own quiet hours' end wait there (worker/wk_consent.h), and from then on
 * the chunker releases them like any wave.  WAITING: the size of that
 * wait set as the tick's batch read it (dsp_chunk_waiting), -1 unread;
 * only one not empty costs a release's round trips here.  *FAILED on a
 * Redis error. */
static bool dsp_chunk_drained(dsp *d, dsp_task *dt, int64_t now, int64_t waiting, bool *failed,
                              char *errstr, size_t errlen)
{
    if (!dt->waits && waiting == 0) {
        dt->wait_left = 0;
        dt->wait_next_ms = 0;
        return true;
    }
    if (!dt->waits) {
        if (dsp_chunk_release(d, dt, now, 0, errstr, errlen) < 0) {
            *failed = true;
            return false;
        }
        dt->waits = dt->wait_left > 0;
    }
    if (dt->wait_left == 0)
        return true;
    dsp_chunk_next_release(d, dt, now);
    return false;
}

/* CMD on the key KIND of each of the N moves' tasks (their shard's, for a
 * shard), one round trip; the replies stay in PIPE.  0, or -1 out of
 * memory (ERRSTR).
 * The steps read their replies with hr_pipe_reply_retry: a reply lost
 * with its connection is asked for again alone, as a single call's was
 * (chunk_move.lua answers a re-run with the chunk's size, so the chunk is
 * published; tests/integration/test_retry_races.py "chunk_move"). */
static int dsp_chunk_each(dsp *d, hr_pipe *pipe, const char *cmd, const dsp_move *mv, size_t n,
                          hr_key_kind kind, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX];
    const char *argv[] = {cmd, key};

    hr_pipe_reset(pipe);
    for (size_t i = 0; i < n; i++) {
        const dsp_task *dt = mv[i].dt;

        hr_key_shard(hr_redis_prefix(d->loop_conn.r), key, sizeof key, dt->id,
                     dt->shard != HR_SHARD_NONE ? dt->shard : 0, kind);
        if (hr_pipe_cmd(pipe, 2, argv, NULL) < 0) {
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
    }
    /* A connection that failed leaves replies to ask for again. */
    hr_pipe_exec(pipe, errstr, errlen);
    return 0;
}

/* The ctl keys of the N moves' tasks (what pause, resume and cancel set
 * at once in Redis, and the scanner mirrors from MySQL), one round trip:
 * RUN[i] tells whether move i's still says run.  The lease renewal drops
 * a paused or cancelled task only every lease_s / 3; without this check
 * the owner kept chunking that long after a pause, and a recover right
 * after the pause raced its chunks.  A missing key is run (the scanner
 * sets it, a flush may have lost it); a value that is no control name
 * holds the task, as pause does.  0 or -1 (ERRSTR). */
static int dsp_running(dsp *d, hr_pipe *pipe, const dsp_move *mv, size_t n, bool *run, char *errstr,
                       size_t errlen)
{
    if (dsp_chunk_each(d, pipe, "GET", mv, n, HR_KEY_CTL, errstr, errlen) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        redisReply *reply = hr_pipe_reply_retry(pipe, i, errstr, errlen);
        hr_control control;

        if (reply == NULL)
            return -1;
        run[i] = reply->type != REDIS_REPLY_STRING ||
                 (hr_control_parse(reply->str, &control) == 0 && control == HR_CONTROL_RUN);
        freeReplyObject(reply);
        if (!run[i])
            hr_log_debug("task_held", "task=%" PRId64 " reason=control", mv[i].dt->id);
    }
    return 0;
}

/* What a running task must pass before its move: the expiry, the wait
 * set's next release, the run-ahead bound, the rate limit's grant; the
 * recipients released or granted into MV->n.  true = move it; false =
 * not this tick (T->next_ms says when), or *FAILED on a Redis error. */
static bool dsp_chunk_may(dsp *d, dsp_task *dt, int64_t now, dsp_move *mv, bool *failed,
                          char *errstr, size_t errlen)
{
    *failed = false;
    if (dt->expire_ms > 0 && now >= dt->expire_ms) {
        dsp_chunk_expire(d, dt);
        return false;
    }
    if (dt->waits && now < dt->wait_next_ms) {
        /* nothing released before then (dsp_chunk_release) */
        dsp_chunk_next_release(d, dt, now);
        if (now < dt->wait_next_ms)
            return false;
    }
    /* Enough chunks wait for a worker (dsp_ahead.c). */
    switch (dsp_ahead(d, dt, errstr, errlen)) {
    case 0:
        break;
    case 1:
        dt->next_ms = now + DSP_AHEAD_RECHECK_MS;
        return false;
    default:
        *failed = true;
        return false;
    }
    mv->dt = dt;
    mv->n = dsp_grant(d, dt, now, failed, errstr, errlen);
    if (mv->n == 0)
        return false;
    if (dt->waits && dsp_chunk_release(d, dt, now, mv->n, errstr, errlen) < 0) {
        *failed = true;
        return false;
    }
    return true;
}

/* INCR of each move's seq, one round trip: a shard counts its own chunks,
 * and the number is striped so the task's chunk numbers stay unique
 * (hr_shard_seq).  A seq taken by a move that then fails is skipped, as
 * one a dispatcher died after.  0 or -1 (ERRSTR). */
static int dsp_chunk_seqs(dsp *d, hr_pipe *pipe, dsp_move *mv, size_t n, char *errstr,
                          size_t errlen)
{
    if (dsp_chunk_each(d, pipe, "INCR", mv, n, HR_KEY_SEQ, errstr, errlen) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const dsp_task *dt = mv[i].dt;
        int64_t v = dsp_reply_int(hr_pipe_reply_retry(pipe, i, errstr, errlen));

        if (v < 0)
            return -1;
        mv[i].seq = hr_shard_seq(dt->shards, dt->shard != HR_SHARD_NONE ? dt->shard : 0, v);
    }
    return 0;
}

/* chunk_move.lua of each move (SPOP -> chunk set -> pending), one round
 * trip; MOVED[i] gets how many move i moved.  0 or -1 (ERRSTR). */
static int dsp_chunk_move(dsp *d, hr_pipe *pipe, const dsp_move *mv, size_t n, int64_t now,
                          int64_t *moved, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(d->loop_conn.r);
    char keys[3][HR_KEY_MAX], seq_s[24], n_s[24], now_s[24];
    const char *argv[6] = {keys[0], keys[1], keys[2], n_s, seq_s, now_s};
    size_t i;

    hr_pipe_reset(pipe);
    snprintf(now_s, sizeof now_s, "%" PRId64, now);
    for (i = 0; i < n; i++) {
        const dsp_task *dt = mv[i].dt;
        int shard = dt->shard != HR_SHARD_NONE ? dt->shard : 0;

        snprintf(n_s, sizeof n_s, "%" PRId64, mv[i].n);
        snprintf(seq_s, sizeof seq_s, "%" PRId64, mv[i].seq);
        hr_key_shard(prefix, keys[0], sizeof keys[0], dt->id, shard, HR_KEY_SUBS);
        hr_key_shard_chunk(prefix, keys[1], sizeof keys[1], dt->id, shard, mv[i].seq);
        hr_key_shard(prefix, keys[2], sizeof keys[2], dt->id, shard, HR_KEY_PENDING);
        if (hr_pipe_eval(pipe, HR_LUA_CHUNK_MOVE, 3, 6, argv, NULL) < 0) {
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
    }
    hr_pipe_exec(pipe, errstr, errlen);
    for (i = 0; i < n; i++)
        if ((moved[i] = dsp_reply_int(hr_pipe_reply_retry(pipe, i, errstr, errlen))) < 0)
            return -1;
    return 0;
}

/* The wait sets' sizes (ZCARD) of the N moves' tasks that moved fewer
 * recipients than asked for and plan no wait set, one round trip, into
 * WAITING (-1 for the others): their subs ran out, and a worker may have
 * put recipients off into the wait set (dsp_chunk_drained).  Each small
 * task of one chunk asked this alone, a TIME and a wait_release.lua in
 * two round trips of the loop, when its only chunk moved (issue 33).
 * 0, or -1 (ERRSTR). */
static int dsp_chunk_waiting(dsp *d, hr_pipe *pipe, const dsp_move *mv, const int64_t *moved,
                             size_t n, int64_t *waiting, char *errstr, size_t errlen)
{
    dsp_move ask[DSP_CHUNKS_PER_TICK];
    size_t i, nask = 0;

    for (i = 0; i < n; i++) {
        waiting[i] = -1;
        if (!mv[i].dt->waits && moved[i] < mv[i].n)
            ask[nask++] = mv[i];
    }
    if (nask == 0)
        return 0;
    if (dsp_chunk_each(d, pipe, "ZCARD", ask, nask, HR_KEY_WAIT, errstr, errlen) < 0)
        return -1;
    for (i = 0, nask = 0; i < n; i++) {
        if (mv[i].dt->waits || moved[i] >= mv[i].n)
            continue;
        if ((waiting[i] = dsp_reply_int(hr_pipe_reply_retry(pipe, nask++, errstr, errlen))) < 0)
            return -1;
    }
    return 0;
}

/* What a move of MOVED recipients means for its task: none, subs ran out;
 * else the chunk is produced.  WAITING: its wait set's size if read
 * (dsp_chunk_waiting), else -1.  true when a chunk moved. */
static bool dsp_chunk_moved(dsp *d, const dsp_move *mv, int64_t moved, int64_t waiting, int64_t now)
{
    dsp_task *dt = mv->dt;
    char err[512];
    bool failed = false;

    if (moved == 0) {
        /* Not finished while recipients wait for their instant. */
        dt->subs_empty = dsp_chunk_drained(d, dt, now, waiting, &failed, err, sizeof err);
        if (failed)
            dsp_conn_failed(d, &d->loop_conn, DSP_REDIS, err);
        return false;
    }
    dt->chunks++;
    /* Fewer than asked for: subs ran empty (nothing adds to it once seq
     * exists but the wait set's releases, which wait_left counts), so a
     * task of one chunk ends without another GET ctl, INCR and empty move. */
    if (moved < mv->n && !dt->waits) {
        dt->subs_empty = dsp_chunk_drained(d, dt, now, waiting, &failed, err, sizeof err);
        /* The chunk moved all the same: produce it; the next tick looks
         * at the wait set again. */
        if (failed)
            dsp_conn_failed(d, &d->loop_conn, DSP_REDIS, err);
    }
    dsp_seams_moved();
    if (dsp_kafka_produce(d->kafka,
                          &(dsp_kafka_msg){.task = dt->id,
                                           .seq = mv->seq,
                                           .shard = dt->shard,
                                           .count = moved,
                                           .due_ms = dt->due_ms,
                                           .gen = dt->gen},
                          err, sizeof err) < 0) {
        /* The chunk is pending; the sweeper publishes it later. */
        hr_log_warn("chunk_publish_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", dt->id,
                    mv->seq, err);
        dt->next_ms = now + 1000;
        return true;
    }
    dt->outstanding++;
    hr_log_debug("chunk_moved", "task=%" PRId64 " shard=%d seq=%" PRId64 " size=%" PRId64, dt->id,
                 dt->shard, mv->seq, moved);
    return true;
}

/* One chunk of each of the N tasks DTS (each reconciled, at most
 * DSP_CHUNKS_PER_TICK): ctl, grant, seq, move, produce.  The Redis steps
 * go in one round trip per step for all of them, not three per task: many
 * small tasks due together were moved one after the other at three round
 * trips each, and their moves trailed their reconciliations by a second
 * and more (docs/performance.md "Many small tasks").  true when a chunk
 * moved. */
static bool dsp_chunk_batch(dsp *d, dsp_task *const *dts, size_t n)
{
    dsp_conn *conn = &d->loop_conn;
    dsp_move mv[DSP_CHUNKS_PER_TICK];
    int64_t moved[DSP_CHUNKS_PER_TICK], waiting[DSP_CHUNKS_PER_TICK], now = hr_clock_now_ms();
    bool run[DSP_CHUNKS_PER_TICK], any = false, failed = false;
    hr_pipe *pipe = hr_pipe_new(conn->r);
    char err[512];
    size_t i, nmv = 0;

    if (pipe == NULL) {
        snprintf(err, sizeof err, "out of memory");
        goto redis_failed;
    }
    for (i = 0; i < n; i++)
        mv[i] = (dsp_move){.dt = dts[i]};
    if (dsp_running(d, pipe, mv, n, run, err, sizeof err) < 0)
        goto redis_failed;
    /* The moves that go ahead, to the front. */
    for (i = 0; i < n; i++) {
        if (!run[i]) {
            dts[i]->next_ms = now + DSP_CTL_RECHECK_MS;
            continue;
        }
        /* The grant's own time: dsp_grant gives up one whose call crossed
         * a second, and the checks before it may have taken a while. */
        if (dsp_chunk_may(d, dts[i], hr_clock_now_ms(), &mv[nmv], &failed, err, sizeof err))
            nmv++;
        else if (failed)
            goto redis_failed;
    }
    if (nmv == 0)
        goto done;
    if (dsp_chunk_seqs(d, pipe, mv, nmv, err, sizeof err) < 0 ||
        dsp_chunk_move(d, pipe, mv, nmv, now, moved, err, sizeof err) < 0 ||
        dsp_chunk_waiting(d, pipe, mv, moved, nmv, waiting, err, sizeof err) < 0)
        goto redis_failed;
    dsp_health_ok(d, DSP_REDIS);
    for (i = 0; i < nmv; i++)
        any |= dsp_chunk_moved(d, &mv[i], moved[i], waiting[i], now);
    goto done;
redis_failed:
    dsp_conn_failed(d, conn, DSP_REDIS, err);
done:
    hr_pipe_free(pipe);
    return any;
}

/* A sharded task's coordinator: reconciled first (which writes the shard
 * rows), then true (to be made `dispatched`) once every shard is chunked. */
static bool dsp_coordinate(dsp *d, dsp_task *dt, int64_t now)
{
    char err[512];
    int rc;

    if (dt->reconciling)
        return false;
    if (!dt->started) {
        dsp_start(d, dt);
        return false;
    }
    rc = dsp_shard_all_chunked(d, dt, err, sizeof err);
    if (rc < 0)
        dsp_conn_failed(d, &d->loop_conn, DSP_MYSQL, err);
    else if (rc == 0)
        dt->next_ms = now + DSP_SHARD_CHECK_MS;
    return rc == 1;
}

/* Shards whose subs ran out with every report written: each becomes
 * chunked (dsp_shard_chunked drops it, so after the tasks' walk). */
static void dsp_chunked(dsp *d, dsp_task **shards, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dsp_shard_chunked(d, shards[i]);
}

bool dsp_chunk_tick(dsp *d)
{
    HR_VEC(dsp_task *) done = {0}, chunked = {0};
    dsp_task *batch[DSP_CHUNKS_PER_TICK];
    size_t i, n = 0;
    int64_t now;
    bool moved = false;

    dsp_kafka_poll(d->kafka);
    dsp_report_write(d);
    if (atomic_load(&d->stopping))
        return false;
    now = hr_clock_now_ms();
    /* Only the tasks that may move a chunk count against the tick's budget:
     * a task still reconciling costs nothing, and must not keep the tasks
     * behind it in the table from moving. */
    for (i = 0; i < dsp_owned_count(d) && n < DSP_CHUNKS_PER_TICK; i++) {
        dsp_task *dt = dsp_owned_at(d, i);

        if (dt->next_ms > now || !dsp_conn_ready(d, &d->loop_conn))
            continue;
        if (dt->shards > 1 && dt->shard == HR_SHARD_NONE) {
            if (dsp_coordinate(d, dt, now) && hr_vec_push(&done, dt) < 0)
                break;
            continue;
        }
        if (dt->subs_empty) {
            if (dt->outstanding == 0 && !dsp_report_queued(d, dt->id, dt->shard) &&
                hr_vec_push(dt->shard != HR_SHARD_NONE ? &chunked : &done, dt) < 0)
                break; /* out of memory: the next tick */
            continue;
        }
        if (dt->outstanding >= DSP_OUTSTANDING_MAX || dt->reconciling)
            continue;
        if (!dt->started) {
            dsp_start(d, dt);
            continue;
        }
        batch[n++] = dt;
    }
    if (n > 0)
        moved = dsp_chunk_batch(d, batch, n);
    if (done.n > 0)
        dsp_finish(d, done.v, done.n);
    dsp_chunked(d, chunked.v, chunked.n);
    hr_vec_free(&done);
    hr_vec_free(&chunked);
    return moved;
}

void dsp_chunk_release_all(dsp *d)
{
    dsp_conn *conn = &d->loop_conn;
    HR_VEC(dsp_task *) done = {0}, chunked = {0};
    const hr_mysql_param p[] = {HR_P_STR(d->owner)};
    uint64_t affected = 0;
    char err[512];
    size_t i;

    dsp_kafka_flush(d->kafka, DSP_FLUSH_MS);
    /* The backoff of a recent failure must not skip the last writes. */
    conn->retry_at_ms = 0;
    dsp_report_flush(d);
    if (conn->m == NULL)
        return;
    for (i = 0; i < dsp_owned_count(d); i++) {
        dsp_task *dt = dsp_owned_at(d, i);

        if (dt->subs_empty && dt->outstanding == 0 && !dsp_report_queued(d, dt->id, dt->shard) &&
            hr_vec_push(dt->shard != HR_SHARD_NONE ? &chunked : &done, dt) < 0)
            break;
    }
    if (done.n > 0)
        dsp_finish(d, done.v, done.n);
    dsp_chunked(d, chunked.v, chunked.n);
    hr_vec_free(&done);
    hr_vec_free(&chunked);
    dsp_shard_release_all(d);
    if (hr_mysql_exec(conn->m,
                      "UPDATE push_task SET lease_until = UTC_TIMESTAMP(3) "
                      "WHERE claimed_by = ? AND state = 'dispatching'",
                      p, 1, &affected, NULL, NULL, err, sizeof err) < 0)
        hr_log_error("lease_release_failed", "error=%s", err);
    else
        hr_log_info("leases_released", "tasks=%" PRIu64, affected);
}
