/* wk_provider: what a provider's answer to one push means, in one enum
 * every provider module (wk_fcm, wk_apns, wk_smtp) classifies into, so the
 * sender acts on the verdict without knowing the provider.
 *
 * Also the HTTP rule the HTTP providers share once their own codes are
 * read: 429 and 503-with-Retry-After ask the channel to slow down, other
 * 5xx are retried with back-off, anything else fails for good. */
#ifndef WK_PROVIDER_H
#define WK_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"

struct cJSON;

/* The most of a response body a provider module reads; the sender caps
 * what it keeps of a body at this. */
#define WK_PROVIDER_BODY_MAX 16384
/* A Retry-After beyond this is read as this, before the channel's own
 * bound (retry.max_backoff_ms) applies. */
#define WK_PROVIDER_RETRY_AFTER_MAX_S 3600
/* The longest JSON value of a task's payload a provider message prints
 * (APNs and FCM take 4 KiB in all). */
#define WK_PROVIDER_JSON_MAX 8192

typedef enum wk_verdict {
    WK_VERDICT_DELIVERED,
    WK_VERDICT_RETRY,        /* transient: back off and try again */
    WK_VERDICT_SLOWDOWN,     /* "slow down": pause the channel, then retry */
    WK_VERDICT_REFRESH,      /* credentials expired: refresh them, then retry */
    WK_VERDICT_UNREGISTERED, /* the address is dead: remove it, count unregistered */
    WK_VERDICT_FAILED,       /* fails for good (dead-letter rules apply) */
} wk_verdict;

typedef struct wk_provider_result {
    wk_verdict verdict;
    long retry_after_s; /* SLOWDOWN: the provider's Retry-After, -1 when none */
    char reason[128];   /* "<status> <provider's code>", e.g. "404 UNREGISTERED" */
} wk_provider_result;

/* The LEN bytes at VALUE of a Retry-After header as seconds from NOW_S:
 * delta seconds, or an HTTP-date (what is left until then); clamped to
 * 0..WK_PROVIDER_RETRY_AFTER_MAX_S.  Every transport reads it here. */
long wk_provider_retry_after(const char *value, size_t len, int64_t now_s);

/* Prints ITEM as compact JSON into TEXT, without allocating: the request
 * of every push prints its task's payload (parsed once per task), so no
 * tree is built and nothing is allocated per push.  Its length, or -1 when
 * it is over WK_PROVIDER_JSON_MAX. */
#define WK_PROVIDER_JSON_TEXT (WK_PROVIDER_JSON_MAX + 5) /* cJSON wants 5 bytes to spare */
long wk_provider_json_print(const struct cJSON *item, char text[WK_PROVIDER_JSON_TEXT]);

/* Sets OUT from an HTTP STATUS no provider rule claimed (see above);
 * RETRY_AFTER_S is the parsed Retry-After (-1: absent) and CODE the
 * provider's error code for the reason (may be NULL or ""). */
void wk_provider_classify_http(long status, long retry_after_s, const char *code,
                               wk_provider_result *out);
/* Sets OUT's reason to "<PREFIX><STATUS> <CODE>" (no space and no CODE
 * when CODE is NULL or ""), cut to fit. */
void wk_provider_reason(wk_provider_result *out, const char *prefix, long status, const char *code);
/* Sets OUT to VERDICT with the reason "<STATUS> <CODE>". */
void wk_provider_set(wk_provider_result *out, wk_verdict verdict, long status, const char *code);

#endif
