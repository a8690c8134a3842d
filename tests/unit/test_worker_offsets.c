/* Unit tests of wk_offsets: only the contiguous completed prefix of a
 * partition may be stored. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "wk_offsets.h"

static void test_in_order(void **state)
{
    wk_offsets *o = NULL;
    int64_t store = -1;

    (void)state;
    assert_int_equal(wk_offsets_new(&o), 0);
    assert_int_equal(wk_offsets_begin(o, 0, 10), 0);
    assert_int_equal(wk_offsets_finish(o, 0, 10, &store), 1);
    assert_int_equal(store, 11);
    assert_int_equal(wk_offsets_pending(o, 0), 0);
    wk_offsets_free(o);
}

static void test_out_of_order_waits_for_earlier(void **state)
{
    wk_offsets *o = NULL;
    int64_t store = -1;

    (void)state;
    assert_int_equal(wk_offsets_new(&o), 0);
    for (int64_t off = 5; off <= 8; off++)
        assert_int_equal(wk_offsets_begin(o, 3, off), 0);
    /* 7 and 6 finish first: nothing may be stored while 5 is in flight. */
    assert_int_equal(wk_offsets_finish(o, 3, 7, &store), 0);
    assert_int_equal(wk_offsets_finish(o, 3, 6, &store), 0);
    assert_int_equal(store, -1);
    assert_int_equal(wk_offsets_pending(o, 3), 4);
    /* 5 finishes: the prefix 5,6,7 is complete, 8 is still running. */
    assert_int_equal(wk_offsets_finish(o, 3, 5, &store), 1);
    assert_int_equal(store, 8);
    assert_int_equal(wk_offsets_pending(o, 3), 1);
    assert_int_equal(wk_offsets_finish(o, 3, 8, &store), 1);
    assert_int_equal(store, 9);
    wk_offsets_free(o);
}

static void test_partitions_are_independent(void **state)
{
    wk_offsets *o = NULL;
    int64_t store = -1;

    (void)state;
    assert_int_equal(wk_offsets_new(&o), 0);
    assert_int_equal(wk_offsets_begin(o, 0, 100), 0);
    assert_int_equal(wk_offsets_begin(o, 1, 4), 0);
    assert_int_equal(wk_offsets_finish(o, 1, 4, &store), 1);
    assert_int_equal(store, 5);
    assert_int_equal(wk_offsets_pending(o, 0), 1);
    wk_offsets_free(o);
}

static void test_gaps_and_errors(void **state)
{
    wk_offsets *o = NULL;
    int64_t store = -1;

    (void)state;
    assert_int_equal(wk_offsets_new(&o), 0);
    assert_int_equal(wk_offsets_begin(o, 0, 2), 0);
    assert_int_equal(wk_offsets_begin(o, 0, 9), 0);           /* compacted topic: a gap */
    assert_int_equal(wk_offsets_begin(o, 0, 9), -1);          /* not increasing */
    assert_int_equal(wk_offsets_finish(o, 0, 3, &store), -1); /* never begun */
    assert_int_equal(wk_offsets_finish(o, 0, 9, &store), 0);
    assert_int_equal(wk_offsets_finish(o, 0, 9, &store), -1); /* twice */
    assert_int_equal(wk_offsets_finish(o, 0, 2, &store), 1);
    assert_int_equal(store, 10);
    wk_offsets_free(o);
}

static void test_drop_revoked(void **state)
{
    wk_offsets *o = NULL;
    int64_t store = -1;

    (void)state;
    assert_int_equal(wk_offsets_new(&o), 0);
    assert_int_equal(wk_offsets_begin(o, 2, 1), 0);
    assert_int_equal(wk_offsets_begin(o, 4, 1), 0);
    wk_offsets_drop(o, 2);
    assert_int_equal(wk_offsets_finish(o, 2, 1, &store), -1);
    assert_int_equal(wk_offsets_pending(o, 2), 0);
    assert_int_equal(wk_offsets_finish(o, 4, 1, &store), 1);
    assert_int_equal(store, 2);
    /* Reassigned later: offsets start over from what Kafka delivers. */
    assert_int_equal(wk_offsets_begin(o, 2, 0), 0);
    wk_offsets_free(o);
}

static void test_many_in_flight(void **state)
{
    wk_offsets *o = NULL;
    int64_t store = -1;

    (void)state;
    assert_int_equal(wk_offsets_new(&o), 0);
    /* Finishing in reverse keeps everything pending until the first one. */
    for (int64_t off = 0; off < 1000; off++)
        assert_int_equal(wk_offsets_begin(o, 0, off), 0);
    for (int64_t off = 999; off > 0; off--)
        assert_int_equal(wk_offsets_finish(o, 0, off, &store), 0);
    assert_int_equal(wk_offsets_finish(o, 0, 0, &store), 1);
    assert_int_equal(store, 1000);
    /* Interleaved begin/finish exercises compaction. */
    for (int64_t off = 1000; off < 3000; off++) {
        assert_int_equal(wk_offsets_begin(o, 0, off), 0);
        if (off % 2 == 1) {
            assert_int_equal(wk_offsets_finish(o, 0, off - 1, &store), 1);
            assert_int_equal(wk_offsets_finish(o, 0, off, &store), 1);
            assert_int_equal(store, off + 1);
        }
    }
    assert_int_equal(wk_offsets_pending(o, 0), 0);
    wk_offsets_free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order),
        cmocka_unit_test(test_out_of_order_waits_for_earlier),
        cmocka_unit_test(test_partitions_are_independent),
        cmocka_unit_test(test_gaps_and_errors),
        cmocka_unit_test(test_drop_revoked),
        cmocka_unit_test(test_many_in_flight),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
