/* dsp_bg: the dispatcher's background job, run on libuv's thread pool with
 * its own connections (dsp.bg_conn), one job at a time.
 *
 * - Scanner: scheduled, control=run tasks due within the horizon are
 *   validated (bad rows become `failed`), prepared and put into the timer.
 *   The scanner remembers what it put there (dsp.scan, sorted by id and
 *   rebuilt by every scan, so it holds at most DSP_SCAN_MAX entries): an
 *   entry is ZADDed again only when its due time moved, so a timer entry
 *   that vanished stays gone and the DB poller is what recovers it.  A
 *   complete scan ZREMs the entries of tasks it no longer returns.
 * - Prepare: the subscriptions added since the last sync are added to the
 *   set (hr_subs_sync: by epoch, keyset pages under the task's prepare
 *   lock, renewed every batch, through refill_add.lua, which skips pulled
 *   recipients and stops once chunking started); all of them when SCARD
 *   subs + SCARD pulled is below the task's row count.  Syncing again
 *   happens when the Redis count changed or DSP_RECHECK_MS passed.  The
 *   owner's reconciliation after the claim (dsp_reconcile.c) reads what
 *   the last sync could not see.
 * - Poller: prepares, then claims scheduled tasks overdue by more than
 *   poller_grace_ms, and takes over dispatching tasks whose lease expired.  The claimed
 *   tasks go to the loop thread through dsp.bg_claimed.
 * - Sweeper: republishes pending chunks older than redelivery_timeout_s
 *   that no worker holds (sweep_claim.lua lets one sweeper win), and ends
 *   `dispatched` tasks with nothing pending (hr_finish: `done` only when
 *   every subscription is accounted for; one whose subs holds recipients
 *   again, after Redis came back from an older AOF, goes back to the
 *   pollers); one page of tasks
 *   per sweep from a cursor.  Finished tasks' keys get the retention
 *   expiry (dsp_retire_keys).
 * - After each scan: the control transitions (dsp_ctl.c) and the
 *   herald_tasks{state} gauge.
 *
 * HERALD_TEST_TASK_TOPIC (test only) restricts every query to one topic,
 * so that tests sharing the database do not take each other's tasks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp.h"
#include "hr_log.h"
#include "hr_finish.h"
#include "hr_subs.h"

static int dsp_scan_cmp(const void *a, const void *b)
{
    int64_t x = ((const dsp_scan_entry *)a)->id, y = ((const dsp_scan_entry *)b)->id;

    return (x > y) - (x < y);
}

static int64_t dsp_reply_int(redisReply *reply)
{
    int64_t v = reply != NULL && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;

    freeReplyObject(reply);
    return v;
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
static int dsp_prepare(dsp *d, const hr_task *t, dsp_scan_entry *e, int64_t now)
{
    dsp_conn *c = &d->bg_conn;
    const hr_mysql_param p[] = {HR_P_I64(t->id)};
    char subs[256], pulled[256], token[256], err[512];
    hr_subs_refill_opts o = {.token = token, .lock_ms = DSP_PREP_LOCK_MS,
                             .batch = d->cfg->dispatcher.refill_batch, .stop = &d->stopping};
    hr_mysql_rows *rows = NULL;
    int64_t have, want, added = 0;
    int rc;

    hr_redis_task_key(c->r, subs, sizeof subs, t->id, "subs");
    hr_redis_task_key(c->r, pulled, sizeof pulled, t->id, "pulled");
    have = dsp_reply_int(hr_redis_cmdf(c->r, err, sizeof err, "SCARD %s", subs));
    if (have >= 0)
        have += dsp_reply_int(hr_redis_cmdf(c->r, err, sizeof err, "SCARD %s", pulled));
    if (have < 0) {
        dsp_conn_failed(d, c, DSP_REDIS, err);
        return -1;
    }
    if (e->checked_ms > 0 && have == e->have && now - e->checked_ms < DSP_RECHECK_MS)
        return 0;
    if (hr_mysql_query(c->m, "SELECT COUNT(*) FROM push_subscription WHERE task_id = ?", p, 1,
                       &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, c, DSP_MYSQL, err);
        return -1;
    }
    want = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    if (have < want && hr_subs_forget_synced(c->r, t->id, err, sizeof err) < 0) {
        dsp_conn_failed(d, c, DSP_REDIS, err);
        return -1;
    }
    snprintf(token, sizeof token, "%s/scan", d->owner);
    rc = hr_subs_sync(c->m, c->r, t->id, &o, false, &added, NULL, err, sizeof err);
    switch (rc) {
    case HR_SUBS_DONE:
        e->have = have + added;
        e->checked_ms = now;
        if (added > 0)
            hr_log_info("task_prepared", "task=%lld subscriptions=%lld had=%lld added=%lld",
                        (long long)t->id, (long long)want, (long long)have, (long long)added);
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
        hr_log_warn("prepare_incomplete", "task=%lld added=%lld reason=%s", (long long)t->id,
                    (long long)added, hr_subs_result_str(rc));
        return 0;
    case HR_SUBS_STOPPED:
        e->checked_ms = 0;
        return -1;
    }
    e->checked_ms = 0; /* try again next scan */
    hr_log_warn("prepare_failed", "task=%lld error=%s", (long long)t->id, err);
    return -1;
}

/* Puts T into the timer and mirrors control=run for workers. */
static int dsp_schedule(dsp *d, const hr_task *t)
{
    dsp_conn *c = &d->bg_conn;
    char timer[256], ctl[256], err[512];
    redisReply *reply;

    hr_redis_key(c->r, timer, sizeof timer, "timer");
    hr_redis_task_key(c->r, ctl, sizeof ctl, t->id, "ctl");
    reply = hr_redis_cmdf(c->r, err, sizeof err, "ZADD %s %lld %lld", timer,
                          (long long)t->due_ms, (long long)t->id);
    if (reply != NULL) {
        freeReplyObject(reply);
        reply = hr_redis_cmdf(c->r, err, sizeof err, "SET %s run", ctl);
    }
    if (reply == NULL) {
        dsp_conn_failed(d, c, DSP_REDIS, err);
        return -1;
    }
    freeReplyObject(reply);
    hr_log_debug("task_scheduled", "task=%lld due_ms=%lld", (long long)t->id,
                 (long long)t->due_ms);
    return 0;
}

/* Takes the timer entries of the last scan's tasks that this complete scan
 * no longer returned (claimed, paused, cancelled, failed, or postponed
 * beyond the horizon) out of the timer: a stale entry would pop at the old
 * due time.  OLD and NEXT are sorted by id. */
static void dsp_scan_forget(dsp *d, const dsp_scan_entry *old, size_t nold,
                            const dsp_scan_entry *next, size_t nnext)
{
    dsp_conn *c = &d->bg_conn;
    char timer[256], err[512];
    size_t i, j = 0;

    hr_redis_key(c->r, timer, sizeof timer, "timer");
    for (i = 0; i < nold; i++) {
        while (j < nnext && next[j].id < old[i].id)
            j++;
        if (old[i].due_ms < 0 || (j < nnext && next[j].id == old[i].id))
            continue;
        if (dsp_reply_int(hr_redis_cmdf(c->r, err, sizeof err, "ZREM %s %lld", timer,
                                        (long long)old[i].id)) < 0) {
            dsp_conn_failed(d, c, DSP_REDIS, err);
            return;
        }
    }
}

static void dsp_bg_scan(dsp *d)
{
    dsp_conn *c = &d->bg_conn;
    const hr_mysql_param p[] = {HR_P_I64(d->cfg->dispatcher.horizon_s), DSP_TOPIC_PARAMS(d),
                                HR_P_I64(DSP_SCAN_MAX)};
    hr_task **tasks = NULL;
    dsp_scan_entry *next = NULL;
    size_t n = 0, nnext = 0, i;
    int64_t now = dsp_now_ms();
    char err[512];

    if (dsp_store_tasks(c->m,
                        "SELECT " HR_TASK_COLUMNS " FROM push_task "
                        "WHERE state = 'scheduled' AND control = 'run' AND (due_at IS NULL OR "
                        "due_at <= UTC_TIMESTAMP(3) + INTERVAL ? SECOND) "
                        "AND (? IS NULL OR topic = ?) ORDER BY id LIMIT ?",
                        p, 4, &tasks, &n, err, sizeof err) < 0) {
        dsp_conn_failed(d, c, DSP_MYSQL, err);
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
        if (!dsp_store_check(d, c->m, t))
            continue;
        prev = d->nscan > 0 ? bsearch(&key, d->scan, d->nscan, sizeof *d->scan, dsp_scan_cmp)
                           : NULL;
        e = &next[nnext++];
        *e = prev ? *prev : (dsp_scan_entry){.id = t->id, .due_ms = -1};
        if (dsp_prepare(d, t, e, now) < 0)
            continue; /* not in the timer before it is prepared */
        if (e->due_ms != t->due_ms && dsp_schedule(d, t) == 0)
            e->due_ms = t->due_ms;
    }
    /* A full page may have cut off tasks that are still scheduled. */
    if (n < DSP_SCAN_MAX)
        dsp_scan_forget(d, d->scan, d->nscan, next, nnext);
    free(d->scan);
    d->scan = next;
    d->nscan = nnext;
    next = NULL;
done:
    free(next);
    dsp_store_tasks_free(tasks, n);
}

/* herald_tasks{state}: one GROUP BY over the state index. */
static void dsp_bg_count(dsp *d)
{
    dsp_conn *c = &d->bg_conn;
    const hr_mysql_param p[] = {DSP_TOPIC_PARAMS(d)};
    hr_mysql_rows *rows = NULL;
    char err[512];

    if (atomic_load(&d->stopping))
        return;
    if (hr_mysql_query(c->m,
                       "SELECT state, COUNT(*) FROM push_task WHERE (? IS NULL OR topic = ?) "
                       "GROUP BY state",
                       p, 2, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, c, DSP_MYSQL, err);
        return;
    }
    dsp_metrics_tasks(d, rows);
    hr_mysql_rows_free(rows);
}

static void dsp_bg_claimed_add(dsp *d, hr_task *t)
{
    hr_task **grown;
    size_t cap;

    if (d->nbg_claimed == d->cap_bg_claimed) {
        cap = d->cap_bg_claimed ? d->cap_bg_claimed * 2 : 16;
        grown = realloc(d->bg_claimed, cap * sizeof *grown);
        if (grown == NULL) {
            /* Our claim lapses after lease_s and the task is taken over. */
            hr_log_error("task_not_owned", "task=%lld error=out of memory", (long long)t->id);
            hr_task_free(t);
            return;
        }
        d->bg_claimed = grown;
        d->cap_bg_claimed = cap;
    }
    d->bg_claimed[d->nbg_claimed++] = t;
}

static void dsp_bg_poll(dsp *d)
{
    dsp_conn *c = &d->bg_conn;
    const hr_mysql_param ps[] = {HR_P_I64((int64_t)d->cfg->dispatcher.poller_grace_ms * 1000),
                                 DSP_TOPIC_PARAMS(d), HR_P_I64(DSP_POLL_MAX)};
    const hr_mysql_param pt[] = {DSP_TOPIC_PARAMS(d), HR_P_I64(DSP_POLL_MAX)};
    hr_task **tasks = NULL;
    size_t n = 0, i;
    char err[512];
    int rc;

    if (dsp_store_tasks(c->m,
                        "SELECT " HR_TASK_COLUMNS " FROM push_task "
                        "WHERE state = 'scheduled' AND control = 'run' "
                        "AND due_at < UTC_TIMESTAMP(3) - INTERVAL ? MICROSECOND "
                        "AND (? IS NULL OR topic = ?) ORDER BY due_at LIMIT ?",
                        ps, 4, &tasks, &n, err, sizeof err) < 0)
        goto failed;
    for (i = 0; i < n && !atomic_load(&d->stopping); i++) {
        dsp_scan_entry e = {.id = tasks[i]->id, .due_ms = -1};

        if (!dsp_store_check(d, c->m, tasks[i]))
            continue;
        /* The scanner may never have prepared it (its timer entry was lost
         * before it was put there): a claim now would chunk an empty or
         * partial set. */
        if (dsp_prepare(d, tasks[i], &e, dsp_now_ms()) < 0)
            continue;
        rc = dsp_store_claim(d, c->m, tasks[i]->id, dsp_now_ms(), err, sizeof err);
        if (rc == DSP_CLAIM_BUSY)
            continue; /* an open transaction holds the row: next round */
        if (rc < 0)
            goto failed;
        if (rc == 1) {
            hr_log_info("task_overdue", "task=%lld via=poller", (long long)tasks[i]->id);
            dsp_bg_claimed_add(d, tasks[i]);
            tasks[i] = NULL;
        }
    }
    dsp_store_tasks_free(tasks, n);
    tasks = NULL;

    if (dsp_store_tasks(c->m,
                        "SELECT " HR_TASK_COLUMNS " FROM push_task "
                        "WHERE state = 'dispatching' AND control = 'run' "
                        "AND lease_until < UTC_TIMESTAMP(3) "
                        "AND (? IS NULL OR topic = ?) ORDER BY lease_until LIMIT ?",
                        pt, 3, &tasks, &n, err, sizeof err) < 0)
        goto failed;
    for (i = 0; i < n && !atomic_load(&d->stopping); i++) {
        const hr_mysql_param pu[] = {
            HR_P_STR(d->owner), HR_P_I64(d->cfg->dispatcher.lease_s), HR_P_I64(tasks[i]->id),
            tasks[i]->claimed_by ? HR_P_STR(tasks[i]->claimed_by) : HR_P_NULL};
        uint64_t affected = 0;

        if (hr_mysql_exec(c->m,
                          "UPDATE push_task SET claimed_by = ?, "
                          "lease_until = UTC_TIMESTAMP(3) + INTERVAL ? SECOND "
                          "WHERE id = ? AND state = 'dispatching' AND claimed_by <=> ? "
                          "AND lease_until < UTC_TIMESTAMP(3)",
                          pu, 4, &affected, NULL, NULL, err, sizeof err) < 0)
            goto failed;
        if (affected == 1) {
            hr_log_info("task_taken_over", "task=%lld from=%s", (long long)tasks[i]->id,
                        tasks[i]->claimed_by ? tasks[i]->claimed_by : "");
            dsp_bg_claimed_add(d, tasks[i]);
            tasks[i] = NULL;
        }
    }
    dsp_store_tasks_free(tasks, n);
    return;
failed:
    dsp_store_tasks_free(tasks, n);
    dsp_conn_failed(d, c, DSP_MYSQL, err);
}

int64_t dsp_sweep_task(dsp *d, int64_t id, int64_t due_ms, int64_t now, int64_t stale,
                       int *budget)
{
    dsp_conn *c = &d->bg_conn;
    char pending[256], lease[320], chunk[320], base[256], now_s[24], err[512];
    redisReply *all;
    int64_t npending;
    size_t i;

    hr_redis_task_key(c->r, base, sizeof base, id, "");
    hr_redis_task_key(c->r, pending, sizeof pending, id, "pending");
    all = hr_redis_cmdf(c->r, err, sizeof err, "HGETALL %s", pending);
    if (all == NULL) {
        dsp_conn_failed(d, c, DSP_REDIS, err);
        return -1;
    }
    npending = (int64_t)all->elements / 2;
    snprintf(now_s, sizeof now_s, "%lld", (long long)now);
    for (i = 0; i + 1 < all->elements && *budget > 0; i += 2) {
        const char *seq = all->element[i]->str, *at = all->element[i + 1]->str;
        const char *argv[5] = {pending, lease, seq, at, now_s};
        int64_t count;

        if (strtoll(at, NULL, 10) > stale)
            continue;
        snprintf(lease, sizeof lease, "%slease:%.24s", base, seq);
        if (dsp_reply_int(hr_redis_eval(c->r, HR_LUA_SWEEP_CLAIM, 2, 5, argv, NULL, err,
                                        sizeof err)) != 1)
            continue;
        snprintf(chunk, sizeof chunk, "%schunk:%.24s", base, seq);
        count = dsp_reply_int(hr_redis_cmdf(c->r, err, sizeof err, "SCARD %s", chunk));
        /* The count only sizes the worker's work (it reads the set); a
         * chunk message must decode, so it never claims more than a chunk
         * may hold. */
        if (count > HR_TASK_MAX_CHUNK)
            count = HR_TASK_MAX_CHUNK;
        if (count < 0 || dsp_produce(d, id, strtoll(seq, NULL, 10), count, due_ms, true, err,
                                     sizeof err) < 0) {
            /* pending[seq] now says "published now": the next sweep after
             * the redelivery timeout tries again. */
            hr_log_warn("chunk_redeliver_failed", "task=%lld seq=%s error=%s", (long long)id,
                        seq, err);
            continue;
        }
        (*budget)--;
        hr_metrics_inc(d->met.chunks_redelivered);
        hr_log_info("chunk_redelivered", "task=%lld seq=%s count=%lld last_publish_ms=%s",
                    (long long)id, seq, (long long)count, at);
        freeReplyObject(hr_redis_cmdf(c->r, err, sizeof err, "HINCRBY %sstats redelivered 1",
                                      base));
    }
    freeReplyObject(all);
    return npending;
}

int dsp_retire_keys(dsp_conn *c, int64_t id, char *err, size_t errlen)
{
    static const char *const suffixes[] = {"subs", "seq", "pending", "stats", "ctl",
                                           "pulled", "failed", "prep", "synced"};
    char key[256];
    size_t i;

    for (i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        hr_redis_task_key(c->r, key, sizeof key, id, suffixes[i]);
        if (dsp_reply_int(hr_redis_cmdf(c->r, err, errlen, "PEXPIRE %s %lld NX", key,
                                        (long long)DSP_KEY_RETENTION_MS)) < 0)
            return -1;
    }
    return 0;
}

/* The tasks that finished within the last day (done through a worker's
 * report, cancelled, failed): their keys get the retention expiry.  Pages
 * by id with a cursor, DSP_RETIRE_MAX per sweep. */
static void dsp_bg_retire(dsp *d)
{
    dsp_conn *c = &d->bg_conn;
    const hr_mysql_param p[] = {HR_P_I64(d->retire_after), DSP_TOPIC_PARAMS(d),
                                HR_P_I64(DSP_RETIRE_MAX)};
    hr_mysql_rows *rows = NULL;
    char err[512];
    size_t i;

    if (hr_mysql_query(c->m,
                       "SELECT id FROM push_task WHERE state IN ('done', 'cancelled', 'failed') "
                       "AND finished_at > UTC_TIMESTAMP(3) - INTERVAL 1 DAY AND id > ? "
                       "AND (? IS NULL OR topic = ?) ORDER BY id LIMIT ?",
                       p, 4, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, c, DSP_MYSQL, err);
        return;
    }
    for (i = 0; i < rows->nrows && !atomic_load(&d->stopping); i++) {
        int64_t id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);

        if (dsp_retire_keys(c, id, err, sizeof err) < 0) {
            dsp_conn_failed(d, c, DSP_REDIS, err);
            goto done;
        }
        d->retire_after = id;
    }
    if (rows->nrows < DSP_RETIRE_MAX)
        d->retire_after = 0;
done:
    hr_mysql_rows_free(rows);
}

/* One page of unfinished tasks per sweep, by id from the cursor kept in
 * dsp.sweep_after (back to the start after a short page), so that every
 * task is swept however many there are. */
/* A `dispatched` task with LEFT recipients in subs becomes `dispatching`
 * with no owner and an expired lease, which a poller takes over.  0 or -1. */
static int dsp_redispatch(dsp *d, int64_t id, int64_t left)
{
    dsp_conn *c = &d->bg_conn;
    const hr_mysql_param p[] = {HR_P_I64(id)};
    uint64_t affected = 0;
    char err[512];

    if (hr_mysql_exec(c->m,
                      "UPDATE push_task SET state = 'dispatching', claimed_by = NULL, "
                      "lease_until = UTC_TIMESTAMP(3) - INTERVAL 1 SECOND, dispatched_at = NULL "
                      "WHERE id = ? AND state = 'dispatched' AND control = 'run'",
                      p, 1, &affected, NULL, NULL, err, sizeof err) < 0) {
        dsp_conn_failed(d, c, DSP_MYSQL, err);
        return -1;
    }
    if (affected == 1)
        hr_log_warn("task_redispatched", "task=%lld reason=subs_not_empty left=%lld",
                    (long long)id, (long long)left);
    return 0;
}

/* Logs a task hr_finish_task ended; an unaccounted gap is an error and
 * counts in herald_recipients_unaccounted_total. */
static void dsp_finished(dsp *d, int64_t id, const hr_finish_result *fin)
{
    if (fin->unaccounted == 0) {
        hr_log_info("task_done", "task=%lld via=sweeper", (long long)id);
        return;
    }
    hr_metrics_add(d->met.unaccounted, (uint64_t)fin->unaccounted);
    hr_log_error("task_unaccounted", "task=%lld via=sweeper unaccounted=%lld subscriptions=%lld",
                 (long long)id, (long long)fin->unaccounted, (long long)fin->subscriptions);
}

static void dsp_bg_sweep(dsp *d)
{
    dsp_conn *c = &d->bg_conn;
    const hr_mysql_param p[] = {HR_P_I64(d->sweep_after), DSP_TOPIC_PARAMS(d),
                                HR_P_I64(DSP_SCAN_MAX)};
    hr_mysql_rows *rows = NULL;
    int64_t now = dsp_now_ms();
    int64_t stale_ms = (int64_t)d->cfg->dispatcher.redelivery_timeout_s * 1000;
    int budget = DSP_SWEEP_MAX;
    char subs[256], err[512];
    size_t i;

    if (hr_mysql_query(c->m,
                       "SELECT id, state, CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED) "
                       "FROM push_task WHERE state IN ('dispatching', 'dispatched') "
                       "AND id > ? AND (? IS NULL OR topic = ?) ORDER BY id LIMIT ?",
                       p, 4, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, c, DSP_MYSQL, err);
        return;
    }
    for (i = 0; i < rows->nrows && !atomic_load(&d->stopping) && budget > 0; i++) {
        int64_t id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
        const char *due = hr_mysql_cell(rows, i, 2);
        int64_t npending = dsp_sweep_task(d, id, due ? strtoll(due, NULL, 10) : 0, now,
                                          now - stale_ms, &budget);
        hr_outcomes stats;
        hr_finish_result fin;
        int64_t left;
        int rc;

        if (npending < 0)
            goto done;
        if (budget > 0) /* else its other stale chunks come first next time */
            d->sweep_after = id;
        if (npending > 0 || strcmp(hr_mysql_cell(rows, i, 1), "dispatched") != 0)
            continue;
        hr_redis_task_key(c->r, subs, sizeof subs, id, "subs");
        left = dsp_reply_int(hr_redis_cmdf(c->r, err, sizeof err, "SCARD %s", subs));
        if (left < 0)
            continue;
        if (left > 0) {
            /* `dispatched` with recipients left and no owner: Redis came
             * back from an AOF older than the owner's last chunk moves.
             * Hand the task to the pollers, which chunk the rest. */
            if (dsp_redispatch(d, id, left) < 0)
                goto done;
            continue;
        }
        if (hr_finish_read_stats(c->r, id, &stats, err, sizeof err) < 0) {
            dsp_conn_failed(d, c, DSP_REDIS, err);
            goto done;
        }
        rc = hr_finish_task(c->m, id, &stats, &fin, err, sizeof err);
        if (rc < 0) {
            dsp_conn_failed(d, c, DSP_MYSQL, err);
            goto done;
        }
        if (rc == 0)
            continue;
        dsp_finished(d, id, &fin);
        if (dsp_retire_keys(c, id, err, sizeof err) < 0)
            hr_log_warn("retire_failed", "task=%lld error=%s", (long long)id, err);
    }
    /* A page seen to its end that was short: start over next time.  A
     * sweep cut short by the budget resumes after the last task served. */
    if (i == rows->nrows && rows->nrows < DSP_SCAN_MAX)
        d->sweep_after = 0;
    if (!atomic_load(&d->stopping))
        dsp_bg_retire(d);
done:
    hr_mysql_rows_free(rows);
}

static void dsp_bg_work(uv_work_t *w)
{
    dsp *d = w->data;

    if (!dsp_conn_ready(d, &d->bg_conn))
        return;
    if (d->bg_doing & DSP_BG_SCAN) {
        dsp_bg_scan(d);
        dsp_ctl_scan(d);
        dsp_bg_count(d);
    }
    if ((d->bg_doing & DSP_BG_POLL) && !atomic_load(&d->stopping))
        dsp_bg_poll(d);
    if ((d->bg_doing & DSP_BG_SWEEP) && !atomic_load(&d->stopping))
        dsp_bg_sweep(d);
}

static void dsp_bg_done(uv_work_t *w, int status)
{
    dsp *d = w->data;
    size_t i;

    (void)status;
    d->bg_busy = false;
    for (i = 0; i < d->nbg_claimed; i++) {
        dsp_own(d, d->bg_claimed[i],
                strcmp(d->bg_claimed[i]->state, "dispatching") == 0 ? "takeover" : "poller");
        hr_task_free(d->bg_claimed[i]);
    }
    d->nbg_claimed = 0;
    if (atomic_load(&d->stopping))
        return;
    if (d->bg_want != 0)
        dsp_bg_kick(d, 0);
}

void dsp_bg_kick(dsp *d, unsigned what)
{
    d->bg_want |= what;
    if (d->bg_busy || d->bg_want == 0 || atomic_load(&d->stopping))
        return;
    d->bg_doing = d->bg_want;
    d->bg_want = 0;
    d->bg_work.data = d;
    if (uv_queue_work(d->loop, &d->bg_work, dsp_bg_work, dsp_bg_done) == 0)
        d->bg_busy = true;
}

void dsp_bg_free(dsp *d)
{
    size_t i;

    for (i = 0; i < d->nbg_claimed; i++)
        hr_task_free(d->bg_claimed[i]);
    free(d->bg_claimed);
    free(d->scan);
    d->bg_claimed = NULL;
    d->scan = NULL;
    d->nbg_claimed = d->nscan = 0;
    dsp_conn_close(&d->bg_conn);
}
