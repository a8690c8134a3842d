/* wk_provider: the verdict setters shared by the provider modules. */
#include "wk_provider.h"

#include <stdio.h>

void wk_provider_set(wk_provider_result *out, wk_verdict verdict, long status, const char *code)
{
    out->verdict = verdict;
    out->retry_after_s = -1;
    snprintf(out->reason, sizeof out->reason, "%ld%s%s", status, code && *code ? " " : "",
             code ? code : "");
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
