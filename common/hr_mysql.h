/* hr_mysql: a MariaDB connection with prepared statements only.
 *
 * An hr_mysql is used by one thread at a time.  Every statement is prepared
 * (never built from strings with values in them), parameters are typed
 * hr_mysql_param values, and result cells come back as NUL-terminated
 * strings with a NULL flag, which is all herald needs.  A statement that
 * fails because the server went away reconnects once and is retried; one
 * outside a transaction that lost a deadlock is run again (up to 3 times).
 * Every network read or write waits at most mysql.timeout_s: a server that
 * stops answering fails the call (not run again here), and hr_mysql_watch
 * makes slow calls and timeouts visible. */
#ifndef HR_MYSQL_H
#define HR_MYSQL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "hr_config.h"
#include "hr_metrics.h"
#include "hr_mysql_rows.h"

typedef struct hr_mysql hr_mysql;

typedef enum hr_mysql_type {
    HR_MYSQL_NULL,
    HR_MYSQL_I64,
    HR_MYSQL_STR,
    HR_MYSQL_DOUBLE,
    /* i64 is UTC ms since the epoch, bound as a DATETIME with milliseconds:
     * the server stores it without evaluating an expression per row (the
     * session's time_zone is '+00:00', so it means the same instant as
     * FROM_UNIXTIME(ms / 1000)). */
    HR_MYSQL_TIME_MS
} hr_mysql_type;

typedef struct hr_mysql_param {
    hr_mysql_type type;
    int64_t i64;
    double dbl;
    const char *str; /* not copied; STR with len */
    size_t len;
} hr_mysql_param;

#define HR_P_I64(v) ((hr_mysql_param){.type = HR_MYSQL_I64, .i64 = (int64_t)(v)})
#define HR_P_STR(s) ((hr_mysql_param){.type = HR_MYSQL_STR, .str = (s), .len = strlen(s)})
#define HR_P_STRN(s, n) ((hr_mysql_param){.type = HR_MYSQL_STR, .str = (s), .len = (n)})
#define HR_P_NULL ((hr_mysql_param){.type = HR_MYSQL_NULL})
#define HR_P_TIME_MS(v) ((hr_mysql_param){.type = HR_MYSQL_TIME_MS, .i64 = (int64_t)(v)})

/* S, or NULL when S is NULL; V, or NULL when V is negative (the rows' "not
 * set"). */
static inline hr_mysql_param hr_mysql_p_str_or_null(const char *s)
{
    return s != NULL ? HR_P_STR(s) : HR_P_NULL;
}

static inline hr_mysql_param hr_mysql_p_i64_or_null(int64_t v)
{
    return v >= 0 ? HR_P_I64(v) : HR_P_NULL;
}

int hr_mysql_connect(const hr_config *cfg, hr_mysql **out, char *errstr, size_t errlen);
/* The server ends a transaction of this session that stays idle after a
 * write for half the row lock wait of the session settings (4 s at
 * mysql.timeout_s 10): it rolls it back and closes the connection, whose
 * next call then fails as a lost server (so the caller runs its
 * transaction again on a new connection, as after any lost connection).
 * For a process that may be frozen between two statements of a
 * transaction (a SIGSTOP, a paused VM, a long swap-in) while other
 * sessions need its rows: the worker's reporter held a task's counters
 * row so through a SIGSTOP, and `heraldctl recover` waited for it past
 * its lock wait.  Kept on a reconnect.  0, or -1 with ERRSTR. */
int hr_mysql_limit_idle_txn(hr_mysql *m, char *errstr, size_t errlen);
void hr_mysql_free(hr_mysql *m);

/* The server's error number for a SIGNAL from a trigger (the freeze and
 * subscription guards): a refusal the caller shows the admin as is. */
#define HR_MYSQL_ER_SIGNAL 1644
/* A row lock was not granted within innodb_lock_wait_timeout. */
#define HR_MYSQL_ER_LOCK_WAIT_TIMEOUT 1205
/* Times a statement that lost a deadlock is run again: by hr_mysql itself
 * outside a transaction, by the caller (from its BEGIN) inside one. */
#define HR_MYSQL_DEADLOCK_RETRIES 3

/* Prepared statement without a result set.  *AFFECTED and *INSERT_ID may be
 * NULL.  Returns 0, or -1 with ERRSTR; *ERRNO_OUT (may be NULL) gets the
 * server error number (e.g. 1644 for a SIGNAL from a trigger). */
int hr_mysql_exec(hr_mysql *m, const char *sql, const hr_mysql_param *params, size_t nparams,
                  uint64_t *affected, uint64_t *insert_id, unsigned *errno_out, char *errstr,
                  size_t errlen);

/* SQL, a statement of NCOLS parameters without a result set, run for each
 * of the NROWS rows of PARAMS (NROWS x NCOLS, row after row) in one round
 * trip: MariaDB's array binding, where the server runs the statement once
 * and reads each row's NCOLS parameters in turn, so an INSERT of many rows
 * costs it no statement of NROWS x NCOLS placeholders (their setup and
 * cleanup a row each; at most 65,535).  A column's values share a type
 * (or are NULL).  All rows or none, like one statement; *AFFECTED (may be
 * NULL) is the sum.  A server without array binding (MySQL; a proxy that
 * does not pass MariaDB's capability) gets one execute a row instead, which
 * may stop after some rows (a transaction of the caller's undoes them).
 * Returns as hr_mysql_exec. */
int hr_mysql_exec_rows(hr_mysql *m, const char *sql, const hr_mysql_param *params, size_t ncols,
                       size_t nrows, uint64_t *affected, unsigned *errno_out, char *errstr,
                       size_t errlen);

/* Prepared statement with a result set, fetched whole into *OUT. */
int hr_mysql_query(hr_mysql *m, const char *sql, const hr_mysql_param *params, size_t nparams,
                   hr_mysql_rows **out, char *errstr, size_t errlen);

/* Plain statement without parameters, for DDL and migration files (which may
 * hold several statements and trigger bodies). */
int hr_mysql_script(hr_mysql *m, const char *sql, char *errstr, size_t errlen);

/* Transactions nest: a begin inside an open transaction sets a savepoint,
 * and its commit releases it (its changes become the outer transaction's,
 * committed or rolled back with it) while its rollback undoes only what
 * was done since.  So a caller may wrap a function that runs its own
 * transaction together with a statement of its own (the audit row of a
 * change, hr_audit.h) in one transaction.  0, or -1 with ERRSTR. */
int hr_mysql_begin(hr_mysql *m, char *errstr, size_t errlen);
int hr_mysql_commit(hr_mysql *m, char *errstr, size_t errlen);
int hr_mysql_rollback(hr_mysql *m);
/* The last statement lost a deadlock: the server rolled the whole
 * transaction back and asks for it to be run again from its BEGIN
 * (after hr_mysql_rollback), which the caller may do up to
 * HR_MYSQL_DEADLOCK_RETRIES times. */
bool hr_mysql_deadlocked(const hr_mysql *m);

/* The session holds a named lock (GET_LOCK) while LOCKED: a statement that
 * finds the server gone is then not run again on a new connection, whose
 * session would not hold the lock. */
void hr_mysql_set_locked(hr_mysql *m, bool locked);

#endif
