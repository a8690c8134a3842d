/* hr_wpsub: a web push subscription (RFC 8030 push resource, RFC 8291
 * keys) as the address book stores it, and the browser's PushSubscription
 * JSON it comes from.
 *
 * The address of a webpush address is one string without spaces (the
 * address book's member format, hr_addr.h, splits on spaces):
 *
 *     <endpoint>#<p256dh>.<auth>
 *
 * endpoint: an https:// URL (the push resource); p256dh: the user agent's
 * P-256 public key, uncompressed (65 bytes), base64url without padding (87
 * characters); auth: its 16-byte authentication secret, base64url (22
 * characters).  The keys hold neither '#' nor '.', so the last '#' splits
 * the address whatever the endpoint holds.  Plain values: nothing here
 * logs or keeps state. */
#ifndef HR_WPSUB_H
#define HR_WPSUB_H

#include <stddef.h>

#include <cJSON.h>

#include "hr_buf.h"
#include "hr_jwt.h"

#define HR_WPSUB_AUTH 16                     /* bytes of the auth secret */
#define HR_WPSUB_KEYS_TEXT (1 + 87 + 1 + 22) /* "#<p256dh>.<auth>" */

/* A subscription split: ENDPOINT points into the address it was parsed
 * from (ENDPOINT_LEN bytes, not NUL-terminated there). */
typedef struct hr_wpsub {
    const char *endpoint;
    size_t endpoint_len;
    unsigned char p256dh[HR_JWT_P256_POINT];
    unsigned char auth[HR_WPSUB_AUTH];
} hr_wpsub;

/* Splits ADDRESS into *OUT and checks it: an https:// endpoint with a
 * host and no space or control byte, a p256dh key that is a point on
 * P-256, a 16-byte auth secret.  0, or -1 with ERRSTR naming the part. */
int hr_wpsub_parse(const char *address, hr_wpsub *out, char *errstr, size_t errlen);
/* hr_wpsub_parse without the point's check: the worker's, for an address
 * the address book checked when it was stored and whose point OpenSSL
 * checks again when the push is encrypted (wk_ece): decoding it twice was
 * 13 % of a push's CPU (bench/run webpush). */
int hr_wpsub_split(const char *address, hr_wpsub *out, char *errstr, size_t errlen);

/* Appends the address of the PushSubscription JSON SUB ({"endpoint",
 * "keys": {"p256dh", "auth"}}; "expirationTime" and other members are
 * ignored) to OUT, checked as hr_wpsub_parse checks it.  0, or -1 with
 * ERRSTR (OUT then unchanged). */
int hr_wpsub_from_json(const cJSON *sub, hr_buf *out, char *errstr, size_t errlen);

#endif
