/* hr_addr_sync: addresses written with raw SQL reach Redis: under a
 * lock, the uids the triggers recorded past the synced mark (or every uid
 * when Redis lost the mark) have their sets rewritten page by page (see
 * hr_addr.h). */
#include "hr_addr_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HR_ADDR_SYNC_LOCK_MS 60000
#define HR_ADDR_SYNCED_TTL_S 86400

/* The sync lock: SET NX PX for TOKEN (1 taken, 0 busy), or renewed
 * (RENEW: 1 still ours, 0 lost); -1 on a Redis error. */
static int hr_addr_lock(hr_redis *r, const char *token, bool renew, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX], ms[16];
    const char *argv[3] = {key, token, ms};
    redisReply *reply;
    int rc;

    hr_key_addr_lock(hr_redis_prefix(r), key, sizeof key);
    snprintf(ms, sizeof ms, "%d", HR_ADDR_SYNC_LOCK_MS);
    if (renew)
        reply = hr_redis_eval(r, HR_LUA_LEASE_RENEW, 1, 3, argv, NULL, errstr, errlen);
    else
        reply = hr_redis_cmdf(r, errstr, errlen, "SET %s %s NX PX %d", key, token,
                              HR_ADDR_SYNC_LOCK_MS);
    if (reply == NULL)
        return -1;
    rc = renew ? reply->type == REDIS_REPLY_INTEGER && reply->integer == 1
               : reply->type == REDIS_REPLY_STATUS;
    freeReplyObject(reply);
    return rc;
}

/* The first epoch Redis does not hold (the synced mark), 0 when missing. */
static int hr_addr_synced(hr_redis *r, int64_t *from, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX];
    redisReply *reply;

    reply = hr_redis_cmdf(r, errstr, errlen, "GET %s",
                          hr_key_addr_synced(hr_redis_prefix(r), key, sizeof key));
    if (reply == NULL)
        return -1;
    *from = reply->type == REDIS_REPLY_STRING ? strtoll(reply->str, NULL, 10) : 0;
    freeReplyObject(reply);
    return 0;
}

/* Bumps the address epoch, which waits (a second at most) for the writers
 * whose triggers read the old one; *UPTO gets the new epoch: every change
 * stamped below it is committed.  0, HR_ADDR_SYNC_BUSY or -1. */
static int hr_addr_bump(hr_mysql *m, int64_t *upto, char *errstr, size_t errlen)
{
    hr_mysql_rows *rows = NULL;
    unsigned errnum = 0;

    if (hr_mysql_exec(m,
                      "SET STATEMENT innodb_lock_wait_timeout = 1 FOR "
                      "UPDATE push_address_epoch SET epoch = epoch + 1 WHERE id = 1",
                      NULL, 0, NULL, NULL, &errnum, errstr, errlen) != 0)
        return errnum == HR_MYSQL_ER_LOCK_WAIT_TIMEOUT ? HR_ADDR_SYNC_BUSY : -1;
    if (hr_mysql_query(m, "SELECT epoch FROM push_address_epoch WHERE id = 1", NULL, 0, &rows,
                       errstr, errlen) != 0)
        return -1;
    *upto = rows->nrows == 1 ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : 0;
    hr_mysql_rows_free(rows);
    return 0;
}

/* Rewrites, by keyset pages of BATCH, the sets of every uid push_address
 * holds (ADDRESSES) or of the uids of the change rows of epochs
 * FROM..UPTO-1, renewing the sync lock before each page's writes.  UIDS
 * has room for BATCH.  0, HR_ADDR_SYNC_BUSY (lock lost) or -1. */
static int hr_addr_sync_pages(hr_mysql *m, hr_redis *r, const char *token, int batch,
                              bool addresses, int64_t from, int64_t upto, int64_t *uids,
                              hr_addr_sync_result *res, char *errstr, size_t errlen)
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
        if (addresses)
            rc = hr_mysql_query(m,
                                "SELECT DISTINCT uid, uid FROM push_address WHERE uid > ? "
                                "ORDER BY uid LIMIT ?",
                                pf, 2, &rows, errstr, errlen);
        else
            rc = hr_mysql_query(m,
                                "SELECT id, uid FROM push_address_change WHERE epoch >= ? "
                                "AND epoch < ? AND id > ? ORDER BY id LIMIT ?",
                                pc, 4, &rows, errstr, errlen);
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
        rc = hr_addr_lock(r, token, true, errstr, errlen);
        if (rc <= 0)
            return rc < 0 ? -1 : HR_ADDR_SYNC_BUSY;
        if (hr_addr_rewrite(m, r, uids, n, res, errstr, errlen) != 0)
            return -1;
        if (n < (size_t)batch)
            return 0;
    }
}

int hr_addr_sync(hr_mysql *m, hr_redis *r, const char *token, int batch, hr_addr_sync_result *res,
                 char *errstr, size_t errlen)
{
    int64_t from = 0, upto = 0, *uids = NULL;
    char key[HR_KEY_MAX], upto_s[24], e2[128];
    redisReply *reply;
    int rc;

    memset(res, 0, sizeof *res);
    rc = hr_addr_lock(r, token, false, errstr, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : HR_ADDR_SYNC_BUSY;
    uids = malloc((size_t)batch * sizeof *uids);
    if (uids == NULL) {
        snprintf(errstr, errlen, "out of memory");
        rc = -1;
        goto done;
    }
    if ((rc = hr_addr_synced(r, &from, errstr, errlen)) != 0 ||
        (rc = hr_addr_bump(m, &upto, errstr, errlen)) != 0)
        goto done;
    res->full = from <= 0;
    /* A full reload also rewrites the uids of every change row kept, so
     * that a uid whose last address went while Redis had no mark does
     * not keep a stale set. */
    if ((res->full && (rc = hr_addr_sync_pages(m, r, token, batch, true, 0, upto, uids, res, errstr,
                                               errlen)) != 0) ||
        (rc = hr_addr_sync_pages(m, r, token, batch, false, from, upto, uids, res, errstr,
                                 errlen)) != 0)
        goto done;
    /* The mark expires a day after the last sync, well inside the week
     * the change rows are kept (004_address.sql). */
    snprintf(upto_s, sizeof upto_s, "%" PRId64, upto);
    reply = hr_redis_cmdf(r, errstr, errlen, "SET %s %s EX %d",
                          hr_key_addr_synced(hr_redis_prefix(r), key, sizeof key), upto_s,
                          HR_ADDR_SYNCED_TTL_S);
    if (reply == NULL) {
        rc = -1;
        goto done;
    }
    freeReplyObject(reply);
    /* Not the rows below UPTO: a database may serve several Redis (a
     * staging copy, the tests' prefixes), each with its own mark. */
    rc = hr_mysql_exec(m,
                       "DELETE FROM push_address_change WHERE at < NOW(3) - INTERVAL 7 DAY "
                       "LIMIT 10000",
                       NULL, 0, NULL, NULL, NULL, errstr, errlen);
done:
    free(uids);
    {
        const char *argv[2] = {hr_key_addr_lock(hr_redis_prefix(r), key, sizeof key), token};

        /* A failed release expires by itself. */
        freeReplyObject(hr_redis_eval(r, HR_LUA_LEASE_RELEASE, 1, 2, argv, NULL, e2, sizeof e2));
    }
    return rc;
}
