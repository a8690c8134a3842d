/* test_dlog: the delivery log's partition key and day arithmetic
 * (common/hr_dlog.h), which the workers' reporter, the pull, recover,
 * purge and the dispatchers' upkeep must agree on: the UTC day of a due
 * time as YYYYMMDD (before 1970, on leap days, at the last ms of a day),
 * the round trip to epoch days, and the text of a day. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hr_dlog.h"

#define DAY_MS 86400000LL

static void test_day(void **state)
{
    (void)state;
    assert_int_equal(hr_dlog_day(0), 19700101);
    assert_int_equal(hr_dlog_day(DAY_MS - 1), 19700101);
    assert_int_equal(hr_dlog_day(DAY_MS), 19700102);
    /* before the epoch: the day it falls in, not the next one */
    assert_int_equal(hr_dlog_day(-1), 19691231);
    assert_int_equal(hr_dlog_day(-DAY_MS), 19691231);
    assert_int_equal(hr_dlog_day(-DAY_MS - 1), 19691230);
    /* 2028-02-29T23:59:59.999Z and the ms after it */
    assert_int_equal(hr_dlog_day(1835481599999LL), 20280229);
    assert_int_equal(hr_dlog_day(1835481600000LL), 20280301);
    /* 9999-12-31, the column's default (HR_DLOG_UNSET) */
    assert_int_equal(hr_dlog_day(253402214400000LL), HR_DLOG_UNSET);
}

static void test_round_trip(void **state)
{
    char buf[HR_DLOG_DAY_TEXT];

    (void)state;
    /* every day of four centuries around the epoch, leap years and 2000 */
    for (int64_t d = -73048; d < 73048; d++) {
        int64_t ymd = hr_dlog_ymd(d);

        assert_int_equal(hr_dlog_from_ymd(ymd), d);
        assert_int_equal(hr_dlog_epoch_day(d * DAY_MS), d);
        assert_int_equal(hr_dlog_day(d * DAY_MS + DAY_MS / 2), ymd);
    }
    assert_int_equal(hr_dlog_epoch_day(-1), -1);
    assert_string_equal(hr_dlog_text(20261129, buf), "2026-11-29");
    assert_string_equal(hr_dlog_text(19700101, buf), "1970-01-01");
    assert_string_equal(hr_dlog_text(HR_DLOG_UNSET, buf), "9999-12-31");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_day),
        cmocka_unit_test(test_round_trip),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
