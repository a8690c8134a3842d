/* hr_consent: whether one recipient of a task may be pushed now — the
 * worker's per-push check (docs/recipients.md), from what it reads with
 * the chunk anyway: the profile hash's tz, _quiet and _optout fields
 * (hr_user.h) and the addresses with their suppression (hr_addr.h).  Pure
 * apart from hr_tz's zone files; the caller passes the clock.
 *
 * In this order, for a category that is not mandatory:
 *   1. opted out: _optout holds category/channel, category/ *, * /channel
 *      or * / * for the task's category and channel type -> opted_out;
 *   2. suppressed: of the uid's addresses on the channel, those on the
 *      suppression list are not pushed; none left -> suppressed (a
 *      mandatory category skips only the `unsubscribed` ones);
 *   3. quiet hours: now falls in the user's quiet hours, read in the
 *      user's zone (hr_release_zone: its tz, else the task's default_tz,
 *      else UTC) -> put off to their end, or for a task with a send window
 *      to the first instant after it at which the window is open too.
 * A mandatory category goes through 1 and 3 unchecked. */
#ifndef HR_CONSENT_H
#define HR_CONSENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_addr.h"
#include "hr_task.h"
#include "hr_user.h"

/* Whether the _optout field OPTOUT (NULL = none) covers CATEGORY by
 * channels of type CHANNEL. */
bool hr_consent_opted_out(const char *optout, const char *category, const char *channel);

/* Moves the addresses of ADDRS[N] that may be pushed to the front, in
 * their order, and returns how many: all but the suppressed ones, or for
 * a MANDATORY category all but those suppressed as complained or
 * bounced. */
size_t hr_consent_addresses(hr_addr *addrs, size_t n, bool mandatory);

/* The _quiet field S ("<start s>-<end s>") into *Q.  0, or -1 when it is
 * not one (a hand-written value: no quiet hours). */
int hr_consent_parse_quiet(const char *s, hr_user_quiet *q);

/* Whether NOW_MS falls in the quiet hours Q of a recipient of T whose tz
 * field is USER_TZ (NULL = none): 1 with *RELEASE_MS the first instant
 * after it outside them at which T's send window (if any) is open, and
 * *CLOSE_MS that window's next close (HR_RELEASE_NEVER without one); *ZONE
 * the zone they were read in (USER_TZ or T's); 0 when it does not; -1
 * (ERRSTR) when a zone does not load. */
int hr_consent_quiet(const hr_task *t, const char *user_tz, const hr_user_quiet *q, int64_t now_ms,
                     int64_t *release_ms, int64_t *close_ms, const char **zone, char *errstr,
                     size_t errlen);

#endif
