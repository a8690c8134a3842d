/* dsp_engage: engagements and pulls recorded (see dsp_engage.h). */
#include "dsp_engage.h"

#include <stdio.h>

#include "dsp_events.h"
#include "hr_clock.h"
#include "hr_stats.h"
#include "hr_variant.h"

/* The event of UID's TYPE for task T, happened at AT_MS. */
static hr_event dsp_engage_event(const hr_task *t, uint64_t uid, hr_event_type type, int64_t at_ms,
                                 const char *url)
{
    return (hr_event){.type = type,
                      .task = t->id,
                      .uid = uid,
                      .channel = t->channel,
                      .at_ms = at_ms,
                      .due_ms = t->due_ms > 0 ? t->due_ms : 0,
                      .url = url};
}

/* Adds one to task T's TYPE in the minute of AT_MS. */
static int dsp_engage_count(hr_mysql *m, const hr_task *t, hr_event_type type, int64_t at_ms,
                            char *errstr, size_t errlen)
{
    const hr_stats_add row = {.task = t->id,
                              .channel = t->channel,
                              .outcome = hr_event_type_name(type),
                              .minute_ms = at_ms - at_ms % 60000,
                              .n = 1};

    return hr_stats_add_rows(m, &row, 1, errstr, errlen);
}

/* Adds one to the TYPE count of UID's A/B arm (variants S) of task T, in
 * push_task_variant_count beside the outcomes, so a winner step's pick
 * reads engagement per arm: the arm is a function of (task, uid) and the
 * winner (hr_variant_ab_pick), worked out here, so no push carries it.
 * Nothing for a task without arms.  0 or -1. */
static int dsp_engage_count_arm(hr_mysql *m, const hr_task *t, const hr_variant_set *s,
                                uint64_t uid, hr_event_type type, char *errstr, size_t errlen)
{
    int v;

    if (!hr_variant_is_split(s) || (v = hr_variant_ab_pick(s, t, uid, NULL)) == HR_VARIANT_HELD)
        return 0;
    return hr_variant_count_add(
        m,
        &(hr_variant_count){.task = t->id,
                            .key = v >= 0 ? s->v[v].key : HR_VARIANT_DEFAULT,
                            .outcome = hr_event_type_name(type),
                            .n = 1},
        1, errstr, errlen);
}

int dsp_engage_record(dsp *d, hr_mysql *m, const hr_task *t, uint64_t uid, hr_event_type type,
                      const char *url, char *errstr, size_t errlen)
{
    const char *kind = hr_event_type_name(type);
    const hr_mysql_param key[] = {HR_P_I64(t->id), HR_P_STR(kind), HR_P_I64((int64_t)uid)};
    int64_t now = hr_clock_now_ms();
    const hr_event ev = dsp_engage_event(t, uid, type, now, url);
    const hr_mysql_param p[] = {HR_P_I64(t->id), HR_P_STR(kind), HR_P_I64((int64_t)uid),
                                HR_P_I64(now)};
    hr_mysql_rows *rows = NULL;
    hr_variant_set vs = {0};
    uint64_t inserted = 0;
    bool seen;
    int rc = -1;

    if (hr_mysql_query(m,
                       "SELECT 1 FROM push_engagement WHERE task_id = ? AND kind = ? AND uid = ?",
                       key, 3, &rows, errstr, errlen) < 0)
        return -1;
    seen = rows->nrows > 0;
    hr_mysql_rows_free(rows);
    if (seen)
        return 0;
    if (dsp_events_publish(d, &ev) < 0) {
        snprintf(errstr, errlen, "the event was not confirmed by Kafka in time");
        return -1;
    }
    if (hr_variant_load(m, t->id, &vs, errstr, errlen) != 0 ||
        hr_mysql_begin(m, errstr, errlen) < 0)
        goto done;
    if (hr_mysql_exec(m,
                      "INSERT IGNORE INTO push_engagement (task_id, kind, uid, at) "
                      "VALUES (?, ?, ?, FROM_UNIXTIME(? / 1000))",
                      p, 4, &inserted, NULL, NULL, errstr, errlen) < 0 ||
        (inserted == 1 && (dsp_engage_count(m, t, type, now, errstr, errlen) < 0 ||
                           dsp_engage_count_arm(m, t, &vs, uid, type, errstr, errlen) < 0)) ||
        hr_mysql_commit(m, errstr, errlen) < 0) {
        hr_mysql_rollback(m);
        goto done;
    }
    rc = inserted == 1;
done:
    hr_variant_set_clear(&vs);
    return rc;
}

int dsp_engage_pulled(dsp *d, hr_mysql *m, const hr_task *t, uint64_t uid, char *errstr,
                      size_t errlen)
{
    int64_t now = hr_clock_now_ms();
    const hr_event ev = dsp_engage_event(t, uid, HR_EVENT_PULLED, now, NULL);

    if (dsp_events_publish(d, &ev) < 0) {
        snprintf(errstr, errlen, "the event was not confirmed by Kafka in time");
        return -1;
    }
    return dsp_engage_count(m, t, HR_EVENT_PULLED, now, errstr, errlen);
}
