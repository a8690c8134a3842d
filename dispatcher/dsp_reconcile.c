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
 * connections and a batch of up to DSP_RECONCILE_BATCH queued tasks,
 * reconciled together: one address sync, one pass of round trips for the
 * sets of the tasks of one shard (hr_subs_sync_claimed: the locks, the
 * epochs, the rows, the adds, the marks, a statement or a pipeline each
 * for all of them), one for their seqs (dsp_rc_seqs); a sharded task is
 * synced on its own.  With many small tasks due at once, one
 * reconciliation at a time (about twenty round trips each) held the later
 * tasks' first chunks back, and so did a dozen round trips per task within
 * a job (docs/performance.md "Many small tasks").  Two jobs never hold the
 * same task: a task is queued once, and each task's sync takes its
 * prepare lock anyway.  The loop thread queues
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
#include "hr_batch.h"
#include "hr_clock.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_pipe.h"
#include "hr_shard.h"
#include "hr_subs.h"
#include "hr_subs_batch.h"
#include "hr_vec.h"

/* One task's reconciliation: asked for by the chunker, its outcome written
 * by the job. */
typedef struct dsp_rc_item {
    int64_t id;
    bool waits;     /* a local-time, windowed or lead-time task: plan its wait set */
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

/* One shard of a task whose seq is checked (dsp_rc_seqs): the highest
 * chunk number its push_chunk rows hold. */
typedef struct dsp_rc_seq {
    dsp_rc_item *it;
    int shard;
    int64_t max;
} dsp_rc_seq;

/* What the push_chunk maxima's match writes: batch row I is item I, whose
 * shards start at FIRST[I] in SEQS. */
typedef struct dsp_rc_maxima {
    dsp_rc_seq *seqs;
    const size_t *first;
} dsp_rc_maxima;

static bool dsp_rc_max_row(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row)
{
    dsp_rc_maxima *mx = ctx;
    dsp_rc_seq *sq = &mx->seqs[mx->first[i]];
    int k = atoi(hr_mysql_cell(rows, row, 1));

    if (k >= 0 && k < (sq->it->shards > 1 ? sq->it->shards : 1))
        sq[k].max = strtoll(hr_mysql_cell(rows, row, 2), NULL, 10);
    return true;
}

/* Raises shard SQ's seq, CUR, to the count of the highest chunk number it
 * ever had (a push_chunk row's, SQ->max) or a pending chunk has (PENDING,
 * HKEYS' reply), when it is lower: Redis came back from an AOF older than
 * the last chunk moves.  A reused number would put new recipients into a
 * chunk whose row exists (not counted in total) or whose set a worker is
 * still reading.  INCRBY, not SET: a shard's chunker (another dispatcher)
 * may INCR meanwhile, and the seq must never go down.  0 or -1 (ERRSTR). */
static int dsp_rc_seq_raise(dsp_conn *conn, const dsp_rc_seq *sq, const redisReply *pending,
                            int64_t cur, char *errstr, size_t errlen)
{
    char seq_key[HR_KEY_MAX];
    int64_t max = sq->max;
    redisReply *reply;

    for (size_t i = 0; pending->type == REDIS_REPLY_ARRAY && i < pending->elements; i++)
        if (strtoll(pending->element[i]->str, NULL, 10) > max)
            max = strtoll(pending->element[i]->str, NULL, 10);
    max = hr_shard_count_of_seq(sq->it->shards, max);
    if (cur >= max)
        return 0;
    hr_key_shard(hr_redis_prefix(conn->r), seq_key, sizeof seq_key, sq->it->id, sq->shard,
                 HR_KEY_SEQ);
    reply = hr_redis_cmdf(conn->r, errstr, errlen, "INCRBY %s %" PRId64, seq_key, max - cur);
    if (reply == NULL)
        return -1;
    freeReplyObject(reply);
    hr_log_warn("seq_behind", "task=%" PRId64 " seq=%" PRId64 " raised_to=%" PRId64 " shard=%d",
                sq->it->id, cur, max, sq->shard);
    return 0;
}

/* dsp_rc_seq_raise for every shard of the N tasks ITS: the push_chunk
 * maxima of all of them in one statement, every shard's pending chunks and
 * seq in one pipeline.  Every new ownership checks it (a task claimed, or
 * taken over).  0 or -1 (ERRSTR). */
static int dsp_rc_seqs(dsp_conn *conn, dsp_rc_item *const *its, size_t n, char *errstr,
                       size_t errlen)
{
    const char *prefix = hr_redis_prefix(conn->r);
    int64_t *cells = calloc(n * 2 + 1, sizeof *cells);
    size_t *first = calloc(n + 1, sizeof *first);
    dsp_rc_seq *seqs = NULL;
    hr_pipe *pipe = hr_pipe_new(conn->r);
    char key[HR_KEY_MAX];
    size_t i, k, nseq = 0;
    int rc = -1;

    if (cells == NULL || first == NULL || pipe == NULL)
        goto oom;
    for (i = 0; i < n; i++) {
        first[i] = nseq;
        nseq += (size_t)(its[i]->shards > 1 ? its[i]->shards : 1);
        cells[2 * i] = its[i]->id;
        cells[2 * i + 1] = its[i]->shards > 1 ? its[i]->shards : 1;
    }
    if ((seqs = calloc(nseq + 1, sizeof *seqs)) == NULL)
        goto oom;
    for (i = 0; i < n; i++)
        for (k = 0; k < (size_t)cells[2 * i + 1]; k++)
            seqs[first[i] + k] = (dsp_rc_seq){.it = its[i], .shard = (int)k};
    if (hr_batch_select(conn->m,
                        "SELECT j.task, (c.seq - 1) % j.shards, MAX(c.seq) FROM JSON_TABLE(?, "
                        "'$[*]' COLUMNS (task BIGINT PATH '$[0]', shards BIGINT PATH '$[1]')) j "
                        "STRAIGHT_JOIN push_chunk c ON c.task_id = j.task GROUP BY 1, 2",
                        &(hr_batch){cells, n, 2}, NULL, 0, 1, dsp_rc_max_row,
                        &(dsp_rc_maxima){seqs, first}, errstr, errlen) < 0)
        goto done;
    for (i = 0; i < nseq; i++) {
        const char *hkeys[] = {"HKEYS", key}, *get[] = {"GET", key};

        hr_key_shard(prefix, key, sizeof key, seqs[i].it->id, seqs[i].shard, HR_KEY_PENDING);
        if (hr_pipe_cmd(pipe, 2, hkeys, NULL) < 0)
            goto oom;
        hr_key_shard(prefix, key, sizeof key, seqs[i].it->id, seqs[i].shard, HR_KEY_SEQ);
        if (hr_pipe_cmd(pipe, 2, get, NULL) < 0)
            goto oom;
    }
    if (hr_pipe_exec(pipe, errstr, errlen) < 0)
        goto done;
    for (i = 0; i < nseq; i++) {
        redisReply *pending = hr_pipe_reply(pipe, 2 * i, errstr, errlen);
        redisReply *cur = pending != NULL ? hr_pipe_reply(pipe, 2 * i + 1, errstr, errlen) : NULL;
        int one = -1;

        if (cur != NULL)
            one = dsp_rc_seq_raise(
                conn, &seqs[i], pending,
                cur->type == REDIS_REPLY_STRING ? strtoll(cur->str, NULL, 10) : 0, errstr, errlen);
        freeReplyObject(pending);
        freeReplyObject(cur);
        if (one < 0)
            goto done;
    }
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    hr_pipe_free(pipe);
    free(seqs);
    free(first);
    free(cells);
    return rc;
}

/* What follows a sync that made the N items ITS' sets complete (or found
 * their chunking started): seq checked, the wait set planned (CFG: the
 * recipients' profiles, for their zones), a sharded
 * task's rows written.  The plan runs once the set is complete and seq
 * exists (no refill can add to subs any more), before the first chunk.  A
 * sharded task's rows are written last: a claimable shard is complete.
 * An item that fails gets result -1 and its error. */
static void dsp_rc_after(dsp_conn *conn, const hr_config *cfg, dsp_rc_item **its, size_t n)
{
    char err[256];
    size_t i, k = 0;

    for (i = 0; i < n; i++)
        if (its[i]->result == HR_SUBS_DONE || its[i]->result == HR_SUBS_STARTED)
            its[k++] = its[i];
    if (k > 0 && dsp_rc_seqs(conn, its, k, err, sizeof err) < 0) {
        for (i = 0; i < k; i++) {
            its[i]->result = -1;
            snprintf(its[i]->err, sizeof its[i]->err, "%s", err);
        }
        return;
    }
    for (i = 0; i < k; i++) {
        dsp_rc_item *it = its[i];

        if ((it->waits &&
             dsp_wait_plan(conn, cfg, it->id, &it->parked, it->err, sizeof it->err) < 0) ||
            (it->shards > 1 &&
             dsp_shard_rows(conn, it->id, it->shards, it->err, sizeof it->err) < 0))
            it->result = -1;
    }
}

/* The sync of the job's tasks: those of one set in one pass
 * (hr_subs_sync_claimed), each task of several shards on its own. */
static void dsp_rc_sync(dsp_rc_job *job, const hr_subs_refill_opts *o)
{
    hr_subs_item subs[DSP_RECONCILE_BATCH];
    size_t i, j, n = 0;

    for (i = 0; i < job->n; i++) {
        dsp_rc_item *it = &job->items[i];

        if (it->shards > 1)
            it->result = hr_subs_sync(job->conn.m, job->conn.r, it->id, o, true, &it->added,
                                      &it->seen, it->err, sizeof it->err);
        else
            subs[n++].id = it->id;
    }
    if (n == 0)
        return;
    hr_subs_sync_claimed(job->conn.m, job->conn.r, subs, n, o);
    /* The answers come back sorted by id; a task is queued once. */
    for (j = 0; j < n; j++)
        for (i = 0; i < job->n; i++) {
            dsp_rc_item *it = &job->items[i];

            if (it->id != subs[j].id || it->shards > 1)
                continue;
            it->result = subs[j].result;
            it->added = subs[j].added;
            it->seen = subs[j].seen;
            snprintf(it->err, sizeof it->err, "%s", subs[j].err);
        }
}

static void dsp_rc_work(uv_work_t *w)
{
    dsp_rc_job *job = w->data;
    dsp_rc_item *its[DSP_RECONCILE_BATCH];
    char token[256];
    hr_subs_refill_opts o = {.token = token,
                             .lock_ms = DSP_PREP_LOCK_MS,
                             .batch = job->d->cfg->dispatcher.refill_batch,
                             .stop = &job->d->stopping};
    int64_t start = hr_clock_now_ms();
    size_t i;

    /* The books first, once for the batch: the campaigns' chunks read the
     * profiles (consent) and addresses from Redis, and the plans the
     * zones.  Addresses not for webhook channels, which push to none. */
    for (i = 0; i < job->n && !job->items[i].addressed; i++)
        ;
    if (dsp_conn_ready(job->d, &job->conn))
        dsp_mirror_sync(job->d, &job->conn, false, i < job->n);
    /* After a failure the connection backs off: a later job tries the
     * tasks again. */
    if (!dsp_conn_ready(job->d, &job->conn)) {
        for (i = 0; i < job->n; i++) {
            job->items[i].result = -1;
            snprintf(job->items[i].err, sizeof job->items[i].err, "backends not ready");
        }
        return;
    }
    snprintf(token, sizeof token, "%s/reconcile", job->d->owner);
    dsp_rc_sync(job, &o);
    for (i = 0; i < job->n; i++)
        its[i] = &job->items[i];
    dsp_rc_after(&job->conn, job->d->cfg, its, job->n);
    for (i = 0; i < job->n; i++) {
        job->items[i].ms = hr_clock_now_ms() - start;
        if (job->items[i].result < 0)
            dsp_conn_failed(job->d, &job->conn, DSP_MYSQL, job->items[i].err);
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
                                                  .waits = dt->waits || dt->leads,
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
