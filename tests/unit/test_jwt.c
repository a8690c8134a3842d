/* Unit tests of hr_base64 and hr_jwt.  Keys in keys/ were made with the
 * openssl CLI; rs256_openssl.jwt was signed by `openssl dgst -sha256 -sign`
 * (RS256 is deterministic, so hr_jwt must produce it byte for byte), and
 * every ES256 token is checked with the public key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hr_base64.h"
#include "hr_jwt.h"
#include "key_fixtures.h"

static void test_base64_rfc4648(void **state)
{
    static const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *std[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    static const char *url[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
    unsigned char dec[16];
    size_t n;

    (void)state;
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        hr_buf b;
        hr_buf_init(&b, 64);
        assert_int_equal(hr_base64_append(&b, in[i], strlen(in[i]), HR_BASE64_STD), 0);
        assert_int_equal(b.len, strlen(std[i]));
        if (b.len > 0)
            assert_string_equal(b.data, std[i]);
        hr_buf_reset(&b);
        assert_int_equal(hr_base64_append(&b, in[i], strlen(in[i]), HR_BASE64_URL), 0);
        if (b.len > 0)
            assert_string_equal(b.data, url[i]);
        assert_int_equal(
            hr_base64_decode(std[i], strlen(std[i]), HR_BASE64_STD, dec, sizeof dec, &n), 0);
        assert_int_equal(n, strlen(in[i]));
        assert_memory_equal(dec, in[i], n);
        assert_int_equal(
            hr_base64_decode(url[i], strlen(url[i]), HR_BASE64_URL, dec, sizeof dec, &n), 0);
        assert_int_equal(n, strlen(in[i]));
        hr_buf_free(&b);
    }
}

static void test_base64_alphabets_and_long_input(void **state)
{
    unsigned char bytes[300], dec[300];
    hr_buf b;
    size_t n;

    (void)state;
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (unsigned char)(i * 7 + 250);
    hr_buf_init(&b, 1024);
    assert_int_equal(hr_base64_append(&b, "\xfb\xff", 2, HR_BASE64_STD), 0);
    assert_string_equal(b.data, "+/8=");
    hr_buf_reset(&b);
    assert_int_equal(hr_base64_append(&b, "\xfb\xff", 2, HR_BASE64_URL), 0);
    assert_string_equal(b.data, "-_8");
    /* Longer than one internal chunk, round trip. */
    hr_buf_reset(&b);
    assert_int_equal(hr_base64_append(&b, bytes, sizeof bytes, HR_BASE64_URL), 0);
    assert_int_equal(b.len, hr_base64_encoded_len(sizeof bytes, HR_BASE64_URL));
    assert_int_equal(hr_base64_decode(b.data, b.len, HR_BASE64_URL, dec, sizeof dec, &n), 0);
    assert_int_equal(n, sizeof bytes);
    assert_memory_equal(dec, bytes, n);
    hr_buf_free(&b);
}

static void test_base64_rejects(void **state)
{
    unsigned char dec[8];
    size_t n;

    (void)state;
    assert_int_equal(hr_base64_decode("-_8", 3, HR_BASE64_STD, dec, sizeof dec, &n), -1);
    assert_int_equal(hr_base64_decode("+/8=", 4, HR_BASE64_URL, dec, sizeof dec, &n), -1);
    assert_int_equal(hr_base64_decode("Zm9v Yg==", 9, HR_BASE64_STD, dec, sizeof dec, &n), -1);
    assert_int_equal(hr_base64_decode("Z", 1, HR_BASE64_STD, dec, sizeof dec, &n), -1);
    assert_int_equal(hr_base64_decode("Zh==", 4, HR_BASE64_STD, dec, sizeof dec, &n), -1);
    /* More than the output room. */
    assert_int_equal(hr_base64_decode("Zm9vYmFy", 8, HR_BASE64_STD, dec, 5, &n), -1);
}

static void test_base64_cap(void **state)
{
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 7);
    assert_int_equal(hr_base64_append(&b, "abc", 3, HR_BASE64_STD), 0);
    assert_int_equal(hr_base64_append(&b, "abc", 3, HR_BASE64_STD), -1);
    assert_int_equal(b.len, 4);
    assert_string_equal(b.data, "YWJj");
    hr_buf_free(&b);
}

static hr_jwt_key *load_key(const char *name)
{
    char err[256] = "";
    size_t len;
    char *pem = key_fixtures_read(name, &len);
    hr_jwt_key *k = NULL;

    assert_non_null(pem);
    if (hr_jwt_key_load(pem, len, &k, err, sizeof err) != 0)
        fail_msg("%s: %s", name, err);
    free(pem);
    return k;
}

static void test_rs256_matches_openssl(void **state)
{
    static const char claims[] = "{\"iss\":\"herald\",\"iat\":1700000000}";
    hr_jwt_key *k = load_key("rsa.pem");
    char *want = key_fixtures_read("rs256_openssl.jwt", NULL);
    char err[256];
    hr_buf b;

    (void)state;
    assert_non_null(want);
    want[strcspn(want, "\n")] = '\0';
    assert_int_equal(hr_jwt_key_alg(k), HR_JWT_RS256);
    hr_buf_init(&b, 4096);
    assert_int_equal(hr_jwt_sign(k, NULL, claims, strlen(claims), &b, err, sizeof err), 0);
    assert_string_equal(b.data, want);
    assert_int_equal(key_fixtures_jwt_verify(b.data, "rsa_pub.pem", NULL, NULL), 0);
    hr_buf_free(&b);
    free(want);
    hr_jwt_key_free(k);
}

static void test_es256_verifies(void **state)
{
    static const char claims[] = "{\"iss\":\"TEAM123456\",\"iat\":1700000000}";
    hr_jwt_key *k = load_key("ec.p8");
    char err[256], *hdr = NULL, *cl = NULL;
    hr_buf b;

    (void)state;
    assert_int_equal(hr_jwt_key_alg(k), HR_JWT_ES256);
    hr_buf_init(&b, 4096);
    /* ECDSA is randomized: check many signatures, so a short R or S
     * (left padding) is met now and then. */
    for (int i = 0; i < 200; i++) {
        hr_buf_reset(&b);
        assert_int_equal(hr_jwt_sign(k, "KEY1234567", claims, strlen(claims), &b, err, sizeof err),
                         0);
        assert_int_equal(key_fixtures_jwt_verify(b.data, "ec_pub.pem", &hdr, &cl), 0);
        assert_string_equal(hdr, "{\"alg\":\"ES256\",\"typ\":\"JWT\",\"kid\":\"KEY1234567\"}");
        assert_string_equal(cl, claims);
        free(hdr);
        free(cl);
    }
    /* A flipped claims byte no longer verifies. */
    b.data[strchr(b.data, '.') - b.data + 2] ^= 1;
    assert_int_equal(key_fixtures_jwt_verify(b.data, "ec_pub.pem", NULL, NULL), -1);
    /* Nor does the right token under another key. */
    hr_buf_free(&b);
    hr_jwt_key_free(k);
}

static void test_wrong_public_key(void **state)
{
    hr_jwt_key *k = load_key("rsa.pem");
    char err[256];
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 4096);
    assert_int_equal(hr_jwt_sign(k, NULL, "{}", 2, &b, err, sizeof err), 0);
    assert_int_equal(key_fixtures_jwt_verify(b.data, "ec_pub.pem", NULL, NULL), -1);
    hr_buf_free(&b);
    hr_jwt_key_free(k);
}

static void test_key_rejects(void **state)
{
    static const char *bad[] = {"rsa1024.pem", "ec384.pem", "rsa_pub.pem", "ec_encrypted.pem"};
    char err[256];
    hr_jwt_key *k = (hr_jwt_key *)1;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len;
        char *pem = key_fixtures_read(bad[i], &len);
        assert_non_null(pem);
        err[0] = '\0';
        assert_int_equal(hr_jwt_key_load(pem, len, &k, err, sizeof err), -1);
        assert_null(k);
        assert_true(strncmp(err, "private key:", 12) == 0);
        free(pem);
    }
    assert_int_equal(hr_jwt_key_load("garbage", 7, &k, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a PEM private key"));
}

static void test_sign_rejects(void **state)
{
    hr_jwt_key *k = load_key("ec.p8");
    char err[256];
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 4096);
    assert_int_equal(hr_jwt_sign(k, "bad\"kid", "{}", 2, &b, err, sizeof err), -1);
    assert_int_equal(hr_jwt_sign(k, "", "{}", 2, &b, err, sizeof err), -1);
    assert_int_equal(b.len, 0);
    /* Over the cap: nothing appended. */
    hr_buf_free(&b);
    hr_buf_init(&b, 60);
    assert_int_equal(hr_buf_append(&b, "x", 1), 0);
    assert_int_equal(hr_jwt_sign(k, NULL, "{}", 2, &b, err, sizeof err), -1);
    assert_int_equal(b.len, 1);
    assert_non_null(strstr(err, "cap"));
    hr_buf_free(&b);
    hr_jwt_key_free(k);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64_rfc4648),
        cmocka_unit_test(test_base64_alphabets_and_long_input),
        cmocka_unit_test(test_base64_rejects),
        cmocka_unit_test(test_base64_cap),
        cmocka_unit_test(test_rs256_matches_openssl),
        cmocka_unit_test(test_es256_verifies),
        cmocka_unit_test(test_wrong_public_key),
        cmocka_unit_test(test_key_rejects),
        cmocka_unit_test(test_sign_rejects),
    };

    if (argc > 1)
        key_fixtures_dir = argv[1];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
