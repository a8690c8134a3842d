/* wk_provider: the verdict setters shared by the provider modules. */
#include "wk_provider.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Appends the LEN bytes at S to OUT's reason at *AT, as far as they fit. */
static void wk_provider_put(wk_provider_result *out, size_t *at, const char *s, size_t len)
{
    size_t room = sizeof out->reason - 1 - *at;

    if (len > room)
        len = room;
    memcpy(out->reason + *at, s, len);
    *at += len;
}

/* Written by hand, not with snprintf: a reason is set for every answer,
 * most of them deliveries, where printf's machinery was a measurable part
 * of a push (docs/performance.md, issue 19). */
void wk_provider_reason(wk_provider_result *out, const char *prefix, long status, const char *code)
{
    char digits[HR_BUF_I64_MAX];
    size_t n = hr_buf_i64(status, digits), at = 0;

    wk_provider_put(out, &at, prefix, strlen(prefix));
    wk_provider_put(out, &at, digits, n);
    if (code != NULL && *code != '\0') {
        wk_provider_put(out, &at, " ", 1);
        wk_provider_put(out, &at, code, strlen(code));
    }
    out->reason[at] = '\0';
}

void wk_provider_set(wk_provider_result *out, wk_verdict verdict, long status, const char *code)
{
    out->verdict = verdict;
    out->retry_after_s = -1;
    wk_provider_reason(out, "", status, code);
}

void wk_provider_classify_http(long status, long retry_after_s, const char *code,
                               wk_provider_result *out)
{
    if (status == 429 || (status == 503 && retry_after_s >= 0)) {
        wk_provider_set(out, WK_VERDICT_SLOWDOWN, status, code);
        out->retry_after_s = retry_after_s;
    } else if (status >= 500 && status <= 599) {
        wk_provider_set(out, WK_VERDICT_RETRY, status, code);
    } else {
        wk_provider_set(out, WK_VERDICT_FAILED, status, code);
    }
}

long wk_provider_retry_after(const char *value, size_t len, int64_t now_s)
{
    char tmp[64];
    char *end;
    long v;

    if (len >= sizeof tmp)
        len = sizeof tmp - 1;
    memcpy(tmp, value, len);
    tmp[len] = '\0';
    errno = 0;
    v = strtol(tmp, &end, 10);
    /* Not a number: an HTTP-date (curl_getdate reads RFC 1123 and its
     * older forms).  Clamped here, so no overflow later. */
    if (end == tmp) {
        time_t at = curl_getdate(tmp, NULL);

        v = at > 0 ? (long)((int64_t)at - now_s) : 0;
    }
    if (v < 0)
        v = 0;
    else if (errno == ERANGE || v > WK_PROVIDER_RETRY_AFTER_MAX_S)
        v = WK_PROVIDER_RETRY_AFTER_MAX_S;
    return v;
}

long wk_provider_json_print(const cJSON *item, char text[WK_PROVIDER_JSON_TEXT])
{
    size_t n;

    if (!cJSON_PrintPreallocated((cJSON *)item, text, WK_PROVIDER_JSON_TEXT, false) ||
        (n = strlen(text)) > WK_PROVIDER_JSON_MAX)
        return -1;
    return (long)n;
}
