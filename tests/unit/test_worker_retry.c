/* Unit tests of wk_retry: backoff bounds and the AIMD in-flight cap; and
 * the Retry-After both transports read (wk_provider_retry_after). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "wk_provider.h"
#include "wk_retry.h"

static void test_backoff_ceiling_doubles(void **state)
{
    (void)state;
    /* The draw is rnd % (ceiling + 1): rnd = ceiling gives the ceiling
     * itself, rnd = ceiling + 1 gives 0. */
    assert_int_equal(wk_retry_backoff_ms(200, 30000, 1, 200), 200);
    assert_int_equal(wk_retry_backoff_ms(200, 30000, 1, 201), 0);
    assert_int_equal(wk_retry_backoff_ms(200, 30000, 2, 400), 400);
    assert_int_equal(wk_retry_backoff_ms(200, 30000, 3, 800), 800);
    assert_int_equal(wk_retry_backoff_ms(200, 30000, 3, 801), 0);
}

static void test_backoff_capped(void **state)
{
    (void)state;
    assert_int_equal(wk_retry_backoff_ms(200, 1000, 4, 1000), 1000);
    assert_int_equal(wk_retry_backoff_ms(200, 1000, 10, 1000), 1000);
    /* A huge attempt count must not overflow. */
    assert_int_equal(wk_retry_backoff_ms(200, 30000, 100, 30000), 30000);
}

static void test_backoff_within_bounds(void **state)
{
    uint64_t x = 88172645463325252ULL;

    (void)state;
    for (int i = 0; i < 10000; i++) {
        int attempt = 1 + i % 12;
        int64_t cap = 100;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for (int k = 1; k < attempt && cap < 5000; k++)
            cap *= 2;
        if (cap > 5000)
            cap = 5000;
        int64_t d = wk_retry_backoff_ms(100, 5000, attempt, x);
        assert_true(d >= 0);
        assert_true(d <= cap);
    }
}

static void test_cap_halves_and_grows(void **state)
{
    wk_retry_cap c;

    (void)state;
    wk_retry_cap_init(&c, 10);
    assert_int_equal(c.cap, 10);
    wk_retry_cap_halve(&c);
    assert_int_equal(c.cap, 5);
    wk_retry_cap_halve(&c);
    wk_retry_cap_halve(&c);
    assert_int_equal(c.cap, 1);
    wk_retry_cap_halve(&c);
    assert_int_equal(c.cap, 1); /* never below one */
    for (int i = 0; i < 20; i++)
        wk_retry_cap_grow(&c);
    assert_int_equal(c.cap, 10); /* never above concurrency */
    wk_retry_cap_init(&c, 0);
    assert_int_equal(c.cap, 1);
}

/* The heap yields nodes in due order after pushes and removals anywhere. */
static void test_heap_order(void **state)
{
    enum { N = 500 };
    wk_retry_node nodes[N];
    wk_retry_heap h = {0};
    uint64_t rnd = 88172645463325252ULL;
    int64_t last = INT64_MIN;
    size_t left = N;

    (void)state;
    for (size_t i = 0; i < N; i++) {
        rnd ^= rnd << 13;
        rnd ^= rnd >> 7;
        rnd ^= rnd << 17;
        nodes[i].due_ms = (int64_t)(rnd % 1000);
        assert_int_equal(wk_retry_heap_push(&h, &nodes[i]), 0);
    }
    /* Cancel every third node wherever it sits. */
    for (size_t i = 0; i < N; i += 3) {
        wk_retry_heap_remove(&h, &nodes[i]);
        left--;
    }
    for (size_t i = 0; i < h.n; i++)
        assert_int_equal(h.v[i]->index, i);
    for (wk_retry_node *n; (n = wk_retry_heap_min(&h)) != NULL; left--) {
        assert_true(n->due_ms >= last);
        last = n->due_ms;
        wk_retry_heap_remove(&h, n);
    }
    assert_int_equal(left, 0);
    wk_retry_heap_free(&h);
}

/* Retry-After as delta seconds or an HTTP-date, clamped to 0..1 hour. */
static void test_retry_after(void **state)
{
    static const struct {
        const char *value;
        long want;
    } cases[] = {
        {"5", 5},
        {" 30\r\n", 30},
        {"0", 0},
        {"-3", 0},
        {"99999", 3600},
        {"junk", 0},
        {"", 0},
        {"Thu, 01 Jan 1970 00:02:00 GMT", 120},
        {"Thu, 01 Jan 1970 03:00:00 GMT", 3600},
    };

    (void)state;
    /* "Now" is the epoch, so a date is the seconds after it. */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(wk_provider_retry_after(cases[i].value, strlen(cases[i].value), 0),
                         cases[i].want);
    assert_int_equal(wk_provider_retry_after("Thu, 01 Jan 1970 00:02:00 GMT", 29, 100), 20);
    /* A date already past asks for no wait. */
    assert_int_equal(wk_provider_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 29, time(NULL)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_ceiling_doubles),
        cmocka_unit_test(test_backoff_capped),
        cmocka_unit_test(test_backoff_within_bounds),
        cmocka_unit_test(test_cap_halves_and_grows),
        cmocka_unit_test(test_heap_order),
        cmocka_unit_test(test_retry_after),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
