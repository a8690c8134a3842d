/* hr_subs: the refill of a task's subscriber set and its prepare lock (see
 * hr_subs.h).  One implementation for the dispatcher's prepare and
 * `heraldctl recover`, so both renew the lock, respect the seq guard and
 * report an incomplete refill the same way. */
#include "hr_subs.h"
#include "hr_subs_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_batch.h"
#include "hr_keys.h"
#include "hr_pipe.h"
#include "hr_shard.h"

int hr_subs_lock(hr_redis *r, int64_t id, const char *token, int ms, char *errstr, size_t errlen)
{
    char key[256];
    redisReply *reply;
    int rc;

    hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_PREP);
    reply = hr_redis_cmdf(r, errstr, errlen, "SET %s %s NX PX %d", key, token, ms);
    if (reply == NULL)
        return -1;
    rc = reply->type == REDIS_REPLY_STATUS;
    freeReplyObject(reply);
    if (rc)
        return 1;
    /* A SET retried after an I/O error fails on the lock its first try
     * already took: that one is ours. */
    reply = hr_redis_cmdf(r, errstr, errlen, "GET %s", key);
    if (reply == NULL)
        return -1;
    rc = reply->type == REDIS_REPLY_STRING && strcmp(reply->str, token) == 0;
    freeReplyObject(reply);
    return rc;
}

int hr_subs_unlock(hr_redis *r, int64_t id, const char *token, char *errstr, size_t errlen)
{
    char key[256];
    const char *argv[2] = {key, token};
    redisReply *reply;

    hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_PREP);
    reply = hr_redis_eval(r, HR_LUA_LEASE_RELEASE, 1, 2, argv, NULL, errstr, errlen);
    freeReplyObject(reply);
    return reply != NULL ? 0 : -1;
}

/* Extends the lock if TOKEN still holds it: 1, 0 (lost) or -1. */
static int hr_subs_renew(hr_redis *r, int64_t id, const hr_subs_refill_opts *o, char *errstr,
                         size_t errlen)
{
    char key[256], ms[24];
    const char *argv[3] = {key, o->token, ms};
    redisReply *reply;
    int rc;

    hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_PREP);
    snprintf(ms, sizeof ms, "%d", o->lock_ms);
    reply = hr_redis_eval(r, HR_LUA_LEASE_RENEW, 1, 3, argv, NULL, errstr, errlen);
    if (reply == NULL)
        return -1;
    rc = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    return rc;
}

/* "AND" the delivery log shows no outcome that settles recipient UID of
 * task TASK (SQL expressions; a refill that excludes the delivered leaves
 * them out); its parameter: the task's push_delivery.day (hr_dlog), the
 * task's partition alone, not one probe per partition. */
#define HR_SUBS_NOT_SETTLED(task, uid)                                                        \
    "AND NOT EXISTS (SELECT 1 FROM push_delivery d WHERE d.task_id = " task " AND d.day = ? " \
    "AND d.uid = " uid " AND d.status IN ('sent', 'failed', 'throttled', 'pulled', "          \
    "'unregistered', 'opted_out', 'suppressed'))"

/* A page of the series subscribers task ? takes from TABLE (its rows, or
 * the past intervals), uid > ?, then EXTRA (a condition, with its
 * parameters), LIMIT ?.  A uid that has a push_subscription row of the
 * task as well is read again and added to the set again, which holds it
 * once: a probe of push_subscription per series subscriber cost about 3 s
 * of a 1,000,000 fill, between the claim and the first push. */
#define HR_SUBS_SERIES_PAGE(table, extra) \
    HR_SUBS_SERIES_PAGE_OF(table, HR_SUBS_SERIES_MEMBER("s", "t"), extra)
#define HR_SUBS_SERIES_PAGE_OF(table, member, extra)                     \
    "SELECT s.uid FROM push_task t STRAIGHT_JOIN " table " s ON " member \
    " WHERE t.id = ? AND s.uid > ? " extra " ORDER BY s.uid LIMIT ?"

/* An instant given in ms (MySQL's clock, as the subscriptions' times are;
 * the session's zone is UTC, so FROM_UNIXTIME is exact to the ms). */
#define HR_SUBS_AT_MS "FROM_UNIXTIME(? / 1000)"

/* Whether series subscription SS is one of occurrence T's series at the
 * instant HR_SUBS_AT_MS (given twice), of its day if a drip. */
#define HR_SUBS_SERIES_AT_MS(ss, t) \
    "(" ss ".series_id = " t        \
    ".series_id AND " HR_SUBS_MEMBER_AT(ss, HR_SUBS_AT_MS) " AND " HR_SUBS_DRIP(ss, t) ")"

static const char *const hr_subs_sql[] = {
    [HR_SUBS_ALL] = "SELECT uid FROM push_subscription WHERE task_id = ? AND uid > ? "
                    "ORDER BY uid LIMIT ?",
    /* d.day: the task's partition alone, not one probe per partition. */
    [HR_SUBS_UNDELIVERED] =
        "SELECT s.uid FROM push_subscription s WHERE s.task_id = ? "
        "AND s.uid > ? " HR_SUBS_NOT_SETTLED("s.task_id", "s.uid") " ORDER BY s.uid LIMIT ?",
    /* The primary key (series_id, uid): one range read in uid order. */
    [HR_SUBS_SERIES] = HR_SUBS_SERIES_PAGE("push_series_subscription", ""),
    [HR_SUBS_SERIES_UNDELIVERED] =
        HR_SUBS_SERIES_PAGE("push_series_subscription", HR_SUBS_NOT_SETTLED("t.id", "s.uid")),
    /* (series_id, uid, subscribed_at): at most one interval of a uid is
     * taken, so uid orders the pages alone. */
    [HR_SUBS_SERIES_PAST] = HR_SUBS_SERIES_PAGE("push_series_subscription_past", ""),
    [HR_SUBS_SERIES_PAST_UNDELIVERED] =
        HR_SUBS_SERIES_PAGE("push_series_subscription_past", HR_SUBS_NOT_SETTLED("t.id", "s.uid")),
    /* The same reads at an instant: the fill before the claim. */
    [HR_SUBS_SERIES_AT] =
        HR_SUBS_SERIES_PAGE_OF("push_series_subscription", HR_SUBS_SERIES_AT_MS("s", "t"), ""),
    [HR_SUBS_SERIES_PAST_AT] =
        HR_SUBS_SERIES_PAGE_OF("push_series_subscription_past", HR_SUBS_SERIES_AT_MS("s", "t"), ""),
    /* The (task_id, epoch) index holds uid too (InnoDB appends the primary
     * key), so this is one range read in (epoch, uid) order. */
    [HR_SUBS_EPOCHS] = "SELECT uid, epoch FROM push_subscription WHERE task_id = ? "
                       "AND ((epoch = ? AND uid > ?) OR epoch > ?) AND epoch < ? "
                       "ORDER BY epoch, uid LIMIT ?",
};

int64_t hr_subs_reply_added(redisReply *reply)
{
    int64_t v;

    if (reply == NULL)
        return -2;
    v = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    freeReplyObject(reply);
    return v;
}

/* SCRIPT (refill_add.lua or refill_rem.lua: the same keys) for the N uids
 * UIDS of shard SHARD of task ID (ARGV has room for 3 + N).  The number
 * added (removed), or -1 when chunking started (the shard's seq exists), or
 * -2 on a Redis error (ERRSTR). */
static long long hr_subs_add(hr_redis *r, hr_lua_id script, int64_t id, int shard,
                             const char **uids, size_t n, const char **argv, char *errstr,
                             size_t errlen)
{
    char keys[3][256];
    argv[0] = hr_key_shard(hr_redis_prefix(r), keys[0], sizeof keys[0], id, shard, HR_KEY_SUBS);
    argv[1] = hr_key_shard(hr_redis_prefix(r), keys[1], sizeof keys[1], id, shard, HR_KEY_PULLED);
    argv[2] = hr_key_shard(hr_redis_prefix(r), keys[2], sizeof keys[2], id, shard, HR_KEY_SEQ);
    memcpy(argv + 3, uids, n * sizeof *argv);
    return hr_subs_reply_added(hr_redis_eval(r, script, 3, 3 + (int)n, argv, NULL, errstr, errlen));
}

/* SCRIPT of hr_subs_add for the N uids UIDS of task ID, each to its shard
 * (hr_subs_add_sharded's answers). */
static int hr_subs_apply_sharded(hr_redis *r, hr_lua_id script, int64_t id, int shards,
                                 const char **uids, size_t n, int64_t *added, char *errstr,
                                 size_t errlen)
{
    const char **argv = malloc((n + 3) * sizeof *argv),
               **sorted = malloc((n ? n : 1) * sizeof *sorted);
    size_t *bounds = malloc(((size_t)(shards > 1 ? shards : 1) + 1) * sizeof *bounds);
    int rc = -1;

    *added = 0;
    if (argv == NULL || sorted == NULL || bounds == NULL ||
        hr_shard_sort(uids, n, shards, sorted, bounds) != 0) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    rc = 0;
    for (int k = 0; k < (shards > 1 ? shards : 1); k++) {
        long long got;

        if (bounds[k + 1] == bounds[k])
            continue;
        got = hr_subs_add(r, script, id, k, sorted + bounds[k], bounds[k + 1] - bounds[k], argv,
                          errstr, errlen);
        if (got == -2) {
            rc = -1;
            goto done;
        }
        if (got < 0)
            rc = 1; /* this shard's chunking started: the others are still added */
        else
            *added += got;
    }
done:
    free(argv);
    free(sorted);
    free(bounds);
    return rc;
}

/* One page of a fill: stops first when *O->stop says so, reads SQL (P,
 * NP) into *ROWS, and when it has rows renews the prepare lock (the MySQL
 * page may have taken long: the lock must still be ours before anything is
 * added under it).  HR_SUBS_DONE (*ROWS may be empty: the last page),
 * HR_SUBS_STOPPED, HR_SUBS_LOCK_LOST, or -1. */
static int hr_subs_page(hr_mysql *m, hr_redis *r, int64_t id, const hr_subs_refill_opts *o,
                        const char *sql, const hr_mysql_param *p, size_t np, hr_mysql_rows **rows,
                        char *errstr, size_t errlen)
{
    int rc;

    if (o->stop != NULL && atomic_load(o->stop))
        return HR_SUBS_STOPPED;
    if (hr_mysql_query(m, sql, p, np, rows, errstr, errlen) < 0)
        return -1;
    if ((*rows)->nrows == 0)
        return HR_SUBS_DONE;
    rc = hr_subs_renew(r, id, o, errstr, errlen);
    return rc < 0 ? -1 : rc == 0 ? HR_SUBS_LOCK_LOST : HR_SUBS_DONE;
}

int hr_subs_add_sharded(hr_redis *r, int64_t id, int shards, const char **uids, size_t n,
                        int64_t *added, char *errstr, size_t errlen)
{
    return hr_subs_apply_sharded(r, HR_LUA_REFILL_ADD, id, shards, uids, n, added, errstr, errlen);
}

int hr_subs_fill(hr_mysql *m, hr_redis *r, int64_t id, int shards, const hr_subs_refill_opts *o,
                 hr_subs_pages pages, int64_t from, int64_t upto, int64_t *added, int64_t *seen,
                 char *errstr, size_t errlen)
{
    const char **uids = NULL;
    hr_mysql_rows *rows = NULL;
    int64_t last = 0, epoch = from;
    int rc;
    size_t i;

    uids = malloc((size_t)o->batch * sizeof *uids);
    if (uids == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (;;) {
        const hr_mysql_param pu[] = {HR_P_I64(id), HR_P_I64(last), HR_P_I64(o->batch)};
        const hr_mysql_param pd[] = {HR_P_I64(id), HR_P_I64(last), HR_P_I64(o->delivery_day),
                                     HR_P_I64(o->batch)};
        const hr_mysql_param pe[] = {HR_P_I64(id),    HR_P_I64(epoch), HR_P_I64(last),
                                     HR_P_I64(epoch), HR_P_I64(upto),  HR_P_I64(o->batch)};
        const hr_mysql_param pa[] = {HR_P_I64(from), HR_P_I64(from), HR_P_I64(id), HR_P_I64(last),
                                     HR_P_I64(o->batch)};
        bool undelivered = pages == HR_SUBS_UNDELIVERED || pages == HR_SUBS_SERIES_UNDELIVERED ||
                           pages == HR_SUBS_SERIES_PAST_UNDELIVERED;
        bool at = pages == HR_SUBS_SERIES_AT || pages == HR_SUBS_SERIES_PAST_AT;
        const hr_mysql_param *p = pages == HR_SUBS_EPOCHS ? pe : at ? pa : undelivered ? pd : pu;
        size_t np = pages == HR_SUBS_EPOCHS ? 6 : at ? 5 : undelivered ? 4 : 3;
        int64_t got;

        rc = hr_subs_page(m, r, id, o, hr_subs_sql[pages], p, np, &rows, errstr, errlen);
        if (rc != HR_SUBS_DONE)
            goto done;
        if (rows->nrows == 0)
            break;
        for (i = 0; i < rows->nrows; i++)
            uids[i] = hr_mysql_cell(rows, i, 0);
        last = strtoll(uids[rows->nrows - 1], NULL, 10);
        if (pages == HR_SUBS_EPOCHS)
            epoch = strtoll(hr_mysql_cell(rows, rows->nrows - 1, 1), NULL, 10);
        rc = hr_subs_add_sharded(r, id, shards, uids, rows->nrows, &got, errstr, errlen);
        if (rc != 0) {
            rc = rc < 0 ? -1 : HR_SUBS_STARTED;
            goto done;
        }
        *added += got;
        *seen += (int64_t)rows->nrows;
        if (rows->nrows < (size_t)o->batch)
            break;
        hr_mysql_rows_free(rows);
        rows = NULL;
    }
    rc = HR_SUBS_DONE;
done:
    hr_mysql_rows_free(rows);
    free(uids);
    return rc;
}

/* The end of a refill or sync that took the prepare lock: hands out the
 * counts (ADDED, SEEN may be NULL) and releases the lock unless it was
 * lost.  Returns RC. */
static int hr_subs_end(hr_redis *r, int64_t id, const hr_subs_refill_opts *o, int rc,
                       int64_t n_added, int64_t n_seen, int64_t *added, int64_t *seen)
{
    char e2[256];

    if (added != NULL)
        *added = n_added;
    if (seen != NULL)
        *seen = n_seen;
    /* A failed release expires by itself after lock_ms. */
    if (rc != HR_SUBS_LOCK_LOST)
        hr_subs_unlock(r, id, o->token, e2, sizeof e2);
    return rc;
}

/* The series subscribers claimed occurrence ID takes (none for another
 * task: the reads find no row), by their rows then by their past
 * intervals, minus the delivered ones with UNDELIVERED.  An hr_subs_result
 * or -1. */
static int hr_subs_fill_series(hr_mysql *m, hr_redis *r, int64_t id, int shards,
                               const hr_subs_refill_opts *o, bool undelivered, int64_t *added,
                               int64_t *seen, char *errstr, size_t errlen)
{
    int rc =
        hr_subs_fill(m, r, id, shards, o, undelivered ? HR_SUBS_SERIES_UNDELIVERED : HR_SUBS_SERIES,
                     0, 0, added, seen, errstr, errlen);

    if (rc == HR_SUBS_DONE)
        rc = hr_subs_fill(m, r, id, shards, o,
                          undelivered ? HR_SUBS_SERIES_PAST_UNDELIVERED : HR_SUBS_SERIES_PAST, 0, 0,
                          added, seen, errstr, errlen);
    return rc;
}

int hr_subs_refill(hr_mysql *m, hr_redis *r, int64_t id, const hr_subs_refill_opts *o,
                   int64_t *added, int64_t *seen, char *errstr, size_t errlen)
{
    int64_t n_added = 0, n_seen = 0;
    int rc, shards = 1;

    rc = hr_subs_lock(r, id, o->token, o->lock_ms, errstr, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : HR_SUBS_BUSY;
    rc = hr_shard_load(m, id, &shards, errstr, errlen);
    if (rc == 0)
        rc = hr_subs_fill(m, r, id, shards, o,
                          o->exclude_delivered ? HR_SUBS_UNDELIVERED : HR_SUBS_ALL, 0, 0, &n_added,
                          &n_seen, errstr, errlen);
    if (rc == HR_SUBS_DONE)
        rc = hr_subs_fill_series(m, r, id, shards, o, o->exclude_delivered, &n_added, &n_seen,
                                 errstr, errlen);
    return hr_subs_end(r, id, o, rc, n_added, n_seen, added, seen);
}

/* The first epoch the set does not hold yet ({t<ID>}synced; 0, all of
 * them, when the key is missing, e.g. after Redis lost the set), or -1. */
static int64_t hr_subs_synced(hr_redis *r, int64_t id, char *errstr, size_t errlen)
{
    char key[256];
    redisReply *reply;
    int64_t v;

    hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_SYNCED);
    reply = hr_redis_cmdf(r, errstr, errlen, "GET %s", key);
    if (reply == NULL)
        return -1;
    v = reply->type == REDIS_REPLY_STRING ? strtoll(reply->str, NULL, 10) : 0;
    freeReplyObject(reply);
    return v > 0 ? v : 0;
}

/* What a sync knows of its task besides the epochs: hr_subs_epoch_end's
 * reads, and for an occurrence hr_subs_series_begin's. */
typedef struct hr_subs_task {
    int shards;
    int64_t series_id;  /* an occurrence's series, 0 for another task */
    int64_t started_ms; /* its claim (MySQL's clock), -1 before it */
    bool chunking;      /* seq exists: an earlier owner's reconciliation ended */
    bool marked;        /* {t<ID>}series exists: the set holds the subscribers at */
    int64_t mark_ms;    /* this instant (MySQL's clock) */
} hr_subs_task;

/* The epoch a sync reads up to (exclusive).  Before the claim: subs_epoch
 * is bumped first, which waits for the inserts in flight (the guard trigger
 * share-locks the task row) and stamps later ones with the new epoch, so
 * every row of an older epoch is committed and visible.  After the claim no
 * row can be added, so everything up to the current epoch is read.
 * 0 (*UPTO and *T set), 1 when CLAIMED is false but the task is no longer
 * scheduled (its owner's reconciliation does the rest), 2 when an open
 * transaction kept the task row locked for a second, or -1. */
static int hr_subs_epoch_end(hr_mysql *m, int64_t id, bool claimed, int64_t *upto, hr_subs_task *t,
                             char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    uint64_t affected = 0;
    unsigned errnum = 0;
    const char *cell;

    if (!claimed) {
        /* The bump waits for the inserts in flight, but not for long: an
         * admin's transaction left open must not hold up the caller (the
         * scanner serves every task); the next sync tries again. */
        if (hr_mysql_exec(m,
                          "SET STATEMENT innodb_lock_wait_timeout = 1 FOR "
                          "UPDATE push_task SET subs_epoch = subs_epoch + 1 "
                          "WHERE id = ? AND state = 'scheduled'",
                          p, 1, &affected, NULL, &errnum, errstr, errlen) < 0)
            return errnum == HR_MYSQL_ER_LOCK_WAIT_TIMEOUT ? 2 : -1;
        if (affected != 1)
            return 1;
    }
    /* Only a sync bumps the epoch, and syncs of a task hold its prepare
     * lock: the value read is the one just written. */
    if (hr_mysql_query(m,
                       "SELECT subs_epoch, shards, series_id, UNIX_TIMESTAMP(started_at) * 1000 "
                       "FROM push_task WHERE id = ?",
                       p, 1, &rows, errstr, errlen) < 0)
        return -1;
    if (rows->nrows != 1) {
        hr_mysql_rows_free(rows);
        return 1;
    }
    *upto = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) + (claimed ? 1 : 0);
    t->shards = atoi(hr_mysql_cell(rows, 0, 1));
    cell = hr_mysql_cell(rows, 0, 2);
    t->series_id = cell != NULL ? strtoll(cell, NULL, 10) : 0;
    cell = hr_mysql_cell(rows, 0, 3);
    t->started_ms = cell != NULL ? strtoll(cell, NULL, 10) : -1;
    hr_mysql_rows_free(rows);
    return 0;
}

/* Taken off the instant a fill before the claim reads (ms): the triggers
 * of push_series_subscription write UTC_TIMESTAMP(3) (the statement's
 * start, to the ms) plus the time since, stored to the ms, so a row's time
 * may lie up to 2 ms before the moment its trigger ran. */
#define HR_SUBS_SKEW_MS 10

/* Takes series SERIES's row lock exclusively and lets it go (one
 * statement): the triggers of push_series_subscription take it shared
 * before they read the time they write and hold it until their transaction
 * ends, so once it is granted every row whose trigger ran before the
 * request is committed and visible to the next statements.
 *
 * With AT_MS, MySQL's time read just BEFORE the request, minus
 * HR_SUBS_SKEW_MS, goes there: a row with a time at or before it had its
 * trigger run before that read, so it held the shared lock before the
 * request and was committed before the grant; a row written later has a
 * time after it.  Read after the lock, the time would not do: a writer
 * granted the shared lock between the lock's statement and that read
 * would carry an earlier time and might not be committed yet.
 * 0, 1 when an open transaction held the row for a second, or -1. */
static int hr_subs_series_lock(hr_mysql *m, int64_t series, int64_t *at_ms, char *errstr,
                               size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(series)};
    hr_mysql_rows *rows = NULL;
    unsigned errnum = 0;

    if (at_ms != NULL) {
        if (hr_mysql_query(m, "SELECT FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000)", NULL, 0, &rows,
                           errstr, errlen) < 0)
            return -1;
        *at_ms = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) - HR_SUBS_SKEW_MS;
        hr_mysql_rows_free(rows);
    }
    if (hr_mysql_exec(m,
                      "SET STATEMENT innodb_lock_wait_timeout = 1 FOR "
                      "UPDATE push_series SET id = id WHERE id = ?",
                      p, 1, NULL, NULL, &errnum, errstr, errlen) < 0)
        return errnum == HR_MYSQL_ER_LOCK_WAIT_TIMEOUT ? 1 : -1;
    return 0;
}

/* Before an occurrence's sync reads anything: whether its chunking
 * started (T->chunking) and the instant of the series subscribers its set
 * holds ({t<ID>}series: T->marked, T->mark_ms).  Without the mark, and
 * before chunking, the set may still hold the subscribers of an earlier
 * fill (the mark was lost or dropped, the set not), whom a whole read
 * would not take out though they left: the set goes (every shard's), and
 * *FROM becomes 0, so the sync reads every subscription of the task again
 * before the series' subscribers, as into a set Redis lost.  Nothing is
 * pushed from the set before seq exists, and seq is created under the
 * prepare lock the sync holds.  0 or -1. */
static int hr_subs_series_begin(hr_redis *r, int64_t id, hr_subs_task *t, int64_t *from,
                                char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(r);
    char key[256];
    redisReply *reply;

    reply = hr_redis_cmdf(r, errstr, errlen, "EXISTS %s",
                          hr_key_shard(prefix, key, sizeof key, id, 0, HR_KEY_SEQ));
    if (reply == NULL)
        return -1;
    t->chunking = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    reply = hr_redis_cmdf(r, errstr, errlen, "GET %s",
                          hr_key_task(prefix, key, sizeof key, id, HR_KEY_SERIES));
    if (reply == NULL)
        return -1;
    t->marked = reply->type == REDIS_REPLY_STRING;
    t->mark_ms = t->marked ? strtoll(reply->str, NULL, 10) : 0;
    freeReplyObject(reply);
    if (t->marked || t->chunking)
        return 0;
    for (int k = 0; k < (t->shards > 1 ? t->shards : 1); k++) {
        reply = hr_redis_cmdf(r, errstr, errlen, "DEL %s",
                              hr_key_shard(prefix, key, sizeof key, id, k, HR_KEY_SUBS));
        if (reply == NULL)
            return -1;
        freeReplyObject(reply);
    }
    *from = 0;
    return 0;
}

/* A page of the delta: the uids whose subscription to occurrence ?'s
 * series changed after an instant, by COL (subscribed_at or
 * unsubscribed_at: every change writes one of them, and a subscribe again
 * copies the closed interval to push_series_subscription_past) through
 * INDEX (028_series_changes.sql), in (COL, uid) order after a cursor;
 * each with whether it is a subscriber at the instant HR_SUBS_AT_MS (by
 * its row or a past interval, of the day of a drip) and whether it has a
 * push_subscription row of the task.  Parameters: the instant four times,
 * the task, the cursor's time twice, whether the cursor has a uid, its
 * uid, the page's size. */
#define HR_SUBS_DELTA_PAGE(col, index)                                                             \
    "SELECT s.uid, UNIX_TIMESTAMP(s." col ") * 1000, " HR_SUBS_SERIES_AT_MS(                       \
        "s", "t") " OR EXISTS (SELECT 1 FROM push_series_subscription_past p WHERE p.uid = s.uid " \
                  "AND " HR_SUBS_SERIES_AT_MS(                                                     \
                      "p", "t") "), EXISTS (SELECT 1 FROM "                                        \
                                "push_subscription o WHERE o.task_id = t.id AND o.uid = s.uid) "   \
                                "FROM push_task t "                                                \
                                "STRAIGHT_JOIN push_series_subscription s FORCE INDEX (" index     \
                                ") ON "                                                            \
                                "s.series_id = t.series_id WHERE t.id = ? AND s." col              \
                                " >= " HR_SUBS_AT_MS " AND (s." col " > " HR_SUBS_AT_MS            \
                                " OR (? AND s.uid > ?)) ORDER BY s." col ", s.uid LIMIT ?"

/* The delta: task ID's set, which holds its series' subscribers at SINCE
 * (ms), is brought to those at AT: each uid whose subscription changed
 * after the earlier of the two (the only ones whose membership may differ)
 * is added (refill_add.lua: not if it pulled) when it is a subscriber at
 * AT, else taken out (refill_rem.lua) unless it has a push_subscription
 * row of the task, which keeps it a recipient (the epoch sync added it).
 * An hr_subs_result or -1. */
static int hr_subs_series_delta(hr_mysql *m, hr_redis *r, int64_t id, int shards,
                                const hr_subs_refill_opts *o, int64_t since, int64_t at,
                                int64_t *added, int64_t *seen, char *errstr, size_t errlen)
{
    static const char *const sql[] = {
        HR_SUBS_DELTA_PAGE("subscribed_at", "push_series_subscription_subscribed"),
        HR_SUBS_DELTA_PAGE("unsubscribed_at", "push_series_subscription_unsubscribed")};
    const char **in = malloc((size_t)o->batch * sizeof *in);
    const char **out = malloc((size_t)o->batch * sizeof *out);
    hr_mysql_rows *rows = NULL;
    int rc = HR_SUBS_DONE;

    if (in == NULL || out == NULL) {
        snprintf(errstr, errlen, "out of memory");
        rc = -1;
        goto done;
    }
    for (size_t c = 0; c < sizeof sql / sizeof *sql; c++) {
        int64_t cur = since < at ? since : at, last = 0;
        bool paged = false;

        for (;;) {
            const hr_mysql_param p[] = {
                HR_P_I64(at),  HR_P_I64(at),  HR_P_I64(at),    HR_P_I64(at),   HR_P_I64(id),
                HR_P_I64(cur), HR_P_I64(cur), HR_P_I64(paged), HR_P_I64(last), HR_P_I64(o->batch)};
            size_t nin = 0, nout = 0, i;
            int64_t got;

            rc = hr_subs_page(m, r, id, o, sql[c], p, sizeof p / sizeof *p, &rows, errstr, errlen);
            if (rc != HR_SUBS_DONE)
                goto done;
            if (rows->nrows == 0)
                break;
            for (i = 0; i < rows->nrows; i++) {
                if (atoi(hr_mysql_cell(rows, i, 2)) == 1)
                    in[nin++] = hr_mysql_cell(rows, i, 0);
                else if (atoi(hr_mysql_cell(rows, i, 3)) != 1)
                    out[nout++] = hr_mysql_cell(rows, i, 0);
            }
            last = strtoll(hr_mysql_cell(rows, rows->nrows - 1, 0), NULL, 10);
            cur = strtoll(hr_mysql_cell(rows, rows->nrows - 1, 1), NULL, 10);
            paged = true;
            rc = nin > 0 ? hr_subs_add_sharded(r, id, shards, in, nin, &got, errstr, errlen) : 0;
            *added += nin > 0 ? got : 0;
            if (rc == 0 && nout > 0)
                rc = hr_subs_apply_sharded(r, HR_LUA_REFILL_REM, id, shards, out, nout, &got,
                                           errstr, errlen);
            if (rc != 0) {
                rc = rc < 0 ? -1 : HR_SUBS_STARTED;
                goto done;
            }
            *seen += (int64_t)rows->nrows;
            if (rows->nrows < (size_t)o->batch)
                break;
            hr_mysql_rows_free(rows);
            rows = NULL;
        }
        hr_mysql_rows_free(rows);
        rows = NULL;
        rc = HR_SUBS_DONE;
    }
done:
    hr_mysql_rows_free(rows);
    free(in);
    free(out);
    return rc;
}

/* The series part of a sync before the claim of occurrence ID (series
 * T->series_id): its set is given the series' subscribers at an instant T
 * read under the series row's lock (hr_subs_series_lock), all of them when
 * {t<ID>}series is missing (into the set hr_subs_series_begin emptied and
 * the sync filled again with the task's own rows), else the delta since
 * the instant it holds; then the key holds T.  It is written after the
 * set, in the set's slot: a Redis that lost the set lost the key too, and
 * the next fill is whole.  The claim (hr_subs_sync_series) then applies only the delta to its own
 * instant, so a 1,000,000-subscriber occurrence's first chunk no longer
 * waits for the whole read (docs/scheduling.md "Subscribers of a
 * series").  An hr_subs_result, HR_SUBS_BUSY when an open transaction held
 * the series row for a second, or -1. */
static int hr_subs_prefill_series(hr_mysql *m, hr_redis *r, int64_t id, const hr_subs_task *t,
                                  const hr_subs_refill_opts *o, int64_t *added, int64_t *seen,
                                  char *errstr, size_t errlen)
{
    char key[256], at_s[24];
    redisReply *reply;
    int64_t at;
    int rc;

    rc = hr_subs_series_lock(m, t->series_id, &at, errstr, errlen);
    if (rc != 0)
        return rc < 0 ? -1 : HR_SUBS_BUSY;
    if (t->marked)
        rc = hr_subs_series_delta(m, r, id, t->shards, o, t->mark_ms, at, added, seen, errstr,
                                  errlen);
    else {
        rc = hr_subs_fill(m, r, id, t->shards, o, HR_SUBS_SERIES_AT, at, 0, added, seen, errstr,
                          errlen);
        if (rc == HR_SUBS_DONE)
            rc = hr_subs_fill(m, r, id, t->shards, o, HR_SUBS_SERIES_PAST_AT, at, 0, added, seen,
                              errstr, errlen);
    }
    if (rc != HR_SUBS_DONE)
        return rc;
    snprintf(at_s, sizeof at_s, "%" PRId64, at);
    reply =
        hr_redis_cmdf(r, errstr, errlen, "SET %s %s",
                      hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_SERIES), at_s);
    freeReplyObject(reply);
    return reply != NULL ? HR_SUBS_DONE : -1;
}

/* The claimed sync's part for an occurrence of a series: the series
 * subscribers at its claim (T->started_ms), unless its chunking started in
 * an earlier ownership (seq exists: that reconciliation added them before
 * it created seq; a new owner's would find every add refused).  The series
 * row's lock is taken exclusively first (hr_subs_series_lock), so every
 * row whose time is before the claim is committed and visible.  A set
 * filled before the claim ({t<ID>}series, hr_subs_prefill_series) takes the
 * delta from its instant to the claim; without the key (Redis lost it, a
 * dispatcher of an older release prepared the task, the occurrence was
 * never prepared before its claim, or recover rebuilt the set) every
 * subscriber at the claim is read (HR_SUBS_SERIES) into the set
 * hr_subs_series_begin emptied and the sync filled again with the task's
 * own rows.  An hr_subs_result,
 * HR_SUBS_BUSY when an open transaction held the series row for a second,
 * or -1. */
static int hr_subs_sync_series(hr_mysql *m, hr_redis *r, int64_t id, const hr_subs_task *t,
                               const hr_subs_refill_opts *o, int64_t *added, int64_t *seen,
                               char *errstr, size_t errlen)
{
    int rc;

    if (t->chunking)
        return HR_SUBS_DONE;
    rc = hr_subs_series_lock(m, t->series_id, NULL, errstr, errlen);
    if (rc != 0)
        return rc < 0 ? -1 : HR_SUBS_BUSY;
    if (t->marked && t->started_ms >= 0)
        return hr_subs_series_delta(m, r, id, t->shards, o, t->mark_ms, t->started_ms, added, seen,
                                    errstr, errlen);
    return hr_subs_fill_series(m, r, id, t->shards, o, false, added, seen, errstr, errlen);
}

int hr_subs_sync(hr_mysql *m, hr_redis *r, int64_t id, const hr_subs_refill_opts *o, bool claimed,
                 int64_t *added, int64_t *seen, char *errstr, size_t errlen)
{
    char key[256], upto_s[24];
    int64_t from, upto = 0, n_added = 0, n_seen = 0;
    hr_subs_task t = {.shards = 1};
    redisReply *reply;
    int rc;

    rc = hr_subs_lock(r, id, o->token, o->lock_ms, errstr, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : HR_SUBS_BUSY;
    from = hr_subs_synced(r, id, errstr, errlen);
    if (from < 0) {
        rc = -1;
        goto done;
    }
    rc = hr_subs_epoch_end(m, id, claimed, &upto, &t, errstr, errlen);
    if (rc != 0) {
        rc = rc < 0 ? -1 : rc == 1 ? HR_SUBS_CLAIMED : HR_SUBS_BUSY;
        goto done;
    }
    if (t.series_id > 0 && hr_subs_series_begin(r, id, &t, &from, errstr, errlen) < 0) {
        rc = -1;
        goto done;
    }
    rc = hr_subs_fill(m, r, id, t.shards, o, HR_SUBS_EPOCHS, from, upto, &n_added, &n_seen, errstr,
                      errlen);
    /* The series' subscribers after the task's own rows: the delta keeps a
     * uid that has a row of the task, which must be visible by then. */
    if (rc == HR_SUBS_DONE && t.series_id > 0)
        rc = claimed ? hr_subs_sync_series(m, r, id, &t, o, &n_added, &n_seen, errstr, errlen)
                     : hr_subs_prefill_series(m, r, id, &t, o, &n_added, &n_seen, errstr, errlen);
    if (rc != HR_SUBS_DONE)
        goto done;
    /* Nothing may be added after this but the set's own progress: the
     * synced mark, then (after the claim) every shard's seq, which makes
     * every later refill_add.lua refuse and lets the first chunk go. */
    snprintf(upto_s, sizeof upto_s, "%" PRId64, upto);
    reply =
        hr_redis_cmdf(r, errstr, errlen, "SET %s %s",
                      hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_SYNCED), upto_s);
    for (int k = 0; reply != NULL && claimed && k < (t.shards > 1 ? t.shards : 1); k++) {
        freeReplyObject(reply);
        reply = hr_redis_cmdf(r, errstr, errlen, "SET %s 0 NX",
                              hr_key_shard(hr_redis_prefix(r), key, sizeof key, id, k, HR_KEY_SEQ));
    }
    if (reply == NULL) {
        rc = -1;
        goto done;
    }
    freeReplyObject(reply);
done:
    return hr_subs_end(r, id, o, rc, n_added, n_seen, added, seen);
}

int64_t hr_subs_count(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    int64_t n = -1;

    if (hr_mysql_query(m, "SELECT " HR_SUBS_COUNT("t") " FROM push_task t WHERE t.id = ?", p, 1,
                       &rows, errstr, errlen) == 0)
        n = rows->nrows == 1 && hr_mysql_cell(rows, 0, 0) != NULL
                ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10)
                : 0;
    hr_mysql_rows_free(rows);
    return n;
}

int hr_subs_forget_synced(hr_redis *r, int64_t id, char *errstr, size_t errlen)
{
    char key[256], series[256];
    redisReply *reply;

    reply =
        hr_redis_cmdf(r, errstr, errlen, "DEL %s %s",
                      hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_SYNCED),
                      hr_key_task(hr_redis_prefix(r), series, sizeof series, id, HR_KEY_SERIES));
    freeReplyObject(reply);
    return reply != NULL ? 0 : -1;
}

const char *hr_subs_result_str(int result)
{
    switch (result) {
    case HR_SUBS_DONE:
        return "done";
    case HR_SUBS_BUSY:
        return "another party holds the prepare lock";
    case HR_SUBS_STARTED:
        return "chunking started before the refill ended";
    case HR_SUBS_LOCK_LOST:
        return "the prepare lock expired and was taken during the refill";
    case HR_SUBS_STOPPED:
        return "stopped";
    case HR_SUBS_CLAIMED:
        return "the task was claimed meanwhile";
    }
    return "error";
}
