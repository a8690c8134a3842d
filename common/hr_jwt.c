/* hr_jwt: RS256 / ES256 JWT signing over OpenSSL EVP.
 *
 * The key is an EVP_PKEY plus the algorithm chosen when it was loaded.  A
 * signature is made with EVP_DigestSign over "<b64url header>.<b64url
 * claims>"; for ES256 OpenSSL returns an ECDSA-Sig-Value in DER, which is
 * unpacked (d2i_ECDSA_SIG) into R and S, each left-padded to 32 bytes. */
#include "hr_jwt.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_base64.h"

#define HR_JWT_KID_MAX 64
#define HR_JWT_ES256_HALF 32  /* bytes of R and of S */
#define HR_JWT_RSA_N_MAX 1024 /* bytes of a modulus: 8192 bits */

struct hr_jwt_key {
    EVP_PKEY *pkey;
    hr_jwt_alg alg;
};

/* ERRSTR = "WHAT: <first OpenSSL error>", and the OpenSSL queue emptied. */
static void hr_jwt_ssl_err(const char *what, char *errstr, size_t errlen)
{
    unsigned long e = ERR_get_error();
    char msg[256];

    if (e == 0)
        snprintf(msg, sizeof msg, "unknown error");
    else
        ERR_error_string_n(e, msg, sizeof msg);
    ERR_clear_error();
    snprintf(errstr, errlen, "%s: %s", what, msg);
}

/* An encrypted key is refused: without this callback OpenSSL would ask
 * for its passphrase on the terminal. */
static int hr_jwt_no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

/* K's algorithm from its key (WHAT names it in ERRSTR): an RSA key of 2048
 * bits or more signs RS256, a P-256 key ES256; any other is refused. */
static int hr_jwt_key_kind(hr_jwt_key *k, const char *what, char *errstr, size_t errlen)
{
    char group[64];
    size_t glen = 0;

    switch (EVP_PKEY_get_base_id(k->pkey)) {
    case EVP_PKEY_RSA:
        if (EVP_PKEY_get_bits(k->pkey) < 2048) {
            snprintf(errstr, errlen, "%s: RSA key of %d bits, RS256 needs 2048 or more", what,
                     EVP_PKEY_get_bits(k->pkey));
            return -1;
        }
        k->alg = HR_JWT_RS256;
        return 0;
    case EVP_PKEY_EC:
        if (EVP_PKEY_get_group_name(k->pkey, group, sizeof group, &glen) != 1 ||
            strcmp(group, SN_X9_62_prime256v1) != 0) {
            snprintf(errstr, errlen, "%s: EC key not on P-256, ES256 needs P-256", what);
            return -1;
        }
        k->alg = HR_JWT_ES256;
        return 0;
    default:
        snprintf(errstr, errlen, "%s: neither RSA nor EC P-256", what);
        return -1;
    }
}

int hr_jwt_key_load(const char *pem, size_t len, hr_jwt_key **out, char *errstr, size_t errlen)
{
    hr_jwt_key *k = NULL;
    BIO *bio = NULL;
    int rc = -1;

    *out = NULL;
    if (len > INT_MAX) {
        snprintf(errstr, errlen, "private key: too large");
        goto cleanup;
    }
    k = calloc(1, sizeof *k);
    bio = BIO_new_mem_buf(pem, (int)len);
    if (k == NULL || bio == NULL) {
        snprintf(errstr, errlen, "private key: out of memory");
        goto cleanup;
    }
    k->pkey = PEM_read_bio_PrivateKey(bio, NULL, hr_jwt_no_passphrase, NULL);
    if (k->pkey == NULL) {
        hr_jwt_ssl_err("private key: not a PEM private key", errstr, errlen);
        goto cleanup;
    }
    if (hr_jwt_key_kind(k, "private key", errstr, errlen) != 0)
        goto cleanup;
    *out = k;
    k = NULL;
    rc = 0;
cleanup:
    BIO_free(bio);
    hr_jwt_key_free(k);
    return rc;
}

void hr_jwt_key_free(hr_jwt_key *k)
{
    if (k == NULL)
        return;
    EVP_PKEY_free(k->pkey);
    free(k);
}

hr_jwt_alg hr_jwt_key_alg(const hr_jwt_key *k)
{
    return k->alg;
}

static bool hr_jwt_kid_ok(const char *kid)
{
    size_t n = strlen(kid);

    if (n == 0 || n > HR_JWT_KID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = kid[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* DER ECDSA-Sig-Value -> R||S, each HR_JWT_ES256_HALF bytes. */
static int hr_jwt_der_to_raw(const unsigned char *der, size_t len, unsigned char *raw)
{
    const unsigned char *p = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)len);
    const BIGNUM *r, *s;
    int rc = -1;

    if (sig == NULL)
        return -1;
    ECDSA_SIG_get0(sig, &r, &s);
    if (BN_bn2binpad(r, raw, HR_JWT_ES256_HALF) == HR_JWT_ES256_HALF &&
        BN_bn2binpad(s, raw + HR_JWT_ES256_HALF, HR_JWT_ES256_HALF) == HR_JWT_ES256_HALF)
        rc = 0;
    ECDSA_SIG_free(sig);
    return rc;
}

int hr_jwt_sign(const hr_jwt_key *k, const char *kid, const char *claims, size_t claims_len,
                hr_buf *out, char *errstr, size_t errlen)
{
    EVP_MD_CTX *md = NULL;
    unsigned char *sig = NULL, raw[2 * HR_JWT_ES256_HALF];
    size_t siglen = 0;
    hr_buf tok;
    char header[160];
    int n, rc = -1;

    if (kid != NULL && !hr_jwt_kid_ok(kid)) {
        snprintf(errstr, errlen, "jwt: key id must be 1..%d of [A-Za-z0-9._-]", HR_JWT_KID_MAX);
        return -1;
    }
    n = snprintf(header, sizeof header, "{\"alg\":\"%s\",\"typ\":\"JWT\"%s%s%s}",
                 k->alg == HR_JWT_RS256 ? "RS256" : "ES256", kid ? ",\"kid\":\"" : "",
                 kid ? kid : "", kid ? "\"" : "");
    if (n < 0 || (size_t)n >= sizeof header) {
        snprintf(errstr, errlen, "jwt: header too long");
        return -1;
    }
    /* Built apart and appended at the end, so OUT is unchanged on failure. */
    hr_buf_init(&tok, out->max - out->len);
    if (hr_base64_append(&tok, header, (size_t)n, HR_BASE64_URL) != 0 ||
        hr_buf_append(&tok, ".", 1) != 0 ||
        hr_base64_append(&tok, claims, claims_len, HR_BASE64_URL) != 0) {
        snprintf(errstr, errlen, "jwt: token over the buffer's cap");
        goto cleanup;
    }
    md = EVP_MD_CTX_new();
    if (md == NULL || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k->pkey) != 1 ||
        EVP_DigestSign(md, NULL, &siglen, (const unsigned char *)tok.data, tok.len) != 1) {
        hr_jwt_ssl_err("jwt: sign", errstr, errlen);
        goto cleanup;
    }
    sig = malloc(siglen);
    if (sig == NULL) {
        snprintf(errstr, errlen, "jwt: out of memory");
        goto cleanup;
    }
    if (EVP_DigestSign(md, sig, &siglen, (const unsigned char *)tok.data, tok.len) != 1) {
        hr_jwt_ssl_err("jwt: sign", errstr, errlen);
        goto cleanup;
    }
    if (k->alg == HR_JWT_ES256) {
        if (hr_jwt_der_to_raw(sig, siglen, raw) != 0) {
            snprintf(errstr, errlen, "jwt: malformed ECDSA signature");
            goto cleanup;
        }
    }
    if (hr_buf_append(&tok, ".", 1) != 0 ||
        (k->alg == HR_JWT_ES256 ? hr_base64_append(&tok, raw, sizeof raw, HR_BASE64_URL)
                                : hr_base64_append(&tok, sig, siglen, HR_BASE64_URL)) != 0 ||
        hr_buf_append(out, tok.data, tok.len) != 0) {
        snprintf(errstr, errlen, "jwt: token over the buffer's cap");
        goto cleanup;
    }
    rc = 0;
cleanup:
    hr_buf_free(&tok);
    free(sig);
    EVP_MD_CTX_free(md);
    return rc;
}

/* ---- public keys and verification -------------------------------------------- */

/* Member NAME of JWK, a base64url string, decoded into OUT (CAP bytes). */
static int hr_jwt_jwk_bytes(const cJSON *jwk, const char *name, unsigned char *out, size_t cap,
                            size_t *len, char *errstr, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(jwk, name);

    if (!cJSON_IsString(v) ||
        hr_base64_decode(v->valuestring, strlen(v->valuestring), HR_BASE64_URL, out, cap, len) !=
            0 ||
        *len == 0) {
        snprintf(errstr, errlen, "jwk: \"%s\" must be a base64url string of at most %zu bytes",
                 name, cap);
        return -1;
    }
    return 0;
}

/* The EVP_PKEY of KEYTYPE ("RSA", "EC") made from PARAMS, into K->pkey. */
static int hr_jwt_key_fromdata(hr_jwt_key *k, const char *keytype, OSSL_PARAM *params, char *errstr,
                               size_t errlen)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, keytype, NULL);
    int rc = -1;

    if (ctx == NULL || params == NULL || EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &k->pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        hr_jwt_ssl_err("jwk: not a valid public key", errstr, errlen);
    else
        rc = 0;
    EVP_PKEY_CTX_free(ctx);
    return rc;
}

/* kty RSA: the modulus n and exponent e. */
static int hr_jwt_jwk_rsa(const cJSON *jwk, hr_jwt_key *k, char *errstr, size_t errlen)
{
    unsigned char n[HR_JWT_RSA_N_MAX], e[8];
    size_t nlen, elen;
    OSSL_PARAM_BLD *bld = NULL;
    OSSL_PARAM *params = NULL;
    BIGNUM *bn = NULL, *be = NULL;
    int rc = -1;

    if (hr_jwt_jwk_bytes(jwk, "n", n, sizeof n, &nlen, errstr, errlen) != 0 ||
        hr_jwt_jwk_bytes(jwk, "e", e, sizeof e, &elen, errstr, errlen) != 0)
        return -1;
    bn = BN_bin2bn(n, (int)nlen, NULL);
    be = BN_bin2bn(e, (int)elen, NULL);
    /* An exponent of 1 (or an even one) makes every "signature" easy. */
    if (be != NULL && (!BN_is_odd(be) || BN_is_one(be))) {
        snprintf(errstr, errlen, "jwk: an RSA exponent must be odd and at least 3");
        goto done;
    }
    bld = OSSL_PARAM_BLD_new();
    if (bn == NULL || be == NULL || bld == NULL ||
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) != 1 ||
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) != 1)
        snprintf(errstr, errlen, "jwk: out of memory");
    else
        rc = hr_jwt_key_fromdata(k, "RSA", params = OSSL_PARAM_BLD_to_param(bld), errstr, errlen);
done:
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    return rc;
}

/* kty EC, crv P-256: the point (x, y), each 32 bytes. */
static int hr_jwt_jwk_ec(const cJSON *jwk, hr_jwt_key *k, char *errstr, size_t errlen)
{
    const cJSON *crv = cJSON_GetObjectItemCaseSensitive(jwk, "crv");
    unsigned char point[HR_JWT_P256_POINT];
    size_t xlen, ylen;

    if (!cJSON_IsString(crv) || strcmp(crv->valuestring, "P-256") != 0) {
        snprintf(errstr, errlen, "jwk: an EC key must be on crv P-256 (ES256)");
        return -1;
    }
    point[0] = 0x04; /* uncompressed: 04 || x || y */
    if (hr_jwt_jwk_bytes(jwk, "x", point + 1, HR_JWT_ES256_HALF, &xlen, errstr, errlen) != 0 ||
        hr_jwt_jwk_bytes(jwk, "y", point + 1 + HR_JWT_ES256_HALF, HR_JWT_ES256_HALF, &ylen, errstr,
                         errlen) != 0)
        return -1;
    if (xlen != HR_JWT_ES256_HALF || ylen != HR_JWT_ES256_HALF) {
        snprintf(errstr, errlen, "jwk: x and y of a P-256 key are 32 bytes each");
        return -1;
    }
    return hr_jwt_p256_point(point, &k->pkey, errstr, errlen);
}

int hr_jwt_p256_point(const unsigned char point[HR_JWT_P256_POINT], EVP_PKEY **out, char *errstr,
                      size_t errlen)
{
    OSSL_PARAM params[3];
    hr_jwt_key k = {0};

    *out = NULL;
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME,
                                                 (char *)SN_X9_62_prime256v1, 0);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)point,
                                                  HR_JWT_P256_POINT);
    params[2] = OSSL_PARAM_construct_end();
    if (hr_jwt_key_fromdata(&k, "EC", params, errstr, errlen) != 0)
        return -1;
    *out = k.pkey;
    return 0;
}

int hr_jwt_key_point(const hr_jwt_key *k, unsigned char out[HR_JWT_P256_POINT])
{
    size_t n = 0;

    if (k->alg != HR_JWT_ES256 ||
        EVP_PKEY_get_octet_string_param(k->pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, out,
                                        HR_JWT_P256_POINT, &n) != 1 ||
        n != HR_JWT_P256_POINT || out[0] != 0x04) {
        ERR_clear_error();
        return -1;
    }
    return 0;
}

int hr_jwt_key_from_jwk(const cJSON *jwk, hr_jwt_key **out, char *errstr, size_t errlen)
{
    const cJSON *kty = cJSON_GetObjectItemCaseSensitive(jwk, "kty");
    hr_jwt_key *k = NULL;
    int rc = -1;

    *out = NULL;
    if (!cJSON_IsString(kty) ||
        (strcmp(kty->valuestring, "RSA") != 0 && strcmp(kty->valuestring, "EC") != 0)) {
        snprintf(errstr, errlen, "jwk: kty must be RSA or EC");
        return -1;
    }
    if ((k = calloc(1, sizeof *k)) == NULL) {
        snprintf(errstr, errlen, "jwk: out of memory");
        return -1;
    }
    if ((strcmp(kty->valuestring, "RSA") == 0 ? hr_jwt_jwk_rsa(jwk, k, errstr, errlen)
                                              : hr_jwt_jwk_ec(jwk, k, errstr, errlen)) != 0 ||
        hr_jwt_key_kind(k, "jwk", errstr, errlen) != 0)
        goto cleanup;
    *out = k;
    k = NULL;
    rc = 0;
cleanup:
    hr_jwt_key_free(k);
    return rc;
}

/* R||S (2 x HR_JWT_ES256_HALF bytes) -> a DER ECDSA-Sig-Value in *DER
 * (OPENSSL_free), its length returned; -1 on failure. */
static int hr_jwt_raw_to_der(const unsigned char *raw, unsigned char **der)
{
    ECDSA_SIG *sig = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, HR_JWT_ES256_HALF, NULL);
    BIGNUM *s = BN_bin2bn(raw + HR_JWT_ES256_HALF, HR_JWT_ES256_HALF, NULL);
    int len = -1;

    *der = NULL;
    if (sig != NULL && r != NULL && s != NULL && ECDSA_SIG_set0(sig, r, s) == 1) {
        r = s = NULL; /* the signature owns them now */
        len = i2d_ECDSA_SIG(sig, der);
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return len;
}

int hr_jwt_verify(const hr_jwt_key *k, const char *data, size_t len, const unsigned char *sig,
                  size_t siglen, char *errstr, size_t errlen)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *der = NULL;
    int derlen = 0, ok = 0;

    if (k->alg == HR_JWT_ES256) {
        /* JWS' form (RFC 7518 3.4) is exactly R||S; anything else is no
         * ES256 signature, whatever DER would make of it. */
        if (siglen != 2 * HR_JWT_ES256_HALF || (derlen = hr_jwt_raw_to_der(sig, &der)) <= 0) {
            snprintf(errstr, errlen, "jwt: an ES256 signature is 64 bytes");
            goto done;
        }
        sig = der;
        siglen = (size_t)derlen;
    }
    if (md == NULL || EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, k->pkey) != 1) {
        hr_jwt_ssl_err("jwt: verify", errstr, errlen);
        goto done;
    }
    ok = EVP_DigestVerify(md, sig, siglen, (const unsigned char *)data, len) == 1;
    ERR_clear_error();
    if (!ok)
        snprintf(errstr, errlen, "jwt: bad signature");
done:
    OPENSSL_free(der);
    EVP_MD_CTX_free(md);
    return ok ? 0 : -1;
}
