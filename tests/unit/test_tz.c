/* test_tz: hr_tz against the system's tzdata: offsets either side of the
 * DST changes of Europe/Berlin, America/New_York and Pacific/Chatham (a
 * southern zone with a 45-minute offset), Asia/Kolkata's half hour, dates
 * past the files' last transition (the footer's POSIX rule), the gap and
 * overlap rules of local-to-UTC, unknown zones, names that try to leave
 * the zoneinfo directory, and the cache under threads.
 *
 * Expected instants are literals (checked against Python's zoneinfo) or
 * built with utc() from hr_civil_days, itself checked against
 * literals first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <string.h>

#include "hr_civil.h"
#include "hr_tz.h"

static int64_t utc(int y, int m, int d, int hh, int mm, int ss)
{
    return (hr_civil_days(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss) * 1000;
}

static int32_t offset(const char *zone, int64_t ms)
{
    char err[128] = "";
    int32_t off = -1;

    assert_int_equal(hr_tz_offset_at(zone, ms, &off, err, sizeof err), 0);
    return off;
}

static int64_t to_utc(const char *zone, int y, int m, int d, int hh, int mm, int ss)
{
    char err[128] = "";
    int64_t ms = -1;

    assert_int_equal(hr_tz_local_to_utc(zone, y, m, d, hh, mm, ss, &ms, err, sizeof err), 0);
    return ms;
}

static void test_civil(void **state)
{
    int y, m, d;

    (void)state;
    assert_int_equal(hr_civil_days(1970, 1, 1), 0);
    assert_int_equal(hr_civil_days(2000, 3, 1), 11017);
    assert_int_equal(hr_civil_days(1, 1, 1), -719162);
    assert_int_equal(utc(2200, 3, 30, 1, 0, 0), 7265725200000LL);
    for (int64_t days = -719162; days < 3000000; days += 997) {
        hr_civil_date(days, &y, &m, &d);
        assert_int_equal(hr_civil_days(y, m, d), days);
    }
    hr_civil_date(20454, &y, &m, &d);
    assert_int_equal(y, 2026);
    assert_int_equal(m, 1);
    assert_int_equal(d, 1);
}

static void test_berlin(void **state)
{
    (void)state;
    /* 2026: summer time from the last Sunday of March 01:00 UTC to the last
     * Sunday of October 01:00 UTC. */
    assert_int_equal(offset("Europe/Berlin", utc(2026, 3, 29, 0, 59, 59)), 3600);
    assert_int_equal(offset("Europe/Berlin", utc(2026, 3, 29, 1, 0, 0)), 7200);
    assert_int_equal(offset("Europe/Berlin", utc(2026, 10, 25, 0, 59, 59)), 7200);
    assert_int_equal(offset("Europe/Berlin", utc(2026, 10, 25, 1, 0, 0)), 3600);
    assert_int_equal(to_utc("Europe/Berlin", 2026, 7, 1, 12, 0, 0), utc(2026, 7, 1, 10, 0, 0));
    assert_int_equal(to_utc("Europe/Berlin", 2026, 1, 15, 9, 0, 0), utc(2026, 1, 15, 8, 0, 0));
    /* The gap: 02:30 does not exist; read with CET it is 01:30Z (03:30 CEST). */
    assert_int_equal(to_utc("Europe/Berlin", 2026, 3, 29, 2, 30, 0), utc(2026, 3, 29, 1, 30, 0));
    assert_int_equal(to_utc("Europe/Berlin", 2026, 3, 29, 1, 59, 59), utc(2026, 3, 29, 0, 59, 59));
    assert_int_equal(to_utc("Europe/Berlin", 2026, 3, 29, 3, 0, 0), utc(2026, 3, 29, 1, 0, 0));
    /* The overlap: 02:30 happens twice; the first (CEST) is taken. */
    assert_int_equal(to_utc("Europe/Berlin", 2026, 10, 25, 2, 30, 0), utc(2026, 10, 25, 0, 30, 0));
    assert_int_equal(to_utc("Europe/Berlin", 2026, 10, 25, 3, 0, 0), utc(2026, 10, 25, 2, 0, 0));
    assert_int_equal(to_utc("Europe/Berlin", 2026, 10, 25, 1, 59, 59),
                     utc(2026, 10, 24, 23, 59, 59));
}

static void test_new_york(void **state)
{
    (void)state;
    /* 2026: second Sunday of March 02:00 EST, first Sunday of November
     * 02:00 EDT. */
    assert_int_equal(offset("America/New_York", utc(2026, 3, 8, 6, 59, 59)), -18000);
    assert_int_equal(offset("America/New_York", utc(2026, 3, 8, 7, 0, 0)), -14400);
    assert_int_equal(offset("America/New_York", utc(2026, 11, 1, 5, 59, 59)), -14400);
    assert_int_equal(offset("America/New_York", utc(2026, 11, 1, 6, 0, 0)), -18000);
    assert_int_equal(to_utc("America/New_York", 2026, 3, 8, 2, 30, 0), utc(2026, 3, 8, 7, 30, 0));
    assert_int_equal(to_utc("America/New_York", 2026, 11, 1, 1, 30, 0), utc(2026, 11, 1, 5, 30, 0));
    assert_int_equal(to_utc("America/New_York", 2026, 11, 1, 2, 0, 0), utc(2026, 11, 1, 7, 0, 0));
    /* Before 1883 New York kept local mean time (-4:56:02). */
    assert_int_equal(offset("America/New_York", utc(1800, 1, 1, 0, 0, 0)), -17762);
}

static void test_kolkata(void **state)
{
    (void)state;
    assert_int_equal(offset("Asia/Kolkata", utc(2026, 6, 1, 0, 0, 0)), 19800);
    assert_int_equal(offset("Asia/Kolkata", utc(3000, 6, 1, 0, 0, 0)), 19800);
    assert_int_equal(to_utc("Asia/Kolkata", 2026, 1, 1, 0, 0, 0), utc(2025, 12, 31, 18, 30, 0));
}

static void test_chatham(void **state)
{
    (void)state;
    /* +12:45, +13:45 from the last Sunday of September 02:45 to the first
     * Sunday of April 03:45 local. */
    assert_int_equal(offset("Pacific/Chatham", 1790431199000LL), 45900);
    assert_int_equal(offset("Pacific/Chatham", 1790431200000LL), 49500);
    assert_int_equal(offset("Pacific/Chatham", 1806760799000LL), 49500);
    assert_int_equal(offset("Pacific/Chatham", 1806760800000LL), 45900);
    assert_int_equal(to_utc("Pacific/Chatham", 2026, 12, 25, 9, 0, 0),
                     utc(2026, 12, 24, 19, 15, 0));
    /* Gap 02:45 -> 03:45 on 2026-09-27: 03:00 is read with +12:45. */
    assert_int_equal(to_utc("Pacific/Chatham", 2026, 9, 27, 3, 0, 0), utc(2026, 9, 26, 14, 15, 0));
    /* Overlap 03:45 -> 02:45 on 2027-04-04: the first 03:00 (+13:45). */
    assert_int_equal(to_utc("Pacific/Chatham", 2027, 4, 4, 3, 0, 0), utc(2027, 4, 3, 13, 15, 0));
}

/* Far past the files' transitions: only the footer's rule can answer. */
static void test_far_future(void **state)
{
    (void)state;
    assert_int_equal(offset("Europe/Berlin", 7265725199000LL), 3600);
    assert_int_equal(offset("Europe/Berlin", 7265725200000LL), 7200);
    assert_int_equal(offset("America/New_York", 4108690799000LL), -18000);
    assert_int_equal(offset("America/New_York", 4108690800000LL), -14400);
    assert_int_equal(to_utc("Europe/Berlin", 2200, 7, 1, 12, 0, 0), utc(2200, 7, 1, 10, 0, 0));
    assert_int_equal(to_utc("Europe/Berlin", 9999, 12, 31, 23, 59, 59),
                     utc(9999, 12, 31, 22, 59, 59));
    assert_int_equal(to_utc("Pacific/Chatham", 2500, 1, 1, 0, 0, 0), utc(2499, 12, 31, 10, 15, 0));
}

static void test_fixed(void **state)
{
    (void)state;
    assert_int_equal(offset("UTC", utc(2026, 3, 29, 1, 0, 0)), 0);
    assert_int_equal(to_utc("UTC", 2026, 3, 29, 2, 30, 0), utc(2026, 3, 29, 2, 30, 0));
    /* POSIX signs: Etc/GMT+5 is five hours west. */
    assert_int_equal(offset("Etc/GMT+5", utc(2026, 3, 29, 1, 0, 0)), -18000);
    assert_int_equal(offset("Etc/GMT-14", 0), 14 * 3600);
}

static void test_unknown(void **state)
{
    char err[128] = "";
    int32_t off = 7;
    int64_t ms = 7;

    (void)state;
    assert_int_equal(hr_tz_offset_at("Mars/Olympus_Mons", 0, &off, err, sizeof err),
                     HR_TZ_ERR_UNKNOWN);
    assert_non_null(strstr(err, "unknown time zone"));
    assert_int_equal(off, 7);
    /* A directory of the tree is no zone. */
    assert_int_equal(hr_tz_check("Europe", err, sizeof err), HR_TZ_ERR_UNKNOWN);
    assert_int_equal(hr_tz_local_to_utc("Nowhere", 2026, 1, 1, 0, 0, 0, &ms, err, sizeof err),
                     HR_TZ_ERR_UNKNOWN);
    assert_int_equal(ms, 7);
    /* A file of the tree that is not TZif, and a zone counting leap seconds. */
    assert_int_equal(hr_tz_check("leapseconds", err, sizeof err), HR_TZ_ERR_FILE);
    assert_int_equal(hr_tz_check("right/Europe/Berlin", err, sizeof err), HR_TZ_ERR_FILE);
    assert_int_equal(hr_tz_check("Europe/Berlin", err, sizeof err), 0);
}

static void test_names(void **state)
{
    static const char *bad[] = {
        "",
        "/etc/passwd",
        "../etc/passwd",
        "Europe/../../etc/passwd",
        "..",
        "Europe/..",
        "Europe//Berlin",
        "Europe/Berlin/",
        "/",
        ".hidden",
        "Europe/Ber lin",
        "Europe\\Berlin",
        "Europe/Berlin\n",
        "zone1970.tab",
        "Europe/B\xc3\xa9rlin",
        /* 65 bytes */
        "Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    };
    char err[128] = "";
    int32_t off = 7;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_false(hr_tz_name_ok(bad[i]));
        assert_int_equal(hr_tz_offset_at(bad[i], 0, &off, err, sizeof err), HR_TZ_ERR_NAME);
    }
    assert_false(hr_tz_name_ok(NULL));
    assert_int_equal(off, 7);
    assert_true(hr_tz_name_ok("America/Argentina/Buenos_Aires"));
    assert_true(hr_tz_name_ok("Etc/GMT+5"));
    assert_true(hr_tz_name_ok("America/Port-au-Prince"));
    /* 64 bytes: the longest name taken. */
    assert_true(hr_tz_name_ok("Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

static void test_range(void **state)
{
    char err[128] = "";
    int32_t off;
    int64_t ms;

    (void)state;
    assert_int_equal(hr_tz_local_to_utc("UTC", 2026, 2, 29, 0, 0, 0, &ms, err, sizeof err),
                     HR_TZ_ERR_RANGE);
    assert_int_equal(hr_tz_local_to_utc("UTC", 2026, 13, 1, 0, 0, 0, &ms, err, sizeof err),
                     HR_TZ_ERR_RANGE);
    assert_int_equal(hr_tz_local_to_utc("UTC", 2026, 1, 1, 24, 0, 0, &ms, err, sizeof err),
                     HR_TZ_ERR_RANGE);
    assert_int_equal(hr_tz_local_to_utc("UTC", 2026, 1, 1, 0, 0, 60, &ms, err, sizeof err),
                     HR_TZ_ERR_RANGE);
    assert_int_equal(hr_tz_local_to_utc("UTC", 0, 1, 1, 0, 0, 0, &ms, err, sizeof err),
                     HR_TZ_ERR_RANGE);
    assert_int_equal(hr_tz_local_to_utc("UTC", 2028, 2, 29, 0, 0, 0, &ms, err, sizeof err), 0);
    assert_int_equal(hr_tz_offset_at("UTC", HR_TZ_END_MS, &off, err, sizeof err), HR_TZ_ERR_RANGE);
    assert_int_equal(hr_tz_offset_at("UTC", HR_TZ_MIN_MS - 1, &off, err, sizeof err),
                     HR_TZ_ERR_RANGE);
}

/* Threads load and query the same and different zones at once: the cache's
 * lock under ASan/TSan, and every answer still right. */
static void *worker(void *arg)
{
    static const char *zones[] = {"Europe/Paris", "Asia/Tokyo", "Australia/Sydney",
                                  "America/Sao_Paulo", "Africa/Cairo"};
    static const int32_t winter[] = {3600, 32400, 39600, -10800, 7200};
    intptr_t k = (intptr_t)arg;

    for (int i = 0; i < 200; i++) {
        size_t z = (size_t)(i + k) % 5;
        char err[128];
        int32_t off;

        /* 2026-01-15: northern winter, southern summer. */
        if (hr_tz_offset_at(zones[z], utc(2026, 1, 15, 12, 0, 0), &off, err, sizeof err) != 0 ||
            off != winter[z])
            return (void *)1;
    }
    return NULL;
}

static void test_threads(void **state)
{
    pthread_t th[4];
    void *ret;

    (void)state;
    for (intptr_t i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_null(ret);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_civil),    cmocka_unit_test(test_berlin),
        cmocka_unit_test(test_new_york), cmocka_unit_test(test_kolkata),
        cmocka_unit_test(test_chatham),  cmocka_unit_test(test_far_future),
        cmocka_unit_test(test_fixed),    cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_names),    cmocka_unit_test(test_range),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
