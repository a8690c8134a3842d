/* test_keys: every hr_keys builder against the key table of DESIGN.md
 * ("Redis"), with the default prefix "herald:" and task 42, plus the keys
 * docs/architecture.md adds (prep, synced, cancel_held, redriven), another
 * prefix, and buffers too small for the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hr_keys.h"

#define P "herald:"

static void test_task_keys(void **state)
{
    static const struct {
        hr_key_kind kind;
        const char *want;
    } table[] = {
        {HR_KEY_SUBS, "herald:{t42}:subs"},       {HR_KEY_SEQ, "herald:{t42}:seq"},
        {HR_KEY_PENDING, "herald:{t42}:pending"}, {HR_KEY_STATS, "herald:{t42}:stats"},
        {HR_KEY_PULLED, "herald:{t42}:pulled"},   {HR_KEY_FAILED, "herald:{t42}:failed"},
        {HR_KEY_CTL, "herald:{t42}:ctl"},         {HR_KEY_SYNCED, "herald:{t42}:synced"},
        {HR_KEY_PREP, "herald:{t42}:prep"},       {HR_KEY_WAIT, "herald:{t42}:wait"},
        {HR_KEY_WAVES, "herald:{t42}:waves"},     {HR_KEY_SERIES, "herald:{t42}:series"},
    };
    char buf[HR_KEY_MAX];

    (void)state;
    assert_int_equal(sizeof table / sizeof *table, HR_KEY__COUNT);
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        assert_string_equal(hr_key_task(P, buf, sizeof buf, 42, table[i].kind), table[i].want);
    assert_null(hr_key_task(P, buf, sizeof buf, 42, HR_KEY__COUNT));
    assert_string_equal(hr_key_task_base(P, buf, sizeof buf, 42), "herald:{t42}:");
    assert_string_equal(hr_key_chunk(P, buf, sizeof buf, 42, 17), "herald:{t42}:chunk:17");
    assert_string_equal(hr_key_lease(P, buf, sizeof buf, 42, 17), "herald:{t42}:lease:17");
    assert_string_equal(hr_key_redrive(P, buf, sizeof buf, 42, 17), "herald:{t42}:redrive:17");
    assert_string_equal(hr_key_chunks_match(P, buf, sizeof buf, 42), "herald:{t42}:chunk:*");
    assert_string_equal(hr_key_leases_match(P, buf, sizeof buf, 42), "herald:{t42}:lease:*");
    assert_string_equal(hr_key_task(P, buf, sizeof buf, INT64_MAX, HR_KEY_SUBS),
                        "herald:{t9223372036854775807}:subs");
}

/* A sharded task's shard k >= 1 has its own tag; shard 0 (and below) is
 * the task's; the task-level kinds stay the task's whatever the shard. */
static void test_shard_keys(void **state)
{
    char buf[HR_KEY_MAX];

    (void)state;
    assert_string_equal(hr_key_shard(P, buf, sizeof buf, 42, 3, HR_KEY_SUBS),
                        "herald:{t42:s3}:subs");
    assert_string_equal(hr_key_shard(P, buf, sizeof buf, 42, 3, HR_KEY_STATS),
                        "herald:{t42:s3}:stats");
    assert_string_equal(hr_key_shard(P, buf, sizeof buf, 42, 0, HR_KEY_SUBS), "herald:{t42}:subs");
    assert_string_equal(hr_key_shard(P, buf, sizeof buf, 42, -1, HR_KEY_PENDING),
                        "herald:{t42}:pending");
    assert_string_equal(hr_key_shard(P, buf, sizeof buf, 42, 3, HR_KEY_CTL), "herald:{t42}:ctl");
    assert_string_equal(hr_key_shard(P, buf, sizeof buf, 42, 3, HR_KEY_PREP), "herald:{t42}:prep");
    assert_string_equal(hr_key_shard(P, buf, sizeof buf, 42, 3, HR_KEY_SYNCED),
                        "herald:{t42}:synced");
    assert_string_equal(hr_key_shard(P, buf, sizeof buf, 42, 3, HR_KEY_SERIES),
                        "herald:{t42}:series");
    assert_string_equal(hr_key_shard_chunk(P, buf, sizeof buf, 42, 3, 17),
                        "herald:{t42:s3}:chunk:17");
    assert_string_equal(hr_key_shard_lease(P, buf, sizeof buf, 42, 3, 17),
                        "herald:{t42:s3}:lease:17");
    assert_string_equal(hr_key_shard_redrive(P, buf, sizeof buf, 42, 255, 17),
                        "herald:{t42:s255}:redrive:17");
    assert_string_equal(hr_key_shard_chunk(P, buf, sizeof buf, 42, 0, 17), "herald:{t42}:chunk:17");
    assert_string_equal(hr_key_shard_chunks_match("a*b:", buf, sizeof buf, 42, 2),
                        "a\\*b:{t42:s2}:chunk:*");
    assert_string_equal(hr_key_shard_leases_match(P, buf, sizeof buf, 42, 0),
                        "herald:{t42}:lease:*");
    assert_null(hr_key_shard(P, buf, 20, 42, 3, HR_KEY_SUBS));
}

static void test_global_keys(void **state)
{
    char buf[HR_KEY_MAX];

    (void)state;
    assert_string_equal(hr_key_timer(P, buf, sizeof buf), "herald:timer");
    assert_string_equal(hr_key_cancel_held(P, buf, sizeof buf), "herald:cancel_held");
    assert_string_equal(hr_key_redriven(P, buf, sizeof buf), "herald:redriven");
    assert_string_equal(hr_key_job(P, buf, sizeof buf, 42), "herald:job:42");
    assert_string_equal(hr_key_job_seq(P, buf, sizeof buf), "herald:job_seq");
    assert_string_equal(hr_key_user(P, buf, sizeof buf, "7"), "herald:user:7");
    assert_string_equal(hr_key_addr(P, buf, sizeof buf, "7"), "herald:addr:7");
    /* the per-uid keys are joined by hand: exactly full fits, one byte
     * short does not ("herald:user:7" is 13 bytes and its NUL) */
    assert_string_equal(hr_key_user(P, buf, 14, "7"), "herald:user:7");
    assert_null(hr_key_user(P, buf, 13, "7"));
    assert_null(hr_key_addr(P, buf, 10, "7"));
    assert_string_equal(hr_key_slowdown(P, buf, sizeof buf, "fcm.eu"), "herald:slow:fcm.eu");
    assert_string_equal(hr_key_addr_synced(P, buf, sizeof buf), "herald:addr_synced");
    assert_string_equal(hr_key_user_synced(P, buf, sizeof buf), "herald:user_synced");
    assert_string_equal(hr_key_user_lock(P, buf, sizeof buf), "herald:user_lock");
    assert_string_equal(hr_key_user_book(P, buf, sizeof buf), "herald:user_book");
    assert_string_equal(hr_key_addr_lock(P, buf, sizeof buf), "herald:addr_lock");
    assert_string_equal(hr_key_ratelimit(P, buf, sizeof buf, "task42"), "herald:rl:task42");
    assert_string_equal(hr_key_pace_rl(P, buf, sizeof buf, 42, "push"), "herald:{t42}:rl:push");
    assert_string_equal(hr_key_share(P, buf, sizeof buf, "fcm.eu", -1),
                        "herald:share:{c:fcm.eu}:tasks");
    assert_string_equal(hr_key_share(P, buf, sizeof buf, "fcm.eu", 1), "herald:share:{c:fcm.eu}:1");
    assert_string_equal(hr_key_throttle(P, buf, sizeof buf, "games", "7", NULL),
                        "herald:thr:games:7");
    assert_string_equal(hr_key_throttle(P, buf, sizeof buf, "games", "7", "chess"),
                        "herald:thr:games:7:chess");
}

static void test_prefix(void **state)
{
    char buf[HR_KEY_MAX];

    (void)state;
    assert_string_equal(hr_key_task("app1:", buf, sizeof buf, 3, HR_KEY_STATS), "app1:{t3}:stats");
    assert_string_equal(hr_key_timer("app1:", buf, sizeof buf), "app1:timer");
    /* A glob character in the prefix matches only itself. */
    assert_string_equal(hr_key_leases_match("a*[b]:", buf, sizeof buf, 3),
                        "a\\*\\[b\\]:{t3}:lease:*");
}

/* A key that does not fit is refused, never cut (a cut key is another key). */
static void test_too_small(void **state)
{
    char buf[17];

    (void)state;
    assert_null(hr_key_task(P, buf, sizeof buf, 42, HR_KEY_SUBS)); /* 17 chars + NUL */
    assert_string_equal(hr_key_task(P, buf, sizeof buf, 42, HR_KEY_SEQ), "herald:{t42}:seq");
    assert_null(hr_key_throttle(P, buf, sizeof buf, "games", "7", "chess"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_keys),   cmocka_unit_test(test_shard_keys),
        cmocka_unit_test(test_global_keys), cmocka_unit_test(test_prefix),
        cmocka_unit_test(test_too_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
