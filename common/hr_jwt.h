/* hr_jwt: signed JSON Web Tokens (RFC 7519): signing provider credentials,
 * and checking the signature of an operator's token (hr_jwks.h).
 *
 * An hr_jwt_key holds one key: a private key read from PEM, or a public key
 * from a JWK (RFC 7517).  An RSA key (2048 bits or more) is RS256's, as a
 * Google service account's private_key is for FCM; a P-256 EC key is
 * ES256's, as an APNs .p8 key is.  The algorithm follows from the key, and
 * a key is used for its own algorithm only.  Signing is OpenSSL EVP; an ES256 signature is the
 * raw 64-byte R||S that JWS wants (RFC 7518 3.4), not OpenSSL's DER.
 * A key may sign from several threads at once (EVP_PKEY is read-only once
 * loaded); nothing here logs. */
#ifndef HR_JWT_H
#define HR_JWT_H

#include <stddef.h>

#include <cJSON.h>

#include "hr_buf.h"

typedef enum hr_jwt_alg {
    HR_JWT_RS256,
    HR_JWT_ES256,
} hr_jwt_alg;

typedef struct hr_jwt_key hr_jwt_key;

/* Reads the private key in the LEN bytes of PEM at PEM (PKCS#8 or
 * traditional, unencrypted).  0 and *out a new key, or -1 with ERRSTR saying
 * why (not a key, encrypted, RSA under 2048 bits, an EC curve other than
 * P-256, another type). */
int hr_jwt_key_load(const char *pem, size_t len, hr_jwt_key **out, char *errstr, size_t errlen);
void hr_jwt_key_free(hr_jwt_key *k);
hr_jwt_alg hr_jwt_key_alg(const hr_jwt_key *k);

/* Appends "<header>.<claims>.<signature>" (base64url each) to OUT.  The
 * header is {"alg":..,"typ":"JWT"} plus "kid" when KID is not NULL (KID:
 * 1..64 of [A-Za-z0-9._-]).  CLAIMS is the JSON claims object as the
 * caller built it.  0, or -1 with ERRSTR (OUT then unchanged). */
int hr_jwt_sign(const hr_jwt_key *k, const char *kid, const char *claims, size_t claims_len,
                hr_buf *out, char *errstr, size_t errlen);

/* The public key of the JWK object JWK: kty RSA (n, e; 2048 bits or more)
 * or kty EC with crv P-256 (x, y; the point must be on the curve).  0 and
 * *OUT, or -1 with ERRSTR.  Its other members (kid, use, alg) are the
 * caller's to check. */
int hr_jwt_key_from_jwk(const cJSON *jwk, hr_jwt_key **out, char *errstr, size_t errlen);

/* Checks SIG (SIGLEN bytes as JWS writes them: RS256 PKCS #1 v1.5, ES256
 * the 64-byte R||S) over the LEN bytes at DATA under K's algorithm.  0 when
 * it is K's signature, -1 otherwise (ERRSTR). */
/* The uncompressed form of a P-256 point: 04 || x || y. */
#define HR_JWT_P256_POINT 65
typedef struct evp_pkey_st EVP_PKEY;
/* The P-256 public key whose point is POINT (uncompressed), checked to lie
 * on the curve: 0 and *OUT (the caller's, EVP_PKEY_free), or -1 with
 * ERRSTR.  Web push reads a subscription's p256dh key with it. */
int hr_jwt_p256_point(const unsigned char point[HR_JWT_P256_POINT], EVP_PKEY **out, char *errstr,
                      size_t errlen);
/* The public point of K, an ES256 key, into OUT (uncompressed): web
 * push's VAPID "k".  0, or -1 for another key. */
int hr_jwt_key_point(const hr_jwt_key *k, unsigned char out[HR_JWT_P256_POINT]);
int hr_jwt_verify(const hr_jwt_key *k, const char *data, size_t len, const unsigned char *sig,
                  size_t siglen, char *errstr, size_t errlen);

#endif
