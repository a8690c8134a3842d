/* Unit tests of web push: hr_wpsub (subscriptions as addresses), wk_ece
 * (RFC 8291 aes128gcm, checked by decrypting: first the RFC's own example
 * of Appendix A, so the decryption here is known to be right, then what
 * wk_ece wrote, with the user agent's private key), wk_webpush (VAPID
 * tokens verified with the key's public half and kept per origin, the
 * Topic, the plaintext, the answers).  The decryption uses EVP_PKEY's
 * HKDF, not the EVP_KDF wk_ece uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <cmocka.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>

#include "hr_base64.h"
#include "hr_wpsub.h"
#include "key_fixtures.h"
#include "test_provider.h"
#include "wk_ece.h"
#include "wk_webpush.h"

#define NOW 1700000000

/* RFC 8291 Appendix A. */
#define RFC_UA_PUBLIC \
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
#define RFC_UA_PRIVATE "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
#define RFC_AUTH "BTBZMqHH6r4Tts7J_aSIgg"
#define RFC_BODY                                                                                  \
    "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAm" \
    "S6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_" \
    "Qulcy4a-fN"
#define RFC_PLAIN "When I grow up, I want to be a watermelon"

#define ENDPOINT "https://push.example.net/wpush/v2/abc"
#define ADDRESS ENDPOINT "#" RFC_UA_PUBLIC "." RFC_AUTH

static size_t b64(const char *s, unsigned char *out, size_t cap)
{
    size_t n = 0;

    assert_int_equal(hr_base64_decode(s, strlen(s), HR_BASE64_URL, out, cap, &n), 0);
    return n;
}

/* HKDF-SHA-256 with EVP_PKEY_HKDF. */
static void hkdf(const unsigned char *salt, size_t slen, const unsigned char *ikm, size_t ilen,
                 const unsigned char *info, size_t infolen, unsigned char *out, size_t len)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);

    assert_non_null(c);
    assert_int_equal(EVP_PKEY_derive_init(c), 1);
    assert_int_equal(EVP_PKEY_CTX_set_hkdf_md(c, EVP_sha256()), 1);
    assert_int_equal(EVP_PKEY_CTX_set1_hkdf_salt(c, salt, (int)slen), 1);
    assert_int_equal(EVP_PKEY_CTX_set1_hkdf_key(c, ikm, (int)ilen), 1);
    assert_int_equal(EVP_PKEY_CTX_add1_hkdf_info(c, info, (int)infolen), 1);
    assert_int_equal(EVP_PKEY_derive(c, out, &len), 1);
    EVP_PKEY_CTX_free(c);
}

/* The P-256 key pair of the private scalar PRIV (32 bytes) and PUB. */
static EVP_PKEY *keypair(const unsigned char *priv, const unsigned char *pub)
{
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    BIGNUM *bn = BN_bin2bn(priv, 32, NULL);
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_PKEY *k = NULL;
    OSSL_PARAM *p;

    assert_int_equal(OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0),
                     1);
    assert_int_equal(OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, bn), 1);
    assert_int_equal(OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub, 65), 1);
    p = OSSL_PARAM_BLD_to_param(bld);
    assert_int_equal(EVP_PKEY_fromdata_init(c), 1);
    assert_int_equal(EVP_PKEY_fromdata(c, &k, EVP_PKEY_KEYPAIR, p), 1);
    OSSL_PARAM_free(p);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    EVP_PKEY_CTX_free(c);
    return k;
}

/* Decrypts the aes128gcm BODY (N bytes) with the user agent's keys into
 * OUT; the plaintext's length, or -1 when it does not decrypt. */
static long decrypt(const unsigned char *body, size_t n, const char *ua_public_b64,
                    const char *ua_private_b64, const char *auth_b64, unsigned char *out)
{
    unsigned char ua_pub[65], ua_priv[32], auth[16], secret[32], ikm[32], cek[16], nonce[12];
    unsigned char info[14 + 130];
    EVP_PKEY *ua, *as = NULL;
    EVP_PKEY_CTX *d;
    EVP_CIPHER_CTX *c;
    size_t slen = sizeof secret, rs;
    int len = 0, fin = 0;
    long plen;
    char why[128];

    b64(ua_public_b64, ua_pub, sizeof ua_pub);
    b64(ua_private_b64, ua_priv, sizeof ua_priv);
    b64(auth_b64, auth, sizeof auth);
    assert_true(n > WK_ECE_HEADER + 16);
    rs = (size_t)body[16] << 24 | (size_t)body[17] << 16 | (size_t)body[18] << 8 | body[19];
    assert_int_equal(body[20], 65);
    assert_true(n - WK_ECE_HEADER <= rs);
    ua = keypair(ua_priv, ua_pub);
    assert_int_equal(hr_jwt_p256_point(body + 21, &as, why, sizeof why), 0);
    d = EVP_PKEY_CTX_new(ua, NULL);
    assert_int_equal(EVP_PKEY_derive_init(d), 1);
    assert_int_equal(EVP_PKEY_derive_set_peer(d, as), 1);
    assert_int_equal(EVP_PKEY_derive(d, secret, &slen), 1);
    memcpy(info, "WebPush: info", 14);
    memcpy(info + 14, ua_pub, 65);
    memcpy(info + 14 + 65, body + 21, 65);
    hkdf(auth, 16, secret, 32, info, sizeof info, ikm, 32);
    hkdf(body, 16, ikm, 32, (const unsigned char *)"Content-Encoding: aes128gcm", 28, cek, 16);
    hkdf(body, 16, ikm, 32, (const unsigned char *)"Content-Encoding: nonce", 24, nonce, 12);
    c = EVP_CIPHER_CTX_new();
    assert_int_equal(EVP_DecryptInit_ex(c, EVP_aes_128_gcm(), NULL, cek, nonce), 1);
    assert_int_equal(
        EVP_DecryptUpdate(c, out, &len, body + WK_ECE_HEADER, (int)(n - WK_ECE_HEADER - 16)), 1);
    assert_int_equal(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, (void *)(body + n - 16)), 1);
    plen = EVP_DecryptFinal_ex(c, out + len, &fin) == 1 ? len + fin : -1;
    EVP_CIPHER_CTX_free(c);
    EVP_PKEY_CTX_free(d);
    EVP_PKEY_free(ua);
    EVP_PKEY_free(as);
    /* The last record ends with its delimiter 0x02 (no padding here). */
    if (plen > 0 && out[plen - 1] == 0x02)
        return plen - 1;
    return -1;
}

static void test_rfc_vector_decrypts(void **state)
{
    unsigned char body[512], out[512];
    size_t n = b64(RFC_BODY, body, sizeof body);
    long plen;

    (void)state;
    plen = decrypt(body, n, RFC_UA_PUBLIC, RFC_UA_PRIVATE, RFC_AUTH, out);
    assert_int_equal(plen, strlen(RFC_PLAIN));
    assert_memory_equal(out, RFC_PLAIN, (size_t)plen);
}

static void test_encrypt_round_trip(void **state)
{
    static const char msg[] = "{\"title\":\"hi\",\"body\":\"there\"}";
    wk_ece *e = NULL;
    hr_wpsub sub;
    hr_buf out, again;
    unsigned char plain[WK_ECE_RS];
    char err[256];

    (void)state;
    hr_buf_init(&out, WK_ECE_RS);
    hr_buf_init(&again, WK_ECE_RS);
    assert_int_equal(wk_ece_new(&e, err, sizeof err), 0);
    assert_int_equal(hr_wpsub_parse(ADDRESS, &sub, err, sizeof err), 0);
    assert_int_equal(sub.endpoint_len, strlen(ENDPOINT));
    assert_int_equal(wk_ece_encrypt(e, &sub, msg, strlen(msg), &out, err, sizeof err), 0);
    assert_int_equal(out.len, WK_ECE_HEADER + strlen(msg) + 1 + WK_ECE_TAG);
    assert_int_equal(
        decrypt((unsigned char *)out.data, out.len, RFC_UA_PUBLIC, RFC_UA_PRIVATE, RFC_AUTH, plain),
        strlen(msg));
    assert_memory_equal(plain, msg, strlen(msg));
    /* A new key pair and salt for every message. */
    assert_int_equal(wk_ece_encrypt(e, &sub, msg, strlen(msg), &again, err, sizeof err), 0);
    assert_memory_not_equal(out.data, again.data, WK_ECE_HEADER);
    /* One flipped byte of ciphertext: the tag no longer matches. */
    out.data[WK_ECE_HEADER + 3] ^= 1;
    assert_int_equal(
        decrypt((unsigned char *)out.data, out.len, RFC_UA_PUBLIC, RFC_UA_PRIVATE, RFC_AUTH, plain),
        -1);
    hr_buf_free(&out);
    hr_buf_free(&again);
    wk_ece_free(e);
}

static void test_encrypt_limits(void **state)
{
    static char big[WK_ECE_PLAIN_MAX + 1];
    wk_ece *e = NULL;
    hr_wpsub sub;
    hr_buf out;
    char err[256];

    (void)state;
    memset(big, 'x', sizeof big);
    hr_buf_init(&out, WK_ECE_RS);
    assert_int_equal(wk_ece_new(&e, err, sizeof err), 0);
    assert_int_equal(hr_wpsub_parse(ADDRESS, &sub, err, sizeof err), 0);
    assert_int_equal(wk_ece_encrypt(e, &sub, big, sizeof big, &out, err, sizeof err), -1);
    assert_non_null(strstr(err, "payload of"));
    assert_int_equal(out.len, 0);
    /* The most a record takes fills the 4096 bytes the push services accept. */
    assert_int_equal(wk_ece_encrypt(e, &sub, big, WK_ECE_PLAIN_MAX, &out, err, sizeof err), 0);
    assert_int_equal(out.len, WK_ECE_RS);
    hr_buf_free(&out);
    wk_ece_free(e);
}

static void test_wpsub(void **state)
{
    /* The RFC key with its last byte changed: off the curve. */
    static const char off_curve[] =
        "https://a.example/x#"
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw8"
        "." RFC_AUTH;
    cJSON *j =
        cJSON_Parse("{\"endpoint\":\"" ENDPOINT "\",\"expirationTime\":null,"
                    "\"keys\":{\"p256dh\":\"" RFC_UA_PUBLIC "\",\"auth\":\"" RFC_AUTH "\"}}");
    hr_wpsub sub;
    wk_ece *e = NULL;
    hr_buf out;
    char err[256];

    (void)state;
    hr_buf_init(&out, 1024);
    assert_int_equal(hr_wpsub_from_json(j, &out, err, sizeof err), 0);
    assert_string_equal(out.data, ADDRESS);
    hr_buf_reset(&out);
    assert_int_equal(hr_wpsub_parse(off_curve, &sub, err, sizeof err), -1);
    assert_non_null(strstr(err, "keys.p256dh"));
    /* The worker's split leaves the point to OpenSSL at encryption. */
    assert_int_equal(hr_wpsub_split(off_curve, &sub, err, sizeof err), 0);
    assert_int_equal(wk_ece_new(&e, err, sizeof err), 0);
    assert_int_equal(wk_ece_encrypt(e, &sub, "x", 1, &out, err, sizeof err), -1);
    assert_int_equal(out.len, 0);
    wk_ece_free(e);
    assert_int_equal(
        hr_wpsub_parse("http://a.example/x#" RFC_UA_PUBLIC "." RFC_AUTH, &sub, err, sizeof err),
        -1);
    assert_non_null(strstr(err, "https://"));
    assert_int_equal(
        hr_wpsub_parse(ENDPOINT "#" RFC_UA_PUBLIC ".BTBZMqHH6r4Tts7J_aSI", &sub, err, sizeof err),
        -1);
    assert_non_null(strstr(err, "keys.auth"));
    assert_int_equal(hr_wpsub_parse(ENDPOINT, &sub, err, sizeof err), -1);
    assert_non_null(strstr(err, "<endpoint>#<p256dh>.<auth>"));
    cJSON_Delete(j);
    j = cJSON_Parse("{\"endpoint\":\"" ENDPOINT
                    "\",\"keys\":{\"p256dh\":\"AAAA\",\"auth\":\"" RFC_AUTH "\"}}");
    hr_buf_reset(&out);
    assert_int_equal(hr_wpsub_from_json(j, &out, err, sizeof err), -1);
    assert_int_equal(out.len, 0);
    cJSON_Delete(j);
    hr_buf_free(&out);
}

static wk_webpush *new_webpush(void)
{
    size_t len;
    char *pem = key_fixtures_read("ec.p8", &len), err[256] = "";
    wk_webpush *wp = NULL;

    assert_non_null(pem);
    if (wk_webpush_new(pem, len, "mailto:ops@example.com", &wp, err, sizeof err) != 0)
        fail_msg("%s", err);
    free(pem);
    return wp;
}

/* The JWT of an Authorization value "vapid t=<jwt>, k=<key>" (malloc'd). */
static char *vapid_jwt(const char *auth)
{
    const char *k = strstr(auth, ", k=");

    assert_int_equal(strncmp(auth, "vapid t=", 8), 0);
    assert_non_null(k);
    assert_int_equal(strlen(k + 4), 87);
    return strndup(auth + 8, (size_t)(k - auth - 8));
}

static void test_vapid(void **state)
{
    wk_webpush *wp = new_webpush();
    char err[256], *jwt, *claims = NULL, *first;
    const char *auth;
    size_t len = 0;
    cJSON *c;

    (void)state;
    auth = wk_webpush_auth(wp, ENDPOINT, strlen(ENDPOINT), NOW, &len, err, sizeof err);
    assert_non_null(auth);
    assert_int_equal(len, strlen(auth));
    jwt = vapid_jwt(auth);
    assert_int_equal(key_fixtures_jwt_verify(jwt, "ec_pub.pem", NULL, &claims), 0);
    c = cJSON_Parse(claims);
    assert_string_equal(cJSON_GetObjectItem(c, "aud")->valuestring, "https://push.example.net");
    assert_string_equal(cJSON_GetObjectItem(c, "sub")->valuestring, "mailto:ops@example.com");
    assert_int_equal((int64_t)cJSON_GetObjectItem(c, "exp")->valuedouble,
                     NOW + WK_WEBPUSH_VAPID_TTL_S);
    cJSON_Delete(c);
    free(claims);
    first = strdup(auth);
    /* Kept for the origin, whatever the path, until half its life is
     * left. */
    auth = wk_webpush_auth(wp, "https://push.example.net/other", 30,
                           NOW + WK_WEBPUSH_VAPID_TTL_S / 2, &len, err, sizeof err);
    assert_string_equal(auth, first);
    assert_int_equal(wk_webpush_signed(wp), 1);
    auth = wk_webpush_auth(wp, "https://push.example.net/other", 30,
                           NOW + WK_WEBPUSH_VAPID_TTL_S / 2 + 1, &len, err, sizeof err);
    assert_string_not_equal(auth, first);
    assert_int_equal(wk_webpush_signed(wp), 2);
    /* Another push service: a token of its own. */
    auth = wk_webpush_auth(wp, "https://fcm.example.com:8443/x", 30, NOW, &len, err, sizeof err);
    free(jwt);
    jwt = vapid_jwt(auth);
    assert_int_equal(key_fixtures_jwt_verify(jwt, "ec_pub.pem", NULL, &claims), 0);
    assert_non_null(strstr(claims, "\"aud\":\"https://fcm.example.com:8443\""));
    assert_int_equal(wk_webpush_signed(wp), 3);
    free(claims);
    free(jwt);
    free(first);
    wk_webpush_free(wp);
}

static void test_vapid_rejects(void **state)
{
    size_t len;
    char *rsa = key_fixtures_read("rsa.pem", &len), err[256];
    wk_webpush *wp = (wk_webpush *)1;

    (void)state;
    assert_int_equal(wk_webpush_new(rsa, len, "mailto:a@b.c", &wp, err, sizeof err), -1);
    assert_null(wp);
    assert_non_null(strstr(err, "P-256"));
    free(rsa);
}

static void test_topic_and_plaintext(void **state)
{
    char topic[WK_WEBPUSH_TOPIC_MAX + 1];
    cJSON *payload = cJSON_Parse("{\"url\":\"/inbox\",\"n\":3}");
    hr_buf out;
    hr_rich rich;
    char err[128];

    (void)state;
    assert_int_equal(wk_webpush_topic("news-7_a", topic), 8);
    assert_string_equal(topic, "news-7_a");
    /* Not a topic as written (a space, a dot): a digest of it, the same
     * every time. */
    assert_int_equal(wk_webpush_topic("daily digest v1.2", topic), WK_WEBPUSH_TOPIC_MAX);
    assert_int_equal(
        strspn(topic, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
        WK_WEBPUSH_TOPIC_MAX);
    hr_buf_init(&out, 256);
    assert_int_equal(wk_webpush_plaintext("Hi \"you\"", "line\n2", payload, NULL, &out), 0);
    assert_string_equal(out.data, "{\"title\":\"Hi \\\"you\\\"\",\"body\":\"line\\n2\","
                                  "\"data\":{\"url\":\"/inbox\",\"n\":3}}");
    hr_buf_reset(&out);
    assert_int_equal(wk_webpush_plaintext("t", "b", NULL, NULL, &out), 0);
    assert_string_equal(out.data, "{\"title\":\"t\",\"body\":\"b\"}");
    /* The rich options a web push carries, under the Notification API's
     * names, between the texts and the data. */
    hr_buf_reset(&out);
    assert_int_equal(
        hr_rich_parse("{\"image\":\"https://cdn.example.com/a.png\",\"thread\":\"t-1\","
                      "\"buttons\":[{\"id\":\"yes\",\"title\":\"Yes \\\"ok\\\"\"},"
                      "{\"id\":\"no\",\"title\":\"No\"}]}",
                      &rich, err, sizeof err),
        0);
    assert_int_equal(wk_webpush_plaintext("t", "b", payload, &rich, &out), 0);
    assert_string_equal(
        out.data, "{\"title\":\"t\",\"body\":\"b\",\"image\":\"https://cdn.example.com/a.png\","
                  "\"actions\":[{\"action\":\"yes\",\"title\":\"Yes \\\"ok\\\"\"},"
                  "{\"action\":\"no\",\"title\":\"No\"}],\"tag\":\"t-1\","
                  "\"data\":{\"url\":\"/inbox\",\"n\":3}}");
    assert_int_equal(hr_rich_check_webpush(&rich, err, sizeof err), 0);
    /* What it cannot carry is refused, named. */
    assert_int_equal(hr_rich_parse("{\"badge\":3}", &rich, err, sizeof err), 0);
    assert_int_equal(hr_rich_check_webpush(&rich, err, sizeof err), -1);
    assert_string_equal(err,
                        "rich.badge: web push cannot carry it (image, buttons and thread it can)");
    assert_int_equal(hr_rich_parse("{\"silent\":true}", &rich, err, sizeof err), 0);
    assert_int_equal(hr_rich_check_webpush(&rich, err, sizeof err), -1);
    cJSON_Delete(payload);
    hr_buf_free(&out);
}

static void classify(long status, const char *body, size_t len, long retry_after_s,
                     wk_provider_result *out)
{
    (void)body;
    (void)len;
    wk_webpush_classify(status, retry_after_s, out);
}

static void test_classify(void **state)
{
    static const test_provider_case cases[] = {
        {201, "", -1, WK_VERDICT_DELIVERED, "201"},
        {200, "", -1, WK_VERDICT_DELIVERED, "200"},
        {410, "", -1, WK_VERDICT_UNREGISTERED, "410 subscription gone"},
        {404, "", -1, WK_VERDICT_UNREGISTERED, "404 subscription gone"},
        {429, "", 7, WK_VERDICT_SLOWDOWN, "429"},
        {503, "", 2, WK_VERDICT_SLOWDOWN, "503"},
        {502, "", -1, WK_VERDICT_RETRY, "502"},
        {413, "", -1, WK_VERDICT_FAILED, "413 payload too large"},
        {403, "", -1, WK_VERDICT_FAILED, "403 VAPID refused"},
        {400, "", -1, WK_VERDICT_FAILED, "400"},
    };

    (void)state;
    test_provider_check(classify, cases, sizeof cases / sizeof cases[0]);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc_vector_decrypts),
        cmocka_unit_test(test_encrypt_round_trip),
        cmocka_unit_test(test_encrypt_limits),
        cmocka_unit_test(test_wpsub),
        cmocka_unit_test(test_vapid),
        cmocka_unit_test(test_vapid_rejects),
        cmocka_unit_test(test_topic_and_plaintext),
        cmocka_unit_test(test_classify),
    };

    key_fixtures_dir = argc > 1 ? argv[1] : "keys";
    return cmocka_run_group_tests(tests, NULL, NULL);
}
