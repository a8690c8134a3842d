/* wk_chunkrows: chunk ends into their push_chunk rows, waiting for the
 * rows that are not there yet (see wk_chunkrows.h). */
#include "wk_chunkrows.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_batch.h"
#include "hr_clock.h"
#include "hr_finish.h"
#include "hr_log.h"
#include "hr_vec.h"

/* A chunk end whose push_chunk row did not exist yet. */
typedef struct wk_chunk_wait {
    wk_event ev;
    int64_t since_ms; /* when its UPDATE first found no row */
} wk_chunk_wait;

typedef HR_VEC(wk_chunk_wait) wk_wait_vec;

/* Why a waiting chunk end is given up (the reason= of chunk_row_missing). */
typedef enum wk_wait_drop {
    WK_WAIT_TIMEOUT,  /* waited row_wait_ms */
    WK_WAIT_OVERFLOW, /* more than WK_CHUNKROWS_WAIT_MAX wait: the oldest goes */
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

struct wk_chunkrows {
    char owner[160]; /* push_chunk.worker */
    int64_t row_wait_ms;
    wk_metrics *met;
    /* The chunk ends whose row was missing, oldest first, at most
     * WK_CHUNKROWS_WAIT_MAX after each write. */
    wk_wait_vec waiting;
    wk_wait_vec keep; /* what a write left waiting, WAITING once it committed */
};

/* Gives up waiting chunk end CW: loud, and counted for the alert. */
static void wk_chunkrows_give_up(wk_chunkrows *cr, const wk_chunk_wait *cw, int64_t now_ms,
                                 wk_wait_drop why)
{
    hr_metrics_inc(cr->met->chunk_rows_missing);
    hr_log_error("chunk_row_missing",
                 "task=%" PRId64 " seq=%" PRId64 " state=%s waited_ms=%" PRId64 " reason=%s",
                 cw->ev.task, cw->ev.u.chunk.seq, wk_chunk_end_names[cw->ev.u.chunk.state],
                 now_ms - cw->since_ms, wk_wait_drop_names[why]);
}

/* Appends chunk end EV, whose row was missing since SINCE_MS, to CR->keep
 * (given up when out of memory). */
static void wk_chunkrows_keep(wk_chunkrows *cr, const wk_event *ev, int64_t since_ms)
{
    const wk_chunk_wait cw = {.ev = *ev, .since_ms = since_ms};

    if (hr_vec_push(&cr->keep, cw) != 0)
        wk_chunkrows_give_up(cr, &cw, hr_clock_now_ms(), WK_WAIT_NO_MEMORY);
}

/* Writes chunk end EV into its push_chunk row; *MISSING tells that the row
 * does not exist (yet).  0 or -1. */
static int wk_chunkrows_write_end(wk_chunkrows *cr, hr_mysql *m, const wk_event *ev, bool *missing,
                                  char *errstr, size_t errlen)
{
    const hr_mysql_param chunk[] = {HR_P_STR(wk_chunk_end_names[ev->u.chunk.state]),
                                    HR_P_I64(ev->u.chunk.done_ms), HR_P_STR(cr->owner),
                                    HR_P_I64(ev->task), HR_P_I64(ev->u.chunk.seq)};
    hr_mysql_rows *rows = NULL;
    uint64_t changed = 0;

    *missing = false;
    /* A chunk closed by one worker stays 'done' even when another
     * (a redelivery, a late cancel) reports it parked or cancelled. */
    if (hr_mysql_exec(m,
                      "UPDATE push_chunk SET state = ?, done_at = FROM_UNIXTIME(? / 1000), "
                      "worker = ? WHERE task_id = ? AND seq = ? AND state <> 'done'",
                      chunk, 5, &changed, NULL, NULL, errstr, errlen) != 0)
        return -1;
    if (changed > 0)
        return 0;
    /* hr_mysql connects without CLIENT_FOUND_ROWS, so MariaDB counts the
     * rows changed: 0 also for a row already 'done' (the WHERE) and for one
     * that holds these very values (the batch written again after its
     * COMMIT's answer was lost).  With FOUND_ROWS the second would count 1
     * and the first still 0: under either flag only a read tells a row that
     * is not there from one that needs nothing. */
    if (hr_mysql_query(m, "SELECT 1 FROM push_chunk WHERE task_id = ? AND seq = ?", chunk + 3, 2,
                       &rows, errstr, errlen) != 0)
        return -1;
    *missing = rows->nrows == 0;
    hr_mysql_rows_free(rows);
    return 0;
}

/* hr_batch_select's match: the waiting end I has its row (every waiting
 * end of that chunk is offered the answered row). */
static bool wk_chunkrows_found(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row)
{
    bool *found = ctx;

    (void)rows;
    (void)row;
    found[i] = true;
    return false;
}

/* Writes again the chunk ends of CR->waiting, in their order, whose rows
 * exist now (one SELECT over the batch of their task and seq tells which);
 * the others are appended to CR->keep.
 * 0 or -1. */
static int wk_chunkrows_write_waiting(wk_chunkrows *cr, hr_mysql *m, char *errstr, size_t errlen)
{
    size_t n = cr->waiting.n;
    int64_t *cells = NULL;
    bool *found = NULL, missing;
    int rc = -1;

    if (n == 0)
        return 0;
    cells = calloc(n * 2, sizeof *cells);
    found = calloc(n, sizeof *found);
    if (cells == NULL || found == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        cells[i * 2] = cr->waiting.v[i].ev.task;
        cells[i * 2 + 1] = cr->waiting.v[i].ev.u.chunk.seq;
    }
    if (hr_batch_select(m,
                        "SELECT DISTINCT c.task_id, c.seq FROM JSON_TABLE(?, '$[*]' COLUMNS "
                        "(task BIGINT PATH '$[0]', seq BIGINT PATH '$[1]')) j STRAIGHT_JOIN "
                        "push_chunk c ON c.task_id = j.task AND c.seq = j.seq",
                        &(hr_batch){.v = cells, .nrows = n, .ncols = 2}, NULL, 0, 2,
                        wk_chunkrows_found, found, errstr, errlen) != 0)
        goto done;
    for (size_t i = 0; i < n; i++) {
        const wk_chunk_wait *cw = &cr->waiting.v[i];

        missing = !found[i];
        if (found[i] && wk_chunkrows_write_end(cr, m, &cw->ev, &missing, errstr, errlen) != 0)
            goto done;
        if (missing)
            wk_chunkrows_keep(cr, &cw->ev, cw->since_ms);
    }
    rc = 0;
done:
    free(found);
    free(cells);
    return rc;
}

/* Whether KEEP holds an end of EV's chunk. */
static bool wk_chunkrows_waits(const wk_wait_vec *keep, const wk_event *ev)
{
    for (size_t i = 0; i < keep->n; i++)
        if (keep->v[i].ev.task == ev->task && keep->v[i].ev.u.chunk.seq == ev->u.chunk.seq)
            return true;
    return false;
}

/* Writes the N chunk events EVS (after the waiting ones); the ends whose
 * row is missing are appended to CR->keep. */
static int wk_chunkrows_write_chunks(wk_chunkrows *cr, hr_mysql *m, const wk_event *evs, size_t n,
                                     char *errstr, size_t errlen)
{
    int64_t now_ms = hr_clock_now_ms();

    for (size_t i = 0; i < n; i++) {
        const wk_event *ev = &evs[i];
        /* An older end of the same chunk still waits for the row: this one
         * waits behind it, or the older one, written when the row appears,
         * would overwrite it. */
        bool missing = wk_chunkrows_waits(&cr->keep, ev);

        if (!missing && wk_chunkrows_write_end(cr, m, ev, &missing, errstr, errlen) != 0)
            return -1;
        if (missing)
            wk_chunkrows_keep(cr, ev, now_ms);
        /* Only a closed chunk can finish its task. */
        if (ev->u.chunk.state != WK_CHUNK_END_DONE || ev->u.chunk.pending_left != 0 ||
            ev->u.chunk.subs_left != 0)
            continue;
        /* The counters of this batch were written first, from the stats
         * hash the chunk's close read: MySQL's are the task's now. */
        hr_finish_result fin;
        int rc = hr_finish_task(m, ev->task, &HR_OUTCOMES_UNKNOWN, &fin, errstr, errlen);

        if (rc < 0)
            return -1;
        if (rc == 0)
            continue;
        if (fin.unaccounted == 0) {
            hr_log_info(fin.state == HR_STATE_CANCELLED ? "task_cancelled" : "task_done",
                        "task=%" PRId64, ev->task);
            continue;
        }
        hr_metrics_add(cr->met->unaccounted, (uint64_t)fin.unaccounted);
        hr_log_error("task_unaccounted",
                     "task=%" PRId64 " via=worker state=%s unaccounted=%" PRId64
                     " subscriptions=%" PRId64,
                     ev->task, hr_state_name(fin.state), fin.unaccounted, fin.subscriptions);
    }
    return 0;
}

/* Gives up the waiting chunk ends that waited row_wait_ms, then the oldest
 * beyond WK_CHUNKROWS_WAIT_MAX (all of them when ALL). */
static void wk_chunkrows_prune(wk_chunkrows *cr, bool all)
{
    int64_t now_ms = hr_clock_now_ms();
    size_t n = cr->waiting.n, kept = 0;
    size_t over = n > WK_CHUNKROWS_WAIT_MAX ? n - WK_CHUNKROWS_WAIT_MAX : 0;

    for (size_t i = 0; i < n; i++) {
        const wk_chunk_wait *cw = &cr->waiting.v[i];

        if (all)
            wk_chunkrows_give_up(cr, cw, now_ms, WK_WAIT_SHUTDOWN);
        else if (i < over)
            wk_chunkrows_give_up(cr, cw, now_ms, WK_WAIT_OVERFLOW);
        else if (now_ms - cw->since_ms >= cr->row_wait_ms)
            wk_chunkrows_give_up(cr, cw, now_ms, WK_WAIT_TIMEOUT);
        else
            cr->waiting.v[kept++] = *cw;
    }
    cr->waiting.n = kept;
}

wk_chunkrows *wk_chunkrows_new(const char *owner, int64_t row_wait_ms, wk_metrics *met)
{
    wk_chunkrows *cr = calloc(1, sizeof *cr);

    if (cr == NULL)
        return NULL;
    snprintf(cr->owner, sizeof cr->owner, "%s", owner);
    cr->row_wait_ms = row_wait_ms;
    cr->met = met;
    return cr;
}

int wk_chunkrows_write(wk_chunkrows *cr, hr_mysql *m, const wk_event *evs, size_t n, char *errstr,
                       size_t errlen)
{
    hr_vec_free(&cr->keep);
    if (wk_chunkrows_write_waiting(cr, m, errstr, errlen) != 0 ||
        wk_chunkrows_write_chunks(cr, m, evs, n, errstr, errlen) != 0)
        return -1;
    return 0;
}

void wk_chunkrows_committed(wk_chunkrows *cr)
{
    hr_vec_free(&cr->waiting);
    cr->waiting = cr->keep;
    cr->keep = (wk_wait_vec){0};
    wk_chunkrows_prune(cr, false);
}

void wk_chunkrows_rolled_back(wk_chunkrows *cr)
{
    hr_vec_free(&cr->keep);
}

size_t wk_chunkrows_waiting(const wk_chunkrows *cr)
{
    return cr->waiting.n;
}

void wk_chunkrows_give_up_all(wk_chunkrows *cr)
{
    wk_chunkrows_prune(cr, true);
}

void wk_chunkrows_free(wk_chunkrows *cr)
{
    if (cr == NULL)
        return;
    hr_vec_free(&cr->waiting);
    hr_vec_free(&cr->keep);
    free(cr);
}
