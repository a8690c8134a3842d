/* test_variant: an A/B test's winner step in hr_variant, without a
 * database: the pick (hr_variant_winner) by each metric, its ties and the
 * fallback when nothing was counted; the sample (hr_variant_sampled: its
 * share, independent of the arms); the variant a uid gets
 * (hr_variant_ab_pick: its arm in the sample, the winner or held
 * outside); the "ab" JSON (hr_variant_ab_from_json).  The checks that
 * need a configuration (arms, ranges) run in test_abwinner.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hr_variant.h"

static void test_winner_metric(void **state)
{
    hr_variant_tally arms[] = {
        {.key = "A", .sent = 100, .clicked = 5, .opened = 40},
        {.key = "B", .sent = 50, .clicked = 4, .opened = 10},
        {.key = "default", .sent = 20, .failed = 0, .clicked = 1, .opened = 9},
    };

    (void)state;
    /* click rate: A 5 %, B 8 %, default 5 % */
    assert_int_equal(hr_variant_winner(arms, 3, "click"), 1);
    /* open rate: A 40 %, B 20 %, default 45 % */
    assert_int_equal(hr_variant_winner(arms, 3, "open"), 2);
    /* delivered: A 100/110, B 50/50, default 20/20: B and default tie at
     * 100 %, the earlier (B) wins */
    arms[0].failed = 10;
    assert_int_equal(hr_variant_winner(arms, 3, "delivered"), 1);
}

static void test_winner_ties(void **state)
{
    hr_variant_tally arms[] = {
        {.key = "A", .sent = 90, .failed = 10, .clicked = 9},
        {.key = "B", .sent = 100, .clicked = 10},
        {.key = "C", .sent = 100, .clicked = 10},
    };

    (void)state;
    /* 10 % each: the delivered rate decides (A 90 %, B and C 100 %), then
     * the order: B */
    assert_int_equal(hr_variant_winner(arms, 3, "click"), 1);
    /* the same figures in another order: the first of the tie */
    arms[0].failed = 0;
    arms[0].sent = 100;
    arms[0].clicked = 10;
    assert_int_equal(hr_variant_winner(arms, 3, "click"), 0);
    assert_int_equal(hr_variant_winner(arms + 1, 2, "click"), 0);
}

static void test_winner_no_data(void **state)
{
    hr_variant_tally none[] = {{.key = "A"}, {.key = "B"}, {.key = "default"}};
    hr_variant_tally no_clicks[] = {
        {.key = "A", .sent = 10, .unregistered = 5},
        {.key = "B", .sent = 10},
    };

    (void)state;
    /* nothing counted at all: the first arm (the documented fallback) */
    assert_int_equal(hr_variant_winner(none, 3, "click"), 0);
    assert_int_equal(hr_variant_winner(none, 3, "open"), 0);
    assert_int_equal(hr_variant_winner(none, 3, "delivered"), 0);
    /* no clicks anywhere: the delivered rate (A 10/15, B 10/10) */
    assert_int_equal(hr_variant_winner(no_clicks, 2, "click"), 1);
    assert_int_equal(hr_variant_winner(no_clicks, 1, "click"), 0);
}

static void test_sampled(void **state)
{
    int in = 0, in_a = 0, a = 0;
    hr_variant v[] = {{.key = "A", .split = 50}, {.key = "B", .split = 50}};
    hr_variant_set s = {.v = v, .n = 2};

    (void)state;
    for (uint64_t uid = 1; uid <= 100000; uid++) {
        bool sampled = hr_variant_sampled(42, uid, 20);
        bool arm_a = hr_variant_pick(&s, 42, uid, NULL) == 0;

        /* deterministic */
        assert_true(sampled == hr_variant_sampled(42, uid, 20));
        in += sampled;
        a += arm_a;
        in_a += sampled && arm_a;
    }
    /* 20 % within a point, and the arms split the sample as they split all */
    assert_true(in > 19000 && in < 21000);
    assert_true(abs(in_a * 2 - in) < in / 20);
    assert_true(abs(a - 50000) < 1000);
    /* 99 % is nearly everyone, another task another sample */
    assert_true(hr_variant_sampled(42, 7, 99) || hr_variant_sampled(42, 8, 99));
}

static void test_ab_pick(void **state)
{
    hr_variant v[] = {{.key = "A", .split = 50}, {.key = "B", .split = 30}};
    hr_variant_set s = {.v = v, .n = 2};
    hr_task t;
    uint64_t in = 0, out = 0;

    (void)state;
    hr_task_defaults(&t);
    t.id = 42;
    t.ab_sample_pct = 10;
    for (uint64_t uid = 1; in == 0 || out == 0; uid++)
        *(hr_variant_sampled(42, uid, 10) ? &in : &out) = uid;
    /* the sample gets its arm, the rest is held until the winner is known */
    assert_int_equal(hr_variant_ab_pick(&s, &t, in, NULL), hr_variant_pick(&s, 42, in, NULL));
    assert_int_equal(hr_variant_ab_pick(&s, &t, out, NULL), HR_VARIANT_HELD);
    t.ab_winner = "b";
    assert_int_equal(hr_variant_ab_pick(&s, &t, out, NULL), 1);
    assert_int_equal(hr_variant_ab_pick(&s, &t, in, NULL), hr_variant_pick(&s, 42, in, NULL));
    t.ab_winner = HR_VARIANT_DEFAULT;
    assert_int_equal(hr_variant_ab_pick(&s, &t, out, NULL), -1);
    /* no winner step: the arm for everyone */
    t.ab_sample_pct = -1;
    assert_int_equal(hr_variant_ab_pick(&s, &t, out, NULL), hr_variant_pick(&s, 42, out, NULL));
}

/* hr_variant_ab_from_json of TEXT into T; its answer. */
static int ab_parse(const char *text, hr_task *t, char *err, size_t len)
{
    cJSON *j = cJSON_Parse(text);
    int rc = hr_variant_ab_from_json(j, t, err, len);

    cJSON_Delete(j);
    return rc;
}

static void test_ab_json(void **state)
{
    hr_task t;
    char err[256];

    (void)state;
    hr_task_defaults(&t);
    assert_int_equal(
        ab_parse("{\"sample_pct\": 20, \"wait_s\": 5, \"metric\": \"open\"}", &t, err, sizeof err),
        0);
    assert_int_equal(t.ab_sample_pct, 20);
    assert_int_equal(t.ab_wait_s, 5);
    assert_string_equal(t.ab_metric, "open");
    /* defaults: an hour, clicks */
    assert_int_equal(ab_parse("{\"sample_pct\": 1}", &t, err, sizeof err), 0);
    assert_int_equal(t.ab_wait_s, 3600);
    assert_string_equal(t.ab_metric, "click");
    assert_int_equal(ab_parse("{\"sample_pct\": 0}", &t, err, sizeof err), HR_VARIANT_EINVAL);
    assert_non_null(strstr(err, "1..99"));
    assert_int_equal(ab_parse("{\"sample_pct\": 100}", &t, err, sizeof err), HR_VARIANT_EINVAL);
    assert_int_equal(ab_parse("{\"sample_pct\": 20, \"metric\": \"reply\"}", &t, err, sizeof err),
                     HR_VARIANT_EINVAL);
    assert_non_null(strstr(err, "click, open or delivered"));
    assert_int_equal(ab_parse("{\"sample_pct\": 2.5}", &t, err, sizeof err), HR_VARIANT_EINVAL);
    assert_int_equal(ab_parse("{\"sample_pct\": 20, \"when\": 1}", &t, err, sizeof err),
                     HR_VARIANT_EINVAL);
    assert_int_equal(ab_parse("[20]", &t, err, sizeof err), HR_VARIANT_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_winner_metric),  cmocka_unit_test(test_winner_ties),
        cmocka_unit_test(test_winner_no_data), cmocka_unit_test(test_sampled),
        cmocka_unit_test(test_ab_pick),        cmocka_unit_test(test_ab_json),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
