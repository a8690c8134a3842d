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
#include "dsp_api_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hr_parse.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_template.h" /* hr_utf8_valid */
#include "hr_tz.h"
#include "hr_wpsub.h"

#define DSP_API_LIST_MAX 1000
#define DSP_API_LIST_DEFAULT 100
#define DSP_API_Q_MAX 200

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

/* A refusal whose message the shared parser already wrote into errstr. */
static int dsp_api_coded(const char **code, const char *what)
{
    *code = what;
    return -1;
}

int dsp_api_parse_id(const char *s, const char *name, int64_t *out, const char **code, char *errstr,
                     size_t errlen)
{
    if (s == NULL || hr_parse_uid(s, strlen(s), out) < 0)
        return dsp_api_refuse(code, "bad_id", errstr, errlen,
                              "%s must be an integer in 1..9223372036854775807", name);
    return 0;
}

int dsp_api_parse_json(const char *body, size_t len, cJSON **out, const char **code, char *errstr,
                       size_t errlen)
{
    int rc = hr_parse_json(body, len, out, errstr, errlen);

    if (rc == HR_PARSE_DUPLICATE)
        return dsp_api_coded(code, "duplicate_field");
    if (rc < 0)
        return dsp_api_coded(code, "malformed_json");
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return dsp_api_refuse(code, "malformed_json", errstr, errlen,
                              "the body must be a JSON object");
    }
    return 0;
}

void dsp_api_time(int64_t ms, char *buf, size_t len)
{
    hr_parse_time_format(ms, buf, len);
}

int dsp_api_parse_time(const cJSON *v, const char *what, int64_t *ms, char *errstr, size_t errlen)
{
    /* The range is checked before the cast: a double past int64 does not
     * convert. */
    if (cJSON_IsNumber(v)) {
        if (!(v->valuedouble >= 0 && v->valuedouble < (double)HR_PARSE_TIME_END) ||
            (double)(int64_t)v->valuedouble != v->valuedouble) {
            snprintf(errstr, errlen,
                     "%s must be epoch ms of 1970..9999 or an RFC 3339 UTC "
                     "time like 2026-05-01T08:00:00Z",
                     what);
            return -1;
        }
        *ms = (int64_t)v->valuedouble;
        return 0;
    }
    if (!cJSON_IsString(v)) {
        snprintf(errstr, errlen,
                 "%s must be an RFC 3339 UTC time like 2026-05-01T08:00:00Z "
                 "or epoch ms",
                 what);
        return -1;
    }
    return hr_parse_time(what, v->valuestring, ms, errstr, errlen);
}

/* ---- task fields ---------------------------------------------------------- */

typedef enum dsp_api_kind {
    DSP_F_STR,
    DSP_F_INT,
    DSP_F_OBJ,
    DSP_F_TIME,
    DSP_F_BOOL,
    DSP_F_ZONE, /* an IANA zone name, or null */
    DSP_F_TOD,  /* a time of day "HH:MM[:SS]", or null */
} dsp_api_kind;

/* The task fields the API takes: name, kind, longest value (the column's),
 * whether PATCH may change it (the freeze trigger's columns). */
static const struct dsp_api_field {
    const char *name;
    dsp_api_kind kind;
    size_t max;
    bool patch;
    bool nonempty; /* a name: "" would be stored and match nothing */
    bool nullable; /* JSON null resets it to the column's NULL (the provider's default) */
} dsp_api_fields[] = {
    {"name", DSP_F_STR, 200, false, true, false},
    {"topic", DSP_F_STR, 100, false, true, false},
    {"channel", DSP_F_STR, 64, false, true, false},
    {"title", DSP_F_STR, 65535, true, false, false},
    {"body", DSP_F_STR, 65535, true, false, false},
    {"payload", DSP_F_OBJ, 0, true, false, false},
    {"due_at", DSP_F_TIME, 0, true, false, false},
    {"freeze_at", DSP_F_TIME, 0, false, false, false},
    {"rate_limit", DSP_F_INT, 0, false, false, false},
    {"chunk_size", DSP_F_INT, 0, false, false, false},
    {"throttle_limit", DSP_F_INT, 0, false, false, false},
    {"throttle_window_s", DSP_F_INT, 0, false, false, false},
    {"throttle_scope", DSP_F_STR, 100, false, true, false},
    {"throttle_key", DSP_F_STR, 100, false, true, false},
    {"throttle_mode", DSP_F_STR, 16, false, false, false},
    {"ttl", DSP_F_INT, 0, true, false, true},
    {"collapse_key", DSP_F_STR, 255, true, false, true},
    {"priority", DSP_F_STR, 16, true, false, false},
    /* expiry: expire_at, or expire_in seconds after due_at */
    {"expire_at", DSP_F_TIME, 0, false, false, false},
    {"expire_in", DSP_F_INT, 0, false, false, false},
    /* local time and send windows (docs/scheduling.md); their kinds take
     * null themselves (it clears a zone or a window bound) */
    {"local_time", DSP_F_BOOL, 0, true, false, false},
    {"default_tz", DSP_F_ZONE, HR_TZ_NAME_MAX, true, false, false},
    {"window_start", DSP_F_TOD, 0, true, false, false},
    {"window_end", DSP_F_TOD, 0, true, false, false},
    {"window_tz", DSP_F_ZONE, HR_TZ_NAME_MAX, true, false, false},
    /* pacing (docs/scheduling.md) */
    {"finish_by", DSP_F_TIME, 0, true, false, false},
    /* lead times (docs/scheduling.md "Lead times"): null clears it */
    {"event_at", DSP_F_TIME, 0, true, false, true},
    /* sharded tasks (docs/architecture.md): shards, or derived from
     * expected_recipients; fixed once the task has a subscriber */
    {"shards", DSP_F_INT, 0, false, false, false},
    {"expected_recipients", DSP_F_INT, 0, false, false, false},
    /* recipients (docs/recipients.md): one of recipients.categories */
    {"category", DSP_F_STR, HR_CATEGORY_NAME_MAX, false, true, false},
    /* rich and silent pushes (docs/providers.md), checked by hr_task_validate */
    {"rich", DSP_F_OBJ, 0, false, false, false},
};

/* Checks V against field FD; 0, or -1 with the refusal. */
static int dsp_api_field_check(const struct dsp_api_field *fd, const cJSON *v, int64_t *ms,
                               const char **code, char *errstr, size_t errlen)
{
    switch (fd->kind) {
    case DSP_F_STR:
        if (!cJSON_IsString(v) || strlen(v->valuestring) > fd->max)
            return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                  "%s must be a string of at most %zu bytes", fd->name, fd->max);
        if (fd->nonempty && hr_parse_name(fd->name, v->valuestring, fd->max, errstr, errlen) < 0)
            return dsp_api_coded(code, "bad_field");
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
            return dsp_api_refuse(code, "bad_field", errstr, errlen, "%s must be a JSON object",
                                  fd->name);
        break;
    case DSP_F_TIME:
        if (dsp_api_parse_time(v, fd->name, ms, errstr, errlen) < 0)
            return dsp_api_coded(code, "bad_field");
        break;
    case DSP_F_BOOL:
        if (!cJSON_IsBool(v))
            return dsp_api_refuse(code, "bad_field", errstr, errlen, "%s must be true or false",
                                  fd->name);
        break;
    case DSP_F_ZONE:
        /* Existence is hr_task_validate's (hr_tz_check); the name rules
         * first, so a path never reaches it. */
        if (!cJSON_IsNull(v) && (!cJSON_IsString(v) || !hr_tz_name_ok(v->valuestring)))
            return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                  "%s must be an IANA time zone name like Europe/Berlin, or null",
                                  fd->name);
        break;
    case DSP_F_TOD:
        if (!cJSON_IsNull(v) &&
            (!cJSON_IsString(v) ||
             hr_parse_time_of_day(fd->name, v->valuestring, ms, errstr, errlen) < 0))
            return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                  "%s must be a time of day as HH:MM or HH:MM:SS, or null",
                                  fd->name);
        break;
    }
    return 0;
}

/* A checked local-time / window member V (its time of day in MS) into T;
 * null clears a zone or a window bound. */
static void dsp_api_parse_local(const char *name, const cJSON *v, int64_t ms, hr_task *t)
{
    char *zone = cJSON_IsString(v) ? v->valuestring : NULL;

    if (strcmp(name, "local_time") == 0)
        t->local_time = cJSON_IsTrue(v);
    else if (strcmp(name, "default_tz") == 0)
        t->default_tz = zone;
    else if (strcmp(name, "window_tz") == 0)
        t->window_tz = zone;
    else if (strcmp(name, "window_start") == 0)
        t->window_start_s = cJSON_IsNull(v) ? -1 : ms;
    else
        t->window_end_s = cJSON_IsNull(v) ? -1 : ms;
    t->window = t->window_start_s >= 0 || t->window_end_s >= 0;
}

void dsp_api_input_clear(dsp_api_input *in)
{
    free(in->t.payload);
    free(in->t.rich);
    in->t.payload = in->t.rich = NULL;
}

int dsp_api_parse_task(const cJSON *j, bool patch, dsp_api_input *in, const char **code,
                       char *errstr, size_t errlen)
{
    const cJSON *v;
    size_t f, nf = sizeof dsp_api_fields / sizeof dsp_api_fields[0];

    cJSON_ArrayForEach(v, j)
    {
        const struct dsp_api_field *fd = NULL;
        int64_t ms = -1;

        for (f = 0; f < nf; f++)
            if (strcmp(dsp_api_fields[f].name, v->string) == 0)
                fd = &dsp_api_fields[f];
        if (fd == NULL || (patch && !fd->patch))
            return dsp_api_refuse(
                code, "unknown_field", errstr, errlen, "unknown field '%s'%s", v->string,
                fd != NULL ? " (PATCH changes title, body, payload, due_at, ttl, collapse_key, "
                             "priority, local_time, default_tz, the window, finish_by and "
                             "event_at)"
                           : "");
        if (fd->nullable && cJSON_IsNull(v)) {
            if (strcmp(fd->name, "ttl") == 0)
                in->t.ttl_s = -1;
            else if (strcmp(fd->name, "event_at") == 0)
                in->t.event_ms = -1;
            else
                in->t.collapse_key = NULL;
            continue;
        }
        if (dsp_api_field_check(fd, v, &ms, code, errstr, errlen) < 0)
            return -1;
        if (strcmp(fd->name, "name") == 0)
            in->t.name = v->valuestring;
        else if (strcmp(fd->name, "topic") == 0)
            in->t.topic = v->valuestring;
        else if (strcmp(fd->name, "channel") == 0)
            in->t.channel = v->valuestring;
        else if (strcmp(fd->name, "title") == 0)
            in->t.title = v->valuestring;
        else if (strcmp(fd->name, "body") == 0)
            in->t.body = v->valuestring;
        else if (strcmp(fd->name, "payload") == 0) {
            /* The numbers as the client wrote them (a double rounds past
             * 2^53); repeated members were refused by the JSON parser. */
            free(in->t.payload);
            hr_parse_json_exact((cJSON *)v);
            in->t.payload = cJSON_PrintUnformatted(v);
        } else if (strcmp(fd->name, "rich") == 0) {
            free(in->t.rich);
            in->t.rich = cJSON_PrintUnformatted(v);
        } else if (strcmp(fd->name, "due_at") == 0) {
            in->t.due_ms = ms;
            in->has_due = true;
        } else if (strcmp(fd->name, "freeze_at") == 0) {
            in->t.freeze_ms = ms;
            in->has_freeze = true;
        } else if (strcmp(fd->name, "rate_limit") == 0)
            in->t.rate_limit = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "chunk_size") == 0)
            in->t.chunk_size = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "throttle_limit") == 0)
            in->t.throttle_limit = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "throttle_window_s") == 0)
            in->t.throttle_window_s = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "throttle_scope") == 0)
            in->t.throttle_scope = v->valuestring;
        else if (strcmp(fd->name, "throttle_key") == 0)
            in->t.throttle_key = v->valuestring;
        else if (strcmp(fd->name, "throttle_mode") == 0)
            in->t.throttle_mode = v->valuestring;
        else if (strcmp(fd->name, "ttl") == 0) {
            /* -1 is the in-memory NULL; a client's negative is refused. */
            if (v->valuedouble < 0)
                return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                      "ttl must be 0..%d seconds", HR_TASK_MAX_TTL_S);
            in->t.ttl_s = (int64_t)v->valuedouble;
        } else if (strcmp(fd->name, "collapse_key") == 0)
            in->t.collapse_key = v->valuestring;
        else if (strcmp(fd->name, "expire_at") == 0) {
            /* 0 is the in-memory "never": 1970 is before any due_at. */
            if (ms <= 0)
                return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                      "expire_at must be after due_at");
            in->t.expire_ms = ms;
        } else if (strcmp(fd->name, "expire_in") == 0) {
            if (v->valuedouble < 1)
                return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                      "expire_in must be at least 1 second");
            in->expire_in_s = (int64_t)v->valuedouble;
        } else if (strcmp(fd->name, "finish_by") == 0) {
            in->t.finish_ms = ms;
        } else if (strcmp(fd->name, "event_at") == 0) {
            /* <= 0 is the in-memory "none" (hr_task_leads). */
            if (ms <= 0)
                return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                      "event_at must be after 1970-01-01T00:00:00Z");
            in->t.event_ms = ms;
        } else if (strcmp(fd->name, "category") == 0) {
            in->t.category = v->valuestring;
        } else if (strcmp(fd->name, "shards") == 0) {
            in->t.shards = (int64_t)v->valuedouble;
        } else if (strcmp(fd->name, "expected_recipients") == 0) {
            if (v->valuedouble < 1)
                return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                      "expected_recipients must be at least 1");
            in->expected = (int64_t)v->valuedouble;
        } else if (strcmp(fd->name, "priority") == 0 &&
                   hr_priority_parse(v->valuestring, &in->t.priority) < 0)
            return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                  "priority must be high or normal");
        else if (fd->kind == DSP_F_BOOL || fd->kind == DSP_F_ZONE || fd->kind == DSP_F_TOD)
            dsp_api_parse_local(fd->name, v, ms, &in->t);
    }
    if (in->t.throttle_mode != NULL && strcmp(in->t.throttle_mode, "enforce") != 0 &&
        strcmp(in->t.throttle_mode, "shadow") != 0)
        return dsp_api_refuse(code, "bad_field", errstr, errlen,
                              "throttle_mode must be enforce or shadow");
    if (!patch && (in->t.name == NULL || in->t.channel == NULL || !in->has_due))
        return dsp_api_refuse(code, "missing_field", errstr, errlen,
                              "name, channel and due_at are required");
    if (in->expire_in_s > 0) {
        if (in->t.expire_ms > 0)
            return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                  "give one of expire_at and expire_in");
        in->t.expire_ms = in->t.due_ms + in->expire_in_s * 1000;
    }
    if (in->expected > 0) {
        if (in->t.shards != 1)
            return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                  "give one of shards and expected_recipients");
        in->t.shards = hr_shard_for_size(in->expected);
    }
    /* A task frozen only after its due time never shows in the pull on its
     * day (the pull serves frozen tasks). */
    if (in->has_freeze && in->t.freeze_ms > in->t.due_ms)
        return dsp_api_refuse(code, "bad_field", errstr, errlen,
                              "freeze_at must not be after due_at");
    return 0;
}

/* ---- subscribers ---------------------------------------------------------- */

int dsp_api_parse_uids(const cJSON *j, int max_ids, int64_t **uids_out, size_t *n, int64_t *lead_s,
                       const char **code, char *errstr, size_t errlen)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "uids"), *v;
    size_t i = 0, count;
    int64_t *uids;

    *uids_out = NULL;
    *lead_s = -1;
    cJSON_ArrayForEach(v, j)
    {
        if (strcmp(v->string, "lead_s") == 0) {
            /* push_subscription.lead_s is an INT; after the event is no lead. */
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= INT32_MAX) ||
                v->valuedouble != (double)(int32_t)v->valuedouble)
                return dsp_api_refuse(code, "bad_field", errstr, errlen,
                                      "lead_s must be an integer 0..%d (seconds before the "
                                      "task's event_at)",
                                      INT32_MAX);
            *lead_s = (int64_t)v->valuedouble;
        } else if (strcmp(v->string, "uids") != 0)
            return dsp_api_refuse(code, "unknown_field", errstr, errlen, "unknown field '%s'",
                                  v->string);
    }
    if (!cJSON_IsArray(list) || (count = (size_t)cJSON_GetArraySize(list)) == 0)
        return dsp_api_refuse(code, "bad_field", errstr, errlen, "uids must be a non-empty array");
    if (count > (size_t)max_ids)
        return dsp_api_refuse(code, "too_many_ids", errstr, errlen,
                              "%zu uids in one request; at most %d", count, max_ids);
    if ((uids = malloc(count * sizeof *uids)) == NULL)
        return dsp_api_refuse(code, "bad_field", errstr, errlen, "out of memory");
    cJSON_ArrayForEach(v, list)
    {
        if (hr_parse_json_uid(v, &uids[i]) < 0) {
            free(uids);
            return dsp_api_refuse(code, "bad_id", errstr, errlen,
                                  "uids[%zu] is not an integer in 1..9223372036854775807 "
                                  "(a JSON number without fraction or exponent, or its "
                                  "decimal string)",
                                  i);
        }
        i++;
    }
    *uids_out = uids;
    *n = count;
    return 0;
}

/* ---- addresses ------------------------------------------------------------ */

/* A webpush address given as the browser's PushSubscription JSON SUB:
 * its address (hr_wpsub.h) added to J as "address" (J holds it from then
 * on, so OUT's strings still point into J). */
static int dsp_api_parse_subscription(cJSON *j, const cJSON *sub, const char *what, hr_addr *out,
                                      const char **code, char *errstr, size_t errlen)
{
    hr_buf text;
    const cJSON *added;
    char why[200];
    int rc;

    if (out->platform != HR_ADDR_WEBPUSH || out->address != NULL || !cJSON_IsObject(sub))
        return dsp_api_refuse(code, "bad_field", errstr, errlen,
                              "%s%ssubscription (a PushSubscription object) is for platform "
                              "webpush, instead of address",
                              what, *what ? "." : "");
    hr_buf_init(&text, HR_ADDR_ADDRESS_MAX);
    rc = hr_wpsub_from_json(sub, &text, why, sizeof why);
    added = rc == 0 ? cJSON_AddStringToObject(j, "address", text.data) : NULL;
    hr_buf_free(&text);
    if (rc != 0)
        return dsp_api_refuse(code, "invalid_address", errstr, errlen, "%s%ssubscription: %s", what,
                              *what ? "." : "", why);
    if (added == NULL)
        return dsp_api_refuse(code, "bad_field", errstr, errlen, "out of memory");
    out->address = added->valuestring;
    return 0;
}

int dsp_api_parse_address(cJSON *j, const char *what, hr_addr *out, const char **code, char *errstr,
                          size_t errlen)
{
    const cJSON *v, *sub = NULL;
    char why[200];
    int rc;

    *out = (hr_addr){.app = "", .platform = HR_ADDR__COUNT};
    if (!cJSON_IsObject(j))
        return dsp_api_refuse(code, "bad_field", errstr, errlen, "%s must be a JSON object", what);
    cJSON_ArrayForEach(v, j)
    {
        const char **field = strcmp(v->string, "app") == 0       ? &out->app
                             : strcmp(v->string, "address") == 0 ? &out->address
                                                                 : NULL;

        if (strcmp(v->string, "subscription") == 0) {
            sub = v;
            continue;
        }
        if (strcmp(v->string, "platform") != 0 && field == NULL)
            return dsp_api_refuse(code, "unknown_field", errstr, errlen,
                                  "unknown field '%s%s%s' (platform, app, address, subscription)",
                                  what, *what ? "." : "", v->string);
        if (!cJSON_IsString(v))
            return dsp_api_refuse(code, "bad_field", errstr, errlen, "%s%s%s must be a string",
                                  what, *what ? "." : "", v->string);
        if (field != NULL)
            *field = v->valuestring;
        else if (hr_addr_platform_parse(v->valuestring, &out->platform) != 0)
            return dsp_api_refuse(code, "invalid_address", errstr, errlen,
                                  "%s%splatform must be fcm, apns, email, webhook or webpush", what,
                                  *what ? "." : "");
    }
    if (sub != NULL && dsp_api_parse_subscription(j, sub, what, out, code, errstr, errlen) < 0)
        return -1;
    if (out->platform == HR_ADDR__COUNT || out->address == NULL)
        return dsp_api_refuse(code, "missing_field", errstr, errlen,
                              "%s%splatform and address are required", what, *what ? " " : "");
    rc = hr_addr_check(out->platform, out->app, out->address, why, sizeof why);
    if (rc != 0)
        return dsp_api_refuse(code, "invalid_address", errstr, errlen, "%s%s%s", what,
                              *what ? "." : "", why);
    return 0;
}

int dsp_api_parse_addresses(cJSON *j, hr_addr **out, size_t *n, const char **code, char *errstr,
                            size_t errlen)
{
    cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "addresses"), *v;
    size_t i = 0, count;
    hr_addr *a;

    *out = NULL;
    *n = 0;
    cJSON_ArrayForEach(v, j)
    {
        if (strcmp(v->string, "addresses") != 0)
            return dsp_api_refuse(code, "unknown_field", errstr, errlen, "unknown field '%s'",
                                  v->string);
    }
    if (!cJSON_IsArray(list))
        return dsp_api_refuse(code, "bad_field", errstr, errlen,
                              "addresses must be an array (empty: remove every address)");
    count = (size_t)cJSON_GetArraySize(list);
    if (count > HR_ADDR_PER_UID_MAX)
        return dsp_api_refuse(code, "too_many_addresses", errstr, errlen,
                              "%zu addresses; a uid holds at most %d", count, HR_ADDR_PER_UID_MAX);
    if (count == 0)
        return 0;
    if ((a = malloc(count * sizeof *a)) == NULL)
        return dsp_api_refuse(code, "bad_field", errstr, errlen, "out of memory");
    cJSON_ArrayForEach(v, list)
    {
        char what[32];

        snprintf(what, sizeof what, "addresses[%zu]", i);
        if (dsp_api_parse_address(v, what, &a[i], code, errstr, errlen) < 0) {
            free(a);
            return -1;
        }
        i++;
    }
    *out = a;
    *n = count;
    return 0;
}

/* ---- query parameters ----------------------------------------------------- */

int dsp_api_parse_list(const char *state, const char *limit_s, long *limit, const char **code,
                       char *errstr, size_t errlen)
{
    hr_task_state known;
    char *end;

    if (state != NULL && hr_state_parse(state, &known) < 0)
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

int dsp_api_parse_page(const char *before_s, const char *q, int64_t *before, const char **code,
                       char *errstr, size_t errlen)
{
    *before = INT64_MAX;
    if (before_s != NULL && dsp_api_parse_id(before_s, "before", before, code, errstr, errlen) < 0)
        return dsp_api_coded(code, "bad_query");
    if (q != NULL && (strlen(q) > DSP_API_Q_MAX || !hr_utf8_valid(q, strlen(q))))
        return dsp_api_refuse(code, "bad_query", errstr, errlen,
                              "q must be UTF-8 text of at most %d bytes", DSP_API_Q_MAX);
    return 0;
}

int dsp_api_parse_pull(const char *date, const char *ack_s, int64_t now_s, int64_t *day, bool *ack,
                       const char **code, char *errstr, size_t errlen)
{
    if (date == NULL)
        *day = (now_s - now_s % 86400) * 1000;
    else if (hr_parse_date("date", date, day, errstr, errlen) < 0)
        return dsp_api_coded(code, "bad_query");
    *ack = ack_s != NULL && strcmp(ack_s, "1") == 0;
    if (ack_s != NULL && !*ack && strcmp(ack_s, "0") != 0)
        return dsp_api_refuse(code, "bad_query", errstr, errlen, "ack must be 0 or 1");
    return 0;
}
