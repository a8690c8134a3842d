/* test_release: hr_release on a fake clock (the FROM instant): local-time
 * bucketing of recipients by zone, on and off a DST change date, the zone
 * a recipient falls back to, and the next opening / close of send windows
 * (plain, wrapping midnight, in a fixed zone, after the base instant). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "hr_civil.h"
#include "hr_release.h"

static int64_t utc(int y, int m, int d, int hh, int mm, int ss)
{
    return (hr_civil_days(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss) * 1000;
}

static hr_task local_task(int64_t due_ms)
{
    hr_task t;

    memset(&t, 0, sizeof t);
    t.id = 1;
    t.due_ms = due_ms;
    t.local_time = 1;
    return t;
}

static void release(const hr_task *t, const char *zone, int64_t from, int64_t *at, int64_t *close)
{
    char err[128] = "";

    assert_int_equal(hr_release_at(t, zone, from, at, close, err, sizeof err), 0);
}

/* 09:00 on the day Europe switches to summer time: each zone is its own
 * wave; New York switched three weeks earlier. */
static void test_buckets_dst_day(void **state)
{
    hr_task t = local_task(utc(2026, 3, 29, 9, 0, 0));
    int64_t at, close;

    (void)state;
    release(&t, "Europe/Berlin", 0, &at, &close);
    assert_int_equal(at, utc(2026, 3, 29, 7, 0, 0));
    assert_int_equal(close, HR_RELEASE_NEVER);
    release(&t, "Europe/London", 0, &at, &close);
    assert_int_equal(at, utc(2026, 3, 29, 8, 0, 0));
    release(&t, "America/New_York", 0, &at, &close);
    assert_int_equal(at, utc(2026, 3, 29, 13, 0, 0));
    release(&t, "Asia/Kolkata", 0, &at, &close);
    assert_int_equal(at, utc(2026, 3, 29, 3, 30, 0));
    release(&t, "UTC", 0, &at, &close);
    assert_int_equal(at, utc(2026, 3, 29, 9, 0, 0));
    /* The day before, Berlin was still on UTC+1. */
    t.due_ms = utc(2026, 3, 28, 9, 0, 0);
    release(&t, "Europe/Berlin", 0, &at, &close);
    assert_int_equal(at, utc(2026, 3, 28, 8, 0, 0));
    /* A wall time in the gap (02:30) goes out right after it (03:30 CEST). */
    t.due_ms = utc(2026, 3, 29, 2, 30, 0);
    release(&t, "Europe/Berlin", 0, &at, &close);
    assert_int_equal(at, utc(2026, 3, 29, 1, 30, 0));
    /* Milliseconds of due_at are kept. */
    t.due_ms = utc(2026, 7, 1, 9, 0, 0) + 250;
    release(&t, "Europe/Berlin", 0, &at, &close);
    assert_int_equal(at, utc(2026, 7, 1, 7, 0, 0) + 250);
}

/* A clock past the base instant: released at once (a late claim). */
static void test_late_clock(void **state)
{
    hr_task t = local_task(utc(2026, 7, 1, 9, 0, 0));
    int64_t at, close, now = utc(2026, 7, 1, 12, 0, 0);

    (void)state;
    release(&t, "Europe/Berlin", now, &at, &close);
    assert_int_equal(at, now);
    release(&t, "America/New_York", now, &at, &close);
    assert_int_equal(at, utc(2026, 7, 1, 13, 0, 0));
}

static void test_zone_fallback(void **state)
{
    hr_task t = local_task(0);

    (void)state;
    assert_string_equal(hr_release_zone(&t, "Asia/Tokyo"), "Asia/Tokyo");
    assert_string_equal(hr_release_zone(&t, NULL), "UTC");
    assert_string_equal(hr_release_zone(&t, "Mars/Base"), "UTC");
    assert_string_equal(hr_release_zone(&t, "../../etc/passwd"), "UTC");
    t.default_tz = "America/Chicago";
    assert_string_equal(hr_release_zone(&t, "Not/AZone"), "America/Chicago");
    assert_string_equal(hr_release_zone(&t, ""), "America/Chicago");
    assert_string_equal(hr_release_zone(&t, "Europe/Paris"), "Europe/Paris");
}

/* 08:00..21:00 in the recipient's zone, a task due at 06:00 UTC. */
static void test_window(void **state)
{
    hr_task t = local_task(utc(2026, 7, 1, 6, 0, 0));
    int64_t at, close;

    (void)state;
    t.local_time = 0;
    t.window = true;
    t.window_start_s = 8 * 3600;
    t.window_end_s = 21 * 3600;
    /* Berlin (UTC+2): 08:00 local is 06:00Z, open from the base. */
    release(&t, "Europe/Berlin", 0, &at, &close);
    assert_int_equal(at, utc(2026, 7, 1, 6, 0, 0));
    assert_int_equal(close, utc(2026, 7, 1, 19, 0, 0));
    /* New York: 02:00 local, waits for 08:00 EDT = 12:00Z. */
    release(&t, "America/New_York", 0, &at, &close);
    assert_int_equal(at, utc(2026, 7, 1, 12, 0, 0));
    assert_int_equal(close, utc(2026, 7, 2, 1, 0, 0));
    /* After Berlin's close (clock 19:30Z): the next morning. */
    release(&t, "Europe/Berlin", utc(2026, 7, 1, 19, 30, 0), &at, &close);
    assert_int_equal(at, utc(2026, 7, 2, 6, 0, 0));
    assert_int_equal(close, utc(2026, 7, 2, 19, 0, 0));
    /* Exactly at the close: closed. */
    release(&t, "Europe/Berlin", utc(2026, 7, 1, 19, 0, 0), &at, &close);
    assert_int_equal(at, utc(2026, 7, 2, 6, 0, 0));
    /* A fixed window zone overrides the recipient's. */
    t.window_tz = "Asia/Tokyo"; /* 08:00 JST = 23:00Z the day before */
    release(&t, "Europe/Berlin", 0, &at, &close);
    assert_int_equal(at, utc(2026, 7, 1, 6, 0, 0));
    assert_int_equal(close, utc(2026, 7, 1, 12, 0, 0));
    release(&t, "America/New_York", utc(2026, 7, 1, 12, 0, 0), &at, &close);
    assert_int_equal(at, utc(2026, 7, 1, 23, 0, 0));
}

/* 22:00..06:00 wraps midnight. */
static void test_window_wraps(void **state)
{
    hr_task t = local_task(utc(2026, 1, 10, 23, 0, 0));
    int64_t at, close;

    (void)state;
    t.local_time = 0;
    t.window = true;
    t.window_start_s = 22 * 3600;
    t.window_end_s = 6 * 3600;
    release(&t, "UTC", 0, &at, &close);
    assert_int_equal(at, utc(2026, 1, 10, 23, 0, 0));
    assert_int_equal(close, utc(2026, 1, 11, 6, 0, 0));
    /* 03:00 opened yesterday, still open. */
    release(&t, "UTC", utc(2026, 1, 11, 3, 0, 0), &at, &close);
    assert_int_equal(at, utc(2026, 1, 11, 3, 0, 0));
    assert_int_equal(close, utc(2026, 1, 11, 6, 0, 0));
    /* 07:00: tonight at 22:00. */
    release(&t, "UTC", utc(2026, 1, 11, 7, 0, 0), &at, &close);
    assert_int_equal(at, utc(2026, 1, 11, 22, 0, 0));
    assert_int_equal(close, utc(2026, 1, 12, 6, 0, 0));
}

/* Local time and a window together: due 07:00 local, window from 08:00. */
static void test_local_and_window(void **state)
{
    hr_task t = local_task(utc(2026, 11, 1, 7, 0, 0));
    int64_t at, close;

    (void)state;
    t.window = true;
    t.window_start_s = 8 * 3600;
    t.window_end_s = 20 * 3600;
    /* New York falls back to EST on this day at 02:00. */
    release(&t, "America/New_York", 0, &at, &close);
    assert_int_equal(at, utc(2026, 11, 1, 13, 0, 0));
    assert_int_equal(close, utc(2026, 11, 2, 1, 0, 0));
    release(&t, "Pacific/Chatham", 0, &at, &close); /* +13:45 */
    assert_int_equal(at, utc(2026, 10, 31, 18, 15, 0));
}

static void test_bad_zone(void **state)
{
    hr_task t = local_task(utc(2026, 7, 1, 9, 0, 0));
    char err[128];
    int64_t at = 5, close = 5;

    (void)state;
    assert_true(hr_release_at(&t, "Mars/Base", 0, &at, &close, err, sizeof err) < 0);
    assert_int_equal(at, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets_dst_day), cmocka_unit_test(test_late_clock),
        cmocka_unit_test(test_zone_fallback),   cmocka_unit_test(test_window),
        cmocka_unit_test(test_window_wraps),    cmocka_unit_test(test_local_and_window),
        cmocka_unit_test(test_bad_zone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
