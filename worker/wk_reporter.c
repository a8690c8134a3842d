/* wk_reporter: bounded event ring drained into MySQL by one thread (see
 * wk_reporter.h for the contract and the thread hand-off). */
#include "wk_reporter.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hr_log.h"
#include "wk_clock.h"
#include "hr_mysql.h"

#define WK_REPORTER_FLUSH_MS 200
#define WK_REPORTER_BACKOFF_MAX_MS 5000
/* After a stop request, how long a MySQL outage may hold the exit. */
#define WK_REPORTER_STOP_GIVEUP_MS 30000
#define WK_DELIVERY_COLS 7

struct wk_reporter {
    const hr_config *cfg;
    char owner[160];
    bool delivery_log;
    size_t batch;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t has_work;
    pthread_cond_t has_room;
    wk_event *ring;
    size_t cap, head, count;
    bool stopping;

    hr_mysql *m;
    wk_metrics *met;
    bool mysql_down;
    char *sql;       /* multi-row INSERT text, rebuilt per row count */
    size_t sql_rows; /* rows SQL was built for */
    hr_mysql_param *params;
};

/* Counter deltas of one task within a batch. */
typedef struct wk_task_delta {
    int64_t task, sent, failed, throttled, retried, cancelled;
} wk_task_delta;

static void wk_reporter_deadline(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static const wk_event *wk_reporter_at(const wk_reporter *rp, size_t i)
{
    return &rp->ring[(rp->head + i) % rp->cap];
}

/* Builds the INSERT for NROWS rows into rp->sql (kept for the next batch of
 * the same size, which is the common case). */
static int wk_reporter_delivery_sql(wk_reporter *rp, size_t nrows)
{
    static const char head[] =
        "INSERT INTO push_delivery (task_id, uid, status, attempts, http_status, latency_ms, at) "
        "VALUES ";
    static const char row[] = "(?, ?, ?, ?, ?, ?, FROM_UNIXTIME(? / 1000))";
    static const char tail[] =
        " ON DUPLICATE KEY UPDATE status = VALUES(status), attempts = VALUES(attempts), "
        "http_status = VALUES(http_status), latency_ms = VALUES(latency_ms), at = VALUES(at)";
    size_t len = sizeof head + nrows * (sizeof row + 1) + sizeof tail;
    char *sql, *p;

    if (rp->sql != NULL && rp->sql_rows == nrows)
        return 0;
    sql = malloc(len);
    if (sql == NULL)
        return -1;
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
    free(rp->sql);
    rp->sql = sql;
    rp->sql_rows = nrows;
    return 0;
}

/* push_delivery.status per wk_delivery. */
static const char *const wk_reporter_status[] = {
    [WK_DELIVERY_SENT] = "sent",
    [WK_DELIVERY_FAILED] = "failed",
    [WK_DELIVERY_THROTTLED] = "throttled",
};

static int wk_reporter_write_deliveries(wk_reporter *rp, size_t n, char *errstr, size_t errlen)
{
    size_t rows = 0;

    for (size_t i = 0; i < n; i++)
        if (wk_reporter_at(rp, i)->kind == WK_EVENT_OUTCOME)
            rows++;
    if (rows == 0 || !rp->delivery_log)
        return 0;
    if (wk_reporter_delivery_sql(rp, rows) != 0) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    hr_mysql_param *p = rp->params;

    for (size_t i = 0; i < n; i++) {
        const wk_event *ev = wk_reporter_at(rp, i);

        if (ev->kind != WK_EVENT_OUTCOME)
            continue;
        *p++ = HR_P_I64(ev->task);
        *p++ = HR_P_I64(ev->u.outcome.uid);
        *p++ = HR_P_STR(wk_reporter_status[ev->u.outcome.status]);
        *p++ = HR_P_I64(ev->u.outcome.attempts);
        *p++ = ev->u.outcome.http_status > 0 ? HR_P_I64(ev->u.outcome.http_status) : HR_P_NULL;
        *p++ = HR_P_I64(ev->u.outcome.latency_ms);
        *p++ = HR_P_I64(ev->u.outcome.at_ms);
    }
    return hr_mysql_exec(rp->m, rp->sql, rp->params, rows * WK_DELIVERY_COLS, NULL, NULL, NULL,
                         errstr, errlen);
}

static int wk_reporter_write_counters(wk_reporter *rp, size_t n, char *errstr, size_t errlen)
{
    wk_task_delta *d = calloc(n, sizeof *d);
    size_t nd = 0;
    int rc = 0;

    if (d == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const wk_event *ev = wk_reporter_at(rp, i);
        size_t k;

        if (ev->kind != WK_EVENT_COUNTERS)
            continue;
        for (k = 0; k < nd && d[k].task != ev->task; k++)
            ;
        if (k == nd)
            d[nd++].task = ev->task;
        d[k].sent += ev->u.counters.sent;
        d[k].failed += ev->u.counters.failed;
        d[k].throttled += ev->u.counters.throttled;
        d[k].retried += ev->u.counters.retried;
        d[k].cancelled += ev->u.counters.cancelled;
    }
    for (size_t k = 0; k < nd && rc == 0; k++) {
        hr_mysql_param params[] = {HR_P_I64(d[k].sent), HR_P_I64(d[k].failed),
                                   HR_P_I64(d[k].throttled), HR_P_I64(d[k].retried),
                                   HR_P_I64(d[k].cancelled), HR_P_I64(d[k].task)};

        rc = hr_mysql_exec(rp->m,
                           "UPDATE push_task SET sent = sent + ?, failed = failed + ?, "
                           "throttled = throttled + ?, retried = retried + ?, "
                           "cancelled = cancelled + ? WHERE id = ?",
                           params, 6, NULL, NULL, NULL, errstr, errlen);
    }
    free(d);
    return rc;
}

static int wk_reporter_write_chunks(wk_reporter *rp, size_t n, char *errstr, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const wk_event *ev = wk_reporter_at(rp, i);

        if (ev->kind != WK_EVENT_CHUNK_DONE)
            continue;
        hr_mysql_param chunk[] = {HR_P_STR(ev->u.chunk.state), HR_P_I64(ev->u.chunk.done_ms),
                                  HR_P_STR(rp->owner), HR_P_I64(ev->task),
                                  HR_P_I64(ev->u.chunk.seq)};

        if (hr_mysql_exec(rp->m,
                          "UPDATE push_chunk SET state = ?, done_at = FROM_UNIXTIME(? / 1000), "
                          "worker = ? WHERE task_id = ? AND seq = ?",
                          chunk, 5, NULL, NULL, NULL, errstr, errlen) != 0)
            return -1;
        /* Only a closed chunk can finish its task. */
        if (strcmp(ev->u.chunk.state, "done") != 0 || ev->u.chunk.pending_left != 0 ||
            ev->u.chunk.subs_left != 0)
            continue;
        hr_mysql_param task[] = {HR_P_I64(ev->task)};
        uint64_t affected = 0;

        if (hr_mysql_exec(rp->m,
                          "UPDATE push_task SET state = 'done', finished_at = UTC_TIMESTAMP(3) "
                          "WHERE id = ? AND state = 'dispatched'",
                          task, 1, &affected, NULL, NULL, errstr, errlen) != 0)
            return -1;
        if (affected > 0)
            hr_log_info("task_done", "task=%lld", (long long)ev->task);
    }
    return 0;
}

/* Writes the first N queued events in one transaction. */
static int wk_reporter_write(wk_reporter *rp, size_t n, char *errstr, size_t errlen)
{
    if (rp->m == NULL && hr_mysql_connect(rp->cfg, &rp->m, errstr, errlen) != 0)
        return -1;
    if (hr_mysql_begin(rp->m, errstr, errlen) != 0)
        goto fail;
    if (wk_reporter_write_deliveries(rp, n, errstr, errlen) != 0 ||
        wk_reporter_write_counters(rp, n, errstr, errlen) != 0 ||
        wk_reporter_write_chunks(rp, n, errstr, errlen) != 0 ||
        hr_mysql_commit(rp->m, errstr, errlen) != 0) {
        hr_mysql_rollback(rp->m);
        goto fail;
    }
    return 0;
fail:
    /* A fresh connection next time: the old one may be half broken. */
    hr_mysql_free(rp->m);
    rp->m = NULL;
    return -1;
}

static void *wk_reporter_main(void *arg)
{
    wk_reporter *rp = arg;
    int backoff_ms = 0;
    int64_t stop_seen_ms = -1;
    char errstr[512];

    for (;;) {
        struct timespec ts;
        size_t n;

        pthread_mutex_lock(&rp->mu);
        if (rp->count < rp->batch && !rp->stopping) {
            /* Wait for a full batch, a stop, or the flush interval. */
            wk_reporter_deadline(&ts, backoff_ms > 0 ? backoff_ms : WK_REPORTER_FLUSH_MS);
            while (rp->count < rp->batch && !rp->stopping &&
                   pthread_cond_timedwait(&rp->has_work, &rp->mu, &ts) != ETIMEDOUT)
                ;
        }
        if (rp->count == 0 && rp->stopping) {
            pthread_mutex_unlock(&rp->mu);
            break;
        }
        if (rp->stopping && stop_seen_ms < 0)
            stop_seen_ms = wk_clock_now_ms();
        n = rp->count < rp->batch ? rp->count : rp->batch;
        pthread_mutex_unlock(&rp->mu);
        if (n == 0)
            continue;

        int64_t started_ms = wk_clock_now_ms();

        if (wk_reporter_write(rp, n, errstr, sizeof errstr) != 0) {
            hr_metrics_inc(rp->met->backend_errors[WK_BACKEND_MYSQL]);
            atomic_store(&rp->met->mysql_ok, false);
            if (!rp->mysql_down)
                hr_log_error("reporter_mysql_down", "error=%s queued=%zu", errstr, n);
            rp->mysql_down = true;
            backoff_ms = backoff_ms == 0 ? 100 : backoff_ms * 2;
            if (backoff_ms > WK_REPORTER_BACKOFF_MAX_MS)
                backoff_ms = WK_REPORTER_BACKOFF_MAX_MS;
            if (stop_seen_ms >= 0 && wk_clock_now_ms() - stop_seen_ms > WK_REPORTER_STOP_GIVEUP_MS) {
                pthread_mutex_lock(&rp->mu);
                hr_log_error("reporter_events_lost", "count=%zu error=%s", rp->count, errstr);
                rp->count = 0;
                pthread_mutex_unlock(&rp->mu);
                break;
            }
            /* The wait at the top doubles as the backoff sleep, except
             * when stopping, where it returns at once. */
            if (rp->stopping) {
                struct timespec d = {backoff_ms / 1000, (long)(backoff_ms % 1000) * 1000000L};

                nanosleep(&d, NULL);
            }
            continue;
        }
        hr_metrics_observe(rp->met->reporter_flush, (wk_clock_now_ms() - started_ms) / 1000.0);
        atomic_store(&rp->met->mysql_ok, true);
        if (rp->mysql_down)
            hr_log_info("reporter_mysql_up", "queued=%zu", n);
        rp->mysql_down = false;
        backoff_ms = 0;
        pthread_mutex_lock(&rp->mu);
        rp->head = (rp->head + n) % rp->cap;
        rp->count -= n;
        pthread_cond_broadcast(&rp->has_room);
        pthread_mutex_unlock(&rp->mu);
    }
    return NULL;
}

/* herald_reporter_queue_depth, at scrape time (any thread). */
static double wk_reporter_depth(void *ctx)
{
    wk_reporter *rp = ctx;
    size_t n;

    pthread_mutex_lock(&rp->mu);
    n = rp->count;
    pthread_mutex_unlock(&rp->mu);
    return (double)n;
}

int wk_reporter_start(const hr_config *cfg, const char *owner, wk_metrics *met, wk_reporter **out,
                      char *errstr, size_t errlen)
{
    wk_reporter *rp = calloc(1, sizeof *rp);

    *out = NULL;
    if (rp == NULL)
        goto oom;
    rp->cfg = cfg;
    rp->met = met;
    snprintf(rp->owner, sizeof rp->owner, "%s", owner);
    rp->delivery_log = cfg->worker.delivery_log;
    rp->batch = (size_t)cfg->worker.reporter_batch;
    rp->cap = (size_t)cfg->worker.reporter_queue;
    rp->ring = calloc(rp->cap, sizeof *rp->ring);
    rp->params = calloc(rp->batch * WK_DELIVERY_COLS, sizeof *rp->params);
    if (rp->ring == NULL || rp->params == NULL)
        goto oom;
    pthread_mutex_init(&rp->mu, NULL);
    pthread_cond_init(&rp->has_work, NULL);
    pthread_cond_init(&rp->has_room, NULL);
    if (pthread_create(&rp->thread, NULL, wk_reporter_main, rp) != 0) {
        snprintf(errstr, errlen, "cannot start the reporter thread");
        pthread_cond_destroy(&rp->has_room);
        pthread_cond_destroy(&rp->has_work);
        pthread_mutex_destroy(&rp->mu);
        goto fail;
    }
    hr_metrics_gauge_fn(met->reporter_queue, wk_reporter_depth, rp);
    *out = rp;
    return 0;
oom:
    snprintf(errstr, errlen, "out of memory");
fail:
    if (rp != NULL) {
        free(rp->ring);
        free(rp->params);
        free(rp);
    }
    return -1;
}

void wk_reporter_push(wk_reporter *rp, const wk_event *ev)
{
    pthread_mutex_lock(&rp->mu);
    while (rp->count == rp->cap)
        pthread_cond_wait(&rp->has_room, &rp->mu);
    rp->ring[(rp->head + rp->count) % rp->cap] = *ev;
    rp->count++;
    if (rp->count >= rp->batch)
        pthread_cond_signal(&rp->has_work);
    pthread_mutex_unlock(&rp->mu);
}

void wk_reporter_stop(wk_reporter *rp)
{
    if (rp == NULL)
        return;
    pthread_mutex_lock(&rp->mu);
    rp->stopping = true;
    pthread_cond_signal(&rp->has_work);
    pthread_mutex_unlock(&rp->mu);
    pthread_join(rp->thread, NULL);
    hr_mysql_free(rp->m);
    pthread_cond_destroy(&rp->has_room);
    pthread_cond_destroy(&rp->has_work);
    pthread_mutex_destroy(&rp->mu);
    free(rp->sql);
    free(rp->params);
    free(rp->ring);
    free(rp);
}
