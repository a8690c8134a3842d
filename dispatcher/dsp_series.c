/* dsp_series: occurrences of series written ahead as tasks (dsp_series.h
 * has the rules).
 *
 * A pass takes the lease, selects the active series whose next occurrence
 * may be due within its lead (next_at, a wall time, is at most 14 hours
 * ahead of the instant in any zone: HR_STATE_EAST_MAX_S), and walks each in
 * its own transaction with the series row locked (SELECT ... FOR UPDATE),
 * so an API change of the series and the walk never interleave.  The walk
 * expands the rule from next_at in batches of DSP_SERIES_BATCH, writes or
 * skips each occurrence whose time minus the lead has come, and stores
 * where it stopped: the next occurrence not yet due (next_at), or, at
 * DSP_SERIES_WALK_MAX, the point to go on from. */
#include "dsp_series.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsp_conn.h"
#include "dsp_seams.h"
#include "dsp_store.h"
#include "hr_clock.h"
#include "hr_log.h"
#include "hr_series.h"
#include "hr_state.h"

#define DSP_SERIES_BATCH 64

struct dsp_series {
    bool leader; /* held the lease at the last pass (logged when it changes) */
};

/* Where a walk got to. */
typedef struct dsp_series_walk {
    int64_t written, skipped, existed;
    int64_t next_wall_ms; /* the new next_at */
    bool ended;           /* COUNT or UNTIL reached: nothing after next_at */
} dsp_series_walk;

int dsp_series_new(dsp *d)
{
    d->series = calloc(1, sizeof *d->series);
    return d->series != NULL ? 0 : -1;
}

void dsp_series_free(dsp *d)
{
    free(d->series);
    d->series = NULL;
}

/* Writes S's occurrence at wall time WALL_MS (due DUE_MS) with S's
 * variants.  0 or -1 (a database error). */
static int dsp_series_write(hr_mysql *m, const hr_series *s, int64_t wall_ms, int64_t due_ms,
                            dsp_series_walk *w, char *errstr, size_t errlen)
{
    hr_task t;
    uint64_t id = 0;
    bool existed = false;

    hr_series_occurrence(s, due_ms, &t);
    if (hr_task_insert(m, &t, t.throttle_scope, -1, s->id, &id, &existed, errstr, errlen) < 0)
        return -1;
    if (existed) {
        w->existed++; /* its variants were copied with its first write */
        return 0;
    }
    /* The series' variants and a drip's day of subscriptions go with the
     * occurrence, in its transaction. */
    if (s->variants.n > 0 && hr_variant_series_copy(m, s->id, (int64_t)id, errstr, errlen) < 0)
        return -1;
    if (s->drip_days >= 0 && hr_series_drip_write(m, s, (int64_t)id, wall_ms, errstr, errlen) < 0)
        return -1;
    w->written++;
    hr_log_info("series_occurrence",
                "series=%" PRId64 " task=%" PRIu64 " due_ms=%" PRId64 " wall_ms=%" PRId64
                " variants=%zu",
                s->id, id, due_ms, wall_ms, s->variants.n);
    return 0;
}

/* Walks S from its next_at up to NOW_MS + its lead.  0, -1 on a database
 * error, 1 when the rule or a zone is refused (ERRSTR: the series fails). */
static int dsp_series_walk_one(dsp *d, hr_mysql *m, const hr_series *s, int64_t now_ms,
                               dsp_series_walk *w, char *errstr, size_t errlen)
{
    int64_t lead_ms = (s->lead_s >= 0 ? s->lead_s : d->cfg->dispatcher.series_lead_s) * 1000LL;
    int64_t after = (s->next_wall_ms >= 0 ? s->next_wall_ms : s->dtstart_wall_ms) - 1000;
    int64_t cand_wall = -1, cand_due = -1; /* catch_up latest: the last missed so far */
    int64_t walked = 0;

    *w = (dsp_series_walk){.next_wall_ms = after + 1000};
    for (;;) {
        int64_t occ[DSP_SERIES_BATCH];
        size_t n = 0, i;

        if (hr_series_expand(s->rrule, s->dtstart_wall_ms, s->exdate, after, DSP_SERIES_BATCH, occ,
                             &n, errstr, errlen) < 0)
            return 1;
        for (i = 0; i < n; i++) {
            int64_t due, first;

            if (hr_series_due_ms(s, occ[i], &due, errstr, errlen) < 0)
                return 1;
            first = s->local_time ? due - HR_STATE_EAST_MAX_S * 1000LL : due;
            if (first - lead_ms > now_ms) {
                w->next_wall_ms = occ[i];
                goto flush; /* not yet: the next pass looks again */
            }
            if (walked++ == DSP_SERIES_WALK_MAX) {
                /* Go on from here next pass; a latest candidate not yet
                 * written is walked again then. */
                w->next_wall_ms = cand_wall >= 0 ? cand_wall : occ[i];
                return 0;
            }
            after = occ[i];
            w->next_wall_ms = occ[i] + 1000;
            /* Missed: even the last zone reached it (a local-time
             * occurrence written late still reaches the zones ahead). */
            if ((s->local_time ? due + DSP_SERIES_WEST_MAX_S * 1000LL : due) <
                    now_ms - DSP_SERIES_LATE_MS &&
                s->catch_up != HR_CATCH_UP_ALL) {
                if (s->catch_up == HR_CATCH_UP_LATEST) {
                    w->skipped += cand_wall >= 0;
                    cand_wall = occ[i];
                    cand_due = due;
                } else {
                    w->skipped++;
                }
                continue;
            }
            if (cand_wall >= 0 &&
                dsp_series_write(m, s, cand_wall, cand_due, w, errstr, errlen) < 0)
                return -1;
            cand_wall = -1;
            if (dsp_series_write(m, s, occ[i], due, w, errstr, errlen) < 0)
                return -1;
        }
        if (n < DSP_SERIES_BATCH) {
            w->ended = true;
            break;
        }
    }
flush:
    if (cand_wall >= 0 && dsp_series_write(m, s, cand_wall, cand_due, w, errstr, errlen) < 0)
        return -1;
    return 0;
}

/* One series in its transaction.  0, or -1 on a database error (rolled
 * back). */
static int dsp_series_one(dsp *d, hr_mysql *m, int64_t id, int64_t now_ms, char *errstr,
                          size_t errlen)
{
    const hr_mysql_param pid[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    hr_series *s = NULL;
    dsp_series_walk w = {0};
    char why[512];
    int rc;

    if (hr_mysql_begin(m, errstr, errlen) < 0)
        return -1;
    if (hr_mysql_query(m, "SELECT state FROM push_series WHERE id = ? FOR UPDATE", pid, 1, &rows,
                       errstr, errlen) < 0)
        goto fail;
    rc = rows->nrows == 1 ? hr_series_load(m, id, &s, errstr, errlen) : 1;
    if (rc < 0)
        goto fail;
    if (rc == 1 || s->state != HR_SERIES_ACTIVE)
        goto commit; /* deleted, or changed since the list was read */
    /* A refusal of the validation is the series' (1), not the database's. */
    rc = hr_series_validate(s, d->cfg, why, sizeof why) < 0
             ? 1
             : dsp_series_walk_one(d, m, s, now_ms, &w, why, sizeof why);
    if (rc < 0) {
        snprintf(errstr, errlen, "%s", why);
        goto fail;
    }
    if (rc == 1) {
        const hr_mysql_param p[] = {HR_P_STR(why), HR_P_I64(id)};

        if (hr_mysql_exec(m,
                          "UPDATE push_series SET state = 'failed', last_error = LEFT(?, 1000) "
                          "WHERE id = ?",
                          p, 2, NULL, NULL, NULL, errstr, errlen) < 0)
            goto fail;
        hr_log_warn("series_failed", "series=%" PRId64 " error=%s", id, why);
    } else {
        const hr_mysql_param p[] = {HR_P_I64(w.next_wall_ms), HR_P_I64(w.written),
                                    HR_P_STR(w.ended ? "ended" : "active"), HR_P_I64(id)};

        if (hr_mysql_exec(m,
                          "UPDATE push_series SET next_at = FROM_UNIXTIME(? / 1000), "
                          "occurrences = occurrences + ?, state = ?, last_error = NULL "
                          "WHERE id = ?",
                          p, 4, NULL, NULL, NULL, errstr, errlen) < 0)
            goto fail;
        if (w.skipped > 0)
            hr_log_warn("series_missed", "series=%" PRId64 " skipped=%" PRId64 " catch_up=%s", id,
                        w.skipped, hr_series_catch_up_name(s->catch_up));
        if (w.ended)
            hr_log_info("series_ended", "series=%" PRId64 " occurrences=%" PRId64, id,
                        s->occurrences + w.written);
    }
commit:
    hr_mysql_rows_free(rows);
    hr_series_free(s);
    return hr_mysql_commit(m, errstr, errlen);
fail:
    hr_mysql_rollback(m);
    hr_mysql_rows_free(rows);
    hr_series_free(s);
    return -1;
}

void dsp_series_run(dsp *d, dsp_conn *conn)
{
    dsp_series *ser = d->series;
    int64_t now = hr_clock_now_ms();
    const hr_mysql_param p[] = {HR_P_I64(now), HR_P_I64(d->cfg->dispatcher.series_lead_s),
                                HR_P_I64(HR_STATE_EAST_MAX_S), DSP_TOPIC_PARAMS,
                                HR_P_I64(DSP_SERIES_PER_PASS)};
    hr_mysql_rows *rows = NULL;
    char err[512], job[128];
    int rc;

    if (atomic_load(&d->stopping))
        return;
    /* Under the topic seam each test's dispatchers have a lease of their
     * own, as they see only their own series. */
    snprintf(job, sizeof job, "%s%s%s", DSP_SERIES_JOB, dsp_seams_topic() ? ":" : "",
             dsp_seams_topic() ? dsp_seams_topic() : "");
    rc = dsp_store_job_lease(d, conn->m, job, DSP_SERIES_LEASE_S, err, sizeof err);
    if (rc < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return;
    }
    if ((rc == 1) != ser->leader)
        hr_log_info(rc == 1 ? "series_lease_taken" : "series_lease_lost", "owner=%s", d->owner);
    ser->leader = rc == 1;
    if (rc == 0)
        return;
    if (hr_mysql_query(conn->m,
                       "SELECT id FROM push_series WHERE state = 'active' AND (next_at IS NULL OR "
                       "next_at <= FROM_UNIXTIME(? / 1000) + INTERVAL (COALESCE(lead_s, ?) + ?) "
                       "SECOND) AND (? IS NULL OR topic = ?) ORDER BY id LIMIT ?",
                       p, 6, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return;
    }
    for (size_t i = 0; i < rows->nrows && !atomic_load(&d->stopping); i++)
        if (dsp_series_one(d, conn->m, strtoll(hr_mysql_cell(rows, i, 0), NULL, 10), now, err,
                           sizeof err) < 0) {
            dsp_conn_failed(d, conn, DSP_MYSQL, err);
            break;
        }
    hr_mysql_rows_free(rows);
}
