/* test_state: the name tables of hr_state (they must match the ENUMs of
 * push_task.state and push_task.control) and parsing.  The transitions are
 * SQL and run in the integration suites. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hr_state.h"

static void test_state_names(void **state)
{
    /* schemas/mysql/001_tables.sql, push_task.state, in ENUM order. */
    static const char *const want[] = {"scheduled", "dispatching", "dispatched", "done",
                                       "paused",    "cancelled",   "failed"};
    hr_task_state s;

    (void)state;
    assert_int_equal(sizeof want / sizeof *want, HR_STATE__COUNT);
    for (int i = 0; i < HR_STATE__COUNT; i++) {
        assert_string_equal(hr_state_name((hr_task_state)i), want[i]);
        assert_int_equal(hr_state_parse(want[i], &s), 0);
        assert_int_equal(s, i);
    }
    assert_string_equal(hr_state_name(HR_STATE__COUNT), "?");
    assert_int_equal(hr_state_parse("Done", &s), -1);
    assert_int_equal(hr_state_parse("", &s), -1);
    assert_int_equal(hr_state_parse(NULL, &s), -1);
}

static void test_final(void **state)
{
    (void)state;
    assert_true(hr_state_final(HR_STATE_DONE));
    assert_true(hr_state_final(HR_STATE_FAILED));
    assert_true(hr_state_final(HR_STATE_CANCELLED));
    assert_false(hr_state_final(HR_STATE_SCHEDULED));
    assert_false(hr_state_final(HR_STATE_DISPATCHING));
    assert_false(hr_state_final(HR_STATE_DISPATCHED));
    assert_false(hr_state_final(HR_STATE_PAUSED));
}

static void test_control_names(void **state)
{
    static const char *const want[] = {"run", "pause", "cancel"};
    hr_control c;

    (void)state;
    assert_int_equal(sizeof want / sizeof *want, HR_CONTROL__COUNT);
    for (int i = 0; i < HR_CONTROL__COUNT; i++) {
        assert_string_equal(hr_control_name((hr_control)i), want[i]);
        assert_int_equal(hr_control_parse(want[i], &c), 0);
        assert_int_equal(c, i);
    }
    assert_string_equal(hr_control_name(HR_CONTROL__COUNT), "?");
    assert_int_equal(hr_control_parse("resume", &c), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_names),
        cmocka_unit_test(test_final),
        cmocka_unit_test(test_control_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
