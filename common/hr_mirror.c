/* hr_mirror: a book written with raw SQL reaches Redis: under a lock, the
 * uids the triggers recorded past the synced mark (or every uid when Redis
 * lost the mark) have their keys rewritten page by page (see
 * hr_mirror.h). */
#include "hr_mirror.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_keys.h"

#define HR_MIRROR_LOCK_MS 60000
#define HR_MIRROR_SYNCED_TTL_S 86400

void hr_mirror_refused(hr_mirror_result *res, int64_t uid, const char *reason)
{
    if (res != NULL && res->refused++ == 0)
        snprintf(res->first_refused, sizeof res->first_refused, "uid=%" PRId64 " %.100s", uid,
                 reason);
}

int hr_mirror_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

size_t hr_mirror_uniq(int64_t *uids, size_t n)
{
    size_t k = 0;

    qsort(uids, n, sizeof *uids, hr_mirror_cmp_i64);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || uids[k - 1] != uids[i])
            uids[k++] = uids[i];
    return k;
}

/* The sync lock: SET NX PX for TOKEN (1 taken, 0 busy), or renewed
 * (RENEW: 1 still ours, 0 lost); -1 on a Redis error. */
static int hr_mirror_lock(const hr_mirror *mr, hr_redis *r, const char *token, bool renew,
                          char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX], ms[16];
    const char *argv[3] = {key, token, ms};
    redisReply *reply;
    int rc;

    mr->lock_key(hr_redis_prefix(r), key, sizeof key);
    snprintf(ms, sizeof ms, "%d", HR_MIRROR_LOCK_MS);
    if (renew)
        reply = hr_redis_eval(r, HR_LUA_LEASE_RENEW, 1, 3, argv, NULL, errstr, errlen);
    else
        reply =
            hr_redis_cmdf(r, errstr, errlen, "SET %s %s NX PX %d", key, token, HR_MIRROR_LOCK_MS);
    if (reply == NULL)
        return -1;
    rc = renew ? reply->type == REDIS_REPLY_INTEGER && reply->integer == 1
               : reply->type == REDIS_REPLY_STATUS;
    freeReplyObject(reply);
    return rc;
}

/* The first epoch Redis does not hold (the synced mark), 0 when missing. */
static int hr_mirror_mark(const hr_mirror *mr, hr_redis *r, int64_t *from, char *errstr,
                          size_t errlen)
{
    char key[HR_KEY_MAX];
    redisReply *reply;

    reply = hr_redis_cmdf(r, errstr, errlen, "GET %s",
                          mr->synced_key(hr_redis_prefix(r), key, sizeof key));
    if (reply == NULL)
        return -1;
    *from = reply->type == REDIS_REPLY_STRING ? strtoll(reply->str, NULL, 10) : 0;
    freeReplyObject(reply);
    return 0;
}

int hr_mirror_synced(const hr_mirror *mr, hr_redis *r, char *errstr, size_t errlen)
{
    int64_t from = 0;

    if (hr_mirror_mark(mr, r, &from, errstr, errlen) != 0)
        return -1;
    return from > 0;
}

/* Bumps the epoch, which waits (a second at most) for the writers whose
 * triggers read the old one; *UPTO gets the new epoch: every change
 * stamped below it is committed.  0, HR_MIRROR_BUSY or -1. */
static int hr_mirror_bump(const hr_mirror *mr, hr_mysql *m, int64_t *upto, char *errstr,
                          size_t errlen)
{
    char sql[256];
    hr_mysql_rows *rows = NULL;
    unsigned errnum = 0;

    snprintf(sql, sizeof sql, "SET STATEMENT innodb_lock_wait_timeout = 1 FOR %s", mr->bump_sql);
    if (hr_mysql_exec(m, sql, NULL, 0, NULL, NULL, &errnum, errstr, errlen) != 0)
        return errnum == HR_MYSQL_ER_LOCK_WAIT_TIMEOUT ? HR_MIRROR_BUSY : -1;
    if (hr_mysql_query(m, mr->epoch_sql, NULL, 0, &rows, errstr, errlen) != 0)
        return -1;
    *upto = rows->nrows == 1 ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : 0;
    hr_mysql_rows_free(rows);
    return 0;
}

/* Rewrites, by keyset pages of BATCH, the keys of every uid the book holds
 * (ALL) or of the uids of the change rows of epochs FROM..UPTO-1, renewing
 * the sync lock before each page's writes.  UIDS has room for BATCH.  0,
 * HR_MIRROR_BUSY (lock lost) or -1. */
static int hr_mirror_pages(const hr_mirror *mr, hr_mysql *m, hr_redis *r, const char *token,
                           int batch, bool all, int64_t from, int64_t upto, int64_t *uids,
                           const void *ctx, hr_mirror_result *res, char *errstr, size_t errlen)
{
    int64_t cursor = 0;

    for (;;) {
        const hr_mysql_param pf[] = {HR_P_I64(cursor), HR_P_I64(batch)};
        const hr_mysql_param pc[] = {HR_P_I64(from), HR_P_I64(upto), HR_P_I64(cursor),
                                     HR_P_I64(batch)};
        hr_mysql_rows *rows = NULL;
        size_t n;
        int rc;

        /* Column 0 is the page's cursor, column 1 the uid. */
        rc = all ? hr_mysql_query(m, mr->all_sql, pf, 2, &rows, errstr, errlen)
                 : hr_mysql_query(m, mr->changes_sql, pc, 4, &rows, errstr, errlen);
        if (rc != 0)
            return -1;
        n = rows->nrows;
        for (size_t i = 0; i < n; i++)
            uids[i] = strtoll(hr_mysql_cell(rows, i, 1), NULL, 10);
        if (n > 0)
            cursor = strtoll(hr_mysql_cell(rows, n - 1, 0), NULL, 10);
        hr_mysql_rows_free(rows);
        if (n == 0)
            return 0;
        rc = hr_mirror_lock(mr, r, token, true, errstr, errlen);
        if (rc <= 0)
            return rc < 0 ? -1 : HR_MIRROR_BUSY;
        if (mr->rewrite(m, r, uids, n, ctx, res, errstr, errlen) != 0)
            return -1;
        if (n < (size_t)batch)
            return 0;
    }
}

int hr_mirror_rewrite(const hr_mirror *mr, hr_mysql *m, hr_redis *r, int64_t *uids, size_t n,
                      size_t batch, const void *ctx, char *errstr, size_t errlen)
{
    for (size_t at = 0; at < n; at += batch)
        if (mr->rewrite(m, r, uids + at, n - at < batch ? n - at : batch, ctx, NULL, errstr,
                        errlen) != 0)
            return -1;
    return 0;
}

int hr_mirror_rewrite_one(const hr_mirror *mr, hr_mysql *m, hr_redis *r, int64_t uid,
                          const void *ctx, char *errstr, size_t errlen)
{
    return mr->rewrite(m, r, &uid, 1, ctx, NULL, errstr, errlen);
}

/* The book's state's count of rewrites begun into WRITES ("0": none). */
static int hr_mirror_writes(const hr_mirror *mr, hr_redis *r, char *writes, size_t len,
                            char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX];
    redisReply *reply = hr_redis_cmdf(r, errstr, errlen, "HGET %s writes",
                                      mr->state_key(hr_redis_prefix(r), key, sizeof key));

    if (reply == NULL)
        return -1;
    snprintf(writes, len, "%s", reply->type == REDIS_REPLY_STRING ? reply->str : "0");
    freeReplyObject(reply);
    return 0;
}

/* Step 6: when MySQL holds nothing of the book, book_empty.lua records it
 * at the count WRITES read before. */
static int hr_mirror_empty(const hr_mirror *mr, hr_mysql *m, hr_redis *r, const char *writes,
                           char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX];
    const char *argv[2] = {mr->state_key(hr_redis_prefix(r), key, sizeof key), writes};
    hr_mysql_rows *rows = NULL;
    redisReply *reply;
    bool empty;

    if (hr_mysql_query(m, mr->empty_sql, NULL, 0, &rows, errstr, errlen) != 0)
        return -1;
    empty = rows->nrows == 1 && strcmp(hr_mysql_cell(rows, 0, 0), "1") == 0;
    hr_mysql_rows_free(rows);
    if (!empty)
        return 0;
    reply = hr_redis_eval(r, HR_LUA_BOOK_EMPTY, 1, 2, argv, NULL, errstr, errlen);
    if (reply == NULL)
        return -1;
    freeReplyObject(reply);
    return 0;
}

int hr_mirror_sync(const hr_mirror *mr, hr_mysql *m, hr_redis *r, const char *token, int batch,
                   const void *ctx, hr_mirror_result *res, char *errstr, size_t errlen)
{
    int64_t from = 0, upto = 0, *uids = NULL;
    char key[HR_KEY_MAX], upto_s[24], e2[128], writes[24];
    redisReply *reply;
    int rc;

    memset(res, 0, sizeof *res);
    rc = hr_mirror_lock(mr, r, token, false, errstr, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : HR_MIRROR_BUSY;
    uids = malloc((size_t)batch * sizeof *uids);
    if (uids == NULL) {
        snprintf(errstr, errlen, "out of memory");
        rc = -1;
        goto done;
    }
    if ((rc = hr_mirror_mark(mr, r, &from, errstr, errlen)) != 0 ||
        (mr->state_key != NULL &&
         (rc = hr_mirror_writes(mr, r, writes, sizeof writes, errstr, errlen)) != 0) ||
        (rc = hr_mirror_bump(mr, m, &upto, errstr, errlen)) != 0)
        goto done;
    res->full = from <= 0;
    /* A full reload also rewrites the uids of every change row kept, so
     * that a uid whose last row went while Redis had no mark does not keep
     * a stale key. */
    if ((res->full && (rc = hr_mirror_pages(mr, m, r, token, batch, true, 0, upto, uids, ctx, res,
                                            errstr, errlen)) != 0) ||
        (rc = hr_mirror_pages(mr, m, r, token, batch, false, from, upto, uids, ctx, res, errstr,
                              errlen)) != 0)
        goto done;
    /* The mark expires a day after the last sync, well inside the week
     * the change rows are kept. */
    snprintf(upto_s, sizeof upto_s, "%" PRId64, upto);
    reply = hr_redis_cmdf(r, errstr, errlen, "SET %s %s EX %d",
                          mr->synced_key(hr_redis_prefix(r), key, sizeof key), upto_s,
                          HR_MIRROR_SYNCED_TTL_S);
    if (reply == NULL) {
        rc = -1;
        goto done;
    }
    freeReplyObject(reply);
    /* Not the rows below UPTO: a database may serve several Redis (a
     * staging copy, the tests' prefixes), each with its own mark. */
    rc = hr_mysql_exec(m, mr->prune_sql, NULL, 0, NULL, NULL, NULL, errstr, errlen);
    if (rc == 0 && mr->state_key != NULL)
        rc = hr_mirror_empty(mr, m, r, writes, errstr, errlen);
done:
    free(uids);
    {
        const char *argv[2] = {mr->lock_key(hr_redis_prefix(r), key, sizeof key), token};

        /* A failed release expires by itself. */
        freeReplyObject(hr_redis_eval(r, HR_LUA_LEASE_RELEASE, 1, 2, argv, NULL, e2, sizeof e2));
    }
    return rc;
}
