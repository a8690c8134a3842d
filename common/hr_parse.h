/* hr_parse: the strict parsers the API (dispatcher/dsp_api_parse.c) and
 * heraldctl (ctl/) share, so that a value one of them refuses the other
 * refuses too: times, days, uids, names, and a JSON body with exact
 * numbers and no repeated member names.
 *
 * Every parser takes the whole text and refuses anything it would have to
 * guess at or normalise: 2030-02-30, 24:00, second 60, month 13, a sign or
 * a space inside a number.  Pure functions: no allocation except the cJSON
 * tree of hr_parse_json, no logging.  Each returns 0, or a negative value
 * with the reason in ERRSTR (a sentence that names WHAT). */
#ifndef HR_PARSE_H
#define HR_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

/* 10000-01-01T00:00:00Z in ms: the first time four year digits cannot write. */
#define HR_PARSE_TIME_END 253402300800000LL

/* A UTC time "YYYY-MM-DD HH:MM:SS", with 'T' (or 't') instead of the space
 * as RFC 3339 writes it, an optional fraction of 1..9 digits (kept to the
 * millisecond, as the DATETIME(3) columns do) and an optional trailing 'Z'.
 * Years 1970..9999; every field must be a real calendar value (no Feb 30,
 * no hour 24, no second 60).  Into *MS (epoch ms). */
int hr_parse_time(const char *what, const char *s, int64_t *ms, char *errstr, size_t errlen);

/* The inverse of hr_parse_time: MS (epoch ms, 0..HR_PARSE_TIME_END) as
 * "YYYY-MM-DDTHH:MM:SS.mmmZ" into BUF (at least HR_PARSE_TIME_LEN bytes),
 * the form every JSON answer and the audit log write times in. */
#define HR_PARSE_TIME_LEN 32
void hr_parse_time_format(int64_t ms, char *buf, size_t len);

/* A UTC day "YYYY-MM-DD" (1970..9999, a real date) as its first ms. */
int hr_parse_date(const char *what, const char *s, int64_t *day_ms, char *errstr, size_t errlen);

/* A time of day "HH:MM" or "HH:MM:SS" (00:00:00..23:59:59) as seconds
 * since midnight into *SECS: a send window's bound (docs/scheduling.md). */
int hr_parse_time_of_day(const char *what, const char *s, int64_t *secs, char *errstr,
                         size_t errlen);

/* The LEN bytes at S as a uid: decimal digits only (no sign, space or
 * leading zero), 1..2^63-1, the range of push_subscription.uid that the
 * import and the workers take. */
int hr_parse_uid(const char *s, size_t len, int64_t *out);

/* A name-like value: non-empty, at most MAX bytes, valid UTF-8. */
int hr_parse_name(const char *what, const char *s, size_t max, char *errstr, size_t errlen);

/* A JSON number or string node of hr_parse_json's tree as a uid (the
 * number's literal text, or the string, through hr_parse_uid). */
int hr_parse_json_uid(const cJSON *v, int64_t *out);

/* The literal text of a number node of hr_parse_json's tree, e.g.
 * "9007199254740993" (cJSON keeps numbers only as doubles); NULL for any
 * other node. */
const char *hr_parse_json_literal(const cJSON *v);

/* Marks every number under V as raw text, so cJSON_Print* writes the
 * literal the client sent instead of a double's rounding of it. */
void hr_parse_json_exact(cJSON *v);

/* True when S, the authority of a URL or a listen address ("host",
 * "host:port", "[v6]", "[v6]:port"), names this machine's loopback
 * interface: "localhost" (any case), an IPv4 address in 127.0.0.0/8 or
 * ::1.  Nothing is resolved: any other name, an empty host (every
 * address) and 0.0.0.0 are not loopback. */
bool hr_parse_loopback(const char *s);

#define HR_PARSE_MALFORMED -1 /* not JSON, or not UTF-8, or text after the value */
#define HR_PARSE_DUPLICATE -2 /* an object names a member twice */

/* BODY (LEN bytes, UTF-8 JSON text, nothing but white space after the
 * value) into *OUT (the caller's, freed with cJSON_Delete; NULL on
 * failure).  Unlike plain cJSON, which keeps the last of repeated members
 * for some lookups and the first for others, it refuses an object that
 * names a member twice (HR_PARSE_DUPLICATE; ERRSTR names the member by its
 * path, e.g. "payload.x"), and it keeps each number's literal text
 * (hr_parse_json_literal). */
int hr_parse_json(const char *body, size_t len, cJSON **out, char *errstr, size_t errlen);

#endif
