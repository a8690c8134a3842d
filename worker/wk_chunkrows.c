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

/* One chunk of a write's ends: its key, and the place in the write's list
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
static int wk_chunkrows_exist(hr_mysql *m, const int64_t *cells, size_t n, size_t ncols,
                              bool *found, char *errstr, size_t errlen)
{
    memset(found, 0, n * sizeof *found);
    return hr_batch_select(
        m,
        "SELECT DISTINCT c.task_id, c.seq FROM JSON_TABLE(?, '$[*]' COLUMNS "
        "(task BIGINT PATH '$[0]', seq BIGINT PATH '$[1]')) j STRAIGHT_JOIN "
        "push_chunk c FORCE INDEX (PRIMARY) ON c.task_id = j.task AND c.seq = j.seq",
        &(hr_batch){cells, n, ncols}, NULL, 0, 2, hr_batch_mark, found, errstr, errlen);
}

/* Writes the N chunk ends EVS (in their order; end I waits since
 * SINCE[I]) into their push_chunk rows in one UPDATE: the ends of one
 * chunk come to what writing them one by one gives (a row never leaves
 * 'done': its first 'done' end, else its last end).  When it changed fewer
 * rows than chunks, one SELECT tells which rows are missing, and every end
 * of such a chunk goes to CR->keep in order (hr_mysql sets no
 * CLIENT_FOUND_ROWS, so MariaDB counts the rows changed: 0 also for a row
 * already 'done' and for one that holds these very values, a batch written
 * again after its COMMIT's answer was lost; only a read tells a row that
 * is not there from one that needs nothing).  0 or -1. */
static int wk_chunkrows_write_ends(wk_chunkrows *cr, hr_mysql *m, const wk_event *const *evs,
                                   size_t n, const int64_t *since, char *errstr, size_t errlen)
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
     * names are wk_chunk_end's, in its order (wk_chunk_end_names). */
    if (hr_batch_exec(m,
                      "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (task BIGINT PATH '$[0]', seq BIGINT "
                      "PATH '$[1]', state INT PATH '$[2]', done_ms BIGINT PATH '$[3]')) j "
                      "STRAIGHT_JOIN push_chunk c FORCE INDEX (PRIMARY) ON c.task_id = j.task AND "
                      "c.seq = j.seq "
                      "SET c.state = ELT(j.state + 1, 'done', 'parked', 'cancelled', 'expired'), "
                      "c.done_at = FROM_UNIXTIME(j.done_ms / 1000), c.worker = ? "
                      "WHERE c.state <> 'done'",
                      &(hr_batch){cells, nk, 4}, &HR_P_STR(cr->owner), 1, &changed, NULL, errstr,
                      errlen) != 0)
        goto done;
    if (changed < nk && wk_chunkrows_exist(m, cells, nk, 4, found, errstr, errlen) != 0)
        goto done;
    /* The ends of a chunk without a row wait for it, in their order. */
    for (i = 0; changed < nk && i < n; i++) {
        const wk_end_key want = {evs[i]->task, evs[i]->u.chunk.seq, 0, 0};
        const wk_end_key *key = bsearch(&want, keys, nk, sizeof *keys, wk_end_chunk_cmp);

        if (key != NULL && !found[key - keys])
            wk_chunkrows_keep(cr, evs[i], since[i]);
    }
    rc = 0;
done:
    free(found);
    free(cells);
    free(keys);
    return rc;
}

/* Whether CR->keep holds an end of EV's chunk. */
static bool wk_chunkrows_waits(const wk_chunkrows *cr, const wk_event *ev)
{
    for (size_t i = 0; i < cr->keep.n; i++)
        if (cr->keep.v[i].ev.task == ev->task && cr->keep.v[i].ev.u.chunk.seq == ev->u.chunk.seq)
            return true;
    return false;
}

/* Writes again the chunk ends of CR->waiting whose rows exist now (one
 * SELECT tells which), then the N new chunk events EVS; ends whose row is
 * still missing, and the newer ends of their chunks, are appended to
 * CR->keep in their order (an older end still waiting for the row: the
 * newer one waits behind it, or the older one, written when the row
 * appears, would overwrite it).  0 or -1. */
static int wk_chunkrows_write_chunks(wk_chunkrows *cr, hr_mysql *m, const wk_event *evs, size_t n,
                                     char *errstr, size_t errlen)
{
    size_t nw = cr->waiting.n, nl = 0, i;
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
        cells[2 * i] = cr->waiting.v[i].ev.task;
        cells[2 * i + 1] = cr->waiting.v[i].ev.u.chunk.seq;
    }
    if (nw > 0 && wk_chunkrows_exist(m, cells, nw, 2, found, errstr, errlen) != 0)
        goto done;
    for (i = 0; i < nw; i++) {
        const wk_chunk_wait *cw = &cr->waiting.v[i];

        if (!found[i]) {
            wk_chunkrows_keep(cr, &cw->ev, cw->since_ms);
            continue;
        }
        list[nl] = &cw->ev;
        since[nl++] = cw->since_ms;
    }
    for (i = 0; i < n; i++) {
        if (wk_chunkrows_waits(cr, &evs[i])) {
            wk_chunkrows_keep(cr, &evs[i], now_ms);
            continue;
        }
        list[nl] = &evs[i];
        since[nl++] = now_ms;
    }
    rc = wk_chunkrows_write_ends(cr, m, list, nl, since, errstr, errlen);
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
static int wk_chunkrows_finish(wk_chunkrows *cr, hr_mysql *m, const wk_event *evs, size_t n,
                               char *errstr, size_t errlen)
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
    if (nitems > 0 && hr_finish_tasks(m, items, nitems, errstr, errlen) != 0)
        goto done;
    for (i = 0; i < nitems; i++) {
        const hr_finish_result *fin = &items[i].fin;

        if (!items[i].ended)
            continue;
        if (fin->unaccounted == 0) {
            hr_log_info(fin->state == HR_STATE_CANCELLED ? "task_cancelled" : "task_done",
                        "task=%" PRId64, items[i].id);
            continue;
        }
        hr_metrics_add(cr->met->unaccounted, (uint64_t)fin->unaccounted);
        hr_log_error("task_unaccounted",
                     "task=%" PRId64 " via=worker state=%s unaccounted=%" PRId64
                     " subscriptions=%" PRId64,
                     items[i].id, hr_state_name(fin->state), fin->unaccounted, fin->subscriptions);
    }
    rc = 0;
done:
    free(items);
    return rc;
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
    if (wk_chunkrows_write_chunks(cr, m, evs, n, errstr, errlen) != 0 ||
        wk_chunkrows_finish(cr, m, evs, n, errstr, errlen) != 0)
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
