/* dsp_jobs: the dispatcher's background job runner.  One job at a time
 * runs on libuv's thread pool with its own connections (d->jobs->conn);
 * the timers ask for work (DSP_JOBS_*) and a request made while a job runs
 * is served by the next one.
 *
 * - scan: the series' occurrences (dsp_series.c), the scanner (dsp_scan.c), then the control transitions
 *   (dsp_control.c), the herald_tasks{state} gauge (the finished states,
 *   and the scheduled ones when many, every DSP_JOBS_FINALS_MS) and, every
 *   DSP_MIRROR_SYNC_MS, the books' mirror syncs (dsp_mirror.c), and when one
 *   is due the delivery log's upkeep (dsp_dlog.c); when it returned, the
 *   timer pops at once (the scan may have put entries due before its next
 *   wake-up).
 * - poll: the DB poller (dsp_poll.c); the pending chunks of a task taken
 *   over are published again (dsp_sweep_takeover); the tasks it claimed
 *   are owned on the loop thread in the after-work callback.
 * - sweep: the sweeper and key retirement (dsp_sweep.c).
 * - handback: the chunks workers handed back, published again
 *   (dsp_sweep_handbacks), every second. */
#include "dsp_jobs.h"

#include <stdlib.h>
#include <string.h>

#include "dsp_mirror.h"
#include "dsp_conn.h"
#include "dsp_control.h"
#include "dsp_dlog.h"
#include "dsp_owned.h"
#include "dsp_poll.h"
#include "dsp_scan.h"
#include "dsp_series.h"
#include "dsp_sweep.h"
#include "dsp_timer.h"
#include "hr_clock.h"
#include "hr_state.h"

/* The loop thread starts a job and reads CLAIMED in its after-work
 * callback; the job uses CONN and fills CLAIMED in between. */
struct dsp_jobs {
    uv_work_t work;
    bool busy;
    unsigned want, doing; /* DSP_JOBS_* asked for, and being done */
    dsp_conn conn;
    dsp_poll_claimed claimed;
    int64_t finals_ms;    /* when the finished states were last counted */
    int64_t scheduled_ms; /* when the scheduled ones were, and how many */
    int64_t scheduled;
};

int dsp_jobs_new(dsp *d)
{
    d->jobs = calloc(1, sizeof *d->jobs);
    return d->jobs != NULL ? 0 : -1;
}

void dsp_jobs_free(dsp *d)
{
    dsp_jobs *jobs = d->jobs;

    if (jobs == NULL)
        return;
    for (size_t i = 0; i < jobs->claimed.n; i++)
        hr_task_free(jobs->claimed.v[i]);
    hr_vec_free(&jobs->claimed);
    dsp_conn_close(&jobs->conn);
    free(jobs);
    d->jobs = NULL;
}

bool dsp_jobs_busy(const dsp *d)
{
    return d->jobs->busy;
}

/* The groups of states herald_tasks{state} is counted by, each with one
 * GROUP BY over the state index's range of them. */
typedef enum dsp_jobs_states {
    DSP_JOBS_IN_FLIGHT,
    DSP_JOBS_SCHEDULED,
    DSP_JOBS_FINALS
} dsp_jobs_states;

static const struct {
    const char *sql;
    unsigned states;
} dsp_jobs_groups[] = {
    [DSP_JOBS_IN_FLIGHT] = {"SELECT state, COUNT(*) FROM push_task WHERE state IN "
                            "('dispatching', 'dispatched', 'paused') "
                            "AND (? IS NULL OR topic = ?) GROUP BY state",
                            1u << HR_STATE_DISPATCHING | 1u << HR_STATE_DISPATCHED |
                                1u << HR_STATE_PAUSED},
    [DSP_JOBS_SCHEDULED] = {"SELECT state, COUNT(*) FROM push_task WHERE state = 'scheduled' "
                            "AND (? IS NULL OR topic = ?) GROUP BY state",
                            1u << HR_STATE_SCHEDULED},
    [DSP_JOBS_FINALS] = {"SELECT state, COUNT(*) FROM push_task WHERE state IN "
                         "('done', 'cancelled', 'failed') AND (? IS NULL OR topic = ?) "
                         "GROUP BY state",
                         1u << HR_STATE_DONE | 1u << HR_STATE_CANCELLED | 1u << HR_STATE_FAILED},
};

/* herald_tasks{state} of the group G; how many tasks it has into *TOTAL.
 * 0, or -1 when MySQL failed (reported). */
static int dsp_jobs_count_states(dsp *d, dsp_conn *conn, dsp_jobs_states g, int64_t *total)
{
    const hr_mysql_param p[] = {DSP_TOPIC_PARAMS};
    hr_mysql_rows *rows = NULL;
    char err[512];

    if (hr_mysql_query(conn->m, dsp_jobs_groups[g].sql, p, 2, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return -1;
    }
    dsp_metrics_tasks(&d->met, rows, dsp_jobs_groups[g].states, total);
    hr_mysql_rows_free(rows);
    return 0;
}

/* herald_tasks{state}.  A count reads one entry of the state index per
 * task of its states.  The tasks in flight (dispatching, dispatched,
 * paused) every scan.  The scheduled ones every scan too while they were
 * at most DSP_JOBS_SCHEDULED_EACH_SCAN, then once every DSP_JOBS_FINALS_MS:
 * 1,000,000 reminders scheduled ahead took 1.3 s of MariaDB to count, every
 * second (docs/performance.md "Reminders scheduled ahead").  The finished
 * ones (done, cancelled, failed) keep every task until `heraldctl purge`
 * takes it, so their count reads the whole history (0.32 s of MariaDB at
 * 300,000 tasks): once every DSP_JOBS_FINALS_MS.  The alert on failed
 * tasks compares an hour apart. */
static void dsp_jobs_count(dsp *d, dsp_conn *conn)
{
    dsp_jobs *jobs = d->jobs;
    int64_t now = hr_clock_now_ms(), total;

    if (atomic_load(&d->stopping) || dsp_jobs_count_states(d, conn, DSP_JOBS_IN_FLIGHT, &total) < 0)
        return;
    if (jobs->scheduled <= DSP_JOBS_SCHEDULED_EACH_SCAN ||
        now - jobs->scheduled_ms >= DSP_JOBS_FINALS_MS) {
        if (dsp_jobs_count_states(d, conn, DSP_JOBS_SCHEDULED, &jobs->scheduled) < 0)
            return;
        jobs->scheduled_ms = now;
    }
    if (now - jobs->finals_ms >= DSP_JOBS_FINALS_MS) {
        if (dsp_jobs_count_states(d, conn, DSP_JOBS_FINALS, &total) < 0)
            return;
        jobs->finals_ms = now;
    }
    /* MySQL answers again after a failure (an idle dispatcher reports no
     * chunk that would say so): mysql_up, and /readyz follows. */
    dsp_health_ok(d, DSP_MYSQL);
}

static void dsp_jobs_work(uv_work_t *w)
{
    dsp *d = w->data;
    dsp_jobs *jobs = d->jobs;

    if (!dsp_conn_ready(d, &jobs->conn))
        return;
    if (jobs->doing & DSP_JOBS_SCAN) {
        dsp_series_run(d, &jobs->conn); /* occurrences first: scanned in this pass */
        dsp_scan_run(d, &jobs->conn);
        /* A cancel or redrive changed the finished states: count them,
         * and the scheduled ones. */
        if (dsp_control_scan(d, &jobs->conn))
            jobs->finals_ms = jobs->scheduled_ms = 0;
        dsp_jobs_count(d, &jobs->conn);
        dsp_mirror_sync(d, &jobs->conn, true, true);
        dsp_dlog_run(d, &jobs->conn);
    }
    if ((jobs->doing & DSP_JOBS_POLL) && !atomic_load(&d->stopping)) {
        dsp_poll_run(d, &jobs->conn, &jobs->claimed);
        for (size_t i = 0; i < jobs->claimed.n; i++)
            if (jobs->claimed.v[i]->state == HR_STATE_DISPATCHING)
                dsp_sweep_takeover(d, &jobs->conn, jobs->claimed.v[i]);
    }
    if ((jobs->doing & DSP_JOBS_SWEEP) && !atomic_load(&d->stopping))
        dsp_sweep_run(d, &jobs->conn);
    if ((jobs->doing & DSP_JOBS_HANDBACK) && !atomic_load(&d->stopping))
        dsp_sweep_handbacks(d, &jobs->conn);
}

static void dsp_jobs_done(uv_work_t *w, int status)
{
    dsp *d = w->data;
    dsp_jobs *jobs = d->jobs;
    size_t i;

    (void)status;
    jobs->busy = false;
    for (i = 0; i < jobs->claimed.n; i++) {
        dsp_owned_add(d, jobs->claimed.v[i],
                      jobs->claimed.v[i]->state == HR_STATE_DISPATCHING ? "takeover" : "poller");
        hr_task_free(jobs->claimed.v[i]);
    }
    jobs->claimed.n = 0;
    if (atomic_load(&d->stopping))
        return;
    /* The scan may have put entries into the timer that are due before it
     * wakes. */
    if (jobs->doing & DSP_JOBS_SCAN)
        dsp_timer_wake(d);
    if (jobs->want != 0)
        dsp_jobs_kick(d, 0);
}

void dsp_jobs_kick(dsp *d, unsigned what)
{
    dsp_jobs *jobs = d->jobs;

    jobs->want |= what;
    if (jobs->busy || jobs->want == 0 || atomic_load(&d->stopping))
        return;
    jobs->doing = jobs->want;
    jobs->want = 0;
    jobs->work.data = d;
    if (uv_queue_work(d->loop, &jobs->work, dsp_jobs_work, dsp_jobs_done) == 0)
        jobs->busy = true;
}
