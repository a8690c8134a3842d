/* hr_state: a task's life in push_task — the state and control enums with
 * their names, and every transition of push_task.state as one function.
 *
 * The state machine (DESIGN.md, "Task life"): scheduled -> dispatching
 * (claim) -> dispatched (all recipients chunked) -> done | failed
 * (hr_finish.c; cancelled instead when control is cancel); any unfinished state -> paused (control = pause) -> back
 * (control = run); any unfinished state -> cancelled (control = cancel).
 * done, failed and cancelled are final, except for the admin's repairs:
 * redrive reopens done as dispatched, recover restarts a dispatching,
 * dispatched or unaccounted failed task as dispatching; purge removes a
 * final task.
 *
 * Each transition is one guarded UPDATE (a prepared statement): the guard
 * is the set of states (and control, owner) it may start from, so racing
 * parties (dispatchers, workers, heraldctl, an admin's SQL) cannot undo
 * each other; the one whose guard matched sees 1, the others 0.  Unless
 * said otherwise a transition returns 1 = moved, 0 = the guard did not
 * match (nothing changed), -1 = database error in ERRSTR. */
#ifndef HR_STATE_H
#define HR_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "hr_mysql.h"
#include "hr_progress.h"

/* The earliest instant a task can be due anywhere: due_at, or for a
 * local_time task (008_local_time.sql) its wall time in UTC+14, the zone
 * furthest east.  The claim (here), the scanner and the poller use it
 * instead of due_at; hr_task_first_due_ms is the same in C. */
#define HR_STATE_EAST_MAX_S 50400 /* UTC+14 (Pacific/Kiritimati) */
#define HR_STATE_FIRST_DUE_SQL "(due_at - INTERVAL (local_time * 50400) SECOND)"

/* HR_STATE_FIRST_DUE_SQL CMP T for a valid task (local_time 0 or 1; the
 * validation fails any other), written as one range of due_at per
 * local_time value: with state and control fixed before it, the index
 * push_task_state_control_due (state, control, local_time, due_at;
 * 031_task_due_scan.sql) reads only the tasks it matches, where the
 * expression made MariaDB read every scheduled task's row.  T is an SQL
 * expression pasted twice (its parameters are bound twice); OR_NULL is
 * "due_at IS NULL OR " to match a NULL due_at too, else "". */
#define HR_STATE_DUE_BY_SQL(cmp, t, or_null)                                                   \
    "((local_time = 0 AND (" or_null "due_at " cmp " " t ")) OR (local_time = 1 AND (" or_null \
    "due_at " cmp " " t " + INTERVAL 50400 SECOND)))"

/* push_task.state, in the order of its ENUM in schemas/mysql/001_tables.sql. */
typedef enum hr_task_state {
    HR_STATE_SCHEDULED,
    HR_STATE_DISPATCHING,
    HR_STATE_DISPATCHED,
    HR_STATE_DONE,
    HR_STATE_PAUSED,
    HR_STATE_CANCELLED,
    HR_STATE_FAILED,
    HR_STATE__COUNT
} hr_task_state;

/* push_task.control: the admin's wish, carried out by the dispatchers. */
typedef enum hr_control {
    HR_CONTROL_RUN,
    HR_CONTROL_PAUSE,
    HR_CONTROL_CANCEL,
    HR_CONTROL__COUNT
} hr_control;

/* "scheduled", "dispatching", ...; "?" for a value out of range. */
/* The index of NAME in the name table NAMES[N], or -1: what every enum's
 * parse shares (also hr_series' states). */
int hr_state_lookup(const char *const *names, int n, const char *name);

const char *hr_state_name(hr_task_state s);
/* 0 and *OUT for a state's name, -1 for anything else (NULL included). */
int hr_state_parse(const char *name, hr_task_state *out);
/* done, failed, cancelled: nothing more happens to the task. */
bool hr_state_final(hr_task_state s);

/* "run", "pause", "cancel"; "?" for a value out of range. */
const char *hr_control_name(hr_control control);
int hr_control_parse(const char *name, hr_control *out);

/* The admin's wish: push_task.control = CONTROL of an unfinished task (the
 * dispatchers' control scan then moves its state).  0 or -1. */
int hr_state_control(hr_mysql *m, int64_t id, hr_control control, char *errstr, size_t errlen);

/* hr_state_claim: the task row stayed locked (a subscription insert or an
 * admin's open transaction); try again later. */
#define HR_STATE_BUSY 2

/* scheduled (or dispatching and already OWNER's: a retried claim that
 * committed before its reply was lost) -> dispatching, owned by OWNER with
 * a lease of LEASE_S seconds, when control is run and due_at <= DUE_BY_MS.
 * Waits at most a second for the row lock: HR_STATE_BUSY. */
int hr_state_claim(hr_mysql *m, int64_t id, const char *owner, int64_t lease_s, int64_t due_by_ms,
                   char *errstr, size_t errlen);
/* hr_state_claim of the N tasks IDS (sorted ascending, so that claims lock
 * rows in one order) in one statement; *CLAIMED gets how many moved.  0,
 * HR_STATE_BUSY when a row stayed locked for a second (the statement is
 * then undone: nothing was claimed), or -1. */
int hr_state_claim_batch(hr_mysql *m, const int64_t *ids, size_t n, const char *owner,
                         int64_t lease_s, int64_t due_by_ms, uint64_t *claimed, char *errstr,
                         size_t errlen);
/* dispatching (owned by OWNER) -> dispatched of the N tasks IDS (sorted
 * ascending) in one statement: every recipient chunked.  *MOVED gets how
 * many moved.  0 or -1. */
int hr_state_dispatched(hr_mysql *m, const int64_t *ids, size_t n, const char *owner,
                        uint64_t *moved, char *errstr, size_t errlen);
/* dispatched (control run) -> dispatching with no owner and an expired
 * lease, which a poller takes over: recipients came back to subs. */
int hr_state_redispatch(hr_mysql *m, int64_t id, char *errstr, size_t errlen);
/* The finish of dispatched tasks, two steps inside the caller's
 * transaction (hr_finish_tasks() is the caller): */
/* Locks the rows of the N tasks IDS (sorted ascending) that are dispatched
 * now (SELECT ... FOR UPDATE) and marks them in LOCKED[i]: they stay
 * dispatched until the transaction ends, whoever else tries to finish
 * them (the other dispatchers' sweepers, the workers' reporters), so the
 * caller knows exactly which it moves.  0 or -1. */
int hr_state_lock_dispatched(hr_mysql *m, const int64_t *ids, size_t n, bool *locked, char *errstr,
                             size_t errlen);
/* dispatched -> done, or failed when the outcome counters (raised first,
 * hr_finish_raise_batch) cover fewer subscriptions than the task has
 * (unaccounted and last_error say so), or cancelled when control is
 * cancel (unaccounted still written), of the N tasks ROWS ([id, subs]
 * pairs, row-major, ids ascending), in one statement.  *MOVED gets how
 * many moved.  0 or -1. */
int hr_state_finish(hr_mysql *m, const int64_t *rows, size_t n, uint64_t *moved, char *errstr,
                    size_t errlen);
/* FROM -> failed with REASON as last_error. */
int hr_state_fail(hr_mysql *m, int64_t id, hr_task_state from, const char *reason, char *errstr,
                  size_t errlen);
/* scheduled, dispatching or dispatched (control pause) -> paused. */
int hr_state_pause(hr_mysql *m, int64_t id, char *errstr, size_t errlen);
/* paused (control run) -> TO with no owner and an expired lease, so that a
 * poller takes a dispatching task over. */
int hr_state_resume(hr_mysql *m, int64_t id, hr_task_state to, char *errstr, size_t errlen);
/* any unfinished state (control cancel) -> cancelled. */
int hr_state_cancel(hr_mysql *m, int64_t id, char *errstr, size_t errlen);
/* done, or failed with unaccounted recipients, -> dispatched: heraldctl
 * redrive gave the task new chunks (a finish that read the counters before
 * the redrive, or a worker's last report of one shard landing after it,
 * can leave the task failed with the redriven chunks still pending). */
int hr_state_reopen(hr_mysql *m, int64_t id, char *errstr, size_t errlen);
/* heraldctl redrive's MySQL half: MOVED dead letters leave failed and
 * total (they are published again), and a done task is dispatched again.
 * 0 or -1. */
int hr_state_redrive(hr_mysql *m, int64_t id, int64_t moved, char *errstr, size_t errlen);
/* heraldctl recover: dispatching, dispatched, or failed with unaccounted
 * recipients -> dispatching with no owner, an expired lease and the
 * failure forgotten. */
int hr_state_recover(hr_mysql *m, int64_t id, char *errstr, size_t errlen);
/* heraldctl purge: done, failed or cancelled with finished_at before
 * BEFORE_MS -> no row at all.  One transaction under the row's lock: the
 * push_task row goes and a push_purge row (the task's delivery log day
 * and shards) records what its other rows and keys still are, so a repair
 * that reopens the task (redrive, recover) either came first, and the
 * guard no longer matches, or finds no task. */
int hr_state_purge(hr_mysql *m, int64_t id, int64_t before_ms, char *errstr, size_t errlen);

#endif
