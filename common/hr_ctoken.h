/* hr_ctoken: the signed tokens herald hands out for one uid: the client
 * tokens of the pull and preferences API, and the one-click unsubscribe
 * tokens of the mail links (below).
 *
 * A platform's backend issues a token to its app for one uid; the app
 * calls GET /v1/users/<uid>/reminders with it, and the dispatcher accepts
 * it for that uid only.  A token is
 *
 *     hrc1.<uid>.<exp>.<kid>.<sig>
 *
 * uid and exp (Unix seconds) in decimal, kid the id of one of
 * dispatcher.api.client_keys, sig the unpadded base64url of
 * HMAC-SHA256(that key's secret, "hrc1.<uid>.<exp>.<kid>").  Two keys may be
 * active at once, so a new key is added, backends move to it, and the old
 * one is dropped after the longest token lifetime.  Nothing is stored
 * server-side: revoking one token means rotating its key. */
#ifndef HR_CTOKEN_H
#define HR_CTOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_config.h"

#define HR_CTOKEN_MAX 128 /* the longest token, with its NUL */

/* Refusals of hr_ctoken_verify that are not failures of the format: the
 * token is well signed but expired, or valid for longer than the caller
 * allows (a backend issuing tokens that never end). */
enum { HR_CTOKEN_EXPIRED = 1, HR_CTOKEN_TOO_LONG = 2 };

/* True when TOKEN has the client token's form at all (its prefix): the
 * caller then answers with hr_ctoken_verify's verdict rather than as for a
 * wrong admin token. */
bool hr_ctoken_is_client(const char *token);

/* Writes the token of UID (1..2^63-1), valid until EXP_S, under KEY into
 * OUT (LEN >= HR_CTOKEN_MAX).  0, or -1 with ERRSTR. */
int hr_ctoken_issue(const hr_client_key *key, int64_t uid, int64_t exp_s, char *out, size_t len,
                    char *errstr, size_t errlen);

/* Checks TOKEN against the NKEYS KEYS at NOW_S: 0 with *UID; HR_CTOKEN_EXPIRED
 * when it is well signed but its exp is not after NOW_S; HR_CTOKEN_TOO_LONG
 * when its exp is more than MAX_TTL_S after NOW_S (0: no bound); -1 when it
 * is malformed, names no configured key or its signature is wrong.  ERRSTR
 * says which (never a secret or the expected signature).  The signature is
 * compared in constant time. */
int hr_ctoken_verify(const char *token, const hr_client_key *keys, size_t nkeys, int64_t now_s,
                     int64_t max_ttl_s, int64_t *uid, char *errstr, size_t errlen);

/* ---- unsubscribe tokens (docs/recipients.md) --------------------------------

 * A mail's List-Unsubscribe link is <recipients.unsubscribe.public_url>/u/<token>:
 *
 *     hru1.<uid>.<category>.<channel>.<iat>.<kid>.<sig>
 *
 * uid and iat (issue time, Unix seconds) in decimal, category and channel
 * (a channel type) the opt-out a one-click POST records, kid the id of one
 * of recipients.unsubscribe.keys, sig the unpadded base64url of
 * HMAC-SHA256(that key's secret, everything before ".<sig>").  The link
 * works until iat + token_ttl_s; a key dropped from the configuration
 * (rotated out) invalidates its links. */

#define HR_UTOKEN_MAX 192 /* the longest unsubscribe token, with its NUL */

/* What an unsubscribe token says. */
typedef struct hr_utoken {
    int64_t uid;
    char category[HR_CATEGORY_NAME_MAX + 1];
    char channel[17];
    int64_t iat_s;
} hr_utoken;

/* Writes the unsubscribe token of U (category and channel of [a-z0-9_-],
 * 1..32 and 1..16 bytes) under KEY into OUT (LEN >= HR_UTOKEN_MAX).  0, or
 * -1 with ERRSTR. */
int hr_ctoken_unsub_issue(const hr_client_key *key, const hr_utoken *u, char *out, size_t len,
                          char *errstr, size_t errlen);
/* Checks TOKEN against the NKEYS KEYS at NOW_S with a lifetime of TTL_S:
 * 0 with *OUT; HR_CTOKEN_EXPIRED when it is well signed but older than
 * TTL_S (or issued more than 5 minutes in the future); -1 when it is
 * malformed, names no configured key or its signature is wrong.  ERRSTR
 * says which, never a secret.  Constant-time comparison. */
int hr_ctoken_unsub_verify(const char *token, const hr_client_key *keys, size_t nkeys,
                           int64_t now_s, int64_t ttl_s, hr_utoken *out, char *errstr,
                           size_t errlen);

#endif
