/* wk_deliveries: the delivery log's rows, written (see wk_deliveries.h). */
#include "wk_deliveries.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_dlog.h"
#include "hr_log.h"

#define WK_DELIVERY_COLS 8

/* The one INSERT: a batch runs it once per row in one array-bound execute
 * (hr_mysql_exec_rows), and the row-by-row retry once per row. */
static const char wk_deliveries_sql[] =
    "INSERT INTO push_delivery (task_id, uid, status, attempts, http_status, latency_ms, at, day) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE status = VALUES(status), "
    "attempts = VALUES(attempts), http_status = VALUES(http_status), "
    "latency_ms = VALUES(latency_ms), at = VALUES(at)";

/* An outcome of a batch, for the order the rows are sent in. */
typedef struct wk_deliveries_row {
    int64_t task;
    uint64_t uid;
    size_t slot; /* the event's ring slot: the order of two outcomes of one recipient */
} wk_deliveries_row;

struct wk_deliveries {
    wk_metrics *met;
    hr_mysql_param *params;   /* a batch's, row after row */
    wk_deliveries_row *order; /* a batch's outcomes, sorted */
};

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

/* The K rows of PARAMS in one execute; when MySQL refuses their data, the
 * rows one by one. */
static int wk_deliveries_insert(wk_deliveries *dl, hr_mysql *m, const hr_mysql_param *params,
                                size_t k, char *errstr, size_t errlen)
{
    const hr_mysql_param *p;
    unsigned err = 0;

    if (hr_mysql_exec_rows(m, wk_deliveries_sql, params, WK_DELIVERY_COLS, k, NULL, &err, errstr,
                           errlen) == 0)
        return 0;
    if (wk_deliveries_transient(err))
        return -1;
    /* MySQL refused the data (only the statement was rolled back): one bad
     * row must not hold the batch forever, so the rows go one by one and
     * the ones refused again are logged and dropped. */
    hr_log_warn("delivery_batch_rejected", "rows=%zu errno=%u error=%s", k, err, errstr);
    for (size_t i = 0; i < k; i++) {
        p = params + i * WK_DELIVERY_COLS;
        if (hr_mysql_exec(m, wk_deliveries_sql, p, WK_DELIVERY_COLS, NULL, NULL, &err, errstr,
                          errlen) == 0)
            continue;
        if (wk_deliveries_transient(err))
            return -1;
        hr_metrics_inc(dl->met->reporter_dropped[WK_DROP_REJECTED]);
        hr_log_error("delivery_row_dropped", "task=%" PRId64 " uid=%" PRId64 " errno=%u error=%s",
                     p[0].i64, p[1].i64, err, errstr);
    }
    return 0;
}

/* By key, then by arrival: a later outcome of the same recipient stays
 * later, so its row is the one that remains. */
static int wk_deliveries_cmp(const void *a, const void *b)
{
    const wk_deliveries_row *x = a, *y = b;

    if (x->task != y->task)
        return x->task < y->task ? -1 : 1;
    if (x->uid != y->uid)
        return x->uid < y->uid ? -1 : 1;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

int wk_deliveries_write(wk_deliveries *dl, hr_mysql *m, const wk_event *ring, size_t cap,
                        size_t head, size_t n, char *errstr, size_t errlen)
{
    hr_mysql_param *p = dl->params;
    size_t rows = 0;

    for (size_t i = 0; i < n; i++) {
        const wk_event *ev = &ring[(head + i) % cap];

        if (ev->kind == WK_EVENT_OUTCOME)
            dl->order[rows++] = (wk_deliveries_row){ev->task, ev->u.outcome.uid, i};
    }
    if (rows == 0)
        return 0;
    /* In key order, each row's B-tree descent goes where the previous one
     * went (the pages stay in the CPU's caches) rather than to a random
     * leaf of the task's range. */
    qsort(dl->order, rows, sizeof *dl->order, wk_deliveries_cmp);
    for (size_t i = 0; i < rows; i++) {
        const wk_event *ev = &ring[(head + dl->order[i].slot) % cap];

        *p++ = HR_P_I64(ev->task);
        *p++ = HR_P_I64((int64_t)ev->u.outcome.uid);
        *p++ = HR_P_STR(wk_deliveries_status[ev->u.outcome.status]);
        *p++ = HR_P_I64(ev->u.outcome.attempts);
        *p++ = ev->u.outcome.http_status > 0 ? HR_P_I64(ev->u.outcome.http_status) : HR_P_NULL;
        *p++ = HR_P_I64(ev->u.outcome.latency_ms);
        *p++ = HR_P_TIME_MS(ev->u.outcome.at_ms);
        *p++ = HR_P_I64(hr_dlog_day(ev->u.outcome.due_ms));
    }
    return wk_deliveries_insert(dl, m, dl->params, rows, errstr, errlen);
}

wk_deliveries *wk_deliveries_new(size_t batch, wk_metrics *met)
{
    wk_deliveries *dl = calloc(1, sizeof *dl);

    if (dl == NULL)
        return NULL;
    dl->met = met;
    dl->params = calloc(batch * WK_DELIVERY_COLS, sizeof *dl->params);
    dl->order = calloc(batch, sizeof *dl->order);
    if (dl->params == NULL || dl->order == NULL) {
        wk_deliveries_free(dl);
        return NULL;
    }
    return dl;
}

void wk_deliveries_free(wk_deliveries *dl)
{
    if (dl == NULL)
        return;
    free(dl->params);
    free(dl->order);
    free(dl);
}
