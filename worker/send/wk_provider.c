/* wk_provider: the verdict setters shared by the provider modules. */
#include "wk_provider.h"

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
    char digits[24];
    unsigned long u = status < 0 ? 0 - (unsigned long)status : (unsigned long)status;
    size_t n = sizeof digits, at = 0;

    do {
        digits[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (status < 0)
        digits[--n] = '-';
    wk_provider_put(out, &at, prefix, strlen(prefix));
    wk_provider_put(out, &at, digits + n, sizeof digits - n);
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
