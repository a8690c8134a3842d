/* fuzz_api_request: the dispatcher API's request parsing
 * (dispatcher/dsp_api_parse.c) on arbitrary bytes, without servers.
 *
 * Input: byte 0 picks the request (its value mod 6), the rest is its text:
 *   0 POST /v1/tasks body, 1 PATCH /v1/tasks/{id} body (over a stored
 *   task), 2 POST .../subscribers body, 3 a path id, 4 GET /v1/tasks
 *   "state\nlimit" (and the same two as "before\nq"), 5 the pull's "date\nack" (query texts: a part that is
 *   missing, i.e. no '\n', is an absent parameter; bit 3 of byte 0 drops
 *   the first one).
 * Besides what the sanitizers catch, it checks the parsers' contract: a
 * refusal carries one of the documented codes and a message; an accepted
 * task has every string within its column (names non-empty), times in
 * 1970..9999 that print and parse back to the same ms, freeze_at not after
 * due_at, a payload that is a JSON object, and (PATCH)
 * every non-patchable field untouched; accepted uids are exact integers in
 * 1..2^63-1 that print back as the literal (or string) sent, at most max_ids; an accepted id prints back as the same text;
 * accepted list limits are 1..1000, a page's before is positive and its q
 * at most 200 bytes; an accepted day starts at midnight.
 * An accepted POST task then goes through hr_task_validate with a one-
 * channel config, as the handler does. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_api_parse.h"
#include "hr_parse.h"
#include "hr_template.h" /* hr_utf8_valid */

#define FA_MAX_IDS 50
#define FA_CONFIG                                          \
    "channels:\n  ok:\n    url: http://127.0.0.1:9/push\n" \
    "    body: '{\"t\":\"{{title}}\",\"u\":\"{{payload.who}}\"}'\n"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fa_fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_api_request: %s (%s)\n", what, detail != NULL ? detail : "");
    abort();
}

/* A refusal: a known code and a non-empty message. */
static void fa_refused(const char *code, const char *err, const char *const *codes)
{
    for (; *codes != NULL; codes++)
        if (code != NULL && strcmp(code, *codes) == 0) {
            if (err[0] == '\0')
                fa_fail("refusal without a message", code);
            return;
        }
    fa_fail("unexpected error code", code);
}

/* What the utf8mb4 column takes: at most MAX bytes of valid UTF-8. */
static void fa_str_max(const char *s, size_t max, const char *name)
{
    if (s != NULL && strlen(s) > max)
        fa_fail("string longer than its column", name);
    if (s != NULL && !hr_utf8_valid(s, strlen(s)))
        fa_fail("string is not valid UTF-8", name);
}

/* MS prints as RFC 3339 and parses back to itself. */
static void fa_time_roundtrip(int64_t ms)
{
    char buf[40], err[256];
    cJSON *s;
    int64_t back = -1;

    if (ms < 0 || ms >= 253402300800000LL)
        fa_fail("time out of 1970..9999", NULL);
    dsp_api_time(ms, buf, sizeof buf);
    s = cJSON_CreateString(buf);
    if (s == NULL)
        return;
    if (dsp_api_parse_time(s, "t", &back, err, sizeof err) < 0 || back != ms)
        fa_fail("time does not parse back", buf);
    cJSON_Delete(s);
}

static const hr_config *fa_config(void)
{
    static hr_config *cfg;
    char err[256];

    if (cfg == NULL &&
        hr_config_load_buffer("fuzz.yaml", FA_CONFIG, strlen(FA_CONFIG), &cfg, err, sizeof err) < 0)
        fa_fail("the fuzzer's config does not load", err);
    return cfg;
}

static void fa_task(const char *body, size_t len, bool patch)
{
    static const char *const codes[] = {"malformed_json", "duplicate_field", "unknown_field",
                                        "bad_field",      "missing_field",   NULL};
    const hr_task stored = {.id = 7,
                            .name = "n",
                            .topic = "t",
                            .channel = "ok",
                            .title = "x",
                            .body = "y",
                            .due_ms = 1000,
                            .freeze_ms = -1,
                            .finish_ms = -1,
                            .chunk_size = 10,
                            .rate_limit = 3,
                            .control = HR_CONTROL_RUN,
                            .state = HR_STATE_SCHEDULED};
    dsp_api_input in = {0};
    const char *code = NULL;
    char err[1024] = "";
    cJSON *j = NULL, *payload;

    hr_task_defaults(&in.t); /* what POST starts from */
    if (patch) {
        in.t = stored;
        in.has_due = false;
    }
    if (dsp_api_parse_json(body, len, &j, &code, err, sizeof err) < 0) {
        if (j != NULL)
            fa_fail("refused JSON left an object", NULL);
        fa_refused(code, err, codes);
        return;
    }
    if (dsp_api_parse_task(j, patch, &in, &code, err, sizeof err) < 0) {
        fa_refused(code, err, codes);
        goto done;
    }
    fa_str_max(in.t.name, 200, "name");
    fa_str_max(in.t.topic, 100, "topic");
    fa_str_max(in.t.channel, 64, "channel");
    fa_str_max(in.t.title, 65535, "title");
    fa_str_max(in.t.body, 65535, "body");
    fa_str_max(in.t.throttle_scope, 100, "throttle_scope");
    fa_str_max(in.t.throttle_key, 100, "throttle_key");
    if (in.t.throttle_mode != NULL && strcmp(in.t.throttle_mode, "enforce") != 0 &&
        strcmp(in.t.throttle_mode, "shadow") != 0)
        fa_fail("throttle_mode accepted", in.t.throttle_mode);
    if (in.has_due || patch)
        fa_time_roundtrip(in.t.due_ms);
    if (in.has_freeze)
        fa_time_roundtrip(in.t.freeze_ms);
    if (in.t.payload != NULL) {
        payload = cJSON_Parse(in.t.payload);
        if (!cJSON_IsObject(payload))
            fa_fail("payload is not an object", in.t.payload);
        cJSON_Delete(payload);
    }
    if (patch) {
        if (in.t.name != stored.name || in.t.topic != stored.topic ||
            in.t.channel != stored.channel || in.t.chunk_size != stored.chunk_size ||
            in.t.rate_limit != stored.rate_limit || in.t.freeze_ms != stored.freeze_ms ||
            in.t.throttle_mode != NULL || in.has_freeze)
            fa_fail("PATCH changed a field it may not", NULL);
    } else {
        if (in.t.name == NULL || in.t.channel == NULL || !in.has_due)
            fa_fail("POST accepted without a required field", NULL);
        if (in.t.name[0] == '\0' || in.t.topic[0] == '\0' || in.t.channel[0] == '\0' ||
            (in.t.throttle_key != NULL && in.t.throttle_key[0] == '\0') ||
            (in.t.throttle_scope != NULL && in.t.throttle_scope[0] == '\0'))
            fa_fail("POST accepted an empty name", NULL);
        if (in.has_freeze && in.t.freeze_ms > in.t.due_ms)
            fa_fail("POST accepted freeze_at after due_at", NULL);
        if (in.t.throttle_scope == NULL)
            in.t.throttle_scope = in.t.topic;
        /* Either answer is fine; it must not crash or leak. */
        hr_task_validate(&in.t, fa_config(), err, sizeof err);
    }
done:
    dsp_api_input_clear(&in);
    cJSON_Delete(j);
}

static void fa_uids(const char *body, size_t len)
{
    static const char *const codes[] = {"malformed_json",
                                        "duplicate_field",
                                        "unknown_field",
                                        "bad_field",
                                        "too_many_ids",
                                        "bad_id",
                                        NULL};
    int64_t *list = NULL;
    const char *code = NULL;
    char err[1024] = "";
    cJSON *j = NULL;
    size_t n = 0, i;
    int64_t lead_s = -1;

    if (dsp_api_parse_json(body, len, &j, &code, err, sizeof err) < 0) {
        fa_refused(code, err, codes);
        return;
    }
    if (dsp_api_parse_uids(j, FA_MAX_IDS, &list, &n, &lead_s, &code, err, sizeof err) < 0) {
        fa_refused(code, err, codes);
    } else {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "uids"), *v;
        char back[24];

        if (n < 1 || n > FA_MAX_IDS || (size_t)cJSON_GetArraySize(arr) != n)
            fa_fail("uid count out of 1..max_ids", NULL);
        /* A lead is absent or a column's INT, never negative. */
        if (lead_s < -1 || lead_s > INT32_MAX ||
            (lead_s == -1) != (cJSON_GetObjectItemCaseSensitive(j, "lead_s") == NULL))
            fa_fail("lead_s accepted", NULL);
        i = 0;
        cJSON_ArrayForEach(v, arr)
        {
            const char *text = cJSON_IsString(v) ? v->valuestring : hr_parse_json_literal(v);

            /* Exact: the uid prints back as the text the client sent. */
            snprintf(back, sizeof back, "%lld", (long long)list[i]);
            if (list[i] < 1 || text == NULL || strcmp(back, text) != 0)
                fa_fail("uid accepted", text);
            i++;
        }
    }
    free(list);
    cJSON_Delete(j);
}

static void fa_id(const char *s)
{
    static const char *const codes[] = {"bad_id", NULL};
    const char *code = NULL;
    char err[1024] = "", back[24];
    int64_t id = 0;

    if (dsp_api_parse_id(s, "id", &id, &code, err, sizeof err) < 0) {
        fa_refused(code, err, codes);
        return;
    }
    snprintf(back, sizeof back, "%lld", (long long)id);
    if (id <= 0 || strcmp(back, s) != 0)
        fa_fail("id does not print back", s);
}

static void fa_query(int kind, const char *first, const char *second)
{
    static const char *const codes[] = {"bad_query", NULL};
    const char *code = NULL;
    char err[1024] = "";
    long limit = 0;
    int64_t day = 1;
    bool ack = false;

    if (kind == 4) {
        if (dsp_api_parse_list(first, second, &limit, &code, err, sizeof err) < 0)
            fa_refused(code, err, codes);
        else if (limit < 1 || limit > 1000)
            fa_fail("list limit out of 1..1000", second);
        /* The same two strings as ?before= and ?q=. */
        if (dsp_api_parse_page(first, second, &day, &code, err, sizeof err) < 0)
            fa_refused(code, err, codes);
        else if (day <= 0 || (second != NULL && strlen(second) > 200))
            fa_fail("page before not positive or q over 200 bytes", first);
        return;
    }
    if (dsp_api_parse_pull(first, second, 1714550400 + 12345, &day, &ack, &code, err, sizeof err) <
        0)
        fa_refused(code, err, codes);
    else if (day % 86400000 != 0 || ack != (second != NULL && strcmp(second, "1") == 0))
        fa_fail("pull day not at midnight or ack wrong", first);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text, *first, *second, *nl;
    int kind;

    if (size == 0)
        return 0;
    kind = data[0] % 6;
    /* The parsers get exactly the bytes after the selector; the copy adds
     * the NUL the string parsers need. */
    text = malloc(size);
    if (text == NULL)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    switch (kind) {
    case 0:
    case 1:
        fa_task(text, size - 1, kind == 1);
        break;
    case 2:
        fa_uids(text, size - 1);
        break;
    case 3:
        fa_id(text);
        break;
    default:
        first = text;
        nl = strchr(text, '\n');
        second = nl != NULL ? nl + 1 : NULL;
        if (nl != NULL)
            *nl = '\0';
        fa_query(kind, (data[0] & 8) != 0 ? NULL : first, second);
        break;
    }
    free(text);
    return 0;
}
