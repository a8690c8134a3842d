/* Unit tests for ctl_fmt_cell, the UTF-8 aware table cell of `heraldctl
 * list`: a cut never splits a character, the result is valid UTF-8 of
 * exactly the asked terminal width (wide characters counted 2), and bytes
 * that are not UTF-8 or control characters cannot break the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ctl_fmt.h"

#define ELLIPSIS "\xE2\x80\xA6"

/* Whether S is valid UTF-8; its terminal width in *WIDTH. */
static bool utf8_width(const char *s, int *width)
{
    const unsigned char *p = (const unsigned char *)s;

    *width = 0;
    while (*p) {
        uint32_t cp;
        int n;
        if (p[0] < 0x80)
            cp = p[0], n = 1;
        else if ((p[0] & 0xE0) == 0xC0)
            cp = p[0] & 0x1F, n = 2;
        else if ((p[0] & 0xF0) == 0xE0)
            cp = p[0] & 0x0F, n = 3;
        else if ((p[0] & 0xF8) == 0xF0)
            cp = p[0] & 0x07, n = 4;
        else
            return false;
        for (int i = 1; i < n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (p[i] & 0x3F);
        }
        *width += ctl_fmt_cp_width(cp);
        p += n;
    }
    return true;
}

static void test_ascii(void **state)
{
    char buf[64];

    (void)state;
    assert_string_equal(ctl_fmt_cell("abc", 6, true, buf, sizeof buf), "abc   ");
    assert_string_equal(ctl_fmt_cell("abc", 6, false, buf, sizeof buf), "abc");
    assert_string_equal(ctl_fmt_cell("abcdef", 6, true, buf, sizeof buf), "abcdef");
    assert_string_equal(ctl_fmt_cell("abcdefg", 6, true, buf, sizeof buf), "abcde" ELLIPSIS);
    assert_string_equal(ctl_fmt_cell(NULL, 3, true, buf, sizeof buf), "   ");
    assert_string_equal(ctl_fmt_cell("", 0, true, buf, sizeof buf), "");
}

static void test_widths(void **state)
{
    (void)state;
    assert_int_equal(ctl_fmt_cp_width('a'), 1);
    assert_int_equal(ctl_fmt_cp_width(0x00E9), 1);  /* é */
    assert_int_equal(ctl_fmt_cp_width(0x0301), 0);  /* combining acute */
    assert_int_equal(ctl_fmt_cp_width(0x4E2D), 2);  /* 中 */
    assert_int_equal(ctl_fmt_cp_width(0xAC00), 2);  /* 가 */
    assert_int_equal(ctl_fmt_cp_width(0xFF21), 2);  /* fullwidth A */
    assert_int_equal(ctl_fmt_cp_width(0x1F389), 2); /* 🎉 */
    assert_int_equal(ctl_fmt_cp_width(0x1F680), 2); /* 🚀 */
    assert_int_equal(ctl_fmt_cp_width(0xFE0F), 0);  /* variation selector */
}

/* CJK (3 bytes, 2 columns) and emoji (4 bytes, 2 columns) cut at every
 * width: always valid UTF-8 of exactly that width when padded. */
static void test_cjk_emoji_every_width(void **state)
{
    static const char *const names[] = {
        "\xE4\xB8\xAD\xE6\x96\x87\xE5\x90\x8D\xE7\xA7\xB0\xE7\x9A\x84\xE6\x8F\x90\xE9\x86\x92"
        "\xE4\xBB\xBB\xE5\x8A\xA1\xE4\xB8\x80\xE4\xBA\x8C\xE4\xB8\x89\xE5\x9B\x9B\xE4\xBA\x94",
        "live \xF0\x9F\x8E\x89\xF0\x9F\x8E\x89 show \xF0\x9F\x9A\x80 starts \xE2\x9C\x85 now",
        "a\xCC\x81"
        "b\xCC\x81"
        "c\xCC\x81"
        "d\xCC\x81"
        "e\xCC\x81"
        "f\xCC\x81",
        "mixed \xE4\xB8\xAD x \xF0\x9F\x8E\x89 y \xED\x95\x9C\xEA\xB8\x80",
    };
    char buf[4 * 40 + 8];

    (void)state;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        for (int w = 0; w <= 40; w++) {
            int got;
            ctl_fmt_cell(names[i], w, true, buf, sizeof buf);
            if (!utf8_width(buf, &got))
                fail_msg("name %zu width %d: invalid UTF-8 \"%s\"", i, w, buf);
            if (got != w)
                fail_msg("name %zu width %d: %d columns \"%s\"", i, w, got, buf);
            ctl_fmt_cell(names[i], w, false, buf, sizeof buf);
            assert_true(utf8_width(buf, &got));
            assert_true(got <= w);
        }
    }
}

static void test_cut_points(void **state)
{
    char buf[64];

    (void)state;
    /* 中文名 is 6 columns: 5 keeps 中 + … and a space (名 would need 2). */
    assert_string_equal(
        ctl_fmt_cell("\xE4\xB8\xAD\xE6\x96\x87\xE5\x90\x8D", 5, true, buf, sizeof buf),
        "\xE4\xB8\xAD\xE6\x96\x87" ELLIPSIS);
    assert_string_equal(
        ctl_fmt_cell("\xE4\xB8\xAD\xE6\x96\x87\xE5\x90\x8D", 4, true, buf, sizeof buf),
        "\xE4\xB8\xAD" ELLIPSIS " ");
    assert_string_equal(
        ctl_fmt_cell("\xE4\xB8\xAD\xE6\x96\x87\xE5\x90\x8D", 6, true, buf, sizeof buf),
        "\xE4\xB8\xAD\xE6\x96\x87\xE5\x90\x8D");
    /* A combining mark stays with its base. */
    assert_string_equal(ctl_fmt_cell("e\xCC\x81"
                                     "e\xCC\x81"
                                     "e",
                                     2, true, buf, sizeof buf),
                        "e\xCC\x81" ELLIPSIS);
}

static void test_bad_bytes(void **state)
{
    char buf[64];

    (void)state;
    /* A lone continuation byte, a cut 3-byte sequence, an overlong '/', a
     * surrogate, and a newline and tab that would break the row. */
    assert_string_equal(ctl_fmt_cell("a\x80"
                                     "b\xE4\xB8"
                                     "c\xC0\xAF"
                                     "d\xED\xA0\x80",
                                     20, false, buf, sizeof buf),
                        "a?b??c??d???");
    assert_string_equal(ctl_fmt_cell("line\none\ttab", 20, false, buf, sizeof buf), "line one tab");
}

/* A buffer too small for the text cuts it at a character boundary. */
static void test_small_buffer(void **state)
{
    char buf[12];
    int got;

    (void)state;
    ctl_fmt_cell("\xF0\x9F\x8E\x89\xF0\x9F\x8E\x89\xF0\x9F\x8E\x89\xF0\x9F\x8E\x89", 8, false, buf,
                 sizeof buf);
    assert_true(utf8_width(buf, &got));
    assert_true(strlen(buf) < sizeof buf);
    assert_true(got <= 8);
    ctl_fmt_cell("abc", 3, true, buf, 1);
    assert_string_equal(buf, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ascii),
        cmocka_unit_test(test_widths),
        cmocka_unit_test(test_cjk_emoji_every_width),
        cmocka_unit_test(test_cut_points),
        cmocka_unit_test(test_bad_bytes),
        cmocka_unit_test(test_small_buffer),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
