/* dsp_jobs: the dispatcher's background job runner.  One job at a time
 * runs on libuv's thread pool with its own connections (dsp.bg_conn); the
 * timers ask for work (DSP_BG_*) and a request made while a job runs is
 * served by the next one.
 *
 * - scan: the scanner (dsp_scan.c), then the control transitions
 *   (dsp_control.c), the herald_tasks{state} gauge and, every
 *   DSP_ADDR_SYNC_MS, the address sync (dsp_addr.c); when it returned, the
 *   timer pops at once (the scan may have put entries due before its next
 *   wake-up).
 * - poll: the DB poller (dsp_poll.c); the tasks it claimed are owned on
 *   the loop thread in the after-work callback.
 * - sweep: the sweeper and key retirement (dsp_sweep.c). */
#include <stdlib.h>
#include <string.h>

#include "dsp.h"
#include "hr_state.h"

/* herald_tasks{state}: one GROUP BY over the state index. */
static void dsp_jobs_count(dsp *d)
{
    dsp_conn *conn = &d->bg_conn;
    const hr_mysql_param p[] = {DSP_TOPIC_PARAMS};
    hr_mysql_rows *rows = NULL;
    char err[512];

    if (atomic_load(&d->stopping))
        return;
    if (hr_mysql_query(conn->m,
                       "SELECT state, COUNT(*) FROM push_task WHERE (? IS NULL OR topic = ?) "
                       "GROUP BY state",
                       p, 2, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return;
    }
    dsp_metrics_tasks(d, rows);
    hr_mysql_rows_free(rows);
}

static void dsp_jobs_work(uv_work_t *w)
{
    dsp *d = w->data;

    if (!dsp_conn_ready(d, &d->bg_conn))
        return;
    if (d->bg_doing & DSP_BG_SCAN) {
        dsp_scan(d);
        dsp_control_scan(d);
        dsp_jobs_count(d);
        dsp_addr_sync(d, &d->bg_conn, true);
    }
    if ((d->bg_doing & DSP_BG_POLL) && !atomic_load(&d->stopping))
        dsp_poll(d);
    if ((d->bg_doing & DSP_BG_SWEEP) && !atomic_load(&d->stopping))
        dsp_sweep(d);
}

static void dsp_jobs_done(uv_work_t *w, int status)
{
    dsp *d = w->data;
    size_t i;

    (void)status;
    d->bg_busy = false;
    for (i = 0; i < d->bg_claimed.n; i++) {
        dsp_own(d, d->bg_claimed.v[i],
                d->bg_claimed.v[i]->state == HR_STATE_DISPATCHING ? "takeover" : "poller");
        hr_task_free(d->bg_claimed.v[i]);
    }
    d->bg_claimed.n = 0;
    if (atomic_load(&d->stopping))
        return;
    /* The scan may have put entries into the timer that are due before it
     * wakes. */
    if (d->bg_doing & DSP_BG_SCAN)
        dsp_timer_wake(d);
    if (d->bg_want != 0)
        dsp_jobs_kick(d, 0);
}

void dsp_jobs_kick(dsp *d, unsigned what)
{
    d->bg_want |= what;
    if (d->bg_busy || d->bg_want == 0 || atomic_load(&d->stopping))
        return;
    d->bg_doing = d->bg_want;
    d->bg_want = 0;
    d->bg_work.data = d;
    if (uv_queue_work(d->loop, &d->bg_work, dsp_jobs_work, dsp_jobs_done) == 0)
        d->bg_busy = true;
}

void dsp_jobs_free(dsp *d)
{
    size_t i;

    for (i = 0; i < d->bg_claimed.n; i++)
        hr_task_free(d->bg_claimed.v[i]);
    hr_vec_free(&d->bg_claimed);
    free(d->scan);
    d->scan = NULL;
    d->nscan = 0;
    dsp_conn_close(&d->bg_conn);
}
