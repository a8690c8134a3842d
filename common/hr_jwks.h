/* hr_jwks: an identity provider's signing keys (a JWK Set, RFC 7517) and
 * the checks of a bearer JWT against them (RFC 7519, RFC 8725's advice):
 * the optional single sign-on of the dispatcher's API (docs/api.md
 * "Single sign-on").
 *
 * A set holds the keys of the document that can sign RS256 or ES256 (kty
 * RSA of 2048 bits or more, kty EC on P-256), each under its kid; keys for
 * encryption ("use": "enc"), of other types or curves, or naming another
 * "alg" are left out, and a document without one usable key, with a key
 * without a kid, or naming a kid twice is refused.
 *
 * A token passes hr_jwks_verify when: it is three base64url parts; its
 * header is a JSON object whose alg is RS256 or ES256 (never "none", HS256
 * or anything else) and whose kid names a key of the set of that
 * algorithm's type (so an RSA key is never used as an HMAC secret, nor an
 * EC key for RS256), with no "crit"; its signature verifies; its claims are
 * a JSON object (no member named twice) whose iss equals the issuer, whose
 * aud is the audience or an array holding it, whose exp is a number not
 * before now - leeway, and whose nbf and iat, when present, are not after
 * now + leeway.  Sizes are capped (HR_JWKS_TOKEN_MAX, HR_JWKS_KEYS_MAX).
 * Refusals say why without quoting the token.  A set is read-only once
 * made: any number of threads may verify with it.  Nothing here logs. */
#ifndef HR_JWKS_H
#define HR_JWKS_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#define HR_JWKS_TOKEN_MAX 8192         /* bytes of a token */
#define HR_JWKS_KEYS_MAX 64            /* usable keys of a set */
#define HR_JWKS_FILE_MAX (1024 * 1024) /* bytes of a JWKS document */
#define HR_JWKS_LEEWAY_MAX 300         /* seconds of clock skew a caller may allow */

typedef struct hr_jwks hr_jwks;

/* The JWK Set in the LEN bytes at TEXT ({"keys": [...]}).  0 and *OUT, or
 * -1 with ERRSTR. */
int hr_jwks_parse(const char *text, size_t len, hr_jwks **out, char *errstr, size_t errlen);
void hr_jwks_free(hr_jwks *set);
/* The number of usable keys. */
size_t hr_jwks_count(const hr_jwks *set);

/* What a token's claims must say. */
typedef struct hr_jwks_expect {
    const char *issuer;   /* iss, exactly */
    const char *audience; /* aud, or one of its items */
    int64_t now_s;        /* the time to check exp, nbf and iat at */
    int leeway_s;         /* 0..HR_JWKS_LEEWAY_MAX */
} hr_jwks_expect;

/* Checks TOKEN against SET and X (above).  0 and *CLAIMS (the claims
 * object, the caller's to cJSON_Delete), or -1 with ERRSTR. */
int hr_jwks_verify(const hr_jwks *set, const char *token, const hr_jwks_expect *x, cJSON **claims,
                   char *errstr, size_t errlen);

#endif
