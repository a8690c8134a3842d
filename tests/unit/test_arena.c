/* test_arena: replies built in an hr_arena by a hiredis reader given its
 * functions — every reply type, nested arrays attached to their parents,
 * a string longer than a block, a protocol error mid-array — read the same
 * as hiredis's own, and all of them freed by hr_arena_free (ASan's leak
 * check says so); an adopted reply is freed with the arena. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hr_arena.h"

/* A reader building in ARENA. */
static redisReader *reader_new(hr_arena *arena)
{
    redisReader *reader = redisReaderCreateWithFunctions(hr_arena_functions());

    assert_non_null(reader);
    reader->privdata = arena;
    return reader;
}

/* The next reply of READER after feeding it BUF (NULL: none complete). */
static redisReply *reader_next(redisReader *reader, const char *buf, size_t len)
{
    void *reply = NULL;

    assert_int_equal(redisReaderFeed(reader, buf, len), REDIS_OK);
    assert_int_equal(redisReaderGetReply(reader, &reply), REDIS_OK);
    return reply;
}

static void test_types(void **state)
{
    /* an HMGET of two absent fields and a present one; then one of every type */
    static const char hmget[] = "*3\r\n$-1\r\n$2\r\nUT\r\n$-1\r\n";
    static const char mixed[] = "*5\r\n:42\r\n+OK\r\n-ERR no\r\n*2\r\n$1\r\na\r\n*0\r\n$0\r\n\r\n";
    hr_arena *arena = hr_arena_new();
    redisReader *reader;
    redisReply *reply, *nested;

    (void)state;
    assert_non_null(arena);
    reader = reader_new(arena);
    reply = reader_next(reader, hmget, sizeof hmget - 1);
    assert_non_null(reply);
    assert_int_equal(reply->type, REDIS_REPLY_ARRAY);
    assert_int_equal(reply->elements, 3);
    assert_int_equal(reply->element[0]->type, REDIS_REPLY_NIL);
    assert_int_equal(reply->element[1]->type, REDIS_REPLY_STRING);
    assert_string_equal(reply->element[1]->str, "UT");
    assert_int_equal(reply->element[1]->len, 2);
    assert_int_equal(reply->element[2]->type, REDIS_REPLY_NIL);

    reply = reader_next(reader, mixed, sizeof mixed - 1);
    assert_non_null(reply);
    assert_int_equal(reply->elements, 5);
    assert_int_equal(reply->element[0]->type, REDIS_REPLY_INTEGER);
    assert_int_equal(reply->element[0]->integer, 42);
    assert_int_equal(reply->element[1]->type, REDIS_REPLY_STATUS);
    assert_string_equal(reply->element[1]->str, "OK");
    assert_int_equal(reply->element[2]->type, REDIS_REPLY_ERROR);
    assert_string_equal(reply->element[2]->str, "ERR no");
    nested = reply->element[3];
    assert_int_equal(nested->type, REDIS_REPLY_ARRAY);
    assert_int_equal(nested->elements, 2);
    assert_string_equal(nested->element[0]->str, "a");
    assert_int_equal(nested->element[1]->type, REDIS_REPLY_ARRAY);
    assert_int_equal(nested->element[1]->elements, 0);
    assert_null(nested->element[1]->element);
    assert_int_equal(reply->element[4]->type, REDIS_REPLY_STRING);
    assert_int_equal(reply->element[4]->len, 0);
    assert_string_equal(reply->element[4]->str, "");
    redisReaderFree(reader);
    hr_arena_free(arena);
}

/* Many replies and a string of 200,000 bytes: blocks are added (one of its
 * own for the string), and the earlier replies stay where they were. */
static void test_blocks(void **state)
{
    enum { BIG = 200000, N = 5000 };
    hr_arena *arena = hr_arena_new();
    redisReader *reader = reader_new(arena);
    static redisReply *first[N];
    static char buf[BIG + 64];
    redisReply *big;
    char head[32];
    int hlen;

    (void)state;
    assert_non_null(arena);
    for (int i = 0; i < N; i++) {
        char one[64];
        int len = snprintf(one, sizeof one, "*2\r\n$5\r\nuser%d\r\n:%d\r\n", i % 10, i);

        first[i] = reader_next(reader, one, (size_t)len);
        assert_non_null(first[i]);
    }
    hlen = snprintf(head, sizeof head, "$%d\r\n", BIG);
    memcpy(buf, head, (size_t)hlen);
    memset(buf + hlen, 'x', BIG);
    memcpy(buf + hlen + BIG, "\r\n", 2);
    big = reader_next(reader, buf, (size_t)hlen + BIG + 2);
    assert_non_null(big);
    assert_int_equal(big->len, BIG);
    assert_int_equal(strlen(big->str), BIG);
    for (int i = 0; i < N; i++) {
        char name[8];

        snprintf(name, sizeof name, "user%d", i % 10);
        assert_string_equal(first[i]->element[0]->str, name);
        assert_int_equal(first[i]->element[1]->integer, i);
    }
    redisReaderFree(reader);
    hr_arena_free(arena);
}

/* A protocol error in the middle of an array: the reader drops its half
 * tree through freeObject, which leaves it to the arena. */
static void test_protocol_error(void **state)
{
    static const char bad[] = "*3\r\n$1\r\na\r\n:7\r\n!bogus\r\n";
    hr_arena *arena = hr_arena_new();
    redisReader *reader = reader_new(arena);
    void *reply = NULL;

    (void)state;
    assert_int_equal(redisReaderFeed(reader, bad, sizeof bad - 1), REDIS_OK);
    assert_int_equal(redisReaderGetReply(reader, &reply), REDIS_ERR);
    assert_null(reply);
    redisReaderFree(reader);
    hr_arena_free(arena);
}

/* A reply from hiredis's own functions, adopted: freed with the arena. */
static void test_adopt(void **state)
{
    static const char arr[] = "*2\r\n$1\r\na\r\n$-1\r\n";
    hr_arena *arena = hr_arena_new();
    redisReader *reader = redisReaderCreate();
    void *reply = NULL;

    (void)state;
    assert_int_equal(redisReaderFeed(reader, arr, sizeof arr - 1), REDIS_OK);
    assert_int_equal(redisReaderGetReply(reader, &reply), REDIS_OK);
    assert_non_null(reply);
    assert_int_equal(hr_arena_adopt(arena, reply), 0);
    assert_int_equal(hr_arena_adopt(arena, NULL), 0);
    redisReaderFree(reader);
    hr_arena_free(arena);
    hr_arena_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_protocol_error),
        cmocka_unit_test(test_adopt),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
