/* hr_addr_store: the address book's writes from the API and heraldctl —
 * add, remove, replace a uid's addresses, list them, and the bulk import
 * (see hr_addr.h); each changes MySQL, then rewrites the uids' Redis sets
 * with hr_addr_rewrite. */
#include "hr_addr_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_parse.h"

#define HR_ADDR_SQL_BATCH 500 /* rows per multi-row INSERT of the import */

int hr_addr_add(hr_mysql *m, hr_redis *r, int64_t uid, hr_addr_platform p, const char *app,
                const char *address, char *errstr, size_t errlen)
{
    const hr_mysql_param pi[] = {HR_ADDR_PARAMS(uid, p, app, address), HR_P_I64(uid),
                                 HR_P_I64(HR_ADDR_PER_UID_MAX)};
    const hr_mysql_param pe[] = {HR_ADDR_PARAMS(uid, p, app, address)};
    hr_mysql_rows *rows = NULL;
    uint64_t affected = 0;
    int rc;

    rc = hr_addr_check(p, app, address, errstr, errlen);
    if (rc != 0)
        return rc;
    /* The cap is read in the same statement; two adds racing at the cap
     * may both pass, which the next add sees. */
    if (hr_mysql_exec(m,
                      "INSERT IGNORE INTO push_address (uid, platform, app, address) "
                      "SELECT ?, ?, ?, ? FROM DUAL WHERE "
                      "(SELECT COUNT(*) FROM push_address WHERE uid = ?) < ?",
                      pi, 6, &affected, NULL, NULL, errstr, errlen) != 0)
        return -1;
    if (affected == 0) {
        if (hr_mysql_query(m,
                           "SELECT 1 FROM push_address WHERE uid = ? AND platform = ? "
                           "AND app = ? AND address = ?",
                           pe, 4, &rows, errstr, errlen) != 0)
            return -1;
        rc = rows->nrows > 0 ? 0 : HR_ADDR_EFULL;
        hr_mysql_rows_free(rows);
        if (rc == HR_ADDR_EFULL) {
            snprintf(errstr, errlen, "uid %" PRId64 " holds %d addresses already", uid,
                     HR_ADDR_PER_UID_MAX);
            return rc;
        }
    } else {
        rc = 1;
    }
    return hr_mirror_rewrite_one(&hr_addr_mirror, m, r, uid, NULL, errstr, errlen) == 0 ? rc : -1;
}

int hr_addr_remove(hr_mysql *m, hr_redis *r, int64_t uid, hr_addr_platform p, const char *app,
                   const char *address, char *errstr, size_t errlen)
{
    const hr_mysql_param pd[] = {HR_ADDR_PARAMS(uid, p, app, address)};
    uint64_t affected = 0;

    if (hr_addr_platform_name(p) == NULL) {
        snprintf(errstr, errlen, "platform: must be fcm, apns, email, webhook or webpush");
        return HR_ADDR_EINVAL;
    }
    if (hr_mysql_exec(m,
                      "DELETE FROM push_address WHERE uid = ? AND platform = ? AND app = ? "
                      "AND address = ?",
                      pd, 4, &affected, NULL, NULL, errstr, errlen) != 0)
        return -1;
    if (hr_mirror_rewrite_one(&hr_addr_mirror, m, r, uid, NULL, errstr, errlen) != 0)
        return -1;
    return affected > 0 ? 1 : 0;
}

int hr_addr_replace(hr_mysql *m, hr_redis *r, int64_t uid, const hr_addr *list, size_t n,
                    char *errstr, size_t errlen)
{
    const hr_mysql_param pu[] = {HR_P_I64(uid)};
    char why[200];

    if (n > HR_ADDR_PER_UID_MAX) {
        snprintf(errstr, errlen, "addresses: at most %d per uid", HR_ADDR_PER_UID_MAX);
        return HR_ADDR_EFULL;
    }
    for (size_t i = 0; i < n; i++)
        if (hr_addr_check(list[i].platform, list[i].app, list[i].address, why, sizeof why) != 0) {
            snprintf(errstr, errlen, "addresses[%zu].%s", i, why);
            return HR_ADDR_EINVAL;
        }
    if (hr_mysql_begin(m, errstr, errlen) != 0)
        return -1;
    if (hr_mysql_exec(m, "DELETE FROM push_address WHERE uid = ?", pu, 1, NULL, NULL, NULL, errstr,
                      errlen) != 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const hr_mysql_param pi[] = {
            HR_ADDR_PARAMS(uid, list[i].platform, list[i].app, list[i].address)};

        if (hr_mysql_exec(m,
                          "INSERT IGNORE INTO push_address (uid, platform, app, address) "
                          "VALUES (?, ?, ?, ?)",
                          pi, 4, NULL, NULL, NULL, errstr, errlen) != 0)
            goto fail;
    }
    if (hr_mysql_commit(m, errstr, errlen) != 0)
        goto fail;
    return hr_mirror_rewrite_one(&hr_addr_mirror, m, r, uid, NULL, errstr, errlen);
fail:
    hr_mysql_rollback(m);
    return -1;
}

int hr_addr_list_uid(hr_mysql *m, int64_t uid, hr_addr_list *out, char *errstr, size_t errlen)
{
    hr_mysql_rows *rows = NULL;
    int rc = 0;

    if (hr_addr_select(m, &uid, 1, &rows, errstr, errlen) != 0)
        return -1;
    for (size_t i = 0; i < rows->nrows && rc == 0; i++) {
        hr_addr a = {
            .uid = uid, .app = hr_mysql_cell(rows, i, 2), .address = hr_mysql_cell(rows, i, 3)};

        /* ENUM columns hold one of their names. */
        hr_addr_platform_parse(hr_mysql_cell(rows, i, 1), &a.platform);
        if (hr_mysql_cell(rows, i, 4) != NULL)
            hr_addr_supp_parse(hr_mysql_cell(rows, i, 4), &a.supp);
        rc = hr_addr_list_push(out, &a);
    }
    hr_mysql_rows_free(rows);
    if (rc != 0)
        snprintf(errstr, errlen, "out of memory");
    return rc;
}

static int hr_addr_cmp_uid(const void *a, const void *b)
{
    return hr_mirror_cmp_i64(&(*(const hr_addr *const *)a)->uid,
                             &(*(const hr_addr *const *)b)->uid);
}

static bool hr_addr_same(const hr_addr *a, hr_addr_platform p, const char *app, const char *address)
{
    return a->platform == p && strcmp(a->app, app) == 0 && strcmp(a->address, address) == 0;
}

/* Inserts the N rows at ROWS with multi-row INSERT IGNOREs of
 * HR_ADDR_SQL_BATCH rows; *ADDED += the rows inserted.  0 or -1. */
static int hr_addr_insert(hr_mysql *m, const hr_addr *const *rows, size_t n, size_t *added,
                          char *errstr, size_t errlen)
{
    static const char head[] = "INSERT IGNORE INTO push_address (uid, platform, app, address) "
                               "VALUES ";
    hr_mysql_param *p = malloc(4 * HR_ADDR_SQL_BATCH * sizeof *p);
    char *sql = malloc(sizeof head + 16 * HR_ADDR_SQL_BATCH);
    int rc = -1;

    if (p == NULL || sql == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (size_t at = 0; at < n; at += HR_ADDR_SQL_BATCH) {
        size_t k = n - at < HR_ADDR_SQL_BATCH ? n - at : HR_ADDR_SQL_BATCH, len;
        uint64_t affected = 0;

        len = (size_t)sprintf(sql, "%s", head);
        for (size_t i = 0; i < k; i++) {
            const hr_addr *a = rows[at + i];
            const hr_mysql_param row[] = {HR_ADDR_PARAMS(a->uid, a->platform, a->app, a->address)};

            len += (size_t)sprintf(sql + len, "%s(?, ?, ?, ?)", i == 0 ? "" : ", ");
            memcpy(p + 4 * i, row, sizeof row);
        }
        if (hr_mysql_exec(m, sql, p, 4 * k, &affected, NULL, NULL, errstr, errlen) != 0)
            goto done;
        *added += (size_t)affected;
    }
    rc = 0;
done:
    free(sql);
    free(p);
    return rc;
}

int hr_addr_import(hr_mysql *m, hr_redis *r, const hr_addr *rows, size_t n,
                   hr_addr_import_result *res, char *errstr, size_t errlen)
{
    const hr_addr **by_uid = malloc((n ? n : 1) * sizeof *by_uid);
    const hr_addr **ins = malloc((n ? n : 1) * sizeof *ins);
    int64_t *uids = malloc((n ? n : 1) * sizeof *uids);
    hr_mysql_rows *have = NULL;
    size_t nuids = 0, nins = 0, h = 0;
    int rc = -1;

    memset(res, 0, sizeof *res);
    if (by_uid == NULL || ins == NULL || uids == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        by_uid[i] = &rows[i];
        uids[i] = rows[i].uid;
    }
    if (n == 0) {
        rc = 0;
        goto done;
    }
    qsort(by_uid, n, sizeof *by_uid, hr_addr_cmp_uid);
    nuids = hr_mirror_uniq(uids, n);
    if (hr_mysql_begin(m, errstr, errlen) != 0)
        goto done;
    /* What the uids hold now (under the transaction's snapshot), so that
     * the cap counts addresses and an existing row is not one more. */
    if (hr_addr_select(m, uids, nuids, &have, errstr, errlen) != 0)
        goto fail;
    for (size_t i = 0; i < n;) {
        int64_t uid = by_uid[i]->uid;
        size_t first_have, nhave, first_ins = nins, j;

        while (h < have->nrows && strtoll(hr_mysql_cell(have, h, 0), NULL, 10) < uid)
            h++;
        for (first_have = h;
             h < have->nrows && strtoll(hr_mysql_cell(have, h, 0), NULL, 10) == uid;)
            h++;
        nhave = h - first_have;
        for (; i < n && by_uid[i]->uid == uid; i++) {
            const hr_addr *a = by_uid[i];
            bool dup = false;

            for (j = first_have; j < h && !dup; j++) {
                hr_addr_platform p;

                dup = hr_addr_platform_parse(hr_mysql_cell(have, j, 1), &p) == 0 &&
                      hr_addr_same(a, p, hr_mysql_cell(have, j, 2), hr_mysql_cell(have, j, 3));
            }
            for (j = first_ins; j < nins && !dup; j++)
                dup = hr_addr_same(a, ins[j]->platform, ins[j]->app, ins[j]->address);
            if (dup)
                res->existed++;
            else if (nhave + (nins - first_ins) >= HR_ADDR_PER_UID_MAX)
                res->full++;
            else
                ins[nins++] = a;
        }
    }
    if (hr_addr_insert(m, ins, nins, &res->added, errstr, errlen) != 0)
        goto fail;
    if (hr_mysql_commit(m, errstr, errlen) != 0)
        goto fail;
    /* A row another writer inserted meanwhile was ignored: it exists. */
    res->existed += nins - res->added;
    rc = hr_mirror_rewrite(&hr_addr_mirror, m, r, uids, nuids, HR_ADDR_FETCH_BATCH, NULL, errstr,
                           errlen);
    goto done;
fail:
    hr_mysql_rollback(m);
done:
    hr_mysql_rows_free(have);
    free(uids);
    free(ins);
    free(by_uid);
    return rc;
}

int hr_addr_rewrite_holders(hr_mysql *m, hr_redis *r, hr_addr_platform p, const char *app,
                            const char *address, char *errstr, size_t errlen)
{
    const hr_mysql_param pa[] = {HR_P_STR(hr_addr_platform_name(p)), HR_P_STR(app),
                                 HR_P_STR(address)};
    hr_mysql_rows *rows = NULL;
    int64_t *uids = NULL;
    int rc = -1;

    if (hr_mysql_query(m,
                       "SELECT uid FROM push_address WHERE platform = ? AND app = ? "
                       "AND address = ?",
                       pa, 3, &rows, errstr, errlen) != 0)
        return -1;
    uids = malloc((rows->nrows ? rows->nrows : 1) * sizeof *uids);
    if (uids == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < rows->nrows; i++)
        uids[i] = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
    rc = hr_mirror_rewrite(&hr_addr_mirror, m, r, uids, rows->nrows, HR_ADDR_FETCH_BATCH, NULL,
                           errstr, errlen);
done:
    free(uids);
    hr_mysql_rows_free(rows);
    return rc;
}

int hr_addr_suppress(hr_mysql *m, hr_redis *r, hr_addr_platform p, const char *app,
                     const char *address, hr_addr_supp reason, const char *note, char *errstr,
                     size_t errlen)
{
    const char *name = hr_addr_supp_name(reason);
    uint64_t affected = 0;
    int rc;

    rc = hr_addr_check(p, app, address, errstr, errlen);
    if (rc != 0)
        return rc;
    if (name == NULL) {
        snprintf(errstr, errlen, "reason: must be unsubscribed, complained or bounced");
        return HR_ADDR_EINVAL;
    }
    if (note != NULL && strlen(note) > 255) {
        snprintf(errstr, errlen, "note: at most 255 bytes");
        return HR_ADDR_EINVAL;
    }
    {
        const hr_mysql_param pi[] = {HR_P_STR(hr_addr_platform_name(p)), HR_P_STR(app),
                                     HR_P_STR(address), HR_P_STR(name),
                                     hr_mysql_p_str_or_null(note)};

        if (hr_mysql_exec(m,
                          "INSERT INTO push_suppression (platform, app, address, reason, note) "
                          "VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE reason = VALUES(reason), "
                          "note = VALUES(note)",
                          pi, 5, &affected, NULL, NULL, errstr, errlen) != 0)
            return -1;
    }
    if (hr_addr_rewrite_holders(m, r, p, app, address, errstr, errlen) != 0)
        return -1;
    return affected == 1 ? 1 : 0;
}

int hr_addr_unsuppress(hr_mysql *m, hr_redis *r, hr_addr_platform p, const char *app,
                       const char *address, char *errstr, size_t errlen)
{
    const hr_mysql_param pd[] = {HR_P_STR(hr_addr_platform_name(p)), HR_P_STR(app),
                                 HR_P_STR(address)};
    uint64_t affected = 0;

    if (hr_addr_platform_name(p) == NULL) {
        snprintf(errstr, errlen, "platform: must be fcm, apns, email, webhook or webpush");
        return HR_ADDR_EINVAL;
    }
    if (hr_mysql_exec(m,
                      "DELETE FROM push_suppression WHERE platform = ? AND app = ? AND address = ?",
                      pd, 3, &affected, NULL, NULL, errstr, errlen) != 0)
        return -1;
    if (hr_addr_rewrite_holders(m, r, p, app, address, errstr, errlen) != 0)
        return -1;
    return affected > 0 ? 1 : 0;
}

cJSON *hr_addr_suppressions(hr_mysql *m, hr_addr_platform p, const char *app, const char *address,
                            const char *after, int limit, bool *more, char *errstr, size_t errlen)
{
    const char *pname = hr_addr_platform_name(p);
    const hr_mysql_param pone[] = {HR_P_STR(pname ? pname : ""), HR_P_STR(app),
                                   HR_P_STR(address ? address : "")};
    const hr_mysql_param ppage[] = {HR_P_STR(pname ? pname : ""), HR_P_STR(app),
                                    HR_P_STR(after ? after : ""), HR_P_I64(limit + 1)};
    hr_mysql_rows *rows = NULL;
    cJSON *a = NULL;
    size_t n;

    if (more != NULL)
        *more = false;
    if (address != NULL ? hr_mysql_query(m,
                                         "SELECT platform, app, address, reason, note, "
                                         "CAST(ROUND(UNIX_TIMESTAMP(created_at) * 1000) AS SIGNED) "
                                         "FROM push_suppression WHERE platform = ? AND app = ? "
                                         "AND address = ?",
                                         pone, 3, &rows, errstr, errlen)
                        : hr_mysql_query(m,
                                         "SELECT platform, app, address, reason, note, "
                                         "CAST(ROUND(UNIX_TIMESTAMP(created_at) * 1000) AS SIGNED) "
                                         "FROM push_suppression WHERE platform = ? AND app = ? "
                                         "AND address > ? ORDER BY address LIMIT ?",
                                         ppage, 4, &rows, errstr, errlen))
        return NULL;
    n = rows->nrows;
    if (address == NULL && n > (size_t)limit) {
        n = (size_t)limit;
        if (more != NULL)
            *more = true;
    }
    a = cJSON_CreateArray();
    for (size_t i = 0; a != NULL && i < n; i++) {
        static const char *const names[] = {"platform", "app",  "address",
                                            "reason",   "note", "created_at"};
        cJSON *o = cJSON_CreateObject();

        if (o == NULL || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            cJSON_Delete(a);
            a = NULL;
            break;
        }
        for (size_t c = 0; c < 6; c++) {
            const char *v = hr_mysql_cell(rows, i, c);
            char at[32];

            if (c == 5 && v != NULL) { /* created_at, as every time of the API */
                hr_parse_time_format(strtoll(v, NULL, 10), at, sizeof at);
                v = at;
            }
            if (v != NULL ? cJSON_AddStringToObject(o, names[c], v) == NULL
                          : cJSON_AddNullToObject(o, names[c]) == NULL) {
                cJSON_Delete(a);
                a = NULL;
                break;
            }
        }
    }
    if (a == NULL)
        snprintf(errstr, errlen, "out of memory");
    hr_mysql_rows_free(rows);
    return a;
}
