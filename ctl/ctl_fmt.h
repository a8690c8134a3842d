/* ctl_fmt: parsing and printing helpers shared by heraldctl's create,
 * import, status and list commands: durations ("30s"), UTC times, counts
 * with thousands separators, rates, and the progress bar.
 *
 * Everything here is pure (no I/O): printers write into a caller-supplied
 * buffer and return it, so they can be used inside one printf. */
#ifndef CTL_FMT_H
#define CTL_FMT_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

/* "250ms", "30s", "5m", "2h", "1d" (a positive integer and a unit) into
 * milliseconds.  0, or -1 with ERRSTR naming WHAT. */
int ctl_fmt_parse_duration(const char *what, const char *s, int64_t *ms, char *errstr,
                           size_t errlen);

/* "YYYY-MM-DD HH:MM:SS[.mmm]" (a 'T' instead of the space and a final 'Z'
 * are accepted), read as UTC, into epoch milliseconds: hr_parse_time, the
 * API's parser.  0, or -1. */
int ctl_fmt_parse_time(const char *what, const char *s, int64_t *ms, char *errstr, size_t errlen);

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

/* S as one table cell of WIDTH terminal columns, UTF-8 aware: cut at a
 * character boundary (never inside a character, a combining mark stays with
 * its base) and ended with "…" when cut; East Asian wide characters and
 * emoji count 2 columns, combining marks 0.  PAD: fill up to WIDTH with
 * spaces.  Bytes that are not UTF-8 become '?', control characters a space,
 * so the cell is always valid UTF-8 on one line.  A BUF too small for the
 * text cuts it earlier (4 * WIDTH + 8 bytes always fit).  Returns BUF. */
char *ctl_fmt_cell(const char *s, int width, bool pad, char *buf, size_t len);

/* The terminal columns of code point CP: 0, 1 or 2 (the common ranges of
 * Unicode's East Asian Width and emoji, the same in every locale). */
int ctl_fmt_cp_width(uint32_t cp);

/* "[########------------]" of WIDTH cells for FRAC (clamped to 0..1). */
char *ctl_fmt_bar(double frac, int width, char *buf, size_t len);

/* The next line of IN into LINE (CAP bytes), without its newline and a
 * CR before it, *N its length: 1, or 0 at the end of IN, or
 * CTL_FMT_LINE_LONG when it did not fit (the rest of it is skipped). */
#define CTL_FMT_LINE_LONG 2
int ctl_fmt_read_line(FILE *in, char *line, size_t cap, size_t *n);

#endif
