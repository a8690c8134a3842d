/* dsp_sweep: the sweeper and key retirement (DESIGN.md "Sweeper" and
 * "Key retention"), run by the background job (dsp_jobs.c) with its
 * connections.
 *
 * - Sweeper: republishes pending chunks older than redelivery_timeout_s
 *   that no worker holds (sweep_claim.lua lets one sweeper win; every shard
 *   of a sharded task), and ends
 *   `dispatched` tasks with nothing pending (hr_finish: `done` only when
 *   every subscription is accounted for; one whose subs holds recipients
 *   again, after Redis came back from an older AOF, goes back to the
 *   pollers); one page of tasks per sweep from a cursor.  A `dispatched`
 *   task another dispatcher made so is that one's sweeper's for
 *   DSP_SWEEP_OWNER_SWEEPS of its sweeps (DSP_SWEEP_OWNER_SQL): every
 *   dispatcher swept every task, so with two each small task's pending,
 *   subs, wait and stats were read twice and its finish tried twice
 *   (issue 33).  After that, or when no owner is recorded, any sweeper
 *   takes it: a task whose owner died or restarted (a new owner id) still
 *   ends, a few sweeps later.
 * - Retirement: finished tasks' keys get the retention expiry
 *   (dsp_sweep_retire_keys) after each sweep, in a pass that reads each
 *   finish once in the order of finished_at (dsp_sweep_retire), and at
 *   once when a task is cancelled (dsp_control.c).
 *
 * Every query is restricted to the test topic filter (dsp_seams.h), if
 * any. */
#include "dsp_sweep.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsp_conn.h"
#include "dsp_kafka.h"
#include "hr_clock.h"
#include "hr_finish.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_pipe.h"
#include "hr_shard.h"
#include "hr_state.h"

#define DSP_RETIRE_MAX 100 /* finished tasks whose keys get a TTL, per sweep */
#define DSP_KEY_RETENTION_MS ((int64_t)7 * 86400 * 1000) /* a finished task's Redis keys */

/* After Redis came back from an outage, the pass that publishes again
 * every pending chunk no worker holds waits this beyond worker.lease_ms:
 * by then every live holder has renewed its lease, or taken it again
 * (lease_renew.lua; a renewal every lease_ms / 3, a stalled chunk's retry
 * every second at most). */
#define DSP_RECOVER_MARGIN_MS 1000

/* The cursors of the two passes (task ids) and the outage watch,
 * background job only. */
struct dsp_sweep {
    int64_t sweep_after;      /* the sweeper's page */
    dsp_retire_cursor retire; /* the retirement pass's */
    bool redis_lost;          /* the hand-back read failed: Redis away */
    int64_t recover_at_ms;    /* > 0: the pass after an outage is due then */
};

int dsp_sweep_new(dsp *d)
{
    d->sweep = calloc(1, sizeof *d->sweep);
    return d->sweep != NULL ? 0 : -1;
}

void dsp_sweep_free(dsp *d)
{
    free(d->sweep);
    d->sweep = NULL;
}

/* One task of a sweep (its page's row, or a resume's task). */
typedef struct dsp_sweep_row {
    int64_t id, due_ms;
    int shards;
    bool dispatched;  /* its state when read */
    int64_t npending; /* pending chunks found, every shard's */
} dsp_sweep_row;

/* Republishes chunk SEQ of shard SHARD of task ID if sweep_claim.lua lets
 * this sweeper (its publish time still AT, no lease held), logged as
 * chunk_redelivered with last_publish_ms (0: a worker handed it back).  1 when
 * published, 0 when not (claimed elsewhere, held, or the produce failed:
 * logged, pending[seq] then says "published now" and the next sweep past
 * the redelivery timeout tries again). */
static int dsp_sweep_republish(dsp *d, dsp_conn *conn, int64_t id, int shard, int64_t seq,
                               int64_t due_ms, const char *at, int64_t now)
{
    const char *prefix = hr_redis_prefix(conn->r);
    char pending[HR_KEY_MAX], lease[HR_KEY_MAX], chunk[HR_KEY_MAX], stats[HR_KEY_MAX];
    char now_s[24], seq_s[24], err[512];
    const char *argv[5] = {pending, lease, seq_s, at, now_s};
    int64_t count;

    snprintf(now_s, sizeof now_s, "%" PRId64, now);
    snprintf(seq_s, sizeof seq_s, "%" PRId64, seq);
    hr_key_shard(prefix, pending, sizeof pending, id, shard, HR_KEY_PENDING);
    hr_key_shard_lease(prefix, lease, sizeof lease, id, shard, seq);
    if (dsp_reply_int(
            hr_redis_eval(conn->r, HR_LUA_SWEEP_CLAIM, 2, 5, argv, NULL, err, sizeof err)) != 1)
        return 0;
    hr_key_shard_chunk(prefix, chunk, sizeof chunk, id, shard, seq);
    count = dsp_reply_int(hr_redis_cmdf(conn->r, err, sizeof err, "SCARD %s", chunk));
    /* The count only sizes the worker's work (it reads the set); a chunk
     * message must decode, so it never claims more than a chunk may hold. */
    if (count > HR_TASK_MAX_CHUNK)
        count = HR_TASK_MAX_CHUNK;
    if (count < 0 || dsp_kafka_produce(d->kafka,
                                       &(dsp_kafka_msg){.task = id,
                                                        .seq = seq,
                                                        .shard = shard,
                                                        .count = count,
                                                        .due_ms = due_ms,
                                                        .republish = true},
                                       err, sizeof err) < 0) {
        hr_log_warn("chunk_redeliver_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", id, seq,
                    err);
        return 0;
    }
    hr_metrics_inc(d->met.chunks_redelivered);
    hr_log_info("chunk_redelivered",
                "task=%" PRId64 " shard=%d seq=%" PRId64 " count=%" PRId64 " last_publish_ms=%s",
                id, shard, seq, count, at);
    hr_key_shard(prefix, stats, sizeof stats, id, shard, HR_KEY_STATS);
    freeReplyObject(hr_redis_cmdf(conn->r, err, sizeof err, "HINCRBY %s redelivered 1", stats));
    return 1;
}

/* Republishes the chunks of shard SHARD (hr_shard_row's) of ROW whose
 * pending entry (ALL, HGETALL's reply of its pending hash) was last
 * published at or before STALE, while *BUDGET lasts.  Returns the number
 * of pending chunks. */
static int64_t dsp_sweep_pending(dsp *d, dsp_conn *conn, const dsp_sweep_row *row, int shard,
                                 const redisReply *all, int64_t now, int64_t stale, int *budget)
{
    for (size_t i = 0; all->type == REDIS_REPLY_ARRAY && i + 1 < all->elements && *budget > 0;
         i += 2) {
        const char *at = all->element[i + 1]->str;

        if (strtoll(at, NULL, 10) > stale)
            continue;
        *budget -= dsp_sweep_republish(
            d, conn, row->id, shard, strtoll(all->element[i]->str, NULL, 10), row->due_ms, at, now);
    }
    return all->type == REDIS_REPLY_ARRAY ? (int64_t)all->elements / 2 : 0;
}

/* The pending chunks of the N tasks ROWS (every shard's), the hashes of
 * all of them read in one round trip, republished where stale (STALE, ms)
 * while *BUDGET lasts: each row served gets its npending.  Returns how
 * many rows were served (in order; the rest when the budget ran out), or
 * -1 on a Redis error (logged, the connection backs off). */
static ssize_t dsp_sweep_rows(dsp *d, dsp_conn *conn, dsp_sweep_row *rows, size_t n, int64_t now,
                              int64_t stale, int *budget)
{
    hr_pipe *pipe = hr_pipe_new(conn->r);
    char key[HR_KEY_MAX], err[512];
    size_t i, at = 0;
    ssize_t served = -1;

    if (pipe == NULL) {
        snprintf(err, sizeof err, "out of memory");
        goto failed;
    }
    for (i = 0; i < n; i++)
        for (int k = 0; k < (rows[i].shards > 1 ? rows[i].shards : 1); k++) {
            const char *argv[] = {"HGETALL", key};

            hr_key_shard(hr_redis_prefix(conn->r), key, sizeof key, rows[i].id, k, HR_KEY_PENDING);
            if (hr_pipe_cmd(pipe, 2, argv, NULL) < 0) {
                snprintf(err, sizeof err, "out of memory");
                goto failed;
            }
        }
    if (hr_pipe_exec(pipe, err, sizeof err) < 0)
        goto failed;
    for (i = 0; i<n && * budget> 0; i++) {
        rows[i].npending = 0;
        for (int k = 0; k < (rows[i].shards > 1 ? rows[i].shards : 1); k++) {
            redisReply *all = hr_pipe_reply(pipe, at++, err, sizeof err);

            if (all == NULL)
                goto failed;
            rows[i].npending += dsp_sweep_pending(
                d, conn, &rows[i], hr_shard_row(rows[i].shards, k), all, now, stale, budget);
            freeReplyObject(all);
        }
    }
    served = (ssize_t)i;
    goto done;
failed:
    dsp_conn_failed(d, conn, DSP_REDIS, err);
done:
    hr_pipe_free(pipe);
    return served;
}

/* Task ID of a hand-back: 1 running and this dispatcher's, 2 running but
 * another topic's (a test filter), 0 neither (finished: nothing to
 * publish), -1 on a MySQL error (logged). */
static int dsp_handback_task(dsp *d, dsp_conn *conn, int64_t id)
{
    const hr_mysql_param p[] = {DSP_TOPIC_PARAMS, HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    char err[512];
    int rc = 0;

    if (hr_mysql_query(conn->m,
                       "SELECT state IN ('dispatching', 'dispatched'), "
                       "(? IS NULL OR topic = ?) FROM push_task WHERE id = ?",
                       p, 3, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return -1;
    }
    if (rows->nrows == 1 && strcmp(hr_mysql_cell(rows, 0, 0), "1") == 0)
        rc = strcmp(hr_mysql_cell(rows, 0, 1), "1") == 0 ? 1 : 2;
    hr_mysql_rows_free(rows);
    return rc;
}

/* A hand-back of chunk SEQ that could not be claimed: 2 when it is still
 * handed back (publish time 0) and so a lease holds it, else 0 (done,
 * published meanwhile, or unreadable: the sweeper's then). */
static int dsp_handback_held(dsp_conn *conn, int64_t id, int shard, int64_t seq)
{
    char pending[HR_KEY_MAX], err[512];
    redisReply *at;
    int rc;

    hr_key_shard(hr_redis_prefix(conn->r), pending, sizeof pending, id, shard, HR_KEY_PENDING);
    at = hr_redis_cmdf(conn->r, err, sizeof err, "HGET %s %" PRId64, pending, seq);
    rc = at != NULL && at->type == REDIS_REPLY_STRING && strcmp(at->str, "0") == 0 ? 2 : 0;
    freeReplyObject(at);
    return rc;
}

/* The chunks workers handed back (handback.lua: publish time 0, in the
 * hand-back set), republished at once: SPOP of a page, then each one's
 * task looked up and the chunk claimed as the sweeper claims a stale one
 * (one whose lease another worker holds, a yield's, stays in the set
 * until that lease is gone or the chunk done).  Every DSP_HANDBACK_MS, so a chunk a worker gave up waits about
 * a second, not redelivery_timeout_s; one SPOP when there is none. */
void dsp_sweep_handbacks(dsp *d, dsp_conn *conn)
{
    char key[HR_KEY_MAX], err[512];
    int64_t now = hr_clock_now_ms();
    bool failed = false;
    redisReply *page;

    hr_key_handback(hr_redis_prefix(conn->r), key, sizeof key);
    page = hr_redis_cmdf(conn->r, err, sizeof err, "SPOP %s %d", key, DSP_SWEEP_MAX);
    if (page == NULL) {
        d->sweep->redis_lost = true;
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return;
    }
    /* Redis answers again after an outage (seen here, or by any other
     * thread of this dispatcher): a Redis back from an older AOF, or a
     * promoted replica that missed the last writes, may hold pending
     * chunks that a worker had closed meanwhile and nobody will open
     * again; the sweep after the outage publishes them. */
    if (dsp_health_ok(d, DSP_REDIS) || d->sweep->redis_lost) {
        d->sweep->redis_lost = false;
        d->sweep->recover_at_ms = now + d->cfg->worker.lease_ms + DSP_RECOVER_MARGIN_MS;
    }
    for (size_t i = 0; page->type == REDIS_REPLY_ARRAY && i < page->elements; i++) {
        const char *member = page->element[i]->str;
        int64_t id, seq, due_ms;
        int shard, rc;

        if (page->element[i]->type != REDIS_REPLY_STRING ||
            sscanf(member, "%" SCNd64 ":%d:%" SCNd64 ":%" SCNd64, &id, &shard, &seq, &due_ms) !=
                4) {
            hr_log_warn("handback_unreadable", "member=%s", member);
            continue;
        }
        /* MySQL away: this one and the rest wait for the next round. */
        rc = failed ? 2 : dsp_handback_task(d, conn, id);
        if (rc < 0) {
            failed = true;
            rc = 2;
        }
        if (rc == 1 && dsp_sweep_republish(d, conn, id, shard, seq, due_ms, "0", now) == 0)
            rc = dsp_handback_held(conn, id, shard, seq);
        /* Another topic's, or a chunk whose lease another worker still
         * holds (a yield): looked at again next time. */
        if (rc == 2)
            freeReplyObject(hr_redis_cmdf(conn->r, err, sizeof err, "SADD %s %s", key, member));
    }
    freeReplyObject(page);
    if (d->sweep->recover_at_ms > 0 && now >= d->sweep->recover_at_ms)
        dsp_sweep_run(d, conn);
}

int64_t dsp_sweep_task(dsp *d, dsp_conn *conn, int64_t id, int shards, int64_t due_ms, int64_t now,
                       int64_t stale, int *budget)
{
    dsp_sweep_row row = {.id = id, .due_ms = due_ms, .shards = shards};

    return dsp_sweep_rows(d, conn, &row, 1, now, stale, budget) < 0 ? -1 : row.npending;
}

void dsp_sweep_takeover(dsp *d, dsp_conn *conn, const hr_task *t)
{
    int64_t now = hr_clock_now_ms();
    int budget = DSP_SWEEP_MAX;

    /* A dead owner may have moved a chunk and died before producing it:
     * nothing else would publish it before redelivery_timeout_s.  Every
     * pending chunk no worker holds is published again now (stale: now);
     * one that was in Kafka after all reaches a worker twice, and the
     * second open finds it leased (chunk_busy) or closed (empty). */
    dsp_sweep_task(d, conn, t->id, (int)t->shards, t->due_ms > 0 ? t->due_ms : 0, now, now,
                   &budget);
    if (budget < DSP_SWEEP_MAX)
        hr_log_info("takeover_republished", "task=%" PRId64 " chunks=%d", t->id,
                    DSP_SWEEP_MAX - budget);
}

int dsp_sweep_retire_keys(dsp_conn *conn, const int64_t *ids, const int *shards, size_t n,
                          char *errstr, size_t errlen)
{
    hr_pipe *pipe = hr_pipe_new(conn->r);
    char key[HR_KEY_MAX], ms[24];
    int rc = -1;

    snprintf(ms, sizeof ms, "%" PRId64, DSP_KEY_RETENTION_MS);
    if (pipe == NULL)
        goto oom;
    /* Every per-task key of the key table, of every shard (the task-level
     * ones are the same key each time: PEXPIRE NX leaves it as it is);
     * chunk and lease keys carry a seq and are not HR_KEY_* kinds. */
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < (shards[i] > 1 ? shards[i] : 1); k++)
            for (int kind = 0; kind < HR_KEY__COUNT; kind++) {
                const char *argv[] = {"PEXPIRE", key, ms, "NX"};

                hr_key_shard(hr_redis_prefix(conn->r), key, sizeof key, ids[i], k,
                             (hr_key_kind)kind);
                if (hr_pipe_cmd(pipe, 4, argv, NULL) < 0)
                    goto oom;
            }
    if (hr_pipe_exec(pipe, errstr, errlen) < 0)
        goto done;
    for (size_t i = 0; i < hr_pipe_count(pipe); i++)
        if (dsp_reply_int(hr_pipe_reply(pipe, i, errstr, errlen)) < 0)
            goto done;
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    hr_pipe_free(pipe);
    return rc;
}

void dsp_retire_cursor_step(dsp_retire_cursor *c, int64_t mono_ms, int64_t wall_ms)
{
    if (c->rewound_ms == 0) {
        snprintf(c->at, sizeof c->at, "%s", DSP_RETIRE_START);
        c->id = 0;
        c->rewound_ms = mono_ms;
    } else if (mono_ms - c->rewound_ms >= DSP_RETIRE_REWIND_MS) {
        time_t back = (time_t)((wall_ms - 2 * DSP_RETIRE_REWIND_MS) / 1000);
        char at[sizeof c->at];
        struct tm tm;

        /* Back only: a cursor still behind (a day's backlog after the
         * start) keeps its place.  Both read as MariaDB prints DATETIME(3). */
        gmtime_r(&back, &tm);
        strftime(at, sizeof at, "%Y-%m-%d %H:%M:%S.000", &tm);
        if (strcmp(at, c->at) < 0) {
            memcpy(c->at, at, sizeof at);
            c->id = 0;
        }
        c->rewound_ms = mono_ms;
    }
}

/* The tasks that finished within the last day (done through a worker's
 * report, cancelled, failed): their keys get the retention expiry, each
 * finish once.  The pass pages by (finished_at, id) from a cursor that
 * stays where it got to: paging by id and starting over after a short
 * page gave every task finished within the day its expiry again at every
 * wrap, 12 PEXPIREs a task each time on each dispatcher (with 1,500 tasks
 * a day, a wrap every 15 sweeps; issue 33).  A finish is read once it is
 * 2 x mysql.timeout_s old: its finished_at is its statement's start, and
 * a live client has run that statement (its lock wait ends before the
 * timeout) and its commit within that, so none commits behind the cursor.
 * One that does (a client stalled between the two) is read when the
 * cursor goes back 2 x DSP_RETIRE_REWIND_MS, every DSP_RETIRE_REWIND_MS
 * (so a finish is read at most three times).  A task
 * that finishes again (reopened, redriven, recovered) has a later
 * finished_at and is read again.  DSP_RETIRE_MAX per sweep, a range read of
 * the index on finished_at (029_task_finished.sql) in its order. */
static void dsp_sweep_retire(dsp *d, dsp_conn *conn)
{
    struct dsp_sweep *sw = d->sweep;
    int64_t ids[DSP_RETIRE_MAX];
    int shards[DSP_RETIRE_MAX];
    hr_mysql_rows *rows = NULL;
    char err[512];
    size_t i;

    dsp_retire_cursor_step(&sw->retire, hr_clock_mono_ms(), hr_clock_now_ms());
    const hr_mysql_param p[] = {HR_P_I64((int64_t)2 * d->cfg->mysql.timeout_s),
                                HR_P_STR(sw->retire.at),
                                HR_P_STR(sw->retire.at),
                                HR_P_I64(sw->retire.id),
                                DSP_TOPIC_PARAMS,
                                HR_P_I64(DSP_RETIRE_MAX)};

    if (hr_mysql_query(conn->m,
                       "SELECT id, shards, CAST(finished_at AS CHAR) FROM push_task "
                       "WHERE state IN ('done', 'cancelled', 'failed') "
                       "AND finished_at > UTC_TIMESTAMP(3) - INTERVAL 1 DAY "
                       "AND finished_at <= UTC_TIMESTAMP(3) - INTERVAL ? SECOND "
                       "AND finished_at >= ? AND (finished_at > ? OR id > ?) "
                       "AND (? IS NULL OR topic = ?) ORDER BY finished_at, id LIMIT ?",
                       p, 7, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return;
    }
    for (i = 0; i < rows->nrows && i < DSP_RETIRE_MAX; i++) {
        ids[i] = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
        shards[i] = atoi(hr_mysql_cell(rows, i, 1));
    }
    if (i > 0 && dsp_sweep_retire_keys(conn, ids, shards, i, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        goto done;
    }
    if (i > 0) {
        snprintf(sw->retire.at, sizeof sw->retire.at, "%s", hr_mysql_cell(rows, i - 1, 2));
        sw->retire.id = ids[i - 1];
    }
done:
    hr_mysql_rows_free(rows);
}

/* A `dispatched` task with LEFT recipients in subs and WAITING in its wait
 * set becomes `dispatching` with no owner and an expired lease, which a
 * poller takes over.  0 or -1. */
static int dsp_redispatch(dsp *d, dsp_conn *conn, int64_t id, int64_t left, int64_t waiting)
{
    char err[512];
    int rc = hr_state_redispatch(conn->m, id, err, sizeof err);

    if (rc < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return -1;
    }
    if (rc == 1)
        hr_log_warn("task_redispatched",
                    "task=%" PRId64 " reason=%s left=%" PRId64 " waiting=%" PRId64, id,
                    left > 0 ? "subs_not_empty" : "waiting", left, waiting);
    return 0;
}

/* Logs a task hr_finish_tasks ended (cancelled: its control was cancel); an
 * unaccounted gap is an error and counts in
 * herald_recipients_unaccounted_total. */
static void dsp_finished(dsp *d, int64_t id, const hr_finish_result *fin)
{
    if (fin->unaccounted == 0) {
        hr_log_info(fin->state == HR_STATE_CANCELLED ? "task_cancelled" : "task_done",
                    "task=%" PRId64 " via=sweeper", id);
        return;
    }
    hr_metrics_add(d->met.unaccounted, (uint64_t)fin->unaccounted);
    hr_log_error("task_unaccounted",
                 "task=%" PRId64 " via=sweeper state=%s unaccounted=%" PRId64
                 " subscriptions=%" PRId64,
                 id, hr_state_name(fin->state), fin->unaccounted, fin->subscriptions);
}

/* A task of several shards: each shard's stats hash raises its row (and
 * push_task the rows' sum) in a transaction of its own (hr_finish.h).  0,
 * or -1 (the failure logged). */
static int dsp_sweep_shard_stats(dsp *d, dsp_conn *conn, int64_t id, int shards)
{
    char err[512];

    for (int k = 0; k < shards; k++) {
        hr_outcomes one;

        if (hr_finish_read_stats(conn->r, id, k, &one, err, sizeof err) < 0) {
            dsp_conn_failed(d, conn, DSP_REDIS, err);
            return -1;
        }
        if (hr_mysql_begin(conn->m, err, sizeof err) < 0 ||
            hr_finish_raise_shard(conn->m, id, k, &one, err, sizeof err) < 0 ||
            hr_mysql_commit(conn->m, err, sizeof err) < 0) {
            hr_mysql_rollback(conn->m);
            dsp_conn_failed(d, conn, DSP_MYSQL, err);
            return -1;
        }
    }
    return 0;
}

/* What a task has left in Redis, every shard's: recipients not yet in a
 * chunk (subs), and those put off to their quiet hours' end (wait). */
static const hr_shard_count dsp_ready_counts[] = {{"SCARD", HR_KEY_SUBS}, {"ZCARD", HR_KEY_WAIT}};

/* The N dispatched tasks ROWS with nothing pending: each's subs and wait
 * set counted (every shard) and the stats hash of a task of one set read,
 * in one round trip, into ITEMS (what hr_finish_tasks raises MySQL to); a
 * task whose subs holds recipients again (Redis came back from an AOF
 * older than the owner's last chunk moves) or whose wait set does (a
 * worker put recipients off to their quiet hours' end after the owner let
 * the task go, docs/recipients.md) goes back to the pollers, which chunk
 * or release the rest, and a task of several shards has its shard rows
 * raised.  *NITEMS gets the tasks to
 * finish.  0 or -1 (logged). */
static int dsp_sweep_ready(dsp *d, dsp_conn *conn, dsp_sweep_row *const *rows, size_t n,
                           hr_finish_item *items, size_t *nitems)
{
    hr_pipe *pipe = hr_pipe_new(conn->r);
    char err[512];
    size_t i, at = 0;
    int rc = -1;

    *nitems = 0;
    if (pipe == NULL)
        goto oom;
    for (i = 0; i < n; i++) {
        if (hr_shard_counts_queue(pipe, hr_redis_prefix(conn->r), rows[i]->id, rows[i]->shards,
                                  dsp_ready_counts, 2) < 0)
            goto oom;
        if (rows[i]->shards < 2 &&
            hr_finish_stats_queue(pipe, hr_redis_prefix(conn->r), rows[i]->id, 0) < 0)
            goto oom;
    }
    if (hr_pipe_exec(pipe, err, sizeof err) < 0)
        goto redis_failed;
    for (i = 0; i < n; i++) {
        hr_finish_item *it = &items[*nitems];
        int64_t left_waiting[2];

        *it = (hr_finish_item){.id = rows[i]->id, .stats = HR_OUTCOMES_UNKNOWN};
        if (hr_shard_counts_read(pipe, &at, rows[i]->shards, 2, left_waiting, err, sizeof err) < 0)
            goto redis_failed;
        if (rows[i]->shards < 2 &&
            hr_finish_stats_reply(hr_pipe_reply(pipe, at++, err, sizeof err), &it->stats) < 0)
            goto redis_failed;
        if (left_waiting[0] + left_waiting[1] > 0) {
            /* `dispatched` with recipients left and no owner: hand the
             * task to the pollers, which chunk (or release) the rest. */
            if (dsp_redispatch(d, conn, rows[i]->id, left_waiting[0], left_waiting[1]) < 0)
                goto done;
            continue;
        }
        if (rows[i]->shards > 1 && dsp_sweep_shard_stats(d, conn, rows[i]->id, rows[i]->shards) < 0)
            goto done;
        (*nitems)++;
    }
    rc = 0;
    goto done;
oom:
    snprintf(err, sizeof err, "out of memory");
redis_failed:
    dsp_conn_failed(d, conn, DSP_REDIS, err);
done:
    hr_pipe_free(pipe);
    return rc;
}

/* Ends the N tasks ITEMS (hr_finish_tasks, in a transaction of its own)
 * and logs each ended.  Their keys get the retention expiry from the
 * retirement pass, as a worker's report's do: given here too, it was given
 * twice.  0 or -1 (logged). */
static int dsp_sweep_finish(dsp *d, dsp_conn *conn, hr_finish_item *items, size_t n)
{
    char err[512];

    if (hr_mysql_begin(conn->m, err, sizeof err) < 0 ||
        hr_finish_tasks(conn->m, items, n, err, sizeof err) < 0 ||
        hr_mysql_commit(conn->m, err, sizeof err) < 0) {
        hr_mysql_rollback(conn->m);
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (items[i].ended)
            dsp_finished(d, items[i].id, &items[i].fin);
    return 0;
}

/* One page of unfinished tasks per sweep, by id from the cursor kept in
 * d->sweep (back to the start after a short page), so that every task is
 * swept however many there are.  The page's Redis reads go in a round
 * trip for all of it, and its finishes in one transaction: with many
 * small tasks, a sweep of a round trip and three statements per task held
 * Redis and MariaDB while they were being pushed. */
void dsp_sweep_run(dsp *d, dsp_conn *conn)
{
    const hr_mysql_param p[] = {
        HR_P_I64(d->sweep->sweep_after), DSP_TOPIC_PARAMS, HR_P_STR(d->owner),
        HR_P_I64((int64_t)DSP_SWEEP_OWNER_SWEEPS * d->cfg->dispatcher.sweep_interval_ms * 1000),
        HR_P_I64(DSP_SWEEP_PAGE)};
    hr_mysql_rows *rows = NULL;
    dsp_sweep_row *page = NULL, **ready = NULL;
    hr_finish_item *items = NULL;
    int64_t now = hr_clock_now_ms();
    int64_t stale_ms = (int64_t)d->cfg->dispatcher.redelivery_timeout_s * 1000;
    bool recover = d->sweep->recover_at_ms > 0 && now >= d->sweep->recover_at_ms;
    int budget = DSP_SWEEP_MAX;
    size_t i, n, nready = 0, nitems = 0;
    ssize_t served;
    char err[512];

    /* The pass after an outage: every pending chunk no worker holds. */
    if (recover)
        stale_ms = 0;
    if (hr_mysql_query(conn->m, DSP_SWEEP_PAGE_SQL, p, 6, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return;
    }
    n = rows->nrows;
    page = calloc(n + 1, sizeof *page);
    ready = calloc(n + 1, sizeof *ready);
    items = calloc(n + 1, sizeof *items);
    if (page == NULL || ready == NULL || items == NULL) {
        hr_log_error("sweep_failed", "error=out of memory");
        goto done;
    }
    for (i = 0; i < n; i++) {
        const char *due = hr_mysql_cell(rows, i, 2);
        hr_task_state state;

        page[i] = (dsp_sweep_row){
            .id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10),
            .due_ms = due ? strtoll(due, NULL, 10) : 0,
            .shards = atoi(hr_mysql_cell(rows, i, 3)),
            .dispatched = hr_state_parse(hr_mysql_cell(rows, i, 1), &state) == 0 &&
                          state == HR_STATE_DISPATCHED,
        };
    }
    served = n > 0 ? dsp_sweep_rows(d, conn, page, n, now, now - stale_ms, &budget) : 0;
    if (served < 0)
        goto done;
    for (i = 0; i < (size_t)served; i++) {
        /* A task the budget ran out in has more stale chunks: it comes
         * first next time. */
        if (i + 1 < (size_t)served || budget > 0)
            d->sweep->sweep_after = page[i].id;
        if (page[i].dispatched && page[i].npending == 0)
            ready[nready++] = &page[i];
    }
    if (atomic_load(&d->stopping) || dsp_sweep_ready(d, conn, ready, nready, items, &nitems) < 0 ||
        (nitems > 0 && dsp_sweep_finish(d, conn, items, nitems) < 0))
        goto done;
    /* A page seen to its end that was short: start over next time.  A
     * sweep cut short by the budget resumes after the last task served
     * (and the pass after an outage goes on with it). */
    if ((size_t)served == n && n < DSP_SWEEP_PAGE) {
        d->sweep->sweep_after = 0;
        if (recover) {
            hr_log_info("sweep_after_outage", "republished=%d", DSP_SWEEP_MAX - budget);
            d->sweep->recover_at_ms = 0;
        }
    }
    if (!atomic_load(&d->stopping))
        dsp_sweep_retire(d, conn);
done:
    free(items);
    free(ready);
    free(page);
    hr_mysql_rows_free(rows);
}
