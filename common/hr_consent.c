/* hr_consent: the per-push consent check (see hr_consent.h).  The
 * opt-out match scans the field in place (no copy, no allocation): a
 * recipient with no preferences costs a NULL test. */
#include "hr_consent.h"

#include <stdlib.h>
#include <string.h>

#include "hr_release.h"
#include "hr_tz.h"

#define HR_CONSENT_DAY_S 86400

/* Whether the LEN bytes at P are "*" or the string S. */
static bool hr_consent_part(const char *p, size_t len, const char *s)
{
    return (len == 1 && *p == '*') || (strlen(s) == len && memcmp(p, s, len) == 0);
}

bool hr_consent_opted_out(const char *optout, const char *category, const char *channel)
{
    const char *p = optout;

    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ','), *slash;
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);

        slash = memchr(p, '/', len);
        if (slash != NULL && hr_consent_part(p, (size_t)(slash - p), category) &&
            hr_consent_part(slash + 1, len - (size_t)(slash - p) - 1, channel))
            return true;
        p = end != NULL ? end + 1 : NULL;
    }
    return false;
}

size_t hr_consent_addresses(hr_addr *addrs, size_t n, bool mandatory)
{
    size_t keep = 0;

    for (size_t i = 0; i < n; i++) {
        bool ok = addrs[i].supp == HR_ADDR_SUPP_NONE ||
                  (mandatory && addrs[i].supp == HR_ADDR_SUPP_UNSUBSCRIBED);

        if (!ok)
            continue;
        if (keep != i) {
            hr_addr a = addrs[i];

            memmove(addrs + keep + 1, addrs + keep, (i - keep) * sizeof *addrs);
            addrs[keep] = a;
        }
        keep++;
    }
    return keep;
}

int hr_consent_parse_quiet(const char *s, hr_user_quiet *q)
{
    char *end;
    long a, b;

    if (s == NULL)
        return -1;
    a = strtol(s, &end, 10);
    if (end == s || *end != '-')
        return -1;
    s = end + 1;
    b = strtol(s, &end, 10);
    if (end == s || *end != '\0' || a < 0 || a >= HR_CONSENT_DAY_S || b < 0 ||
        b >= HR_CONSENT_DAY_S || a == b)
        return -1;
    *q = (hr_user_quiet){.set = true, .start_s = (int32_t)a, .end_s = (int32_t)b};
    return 0;
}

/* Whether the local second of the day S falls in Q. */
static bool hr_consent_in(const hr_user_quiet *q, int64_t s)
{
    return q->start_s < q->end_s ? s >= q->start_s && s < q->end_s
                                 : s >= q->start_s || s < q->end_s;
}

int hr_consent_quiet(const hr_task *t, const char *user_tz, const hr_user_quiet *q, int64_t now_ms,
                     int64_t *release_ms, int64_t *close_ms, const char **zone, char *errstr,
                     size_t errlen)
{
    /* The quiet hours as a send window: open from their end to their start. */
    hr_task open = {.window = true, .window_start_s = q->end_s, .window_end_s = q->start_s};
    int64_t at = now_ms, close = HR_RELEASE_NEVER;
    int32_t off;

    *zone = hr_release_zone(t, user_tz);
    if (hr_tz_offset_at(*zone, now_ms, &off, errstr, errlen) < 0)
        return -1;
    if (!hr_consent_in(q, ((now_ms / 1000 + off) % HR_CONSENT_DAY_S + HR_CONSENT_DAY_S) %
                              HR_CONSENT_DAY_S))
        return 0;
    /* Out of the quiet hours, then into the task's window; the window may
     * open inside the next quiet hours, so a few rounds (both are daily:
     * when they never meet the last round's instant stands, and the push
     * is put off again then, until the task expires). */
    for (int round = 0; round < 4; round++) {
        int64_t quiet_close;

        open.due_ms = at;
        if (hr_release_at(&open, *zone, at, &at, &quiet_close, errstr, errlen) < 0)
            return -1;
        if (!t->window)
            break;
        {
            hr_task w = *t;

            w.local_time = 0;
            w.due_ms = at;
            if (hr_release_at(&w, *zone, at, &at, &close, errstr, errlen) < 0)
                return -1;
        }
        if (hr_tz_offset_at(*zone, at, &off, errstr, errlen) < 0)
            return -1;
        if (!hr_consent_in(q, ((at / 1000 + off) % HR_CONSENT_DAY_S + HR_CONSENT_DAY_S) %
                                  HR_CONSENT_DAY_S))
            break;
    }
    *release_ms = at;
    *close_ms = close;
    return 1;
}
