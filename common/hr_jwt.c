/* hr_jwt: RS256 / ES256 JWT signing over OpenSSL EVP.
 *
 * The key is an EVP_PKEY plus the algorithm chosen when it was loaded.  A
 * signature is made with EVP_DigestSign over "<b64url header>.<b64url
 * claims>"; for ES256 OpenSSL returns an ECDSA-Sig-Value in DER, which is
 * unpacked (d2i_ECDSA_SIG) into R and S, each left-padded to 32 bytes. */
#include "hr_jwt.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_base64.h"

#define HR_JWT_KID_MAX 64
#define HR_JWT_ES256_HALF 32 /* bytes of R and of S */

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

int hr_jwt_key_load(const char *pem, size_t len, hr_jwt_key **out, char *errstr, size_t errlen)
{
    hr_jwt_key *k = NULL;
    BIO *bio = NULL;
    char group[64];
    size_t glen = 0;
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
    switch (EVP_PKEY_get_base_id(k->pkey)) {
    case EVP_PKEY_RSA:
        if (EVP_PKEY_get_bits(k->pkey) < 2048) {
            snprintf(errstr, errlen, "private key: RSA key of %d bits, RS256 needs 2048 or more",
                     EVP_PKEY_get_bits(k->pkey));
            goto cleanup;
        }
        k->alg = HR_JWT_RS256;
        break;
    case EVP_PKEY_EC:
        if (EVP_PKEY_get_group_name(k->pkey, group, sizeof group, &glen) != 1 ||
            strcmp(group, SN_X9_62_prime256v1) != 0) {
            snprintf(errstr, errlen, "private key: EC key not on P-256, ES256 needs P-256");
            goto cleanup;
        }
        k->alg = HR_JWT_ES256;
        break;
    default:
        snprintf(errstr, errlen, "private key: neither RSA nor EC P-256");
        goto cleanup;
    }
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
