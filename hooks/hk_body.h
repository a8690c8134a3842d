/* hk_body: one delivery's request, built from its events (pure).
 *
 *   body     {"type":"herald.events","timestamp":"<RFC 3339, UTC>",
 *             "data":{"events":[<event>, ...]}}
 *            each event verbatim as published (schemas/kafka/event.v1.json)
 *   headers  Content-Type: application/json
 *            webhook-id: hk<hook>-<first event's id>-<count>: stable across
 *                        the retries of one batch, so a receiver can tell a
 *                        retry from a new delivery
 *            webhook-timestamp: <Unix seconds of this attempt>
 *            webhook-signature: v1,<base64 HMAC-SHA256> (hr_sign.h, the
 *                        Standard Webhooks scheme the webhook channels use) */
#ifndef HK_BODY_H
#define HK_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "hk_event.h"
#include "hr_buf.h"
#include "hr_sign.h"

#define HK_BODY_HEADERS 4
#define HK_BODY_HEADER_MAX 512

/* Appends the body of the N events EVS, stamped NOW_MS, to OUT.  0, or
 * -1 past OUT's cap. */
int hk_body_build(hk_event *const *evs, size_t n, int64_t now_ms, hr_buf *out);
/* Writes the headers of a delivery of BODY to hook HOOK, whose first event
 * is FIRST and whose size is N, at NOW_S, signed with SECRET, into OUT.
 * 0, or -1 with ERRSTR. */
int hk_body_headers(int64_t hook, const hk_event *first, size_t n, const hr_sign_secret *secret,
                    const hr_buf *body, int64_t now_s,
                    char out[HK_BODY_HEADERS][HK_BODY_HEADER_MAX], char *errstr, size_t errlen);

#endif
