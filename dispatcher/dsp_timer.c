/* dsp_timer: the Redis timer (DESIGN.md "Timer"), written and popped.
 *
 * - Written by the scanner (background job, its connections): a prepared
 *   task goes in at its due time, with its ctl key mirrored to run; the
 *   entries of tasks a complete scan no longer returns come out.
 * - Popped by the loop thread (d->loop_conn): timer_pop.lua hands this
 *   dispatcher the due ids no other one got; they are claimed in MySQL in
 *   one statement (one winner per task; when a row stays locked, one at a
 *   time), validated, and join the owned tasks (dsp_owned_add).  When MySQL
 *   fails, the popped entries not yet claimed go back into the timer.
 * - The libuv timer (d->timer) sleeps until the earliest entry left is due
 *   (timer_pop.lua answers it), timer_interval_ms at most, and a scan that
 *   put entries into the timer wakes it (dsp_timer_wake). */
#include "dsp_timer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsp_conn.h"
#include "dsp_owned.h"
#include "dsp_reconcile.h"
#include "dsp_store.h"
#include "hr_clock.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_shard.h"

struct dsp_timer {
    uv_timer_t wake; /* until the earliest entry is due */
};

static void dsp_timer_on(uv_timer_t *h);

int dsp_timer_new(dsp *d)
{
    d->timer = calloc(1, sizeof *d->timer);
    return d->timer != NULL ? 0 : -1;
}

void dsp_timer_start(dsp *d)
{
    uint64_t every = (uint64_t)d->cfg->dispatcher.timer_interval_ms;

    uv_timer_init(d->loop, &d->timer->wake);
    d->timer->wake.data = d;
    uv_timer_start(&d->timer->wake, dsp_timer_on, every, every);
}

void dsp_timer_stop(dsp *d)
{
    uv_timer_stop(&d->timer->wake);
}

void dsp_timer_close(dsp *d)
{
    uv_close((uv_handle_t *)&d->timer->wake, NULL);
}

void dsp_timer_free(dsp *d)
{
    free(d->timer);
    d->timer = NULL;
}

int dsp_timer_add(dsp *d, dsp_conn *conn, const hr_task *t)
{
    char timer[256], ctl[256], err[512];
    redisReply *reply;

    hr_key_timer(hr_redis_prefix(conn->r), timer, sizeof timer);
    hr_key_task(hr_redis_prefix(conn->r), ctl, sizeof ctl, t->id, HR_KEY_CTL);
    /* A local-time task fires when the first zone can be due. */
    reply = hr_redis_cmdf(conn->r, err, sizeof err, "ZADD %s %" PRId64 " %" PRId64, timer,
                          hr_task_first_due_ms(t), t->id);
    if (reply != NULL) {
        freeReplyObject(reply);
        reply = hr_redis_cmdf(conn->r, err, sizeof err, "SET %s run", ctl);
    }
    if (reply == NULL) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return -1;
    }
    freeReplyObject(reply);
    hr_log_debug("task_scheduled", "task=%" PRId64 " due_ms=%" PRId64, t->id,
                 hr_task_first_due_ms(t));
    return 0;
}

/* Members of one ZREM of dsp_timer_del: each scan took the entries of the
 * tasks claimed since the last one out one ZREM at a time, on every
 * dispatcher (1,500 small tasks due together: 3,000 round trips in the
 * seconds after due; issue 33). */
#define DSP_TIMER_DEL_MAX 256

int dsp_timer_del(dsp *d, dsp_conn *conn, const int64_t *ids, size_t n)
{
    char timer[256], err[512], nums[DSP_TIMER_DEL_MAX][24];
    const char *argv[2 + DSP_TIMER_DEL_MAX] = {"ZREM", timer};

    hr_key_timer(hr_redis_prefix(conn->r), timer, sizeof timer);
    for (size_t at = 0; at < n; at += DSP_TIMER_DEL_MAX) {
        size_t k = n - at < DSP_TIMER_DEL_MAX ? n - at : DSP_TIMER_DEL_MAX;

        for (size_t i = 0; i < k; i++) {
            snprintf(nums[i], sizeof nums[i], "%" PRId64, ids[at + i]);
            argv[2 + i] = nums[i];
        }
        if (dsp_reply_int(hr_redis_cmd(conn->r, err, sizeof err, 2 + (int)k, argv, NULL)) < 0) {
            dsp_conn_failed(d, conn, DSP_REDIS, err);
            return -1;
        }
    }
    return 0;
}

/* A popped timer entry: the task id, and the reply's strings to put it
 * back with. */
typedef struct dsp_timer_entry {
    int64_t id;
    const char *member, *score;
} dsp_timer_entry;

static int dsp_timer_entry_cmp(const void *a, const void *b)
{
    int64_t x = ((const dsp_timer_entry *)a)->id, y = ((const dsp_timer_entry *)b)->id;

    return (x > y) - (x < y);
}

/* Puts the popped entries E[N] back into the timer with their scores, so
 * a failed claim does not make them wait for the poller. */
static void dsp_timer_putback(dsp *d, const dsp_timer_entry *e, size_t n)
{
    dsp_conn *conn = &d->loop_conn;
    char key[256], err[256];
    const char *argv[2 + 2 * DSP_TIMER_POP_MAX];
    size_t i, argc = 0;
    redisReply *added;

    if (n == 0)
        return;
    argv[argc++] = "ZADD";
    argv[argc++] = hr_key_timer(hr_redis_prefix(conn->r), key, sizeof key);
    for (i = 0; i < n; i++) {
        argv[argc++] = e[i].score;
        argv[argc++] = e[i].member;
    }
    added = hr_redis_cmd(conn->r, err, sizeof err, (int)argc, argv, NULL);
    if (added != NULL) {
        freeReplyObject(added);
        return;
    }
    /* The DB poller claims them once they are overdue. */
    hr_log_warn("timer_putback_failed", "entries=%zu", n);
}

/* A task this pop claimed: validated now (the row may have changed since
 * the scanner checked it; a bad one becomes failed with its last_error,
 * and the others of the batch go on), then owned, its reconciliation
 * queued at once rather than by the chunker's next tick. */
static void dsp_timer_own(dsp *d, const hr_task *t)
{
    dsp_task *dt;

    if (!dsp_store_check(d, d->loop_conn.m, t) || !dsp_owned_add(d, t, "timer"))
        return;
    dt = dsp_owned_find(d, t->id, HR_SHARD_NONE);
    /* Out of memory: the chunker queues it. */
    if (dt != NULL && !dt->started && !dt->reconciling)
        (void)dsp_reconcile_want(d, dt);
}

/* The claims one at a time, when a row of the batch stayed locked: each
 * waits for its own row, and the one an open transaction holds is left to
 * the DB poller.  On a MySQL failure the entries not claimed go back. */
static void dsp_timer_claim_each(dsp *d, const dsp_timer_entry *e, size_t n, int64_t now)
{
    dsp_conn *conn = &d->loop_conn;
    char err[512];
    size_t i;

    for (i = 0; i < n; i++) {
        hr_task *t = NULL;
        int rc = dsp_store_claim(d, conn->m, e[i].id, now, err, sizeof err);

        if (rc == 1)
            rc = hr_task_load(conn->m, e[i].id, &t, err, sizeof err) == 0 ? 1 : -1;
        if (rc == HR_STATE_BUSY) {
            /* Not from the loop thread again: the DB poller claims it
             * once the transaction holding the row ends. */
            hr_log_warn("claim_deferred",
                        "task=%" PRId64 " reason=row locked by an open transaction "
                        "(subscriptions being inserted)",
                        e[i].id);
            continue;
        }
        if (rc < 0) {
            /* MySQL is failing: every further claim would wait for its
             * timeout too.  The rest (this one included: its claim may
             * have committed, and claiming again is harmless) go back. */
            hr_log_warn("claim_failed", "task=%" PRId64 " error=%s", e[i].id, err);
            dsp_timer_putback(d, e + i, n - i);
            dsp_conn_failed(d, conn, DSP_MYSQL, err);
            return;
        }
        /* rc 0: taken by another, paused, or postponed (the scanner puts
         * it back with its new due time). */
        if (rc == 1)
            dsp_timer_own(d, t);
        hr_task_free(t);
    }
}

/* Pops the due entries and claims them; the ms until the earliest entry
 * left is due (0: pop again at once, -1: none or unknown). */
static int64_t dsp_timer_pop(dsp *d)
{
    dsp_conn *conn = &d->loop_conn;
    char key[256], now_s[24], max_s[24], err[512];
    const char *argv[3] = {key, now_s, max_s};
    dsp_timer_entry e[DSP_TIMER_POP_MAX];
    int64_t ids[DSP_TIMER_POP_MAX];
    hr_task **tasks = NULL;
    size_t i, n = 0, ntasks = 0;
    redisReply *reply;
    int64_t now = hr_clock_now_ms(), next = -1;
    int rc;

    if (atomic_load(&d->stopping) || !dsp_conn_ready(d, conn))
        return -1;
    hr_key_timer(hr_redis_prefix(conn->r), key, sizeof key);
    snprintf(now_s, sizeof now_s, "%" PRId64, now);
    snprintf(max_s, sizeof max_s, "%d", DSP_TIMER_POP_MAX);
    reply = hr_redis_eval(conn->r, HR_LUA_TIMER_POP, 1, 3, argv, NULL, err, sizeof err);
    if (reply == NULL) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return -1;
    }
    for (i = 0; i + 1 < reply->elements && n < DSP_TIMER_POP_MAX; i += 2, n++)
        e[n] = (dsp_timer_entry){.id = strtoll(reply->element[i]->str, NULL, 10),
                                 .member = reply->element[i]->str,
                                 .score = reply->element[i + 1]->str};
    /* A full pop may have left due entries; else the earliest left, if any. */
    if (n == DSP_TIMER_POP_MAX)
        next = 0;
    else if (reply->elements % 2 == 1)
        next = strtoll(reply->element[reply->elements - 1]->str, NULL, 10) - now;
    if (n == 0)
        goto done;
    /* Claims lock their rows in id order, so two never wait on each other. */
    qsort(e, n, sizeof *e, dsp_timer_entry_cmp);
    for (i = 0; i < n; i++)
        ids[i] = e[i].id;
    /* Every due task of the pop in one claim: with many small tasks due
     * together, a statement and a load per task kept the loop thread
     * (which also chunks) busy for most of a second per hundred tasks. */
    rc = dsp_store_claim_batch(d, conn->m, ids, n, now, &tasks, &ntasks, err, sizeof err);
    if (rc == HR_STATE_BUSY) {
        dsp_timer_claim_each(d, e, n, now);
    } else if (rc < 0) {
        /* Claimed or not, they go back: claiming again is harmless. */
        hr_log_warn("claim_failed", "tasks=%zu error=%s", n, err);
        dsp_timer_putback(d, e, n);
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
    } else {
        /* Popped but not claimed: taken by another, paused, or postponed
         * (the scanner puts it back with its new due time). */
        for (i = 0; i < ntasks; i++)
            dsp_timer_own(d, tasks[i]);
    }
    dsp_store_tasks_free(tasks, ntasks);
done:
    freeReplyObject(reply);
    return next < 0 ? -1 : next;
}

/* Sleeps until the earliest entry is due, at most timer_interval_ms: an
 * entry another dispatcher's scanner adds is seen within that, one of our
 * own scanner at once (dsp_timer_wake).  A fixed period let a task wait up
 * to a whole period after its due time (issue 19: 50-90 ms of a first
 * push's 100). */
static void dsp_timer_arm(dsp *d, int64_t next_ms)
{
    int64_t every = d->cfg->dispatcher.timer_interval_ms;

    if (atomic_load(&d->stopping))
        return;
    uv_timer_start(&d->timer->wake, dsp_timer_on,
                   (uint64_t)(next_ms >= 0 && next_ms < every ? next_ms : every), (uint64_t)every);
}

void dsp_timer_on(uv_timer_t *h)
{
    dsp *d = h->data;
    int64_t next = dsp_timer_pop(d);

    /* More is due: pop again 1 ms after the loop's time now, not at 0.
     * libuv 1.44 runs a timer re-armed at 0 from its own callback again
     * in the same pass, before any I/O: with 1,500 small tasks due together
     * each dispatcher claimed all of its share (about 80 ms) while the
     * reconciliations it had started finished unheard and the chunker and
     * the delivery reports waited, so no first push left before the last
     * claim.  The 1 ms lets the loop serve them between pops (as the
     * chunker's tick does, dispatcher.c). */
    if (next == 0) {
        uv_update_time(h->loop);
        next = 1;
    }
    dsp_timer_arm(d, next);
}

void dsp_timer_wake(dsp *d)
{
    dsp_timer_arm(d, 0);
}
