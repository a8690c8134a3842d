/* dsp_lease: the tasks this dispatcher owns (dsp.tasks, loop thread) and
 * their leases (DESIGN.md "Ownership and leases").
 *
 * - Owning: a claimed task (timer pop, poller, takeover, adoption) joins
 *   dsp.tasks with a new generation, copied into its messages, so the
 *   delivery reports of an earlier ownership of the same task do not
 *   count against the current one's outstanding chunks.
 * - Shards: a shard of a sharded task claimed by dsp_shard.c is an entry
 *   of its own (dsp_task.shard), renewed by dsp_shard_renew.
 * - Leases: renewed every lease_s/3; a task whose row no longer names us,
 *   or whose control is no longer `run`, is dropped at once.  A row that
 *   names us but is not in dsp.tasks (a claim whose reply or load failed)
 *   is adopted, or its lease is ended so another dispatcher takes it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dsp.h"
#include "hr_clock.h"
#include "hr_log.h"
#include "hr_state.h"

dsp_task *dsp_task_find_shard(dsp *d, int64_t id, int shard)
{
    size_t i;

    for (i = 0; i < d->tasks.n; i++) {
        const dsp_task *dt = d->tasks.v[i];

        if (dt->id == id && (dt->shard == shard || (shard == -2 && dt->shard != HR_SHARD_NONE)))
            return d->tasks.v[i];
    }
    return NULL;
}

dsp_task *dsp_task_find(dsp *d, int64_t id)
{
    return dsp_task_find_shard(d, id, HR_SHARD_NONE);
}

void dsp_task_drop(dsp *d, dsp_task *dt)
{
    size_t i;

    for (i = 0; i < d->tasks.n; i++) {
        if (d->tasks.v[i] == dt) {
            d->tasks.v[i] = d->tasks.v[--d->tasks.n];
            free(dt);
            dsp_pace_gauges(d);
            return;
        }
    }
}

void dsp_tasks_free(dsp *d)
{
    size_t i;

    for (i = 0; i < d->tasks.n; i++)
        free(d->tasks.v[i]);
    hr_vec_free(&d->tasks);
    hr_vec_free(&d->reports);
}

/* A new owned entry for shard SHARD of T (HR_SHARD_NONE: T itself) in
 * d->tasks, or NULL when out of memory. */
static dsp_task *dsp_task_add(dsp *d, const hr_task *t, int shard)
{
    const hr_channel *ch;
    dsp_task *dt;

    /* Room first: once made, the push below cannot fail. */
    if (hr_vec_reserve(&d->tasks, d->tasks.n + 1) != 0)
        return NULL;
    dt = calloc(1, sizeof *dt);
    if (dt == NULL)
        return NULL;
    dt->id = t->id;
    dt->shards = t->shards > 1 ? (int)t->shards : 1;
    dt->shard = shard;
    dt->due_ms = t->due_ms;
    dt->chunk_size = t->chunk_size;
    ch = hr_config_channel(d->cfg, t->channel);
    dt->addressed = ch == NULL || ch->type != HR_CHANNEL_WEBHOOK;
    dt->rate_limit = dsp_task_rate_limit(d, t);
    dt->cap = dt->rate_limit;
    dt->finish_ms = hr_task_paced(t) ? t->finish_ms : -1;
    dt->expire_ms = t->expire_ms;
    dt->gen = ++d->gen_next;
    dt->waits = hr_task_waits(t);
    dt->window = t->window;
    dt->window_start_s = t->window_start_s;
    dt->window_end_s = t->window_end_s;
    snprintf(dt->window_tz, sizeof dt->window_tz, "%s", t->window_tz != NULL ? t->window_tz : "");
    d->tasks.v[d->tasks.n++] = dt;
    return dt;
}

bool dsp_own_shard(dsp *d, const hr_task *t, int shard)
{
    dsp_task *dt;

    if (dsp_task_find_shard(d, t->id, shard) != NULL)
        return true;
    dt = dsp_task_add(d, t, shard);
    if (dt == NULL) {
        hr_log_error("shard_not_owned", "task=%" PRId64 " shard=%d error=out of memory", t->id,
                     shard);
        return false;
    }
    /* The coordinator's reconciliation wrote the rows after every seq
     * existed: a claimable shard is complete. */
    dt->started = true;
    hr_log_info("shard_claimed", "task=%" PRId64 " shard=%d shards=%d", t->id, shard, dt->shards);
    return true;
}

bool dsp_own(dsp *d, const hr_task *t, const char *via)
{
    bool fresh = strcmp(via, "timer") == 0 || strcmp(via, "poller") == 0;
    dsp_task *dt;

    if (dsp_task_find(d, t->id) != NULL)
        return true;
    dt = dsp_task_add(d, t, HR_SHARD_NONE);
    if (dt == NULL)
        goto oom;
    hr_metrics_inc(strcmp(via, "timer") == 0    ? d->met.claimed_timer
                   : strcmp(via, "poller") == 0 ? d->met.claimed_poller
                                                : d->met.claimed_takeover);
    if (fresh) /* a takeover's or adoption's lag is not a claim's */
        hr_metrics_observe(d->met.claim_lag,
                           (double)(hr_clock_now_ms() - hr_task_first_due_ms(t)) / 1000.0);
    hr_log_info("task_claimed",
                "task=%" PRId64 " via=%s lag_ms=%" PRId64 " rate_limit=%" PRId64 " shards=%d",
                t->id, via, (hr_clock_now_ms() - hr_task_first_due_ms(t)), dt->rate_limit,
                dt->shards);
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
    dsp_conn *conn = &d->loop_conn;
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_STR(d->owner)};
    hr_task *t = NULL;
    char err[512];

    /* Validated first: the check after its claim may have failed on MySQL,
     * and a bad row is made failed here instead of chunked. */
    if (hr_task_load(conn->m, id, &t, err, sizeof err) == 0 &&
        (!dsp_store_check(d, conn->m, t) || dsp_own(d, t, "adopt"))) {
        hr_task_free(t);
        return;
    }
    hr_task_free(t);
    hr_log_warn("task_released", "task=%" PRId64 " reason=claimed but not owned", id);
    if (hr_mysql_exec(conn->m,
                      "UPDATE push_task SET lease_until = UTC_TIMESTAMP(3) "
                      "WHERE id = ? AND claimed_by = ? AND state = 'dispatching'",
                      p, 2, NULL, NULL, NULL, err, sizeof err) < 0)
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
}

void dsp_renew_leases(dsp *d)
{
    dsp_conn *conn = &d->loop_conn;
    const hr_mysql_param pr[] = {HR_P_I64(d->cfg->dispatcher.lease_s), HR_P_STR(d->owner)};
    const hr_mysql_param ps[] = {HR_P_STR(d->owner)};
    hr_mysql_rows *rows = NULL;
    char err[512];
    size_t i, j;

    if (!dsp_conn_ready(d, conn))
        return;
    if (hr_mysql_exec(conn->m,
                      "UPDATE push_task SET lease_until = UTC_TIMESTAMP(3) + INTERVAL ? SECOND "
                      "WHERE claimed_by = ? AND state = 'dispatching' AND control = 'run'",
                      pr, 2, NULL, NULL, NULL, err, sizeof err) < 0 ||
        hr_mysql_query(conn->m,
                       "SELECT id, control FROM push_task "
                       "WHERE claimed_by = ? AND state = 'dispatching'",
                       ps, 1, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return;
    }
    for (i = d->tasks.n; i-- > 0;) {
        dsp_task *dt = d->tasks.v[i];
        const char *control = NULL;
        hr_control wish = HR_CONTROL__COUNT; /* a name this binary does not know */

        if (dt->shard != HR_SHARD_NONE)
            continue; /* a claimed shard: its row's lease (dsp_shard_renew) */
        for (j = 0; j < rows->nrows; j++)
            if (strtoll(hr_mysql_cell(rows, j, 0), NULL, 10) == dt->id)
                control = hr_mysql_cell(rows, j, 1);
        if (control == NULL) {
            hr_log_warn("task_lost", "task=%" PRId64 " reason=lease taken over", dt->id);
            dsp_task_drop(d, dt);
        } else if (hr_control_parse(control, &wish) < 0 || wish != HR_CONTROL_RUN) {
            /* Pause and cancel are carried out by workers and heraldctl;
             * the dispatcher stops chunking and mirrors the wish.  An
             * unknown control stops chunking too, with nothing to mirror. */
            if (wish != HR_CONTROL__COUNT &&
                hr_task_set_control(NULL, conn->r, dt->id, wish, err, sizeof err) < 0)
                dsp_health_fail(d, DSP_REDIS, err);
            hr_log_info("task_stopped", "task=%" PRId64 " control=%s", dt->id, control);
            dsp_task_drop(d, dt);
        }
    }
    for (j = 0; j < rows->nrows; j++) {
        int64_t id = strtoll(hr_mysql_cell(rows, j, 0), NULL, 10);
        hr_control wish;

        if (hr_control_parse(hr_mysql_cell(rows, j, 1), &wish) == 0 && wish == HR_CONTROL_RUN &&
            dsp_task_find(d, id) == NULL)
            dsp_adopt(d, id);
    }
    hr_mysql_rows_free(rows);
}
