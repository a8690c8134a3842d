/* dsp_lease: the tasks this dispatcher owns (dsp.tasks, loop thread) and
 * their leases (DESIGN.md "Ownership and leases").
 *
 * - Owning: a claimed task (timer pop, poller, takeover, adoption) joins
 *   dsp.tasks with a new generation, copied into its messages, so the
 *   delivery reports of an earlier ownership of the same task do not
 *   count against the current one's outstanding chunks.
 * - Leases: renewed every lease_s/3; a task whose row no longer names us,
 *   or whose control is no longer `run`, is dropped at once.  A row that
 *   names us but is not in dsp.tasks (a claim whose reply or load failed)
 *   is adopted, or its lease is ended so another dispatcher takes it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dsp.h"
#include "hr_log.h"
#include "hr_state.h"

dsp_task *dsp_task_find(dsp *d, int64_t id)
{
    size_t i;

    for (i = 0; i < d->ntasks; i++)
        if (d->tasks[i]->id == id)
            return d->tasks[i];
    return NULL;
}

void dsp_task_drop(dsp *d, dsp_task *t)
{
    size_t i;

    for (i = 0; i < d->ntasks; i++) {
        if (d->tasks[i] == t) {
            d->tasks[i] = d->tasks[--d->ntasks];
            free(t);
            return;
        }
    }
}

void dsp_tasks_free(dsp *d)
{
    size_t i;

    for (i = 0; i < d->ntasks; i++)
        free(d->tasks[i]);
    free(d->tasks);
    free(d->reports);
    d->tasks = NULL;
    d->reports = NULL;
    d->ntasks = d->nreports = 0;
}

bool dsp_own(dsp *d, const hr_task *t, const char *via)
{
    dsp_task *dt, **grown;
    size_t cap;
    bool fresh = strcmp(via, "timer") == 0 || strcmp(via, "poller") == 0;

    if (dsp_task_find(d, t->id) != NULL)
        return true;
    if (d->ntasks == d->cap_tasks) {
        cap = d->cap_tasks ? d->cap_tasks * 2 : 16;
        grown = realloc(d->tasks, cap * sizeof *grown);
        if (grown == NULL)
            goto oom;
        d->tasks = grown;
        d->cap_tasks = cap;
    }
    dt = calloc(1, sizeof *dt);
    if (dt == NULL)
        goto oom;
    dt->id = t->id;
    dt->due_ms = t->due_ms;
    dt->chunk_size = t->chunk_size;
    dt->rate_limit = dsp_task_rate_limit(d, t);
    dt->gen = ++d->gen_next;
    d->tasks[d->ntasks++] = dt;
    hr_metrics_inc(strcmp(via, "timer") == 0    ? d->met.claimed_timer
                   : strcmp(via, "poller") == 0 ? d->met.claimed_poller
                                                : d->met.claimed_takeover);
    if (fresh) /* a takeover's or adoption's lag is not a claim's */
        hr_metrics_observe(d->met.claim_lag, (double)(dsp_now_ms() - t->due_ms) / 1000.0);
    hr_log_info("task_claimed", "task=%" PRId64 " via=%s lag_ms=%" PRId64 " rate_limit=%" PRId64,
                t->id, via, (dsp_now_ms() - t->due_ms), dt->rate_limit);
    return true;
oom:
    hr_log_error("task_not_owned", "task=%" PRId64 " error=out of memory", t->id);
    return false;
}

/* A task claimed under our name that we do not chunk (its claim's reply or
 * load failed, or dsp_own ran out of memory): own it now, or give the claim
 * up at once so that a poller takes it over.  Without this the renewal
 * would keep it ours, unchunked, forever. */
static void dsp_adopt(dsp *d, int64_t id)
{
    dsp_conn *c = &d->loop_conn;
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_STR(d->owner)};
    hr_task *t = NULL;
    char err[512];

    if (hr_task_load(c->m, id, &t, err, sizeof err) == 0 && dsp_own(d, t, "adopt")) {
        hr_task_free(t);
        return;
    }
    hr_task_free(t);
    hr_log_warn("task_released", "task=%" PRId64 " reason=claimed but not owned", id);
    if (hr_mysql_exec(c->m,
                      "UPDATE push_task SET lease_until = UTC_TIMESTAMP(3) "
                      "WHERE id = ? AND claimed_by = ? AND state = 'dispatching'",
                      p, 2, NULL, NULL, NULL, err, sizeof err) < 0)
        dsp_conn_failed(d, c, DSP_MYSQL, err);
}

void dsp_renew_leases(dsp *d)
{
    dsp_conn *c = &d->loop_conn;
    const hr_mysql_param pr[] = {HR_P_I64(d->cfg->dispatcher.lease_s), HR_P_STR(d->owner)};
    const hr_mysql_param ps[] = {HR_P_STR(d->owner)};
    hr_mysql_rows *rows = NULL;
    char err[512];
    size_t i, j;

    if (!dsp_conn_ready(d, c))
        return;
    if (hr_mysql_exec(c->m,
                      "UPDATE push_task SET lease_until = UTC_TIMESTAMP(3) + INTERVAL ? SECOND "
                      "WHERE claimed_by = ? AND state = 'dispatching' AND control = 'run'",
                      pr, 2, NULL, NULL, NULL, err, sizeof err) < 0 ||
        hr_mysql_query(c->m,
                       "SELECT id, control FROM push_task "
                       "WHERE claimed_by = ? AND state = 'dispatching'",
                       ps, 1, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, c, DSP_MYSQL, err);
        return;
    }
    for (i = d->ntasks; i-- > 0;) {
        dsp_task *t = d->tasks[i];
        const char *control = NULL;

        for (j = 0; j < rows->nrows; j++)
            if (strtoll(hr_mysql_cell(rows, j, 0), NULL, 10) == t->id)
                control = hr_mysql_cell(rows, j, 1);
        if (control == NULL) {
            hr_log_warn("task_lost", "task=%" PRId64 " reason=lease taken over", t->id);
            dsp_task_drop(d, t);
        } else if (strcmp(control, hr_control_name(HR_CONTROL_RUN)) != 0) {
            /* Pause and cancel are carried out by workers and heraldctl;
             * the dispatcher stops chunking and mirrors the wish. */
            if (hr_task_set_control(NULL, c->r, t->id, control, err, sizeof err) < 0)
                dsp_health_fail(d, DSP_REDIS, err);
            hr_log_info("task_stopped", "task=%" PRId64 " control=%s", t->id, control);
            dsp_task_drop(d, t);
        }
    }
    for (j = 0; j < rows->nrows; j++) {
        int64_t id = strtoll(hr_mysql_cell(rows, j, 0), NULL, 10);

        if (strcmp(hr_mysql_cell(rows, j, 1), hr_control_name(HR_CONTROL_RUN)) == 0 &&
            dsp_task_find(d, id) == NULL)
            dsp_adopt(d, id);
    }
    hr_mysql_rows_free(rows);
}
