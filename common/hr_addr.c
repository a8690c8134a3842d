/* hr_addr: the address book's two stores (see hr_addr.h).  The one path
 * that writes a uid's Redis set is hr_addr_rewrite — the rows MySQL holds
 * for a batch of uids, checked, written with addr_set.lua in one pipelined
 * round trip — shared by every write, the import and the sync; only the
 * worker's prune removes a member directly. */
#include "hr_addr.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_pipe.h"

#define HR_ADDR_BLOCK 65536   /* arena block size */
#define HR_ADDR_SYNC_LOCK_MS 60000
#define HR_ADDR_SQL_BATCH 500 /* rows per multi-row INSERT of the import */
#define HR_ADDR_SYNCED_TTL_S 86400

static const char *const hr_addr_names[HR_ADDR__COUNT] = {
    [HR_ADDR_FCM] = "fcm",
    [HR_ADDR_APNS] = "apns",
    [HR_ADDR_EMAIL] = "email",
    [HR_ADDR_WEBHOOK] = "webhook",
};

const char *hr_addr_platform_name(hr_addr_platform p)
{
    return (unsigned)p < HR_ADDR__COUNT ? hr_addr_names[p] : NULL;
}

int hr_addr_platform_parse(const char *s, hr_addr_platform *out)
{
    for (int i = 0; i < HR_ADDR__COUNT; i++)
        if (strcmp(s, hr_addr_names[i]) == 0) {
            *out = (hr_addr_platform)i;
            return 0;
        }
    return -1;
}

void hr_addr_list_free(hr_addr_list *l)
{
    for (size_t i = 0; i < l->blocks.n; i++)
        free(l->blocks.v[i]);
    hr_vec_free(&l->blocks);
    hr_vec_free(&l->a);
    l->used = l->avail = 0;
}

/* N bytes of S plus a NUL in L's arena; NULL when out of memory.  Blocks
 * are never moved, so earlier strings stay where they are. */
static char *hr_addr_dup(hr_addr_list *l, const char *s, size_t n)
{
    char *dst;

    if (n + 1 > l->avail) {
        size_t size = n + 1 > HR_ADDR_BLOCK ? n + 1 : HR_ADDR_BLOCK;
        char *block = malloc(size);

        if (block == NULL || hr_vec_push(&l->blocks, block) != 0) {
            free(block);
            return NULL;
        }
        l->used = 0;
        l->avail = size;
    }
    dst = l->blocks.v[l->blocks.n - 1] + l->used;
    memcpy(dst, s, n);
    dst[n] = '\0';
    l->used += n + 1;
    l->avail -= n + 1;
    return dst;
}

int hr_addr_list_push(hr_addr_list *l, const hr_addr *a)
{
    hr_addr c = *a;

    c.app = hr_addr_dup(l, a->app, strlen(a->app));
    c.address = c.app != NULL ? hr_addr_dup(l, a->address, strlen(a->address)) : NULL;
    if (c.address == NULL)
        return -1;
    return hr_vec_push(&l->a, c);
}

cJSON *hr_addr_list_json(const hr_addr_list *l)
{
    cJSON *a = cJSON_CreateArray();

    for (size_t i = 0; a != NULL && i < l->a.n; i++) {
        cJSON *o = cJSON_CreateObject();

        if (o == NULL || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            goto fail;
        }
        /* O belongs to A from here on. */
        if (cJSON_AddStringToObject(o, "platform", hr_addr_platform_name(l->a.v[i].platform)) ==
                NULL ||
            cJSON_AddStringToObject(o, "app", l->a.v[i].app) == NULL ||
            cJSON_AddStringToObject(o, "address", l->a.v[i].address) == NULL)
            goto fail;
    }
    return a;
fail:
    cJSON_Delete(a);
    return NULL;
}

/* Every byte of S is in SET (a string of allowed characters) or, with
 * ALNUM, a letter or digit. */
static bool hr_addr_chars(const char *s, bool alnum, const char *set)
{
    for (; *s != '\0'; s++)
        if (!(alnum && isalnum((unsigned char)*s)) && strchr(set, *s) == NULL)
            return false;
    return true;
}

/* A domain: dot-separated labels of letters, digits and inner '-',
 * 1..63 bytes each. */
static bool hr_addr_domain(const char *s, size_t n)
{
    size_t label = 0;

    if (n == 0)
        return false;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            if (label == 0 || label > 63 || s[i - 1] == '-' || s[i - label] == '-')
                return false;
            label = 0;
        } else if (isalnum((unsigned char)s[i]) || s[i] == '-') {
            label++;
        } else {
            return false;
        }
    }
    return true;
}

static bool hr_addr_email(const char *s)
{
    const char *at = strrchr(s, '@');
    size_t local;

    if (at == NULL || strlen(s) > 254)
        return false;
    local = (size_t)(at - s);
    if (local == 0 || local > 64)
        return false;
    for (size_t i = 0; i < local; i++)
        if (s[i] <= ' ' || s[i] >= 0x7f || strchr("\"(),:;<>@[\\]", s[i]) != NULL)
            return false;
    return hr_addr_domain(at + 1, strlen(at + 1));
}

static bool hr_addr_url(const char *s)
{
    size_t skip = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;

    if (skip == 0 || s[skip] == '\0' || s[skip] == '/')
        return false;
    for (const char *c = s; *c != '\0'; c++)
        if (*c <= ' ' || *c >= 0x7f)
            return false;
    return true;
}

int hr_addr_check(hr_addr_platform p, const char *app, const char *address, char *errstr,
                  size_t errlen)
{
    size_t alen = strlen(app), n = strlen(address);
    const char *bad = NULL;

    if (hr_addr_platform_name(p) == NULL) {
        snprintf(errstr, errlen, "platform: must be fcm, apns, email or webhook");
        return HR_ADDR_EINVAL;
    }
    if (n == 0 || n > HR_ADDR_ADDRESS_MAX) {
        snprintf(errstr, errlen, "address: must be 1..%d bytes", HR_ADDR_ADDRESS_MAX);
        return HR_ADDR_EINVAL;
    }
    if (alen > HR_ADDR_APP_MAX) {
        snprintf(errstr, errlen, "app: must be at most %d bytes", HR_ADDR_APP_MAX);
        return HR_ADDR_EINVAL;
    }
    switch (p) {
    case HR_ADDR_FCM:
        if (alen == 0 || !hr_addr_chars(app, true, "-"))
            bad = "app: an fcm address needs its FCM project id (letters, digits, '-')";
        else if (!hr_addr_chars(address, true, "_:.-"))
            bad = "address: an FCM registration token holds letters, digits, '_', ':', '.', '-'";
        break;
    case HR_ADDR_APNS:
        if (alen == 0 || !hr_addr_chars(app, true, ".-"))
            bad = "app: an apns address needs its bundle topic (letters, digits, '.', '-')";
        else if (n < 64 || n > 200 || n % 2 != 0 || !hr_addr_chars(address, false,
                                                                     "0123456789abcdefABCDEF"))
            bad = "address: an APNs device token is an even number of 64..200 hex digits";
        break;
    case HR_ADDR_EMAIL:
        if (alen != 0)
            bad = "app: must be empty for an email address";
        else if (!hr_addr_email(address))
            bad = "address: not an email address local@domain (ASCII, at most 254 bytes)";
        break;
    case HR_ADDR_WEBHOOK:
        if (alen != 0)
            bad = "app: must be empty for a webhook address";
        else if (!hr_addr_url(address))
            bad = "address: a webhook address is an http:// or https:// URL without spaces";
        break;
    default:
        break;
    }
    if (bad != NULL) {
        snprintf(errstr, errlen, "%s", bad);
        return HR_ADDR_EINVAL;
    }
    return 0;
}

char *hr_addr_member(char *buf, size_t len, hr_addr_platform p, const char *app,
                     const char *address)
{
    const char *name = hr_addr_platform_name(p);
    int n;

    if (name == NULL)
        return NULL;
    n = snprintf(buf, len, "%s %s %s", name, app, address);
    return n >= 0 && (size_t)n < len ? buf : NULL;
}

int hr_addr_parse_member(hr_addr_list *l, const char *member, size_t len, hr_addr *out)
{
    char buf[HR_ADDR_MEMBER_MAX + 1], err[8];
    char *app, *address;

    if (len > HR_ADDR_MEMBER_MAX || memchr(member, '\0', len) != NULL)
        return -1;
    memcpy(buf, member, len);
    buf[len] = '\0';
    app = strchr(buf, ' ');
    address = app != NULL ? strchr(app + 1, ' ') : NULL;
    if (address == NULL)
        return -1;
    *app++ = '\0';
    *address++ = '\0';
    if (hr_addr_platform_parse(buf, &out->platform) != 0 ||
        hr_addr_check(out->platform, app, address, err, sizeof err) != 0)
        return -1;
    out->app = hr_addr_dup(l, app, strlen(app));
    out->address = out->app != NULL ? hr_addr_dup(l, address, strlen(address)) : NULL;
    return out->address != NULL ? 0 : -1;
}

static int hr_addr_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* The push_address rows of the N distinct UIDS (sorted), in (uid,
 * platform, app, address) order: columns uid, platform, app, address.
 * The statement is HEAD, one '?' per uid, TAIL: only marks are added to
 * its text, every value is a parameter. */
static int hr_addr_select(hr_mysql *m, const int64_t *uids, size_t n, hr_mysql_rows **rows,
                          char *errstr, size_t errlen)
{
    static const char head[] = "SELECT uid, platform, app, address FROM push_address "
                               "WHERE uid IN (",
                      tail[] = ") ORDER BY uid, platform, app, address";
    hr_mysql_param *p = malloc(n * sizeof *p);
    char *sql = malloc(sizeof head + 2 * n + sizeof tail), *at;
    int rc = -1;

    if (p == NULL || sql == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    at = memcpy(sql, head, sizeof head - 1);
    at += sizeof head - 1;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            *at++ = ',';
        *at++ = '?';
        p[i] = HR_P_I64(uids[i]);
    }
    memcpy(at, tail, sizeof tail);
    rc = hr_mysql_query(m, sql, p, n, rows, errstr, errlen);
done:
    free(sql);
    free(p);
    return rc;
}

/* Sorts the N uids at UIDS and drops repeats; the new count. */
static size_t hr_addr_uniq(int64_t *uids, size_t n)
{
    size_t k = 0;

    qsort(uids, n, sizeof *uids, hr_addr_cmp_i64);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || uids[k - 1] != uids[i])
            uids[k++] = uids[i];
    return k;
}

/* Rewrites the Redis sets of the N uids at UIDS (sorted in place, repeats
 * dropped) from the rows MySQL holds: one SELECT, one pipelined round
 * trip of addr_set.lua.  Rows hr_addr_check refuses are left out and
 * counted in RES (may be NULL).  0 or -1. */
static int hr_addr_rewrite(hr_mysql *m, hr_redis *r, int64_t *uids, size_t n,
                           hr_addr_sync_result *res, char *errstr, size_t errlen)
{
    hr_mysql_rows *rows = NULL;
    hr_addr_list arena = {0};
    hr_pipe *pipe = NULL;
    const char **argv = NULL;
    size_t row = 0;
    int rc = -1;

    n = hr_addr_uniq(uids, n);
    if (n == 0)
        return 0;
    if (hr_addr_select(m, uids, n, &rows, errstr, errlen) != 0)
        return -1;
    pipe = hr_pipe_new(r);
    argv = malloc((rows->nrows + 1) * sizeof *argv);
    if (pipe == NULL || argv == NULL)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        char key[HR_KEY_MAX], uid_s[24];
        int argc = 1;

        snprintf(uid_s, sizeof uid_s, "%" PRId64, uids[i]);
        argv[0] = hr_key_addr(hr_redis_prefix(r), key, sizeof key, uid_s);
        for (; row < rows->nrows && strtoll(hr_mysql_cell(rows, row, 0), NULL, 10) == uids[i];
             row++) {
            const char *app = hr_mysql_cell(rows, row, 2), *address = hr_mysql_cell(rows, row, 3);
            char member[HR_ADDR_MEMBER_MAX + 1], why[128] = "platform: not one of the four";
            hr_addr_platform p;

            if (hr_addr_platform_parse(hr_mysql_cell(rows, row, 1), &p) != 0 ||
                hr_addr_check(p, app, address, why, sizeof why) != 0) {
                if (res != NULL && res->refused++ == 0)
                    snprintf(res->first_refused, sizeof res->first_refused,
                             "uid=%s %.100s", uid_s, why);
                continue;
            }
            hr_addr_member(member, sizeof member, p, app, address);
            if ((argv[argc] = hr_addr_dup(&arena, member, strlen(member))) == NULL)
                goto oom;
            argc++;
        }
        if (hr_pipe_eval(pipe, HR_LUA_ADDR_SET, 1, argc, argv, NULL) != 0)
            goto oom;
        if (res != NULL) {
            res->uids++;
            res->stored += argc - 1;
        }
    }
    if (hr_pipe_exec(pipe, errstr, errlen) != 0)
        goto done;
    for (size_t i = 0; i < n; i++) {
        redisReply *reply = hr_pipe_reply(pipe, i, errstr, errlen);

        if (reply == NULL)
            goto done;
        freeReplyObject(reply);
    }
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    hr_pipe_free(pipe);
    free(argv);
    hr_addr_list_free(&arena);
    hr_mysql_rows_free(rows);
    return rc;
}

static int hr_addr_rewrite_one(hr_mysql *m, hr_redis *r, int64_t uid, char *errstr,
                               size_t errlen)
{
    return hr_addr_rewrite(m, r, &uid, 1, NULL, errstr, errlen);
}

/* The four parameters naming one address of UID. */
#define HR_ADDR_PARAMS(uid, p, app, address)                                           \
    HR_P_I64(uid), HR_P_STR(hr_addr_platform_name(p)), HR_P_STR(app), HR_P_STR(address)

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
    return hr_addr_rewrite_one(m, r, uid, errstr, errlen) == 0 ? rc : -1;
}

int hr_addr_remove(hr_mysql *m, hr_redis *r, int64_t uid, hr_addr_platform p, const char *app,
                   const char *address, char *errstr, size_t errlen)
{
    const hr_mysql_param pd[] = {HR_ADDR_PARAMS(uid, p, app, address)};
    uint64_t affected = 0;

    if (hr_addr_platform_name(p) == NULL) {
        snprintf(errstr, errlen, "platform: must be fcm, apns, email or webhook");
        return HR_ADDR_EINVAL;
    }
    if (hr_mysql_exec(m,
                      "DELETE FROM push_address WHERE uid = ? AND platform = ? AND app = ? "
                      "AND address = ?",
                      pd, 4, &affected, NULL, NULL, errstr, errlen) != 0)
        return -1;
    if (hr_addr_rewrite_one(m, r, uid, errstr, errlen) != 0)
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
        if (hr_addr_check(list[i].platform, list[i].app, list[i].address, why, sizeof why) !=
            0) {
            snprintf(errstr, errlen, "addresses[%zu].%s", i, why);
            return HR_ADDR_EINVAL;
        }
    if (hr_mysql_begin(m, errstr, errlen) != 0)
        return -1;
    if (hr_mysql_exec(m, "DELETE FROM push_address WHERE uid = ?", pu, 1, NULL, NULL, NULL,
                      errstr, errlen) != 0)
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
    return hr_addr_rewrite_one(m, r, uid, errstr, errlen);
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
        hr_addr a = {.uid = uid,
                     .app = hr_mysql_cell(rows, i, 2),
                     .address = hr_mysql_cell(rows, i, 3)};

        /* An ENUM column holds one of the four names. */
        hr_addr_platform_parse(hr_mysql_cell(rows, i, 1), &a.platform);
        rc = hr_addr_list_push(out, &a);
    }
    hr_mysql_rows_free(rows);
    if (rc != 0)
        snprintf(errstr, errlen, "out of memory");
    return rc;
}

static int hr_addr_cmp_uid(const void *a, const void *b)
{
    return hr_addr_cmp_i64(&(*(const hr_addr *const *)a)->uid, &(*(const hr_addr *const *)b)->uid);
}

static bool hr_addr_same(const hr_addr *a, hr_addr_platform p, const char *app,
                         const char *address)
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
            const hr_mysql_param row[] = {HR_ADDR_PARAMS(a->uid, a->platform, a->app,
                                                         a->address)};

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
    nuids = hr_addr_uniq(uids, n);
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
        for (first_have = h; h < have->nrows && strtoll(hr_mysql_cell(have, h, 0), NULL, 10) == uid;)
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
    rc = 0;
    for (size_t at = 0; at < nuids && rc == 0; at += HR_ADDR_FETCH_BATCH)
        rc = hr_addr_rewrite(m, r, uids + at,
                             nuids - at < HR_ADDR_FETCH_BATCH ? nuids - at : HR_ADDR_FETCH_BATCH,
                             NULL, errstr, errlen);
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

int hr_addr_fetch(hr_redis *r, const char *const *uids, size_t n, hr_addr_platform p,
                  const char *app, hr_addr_list *out, size_t *bad, char *errstr,
                  size_t errlen)
{
    hr_pipe *pipe = hr_pipe_new(r);
    size_t nbad = 0;
    int rc = -1;

    if (pipe == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t at = 0; at < n; at += HR_ADDR_FETCH_BATCH) {
        size_t k = n - at < HR_ADDR_FETCH_BATCH ? n - at : HR_ADDR_FETCH_BATCH;

        hr_pipe_reset(pipe);
        for (size_t i = 0; i < k; i++) {
            char key[HR_KEY_MAX];
            const char *argv[] = {"SMEMBERS", key};

            /* A uid too long for a key is no uid: it reads nothing. */
            if (hr_key_addr(hr_redis_prefix(r), key, sizeof key, uids[at + i]) == NULL)
                key[0] = '\0';
            if (hr_pipe_cmd(pipe, 2, argv, NULL) != 0) {
                snprintf(errstr, errlen, "out of memory");
                goto done;
            }
        }
        if (hr_pipe_exec(pipe, errstr, errlen) != 0)
            goto done;
        for (size_t i = 0; i < k; i++) {
            redisReply *reply = hr_pipe_reply(pipe, i, errstr, errlen);
            int64_t uid = strtoll(uids[at + i], NULL, 10);

            /* The batch was read whole, so no reply is an error reply for
             * this uid alone (WRONGTYPE: a key written by hand). */
            if (reply == NULL) {
                nbad++;
                continue;
            }
            for (size_t e = 0; reply->type == REDIS_REPLY_ARRAY && e < reply->elements; e++) {
                const redisReply *m = reply->element[e];
                hr_addr a = {.uid = uid, .idx = at + i};

                if (m->type != REDIS_REPLY_STRING ||
                    hr_addr_parse_member(out, m->str, m->len, &a) != 0) {
                    nbad++;
                    continue;
                }
                if (a.platform == p && (app == NULL || strcmp(a.app, app) == 0) &&
                    hr_vec_push(&out->a, a) != 0) {
                    freeReplyObject(reply);
                    snprintf(errstr, errlen, "out of memory");
                    goto done;
                }
            }
            freeReplyObject(reply);
        }
    }
    rc = 0;
done:
    if (bad != NULL)
        *bad = nbad;
    hr_pipe_free(pipe);
    return rc;
}

int hr_addr_prune(hr_mysql *m, hr_redis *r, const hr_addr *a, char *errstr, size_t errlen)
{
    const hr_mysql_param pd[] = {HR_ADDR_PARAMS(a->uid, a->platform, a->app, a->address)};
    char key[HR_KEY_MAX], uid_s[24], member[HR_ADDR_MEMBER_MAX + 1];
    redisReply *reply;
    uint64_t affected = 0;

    snprintf(uid_s, sizeof uid_s, "%" PRId64, a->uid);
    if (hr_addr_member(member, sizeof member, a->platform, a->app, a->address) == NULL) {
        snprintf(errstr, errlen, "address too long");
        return -1;
    }
    reply = hr_redis_cmdf(r, errstr, errlen, "SREM %s %s",
                          hr_key_addr(hr_redis_prefix(r), key, sizeof key, uid_s), member);
    if (reply == NULL)
        return -1;
    freeReplyObject(reply);
    if (hr_mysql_exec(m,
                      "DELETE FROM push_address WHERE uid = ? AND platform = ? AND app = ? "
                      "AND address = ?",
                      pd, 4, &affected, NULL, NULL, errstr, errlen) != 0)
        return -1;
    return affected > 0 ? 1 : 0;
}

/* The sync lock: SET NX PX for TOKEN (1 taken, 0 busy), or renewed
 * (RENEW: 1 still ours, 0 lost); -1 on a Redis error. */
static int hr_addr_lock(hr_redis *r, const char *token, bool renew, char *errstr,
                        size_t errlen)
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

int hr_addr_sync(hr_mysql *m, hr_redis *r, const char *token, int batch,
                 hr_addr_sync_result *res, char *errstr, size_t errlen)
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
    if ((res->full && (rc = hr_addr_sync_pages(m, r, token, batch, true, 0, upto, uids, res,
                                               errstr, errlen)) != 0) ||
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
