/* key_fixtures: fixture files and JWT verification for the provider tests.
 * Verification uses OpenSSL directly, not hr_jwt, so a test checks hr_jwt's
 * output against an independent reading of RFC 7515 / 7518. */
#include "key_fixtures.h"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_base64.h"

const char *key_fixtures_dir = ".";

char *key_fixtures_read(const char *name, size_t *len)
{
    char path[1024];
    FILE *f;
    char *buf = NULL;
    long n;

    snprintf(path, sizeof path, "%s/%s", key_fixtures_dir, name);
    f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = '\0';
            if (len != NULL)
                *len = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* Decodes base64url [S, S+N) into a new NUL-terminated string. */
static char *key_fixtures_b64(const char *s, size_t n, size_t *outlen)
{
    char *out = malloc(n + 1);
    size_t len;

    if (out == NULL || hr_base64_decode(s, n, HR_BASE64_URL, (unsigned char *)out, n, &len) != 0) {
        free(out);
        return NULL;
    }
    out[len] = '\0';
    if (outlen != NULL)
        *outlen = len;
    return out;
}

/* Raw R||S (64 bytes) -> DER ECDSA-Sig-Value; the DER length, or -1. */
static int key_fixtures_raw_to_der(const unsigned char *raw, unsigned char **der)
{
    ECDSA_SIG *sig = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, 32, NULL), *s = BN_bin2bn(raw + 32, 32, NULL);
    int n = -1;

    if (sig != NULL && r != NULL && s != NULL && ECDSA_SIG_set0(sig, r, s) == 1) {
        r = s = NULL;
        n = i2d_ECDSA_SIG(sig, der);
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return n;
}

int key_fixtures_jwt_verify(const char *jwt, const char *pub_name, char **header, char **claims)
{
    const char *d1 = strchr(jwt, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    char *pem = NULL, *hdr = NULL, *cl = NULL, *sig = NULL;
    unsigned char *der = NULL;
    const unsigned char *sigp;
    size_t siglen = 0;
    int derlen, rc = -1;
    BIO *bio = NULL;
    EVP_PKEY *pub = NULL;
    EVP_MD_CTX *md = NULL;

    if (d2 == NULL || strchr(d2 + 1, '.') != NULL)
        goto cleanup;
    hdr = key_fixtures_b64(jwt, (size_t)(d1 - jwt), NULL);
    cl = key_fixtures_b64(d1 + 1, (size_t)(d2 - d1 - 1), NULL);
    sig = key_fixtures_b64(d2 + 1, strlen(d2 + 1), &siglen);
    pem = key_fixtures_read(pub_name, NULL);
    if (hdr == NULL || cl == NULL || sig == NULL || pem == NULL)
        goto cleanup;
    bio = BIO_new_mem_buf(pem, -1);
    pub = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
    if (pub == NULL)
        goto cleanup;
    sigp = (const unsigned char *)sig;
    if (strstr(hdr, "\"ES256\"") != NULL) {
        if (siglen != 64 || (derlen = key_fixtures_raw_to_der(sigp, &der)) < 0)
            goto cleanup;
        sigp = der;
        siglen = (size_t)derlen;
    } else if (strstr(hdr, "\"RS256\"") == NULL) {
        goto cleanup;
    }
    md = EVP_MD_CTX_new();
    if (md == NULL || EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pub) != 1 ||
        EVP_DigestVerify(md, sigp, siglen, (const unsigned char *)jwt, (size_t)(d2 - jwt)) != 1)
        goto cleanup;
    if (header != NULL) {
        *header = hdr;
        hdr = NULL;
    }
    if (claims != NULL) {
        *claims = cl;
        cl = NULL;
    }
    rc = 0;
cleanup:
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pub);
    BIO_free(bio);
    OPENSSL_free(der);
    free(pem);
    free(hdr);
    free(cl);
    free(sig);
    return rc;
}
