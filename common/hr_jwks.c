/* hr_jwks: a JWK Set and the checks of a JWT against it (see hr_jwks.h).
 * A set is an array of (kid, hr_jwt_key); the key's algorithm comes from
 * its type (hr_jwt.c), so a token's alg is compared with the key's, never
 * taken from the token alone.  JSON is read with hr_parse_json, which
 * refuses a member named twice (two "iss" or two "alg" must not mean one
 * thing to a proxy and another here). */
#include "hr_jwks.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_base64.h"
#include "hr_jwt.h"
#include "hr_parse.h"

#define HR_JWKS_KID_MAX 128
#define HR_JWKS_PART_MAX 4096 /* decoded bytes of a header or of the claims */
#define HR_JWKS_SIG_MAX 1024  /* decoded bytes of a signature: RSA 8192 */

typedef struct hr_jwks_key {
    char kid[HR_JWKS_KID_MAX + 1];
    hr_jwt_key *key;
} hr_jwks_key;

struct hr_jwks {
    hr_jwks_key keys[HR_JWKS_KEYS_MAX];
    size_t n;
};

void hr_jwks_free(hr_jwks *set)
{
    if (set == NULL)
        return;
    for (size_t i = 0; i < set->n; i++)
        hr_jwt_key_free(set->keys[i].key);
    free(set);
}

size_t hr_jwks_count(const hr_jwks *set)
{
    return set->n;
}

/* The string member NAME of O, or NULL when absent or not a string. */
static const char *hr_jwks_str(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Whether JWK is a signing key of a type herald verifies (hr_jwks.h). */
static bool hr_jwks_usable(const cJSON *jwk)
{
    const char *use = hr_jwks_str(jwk, "use"), *alg = hr_jwks_str(jwk, "alg");
    const char *kty = hr_jwks_str(jwk, "kty"), *crv = hr_jwks_str(jwk, "crv");

    if (use != NULL && strcmp(use, "sig") != 0)
        return false;
    if (kty != NULL && strcmp(kty, "RSA") == 0)
        return alg == NULL || strcmp(alg, "RS256") == 0;
    if (kty != NULL && strcmp(kty, "EC") == 0)
        return crv != NULL && strcmp(crv, "P-256") == 0 &&
               (alg == NULL || strcmp(alg, "ES256") == 0);
    return false;
}

int hr_jwks_parse(const char *text, size_t len, hr_jwks **out, char *errstr, size_t errlen)
{
    char why[256];
    cJSON *doc = NULL;
    const cJSON *keys, *jwk;
    hr_jwks *set = NULL;
    size_t i = 0;
    int rc = -1;

    *out = NULL;
    if (len > HR_JWKS_FILE_MAX) {
        snprintf(errstr, errlen, "jwks: larger than %d bytes", HR_JWKS_FILE_MAX);
        return -1;
    }
    if (hr_parse_json(text, len, &doc, why, sizeof why) != 0) {
        snprintf(errstr, errlen, "jwks: %s", why);
        return -1;
    }
    keys = cJSON_GetObjectItemCaseSensitive(doc, "keys");
    if (!cJSON_IsArray(keys)) {
        snprintf(errstr, errlen, "jwks: expected an object with a \"keys\" array");
        goto done;
    }
    if ((set = calloc(1, sizeof *set)) == NULL) {
        snprintf(errstr, errlen, "jwks: out of memory");
        goto done;
    }
    cJSON_ArrayForEach(jwk, keys)
    {
        const char *kid = hr_jwks_str(jwk, "kid");
        hr_jwks_key *k;

        i++;
        if (!cJSON_IsObject(jwk) || !hr_jwks_usable(jwk))
            continue;
        if (kid == NULL || kid[0] == '\0' || strlen(kid) > HR_JWKS_KID_MAX) {
            snprintf(errstr, errlen, "jwks: key %zu has no kid (1..%d bytes)", i, HR_JWKS_KID_MAX);
            goto done;
        }
        for (size_t j = 0; j < set->n; j++)
            if (strcmp(set->keys[j].kid, kid) == 0) {
                snprintf(errstr, errlen, "jwks: kid \"%.64s\" is used twice", kid);
                goto done;
            }
        if (set->n == HR_JWKS_KEYS_MAX) {
            snprintf(errstr, errlen, "jwks: more than %d signing keys", HR_JWKS_KEYS_MAX);
            goto done;
        }
        k = &set->keys[set->n];
        if (hr_jwt_key_from_jwk(jwk, &k->key, why, sizeof why) != 0) {
            snprintf(errstr, errlen, "jwks: key \"%.64s\": %s", kid, why);
            goto done;
        }
        snprintf(k->kid, sizeof k->kid, "%s", kid);
        set->n++;
    }
    if (set->n == 0) {
        snprintf(errstr, errlen, "jwks: no RS256 or ES256 signing key");
        goto done;
    }
    *out = set;
    set = NULL;
    rc = 0;
done:
    hr_jwks_free(set);
    cJSON_Delete(doc);
    return rc;
}

/* ---- a token ----------------------------------------------------------- */

/* The N base64url characters at S, a JSON object, into *OUT. */
static int hr_jwks_part(const char *what, const char *s, size_t n, cJSON **out, char *errstr,
                        size_t errlen)
{
    unsigned char buf[HR_JWKS_PART_MAX];
    char why[200];
    size_t len;

    *out = NULL;
    if (hr_base64_decode(s, n, HR_BASE64_URL, buf, sizeof buf, &len) != 0) {
        snprintf(errstr, errlen, "jwt: the %s is not base64url of at most %d bytes", what,
                 HR_JWKS_PART_MAX);
        return -1;
    }
    if (hr_parse_json((const char *)buf, len, out, why, sizeof why) != 0 || !cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        snprintf(errstr, errlen, "jwt: the %s is not a JSON object", what);
        return -1;
    }
    return 0;
}

/* The key of SET that HEADER names, for the algorithm HEADER says. */
static const hr_jwt_key *hr_jwks_key_for(const hr_jwks *set, const cJSON *header, char *errstr,
                                         size_t errlen)
{
    const char *alg = hr_jwks_str(header, "alg"), *kid = hr_jwks_str(header, "kid");
    hr_jwt_alg want;

    if (alg != NULL && strcmp(alg, "RS256") == 0)
        want = HR_JWT_RS256;
    else if (alg != NULL && strcmp(alg, "ES256") == 0)
        want = HR_JWT_ES256;
    else {
        snprintf(errstr, errlen, "jwt: alg must be RS256 or ES256");
        return NULL;
    }
    if (cJSON_GetObjectItemCaseSensitive(header, "crit") != NULL) {
        snprintf(errstr, errlen, "jwt: a critical header extension is not understood");
        return NULL;
    }
    if (kid == NULL) {
        snprintf(errstr, errlen, "jwt: the header names no kid");
        return NULL;
    }
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->keys[i].kid, kid) == 0) {
            if (hr_jwt_key_alg(set->keys[i].key) != want) {
                snprintf(errstr, errlen, "jwt: key \"%.64s\" is not a key for %s", kid, alg);
                return NULL;
            }
            return set->keys[i].key;
        }
    snprintf(errstr, errlen, "jwt: unknown kid \"%.64s\"", kid);
    return NULL;
}

/* The number claim NAME into *V: 1 when present, 0 when absent, -1 (with
 * ERRSTR) when it is not a finite number. */
static int hr_jwks_time(const cJSON *claims, const char *name, double *v, char *errstr,
                        size_t errlen)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(claims, name);

    if (c == NULL)
        return 0;
    if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble)) {
        snprintf(errstr, errlen, "jwt: claim %s must be a number of seconds", name);
        return -1;
    }
    *v = c->valuedouble;
    return 1;
}

/* Whether the claims' aud is AUDIENCE or an array holding it. */
static bool hr_jwks_audience(const cJSON *claims, const char *audience)
{
    const cJSON *aud = cJSON_GetObjectItemCaseSensitive(claims, "aud"), *item;

    if (cJSON_IsString(aud))
        return strcmp(aud->valuestring, audience) == 0;
    if (!cJSON_IsArray(aud))
        return false;
    cJSON_ArrayForEach(item, aud)
    {
        if (cJSON_IsString(item) && strcmp(item->valuestring, audience) == 0)
            return true;
    }
    return false;
}

/* The claims' checks of hr_jwks.h. */
static int hr_jwks_claims_ok(const cJSON *claims, const hr_jwks_expect *x, char *errstr,
                             size_t errlen)
{
    const char *iss = hr_jwks_str(claims, "iss");
    double exp = 0, nbf = 0, iat = 0;
    double now = (double)x->now_s, leeway = x->leeway_s;
    int has;

    if (iss == NULL || strcmp(iss, x->issuer) != 0) {
        snprintf(errstr, errlen, "jwt: wrong issuer");
        return -1;
    }
    if (!hr_jwks_audience(claims, x->audience)) {
        snprintf(errstr, errlen, "jwt: wrong audience");
        return -1;
    }
    if ((has = hr_jwks_time(claims, "exp", &exp, errstr, errlen)) <= 0) {
        if (has == 0)
            snprintf(errstr, errlen, "jwt: no exp claim");
        return -1;
    }
    if (now > exp + leeway) {
        snprintf(errstr, errlen, "jwt: expired");
        return -1;
    }
    if ((has = hr_jwks_time(claims, "nbf", &nbf, errstr, errlen)) < 0)
        return -1;
    if (has == 1 && nbf > now + leeway) {
        snprintf(errstr, errlen, "jwt: not valid yet (nbf)");
        return -1;
    }
    if ((has = hr_jwks_time(claims, "iat", &iat, errstr, errlen)) < 0)
        return -1;
    if (has == 1 && iat > now + leeway) {
        snprintf(errstr, errlen, "jwt: issued in the future (iat)");
        return -1;
    }
    return 0;
}

int hr_jwks_verify(const hr_jwks *set, const char *token, const hr_jwks_expect *x, cJSON **claims,
                   char *errstr, size_t errlen)
{
    unsigned char sig[HR_JWKS_SIG_MAX];
    const char *dot1, *dot2;
    const hr_jwt_key *key;
    cJSON *header = NULL, *body = NULL;
    size_t len = strlen(token), siglen;
    int rc = -1;

    *claims = NULL;
    dot1 = len <= HR_JWKS_TOKEN_MAX ? memchr(token, '.', len) : NULL;
    dot2 = dot1 != NULL ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    if (dot2 == NULL || memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token)) != NULL) {
        snprintf(errstr, errlen, "jwt: not three base64url parts of at most %d bytes in all",
                 HR_JWKS_TOKEN_MAX);
        return -1;
    }
    if (hr_jwks_part("header", token, (size_t)(dot1 - token), &header, errstr, errlen) != 0 ||
        (key = hr_jwks_key_for(set, header, errstr, errlen)) == NULL)
        goto done;
    if (hr_base64_decode(dot2 + 1, len - (size_t)(dot2 + 1 - token), HR_BASE64_URL, sig, sizeof sig,
                         &siglen) != 0 ||
        siglen == 0) {
        snprintf(errstr, errlen, "jwt: the signature is not base64url");
        goto done;
    }
    /* The signature first: nothing of an unsigned body is read. */
    if (hr_jwt_verify(key, token, (size_t)(dot2 - token), sig, siglen, errstr, errlen) != 0 ||
        hr_jwks_part("claims", dot1 + 1, (size_t)(dot2 - dot1 - 1), &body, errstr, errlen) != 0 ||
        hr_jwks_claims_ok(body, x, errstr, errlen) != 0)
        goto done;
    *claims = body;
    body = NULL;
    rc = 0;
done:
    cJSON_Delete(header);
    cJSON_Delete(body);
    return rc;
}
