/* dsp_api_parse: the pure half of the /v1 API's request handling (see
 * dsp_api.c for the server): path ids, the JSON body, the task fields of
 * POST/PATCH /v1/tasks, the uid list of POST .../subscribers, times, the
 * pull's date and the query parameters.
 *
 * Nothing here touches a backend, a request or a response: each parser
 * takes text or cJSON and returns 0, or -1 with the error code of
 * docs/api.md in *CODE (a static string) and the message in ERRSTR, which
 * the handler answers with 400.  That keeps the parsing reachable from
 * tests/fuzz/fuzz_api_request.c without servers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsp_api.h"

#define DSP_API_LIST_MAX 1000
#define DSP_API_LIST_DEFAULT 100
/* 2^53 - 1: the largest uid a JSON number carries exactly. */
#define DSP_API_UID_MAX 9007199254740991.0
/* 10000-01-01T00:00:00Z in ms: the first time four year digits cannot write. */
#define DSP_API_TIME_END 253402300800000.0

static int dsp_api_refuse(const char **code, const char *what, char *errstr, size_t errlen,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int dsp_api_refuse(const char **code, const char *what, char *errstr, size_t errlen,
                          const char *fmt, ...)
{
    va_list ap;

    *code = what;
    va_start(ap, fmt);
    vsnprintf(errstr, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int dsp_api_parse_id(const char *s, const char *name, int64_t *out, const char **code,
                     char *errstr, size_t errlen)
{
    char *end = NULL;
    long long v;

    errno = 0;
    v = s != NULL && s[0] >= '1' && s[0] <= '9' ? strtoll(s, &end, 10) : 0;
    if (v <= 0 || errno != 0 || *end != '\0')
        return dsp_api_refuse(code, "bad_id", errstr, errlen, "%s must be a positive integer",
                              name);
    *out = v;
    return 0;
}

int dsp_api_parse_json(const char *body, size_t len, cJSON **out, const char **code,
                       char *errstr, size_t errlen)
{
    const char *end = NULL;
    cJSON *j;

    *out = NULL;
    /* JSON text is UTF-8 (RFC 8259); cJSON passes other bytes through, and
     * MySQL would refuse them later with an error that is not the client's
     * to retry. */
    if (!hr_utf8_valid(body, len))
        return dsp_api_refuse(code, "malformed_json", errstr, errlen,
                              "the body is not valid UTF-8");
    j = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (j == NULL)
        return dsp_api_refuse(code, "malformed_json", errstr, errlen,
                              "the body is not valid JSON (near byte %zu)",
                              end != NULL ? (size_t)(end - body) : (size_t)0);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return dsp_api_refuse(code, "malformed_json", errstr, errlen,
                              "the body must be a JSON object");
    }
    *out = j;
    return 0;
}

void dsp_api_time(int64_t ms, char *buf, size_t len)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;

    gmtime_r(&s, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

int dsp_api_parse_time(const cJSON *v, int64_t *ms)
{
    struct tm tm = {0};
    int n = 0, frac = 0, digits = 0;
    const char *p;
    int64_t t;

    /* The range is checked before the cast: a double past int64 does not
     * convert.  Strings get the same range, which keeps out the years
     * before 1970 that sscanf's %4d lets through ("0000", "-999"). */
    if (cJSON_IsNumber(v)) {
        if (!(v->valuedouble >= 0 && v->valuedouble < DSP_API_TIME_END) ||
            (double)(int64_t)v->valuedouble != v->valuedouble)
            return -1;
        *ms = (int64_t)v->valuedouble;
        return 0;
    }
    if (!cJSON_IsString(v) ||
        sscanf(v->valuestring, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 || n != 19)
        return -1;
    p = v->valuestring + n;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                frac = frac * 10 + (*p - '0');
    for (; digits > 0 && digits < 3; digits++)
        frac *= 10;
    if (strcmp(p, "Z") != 0 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
        tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    t = (int64_t)timegm(&tm) * 1000 + frac;
    if (t < 0 || (double)t >= DSP_API_TIME_END)
        return -1;
    *ms = t;
    return 0;
}

/* ---- task fields ---------------------------------------------------------- */

typedef enum dsp_api_kind { DSP_F_STR, DSP_F_INT, DSP_F_OBJ, DSP_F_TIME } dsp_api_kind;

/* The task fields the API takes: name, kind, longest value (the column's),
 * whether PATCH may change it (the freeze trigger's columns). */
static const struct dsp_api_field {
    const char *name;
    dsp_api_kind kind;
    size_t max;
    bool patch;
} dsp_api_fields[] = {
    {"name", DSP_F_STR, 200, false},         {"topic", DSP_F_STR, 100, false},
    {"channel", DSP_F_STR, 64, false},       {"title", DSP_F_STR, 65535, true},
    {"body", DSP_F_STR, 65535, true},        {"payload", DSP_F_OBJ, 0, true},
    {"due_at", DSP_F_TIME, 0, true},         {"freeze_at", DSP_F_TIME, 0, false},
    {"rate_limit", DSP_F_INT, 0, false},     {"chunk_size", DSP_F_INT, 0, false},
    {"throttle_limit", DSP_F_INT, 0, false}, {"throttle_window_s", DSP_F_INT, 0, false},
    {"throttle_scope", DSP_F_STR, 100, false}, {"throttle_key", DSP_F_STR, 100, false},
    {"throttle_mode", DSP_F_STR, 16, false},
};

/* Checks V against field FD; 0, or -1 with the refusal. */
static int dsp_api_field_check(const struct dsp_api_field *fd, const cJSON *v, int64_t *ms,
                               const char **code, char *errstr, size_t errlen)
{
    switch (fd->kind) {
    case DSP_F_STR:
        if (!cJSON_IsString(v) || strlen(v->valuestring) > fd->max)
            return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                  "%s must be a string of at most %zu bytes", fd->name,
                                  fd->max);
        break;
    case DSP_F_INT:
        /* In range before the cast, for the same reason as the times. */
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= INT32_MIN && v->valuedouble <= INT32_MAX) ||
            v->valuedouble != (double)(int32_t)v->valuedouble)
            return dsp_api_refuse(code, "bad_field", errstr, errlen, "%s must be an integer",
                                  fd->name);
        break;
    case DSP_F_OBJ:
        if (!cJSON_IsObject(v))
            return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                  "%s must be a JSON object", fd->name);
        break;
    case DSP_F_TIME:
        if (dsp_api_parse_time(v, ms) < 0)
            return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                  "%s must be RFC 3339 UTC (2024-05-01T08:00:00Z) or epoch ms",
                                  fd->name);
        break;
    }
    return 0;
}

int dsp_api_parse_task(const cJSON *j, bool patch, dsp_api_input *in, const char **code,
                       char *errstr, size_t errlen)
{
    const cJSON *v;
    size_t f, nf = sizeof dsp_api_fields / sizeof dsp_api_fields[0];

    cJSON_ArrayForEach(v, j) {
        const struct dsp_api_field *fd = NULL;
        int64_t ms = -1;

        for (f = 0; f < nf; f++)
            if (strcmp(dsp_api_fields[f].name, v->string) == 0)
                fd = &dsp_api_fields[f];
        if (fd == NULL || (patch && !fd->patch))
            return dsp_api_refuse(code, "unknown_field", errstr, errlen, "unknown field '%s'%s",
                                  v->string,
                                  fd != NULL ? " (PATCH changes title, body, payload and due_at)"
                                             : "");
        if (dsp_api_field_check(fd, v, &ms, code, errstr, errlen) < 0)
            return -1;
        if (strcmp(fd->name, "name") == 0) in->t.name = v->valuestring;
        else if (strcmp(fd->name, "topic") == 0) in->t.topic = v->valuestring;
        else if (strcmp(fd->name, "channel") == 0) in->t.channel = v->valuestring;
        else if (strcmp(fd->name, "title") == 0) in->t.title = v->valuestring;
        else if (strcmp(fd->name, "body") == 0) in->t.body = v->valuestring;
        else if (strcmp(fd->name, "payload") == 0) {
            /* A repeated member: the last one counts, as for the others. */
            free(in->t.payload);
            in->t.payload = cJSON_PrintUnformatted(v);
        } else if (strcmp(fd->name, "due_at") == 0) { in->t.due_ms = ms; in->has_due = true; }
        else if (strcmp(fd->name, "freeze_at") == 0) { in->t.freeze_ms = ms; in->has_freeze = true; }
        else if (strcmp(fd->name, "rate_limit") == 0) in->t.rate_limit = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "chunk_size") == 0) in->t.chunk_size = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "throttle_limit") == 0) in->t.throttle_limit = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "throttle_window_s") == 0) in->t.throttle_window_s = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "throttle_scope") == 0) in->t.throttle_scope = v->valuestring;
        else if (strcmp(fd->name, "throttle_key") == 0) in->t.throttle_key = v->valuestring;
        else if (strcmp(fd->name, "throttle_mode") == 0) in->t.throttle_mode = v->valuestring;
    }
    if (in->t.throttle_mode != NULL && strcmp(in->t.throttle_mode, "enforce") != 0 &&
        strcmp(in->t.throttle_mode, "shadow") != 0)
        return dsp_api_refuse(code, "bad_field", errstr, errlen,
                              "throttle_mode must be enforce or shadow");
    if (!patch && (in->t.name == NULL || in->t.channel == NULL || !in->has_due))
        return dsp_api_refuse(code, "missing_field", errstr, errlen,
                              "name, channel and due_at are required");
    return 0;
}

/* ---- subscribers ---------------------------------------------------------- */

int dsp_api_parse_uids(const cJSON *j, int max_ids, const cJSON **list, size_t *n,
                       const char **code, char *errstr, size_t errlen)
{
    const cJSON *uids = cJSON_GetObjectItemCaseSensitive(j, "uids"), *v;
    size_t i = 0, count;

    cJSON_ArrayForEach(v, j) {
        if (strcmp(v->string, "uids") != 0)
            return dsp_api_refuse(code, "unknown_field", errstr, errlen, "unknown field '%s'",
                                  v->string);
    }
    if (!cJSON_IsArray(uids) || (count = (size_t)cJSON_GetArraySize(uids)) == 0)
        return dsp_api_refuse(code, "bad_field", errstr, errlen,
                              "uids must be a non-empty array");
    if (count > (size_t)max_ids)
        return dsp_api_refuse(code, "too_many_ids", errstr, errlen,
                              "%zu uids in one request; at most %d", count, max_ids);
    cJSON_ArrayForEach(v, uids) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > DSP_API_UID_MAX ||
            v->valuedouble != (double)(int64_t)v->valuedouble)
            return dsp_api_refuse(code, "bad_id", errstr, errlen,
                                  "uids[%zu] is not a positive integer", i);
        i++;
    }
    *list = uids;
    *n = count;
    return 0;
}

/* ---- query parameters ----------------------------------------------------- */

int dsp_api_parse_list(const char *state, const char *limit_s, long *limit, const char **code,
                       char *errstr, size_t errlen)
{
    static const char *const states[] = {"scheduled", "dispatching", "dispatched", "done",
                                         "paused",    "cancelled",   "failed"};
    bool known = state == NULL;
    char *end;
    size_t i;

    for (i = 0; state != NULL && i < sizeof states / sizeof states[0]; i++)
        known = known || strcmp(state, states[i]) == 0;
    if (!known)
        return dsp_api_refuse(code, "bad_query", errstr, errlen,
                              "state must be one of scheduled, dispatching, dispatched, done, "
                              "paused, cancelled, failed");
    *limit = DSP_API_LIST_DEFAULT;
    if (limit_s != NULL) {
        *limit = strtol(limit_s, &end, 10);
        if (*limit_s == '\0' || *end != '\0' || *limit < 1 || *limit > DSP_API_LIST_MAX)
            return dsp_api_refuse(code, "bad_query", errstr, errlen, "limit must be 1..%d",
                                  DSP_API_LIST_MAX);
    }
    return 0;
}

int dsp_api_parse_pull(const char *date, const char *ack_s, int64_t now_s, int64_t *day,
                       bool *ack, const char **code, char *errstr, size_t errlen)
{
    struct tm tm = {0};
    int n = 0;

    if (date == NULL) {
        *day = (now_s - now_s % 86400) * 1000;
    } else {
        if (sscanf(date, "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &n) != 3 ||
            n != 10 || date[n] != '\0' || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
            tm.tm_mday > 31)
            return dsp_api_refuse(code, "bad_query", errstr, errlen, "date must be YYYY-MM-DD");
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        *day = (int64_t)timegm(&tm) * 1000;
    }
    *ack = ack_s != NULL && strcmp(ack_s, "1") == 0;
    if (ack_s != NULL && !*ack && strcmp(ack_s, "0") != 0)
        return dsp_api_refuse(code, "bad_query", errstr, errlen, "ack must be 0 or 1");
    return 0;
}
