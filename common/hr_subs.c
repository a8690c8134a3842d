/* hr_subs: the refill of a task's subscriber set and its prepare lock (see
 * hr_subs.h).  One implementation for the dispatcher's prepare and
 * `heraldctl recover`, so both renew the lock, respect the seq guard and
 * report an incomplete refill the same way. */
#include "hr_subs.h"

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

/* Which rows a fill reads, by keyset pages.  The uid-ordered queries select
 * uid only; the epoch-ordered one selects uid, epoch (its cursor is both). */
typedef enum hr_subs_pages { HR_SUBS_ALL, HR_SUBS_UNDELIVERED, HR_SUBS_EPOCHS } hr_subs_pages;

static const char *const hr_subs_sql[] = {
    [HR_SUBS_ALL] = "SELECT uid FROM push_subscription WHERE task_id = ? AND uid > ? "
                    "ORDER BY uid LIMIT ?",
    /* d.day: the task's partition alone, not one probe per partition. */
    [HR_SUBS_UNDELIVERED] = "SELECT s.uid FROM push_subscription s WHERE s.task_id = ? "
                            "AND s.uid > ? AND NOT EXISTS (SELECT 1 FROM push_delivery d "
                            "WHERE d.task_id = s.task_id AND d.day = ? AND d.uid = s.uid AND "
                            "d.status IN ('sent', 'failed', 'throttled', 'pulled', "
                            "'unregistered', 'opted_out', 'suppressed')) ORDER BY s.uid LIMIT ?",
    /* The (task_id, epoch) index holds uid too (InnoDB appends the primary
     * key), so this is one range read in (epoch, uid) order. */
    [HR_SUBS_EPOCHS] = "SELECT uid, epoch FROM push_subscription WHERE task_id = ? "
                       "AND ((epoch = ? AND uid > ?) OR epoch > ?) AND epoch < ? "
                       "ORDER BY epoch, uid LIMIT ?",
};

/* An integer reply of refill_add.lua or lease_renew.lua (freed): its
 * value; -1 for any other answer (refill_add's "chunking started"); -2
 * when there is no reply (ERRSTR). */
static int64_t hr_subs_reply_added(redisReply *reply)
{
    int64_t v;

    if (reply == NULL)
        return -2;
    v = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    freeReplyObject(reply);
    return v;
}

/* refill_add.lua for the N uids UIDS of shard SHARD of task ID (ARGV has
 * room for 3 + N).  The number added, or -1 when chunking started (the
 * shard's seq exists), or -2 on a Redis error (ERRSTR). */
static long long hr_subs_add(hr_redis *r, int64_t id, int shard, const char **uids, size_t n,
                             const char **argv, char *errstr, size_t errlen)
{
    char keys[3][256];
    argv[0] = hr_key_shard(hr_redis_prefix(r), keys[0], sizeof keys[0], id, shard, HR_KEY_SUBS);
    argv[1] = hr_key_shard(hr_redis_prefix(r), keys[1], sizeof keys[1], id, shard, HR_KEY_PULLED);
    argv[2] = hr_key_shard(hr_redis_prefix(r), keys[2], sizeof keys[2], id, shard, HR_KEY_SEQ);
    memcpy(argv + 3, uids, n * sizeof *argv);
    return hr_subs_reply_added(
        hr_redis_eval(r, HR_LUA_REFILL_ADD, 3, 3 + (int)n, argv, NULL, errstr, errlen));
}

int hr_subs_add_sharded(hr_redis *r, int64_t id, int shards, const char **uids, size_t n,
                        int64_t *added, char *errstr, size_t errlen)
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
        got = hr_subs_add(r, id, k, sorted + bounds[k], bounds[k + 1] - bounds[k], argv, errstr,
                          errlen);
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

/* Adds the rows PAGES selects (for HR_SUBS_EPOCHS those of epochs
 * FROM..UPTO-1) to the sets of task ID's SHARDS shards, holding the prepare
 * lock that the caller took (renewed before every batch).  An
 * hr_subs_result, or -1 (ERRSTR). */
static int hr_subs_fill(hr_mysql *m, hr_redis *r, int64_t id, int shards,
                        const hr_subs_refill_opts *o, hr_subs_pages pages, int64_t from,
                        int64_t upto, int64_t *added, int64_t *seen, char *errstr, size_t errlen)
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
        const hr_mysql_param *p = pages == HR_SUBS_EPOCHS        ? pe
                                  : pages == HR_SUBS_UNDELIVERED ? pd
                                                                 : pu;
        size_t np = pages == HR_SUBS_EPOCHS ? 6 : pages == HR_SUBS_UNDELIVERED ? 4 : 3;
        int64_t got;

        if (o->stop != NULL && atomic_load(o->stop)) {
            rc = HR_SUBS_STOPPED;
            goto done;
        }
        if (hr_mysql_query(m, hr_subs_sql[pages], p, np, &rows, errstr, errlen) < 0) {
            rc = -1;
            goto done;
        }
        if (rows->nrows == 0)
            break;
        /* The MySQL page may have taken long: the lock must still be ours
         * before anything is added under it. */
        rc = hr_subs_renew(r, id, o, errstr, errlen);
        if (rc <= 0) {
            rc = rc < 0 ? -1 : HR_SUBS_LOCK_LOST;
            goto done;
        }
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

/* The epoch a sync reads up to (exclusive).  Before the claim: subs_epoch
 * is bumped first, which waits for the inserts in flight (the guard trigger
 * share-locks the task row) and stamps later ones with the new epoch, so
 * every row of an older epoch is committed and visible.  After the claim no
 * row can be added, so everything up to the current epoch is read.
 * 0 (*UPTO set), 1 when CLAIMED is false but the task is no longer
 * scheduled (its owner's reconciliation does the rest), 2 when an open
 * transaction kept the task row locked for a second, or -1. */
static int hr_subs_epoch_end(hr_mysql *m, int64_t id, bool claimed, int64_t *upto, int *shards,
                             char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    uint64_t affected = 0;
    unsigned errnum = 0;

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
    if (hr_mysql_query(m, "SELECT subs_epoch, shards FROM push_task WHERE id = ?", p, 1, &rows,
                       errstr, errlen) < 0)
        return -1;
    if (rows->nrows != 1) {
        hr_mysql_rows_free(rows);
        return 1;
    }
    *upto = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) + (claimed ? 1 : 0);
    *shards = atoi(hr_mysql_cell(rows, 0, 1));
    hr_mysql_rows_free(rows);
    return 0;
}

int hr_subs_sync(hr_mysql *m, hr_redis *r, int64_t id, const hr_subs_refill_opts *o, bool claimed,
                 int64_t *added, int64_t *seen, char *errstr, size_t errlen)
{
    char key[256], upto_s[24];
    int64_t from, upto = 0, n_added = 0, n_seen = 0;
    redisReply *reply;
    int rc, shards = 1;

    rc = hr_subs_lock(r, id, o->token, o->lock_ms, errstr, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : HR_SUBS_BUSY;
    from = hr_subs_synced(r, id, errstr, errlen);
    if (from < 0) {
        rc = -1;
        goto done;
    }
    rc = hr_subs_epoch_end(m, id, claimed, &upto, &shards, errstr, errlen);
    if (rc != 0) {
        rc = rc < 0 ? -1 : rc == 1 ? HR_SUBS_CLAIMED : HR_SUBS_BUSY;
        goto done;
    }
    rc = hr_subs_fill(m, r, id, shards, o, HR_SUBS_EPOCHS, from, upto, &n_added, &n_seen, errstr,
                      errlen);
    if (rc != HR_SUBS_DONE)
        goto done;
    /* Nothing may be added after this but the set's own progress: the
     * synced mark, then (after the claim) every shard's seq, which makes
     * every later refill_add.lua refuse and lets the first chunk go. */
    snprintf(upto_s, sizeof upto_s, "%" PRId64, upto);
    reply =
        hr_redis_cmdf(r, errstr, errlen, "SET %s %s",
                      hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_SYNCED), upto_s);
    for (int k = 0; reply != NULL && claimed && k < (shards > 1 ? shards : 1); k++) {
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

int hr_subs_forget_synced(hr_redis *r, int64_t id, char *errstr, size_t errlen)
{
    char key[256];
    redisReply *reply;

    reply = hr_redis_cmdf(r, errstr, errlen, "DEL %s",
                          hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_SYNCED));
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

/* What hr_subs_sync_claimed knows of one item between its steps. */
typedef struct hr_subs_at {
    bool locked;        /* we took its prepare lock: released at the end */
    bool alone;         /* synced by hr_subs_sync on its own */
    int64_t from, upto; /* the epochs it reads, [from, upto) */
    int64_t want;       /* rows of those epochs (the batch's count) */
    bool paged;         /* too many rows for the batch's read: its own pages */
    size_t row, nrows;  /* its rows in the batch's read */
} hr_subs_at;

/* The items of one batch and their steps (hr_subs_sync_claimed). */
typedef struct hr_subs_batch {
    hr_subs_item *items;
    hr_subs_at *at;
    size_t n;
} hr_subs_batch;

/* Gives item I its outcome RC (with ERR when RC is -1). */
static void hr_subs_item_end(hr_subs_batch *b, size_t i, int rc, const char *err)
{
    b->items[i].result = rc;
    if (rc < 0)
        snprintf(b->items[i].err, sizeof b->items[i].err, "%s", err);
}

/* Whether item I still waits for its outcome and does not sync alone. */
static bool hr_subs_open(const hr_subs_batch *b, size_t i)
{
    return b->items[i].result == HR_SUBS_DONE && !b->at[i].alone;
}

/* Every open item fails with ERR (a round trip of the whole batch failed). */
static void hr_subs_fail_open(hr_subs_batch *b, const char *err)
{
    for (size_t i = 0; i < b->n; i++)
        if (hr_subs_open(b, i))
            hr_subs_item_end(b, i, -1, err);
}

/* Step 1, one round trip: each prepare lock (SET NX) and the synced mark
 * behind it.  A lock found held (a retried SET of ours, or another party)
 * makes the item sync alone, which tells the two apart. */
static int hr_subs_b_lock(hr_redis *r, hr_pipe *pipe, hr_subs_batch *b,
                          const hr_subs_refill_opts *o, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX], ms[24];
    size_t i;

    snprintf(ms, sizeof ms, "%d", o->lock_ms);
    for (i = 0; i < b->n; i++) {
        const char *set[] = {"SET", key, o->token, "NX", "PX", ms}, *get[] = {"GET", key};

        hr_key_task(hr_redis_prefix(r), key, sizeof key, b->items[i].id, HR_KEY_PREP);
        if (hr_pipe_cmd(pipe, 6, set, NULL) < 0)
            goto oom;
        hr_key_task(hr_redis_prefix(r), key, sizeof key, b->items[i].id, HR_KEY_SYNCED);
        if (hr_pipe_cmd(pipe, 2, get, NULL) < 0)
            goto oom;
    }
    if (hr_pipe_exec(pipe, errstr, errlen) < 0)
        return -1;
    for (i = 0; i < b->n; i++) {
        redisReply *lock = hr_pipe_reply(pipe, 2 * i, errstr, errlen);
        redisReply *synced = lock != NULL ? hr_pipe_reply(pipe, 2 * i + 1, errstr, errlen) : NULL;

        if (lock == NULL || synced == NULL) {
            freeReplyObject(lock);
            return -1;
        }
        b->at[i].locked = lock->type == REDIS_REPLY_STATUS;
        b->at[i].alone = !b->at[i].locked;
        b->at[i].from = synced->type == REDIS_REPLY_STRING ? strtoll(synced->str, NULL, 10) : 0;
        if (b->at[i].from < 0)
            b->at[i].from = 0;
        freeReplyObject(lock);
        freeReplyObject(synced);
    }
    return 0;
oom:
    snprintf(errstr, errlen, "out of memory");
    return -1;
}

/* Step 2's answer for one task row: its epoch, shards and the rows to
 * read.  Batch row I is item AT[I]. */
typedef struct hr_subs_epochs {
    hr_subs_batch *b;
    const size_t *at;
    bool *found;
} hr_subs_epochs;

static bool hr_subs_epochs_row(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row)
{
    hr_subs_epochs *e = ctx;
    hr_subs_at *at = &e->b->at[e->at[i]];

    e->found[e->at[i]] = true;
    /* After the claim no row can be added: everything up to the current
     * epoch is read. */
    at->upto = strtoll(hr_mysql_cell(rows, row, 1), NULL, 10) + 1;
    at->want = strtoll(hr_mysql_cell(rows, row, 3), NULL, 10);
    /* A task of several shards splits its rows by shard: hr_subs_sync. */
    if (atoi(hr_mysql_cell(rows, row, 2)) > 1)
        at->alone = true;
    return true;
}

/* Step 2, one statement: every open item's subs_epoch and shards, and how
 * many subscriptions its epochs hold.  A task without a row was deleted:
 * HR_SUBS_CLAIMED, as hr_subs_sync answers. */
static int hr_subs_b_epochs(hr_mysql *m, hr_subs_batch *b, char *errstr, size_t errlen)
{
    int64_t *cells = calloc(b->n * 2, sizeof *cells);
    size_t *at = calloc(b->n, sizeof *at);
    bool *found = calloc(b->n, sizeof *found);
    size_t i, k = 0;
    int rc = -1;

    if (cells == NULL || at == NULL || found == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (i = 0; i < b->n; i++)
        if (hr_subs_open(b, i)) {
            at[k] = i;
            cells[2 * k] = b->items[i].id;
            cells[2 * k++ + 1] = b->at[i].from;
        }
    if (k > 0 &&
        hr_batch_select(m,
                        "SELECT t.id, t.subs_epoch, t.shards, (SELECT COUNT(*) FROM "
                        "push_subscription s WHERE s.task_id = t.id AND s.epoch >= j.sfrom "
                        "AND s.epoch <= t.subs_epoch) FROM JSON_TABLE(?, '$[*]' COLUMNS "
                        "(task BIGINT PATH '$[0]', sfrom BIGINT PATH '$[1]')) j "
                        "STRAIGHT_JOIN push_task t ON t.id = j.task",
                        &(hr_batch){cells, k, 2}, NULL, 0, 1, hr_subs_epochs_row,
                        &(hr_subs_epochs){b, at, found}, errstr, errlen) < 0)
        goto done;
    for (i = 0; i < k; i++)
        if (!found[at[i]])
            hr_subs_item_end(b, at[i], HR_SUBS_CLAIMED, NULL);
    rc = 0;
done:
    free(cells);
    free(at);
    free(found);
    return rc;
}

/* Step 3, one statement: the rows of the open items whose epochs hold
 * any, as long as they add up to at most o->batch (the others read their
 * own pages, hr_subs_b_alone), into *ROWS, by task.  0 or -1. */
static int hr_subs_b_read(hr_mysql *m, hr_subs_batch *b, const hr_subs_refill_opts *o,
                          hr_mysql_rows **rows, char *errstr, size_t errlen)
{
    int64_t *cells = calloc(b->n * 3, sizeof *cells), sum = 0;
    size_t i, k = 0, row = 0;
    int rc = -1;

    if (cells == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (i = 0; i < b->n; i++) {
        if (!hr_subs_open(b, i) || b->at[i].want == 0)
            continue;
        if (sum + b->at[i].want > o->batch) {
            b->at[i].paged = true;
            continue;
        }
        sum += b->at[i].want;
        cells[3 * k] = b->items[i].id;
        cells[3 * k + 1] = b->at[i].from;
        cells[3 * k++ + 2] = b->at[i].upto;
    }
    if (k == 0) {
        rc = 0;
        goto done;
    }
    if (hr_batch_query(m,
                       "SELECT s.task_id, s.uid FROM JSON_TABLE(?, '$[*]' COLUMNS "
                       "(task BIGINT PATH '$[0]', sfrom BIGINT PATH '$[1]', "
                       "upto BIGINT PATH '$[2]')) j STRAIGHT_JOIN push_subscription s "
                       "ON s.task_id = j.task AND s.epoch >= j.sfrom AND s.epoch < j.upto "
                       "ORDER BY s.task_id",
                       &(hr_batch){cells, k, 3}, NULL, 0, rows, errstr, errlen) < 0)
        goto done;
    /* The items are sorted by id, the rows by task: one walk pairs them. */
    for (i = 0; i < b->n; i++) {
        while (row < (*rows)->nrows &&
               strtoll(hr_mysql_cell(*rows, row, 0), NULL, 10) < b->items[i].id)
            row++;
        b->at[i].row = row;
        while (row < (*rows)->nrows &&
               strtoll(hr_mysql_cell(*rows, row, 0), NULL, 10) == b->items[i].id)
            row++;
        b->at[i].nrows = row - b->at[i].row;
    }
    rc = 0;
done:
    free(cells);
    return rc;
}

/* Steps 4 and 5, a round trip each: the items with rows read renew their
 * lock (the read may have taken long: the lock must still be ours before
 * anything is added under it), then refill_add.lua adds their rows.  0,
 * or -1 when a round trip failed (the open items fail). */
static int hr_subs_b_add(hr_redis *r, hr_pipe *pipe, hr_subs_batch *b, const hr_subs_refill_opts *o,
                         const hr_mysql_rows *rows, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(r);
    char keys[3][HR_KEY_MAX], ms[24];
    const char **argv = NULL;
    size_t i, at = 0, most = 0;
    int rc = -1;

    snprintf(ms, sizeof ms, "%d", o->lock_ms);
    hr_pipe_reset(pipe);
    for (i = 0; i < b->n; i++) {
        const char *renew[] = {keys[0], o->token, ms};

        if (!hr_subs_open(b, i) || b->at[i].nrows == 0)
            continue;
        most = b->at[i].nrows > most ? b->at[i].nrows : most;
        hr_key_task(prefix, keys[0], sizeof keys[0], b->items[i].id, HR_KEY_PREP);
        if (hr_pipe_eval(pipe, HR_LUA_LEASE_RENEW, 1, 3, renew, NULL) < 0)
            goto oom;
    }
    if (most == 0)
        return 0;
    if (hr_pipe_exec(pipe, errstr, errlen) < 0)
        return -1;
    for (i = 0; i < b->n; i++) {
        int64_t held;

        if (!hr_subs_open(b, i) || b->at[i].nrows == 0)
            continue;
        held = hr_subs_reply_added(hr_pipe_reply(pipe, at++, errstr, errlen));
        if (held == -2)
            hr_subs_item_end(b, i, -1, errstr);
        else if (held != 1)
            hr_subs_item_end(b, i, HR_SUBS_LOCK_LOST, NULL);
    }
    argv = malloc((most + 3) * sizeof *argv);
    if (argv == NULL)
        goto oom;
    hr_pipe_reset(pipe);
    for (i = 0; i < b->n; i++) {
        if (!hr_subs_open(b, i) || b->at[i].nrows == 0)
            continue;
        argv[0] = hr_key_shard(prefix, keys[0], sizeof keys[0], b->items[i].id, 0, HR_KEY_SUBS);
        argv[1] = hr_key_shard(prefix, keys[1], sizeof keys[1], b->items[i].id, 0, HR_KEY_PULLED);
        argv[2] = hr_key_shard(prefix, keys[2], sizeof keys[2], b->items[i].id, 0, HR_KEY_SEQ);
        for (size_t k = 0; k < b->at[i].nrows; k++)
            argv[3 + k] = hr_mysql_cell(rows, b->at[i].row + k, 1);
        if (hr_pipe_eval(pipe, HR_LUA_REFILL_ADD, 3, 3 + (int)b->at[i].nrows, argv, NULL) < 0)
            goto oom;
    }
    if (hr_pipe_count(pipe) > 0 && hr_pipe_exec(pipe, errstr, errlen) < 0)
        goto done;
    for (i = 0, at = 0; i < b->n; i++) {
        int64_t got;

        if (!hr_subs_open(b, i) || b->at[i].nrows == 0)
            continue;
        /* -1 is refill_add's "chunking started", any other failure -2. */
        got = hr_subs_reply_added(hr_pipe_reply(pipe, at++, errstr, errlen));
        b->items[i].seen = (int64_t)b->at[i].nrows;
        if (got == -2)
            hr_subs_item_end(b, i, -1, errstr);
        else if (got < 0)
            hr_subs_item_end(b, i, HR_SUBS_STARTED, NULL);
        else
            b->items[i].added = got;
    }
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    free(argv);
    return rc;
}

/* Step 6, one round trip: the open items' synced mark and seq (after
 * which nothing is added to their sets any more, and the first chunk may
 * go), then every lock we took and did not lose is released. */
static int hr_subs_b_end(hr_redis *r, hr_pipe *pipe, hr_subs_batch *b, const hr_subs_refill_opts *o,
                         char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(r);
    char key[HR_KEY_MAX], upto[24];
    size_t i, at = 0;

    hr_pipe_reset(pipe);
    for (i = 0; i < b->n; i++) {
        const char *synced[] = {"SET", key, upto}, *seq[] = {"SET", key, "0", "NX"};
        const char *release[] = {key, o->token};

        if (hr_subs_open(b, i)) {
            snprintf(upto, sizeof upto, "%" PRId64, b->at[i].upto);
            hr_key_task(prefix, key, sizeof key, b->items[i].id, HR_KEY_SYNCED);
            if (hr_pipe_cmd(pipe, 3, synced, NULL) < 0)
                goto oom;
            hr_key_shard(prefix, key, sizeof key, b->items[i].id, 0, HR_KEY_SEQ);
            if (hr_pipe_cmd(pipe, 4, seq, NULL) < 0)
                goto oom;
        }
        if (!b->at[i].locked || b->at[i].alone || b->items[i].result == HR_SUBS_LOCK_LOST)
            continue;
        hr_key_task(prefix, key, sizeof key, b->items[i].id, HR_KEY_PREP);
        if (hr_pipe_eval(pipe, HR_LUA_LEASE_RELEASE, 1, 2, release, NULL) < 0)
            goto oom;
    }
    /* A failed release expires by itself after lock_ms. */
    if (hr_pipe_exec(pipe, errstr, errlen) < 0)
        return -1;
    for (i = 0; i < b->n; i++) {
        bool open = hr_subs_open(b, i);

        for (int k = 0; open && k < 2; k++) {
            redisReply *reply = hr_pipe_reply(pipe, at++, errstr, errlen);

            if (reply == NULL)
                hr_subs_item_end(b, i, -1, errstr);
            freeReplyObject(reply);
        }
        if (b->at[i].locked && !b->at[i].alone && b->items[i].result != HR_SUBS_LOCK_LOST)
            freeReplyObject(hr_pipe_reply(pipe, at++, errstr, errlen));
    }
    return 0;
oom:
    snprintf(errstr, errlen, "out of memory");
    return -1;
}

static int hr_subs_item_cmp(const void *a, const void *b)
{
    int64_t x = ((const hr_subs_item *)a)->id, y = ((const hr_subs_item *)b)->id;

    return (x > y) - (x < y);
}

void hr_subs_sync_claimed(hr_mysql *m, hr_redis *r, hr_subs_item *items, size_t n,
                          const hr_subs_refill_opts *o)
{
    hr_subs_batch b = {.items = items, .n = n, .at = calloc(n > 0 ? n : 1, sizeof *b.at)};
    hr_pipe *pipe = hr_pipe_new(r);
    hr_mysql_rows *rows = NULL;
    char err[256];
    size_t i;

    /* By id: the batch's read answers the rows by task. */
    if (n > 0)
        qsort(items, n, sizeof *items, hr_subs_item_cmp);
    for (i = 0; i < n; i++)
        items[i] = (hr_subs_item){.id = items[i].id, .result = HR_SUBS_DONE};
    if (b.at == NULL || pipe == NULL) {
        snprintf(err, sizeof err, "out of memory");
        hr_subs_fail_open(&b, err);
        goto done;
    }
    if (hr_subs_b_lock(r, pipe, &b, o, err, sizeof err) < 0) {
        /* Which SETs ran is unknown: the locks expire by themselves. */
        hr_subs_fail_open(&b, err);
        goto done;
    }
    if (hr_subs_b_epochs(m, &b, err, sizeof err) < 0 ||
        hr_subs_b_read(m, &b, o, &rows, err, sizeof err) < 0 ||
        hr_subs_b_add(r, pipe, &b, o, rows, err, sizeof err) < 0)
        hr_subs_fail_open(&b, err);
    for (i = 0; i < n; i++) {
        hr_subs_item *it = &items[i];

        if (o->stop != NULL && atomic_load(o->stop) && hr_subs_open(&b, i))
            hr_subs_item_end(&b, i, HR_SUBS_STOPPED, NULL);
        else if (hr_subs_open(&b, i) && b.at[i].paged)
            it->result = hr_subs_fill(m, r, it->id, 1, o, HR_SUBS_EPOCHS, b.at[i].from,
                                      b.at[i].upto, &it->added, &it->seen, it->err, sizeof it->err);
    }
    if (hr_subs_b_end(r, pipe, &b, o, err, sizeof err) < 0)
        hr_subs_fail_open(&b, err);
    /* A lock found taken (ours from a retried SET, or another party's), a
     * task of several shards: the single sync, which tells and handles
     * them. */
    for (i = 0; i < n; i++)
        if (b.at[i].alone)
            items[i].result = hr_subs_sync(m, r, items[i].id, o, true, &items[i].added,
                                           &items[i].seen, items[i].err, sizeof items[i].err);
done:
    hr_mysql_rows_free(rows);
    hr_pipe_free(pipe);
    free(b.at);
}
