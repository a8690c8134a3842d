/* Unit tests of wk_inbox, and of its contract with wk_offsets: a message
 * that waits in the inbox is not begun, so the offset stored for its
 * partition never passes it, whatever finishes meanwhile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wk_inbox.h"
#include "wk_offsets.h"

static void push_str(wk_inbox *q, int32_t partition, int64_t offset, const char *s)
{
    assert_int_equal(wk_inbox_push(q, partition, offset, s, strlen(s)), 0);
}

static void test_fifo_copies_payload(void **state)
{
    wk_inbox *q = NULL;
    wk_inbox_msg m;
    char buf[8] = "first";

    (void)state;
    assert_int_equal(wk_inbox_new(8, 1024, &q), 0);
    assert_false(wk_inbox_peek(q, &m));
    assert_int_equal(wk_inbox_push(q, 2, 40, buf, 5), 0);
    memset(buf, 0, sizeof buf); /* the caller's buffer is librdkafka's: reused after push */
    push_str(q, 1, 7, "second");
    assert_int_equal(wk_inbox_count(q), 2);
    assert_int_equal(wk_inbox_bytes(q), 11);
    assert_true(wk_inbox_peek(q, &m));
    assert_int_equal(m.partition, 2);
    assert_int_equal(m.offset, 40);
    assert_int_equal(m.len, 5);
    assert_memory_equal(m.payload, "first", 5);
    wk_inbox_pop(q);
    assert_true(wk_inbox_peek(q, &m));
    assert_int_equal(m.offset, 7);
    assert_memory_equal(m.payload, "second", 6);
    wk_inbox_pop(q);
    assert_false(wk_inbox_peek(q, &m));
    assert_int_equal(wk_inbox_bytes(q), 0);
    wk_inbox_pop(q); /* empty: nothing happens */
    assert_int_equal(wk_inbox_count(q), 0);
    wk_inbox_free(q);
}

static void test_full_and_low_by_count(void **state)
{
    wk_inbox *q = NULL;

    (void)state;
    assert_int_equal(wk_inbox_new(4, 1 << 20, &q), 0);
    assert_true(wk_inbox_low(q));
    for (int64_t off = 0; off < 3; off++)
        push_str(q, 0, off, "m");
    assert_false(wk_inbox_full(q));
    assert_false(wk_inbox_low(q));
    push_str(q, 0, 3, "m");
    assert_true(wk_inbox_full(q));
    /* Soft cap: a message that was on its way is still queued. */
    push_str(q, 0, 4, "m");
    assert_int_equal(wk_inbox_count(q), 5);
    wk_inbox_pop(q);
    wk_inbox_pop(q);
    assert_false(wk_inbox_low(q)); /* 3 of 4 */
    wk_inbox_pop(q);
    assert_true(wk_inbox_low(q)); /* 2 of 4: resume */
    assert_false(wk_inbox_full(q));
    wk_inbox_free(q);
}

static void test_full_by_bytes(void **state)
{
    wk_inbox *q = NULL;
    char big[600];

    (void)state;
    memset(big, 'b', sizeof big);
    assert_int_equal(wk_inbox_new(100, 1000, &q), 0);
    assert_int_equal(wk_inbox_push(q, 0, 0, big, sizeof big), 0);
    assert_false(wk_inbox_full(q));
    assert_false(wk_inbox_low(q)); /* 600 bytes > half of 1000 */
    assert_int_equal(wk_inbox_push(q, 0, 1, big, sizeof big), 0);
    assert_true(wk_inbox_full(q));
    wk_inbox_pop(q);
    wk_inbox_pop(q);
    assert_true(wk_inbox_low(q));
    wk_inbox_free(q);
}

static void test_drop_partition_keeps_order(void **state)
{
    wk_inbox *q = NULL;
    wk_inbox_msg m;

    (void)state;
    assert_int_equal(wk_inbox_new(16, 1024, &q), 0);
    push_str(q, 0, 10, "a");
    push_str(q, 1, 20, "bb");
    push_str(q, 0, 11, "c");
    push_str(q, 2, 30, "d");
    push_str(q, 1, 21, "ee");
    assert_int_equal(wk_inbox_drop(q, 1), 2);
    assert_int_equal(wk_inbox_drop(q, 5), 0);
    assert_int_equal(wk_inbox_count(q), 3);
    assert_int_equal(wk_inbox_bytes(q), 3);
    assert_true(wk_inbox_peek(q, &m));
    assert_int_equal(m.offset, 10);
    wk_inbox_pop(q);
    assert_true(wk_inbox_peek(q, &m));
    assert_int_equal(m.offset, 11);
    wk_inbox_pop(q);
    assert_true(wk_inbox_peek(q, &m));
    assert_int_equal(m.partition, 2);
    wk_inbox_free(q); /* frees what is still queued */
}

/* The worker begins (wk_offsets_begin) a message only when it leaves the
 * inbox.  Chunks of partition 3 at offsets 5 and 6 run and finish while
 * 7 and 8 wait in the inbox: the stored offset is 7, the first waiting
 * one, so a crash or a revoke now makes the next owner consume 7 and 8. */
/* wk_inbox_take_new hands each message out once, oldest first, keeps at
 * most MAX handed-out messages queued and hands none out while more than
 * MAX / 2 are, also after pops and drops. */
static void test_take_new_once(void **state)
{
    wk_inbox *q = NULL;
    wk_inbox_msg m[4];

    (void)state;
    assert_int_equal(wk_inbox_new(16, 1024, &q), 0);
    assert_int_equal(wk_inbox_take_new(q, m, 4), 0);
    for (int64_t off = 1; off <= 6; off++)
        push_str(q, off == 6 ? 1 : 0, off, off == 5 ? "e" : "x");
    assert_int_equal(wk_inbox_take_new(q, m, 4), 4);
    assert_int_equal(m[0].offset, 1);
    assert_int_equal(m[3].offset, 4);
    /* 3 of the 4 still queued: more than half, nothing. */
    wk_inbox_pop(q);
    assert_int_equal(wk_inbox_take_new(q, m, 4), 0);
    /* 2 left: up to 4 again, the next ones in order. */
    wk_inbox_pop(q);
    assert_int_equal(wk_inbox_take_new(q, m, 4), 2);
    assert_int_equal(m[0].offset, 5);
    assert_memory_equal(m[0].payload, "e", 1);
    assert_int_equal(m[1].offset, 6);
    assert_int_equal(wk_inbox_take_new(q, m, 4), 0);
    /* A drop takes handed-out ones along: new ones are handed out again. */
    assert_int_equal(wk_inbox_drop(q, 0), 3);
    push_str(q, 2, 7, "g");
    assert_int_equal(wk_inbox_take_new(q, m, 4), 1);
    assert_int_equal(m[0].offset, 7);
    wk_inbox_free(q);
}

static void test_stored_offset_never_passes_queued(void **state)
{
    wk_inbox *q = NULL;
    wk_offsets *o = NULL;
    wk_inbox_msg m;
    int64_t store = -1;

    (void)state;
    assert_int_equal(wk_inbox_new(16, 1024, &q), 0);
    assert_int_equal(wk_offsets_new(&o), 0);
    for (int64_t off = 5; off <= 8; off++)
        push_str(q, 3, off, "chunk");
    for (int i = 0; i < 2; i++) { /* two slots free */
        assert_true(wk_inbox_peek(q, &m));
        assert_int_equal(wk_offsets_begin(o, m.partition, m.offset), 0);
        wk_inbox_pop(q);
    }
    assert_int_equal(wk_offsets_finish(o, 3, 6, &store), 0);
    assert_int_equal(store, -1);
    assert_int_equal(wk_offsets_finish(o, 3, 5, &store), 1);
    assert_int_equal(store, 7);
    assert_true(wk_inbox_peek(q, &m));
    assert_int_equal(m.offset, store);
    /* The revoke: the queued ones are dropped, never begun, never stored. */
    assert_int_equal(wk_inbox_drop(q, 3), 2);
    assert_int_equal(wk_offsets_pending(o, 3), 0);
    wk_offsets_free(o);
    wk_inbox_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_copies_payload),
        cmocka_unit_test(test_full_and_low_by_count),
        cmocka_unit_test(test_full_by_bytes),
        cmocka_unit_test(test_drop_partition_keeps_order),
        cmocka_unit_test(test_take_new_once),
        cmocka_unit_test(test_stored_offset_never_passes_queued),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
