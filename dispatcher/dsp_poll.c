/* dsp_poll: the DB poller (DESIGN.md "DB poller"), run by the background
 * job (dsp_jobs.c) with its connections.
 *
 * Prepares (dsp_scan_prepare), then claims scheduled tasks overdue by more
 * than poller_grace_ms (their timer entry was lost or never written), and
 * takes over dispatching tasks whose lease expired.  The claimed tasks go
 * to the loop thread through the job's claimed list, which it owns in the
 * job's after-work callback.
 *
 * Every query is restricted to the test topic filter (dsp_seams.h), if
 * any. */
#include "dsp_poll.h"

#include <inttypes.h>
#include <stdlib.h>

#include "dsp_conn.h"
#include "dsp_scan.h"
#include "dsp_store.h"
#include "hr_clock.h"
#include "hr_log.h"

static void dsp_poll_claimed_add(dsp_poll_claimed *claimed, hr_task *t)
{
    if (hr_vec_push(claimed, t) != 0) {
        /* Our claim lapses after lease_s and the task is taken over. */
        hr_log_error("task_not_owned", "task=%" PRId64 " error=out of memory", t->id);
        hr_task_free(t);
    }
}

void dsp_poll_run(dsp *d, dsp_conn *conn, dsp_poll_claimed *claimed)
{
    const hr_mysql_param ps[] = {HR_P_I64((int64_t)d->cfg->dispatcher.poller_grace_ms * 1000),
                                 HR_P_I64((int64_t)d->cfg->dispatcher.poller_grace_ms * 1000),
                                 DSP_TOPIC_PARAMS, HR_P_I64(DSP_POLL_MAX)};
    const hr_mysql_param pt[] = {DSP_TOPIC_PARAMS, HR_P_I64(DSP_POLL_MAX)};
    dsp_scan_entry e[DSP_POLL_MAX];
    dsp_prep_count c[DSP_POLL_MAX];
    hr_task **tasks = NULL;
    size_t n = 0, nvalid = 0, i;
    char err[512];
    int rc;

    if (dsp_store_tasks(conn->m, DSP_POLL_OVERDUE_SQL, ps, 5, &tasks, &n, err, sizeof err) < 0)
        goto failed;
    /* The valid ones to the front, then prepared: the scanner may never
     * have seen one (its timer entry was lost before it was put there), and
     * a set that lost members must be read whole by the reconciliation. */
    for (i = 0; i < n; i++) {
        hr_task *t = tasks[i];

        if (!dsp_store_check(d, conn->m, t))
            continue;
        tasks[i] = tasks[nvalid];
        tasks[nvalid++] = t;
    }
    for (i = 0; i < nvalid; i++)
        e[i] = (dsp_scan_entry){.id = tasks[i]->id, .due_ms = -1};
    if (nvalid > 0 && dsp_scan_prepare_count(d, conn, tasks, nvalid, e, hr_clock_now_ms(), c) < 0)
        nvalid = 0;
    for (i = 0; i < nvalid && !atomic_load(&d->stopping); i++) {
        if (dsp_scan_prepare(d, conn, tasks[i], &e[i], &c[i]) < 0)
            continue;
        rc = dsp_store_claim(d, conn->m, tasks[i]->id, hr_clock_now_ms(), err, sizeof err);
        if (rc == HR_STATE_BUSY)
            continue; /* an open transaction holds the row: next round */
        if (rc < 0)
            goto failed;
        if (rc == 1) {
            hr_log_info("task_overdue", "task=%" PRId64 " via=poller", tasks[i]->id);
            dsp_poll_claimed_add(claimed, tasks[i]);
            tasks[i] = NULL;
        }
    }
    dsp_store_tasks_free(tasks, n);
    tasks = NULL;

    if (dsp_store_tasks(conn->m,
                        "SELECT " HR_TASK_COLUMNS " FROM push_task "
                        "WHERE state = 'dispatching' AND control = 'run' "
                        "AND lease_until < UTC_TIMESTAMP(3) "
                        "AND (? IS NULL OR topic = ?) ORDER BY lease_until LIMIT ?",
                        pt, 3, &tasks, &n, err, sizeof err) < 0)
        goto failed;
    for (i = 0; i < n && !atomic_load(&d->stopping); i++) {
        const hr_mysql_param pu[] = {
            HR_P_STR(d->owner), HR_P_I64(d->cfg->dispatcher.lease_s), HR_P_I64(tasks[i]->id),
            tasks[i]->claimed_by ? HR_P_STR(tasks[i]->claimed_by) : HR_P_NULL};
        uint64_t affected = 0;

        if (hr_mysql_exec(conn->m,
                          "UPDATE push_task SET claimed_by = ?, "
                          "lease_until = UTC_TIMESTAMP(3) + INTERVAL ? SECOND "
                          "WHERE id = ? AND state = 'dispatching' AND claimed_by <=> ? "
                          "AND lease_until < UTC_TIMESTAMP(3)",
                          pu, 4, &affected, NULL, NULL, err, sizeof err) < 0)
            goto failed;
        if (affected == 1) {
            hr_log_info("task_taken_over", "task=%" PRId64 " from=%s", tasks[i]->id,
                        tasks[i]->claimed_by ? tasks[i]->claimed_by : "");
            dsp_poll_claimed_add(claimed, tasks[i]);
            tasks[i] = NULL;
        }
    }
    dsp_store_tasks_free(tasks, n);
    return;
failed:
    dsp_store_tasks_free(tasks, n);
    dsp_conn_failed(d, conn, DSP_MYSQL, err);
}
