/* dsp_timer: the Redis timer (DESIGN.md "Timer"), written and popped.
 *
 * - Written by the scanner (background job, dsp.bg_conn): a prepared task
 *   goes in at its due time, with its ctl key mirrored to run; the entries
 *   of tasks a complete scan no longer returns come out.
 * - Popped by the loop thread (dsp.loop_conn): timer_pop.lua hands this
 *   dispatcher the due ids no other one got; each is claimed in MySQL (one
 *   winner) and joins the owned tasks (dsp_own).  When MySQL fails, the
 *   popped entries not yet claimed go back into the timer. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsp.h"
#include "hr_keys.h"
#include "hr_log.h"

/* Puts T into the timer and mirrors control=run for workers. */
int dsp_timer_add(dsp *d, const hr_task *t)
{
    dsp_conn *conn = &d->bg_conn;
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

/* Takes the timer entries of the last scan's tasks that this complete scan
 * no longer returned (claimed, paused, cancelled, failed, or postponed
 * beyond the horizon) out of the timer: a stale entry would pop at the old
 * due time.  OLD and NEXT are sorted by id. */
void dsp_timer_forget(dsp *d, const dsp_scan_entry *old, size_t nold, const dsp_scan_entry *next,
                      size_t nnext)
{
    dsp_conn *conn = &d->bg_conn;
    char timer[256], err[512];
    size_t i, j = 0;

    hr_key_timer(hr_redis_prefix(conn->r), timer, sizeof timer);
    for (i = 0; i < nold; i++) {
        while (j < nnext && next[j].id < old[i].id)
            j++;
        if (old[i].due_ms < 0 || (j < nnext && next[j].id == old[i].id))
            continue;
        if (dsp_reply_int(hr_redis_cmdf(conn->r, err, sizeof err, "ZREM %s %" PRId64, timer,
                                        old[i].id)) < 0) {
            dsp_conn_failed(d, conn, DSP_REDIS, err);
            return;
        }
    }
}

/* Puts the popped entries FROM.. of REPLY back into the timer with their
 * scores, so a failed claim does not make the others wait for the poller. */
static void dsp_timer_putback(dsp *d, const redisReply *reply, size_t from)
{
    dsp_conn *conn = &d->loop_conn;
    char key[256], err[256];
    const char **argv;
    size_t i, n = 0;
    redisReply *added;

    argv = malloc((2 + reply->elements) * sizeof *argv);
    if (argv == NULL)
        goto lost;
    argv[n++] = "ZADD";
    argv[n++] = hr_key_timer(hr_redis_prefix(conn->r), key, sizeof key);
    for (i = from; i + 1 < reply->elements; i += 2) {
        argv[n++] = reply->element[i + 1]->str; /* score */
        argv[n++] = reply->element[i]->str;     /* id */
    }
    added = n > 2 ? hr_redis_cmd(conn->r, err, sizeof err, (int)n, argv, NULL) : NULL;
    free(argv);
    if (n <= 2 || added != NULL) {
        freeReplyObject(added);
        return;
    }
lost:
    /* The DB poller claims them once they are overdue. */
    hr_log_warn("timer_putback_failed", "entries=%zu", (reply->elements - from) / 2);
}

void dsp_timer_pop(dsp *d)
{
    dsp_conn *conn = &d->loop_conn;
    char key[256], now_s[24], max_s[24], err[512];
    const char *argv[3] = {key, now_s, max_s};
    redisReply *reply;
    int64_t now = dsp_now_ms();
    size_t i;

    if (atomic_load(&d->stopping) || !dsp_conn_ready(d, conn))
        return;
    hr_key_timer(hr_redis_prefix(conn->r), key, sizeof key);
    snprintf(now_s, sizeof now_s, "%" PRId64, now);
    snprintf(max_s, sizeof max_s, "%d", DSP_TIMER_POP_MAX);
    reply = hr_redis_eval(conn->r, HR_LUA_TIMER_POP, 1, 3, argv, NULL, err, sizeof err);
    if (reply == NULL) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return;
    }
    for (i = 0; i + 1 < reply->elements; i += 2) {
        int64_t id = strtoll(reply->element[i]->str, NULL, 10);
        hr_task *t = NULL;
        int rc = dsp_store_claim(d, conn->m, id, now, err, sizeof err);

        if (rc == 1)
            rc = hr_task_load(conn->m, id, &t, err, sizeof err) == 0 ? 1 : -1;
        if (rc == HR_STATE_BUSY) {
            /* Not from the loop thread again: the DB poller claims it
             * once the transaction holding the row ends. */
            hr_log_warn("claim_deferred",
                        "task=%" PRId64 " reason=row locked by an open transaction "
                        "(subscriptions being inserted)",
                        id);
            continue;
        }
        if (rc < 0) {
            /* MySQL is failing: every further claim would wait for its
             * timeout too.  The rest (this one included: its claim may
             * have committed, and claiming again is harmless) go back. */
            hr_log_warn("claim_failed", "task=%" PRId64 " error=%s", id, err);
            dsp_timer_putback(d, reply, i);
            dsp_conn_failed(d, conn, DSP_MYSQL, err);
            break;
        }
        /* rc 0: taken by another, paused, or postponed (the scanner puts
         * it back with its new due time). */
        if (rc == 1)
            dsp_own(d, t, "timer");
        hr_task_free(t);
    }
    freeReplyObject(reply);
}
