/* wk_batch: a batched webhook's answer, per recipient (see wk_batch.h).
 * The body is parsed once per request (cJSON); each recipient's entry is
 * checked when its verdict is asked for, after the whole array was
 * checked once, so a garbled entry anywhere makes the whole answer
 * garbled. */
#include "wk_batch.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#define WK_BATCH_PREFIX "batch: "

/* Whether ENTRY is {"status": "ok"|"error", ...}. */
static bool wk_batch_entry_ok(const cJSON *entry)
{
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(entry, "status");

    return cJSON_IsObject(entry) && cJSON_IsString(status) &&
           (strcmp(status->valuestring, "ok") == 0 || strcmp(status->valuestring, "error") == 0);
}

int wk_batch_answer_read(wk_batch_answer *a, const char *body, size_t len, size_t n)
{
    const cJSON *results, *entry;
    size_t i = 0;

    *a = (wk_batch_answer){.n = n};
    a->root = cJSON_ParseWithLength(body != NULL ? body : "", len);
    results = cJSON_GetObjectItemCaseSensitive(a->root, "results");
    if (a->root == NULL) {
        snprintf(a->error, sizeof a->error, "not JSON");
        return -1;
    }
    if (!cJSON_IsArray(results)) {
        snprintf(a->error, sizeof a->error, "no \"results\" array");
        return -1;
    }
    cJSON_ArrayForEach(entry, results)
    {
        if (i == n) {
            snprintf(a->error, sizeof a->error, "more results than the %zu recipients", n);
            return -1;
        }
        if (!wk_batch_entry_ok(entry)) {
            snprintf(a->error, sizeof a->error,
                     "result %zu is not {\"status\": \"ok\" | \"error\"}", i);
            return -1;
        }
        i++;
    }
    a->results = results;
    a->next = results->child;
    return 0;
}

void wk_batch_answer_next(wk_batch_answer *a, wk_provider_result *out)
{
    const cJSON *entry = a->next, *error, *retry;

    out->retry_after_s = -1;
    if (entry != NULL)
        a->next = entry->next;
    if (entry == NULL) {
        out->verdict = WK_VERDICT_RETRY;
        snprintf(out->reason, sizeof out->reason, "batch answer: %s",
                 a->results == NULL ? a->error : "no result");
        return;
    }
    if (strcmp(cJSON_GetObjectItemCaseSensitive(entry, "status")->valuestring, "ok") == 0) {
        wk_provider_set(out, WK_VERDICT_DELIVERED, 200, NULL);
        return;
    }
    error = cJSON_GetObjectItemCaseSensitive(entry, "error");
    retry = cJSON_GetObjectItemCaseSensitive(entry, "retry");
    out->verdict = cJSON_IsTrue(retry) ? WK_VERDICT_RETRY : WK_VERDICT_FAILED;
    snprintf(out->reason, sizeof out->reason, WK_BATCH_PREFIX "%.100s",
             cJSON_IsString(error) ? error->valuestring : "error");
}

void wk_batch_answer_free(wk_batch_answer *a)
{
    cJSON_Delete(a->root);
    a->root = NULL;
    a->results = a->next = NULL;
}
