/* hr_hooks: the event webhooks' registry (see hr_hooks.h). */
#include "hr_hooks.h"

#include <inttypes.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hr_base64.h"
#include "hr_parse.h"
#include "hr_sign.h"

/* The bytes of a secret hr_hooks_create makes. */
#define HR_HOOKS_SECRET_BYTES 32

int hr_hooks_check_url(const char *url, char *errstr, size_t errlen)
{
    const char *auth, *end;
    char host[256];
    bool https = strncasecmp(url, "https://", 8) == 0;

    if (strlen(url) > HR_HOOKS_URL_MAX || (!https && strncasecmp(url, "http://", 7) != 0)) {
        snprintf(errstr, errlen, "url: an http(s):// URL of at most %d bytes", HR_HOOKS_URL_MAX);
        return -1;
    }
    auth = url + (https ? 8 : 7);
    end = auth + strcspn(auth, "/?#");
    if (end == auth || (size_t)(end - auth) >= sizeof host || memchr(auth, '@', end - auth)) {
        snprintf(errstr, errlen, "url: a host is needed, and no user:password@");
        return -1;
    }
    for (const char *p = url; *p != '\0'; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
            snprintf(errstr, errlen, "url: no spaces or control characters");
            return -1;
        }
    memcpy(host, auth, (size_t)(end - auth));
    host[end - auth] = '\0';
    if (!https && !hr_parse_loopback(host)) {
        snprintf(errstr, errlen,
                 "url: plain http only to a loopback host (the events name your recipients)");
        return -1;
    }
    return 0;
}

int hr_hooks_types(const char *const *types, size_t n, char out[HR_HOOKS_TYPES_MAX + 1],
                   char *errstr, size_t errlen)
{
    size_t len = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t tl = strlen(types[i]);
        char probe[40];

        if (tl == 0 || tl > 32 || strspn(types[i], "abcdefghijklmnopqrstuvwxyz_") != tl) {
            snprintf(errstr, errlen, "types: \"%.40s\" is no event type ([a-z_], 1..32)", types[i]);
            return -1;
        }
        snprintf(probe, sizeof probe, ",%s,", types[i]);
        /* A repeat is dropped. */
        {
            char wrapped[HR_HOOKS_TYPES_MAX + 3];

            snprintf(wrapped, sizeof wrapped, ",%s,", out);
            if (strstr(wrapped, probe) != NULL)
                continue;
        }
        if (len + tl + 1 > HR_HOOKS_TYPES_MAX) {
            snprintf(errstr, errlen, "types: at most %d bytes", HR_HOOKS_TYPES_MAX);
            return -1;
        }
        len += (size_t)snprintf(out + len, HR_HOOKS_TYPES_MAX + 1 - len, "%s%s", len > 0 ? "," : "",
                                types[i]);
    }
    return 0;
}

/* A new secret "whsec_<base64 of 32 random bytes>" into OUT. */
static int hr_hooks_new_secret(char out[HR_HOOKS_SECRET_MAX + 1], char *errstr, size_t errlen)
{
    unsigned char key[HR_HOOKS_SECRET_BYTES];
    hr_buf b;
    int rc = -1;

    if (RAND_bytes(key, sizeof key) != 1) {
        snprintf(errstr, errlen, "no random bytes for a secret");
        return -1;
    }
    hr_buf_init(&b, HR_HOOKS_SECRET_MAX);
    if (hr_buf_append(&b, "whsec_", 6) == 0 &&
        hr_base64_append(&b, key, sizeof key, HR_BASE64_STD) == 0) {
        snprintf(out, HR_HOOKS_SECRET_MAX + 1, "%s", b.data);
        rc = 0;
    }
    hr_buf_free(&b);
    return rc;
}

int hr_hooks_create(hr_mysql *m, hr_hook *h, char *errstr, size_t errlen)
{
    hr_sign_secret s;
    uint64_t id = 0;

    if (hr_hooks_check_url(h->url, errstr, errlen) < 0)
        return -1;
    if (h->secret[0] != '\0' ? hr_sign_secret_parse(h->secret, &s, errstr, errlen) < 0
                             : hr_hooks_new_secret(h->secret, errstr, errlen) < 0)
        return -1;
    {
        const hr_mysql_param p[] = {HR_P_STR(h->url), HR_P_STR(h->description), HR_P_STR(h->types),
                                    HR_P_STR(h->secret)};

        if (hr_mysql_exec(m,
                          "INSERT INTO push_hook (url, description, types, secret) "
                          "VALUES (?, ?, ?, ?)",
                          p, 4, NULL, &id, NULL, errstr, errlen) < 0)
            return -1;
    }
    h->id = (int64_t)id;
    h->enabled = true;
    h->failing_since_ms = -1;
    return 0;
}

#define HR_HOOKS_COLUMNS                                                            \
    "h.id, h.url, h.types, h.description, h.state = 'enabled', h.disabled_reason, " \
    "CAST(UNIX_TIMESTAMP(h.failing_since) * 1000 AS SIGNED), "                      \
    "CAST(UNIX_TIMESTAMP(h.created_at) * 1000 AS SIGNED), "                         \
    "(SELECT COUNT(*) FROM push_hook_dead d WHERE d.hook_id = h.id)"

/* Row I of ROWS (HR_HOOKS_COLUMNS) into *H. */
static void hr_hooks_row(const hr_mysql_rows *rows, size_t i, hr_hook *h)
{
    const char *c;

    memset(h, 0, sizeof *h);
    h->id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
    snprintf(h->url, sizeof h->url, "%s", hr_mysql_cell(rows, i, 1));
    snprintf(h->types, sizeof h->types, "%s", hr_mysql_cell(rows, i, 2));
    snprintf(h->description, sizeof h->description, "%s", hr_mysql_cell(rows, i, 3));
    h->enabled = hr_mysql_cell(rows, i, 4)[0] == '1';
    c = hr_mysql_cell(rows, i, 5);
    snprintf(h->disabled_reason, sizeof h->disabled_reason, "%s", c != NULL ? c : "");
    c = hr_mysql_cell(rows, i, 6);
    h->failing_since_ms = c != NULL ? strtoll(c, NULL, 10) : -1;
    h->created_ms = strtoll(hr_mysql_cell(rows, i, 7), NULL, 10);
    h->dead_letters = strtoll(hr_mysql_cell(rows, i, 8), NULL, 10);
}

int hr_hooks_list(hr_mysql *m, hr_hook **out, size_t *n, char *errstr, size_t errlen)
{
    hr_mysql_rows *rows = NULL;

    *out = NULL;
    *n = 0;
    if (hr_mysql_query(m, "SELECT " HR_HOOKS_COLUMNS " FROM push_hook h ORDER BY h.id", NULL, 0,
                       &rows, errstr, errlen) < 0)
        return -1;
    if (rows->nrows > 0 && (*out = calloc(rows->nrows, sizeof **out)) == NULL) {
        hr_mysql_rows_free(rows);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < rows->nrows; i++)
        hr_hooks_row(rows, i, &(*out)[i]);
    *n = rows->nrows;
    hr_mysql_rows_free(rows);
    return 0;
}

int hr_hooks_get(hr_mysql *m, int64_t id, hr_hook *out, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    int rc;

    if (hr_mysql_query(m, "SELECT " HR_HOOKS_COLUMNS " FROM push_hook h WHERE h.id = ?", p, 1,
                       &rows, errstr, errlen) < 0)
        return -1;
    rc = rows->nrows == 1 ? 0 : 1;
    if (rc == 0)
        hr_hooks_row(rows, 0, out);
    hr_mysql_rows_free(rows);
    return rc;
}

int hr_hooks_update(hr_mysql *m, int64_t id, const hr_hook_update *u, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {
        hr_mysql_p_str_or_null(u->url),
        hr_mysql_p_str_or_null(u->types),
        hr_mysql_p_str_or_null(u->description),
        HR_P_I64(u->enabled),
        HR_P_I64(u->enabled),
        HR_P_I64(u->enabled),
        HR_P_I64(id),
    };
    hr_hook h;
    int rc;

    if (u->url != NULL && hr_hooks_check_url(u->url, errstr, errlen) < 0)
        return -1;
    if ((rc = hr_hooks_get(m, id, &h, errstr, errlen)) != 0)
        return rc;
    /* enabled 1: a fresh start (the failure is forgotten); 0: an operator's
     * disable says so in disabled_reason. */
    return hr_mysql_exec(m,
                         "UPDATE push_hook SET url = COALESCE(?, url), types = COALESCE(?, types), "
                         "description = COALESCE(?, description), "
                         "state = CASE ? WHEN 1 THEN 'enabled' WHEN 0 THEN 'disabled' "
                         "ELSE state END, "
                         "disabled_reason = CASE ? WHEN 1 THEN NULL "
                         "WHEN 0 THEN 'disabled by an operator' ELSE disabled_reason END, "
                         "failing_since = CASE WHEN ? = 1 THEN NULL ELSE failing_since END, "
                         "updated_at = UTC_TIMESTAMP(3) WHERE id = ?",
                         p, 7, NULL, NULL, NULL, errstr, errlen) < 0
               ? -1
               : 0;
}

int hr_hooks_delete(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    uint64_t gone = 0;

    if (hr_mysql_begin(m, errstr, errlen) < 0)
        return -1;
    if (hr_mysql_exec(m, "DELETE FROM push_hook WHERE id = ?", p, 1, &gone, NULL, NULL, errstr,
                      errlen) < 0 ||
        hr_mysql_exec(m, "DELETE FROM push_hook_dead WHERE hook_id = ?", p, 1, NULL, NULL, NULL,
                      errstr, errlen) < 0 ||
        hr_mysql_commit(m, errstr, errlen) < 0) {
        hr_mysql_rollback(m);
        return -1;
    }
    return gone == 1 ? 0 : 1;
}

int hr_hooks_redrive(hr_mysql *m, int64_t id, int64_t *marked, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    uint64_t n = 0;
    hr_hook h;
    int rc;

    if ((rc = hr_hooks_get(m, id, &h, errstr, errlen)) != 0)
        return rc;
    if (hr_mysql_exec(m,
                      "UPDATE push_hook_dead SET redrive = 1, claimed_by = NULL, "
                      "claimed_until = NULL WHERE hook_id = ? AND redrive = 0",
                      p, 1, &n, NULL, NULL, errstr, errlen) < 0)
        return -1;
    *marked = (int64_t)n;
    return 0;
}

int hr_hooks_dead(hr_mysql *m, int64_t id, int64_t after, int limit, hr_hook_dead **out, size_t *n,
                  char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_I64(after), HR_P_I64(limit)};
    hr_mysql_rows *rows = NULL;
    hr_hook_dead *d = NULL;

    *out = NULL;
    *n = 0;
    if (hr_mysql_query(m,
                       "SELECT id, event_id, uid, error, redrive, "
                       "CAST(UNIX_TIMESTAMP(created_at) * 1000 AS SIGNED), payload "
                       "FROM push_hook_dead WHERE hook_id = ? AND id > ? ORDER BY id LIMIT ?",
                       p, 3, &rows, errstr, errlen) < 0)
        return -1;
    if (rows->nrows > 0 && (d = calloc(rows->nrows, sizeof *d)) == NULL)
        goto oom;
    for (size_t i = 0; i < rows->nrows; i++) {
        d[i].id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
        snprintf(d[i].event_id, sizeof d[i].event_id, "%s", hr_mysql_cell(rows, i, 1));
        d[i].uid = strtoll(hr_mysql_cell(rows, i, 2), NULL, 10);
        snprintf(d[i].error, sizeof d[i].error, "%s", hr_mysql_cell(rows, i, 3));
        d[i].redrive = hr_mysql_cell(rows, i, 4)[0] == '1';
        d[i].created_ms = strtoll(hr_mysql_cell(rows, i, 5), NULL, 10);
        if ((d[i].payload = strdup(hr_mysql_cell(rows, i, 6))) == NULL) {
            hr_hooks_dead_free(d, i);
            d = NULL;
            goto oom;
        }
    }
    *out = d;
    *n = rows->nrows;
    hr_mysql_rows_free(rows);
    return 0;
oom:
    hr_mysql_rows_free(rows);
    snprintf(errstr, errlen, "out of memory");
    return -1;
}

void hr_hooks_dead_free(hr_hook_dead *d, size_t n)
{
    for (size_t i = 0; d != NULL && i < n; i++)
        free(d[i].payload);
    free(d);
}
