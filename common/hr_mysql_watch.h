/* hr_mysql_watch: every MySQL call timed for the daemon's metrics, slow calls
 * and those the timeout ended counted, slow ones handed to a hook the daemon
 * logs with (hr_mysql.h says which calls are timed). */
#ifndef HR_MYSQL_WATCH_H
#define HR_MYSQL_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_metrics.h"

/* A call of at least HR_MYSQL_SLOW_MS, or one the read/write timeout
 * (mysql.timeout_s) ended, as handed to the slow hook of hr_mysql_watch. */
#define HR_MYSQL_SLOW_MS 1000
typedef struct hr_mysql_slow {
    const char *sql;  /* the statement's text (values are parameters, never in it) */
    const char *host; /* the server */
    unsigned port;
    int64_t ms;          /* how long it took */
    bool timed_out;      /* the timeout ended it: it failed, the connection dropped */
    uint64_t suppressed; /* slow calls since the last hook call that were not handed over */
} hr_mysql_slow;
typedef void (*hr_mysql_slow_fn)(const hr_mysql_slow *slow);
/* The daemons' slow hook: SLOW as one warning line, event "mysql_timeout"
 * or "mysql_slow", fields "mysql=H:P ms=N suppressed=N sql=<its first 80
 * bytes>".  A daemon passes it to hr_mysql_watch (the watch itself never
 * logs). */
void hr_mysql_slow_log(const hr_mysql_slow *slow);

/* Process-wide, at start-up before the daemon's threads run: every MySQL
 * call after it (a statement, BEGIN, COMMIT; each attempt) is timed into
 * REG's histogram herald_mysql_call_seconds, one of HR_MYSQL_SLOW_MS or
 * more counts in herald_mysql_slow_calls_total, one the timeout ended in
 * herald_mysql_timeouts_total, and SLOW (may be NULL) is called for a slow
 * one, from the calling thread, at most once a second (the others are
 * counted in the next call's suppressed): the daemon logs it, so that a
 * MySQL that answers slowly or not at all shows.  REG NULL ends the watch
 * (before REG is freed, once the daemon's threads are done).  0, or -1
 * (ERRSTR: the families could not be registered). */
int hr_mysql_watch(hr_metrics *reg, hr_mysql_slow_fn slow, char *errstr, size_t errlen);

/* A MySQL call of SQL to HOST:PORT that took MS, TIMED_OUT when the
 * timeout ended it: timed, counted, and handed to the slow hook when it
 * is slow (nothing while no watch is on).  hr_mysql calls it for every
 * call; the watch never calls hr_mysql. */
void hr_mysql_watch_note(const char *sql, const char *host, unsigned port, int64_t ms,
                         bool timed_out);

#endif
