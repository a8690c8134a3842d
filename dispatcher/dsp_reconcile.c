/* dsp_reconcile: the final reconciliation of an owned task's subscriber set
 * with push_subscription, after the claim and before the first chunk.
 *
 * Why after the claim: the guard trigger (schemas/mysql/
 * 003_subscription_guard.sql) refuses subscriptions from the claim on, and
 * the claim waited for the inserts in flight, so the rows MySQL holds now
 * are every subscription there will ever be.  The scanner's syncs before due
 * kept the set nearly complete; this one reads what they could not have
 * seen (rows of the epochs since the last sync, or all of them when the
 * synced mark is gone), adds them under the prepare lock and creates seq,
 * which lets the chunker start and makes every later refill refuse.  Every
 * new ownership (a claim, a takeover) runs it once, which also raises a seq
 * that went backwards (Redis restored from an older AOF) above every chunk
 * number the task ever used.  For a sharded task (docs/architecture.md
 * "Sharded tasks") it does so for every shard, and writes the shard rows
 * other dispatchers claim.
 *
 * The books are synced first (dsp_mirror.c: the profiles, and the address
 * book for an addressed channel), so the first chunk's workers read
 * consent and addresses as fresh as the subscribers.  A local-time or
 * windowed task's recipients are then parked by release instant
 * (dsp_wait_plan), once per task.
 *
 * Off the loop thread: a sync's cost follows the rows added since the last
 * one, which a bulk load just before due can make large.  Up to
 * DSP_RECONCILE_JOBS jobs at a time on libuv's pool, each with its own
 * connections and a batch of up to DSP_RECONCILE_BATCH
 * queued tasks, reconciled one after the other after one sync of the books for
 * the batch; with many small tasks due at once, one reconciliation at a
 * time (about twenty round trips each) held the later tasks' first chunks
 * back.  Two jobs never hold the same task: a task is queued once, and
 * each task's sync takes its prepare lock anyway.  The loop thread queues
 * tasks (dsp_reconcile_want) and reads the outcomes in a job's after-work
 * callback, which libuv runs on the loop thread. */
#include "dsp_reconcile.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_mirror.h"
#include "dsp_conn.h"
#include "dsp_shard.h"
#include "dsp_wait.h"
#include "hr_clock.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_shard.h"
#include "hr_subs.h"
#include "hr_vec.h"

/* One task's reconciliation: asked for by the chunker, its outcome written
 * by the job. */
typedef struct dsp_rc_item {
    int64_t id;
    bool waits;     /* a local-time or windowed task: plan its wait set */
    bool addressed; /* its channel pushes to the address book: sync it first */
    int shards;     /* a sharded task's: seq of each shard, and its rows */
    int result;     /* an hr_subs_result, or -1 */
    int64_t added, seen, parked, ms;
    char err[256];
} dsp_rc_item;

/* A reconciliation job: a batch of items on libuv's pool, its own
 * connections. */
typedef struct dsp_rc_job {
    uv_work_t work;
    dsp *d;
    dsp_conn conn;
    bool busy;
    size_t n;
    dsp_rc_item items[DSP_RECONCILE_BATCH];
} dsp_rc_job;

/* The loop thread owns the queue, fills a job's items before it starts and
 * reads them in its after-work callback; the job writes them in between. */
struct dsp_reconcile {
    dsp_rc_job jobs[DSP_RECONCILE_JOBS];
    HR_VEC(dsp_rc_item) queue;
};

int dsp_reconcile_new(dsp *d)
{
    d->rc = calloc(1, sizeof *d->rc);
    return d->rc != NULL ? 0 : -1;
}

/* Raises the seq of shard SHARD of task ID (of SHARDS) to the count of the
 * highest chunk number it ever had (MAX, a push_chunk row's) or a pending
 * chunk has, when it is lower: Redis came back from an AOF older than the
 * last chunk moves.  A reused number would put new recipients into a chunk
 * whose row exists (not counted in total) or whose set a worker is still
 * reading.  INCRBY, not SET: a shard's chunker (another dispatcher) may
 * INCR meanwhile, and the seq must never go down.  0 or -1 (ERRSTR). */
static int dsp_rc_seq_shard(dsp_conn *conn, int64_t id, int shards, int shard, int64_t max,
                            char *errstr, size_t errlen)
{
    char seq_key[256], pending[256];
    redisReply *reply;
    int64_t cur;
    size_t i;

    hr_key_shard(hr_redis_prefix(conn->r), pending, sizeof pending, id, shard, HR_KEY_PENDING);
    reply = hr_redis_cmdf(conn->r, errstr, errlen, "HKEYS %s", pending);
    if (reply == NULL)
        return -1;
    for (i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements; i++)
        if (strtoll(reply->element[i]->str, NULL, 10) > max)
            max = strtoll(reply->element[i]->str, NULL, 10);
    freeReplyObject(reply);
    max = hr_shard_count_of_seq(shards, max);
    hr_key_shard(hr_redis_prefix(conn->r), seq_key, sizeof seq_key, id, shard, HR_KEY_SEQ);
    reply = hr_redis_cmdf(conn->r, errstr, errlen, "GET %s", seq_key);
    if (reply == NULL)
        return -1;
    cur = reply->type == REDIS_REPLY_STRING ? strtoll(reply->str, NULL, 10) : 0;
    freeReplyObject(reply);
    if (cur >= max)
        return 0;
    reply = hr_redis_cmdf(conn->r, errstr, errlen, "INCRBY %s %" PRId64, seq_key, max - cur);
    if (reply == NULL)
        return -1;
    freeReplyObject(reply);
    hr_log_warn("seq_behind", "task=%" PRId64 " seq=%" PRId64 " raised_to=%" PRId64 " shard=%d", id,
                cur, max, shard);
    return 0;
}

/* dsp_rc_seq_shard for every shard of task ID, the push_chunk maxima read
 * in one query.  0 or -1 (ERRSTR). */
static int dsp_rc_seq(dsp_conn *conn, int64_t id, int shards, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(shards > 1 ? shards : 1), HR_P_I64(id)};
    int64_t *max = calloc((size_t)(shards > 1 ? shards : 1), sizeof *max);
    hr_mysql_rows *rows = NULL;
    int rc = -1;
    size_t i;

    if (max == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    if (hr_mysql_query(conn->m,
                       "SELECT (seq - 1) % ?, MAX(seq) FROM push_chunk WHERE task_id = ? "
                       "GROUP BY 1",
                       p, 2, &rows, errstr, errlen) < 0)
        goto done;
    for (i = 0; i < rows->nrows; i++) {
        int k = atoi(hr_mysql_cell(rows, i, 0));

        if (k >= 0 && k < (shards > 1 ? shards : 1))
            max[k] = strtoll(hr_mysql_cell(rows, i, 1), NULL, 10);
    }
    for (int k = 0; k < (shards > 1 ? shards : 1); k++)
        if (dsp_rc_seq_shard(conn, id, shards, k, max[k], errstr, errlen) < 0)
            goto done;
    rc = 0;
done:
    hr_mysql_rows_free(rows);
    free(max);
    return rc;
}

/* One task of a job: the sync, seq, the wait set's plan. */
static void dsp_rc_one(dsp *d, dsp_conn *conn, dsp_rc_item *it)
{
    char token[256];
    hr_subs_refill_opts o = {.token = token,
                             .lock_ms = DSP_PREP_LOCK_MS,
                             .batch = d->cfg->dispatcher.refill_batch,
                             .stop = &d->stopping};
    int64_t start = hr_clock_now_ms();

    snprintf(token, sizeof token, "%s/reconcile", d->owner);
    it->result = hr_subs_sync(conn->m, conn->r, it->id, &o, true, &it->added, &it->seen, it->err,
                              sizeof it->err);
    /* The plan runs once the set is complete and seq exists (no refill can
     * add to subs any more), before the first chunk.  A sharded task's
     * rows are written last: a claimable shard is complete. */
    if ((it->result == HR_SUBS_DONE || it->result == HR_SUBS_STARTED) &&
        (dsp_rc_seq(conn, it->id, it->shards, it->err, sizeof it->err) < 0 ||
         (it->waits &&
          dsp_wait_plan(conn, d->cfg, it->id, &it->parked, it->err, sizeof it->err) < 0) ||
         (it->shards > 1 && dsp_shard_rows(conn, it->id, it->shards, it->err, sizeof it->err) < 0)))
        it->result = -1;
    if (it->result < 0)
        dsp_conn_failed(d, conn, DSP_MYSQL, it->err);
    it->ms = hr_clock_now_ms() - start;
}

static void dsp_rc_work(uv_work_t *w)
{
    dsp_rc_job *job = w->data;
    size_t i;

    /* The books first, once for the batch: the campaigns' chunks read the
     * profiles (consent) and addresses from Redis, and the plans the
     * zones.  Addresses not for webhook channels, which push to none. */
    for (i = 0; i < job->n && !job->items[i].addressed; i++)
        ;
    if (dsp_conn_ready(job->d, &job->conn))
        dsp_mirror_sync(job->d, &job->conn, false, i < job->n);
    for (i = 0; i < job->n; i++) {
        dsp_rc_item *it = &job->items[i];

        /* After a failure the connection backs off: the rest are tried
         * again by a later job. */
        if (dsp_conn_ready(job->d, &job->conn)) {
            dsp_rc_one(job->d, &job->conn, it);
            continue;
        }
        it->result = -1;
        snprintf(it->err, sizeof it->err, "backends not ready");
    }
}

/* The outcome of task ID's reconciliation on the owned task; OK false =
 * try again after a short wait. */
static void dsp_rc_outcome(dsp *d, int64_t id, bool ok)
{
    dsp_task *dt = dsp_owned_find(d, id, HR_SHARD_NONE);

    if (dt == NULL)
        return; /* dropped meanwhile (paused, cancelled, lease lost) */
    dt->reconciling = false;
    if (ok)
        dt->started = true;
    else
        dt->next_ms = hr_clock_now_ms() + 100;
}

/* Logs and applies one item's outcome. */
static void dsp_rc_apply(dsp *d, const dsp_rc_item *it)
{
    switch (it->result) {
    case HR_SUBS_DONE:
        hr_log_info("task_reconciled",
                    "task=%" PRId64 " added=%" PRId64 " read=%" PRId64 " parked=%" PRId64
                    " ms=%" PRId64,
                    it->id, it->added, it->seen, it->parked, it->ms);
        if (it->added > 0)
            hr_metrics_add(d->met.reconcile_added, (uint64_t)it->added);
        hr_metrics_observe(d->met.reconcile_seconds, (double)it->ms / 1000.0);
        dsp_rc_outcome(d, it->id, true);
        break;
    case HR_SUBS_STARTED:
        /* seq exists: an earlier owner reconciled and started chunking. */
        dsp_rc_outcome(d, it->id, true);
        break;
    case HR_SUBS_BUSY:
        /* A scanner's sync holds the prepare lock: try again shortly. */
        dsp_rc_outcome(d, it->id, false);
        break;
    default:
        hr_log_warn("reconcile_failed", "task=%" PRId64 " result=%s error=%s", it->id,
                    hr_subs_result_str(it->result), it->err);
        dsp_rc_outcome(d, it->id, false);
        break;
    }
}

static void dsp_rc_start(dsp *d);

static void dsp_rc_done(uv_work_t *w, int status)
{
    dsp_rc_job *job = w->data;
    size_t i;

    (void)status;
    job->busy = false;
    for (i = 0; i < job->n; i++)
        dsp_rc_apply(job->d, &job->items[i]);
    job->n = 0;
    dsp_rc_start(job->d);
}

/* Starts idle jobs on the queued tasks, a batch each. */
static void dsp_rc_start(dsp *d)
{
    size_t j, i;

    for (j = 0; j < DSP_RECONCILE_JOBS && d->rc->queue.n > 0 && !atomic_load(&d->stopping); j++) {
        dsp_rc_job *job = &d->rc->jobs[j];

        if (job->busy)
            continue;
        job->n = d->rc->queue.n < DSP_RECONCILE_BATCH ? d->rc->queue.n : DSP_RECONCILE_BATCH;
        memcpy(job->items, d->rc->queue.v, job->n * sizeof *job->items);
        memmove(d->rc->queue.v, d->rc->queue.v + job->n,
                (d->rc->queue.n - job->n) * sizeof *d->rc->queue.v);
        d->rc->queue.n -= job->n;
        job->d = d;
        job->work.data = job;
        if (uv_queue_work(d->loop, &job->work, dsp_rc_work, dsp_rc_done) == 0) {
            job->busy = true;
            continue;
        }
        for (i = 0; i < job->n; i++)
            dsp_rc_outcome(d, job->items[i].id, false);
        job->n = 0;
    }
}

/* Whether task ID is queued or in a running job. */
static bool dsp_rc_has(const dsp *d, int64_t id)
{
    size_t i, j;

    for (i = 0; i < d->rc->queue.n; i++)
        if (d->rc->queue.v[i].id == id)
            return true;
    for (j = 0; j < DSP_RECONCILE_JOBS; j++)
        for (i = 0; d->rc->jobs[j].busy && i < d->rc->jobs[j].n; i++)
            if (d->rc->jobs[j].items[i].id == id)
                return true;
    return false;
}

bool dsp_reconcile_want(dsp *d, dsp_task *dt)
{
    if (!dsp_rc_has(d, dt->id) &&
        hr_vec_push(&d->rc->queue, ((dsp_rc_item){.id = dt->id,
                                                  .waits = dt->waits,
                                                  .addressed = dt->addressed,
                                                  .shards = dt->shards})) != 0)
        return false;
    dt->reconciling = true;
    dsp_rc_start(d);
    return true;
}

bool dsp_reconcile_busy(const dsp *d)
{
    for (size_t j = 0; j < DSP_RECONCILE_JOBS; j++)
        if (d->rc->jobs[j].busy)
            return true;
    return false;
}

void dsp_reconcile_free(dsp *d)
{
    if (d->rc == NULL)
        return;
    hr_vec_free(&d->rc->queue);
    for (size_t j = 0; j < DSP_RECONCILE_JOBS; j++)
        dsp_conn_close(&d->rc->jobs[j].conn);
    free(d->rc);
    d->rc = NULL;
}
