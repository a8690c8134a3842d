/* hr_state: the names of task states and controls, and the one UPDATE of
 * push_task.state per transition (see hr_state.h).
 *
 * The SQL spells state names (the guards are part of the statement text,
 * prepared once per connection); a state that varies is a parameter bound
 * from hr_state_name(). */
#include "hr_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_batch.h"

static const char *const hr_state_names[HR_STATE__COUNT] = {
    [HR_STATE_SCHEDULED] = "scheduled",   [HR_STATE_DISPATCHING] = "dispatching",
    [HR_STATE_DISPATCHED] = "dispatched", [HR_STATE_DONE] = "done",
    [HR_STATE_PAUSED] = "paused",         [HR_STATE_CANCELLED] = "cancelled",
    [HR_STATE_FAILED] = "failed",
};

static const char *const hr_control_names[HR_CONTROL__COUNT] = {
    [HR_CONTROL_RUN] = "run", [HR_CONTROL_PAUSE] = "pause", [HR_CONTROL_CANCEL] = "cancel"};

int hr_state_lookup(const char *const *names, int n, const char *name)
{
    for (int i = 0; name != NULL && i < n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

const char *hr_state_name(hr_task_state s)
{
    return (unsigned)s < HR_STATE__COUNT ? hr_state_names[s] : "?";
}

int hr_state_parse(const char *name, hr_task_state *out)
{
    int i = hr_state_lookup(hr_state_names, HR_STATE__COUNT, name);

    if (i < 0)
        return -1;
    *out = (hr_task_state)i;
    return 0;
}

bool hr_state_final(hr_task_state s)
{
    return s == HR_STATE_DONE || s == HR_STATE_FAILED || s == HR_STATE_CANCELLED;
}

const char *hr_control_name(hr_control control)
{
    return (unsigned)control < HR_CONTROL__COUNT ? hr_control_names[control] : "?";
}

int hr_control_parse(const char *name, hr_control *out)
{
    int i = hr_state_lookup(hr_control_names, HR_CONTROL__COUNT, name);

    if (i < 0)
        return -1;
    *out = (hr_control)i;
    return 0;
}

/* Runs one transition: 1 when it changed the row, 0 when its guard did
 * not match, -1.  *ERRNUM (may be NULL) gets the server's error number. */
static int hr_state_move(hr_mysql *m, const char *sql, const hr_mysql_param *p, size_t np,
                         unsigned *errnum, char *errstr, size_t errlen)
{
    uint64_t affected = 0;

    if (hr_mysql_exec(m, sql, p, np, &affected, NULL, errnum, errstr, errlen) < 0)
        return -1;
    return affected == 1;
}

/* A transition whose only parameter is the task id. */
static int hr_state_move_id(hr_mysql *m, const char *sql, int64_t id, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};

    return hr_state_move(m, sql, p, 1, NULL, errstr, errlen);
}

int hr_state_control(hr_mysql *m, int64_t id, hr_control control, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(hr_control_name(control)), HR_P_I64(id)};

    return hr_state_move(m,
                         "UPDATE push_task SET control = ? WHERE id = ? "
                         "AND state NOT IN ('done', 'cancelled', 'failed')",
                         p, 2, NULL, errstr, errlen) < 0
               ? -1
               : 0;
}

int hr_state_claim(hr_mysql *m, int64_t id, const char *owner, int64_t lease_s, int64_t due_by_ms,
                   char *errstr, size_t errlen)
{
    uint64_t claimed = 0;
    int rc = hr_state_claim_batch(m, &id, 1, owner, lease_s, due_by_ms, &claimed, errstr, errlen);

    return rc == 0 ? claimed == 1 : rc;
}

int hr_state_claim_batch(hr_mysql *m, const int64_t *ids, size_t n, const char *owner,
                         int64_t lease_s, int64_t due_by_ms, uint64_t *claimed, char *errstr,
                         size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(owner), HR_P_I64(lease_s), HR_P_STR(owner),
                                HR_P_I64(due_by_ms)};
    unsigned errnum = 0;
    int rc;

    *claimed = 0;
    /* due_at: a timer entry left behind by a postponement must not start
     * the task early.  The lock wait: a claim waits for subscription
     * inserts in flight (the guard trigger share-locks the row), but not
     * for an admin's forgotten transaction.  The ids come first
     * (STRAIGHT_JOIN), each row found by its primary key. */
    rc = hr_batch_exec(m,
                       "SET STATEMENT innodb_lock_wait_timeout = 1 FOR "
                       "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (claim_id BIGINT PATH '$')) j "
                       "STRAIGHT_JOIN push_task t FORCE INDEX (PRIMARY) ON t.id = j.claim_id "
                       "SET t.state = 'dispatching', t.claimed_by = ?, "
                       "t.lease_until = UTC_TIMESTAMP(3) + INTERVAL ? SECOND, "
                       "t.started_at = COALESCE(t.started_at, UTC_TIMESTAMP(3)) "
                       "WHERE (t.state = 'scheduled' OR "
                       "(t.state = 'dispatching' AND t.claimed_by = ?)) AND t.control = 'run' "
                       "AND " HR_STATE_FIRST_DUE_SQL " <= FROM_UNIXTIME(? / 1000)",
                       &(hr_batch){ids, n, 1}, p, 4, claimed, &errnum, errstr, errlen);
    return rc < 0 && errnum == HR_MYSQL_ER_LOCK_WAIT_TIMEOUT ? HR_STATE_BUSY : rc;
}

int hr_state_dispatched(hr_mysql *m, const int64_t *ids, size_t n, const char *owner,
                        uint64_t *moved, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(owner)};

    *moved = 0;
    return hr_batch_exec(m,
                         "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (task_id BIGINT PATH '$')) j "
                         "STRAIGHT_JOIN push_task t FORCE INDEX (PRIMARY) ON t.id = j.task_id "
                         "SET t.state = 'dispatched', t.dispatched_at = UTC_TIMESTAMP(3) "
                         "WHERE t.state = 'dispatching' AND t.claimed_by = ?",
                         &(hr_batch){ids, n, 1}, p, 1, moved, NULL, errstr, errlen);
}

int hr_state_redispatch(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    return hr_state_move_id(m,
                            "UPDATE push_task SET state = 'dispatching', claimed_by = NULL, "
                            "lease_until = UTC_TIMESTAMP(3) - INTERVAL 1 SECOND, "
                            "dispatched_at = NULL "
                            "WHERE id = ? AND state = 'dispatched' AND control = 'run'",
                            id, errstr, errlen);
}

/* The subscriptions that task row t's outcome counters do not account for,
 * of j.subs. */
#define HR_STATE_GAP                                                                    \
    "GREATEST(0, CAST(j.subs AS SIGNED) - CAST(t.sent + t.failed + t.throttled + "      \
    "t.pulled + t.cancelled + t.unregistered + t.expired + t.opted_out + t.suppressed " \
    "AS SIGNED))"

int hr_state_lock_dispatched(hr_mysql *m, const int64_t *ids, size_t n, bool *locked, char *errstr,
                             size_t errlen)
{
    memset(locked, 0, n * sizeof *locked);
    if (n == 0)
        return 0;
    /* By the primary key, forced: with few tasks dispatched when MariaDB
     * plans it, it reads the covering state index instead, and locks every
     * dispatched task's entry in due order, the other reporters' batches
     * too, which deadlocked them (docs/performance.md "Two reporters
     * deadlocked on the state index"). */
    return hr_batch_select(m,
                           "SELECT t.id FROM JSON_TABLE(?, '$[*]' COLUMNS (task BIGINT PATH '$')) "
                           "j STRAIGHT_JOIN push_task t FORCE INDEX (PRIMARY) ON t.id = j.task "
                           "WHERE t.state = 'dispatched' FOR UPDATE",
                           &(hr_batch){ids, n, 1}, NULL, 0, 1, hr_batch_mark, locked, errstr,
                           errlen);
}

int hr_state_finish(hr_mysql *m, const int64_t *rows, size_t n, uint64_t *moved, char *errstr,
                    size_t errlen)
{
    *moved = 0;
    if (n == 0)
        return 0;
    /* Every value is computed from the counters as they are (a multi-table
     * UPDATE does not promise to assign left to right): unaccounted, state
     * and last_error agree.  total (recipients published in chunks) is
     * capped at the subscriptions: a recipient chunked again under a new
     * seq (Redis rewound: subs held it again and seq went backwards) was
     * added to it twice.  A task whose control is cancel ends `cancelled`,
     * never `done`: the workers may cancel every chunk they hold and leave
     * nothing pending before any dispatcher's control scan carries the
     * cancel out (the fault row cancel-race), and the finish then sees a
     * task with nothing left, as the scan would have. */
    return hr_batch_exec(
        m,
        "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (task BIGINT PATH '$[0]', subs BIGINT PATH '$[1]')) j "
        "STRAIGHT_JOIN push_task t FORCE INDEX (PRIMARY) ON t.id = j.task "
        "SET t.state = IF(t.control = 'cancel', 'cancelled', "
        "IF(" HR_STATE_GAP " > 0, 'failed', 'done')), "
        "t.last_error = IF(t.control <> 'cancel' AND " HR_STATE_GAP " > 0, CONCAT(" HR_STATE_GAP
        ", ' of ', j.subs, "
        "' subscriptions have no outcome (sent ', t.sent, ', failed ', t.failed, "
        "', throttled ', t.throttled, ', pulled ', t.pulled, ', cancelled ', t.cancelled, "
        "', unregistered ', t.unregistered, ', expired ', t.expired, ', opted_out ', t.opted_out, "
        "', suppressed ', t.suppressed, '): the working state "
        "in Redis lost them; heraldctl recover ', t.id, ' pushes them'), t.last_error), "
        "t.unaccounted = " HR_STATE_GAP ", t.total = LEAST(t.total, j.subs), "
        "t.finished_at = UTC_TIMESTAMP(3) WHERE t.state = 'dispatched'",
        &(hr_batch){rows, n, 2}, NULL, 0, moved, NULL, errstr, errlen);
}

int hr_state_fail(hr_mysql *m, int64_t id, hr_task_state from, const char *reason, char *errstr,
                  size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(reason), HR_P_I64(id), HR_P_STR(hr_state_name(from))};

    return hr_state_move(m,
                         "UPDATE push_task SET state = 'failed', last_error = ?, "
                         "finished_at = UTC_TIMESTAMP(3) WHERE id = ? AND state = ?",
                         p, 3, NULL, errstr, errlen);
}

int hr_state_pause(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    return hr_state_move_id(m,
                            "UPDATE push_task SET state = 'paused' WHERE id = ? "
                            "AND control = 'pause' "
                            "AND state IN ('scheduled', 'dispatching', 'dispatched')",
                            id, errstr, errlen);
}

int hr_state_resume(hr_mysql *m, int64_t id, hr_task_state to, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(hr_state_name(to)), HR_P_I64(id)};

    return hr_state_move(m,
                         "UPDATE push_task SET state = ?, claimed_by = NULL, "
                         "lease_until = UTC_TIMESTAMP(3) - INTERVAL 1 SECOND "
                         "WHERE id = ? AND control = 'run' AND state = 'paused'",
                         p, 2, NULL, errstr, errlen);
}

int hr_state_cancel(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    return hr_state_move_id(m,
                            "UPDATE push_task SET state = 'cancelled', "
                            "finished_at = UTC_TIMESTAMP(3) WHERE id = ? AND control = 'cancel' "
                            "AND state NOT IN ('done', 'cancelled', 'failed')",
                            id, errstr, errlen);
}

int hr_state_reopen(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    /* MariaDB assigns left to right: last_error reads the old state. */
    return hr_state_move_id(m,
                            "UPDATE push_task SET last_error = IF(state = 'failed', NULL, "
                            "last_error), state = 'dispatched', finished_at = NULL, "
                            "unaccounted = 0 WHERE id = ? AND (state = 'done' OR "
                            "(state = 'failed' AND unaccounted > 0))",
                            id, errstr, errlen);
}

int hr_state_redrive(hr_mysql *m, int64_t id, int64_t moved, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(moved), HR_P_I64(moved), HR_P_I64(id)};

    /* MariaDB assigns left to right: finished_at sees the new state. */
    return hr_state_move(m,
                         "UPDATE push_task SET failed = GREATEST(failed - ?, 0), "
                         "total = GREATEST(total - ?, 0), "
                         "state = IF(state = 'done', 'dispatched', state), "
                         "finished_at = IF(state = 'dispatched', NULL, finished_at) "
                         "WHERE id = ?",
                         p, 3, NULL, errstr, errlen) < 0
               ? -1
               : 0;
}

int hr_state_recover(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    /* MariaDB assigns left to right: last_error must read the old state
     * (after state it read 'dispatching', and a recovered task kept its
     * "subscriptions have no outcome" error to its done). */
    return hr_state_move_id(m,
                            "UPDATE push_task SET last_error = IF(state = 'failed', NULL, "
                            "last_error), state = 'dispatching', claimed_by = NULL, "
                            "lease_until = UTC_TIMESTAMP(3) - INTERVAL 1 SECOND, "
                            "dispatched_at = NULL, finished_at = NULL, "
                            "unaccounted = 0 WHERE id = ? "
                            "AND (state IN ('dispatching', 'dispatched') "
                            "OR (state = 'failed' AND unaccounted > 0))",
                            id, errstr, errlen);
}

int hr_state_purge(hr_mysql *m, int64_t id, int64_t before_ms, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_I64(before_ms)};
    hr_mysql_rows *rows = NULL;
    bool final;

    if (hr_mysql_begin(m, errstr, errlen) < 0)
        return -1;
    if (hr_mysql_query(m,
                       "SELECT id FROM push_task WHERE id = ? AND state IN ('done', 'failed', "
                       "'cancelled') AND finished_at < FROM_UNIXTIME(? / 1000) FOR UPDATE",
                       p, 2, &rows, errstr, errlen) < 0)
        goto fail;
    final = rows->nrows == 1;
    hr_mysql_rows_free(rows);
    if (!final) {
        hr_mysql_rollback(m);
        return 0;
    }
    if (hr_mysql_exec(m,
                      "INSERT INTO push_purge (task_id, day, shards, purged_at) "
                      "SELECT id, COALESCE(DATE(due_at), '1970-01-01'), shards, UTC_TIMESTAMP(3) "
                      "FROM push_task WHERE id = ? "
                      "ON DUPLICATE KEY UPDATE purged_at = VALUES(purged_at)",
                      p, 1, NULL, NULL, NULL, errstr, errlen) < 0 ||
        hr_mysql_exec(m, "DELETE FROM push_task WHERE id = ?", p, 1, NULL, NULL, NULL, errstr,
                      errlen) < 0 ||
        hr_mysql_commit(m, errstr, errlen) < 0)
        goto fail;
    return 1;
fail:
    hr_mysql_rollback(m);
    return -1;
}
