/* wk_ece: RFC 8291 aes128gcm encryption (see wk_ece.h).  The wk_ece holds
 * the fetched EVP_KDF (HKDF), EVP_CIPHER (AES-128-GCM), a KDF and a
 * cipher context reset for every use, and the P-256 key generation
 * context; a message's secrets (the ECDH output, the IKM, the key and the
 * nonce) live on the stack and are cleansed before returning. */
#include "wk_ece.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_variant.h"

/* What a task may carry on a web push channel is checked at create time
 * against the same bound (hr_variant_check). */
_Static_assert(WK_ECE_PLAIN_MAX == HR_VARIANT_WEBPUSH_MAX, "hr_variant.h's web push limit");

#define WK_ECE_SALT 16
#define WK_ECE_IKM 32
#define WK_ECE_CEK 16
#define WK_ECE_NONCE 12

struct wk_ece {
    EVP_KDF *hkdf;
    EVP_KDF_CTX *kdf;
    EVP_CIPHER *gcm;
    EVP_CIPHER_CTX *cipher;
    EVP_PKEY_CTX *keygen; /* P-256, initialised once */
};

/* ERRSTR = "ece: WHAT: <the first OpenSSL error>", the queue emptied. */
static int wk_ece_fail(const char *what, char *errstr, size_t errlen)
{
    unsigned long err = ERR_get_error();
    char msg[200];

    ERR_error_string_n(err, msg, sizeof msg);
    ERR_clear_error();
    snprintf(errstr, errlen, "ece: %s: %s", what, err != 0 ? msg : "failed");
    return -1;
}

int wk_ece_new(wk_ece **out, char *errstr, size_t errlen)
{
    wk_ece *e = calloc(1, sizeof *e);

    *out = NULL;
    if (e == NULL) {
        snprintf(errstr, errlen, "ece: out of memory");
        return -1;
    }
    e->hkdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    e->kdf = e->hkdf != NULL ? EVP_KDF_CTX_new(e->hkdf) : NULL;
    e->gcm = EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL);
    e->cipher = EVP_CIPHER_CTX_new();
    e->keygen = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (e->kdf == NULL || e->gcm == NULL || e->cipher == NULL || e->keygen == NULL ||
        EVP_PKEY_keygen_init(e->keygen) != 1 ||
        EVP_PKEY_CTX_set_group_name(e->keygen, "P-256") != 1) {
        wk_ece_free(e);
        return wk_ece_fail("HKDF, AES-128-GCM or P-256 unavailable", errstr, errlen);
    }
    *out = e;
    return 0;
}

void wk_ece_free(wk_ece *e)
{
    if (e == NULL)
        return;
    EVP_KDF_CTX_free(e->kdf);
    EVP_KDF_free(e->hkdf);
    EVP_CIPHER_CTX_free(e->cipher);
    EVP_CIPHER_free(e->gcm);
    EVP_PKEY_CTX_free(e->keygen);
    free(e);
}

/* HKDF-SHA-256 (extract and expand) of IKM with SALT and INFO into LEN
 * bytes at OUT.  0 or -1. */
static int wk_ece_hkdf(wk_ece *e, const unsigned char *salt, size_t saltlen,
                       const unsigned char *ikm, size_t ikmlen, const void *info, size_t infolen,
                       unsigned char *out, size_t len)
{
    OSSL_PARAM p[5];

    p[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, "SHA256", 0);
    p[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, saltlen);
    p[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikmlen);
    p[3] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, infolen);
    p[4] = OSSL_PARAM_construct_end();
    EVP_KDF_CTX_reset(e->kdf);
    return EVP_KDF_derive(e->kdf, out, len, p) == 1 ? 0 : -1;
}

/* A new key pair into *AS and its public point into AS_PUBLIC, and the
 * ECDH secret of AS and UA into SECRET.  0 or -1 (ERRSTR). */
static int wk_ece_agree(wk_ece *e, EVP_PKEY *ua, EVP_PKEY **as,
                        unsigned char as_public[HR_JWT_P256_POINT], unsigned char secret[32],
                        char *errstr, size_t errlen)
{
    EVP_PKEY_CTX *dctx = NULL;
    size_t n = 0, slen = 32;
    int rc = -1;

    if (EVP_PKEY_generate(e->keygen, as) != 1 ||
        EVP_PKEY_get_octet_string_param(*as, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, as_public,
                                        HR_JWT_P256_POINT, &n) != 1 ||
        n != HR_JWT_P256_POINT) {
        wk_ece_fail("key pair", errstr, errlen);
        goto done;
    }
    /* UA was checked on the curve when it was made (hr_jwt_p256_point):
     * not validated a second time. */
    dctx = EVP_PKEY_CTX_new_from_pkey(NULL, *as, NULL);
    if (dctx == NULL || EVP_PKEY_derive_init(dctx) != 1 ||
        EVP_PKEY_derive_set_peer_ex(dctx, ua, 0) != 1 ||
        EVP_PKEY_derive(dctx, secret, &slen) != 1 || slen != 32) {
        wk_ece_fail("ECDH", errstr, errlen);
        goto done;
    }
    rc = 0;
done:
    EVP_PKEY_CTX_free(dctx);
    return rc;
}

/* Encrypts the N bytes at PLAIN and the last record's delimiter with CEK
 * and NONCE into OUT, the 16-byte tag after them (N + 1 + WK_ECE_TAG
 * bytes in all).  0 or -1. */
static int wk_ece_seal(wk_ece *e, const unsigned char *cek, const unsigned char *nonce,
                       const void *plain, size_t n, unsigned char *out)
{
    static const unsigned char delimiter = 0x02; /* RFC 8188: the last record */
    int len = 0, more = 0, fin = 0;

    if (EVP_CIPHER_CTX_reset(e->cipher) != 1 ||
        EVP_EncryptInit_ex2(e->cipher, e->gcm, cek, nonce, NULL) != 1 ||
        EVP_EncryptUpdate(e->cipher, out, &len, plain, (int)n) != 1 ||
        EVP_EncryptUpdate(e->cipher, out + len, &more, &delimiter, 1) != 1 ||
        EVP_EncryptFinal_ex(e->cipher, out + len + more, &fin) != 1 ||
        (size_t)(len + more + fin) != n + 1)
        return -1;
    return EVP_CIPHER_CTX_ctrl(e->cipher, EVP_CTRL_GCM_GET_TAG, WK_ECE_TAG, out + n + 1) == 1 ? 0
                                                                                              : -1;
}

int wk_ece_encrypt(wk_ece *e, const hr_wpsub *sub, const void *plain, size_t n, hr_buf *out,
                   char *errstr, size_t errlen)
{
    static const char key_label[] = "WebPush: info", cek_info[] = "Content-Encoding: aes128gcm",
                      nonce_info[] = "Content-Encoding: nonce";
    /* key_info: the label and its NUL, then ua_public and as_public. */
    unsigned char key_info[sizeof key_label + 2 * HR_JWT_P256_POINT];
    unsigned char secret[32], ikm[WK_ECE_IKM], cek[WK_ECE_CEK], nonce[WK_ECE_NONCE];
    unsigned char body[WK_ECE_RS], *as_public = body + 16 + 4 + 1;
    EVP_PKEY *ua = NULL, *as = NULL;
    size_t at = WK_ECE_HEADER;
    int rc = -1;

    if (n > WK_ECE_PLAIN_MAX) {
        snprintf(errstr, errlen, "ece: payload of %zu bytes, web push takes %d", n,
                 WK_ECE_PLAIN_MAX);
        return -1;
    }
    if (hr_jwt_p256_point(sub->p256dh, &ua, errstr, errlen) != 0 ||
        wk_ece_agree(e, ua, &as, as_public, secret, errstr, errlen) != 0)
        goto done;
    /* The header: salt, rs, idlen and the key id (as_public, written
     * above). */
    if (RAND_bytes(body, WK_ECE_SALT) != 1) {
        wk_ece_fail("salt", errstr, errlen);
        goto done;
    }
    body[16] = (unsigned char)(WK_ECE_RS >> 24);
    body[17] = (unsigned char)(WK_ECE_RS >> 16);
    body[18] = (unsigned char)(WK_ECE_RS >> 8);
    body[19] = (unsigned char)WK_ECE_RS;
    body[20] = HR_JWT_P256_POINT;
    memcpy(key_info, key_label, sizeof key_label);
    memcpy(key_info + sizeof key_label, sub->p256dh, HR_JWT_P256_POINT);
    memcpy(key_info + sizeof key_label + HR_JWT_P256_POINT, as_public, HR_JWT_P256_POINT);
    if (wk_ece_hkdf(e, sub->auth, sizeof sub->auth, secret, sizeof secret, key_info,
                    sizeof key_info, ikm, sizeof ikm) != 0 ||
        wk_ece_hkdf(e, body, WK_ECE_SALT, ikm, sizeof ikm, cek_info, sizeof cek_info, cek,
                    sizeof cek) != 0 ||
        wk_ece_hkdf(e, body, WK_ECE_SALT, ikm, sizeof ikm, nonce_info, sizeof nonce_info, nonce,
                    sizeof nonce) != 0) {
        wk_ece_fail("HKDF", errstr, errlen);
        goto done;
    }
    /* The record: the plaintext and its delimiter, encrypted, then the
     * tag (n is at most WK_ECE_PLAIN_MAX: it all fits BODY). */
    if (wk_ece_seal(e, cek, nonce, plain, n, body + at) != 0) {
        wk_ece_fail("AES-128-GCM", errstr, errlen);
        goto done;
    }
    at += n + 1 + WK_ECE_TAG;
    if (hr_buf_append(out, (const char *)body, at) != 0) {
        snprintf(errstr, errlen, "ece: body over the buffer's cap");
        goto done;
    }
    rc = 0;
done:
    OPENSSL_cleanse(secret, sizeof secret);
    OPENSSL_cleanse(ikm, sizeof ikm);
    OPENSSL_cleanse(cek, sizeof cek);
    OPENSSL_cleanse(nonce, sizeof nonce);
    EVP_PKEY_free(as);
    EVP_PKEY_free(ua);
    return rc;
}
