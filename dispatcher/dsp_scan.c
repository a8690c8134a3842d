/* dsp_scan: the scanner and prepare (DESIGN.md "Scanner" and "Prepare"),
 * run by the background job (dsp_jobs.c) with its connections.
 *
 * - Scanner: scheduled, control=run tasks due within the horizon are
 *   validated (bad rows become `failed`), prepared and put into the timer
 *   (dsp_timer.c).  The scanner remembers what it put there (d->scan,
 *   sorted by id and rebuilt by every scan, so it holds at most
 *   DSP_SCAN_MAX entries): an entry is ZADDed again only when its due time
 *   moved, so a timer entry that vanished stays gone and the DB poller is
 *   what recovers it.  A complete scan ZREMs the entries of tasks it no
 *   longer returns.
 * - Prepare: the subscriptions added since the last sync are added to the
 *   set (hr_subs_sync: by epoch, keyset pages under the task's prepare
 *   lock, renewed every batch, through refill_add.lua, which skips pulled
 *   recipients and stops once chunking started); all of them when SCARD
 *   subs + SCARD pulled is below the task's row count.  Syncing again
 *   happens when the Redis count changed, the synced mark is gone (Redis
 *   lost the keys) or DSP_RECHECK_MS passed.  The counts of a whole page
 *   are read in two round trips.  A task already
 *   due goes into the timer without a sync: the owner's reconciliation
 *   after the claim (dsp_reconcile.c) reads what the last sync could not
 *   see.  The DB poller (dsp_poll.c) prepares too.
 *
 * - Admission control (dsp_pace.c) for every task first seen, and again
 *   every DSP_RECHECK_MS, after the page is in the timer and within
 *   DSP_ADMIT_BUDGET_MS per scan; the scan's estimates share one memo of
 *   the sizes they read (each subscriber set counted once a scan).
 *
 * Every query is restricted to the test topic filter (dsp_seams.h), if
 * any. */
#include "dsp_scan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_conn.h"
#include "dsp_pace.h"
#include "dsp_store.h"
#include "dsp_timer.h"
#include "hr_batch.h"
#include "hr_clock.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_pipe.h"
#include "hr_shard.h"
#include "hr_subs.h"

#define DSP_ADMIT_BUDGET_MS 250 /* admission estimates per scan (time) */

/* What the last scan put into the timer, sorted by id (background job). */
struct dsp_scan {
    dsp_scan_entry *v;
    size_t n;
};

int dsp_scan_new(dsp *d)
{
    d->scan = calloc(1, sizeof *d->scan);
    return d->scan != NULL ? 0 : -1;
}

void dsp_scan_free(dsp *d)
{
    if (d->scan == NULL)
        return;
    free(d->scan->v);
    free(d->scan);
    d->scan = NULL;
}

static int dsp_scan_cmp(const void *a, const void *b)
{
    int64_t x = ((const dsp_scan_entry *)a)->id, y = ((const dsp_scan_entry *)b)->id;

    return (x > y) - (x < y);
}

/* What a task has in Redis, every shard's: its subs and pulled sets. */
static const hr_shard_count dsp_have_counts[] = {{"SCARD", HR_KEY_SUBS}, {"SCARD", HR_KEY_PULLED}};

/* The Redis counts of N tasks (SCARD subs + SCARD pulled, of every shard of
 * a sharded task) into C[i].have, and whether the task's synced mark is
 * there into C[i].synced, one pipelined round trip.  0 or -1 (ERRSTR). */
static int dsp_prepare_have(dsp_conn *conn, hr_task *const *tasks, size_t n, dsp_prep_count *c,
                            char *errstr, size_t errlen)
{
    hr_pipe *pipe = hr_pipe_new(conn->r);
    char key[HR_KEY_MAX];
    int64_t sums[2];
    size_t i, at = 0;
    int rc = -1;

    if (pipe == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (i = 0; i < n; i++) {
        const char *synced[] = {"EXISTS", key};

        hr_key_task(hr_redis_prefix(conn->r), key, sizeof key, tasks[i]->id, HR_KEY_SYNCED);
        if (hr_pipe_cmd(pipe, 2, synced, NULL) < 0)
            goto oom;
        if (hr_shard_counts_queue(pipe, hr_redis_prefix(conn->r), tasks[i]->id,
                                  (int)tasks[i]->shards, dsp_have_counts, 2) < 0)
            goto oom;
    }
    if (hr_pipe_exec(pipe, errstr, errlen) < 0)
        goto done;
    for (i = 0; i < n; i++) {
        int64_t synced = dsp_reply_int(hr_pipe_reply(pipe, at++, errstr, errlen));

        if (synced < 0)
            goto done;
        c[i].synced = synced > 0;
        if (hr_shard_counts_read(pipe, &at, (int)tasks[i]->shards, 2, sums, errstr, errlen) < 0)
            goto done;
        c[i].have = sums[0] + sums[1];
    }
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    hr_pipe_free(pipe);
    return rc;
}

/* What dsp_prepare_want's match writes: the count of batch row I (a
 * task id) into the want of C[at[I]]. */
typedef struct dsp_prepare_match {
    dsp_prep_count *c;
    const size_t *at;
} dsp_prepare_match;

static bool dsp_prepare_want_row(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row)
{
    const dsp_prepare_match *pm = ctx;

    pm->c[pm->at[i]].want = strtoll(hr_mysql_cell(rows, row, 1), NULL, 10);
    return true;
}

/* The push_subscription rows of the tasks whose C[i].need is set into
 * C[i].want, one statement.  0 or -1 (ERRSTR). */
static int dsp_prepare_want(dsp_conn *conn, hr_task *const *tasks, size_t n, dsp_prep_count *c,
                            char *errstr, size_t errlen)
{
    int64_t *ids = calloc(n, sizeof *ids);
    size_t *at = calloc(n, sizeof *at);
    size_t i, k = 0;
    int rc = -1;

    if (ids == NULL || at == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (i = 0; i < n; i++)
        if (c[i].need) {
            at[k] = i;
            ids[k++] = tasks[i]->id;
            c[i].want = 0; /* no row: no subscription */
        }
    rc = k == 0 ? 0
                : hr_batch_select(conn->m,
                                  "SELECT s.task_id, COUNT(*) FROM JSON_TABLE(?, '$[*]' COLUMNS "
                                  "(task BIGINT PATH '$')) j STRAIGHT_JOIN push_subscription s "
                                  "ON s.task_id = j.task GROUP BY s.task_id",
                                  &(hr_batch){ids, k, 1}, NULL, 0, 1, dsp_prepare_want_row,
                                  &(dsp_prepare_match){c, at}, errstr, errlen);
done:
    free(at);
    free(ids);
    return rc;
}

/* Brings T's subscriber set up to date before the claim, so that the
 * reconciliation after it has little left to read; C holds its Redis and
 * MySQL counts (dsp_scan_prepare_count).  A sync (hr_subs_sync) reads the subscriptions
 * added since the last one; when the set holds fewer members than MySQL
 * rows (Redis lost some) the synced mark goes first, so the next sync (or
 * the reconciliation) reads them all.  A task already due is not synced
 * here: its claim comes first, and the reconciliation after it reads the
 * same rows (with many tasks due at once, syncing each before it entered
 * the timer held the later ones back by a sync each).  0 = prepared (or
 * someone else holds the prepare lock, or the task was claimed meanwhile:
 * its owner's reconciliation finishes the set), -1 = not prepared
 * (logged). */
int dsp_scan_prepare(dsp *d, dsp_conn *conn, const hr_task *t, dsp_scan_entry *e,
                     const dsp_prep_count *c)
{
    int64_t now = hr_clock_now_ms(), have = c->have, want = c->want;
    char token[256], err[512];
    hr_subs_refill_opts o = {.token = token,
                             .lock_ms = DSP_PREP_LOCK_MS,
                             .batch = d->cfg->dispatcher.refill_batch,
                             .stop = &d->stopping};
    int64_t added = 0;
    int rc;

    if (!c->need)
        return 0;
    if (have < want && hr_subs_forget_synced(conn->r, t->id, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return -1;
    }
    if (hr_task_first_due_ms(t) <= now) {
        e->checked_ms = 0; /* count again next scan, if it is still there */
        return 0;
    }
    snprintf(token, sizeof token, "%s/scan", d->owner);
    rc = hr_subs_sync(conn->m, conn->r, t->id, &o, false, &added, NULL, err, sizeof err);
    switch (rc) {
    case HR_SUBS_DONE:
        e->have = have + added;
        e->checked_ms = now;
        if (added > 0)
            hr_log_info("task_prepared",
                        "task=%" PRId64 " subscriptions=%" PRId64 " had=%" PRId64 " added=%" PRId64,
                        t->id, want, have, added);
        return 0;
    case HR_SUBS_BUSY:
    case HR_SUBS_CLAIMED:
        e->checked_ms = 0; /* count again next scan */
        return 0;
    case HR_SUBS_STARTED:
    case HR_SUBS_LOCK_LOST:
        /* Chunking started (the owner's reconciliation ran) or another
         * party took the lock: the owner's reconciliation is what makes
         * the set complete. */
        e->checked_ms = 0;
        hr_log_warn("prepare_incomplete", "task=%" PRId64 " added=%" PRId64 " reason=%s", t->id,
                    added, hr_subs_result_str(rc));
        return 0;
    case HR_SUBS_STOPPED:
        e->checked_ms = 0;
        return -1;
    }
    e->checked_ms = 0; /* try again next scan */
    hr_log_warn("prepare_failed", "task=%" PRId64 " error=%s", t->id, err);
    return -1;
}

int dsp_scan_prepare_count(dsp *d, dsp_conn *conn, hr_task *const *tasks, size_t n,
                           const dsp_scan_entry *e, int64_t now, dsp_prep_count *c)
{
    char err[512];
    size_t i;

    /* One pipeline of SCARDs, one COUNT for the tasks whose Redis count
     * changed or which were not counted for DSP_RECHECK_MS. */
    if (dsp_prepare_have(conn, tasks, n, c, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return -1;
    }
    /* A missing synced mark means Redis lost the task's keys (or no sync
     * ran yet): an unchanged count proves nothing then.  (A scan that saw
     * a new task's empty set, an import, then the loss: the next scan
     * finds the set empty again, as it remembered it.) */
    for (i = 0; i < n; i++)
        c[i].need = !(c[i].synced && e[i].checked_ms > 0 && c[i].have == e[i].have &&
                      now - e[i].checked_ms < DSP_RECHECK_MS);
    if (dsp_prepare_want(conn, tasks, n, c, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return -1;
    }
    return 0;
}

/* Takes the timer entries of the last scan's tasks (OLD) that this
 * complete scan (NEXT) no longer returned out of the timer: claimed,
 * paused, cancelled, failed, or postponed beyond the horizon.  Both are
 * sorted by id; their ZREMs go DSP_TIMER_DEL_MAX in one (dsp_timer_del).
 * Out of memory or after a Redis error (logged) the entries stay, as
 * after a failed ZREM before, and pop at their old due time. */
static void dsp_scan_forget(dsp *d, dsp_conn *conn, const dsp_scan_entry *old, size_t nold,
                            const dsp_scan_entry *next, size_t nnext)
{
    int64_t *gone = nold > 0 ? malloc(nold * sizeof *gone) : NULL;
    size_t i, j = 0, ngone = 0;

    if (gone == NULL)
        return;
    for (i = 0; i < nold; i++) {
        while (j < nnext && next[j].id < old[i].id)
            j++;
        if (old[i].due_ms < 0 || (j < nnext && next[j].id == old[i].id))
            continue;
        gone[ngone++] = old[i].id;
    }
    if (ngone > 0)
        dsp_timer_del(d, conn, gone, ngone);
    free(gone);
}

/* The scan's tasks: pages of DSP_SCAN_MAX, the soonest due first, each
 * after the last one's (due, id), while the pages are full, at most
 * DSP_SCAN_PAGES of them.  Many tasks due the same second used to be read
 * one page a scan: a scan returned the same first DSP_SCAN_MAX tasks until
 * they were claimed, so the rest entered the timer only at the scan after
 * their claims, a second late (1,500 small tasks: the last 500 claimed
 * +1.3 s after due, docs/performance.md).  *COMPLETE tells that the last
 * page was short (every task in the horizon was read).  0 or -1 (logged). */
static int dsp_scan_read(dsp *d, dsp_conn *conn, hr_task ***out, size_t *nout, bool *complete)
{
    hr_task **tasks = NULL, **page = NULL;
    size_t n = 0, got = 0;
    char err[512];

    *complete = false;
    for (int k = 0; k < DSP_SCAN_PAGES; k++) {
        /* The cursor: the last task read, NULL due_at first (such a row
         * is failed by the validation, but still read in this order). */
        int64_t after_due = n > 0 ? hr_task_first_due_ms(tasks[n - 1]) : 0;
        int64_t after_id = n > 0 ? tasks[n - 1]->id : 0;
        bool null_due = n > 0 && tasks[n - 1]->due_ms < 0;
        const hr_mysql_param p[] = {HR_P_I64(d->cfg->dispatcher.horizon_s),
                                    HR_P_I64(d->cfg->dispatcher.horizon_s),
                                    DSP_TOPIC_PARAMS,
                                    HR_P_I64(n > 0),
                                    HR_P_I64(null_due),
                                    HR_P_I64(after_id),
                                    HR_P_I64(null_due),
                                    HR_P_I64(after_due),
                                    HR_P_I64(after_id),
                                    HR_P_I64(DSP_SCAN_MAX)};
        hr_task **grown;
        bool full;

        if (dsp_store_tasks(conn->m, DSP_SCAN_PAGE_SQL, p, 11, &page, &got, err, sizeof err) < 0) {
            dsp_conn_failed(d, conn, DSP_MYSQL, err);
            goto fail;
        }
        full = got == DSP_SCAN_MAX;
        if (got > 0) {
            grown = realloc(tasks, (n + got) * sizeof *tasks);
            if (grown == NULL) {
                hr_log_error("scan_failed", "error=out of memory");
                goto fail;
            }
            tasks = grown;
            memcpy(tasks + n, page, got * sizeof *page);
            n += got;
            free(page);
            page = NULL;
            got = 0;
        }
        if (!full) {
            *complete = true;
            break;
        }
    }
    *out = tasks;
    *nout = n;
    return 0;
fail:
    dsp_store_tasks_free(page, got);
    dsp_store_tasks_free(tasks, n);
    return -1;
}

void dsp_scan_run(dsp *d, dsp_conn *conn)
{
    hr_task **tasks = NULL;
    dsp_scan_entry *next = NULL;
    dsp_prep_count *c = NULL;
    dsp_pace_memo *memo = NULL;
    size_t n = 0, nnext = 0, i;
    int64_t now = hr_clock_now_ms(), admit_end, first_due = -1, last_due = -1;
    bool complete;
    char err[512];

    if (dsp_scan_read(d, conn, &tasks, &n, &complete) < 0)
        return;
    if (n > 0 && ((next = calloc(n, sizeof *next)) == NULL || (c = calloc(n, sizeof *c)) == NULL)) {
        hr_log_error("scan_failed", "error=out of memory");
        goto done;
    }
    /* The valid ones, each with the scanner's memory of it, to the front. */
    for (i = 0; i < n; i++) {
        hr_task *t = tasks[i];
        dsp_scan_entry key = {.id = t->id}, *prev;

        if (atomic_load(&d->stopping))
            goto done;
        if (!dsp_store_check(d, conn->m, t))
            continue;
        prev = d->scan->n > 0
                   ? bsearch(&key, d->scan->v, d->scan->n, sizeof *d->scan->v, dsp_scan_cmp)
                   : NULL;
        next[nnext] = prev ? *prev : (dsp_scan_entry){.id = t->id, .due_ms = -1};
        tasks[i] = tasks[nnext];
        tasks[nnext++] = t;
    }
    if (nnext > 0 && dsp_scan_prepare_count(d, conn, tasks, nnext, next, now, c) < 0)
        goto done;
    /* Each task into the timer as soon as it is prepared: a page of syncs
     * can take longer than the time left before the first ones are due. */
    for (i = 0; i < nnext; i++) {
        const hr_task *t = tasks[i];
        dsp_scan_entry *e = &next[i];

        if (atomic_load(&d->stopping))
            goto done;
        if (dsp_scan_prepare(d, conn, t, e, &c[i]) < 0)
            continue; /* not in the timer before it is prepared */
        if (e->due_ms != hr_task_first_due_ms(t) && dsp_timer_add(d, conn, t) == 0)
            e->due_ms = hr_task_first_due_ms(t);
    }
    /* Admission control when first seen (prepared: its set is filled) and
     * every DSP_RECHECK_MS: other tasks of its channel may have come
     * meanwhile.  After the timer, within DSP_ADMIT_BUDGET_MS a scan, the
     * soonest due first: an estimate reads the channel's other tasks, and
     * with a thousand new tasks the estimates took the scan twenty seconds
     * (load 13), the timer entries waiting behind them.  The rest are
     * estimated by the next scans.  Their sizes and their channels' rows
     * are read once for the scan (the memo, for the due times of the
     * page; without one, out of memory, each estimate reads its own). */
    for (i = 0; i < nnext; i++) {
        if (tasks[i]->due_ms >= 0 && (first_due < 0 || tasks[i]->due_ms < first_due))
            first_due = tasks[i]->due_ms;
        if (tasks[i]->due_ms > last_due)
            last_due = tasks[i]->due_ms;
    }
    admit_end = hr_clock_now_ms() + DSP_ADMIT_BUDGET_MS;
    for (i = 0; i < nnext && hr_clock_now_ms() < admit_end; i++) {
        dsp_scan_entry *e = &next[i];

        if (atomic_load(&d->stopping))
            goto done;
        if (e->due_ms < 0 || (e->admitted_ms > 0 && now - e->admitted_ms < DSP_RECHECK_MS))
            continue; /* not prepared, or estimated lately */
        e->admitted_ms = now;
        if (memo == NULL)
            memo = dsp_pace_memo_new(first_due, last_due);
        if (dsp_pace_admit(d, conn->m, conn->r, memo, tasks[i], now, err, sizeof err) < 0)
            hr_log_warn("admission_failed", "task=%" PRId64 " error=%s", tasks[i]->id, err);
    }
    /* Remembered by id, as the next scan and dsp_scan_forget look them up
     * (an empty scan has no array: qsort must not see its NULL). */
    if (nnext > 0)
        qsort(next, nnext, sizeof *next, dsp_scan_cmp);
    /* A full last page may have cut off tasks that are still scheduled. */
    if (complete)
        dsp_scan_forget(d, conn, d->scan->v, d->scan->n, next, nnext);
    free(d->scan->v);
    d->scan->v = next;
    d->scan->n = nnext;
    next = NULL;
done:
    dsp_pace_memo_free(memo);
    free(c);
    free(next);
    dsp_store_tasks_free(tasks, n);
}
