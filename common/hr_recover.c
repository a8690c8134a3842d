/* hr_recover: rebuilds a task's Redis state from MySQL after Redis lost it
 * (or part of it); the one implementation behind `heraldctl recover TASK`
 * and POST /v1/tasks/{id}/recover.
 *
 *   0. A `failed` task is recovered only when it failed unaccounted (its
 *      outcomes did not cover its subscriptions, hr_finish.h): Redis lost
 *      recipients, and this is what pushes them.  A `dispatching` task is
 *      refused: its owner chunks it and would
 *      INCR seq under our feet.  Pause it first (state becomes paused), or
 *      let it reach dispatched.  So is a task with a live chunk lease (any
 *      lease:* key): its holder pushes the members it read into memory
 *      while the rebuilt set, which still holds them, is chunked again, so
 *      every one of them would go out twice.  Pausing makes the holders park
 *      their chunks (lease released); leases lost with Redis are no
 *      obstacle, but their holders may still push for one lease renewal,
 *      so recover waits for that and for the delivery log to stand still
 *      (recover_wait_reports) before it reads the log, and looks for
 *      leases again.  The task's prepare lock is taken and held
 *      until the set is filled, so no dispatcher's refill or first chunk
 *      runs meanwhile.
 *   1. The stale working keys go: subs, seq, pending, every chunk:* and
 *      lease:* of the task (pulled, failed and stats stay: what survived of
 *      them is still true).  The outcome counters sent, failed, throttled, unregistered,
 *      opted_out and suppressed
 *      become the delivery log's counts, in MySQL and in the stats hash, the
 *      very recipients the refill leaves out (recover_log_counts); the
 *      others are raised back to MySQL's, which workers only ever raise.
 *   2. subs = push_subscription minus the recipients push_delivery shows
 *      as sent/failed/throttled/unregistered/opted_out/suppressed/pulled, minus the pulled
 *      set: hr_subs_refill
 *      (the dispatcher's refill, excluding delivered recipients).  A refill
 *      cut short (seq appeared, lock lost) is an error.
 *   3. seq is set to the highest push_chunk seq, so new chunks never reuse a
 *      number whose row exists (a reused one would not count in total).
 *      The push_chunk rows of chunks that were not done are deleted (their
 *      Redis sets are gone; what they still held is back in subs), and
 *      total restarts from the recipients the delivery log shows as
 *      delivered, so the rebuilt chunks are not counted twice; the stats
 *      hash's `published` restarts from the same number (the rebuilt
 *      chunks' first publishes add to both), or progress and status would
 *      count the recipients republished twice.
 *   The books the pushes read — the recipients' profiles (consent,
 *      zones) and the address book — are synced before the refill
 *      (hr_mirror_sync; a Redis that lost them lost their marks too, and
 *      every uid is reloaded), so the rebuilt set is pushed with them.
 *   4. A dispatched task becomes `dispatching` with no owner and an
 *      expired lease, so a dispatcher's poller takes it over
 *      and chunks the rebuilt set; a scheduled one goes back into the timer;
 *      a paused one stays paused (resume chunks it).  The ctl key mirrors
 *      control. */
#include "hr_recover.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "hr_addr.h"
#include "hr_dlog.h"
#include "hr_finish.h"
#include "hr_keys.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_subs.h"
#include "hr_user.h"

#define HR_RECOVER_BATCH 10000
#define HR_RECOVER_LOCK_MS 120000
#define HR_RECOVER_LOCK_WAIT_MS 30000
/* The delivery log must stand still this long before recover reads it: a
 * few reporter flushes (every 200 ms), so a worker's last outcomes are in. */
#define HR_RECOVER_QUIET_MS 1000

/* Step 3's MySQL side, in one transaction: the rows of chunks that were not
 * done go, and total becomes what the delivery log shows as delivered; the
 * chunks cut from the rebuilt set add their sizes again.  A deadlock with a
 * reporter's or dispatcher's transaction on the same rows runs it again
 * from its BEGIN (hr_mysql_deadlocked): the fault matrix's
 * recover-stopped-holder met one under load and recover stopped there. */
static int hr_recover_reset_total(hr_mysql *m, int64_t id, int64_t day, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    const hr_mysql_param p2[] = {HR_P_I64(id), HR_P_I64(day), HR_P_I64(id)};
    bool deadlocked;

    for (int n = 0;; n++) {
        if (hr_mysql_begin(m, errstr, errlen) < 0)
            return -1;
        if (hr_mysql_exec(m, "DELETE FROM push_chunk WHERE task_id = ? AND state <> 'done'", p, 1,
                          NULL, NULL, NULL, errstr, errlen) == 0 &&
            hr_mysql_exec(m,
                          "UPDATE push_task SET total = (SELECT COUNT(*) FROM push_delivery "
                          "WHERE task_id = ? AND day = ? AND status IN ('sent', 'failed', "
                          "'throttled')) WHERE id = ?",
                          p2, 3, NULL, NULL, NULL, errstr, errlen) == 0 &&
            hr_mysql_commit(m, errstr, errlen) == 0)
            return 0;
        deadlocked = hr_mysql_deadlocked(m);
        hr_mysql_rollback(m);
        if (!deadlocked || n >= HR_MYSQL_DEADLOCK_RETRIES)
            return -1;
    }
}

/* The delivery log's counts of task ID's recipients by last outcome, per
 * shard (SHARDS; CRC32(uid) % S is the shard of hr_shard.h, so MySQL
 * groups them) into PER[0..S), zeroed first (retried is left 0).  DAY is
 * the task's partition (hr_dlog_day).  0 or -1. */
static int hr_recover_log_read(hr_mysql *m, int64_t id, int64_t day, int shards, hr_outcomes *per,
                               char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(shards), HR_P_I64(id), HR_P_I64(day)};
    hr_mysql_rows *rows = NULL;
    size_t i;

    memset(per, 0, (size_t)shards * sizeof *per);
    if (hr_mysql_query(m,
                       "SELECT CRC32(uid) % ?, status, COUNT(*) FROM push_delivery "
                       "WHERE task_id = ? AND day = ? GROUP BY 1, 2",
                       p, 3, &rows, errstr, errlen) < 0)
        return -1;
    for (i = 0; i < rows->nrows; i++) {
        int k = atoi(hr_mysql_cell(rows, i, 0));
        const char *status = hr_mysql_cell(rows, i, 1);
        int64_t n = strtoll(hr_mysql_cell(rows, i, 2), NULL, 10);
        hr_outcomes *c = &per[k >= 0 && k < shards ? k : 0];
        int64_t *field = strcmp(status, "sent") == 0           ? &c->sent
                         : strcmp(status, "failed") == 0       ? &c->failed
                         : strcmp(status, "throttled") == 0    ? &c->throttled
                         : strcmp(status, "pulled") == 0       ? &c->pulled
                         : strcmp(status, "cancelled") == 0    ? &c->cancelled
                         : strcmp(status, "unregistered") == 0 ? &c->unregistered
                         : strcmp(status, "opted_out") == 0    ? &c->opted_out
                         : strcmp(status, "suppressed") == 0   ? &c->suppressed
                                                               : NULL;

        if (field != NULL)
            *field += n;
    }
    hr_mysql_rows_free(rows);
    return 0;
}

/* Step 3's Redis side: each shard's stats.published = the recipients the
 * delivery log shows it delivered (sent, failed, throttled), which add up
 * to push_task.total as just reset. */
static int hr_recover_reset_published(hr_redis *r, int64_t id, int shards, const hr_outcomes *per,
                                      char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX];

    for (int k = 0; k < shards; k++) {
        redisReply *reply =
            hr_redis_cmdf(r, errstr, errlen, "HSET %s published %" PRId64,
                          hr_key_shard(hr_redis_prefix(r), key, sizeof key, id, k, HR_KEY_STATS),
                          per[k].sent + per[k].failed + per[k].throttled);

        if (reply == NULL)
            return -1;
        freeReplyObject(reply);
    }
    return 0;
}

/* Sets T's outcome counters, in T and in MySQL, from the delivery log's
 * counts PER[0..SHARDS) (one row per recipient, its last outcome).  The
 * rebuilt set is the subscriptions minus the recipients the log shows as
 * sent, failed, unregistered, throttled, opted_out or suppressed, so
 * exactly those are counted: a
 * recipient a worker acknowledged in Redis but had not logged yet (its
 * reporter stopped or behind, a row dropped from a full queue) goes back
 * into the set and is counted when it is pushed again, and one logged but
 * not acknowledged (an ack batch cut short by a flush) is counted here, so
 * the counters add up to the subscriptions either way.  Raising them to
 * MySQL's or the hash's values instead counted the first kind twice.
 * pulled and cancelled are only raised (the refill also leaves out the
 * pulled set).  A sharded task's rows get their shard's counts the same
 * way, push_task the sums.  0 or -1 (ERRSTR). */
static int hr_recover_log_counts(hr_mysql *m, hr_task *t, int shards, const hr_outcomes *per,
                                 char *errstr, size_t errlen)
{
    int64_t pulled = 0, cancelled = 0;

    t->sent = t->failed = t->throttled = t->unregistered = t->opted_out = t->suppressed = 0;
    for (int k = 0; k < shards; k++) {
        const hr_mysql_param ps[] = {HR_P_I64(t->id),
                                     HR_P_I64(k),
                                     HR_P_I64(per[k].sent),
                                     HR_P_I64(per[k].failed),
                                     HR_P_I64(per[k].throttled),
                                     HR_P_I64(per[k].unregistered),
                                     HR_P_I64(per[k].opted_out),
                                     HR_P_I64(per[k].suppressed),
                                     HR_P_I64(per[k].pulled),
                                     HR_P_I64(per[k].cancelled)};

        t->sent += per[k].sent;
        t->failed += per[k].failed;
        t->throttled += per[k].throttled;
        t->unregistered += per[k].unregistered;
        t->opted_out += per[k].opted_out;
        t->suppressed += per[k].suppressed;
        pulled += per[k].pulled;
        cancelled += per[k].cancelled;
        /* A row the reconciliation has not written yet (a scheduled task)
         * is written waiting, as every counter writer does (hr_finish.h). */
        if (shards > 1 &&
            hr_mysql_exec(m,
                          "INSERT INTO push_task_shard (task_id, shard, state, sent, failed, "
                          "throttled, unregistered, opted_out, suppressed, pulled, cancelled) "
                          "VALUES (?, ?, 'waiting', ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY "
                          "UPDATE sent = VALUES(sent), failed = VALUES(failed), "
                          "throttled = VALUES(throttled), unregistered = VALUES(unregistered), "
                          "opted_out = VALUES(opted_out), suppressed = VALUES(suppressed), "
                          "pulled = GREATEST(pulled, VALUES(pulled)), "
                          "cancelled = GREATEST(cancelled, VALUES(cancelled))",
                          ps, 10, NULL, NULL, NULL, errstr, errlen) < 0)
            return -1;
    }
    if (pulled > t->pulled)
        t->pulled = pulled;
    if (cancelled > t->cancelled)
        t->cancelled = cancelled;
    {
        const hr_mysql_param pu[] = {
            HR_P_I64(t->sent),         HR_P_I64(t->failed),    HR_P_I64(t->throttled),
            HR_P_I64(t->unregistered), HR_P_I64(t->opted_out), HR_P_I64(t->suppressed),
            HR_P_I64(t->pulled),       HR_P_I64(t->cancelled), HR_P_I64(t->id)};

        return hr_mysql_exec(m,
                             "UPDATE push_task SET sent = ?, failed = ?, throttled = ?, "
                             "unregistered = ?, opted_out = ?, suppressed = ?, "
                             "pulled = GREATEST(pulled, ?), cancelled = GREATEST(cancelled, ?) "
                             "WHERE id = ?",
                             pu, 9, NULL, NULL, NULL, errstr, errlen);
    }
}

/* Writes C's counters into the stats hash of shard SHARD of task ID: sent,
 * failed, throttled, unregistered, opted_out and suppressed as they are
 * (hr_recover_log_counts),
 * the others only raised (workers write the hash's counters to MySQL with
 * GREATEST, so a hash lost with Redis must not restart them from 0). */
static int hr_recover_restore_stats(hr_redis *r, int64_t id, int shard, const hr_outcomes *c,
                                    char *errstr, size_t errlen)
{
    const struct {
        const char *field;
        int64_t value;
        bool exact;
    } counters[] = {{"sent", c->sent, true},           {"failed", c->failed, true},
                    {"throttled", c->throttled, true}, {"unregistered", c->unregistered, true},
                    {"opted_out", c->opted_out, true}, {"suppressed", c->suppressed, true},
                    {"retried", c->retried, false},    {"pulled", c->pulled, false},
                    {"cancelled", c->cancelled, false}};
    redisReply *reply;
    char key[HR_KEY_MAX];
    size_t i;

    hr_key_shard(hr_redis_prefix(r), key, sizeof key, id, shard, HR_KEY_STATS);
    for (i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        int64_t have;

        reply = hr_redis_cmdf(r, errstr, errlen, "HGET %s %s", key, counters[i].field);
        if (reply == NULL)
            return -1;
        have = reply->type == REDIS_REPLY_STRING ? strtoll(reply->str, NULL, 10) : 0;
        freeReplyObject(reply);
        if (counters[i].exact ? have == counters[i].value : have >= counters[i].value)
            continue;
        reply = hr_redis_cmdf(r, errstr, errlen, "HSET %s %s %" PRId64, key, counters[i].field,
                              counters[i].value);
        if (reply == NULL)
            return -1;
        freeReplyObject(reply);
    }
    return 0;
}

/* Task ID's unaccounted subscriptions (a `failed` task whose outcomes did
 * not cover them, hr_finish.h) into *OUT.  0 or -1 (ERRSTR). */
static int hr_recover_unaccounted(hr_mysql *m, int64_t id, int64_t *out, char *errstr,
                                  size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;

    if (hr_mysql_query(m, "SELECT unaccounted FROM push_task WHERE id = ?", p, 1, &rows, errstr,
                       errlen) < 0)
        return -1;
    *out = rows->nrows == 1 ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : 0;
    hr_mysql_rows_free(rows);
    return 0;
}

/* The delivery log's row count and newest `at` of task ID, as one string
 * that changes whenever a worker logs an outcome (a row written without a
 * day, by an older release, too).  0 or -1 (ERRSTR). */
static int hr_recover_log_mark(hr_mysql *m, int64_t id, int64_t day, char *mark, size_t marklen,
                               char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_I64(day), HR_P_I64(HR_DLOG_UNSET)};
    hr_mysql_rows *rows = NULL;

    if (hr_mysql_query(m,
                       "SELECT COUNT(*), COALESCE(MAX(at), '') FROM push_delivery "
                       "WHERE task_id = ? AND day IN (?, ?)",
                       p, 3, &rows, errstr, errlen) < 0)
        return -1;
    snprintf(mark, marklen, "%s/%s", hr_mysql_cell(rows, 0, 0), hr_mysql_cell(rows, 0, 1));
    hr_mysql_rows_free(rows);
    return 0;
}

/* Sleeps MS in steps of 100 ms; -1 (ERRSTR) as soon as o->stop is set. */
static int hr_recover_sleep(const hr_recover_opts *o, int ms, char *errstr, size_t errlen)
{
    for (int slept = 0; slept < ms; slept += 100) {
        if (o->stop != NULL && atomic_load(o->stop)) {
            snprintf(errstr, errlen, "recover interrupted: the process is stopping; run it again");
            return -1;
        }
        usleep((useconds_t)(ms - slept < 100 ? ms - slept : 100) * 1000);
    }
    return 0;
}

/* Waits for the workers' last reports of task ID before the delivery log
 * is read.  A worker whose chunk lease vanished with Redis (a flush, a
 * restart without its AOF) still pushes the members it read into memory
 * until its next lease renewal (every worker.lease_ms / 3) finds the lease
 * gone; its outcomes reach push_delivery up to a reporter flush later.
 * Recover found no lease, so every such lease was gone before it looked:
 * after one renewal interval every running holder has given its chunk up,
 * and once the log stands still for HR_RECOVER_QUIET_MS its outcomes are in.
 * Without the wait, recover puts what they pushed meanwhile back into subs
 * and it is pushed and counted twice.  (A holder that does not run at all,
 * SIGSTOPped, pushes on only when it comes back; docs/reliability.md
 * bounds that.)  0, HR_RECOVER_BUSY when the log did not stand still within
 * HR_RECOVER_QUIET_MAX_MS, -1; ERRSTR says why. */
static int hr_recover_wait_reports(hr_mysql *m, int64_t id, int64_t day, const hr_recover_opts *o,
                                   char *errstr, size_t errlen)
{
    char before[96], after[96];
    int waited = o->lease_ms / 3;

    if (o->waiting != NULL)
        o->waiting(o->ctx, id, o->lease_ms / 3, HR_RECOVER_QUIET_MS);
    if (hr_recover_sleep(o, o->lease_ms / 3, errstr, errlen) != 0)
        return HR_RECOVER_BUSY;
    if (hr_recover_log_mark(m, id, day, before, sizeof before, errstr, errlen) < 0)
        return -1;
    for (; waited < HR_RECOVER_QUIET_MAX_MS; waited += HR_RECOVER_QUIET_MS) {
        if (hr_recover_sleep(o, HR_RECOVER_QUIET_MS, errstr, errlen) != 0)
            return HR_RECOVER_BUSY;
        if (hr_recover_log_mark(m, id, day, after, sizeof after, errstr, errlen) < 0)
            return -1;
        if (strcmp(before, after) == 0)
            return 0;
        snprintf(before, sizeof before, "%s", after);
    }
    snprintf(errstr, errlen,
             "task %" PRId64 ": workers still log deliveries of it after %d s (its chunks were "
             "lost from Redis while they pushed them); recover would push those recipients "
             "again: try again once they stopped",
             id, HR_RECOVER_QUIET_MAX_MS / 1000);
    return HR_RECOVER_BUSY;
}

/* Records that the rebuilt set holds every subscription up to the task's
 * current epoch (P T:synced, see hr_subs.h).  0 or -1 (ERR). */
static int hr_recover_mark_synced(hr_mysql *m, hr_redis *r, int64_t id, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    redisReply *reply;
    char key[HR_KEY_MAX];
    int64_t epoch;

    if (hr_mysql_query(m, "SELECT subs_epoch FROM push_task WHERE id = ?", p, 1, &rows, errstr,
                       errlen) < 0)
        return -1;
    epoch = rows->nrows == 1 ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : 0;
    hr_mysql_rows_free(rows);
    reply = hr_redis_cmdf(r, errstr, errlen, "SET %s %" PRId64,
                          hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_SYNCED),
                          epoch + 1);
    freeReplyObject(reply);
    return reply != NULL ? 0 : -1;
}

/* Syncs the books the pushes read (profiles, addresses) into OUT's
 * counts; one a dispatcher syncs at the moment (busy) is synced by it.
 * 0 or -1. */
static int hr_recover_books(hr_mysql *m, hr_redis *r, const hr_recover_opts *o,
                            hr_recover_result *out, char *errstr, size_t errlen)
{
    const hr_mirror *books[] = {&hr_user_mirror, &hr_addr_mirror};

    for (size_t i = 0; i < sizeof books / sizeof *books; i++) {
        hr_mirror_result res;

        if (hr_mirror_sync(books[i], m, r, o->token, HR_RECOVER_BATCH, o->cfg, &res, errstr,
                           errlen) < 0)
            return -1;
        out->book_uids += res.uids;
        out->books_reloaded = out->books_reloaded || res.full;
    }
    return 0;
}

int hr_recover_check(hr_mysql *m, const hr_task *t, int64_t now_ms, int retention_days,
                     char *errstr, size_t errlen)
{
    int64_t id = t->id, unaccounted = 0;
    int rc;

    if (t->state == HR_STATE_FAILED &&
        hr_recover_unaccounted(m, id, &unaccounted, errstr, errlen) < 0)
        return -1;
    if (t->state == HR_STATE_DONE || t->state == HR_STATE_CANCELLED ||
        (t->state == HR_STATE_FAILED && unaccounted == 0)) {
        snprintf(errstr, errlen, "task %" PRId64 " is %s; nothing to recover", id,
                 hr_state_name(t->state));
        return HR_RECOVER_REFUSED;
    }
    if (t->state == HR_STATE_DISPATCHING) {
        snprintf(errstr, errlen,
                 "task %" PRId64 " is dispatching: a dispatcher is chunking it; pause it first "
                 "(heraldctl pause %" PRId64 "), wait until it is paused, recover, then resume",
                 id, id);
        return HR_RECOVER_REFUSED;
    }
    /* expiry: the rebuilt set would hold again the recipients already
     * counted expired (they have no delivery log row), and nothing would be
     * pushed anyway. */
    if (hr_task_expired(t, now_ms)) {
        time_t at = (time_t)(t->expire_ms / 1000);
        struct tm tm;
        char when[40] = "?";

        if (gmtime_r(&at, &tm) != NULL)
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        snprintf(errstr, errlen,
                 "task %" PRId64 " expired at %s: nothing more is pushed and what is left "
                 "counts expired; nothing to recover",
                 id, when);
        return HR_RECOVER_REFUSED;
    }
    /* The rebuilt set is the subscriptions minus what the delivery log
     * shows: with the task's rows dropped (retention) or not yet copied
     * into partitions, it would hold recipients who were reached. */
    rc = hr_dlog_ready(m, id, t->due_ms, retention_days, now_ms, errstr, errlen);
    if (rc != 0)
        return rc < 0 ? -1 : rc == HR_DLOG_GONE ? HR_RECOVER_REFUSED : HR_RECOVER_BUSY;
    return 0;
}

int hr_recover(hr_mysql *m, hr_redis *r, const hr_task *task, const hr_recover_opts *o,
               hr_recover_result *out, char *errstr, size_t errlen)
{
    hr_task t = *task; /* its counters are rewritten; the strings stay the caller's */
    hr_mysql_rows *rows = NULL;
    redisReply *reply;
    char key[HR_KEY_MAX], keys[5][HR_KEY_MAX], err[512];
    const char *prefix = hr_redis_prefix(r);
    int64_t day = hr_dlog_day(t.due_ms); /* the task's delivery log partition */
    hr_subs_refill_opts ro = {.token = o->token,
                              .lock_ms = HR_RECOVER_LOCK_MS,
                              .batch = HR_RECOVER_BATCH,
                              .exclude_delivered = true,
                              .delivery_day = day};
    int64_t id = t.id;
    int shards = t.shards > 1 ? (int)t.shards : 1;
    hr_outcomes *per = NULL; /* the delivery log's counts per shard */
    bool claimed, locked = false;
    int rc, wait, fill, pass;

    memset(out, 0, sizeof *out);
    out->state = t.state;
    if ((rc = hr_recover_check(m, &t, o->now_ms, o->retention_days, errstr, errlen)) != 0)
        return rc;
    claimed = t.state != HR_STATE_SCHEDULED;
    /* A scanner's sync holds the lock for a moment; a refill or a
     * reconciliation of a big set for longer. */
    for (wait = 0; (rc = hr_subs_lock(r, id, o->token, HR_RECOVER_LOCK_MS, errstr, errlen)) == 0 &&
                   wait < HR_RECOVER_LOCK_WAIT_MS;
         wait += 100)
        if (hr_recover_sleep(o, 100, errstr, errlen) != 0)
            return HR_RECOVER_BUSY;
    if (rc < 0)
        return -1;
    if (rc == 0) {
        snprintf(errstr, errlen,
                 "task %" PRId64 ": a dispatcher is preparing it (prepare lock held for %d s); try "
                 "again in a minute",
                 id, HR_RECOVER_LOCK_WAIT_MS / 1000);
        return HR_RECOVER_BUSY;
    }
    locked = true;
    rc = -1;
    /* Leases are looked for before and after the wait: one taken meanwhile
     * (a sweeper's republish) is a chunk in flight too. */
    for (pass = 0; pass < 2; pass++) {
        int64_t leases = 0;

        for (int k = 0; k < shards && leases == 0; k++)
            leases =
                hr_redis_del_matching(r, hr_key_shard_leases_match(prefix, key, sizeof key, id, k),
                                      false, errstr, errlen);
        if (leases < 0)
            goto done;
        if (leases > 0) {
            snprintf(errstr, errlen,
                     "task %" PRId64 " has chunks in flight (a worker holds a chunk lease): "
                     "its workers would push what they hold while the rebuilt set is chunked "
                     "again; pause it first (heraldctl pause %" PRId64 "), wait until it is "
                     "paused and its chunks are parked, recover, then resume",
                     id, id);
            rc = HR_RECOVER_REFUSED;
            goto done;
        }
        /* A scheduled task was never chunked: nobody holds its members. */
        if (pass == 0 && claimed &&
            (fill = hr_recover_wait_reports(m, id, day, o, errstr, errlen)) != 0) {
            rc = fill;
            goto done;
        }
    }
    /* Rows an older release logged without a day while we waited join the
     * task's partition, which every read below is pruned to. */
    if (claimed && hr_dlog_settle(m, id, day, errstr, errlen) < 0)
        goto done;
    if (hr_recover_books(m, r, o, out, errstr, errlen) < 0)
        goto done;
    /* The wait set and its waves go too (local time, send windows): the
     * refill puts every undelivered recipient back into subs, and the next
     * owner's reconciliation plans them again (dsp_wait.c).  Left in
     * place, a waiting recipient would be pushed from subs now and again
     * at its release. */
    /* The mark of an occurrence's fill before its claim goes with the set:
     * the refill below puts in the series' subscribers only once the task
     * is claimed, so the claim must read them all again. */
    reply = hr_redis_cmdf(r, errstr, errlen, "DEL %s",
                          hr_key_task(prefix, key, sizeof key, id, HR_KEY_SERIES));
    if (reply == NULL)
        goto done;
    freeReplyObject(reply);
    for (int k = 0; k < shards; k++) {
        int64_t n;

        reply = hr_redis_cmdf(r, errstr, errlen, "DEL %s %s %s %s %s",
                              hr_key_shard(prefix, keys[0], sizeof keys[0], id, k, HR_KEY_SUBS),
                              hr_key_shard(prefix, keys[1], sizeof keys[1], id, k, HR_KEY_SEQ),
                              hr_key_shard(prefix, keys[2], sizeof keys[2], id, k, HR_KEY_PENDING),
                              hr_key_shard(prefix, keys[3], sizeof keys[3], id, k, HR_KEY_WAIT),
                              hr_key_shard(prefix, keys[4], sizeof keys[4], id, k, HR_KEY_WAVES));
        if (reply == NULL)
            goto done;
        freeReplyObject(reply);
        n = hr_redis_del_matching(r, hr_key_shard_chunks_match(prefix, key, sizeof key, id, k),
                                  true, errstr, errlen);
        if (n < 0)
            goto done;
        out->dropped_chunks += n;
        n = hr_redis_del_matching(r, hr_key_shard_leases_match(prefix, key, sizeof key, id, k),
                                  true, errstr, errlen);
        if (n < 0)
            goto done;
        out->dropped_leases += n;
    }
    /* Our own lock counts as taken: hr_subs_refill holds it on and
     * releases it. */
    fill = hr_subs_refill(m, r, id, &ro, &out->subs, &out->undelivered, errstr, errlen);
    locked = false;
    if (fill < 0)
        goto done;
    if (fill != HR_SUBS_DONE) {
        snprintf(errstr, errlen,
                 "task %" PRId64 ": the set is incomplete (%" PRId64 " added): %s; run recover "
                 "again",
                 id, out->subs, hr_subs_result_str(fill));
        rc = HR_RECOVER_BUSY;
        goto done;
    }
    {
        const hr_mysql_param p[] = {HR_P_I64(shards), HR_P_I64(id)};

        /* Each shard's highest chunk number ((seq - 1) % S is its shard). */
        if (hr_mysql_query(m,
                           "SELECT (seq - 1) % ?, MAX(seq) FROM push_chunk WHERE task_id = ? "
                           "GROUP BY 1",
                           p, 2, &rows, errstr, errlen) < 0)
            goto done;
    }
    /* The set holds every subscription now: the owner's reconciliation
     * must not read them again (it would bring back the delivered ones). */
    if (hr_recover_mark_synced(m, r, id, errstr, errlen) < 0)
        goto done;
    for (size_t i = 0; claimed && i < rows->nrows; i++) {
        int k = atoi(hr_mysql_cell(rows, i, 0));
        int64_t max = strtoll(hr_mysql_cell(rows, i, 1), NULL, 10);

        if (max > out->seq)
            out->seq = max;
        if (k < 0 || k >= shards || max <= 0)
            continue;
        reply = hr_redis_cmdf(r, errstr, errlen, "SET %s %" PRId64,
                              hr_key_shard(prefix, key, sizeof key, id, k, HR_KEY_SEQ),
                              hr_shard_count_of_seq(shards, max));
        if (reply == NULL)
            goto done;
        freeReplyObject(reply);
    }
    per = calloc((size_t)shards, sizeof *per);
    if (per == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    if (hr_recover_log_read(m, id, day, shards, per, errstr, errlen) < 0)
        goto done;
    if (claimed && (hr_recover_reset_total(m, id, day, errstr, errlen) < 0 ||
                    hr_recover_reset_published(r, id, shards, per, errstr, errlen) < 0))
        goto done;
    if (hr_recover_log_counts(m, &t, shards, per, errstr, errlen) < 0)
        goto done;
    /* A task of one set keeps raising retried, pulled and cancelled to
     * MySQL's (t, as just written); a shard's hash to its log counts. */
    if (shards == 1) {
        per[0] = (hr_outcomes){.sent = t.sent,
                               .failed = t.failed,
                               .throttled = t.throttled,
                               .unregistered = t.unregistered,
                               .opted_out = t.opted_out,
                               .suppressed = t.suppressed,
                               .retried = t.retried,
                               .pulled = t.pulled,
                               .cancelled = t.cancelled};
    }
    for (int k = 0; k < shards; k++)
        if (hr_recover_restore_stats(r, id, k, &per[k], errstr, errlen) < 0)
            goto done;
    reply = hr_redis_cmdf(r, errstr, errlen, "SET %s %s",
                          hr_key_task(prefix, key, sizeof key, id, HR_KEY_CTL),
                          hr_control_name(t.control));
    if (reply == NULL)
        goto done;
    freeReplyObject(reply);
    if (!claimed) {
        reply = hr_redis_cmdf(r, errstr, errlen, "ZADD %s %" PRId64 " %" PRId64,
                              hr_key_timer(prefix, key, sizeof key), t.due_ms, id);
        if (reply == NULL)
            goto done;
        freeReplyObject(reply);
    } else if (t.state != HR_STATE_PAUSED) {
        if (hr_state_recover(m, id, errstr, errlen) < 0)
            goto done;
        out->state = HR_STATE_DISPATCHING;
    }
    rc = 0;
done:
    if (locked)
        hr_subs_unlock(r, id, o->token, err, sizeof err);
    hr_mysql_rows_free(rows);
    free(per);
    return rc;
}
