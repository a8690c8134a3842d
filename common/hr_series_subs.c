/* hr_series_subs: the SQL of a series' subscribers (see hr_series_subs.h). */
#include "hr_series_subs.h"

#include <stdio.h>
#include <stdlib.h>

#include "hr_batch.h"

int hr_series_subs_check(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    int rc;

    if (hr_mysql_query(m, "SELECT 1 FROM push_series WHERE id = ?", p, 1, &rows, errstr, errlen) <
        0)
        return -1;
    rc = rows->nrows == 1 ? 0 : 1;
    hr_mysql_rows_free(rows);
    return rc;
}

int hr_series_subs_add(hr_mysql *m, int64_t id, const int64_t *uids, size_t n, uint64_t *added,
                       char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    uint64_t again = 0, fresh = 0;

    *added = 0;
    if (n == 0)
        return 0;
    /* Those who left come back first (the trigger sets subscribed_at to
     * now), then the new ones: the uids as one JSON_TABLE parameter, one
     * statement each whatever their number.  INSERT IGNORE leaves the
     * subscribed ones as they are. */
    if (hr_batch_exec(m,
                      "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (uid BIGINT UNSIGNED PATH '$')) j "
                      "STRAIGHT_JOIN push_series_subscription s ON s.series_id = ? AND s.uid = "
                      "j.uid SET s.unsubscribed_at = NULL WHERE s.unsubscribed_at IS NOT NULL",
                      &(hr_batch){uids, n, 1}, p, 1, &again, NULL, errstr, errlen) < 0 ||
        hr_batch_exec(m,
                      "INSERT IGNORE INTO push_series_subscription (series_id, uid) "
                      "SELECT s.id, j.uid FROM JSON_TABLE(?, '$[*]' COLUMNS ("
                      "uid BIGINT UNSIGNED PATH '$')) j STRAIGHT_JOIN push_series s ON s.id = ?",
                      &(hr_batch){uids, n, 1}, p, 1, &fresh, NULL, errstr, errlen) < 0)
        return -1;
    *added = again + fresh;
    return 0;
}

int hr_series_subs_del(hr_mysql *m, int64_t id, const int64_t *uids, size_t n, uint64_t *removed,
                       char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};

    *removed = 0;
    if (n == 0)
        return 0;
    /* The trigger writes MySQL's time whatever the value set. */
    return hr_batch_exec(m,
                         "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (uid BIGINT UNSIGNED PATH '$')) j "
                         "STRAIGHT_JOIN push_series_subscription s ON s.series_id = ? AND s.uid = "
                         "j.uid SET s.unsubscribed_at = UTC_TIMESTAMP(3) "
                         "WHERE s.unsubscribed_at IS NULL",
                         &(hr_batch){uids, n, 1}, p, 1, removed, NULL, errstr, errlen);
}

int hr_series_subs_count(hr_mysql *m, int64_t id, int64_t *n, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;

    if (hr_mysql_query(m,
                       "SELECT COUNT(*) FROM push_series_subscription WHERE series_id = ? AND "
                       "unsubscribed_at IS NULL",
                       p, 1, &rows, errstr, errlen) < 0)
        return -1;
    *n = rows->nrows == 1 ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : 0;
    hr_mysql_rows_free(rows);
    return 0;
}

int hr_series_subs_list(hr_mysql *m, int64_t id, int64_t after, int64_t limit, hr_mysql_rows **rows,
                        char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_I64(after), HR_P_I64(limit)};

    *rows = NULL;
    if (limit < 1 || limit > HR_SERIES_SUBS_PAGE_MAX) {
        snprintf(errstr, errlen, "limit: 1..%d", HR_SERIES_SUBS_PAGE_MAX);
        return -1;
    }
    return hr_mysql_query(m,
                          "SELECT uid, CONCAT(LEFT(DATE_FORMAT(subscribed_at, "
                          "'%Y-%m-%dT%H:%i:%s.%f'), 23), 'Z') FROM "
                          "push_series_subscription WHERE series_id = ? AND uid > ? AND "
                          "unsubscribed_at IS NULL ORDER BY uid LIMIT ?",
                          p, 3, rows, errstr, errlen);
}
