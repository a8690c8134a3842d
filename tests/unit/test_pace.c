/* test_pace: hr_pace on fake clocks: the finish-by rate derivation (and a
 * simulated campaign that re-derives it as herald does, ending within 5 %
 * of finish_by), the plan line, the admission estimator (alone, two tasks
 * sharing a budget by weight, a capped task leaving its share to the
 * other, tasks that do not overlap, no budget), the warning text and the
 * choice of an estimate's neighbours among a channel's rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hr_pace.h"

#define T0 1700000000000 /* a due time, ms */

static void test_rate(void **state)
{
    (void)state;
    /* 660 left, 10 s left: 11 seconds start pushes (0 s .. 10 s), 60 each;
     * rounding up never plans a late finish */
    assert_int_equal(hr_pace_rate(660, T0, T0 + 10000, 0), 60);
    assert_int_equal(hr_pace_rate(661, T0, T0 + 10000, 0), 61);
    /* never above the cap (rate_limit, or the channel's) */
    assert_int_equal(hr_pace_rate(600, T0, T0 + 10000, 25), 25);
    /* at least 1 while the clock runs, even with nothing left */
    assert_int_equal(hr_pace_rate(1, T0, T0 + 3600000, 0), 1);
    assert_int_equal(hr_pace_rate(0, T0, T0 + 1000, 0), 1);
    /* finish_by passed: as fast as allowed */
    assert_int_equal(hr_pace_rate(500, T0 + 10000, T0 + 10000, 40), 40);
    assert_int_equal(hr_pace_rate(500, T0 + 20000, T0 + 10000, 0), 0);
}

/* A campaign of TOTAL recipients on a channel of CAPACITY pushes/s, the
 * rate derived each second from what is left (as ratelimit.lua does at
 * every grant), each second's pushes started when it begins (as the
 * limiter grants them); returns when the last push started. */
static int64_t simulate(int64_t total, int64_t due, int64_t finish, int64_t capacity)
{
    int64_t left = total, now = due, rate = 0;

    for (int s = 0; s < 100000; s++, now += 1000) {
        rate = hr_pace_rate(left, now, finish, capacity);
        if (rate == 0 || capacity > 0)
            rate = rate == 0 || rate > capacity ? capacity : rate;
        left -= rate < left ? rate : left;
        if (left == 0)
            return now;
    }
    return -1;
}

static void test_rate_simulated(void **state)
{
    (void)state;
    /* 600 in 10 s, 900 in 15 s, 12345 in 1000 s: the end is within 5 % of
     * the span */
    assert_true(llabs(simulate(600, T0, T0 + 10000, 100) - (T0 + 10000)) <= 500);
    assert_true(llabs(simulate(900, T0, T0 + 15000, 200) - (T0 + 15000)) <= 750);
    assert_true(llabs(simulate(12345, T0, T0 + 1000000, 100000) - (T0 + 1000000)) <= 50000);
    /* a plan the channel cannot carry ends late, at its capacity */
    assert_int_equal(simulate(3000, T0, T0 + 10000, 100), T0 + 29000);
}

static void test_planned_done(void **state)
{
    (void)state;
    assert_int_equal(hr_pace_planned_done(1000, T0, T0 + 10000, T0 - 5), 0);
    assert_int_equal(hr_pace_planned_done(1000, T0, T0 + 10000, T0 + 2500), 250);
    assert_int_equal(hr_pace_planned_done(1000, T0, T0 + 10000, T0 + 10000), 1000);
    assert_int_equal(hr_pace_planned_done(1000, T0, T0 + 10000, T0 + 99999), 1000);
    assert_int_equal(hr_pace_planned_done(0, T0, T0 + 10000, T0 + 5000), 0);
}

static void test_weights(void **state)
{
    (void)state;
    assert_int_equal(hr_pace_weight(HR_PRIORITY_HIGH), 2);
    assert_int_equal(hr_pace_weight(HR_PRIORITY_NORMAL), 1);
}

static void test_estimate_alone(void **state)
{
    static const struct {
        int64_t size, cap, capacity, after_ms;
    } cases[] = {
        {1000, 50, 100, 20000}, /* its own rate_limit below the channel's */
        {1000, 0, 0, 0},        /* no budget, no cap: at once */
        {1000, 10, 0, 100000},  /* no budget, a cap: at the cap */
        {0, 0, 100, 0},         /* nothing to send */
    };
    hr_pace_load l = {.due_ms = T0, .size = 1000, .cap = 0, .weight = 2};
    hr_pace_estimate e;

    (void)state;
    hr_pace_estimate_run(&l, 1, 100, &e);
    assert_int_equal(e.finish_ms, T0 + 10000);
    assert_false(e.overbooked);
    assert_int_equal(e.sharers, 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        l.size = cases[i].size;
        l.cap = cases[i].cap;
        hr_pace_estimate_run(&l, 1, cases[i].capacity, &e);
        assert_int_equal(e.finish_ms, T0 + cases[i].after_ms);
    }
}

/* Normal (weight 1) 600 and high (weight 2) 600 due together on 90/s:
 * high gets 60/s and ends at 10 s, then normal has 300 left at 90/s. */
static void test_estimate_shared(void **state)
{
    hr_pace_load l[2] = {{.due_ms = T0, .size = 600, .weight = 1},
                         {.due_ms = T0, .size = 600, .weight = 2}};
    hr_pace_estimate e;

    (void)state;
    hr_pace_estimate_run(l, 2, 90, &e);
    assert_true(e.overbooked);
    assert_int_equal(e.sharers, 2);
    assert_int_equal(e.at_ms, T0);
    assert_int_equal(e.finish_ms, T0 + 10000 + 3334); /* 300 / 90 s, rounded up */
    /* seen from the high one */
    hr_pace_load h[2] = {l[1], l[0]};
    hr_pace_estimate_run(h, 2, 90, &e);
    assert_true(e.overbooked);
    assert_int_equal(e.finish_ms, T0 + 10000);
}

/* A capped task leaves what it cannot use to the other (work-conserving),
 * and the budget is not overbooked when the caps fit in it. */
static void test_estimate_capped(void **state)
{
    hr_pace_load l[2] = {{.due_ms = T0, .size = 700, .weight = 1},
                         {.due_ms = T0, .size = 10000, .cap = 30, .weight = 2}};
    hr_pace_estimate e;

    (void)state;
    hr_pace_estimate_run(l, 2, 100, &e);
    assert_true(e.overbooked);                 /* the first one has no cap: it wants it all */
    assert_int_equal(e.finish_ms, T0 + 10000); /* 70/s, not 33/s */
    l[0].cap = 70;
    hr_pace_estimate_run(l, 2, 100, &e);
    assert_false(e.overbooked);
    assert_int_equal(e.sharers, 2);
    assert_int_equal(e.finish_ms, T0 + 10000);
}

/* A task that ends before the next one is due shares nothing; one due
 * later joins while the first still runs. */
static void test_estimate_sequence(void **state)
{
    hr_pace_load l[2] = {{.due_ms = T0, .size = 500, .weight = 2},
                         {.due_ms = T0 + 10000, .size = 500, .weight = 2}};
    hr_pace_estimate e;

    (void)state;
    hr_pace_estimate_run(l, 2, 100, &e);
    assert_false(e.overbooked);
    assert_int_equal(e.finish_ms, T0 + 5000);
    l[1].due_ms = T0 + 2000; /* 300 left at T0+2s, then 50/s each */
    hr_pace_estimate_run(l, 2, 100, &e);
    assert_true(e.overbooked);
    assert_int_equal(e.at_ms, T0 + 2000);
    assert_int_equal(e.finish_ms, T0 + 8000);
}

static void test_warning(void **state)
{
    hr_pace_estimate e = {.finish_ms = T0 + 30000, .overbooked = true, .sharers = 2, .at_ms = T0};
    char out[600];
    unsigned kinds;

    (void)state;
    kinds = hr_pace_warning(&e, "webhook", 100, T0 + 20000, T0 + 25000, out, sizeof out);
    assert_int_equal(kinds, (1u << HR_PACE_WARN_OVERBOOKED) | (1u << HR_PACE_WARN_FINISH_BY) |
                                (1u << HR_PACE_WARN_EXPIRE_AT));
    assert_string_equal(out, "channel webhook is overbooked: 2 tasks share its 100 pushes/s from "
                             "2023-11-14T22:13:20Z; estimated finish 2023-11-14T22:13:50Z; "
                             "finish_by 2023-11-14T22:13:40Z cannot be met: estimated finish "
                             "2023-11-14T22:13:50Z; expire_at 2023-11-14T22:13:45Z comes before "
                             "the estimated finish 2023-11-14T22:13:50Z");
    /* met, alone: nothing */
    e.overbooked = false;
    assert_int_equal(hr_pace_warning(&e, "webhook", 100, T0 + 30000, -1, out, sizeof out), 0);
    assert_string_equal(out, "");
    /* a short buffer is cut, never overrun */
    e.overbooked = true;
    assert_int_not_equal(hr_pace_warning(&e, "webhook", 100, -1, -1, out, 20), 0);
    assert_int_equal(strlen(out), 19);
    assert_string_equal(hr_pace_warn_name(HR_PACE_WARN_FINISH_BY), "finish_by");
}

/* A channel's rows, the latest due first (as dsp_pace reads them): task 9
 * is being estimated, due at T0. */
static const hr_pace_row channel_rows[] = {
    {.id = 1, .load.due_ms = T0 + HR_PACE_WINDOW_MS + 1, .scheduled = true}, /* after the window */
    {.id = 2, .load.due_ms = T0 + HR_PACE_WINDOW_MS, .scheduled = true},     /* its last ms */
    {.id = 9, .load.due_ms = T0, .scheduled = true},                         /* itself */
    {.id = 3, .load.due_ms = T0, .scheduled = true},
    {.id = 4,
     .load.due_ms = T0 - HR_PACE_LOOKBACK_MS,
     .scheduled = true}, /* the lookback's first ms */
    {.id = 5, .load.due_ms = T0 - HR_PACE_LOOKBACK_MS - 1, .scheduled = true}, /* before it */
    {.id = 6,
     .load.due_ms = T0 - HR_PACE_LOOKBACK_MS - 1,
     .scheduled = false}, /* running: counts */
};

static void test_neighbours(void **state)
{
    size_t n = sizeof channel_rows / sizeof *channel_rows, pick[8], k;

    (void)state;
    k = hr_pace_neighbours(channel_rows, n, 9, T0, pick, 8);
    assert_int_equal(k, 4);
    assert_int_equal(channel_rows[pick[0]].id, 2);
    assert_int_equal(channel_rows[pick[1]].id, 3);
    assert_int_equal(channel_rows[pick[2]].id, 4);
    assert_int_equal(channel_rows[pick[3]].id, 6);
    /* at most MAX, the latest due first */
    k = hr_pace_neighbours(channel_rows, n, 9, T0, pick, 2);
    assert_int_equal(k, 2);
    assert_int_equal(channel_rows[pick[1]].id, 3);
    /* another task's view of the same rows: task 3, a window later, sees 1
     * and 9 but no longer 4 */
    k = hr_pace_neighbours(channel_rows, n, 3, T0 + 1, pick, 8);
    assert_int_equal(k, 4);
    assert_int_equal(channel_rows[pick[0]].id, 1);
    assert_int_equal(channel_rows[pick[1]].id, 2);
    assert_int_equal(channel_rows[pick[2]].id, 9);
    assert_int_equal(channel_rows[pick[3]].id, 6);
    /* every row due after its window (running ones too), and no rows */
    assert_int_equal(hr_pace_neighbours(channel_rows, n, 9,
                                        T0 - HR_PACE_LOOKBACK_MS - 2 - HR_PACE_WINDOW_MS, pick, 8),
                     0);
    assert_int_equal(hr_pace_neighbours(channel_rows, 0, 9, T0, pick, 8), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate),
        cmocka_unit_test(test_rate_simulated),
        cmocka_unit_test(test_planned_done),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_estimate_alone),
        cmocka_unit_test(test_estimate_shared),
        cmocka_unit_test(test_estimate_capped),
        cmocka_unit_test(test_estimate_sequence),
        cmocka_unit_test(test_warning),
        cmocka_unit_test(test_neighbours),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
