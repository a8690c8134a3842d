/* Unit tests of hr_jwks: JWTs of an identity provider checked against its
 * JWK Set (keys/jwks.json holds the public halves of keys/rsa.pem and
 * keys/ec.p8, made with python3-cryptography, plus an encryption key and
 * an HMAC key that must be left out).  Tokens are signed here with
 * hr_jwt_sign; the forgeries are built by hand: alg none, HS256 keyed with
 * the RSA public key (the classic confusion), an ES256 header on the RSA
 * key's kid, a changed claim under the old signature. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hr_base64.h"
#include "hr_jwks.h"
#include "hr_jwt.h"
#include "hr_sign.h"
#include "key_fixtures.h"

#define NOW 1900000000
#define ISS "https://id.example.org"
#define AUD "herald"

static hr_jwks *set;

static int load_set(void **state)
{
    size_t len;
    char *text = key_fixtures_read("jwks.json", &len), err[256];

    (void)state;
    assert_non_null(text);
    assert_int_equal(hr_jwks_parse(text, len, &set, err, sizeof err), 0);
    free(text);
    return 0;
}

static int free_set(void **state)
{
    (void)state;
    hr_jwks_free(set);
    return 0;
}

/* A token for CLAIMS signed with keys/PEM under KID, into a new string. */
static char *sign(const char *pem, const char *kid, const char *claims)
{
    size_t len;
    char *text = key_fixtures_read(pem, &len), err[256];
    hr_jwt_key *k = NULL;
    hr_buf b;

    assert_non_null(text);
    assert_int_equal(hr_jwt_key_load(text, len, &k, err, sizeof err), 0);
    hr_buf_init(&b, 16384);
    assert_int_equal(hr_jwt_sign(k, kid, claims, strlen(claims), &b, err, sizeof err), 0);
    hr_jwt_key_free(k);
    free(text);
    return b.data;
}

/* A token of HEADER and CLAIMS (JSON texts) with the signature SIG. */
static char *forge(const char *header, const char *claims, const void *sig, size_t siglen)
{
    hr_buf b;

    hr_buf_init(&b, 16384);
    assert_int_equal(hr_base64_append(&b, header, strlen(header), HR_BASE64_URL), 0);
    assert_int_equal(hr_buf_append(&b, ".", 1), 0);
    assert_int_equal(hr_base64_append(&b, claims, strlen(claims), HR_BASE64_URL), 0);
    assert_int_equal(hr_buf_append(&b, ".", 1), 0);
    if (siglen > 0)
        assert_int_equal(hr_base64_append(&b, sig, siglen, HR_BASE64_URL), 0);
    return b.data;
}

/* Claims with EXP, for ISS and AUD (JSON text of the aud value). */
static char *claims(const char *iss, const char *aud, long exp)
{
    static char buf[512];

    snprintf(buf, sizeof buf,
             "{\"iss\":\"%s\",\"aud\":%s,\"sub\":\"alice@example.org\",\"exp\":%ld,\"iat\":%d,"
             "\"herald_role\":\"operator\"}",
             iss, aud, exp, NOW - 10);
    return buf;
}

/* hr_jwks_verify's verdict on TOKEN; the refusal's text into WHY. */
static int verify(const char *token, char *why, size_t len)
{
    const hr_jwks_expect x = {.issuer = ISS, .audience = AUD, .now_s = NOW, .leeway_s = 60};
    cJSON *c = NULL;
    int rc = hr_jwks_verify(set, token, &x, &c, why, len);

    if (rc == 0) {
        assert_non_null(c);
        assert_string_equal(cJSON_GetObjectItem(c, "sub")->valuestring, "alice@example.org");
    } else {
        assert_null(c);
    }
    cJSON_Delete(c);
    return rc;
}

static void test_set_keeps_signing_keys(void **state)
{
    (void)state;
    /* rsa1 and ec1; the "enc" RSA key and the oct key are left out. */
    assert_int_equal(hr_jwks_count(set), 2);
}

static void test_valid_rs256_and_es256(void **state)
{
    char why[256], *t;

    (void)state;
    t = sign("rsa.pem", "rsa1", claims(ISS, "\"" AUD "\"", NOW + 600));
    assert_int_equal(verify(t, why, sizeof why), 0);
    free(t);
    t = sign("ec.p8", "ec1", claims(ISS, "[\"other\",\"" AUD "\"]", NOW + 600));
    assert_int_equal(verify(t, why, sizeof why), 0);
    free(t);
    /* Expired, but within the leeway of 60 s. */
    t = sign("rsa.pem", "rsa1", claims(ISS, "\"" AUD "\"", NOW - 30));
    assert_int_equal(verify(t, why, sizeof why), 0);
    free(t);
}

static void test_wrong_claims(void **state)
{
    static const struct {
        const char *iss, *aud;
        long exp;
        const char *why;
    } cases[] = {
        {"https://evil.example.org", "\"" AUD "\"", NOW + 600, "wrong issuer"},
        {ISS, "\"someone-else\"", NOW + 600, "wrong audience"},
        {ISS, "[\"a\",\"b\"]", NOW + 600, "wrong audience"},
        {ISS, "\"" AUD "\"", NOW - 61, "expired"},
    };
    char why[256], *t;

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        t = sign("rsa.pem", "rsa1", claims(cases[i].iss, cases[i].aud, cases[i].exp));
        assert_int_equal(verify(t, why, sizeof why), -1);
        assert_non_null(strstr(why, cases[i].why));
        free(t);
    }
    t = sign("rsa.pem", "rsa1", "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"sub\":\"x\"}");
    assert_int_equal(verify(t, why, sizeof why), -1);
    assert_non_null(strstr(why, "no exp"));
    free(t);
    t = sign("rsa.pem", "rsa1",
             "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1999999999,\"nbf\":1900000100}");
    assert_int_equal(verify(t, why, sizeof why), -1);
    assert_non_null(strstr(why, "nbf"));
    free(t);
    /* A claim named twice is refused, whatever either says. */
    t = sign("rsa.pem", "rsa1",
             "{\"iss\":\"" ISS "\",\"iss\":\"x\",\"aud\":\"" AUD "\",\"exp\":1999999999}");
    assert_int_equal(verify(t, why, sizeof why), -1);
    free(t);
}

static void test_bad_signature_and_kid(void **state)
{
    char why[256], *t, *good, *forged;
    size_t n;

    (void)state;
    good = sign("rsa.pem", "rsa1", claims(ISS, "\"" AUD "\"", NOW + 600));
    /* The last signature character changed. */
    t = strdup(good);
    n = strlen(t);
    t[n - 2] = t[n - 2] == 'A' ? 'B' : 'A';
    assert_int_equal(verify(t, why, sizeof why), -1);
    assert_non_null(strstr(why, "signature"));
    free(t);
    /* Other claims under the good signature. */
    forged = forge("{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"rsa1\"}",
                   claims(ISS, "\"" AUD "\"", NOW + 999999), "x", 1);
    t = malloc(strlen(forged) + strlen(good));
    memcpy(t, forged, strlen(forged) - 1); /* without the forged signature */
    strcpy(t + strlen(forged) - 1, strrchr(good, '.') + 1);
    assert_int_equal(verify(t, why, sizeof why), -1);
    free(t);
    free(forged);
    /* An unknown kid, and none. */
    t = sign("rsa.pem", "rsa9", claims(ISS, "\"" AUD "\"", NOW + 600));
    assert_int_equal(verify(t, why, sizeof why), -1);
    assert_non_null(strstr(why, "unknown kid"));
    free(t);
    t = sign("rsa.pem", NULL, claims(ISS, "\"" AUD "\"", NOW + 600));
    assert_int_equal(verify(t, why, sizeof why), -1);
    assert_non_null(strstr(why, "kid"));
    free(t);
    /* The key left out for "use": "enc" signs nothing. */
    t = sign("rsa.pem", "rsa-enc", claims(ISS, "\"" AUD "\"", NOW + 600));
    assert_int_equal(verify(t, why, sizeof why), -1);
    free(t);
    free(good);
}

static void test_algorithm_confusion(void **state)
{
    const char *c = claims(ISS, "\"" AUD "\"", NOW + 600);
    unsigned char mac[HR_SIGN_MAC_LEN];
    char why[256], *t, *pub, *input;
    size_t publen;
    hr_buf in;

    (void)state;
    /* alg none, with and without a signature. */
    t = forge("{\"alg\":\"none\",\"kid\":\"rsa1\"}", c, NULL, 0);
    assert_int_equal(verify(t, why, sizeof why), -1);
    assert_non_null(strstr(why, "RS256 or ES256"));
    free(t);
    t = forge("{\"alg\":\"none\",\"kid\":\"rsa1\"}", c, "x", 1);
    assert_int_equal(verify(t, why, sizeof why), -1);
    free(t);
    /* HS256 keyed with the RSA public key's PEM: the signature is right for
     * a verifier that takes alg from the token. */
    pub = key_fixtures_read("rsa_pub.pem", &publen);
    hr_buf_init(&in, 16384);
    input = forge("{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"rsa1\"}", c, NULL, 0);
    assert_int_equal(hr_buf_append(&in, input, strlen(input) - 1), 0);
    assert_int_equal(hr_sign_hmac(pub, publen, in.data, in.len, mac), 0);
    free(input);
    t = forge("{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"rsa1\"}", c, mac, sizeof mac);
    assert_int_equal(verify(t, why, sizeof why), -1);
    assert_non_null(strstr(why, "RS256 or ES256"));
    free(t);
    hr_buf_free(&in);
    free(pub);
    /* ES256 on the RSA key's kid, RS256 on the EC key's. */
    t = sign("ec.p8", "rsa1", c);
    assert_int_equal(verify(t, why, sizeof why), -1);
    assert_non_null(strstr(why, "not a key for ES256"));
    free(t);
    t = sign("rsa.pem", "ec1", c);
    assert_int_equal(verify(t, why, sizeof why), -1);
    assert_non_null(strstr(why, "not a key for RS256"));
    free(t);
    /* A critical extension is not ignored. */
    t = forge("{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"crit\":[\"exp\"]}", c, "x", 1);
    assert_int_equal(verify(t, why, sizeof why), -1);
    assert_non_null(strstr(why, "critical"));
    free(t);
}

static void test_malformed_tokens(void **state)
{
    static const char *bad[] = {"", "a", "a.b", "a.b.c.d", "..", "!!.!!.!!", "e30.e30.e30"};
    char why[256], *big;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(verify(bad[i], why, sizeof why), -1);
    big = malloc(HR_JWKS_TOKEN_MAX + 10);
    memset(big, 'a', HR_JWKS_TOKEN_MAX + 9);
    big[100] = big[200] = '.';
    big[HR_JWKS_TOKEN_MAX + 9] = '\0';
    assert_int_equal(verify(big, why, sizeof why), -1);
    free(big);
}

static void test_bad_sets(void **state)
{
    static const char *bad[] = {
        "",
        "[]",
        "{}",
        "{\"keys\":{}}",
        "{\"keys\":[]}",
        /* only keys left out: none usable */
        "{\"keys\":[{\"kty\":\"oct\",\"kid\":\"a\",\"k\":\"eA\"}]}",
        /* usable but no kid */
        "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AA\",\"y\":\"AA\"}]}",
        /* a point that is not on the curve */
        "{\"keys\":[{\"kty\":\"EC\",\"kid\":\"a\",\"crv\":\"P-256\","
        "\"x\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\","
        "\"y\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\"}]}",
        /* an RSA modulus of 8 bits */
        "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"a\",\"n\":\"_w\",\"e\":\"AQAB\"}]}",
    };
    char err[256];
    hr_jwks *s = NULL;
    size_t len;
    char *text = key_fixtures_read("jwks.json", &len), *twice;
    cJSON *doc, *keys;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(hr_jwks_parse(bad[i], strlen(bad[i]), &s, err, sizeof err), -1);
        assert_null(s);
    }
    /* The same kid twice. */
    doc = cJSON_Parse(text);
    keys = cJSON_GetObjectItem(doc, "keys");
    cJSON_AddItemToArray(keys, cJSON_Duplicate(cJSON_GetArrayItem(keys, 1), true));
    twice = cJSON_PrintUnformatted(doc);
    assert_int_equal(hr_jwks_parse(twice, strlen(twice), &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "twice"));
    free(twice);
    cJSON_Delete(doc);
    /* The RSA key with an exponent of 1: every value is its own signature. */
    doc = cJSON_Parse(text);
    keys = cJSON_GetObjectItem(doc, "keys");
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(keys, 0), "e", cJSON_CreateString("AQ"));
    cJSON_DeleteItemFromArray(keys, 1);
    twice = cJSON_PrintUnformatted(doc);
    assert_int_equal(hr_jwks_parse(twice, strlen(twice), &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "exponent"));
    free(twice);
    cJSON_Delete(doc);
    free(text);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_keeps_signing_keys),
        cmocka_unit_test(test_valid_rs256_and_es256),
        cmocka_unit_test(test_wrong_claims),
        cmocka_unit_test(test_bad_signature_and_kid),
        cmocka_unit_test(test_algorithm_confusion),
        cmocka_unit_test(test_malformed_tokens),
        cmocka_unit_test(test_bad_sets),
    };

    if (argc > 1)
        key_fixtures_dir = argv[1];
    return cmocka_run_group_tests(tests, load_set, free_set);
}
