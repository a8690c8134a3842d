/* hr_task: a push_task row in memory and the validation shared by every
 * entry point.
 *
 * hr_task_from_row copies one row selected with HR_TASK_COLUMNS into a
 * freshly allocated hr_task; every string is a private copy, so the result
 * set can be freed at once.  Numeric columns arrive as decimal text (that is
 * how hr_mysql returns cells) and are parsed strictly: a cell that is not an
 * integer means the select list and this file disagree, which is reported as
 * an error rather than guessed around.
 *
 * hr_task_validate answers "can this task be dispatched and pushed?" with
 * the first problem found, phrased for the admin who wrote the row; the
 * dispatcher copies that text into push_task.last_error. */
#include "hr_task.h"

#include "hr_rich.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_batch.h"
#include "hr_parse.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_template.h"
#include "hr_tz.h"

/* Positions in HR_TASK_COLUMNS. */
enum {
    COL_ID,
    COL_NAME,
    COL_TOPIC,
    COL_CHANNEL,
    COL_TITLE,
    COL_BODY,
    COL_PAYLOAD,
    COL_DUE,
    COL_FREEZE,
    COL_RATE_LIMIT,
    COL_CHUNK_SIZE,
    COL_THROTTLE_LIMIT,
    COL_THROTTLE_WINDOW,
    COL_THROTTLE_SCOPE,
    COL_THROTTLE_KEY,
    COL_THROTTLE_MODE,
    COL_CONTROL,
    COL_STATE,
    COL_LAST_ERROR,
    COL_CLAIMED_BY,
    COL_LEASE_UNTIL,
    COL_TOTAL,
    COL_SENT,
    COL_FAILED,
    COL_THROTTLED,
    COL_PULLED,
    COL_CANCELLED,
    COL_RETRIED,
    COL_UNREGISTERED,
    COL_TTL,
    COL_COLLAPSE_KEY,
    COL_PRIORITY,
    COL_LOCAL_TIME,
    COL_DEFAULT_TZ,
    COL_WINDOW_START,
    COL_WINDOW_END,
    COL_WINDOW_TZ,
    /* expiry (009_expiry.sql) */
    COL_EXPIRE,
    COL_EXPIRED,
    COL_FINISH_BY,
    COL_LAST_WARNING,
    COL_SHARDS,
    /* recipients (016_categories.sql) */
    COL_CATEGORY,
    COL_OPTED_OUT,
    COL_SUPPRESSED,
    COL_RICH, /* 023_rich_split.sql */
    /* the winner step (024_ab_winner.sql) */
    COL_AB_SAMPLE,
    COL_AB_WAIT,
    COL_AB_METRIC,
    COL_AB_SAMPLED,
    COL_AB_WINNER,
    COL_AB_DECIDED,
    COL_AB_FIGURES,
    COL_EVENT,    /* 027_lead_times.sql */
    COL_VARIANTS, /* HR_TASK_COLUMNS_VARIANTS */
    COL__COUNT
};

/* Copies a cell (NULL stays NULL).  0, or -1 when out of memory. */
static int task_dup(const hr_mysql_rows *rows, size_t row, size_t col, char **out)
{
    const char *v = hr_mysql_cell(rows, row, col);

    *out = NULL;
    if (v == NULL)
        return 0;
    *out = strdup(v);
    return *out == NULL ? -1 : 0;
}

/* Parses an integer cell.  A NULL cell gives -1 when NULLABLE, otherwise it
 * is an error like any text that is not an integer. */
static int task_int(const hr_mysql_rows *rows, size_t row, size_t col, bool nullable, int64_t *out,
                    char *errstr, size_t errlen)
{
    const char *v = hr_mysql_cell(rows, row, col);
    char *end;
    long long n;

    if (v == NULL) {
        if (nullable) {
            *out = -1;
            return 0;
        }
        snprintf(errstr, errlen, "column %zu is NULL", col + 1);
        return -1;
    }
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0') {
        snprintf(errstr, errlen, "column %zu is not an integer: \"%.40s\"", col + 1, v);
        return -1;
    }
    *out = n;
    return 0;
}

/* Parses the state or control cell (COL_STATE or COL_CONTROL) into its
 * enum; an unknown value (a schema newer than this binary) is an error. */
static int task_enum(const hr_mysql_rows *rows, size_t row, size_t col, void *out, char *errstr,
                     size_t errlen)
{
    const char *v = hr_mysql_cell(rows, row, col);
    int rc = col == COL_STATE ? hr_state_parse(v, out) : hr_control_parse(v, out);

    if (rc < 0)
        snprintf(errstr, errlen, "column %zu (%s) has an unknown value \"%.20s\"", col + 1,
                 col == COL_STATE ? "state" : "control", v != NULL ? v : "NULL");
    return rc;
}

/* Where each column goes: a string field, an integer field that may or
 * may not be NULL (a NULL time becomes -1), or the state / control enum. */
typedef struct task_col {
    size_t col;
    enum { TC_STR, TC_INT, TC_INT_NULL, TC_ENUM, TC_PRIORITY } kind;
    size_t offset;
} task_col;

#define TC(c, k, f)                \
    {                              \
        c, k, offsetof(hr_task, f) \
    }
static const task_col task_cols[] = {
    TC(COL_ID, TC_INT, id),
    TC(COL_NAME, TC_STR, name),
    TC(COL_TOPIC, TC_STR, topic),
    TC(COL_CHANNEL, TC_STR, channel),
    TC(COL_TITLE, TC_STR, title),
    TC(COL_BODY, TC_STR, body),
    TC(COL_PAYLOAD, TC_STR, payload),
    TC(COL_DUE, TC_INT_NULL, due_ms),
    TC(COL_FREEZE, TC_INT_NULL, freeze_ms),
    TC(COL_RATE_LIMIT, TC_INT, rate_limit),
    TC(COL_CHUNK_SIZE, TC_INT, chunk_size),
    TC(COL_THROTTLE_LIMIT, TC_INT, throttle_limit),
    TC(COL_THROTTLE_WINDOW, TC_INT, throttle_window_s),
    TC(COL_THROTTLE_SCOPE, TC_STR, throttle_scope),
    TC(COL_THROTTLE_KEY, TC_STR, throttle_key),
    TC(COL_THROTTLE_MODE, TC_STR, throttle_mode),
    TC(COL_CONTROL, TC_ENUM, control),
    TC(COL_STATE, TC_ENUM, state),
    TC(COL_LAST_ERROR, TC_STR, last_error),
    TC(COL_CLAIMED_BY, TC_STR, claimed_by),
    TC(COL_LEASE_UNTIL, TC_INT_NULL, lease_until_ms),
    TC(COL_TOTAL, TC_INT, total),
    TC(COL_SENT, TC_INT, sent),
    TC(COL_FAILED, TC_INT, failed),
    TC(COL_THROTTLED, TC_INT, throttled),
    TC(COL_PULLED, TC_INT, pulled),
    TC(COL_CANCELLED, TC_INT, cancelled),
    TC(COL_RETRIED, TC_INT, retried),
    TC(COL_UNREGISTERED, TC_INT, unregistered),
    TC(COL_TTL, TC_INT_NULL, ttl_s),
    TC(COL_COLLAPSE_KEY, TC_STR, collapse_key),
    TC(COL_PRIORITY, TC_PRIORITY, priority),
    TC(COL_LOCAL_TIME, TC_INT, local_time),
    TC(COL_DEFAULT_TZ, TC_STR, default_tz),
    TC(COL_WINDOW_START, TC_INT_NULL, window_start_s),
    TC(COL_WINDOW_END, TC_INT_NULL, window_end_s),
    TC(COL_WINDOW_TZ, TC_STR, window_tz),
    TC(COL_EXPIRE, TC_INT_NULL, expire_ms),
    TC(COL_EXPIRED, TC_INT, expired),
    TC(COL_FINISH_BY, TC_INT_NULL, finish_ms),
    TC(COL_LAST_WARNING, TC_STR, last_warning),
    TC(COL_SHARDS, TC_INT, shards),
    TC(COL_CATEGORY, TC_STR, category),
    TC(COL_OPTED_OUT, TC_INT, opted_out),
    TC(COL_SUPPRESSED, TC_INT, suppressed),
    TC(COL_RICH, TC_STR, rich),
    TC(COL_AB_SAMPLE, TC_INT_NULL, ab_sample_pct),
    TC(COL_AB_WAIT, TC_INT_NULL, ab_wait_s),
    TC(COL_AB_METRIC, TC_STR, ab_metric),
    TC(COL_AB_SAMPLED, TC_INT_NULL, ab_sampled_ms),
    TC(COL_AB_WINNER, TC_STR, ab_winner),
    TC(COL_AB_DECIDED, TC_INT_NULL, ab_decided_ms),
    TC(COL_AB_FIGURES, TC_STR, ab_figures),
    TC(COL_EVENT, TC_INT_NULL, event_ms),
    TC(COL_VARIANTS, TC_INT, has_variants),
};
#undef TC

int hr_task_from_row(const hr_mysql_rows *rows, size_t row, hr_task **out, char *errstr,
                     size_t errlen)
{
    hr_task *t = NULL;
    size_t i;

    *out = NULL;
    if (rows == NULL || row >= rows->nrows || rows->ncols != COL__COUNT) {
        snprintf(errstr, errlen, "task row %zu of %zu with %zu columns (want %d)", row,
                 rows ? rows->nrows : 0, rows ? rows->ncols : 0, COL__COUNT);
        return -1;
    }
    t = calloc(1, sizeof *t);
    if (t == NULL)
        goto oom;
    for (i = 0; i < sizeof task_cols / sizeof task_cols[0]; i++) {
        const task_col *tc = &task_cols[i];
        void *field = (char *)t + tc->offset;

        if (tc->kind == TC_PRIORITY) {
            /* A bad value is the admin's, not a schema mismatch: loaded,
             * then refused by hr_task_validate into last_error. */
            (void)hr_priority_parse(hr_mysql_cell(rows, row, tc->col), (hr_priority *)field);
        } else if (tc->kind == TC_STR) {
            if (task_dup(rows, row, tc->col, (char **)field) < 0)
                goto oom;
        } else if (tc->kind == TC_ENUM) {
            if (task_enum(rows, row, tc->col, field, errstr, errlen) < 0)
                goto fail;
        } else if (task_int(rows, row, tc->col, tc->kind == TC_INT_NULL, (int64_t *)field, errstr,
                            errlen) < 0) {
            goto fail;
        }
    }
    /* A hand-written negative ttl_s must fail hr_task_validate, not pass
     * for NULL's -1. */
    if (t->ttl_s == -1 && hr_mysql_cell(rows, row, COL_TTL) != NULL)
        t->ttl_s = -2;
    t->window = t->window_start_s >= 0 || t->window_end_s >= 0;
    /* The effective throttle scope is the topic when the column is NULL. */
    if (t->throttle_scope == NULL && t->topic != NULL) {
        t->throttle_scope = strdup(t->topic);
        if (t->throttle_scope == NULL)
            goto oom;
    }
    *out = t;
    return 0;

oom:
    snprintf(errstr, errlen, "out of memory");
fail:
    hr_task_free(t);
    return -1;
}

int hr_task_load(hr_mysql *m, int64_t id, hr_task **out, char *errstr, size_t errlen)
{
    hr_mysql_param p = HR_P_I64(id);
    hr_mysql_rows *rows = NULL;
    int rc = -1;

    *out = NULL;
    if (hr_mysql_query(m, "SELECT " HR_TASK_COLUMNS " FROM push_task WHERE id = ?", &p, 1, &rows,
                       errstr, errlen) < 0)
        goto done;
    if (rows->nrows == 0) {
        rc = 1;
        goto done;
    }
    rc = hr_task_from_row(rows, 0, out, errstr, errlen);
done:
    hr_mysql_rows_free(rows);
    return rc;
}

int hr_task_load_many(hr_mysql *m, const int64_t *ids, size_t n, hr_task ***out, size_t *nout,
                      char *errstr, size_t errlen)
{
    hr_mysql_rows *rows = NULL;
    hr_task **tasks = NULL;
    size_t got = 0;
    int rc = -1;

    *out = NULL;
    *nout = 0;
    if (hr_batch_query(
            m,
            "SELECT " HR_TASK_COLUMNS " FROM JSON_TABLE(?, '$[*]' COLUMNS (want BIGINT "
            "PATH '$')) j STRAIGHT_JOIN push_task FORCE INDEX (PRIMARY) ON push_task.id = j.want",
            &(hr_batch){ids, n, 1}, NULL, 0, &rows, errstr, errlen) < 0)
        goto done;
    if ((tasks = calloc(rows->nrows + 1, sizeof *tasks)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (; got < rows->nrows; got++)
        if (hr_task_from_row(rows, got, &tasks[got], errstr, errlen) < 0)
            goto done;
    *out = tasks;
    *nout = got;
    tasks = NULL;
    rc = 0;
done:
    for (size_t i = 0; tasks != NULL && i < got; i++)
        hr_task_free(tasks[i]);
    free(tasks);
    hr_mysql_rows_free(rows);
    return rc;
}

int hr_task_set_control(hr_mysql *m, hr_redis *r, int64_t id, hr_control control, char *errstr,
                        size_t errlen)
{
    char key[HR_KEY_MAX];
    redisReply *reply;

    if (m != NULL && hr_state_control(m, id, control, errstr, errlen) < 0)
        return -1;
    hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_CTL);
    reply = hr_redis_cmdf(r, errstr, errlen, "SET %s %s", key, hr_control_name(control));
    if (reply == NULL)
        return m != NULL ? 1 : -1;
    freeReplyObject(reply);
    return 0;
}

/* A time (ms, or a window's seconds of the day); below NONE_BELOW is the
 * column's NULL (-1, or for expire_at any value <= 0: a zeroed task has
 * none). */
static hr_mysql_param hr_task_p_ms(int64_t ms, int64_t none_below)
{
    return ms >= none_below ? HR_P_I64(ms) : HR_P_NULL;
}

int hr_task_insert(hr_mysql *m, const hr_task *t, const char *scope, int64_t freeze_ms,
                   int64_t series_id, uint64_t *id, bool *existed, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {
        HR_P_STR(t->name), HR_P_STR(t->topic), HR_P_STR(t->channel), HR_P_STR(t->title),
        HR_P_STR(t->body), hr_mysql_p_str_or_null(t->payload), HR_P_I64(t->due_ms),
        hr_task_p_ms(freeze_ms, 0), HR_P_I64(t->rate_limit), HR_P_I64(t->chunk_size),
        HR_P_I64(t->throttle_limit), HR_P_I64(t->throttle_window_s), hr_mysql_p_str_or_null(scope),
        hr_mysql_p_str_or_null(t->throttle_key), hr_mysql_p_str_or_null(t->throttle_mode),
        hr_mysql_p_i64_or_null(t->ttl_s), hr_mysql_p_str_or_null(t->collapse_key),
        HR_P_STR(hr_priority_name(t->priority)),
        /* local time and send windows */
        HR_P_I64(t->local_time), hr_mysql_p_str_or_null(t->default_tz),
        hr_task_p_ms(t->window_start_s, 0), hr_task_p_ms(t->window_end_s, 0),
        hr_mysql_p_str_or_null(t->window_tz),
        /* expiry */
        hr_task_p_ms(t->expire_ms, 1),
        /* pacing */
        hr_task_paced(t) ? HR_P_I64(t->finish_ms) : HR_P_NULL,
        /* sharded tasks */
        HR_P_I64(t->shards),
        /* recipients */
        HR_P_STR(hr_task_category(t)),
        /* series (019_series.sql) */
        series_id > 0 ? HR_P_I64(series_id) : HR_P_NULL,
        series_id > 0 ? HR_P_I64(t->due_ms) : HR_P_NULL,
        /* rich and silent pushes (023_rich_split.sql) */
        hr_mysql_p_str_or_null(t->rich),
        /* the winner step (024_ab_winner.sql) */
        t->ab_sample_pct > 0 ? HR_P_I64(t->ab_sample_pct) : HR_P_NULL,
        t->ab_sample_pct > 0 ? HR_P_I64(t->ab_wait_s) : HR_P_NULL,
        t->ab_sample_pct > 0 ? hr_mysql_p_str_or_null(t->ab_metric) : HR_P_NULL,
        /* lead times (027_lead_times.sql) */
        hr_task_p_ms(t->event_ms, 1)};
    uint64_t affected = 0;

    /* The ON DUPLICATE clause can only fire for an occurrence (NULL
     * series_id never collides); LAST_INSERT_ID(id) hands back the row
     * that was there, and changes nothing, so AFFECTED is 0. */
    if (hr_mysql_exec(m,
                      "INSERT INTO push_task (name, topic, channel, title, body, payload, "
                      "due_at, freeze_at, rate_limit, chunk_size, throttle_limit, "
                      "throttle_window_s, throttle_scope, throttle_key, throttle_mode, "
                      "ttl_s, collapse_key, priority, "
                      "local_time, default_tz, window_start, window_end, window_tz, "
                      "expire_at, finish_by, shards, category, series_id, occurrence_at, rich, "
                      "ab_sample_pct, ab_wait_s, ab_metric, event_at) "
                      "VALUES (?, ?, ?, ?, ?, ?, FROM_UNIXTIME(? / 1000), "
                      "FROM_UNIXTIME(? / 1000), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                      "?, ?, SEC_TO_TIME(?), SEC_TO_TIME(?), ?, FROM_UNIXTIME(? / 1000), "
                      "FROM_UNIXTIME(? / 1000), ?, ?, ?, FROM_UNIXTIME(? / 1000), ?, ?, ?, ?, "
                      "FROM_UNIXTIME(? / 1000)) "
                      "ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
                      p, sizeof p / sizeof p[0], &affected, id, NULL, errstr, errlen) < 0)
        return -1;
    if (existed != NULL)
        *existed = affected == 0;
    return 0;
}

int hr_priority_parse(const char *s, hr_priority *out)
{
    if (s != NULL && strcmp(s, "high") == 0)
        *out = HR_PRIORITY_HIGH;
    else if (s != NULL && strcmp(s, "normal") == 0)
        *out = HR_PRIORITY_NORMAL;
    else {
        *out = HR_PRIORITY_BAD;
        return -1;
    }
    return 0;
}

void hr_task_defaults(hr_task *t)
{
    *t = (hr_task){.topic = "default",
                   .title = "",
                   .body = "",
                   .chunk_size = 5000,
                   .shards = 1,
                   .category = HR_CATEGORY_DEFAULT,
                   .control = HR_CONTROL_RUN,
                   .state = HR_STATE_SCHEDULED,
                   .due_ms = -1,
                   .freeze_ms = -1,
                   .lease_until_ms = -1,
                   .ttl_s = -1,
                   .expire_ms = -1,
                   .finish_ms = -1,
                   .window_start_s = -1,
                   .window_end_s = -1,
                   .ab_sample_pct = -1,
                   .ab_wait_s = -1,
                   .ab_sampled_ms = -1,
                   .ab_decided_ms = -1,
                   .event_ms = -1};
}

void hr_task_outcome_counts(const hr_task *t, int64_t out[HR_OUTCOME_UNACCOUNTED])
{
    const int64_t v[HR_OUTCOME_UNACCOUNTED] = {
        [HR_OUTCOME_SENT] = t->sent,
        [HR_OUTCOME_FAILED] = t->failed,
        [HR_OUTCOME_THROTTLED] = t->throttled,
        [HR_OUTCOME_PULLED] = t->pulled,
        [HR_OUTCOME_CANCELLED] = t->cancelled,
        [HR_OUTCOME_UNREGISTERED] = t->unregistered,
        [HR_OUTCOME_EXPIRED] = t->expired,
        [HR_OUTCOME_OPTED_OUT] = t->opted_out,
        [HR_OUTCOME_SUPPRESSED] = t->suppressed,
    };

    memcpy(out, v, sizeof v);
}

const char *hr_task_category(const hr_task *t)
{
    return t->category != NULL ? t->category : HR_CATEGORY_DEFAULT;
}

bool hr_task_paced(const hr_task *t)
{
    return t->finish_ms > 0;
}

const char *hr_priority_name(hr_priority p)
{
    return p == HR_PRIORITY_HIGH ? "high" : p == HR_PRIORITY_NORMAL ? "normal" : "?";
}

/* Compiles SRC only to learn whether it is well formed; WHAT names it in
 * the error ("title", "channel webhook url", ...). */
static int task_check_template(const char *what, const char *src, bool json_escape, char *errstr,
                               size_t errlen)
{
    hr_template *tpl = NULL;
    char detail[256];

    if (src == NULL)
        return 0;
    if (hr_template_compile(src, strlen(src), json_escape, &tpl, detail, sizeof detail) < 0) {
        snprintf(errstr, errlen, "%s template: %s", what, detail);
        return -1;
    }
    hr_template_free(tpl);
    return 0;
}

/* A zone column: NULL, or a name hr_tz loads. */
static int task_check_zone(const char *what, const char *zone, char *errstr, size_t errlen)
{
    char why[128];

    if (zone == NULL || hr_tz_check(zone, why, sizeof why) == 0)
        return 0;
    snprintf(errstr, errlen, "%s \"%.64s\": %s", what, zone, why);
    return -1;
}

/* local_time, default_tz and the window (008_local_time.sql). */
static int task_check_local(const hr_task *t, char *errstr, size_t errlen)
{
    if (t->local_time != 0 && t->local_time != 1) {
        snprintf(errstr, errlen, "local_time must be 0 or 1");
        return -1;
    }
    if (task_check_zone("default_tz", t->default_tz, errstr, errlen) < 0 ||
        task_check_zone("window_tz", t->window_tz, errstr, errlen) < 0)
        return -1;
    if (t->window && (t->window_start_s < 0 || t->window_end_s < 0)) {
        snprintf(errstr, errlen, "window_start and window_end must both be set or both be NULL");
        return -1;
    }
    if (t->window && (t->window_start_s >= 86400 || t->window_end_s >= 86400 ||
                      t->window_start_s == t->window_end_s)) {
        snprintf(errstr, errlen,
                 "window_start and window_end must be two different times of day (00:00:00.."
                 "23:59:59)");
        return -1;
    }
    if (!t->window && t->window_tz != NULL) {
        snprintf(errstr, errlen, "window_tz is set without window_start / window_end");
        return -1;
    }
    return 0;
}

/* shards (010_shards.sql, docs/architecture.md "Sharded tasks"). */
static int task_check_shards(const hr_task *t, char *errstr, size_t errlen)
{
    if (t->shards < 0 || t->shards > HR_SHARDS_MAX) { /* 0 (a zeroed task) is one set, like 1 */
        snprintf(errstr, errlen, "shards %" PRId64 " is outside 1..%d", t->shards, HR_SHARDS_MAX);
        return -1;
    }
    /* Pacing and the waves read the whole task's state in one script (one
     * slot); a local-time or windowed task's subs only ever holds what was
     * released, so it never needs shards. */
    if (t->shards > 1 && (hr_task_waits(t) || hr_task_paced(t) || hr_task_leads(t))) {
        snprintf(errstr, errlen,
                 "shards %" PRId64 " with %s: a sharded task cannot be paced, sent in local "
                 "time or a send window, hold an A/B test's rest or have lead times (use "
                 "shards 1)",
                 t->shards,
                 hr_task_paced(t)       ? "finish_by"
                 : t->local_time == 1   ? "local_time"
                 : t->ab_sample_pct > 0 ? "ab"
                 : t->window            ? "a window"
                                        : "event_at");
        return -1;
    }
    return 0;
}

/* The winner step's own values (024_ab_winner.sql); that the task has arms
 * is hr_variant_check's.  The rest waits in the wait set on an instant of
 * its own, which local time's and a window's waves would share: not
 * together. */
static int task_check_ab(const hr_task *t, char *errstr, size_t errlen)
{
    /* -1: the column's NULL, 0: a zeroed task; neither has the step (the
     * API refuses a sample_pct of 0 before it gets here). */
    if (t->ab_sample_pct == -1 || t->ab_sample_pct == 0)
        return 0;
    if (t->ab_sample_pct < 1 || t->ab_sample_pct > 99) {
        snprintf(errstr, errlen,
                 "ab.sample_pct %" PRId64 " is outside 1..99 (100: no rest to send the "
                 "winner to; leave ab out)",
                 t->ab_sample_pct);
        return -1;
    }
    if (t->ab_wait_s < 0 || t->ab_wait_s > HR_TASK_MAX_WINDOW_S) {
        snprintf(errstr, errlen, "ab.wait_s %" PRId64 " is outside 0..%d (31 days)", t->ab_wait_s,
                 HR_TASK_MAX_WINDOW_S);
        return -1;
    }
    if (t->ab_metric == NULL ||
        (strcmp(t->ab_metric, "click") != 0 && strcmp(t->ab_metric, "open") != 0 &&
         strcmp(t->ab_metric, "delivered") != 0)) {
        snprintf(errstr, errlen, "ab.metric \"%.20s\" is not click, open or delivered",
                 t->ab_metric != NULL ? t->ab_metric : "");
        return -1;
    }
    if (t->local_time == 1 || t->window) {
        snprintf(errstr, errlen,
                 "ab with %s: an A/B test's winner step is not sent in local time or a window",
                 t->local_time == 1 ? "local_time" : "a window");
        return -1;
    }
    return 0;
}

/* event_at (027_lead_times.sql): its waves are instants counted back from
 * one event, parked on the wait set that local time's and a window's
 * zones, and an A/B test's held rest, would share with a meaning of their
 * own: not together. */
static int task_check_event(const hr_task *t, char *errstr, size_t errlen)
{
    if (!hr_task_leads(t))
        return 0;
    if (t->local_time == 1 || t->window || t->ab_sample_pct > 0) {
        snprintf(errstr, errlen,
                 "event_at with %s: lead times count back from one instant and are not sent "
                 "in local time, a send window or an A/B test's winner step",
                 t->local_time == 1 ? "local_time"
                 : t->window        ? "a window"
                                    : "ab");
        return -1;
    }
    return 0;
}

int64_t hr_task_first_due_ms(const hr_task *t)
{
    return t->local_time == 1 ? t->due_ms - HR_STATE_EAST_MAX_S * 1000LL : t->due_ms;
}

bool hr_task_waits(const hr_task *t)
{
    return t->local_time == 1 || t->window || t->ab_sample_pct > 0;
}

bool hr_task_leads(const hr_task *t)
{
    return t->event_ms > 0;
}

int64_t hr_task_lead_release_ms(const hr_task *t, int64_t lead_s, int64_t now_ms)
{
    int64_t at = hr_task_leads(t) && lead_s >= 0 ? t->event_ms - lead_s * 1000 : t->due_ms;

    return at > now_ms ? at : now_ms;
}

int hr_task_lead_check(const hr_task *t, int64_t lead_s, char *errstr, size_t errlen)
{
    char at[40], due[40];

    if (!hr_task_leads(t)) {
        snprintf(errstr, errlen,
                 "lead_s %" PRId64 ": task %" PRId64
                 " has no event_at to count it back from (set event_at first)",
                 lead_s, t->id);
        return -1;
    }
    if (t->event_ms - lead_s * 1000 >= t->due_ms)
        return 0;
    hr_parse_time_format(t->event_ms - lead_s * 1000, at, sizeof at);
    hr_parse_time_format(t->due_ms, due, sizeof due);
    if (t->event_ms < t->due_ms)
        snprintf(errstr, errlen,
                 "lead_s %" PRId64 ": task %" PRId64
                 "'s event_at is before its due_at %s, so no lead can be sent at its time",
                 lead_s, t->id, due);
    else
        snprintf(errstr, errlen,
                 "lead_s %" PRId64 " puts the reminder at %s, before task %" PRId64
                 "'s due_at %s (at most %" PRId64 " s: event_at - due_at)",
                 lead_s, at, t->id, due, (t->event_ms - t->due_ms) / 1000);
    return -1;
}

int hr_task_validate(const hr_task *t, const hr_config *cfg, char *errstr, size_t errlen)
{
    const hr_channel *ch;
    char what[160];
    cJSON *payload;
    hr_rich rich;
    size_t i;

    if (t->channel == NULL || (ch = hr_config_channel(cfg, t->channel)) == NULL) {
        snprintf(errstr, errlen, "unknown channel \"%.64s\"", t->channel ? t->channel : "");
        return -1;
    }
    if (t->chunk_size < 1 || t->chunk_size > HR_TASK_MAX_CHUNK) {
        snprintf(errstr, errlen, "chunk_size %" PRId64 " is outside 1..%d", t->chunk_size,
                 HR_TASK_MAX_CHUNK);
        return -1;
    }
    if (t->due_ms < 0) {
        snprintf(errstr, errlen, "due_at is NULL");
        return -1;
    }
    if (t->expire_ms > 0 && t->expire_ms <= t->due_ms) {
        snprintf(errstr, errlen, "expire_at is not after due_at: nothing could ever be sent");
        return -1;
    }
    if (t->rate_limit < 0) {
        snprintf(errstr, errlen, "rate_limit %" PRId64 " is negative", t->rate_limit);
        return -1;
    }
    if (t->throttle_limit < 0) {
        snprintf(errstr, errlen, "throttle_limit %" PRId64 " is negative", t->throttle_limit);
        return -1;
    }
    if (t->throttle_limit > 0 &&
        (t->throttle_window_s < 1 || t->throttle_window_s > HR_TASK_MAX_WINDOW_S)) {
        snprintf(errstr, errlen, "throttle_window_s %" PRId64 " is outside 1..%d (1 s..31 days)",
                 t->throttle_window_s, HR_TASK_MAX_WINDOW_S);
        return -1;
    }
    if (t->ttl_s < -1) {
        snprintf(errstr, errlen, "ttl_s is negative; NULL or 0..%d (0 s..28 days)",
                 HR_TASK_MAX_TTL_S);
        return -1;
    }
    if (t->ttl_s > HR_TASK_MAX_TTL_S) {
        snprintf(errstr, errlen, "ttl_s %" PRId64 " is outside 0..%d (0 s..28 days)", t->ttl_s,
                 HR_TASK_MAX_TTL_S);
        return -1;
    }
    if (t->collapse_key != NULL &&
        (t->collapse_key[0] == '\0' || strlen(t->collapse_key) > HR_TASK_MAX_COLLAPSE ||
         strpbrk(t->collapse_key, "\r\n") != NULL)) {
        snprintf(errstr, errlen, "collapse_key must be 1..%d bytes on one line",
                 HR_TASK_MAX_COLLAPSE);
        return -1;
    }
    if (t->priority != HR_PRIORITY_HIGH && t->priority != HR_PRIORITY_NORMAL) {
        snprintf(errstr, errlen, "priority must be high or normal");
        return -1;
    }
    if (hr_config_category(cfg, hr_task_category(t)) == NULL) {
        snprintf(errstr, errlen,
                 "category \"%.32s\" is not one of recipients.categories in the configuration",
                 hr_task_category(t));
        return -1;
    }
    if (task_check_local(t, errstr, errlen) < 0)
        return -1;
    if (hr_rich_parse(t->rich, &rich, errstr, errlen) != 0 ||
        (ch->type == HR_CHANNEL_WEBPUSH && hr_rich_check_webpush(&rich, errstr, errlen) != 0))
        return -1;
    if (hr_task_paced(t) && t->finish_ms <= t->due_ms) {
        snprintf(errstr, errlen, "finish_by must be after due_at");
        return -1;
    }
    if (task_check_shards(t, errstr, errlen) < 0 || task_check_ab(t, errstr, errlen) < 0 ||
        task_check_event(t, errstr, errlen) < 0)
        return -1;
    if (t->payload != NULL) {
        payload = cJSON_Parse(t->payload);
        if (payload == NULL || !cJSON_IsObject(payload)) {
            snprintf(errstr, errlen, "payload is not a JSON object");
            cJSON_Delete(payload);
            return -1;
        }
        cJSON_Delete(payload);
    }
    if (task_check_template("title", t->title, ch->json_escape, errstr, errlen) < 0 ||
        task_check_template("body", t->body, ch->json_escape, errstr, errlen) < 0)
        return -1;
    snprintf(what, sizeof what, "channel %.64s url", ch->name);
    if (task_check_template(what, ch->url, false, errstr, errlen) < 0)
        return -1;
    snprintf(what, sizeof what, "channel %.64s body", ch->name);
    if (task_check_template(what, ch->body, ch->json_escape, errstr, errlen) < 0)
        return -1;
    for (i = 0; i < ch->nheaders; i++) {
        snprintf(what, sizeof what, "channel %.64s header %.64s", ch->name, ch->headers[i].key);
        if (task_check_template(what, ch->headers[i].value, false, errstr, errlen) < 0)
            return -1;
    }
    return 0;
}

bool hr_task_expired(const hr_task *t, int64_t now_ms)
{
    return t->expire_ms > 0 && now_ms >= t->expire_ms;
}

void hr_task_free(hr_task *t)
{
    if (t == NULL)
        return;
    free(t->name);
    free(t->topic);
    free(t->channel);
    free(t->title);
    free(t->body);
    free(t->payload);
    free(t->throttle_scope);
    free(t->throttle_key);
    free(t->throttle_mode);
    free(t->last_error);
    free(t->claimed_by);
    free(t->collapse_key);
    free(t->default_tz);
    free(t->window_tz);
    free(t->last_warning);
    free(t->category);
    free(t->rich);
    free(t->ab_metric);
    free(t->ab_winner);
    free(t->ab_figures);
    free(t);
}
