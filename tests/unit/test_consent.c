/* test_consent: the worker's per-push consent check (hr_consent.h) on a
 * fake clock: opt-out matching with its wildcards, the suppressed addresses
 * left out (a mandatory category past an unsubscribed one), the _quiet
 * field read, and quiet hours read in the user's zone (plain, wrapping
 * midnight, a DST change, the task's default zone, a task window that opens
 * only later). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "hr_civil.h"
#include "hr_consent.h"
#include "hr_release.h"

static int64_t utc(int y, int m, int d, int hh, int mm, int ss)
{
    return (hr_civil_days(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss) * 1000;
}

static void test_opted_out(void **state)
{
    (void)state;
    assert_false(hr_consent_opted_out(NULL, "marketing", "smtp"));
    assert_false(hr_consent_opted_out("", "marketing", "smtp"));
    assert_true(hr_consent_opted_out("marketing/*", "marketing", "smtp"));
    assert_true(hr_consent_opted_out("marketing/*", "marketing", "fcm"));
    assert_false(hr_consent_opted_out("marketing/*", "reminder", "smtp"));
    assert_true(hr_consent_opted_out("*/smtp", "reminder", "smtp"));
    assert_false(hr_consent_opted_out("*/smtp", "reminder", "fcm"));
    assert_true(hr_consent_opted_out("*/*", "reminder", "webhook"));
    assert_true(hr_consent_opted_out("reminder/apns,marketing/smtp", "marketing", "smtp"));
    assert_false(hr_consent_opted_out("reminder/apns,marketing/smtp", "marketing", "apns"));
    /* Prefixes and look-alikes never match. */
    assert_false(hr_consent_opted_out("market/smtp", "marketing", "smtp"));
    assert_false(hr_consent_opted_out("marketing/smtpx", "marketing", "smtp"));
    assert_false(hr_consent_opted_out("marketingsmtp", "marketing", "smtp"));
    assert_false(hr_consent_opted_out("*", "marketing", "smtp"));
    assert_false(hr_consent_opted_out(",/,", "marketing", "smtp"));
}

static void test_addresses(void **state)
{
    hr_addr a[4] = {
        {.address = "a", .supp = HR_ADDR_SUPP_BOUNCED},
        {.address = "b", .supp = HR_ADDR_SUPP_NONE},
        {.address = "c", .supp = HR_ADDR_SUPP_UNSUBSCRIBED},
        {.address = "d", .supp = HR_ADDR_SUPP_NONE},
    };
    hr_addr m[4];

    (void)state;
    memcpy(m, a, sizeof a);
    assert_int_equal(hr_consent_addresses(a, 4, false), 2);
    assert_string_equal(a[0].address, "b");
    assert_string_equal(a[1].address, "d");
    /* A mandatory category goes past an unsubscribed address only. */
    assert_int_equal(hr_consent_addresses(m, 4, true), 3);
    assert_string_equal(m[0].address, "b");
    assert_string_equal(m[1].address, "c");
    assert_string_equal(m[2].address, "d");
    a[0].supp = HR_ADDR_SUPP_COMPLAINED;
    assert_int_equal(hr_consent_addresses(a, 1, true), 0);
}

static void test_parse_quiet(void **state)
{
    hr_user_quiet q;

    (void)state;
    assert_int_equal(hr_consent_parse_quiet("79200-25200", &q), 0);
    assert_true(q.set);
    assert_int_equal(q.start_s, 79200);
    assert_int_equal(q.end_s, 25200);
    assert_int_equal(hr_consent_parse_quiet(NULL, &q), -1);
    assert_int_equal(hr_consent_parse_quiet("", &q), -1);
    assert_int_equal(hr_consent_parse_quiet("22:00-07:00", &q), -1);
    assert_int_equal(hr_consent_parse_quiet("100-100", &q), -1);
    assert_int_equal(hr_consent_parse_quiet("1-86400", &q), -1);
    assert_int_equal(hr_consent_parse_quiet("-1-5", &q), -1);
    assert_int_equal(hr_consent_parse_quiet("5-6x", &q), -1);
}

static int quiet(const hr_task *t, const char *tz, int32_t start, int32_t end, int64_t now,
                 int64_t *release, int64_t *close, const char **zone)
{
    hr_user_quiet q = {.set = true, .start_s = start, .end_s = end};
    char err[128];

    return hr_consent_quiet(t, tz, &q, now, release, close, zone, err, sizeof err);
}

static void test_quiet(void **state)
{
    hr_task t;
    int64_t rel = 0, close = 0;
    const char *zone = NULL;

    (void)state;
    memset(&t, 0, sizeof t);
    /* 22:00-07:00 in Berlin (UTC+1 in January): 21:30 UTC is 22:30 there. */
    assert_int_equal(
        quiet(&t, "Europe/Berlin", 79200, 25200, utc(2030, 1, 10, 21, 30, 0), &rel, &close, &zone),
        1);
    assert_string_equal(zone, "Europe/Berlin");
    assert_int_equal(rel, utc(2030, 1, 11, 6, 0, 0)); /* 07:00 Berlin */
    assert_int_equal(close, HR_RELEASE_NEVER);
    /* 20:30 UTC is 21:30 in Berlin: not quiet yet. */
    assert_int_equal(
        quiet(&t, "Europe/Berlin", 79200, 25200, utc(2030, 1, 10, 20, 30, 0), &rel, &close, &zone),
        0);
    /* The end exclusive: 07:00 sharp is no longer quiet. */
    assert_int_equal(
        quiet(&t, "Europe/Berlin", 79200, 25200, utc(2030, 1, 11, 6, 0, 0), &rel, &close, &zone),
        0);
    /* Not wrapping: 13:00-14:00 UTC, at 13:59:59. */
    assert_int_equal(
        quiet(&t, "UTC", 46800, 50400, utc(2030, 1, 10, 13, 59, 59), &rel, &close, &zone), 1);
    assert_int_equal(rel, utc(2030, 1, 10, 14, 0, 0));
    /* Summer time begins in Berlin on 2030-03-31 at 02:00: quiet until
     * 07:00 local is 05:00 UTC that morning, not 06:00. */
    assert_int_equal(
        quiet(&t, "Europe/Berlin", 79200, 25200, utc(2030, 3, 30, 23, 0, 0), &rel, &close, &zone),
        1);
    assert_int_equal(rel, utc(2030, 3, 31, 5, 0, 0));
    /* No zone of its own (or one that does not load): the task's default. */
    t.default_tz = "Asia/Tokyo";
    assert_int_equal(quiet(&t, NULL, 79200, 25200, utc(2030, 1, 10, 14, 0, 0), &rel, &close, &zone),
                     1); /* 23:00 in Tokyo */
    assert_string_equal(zone, "Asia/Tokyo");
    assert_int_equal(rel, utc(2030, 1, 10, 22, 0, 0)); /* 07:00 Tokyo */
    assert_int_equal(
        quiet(&t, "Not/AZone", 79200, 25200, utc(2030, 1, 10, 14, 0, 0), &rel, &close, &zone), 1);
    assert_string_equal(zone, "Asia/Tokyo");
    /* A task window 09:00-17:00 in the same zone: the release waits for
     * the window too, and carries its close. */
    t.default_tz = NULL;
    t.window = true;
    t.window_start_s = 9 * 3600;
    t.window_end_s = 17 * 3600;
    assert_int_equal(
        quiet(&t, "UTC", 79200, 25200, utc(2030, 1, 10, 23, 0, 0), &rel, &close, &zone), 1);
    assert_int_equal(rel, utc(2030, 1, 11, 9, 0, 0));
    assert_int_equal(close, utc(2030, 1, 11, 17, 0, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opted_out),
        cmocka_unit_test(test_addresses),
        cmocka_unit_test(test_parse_quiet),
        cmocka_unit_test(test_quiet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
