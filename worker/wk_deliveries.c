/* wk_deliveries: the delivery log's rows, written (see wk_deliveries.h). */
#include "wk_deliveries.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_dlog.h"
#include "hr_log.h"

#define WK_DELIVERY_COLS 8
/* MariaDB refuses a prepared statement of more than 65,535 placeholders
 * (errno 1390): a batch of more rows than this goes in several INSERTs. */
#define WK_DELIVERY_STMT_ROWS (65535 / WK_DELIVERY_COLS)
/* The INSERT sizes: the full batch, and each power of two below it (2^12
 * is the largest under WK_DELIVERY_STMT_ROWS).  A part batch goes as the
 * powers of two of its size, so the worker prepares at most 15 distinct
 * INSERTs: each holds a MYSQL_BIND per placeholder in libmariadb (about
 * 800 bytes a row) and a prepared statement in MariaDB, and one per
 * part-batch size made the worker's RSS grow with the campaign (up to 32
 * cached statements, ~26 MiB at the default batch of 1,000). */
#define WK_DELIVERY_POW2 14
#define WK_DELIVERY_SIZES (WK_DELIVERY_POW2 + 1)

struct wk_deliveries {
    wk_metrics *met;
    size_t full; /* rows of a full INSERT: the batch, at most WK_DELIVERY_STMT_ROWS */
    /* INSERT texts, built when first used: [i] 2^i rows, [POW2] full rows;
     * [0], one row, is also the row-by-row retry's. */
    char *sqls[WK_DELIVERY_SIZES];
    hr_mysql_param *params; /* a batch's */
};

/* Builds the INSERT for NROWS rows (malloc'ed). */
static char *wk_deliveries_sql_text(size_t nrows)
{
    static const char head[] =
        "INSERT INTO push_delivery (task_id, uid, status, attempts, http_status, latency_ms, at, "
        "day) VALUES ";
    static const char row[] = "(?, ?, ?, ?, ?, ?, FROM_UNIXTIME(? / 1000), ?)";
    static const char tail[] =
        " ON DUPLICATE KEY UPDATE status = VALUES(status), attempts = VALUES(attempts), "
        "http_status = VALUES(http_status), latency_ms = VALUES(latency_ms), at = VALUES(at)";
    size_t len = sizeof head + nrows * (sizeof row + 1) + sizeof tail;
    char *sql = malloc(len), *p;

    if (sql == NULL)
        return NULL;
    p = sql;
    memcpy(p, head, sizeof head - 1);
    p += sizeof head - 1;
    for (size_t i = 0; i < nrows; i++) {
        if (i > 0)
            *p++ = ',';
        memcpy(p, row, sizeof row - 1);
        p += sizeof row - 1;
    }
    memcpy(p, tail, sizeof tail);
    return sql;
}

/* The next INSERT of a batch with LEFT rows to go: *NROWS gets its rows,
 * DL->full or the largest power of two up to LEFT.  NULL when out of
 * memory. */
static const char *wk_deliveries_sql(wk_deliveries *dl, size_t left, size_t *nrows)
{
    size_t i = WK_DELIVERY_POW2;

    *nrows = dl->full;
    if (left < dl->full) {
        for (i = 0; (size_t)2 << i <= left; i++)
            ;
        *nrows = (size_t)1 << i;
    }
    if (dl->sqls[i] == NULL)
        dl->sqls[i] = wk_deliveries_sql_text(*nrows);
    return dl->sqls[i];
}

/* Server errors that say the connection (or the transaction) is gone, so
 * the whole batch is retried: connection refused / lost / gone away,
 * deadlock, lock wait timeout.  Any other error is about the data. */
static bool wk_deliveries_transient(unsigned err)
{
    return err == 0 || err == 2002 || err == 2003 || err == 2006 || err == 2013 || err == 1205 ||
           err == 1213;
}

/* push_delivery.status per wk_delivery. */
static const char *const wk_deliveries_status[] = {
    [WK_DELIVERY_SENT] = "sent",           [WK_DELIVERY_FAILED] = "failed",
    [WK_DELIVERY_THROTTLED] = "throttled", [WK_DELIVERY_UNREGISTERED] = "unregistered",
    [WK_DELIVERY_OPTED_OUT] = "opted_out", [WK_DELIVERY_SUPPRESSED] = "suppressed",
};

/* One INSERT of K rows (params P); when MySQL refuses their data, the
 * rows one by one. */
static int wk_deliveries_insert(wk_deliveries *dl, hr_mysql *m, const char *sql,
                                hr_mysql_param *params, size_t k, char *errstr, size_t errlen)
{
    hr_mysql_param *p;
    unsigned err = 0;

    if (hr_mysql_exec(m, sql, params, k * WK_DELIVERY_COLS, NULL, NULL, &err, errstr, errlen) == 0)
        return 0;
    if (wk_deliveries_transient(err))
        return -1;
    /* MySQL refused the data (only the statement was rolled back): one bad
     * row must not hold the batch forever, so the rows go one by one and
     * the ones refused again are logged and dropped. */
    hr_log_warn("delivery_batch_rejected", "rows=%zu errno=%u error=%s", k, err, errstr);
    for (size_t i = 0; i < k; i++) {
        p = params + i * WK_DELIVERY_COLS;
        if (hr_mysql_exec(m, dl->sqls[0], p, WK_DELIVERY_COLS, NULL, NULL, &err, errstr, errlen) ==
            0)
            continue;
        if (wk_deliveries_transient(err))
            return -1;
        hr_metrics_inc(dl->met->reporter_dropped[WK_DROP_REJECTED]);
        hr_log_error("delivery_row_dropped", "task=%" PRId64 " uid=%" PRId64 " errno=%u error=%s",
                     p[0].i64, p[1].i64, err, errstr);
    }
    return 0;
}

int wk_deliveries_write(wk_deliveries *dl, hr_mysql *m, const wk_event *ring, size_t cap,
                        size_t head, size_t n, char *errstr, size_t errlen)
{
    size_t rows = 0;

    for (size_t i = 0; i < n; i++)
        if (ring[(head + i) % cap].kind == WK_EVENT_OUTCOME)
            rows++;
    if (rows == 0)
        return 0;
    hr_mysql_param *p = dl->params;
    int rc = 0;

    for (size_t i = 0; i < n; i++) {
        const wk_event *ev = &ring[(head + i) % cap];

        if (ev->kind != WK_EVENT_OUTCOME)
            continue;
        *p++ = HR_P_I64(ev->task);
        *p++ = HR_P_I64((int64_t)ev->u.outcome.uid);
        *p++ = HR_P_STR(wk_deliveries_status[ev->u.outcome.status]);
        *p++ = HR_P_I64(ev->u.outcome.attempts);
        *p++ = ev->u.outcome.http_status > 0 ? HR_P_I64(ev->u.outcome.http_status) : HR_P_NULL;
        *p++ = HR_P_I64(ev->u.outcome.latency_ms);
        *p++ = HR_P_I64(ev->u.outcome.at_ms);
        *p++ = HR_P_I64(hr_dlog_day(ev->u.outcome.due_ms));
    }
    for (size_t done = 0, k; done < rows && rc == 0; done += k) {
        const char *sql = wk_deliveries_sql(dl, rows - done, &k);

        if (sql == NULL) {
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
        rc = wk_deliveries_insert(dl, m, sql, dl->params + done * WK_DELIVERY_COLS, k, errstr,
                                  errlen);
    }
    return rc;
}

wk_deliveries *wk_deliveries_new(size_t batch, wk_metrics *met)
{
    wk_deliveries *dl = calloc(1, sizeof *dl);

    if (dl == NULL)
        return NULL;
    dl->met = met;
    dl->full = batch < WK_DELIVERY_STMT_ROWS ? batch : WK_DELIVERY_STMT_ROWS;
    dl->params = calloc(batch * WK_DELIVERY_COLS, sizeof *dl->params);
    dl->sqls[0] = wk_deliveries_sql_text(1);
    if (dl->params == NULL || dl->sqls[0] == NULL) {
        wk_deliveries_free(dl);
        return NULL;
    }
    return dl;
}

void wk_deliveries_free(wk_deliveries *dl)
{
    if (dl == NULL)
        return;
    for (size_t i = 0; i < WK_DELIVERY_SIZES; i++)
        free(dl->sqls[i]);
    free(dl->params);
    free(dl);
}
