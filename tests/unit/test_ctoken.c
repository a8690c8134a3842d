/* Unit tests of hr_ctoken: a vector computed with python3's hmac (the
 * docs' recipe), the round trip under two keys, and every refusal; the
 * same for the unsubscribe tokens. */
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

#define UVECTOR "hru1.42.marketing.smtp.1700000000.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw"
#define TTL 3600

/* The unsubscribe token: python3's hmac gives the same bytes; it verifies
 * under both keys listed, for TTL seconds, and names what it was issued
 * for. */
static void test_unsub_vector(void **state)
{
    hr_utoken u = {.uid = 42, .category = "marketing", .channel = "smtp", .iat_s = NOW}, got;
    char tok[HR_UTOKEN_MAX], err[128];

    (void)state;
    assert_int_equal(hr_ctoken_unsub_issue(&keys[0], &u, tok, sizeof tok, err, sizeof err), 0);
    assert_string_equal(tok, UVECTOR);
    assert_int_equal(hr_ctoken_unsub_verify(UVECTOR, keys, 2, NOW + 10, TTL, &got, err, sizeof err),
                     0);
    assert_int_equal(got.uid, 42);
    assert_string_equal(got.category, "marketing");
    assert_string_equal(got.channel, "smtp");
    assert_int_equal(got.iat_s, NOW);
    /* Rotation: a token of the second key verifies while both are listed. */
    u.uid = 7;
    assert_int_equal(hr_ctoken_unsub_issue(&keys[1], &u, tok, sizeof tok, err, sizeof err), 0);
    assert_int_equal(hr_ctoken_unsub_verify(tok, keys, 2, NOW, TTL, &got, err, sizeof err), 0);
    assert_int_equal(got.uid, 7);
    /* ... and is refused once its key is no longer (keys + 0 alone). */
    assert_int_equal(hr_ctoken_unsub_verify(tok, keys, 1, NOW, TTL, &got, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown key"));
}

static void test_unsub_refusals(void **state)
{
    hr_utoken got;
    char err[128], tampered[HR_UTOKEN_MAX];
    const char *bad[] = {
        "",
        "hru1.",
        "hru1.42.marketing.smtp.1700000000.k1",
        "hru1.42.marketing.smtp.1700000000.k1.",
        "hru1.42.marketing.smtp.1700000000.k9.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw",
        "hru1.43.marketing.smtp.1700000000.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw",
        "hru1.42.security.smtp.1700000000.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw",
        "hru1.42.marketing.fcm.1700000000.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw",
        "hru1.42.marketing.smtp.1700000001.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw",
        "hru1.0.marketing.smtp.1700000000.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw",
        "hru1.42.Marketing.smtp.1700000000.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw",
        "hru1.42.market ing.smtp.1700000000.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw",
        "hru1.42.marketing.smtp.-1.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw",
        "hrc1.42.marketing.smtp.1700000000.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw",
        "hru1.42.marketing.smtp.1700000000.k1.NYedaDvUND2pppo9_EDjBGZY129rae8gZnFQ9rU4Kqw.x",
    };

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (hr_ctoken_unsub_verify(bad[i], keys, 2, NOW, TTL, &got, err, sizeof err) != -1)
            fail_msg("accepted '%s'", bad[i]);
    /* One character of the signature changed. */
    snprintf(tampered, sizeof tampered, "%s", UVECTOR);
    tampered[strlen(tampered) - 1] = tampered[strlen(tampered) - 1] == 'w' ? 'x' : 'w';
    assert_int_equal(hr_ctoken_unsub_verify(tampered, keys, 2, NOW, TTL, &got, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "bad signature"));
    /* Well signed but too old, or from the future beyond 5 minutes. */
    assert_int_equal(
        hr_ctoken_unsub_verify(UVECTOR, keys, 2, NOW + TTL, TTL, &got, err, sizeof err),
        HR_CTOKEN_EXPIRED);
    assert_int_equal(
        hr_ctoken_unsub_verify(UVECTOR, keys, 2, NOW - 301, TTL, &got, err, sizeof err),
        HR_CTOKEN_EXPIRED);
    assert_int_equal(
        hr_ctoken_unsub_verify(UVECTOR, keys, 2, NOW - 299, TTL, &got, err, sizeof err), 0);
    /* What cannot be issued: a category or channel outside [a-z0-9_-]. */
    {
        hr_utoken u = {.uid = 1, .category = "a.b", .channel = "smtp", .iat_s = NOW};
        char tok[HR_UTOKEN_MAX];

        assert_int_equal(hr_ctoken_unsub_issue(&keys[0], &u, tok, sizeof tok, err, sizeof err), -1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector),         cmocka_unit_test(test_round_trip_and_expiry),
        cmocka_unit_test(test_refusals),       cmocka_unit_test(test_unsub_vector),
        cmocka_unit_test(test_unsub_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
