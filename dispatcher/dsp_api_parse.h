/* dsp_api_parse: the API's request parsing, shared by every handler.
 * Pure: no backend, request or response, so tests/fuzz/fuzz_api_request.c
 * runs it without servers.  Each parser returns 0, or -1 with the error
 * code of docs/api.md in *CODE (static) and the message in ERRSTR; the
 * handler answers 400 with both. */
#ifndef DSP_API_PARSE_H
#define DSP_API_PARSE_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "hr_addr.h"
#include "hr_task.h"

/* S (NULL: absent) as a positive integer below 2^63; NAME is for the message. */
int dsp_api_parse_id(const char *s, const char *name, int64_t *out, const char **code, char *errstr,
                     size_t errlen);
/* BODY (LEN bytes) as a UTF-8 JSON object into *OUT (the caller's, freed
 * with cJSON_Delete) through hr_parse_json: a member named twice anywhere
 * is refused with duplicate_field, numbers keep their literal text. */
int dsp_api_parse_json(const char *body, size_t len, cJSON **out, const char **code, char *errstr,
                       size_t errlen);

/* The values of a task request, pointing into its cJSON (payload: owned,
 * freed by the caller whatever the parser returned). */
typedef struct dsp_api_input {
    hr_task t;
    bool has_due, has_freeze;
    int64_t expire_in_s; /* expiry: "expire_in", 0 = not given; sets t.expire_ms */
    int64_t expected;    /* "expected_recipients", 0 = not given; sets t.shards */
} dsp_api_input;

/* The members of body J of POST /v1/tasks (PATCH: only title, body,
 * payload and due_at) into IN, which starts with the defaults or the stored
 * task.  POST also needs name, channel and due_at, refuses freeze_at
 * after due_at, and turns expire_in (seconds after due_at) into
 * t.expire_ms (not with expire_at); name, topic, channel, throttle_scope and throttle_key must
 * not be empty (hr_parse_name).  The values are not
 * checked against the config: that is hr_task_validate's job. */
int dsp_api_parse_task(const cJSON *j, bool patch, dsp_api_input *in, const char **code,
                       char *errstr, size_t errlen);
/* Frees what dsp_api_parse_task allocated into IN (the payload and rich
 * texts it printed); the other strings point into the request's JSON. */
void dsp_api_input_clear(dsp_api_input *in);
/* A time string of hr_parse_time (RFC 3339 UTC, a real calendar time) or
 * epoch ms, 1970..9999, into *MS; 0, or -1 with ERRSTR naming WHAT. */
int dsp_api_parse_time(const cJSON *v, const char *what, int64_t *ms, char *errstr, size_t errlen);
/* Body J of POST .../subscribers: {"uids": [...], "lead_s": N}, 1..MAX_IDS
 * uids in 1..2^63-1, each a JSON integer literal or its decimal string
 * (hr_parse_json_uid: exact, not through a double), into *UIDS (malloc'd,
 * the caller frees it) of *N; the optional lead (0..2^31-1 seconds) into
 * *LEAD_S, -1 when absent. */
int dsp_api_parse_uids(const cJSON *j, int max_ids, int64_t **uids, size_t *n, int64_t *lead_s,
                       const char **code, char *errstr, size_t errlen);
/* One address {"platform", "app" (default ""), "address"} into *OUT (its
 * strings point into J), checked with hr_addr_check (invalid_address);
 * WHAT names it in messages ("" for a whole body, "addresses[2]").  A
 * webpush address may come as "subscription": the browser's
 * PushSubscription object instead of "address" (hr_wpsub_from_json; its
 * address is added to J). */
int dsp_api_parse_address(cJSON *j, const char *what, hr_addr *out, const char **code, char *errstr,
                          size_t errlen);
/* Body J of PUT .../addresses: {"addresses": [...]}, 0..HR_ADDR_PER_UID_MAX
 * addresses of dsp_api_parse_address into *OUT (malloc'd, the caller frees
 * it; NULL when none) of *N. */
int dsp_api_parse_addresses(cJSON *j, hr_addr **out, size_t *n, const char **code, char *errstr,
                            size_t errlen);
/* GET /v1/tasks ?state= and ?limit= (NULL: absent) into *LIMIT. */
int dsp_api_parse_list(const char *state, const char *limit_s, long *limit, const char **code,
                       char *errstr, size_t errlen);
/* GET /v1/tasks ?before= (NULL: absent, *BEFORE = INT64_MAX) as a task id
 * and ?q= (NULL: absent; at most 200 bytes of UTF-8). */
int dsp_api_parse_page(const char *before_s, const char *q, int64_t *before, const char **code,
                       char *errstr, size_t errlen);
/* The pull's ?date=YYYY-MM-DD (NULL: the UTC day of NOW_S) as the day's
 * first ms, and ?ack=0|1. */
int dsp_api_parse_pull(const char *date, const char *ack_s, int64_t now_s, int64_t *day, bool *ack,
                       const char **code, char *errstr, size_t errlen);
/* "2024-05-01T08:00:00.000Z" into BUF (33 bytes). */
void dsp_api_time(int64_t ms, char *buf, size_t len);

#endif
