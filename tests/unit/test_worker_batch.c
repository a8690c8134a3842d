/* Unit tests of wk_batch: a batched webhook's answer read into one
 * verdict per recipient — mixed results, a short answer, garbled ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "wk_batch.h"

/* Reads BODY as the answer to N recipients into V (N entries); the return
 * of wk_batch_answer_read. */
static int read_all(const char *body, size_t n, wk_provider_result *v, char *error, size_t len)
{
    wk_batch_answer a;
    int rc = wk_batch_answer_read(&a, body, strlen(body), n);

    for (size_t i = 0; i < n; i++)
        wk_batch_answer_next(&a, &v[i]);
    snprintf(error, len, "%s", a.error);
    wk_batch_answer_free(&a);
    return rc;
}

static void test_mixed(void **state)
{
    wk_provider_result v[4];
    char error[96];

    (void)state;
    assert_int_equal(read_all("{\"results\":[{\"status\":\"ok\"},"
                              "{\"status\":\"error\",\"error\":\"no such user\",\"retry\":false},"
                              "{\"status\":\"error\",\"error\":\"busy\",\"retry\":true},"
                              "{\"status\":\"error\"}]}",
                              4, v, error, sizeof error),
                     0);
    assert_int_equal(v[0].verdict, WK_VERDICT_DELIVERED);
    assert_int_equal(v[1].verdict, WK_VERDICT_FAILED);
    assert_string_equal(v[1].reason, "batch: no such user");
    assert_int_equal(v[2].verdict, WK_VERDICT_RETRY);
    assert_string_equal(v[2].reason, "batch: busy");
    /* An error without "retry" is not retried; without "error" it says so. */
    assert_int_equal(v[3].verdict, WK_VERDICT_FAILED);
    assert_string_equal(v[3].reason, "batch: error");
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(v[i].retry_after_s, -1);
}

static void test_short(void **state)
{
    wk_provider_result v[3];
    char error[96];

    (void)state;
    assert_int_equal(read_all("{\"results\":[{\"status\":\"ok\"}]}", 3, v, error, sizeof error), 0);
    assert_int_equal(v[0].verdict, WK_VERDICT_DELIVERED);
    /* The recipients the answer does not cover are retried, never sent. */
    assert_int_equal(v[1].verdict, WK_VERDICT_RETRY);
    assert_string_equal(v[1].reason, "batch answer: no result");
    assert_int_equal(v[2].verdict, WK_VERDICT_RETRY);
}

static void test_garbled(void **state)
{
    static const struct {
        const char *body, *error;
    } cases[] = {
        {"", "not JSON"},
        {"{\"results\":[{\"status\":\"ok\"}", "not JSON"},
        {"[{\"status\":\"ok\"},{\"status\":\"ok\"}]", "no \"results\" array"},
        {"{\"results\":{\"status\":\"ok\"}}", "no \"results\" array"},
        {"{\"results\":[{\"status\":\"ok\"},{\"status\":\"ok\"},{\"status\":\"ok\"}]}",
         "more results than the 2 recipients"},
        {"{\"results\":[{\"status\":\"ok\"},{\"status\":\"sent\"}]}",
         "result 1 is not {\"status\": \"ok\" | \"error\"}"},
        {"{\"results\":[\"ok\",\"ok\"]}", "result 0 is not {\"status\": \"ok\" | \"error\"}"},
    };

    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        wk_provider_result v[2];
        char error[96];

        assert_int_equal(read_all(cases[c].body, 2, v, error, sizeof error), -1);
        assert_string_equal(error, cases[c].error);
        /* A garbled answer says nothing of anyone: every recipient is
         * retried, the first ok included. */
        for (size_t i = 0; i < 2; i++) {
            char want[128];

            snprintf(want, sizeof want, "batch answer: %s", cases[c].error);
            assert_int_equal(v[i].verdict, WK_VERDICT_RETRY);
            assert_string_equal(v[i].reason, want);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_short),
        cmocka_unit_test(test_garbled),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
