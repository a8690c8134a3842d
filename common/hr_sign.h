/* hr_sign: Standard Webhooks signatures, so a receiver can check that a
 * webhook came from herald and was not replayed.
 *
 * A request carries webhook-id (stable across retries of one delivery),
 * webhook-timestamp (Unix seconds of this attempt) and
 * webhook-signature: "v1,<base64 HMAC-SHA256(secret, id "." timestamp "."
 * body)>", one such item per active secret, space-separated, so a secret
 * can be rotated without a window where receivers reject.  A secret is
 * written "whsec_<base64 of 24..64 random bytes>".  HMAC is OpenSSL's. */
#ifndef HR_SIGN_H
#define HR_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"

#define HR_SIGN_SECRET_MIN 24
#define HR_SIGN_SECRET_MAX 64
#define HR_SIGN_MAX_SECRETS 2 /* the current one and the one being rotated out */
#define HR_SIGN_MAC_LEN 32    /* an HMAC-SHA256 */

typedef struct hr_sign_secret {
    unsigned char key[HR_SIGN_SECRET_MAX];
    size_t len;
} hr_sign_secret;

/* Reads "whsec_<base64>" into *OUT.  0, or -1 with ERRSTR (no prefix, bad
 * base64, a key outside 24..64 bytes). */
int hr_sign_secret_parse(const char *text, hr_sign_secret *out, char *errstr, size_t errlen);

/* Appends the webhook-signature value for (ID, TIMESTAMP, BODY) under each
 * of the NSECRETS (1..HR_SIGN_MAX_SECRETS) secrets to OUT.  ID must be
 * 1..256 bytes without '.', CR or LF (it is a header value and the field
 * separator).  0, or -1 with ERRSTR (OUT then unchanged). */
int hr_sign_append(const hr_sign_secret *secrets, size_t nsecrets, const char *id,
                   int64_t timestamp, const char *body, size_t body_len, hr_buf *out, char *errstr,
                   size_t errlen);

/* OUT = HMAC-SHA256(KEY of KEYLEN bytes, the LEN bytes at MSG): the MAC the
 * signatures above use, for other signed things (the client tokens,
 * hr_ctoken.h).  0, or -1 when OpenSSL fails. */
int hr_sign_hmac(const void *key, size_t keylen, const char *msg, size_t len,
                 unsigned char out[HR_SIGN_MAC_LEN]);

/* HEX = the SHA-256 of the LEN bytes at DATA in lower-case hex and a NUL
 * (HR_SIGN_SHA256_HEX bytes): how an API token is stored (hr_apitoken.h)
 * and how the audit log names a value too large to keep (hr_audit.h).  0,
 * or -1 when OpenSSL fails. */
#define HR_SIGN_SHA256_HEX 65
int hr_sign_sha256_hex(const void *data, size_t len, char *hex);

#endif
