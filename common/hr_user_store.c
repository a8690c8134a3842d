/* hr_user_store: the profiles' and preferences' two stores (see hr_user.h):
 * every write changes MySQL, then rewrites the uids' hashes with
 * hr_user_rewrite, the one path that writes them (the book's mirror uses
 * it for raw SQL too). */
#include "hr_user.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_batch.h"
#include "hr_keys.h"
#include "hr_pipe.h"
#include "hr_tz.h"

/* The columns a profile is read with, after its uid (hr_user_row). */
#define HR_USER_COLUMNS                                                                      \
    "u.uid, u.tz, u.locale, u.attributes, TIME_TO_SEC(u.quiet_start), "                      \
    "TIME_TO_SEC(u.quiet_end), CAST(ROUND(UNIX_TIMESTAMP(u.created_at) * 1000) AS SIGNED), " \
    "CAST(ROUND(UNIX_TIMESTAMP(u.updated_at) * 1000) AS SIGNED)"

/* The hard cap of the attributes' JSON text when no configuration says
 * (recipients.attributes_max_bytes is at most this). */
#define HR_USER_ATTRS_HARD_MAX 65536

/* ---- rows -------------------------------------------------------------------- */

static char *hr_user_dup(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

/* Row ROW of an HR_USER_COLUMNS result into *U (cleared first): the
 * strings copied, the attributes parsed when they are a JSON object (*BAD
 * set when they are not; MySQL's JSON type only checks the syntax).  0 or
 * -1 out of memory. */
static int hr_user_row(const hr_mysql_rows *rows, size_t row, hr_user *u, bool *bad)
{
    const char *tz = hr_mysql_cell(rows, row, 1), *locale = hr_mysql_cell(rows, row, 2);
    const char *attrs = hr_mysql_cell(rows, row, 3), *qs = hr_mysql_cell(rows, row, 4);
    const char *qe = hr_mysql_cell(rows, row, 5), *c = hr_mysql_cell(rows, row, 6);
    const char *m = hr_mysql_cell(rows, row, 7);

    hr_user_clear(u);
    *bad = false;
    u->uid = strtoll(hr_mysql_cell(rows, row, 0), NULL, 10);
    u->tz = hr_user_dup(tz);
    u->locale = hr_user_dup(locale);
    if ((tz != NULL && u->tz == NULL) || (locale != NULL && u->locale == NULL))
        return -1;
    if (attrs != NULL) {
        u->attributes = cJSON_Parse(attrs);
        if (u->attributes != NULL && !cJSON_IsObject(u->attributes)) {
            cJSON_Delete(u->attributes);
            u->attributes = NULL;
        }
        *bad = u->attributes == NULL;
    }
    if (qs != NULL && qe != NULL)
        u->quiet = (hr_user_quiet){.set = true, .start_s = atoi(qs), .end_s = atoi(qe)};
    u->created_ms = c != NULL ? strtoll(c, NULL, 10) : 0;
    u->updated_ms = m != NULL ? strtoll(m, NULL, 10) : 0;
    return 0;
}

/* The parameters writing U's columns after its uid: tz, locale, the
 * attributes' JSON text (*TEXT, the caller frees), quiet start and end in
 * seconds (NULL for none).  0 or -1 out of memory. */
static int hr_user_params(const hr_user *u, hr_mysql_param p[5], char **text)
{
    *text = NULL;
    if (u->attributes != NULL && (*text = cJSON_PrintUnformatted(u->attributes)) == NULL)
        return -1;
    p[0] = hr_mysql_p_str_or_null(u->tz);
    p[1] = hr_mysql_p_str_or_null(u->locale);
    p[2] = hr_mysql_p_str_or_null(*text);
    p[3] = u->quiet.set ? HR_P_I64(u->quiet.start_s) : HR_P_NULL;
    p[4] = u->quiet.set ? HR_P_I64(u->quiet.end_s) : HR_P_NULL;
    return 0;
}

/* ---- the rewrite: MySQL -> herald:user:<uid> -------------------------------- */

/* Field/value strings of one uid's hash, owned. */
typedef struct hr_user_fields {
    char **v;
    size_t n, cap;
} hr_user_fields;

static void hr_user_fields_reset(hr_user_fields *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->v[i]);
    f->n = 0;
}

/* Appends NAME and VALUE (copied; VALUE taken when OWNED).  0 or -1. */
static int hr_user_field(hr_user_fields *f, const char *name, char *value, bool owned)
{
    if (f->n + 2 > f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 32;
        char **v = realloc(f->v, cap * sizeof *v);

        if (v == NULL)
            goto fail;
        f->v = v;
        f->cap = cap;
    }
    if ((f->v[f->n] = strdup(name)) == NULL)
        goto fail;
    f->n++;
    if ((f->v[f->n] = owned ? value : strdup(value)) == NULL)
        return -1;
    f->n++;
    return 0;
fail:
    if (owned)
        free(value);
    return -1;
}

/* U's profile fields into F, what the checks refuse left out and counted
 * in RES.  0 or -1 out of memory. */
static int hr_user_profile_fields(const hr_user *u, bool bad_attrs, long attrs_max,
                                  hr_user_fields *f, hr_mirror_result *res)
{
    char why[200], q[32];
    const cJSON *a;

    if (u->tz != NULL) {
        if (hr_tz_check(u->tz, why, sizeof why) == 0) {
            if (hr_user_field(f, HR_USER_F_TZ, u->tz, false) != 0)
                return -1;
        } else {
            snprintf(why, sizeof why, "tz \"%.64s\" is no zone this host knows", u->tz);
            hr_mirror_refused(res, u->uid, why);
        }
    }
    if (u->locale != NULL && hr_user_field(f, HR_USER_F_LOCALE, u->locale, false) != 0)
        return -1;
    if (u->quiet.set) {
        snprintf(q, sizeof q, "%" PRId32 "-%" PRId32, u->quiet.start_s, u->quiet.end_s);
        if (hr_user_field(f, HR_USER_F_QUIET, q, false) != 0)
            return -1;
    }
    if (bad_attrs) {
        hr_mirror_refused(res, u->uid, "attributes are not a JSON object");
        return 0;
    }
    if (u->attributes == NULL)
        return 0;
    {
        hr_user probe = {.uid = u->uid, .attributes = u->attributes};
        hr_config limits = {.recipients.attributes_max_bytes = attrs_max};

        /* The same checks as a write's: the keys, the size. */
        if (hr_user_check(&probe, &limits, why, sizeof why) != 0) {
            hr_mirror_refused(res, u->uid, why);
            return 0;
        }
    }
    cJSON_ArrayForEach(a, u->attributes)
    {
        int rc;

        if (cJSON_IsNull(a))
            continue;
        rc = cJSON_IsString(a) ? hr_user_field(f, a->string, a->valuestring, false)
                               : hr_user_field(f, a->string, cJSON_PrintUnformatted(a), true);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* The opt-out rows of UID (rows ROWS[*AT..], advanced past them) as the
 * _optout field; rows of a malformed category or channel are refused.
 * 0 or -1. */
static int hr_user_optout_field(int64_t uid, const hr_mysql_rows *rows, size_t *at,
                                hr_user_fields *f, hr_mirror_result *res)
{
    char *list = NULL;
    size_t len = 0;

    for (; *at < rows->nrows && strtoll(hr_mysql_cell(rows, *at, 0), NULL, 10) == uid; (*at)++) {
        const char *cat = hr_mysql_cell(rows, *at, 1), *ch = hr_mysql_cell(rows, *at, 2);
        size_t add = strlen(cat) + 1 + strlen(ch) + 1;
        char why[160], *grown;

        if (hr_user_check_optout(NULL, cat, ch, why, sizeof why) != 0) {
            hr_mirror_refused(res, uid, why);
            continue;
        }
        grown = realloc(list, len + add + 1);
        if (grown == NULL) {
            free(list);
            return -1;
        }
        list = grown;
        len += (size_t)sprintf(list + len, "%s%s/%s", len ? "," : "", cat, ch);
    }
    return list != NULL ? hr_user_field(f, HR_USER_F_OPTOUT, list, true) : 0;
}

int hr_user_rewrite(hr_mysql *m, hr_redis *r, int64_t *uids, size_t n, const void *ctx,
                    hr_mirror_result *res, char *errstr, size_t errlen)
{
    const hr_config *cfg = ctx;
    long attrs_max = cfg != NULL ? cfg->recipients.attributes_max_bytes : HR_USER_ATTRS_HARD_MAX;
    hr_mysql_rows *users = NULL, *prefs = NULL;
    hr_user_fields f = {0};
    hr_pipe *pipe = NULL;
    hr_user u = {0};
    const char **argv = NULL;
    size_t ur = 0, pr = 0, argcap = 0;
    int rc = -1;

    n = hr_mirror_uniq(uids, n);
    if (n == 0)
        return 0;
    {
        char key[HR_KEY_MAX];
        redisReply *reply = hr_redis_cmdf(r, errstr, errlen, "HINCRBY %s writes 1",
                                          hr_key_user_book(hr_redis_prefix(r), key, sizeof key));

        /* Counted, and answered, before any hash is written: a worker that
         * read the book empty at the count before reads profiles again. */
        if (reply == NULL)
            return -1;
        freeReplyObject(reply);
    }
    {
        const hr_batch b = {uids, n, 1};

        if (hr_batch_query(m,
                           "SELECT " HR_USER_COLUMNS " FROM JSON_TABLE(?, '$[*]' COLUMNS (uid "
                           "BIGINT PATH '$')) j STRAIGHT_JOIN push_user u ON u.uid = j.uid "
                           "ORDER BY u.uid",
                           &b, NULL, 0, &users, errstr, errlen) != 0 ||
            hr_batch_query(m,
                           "SELECT p.uid, p.category, p.channel FROM JSON_TABLE(?, '$[*]' "
                           "COLUMNS (uid BIGINT PATH '$')) j STRAIGHT_JOIN push_user_pref p "
                           "ON p.uid = j.uid ORDER BY p.uid, p.category, p.channel",
                           &b, NULL, 0, &prefs, errstr, errlen) != 0)
            goto done;
    }
    if ((pipe = hr_pipe_new(r)) == NULL)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        char key[HR_KEY_MAX], uid_s[24];

        hr_user_fields_reset(&f);
        if (ur < users->nrows && strtoll(hr_mysql_cell(users, ur, 0), NULL, 10) == uids[i]) {
            bool bad;

            if (hr_user_row(users, ur++, &u, &bad) != 0 ||
                hr_user_profile_fields(&u, bad, attrs_max, &f, res) != 0)
                goto oom;
        }
        if (hr_user_optout_field(uids[i], prefs, &pr, &f, res) != 0)
            goto oom;
        if (f.n + 1 > argcap) {
            const char **grown = realloc(argv, (f.n + 1) * sizeof *argv);

            if (grown == NULL)
                goto oom;
            argv = grown;
            argcap = f.n + 1;
        }
        snprintf(uid_s, sizeof uid_s, "%" PRId64, uids[i]);
        argv[0] = hr_key_user(hr_redis_prefix(r), key, sizeof key, uid_s);
        memcpy(argv + 1, f.v, f.n * sizeof *argv);
        /* The pipeline formats the command now: F is reused. */
        if (hr_pipe_eval(pipe, HR_LUA_USER_SET, 1, (int)f.n + 1, argv, NULL) != 0)
            goto oom;
        if (res != NULL) {
            res->uids++;
            res->stored += (int64_t)f.n / 2;
        }
    }
    rc = hr_pipe_exec_all(pipe, errstr, errlen);
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    hr_user_clear(&u);
    hr_user_fields_reset(&f);
    free(f.v);
    free(argv);
    hr_pipe_free(pipe);
    hr_mysql_rows_free(users);
    hr_mysql_rows_free(prefs);
    return rc;
}

const hr_mirror hr_user_mirror = {
    .name = "user",
    HR_MIRROR_TABLES("push_user"),
    /* every preference row has its profile row (a foreign key) */
    .all_sql = "SELECT uid, uid FROM push_user WHERE uid > ? ORDER BY uid LIMIT ?",
    .lock_key = hr_key_user_lock,
    .synced_key = hr_key_user_synced,
    /* every preference row has its profile row, as above */
    .state_key = hr_key_user_book,
    .empty_sql = "SELECT NOT EXISTS (SELECT 1 FROM push_user)",
    .rewrite = hr_user_rewrite,
};

bool hr_user_book_empty(const redisReply *reply)
{
    const redisReply *writes, *empty;

    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
        return false;
    writes = reply->element[0];
    empty = reply->element[1];
    return empty->type == REDIS_REPLY_STRING &&
           strcmp(empty->str, writes->type == REDIS_REPLY_STRING ? writes->str : "0") == 0;
}

/* ---- profiles ------------------------------------------------------------------- */

int hr_user_get(hr_mysql *m, int64_t uid, hr_user *out, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(uid)};
    hr_mysql_rows *rows = NULL;
    bool bad;
    int rc = -1;

    hr_user_clear(out);
    if (hr_mysql_query(m, "SELECT " HR_USER_COLUMNS " FROM push_user u WHERE u.uid = ?", p, 1,
                       &rows, errstr, errlen) != 0)
        return -1;
    if (rows->nrows == 0)
        rc = 1;
    else if (hr_user_row(rows, 0, out, &bad) != 0)
        snprintf(errstr, errlen, "out of memory");
    else
        rc = 0;
    hr_mysql_rows_free(rows);
    return rc;
}

/* The upsert of U's whole profile: *AFFECTED 1 inserted, 2 replaced, 0
 * unchanged.  0 or -1. */
static int hr_user_upsert(hr_mysql *m, const hr_user *u, uint64_t *affected, char *errstr,
                          size_t errlen)
{
    hr_mysql_param p[6];
    char *text;
    int rc;

    p[0] = HR_P_I64(u->uid);
    if (hr_user_params(u, p + 1, &text) != 0) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    rc = hr_mysql_exec(m,
                       "INSERT INTO push_user (uid, tz, locale, attributes, quiet_start, "
                       "quiet_end) VALUES (?, ?, ?, ?, SEC_TO_TIME(?), SEC_TO_TIME(?)) "
                       "ON DUPLICATE KEY UPDATE tz = VALUES(tz), locale = VALUES(locale), "
                       "attributes = VALUES(attributes), quiet_start = VALUES(quiet_start), "
                       "quiet_end = VALUES(quiet_end)",
                       p, 6, affected, NULL, NULL, errstr, errlen);
    free(text);
    return rc;
}

int hr_user_put(hr_mysql *m, hr_redis *r, const hr_user *u, const hr_config *cfg, char *errstr,
                size_t errlen)
{
    uint64_t affected = 0;
    int rc = hr_user_check(u, cfg, errstr, errlen);

    if (rc != 0)
        return rc;
    if (hr_user_upsert(m, u, &affected, errstr, errlen) != 0 ||
        hr_mirror_rewrite_one(&hr_user_mirror, m, r, u->uid, cfg, errstr, errlen) != 0)
        return -1;
    return affected == 1 ? 1 : 0;
}

int hr_user_patch(hr_mysql *m, hr_redis *r, int64_t uid, const cJSON *patch, const hr_config *cfg,
                  hr_user *out, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(uid)};
    hr_mysql_rows *rows = NULL;
    uint64_t affected;
    bool bad;
    int rc = -1;

    hr_user_clear(out);
    if (hr_mysql_begin(m, errstr, errlen) != 0)
        return -1;
    if (hr_mysql_query(m, "SELECT " HR_USER_COLUMNS " FROM push_user u WHERE u.uid = ? FOR UPDATE",
                       p, 1, &rows, errstr, errlen) != 0)
        goto fail;
    if (rows->nrows == 0) {
        rc = 1;
        goto fail;
    }
    if (hr_user_row(rows, 0, out, &bad) != 0) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    /* Attributes that are no object (raw SQL) are replaced, not merged. */
    if ((rc = hr_user_from_json(patch, cfg, true, out, errstr, errlen)) != 0 ||
        (rc = hr_user_upsert(m, out, &affected, errstr, errlen)) != 0 ||
        (rc = hr_mysql_commit(m, errstr, errlen)) != 0)
        goto fail;
    hr_mysql_rows_free(rows);
    rows = NULL;
    /* The times MySQL gave it. */
    if (hr_user_get(m, uid, out, errstr, errlen) != 0)
        return -1;
    return hr_mirror_rewrite_one(&hr_user_mirror, m, r, uid, cfg, errstr, errlen);
fail:
    hr_mysql_rollback(m);
    hr_mysql_rows_free(rows);
    return rc;
}

int hr_user_delete(hr_mysql *m, hr_redis *r, int64_t uid, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(uid)};
    uint64_t affected = 0;

    /* The preferences go with it (ON DELETE CASCADE). */
    if (hr_mysql_exec(m, "DELETE FROM push_user WHERE uid = ?", p, 1, &affected, NULL, NULL, errstr,
                      errlen) != 0 ||
        hr_mirror_rewrite_one(&hr_user_mirror, m, r, uid, NULL, errstr, errlen) != 0)
        return -1;
    return affected > 0 ? 1 : 0;
}

/* ---- preferences -------------------------------------------------------------- */

int hr_user_prefs_get(hr_mysql *m, int64_t uid, hr_user_prefs *out, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(uid)};
    hr_mysql_rows *rows = NULL;
    int rc = -1;

    hr_user_prefs_clear(out);
    if (hr_mysql_query(m,
                       "SELECT TIME_TO_SEC(quiet_start), TIME_TO_SEC(quiet_end) FROM push_user "
                       "WHERE uid = ?",
                       p, 1, &rows, errstr, errlen) != 0)
        return -1;
    if (rows->nrows == 1 && hr_mysql_cell(rows, 0, 0) != NULL && hr_mysql_cell(rows, 0, 1) != NULL)
        out->quiet = (hr_user_quiet){.set = true,
                                     .start_s = atoi(hr_mysql_cell(rows, 0, 0)),
                                     .end_s = atoi(hr_mysql_cell(rows, 0, 1))};
    hr_mysql_rows_free(rows);
    rows = NULL;
    if (hr_mysql_query(m,
                       "SELECT category, channel FROM push_user_pref WHERE uid = ? "
                       "ORDER BY category, channel",
                       p, 1, &rows, errstr, errlen) != 0)
        return -1;
    rc = 0;
    for (size_t i = 0; i < rows->nrows && rc == 0; i++)
        rc = hr_user_prefs_add(out, hr_mysql_cell(rows, i, 0), hr_mysql_cell(rows, i, 1), errstr,
                               errlen) < 0
                 ? -1
                 : 0;
    hr_mysql_rows_free(rows);
    return rc;
}

/* P's opt-outs as the JSON text [["category","channel"], ...] (the
 * caller frees), which the statements below read with JSON_TABLE.  NULL
 * when out of memory. */
static char *hr_user_optouts_json(const hr_user_prefs *p)
{
    cJSON *a = cJSON_CreateArray();
    char *text = NULL;

    for (size_t i = 0; a != NULL && i < p->noptouts; i++) {
        const char *pair[2] = {p->optouts[i].category, p->optouts[i].channel};
        cJSON *e = cJSON_CreateStringArray(pair, 2);

        if (e == NULL || !cJSON_AddItemToArray(a, e)) {
            cJSON_Delete(e);
            goto done;
        }
    }
    if (a != NULL)
        text = cJSON_PrintUnformatted(a);
done:
    cJSON_Delete(a);
    return text;
}

/* The opt-outs as rows of a JSON_TABLE over one JSON parameter. */
#define HR_USER_OPTOUT_TABLE                                                        \
    "JSON_TABLE(?, '$[*]' COLUMNS (c VARCHAR(32) CHARACTER SET ascii PATH '$[0]', " \
    "t VARCHAR(16) CHARACTER SET ascii PATH '$[1]')) j"

int hr_user_prefs_put(hr_mysql *m, hr_redis *r, int64_t uid, const hr_user_prefs *p,
                      hr_user_source source, const hr_config *cfg, char *errstr, size_t errlen)
{
    char *list = NULL;
    int rc = -1;

    if (p->noptouts > HR_USER_OPTOUTS_MAX) {
        snprintf(errstr, errlen, "opt_out: at most %d entries", HR_USER_OPTOUTS_MAX);
        return HR_USER_EINVAL;
    }
    for (size_t i = 0; i < p->noptouts; i++)
        if ((rc = hr_user_check_optout(cfg, p->optouts[i].category, p->optouts[i].channel, errstr,
                                       errlen)) != 0)
            return rc;
    if (p->quiet.set && (p->quiet.start_s < 0 || p->quiet.start_s >= 86400 || p->quiet.end_s < 0 ||
                         p->quiet.end_s >= 86400 || p->quiet.start_s == p->quiet.end_s)) {
        snprintf(errstr, errlen, "quiet_hours: start and end must be two different times of day");
        return HR_USER_EINVAL;
    }
    if ((list = hr_user_optouts_json(p)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    if (hr_mysql_begin(m, errstr, errlen) != 0)
        goto done;
    {
        const hr_mysql_param pu[] = {HR_P_I64(uid),
                                     p->quiet.set ? HR_P_I64(p->quiet.start_s) : HR_P_NULL,
                                     p->quiet.set ? HR_P_I64(p->quiet.end_s) : HR_P_NULL};
        const hr_mysql_param pd[] = {HR_P_I64(uid), HR_P_STR(list)};
        const hr_mysql_param pi[] = {HR_P_I64(uid), HR_P_STR(hr_user_source_name(source)),
                                     HR_P_STR(list)};

        /* Rows that stay keep their source and time: only the ones gone
         * are deleted, only the new ones inserted. */
        if (hr_mysql_exec(m,
                          "INSERT INTO push_user (uid, quiet_start, quiet_end) "
                          "VALUES (?, SEC_TO_TIME(?), SEC_TO_TIME(?)) ON DUPLICATE KEY UPDATE "
                          "quiet_start = VALUES(quiet_start), quiet_end = VALUES(quiet_end)",
                          pu, 3, NULL, NULL, NULL, errstr, errlen) != 0 ||
            hr_mysql_exec(m,
                          "DELETE p FROM push_user_pref p WHERE p.uid = ? AND NOT EXISTS "
                          "(SELECT 1 FROM " HR_USER_OPTOUT_TABLE
                          " WHERE j.c = p.category AND j.t = p.channel)",
                          pd, 2, NULL, NULL, NULL, errstr, errlen) != 0 ||
            hr_mysql_exec(m,
                          "INSERT IGNORE INTO push_user_pref (uid, category, channel, source) "
                          "SELECT ?, j.c, j.t, ? FROM " HR_USER_OPTOUT_TABLE,
                          pi, 3, NULL, NULL, NULL, errstr, errlen) != 0 ||
            hr_mysql_commit(m, errstr, errlen) != 0) {
            hr_mysql_rollback(m);
            goto done;
        }
    }
    rc = hr_mirror_rewrite_one(&hr_user_mirror, m, r, uid, cfg, errstr, errlen);
done:
    free(list);
    return rc;
}

int hr_user_opt_out(hr_mysql *m, hr_redis *r, int64_t uid, const char *category,
                    const char *channel, hr_user_source source, const hr_config *cfg, char *errstr,
                    size_t errlen)
{
    const hr_mysql_param pu[] = {HR_P_I64(uid)};
    const hr_mysql_param pp[] = {HR_P_I64(uid), HR_P_STR(category), HR_P_STR(channel),
                                 HR_P_STR(hr_user_source_name(source))};
    uint64_t affected = 0;
    int rc = hr_user_check_optout(cfg, category, channel, errstr, errlen);

    if (rc != 0)
        return rc;
    if (hr_mysql_begin(m, errstr, errlen) != 0)
        return -1;
    if (hr_mysql_exec(m, "INSERT IGNORE INTO push_user (uid) VALUES (?)", pu, 1, NULL, NULL, NULL,
                      errstr, errlen) != 0 ||
        hr_mysql_exec(m,
                      "INSERT IGNORE INTO push_user_pref (uid, category, channel, source) "
                      "VALUES (?, ?, ?, ?)",
                      pp, 4, &affected, NULL, NULL, errstr, errlen) != 0 ||
        hr_mysql_commit(m, errstr, errlen) != 0) {
        hr_mysql_rollback(m);
        return -1;
    }
    if (hr_mirror_rewrite_one(&hr_user_mirror, m, r, uid, cfg, errstr, errlen) != 0)
        return -1;
    return affected > 0 ? 1 : 0;
}

/* ---- import --------------------------------------------------------------------- */

static int hr_user_cmp_uid(const void *a, const void *b)
{
    return hr_mirror_cmp_i64(&(*(const hr_user *const *)a)->uid,
                             &(*(const hr_user *const *)b)->uid);
}

/* The multi-row upsert of the N profiles at BATCH.  0 or -1. */
static int hr_user_import_batch(hr_mysql *m, const hr_user *const *batch, size_t n, char *errstr,
                                size_t errlen)
{
    static const char head[] = "INSERT INTO push_user (uid, tz, locale, attributes, quiet_start, "
                               "quiet_end) VALUES ",
                      row[] = "(?, ?, ?, ?, SEC_TO_TIME(?), SEC_TO_TIME(?))",
                      tail[] = " ON DUPLICATE KEY UPDATE tz = VALUES(tz), "
                               "locale = VALUES(locale), attributes = VALUES(attributes), "
                               "quiet_start = VALUES(quiet_start), quiet_end = VALUES(quiet_end)";
    hr_mysql_param *p = malloc(6 * n * sizeof *p);
    char **texts = calloc(n, sizeof *texts);
    char *sql = malloc(sizeof head + n * (sizeof row + 2) + sizeof tail);
    size_t len;
    int rc = -1;

    if (p == NULL || texts == NULL || sql == NULL)
        goto oom;
    len = (size_t)sprintf(sql, "%s", head);
    for (size_t i = 0; i < n; i++) {
        p[6 * i] = HR_P_I64(batch[i]->uid);
        if (hr_user_params(batch[i], p + 6 * i + 1, &texts[i]) != 0)
            goto oom;
        len += (size_t)sprintf(sql + len, "%s%s", i == 0 ? "" : ", ", row);
    }
    memcpy(sql + len, tail, sizeof tail);
    rc = hr_mysql_exec(m, sql, p, 6 * n, NULL, NULL, NULL, errstr, errlen);
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    for (size_t i = 0; texts != NULL && i < n; i++)
        free(texts[i]);
    free(texts);
    free(sql);
    free(p);
    return rc;
}

int hr_user_import(hr_mysql *m, hr_redis *r, const hr_user *users, size_t n, const hr_config *cfg,
                   hr_user_import_result *res, char *errstr, size_t errlen)
{
    const hr_user **by_uid = malloc((n ? n : 1) * sizeof *by_uid);
    int64_t *uids = malloc((n ? n : 1) * sizeof *uids);
    hr_mysql_rows *have = NULL;
    size_t k = 0;
    int rc = -1;

    memset(res, 0, sizeof *res);
    if (by_uid == NULL || uids == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        by_uid[i] = &users[i];
    /* Sorted, so rows lock in one order; of a uid given twice the last
     * one counts (qsort is not stable: the order of the input decides). */
    qsort(by_uid, n, sizeof *by_uid, hr_user_cmp_uid);
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && by_uid[k - 1]->uid == by_uid[i]->uid) {
            if (by_uid[i] > by_uid[k - 1])
                by_uid[k - 1] = by_uid[i];
            continue;
        }
        by_uid[k++] = by_uid[i];
    }
    for (size_t i = 0; i < k; i++)
        uids[i] = by_uid[i]->uid;
    if (k == 0) {
        rc = 0;
        goto done;
    }
    if (hr_mysql_begin(m, errstr, errlen) != 0)
        goto done;
    {
        const hr_batch b = {uids, k, 1};

        if (hr_batch_query(m,
                           "SELECT COUNT(*) FROM JSON_TABLE(?, '$[*]' COLUMNS (uid BIGINT PATH "
                           "'$')) j STRAIGHT_JOIN push_user u ON u.uid = j.uid",
                           &b, NULL, 0, &have, errstr, errlen) != 0)
            goto fail;
    }
    res->replaced = (size_t)strtoull(hr_mysql_cell(have, 0, 0), NULL, 10);
    res->created = k - res->replaced;
    for (size_t at = 0; at < k; at += HR_USER_IMPORT_BATCH)
        if (hr_user_import_batch(m, by_uid + at,
                                 k - at < HR_USER_IMPORT_BATCH ? k - at : HR_USER_IMPORT_BATCH,
                                 errstr, errlen) != 0)
            goto fail;
    if (hr_mysql_commit(m, errstr, errlen) != 0)
        goto fail;
    rc = hr_mirror_rewrite(&hr_user_mirror, m, r, uids, k, HR_USER_IMPORT_BATCH, cfg, errstr,
                           errlen);
    goto done;
fail:
    hr_mysql_rollback(m);
done:
    hr_mysql_rows_free(have);
    free(uids);
    free(by_uid);
    return rc;
}
