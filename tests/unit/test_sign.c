/* Unit tests of hr_sign against the Standard Webhooks specification's
 * published example (secret, id, timestamp, body -> signature). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hr_sign.h"

#define SPEC_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SPEC_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SPEC_TS 1614265330
#define SPEC_BODY "{\"test\": 2432232314}"
#define SPEC_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
/* A second secret (32 bytes); its signature computed with python3's hmac. */
#define OTHER_SECRET "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
#define OTHER_SIG "v1,O4Gjv1HqPqsMrjmczoggs/sWA8gZD0VyHG+fLh4+ktI="

static void test_spec_vector(void **state)
{
    hr_sign_secret s;
    char err[256];
    hr_buf b;

    (void)state;
    assert_int_equal(hr_sign_secret_parse(SPEC_SECRET, &s, err, sizeof err), 0);
    assert_int_equal(s.len, 24);
    hr_buf_init(&b, 1024);
    assert_int_equal(
        hr_sign_append(&s, 1, SPEC_ID, SPEC_TS, SPEC_BODY, strlen(SPEC_BODY), &b, err, sizeof err),
        0);
    assert_string_equal(b.data, SPEC_SIG);
    hr_buf_free(&b);
}

static void test_rotation_two_signatures(void **state)
{
    hr_sign_secret s[2];
    char err[256];
    hr_buf b;

    (void)state;
    assert_int_equal(hr_sign_secret_parse(SPEC_SECRET, &s[0], err, sizeof err), 0);
    assert_int_equal(hr_sign_secret_parse(OTHER_SECRET, &s[1], err, sizeof err), 0);
    assert_int_equal(s[1].len, 32);
    hr_buf_init(&b, 1024);
    assert_int_equal(
        hr_sign_append(s, 2, SPEC_ID, SPEC_TS, SPEC_BODY, strlen(SPEC_BODY), &b, err, sizeof err),
        0);
    assert_string_equal(b.data, SPEC_SIG " " OTHER_SIG);
    hr_buf_free(&b);
}

static void test_secret_rejects(void **state)
{
    hr_sign_secret s;
    char err[256];

    (void)state;
    assert_int_equal(hr_sign_secret_parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", &s, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "whsec_"));
    assert_int_equal(hr_sign_secret_parse("whsec_not*base64", &s, err, sizeof err), -1);
    /* 16 bytes: too short. */
    assert_int_equal(hr_sign_secret_parse("whsec_AAECAwQFBgcICQoLDA0ODw==", &s, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "at least 24"));
}

static void test_sign_rejects(void **state)
{
    hr_sign_secret s;
    char err[256];
    hr_buf b;

    (void)state;
    assert_int_equal(hr_sign_secret_parse(SPEC_SECRET, &s, err, sizeof err), 0);
    hr_buf_init(&b, 1024);
    assert_int_equal(hr_sign_append(&s, 1, "a.b", 1, "", 0, &b, err, sizeof err), -1);
    assert_int_equal(hr_sign_append(&s, 1, "a\r\nX: y", 1, "", 0, &b, err, sizeof err), -1);
    assert_int_equal(hr_sign_append(&s, 1, "", 1, "", 0, &b, err, sizeof err), -1);
    assert_int_equal(hr_sign_append(&s, 0, "id", 1, "", 0, &b, err, sizeof err), -1);
    assert_int_equal(b.len, 0);
    hr_buf_free(&b);
    /* Over the cap: unchanged. */
    hr_buf_init(&b, 20);
    assert_int_equal(hr_sign_append(&s, 1, "id", 1, "", 0, &b, err, sizeof err), -1);
    assert_int_equal(b.len, 0);
    hr_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_vector),
        cmocka_unit_test(test_rotation_two_signatures),
        cmocka_unit_test(test_secret_rejects),
        cmocka_unit_test(test_sign_rejects),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
