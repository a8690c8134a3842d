/* hr_release: when a recipient of a local-time or windowed task may be
 * pushed (docs/scheduling.md).  Pure apart from hr_tz's zone files: the
 * caller passes the clock, so unit tests run on a fake one.
 *
 * A recipient's zone is its `tz` attribute when that names a zone hr_tz
 * loads, else the task's default_tz, else UTC (hr_release_zone).  Its base
 * instant is due_at, or for a local_time task due_at's wall-clock date and
 * time read in that zone (hr_tz's rules for gaps and overlaps).  With a
 * window, the release is the first instant at or after the base (or FROM,
 * if later) at which the window, read in window_tz or else the recipient's
 * zone, is open; the window's next close comes with it, so a wave still
 * waiting at that instant can be put off to the next opening.  Recipients
 * of one zone share both instants, which is what buckets them into waves. */
#ifndef HR_RELEASE_H
#define HR_RELEASE_H

#include <stddef.h>
#include <stdint.h>

#include "hr_task.h"

#define HR_RELEASE_NEVER INT64_MAX /* close of a task without a window */

/* The zone to read recipient times in: USER_TZ (the user's `tz`
 * attribute, NULL when absent) if hr_tz loads it, else T's default_tz,
 * else "UTC".  Points into USER_TZ or T. */
const char *hr_release_zone(const hr_task *t, const char *user_tz);

/* The release instant of a recipient in ZONE at or after FROM_MS (ms) into
 * *RELEASE_MS, and when its window next closes after that into *CLOSE_MS
 * (HR_RELEASE_NEVER without a window).  0, or negative (ERRSTR) when a
 * zone does not load. */
int hr_release_at(const hr_task *t, const char *zone, int64_t from_ms, int64_t *release_ms,
                  int64_t *close_ms, char *errstr, size_t errlen);

#endif
