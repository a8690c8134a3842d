/* hr_release: release instants of waiting recipients (see hr_release.h).
 *
 * The window is a daily span of local time [start, end), wrapping
 * midnight when end < start.  Its next opening is found day by day from
 * the local day before FROM's (a wrapping window opened yesterday may
 * still be open) to two days after it (FROM may fall after today's
 * close), each day's bounds turned into instants with hr_tz_local_to_utc,
 * so a DST change between them moves the close as the wall clock does. */
#include "hr_civil.h"
#include "hr_release.h"

#include <stdio.h>

#include "hr_tz.h"

#define HR_RELEASE_DAY_MS 86400000LL

const char *hr_release_zone(const hr_task *t, const char *user_tz)
{
    char err[128];

    if (user_tz != NULL && hr_tz_check(user_tz, err, sizeof err) == 0)
        return user_tz;
    return t->default_tz != NULL ? t->default_tz : "UTC";
}

/* ZONE's wall time DAY (days since the epoch) + SECS as an instant. */
static int hr_release_local(const char *zone, int64_t day, int64_t secs, int64_t *ms, char *errstr,
                            size_t errlen)
{
    int y, m, d;

    hr_civil_date(day, &y, &m, &d);
    return hr_tz_local_to_utc(zone, y, m, d, (int)(secs / 3600), (int)(secs / 60 % 60),
                              (int)(secs % 60), ms, errstr, errlen);
}

/* The base instant of a recipient in ZONE: due_at, or its wall time there. */
static int hr_release_base(const hr_task *t, const char *zone, int64_t *ms, char *errstr,
                           size_t errlen)
{
    int64_t day = t->due_ms / HR_RELEASE_DAY_MS, secs = t->due_ms % HR_RELEASE_DAY_MS / 1000;

    if (t->local_time != 1) {
        *ms = t->due_ms;
        return 0;
    }
    if (hr_release_local(zone, day, secs, ms, errstr, errlen) < 0)
        return -1;
    /* The wall time's milliseconds, which local_to_utc does not take. */
    *ms += t->due_ms % 1000;
    return 0;
}

int hr_release_at(const hr_task *t, const char *zone, int64_t from_ms, int64_t *release_ms,
                  int64_t *close_ms, char *errstr, size_t errlen)
{
    const char *wz = t->window_tz != NULL ? t->window_tz : zone;
    int64_t from, day, open, close;
    int32_t off;

    if (hr_release_base(t, zone, &from, errstr, errlen) < 0)
        return -1;
    if (from < from_ms)
        from = from_ms;
    if (!t->window) {
        *release_ms = from;
        *close_ms = HR_RELEASE_NEVER;
        return 0;
    }
    if (hr_tz_offset_at(wz, from, &off, errstr, errlen) < 0)
        return -1;
    day = (from + off * 1000LL) / HR_RELEASE_DAY_MS;
    for (int64_t k = day - 1; k <= day + 2; k++) {
        bool wraps = t->window_end_s < t->window_start_s;

        if (hr_release_local(wz, k, t->window_start_s, &open, errstr, errlen) < 0 ||
            hr_release_local(wz, k + wraps, t->window_end_s, &close, errstr, errlen) < 0)
            return -1;
        if (close > from && close > open) {
            *release_ms = open > from ? open : from;
            *close_ms = close;
            return 0;
        }
    }
    /* Not reached: every local day has its window. */
    snprintf(errstr, errlen, "no window opening found in zone %s", wz);
    return -1;
}
