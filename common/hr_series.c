/* hr_series: series rows, their expansion by libical, their occurrences.
 *
 * The expansion runs a fresh icalrecur_iterator from DTSTART on every call
 * (no iterator outlives a call, so nothing is shared between threads but
 * libical's thread-local error number).  A rule without COUNT starts the
 * iterator at the window (icalrecur_iterator_set_start) instead of walking
 * from DTSTART; with COUNT it must walk, because COUNT counts from DTSTART.
 * HR_SERIES_STEPS_MAX bounds the walk either way.
 *
 * The template is read with hr_task_from_row: the SELECT below gives the
 * series' template columns in HR_TASK_COLUMNS' order, and constants (a new
 * task's) for the columns a template has not, so the template is parsed by
 * the same strict code as a task row. */
#include "hr_series.h"

#include <libical/ical.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_civil.h"
#include "hr_tz.h"

static const char *const hr_series_state_names[HR_SERIES_STATE_COUNT] = {
    [HR_SERIES_ACTIVE] = "active",
    [HR_SERIES_PAUSED] = "paused",
    [HR_SERIES_ENDED] = "ended",
    [HR_SERIES_FAILED] = "failed",
};

static const char *const hr_series_catch_up_names[HR_CATCH_UP_COUNT] = {
    [HR_CATCH_UP_NONE] = "none",
    [HR_CATCH_UP_LATEST] = "latest",
    [HR_CATCH_UP_ALL] = "all",
};

const char *hr_series_state_name(hr_series_state s)
{
    return (unsigned)s < HR_SERIES_STATE_COUNT ? hr_series_state_names[s] : "?";
}

int hr_series_state_parse(const char *s, hr_series_state *out)
{
    int i = hr_state_lookup(hr_series_state_names, HR_SERIES_STATE_COUNT, s);

    if (i < 0)
        return -1;
    *out = (hr_series_state)i;
    return 0;
}

const char *hr_series_catch_up_name(hr_series_catch_up c)
{
    return (unsigned)c < HR_CATCH_UP_COUNT ? hr_series_catch_up_names[c] : "?";
}

int hr_series_catch_up_parse(const char *s, hr_series_catch_up *out)
{
    int i = hr_state_lookup(hr_series_catch_up_names, HR_CATCH_UP_COUNT, s);

    if (i < 0)
        return -1;
    *out = (hr_series_catch_up)i;
    return 0;
}

int64_t hr_series_wall_ms(int y, int mo, int d, int hh, int mi, int ss)
{
    return ((hr_civil_days(y, mo, d) * 86400) + hh * 3600 + mi * 60 + ss) * 1000;
}

void hr_series_wall_fields(int64_t wall_ms, int *y, int *mo, int *d, int *hh, int *mi, int *ss)
{
    int64_t s = hr_civil_floordiv(wall_ms, 1000);
    int64_t days = hr_civil_floordiv(s, 86400), sod = s - days * 86400;

    hr_civil_date(days, y, mo, d);
    *hh = (int)(sod / 3600);
    *mi = (int)(sod / 60 % 60);
    *ss = (int)(sod % 60);
}

static struct icaltimetype hr_series_ical(int64_t wall_ms)
{
    struct icaltimetype t = icaltime_null_time();

    hr_series_wall_fields(wall_ms, &t.year, &t.month, &t.day, &t.hour, &t.minute, &t.second);
    t.is_date = 0;
    t.zone = NULL; /* floating: libical computes in wall-clock time */
    return t;
}

static int64_t hr_series_from_ical(struct icaltimetype t)
{
    return hr_series_wall_ms(t.year, t.month, t.day, t.hour, t.minute, t.second);
}

/* EXDATE's list into *OUT (wall ms, *N of them, the caller frees). */
static int hr_series_exdates(const char *exdate, int64_t **out, size_t *n, char *errstr,
                             size_t errlen)
{
    const char *p = exdate;
    size_t cap = 0;

    *out = NULL;
    *n = 0;
    while (p != NULL && *p != '\0') {
        char one[32];
        size_t len = strcspn(p, ",");
        struct icaltimetype t;

        if (len == 0 || len >= sizeof one)
            goto bad;
        memcpy(one, p, len);
        one[len] = '\0';
        /* icaltime_from_string accepts a date alone too; an EXDATE of a
         * series is a date-time, the wall time of one occurrence. */
        t = len == 15 || (len == 16 && one[15] == 'Z') ? icaltime_from_string(one)
                                                       : icaltime_null_time();
        if (icaltime_is_null_time(t) || !icaltime_is_valid_time(t))
            goto bad;
        if (*n == cap) {
            int64_t *grown = realloc(*out, (cap = cap ? cap * 2 : 8) * sizeof **out);

            if (grown == NULL) {
                snprintf(errstr, errlen, "out of memory");
                return -1;
            }
            *out = grown;
        }
        (*out)[(*n)++] = hr_series_from_ical(t);
        p += len;
        if (*p == ',')
            p++;
        continue;
    bad:
        snprintf(errstr, errlen, "exdate \"%.*s\" is not a date-time YYYYMMDDTHHMMSS", (int)len, p);
        return -1;
    }
    return 0;
}

int hr_series_expand(const char *rrule, int64_t dtstart_wall_ms, const char *exdate,
                     int64_t after_wall_ms, size_t max, int64_t *out, size_t *n, char *errstr,
                     size_t errlen)
{
    struct icalrecurrencetype rule;
    icalrecur_iterator *it = NULL;
    int64_t *ex = NULL;
    size_t nex = 0;
    int rc = -1;

    *n = 0;
    if (rrule == NULL || strlen(rrule) > HR_SERIES_RRULE_MAX) {
        snprintf(errstr, errlen, "rrule is missing or longer than %d bytes", HR_SERIES_RRULE_MAX);
        return -1;
    }
    if (hr_series_exdates(exdate, &ex, &nex, errstr, errlen) < 0)
        goto done;
    icalerror_clear_errno();
    rule = icalrecurrencetype_from_string(rrule);
    if (rule.freq == ICAL_NO_RECURRENCE || icalerrno != ICAL_NO_ERROR) {
        snprintf(errstr, errlen, "rrule \"%s\" is not an RFC 5545 recurrence rule (libical: %s)",
                 rrule, icalerror_strerror(icalerrno));
        goto done;
    }
    if (rule.freq < ICAL_DAILY_RECURRENCE && (rule.by_month[0] != ICAL_RECURRENCE_ARRAY_MAX ||
                                              rule.by_month_day[0] != ICAL_RECURRENCE_ARRAY_MAX ||
                                              rule.by_year_day[0] != ICAL_RECURRENCE_ARRAY_MAX ||
                                              rule.by_week_no[0] != ICAL_RECURRENCE_ARRAY_MAX)) {
        /* libical 3.0.16 walks such a rule step by step inside one
         * icalrecur_iterator_next, for minutes when no day matches
         * (FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30), beyond any bound of ours. */
        snprintf(errstr, errlen,
                 "rrule \"%s\": BYMONTH, BYMONTHDAY, BYYEARDAY and BYWEEKNO need FREQ=DAILY or "
                 "longer",
                 rrule);
        goto done;
    }
    it = icalrecur_iterator_new(rule, hr_series_ical(dtstart_wall_ms));
    if (it == NULL) {
        snprintf(errstr, errlen, "rrule \"%s\" cannot be expanded (libical: %s)", rrule,
                 icalerror_strerror(icalerrno));
        goto done;
    }
    if (rule.count == 0 && after_wall_ms >= dtstart_wall_ms &&
        !icalrecur_iterator_set_start(it, hr_series_ical(after_wall_ms + 1000))) {
        snprintf(errstr, errlen, "rrule \"%s\": libical cannot start it at the window (%s)", rrule,
                 icalerror_strerror(icalerrno));
        goto done;
    }
    for (long steps = 0; *n < max; steps++) {
        struct icaltimetype t;
        int64_t w;
        bool skip = false;

        if (steps == HR_SERIES_STEPS_MAX) {
            snprintf(errstr, errlen,
                     "rrule \"%s\" needs more than %d steps to reach the next occurrence", rrule,
                     HR_SERIES_STEPS_MAX);
            goto done;
        }
        t = icalrecur_iterator_next(it);
        if (icaltime_is_null_time(t))
            break; /* COUNT or UNTIL reached */
        w = hr_series_from_ical(t);
        if (w <= after_wall_ms)
            continue;
        for (size_t i = 0; i < nex && !skip; i++)
            skip = ex[i] == w;
        if (!skip)
            out[(*n)++] = w;
    }
    rc = 0;
done:
    icalrecur_iterator_free(it);
    free(ex);
    return rc;
}

int hr_series_due_ms(const hr_series *s, int64_t wall_ms, int64_t *due_ms, char *errstr,
                     size_t errlen)
{
    int y, mo, d, hh, mi, ss;

    if (s->local_time) {
        *due_ms = wall_ms;
        return 0;
    }
    hr_series_wall_fields(wall_ms, &y, &mo, &d, &hh, &mi, &ss);
    return hr_tz_local_to_utc(s->tz, y, mo, d, hh, mi, ss, due_ms, errstr, errlen);
}

void hr_series_occurrence(const hr_series *s, int64_t due_ms, hr_task *t)
{
    *t = *s->tmpl;
    t->id = 0;
    t->due_ms = due_ms;
    t->last_error = NULL;
    t->freeze_ms = -1;
    t->local_time = s->local_time ? 1 : 0;
    t->default_tz = s->local_time ? s->tz : NULL;
    t->expire_ms = s->expire_after_s >= 0 ? due_ms + s->expire_after_s * 1000 : -1;
}

int hr_series_drip_window(const hr_series *s, int64_t wall_ms, int64_t *from_ms, int64_t *until_ms,
                          char *errstr, size_t errlen)
{
    int64_t day = hr_civil_floordiv(wall_ms, 86400000) - s->drip_days;
    int y, mo, d, hh, mi, ss;

    hr_series_wall_fields(day * 86400000, &y, &mo, &d, &hh, &mi, &ss);
    if (hr_tz_local_to_utc(s->tz, y, mo, d, 0, 0, 0, from_ms, errstr, errlen) < 0)
        return -1;
    hr_series_wall_fields((day + 1) * 86400000, &y, &mo, &d, &hh, &mi, &ss);
    return hr_tz_local_to_utc(s->tz, y, mo, d, 0, 0, 0, until_ms, errstr, errlen);
}

int hr_series_drip_write(hr_mysql *m, const hr_series *s, int64_t task_id, int64_t wall_ms,
                         char *errstr, size_t errlen)
{
    int64_t from, until;

    if (hr_series_drip_window(s, wall_ms, &from, &until, errstr, errlen) < 0)
        return -1;
    {
        const hr_mysql_param p[] = {HR_P_I64(from), HR_P_I64(until), HR_P_I64(task_id)};

        return hr_mysql_exec(m,
                             "UPDATE push_task SET drip_from = FROM_UNIXTIME(? / 1000), "
                             "drip_until = FROM_UNIXTIME(? / 1000) WHERE id = ?",
                             p, 3, NULL, NULL, NULL, errstr, errlen);
    }
}

/* A drip's rule: every day once (FREQ=DAILY, INTERVAL=1, no BY part; COUNT
 * and UNTIL may end it), so each day's subscribers have their occurrence.
 * 0, or -1 naming what is wrong. */
static int hr_series_drip_check(const hr_series *s, char *errstr, size_t errlen)
{
    struct icalrecurrencetype r;

    if (s->drip_days > HR_SERIES_DRIP_DAYS_MAX) {
        snprintf(errstr, errlen, "drip_days %lld is outside 0..%d", (long long)s->drip_days,
                 HR_SERIES_DRIP_DAYS_MAX);
        return -1;
    }
    icalerror_clear_errno();
    r = icalrecurrencetype_from_string(s->rrule);
    if (r.freq != ICAL_DAILY_RECURRENCE || r.interval != 1 ||
        r.by_second[0] != ICAL_RECURRENCE_ARRAY_MAX ||
        r.by_minute[0] != ICAL_RECURRENCE_ARRAY_MAX || r.by_hour[0] != ICAL_RECURRENCE_ARRAY_MAX ||
        r.by_day[0] != ICAL_RECURRENCE_ARRAY_MAX ||
        r.by_month_day[0] != ICAL_RECURRENCE_ARRAY_MAX ||
        r.by_year_day[0] != ICAL_RECURRENCE_ARRAY_MAX ||
        r.by_week_no[0] != ICAL_RECURRENCE_ARRAY_MAX ||
        r.by_month[0] != ICAL_RECURRENCE_ARRAY_MAX ||
        r.by_set_pos[0] != ICAL_RECURRENCE_ARRAY_MAX) {
        snprintf(errstr, errlen,
                 "a drip (drip_days) needs an occurrence every day: rrule \"%s\" is not "
                 "FREQ=DAILY without INTERVAL or BY parts (COUNT and UNTIL may end it)",
                 s->rrule);
        return -1;
    }
    if (s->exdate != NULL || s->catch_up != HR_CATCH_UP_ALL) {
        snprintf(errstr, errlen, "a drip (drip_days) skips no day: %s",
                 s->exdate != NULL
                     ? "exdate would leave that day's subscribers without it"
                     : "catch_up must be all (a missed day's subscribers would never get it)");
        return -1;
    }
    return 0;
}

int hr_series_validate(const hr_series *s, const hr_config *cfg, char *errstr, size_t errlen)
{
    int64_t first, due;
    size_t n;
    hr_task t;
    char why[256];
    int rc;

    if (hr_tz_check(s->tz, why, sizeof why) < 0) {
        snprintf(errstr, errlen, "tz \"%s\": %s", s->tz, why);
        return -1;
    }
    if (s->lead_s < -1 || s->lead_s > 31 * 86400) {
        snprintf(errstr, errlen, "lead_s %lld is outside 0..2678400", (long long)s->lead_s);
        return -1;
    }
    if (s->expire_after_s == 0 || s->expire_after_s < -1) {
        snprintf(errstr, errlen, "expire_after_s %lld must be positive",
                 (long long)s->expire_after_s);
        return -1;
    }
    if (hr_series_expand(s->rrule, s->dtstart_wall_ms, s->exdate, INT64_MIN, 1, &first, &n, errstr,
                         errlen) < 0)
        return -1;
    if (s->drip_days >= 0 && hr_series_drip_check(s, errstr, errlen) < 0)
        return -1;
    if (s->drip_days < -1) {
        snprintf(errstr, errlen, "drip_days must be 0..%d", HR_SERIES_DRIP_DAYS_MAX);
        return -1;
    }
    if (hr_series_due_ms(s, s->dtstart_wall_ms, &due, errstr, errlen) < 0)
        return -1;
    hr_series_occurrence(s, due, &t);
    if (hr_task_validate(&t, cfg, errstr, errlen) < 0)
        return -1;
    rc = hr_variant_check(&s->variants, &t, cfg, errstr, errlen);
    return rc == 0 ? 0 : rc == HR_VARIANT_EINVAL && s->variants.n > 0 ? HR_VARIANT_EINVAL : -1;
}

/* The template in HR_TASK_COLUMNS' order (common/hr_task.h): a series'
 * columns where it has them, a new task's values where not.  last_error is
 * the series' own (GET /v1/series/{id} shows it); hr_series_occurrence
 * drops it, so an occurrence starts without one. */
#define HR_SERIES_TEMPLATE_COLUMNS                                                 \
    "id, name, topic, channel, title, body, payload, NULL, NULL, "                 \
    "rate_limit, chunk_size, throttle_limit, throttle_window_s, throttle_scope, "  \
    "throttle_key, throttle_mode, 'run', 'scheduled', last_error, NULL, NULL, "    \
    "0, 0, 0, 0, 0, 0, 0, 0, "                                                     \
    "ttl_s, collapse_key, priority, local_time, NULL, TIME_TO_SEC(window_start), " \
    "TIME_TO_SEC(window_end), window_tz, NULL, 0, NULL, NULL, 1, category, 0, 0, " \
    "NULL" /* rich: a series has no rich options (023_rich_split.sql) */           \
    ", NULL, NULL, NULL, NULL, NULL, NULL, NULL" /* nor a winner step (024) */     \
    ", NULL"                                     /* nor event_at (027) */          \
    ", 0" /* its variants are push_series_variant's (HR_TASK_COLUMNS_VARIANTS) */

#define HR_SERIES_OWN_COLUMNS                                                            \
    "COALESCE(expire_after_s, -1), rrule, "                                              \
    "CAST(UNIX_TIMESTAMP(dtstart) AS SIGNED) * 1000, tz, exdate, local_time, catch_up, " \
    "COALESCE(lead_s, -1), state, "                                                      \
    "COALESCE(CAST(UNIX_TIMESTAMP(next_at) AS SIGNED) * 1000, -1), occurrences, "        \
    "COALESCE(drip_days, -1)"

static int hr_series_dup(const char *s, char **out)
{
    *out = s != NULL ? strdup(s) : NULL;
    return s != NULL && *out == NULL ? -1 : 0;
}

static int64_t hr_series_int(const char *s)
{
    return s != NULL ? strtoll(s, NULL, 10) : -1;
}

int hr_series_load(hr_mysql *m, int64_t id, hr_series **out, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    hr_task *t = NULL;
    hr_series *s = NULL;
    int rc = -1;

    *out = NULL;
    if (hr_mysql_query(m, "SELECT " HR_SERIES_TEMPLATE_COLUMNS " FROM push_series WHERE id = ?", p,
                       1, &rows, errstr, errlen) < 0)
        goto done;
    if (rows->nrows == 0) {
        rc = 1;
        goto done;
    }
    if (hr_task_from_row(rows, 0, &t, errstr, errlen) < 0)
        goto done;
    hr_mysql_rows_free(rows);
    rows = NULL;
    if (hr_mysql_query(m, "SELECT " HR_SERIES_OWN_COLUMNS " FROM push_series WHERE id = ?", p, 1,
                       &rows, errstr, errlen) < 0)
        goto done;
    if (rows->nrows == 0) {
        rc = 1; /* deleted between the two reads */
        goto done;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL)
        goto oom;
    s->id = id;
    s->tmpl = t;
    t = NULL;
    s->expire_after_s = hr_series_int(hr_mysql_cell(rows, 0, 0));
    s->dtstart_wall_ms = hr_series_int(hr_mysql_cell(rows, 0, 2));
    s->local_time = hr_series_int(hr_mysql_cell(rows, 0, 5)) == 1;
    s->lead_s = hr_series_int(hr_mysql_cell(rows, 0, 7));
    s->next_wall_ms = hr_series_int(hr_mysql_cell(rows, 0, 9));
    s->occurrences = hr_series_int(hr_mysql_cell(rows, 0, 10));
    s->drip_days = hr_series_int(hr_mysql_cell(rows, 0, 11));
    if (hr_variant_series_load(m, id, &s->variants, errstr, errlen) != 0)
        goto done;
    if (hr_series_dup(hr_mysql_cell(rows, 0, 1), &s->rrule) < 0 ||
        hr_series_dup(hr_mysql_cell(rows, 0, 3), &s->tz) < 0 ||
        hr_series_dup(hr_mysql_cell(rows, 0, 4), &s->exdate) < 0)
        goto oom;
    if (hr_series_catch_up_parse(hr_mysql_cell(rows, 0, 6), &s->catch_up) < 0 ||
        hr_series_state_parse(hr_mysql_cell(rows, 0, 8), &s->state) < 0) {
        snprintf(errstr, errlen, "series %lld: catch_up or state not understood", (long long)id);
        goto done;
    }
    *out = s;
    s = NULL;
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    hr_mysql_rows_free(rows);
    hr_task_free(t);
    hr_series_free(s);
    return rc;
}

void hr_series_defaults(hr_series *s, hr_task *t)
{
    hr_task_defaults(t);
    *s = (hr_series){.tmpl = t,
                     .tz = "UTC",
                     .catch_up = HR_CATCH_UP_LATEST,
                     .lead_s = -1,
                     .expire_after_s = -1,
                     .next_wall_ms = -1,
                     .drip_days = -1,
                     .dtstart_wall_ms = INT64_MIN};
}

int hr_series_insert(hr_mysql *m, hr_series *s, int64_t *id, char *errstr, size_t errlen)
{
    const hr_task *t = s->tmpl;
    const hr_mysql_param p[] = {
        HR_P_STR(t->name), HR_P_STR(t->topic), HR_P_STR(t->channel), HR_P_STR(hr_task_category(t)),
        HR_P_STR(t->title), HR_P_STR(t->body), hr_mysql_p_str_or_null(t->payload),
        HR_P_I64(t->rate_limit), HR_P_I64(t->chunk_size), HR_P_I64(t->throttle_limit),
        HR_P_I64(t->throttle_window_s), hr_mysql_p_str_or_null(t->throttle_scope),
        hr_mysql_p_str_or_null(t->throttle_key), hr_mysql_p_str_or_null(t->throttle_mode),
        hr_mysql_p_i64_or_null(t->ttl_s), hr_mysql_p_str_or_null(t->collapse_key),
        HR_P_STR(hr_priority_name(t->priority)), hr_mysql_p_i64_or_null(t->window_start_s),
        hr_mysql_p_i64_or_null(t->window_end_s), hr_mysql_p_str_or_null(t->window_tz),
        hr_mysql_p_i64_or_null(s->expire_after_s),
        /* the recurrence */
        HR_P_STR(s->rrule), HR_P_I64(s->dtstart_wall_ms), HR_P_STR(s->tz),
        hr_mysql_p_str_or_null(s->exdate), HR_P_I64(s->local_time ? 1 : 0),
        HR_P_STR(hr_series_catch_up_name(s->catch_up)), hr_mysql_p_i64_or_null(s->lead_s),
        hr_mysql_p_i64_or_null(s->drip_days)};
    uint64_t newid = 0;

    if (hr_mysql_exec(m,
                      "INSERT INTO push_series (name, topic, channel, category, title, body, "
                      "payload, rate_limit, chunk_size, throttle_limit, throttle_window_s, "
                      "throttle_scope, throttle_key, throttle_mode, ttl_s, collapse_key, "
                      "priority, window_start, window_end, window_tz, expire_after_s, rrule, "
                      "dtstart, tz, exdate, local_time, catch_up, lead_s, drip_days) VALUES "
                      "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, SEC_TO_TIME(?), "
                      "SEC_TO_TIME(?), ?, ?, ?, FROM_UNIXTIME(? / 1000), ?, ?, ?, ?, ?, ?)",
                      p, sizeof p / sizeof p[0], NULL, &newid, NULL, errstr, errlen) < 0)
        return -1;
    *id = (int64_t)newid;
    return hr_variant_series_insert(m, *id, &s->variants, errstr, errlen);
}

int hr_series_set_state(hr_mysql *m, int64_t id, hr_series_state to, hr_series_state *from,
                        char *errstr, size_t errlen)
{
    /* The states each change starts from (bit per hr_series_state). */
    static const unsigned starts[HR_SERIES_STATE_COUNT] = {
        [HR_SERIES_ACTIVE] = 1u << HR_SERIES_PAUSED | 1u << HR_SERIES_FAILED,
        [HR_SERIES_PAUSED] = 1u << HR_SERIES_ACTIVE,
        [HR_SERIES_ENDED] =
            1u << HR_SERIES_ACTIVE | 1u << HR_SERIES_PAUSED | 1u << HR_SERIES_FAILED,
    };
    const hr_mysql_param pid[] = {HR_P_I64(id)};
    const hr_mysql_param p[] = {HR_P_STR(hr_series_state_name(to)), HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    int rc = -1;

    if (hr_mysql_query(m, "SELECT state FROM push_series WHERE id = ? FOR UPDATE", pid, 1, &rows,
                       errstr, errlen) < 0)
        return -1;
    if (rows->nrows == 0) {
        rc = 1;
    } else if (hr_series_state_parse(hr_mysql_cell(rows, 0, 0), from) < 0 ||
               (unsigned)to >= HR_SERIES_STATE_COUNT || !(starts[to] & 1u << *from)) {
        rc = 2;
    } else {
        rc = hr_mysql_exec(m, "UPDATE push_series SET state = ?, last_error = NULL WHERE id = ?", p,
                           2, NULL, NULL, NULL, errstr, errlen);
    }
    hr_mysql_rows_free(rows);
    return rc;
}

int hr_series_list(hr_mysql *m, int64_t after, int64_t limit, hr_mysql_rows **out, char *errstr,
                   size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(after), HR_P_I64(limit)};

    return hr_mysql_query(
        m, "SELECT " HR_SERIES_LIST_COLUMNS " FROM push_series WHERE id > ? ORDER BY id LIMIT ?", p,
        2, out, errstr, errlen);
}

int hr_series_next(const hr_series *s, size_t n, int64_t *wall, int64_t *due, size_t *got,
                   char *errstr, size_t errlen)
{
    int64_t from = s->next_wall_ms >= 0 ? s->next_wall_ms : s->dtstart_wall_ms;

    if (hr_series_expand(s->rrule, s->dtstart_wall_ms, s->exdate, from - 1000, n, wall, got, errstr,
                         errlen) < 0)
        return -1;
    for (size_t i = 0; i < *got; i++)
        if (hr_series_due_ms(s, wall[i], &due[i], errstr, errlen) < 0)
            return -1;
    return 0;
}

void hr_series_free(hr_series *s)
{
    if (s == NULL)
        return;
    hr_task_free(s->tmpl);
    hr_variant_set_clear(&s->variants);
    free(s->rrule);
    free(s->tz);
    free(s->exdate);
    free(s);
}
