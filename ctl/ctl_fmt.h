/* ctl_fmt: parsing and printing helpers shared by heraldctl's create,
 * import, status and list commands: durations ("30s"), UTC times, counts
 * with thousands separators, rates, and the progress bar.
 *
 * Everything here is pure (no I/O): printers write into a caller-supplied
 * buffer and return it, so they can be used inside one printf. */
#ifndef CTL_FMT_H
#define CTL_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "250ms", "30s", "5m", "2h", "1d" (a positive integer and a unit) into
 * milliseconds.  0, or -1 with ERRSTR naming WHAT. */
int ctl_fmt_parse_duration(const char *what, const char *s, int64_t *ms, char *errstr,
                           size_t errlen);

/* "YYYY-MM-DD HH:MM:SS[.mmm]" (a 'T' instead of the space and a final 'Z'
 * are accepted), read as UTC, into epoch milliseconds: hr_parse_time, the
 * API's parser.  0, or -1. */
int ctl_fmt_parse_time(const char *what, const char *s, int64_t *ms, char *errstr,
                       size_t errlen);

/* A decimal integer in MIN..MAX, nothing else.  0, or -1 with ERRSTR. */
int ctl_fmt_parse_int(const char *what, const char *s, int64_t min, int64_t max, int64_t *out,
                      char *errstr, size_t errlen);

/* Epoch ms → "2026-01-31T08:00:00.000Z" (ISO) or "2026-01-31 08:00:00.000"
 * (what MySQL takes for a DATETIME(3) in a UTC session). */
char *ctl_fmt_time_iso(int64_t ms, char *buf, size_t len);
char *ctl_fmt_time_sql(int64_t ms, char *buf, size_t len);

/* 1234567 → "1,234,567". */
char *ctl_fmt_count(int64_t n, char *buf, size_t len);

/* Seconds → "42 s", "3 min 05 s", "2 h 01 min"; negative → "-". */
char *ctl_fmt_eta(double seconds, char *buf, size_t len);

/* "[########------------]" of WIDTH cells for FRAC (clamped to 0..1). */
char *ctl_fmt_bar(double frac, int width, char *buf, size_t len);

/* CLOCK_REALTIME and CLOCK_MONOTONIC in milliseconds. */
int64_t ctl_fmt_now_ms(void);
int64_t ctl_fmt_mono_ms(void);

#endif
