/* hk_store: herald-hooks' statements (see hk_store.h). */
#include "hk_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_batch.h"

static char *hk_store_dup(const char *s)
{
    return strdup(s != NULL ? s : "");
}

int hk_store_hooks(hr_mysql *m, bool count, hk_store_hook **out, size_t *n, char *errstr,
                   size_t errlen)
{
    hr_mysql_rows *rows = NULL;
    hk_store_hook *h = NULL;
    int rc = -1;

    *out = NULL;
    *n = 0;
    if (hr_mysql_query(m,
                       count ? "SELECT h.id, h.url, h.types, h.secret, h.state = 'enabled', "
                               "(SELECT COUNT(*) FROM push_hook_dead d WHERE d.hook_id = h.id) "
                               "FROM push_hook h ORDER BY h.id"
                             : "SELECT id, url, types, secret, state = 'enabled', -1 "
                               "FROM push_hook ORDER BY id",
                       NULL, 0, &rows, errstr, errlen) < 0)
        return -1;
    if (rows->nrows > 0 && (h = calloc(rows->nrows, sizeof *h)) == NULL)
        goto oom;
    for (size_t i = 0; i < rows->nrows; i++) {
        h[i].id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
        h[i].url = hk_store_dup(hr_mysql_cell(rows, i, 1));
        h[i].types = hk_store_dup(hr_mysql_cell(rows, i, 2));
        h[i].secret = hk_store_dup(hr_mysql_cell(rows, i, 3));
        h[i].enabled = hr_mysql_cell(rows, i, 4)[0] == '1';
        h[i].dead = strtoll(hr_mysql_cell(rows, i, 5), NULL, 10);
        if (h[i].url == NULL || h[i].types == NULL || h[i].secret == NULL) {
            hk_store_hooks_free(h, i + 1);
            h = NULL;
            goto oom;
        }
    }
    *out = h;
    *n = rows->nrows;
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    hr_mysql_rows_free(rows);
    return rc;
}

void hk_store_hooks_free(hk_store_hook *hooks, size_t n)
{
    for (size_t i = 0; hooks != NULL && i < n; i++) {
        free(hooks[i].url);
        free(hooks[i].types);
        free(hooks[i].secret);
    }
    free(hooks);
}

int hk_store_failing(hr_mysql *m, int64_t id, bool failing, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};

    return hr_mysql_exec(m,
                         failing ? "UPDATE push_hook SET failing_since = "
                                   "COALESCE(failing_since, UTC_TIMESTAMP(3)) WHERE id = ?"
                                 : "UPDATE push_hook SET failing_since = NULL WHERE id = ?",
                         p, 1, NULL, NULL, NULL, errstr, errlen);
}

int hk_store_disable(hr_mysql *m, int64_t id, const char *reason, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(reason), HR_P_I64(id)};
    uint64_t changed = 0;

    if (hr_mysql_exec(m,
                      "UPDATE push_hook SET state = 'disabled', disabled_reason = ?, "
                      "updated_at = UTC_TIMESTAMP(3) WHERE id = ? AND state = 'enabled'",
                      p, 2, &changed, NULL, NULL, errstr, errlen) < 0)
        return -1;
    return changed == 1;
}

int hk_store_bury(hr_mysql *m, int64_t id, const hk_store_dead *rows, size_t n, const char *error,
                  char *errstr, size_t errlen)
{
    if (hr_mysql_begin(m, errstr, errlen) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const hr_mysql_param p[] = {HR_P_I64(id), HR_P_STR(rows[i].event_id),
                                    HR_P_I64((int64_t)rows[i].uid),
                                    HR_P_STRN(rows[i].value, rows[i].len), HR_P_STR(error)};

        if (hr_mysql_exec(m,
                          "INSERT INTO push_hook_dead (hook_id, event_id, uid, payload, error) "
                          "VALUES (?, ?, ?, ?, LEFT(?, 512))",
                          p, 5, NULL, NULL, NULL, errstr, errlen) < 0) {
            hr_mysql_rollback(m);
            return -1;
        }
    }
    return hr_mysql_commit(m, errstr, errlen);
}

int hk_store_claim(hr_mysql *m, int64_t id, const char *owner, int n, int lease_ms,
                   hk_store_claimed **out, size_t *got, char *errstr, size_t errlen)
{
    const hr_mysql_param claim[] = {HR_P_STR(owner), HR_P_I64((int64_t)lease_ms * 1000),
                                    HR_P_I64(id), HR_P_I64(n)};
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_STR(owner)};
    hr_mysql_rows *rows = NULL;
    hk_store_claimed *c = NULL;

    *out = NULL;
    *got = 0;
    if (hr_mysql_exec(m,
                      "UPDATE push_hook_dead SET claimed_by = ?, "
                      "claimed_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND "
                      "WHERE hook_id = ? AND redrive = 1 AND "
                      "(claimed_until IS NULL OR claimed_until < UTC_TIMESTAMP(3)) "
                      "ORDER BY id LIMIT ?",
                      claim, 4, NULL, NULL, NULL, errstr, errlen) < 0 ||
        hr_mysql_query(m,
                       "SELECT id, payload FROM push_hook_dead WHERE hook_id = ? AND redrive = 1 "
                       "AND claimed_by = ? AND claimed_until >= UTC_TIMESTAMP(3) ORDER BY id",
                       p, 2, &rows, errstr, errlen) < 0)
        return -1;
    if (rows->nrows > 0 && (c = calloc(rows->nrows, sizeof *c)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        hr_mysql_rows_free(rows);
        return -1;
    }
    for (size_t i = 0; i < rows->nrows; i++) {
        c[i].dead_id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
        if ((c[i].value = hk_store_dup(hr_mysql_cell(rows, i, 1))) == NULL) {
            hk_store_claimed_free(c, i);
            hr_mysql_rows_free(rows);
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
    }
    *out = c;
    *got = rows->nrows;
    hr_mysql_rows_free(rows);
    return 0;
}

void hk_store_claimed_free(hk_store_claimed *c, size_t n)
{
    for (size_t i = 0; c != NULL && i < n; i++)
        free(c[i].value);
    free(c);
}

int hk_store_redriven(hr_mysql *m, const int64_t *ids, size_t n, char *errstr, size_t errlen)
{
    return hr_batch_exec(m,
                         "DELETE d FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) j "
                         "JOIN push_hook_dead d ON d.id = j.id",
                         &(hr_batch){ids, n, 1}, NULL, 0, NULL, NULL, errstr, errlen);
}
