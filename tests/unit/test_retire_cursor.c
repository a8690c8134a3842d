/* The retirement pass's cursor (dispatcher/dsp_sweep.c,
 * dsp_retire_cursor_step): where it starts, that it keeps its place within
 * the hour, that every DSP_RETIRE_REWIND_MS it goes back to twice that
 * before the wall clock (so a finish committed behind the cursor is still
 * read), never forward, in the text MariaDB prints a DATETIME(3) in, which
 * the pass compares it with. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dsp_sweep.h"

/* 2026-11-30 12:34:56.789 UTC and a monotonic clock unrelated to it. */
#define WALL 1796042096789LL
#define MONO 5000LL

static void test_first_pass_reads_from_the_start(void **state)
{
    dsp_retire_cursor c = {0};

    (void)state;
    dsp_retire_cursor_step(&c, MONO, WALL);
    assert_string_equal(c.at, DSP_RETIRE_START);
    assert_int_equal(c.id, 0);
    assert_int_equal(c.rewound_ms, MONO);
}

static void test_place_kept_within_the_hour(void **state)
{
    dsp_retire_cursor c = {0};

    (void)state;
    dsp_retire_cursor_step(&c, MONO, WALL);
    /* The pass moved it to the last finish it read. */
    strcpy(c.at, "2026-11-30 12:30:00.123");
    c.id = 42;
    dsp_retire_cursor_step(&c, MONO + DSP_RETIRE_REWIND_MS - 1, WALL + DSP_RETIRE_REWIND_MS - 1);
    assert_string_equal(c.at, "2026-11-30 12:30:00.123");
    assert_int_equal(c.id, 42);
    assert_int_equal(c.rewound_ms, MONO);
}

static void test_rewinds_every_hour(void **state)
{
    dsp_retire_cursor c = {0};
    int64_t hour = DSP_RETIRE_REWIND_MS;

    (void)state;
    dsp_retire_cursor_step(&c, MONO, WALL);
    strcpy(c.at, "2026-11-30 13:30:00.123");
    c.id = 42;
    /* An hour on: back to two hours before the wall clock, whole seconds,
     * from its first id. */
    dsp_retire_cursor_step(&c, MONO + hour, WALL + hour);
    assert_string_equal(c.at, "2026-11-30 11:34:56.000");
    assert_int_equal(c.id, 0);
    assert_int_equal(c.rewound_ms, MONO + hour);
    /* The next pass moves it on; the next rewind is an hour after this one. */
    strcpy(c.at, "2026-11-30 13:40:00.000");
    c.id = 77;
    dsp_retire_cursor_step(&c, MONO + 2 * hour - 1, WALL + 2 * hour - 1);
    assert_string_equal(c.at, "2026-11-30 13:40:00.000");
    assert_int_equal(c.id, 77);
    dsp_retire_cursor_step(&c, MONO + 2 * hour, WALL + 2 * hour);
    assert_string_equal(c.at, "2026-11-30 12:34:56.000");
    assert_int_equal(c.id, 0);
}

/* A cursor still behind (the start's day of backlog not read yet) keeps
 * its place: the rewind goes back only. */
static void test_never_forward(void **state)
{
    dsp_retire_cursor c = {0};
    int64_t hour = DSP_RETIRE_REWIND_MS;

    (void)state;
    dsp_retire_cursor_step(&c, MONO, WALL);
    dsp_retire_cursor_step(&c, MONO + hour, WALL + hour);
    assert_string_equal(c.at, DSP_RETIRE_START);
    assert_int_equal(c.rewound_ms, MONO + hour);
    strcpy(c.at, "2026-11-30 09:00:00.500");
    c.id = 9;
    dsp_retire_cursor_step(&c, MONO + 2 * hour, WALL + 2 * hour);
    assert_string_equal(c.at, "2026-11-30 09:00:00.500");
    assert_int_equal(c.id, 9);
    assert_int_equal(c.rewound_ms, MONO + 2 * hour);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_pass_reads_from_the_start),
        cmocka_unit_test(test_place_kept_within_the_hour),
        cmocka_unit_test(test_rewinds_every_hour),
        cmocka_unit_test(test_never_forward),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
