/* wk_reporter: bounded event ring drained into MySQL by one thread (see
 * wk_reporter.h for the contract and the thread hand-off). */
#include "wk_reporter.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hr_batch.h"
#include "hr_finish.h"
#include "hr_log.h"
#include "hr_clock.h"
#include "hr_mysql.h"
#include "hr_state.h"
#include "hr_vec.h"

#define WK_REPORTER_FLUSH_MS 200
#define WK_REPORTER_BACKOFF_MAX_MS 5000
/* After a stop request, how long a MySQL outage may hold the exit. */
#define WK_REPORTER_STOP_GIVEUP_MS 30000
#define WK_DELIVERY_COLS 7
/* MariaDB refuses a prepared statement of more than 65,535 placeholders
 * (errno 1390): a batch of more rows than this goes in several INSERTs. */
#define WK_DELIVERY_STMT_ROWS (65535 / WK_DELIVERY_COLS)
/* The INSERT sizes: the full batch, and each power of two below it (2^13
 * is the largest under WK_DELIVERY_STMT_ROWS).  A part batch goes as the
 * powers of two of its size, so the worker prepares at most 15 distinct
 * INSERTs: each holds a MYSQL_BIND per placeholder in libmariadb (about
 * 800 bytes a row) and a prepared statement in MariaDB, and one per
 * part-batch size made the worker's RSS grow with the campaign (up to 32
 * cached statements, ~26 MiB at the default batch of 1,000). */
#define WK_DELIVERY_POW2 14
#define WK_DELIVERY_SIZES (WK_DELIVERY_POW2 + 1)
/* How long wk_reporter_push waits for ring room before it drops an outcome
 * row: the loop thread must keep renewing leases and polling Kafka. */
#define WK_REPORTER_PUSH_WAIT_MS 20
/* After a stop request, how long chunk ends still waiting for their
 * push_chunk row are written again before they are given up: the
 * dispatcher writes its rows every 10 ms tick, so a row that is not there
 * after this is late for another reason (see wk_reporter.h). */
#define WK_REPORTER_STOP_ROW_WAIT_MS 2000
/* Task failures waiting to be written (each is re-reported by the next
 * chunk of the task when this overflows). */
#define WK_REPORTER_FAILS 16

/* Counters of one task not yet written: sent .. retried absolute (-1 =
 * none), cancelled and expired absolute too, the largest seen (see wk_reporter.h). */
typedef struct wk_task_delta {
    int64_t task, sent, failed, throttled, retried, unregistered, cancelled, expired;
    int shard; /* HR_SHARD_NONE, or the shard of a sharded task */
} wk_task_delta;

typedef HR_VEC(wk_task_delta) wk_delta_vec;
typedef HR_VEC(wk_event) wk_event_vec;

/* A chunk end whose push_chunk row did not exist yet (wk_reporter.h). */
typedef struct wk_chunk_wait {
    wk_event ev;
    int64_t since_ms; /* when its UPDATE first found no row */
} wk_chunk_wait;

typedef HR_VEC(wk_chunk_wait) wk_wait_vec;

/* Why a waiting chunk end is given up (the reason= of chunk_row_missing). */
typedef enum wk_wait_drop {
    WK_WAIT_TIMEOUT,  /* waited row_wait_ms */
    WK_WAIT_OVERFLOW, /* more than WK_REPORTER_ROW_WAIT_MAX wait: the oldest goes */
    WK_WAIT_SHUTDOWN, /* the reporter stopped */
    WK_WAIT_NO_MEMORY,
} wk_wait_drop;

static const char *const wk_wait_drop_names[] = {
    [WK_WAIT_TIMEOUT] = "timeout",
    [WK_WAIT_OVERFLOW] = "overflow",
    [WK_WAIT_SHUTDOWN] = "shutdown",
    [WK_WAIT_NO_MEMORY] = "out_of_memory",
};

/* push_chunk.state's names, by wk_chunk_end. */
static const char *const wk_chunk_end_names[] = {
    [WK_CHUNK_END_DONE] = "done",
    [WK_CHUNK_END_PARKED] = "parked",
    [WK_CHUNK_END_CANCELLED] = "cancelled",
    [WK_CHUNK_END_EXPIRED] = "expired",
};

/* A task the worker cannot push, to be marked failed. */
typedef struct wk_task_fail {
    int64_t task;
    char why[256];
} wk_task_fail;

struct wk_reporter {
    const hr_config *cfg;
    char owner[160];
    bool delivery_log;
    size_t batch;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t has_work;
    pthread_cond_t has_room;
    wk_event *ring; /* outcome events only */
    size_t cap, head, count;
    /* Counters per task and chunk events wait here, not in the ring,
     * so they never wait for room and are never dropped. */
    wk_delta_vec deltas;
    wk_event_vec chunks;
    wk_task_fail fails[WK_REPORTER_FAILS]; /* deduplicated by task; full = dropped */
    size_t nfails;
    bool stopping;

    /* The chunk ends whose row was missing, oldest first, at most
     * WK_REPORTER_ROW_WAIT_MAX after each write: read and written by the
     * reporter thread only, so the mutex does not cover them. */
    wk_wait_vec waiting;
    int64_t row_wait_ms;

    hr_mysql *m;
    wk_metrics *met;
    bool mysql_down;
    size_t full; /* rows of a full INSERT: batch, at most STMT_ROWS */
    /* INSERT texts, built when first used: [i] 2^i rows, [POW2] full rows;
     * [0], one row, is also the row-by-row retry's. */
    char *sqls[WK_DELIVERY_SIZES];
    hr_mysql_param *params;
};

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

/* Builds the INSERT for NROWS rows (malloc'ed). */
static char *wk_reporter_build_sql(size_t nrows)
{
    static const char head[] =
        "INSERT INTO push_delivery (task_id, uid, status, attempts, http_status, latency_ms, at) "
        "VALUES ";
    static const char row[] = "(?, ?, ?, ?, ?, ?, FROM_UNIXTIME(? / 1000))";
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
 * rp->full or the largest power of two up to LEFT.  NULL when out of
 * memory. */
static const char *wk_reporter_delivery_sql(wk_reporter *rp, size_t left, size_t *nrows)
{
    size_t i = WK_DELIVERY_POW2;

    *nrows = rp->full;
    if (left < rp->full) {
        for (i = 0; (size_t)2 << i <= left; i++)
            ;
        *nrows = (size_t)1 << i;
    }
    if (rp->sqls[i] == NULL)
        rp->sqls[i] = wk_reporter_build_sql(*nrows);
    return rp->sqls[i];
}

/* Server errors that say the connection (or the transaction) is gone, so
 * the whole batch is retried: connection refused / lost / gone away,
 * deadlock, lock wait timeout.  Any other error is about the data. */
static bool wk_reporter_transient(unsigned err)
{
    return err == 0 || err == 2002 || err == 2003 || err == 2006 || err == 2013 || err == 1205 ||
           err == 1213;
}

/* push_delivery.status per wk_delivery. */
static const char *const wk_reporter_status[] = {
    [WK_DELIVERY_SENT] = "sent",
    [WK_DELIVERY_FAILED] = "failed",
    [WK_DELIVERY_THROTTLED] = "throttled",
    [WK_DELIVERY_UNREGISTERED] = "unregistered",
};

/* One INSERT of K rows (params P); when MySQL refuses their data, the
 * rows one by one. */
static int wk_reporter_insert(wk_reporter *rp, const char *sql, hr_mysql_param *params, size_t k,
                              char *errstr, size_t errlen)
{
    hr_mysql_param *p;
    unsigned err = 0;

    if (hr_mysql_exec(rp->m, sql, params, k * WK_DELIVERY_COLS, NULL, NULL, &err, errstr, errlen) ==
        0)
        return 0;
    if (wk_reporter_transient(err))
        return -1;
    /* MySQL refused the data (only the statement was rolled back): one bad
     * row must not hold the batch forever, so the rows go one by one and
     * the ones refused again are logged and dropped. */
    hr_log_warn("delivery_batch_rejected", "rows=%zu errno=%u error=%s", k, err, errstr);
    for (size_t i = 0; i < k; i++) {
        p = params + i * WK_DELIVERY_COLS;
        if (hr_mysql_exec(rp->m, rp->sqls[0], p, WK_DELIVERY_COLS, NULL, NULL, &err, errstr,
                          errlen) == 0)
            continue;
        if (wk_reporter_transient(err))
            return -1;
        hr_metrics_inc(rp->met->reporter_dropped[WK_DROP_REJECTED]);
        hr_log_error("delivery_row_dropped", "task=%" PRId64 " uid=%" PRId64 " errno=%u error=%s",
                     p[0].i64, p[1].i64, err, errstr);
    }
    return 0;
}

static int wk_reporter_write_deliveries(wk_reporter *rp, size_t n, char *errstr, size_t errlen)
{
    size_t rows = 0;

    for (size_t i = 0; i < n; i++)
        if (wk_reporter_at(rp, i)->kind == WK_EVENT_OUTCOME)
            rows++;
    if (rows == 0 || !rp->delivery_log)
        return 0;
    hr_mysql_param *p = rp->params;
    int rc = 0;

    for (size_t i = 0; i < n; i++) {
        const wk_event *ev = wk_reporter_at(rp, i);

        if (ev->kind != WK_EVENT_OUTCOME)
            continue;
        *p++ = HR_P_I64(ev->task);
        *p++ = HR_P_I64((int64_t)ev->u.outcome.uid);
        *p++ = HR_P_STR(wk_reporter_status[ev->u.outcome.status]);
        *p++ = HR_P_I64(ev->u.outcome.attempts);
        *p++ = ev->u.outcome.http_status > 0 ? HR_P_I64(ev->u.outcome.http_status) : HR_P_NULL;
        *p++ = HR_P_I64(ev->u.outcome.latency_ms);
        *p++ = HR_P_I64(ev->u.outcome.at_ms);
    }
    for (size_t done = 0, k; done < rows && rc == 0; done += k) {
        const char *sql = wk_reporter_delivery_sql(rp, rows - done, &k);

        if (sql == NULL) {
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
        rc = wk_reporter_insert(rp, sql, rp->params + done * WK_DELIVERY_COLS, k, errstr, errlen);
    }
    return rc;
}

static int wk_reporter_write_counters(wk_reporter *rp, const wk_task_delta *d, size_t nd,
                                      char *errstr, size_t errlen)
{
    hr_finish_raise_row *rows = calloc(nd + 1, sizeof *rows);
    size_t n = 0;
    int rc = -1;

    if (rows == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < nd; k++) {
        /* The worker does not count pulls: -1 leaves pulled as it is. */
        const hr_outcomes raised = {.sent = d[k].sent,
                                    .failed = d[k].failed,
                                    .throttled = d[k].throttled,
                                    .pulled = -1,
                                    .cancelled = d[k].cancelled,
                                    .retried = d[k].retried,
                                    .unregistered = d[k].unregistered,
                                    .expired = d[k].expired};

        /* A sharded task's shard row, then push_task the rows' sum; the
         * tasks of one set all in one statement. */
        if (d[k].shard == HR_SHARD_NONE)
            rows[n++] = (hr_finish_raise_row){d[k].task, raised};
        else if (hr_finish_raise_shard(rp->m, d[k].task, d[k].shard, &raised, errstr, errlen) != 0)
            goto done;
    }
    rc = hr_finish_raise_batch(rp->m, rows, n, errstr, errlen);
done:
    free(rows);
    return rc;
}

/* Gives up waiting chunk end CW: loud, and counted for the alert. */
static void wk_reporter_give_up(wk_reporter *rp, const wk_chunk_wait *cw, int64_t now_ms,
                                wk_wait_drop why)
{
    hr_metrics_inc(rp->met->chunk_rows_missing);
    hr_log_error("chunk_row_missing",
                 "task=%" PRId64 " seq=%" PRId64 " state=%s waited_ms=%" PRId64 " reason=%s",
                 cw->ev.task, cw->ev.u.chunk.seq, wk_chunk_end_names[cw->ev.u.chunk.state],
                 now_ms - cw->since_ms, wk_wait_drop_names[why]);
}

/* Appends chunk end EV, whose row was missing since SINCE_MS, to KEEP
 * (given up when out of memory). */
static void wk_reporter_keep(wk_reporter *rp, wk_wait_vec *keep, const wk_event *ev,
                             int64_t since_ms)
{
    const wk_chunk_wait cw = {.ev = *ev, .since_ms = since_ms};

    if (hr_vec_push(keep, cw) != 0)
        wk_reporter_give_up(rp, &cw, hr_clock_now_ms(), WK_WAIT_NO_MEMORY);
}

/* One chunk of a flush's ends: its key, and the place in the flush's list
 * of the end its row gets. */
typedef struct wk_end_key {
    int64_t task, seq;
    size_t first; /* its first end in the list (the sort keeps the order) */
    size_t pick;  /* the end the row gets */
} wk_end_key;

/* By chunk only (the lookup). */
static int wk_end_chunk_cmp(const void *a, const void *b)
{
    const wk_end_key *x = a, *y = b;

    if (x->task != y->task)
        return x->task < y->task ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* By chunk, then by place in the list (the sort). */
static int wk_end_key_cmp(const void *a, const void *b)
{
    const wk_end_key *x = a, *y = b;
    int c = wk_end_chunk_cmp(a, b);

    return c != 0 ? c : (x->first > y->first) - (x->first < y->first);
}

/* Which of the N chunks CELLS ([task, seq, ...] rows of NCOLS) have a
 * push_chunk row: FOUND[i].  One SELECT.  0 or -1. */
static int wk_reporter_rows_exist(wk_reporter *rp, const int64_t *cells, size_t n, size_t ncols,
                                  bool *found, char *errstr, size_t errlen)
{
    memset(found, 0, n * sizeof *found);
    return hr_batch_select(rp->m,
                           "SELECT DISTINCT c.task_id, c.seq FROM JSON_TABLE(?, '$[*]' COLUMNS "
                           "(task BIGINT PATH '$[0]', seq BIGINT PATH '$[1]')) j STRAIGHT_JOIN "
                           "push_chunk c ON c.task_id = j.task AND c.seq = j.seq",
                           &(hr_batch){cells, n, ncols}, NULL, 0, 2, hr_batch_mark, found, errstr,
                           errlen);
}

/* Writes the N chunk ends EVS (in their order) into their push_chunk rows
 * in one UPDATE: the ends of one chunk come to what writing them one by
 * one gives (a row never leaves 'done': its first 'done' end, else its
 * last end).  When it changed fewer rows than chunks, one SELECT tells
 * which rows are missing, and every end of such a chunk goes to KEEP in
 * order (hr_mysql sets no CLIENT_FOUND_ROWS, so MariaDB counts the rows
 * changed: 0 also for a row already 'done' and for one that holds these
 * very values, a batch written again after its COMMIT's answer was lost;
 * only a read tells a row that is not there from one that needs nothing).
 * 0 or -1. */
static int wk_reporter_write_ends(wk_reporter *rp, const wk_event *const *evs, size_t n,
                                  wk_wait_vec *keep, const int64_t *since, char *errstr,
                                  size_t errlen)
{
    wk_end_key *keys = calloc(n + 1, sizeof *keys);
    int64_t *cells = calloc(n * 4 + 1, sizeof *cells);
    bool *found = calloc(n + 1, sizeof *found);
    size_t i, k, nk = 0;
    uint64_t changed = 0;
    int rc = -1;

    if (keys == NULL || cells == NULL || found == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    if (n == 0) {
        rc = 0;
        goto done;
    }
    for (i = 0; i < n; i++)
        keys[i] = (wk_end_key){evs[i]->task, evs[i]->u.chunk.seq, i, i};
    qsort(keys, n, sizeof *keys, wk_end_key_cmp);
    /* One key per chunk, picking the end its row gets. */
    for (i = 0; i < n; i = k) {
        size_t pick = keys[i].first;

        for (k = i; k < n && keys[k].task == keys[i].task && keys[k].seq == keys[i].seq; k++) {
            if (evs[pick]->u.chunk.state != WK_CHUNK_END_DONE)
                pick = keys[k].first;
        }
        keys[nk] = keys[i];
        keys[nk++].pick = pick;
    }
    for (i = 0; i < nk; i++) {
        const wk_event *ev = evs[keys[i].pick];
        const int64_t row[4] = {ev->task, ev->u.chunk.seq, (int64_t)ev->u.chunk.state,
                                ev->u.chunk.done_ms};

        memcpy(cells + 4 * i, row, sizeof row);
    }
    /* A chunk closed by one worker stays 'done' even when another (a
     * redelivery, a late cancel) reports it parked or cancelled.  ELT's
     * names are wk_chunk_end's, in its order. */
    if (hr_batch_exec(rp->m,
                      "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (task BIGINT PATH '$[0]', seq BIGINT "
                      "PATH '$[1]', state INT PATH '$[2]', done_ms BIGINT PATH '$[3]')) j "
                      "STRAIGHT_JOIN push_chunk c ON c.task_id = j.task AND c.seq = j.seq "
                      "SET c.state = ELT(j.state + 1, 'done', 'parked', 'cancelled', 'expired'), "
                      "c.done_at = FROM_UNIXTIME(j.done_ms / 1000), c.worker = ? "
                      "WHERE c.state <> 'done'",
                      &(hr_batch){cells, nk, 4}, &HR_P_STR(rp->owner), 1, &changed, NULL, errstr,
                      errlen) != 0)
        goto done;
    if (changed < nk && wk_reporter_rows_exist(rp, cells, nk, 4, found, errstr, errlen) != 0)
        goto done;
    /* The ends of a chunk without a row wait for it, in their order. */
    for (i = 0; changed < nk && i < n; i++) {
        const wk_end_key want = {evs[i]->task, evs[i]->u.chunk.seq, 0, 0};
        const wk_end_key *key = bsearch(&want, keys, nk, sizeof *keys, wk_end_chunk_cmp);

        if (key != NULL && !found[key - keys])
            wk_reporter_keep(rp, keep, evs[i], since[i]);
    }
    rc = 0;
done:
    free(found);
    free(cells);
    free(keys);
    return rc;
}

/* Whether KEEP holds an end of EV's chunk. */
static bool wk_reporter_waits(const wk_wait_vec *keep, const wk_event *ev)
{
    for (size_t i = 0; i < keep->n; i++)
        if (keep->v[i].ev.task == ev->task && keep->v[i].ev.u.chunk.seq == ev->u.chunk.seq)
            return true;
    return false;
}

/* Writes again the chunk ends of rp->waiting whose rows exist now (one
 * SELECT tells which), then the N new chunk events EVS; ends whose row is
 * still missing, and the newer ends of their chunks, are appended to KEEP
 * in their order (an older end still waiting for the row: the newer one
 * waits behind it, or the older one, written when the row appears, would
 * overwrite it).  0 or -1. */
static int wk_reporter_write_chunks(wk_reporter *rp, const wk_event *evs, size_t n,
                                    wk_wait_vec *keep, char *errstr, size_t errlen)
{
    size_t nw = rp->waiting.n, nl = 0, i;
    const wk_event **list = calloc(nw + n + 1, sizeof *list);
    int64_t *since = calloc(nw + n + 1, sizeof *since), *cells = calloc(nw * 2 + 1, sizeof *cells);
    bool *found = calloc(nw + 1, sizeof *found);
    int64_t now_ms = hr_clock_now_ms();
    int rc = -1;

    if (list == NULL || since == NULL || cells == NULL || found == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (i = 0; i < nw; i++) {
        cells[2 * i] = rp->waiting.v[i].ev.task;
        cells[2 * i + 1] = rp->waiting.v[i].ev.u.chunk.seq;
    }
    if (nw > 0 && wk_reporter_rows_exist(rp, cells, nw, 2, found, errstr, errlen) != 0)
        goto done;
    for (i = 0; i < nw; i++) {
        const wk_chunk_wait *cw = &rp->waiting.v[i];

        if (!found[i]) {
            wk_reporter_keep(rp, keep, &cw->ev, cw->since_ms);
            continue;
        }
        list[nl] = &cw->ev;
        since[nl++] = cw->since_ms;
    }
    for (i = 0; i < n; i++) {
        if (wk_reporter_waits(keep, &evs[i])) {
            wk_reporter_keep(rp, keep, &evs[i], now_ms);
            continue;
        }
        list[nl] = &evs[i];
        since[nl++] = now_ms;
    }
    rc = wk_reporter_write_ends(rp, list, nl, keep, since, errstr, errlen);
done:
    free(found);
    free(cells);
    free(since);
    free(list);
    return rc;
}

/* The tasks whose last chunk the N chunk events EVS closed (a 'done' end
 * with nothing pending and subs empty) are ended, in one hr_finish_tasks:
 * the counters of this batch were written first, from the stats hash the
 * chunks' closes read, so MySQL's are the tasks' now.  0 or -1. */
static int wk_reporter_finish(wk_reporter *rp, const wk_event *evs, size_t n, char *errstr,
                              size_t errlen)
{
    hr_finish_item *items = calloc(n + 1, sizeof *items);
    size_t i, k, nitems = 0;
    int rc = -1;

    if (items == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (i = 0; i < n; i++) {
        const wk_event *ev = &evs[i];

        /* Only a closed chunk can finish its task. */
        if (ev->u.chunk.state != WK_CHUNK_END_DONE || ev->u.chunk.pending_left != 0 ||
            ev->u.chunk.subs_left != 0)
            continue;
        for (k = 0; k < nitems && items[k].id != ev->task; k++)
            ;
        if (k == nitems)
            items[nitems++] = (hr_finish_item){.id = ev->task, .stats = HR_OUTCOMES_UNKNOWN};
    }
    if (nitems > 0 && hr_finish_tasks(rp->m, items, nitems, errstr, errlen) != 0)
        goto done;
    for (i = 0; i < nitems; i++) {
        if (!items[i].ended)
            continue;
        if (items[i].fin.unaccounted == 0) {
            hr_log_info("task_done", "task=%" PRId64, items[i].id);
            continue;
        }
        hr_metrics_add(rp->met->unaccounted, (uint64_t)items[i].fin.unaccounted);
        hr_log_error("task_unaccounted",
                     "task=%" PRId64 " via=worker unaccounted=%" PRId64 " subscriptions=%" PRId64,
                     items[i].id, items[i].fin.unaccounted, items[i].fin.subscriptions);
    }
    rc = 0;
done:
    free(items);
    return rc;
}

static int wk_reporter_write_fails(wk_reporter *rp, const wk_task_fail *f, size_t n, char *errstr,
                                   size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        int moved = hr_state_fail(rp->m, f[i].task, HR_STATE_DISPATCHED, f[i].why, errstr, errlen);

        if (moved < 0)
            return -1;
        if (moved > 0)
            hr_log_warn("task_failed", "task=%" PRId64 " error=%s", f[i].task, f[i].why);
    }
    return 0;
}

/* What one transaction writes: the first N ring events and the taken
 * deltas and chunk events. */
typedef struct wk_batch {
    size_t n;
    wk_delta_vec deltas;
    wk_event_vec chunks;
    wk_task_fail fails[WK_REPORTER_FAILS];
    size_t nfails;
} wk_batch;

/* Writes batch B and the waiting chunk ends in one transaction; the ends
 * whose row is still missing are appended to KEEP. */
static int wk_reporter_write(wk_reporter *rp, const wk_batch *b, wk_wait_vec *keep, char *errstr,
                             size_t errlen)
{
    if (rp->m == NULL && hr_mysql_connect(rp->cfg, &rp->m, errstr, errlen) != 0)
        return -1;
    if (hr_mysql_begin(rp->m, errstr, errlen) != 0)
        goto fail;
    if (wk_reporter_write_deliveries(rp, b->n, errstr, errlen) != 0 ||
        wk_reporter_write_counters(rp, b->deltas.v, b->deltas.n, errstr, errlen) != 0 ||
        wk_reporter_write_chunks(rp, b->chunks.v, b->chunks.n, keep, errstr, errlen) != 0 ||
        wk_reporter_finish(rp, b->chunks.v, b->chunks.n, errstr, errlen) != 0 ||
        wk_reporter_write_fails(rp, b->fails, b->nfails, errstr, errlen) != 0 ||
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

/* The absolute value NEWER unless it is none (-1), then OLDER. */
static int64_t wk_reporter_newest(int64_t older, int64_t newer)
{
    return newer >= 0 ? newer : older;
}

/* Adds the counters of task D into rp->deltas (caller holds the mutex):
 * D's absolute values replace the kept ones, unless D is OLDER (a failed
 * batch given back), whose values only fill in what nothing newer set;
 * -1 when out of memory. */
static int wk_reporter_merge(wk_reporter *rp, const wk_task_delta *d, bool older)
{
    wk_task_delta *e, lo, hi;
    size_t k;

    for (k = 0;
         k < rp->deltas.n && (rp->deltas.v[k].task != d->task || rp->deltas.v[k].shard != d->shard);
         k++)
        ;
    if (k == rp->deltas.n && hr_vec_push(&rp->deltas, ((wk_task_delta){.task = d->task,
                                                                       .shard = d->shard,
                                                                       .sent = -1,
                                                                       .failed = -1,
                                                                       .throttled = -1,
                                                                       .retried = -1,
                                                                       .unregistered = -1})) != 0)
        return -1;
    e = &rp->deltas.v[k];
    lo = older ? *d : *e;
    hi = older ? *e : *d;
    e->sent = wk_reporter_newest(lo.sent, hi.sent);
    e->failed = wk_reporter_newest(lo.failed, hi.failed);
    e->throttled = wk_reporter_newest(lo.throttled, hi.throttled);
    e->retried = wk_reporter_newest(lo.retried, hi.retried);
    e->unregistered = wk_reporter_newest(lo.unregistered, hi.unregistered);
    e->cancelled = lo.cancelled > hi.cancelled ? lo.cancelled : hi.cancelled;
    e->expired = lo.expired > hi.expired ? lo.expired : hi.expired;
    return 0;
}

/* Appends N chunk events to rp->chunks (caller holds the mutex). */
static int wk_reporter_add_chunks(wk_reporter *rp, const wk_event *evs, size_t n)
{
    if (hr_vec_reserve(&rp->chunks, rp->chunks.n + n) != 0)
        return -1;
    memcpy(rp->chunks.v + rp->chunks.n, evs, n * sizeof *evs);
    rp->chunks.n += n;
    return 0;
}

/* Takes the next batch (caller holds the mutex): ring events stay in the
 * ring until written, deltas and chunk events move to B. */
static void wk_reporter_take(wk_reporter *rp, wk_batch *b)
{
    b->n = rp->count < rp->batch ? rp->count : rp->batch;
    b->deltas = rp->deltas;
    b->chunks = rp->chunks;
    rp->deltas = (wk_delta_vec){0};
    rp->chunks = (wk_event_vec){0};
    memcpy(b->fails, rp->fails, rp->nfails * sizeof *rp->fails);
    b->nfails = rp->nfails;
    rp->nfails = 0;
}

/* Queues the failure of TASK unless it is queued already (mutex held). */
static void wk_reporter_add_fail(wk_reporter *rp, int64_t task, const char *why)
{
    for (size_t i = 0; i < rp->nfails; i++)
        if (rp->fails[i].task == task)
            return;
    if (rp->nfails == WK_REPORTER_FAILS)
        return;
    rp->fails[rp->nfails].task = task;
    snprintf(rp->fails[rp->nfails].why, sizeof rp->fails[rp->nfails].why, "%s", why);
    rp->nfails++;
}

/* A failed batch goes back (caller holds the mutex): its counters are
 * merged under the ones added meanwhile (those are newer), chunk events
 * keep their order. */
static void wk_reporter_giveback(wk_reporter *rp, wk_batch *b)
{
    for (size_t k = 0; k < b->deltas.n; k++)
        if (wk_reporter_merge(rp, &b->deltas.v[k], true) != 0)
            hr_log_error("reporter_counters_lost", "task=%" PRId64, b->deltas.v[k].task);
    if (b->chunks.n > 0) {
        wk_event_vec newer = rp->chunks;

        rp->chunks = b->chunks;
        b->chunks = (wk_event_vec){0};
        if (newer.n > 0 && wk_reporter_add_chunks(rp, newer.v, newer.n) != 0)
            hr_log_error("reporter_chunks_lost", "count=%zu", newer.n);
        hr_vec_free(&newer);
    }
    for (size_t i = 0; i < b->nfails; i++)
        wk_reporter_add_fail(rp, b->fails[i].task, b->fails[i].why);
    hr_vec_free(&b->deltas);
    hr_vec_free(&b->chunks);
}

static bool wk_reporter_idle(const wk_reporter *rp)
{
    return rp->count == 0 && rp->deltas.n == 0 && rp->chunks.n == 0 && rp->nfails == 0;
}

/* Whether the thread waits before its next write (mutex held): for a full
 * batch or the flush interval, until a stop; after a stop only while
 * nothing but chunk ends waiting for their rows is left, which are written
 * again at the flush interval, not in a busy loop. */
static bool wk_reporter_should_wait(const wk_reporter *rp)
{
    if (rp->count >= rp->batch)
        return false;
    return !rp->stopping || (wk_reporter_idle(rp) && rp->waiting.n > 0);
}

/* Gives up the waiting chunk ends that waited row_wait_ms, then the oldest
 * beyond WK_REPORTER_ROW_WAIT_MAX (all of them when ALL). */
static void wk_reporter_prune(wk_reporter *rp, bool all)
{
    int64_t now_ms = hr_clock_now_ms();
    size_t n = rp->waiting.n, kept = 0;
    size_t over = n > WK_REPORTER_ROW_WAIT_MAX ? n - WK_REPORTER_ROW_WAIT_MAX : 0;

    for (size_t i = 0; i < n; i++) {
        const wk_chunk_wait *cw = &rp->waiting.v[i];

        if (all)
            wk_reporter_give_up(rp, cw, now_ms, WK_WAIT_SHUTDOWN);
        else if (i < over)
            wk_reporter_give_up(rp, cw, now_ms, WK_WAIT_OVERFLOW);
        else if (now_ms - cw->since_ms >= rp->row_wait_ms)
            wk_reporter_give_up(rp, cw, now_ms, WK_WAIT_TIMEOUT);
        else
            rp->waiting.v[kept++] = *cw;
    }
    rp->waiting.n = kept;
}

static void *wk_reporter_main(void *arg)
{
    wk_reporter *rp = arg;
    int backoff_ms = 0;
    int64_t stop_seen_ms = -1;
    char errstr[512];

    for (;;) {
        struct timespec ts;
        wk_batch b;
        wk_wait_vec keep = {0};

        pthread_mutex_lock(&rp->mu);
        if (wk_reporter_should_wait(rp)) {
            wk_reporter_deadline(&ts, WK_REPORTER_FLUSH_MS);
            while (wk_reporter_should_wait(rp) &&
                   pthread_cond_timedwait(&rp->has_work, &rp->mu, &ts) != ETIMEDOUT)
                ;
        }
        if (rp->stopping && stop_seen_ms < 0)
            stop_seen_ms = hr_clock_now_ms();
        if (rp->stopping && wk_reporter_idle(rp) &&
            (rp->waiting.n == 0 ||
             hr_clock_now_ms() - stop_seen_ms > WK_REPORTER_STOP_ROW_WAIT_MS)) {
            pthread_mutex_unlock(&rp->mu);
            wk_reporter_prune(rp, true);
            break;
        }
        wk_reporter_take(rp, &b);
        pthread_mutex_unlock(&rp->mu);
        if (b.n == 0 && b.deltas.n == 0 && b.chunks.n == 0 && b.nfails == 0 && rp->waiting.n == 0)
            continue;

        int64_t started_ms = hr_clock_now_ms();

        if (wk_reporter_write(rp, &b, &keep, errstr, sizeof errstr) != 0) {
            /* Rolled back: the waiting ends stay as they were. */
            hr_vec_free(&keep);
            hr_metrics_inc(rp->met->backend_errors[WK_BACKEND_MYSQL]);
            atomic_store(&rp->met->mysql_ok, false);
            if (!rp->mysql_down)
                hr_log_error("reporter_mysql_down", "error=%s queued=%zu", errstr, b.n);
            rp->mysql_down = true;
            pthread_mutex_lock(&rp->mu);
            wk_reporter_giveback(rp, &b);
            if (stop_seen_ms >= 0 &&
                hr_clock_now_ms() - stop_seen_ms > WK_REPORTER_STOP_GIVEUP_MS) {
                hr_log_error("reporter_events_lost", "outcomes=%zu tasks=%zu chunks=%zu error=%s",
                             rp->count, rp->deltas.n, rp->chunks.n, errstr);
                rp->count = rp->deltas.n = rp->chunks.n = rp->nfails = 0;
                pthread_mutex_unlock(&rp->mu);
                wk_reporter_prune(rp, true);
                break;
            }
            pthread_mutex_unlock(&rp->mu);
            /* Always wait out the backoff: a full ring must not turn the
             * retries into a busy loop against a dead server. */
            backoff_ms = backoff_ms == 0 ? 100 : backoff_ms * 2;
            if (backoff_ms > WK_REPORTER_BACKOFF_MAX_MS)
                backoff_ms = WK_REPORTER_BACKOFF_MAX_MS;
            struct timespec d = {backoff_ms / 1000, (long)(backoff_ms % 1000) * 1000000L};

            nanosleep(&d, NULL);
            continue;
        }
        hr_vec_free(&rp->waiting);
        rp->waiting = keep;
        wk_reporter_prune(rp, false);
        hr_metrics_observe(rp->met->reporter_flush, (hr_clock_now_ms() - started_ms) / 1000.0);
        atomic_store(&rp->met->mysql_ok, true);
        if (rp->mysql_down)
            hr_log_info("reporter_mysql_up", "queued=%zu", b.n);
        rp->mysql_down = false;
        backoff_ms = 0;
        hr_vec_free(&b.deltas);
        hr_vec_free(&b.chunks);
        pthread_mutex_lock(&rp->mu);
        rp->count -= b.n;
        /* An empty ring starts again at slot 0: the slots in use stay those
         * of the largest backlog, so the pages the ring touches (its RSS)
         * follow how far MySQL fell behind, not how many pushes were made. */
        rp->head = rp->count == 0 ? 0 : (rp->head + b.n) % rp->cap;
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

int wk_reporter_start(const hr_config *cfg, const char *owner, int64_t row_wait_ms, wk_metrics *met,
                      wk_reporter **out, char *errstr, size_t errlen)
{
    wk_reporter *rp = calloc(1, sizeof *rp);

    *out = NULL;
    if (rp == NULL)
        goto oom;
    rp->cfg = cfg;
    rp->met = met;
    snprintf(rp->owner, sizeof rp->owner, "%s", owner);
    rp->row_wait_ms = row_wait_ms;
    rp->delivery_log = cfg->worker.delivery_log;
    rp->batch = (size_t)cfg->worker.reporter_batch;
    rp->full = rp->batch < WK_DELIVERY_STMT_ROWS ? rp->batch : WK_DELIVERY_STMT_ROWS;
    rp->cap = (size_t)cfg->worker.reporter_queue;
    rp->ring = calloc(rp->cap, sizeof *rp->ring);
    rp->params = calloc(rp->batch * WK_DELIVERY_COLS, sizeof *rp->params);
    rp->sqls[0] = wk_reporter_build_sql(1);
    if (rp->ring == NULL || rp->params == NULL || rp->sqls[0] == NULL)
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
        free(rp->sqls[0]);
        free(rp);
    }
    return -1;
}

void wk_reporter_push(wk_reporter *rp, const wk_event *ev)
{
    struct timespec ts;
    bool lost = false;

    pthread_mutex_lock(&rp->mu);
    switch (ev->kind) {
    case WK_EVENT_COUNTERS: {
        wk_task_delta d = {.task = ev->task,
                           .shard = ev->shard,
                           .sent = ev->u.counters.sent,
                           .failed = ev->u.counters.failed,
                           .throttled = ev->u.counters.throttled,
                           .retried = ev->u.counters.retried,
                           .unregistered = ev->u.counters.unregistered,
                           .cancelled = ev->u.counters.cancelled,
                           .expired = ev->u.counters.expired};

        lost = wk_reporter_merge(rp, &d, false) != 0;
        break;
    }
    case WK_EVENT_CHUNK_DONE:
        lost = wk_reporter_add_chunks(rp, ev, 1) != 0;
        break;
    case WK_EVENT_OUTCOME:
        wk_reporter_deadline(&ts, WK_REPORTER_PUSH_WAIT_MS);
        while (rp->count == rp->cap &&
               pthread_cond_timedwait(&rp->has_room, &rp->mu, &ts) != ETIMEDOUT)
            ;
        if (rp->count == rp->cap) {
            /* The delivery log is optional; the loop thread is not. */
            hr_metrics_inc(rp->met->reporter_dropped[WK_DROP_QUEUE_FULL]);
            break;
        }
        rp->ring[(rp->head + rp->count) % rp->cap] = *ev;
        rp->count++;
        if (rp->count >= rp->batch)
            pthread_cond_signal(&rp->has_work);
        break;
    }
    pthread_mutex_unlock(&rp->mu);
    if (lost)
        hr_log_error("reporter_event_lost", "task=%" PRId64 " kind=%d reason=out_of_memory",
                     ev->task, (int)ev->kind);
}

void wk_reporter_fail_task(wk_reporter *rp, int64_t task, const char *why)
{
    pthread_mutex_lock(&rp->mu);
    wk_reporter_add_fail(rp, task, why);
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
    for (size_t i = 0; i < WK_DELIVERY_SIZES; i++)
        free(rp->sqls[i]);
    free(rp->params);
    free(rp->ring);
    hr_vec_free(&rp->deltas);
    hr_vec_free(&rp->chunks);
    hr_vec_free(&rp->waiting);
    free(rp);
}
