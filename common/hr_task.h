/* hr_task: one push_task row in memory, loaded with a fixed column list,
 * and the validation every entry point shares (dispatcher scanner, API,
 * heraldctl create, worker).
 *
 * Times are converted by MySQL (sessions run in UTC) to epoch milliseconds;
 * NULL times are -1.  Strings are owned by the hr_task and freed with it. */
#ifndef HR_TASK_H
#define HR_TASK_H

#include <stdbool.h>
#include <stdint.h>

#include "hr_config.h"
#include "hr_mysql.h"
#include "hr_redis.h"
#include "hr_state.h"

/* The select list hr_task_from_row expects, in this order. */
#define HR_TASK_COLUMNS                                                                          \
    "id, name, topic, channel, title, body, payload, "                                           \
    "CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED), "                                     \
    "CAST(ROUND(UNIX_TIMESTAMP(COALESCE(freeze_at, CAST(DATE(due_at) AS DATETIME(3)))) * 1000) " \
    "AS SIGNED), "                                                                               \
    "rate_limit, chunk_size, throttle_limit, throttle_window_s, throttle_scope, "                \
    "throttle_key, throttle_mode, control, state, last_error, claimed_by, "                      \
    "CAST(ROUND(UNIX_TIMESTAMP(lease_until) * 1000) AS SIGNED), "                                \
    "total, sent, failed, throttled, pulled, cancelled, retried, unregistered, "                 \
    "ttl_s, collapse_key, priority, " HR_TASK_LOCAL_COLUMNS ", " /* expiry (009_expiry.sql) */   \
    "CAST(ROUND(UNIX_TIMESTAMP(expire_at) * 1000) AS SIGNED), expired" HR_TASK_COLUMNS_PACING    \
    ", shards"                          /* sharded tasks (010_shards.sql) */                     \
    ", category, opted_out, suppressed" /* recipients (016_categories.sql) */                    \
    ", rich"                            /* rich and silent pushes (023_rich_split.sql) */        \
        HR_TASK_COLUMNS_AB ", CAST(ROUND(UNIX_TIMESTAMP(event_at) * 1000) AS SIGNED)" /* 027 */  \
        HR_TASK_COLUMNS_VARIANTS

/* Whether the task has variants (022_variants.sql): not a column but a
 * probe of push_task_variant's (task_id, vkey) key, so that a worker
 * loading a task without variants spends no second statement on them
 * (docs/performance.md "Issue 33").  A query selecting HR_TASK_COLUMNS
 * names the table push_task, unaliased. */
#define HR_TASK_COLUMNS_VARIANTS \
    ", EXISTS(SELECT 1 FROM push_task_variant v WHERE v.task_id = push_task.id)"

/* An A/B test's winner step (024_ab_winner.sql). */
#define HR_TASK_COLUMNS_AB                                                     \
    ", ab_sample_pct, ab_wait_s, ab_metric, "                                  \
    "CAST(ROUND(UNIX_TIMESTAMP(ab_sampled_at) * 1000) AS SIGNED), ab_winner, " \
    "CAST(ROUND(UNIX_TIMESTAMP(ab_decided_at) * 1000) AS SIGNED), ab_figures"

/* Pacing and admission control (schemas/mysql/007_pacing.sql): finish_by,
 * last_warning. */
#define HR_TASK_COLUMNS_PACING \
    ", CAST(ROUND(UNIX_TIMESTAMP(finish_by) * 1000) AS SIGNED), last_warning"

/* Local time and send windows (008_local_time.sql): the columns.  The
 * earliest instant a local_time task can be due anywhere is hr_state.h's
 * HR_STATE_FIRST_DUE_SQL (the claim's condition). */
#define HR_TASK_LOCAL_COLUMNS \
    "local_time, default_tz, TIME_TO_SEC(window_start), TIME_TO_SEC(window_end), window_tz"

#define HR_TASK_MAX_WINDOW_S 2678400 /* 31 days */
#define HR_TASK_MAX_CHUNK 100000
#define HR_TASK_MAX_TTL_S 2419200 /* 28 days, FCM's longest */
#define HR_TASK_MAX_COLLAPSE 64   /* bytes; APNs' apns-collapse-id limit */

/* push_task.priority.  HR_PRIORITY_BAD: a hand-written value that is
 * neither, which hr_task_validate refuses. */
typedef enum hr_priority { HR_PRIORITY_HIGH, HR_PRIORITY_NORMAL, HR_PRIORITY_BAD } hr_priority;

typedef struct hr_task {
    int64_t id;
    char *name;
    char *topic;
    char *channel;
    char *title;       /* template */
    char *body;        /* template */
    char *payload;     /* JSON object text, or NULL */
    int64_t due_ms;    /* -1 = NULL */
    int64_t freeze_ms; /* freeze_at, or 00:00 UTC of the due day; -1 when due_at is NULL */
    int64_t rate_limit;
    int64_t chunk_size;
    int64_t throttle_limit; /* 0 = no throttle */
    int64_t throttle_window_s;
    char *throttle_scope; /* effective: topic when the column is NULL */
    char *throttle_key;   /* NULL = none */
    char *throttle_mode;  /* "enforce" | "shadow" | NULL (channel's mode) */
    hr_control control;
    hr_task_state state;
    char *last_error;
    char *claimed_by;
    int64_t lease_until_ms; /* -1 = NULL */
    int64_t total, sent, failed, throttled, pulled, cancelled, retried, unregistered;
    int64_t ttl_s;      /* -1 = NULL (the provider's default) */
    char *collapse_key; /* NULL = none */
    hr_priority priority;
    /* expiry (009_expiry.sql) */
    /* expire_at; -1 = NULL (never).  Any value <= 0 means never, so a
     * task built in memory (zeroed) does not expire. */
    int64_t expire_ms;
    int64_t expired; /* recipients counted expired */
    /* local time and send windows (008_local_time.sql) */
    int64_t local_time;     /* 1: due_at's wall time is read in each recipient's zone */
    char *default_tz;       /* zone of recipients without a tz attribute; NULL = UTC */
    bool window;            /* window_start or window_end is set (a zeroed task has none) */
    int64_t window_start_s; /* daily window, seconds of the local day; -1 = NULL */
    int64_t window_end_s;   /* exclusive; < window_start_s wraps midnight */
    char *window_tz;        /* NULL = the recipient's zone */
    /* pacing (007_pacing.sql) */
    int64_t finish_ms;  /* finish_by, -1 = NULL (no pacing) */
    char *last_warning; /* admission control's, NULL = none */
    /* sharded tasks (010_shards.sql): subscriber sets the task is split
     * over; < 2 (a zeroed task too) = one, the task's own keys */
    int64_t shards;
    /* recipients (016_categories.sql, docs/recipients.md) */
    char *category;                /* one of recipients.categories; NULL (zeroed) = "reminder" */
    int64_t opted_out, suppressed; /* the consent outcomes' counters */
    /* rich and silent pushes (023_rich_split.sql): a JSON object hr_rich_parse
     * reads, NULL = a plain push */
    char *rich;
    /* an A/B test's winner step (024_ab_winner.sql, common/hr_variant.h):
     * ab_sample_pct <= 0 (-1 NULL, 0 a zeroed task) = none */
    int64_t ab_sample_pct, ab_wait_s;
    char *ab_metric;       /* "click", "open", "delivered" */
    int64_t ab_sampled_ms; /* the sample's end as the owner saw it; -1 = not yet */
    char *ab_winner;       /* the winning arm (or "default"); NULL = not picked */
    int64_t ab_decided_ms; /* -1 = not picked */
    char *ab_figures;      /* JSON: the per-arm figures the pick read */
    /* lead times (027_lead_times.sql, docs/scheduling.md "Lead times"):
     * event_at, the instant subscriptions' lead_s count back from; any
     * value <= 0 (-1 NULL, 0 a zeroed task) = none */
    int64_t event_ms;
    /* 1 when push_task_variant holds rows of the task (HR_TASK_COLUMNS_VARIANTS);
     * 0 also for a task not read from a row */
    int64_t has_variants;
} hr_task;

/* Fills T with what a new task is when nothing else is given (the API's
 * POST /v1/tasks and `heraldctl create` start from it): topic "default",
 * empty title and body, chunk_size 5000, one shard, control run, state
 * scheduled, and -1 (the column's NULL) for every time, the ttl and the
 * window.  The strings are static: the caller replaces what it was given
 * and never frees them with hr_task_free. */
void hr_task_defaults(hr_task *t);

/* The instant the timer and the claim use: due_ms, or for a local_time
 * task the earliest instant any zone reaches its wall time. */
int64_t hr_task_first_due_ms(const hr_task *t);

/* Whether recipients of T go through the wait set (local_time, a window,
 * or an A/B test's winner step, whose rest waits for the pick).  A task
 * with event_at is planned too, but only its recipients with a future
 * lead wait (hr_task_leads): it is not in this list, so its chunks cost
 * what a task's without one cost until those waves come. */
bool hr_task_waits(const hr_task *t);

/* Whether T has an event_at its subscriptions' leads count back from. */
bool hr_task_leads(const hr_task *t);

/* The release instant of a subscription of T with lead LEAD_S (< 0: none)
 * planned at NOW_MS: event_at - lead, or NOW_MS when that has passed (a
 * wave before the claim fires at the claim); due_at for no lead or a task
 * without event_at.  Pure. */
int64_t hr_task_lead_release_ms(const hr_task *t, int64_t lead_s, int64_t now_ms);

/* Whether subscriptions with lead LEAD_S (seconds) may be added to T (the
 * API and `heraldctl import --lead`): T has event_at, and the wave
 * event_at - lead is not before due_at (raw SQL's such rows are sent at
 * the claim).  0, or -1 with ERRSTR naming the lead and the times. */
int hr_task_lead_check(const hr_task *t, int64_t lead_s, char *errstr, size_t errlen);

/* T's MySQL outcome counters in hr_outcome order (sent .. suppressed, not
 * unaccounted): what a report merges with the live stats hash. */
void hr_task_outcome_counts(const hr_task *t, int64_t out[HR_OUTCOME_UNACCOUNTED]);

/* T's category ("reminder" for a zeroed task). */
const char *hr_task_category(const hr_task *t);

/* Builds a task from row ROW of a result selected with HR_TASK_COLUMNS. */
int hr_task_from_row(const hr_mysql_rows *rows, size_t row, hr_task **out, char *errstr,
                     size_t errlen);

/* Loads task ID.  Returns 0 and *OUT, 1 when there is no such task (*OUT
 * NULL), or -1 on a database error. */
int hr_task_load(hr_mysql *m, int64_t id, hr_task **out, char *errstr, size_t errlen);
/* Loads the N tasks IDS in one SELECT (JSON_TABLE of the ids) into *OUT,
 * *NOUT of them in any order (an id without a row has none; free each with
 * hr_task_free, then the array).  0 or -1. */
int hr_task_load_many(hr_mysql *m, const int64_t *ids, size_t n, hr_task ***out, size_t *nout,
                      char *errstr, size_t errlen);

/* Writes T as a new push_task row: what POST /v1/tasks, `heraldctl create`
 * and a series' occurrence (dispatcher/dsp_series.c) share.  SCOPE is the
 * throttle_scope column (NULL = the topic), FREEZE_MS the freeze_at column
 * (-1 = NULL: 00:00 UTC of the due day).  SERIES_ID > 0 makes the row an
 * occurrence of that series at T's due time (occurrence_at = due_at): a
 * second write of the same occurrence writes nothing and answers the first
 * row's id with *EXISTED true (the unique key of 019_series.sql).  The
 * caller validates T first and owns the transaction.  0 or -1 (ERRSTR). */
int hr_task_insert(hr_mysql *m, const hr_task *t, const char *scope, int64_t freeze_ms,
                   int64_t series_id, uint64_t *id, bool *existed, char *errstr, size_t errlen);

/* "high" / "normal" into *OUT; -1 for anything else (*OUT HR_PRIORITY_BAD). */
int hr_priority_parse(const char *s, hr_priority *out);
const char *hr_priority_name(hr_priority p);

/* Whether T has a finish_by (NULL loads as -1; a zeroed struct, 0, has none
 * either). */
bool hr_task_paced(const hr_task *t);

/* Checks everything a task needs to be dispatched and pushed: a known
 * channel, chunk_size 1..100000, due_at set, rate_limit >= 0, throttle_limit
 * >= 0 and, when > 0, throttle_window_s 1..2678400, payload absent or a JSON
 * object, ttl_s NULL or 0..2419200, collapse_key NULL or 1..64 bytes on one
 * line, a known priority, local_time 0 or 1, default_tz / window_tz NULL or a
 * zone hr_tz loads, window_start / window_end both NULL or two different
 * times of day, expire_at and finish_by NULL or after due_at, shards 1..256 and 1 with
 * local_time, a window or finish_by, a category recipients.categories declares,
 * title/body and the channel's
 * templates compile.  ERRSTR gets the
 * first problem in words an admin understands, e.g.
 * "chunk_size 0 is outside 1..100000". */
int hr_task_validate(const hr_task *t, const hr_config *cfg, char *errstr, size_t errlen);

/* An admin's pause / resume / cancel wish: push_task.control of an
 * unfinished task when M is not NULL, then the task's ctl key, so workers react at once.  Returns 0, -1 when
 * the first step failed (nothing changed), or 1 when MySQL holds the wish
 * but the ctl key was not set (the dispatchers' control scan sets it);
 * ERRSTR says why. */
int hr_task_set_control(hr_mysql *m, hr_redis *r, int64_t id, hr_control control, char *errstr,
                        size_t errlen);

/* Whether task T's recipients are past its expire_at at NOW_MS (a push
 * started then would be useless): nothing more is pushed, what is left
 * counts expired. */
bool hr_task_expired(const hr_task *t, int64_t now_ms);

void hr_task_free(hr_task *t);

#endif
