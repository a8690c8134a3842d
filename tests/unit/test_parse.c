/* test_parse: hr_parse, the strict parsers the API and heraldctl share:
 * impossible dates and times refused (never normalised), uids exact up to
 * 2^63-1, names, JSON with repeated members refused and numbers kept as
 * their literal text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hr_parse.h"

static void test_time(void **state)
{
    static const struct {
        const char *text;
        int64_t ms;
    } good[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"2024-02-29T12:00:00Z", 1709208000000},
        {"2024-05-01 08:00:00", 1714550400000},
        {"2024-05-01 08:00:00.123", 1714550400123},
        {"2024-05-01T08:00:00.5Z", 1714550400500},
        {"2024-05-01t08:00:00.123456789z", 1714550400123},
        {"9999-12-31T23:59:59.999Z", 253402300799999},
        {"2000-02-29T00:00:00Z", 951782400000},
    };
    static const char *const bad[] = {
        "2030-02-30T00:00:00Z",
        "2030-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2030-04-31T00:00:00Z",
        "2030-13-01T00:00:00Z",
        "2030-00-10T00:00:00Z",
        "2030-01-00T00:00:00Z",
        "2030-01-01T24:00:00Z",
        "2030-01-01T00:60:00Z",
        "2030-01-01T00:00:60Z",
        "1969-12-31T23:59:59Z",
        "2030-1-01T00:00:00Z",
        "2030-01-01T 1:00:00Z",
        "2030-01-01T+1:00:00Z",
        "2030-01-01T00:00:00+02:00",
        "2030-01-01T00:00:00.Z",
        "2030-01-01T00:00:00ZZ",
        "2030-01-01",
        "",
        "2030-01-01X00:00:00",
        "2030-01-01T00:00:00.1234567890Z",
        "10000-01-01T00:00:00Z",
    };
    char err[256];
    int64_t ms;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof good / sizeof good[0]; i++) {
        ms = -1;
        assert_int_equal(hr_parse_time("due_at", good[i].text, &ms, err, sizeof err), 0);
        assert_int_equal(ms, good[i].ms);
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        if (hr_parse_time("due_at", bad[i], &ms, err, sizeof err) == 0)
            fail_msg("accepted %s", bad[i]);
        assert_non_null(strstr(err, "due_at"));
    }
    assert_int_equal(hr_parse_time("x", NULL, &ms, err, sizeof err), -1);
}

static void test_date(void **state)
{
    static const char *const bad[] = {"2030-02-30", "2030-13-01", "2030-1-1",   "2030-01-01 ",
                                      "1969-12-31", "",           "2030-02-29", "+030-01-01"};
    char err[256];
    int64_t day;
    size_t i;

    (void)state;
    assert_int_equal(hr_parse_date("date", "2024-05-01", &day, err, sizeof err), 0);
    assert_int_equal(day, 1714521600000);
    assert_int_equal(hr_parse_date("date", "2028-02-29", &day, err, sizeof err), 0);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (hr_parse_date("date", bad[i], &day, err, sizeof err) == 0)
            fail_msg("accepted %s", bad[i]);
}

/* A send window's bound: HH:MM or HH:MM:SS, nothing else. */
static void test_time_of_day(void **state)
{
    static const char *bad[] = {"24:00",  "12:60",   "12:00:60",  "7:00",   "07:0",
                                "07:00:", "07:00:0", " 07:00",    "07:00 ", "0700",
                                "+7:00",  "07-00",   "07:00:00Z", "",       "-1:00"};
    char err[128];
    int64_t secs = -5;

    (void)state;
    assert_int_equal(hr_parse_time_of_day("w", "00:00", &secs, err, sizeof err), 0);
    assert_int_equal(secs, 0);
    assert_int_equal(hr_parse_time_of_day("w", "08:30", &secs, err, sizeof err), 0);
    assert_int_equal(secs, 8 * 3600 + 30 * 60);
    assert_int_equal(hr_parse_time_of_day("w", "23:59:59", &secs, err, sizeof err), 0);
    assert_int_equal(secs, 86399);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        secs = -5;
        assert_int_equal(hr_parse_time_of_day("w", bad[i], &secs, err, sizeof err), -1);
        assert_int_equal(secs, -5);
        assert_non_null(strstr(err, "w: "));
    }
    assert_int_equal(hr_parse_time_of_day("w", NULL, &secs, err, sizeof err), -1);
}

static void test_uid(void **state)
{
    static const char *const bad[] = {"0",
                                      "-1",
                                      "+1",
                                      "01",
                                      " 1",
                                      "1 ",
                                      "1.0",
                                      "1e3",
                                      "",
                                      "9223372036854775808",
                                      "18446744073709551616",
                                      "99999999999999999999",
                                      "12a"};
    int64_t v;
    size_t i;

    (void)state;
    assert_int_equal(hr_parse_uid("9007199254740993", 16, &v), 0);
    assert_int_equal(v, INT64_C(9007199254740993));
    assert_int_equal(hr_parse_uid("9223372036854775807", 19, &v), 0);
    assert_int_equal(v, INT64_MAX);
    assert_int_equal(hr_parse_uid("1", 1, &v), 0);
    assert_int_equal(v, 1);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (hr_parse_uid(bad[i], strlen(bad[i]), &v) == 0)
            fail_msg("accepted %s", bad[i]);
}

static void test_name(void **state)
{
    char err[256], long_name[202];

    (void)state;
    memset(long_name, 'x', 201);
    long_name[201] = '\0';
    assert_int_equal(hr_parse_name("name", "reminder", 200, err, sizeof err), 0);
    assert_int_equal(hr_parse_name("name", "☃ напоминание", 200, err, sizeof err), 0);
    assert_int_equal(hr_parse_name("name", "", 200, err, sizeof err), -1);
    assert_non_null(strstr(err, "name"));
    assert_int_equal(hr_parse_name("topic", NULL, 200, err, sizeof err), -1);
    assert_int_equal(hr_parse_name("name", long_name, 200, err, sizeof err), -1);
    assert_int_equal(hr_parse_name("name", "\xc3\x28", 200, err, sizeof err), -1);
}

static cJSON *parse_ok(const char *text)
{
    char err[256];
    cJSON *j = NULL;

    if (hr_parse_json(text, strlen(text), &j, err, sizeof err) != 0)
        fail_msg("refused %s: %s", text, err);
    return j;
}

/* Loopback authorities: names and addresses of this host's loopback only,
 * nothing resolved. */
static void test_loopback(void **state)
{
    static const char *const yes[] = {
        "127.0.0.1",    "127.0.0.1:8080", "127.255.0.9:1", "localhost",
        "LocalHost:80", "[::1]",          "[::1]:18080",   "[0:0:0:0:0:0:0:1]:1",
    };
    static const char *const no[] = {
        "",
        ":8080",
        "0.0.0.0:8080",
        "10.0.0.1:80",
        "128.0.0.1",
        "127.1:80",
        "[::]:80",
        "::1",
        "::1:80",
        "[::1",
        "[::1]x",
        "localhost.evil.example",
        "evil.example:80",
        "127.0.0.1.evil.example",
        "[::ffff:127.0.0.1]:80",
    };
    (void)state;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        if (!hr_parse_loopback(yes[i]))
            fail_msg("'%s' is loopback", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (hr_parse_loopback(no[i]))
            fail_msg("'%s' is not loopback", no[i]);
    assert_false(hr_parse_loopback(NULL));
}

static void test_json(void **state)
{
    static const struct {
        const char *text;
        const char *path;
    } dups[] = {
        {"{\"name\":\"a\",\"name\":\"b\"}", "'name'"},
        {"{\"a\":1,\"payload\":{\"x\":1,\"y\":2,\"x\":3}}", "'payload.x'"},
        {"{\"a\":[{\"k\":1,\"k\":2}]}", "'a[].k'"},
        {"{\"na\\u006de\":\"a\",\"name\":\"b\"}", "'name'"},
    };
    static const char *const malformed[] = {"{\"a\":1} x", "{\"a\":", "\xff", "{\"a\":1}\0",
                                            "{\"p\":{\"x\":1e400}}"};
    char err[256], *printed;
    cJSON *j;
    int64_t v;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof dups / sizeof dups[0]; i++) {
        j = (cJSON *)1;
        assert_int_equal(hr_parse_json(dups[i].text, strlen(dups[i].text), &j, err, sizeof err),
                         HR_PARSE_DUPLICATE);
        assert_null(j);
        if (strstr(err, dups[i].path) == NULL)
            fail_msg("%s: '%s' does not name %s", dups[i].text, err, dups[i].path);
    }
    for (i = 0; i < sizeof malformed / sizeof malformed[0]; i++)
        assert_int_equal(
            hr_parse_json(malformed[i], strlen(malformed[i]) + (i == 3), &j, err, sizeof err),
            HR_PARSE_MALFORMED);

    /* Numbers keep their text; strings with digits and escapes do not
     * confuse the scan. */
    j = parse_ok("{\"s\":\"1,2\\\"3\",\"uids\":[9007199254740993,\"9007199254740995\",-2,"
                 "1.5e3],\"n\":{\"deep\":[[12]]} }\n");
    {
        const cJSON *uids = cJSON_GetObjectItemCaseSensitive(j, "uids");
        const cJSON *deep =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "n"), "deep");

        assert_string_equal(hr_parse_json_literal(cJSON_GetArrayItem(uids, 0)), "9007199254740993");
        assert_int_equal(hr_parse_json_uid(cJSON_GetArrayItem(uids, 0), &v), 0);
        assert_int_equal(v, INT64_C(9007199254740993));
        assert_int_equal(hr_parse_json_uid(cJSON_GetArrayItem(uids, 1), &v), 0);
        assert_int_equal(v, INT64_C(9007199254740995));
        assert_int_equal(hr_parse_json_uid(cJSON_GetArrayItem(uids, 2), &v), -1);
        assert_string_equal(hr_parse_json_literal(cJSON_GetArrayItem(uids, 3)), "1.5e3");
        assert_int_equal(hr_parse_json_uid(cJSON_GetArrayItem(uids, 3), &v), -1);
        assert_string_equal(
            hr_parse_json_literal(cJSON_GetArrayItem(cJSON_GetArrayItem(deep, 0), 0)), "12");
        assert_null(hr_parse_json_literal(cJSON_GetObjectItemCaseSensitive(j, "s")));
    }
    /* Printed exactly, not through a double. */
    hr_parse_json_exact(j);
    printed = cJSON_PrintUnformatted(j);
    assert_non_null(strstr(printed, "[9007199254740993,\"9007199254740995\",-2,1.5e3]"));
    free(printed);
    cJSON_Delete(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time),     cmocka_unit_test(test_date),
        cmocka_unit_test(test_uid),      cmocka_unit_test(test_name),
        cmocka_unit_test(test_json),     cmocka_unit_test(test_time_of_day),
        cmocka_unit_test(test_loopback),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
