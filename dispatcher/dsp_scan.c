/* dsp_scan: the scanner and prepare (DESIGN.md "Scanner" and "Prepare"),
 * run by the background job (dsp_jobs.c) with its connections (dsp.bg_conn).
 *
 * - Scanner: scheduled, control=run tasks due within the horizon are
 *   validated (bad rows become `failed`), prepared and put into the timer
 *   (dsp_timer.c).  The scanner remembers what it put there (dsp.scan,
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
 *   happens when the Redis count changed or DSP_RECHECK_MS passed.  The
 *   owner's reconciliation after the claim (dsp_reconcile.c) reads what
 *   the last sync could not see.  The DB poller (dsp_poll.c) prepares too.
 *
 * - Admission control (dsp_pace.c) for every task first seen, and again
 *   every DSP_RECHECK_MS.
 *
 * Every query is restricted to the test topic filter (dsp_seams.h), if
 * any. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_subs.h"

static int dsp_scan_cmp(const void *a, const void *b)
{
    int64_t x = ((const dsp_scan_entry *)a)->id, y = ((const dsp_scan_entry *)b)->id;

    return (x > y) - (x < y);
}

/* Keeps T's subscriber set up to date with push_subscription before the
 * claim, so that the reconciliation after it has little left to read.
 * E carries the scanner's memory of the last count.  A sync (hr_subs_sync)
 * reads the subscriptions added since the last one; when the set holds
 * fewer members than MySQL rows (Redis lost some) the synced mark goes
 * first, so the sync reads them all.  Syncing again happens when the Redis
 * count changed or DSP_RECHECK_MS passed.  0 = prepared (or someone else
 * holds the prepare lock, or the task was claimed meanwhile: its owner's
 * reconciliation finishes the set), -1 = not prepared (logged). */
int dsp_prepare(dsp *d, const hr_task *t, dsp_scan_entry *e, int64_t now)
{
    dsp_conn *conn = &d->bg_conn;
    const hr_mysql_param p[] = {HR_P_I64(t->id)};
    char token[256], err[512];
    hr_subs_refill_opts o = {.token = token,
                             .lock_ms = DSP_PREP_LOCK_MS,
                             .batch = d->cfg->dispatcher.refill_batch,
                             .stop = &d->stopping};
    hr_mysql_rows *rows = NULL;
    int64_t have, pulled, want, added = 0;
    int rc;

    /* Every shard's, for a sharded task. */
    if (hr_shard_sum(conn->r, t->id, (int)t->shards, "SCARD", HR_KEY_SUBS, &have, err, sizeof err) <
            0 ||
        hr_shard_sum(conn->r, t->id, (int)t->shards, "SCARD", HR_KEY_PULLED, &pulled, err,
                     sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return -1;
    }
    have += pulled;
    if (e->checked_ms > 0 && have == e->have && now - e->checked_ms < DSP_RECHECK_MS)
        return 0;
    if (hr_mysql_query(conn->m, "SELECT COUNT(*) FROM push_subscription WHERE task_id = ?", p, 1,
                       &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return -1;
    }
    want = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    if (have < want && hr_subs_forget_synced(conn->r, t->id, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return -1;
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

void dsp_scan(dsp *d)
{
    dsp_conn *conn = &d->bg_conn;
    const hr_mysql_param p[] = {HR_P_I64(d->cfg->dispatcher.horizon_s), DSP_TOPIC_PARAMS,
                                HR_P_I64(DSP_SCAN_MAX)};
    hr_task **tasks = NULL;
    dsp_scan_entry *next = NULL;
    size_t n = 0, nnext = 0, i;
    int64_t now = dsp_now_ms();
    char err[512];

    if (dsp_store_tasks(conn->m,
                        "SELECT " HR_TASK_COLUMNS " FROM push_task "
                        "WHERE state = 'scheduled' AND control = 'run' AND (due_at IS NULL "
                        "OR " HR_TASK_FIRST_DUE_SQL " <= UTC_TIMESTAMP(3) + INTERVAL ? SECOND) "
                        "AND (? IS NULL OR topic = ?) ORDER BY id LIMIT ?",
                        p, 4, &tasks, &n, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return;
    }
    if (n > 0 && (next = calloc(n, sizeof *next)) == NULL) {
        hr_log_error("scan_failed", "error=out of memory");
        goto done;
    }
    for (i = 0; i < n; i++) {
        const hr_task *t = tasks[i];
        dsp_scan_entry key = {.id = t->id}, *prev, *e;

        if (atomic_load(&d->stopping))
            goto done;
        if (!dsp_store_check(d, conn->m, t))
            continue;
        prev =
            d->nscan > 0 ? bsearch(&key, d->scan, d->nscan, sizeof *d->scan, dsp_scan_cmp) : NULL;
        e = &next[nnext++];
        *e = prev ? *prev : (dsp_scan_entry){.id = t->id, .due_ms = -1};
        if (dsp_prepare(d, t, e, now) < 0)
            continue; /* not in the timer before it is prepared */
        /* Admission control when first seen (prepared: its set is filled)
         * and every DSP_RECHECK_MS: other tasks of its channel may have
         * come meanwhile. */
        if (prev == NULL || now - e->admitted_ms >= DSP_RECHECK_MS) {
            e->admitted_ms = now;
            if (dsp_admit(d, conn->m, conn->r, t, now, err, sizeof err) < 0)
                hr_log_warn("admission_failed", "task=%" PRId64 " error=%s", t->id, err);
        }
        if (e->due_ms != hr_task_first_due_ms(t) && dsp_timer_add(d, t) == 0)
            e->due_ms = hr_task_first_due_ms(t);
    }
    /* A full page may have cut off tasks that are still scheduled. */
    if (n < DSP_SCAN_MAX)
        dsp_timer_forget(d, d->scan, d->nscan, next, nnext);
    free(d->scan);
    d->scan = next;
    d->nscan = nnext;
    next = NULL;
done:
    free(next);
    dsp_store_tasks_free(tasks, n);
}
