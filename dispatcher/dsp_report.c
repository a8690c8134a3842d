/* dsp_report: the push_chunk rows of confirmed publishes, on the loop
 * thread (docs/architecture.md, "push_chunk").
 *
 * A delivery report (dsp_chunk_delivered, dsp_chunk.c) of a first publish or a
 * republish queues a dsp_report in d->report (at most DSP_REPORTS_MAX);
 * every tick writes up to DSP_REPORTS_PER_TICK of them, oldest first:
 *   1. INSERT IGNORE ... RETURNING: the rows that did not exist yet (first
 *      publishes) are inserted and come back; when it fails nothing was
 *      written and the batch stays queued (written after the connection's
 *      backoff);
 *   2. the other reports (republishes, rare) add one to their row's
 *      publishes, a statement each;
 *   3. one UPDATE adds the first publishes' sizes to push_task.total, per
 *      task, in id order;
 * then the stats hash's published and chunks_published grow by the first
 * publishes, per task (per shard of a sharded task: its own hash), in one
 * pipelined round trip.  Statements, not one
 * transaction: a transaction would lock push_chunk rows, then push_task
 * rows, where the workers' reporter locks push_task rows first, and the
 * two deadlocked under load.  As before the batches, a total that fails
 * after its row was written is logged (task_total_lost), not retried: the
 * retry would find the row and count a republish.
 *
 * Why batches: with many small tasks due together there is one report per
 * task, and a row, a total and two HINCRBYs per report (four round trips
 * each) took about half of the loop thread, which also claims and chunks. */
#include "dsp_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_conn.h"
#include "hr_batch.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_pipe.h"
#include "hr_vec.h"

/* The first publishes of one task (of one shard of a sharded task) in a
 * batch. */
typedef struct dsp_report_sum {
    int64_t task, size, chunks;
    int shard;
} dsp_report_sum;

/* The queue, oldest first. */
struct dsp_report_queue {
    HR_VEC(dsp_report) q;
};

int dsp_report_new(dsp *d)
{
    d->report = calloc(1, sizeof *d->report);
    return d->report != NULL ? 0 : -1;
}

void dsp_report_free(dsp *d)
{
    if (d->report == NULL)
        return;
    hr_vec_free(&d->report->q);
    free(d->report);
    d->report = NULL;
}

void dsp_report_add(dsp *d, const dsp_report *rp)
{
    if (d->report->q.n >= DSP_REPORTS_MAX || hr_vec_push(&d->report->q, *rp) != 0)
        hr_log_error("chunk_row_lost", "task=%" PRId64 " seq=%" PRId64 " error=report queue full",
                     rp->task, rp->seq);
}

bool dsp_report_queued(const dsp *d, int64_t id, int shard)
{
    size_t i;

    for (i = 0; i < d->report->q.n; i++)
        if (d->report->q.v[i].task == id && d->report->q.v[i].shard == shard)
            return true;
    return false;
}

/* Batch row I's chunk row was inserted: it is a first publish, FRESH[I].
 * A chunk reported twice in one batch is fresh once. */
static bool dsp_report_mark(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row)
{
    bool *fresh = ctx;

    (void)rows;
    (void)row;
    if (fresh[i])
        return false;
    fresh[i] = true;
    return true;
}

/* Adds report RP to the per-task sums SUM[*NSUM] (room for every report). */
static void dsp_report_sum_add(dsp_report_sum *sum, size_t *nsum, const dsp_report *rp)
{
    size_t i;

    for (i = 0; i < *nsum && (sum[i].task != rp->task || sum[i].shard != rp->shard); i++)
        ;
    if (i == *nsum)
        sum[(*nsum)++] = (dsp_report_sum){.task = rp->task, .shard = rp->shard};
    sum[i].size += rp->size;
    sum[i].chunks++;
}

/* Step 3: adds SUM[N]'s sizes (sorted by task) to their tasks' totals.  0
 * or -1. */
static int dsp_report_totals(hr_mysql *m, const dsp_report_sum *sum, size_t n, char *errstr,
                             size_t errlen)
{
    int64_t *cells = calloc(n * 2, sizeof *cells);
    size_t rows = 0;
    int rc;

    if (cells == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    /* A task's shards in one cell: the UPDATE below changes each task row
     * once, whatever its number of list rows. */
    for (size_t i = 0; i < n; i++) {
        if (rows > 0 && cells[(rows - 1) * 2] == sum[i].task) {
            cells[(rows - 1) * 2 + 1] += sum[i].size;
            continue;
        }
        cells[rows * 2] = sum[i].task;
        cells[rows * 2 + 1] = sum[i].size;
        rows++;
    }
    /* One row per task in the list, so each total grows once. */
    rc = hr_batch_exec(m,
                       "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (task BIGINT PATH '$[0]', "
                       "size BIGINT PATH '$[1]')) j STRAIGHT_JOIN push_task t FORCE INDEX "
                       "(PRIMARY) ON t.id = j.task "
                       "SET t.total = t.total + j.size",
                       &(hr_batch){cells, rows, 2}, NULL, 0, NULL, NULL, errstr, errlen);
    free(cells);
    return rc;
}

static int dsp_report_sum_cmp(const void *a, const void *b)
{
    int64_t x = ((const dsp_report_sum *)a)->task, y = ((const dsp_report_sum *)b)->task;

    return (x > y) - (x < y);
}

/* Steps 1-3 of the file comment for the N oldest reports; FRESH and SUM (N
 * each) get the first publishes.  -1 when step 1 failed (nothing
 * written), 1 when a later step failed (logged: the rows are written), 0. */
static int dsp_report_rows(hr_mysql *m, const dsp_report *rp, size_t n, bool *fresh,
                           dsp_report_sum *sum, size_t *nsum, char *errstr, size_t errlen)
{
    int64_t *cells = calloc(n * 4, sizeof *cells);
    size_t i;
    int rc = -1;

    if (cells == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (i = 0; i < n; i++) {
        cells[i * 4] = rp[i].task;
        cells[i * 4 + 1] = rp[i].seq;
        cells[i * 4 + 2] = rp[i].size;
        cells[i * 4 + 3] = rp[i].published_ms;
    }
    if (hr_batch_select(m,
                        "INSERT IGNORE INTO push_chunk (task_id, seq, size, state, published_at) "
                        "SELECT j.task, j.seq, j.size, 'published', FROM_UNIXTIME(j.ms / 1000) "
                        "FROM JSON_TABLE(?, '$[*]' COLUMNS (task BIGINT PATH '$[0]', "
                        "seq BIGINT PATH '$[1]', size BIGINT PATH '$[2]', "
                        "ms BIGINT PATH '$[3]')) j RETURNING task_id, seq",
                        &(hr_batch){cells, n, 4}, NULL, 0, 2, dsp_report_mark, fresh, errstr,
                        errlen) < 0)
        goto done;
    rc = 1; /* the rows are written: what fails now is logged */
    for (i = 0; i < n; i++) {
        const hr_mysql_param p[] = {HR_P_I64(rp[i].published_ms), HR_P_I64(rp[i].task),
                                    HR_P_I64(rp[i].seq)};

        if (fresh[i]) {
            dsp_report_sum_add(sum, nsum, &rp[i]);
            continue;
        }
        /* A republish of a chunk whose row exists. */
        if (hr_mysql_exec(m,
                          "UPDATE push_chunk SET publishes = publishes + 1, "
                          "published_at = FROM_UNIXTIME(? / 1000) WHERE task_id = ? AND seq = ?",
                          p, 3, NULL, NULL, NULL, errstr, errlen) < 0)
            hr_log_warn("chunk_republish_lost", "task=%" PRId64 " seq=%" PRId64 " error=%s",
                        rp[i].task, rp[i].seq, errstr);
    }
    /* In id order, as the claims and the finish lock task rows. */
    qsort(sum, *nsum, sizeof *sum, dsp_report_sum_cmp);
    if (*nsum > 0 && dsp_report_totals(m, sum, *nsum, errstr, errlen) < 0) {
        for (i = 0; i < *nsum; i++)
            hr_log_error("task_total_lost", "task=%" PRId64 " size=%" PRId64 " error=%s",
                         sum[i].task, sum[i].size, errstr);
        goto done;
    }
    rc = 0;
done:
    free(cells);
    return rc;
}

/* The live stats of the first publishes SUM[N]: published and
 * chunks_published of each task, one pipelined round trip. */
static void dsp_report_stats(dsp *d, const dsp_report_sum *sum, size_t n)
{
    hr_redis *r = d->loop_conn.r;
    hr_pipe *pipe = hr_pipe_new(r);
    char key[HR_KEY_MAX], size_s[24], chunks_s[24], err[512];
    size_t i;

    if (pipe == NULL) {
        hr_log_warn("stats_published_lost", "tasks=%zu error=out of memory", n);
        return;
    }
    for (i = 0; i < n; i++) {
        const char *published[] = {"HINCRBY", key, "published", size_s};
        const char *chunks[] = {"HINCRBY", key, "chunks_published", chunks_s};

        hr_key_shard(hr_redis_prefix(r), key, sizeof key, sum[i].task, sum[i].shard, HR_KEY_STATS);
        snprintf(size_s, sizeof size_s, "%" PRId64, sum[i].size);
        snprintf(chunks_s, sizeof chunks_s, "%" PRId64, sum[i].chunks);
        if (hr_pipe_cmd(pipe, 4, published, NULL) < 0 || hr_pipe_cmd(pipe, 4, chunks, NULL) < 0) {
            hr_log_warn("stats_published_lost", "tasks=%zu error=out of memory", n);
            goto done;
        }
    }
    if (hr_pipe_exec(pipe, err, sizeof err) < 0)
        dsp_health_fail(d, DSP_REDIS, err);
done:
    hr_pipe_free(pipe);
}

/* Writes the MAX oldest reports (fewer when fewer are queued).  true when
 * they left the queue (or none was queued). */
static bool dsp_report_batch(dsp *d, size_t max)
{
    dsp_conn *conn = &d->loop_conn;
    size_t n = d->report->q.n < max ? d->report->q.n : max, nsum = 0;
    dsp_report_sum *sum = NULL;
    bool *fresh = NULL, ok = false;
    char err[512];
    int rc;

    if (n == 0)
        return true;
    if (!dsp_conn_ready(d, conn))
        return false;
    sum = calloc(n, sizeof *sum);
    fresh = calloc(n, sizeof *fresh);
    if (sum == NULL || fresh == NULL) {
        snprintf(err, sizeof err, "out of memory");
        goto failed;
    }
    rc = dsp_report_rows(conn->m, d->report->q.v, n, fresh, sum, &nsum, err, sizeof err);
    if (rc < 0)
        goto failed;
    memmove(d->report->q.v, d->report->q.v + n, (d->report->q.n - n) * sizeof *d->report->q.v);
    d->report->q.n -= n;
    if (rc == 0)
        dsp_health_ok(d, DSP_MYSQL);
    else
        dsp_health_fail(d, DSP_MYSQL, err);
    dsp_report_stats(d, sum, nsum);
    ok = true;
    goto done;
failed:
    dsp_conn_failed(d, conn, DSP_MYSQL, err);
done:
    free(fresh);
    free(sum);
    return ok;
}

void dsp_report_write(dsp *d)
{
    dsp_report_batch(d, DSP_REPORTS_PER_TICK);
}

void dsp_report_flush(dsp *d)
{
    while (d->report->q.n > 0 && dsp_report_batch(d, DSP_REPORTS_PER_TICK))
        ;
}
