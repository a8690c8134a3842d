/* hr_tz: IANA time zones read from the system's TZif files, without
 * touching the process's TZ (setenv/tzset/localtime are process-global and
 * not safe beside other threads).
 *
 * A zone is loaded once from HR_TZ_DIR/<name> (RFC 8536: the version 2+
 * 64-bit section, and the footer's POSIX TZ string for instants after the
 * last transition) and kept in a process-wide cache guarded by a mutex;
 * loaded zones are immutable and live until exit, so lookups run without
 * the lock once a zone is found.  "UTC" is built in and needs no file.
 *
 * Zone names are checked before any file is opened (hr_tz_name_ok): at most
 * HR_TZ_NAME_MAX bytes, '/'-separated non-empty segments of
 * [A-Za-z0-9_+-] only, so no "..", no absolute path, no hidden file.
 *
 * Local to UTC is a total function, with these rules where the wall clock
 * is not one-to-one:
 *   - in a gap (clocks jump forward, e.g. 02:30 on Berlin's spring day) the
 *     wall time is read with the offset in force before the jump, so the
 *     instant lands after the jump by the gap's length (02:30 -> 03:30 CEST,
 *     the same instant as 01:30 UTC): a reminder set in the gap is sent
 *     right after it, never skipped;
 *   - in an overlap (clocks fall back, e.g. 02:30 on Berlin's autumn day
 *     happens twice) the earlier instant is taken (02:30 CEST = 00:30 UTC):
 *     a reminder is sent at the first occurrence, once.
 *
 * Times are UTC milliseconds (int64_t); offsets are seconds east of UTC.
 * Every function returns 0, or a negative value with the reason in
 * ERRSTR. */
#ifndef HR_TZ_H
#define HR_TZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HR_TZ_DIR "/usr/share/zoneinfo"
#define HR_TZ_NAME_MAX 64

/* The instants hr_tz answers for: 0001-01-01T00:00:00Z up to (excluding)
 * 10000-01-01T00:00:00Z, the years a four-digit calendar writes. */
#define HR_TZ_MIN_MS (-62135596800000LL)
#define HR_TZ_END_MS 253402300800000LL

#define HR_TZ_ERR_NAME -1    /* the name breaks hr_tz_name_ok's rules */
#define HR_TZ_ERR_UNKNOWN -2 /* no such zone file (or not a regular file) */
#define HR_TZ_ERR_FILE -3    /* the file is not a usable TZif file */
#define HR_TZ_ERR_RANGE -4   /* a time or calendar field out of range */

/* True when NAME may name a zone (the rules above); says nothing about
 * whether the zone exists. */
bool hr_tz_name_ok(const char *name);

/* Checks that ZONE exists and loads (caching it): what the API calls to
 * refuse an unknown zone up front. */
int hr_tz_check(const char *zone, char *errstr, size_t errlen);

/* The offset (seconds east of UTC) ZONE has at the instant UTC_MS. */
int hr_tz_offset_at(const char *zone, int64_t utc_ms, int32_t *offset_s, char *errstr,
                    size_t errlen);

/* The instant (UTC ms) of the wall-clock time Y-M-D HH:MM:SS in ZONE, gaps
 * and overlaps resolved as described above.  Fields must be a real calendar
 * time of years 1..9999 (no Feb 30, hour 24 or second 60). */
int hr_tz_local_to_utc(const char *zone, int y, int m, int d, int hh, int mm, int ss,
                       int64_t *utc_ms, char *errstr, size_t errlen);

#endif
