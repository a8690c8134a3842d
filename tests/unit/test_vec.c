/* test_vec: hr_vec growth (order kept across reallocations, capacity
 * doubling, reserve), a struct element type, and a refused growth leaving
 * the vector as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hr_vec.h"

static void test_push(void **state)
{
    HR_VEC(int64_t) v = {0};

    (void)state;
    for (int64_t i = 0; i < 1000; i++)
        assert_int_equal(hr_vec_push(&v, i * 3), 0);
    assert_int_equal(v.n, 1000);
    assert_true(v.cap >= 1000 && v.cap < 2000);
    for (size_t i = 0; i < v.n; i++)
        assert_int_equal(v.v[i], (int64_t)i * 3);
    hr_vec_free(&v);
    assert_null(v.v);
    assert_int_equal(v.n, 0);
    assert_int_equal(v.cap, 0);
}

static void test_reserve(void **state)
{
    struct pair {
        int a;
        const char *b;
    };
    HR_VEC(struct pair) v = {0};

    (void)state;
    assert_int_equal(hr_vec_reserve(&v, 5), 0);
    assert_int_equal(v.cap, HR_VEC_MIN_CAP);
    assert_int_equal(hr_vec_reserve(&v, 100), 0);
    assert_int_equal(v.cap, 128);
    assert_int_equal(hr_vec_push(&v, ((struct pair){1, "x"})), 0);
    assert_int_equal(v.v[0].a, 1);
    assert_string_equal(v.v[0].b, "x");
    hr_vec_free(&v);
}

static void test_overflow(void **state)
{
    HR_VEC(int64_t) v = {0};

    (void)state;
    assert_int_equal(hr_vec_push(&v, 7), 0);
    assert_int_equal(hr_vec_reserve(&v, SIZE_MAX / 4), -1);
    assert_int_equal(v.n, 1);
    assert_int_equal(v.cap, HR_VEC_MIN_CAP);
    assert_int_equal(v.v[0], 7);
    hr_vec_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push),
        cmocka_unit_test(test_reserve),
        cmocka_unit_test(test_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
