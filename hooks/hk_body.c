/* hk_body: a delivery's body and headers (see hk_body.h). */
#include "hk_body.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int hk_body_build(hk_event *const *evs, size_t n, int64_t now_ms, hr_buf *out)
{
    size_t start = out->len;
    time_t s = (time_t)(now_ms / 1000);
    struct tm tm;
    char head[128];
    int len;

    gmtime_r(&s, &tm);
    len = snprintf(head, sizeof head,
                   "{\"type\":\"herald.events\",\"timestamp\":\"%04d-%02d-%02dT%02d:%02d:%02d."
                   "%03dZ\",\"data\":{\"events\":[",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   (int)(now_ms % 1000));
    if (hr_buf_append(out, head, (size_t)len) < 0)
        goto fail;
    for (size_t i = 0; i < n; i++)
        if ((i > 0 && hr_buf_append(out, ",", 1) < 0) ||
            hr_buf_append(out, evs[i]->value, evs[i]->len) < 0)
            goto fail;
    if (hr_buf_append(out, "]}}", 3) < 0)
        goto fail;
    return 0;
fail:
    hr_buf_truncate(out, start);
    return -1;
}

int hk_body_headers(int64_t hook, const hk_event *first, size_t n, const hr_sign_secret *secret,
                    const hr_buf *body, int64_t now_s,
                    char out[HK_BODY_HEADERS][HK_BODY_HEADER_MAX], char *errstr, size_t errlen)
{
    char id[128];
    hr_buf sig;
    int rc = -1;

    snprintf(id, sizeof id, "hk%" PRId64 "-%s-%zu", hook, first->id, n);
    hr_buf_init(&sig, HK_BODY_HEADER_MAX - 32);
    if (hr_sign_append(secret, 1, id, now_s, body->data, body->len, &sig, errstr, errlen) < 0)
        goto done;
    snprintf(out[0], HK_BODY_HEADER_MAX, "Content-Type: application/json");
    snprintf(out[1], HK_BODY_HEADER_MAX, "webhook-id: %s", id);
    snprintf(out[2], HK_BODY_HEADER_MAX, "webhook-timestamp: %" PRId64, now_s);
    snprintf(out[3], HK_BODY_HEADER_MAX, "webhook-signature: %s", sig.data);
    rc = 0;
done:
    hr_buf_free(&sig);
    return rc;
}
