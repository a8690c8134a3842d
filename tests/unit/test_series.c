/* test_series: hr_series_expand (libical) and hr_series_due_ms (hr_tz)
 * against hand-checked cases: a weekly rule across Europe/Berlin's spring
 * change, a daily 02:30 through Berlin's gap, a daily 01:30 through New
 * York's autumn overlap, the 31st of the month, a leap day, EXDATE (COUNT
 * counts it, RFC 5545), UNTIL, "every weekday until 2027-06-30", the
 * window started mid-rule (a SECONDLY rule), and rules refused with a
 * message naming them.  Expected instants checked with Python's zoneinfo.
 * And hr_series_validate of a series with variants: HR_VARIANT_EINVAL for
 * a variant the task checks refuse, -1 for the series' own faults.  A
 * drip's day window across Berlin's DST changes and its refused rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "hr_config.h"
#include "hr_series.h"

#define W hr_series_wall_ms

static size_t expand(const char *rrule, int64_t start, const char *exdate, int64_t after,
                     int64_t *out, size_t max)
{
    char err[256] = "";
    size_t n = 99;

    assert_int_equal(hr_series_expand(rrule, start, exdate, after, max, out, &n, err, sizeof err),
                     0);
    return n;
}

static int64_t due(const char *tz, bool local_time, int64_t wall)
{
    hr_series s = {.tz = (char *)tz, .local_time = local_time};
    char err[128] = "";
    int64_t ms = -1;

    assert_int_equal(hr_series_due_ms(&s, wall, &ms, err, sizeof err), 0);
    return ms;
}

static void test_weekly_across_dst(void **state)
{
    int64_t o[3];

    (void)state;
    /* Mondays 09:00 in Berlin: CET (+1) before 2027-03-28, CEST (+2) after. */
    assert_int_equal(expand("FREQ=WEEKLY;BYDAY=MO", W(2027, 3, 22, 9, 0, 0), NULL, INT64_MIN, o, 3),
                     3);
    assert_int_equal(o[1], W(2027, 3, 29, 9, 0, 0));
    assert_int_equal(due("Europe/Berlin", false, o[0]), W(2027, 3, 22, 8, 0, 0));
    assert_int_equal(due("Europe/Berlin", false, o[1]), W(2027, 3, 29, 7, 0, 0));
    /* A local-time series keeps the wall time: each recipient's zone reads it. */
    assert_int_equal(due("Europe/Berlin", true, o[1]), W(2027, 3, 29, 9, 0, 0));
}

static void test_gap_and_overlap(void **state)
{
    int64_t o[3];

    (void)state;
    /* Daily 02:30 in Berlin: 2027-03-28 02:30 does not exist; sent right
     * after the jump (01:30Z, = 03:30 CEST), never skipped. */
    assert_int_equal(expand("FREQ=DAILY;COUNT=3", W(2027, 3, 27, 2, 30, 0), NULL, INT64_MIN, o, 3),
                     3);
    assert_int_equal(due("Europe/Berlin", false, o[0]), W(2027, 3, 27, 1, 30, 0));
    assert_int_equal(due("Europe/Berlin", false, o[1]), W(2027, 3, 28, 1, 30, 0));
    assert_int_equal(due("Europe/Berlin", false, o[2]), W(2027, 3, 29, 0, 30, 0));
    /* Daily 01:30 in New York: 2027-11-07 01:30 happens twice; the first
     * (EDT, 05:30Z) is taken, once. */
    assert_int_equal(expand("FREQ=DAILY;COUNT=3", W(2027, 11, 6, 1, 30, 0), NULL, INT64_MIN, o, 3),
                     3);
    assert_int_equal(due("America/New_York", false, o[0]), W(2027, 11, 6, 5, 30, 0));
    assert_int_equal(due("America/New_York", false, o[1]), W(2027, 11, 7, 5, 30, 0));
    assert_int_equal(due("America/New_York", false, o[2]), W(2027, 11, 8, 6, 30, 0));
}

static void test_month_end_and_leap_day(void **state)
{
    int64_t o[4];

    (void)state;
    /* The 31st: months without one have no occurrence (RFC 5545). */
    assert_int_equal(expand("FREQ=MONTHLY;BYMONTHDAY=31;COUNT=3", W(2027, 1, 31, 10, 0, 0), NULL,
                            INT64_MIN, o, 4),
                     3);
    assert_int_equal(o[1], W(2027, 3, 31, 10, 0, 0));
    assert_int_equal(o[2], W(2027, 5, 31, 10, 0, 0));
    /* Feb 29 comes every four years. */
    assert_int_equal(expand("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;COUNT=2", W(2028, 2, 29, 8, 0, 0),
                            NULL, INT64_MIN, o, 4),
                     2);
    assert_int_equal(o[1], W(2032, 2, 29, 8, 0, 0));
}

static void test_exdate_count_until(void **state)
{
    int64_t o[8];

    (void)state;
    /* COUNT=4 counts the excluded 2nd occurrence: three are left. */
    assert_int_equal(expand("FREQ=DAILY;COUNT=4", W(2027, 1, 1, 9, 0, 0),
                            "20270102T090000,20270110T090000", INT64_MIN, o, 8),
                     3);
    assert_int_equal(o[0], W(2027, 1, 1, 9, 0, 0));
    assert_int_equal(o[1], W(2027, 1, 3, 9, 0, 0));
    assert_int_equal(o[2], W(2027, 1, 4, 9, 0, 0));
    /* Every weekday at 09:00 until 2027-06-30: Fri 25, Mon 28 .. Wed 30. */
    assert_int_equal(expand("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;UNTIL=20270630T235959",
                            W(2027, 6, 25, 9, 0, 0), NULL, INT64_MIN, o, 8),
                     4);
    assert_int_equal(o[1], W(2027, 6, 28, 9, 0, 0));
    assert_int_equal(o[3], W(2027, 6, 30, 9, 0, 0));
    /* After a given time only (COUNT: walked from DTSTART). */
    assert_int_equal(
        expand("FREQ=DAILY;COUNT=4", W(2027, 1, 1, 9, 0, 0), NULL, W(2027, 1, 2, 9, 0, 0), o, 8),
        2);
    assert_int_equal(o[0], W(2027, 1, 3, 9, 0, 0));
}

static void test_window_started_mid_rule(void **state)
{
    int64_t o[2];

    (void)state;
    /* No COUNT: the iterator starts at the window (a year of 15 s steps
     * would exceed HR_SERIES_STEPS_MAX if walked). */
    assert_int_equal(expand("FREQ=SECONDLY;INTERVAL=15", W(2026, 1, 1, 0, 0, 0), NULL,
                            W(2026, 11, 29, 12, 0, 7), o, 2),
                     2);
    assert_int_equal(o[0], W(2026, 11, 29, 12, 0, 15));
    assert_int_equal(o[1], W(2026, 11, 29, 12, 0, 30));
}

static void test_refused(void **state)
{
    const char *bad[] = {"FREQ=SOMETIMES", "BOGUS", "", "FREQ=DAILY;INTERVAL=0",
                         "FREQ=DAILY;BYDAY=XX"};
    char err[256];
    int64_t o[1];
    size_t n;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(hr_series_expand(bad[i], W(2027, 1, 1, 0, 0, 0), NULL, INT64_MIN, 1, o, &n,
                                          err, sizeof err),
                         -1);
        assert_non_null(strstr(err, "is not an RFC 5545 recurrence rule"));
    }
    assert_int_equal(hr_series_expand("FREQ=DAILY", W(2027, 1, 1, 0, 0, 0), "2027-01-02", INT64_MIN,
                                      1, o, &n, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "exdate \"2027-01-02\""));
    /* A rule libical would walk for minutes inside one step: refused. */
    assert_int_equal(hr_series_expand("FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30", W(2027, 1, 1, 0, 0, 0),
                                      NULL, INT64_MIN, 1, o, &n, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "need FREQ=DAILY or longer"));
    /* One whose days never come (no Feb 30): ends, no occurrence. */
    assert_int_equal(hr_series_expand("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", W(2027, 1, 1, 0, 0, 0),
                                      NULL, INT64_MIN, 1, o, &n, err, sizeof err),
                     0);
    assert_int_equal(n, 0);
}

static void test_validate_variants(void **state)
{
    static const char yaml[] = "channels:\n  webhook:\n    url: \"http://127.0.0.1:9/{{uid}}\"\n";
    hr_config *cfg = NULL;
    hr_task t;
    hr_series s;
    hr_variant v[2] = {{.key = "de", .title = "Hallo"}, {.key = "pt-BR", .body = "corpo"}};
    char err[512] = "";

    (void)state;
    assert_int_equal(hr_config_load_buffer("test.yaml", yaml, strlen(yaml), &cfg, err, sizeof err),
                     0);
    hr_series_defaults(&s, &t);
    t.name = "standup";
    t.channel = "webhook";
    t.throttle_scope = t.topic;
    s.rrule = "FREQ=DAILY";
    s.dtstart_wall_ms = W(2027, 1, 1, 9, 0, 0);
    s.variants = (hr_variant_set){.v = v, .n = 2};
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), 0);
    v[1].subject = "s"; /* subject is an smtp channel's */
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), HR_VARIANT_EINVAL);
    assert_non_null(strstr(err, "variant pt-BR: subject, text and html are for smtp channels"));
    v[1].subject = NULL;
    v[1].key = "DE"; /* the same locale twice, case ignored */
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), HR_VARIANT_EINVAL);
    assert_non_null(strstr(err, "appears twice"));
    v[1].key = "pt-BR";
    s.tz = "Mars/Olympus"; /* the series' own fault: -1 with variants too */
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "Mars/Olympus"));
    hr_config_free(cfg);
}

/* A drip's day of subscriptions: Berlin's 23-hour spring day and 25-hour
 * autumn day, midnight to midnight as instants; and the rules a drip
 * refuses. */
static void test_drip(void **state)
{
    static const char yaml[] = "channels:\n  webhook:\n    url: \"http://127.0.0.1:9/{{uid}}\"\n";
    hr_config *cfg = NULL;
    hr_series s;
    hr_task t;
    int64_t from = 0, until = 0;
    char err[512] = "";

    (void)state;
    hr_series_defaults(&s, &t);
    s.tz = "Europe/Berlin";
    s.drip_days = 3; /* 2027-03-31 10:00 takes the subscriptions of 2027-03-28 */
    assert_int_equal(
        hr_series_drip_window(&s, W(2027, 3, 31, 10, 0, 0), &from, &until, err, sizeof err), 0);
    assert_int_equal(from, W(2027, 3, 27, 23, 0, 0));
    assert_int_equal(until, W(2027, 3, 28, 22, 0, 0));
    s.drip_days = 0;
    assert_int_equal(
        hr_series_drip_window(&s, W(2027, 10, 31, 9, 0, 0), &from, &until, err, sizeof err), 0);
    assert_int_equal(from, W(2027, 10, 30, 22, 0, 0));
    assert_int_equal(until, W(2027, 10, 31, 23, 0, 0));

    assert_int_equal(hr_config_load_buffer("test.yaml", yaml, strlen(yaml), &cfg, err, sizeof err),
                     0);
    t.name = "drip";
    t.channel = "webhook";
    t.throttle_scope = t.topic;
    s.rrule = "FREQ=DAILY;COUNT=30";
    s.dtstart_wall_ms = W(2027, 1, 1, 10, 0, 0);
    s.catch_up = HR_CATCH_UP_ALL;
    s.drip_days = 3;
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), 0);
    s.rrule = "FREQ=DAILY;INTERVAL=2";
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs an occurrence every day"));
    s.rrule = "FREQ=DAILY;BYHOUR=10,18";
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), -1);
    s.rrule = "FREQ=DAILY";
    s.exdate = "20270105T100000";
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "exdate"));
    s.exdate = NULL;
    s.catch_up = HR_CATCH_UP_LATEST;
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "catch_up must be all"));
    s.catch_up = HR_CATCH_UP_ALL;
    s.drip_days = HR_SERIES_DRIP_DAYS_MAX + 1;
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), -1);
    s.drip_days = -1; /* not a drip: any rule */
    s.rrule = "FREQ=WEEKLY";
    assert_int_equal(hr_series_validate(&s, cfg, err, sizeof err), 0);
    hr_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weekly_across_dst),       cmocka_unit_test(test_gap_and_overlap),
        cmocka_unit_test(test_month_end_and_leap_day),  cmocka_unit_test(test_exdate_count_until),
        cmocka_unit_test(test_window_started_mid_rule), cmocka_unit_test(test_refused),
        cmocka_unit_test(test_validate_variants),       cmocka_unit_test(test_drip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
