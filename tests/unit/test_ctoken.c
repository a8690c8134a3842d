/* Unit tests of hr_ctoken: a vector computed with python3's hmac (the
 * docs' recipe), the round trip under two keys, and every refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hr_ctoken.h"

#define VECTOR "hrc1.42.1800000000.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI"
#define NOW 1700000000

static hr_client_key keys[] = {
    {.id = "k1", .secret = "k1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
    {.id = "k2", .secret = "k2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
};

static int verify(const char *token, int64_t now, int64_t *uid)
{
    char err[128] = "";
    int rc = hr_ctoken_verify(token, keys, 2, now, 0, uid, err, sizeof err);
    if (rc != 0)
        assert_true(err[0] != '\0');
    return rc;
}

static void test_vector(void **state)
{
    char tok[HR_CTOKEN_MAX], err[128];
    int64_t uid = 0;

    (void)state;
    assert_int_equal(hr_ctoken_issue(&keys[0], 42, 1800000000, tok, sizeof tok, err, sizeof err),
                     0);
    assert_string_equal(tok, VECTOR);
    assert_int_equal(verify(VECTOR, NOW, &uid), 0);
    assert_int_equal(uid, 42);
    assert_true(hr_ctoken_is_client(VECTOR));
    assert_false(hr_ctoken_is_client("t0k3n"));
}

static void test_round_trip_and_expiry(void **state)
{
    char tok[HR_CTOKEN_MAX], err[128];
    int64_t uid = 0;

    (void)state;
    assert_int_equal(
        hr_ctoken_issue(&keys[1], INT64_MAX, NOW + 60, tok, sizeof tok, err, sizeof err), 0);
    assert_int_equal(verify(tok, NOW, &uid), 0);
    assert_true(uid == INT64_MAX);
    assert_int_equal(verify(tok, NOW + 59, &uid), 0);
    /* At the expiry second it is over; the uid is still said (well signed). */
    assert_int_equal(verify(tok, NOW + 60, &uid), HR_CTOKEN_EXPIRED);
    /* Only key k1 configured: a k2 token names an unknown key. */
    assert_int_equal(hr_ctoken_verify(tok, keys, 1, NOW, 0, &uid, err, sizeof err), -1);
    assert_int_equal(uid, 0);
    /* Valid for 60 s more: over a bound of 59 s, within one of 60 s. */
    assert_int_equal(hr_ctoken_verify(tok, keys, 2, NOW, 59, &uid, err, sizeof err),
                     HR_CTOKEN_TOO_LONG);
    assert_non_null(strstr(err, "client_token_max_ttl_s"));
    assert_int_equal(hr_ctoken_verify(tok, keys, 2, NOW, 60, &uid, err, sizeof err), 0);
    assert_int_equal(hr_ctoken_issue(&keys[0], 0, NOW, tok, sizeof tok, err, sizeof err), -1);
    assert_int_equal(hr_ctoken_issue(&keys[0], 1, NOW, tok, 20, err, sizeof err), -1);
}

static void test_refusals(void **state)
{
    static const char *const bad[] = {
        "",
        "hrc1.",
        "hrc1.42.1800000000.k1",
        "hrc1.42.1800000000.k1.",
        "hrc1.42.1800000000.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kJ", /* last char */
        "hrc1.43.1800000000.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI", /* other uid */
        "hrc1.42.1800000001.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI", /* other exp */
        "hrc1.42.1800000000.k2.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI", /* other key */
        "hrc1.42.1800000000.k3.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI", /* no such key */
        "hrc1.042.1800000000.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI",
        "hrc1.-42.1800000000.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI",
        "hrc1.42.+1800000000.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI",
        "hrc1.42.1800000000.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI.x",
        "hrc2.42.1800000000.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI",
        "hrc1.42.1800000000.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-k",
        "hrc1.99999999999999999999.1800000000.k1.NxTLI7kyeWPwrpKbCQ1WGb0gyYpRlnONfidGx-Y2-kI",
    };
    int64_t uid;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uid = 7;
        if (verify(bad[i], NOW, &uid) != -1 || uid != 0)
            fail_msg("accepted or left a uid: '%s'", bad[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector),
        cmocka_unit_test(test_round_trip_and_expiry),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
