/* ctl_fmt: parsing and printing helpers of heraldctl (see ctl_fmt.h).
 *
 * Parsers are strict (the whole string must match) because their input is
 * an admin's command line: "5" for a duration or "2026-02-30" for a date is
 * refused with a message rather than guessed at. */
#include "ctl_fmt.h"
#include "hr_parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ctl_fmt_parse_int(const char *what, const char *s, int64_t min, int64_t max, int64_t *out,
                      char *errstr, size_t errlen)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max) {
        snprintf(errstr, errlen, "%s: \"%.40s\" is not an integer in %lld..%lld", what, s,
                 (long long)min, (long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

int ctl_fmt_parse_duration(const char *what, const char *s, int64_t *ms, char *errstr,
                           size_t errlen)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (end != s && s[0] >= '0' && s[0] <= '9' && errno == 0 && v > 0) {
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            if (strcmp(end, units[i].unit) == 0 && v <= INT64_MAX / units[i].ms) {
                *ms = v * units[i].ms;
                return 0;
            }
        }
    }
    snprintf(errstr, errlen, "%s: \"%.40s\" is not a duration like 250ms, 30s, 5m, 2h or 1d",
             what, s);
    return -1;
}

int ctl_fmt_parse_time(const char *what, const char *s, int64_t *ms, char *errstr,
                       size_t errlen)
{
    /* The API's parser: what one refuses, the other refuses too. */
    return hr_parse_time(what, s, ms, errstr, errlen);
}

static char *ctl_fmt_time(int64_t ms, const char *datefmt, const char *suffix, char *buf,
                          size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char date[32];

    if (ms < 0 || gmtime_r(&t, &tm) == NULL) {
        snprintf(buf, len, "-");
        return buf;
    }
    strftime(date, sizeof date, datefmt, &tm);
    snprintf(buf, len, "%s.%03d%s", date, (int)(ms % 1000), suffix);
    return buf;
}

char *ctl_fmt_time_iso(int64_t ms, char *buf, size_t len)
{
    return ctl_fmt_time(ms, "%Y-%m-%dT%H:%M:%S", "Z", buf, len);
}

char *ctl_fmt_time_sql(int64_t ms, char *buf, size_t len)
{
    return ctl_fmt_time(ms, "%Y-%m-%d %H:%M:%S", "", buf, len);
}

char *ctl_fmt_count(int64_t n, char *buf, size_t len)
{
    char digits[32], out[48];
    size_t nd, o = 0;

    snprintf(digits, sizeof digits, "%lld", (long long)(n < 0 ? -n : n));
    nd = strlen(digits);
    if (n < 0)
        out[o++] = '-';
    for (size_t i = 0; i < nd; i++) {
        if (i > 0 && (nd - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    snprintf(buf, len, "%s", out);
    return buf;
}

char *ctl_fmt_eta(double seconds, char *buf, size_t len)
{
    long s;

    if (seconds < 0 || seconds > 1e9) {
        snprintf(buf, len, "-");
        return buf;
    }
    s = (long)(seconds + 0.5);
    if (s < 60)
        snprintf(buf, len, "%ld s", s);
    else if (s < 3600)
        snprintf(buf, len, "%ld min %02ld s", s / 60, s % 60);
    else
        snprintf(buf, len, "%ld h %02ld min", s / 3600, s / 60 % 60);
    return buf;
}

char *ctl_fmt_bar(double frac, int width, char *buf, size_t len)
{
    int full, i;

    if (len < (size_t)width + 3) {
        snprintf(buf, len, "%s", "");
        return buf;
    }
    if (!(frac >= 0))
        frac = 0;
    if (frac > 1)
        frac = 1;
    full = (int)(frac * width + 0.5);
    buf[0] = '[';
    for (i = 0; i < width; i++)
        buf[1 + i] = i < full ? '#' : '-';
    buf[1 + width] = ']';
    buf[2 + width] = '\0';
    return buf;
}

static int64_t ctl_fmt_clock_ms(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ctl_fmt_now_ms(void)
{
    return ctl_fmt_clock_ms(CLOCK_REALTIME);
}

int64_t ctl_fmt_mono_ms(void)
{
    return ctl_fmt_clock_ms(CLOCK_MONOTONIC);
}
