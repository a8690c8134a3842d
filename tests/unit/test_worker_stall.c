/* Unit tests of issue 34's worker side: which Redis errors a chunk waits
 * out (hr_redis_failover), the STALLED and HANDING_BACK transitions of the
 * chunk state machine (wk_lifecycle_may), and the ack buffer that keeps a
 * failed flush's recipients (wk_chunk_ack, wk_chunk_acked_apply). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hr_redis.h"
#include "wk_chunk_acks.h"
#include "wk_lifecycle.h"

static void test_failover_errors(void **state)
{
    static const char *const failover[] = {
        "redis 127.0.0.1:6379: Connection refused",
        "redis 127.0.0.1:6379: Server closed the connection",
        "redis 127.0.0.1:6379: Connection reset by peer",
        "redis 127.0.0.1:6379: Resource temporarily unavailable", /* a read timeout */
        "redis 127.0.0.1:6379 down (retrying in 478 ms)",
        "redis 127.0.0.1:6379: SCRIPT LOAD ack.lua: LOADING Redis is loading the dataset in memory",
        "LOADING Redis is loading the dataset in memory",
        "MOVED 3999 127.0.0.1:30381",
        "ASK 3999 127.0.0.1:30381",
        "CLUSTERDOWN The cluster is down",
        "READONLY You can't write against a read only replica.",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "redis cluster: no master known for slot 42",
        "redis cluster: no node answers",
        "not sent",
    };
    static const char *const others[] = {
        "ERR Error running script (call to f_1234): @user_script:3: bad argument",
        "script 3: unexpected reply",
        "out of memory",
        "WRONGTYPE Operation against a key holding the wrong kind of value",
        "NOSCRIPT No matching script",
        "ERR unknown TASK 12", /* "ASK " only counts at the start */
        "",
    };

    (void)state;
    for (size_t i = 0; i < sizeof failover / sizeof *failover; i++)
        assert_true(hr_redis_failover(failover[i]));
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        assert_false(hr_redis_failover(others[i]));
    assert_false(hr_redis_failover(NULL));
}

static void test_stall_transitions(void **state)
{
    (void)state;
    /* Every job that can fail stalls its chunk ... */
    assert_true(wk_lifecycle_may(WK_CHUNK_OPENING, WK_CHUNK_STALLED));
    assert_true(wk_lifecycle_may(WK_CHUNK_LEASE_WAIT, WK_CHUNK_STALLED));
    assert_true(wk_lifecycle_may(WK_CHUNK_PUSHING, WK_CHUNK_STALLED));
    for (int s = WK_CHUNK_HELD_PAUSE; s <= WK_CHUNK_HELD_REVOKE; s++)
        assert_true(wk_lifecycle_may((wk_chunk_state)s, WK_CHUNK_STALLED));
    for (int s = WK_CHUNK_CLOSING; s <= WK_CHUNK_YIELDING; s++)
        assert_true(wk_lifecycle_may((wk_chunk_state)s, WK_CHUNK_STALLED));
    /* ... and it goes back where it came from: the open (a pushing chunk
     * reads the rest again), its hold, or its ending ... */
    assert_true(wk_lifecycle_may(WK_CHUNK_STALLED, WK_CHUNK_OPENING));
    assert_false(wk_lifecycle_may(WK_CHUNK_STALLED, WK_CHUNK_PUSHING));
    for (int s = WK_CHUNK_HELD_PAUSE; s <= WK_CHUNK_HELD_REVOKE; s++)
        assert_true(wk_lifecycle_may(WK_CHUNK_STALLED, (wk_chunk_state)s));
    for (int s = WK_CHUNK_CLOSING; s <= WK_CHUNK_YIELDING; s++)
        assert_true(wk_lifecycle_may(WK_CHUNK_STALLED, (wk_chunk_state)s));
    /* ... or is handed back; never dropped from the stall itself. */
    assert_true(wk_lifecycle_may(WK_CHUNK_STALLED, WK_CHUNK_HANDING_BACK));
    assert_false(wk_lifecycle_may(WK_CHUNK_STALLED, WK_CHUNK_GONE));
    assert_false(wk_lifecycle_may(WK_CHUNK_STALLED, WK_CHUNK_STALLED));
    /* The hand-back ends in GONE only; an unopened chunk goes straight to it. */
    for (int s = 0; s < WK_CHUNK__STATES; s++)
        assert_int_equal(wk_lifecycle_may(WK_CHUNK_HANDING_BACK, (wk_chunk_state)s),
                         s == WK_CHUNK_GONE);
    assert_true(wk_lifecycle_may(WK_CHUNK_NEW, WK_CHUNK_HANDING_BACK));
    assert_false(wk_lifecycle_may(WK_CHUNK_PUSHING, WK_CHUNK_HANDING_BACK));
    /* Every state has a name (the log's). */
    for (int s = 0; s < WK_CHUNK__STATES; s++)
        assert_non_null(wk_lifecycle_state_name((wk_chunk_state)s));
    assert_string_equal(wk_lifecycle_state_name(WK_CHUNK_STALLED), "stalled");
    assert_string_equal(wk_lifecycle_state_name(WK_CHUNK_HANDING_BACK), "handing_back");
}

static void test_stall_predicates(void **state)
{
    wk_chunk c = {.state = WK_CHUNK_STALLED};

    (void)state;
    /* A stall keeps the lease (renewed) and is no ending ... */
    assert_true(wk_chunk_is_leased(&c));
    assert_false(wk_chunk_is_ending(&c));
    /* ... a hand-back is an ending, with no lease to renew. */
    c.state = WK_CHUNK_HANDING_BACK;
    assert_true(wk_chunk_is_ending(&c));
    assert_false(wk_chunk_is_leased(&c));
}

static wk_chunk *new_chunk(int ack_batch)
{
    static const wk_chunk_hooks hooks = {0};
    hr_chunkmsg msg = {.task = 7, .seq = 3, .count = 10};

    return wk_chunk_new("t:", &msg, 0, 0, NULL, ack_batch, &hooks, NULL);
}

/* A flush that failed gives back what it could not write, past the ack
 * batch's size, and only the calls that failed. */
static void test_failed_flush_keeps_acks(void **state)
{
    static const char *const uids[] = {"1", "2", "3", "4", "5", "6", "7"};
    wk_chunk *c = new_chunk(2);
    wk_chunk_acks taken;
    wk_chunk_acked acked = {.rc = -1, .failed = {[WK_CHUNK_SENT] = true, [WK_CHUNK_DEAD] = true}};

    (void)state;
    assert_non_null(c);
    /* A flush takes the buffers (wk_chunk_flush) ... */
    assert_int_equal(wk_chunk_ack(c, WK_CHUNK_SENT, uids[0], NULL), 0);
    assert_int_equal(wk_chunk_ack(c, WK_CHUNK_SENT, uids[1], NULL), 1);
    assert_int_equal(wk_chunk_ack(c, WK_CHUNK_UNREGISTERED, uids[2], NULL), 1);
    assert_int_equal(wk_chunk_ack(c, WK_CHUNK_DEAD, uids[3], "400 bad request"), 1);
    c->acks.retried = 4;
    taken = c->acks;
    memset(&c->acks, 0, sizeof c->acks);
    /* ... the chunk buffers anew meanwhile ... */
    assert_int_equal(wk_chunk_ack(c, WK_CHUNK_SENT, uids[4], NULL), 0);
    /* ... and the flush's sent and dead-letter calls failed, its
     * unregistered one ran: those two come back, beside the new one. */
    acked.removed[WK_CHUNK_UNREGISTERED] = 1;
    wk_chunk_acked_apply(c, &taken, &acked);
    assert_true(c->ack_failed);
    assert_int_equal(c->unregistered, 1);
    assert_int_equal(c->acks.n[WK_CHUNK_SENT], 3);
    assert_string_equal(c->acks.uids[WK_CHUNK_SENT][0], "5");
    assert_string_equal(c->acks.uids[WK_CHUNK_SENT][1], "1");
    assert_string_equal(c->acks.uids[WK_CHUNK_SENT][2], "2");
    assert_true(c->acks.cap[WK_CHUNK_SENT] >= 3);
    assert_int_equal(c->acks.n[WK_CHUNK_UNREGISTERED], 0);
    assert_int_equal(c->acks.ndead, 1);
    assert_string_equal(c->acks.dead[0].uid, "4");
    assert_string_equal(c->acks.dead[0].reason, "400 bad request");
    assert_int_equal(c->acks.retried, 4);
    assert_null(taken.uids[WK_CHUNK_SENT]);
    assert_int_equal(taken.n[WK_CHUNK_SENT], 0);
    /* A flush that succeeded clears the flag and gives nothing back. */
    taken = c->acks;
    memset(&c->acks, 0, sizeof c->acks);
    wk_chunk_acked_apply(c, &taken,
                         &(wk_chunk_acked){.removed = {[WK_CHUNK_SENT] = 3, [WK_CHUNK_DEAD] = 1}});
    assert_false(c->ack_failed);
    assert_int_equal(c->sent, 3);
    assert_int_equal(c->failed, 1);
    assert_int_equal(wk_chunk_acks_held(&c->acks), 0);
    wk_chunk_free(c);
}

/* The buffer grows past the ack batch while a stall keeps it. */
static void test_buffer_grows(void **state)
{
    static const char *const uid = "42";
    wk_chunk *c = new_chunk(3);

    (void)state;
    assert_non_null(c);
    for (int i = 0; i < 50; i++)
        assert_int_equal(wk_chunk_ack(c, WK_CHUNK_DEAD, uid, "gone"), i + 1 >= 3);
    assert_int_equal(c->acks.ndead, 50);
    assert_true(c->acks.capdead >= 50);
    assert_string_equal(c->acks.dead[49].reason, "gone");
    wk_chunk_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failover_errors),  cmocka_unit_test(test_stall_transitions),
        cmocka_unit_test(test_stall_predicates), cmocka_unit_test(test_failed_flush_keeps_acks),
        cmocka_unit_test(test_buffer_grows),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
