/* Unit tests of hr_chunkmsg: encoding, the key, and strict decoding of
 * every kind of bad message the worker must count and skip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hr_chunkmsg.h"

static void test_round_trip(void **state)
{
    (void)state;
    hr_chunkmsg in, out;
    char buf[HR_CHUNKMSG_MAX_BYTES], errstr[256];
    int n;

    /* memset: the struct has padding after sharded, which memory_equal reads. */
    memset(&in, 0, sizeof in);
    in.task = 42, in.seq = 17, in.count = 5000, in.due_ms = 1767225600000;
    in.published_ms = INT64_MAX;
    n = hr_chunkmsg_encode(&in, buf, sizeof buf);
    memset(&out, 0, sizeof out);

    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(buf));
    assert_int_equal(hr_chunkmsg_decode(buf, (size_t)n, &out, errstr, sizeof errstr), 0);
    assert_memory_equal(&in, &out, sizeof in);
    assert_string_equal(buf, "{\"v\":1,\"task\":42,\"seq\":17,\"count\":5000,"
                             "\"due_ms\":1767225600000,\"published_ms\":9223372036854775807}");
}

/* A sharded task's chunk carries its shard (0 included); one of a task of
 * one set carries none, and decodes as not sharded. */
static void test_shard(void **state)
{
    hr_chunkmsg in = {.task = 42, .seq = 17, .count = 5000, .due_ms = 1, .published_ms = 2};
    hr_chunkmsg out;
    char buf[HR_CHUNKMSG_MAX_BYTES], errstr[256];
    int n;

    (void)state;
    in.sharded = true;
    in.shard = 0;
    n = hr_chunkmsg_encode(&in, buf, sizeof buf);
    assert_string_equal(buf, "{\"v\":1,\"task\":42,\"seq\":17,\"count\":5000,"
                             "\"due_ms\":1,\"published_ms\":2,\"shard\":0}");
    assert_int_equal(n, (int)strlen(buf));
    assert_int_equal(hr_chunkmsg_decode(buf, (size_t)n, &out, errstr, sizeof errstr), 0);
    assert_true(out.sharded);
    assert_int_equal(out.shard, 0);
    in.shard = 255;
    n = hr_chunkmsg_encode(&in, buf, sizeof buf);
    assert_int_equal(hr_chunkmsg_decode(buf, (size_t)n, &out, errstr, sizeof errstr), 0);
    assert_int_equal(out.shard, 255);
    assert_int_equal(out.seq, 17);
    in.sharded = false;
    n = hr_chunkmsg_encode(&in, buf, sizeof buf);
    assert_null(strstr(buf, "shard"));
    assert_int_equal(hr_chunkmsg_decode(buf, (size_t)n, &out, errstr, sizeof errstr), 0);
    assert_false(out.sharded);
    assert_int_equal(out.shard, 0);
    /* The shortest buffer that holds the sharded message, and one less. */
    in.sharded = true;
    in.shard = 7;
    n = hr_chunkmsg_encode(&in, buf, sizeof buf);
    assert_int_equal(hr_chunkmsg_encode(&in, buf, (size_t)n + 1), n);
    assert_int_equal(hr_chunkmsg_encode(&in, buf, (size_t)n), -1);
}

static void test_encode_short_buffer(void **state)
{
    (void)state;
    const hr_chunkmsg in = {.task = 1, .seq = 1};
    char buf[16];

    assert_int_equal(hr_chunkmsg_encode(&in, buf, sizeof buf), -1);
    assert_int_equal(hr_chunkmsg_key(&in, false, buf, 3), -1);
}

static void test_key(void **state)
{
    (void)state;
    const hr_chunkmsg in = {.task = 42, .seq = 17};
    char buf[64];

    assert_int_equal(hr_chunkmsg_key(&in, false, buf, sizeof buf), 5);
    assert_string_equal(buf, "42:17");
}

/* A redelivery's key carries its publish time, so two copies of one chunk
 * hash apart; one that does not fit is refused like any other key. */
static void test_redelivery_key(void **state)
{
    (void)state;
    const hr_chunkmsg in = {.task = 42, .seq = 17, .published_ms = 1764800000123};
    char buf[64];

    assert_int_equal(hr_chunkmsg_key(&in, true, buf, sizeof buf), 19);
    assert_string_equal(buf, "42:17:1764800000123");
    assert_int_equal(hr_chunkmsg_key(&in, true, buf, 19), -1);
}

static void test_whitespace_and_order(void **state)
{
    (void)state;
    const char *text = " {\n \"published_ms\" : 0, \"due_ms\":0,\"count\":0,\"seq\":1,"
                       "\"task\":1,\"v\":1 }\n";
    hr_chunkmsg out;
    char errstr[256];

    assert_int_equal(hr_chunkmsg_decode(text, strlen(text), &out, errstr, sizeof errstr), 0);
    assert_int_equal(out.task, 1);
    assert_int_equal(out.count, 0);
}

/* Not NUL-terminated input: only LEN bytes count. */
static void test_length_bounds(void **state)
{
    (void)state;
    const char *text =
        "{\"v\":1,\"task\":1,\"seq\":2,\"count\":3,\"due_ms\":4,\"published_ms\":5}xyz";
    hr_chunkmsg out;
    char errstr[256];

    assert_int_equal(hr_chunkmsg_decode(text, strlen(text) - 3, &out, errstr, sizeof errstr), 0);
    assert_int_equal(out.published_ms, 5);
    assert_int_equal(hr_chunkmsg_decode(text, strlen(text), &out, errstr, sizeof errstr), -1);
}

#define GOOD_TAIL "\"due_ms\":1,\"published_ms\":2}"

static const struct bad_case {
    const char *text;
    const char *reason; /* a substring of the error */
} bad_cases[] = {
    {"garbage", "expected a JSON object"},
    {"", "expected a JSON object"},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"cou", "bad field name"},
    {"{\"v\":2,\"task\":1,\"seq\":1,\"count\":1," GOOD_TAIL, "unknown version 2"},
    {"{\"v\":\"1\",\"task\":1,\"seq\":1,\"count\":1," GOOD_TAIL, "field v: not an integer"},
    {"{\"v\":1,\"task\":1,\"count\":1," GOOD_TAIL, "missing field \"seq\""},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"count\":1,\"x\":1," GOOD_TAIL, "unknown field \"x\""},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"count\":-1," GOOD_TAIL, "field count: -1 outside"},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"count\":100001," GOOD_TAIL, "field count: 100001 outside"},
    {"{\"v\":1,\"task\":0,\"seq\":1,\"count\":1," GOOD_TAIL, "field task: 0 outside"},
    {"{\"v\":1,\"task\":1,\"seq\":1.5,\"count\":1," GOOD_TAIL, "field seq: not an integer"},
    {"{\"v\":1,\"task\":1,\"seq\":1e3,\"count\":1," GOOD_TAIL, "field seq: not an integer"},
    {"{\"v\":1,\"task\":99999999999999999999,\"seq\":1,\"count\":1," GOOD_TAIL,
     "field task: number out of range"},
    {"{\"v\":1,\"task\":9223372036854775808,\"seq\":1,\"count\":1," GOOD_TAIL,
     "field task: number out of range"},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"count\":1," GOOD_TAIL "x", "trailing bytes"},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"count\":1," GOOD_TAIL "{}", "trailing bytes"},
    {"{\"v\":1,\"v\":1,\"task\":1,\"seq\":1,\"count\":1," GOOD_TAIL, "duplicate field \"v\""},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"count\":1,\"due_ms\":-5,\"published_ms\":2}",
     "field due_ms: -5 outside"},
    {"{\"v\":1,\"task\":01,\"seq\":1,\"count\":1," GOOD_TAIL, "field task: not an integer"},
    {"{\"v\":1,\"task\":null,\"seq\":1,\"count\":1," GOOD_TAIL, "field task: not an integer"},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"count\":1,}", "expected a field name"},
    {"[1,2,3]", "expected a JSON object"},
    {"{\"v\":1 \"task\":1}", "expected ',' or '}'"},
    {"{\"v\\u0000\":1}", "bad field name"},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"count\":1,\"shard\":-1," GOOD_TAIL,
     "field shard: -1 outside"},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"count\":1,\"shard\":256," GOOD_TAIL,
     "field shard: 256 outside"},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"count\":1,\"shard\":\"1\"," GOOD_TAIL,
     "field shard: not an integer"},
    {"{\"v\":1,\"task\":1,\"seq\":1,\"shard\":1," GOOD_TAIL, "missing field \"count\""},
};

static void test_bad_messages(void **state)
{
    (void)state;
    hr_chunkmsg out;
    char errstr[256];

    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const struct bad_case *bc = &bad_cases[i];
        errstr[0] = '\0';
        int rc = hr_chunkmsg_decode(bc->text, strlen(bc->text), &out, errstr, sizeof errstr);
        if (rc != -1 || strstr(errstr, bc->reason) == NULL)
            fail_msg("case %zu <%s>: rc=%d error <%s>, want <%s>", i, bc->text, rc, errstr,
                     bc->reason);
    }
}

static void test_oversized(void **state)
{
    (void)state;
    char big[5 * 1024];
    hr_chunkmsg out;
    char errstr[256];
    int n = snprintf(big, sizeof big,
                     "{\"v\":1,\"task\":1,\"seq\":1,\"count\":1,\"due_ms\":1,"
                     "\"published_ms\":2}");

    /* A valid message padded with whitespace to 5 KiB is still too big. */
    memset(big + n, ' ', sizeof big - (size_t)n);
    assert_int_equal(hr_chunkmsg_decode(big, sizeof big, &out, errstr, sizeof errstr), -1);
    assert_non_null(strstr(errstr, "exceeds 4096"));
    assert_int_equal(hr_chunkmsg_decode(big, HR_CHUNKMSG_MAX_BYTES, &out, errstr, sizeof errstr),
                     0);
}

/* Bytes that are not text at all, including NULs inside LEN. */
static void test_binary(void **state)
{
    (void)state;
    const unsigned char bin[] = {0x00, 0xff, 0x7b, 0x22, 0x00, 0x22, 0x3a, 0x31, 0x7d};
    hr_chunkmsg out;
    char errstr[256];

    assert_int_equal(hr_chunkmsg_decode(bin, sizeof bin, &out, errstr, sizeof errstr), -1);
    assert_int_equal(hr_chunkmsg_decode(bin + 2, sizeof bin - 2, &out, errstr, sizeof errstr), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),          cmocka_unit_test(test_shard),
        cmocka_unit_test(test_encode_short_buffer), cmocka_unit_test(test_key),
        cmocka_unit_test(test_redelivery_key),      cmocka_unit_test(test_whitespace_and_order),
        cmocka_unit_test(test_length_bounds),       cmocka_unit_test(test_bad_messages),
        cmocka_unit_test(test_oversized),           cmocka_unit_test(test_binary),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
