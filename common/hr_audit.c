/* hr_audit: the audit log's rows (see hr_audit.h).  A row's JSON sides are
 * printed with cJSON and shortened here when too large; the page of
 * hr_audit_list is one prepared statement whose WHERE holds only the
 * filters given (fixed fragments, values bound), so each filter's index
 * serves it: (task_id, id), (actor, id), or the primary key. */
#include "hr_audit.h"

#include <inttypes.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hr_parse.h"
#include "hr_sign.h"

#define HR_AUDIT_DAY_MS ((int64_t)86400 * 1000)

static const char *const hr_audit_vias[HR_AUDIT__VIAS] = {
    [HR_AUDIT_API] = "api",
    [HR_AUDIT_CONSOLE] = "console",
    [HR_AUDIT_CLI] = "cli",
};

const char *hr_audit_via_name(hr_audit_via via)
{
    return via >= 0 && via < HR_AUDIT__VIAS ? hr_audit_vias[via] : "?";
}

void hr_audit_who_cli(hr_audit_who *who)
{
    const struct passwd *pw = getpwuid(geteuid());
    const char *sudo = getenv("SUDO_USER");
    char host[256] = "";
    char user[64];

    memset(who, 0, sizeof *who);
    if (pw != NULL)
        snprintf(user, sizeof user, "%s", pw->pw_name);
    else
        snprintf(user, sizeof user, "uid%ld", (long)geteuid());
    if (sudo != NULL && sudo[0] != '\0')
        snprintf(who->actor, sizeof who->actor, "cli:%s sudo:%.64s", user, sudo);
    else
        snprintf(who->actor, sizeof who->actor, "cli:%s", user);
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    snprintf(who->peer, sizeof who->peer, "host:%s", host);
    who->role = HR_ROLE_NONE;
    who->via = HR_AUDIT_CLI;
}

/* {"omitted_bytes": LEN, "sha256": of TEXT}: what stands for a value too
 * large to keep. */
static cJSON *hr_audit_omitted(const char *text, size_t len)
{
    char hex[HR_SIGN_SHA256_HEX];
    cJSON *o = cJSON_CreateObject();

    if (o == NULL || hr_sign_sha256_hex(text, len, hex) != 0) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddNumberToObject(o, "omitted_bytes", (double)len);
    cJSON_AddStringToObject(o, "sha256", hex);
    return o;
}

/* SIDE printed, within HR_AUDIT_JSON_MAX (hr_audit.h says how), into *OUT
 * (free()); NULL for a NULL side.  0, or -1 when out of memory. */
static int hr_audit_side(const cJSON *side, char **out)
{
    cJSON *copy = NULL, *item, *short_form;
    char *text = NULL, *value;
    size_t len;
    int rc = -1;

    *out = NULL;
    if (side == NULL)
        return 0;
    if ((text = cJSON_PrintUnformatted(side)) == NULL)
        return -1;
    if (strlen(text) <= HR_AUDIT_JSON_MAX) {
        *out = text;
        return 0;
    }
    /* Too large: its large members are named by size and hash. */
    free(text);
    text = NULL;
    if ((copy = cJSON_Duplicate(side, true)) == NULL)
        goto done;
    for (item = copy->child; item != NULL; item = item->next) {
        if ((value = cJSON_PrintUnformatted(item)) == NULL)
            goto done;
        len = strlen(value);
        short_form = len > HR_AUDIT_VALUE_MAX ? hr_audit_omitted(value, len) : NULL;
        free(value);
        if (len <= HR_AUDIT_VALUE_MAX)
            continue;
        if (short_form == NULL || item->string == NULL ||
            !cJSON_ReplaceItemInObjectCaseSensitive(copy, item->string, short_form)) {
            cJSON_Delete(short_form);
            goto done;
        }
        item = short_form;
    }
    if ((text = cJSON_PrintUnformatted(copy)) == NULL)
        goto done;
    if (strlen(text) > HR_AUDIT_JSON_MAX) { /* many members: the side as a whole */
        cJSON *whole = hr_audit_omitted(text, strlen(text));

        free(text);
        text = whole != NULL ? cJSON_PrintUnformatted(whole) : NULL;
        cJSON_Delete(whole);
        if (text == NULL)
            goto done;
    }
    *out = text;
    rc = 0;
done:
    cJSON_Delete(copy);
    return rc;
}

int hr_audit_write(hr_mysql *m, const hr_audit *a, char *errstr, size_t errlen)
{
    const hr_audit_who *who = a->who;
    char *before = NULL, *after = NULL;
    int rc = -1;

    if (hr_audit_side(a->before, &before) != 0 || hr_audit_side(a->after, &after) != 0) {
        snprintf(errstr, errlen, "audit: out of memory");
        goto done;
    }
    {
        const hr_mysql_param p[] = {
            HR_P_STR(who->actor),
            who->role != HR_ROLE_NONE ? HR_P_STR(hr_role_name(who->role)) : HR_P_NULL,
            HR_P_STR(hr_audit_via_name(who->via)),
            HR_P_STR(a->action),
            a->task_id > 0 ? HR_P_I64(a->task_id) : HR_P_NULL,
            hr_mysql_p_str_or_null(a->target),
            HR_P_STR(who->peer),
            hr_mysql_p_str_or_null(before),
            hr_mysql_p_str_or_null(after),
        };

        if (hr_mysql_exec(m,
                          "INSERT INTO push_audit (at, actor, role, via, action, task_id, target, "
                          "peer, before_json, after_json) "
                          "VALUES (UTC_TIMESTAMP(3), ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          p, sizeof p / sizeof p[0], NULL, NULL, NULL, errstr, errlen) != 0)
            goto done;
    }
    rc = 0;
done:
    free(before);
    free(after);
    return rc;
}

void hr_audit_diff(cJSON *before, cJSON *after)
{
    cJSON *b = before != NULL ? before->child : NULL, *next, *a;

    for (; b != NULL; b = next) {
        next = b->next;
        if (b->string == NULL || after == NULL)
            continue;
        a = cJSON_GetObjectItemCaseSensitive(after, b->string);
        if (a != NULL && cJSON_Compare(a, b, true)) {
            cJSON_DeleteItemFromObjectCaseSensitive(after, b->string);
            cJSON_DeleteItemFromObjectCaseSensitive(before, b->string);
        }
    }
}

/* Whether SIDE says nothing: none, or an object with no member left. */
static bool hr_audit_empty(const cJSON *side)
{
    return side == NULL || side->child == NULL;
}

int hr_audit_apply(hr_mysql *m, hr_audit_change *c, const hr_audit_who *who, const char *action,
                   char *errstr, size_t errlen)
{
    cJSON *before = NULL, *after = NULL, *note = cJSON_CreateObject(), *item;
    char err[256];
    size_t len;
    int rc;

    if (note == NULL) {
        snprintf(errstr, errlen, "audit: out of memory");
        return -1;
    }
    if (hr_mysql_begin(m, errstr, errlen) != 0) {
        cJSON_Delete(note);
        return -1;
    }
    if (c->side(m, c->arg, &before, errstr, errlen) != 0) {
        rc = -1;
        goto rollback;
    }
    if ((rc = c->apply(m, c, note, errstr, errlen)) < 0)
        goto rollback;
    if (c->side(m, c->arg, &after, errstr, errlen) != 0)
        goto failed;
    hr_audit_diff(before, after);
    if (note->child != NULL && after == NULL && (after = cJSON_CreateObject()) == NULL)
        goto oom;
    while ((item = note->child) != NULL)
        cJSON_AddItemToObject(after, item->string, cJSON_DetachItemViaPointer(note, item));
    if ((!hr_audit_empty(before) || !hr_audit_empty(after)) &&
        hr_audit_write(m,
                       &(hr_audit){.who = who,
                                   .action = action,
                                   .target = c->target[0] != '\0' ? c->target : NULL,
                                   .before = before,
                                   .after = after},
                       errstr, errlen) != 0)
        goto failed;
    if (hr_mysql_commit(m, errstr, errlen) != 0)
        goto failed;
    goto done;
oom:
    snprintf(errstr, errlen, "audit: out of memory");
failed:
    rc = -1;
    hr_mysql_rollback(m);
    /* The copy was rewritten from the change MySQL just dropped. */
    if (c->restore != NULL && c->restore(m, c->arg, err, sizeof err) != 0) {
        len = strnlen(errstr, errlen);
        snprintf(errstr + len, errlen - len, "; and the copy could not be restored: %s", err);
    }
    goto done;
rollback:
    hr_mysql_rollback(m);
done:
    cJSON_Delete(before);
    cJSON_Delete(after);
    cJSON_Delete(note);
    return rc;
}

/* ---- reading ----------------------------------------------------------- */

/* The columns of a page, in hr_audit_row's order. */
#define HR_AUDIT_COLUMNS                                                               \
    "id, CAST(ROUND(UNIX_TIMESTAMP(at) * 1000) AS SIGNED), actor, role, via, action, " \
    "task_id, target, peer, before_json, after_json"

/* Member NAME of O: the JSON text TEXT parsed (it was valid when written),
 * or null. */
static void hr_audit_add_json(cJSON *o, const char *name, const char *text)
{
    cJSON *v = text != NULL ? cJSON_Parse(text) : NULL;

    if (v != NULL)
        cJSON_AddItemToObject(o, name, v);
    else
        cJSON_AddNullToObject(o, name);
}

static void hr_audit_add_str(cJSON *o, const char *name, const char *text)
{
    if (text != NULL)
        cJSON_AddStringToObject(o, name, text);
    else
        cJSON_AddNullToObject(o, name);
}

/* Row R of ROWS as a JSON object. */
static cJSON *hr_audit_row(const hr_mysql_rows *rows, size_t r)
{
    char at[HR_PARSE_TIME_LEN];
    const char *task = hr_mysql_cell(rows, r, 6);
    cJSON *o = cJSON_CreateObject();

    if (o == NULL)
        return NULL;
    cJSON_AddRawToObject(o, "id", hr_mysql_cell(rows, r, 0));
    hr_parse_time_format(strtoll(hr_mysql_cell(rows, r, 1), NULL, 10), at, sizeof at);
    cJSON_AddStringToObject(o, "at", at);
    hr_audit_add_str(o, "actor", hr_mysql_cell(rows, r, 2));
    hr_audit_add_str(o, "role", hr_mysql_cell(rows, r, 3));
    hr_audit_add_str(o, "via", hr_mysql_cell(rows, r, 4));
    hr_audit_add_str(o, "action", hr_mysql_cell(rows, r, 5));
    if (task != NULL)
        cJSON_AddRawToObject(o, "task_id", task);
    else
        cJSON_AddNullToObject(o, "task_id");
    hr_audit_add_str(o, "target", hr_mysql_cell(rows, r, 7));
    hr_audit_add_str(o, "peer", hr_mysql_cell(rows, r, 8));
    hr_audit_add_json(o, "before", hr_mysql_cell(rows, r, 9));
    hr_audit_add_json(o, "after", hr_mysql_cell(rows, r, 10));
    return o;
}

int hr_audit_list(hr_mysql *m, const hr_audit_filter *f, cJSON **out, int64_t *next, char *errstr,
                  size_t errlen)
{
    char sql[640];
    hr_mysql_param p[8];
    hr_mysql_rows *rows = NULL;
    size_t np = 0, off, r;
    int limit = f->limit;

    *out = NULL;
    *next = 0;
    if (limit < 1 || limit > HR_AUDIT_LIST_MAX) {
        snprintf(errstr, errlen, "limit must be 1..%d", HR_AUDIT_LIST_MAX);
        return -1;
    }
    off = (size_t)snprintf(sql, sizeof sql,
                           "SELECT " HR_AUDIT_COLUMNS " FROM push_audit WHERE id < ?");
    p[np++] = HR_P_I64(f->before_id > 0 ? f->before_id : INT64_MAX);
    if (f->task_id > 0) {
        off += (size_t)snprintf(sql + off, sizeof sql - off, " AND task_id = ?");
        p[np++] = HR_P_I64(f->task_id);
    }
    if (f->actor != NULL) {
        off += (size_t)snprintf(sql + off, sizeof sql - off, " AND actor = ?");
        p[np++] = HR_P_STR(f->actor);
    }
    if (f->action != NULL) {
        off += (size_t)snprintf(sql + off, sizeof sql - off, " AND action = ?");
        p[np++] = HR_P_STR(f->action);
    }
    if (f->since_ms >= 0) {
        off += (size_t)snprintf(sql + off, sizeof sql - off, " AND at >= FROM_UNIXTIME(? / 1000)");
        p[np++] = HR_P_I64(f->since_ms);
    }
    if (f->until_ms >= 0) {
        off += (size_t)snprintf(sql + off, sizeof sql - off, " AND at < FROM_UNIXTIME(? / 1000)");
        p[np++] = HR_P_I64(f->until_ms);
    }
    snprintf(sql + off, sizeof sql - off, " ORDER BY id DESC LIMIT ?");
    p[np++] = HR_P_I64(limit + 1); /* one more tells whether a next page exists */
    if (hr_mysql_query(m, sql, p, np, &rows, errstr, errlen) != 0)
        return -1;
    if ((*out = cJSON_CreateArray()) == NULL)
        goto oom;
    for (r = 0; r < rows->nrows && r < (size_t)limit; r++) {
        cJSON *o = hr_audit_row(rows, r);

        if (o == NULL)
            goto oom;
        cJSON_AddItemToArray(*out, o);
    }
    if (rows->nrows > (size_t)limit)
        *next = strtoll(hr_mysql_cell(rows, (size_t)limit - 1, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    return 0;
oom:
    hr_mysql_rows_free(rows);
    cJSON_Delete(*out);
    *out = NULL;
    snprintf(errstr, errlen, "out of memory");
    return -1;
}

int hr_audit_purge(hr_mysql *m, const hr_audit_who *who, int64_t now_ms, int64_t cutoff_ms,
                   int64_t *deleted, char *errstr, size_t errlen)
{
    const hr_mysql_param on[] = {HR_P_STR("retention")}, cut[] = {HR_P_I64(cutoff_ms)};
    char when[HR_PARSE_TIME_LEN];
    uint64_t n = 0;
    cJSON *after = NULL;
    int rc = -1;

    *deleted = 0;
    if (cutoff_ms > now_ms - HR_AUDIT_KEEP_MIN_DAYS * HR_AUDIT_DAY_MS) {
        snprintf(errstr, errlen, "the audit log keeps at least %d days; purge only older rows",
                 HR_AUDIT_KEEP_MIN_DAYS);
        return -1;
    }
    if (hr_mysql_begin(m, errstr, errlen) != 0)
        return -1;
    /* The trigger lets a DELETE through only while this is set: set for
     * the purge's own statement, cleared right after it. */
    if (hr_mysql_exec(m, "SET @herald_audit_purge = ?", on, 1, NULL, NULL, NULL, errstr, errlen) !=
            0 ||
        hr_mysql_exec(m, "DELETE FROM push_audit WHERE at < FROM_UNIXTIME(? / 1000)", cut, 1, &n,
                      NULL, NULL, errstr, errlen) != 0 ||
        hr_mysql_exec(m, "SET @herald_audit_purge = NULL", NULL, 0, NULL, NULL, NULL, errstr,
                      errlen) != 0)
        goto fail;
    hr_parse_time_format(cutoff_ms, when, sizeof when);
    if ((after = cJSON_CreateObject()) == NULL ||
        cJSON_AddStringToObject(after, "older_than", when) == NULL ||
        cJSON_AddNumberToObject(after, "deleted", (double)n) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    if (hr_audit_write(m,
                       &(hr_audit){.who = who, .action = "heraldctl audit purge", .after = after},
                       errstr, errlen) != 0 ||
        hr_mysql_commit(m, errstr, errlen) != 0)
        goto fail;
    *deleted = (int64_t)n;
    rc = 0;
    goto done;
fail:
    hr_mysql_rollback(m);
    /* A DELETE that failed leaves the variable set on this session. */
    hr_mysql_exec(m, "SET @herald_audit_purge = NULL", NULL, 0, NULL, NULL, NULL, when,
                  sizeof when);
done:
    cJSON_Delete(after);
    return rc;
}
