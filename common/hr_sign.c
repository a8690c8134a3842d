/* hr_sign: Standard Webhooks "v1" signatures with OpenSSL's one-shot HMAC.
 *
 * The signed content is id "." timestamp "." body; it is fed to HMAC as
 * three pieces through one EVP_MAC context per secret so the body is never
 * copied. */
#include "hr_sign.h"

#include <inttypes.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hr_base64.h"

#define HR_SIGN_PREFIX "whsec_"
#define HR_SIGN_ID_MAX 256

int hr_sign_secret_parse(const char *text, hr_sign_secret *out, char *errstr, size_t errlen)
{
    size_t plen = sizeof HR_SIGN_PREFIX - 1, n;

    if (strncmp(text, HR_SIGN_PREFIX, plen) != 0) {
        snprintf(errstr, errlen, "webhook secret must start with \"" HR_SIGN_PREFIX "\"");
        return -1;
    }
    if (hr_base64_decode(text + plen, strlen(text + plen), HR_BASE64_STD, out->key, sizeof out->key,
                         &n) != 0) {
        snprintf(errstr, errlen, "webhook secret: not base64 of at most %d bytes",
                 HR_SIGN_SECRET_MAX);
        return -1;
    }
    if (n < HR_SIGN_SECRET_MIN) {
        snprintf(errstr, errlen, "webhook secret: %zu bytes, at least %d needed", n,
                 HR_SIGN_SECRET_MIN);
        return -1;
    }
    out->len = n;
    return 0;
}

static bool hr_sign_id_ok(const char *id)
{
    size_t n = strlen(id);

    return n > 0 && n <= HR_SIGN_ID_MAX && strpbrk(id, ".\r\n") == NULL;
}

/* OUT = HMAC-SHA256(KEY, the N PARTS one after the other). */
static int hr_sign_mac_parts(EVP_MAC *mac, const unsigned char *key, size_t keylen,
                             const char *const *parts, const size_t *lens, size_t n,
                             unsigned char *out)
{
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
    size_t outl = 0, i;
    int rc = -1;

    if (ctx == NULL || EVP_MAC_init(ctx, key, keylen, params) != 1)
        goto done;
    for (i = 0; i < n; i++)
        if (EVP_MAC_update(ctx, (const unsigned char *)parts[i], lens[i]) != 1)
            goto done;
    if (EVP_MAC_final(ctx, out, &outl, HR_SIGN_MAC_LEN) == 1 && outl == HR_SIGN_MAC_LEN)
        rc = 0;
done:
    EVP_MAC_CTX_free(ctx);
    return rc;
}

/* MAC = HMAC-SHA256(S, ID "." TS "." BODY). */
static int hr_sign_mac(EVP_MAC *mac, const hr_sign_secret *s, const char *id, const char *ts,
                       const char *body, size_t body_len, unsigned char *out)
{
    const char *parts[] = {id, ".", ts, ".", body};
    const size_t lens[] = {strlen(id), 1, strlen(ts), 1, body_len};

    return hr_sign_mac_parts(mac, s->key, s->len, parts, lens, 5, out);
}

int hr_sign_hmac(const void *key, size_t keylen, const char *msg, size_t len,
                 unsigned char out[HR_SIGN_MAC_LEN])
{
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    int rc = mac != NULL ? hr_sign_mac_parts(mac, key, keylen, &msg, &len, 1, out) : -1;

    EVP_MAC_free(mac);
    return rc;
}

int hr_sign_append(const hr_sign_secret *secrets, size_t nsecrets, const char *id,
                   int64_t timestamp, const char *body, size_t body_len, hr_buf *out, char *errstr,
                   size_t errlen)
{
    EVP_MAC *mac = NULL;
    unsigned char digest[HR_SIGN_MAC_LEN];
    hr_buf sig;
    char ts[24];
    int rc = -1;

    if (nsecrets == 0 || nsecrets > HR_SIGN_MAX_SECRETS) {
        snprintf(errstr, errlen, "webhook signature: 1..%d secrets", HR_SIGN_MAX_SECRETS);
        return -1;
    }
    if (!hr_sign_id_ok(id)) {
        snprintf(errstr, errlen, "webhook signature: id must be 1..%d bytes without '.', CR, LF",
                 HR_SIGN_ID_MAX);
        return -1;
    }
    snprintf(ts, sizeof ts, "%" PRId64, timestamp);
    /* Built apart and appended at the end, so OUT is unchanged on failure. */
    hr_buf_init(&sig, out->max - out->len);
    mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (mac == NULL) {
        snprintf(errstr, errlen, "webhook signature: HMAC unavailable");
        goto cleanup;
    }
    for (size_t i = 0; i < nsecrets; i++) {
        if (hr_sign_mac(mac, &secrets[i], id, ts, body, body_len, digest) != 0) {
            snprintf(errstr, errlen, "webhook signature: HMAC failed");
            goto cleanup;
        }
        if ((i > 0 && hr_buf_append(&sig, " ", 1) != 0) || hr_buf_append(&sig, "v1,", 3) != 0 ||
            hr_base64_append(&sig, digest, sizeof digest, HR_BASE64_STD) != 0) {
            snprintf(errstr, errlen, "webhook signature: over the buffer's cap");
            goto cleanup;
        }
    }
    if (hr_buf_append(out, sig.data, sig.len) != 0) {
        snprintf(errstr, errlen, "webhook signature: over the buffer's cap");
        goto cleanup;
    }
    rc = 0;
cleanup:
    hr_buf_free(&sig);
    EVP_MAC_free(mac);
    return rc;
}

int hr_sign_sha256_hex(const void *data, size_t len, char *hex)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
        return -1;
    for (unsigned i = 0; i < mdlen; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}
