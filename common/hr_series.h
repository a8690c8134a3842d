/* hr_series: a push_series row (schemas/mysql/019_series.sql) in memory,
 * its recurrence expanded, and an occurrence made a task.
 *
 * The recurrence is RFC 5545's RRULE, EXDATE, COUNT and UNTIL, parsed and
 * expanded by libical (icalrecurrencetype_from_string, icalrecur_iterator),
 * never by arithmetic of ours.  libical expands in wall-clock time: DTSTART
 * is given to it floating (no zone), so every occurrence is a wall time of
 * the series' zone; hr_tz (the TZif files of /usr/share/zoneinfo, the ones
 * local-time tasks read) turns a wall time into an instant with its gap and
 * overlap rules.  libical's own zone handling is not used: one zone
 * database, one set of rules (docs/scheduling.md "Series").
 *
 * Wall times are carried as "wall ms": the wall-clock time written as if it
 * were UTC (2027-01-04 09:00 in Berlin is the ms of 2027-01-04T09:00Z),
 * which is also what a local-time task's due_at holds.
 *
 * Functions return 0 or a negative value with the reason in ERRSTR. */
#ifndef HR_SERIES_H
#define HR_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_mysql.h"
#include "hr_task.h"
#include "hr_variant.h"

/* push_series.state */
typedef enum hr_series_state {
    HR_SERIES_ACTIVE,
    HR_SERIES_PAUSED,
    HR_SERIES_ENDED,
    HR_SERIES_FAILED,
    HR_SERIES_STATE_COUNT
} hr_series_state;

/* push_series.catch_up: occurrences whose time passed unwritten. */
typedef enum hr_series_catch_up {
    HR_CATCH_UP_NONE,   /* skipped */
    HR_CATCH_UP_LATEST, /* only the last one is written */
    HR_CATCH_UP_ALL,    /* every one is written */
    HR_CATCH_UP_COUNT
} hr_series_catch_up;

/* Steps one expansion may take through the rule (occurrences before the
 * asked window and EXDATEs included) before it gives up with an error: a
 * bound on the time a rule can cost a dispatcher. */
#define HR_SERIES_STEPS_MAX 200000
#define HR_SERIES_RRULE_MAX 1000
#define HR_SERIES_EXDATE_MAX 4000

typedef struct hr_series {
    int64_t id;
    hr_task *tmpl;           /* the template (owned); due_ms -1 */
    hr_variant_set variants; /* per-locale content (owned), copied to each occurrence */
    int64_t expire_after_s;  /* -1 = never */
    char *rrule;
    int64_t dtstart_wall_ms;
    char *tz;
    char *exdate; /* NULL = none */
    bool local_time;
    hr_series_catch_up catch_up;
    int64_t lead_s; /* -1 = the dispatcher's default */
    hr_series_state state;
    int64_t next_wall_ms; /* -1 = NULL: not looked at yet */
    int64_t occurrences;
    int64_t drip_days; /* a drip: an occurrence takes the subscribers of the day this many
                          days before its own (in tz); -1 = not a drip */
} hr_series;

/* The longest a drip waits after the subscription, in days. */
#define HR_SERIES_DRIP_DAYS_MAX 3650

const char *hr_series_state_name(hr_series_state s);
int hr_series_state_parse(const char *s, hr_series_state *out);
const char *hr_series_catch_up_name(hr_series_catch_up c);
int hr_series_catch_up_parse(const char *s, hr_series_catch_up *out);

/* Up to MAX occurrences (wall ms, ascending) of RRULE from DTSTART_WALL_MS
 * minus the EXDATE list (NULL = none), those after AFTER_WALL_MS only, into
 * OUT; *N how many.  *N < MAX means the rule has no more (COUNT or UNTIL
 * reached).  -1 for a rule libical refuses, an EXDATE that is not
 * 'YYYYMMDDTHHMMSS', or a rule that needs more than HR_SERIES_STEPS_MAX
 * steps, each with a message naming it. */
int hr_series_expand(const char *rrule, int64_t dtstart_wall_ms, const char *exdate,
                     int64_t after_wall_ms, size_t max, int64_t *out, size_t *n, char *errstr,
                     size_t errlen);

/* The due_at an occurrence at WALL_MS gets: the instant in S's zone, or the
 * wall time itself for a local-time series (each recipient's zone reads
 * it).  hr_task_first_due_ms of the occurrence is when it is due anywhere. */
int hr_series_due_ms(const hr_series *s, int64_t wall_ms, int64_t *due_ms, char *errstr,
                     size_t errlen);

/* Fills *T with the occurrence of S whose due_at is DUE_MS: the template's
 * fields (borrowed from S, so *T is never given to hr_task_free), local time
 * with S's zone as default_tz, expire_at from expire_after_s. */
void hr_series_occurrence(const hr_series *s, int64_t due_ms, hr_task *t);

/* The instants [*FROM_MS, *UNTIL_MS) of the day, in S's zone, of the
 * subscriptions a drip's occurrence at wall time WALL_MS takes: the wall
 * day drip_days before the occurrence's, midnight to midnight (hr_tz's
 * rules for a midnight in a gap).  0 or -1. */
int hr_series_drip_window(const hr_series *s, int64_t wall_ms, int64_t *from_ms, int64_t *until_ms,
                          char *errstr, size_t errlen);

/* Writes the drip window of occurrence task TASK_ID of drip S at WALL_MS
 * (push_task.drip_from, drip_until), in the caller's transaction.  0 or
 * -1. */
int hr_series_drip_write(hr_mysql *m, const hr_series *s, int64_t task_id, int64_t wall_ms,
                         char *errstr, size_t errlen);

/* Checks S's rule, zone and template (hr_task_validate of an occurrence at
 * its dtstart), a drip's rule (daily, every day, once a day) and catch_up
 * (all: a day skipped would skip that day's subscribers for good), and the template's content and S's variants against the
 * channel (hr_variant_check of that occurrence).  0, -1, or
 * HR_VARIANT_EINVAL when S has variants and the content check refused
 * them.  The message names what is wrong. */
int hr_series_validate(const hr_series *s, const hr_config *cfg, char *errstr, size_t errlen);

/* Loads series ID with its variants.  0 and *OUT, 1 when there is none, -1 on a database
 * error or a row whose enums or times cannot be read. */
int hr_series_load(hr_mysql *m, int64_t id, hr_series **out, char *errstr, size_t errlen);

/* Fills S with what a new series is when nothing else is given (the API's
 * POST /v1/series and `heraldctl series create` start from it): template T
 * (hr_task_defaults: static strings, never freed), zone UTC, catch_up
 * latest, the dispatcher's lead, no expiry, DTSTART unset (INT64_MIN). */
void hr_series_defaults(hr_series *s, hr_task *t);

/* Writes S (template, recurrence and variants; its bookkeeping starts
 * empty) as a new push_series row and its push_series_variant rows, *ID
 * its id.  The caller validates S first
 * (hr_series_validate) and owns the transaction.  0 or -1. */
int hr_series_insert(hr_mysql *m, hr_series *s, int64_t *id, char *errstr, size_t errlen);

/* An admin's change of series ID's state: pause (from active), resume
 * (from paused, or failed after the row was fixed: last_error cleared),
 * end (from active, paused or failed).  0 done, 1 no such series, 2 the
 * series is in a state the change does not start from (*FROM says which),
 * -1 on a database error.  Occurrences already written are tasks: they are
 * paused or cancelled as tasks. */
int hr_series_set_state(hr_mysql *m, int64_t id, hr_series_state to, hr_series_state *from,
                        char *errstr, size_t errlen);

/* The select list of hr_series_list's rows, in this order. */
#define HR_SERIES_LIST_COLUMNS                                                        \
    "id, name, state, rrule, DATE_FORMAT(dtstart, '%Y-%m-%d %H:%i:%s'), tz, "         \
    "local_time, catch_up, COALESCE(DATE_FORMAT(next_at, '%Y-%m-%d %H:%i:%s'), ''), " \
    "occurrences, COALESCE(last_error, '')"

/* Up to LIMIT series with id > AFTER, by id (HR_SERIES_LIST_COLUMNS). */
int hr_series_list(hr_mysql *m, int64_t after, int64_t limit, hr_mysql_rows **out, char *errstr,
                   size_t errlen);

/* The next N occurrences of S not yet written (from next_at, or DTSTART
 * when it was never walked): wall times into WALL, due instants into DUE
 * (hr_series_due_ms), *GOT how many (fewer: the rule ends).  0 or -1. */
int hr_series_next(const hr_series *s, size_t n, int64_t *wall, int64_t *due, size_t *got,
                   char *errstr, size_t errlen);

void hr_series_free(hr_series *s);

/* Wall ms of civil time Y-M-D HH:MM:SS, and back. */
int64_t hr_series_wall_ms(int y, int mo, int d, int hh, int mi, int ss);
void hr_series_wall_fields(int64_t wall_ms, int *y, int *mo, int *d, int *hh, int *mi, int *ss);

#endif
