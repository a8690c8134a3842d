/* test_user_book: the profile book's state in Redis (herald:user_book,
 * hr_keys.h) against the stack's MariaDB and Redis — the count of rewrites
 * that every write of a profile hash makes first, book_empty.lua recording
 * an empty book only at the count it was given, and the profile sync
 * (hr_mirror_sync) recording it when push_user is empty and not when a
 * profile exists, and a worker's open (wk_consent_read) leaving out its
 * per-recipient reads while the state says empty, reading them again, an
 * opt-out honoured, once a rewrite has counted itself.
 *
 * Redis keys live under the test's own prefix; its push_user rows use uids
 * of a range of its own (UID0 + pid), deleted at the end.  Other tests may
 * hold profiles meanwhile: the sync's empty case is checked only when
 * push_user held none of theirs before and after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hr_pipe.h"
#include "hr_user.h"
#include "itest.h"
#include "wk_chunk.h"
#include "wk_consent.h"
#include "wk_task.h"

static hr_config *cfg;
static hr_redis *rd;
static hr_mysql *db;
static int64_t base;
static char errstr[512];

static int setup(void **state)
{
    (void)state;
    base = 8100000000000000000LL + (int64_t)getpid() * 100000;
    return itest_stores_setup(&cfg, &rd, &db);
}

static int teardown(void **state)
{
    (void)state;
    itest_stores_teardown(cfg, rd, db, "push_user", base, base + 99999);
    db = NULL;
    return 0;
}

/* HMGET of the book's state, as the worker reads it. */
static redisReply *book(void)
{
    char key[HR_KEY_MAX];
    redisReply *reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "HMGET %s writes empty",
                                      hr_key_user_book(hr_redis_prefix(rd), key, sizeof key));

    if (reply == NULL)
        fail_msg("HMGET: %s", errstr);
    return reply;
}

/* The state's "writes" (0: none). */
static long long writes(void)
{
    redisReply *reply = book();
    long long n = reply->element[0]->type == REDIS_REPLY_STRING ? atoll(reply->element[0]->str) : 0;

    freeReplyObject(reply);
    return n;
}

static bool empty(void)
{
    redisReply *reply = book();
    bool e = hr_user_book_empty(reply);

    freeReplyObject(reply);
    return e;
}

/* Whether push_user holds no row at all. */
static bool table_empty(void)
{
    int64_t e = itest_sql_i64(db, "SELECT NOT EXISTS (SELECT 1 FROM push_user)", 0);

    assert_in_range(e, 0, 1);
    return e == 1;
}

/* A profile sync; another test's open transaction may hold the epoch for
 * a second (HR_MIRROR_BUSY), so a few tries. */
static void sync_ok(void)
{
    hr_mirror_result res;
    int rc = HR_MIRROR_BUSY;

    for (int i = 0; i < 10 && rc == HR_MIRROR_BUSY; i++)
        rc = hr_mirror_sync(&hr_user_mirror, db, rd, "test", 100, cfg, &res, errstr, sizeof errstr);
    if (rc != 0)
        fail_msg("sync: %d %s", rc, errstr);
}

/* book_empty.lua with the count COUNT: 1 recorded, 0 not. */
static long long record_empty(const char *count)
{
    char key[HR_KEY_MAX];
    const char *argv[2] = {hr_key_user_book(hr_redis_prefix(rd), key, sizeof key), count};
    redisReply *reply =
        hr_redis_eval(rd, HR_LUA_BOOK_EMPTY, 1, 2, argv, NULL, errstr, sizeof errstr);
    long long v;

    if (reply == NULL || reply->type != REDIS_REPLY_INTEGER)
        fail_msg("book_empty: %s", reply == NULL ? errstr : "not an integer");
    v = reply->integer;
    freeReplyObject(reply);
    return v;
}

/* Every rewrite counts itself before it writes; an empty book is recorded
 * only at the count there is. */
static void test_counts(void **state)
{
    int64_t uid = base + 1;

    (void)state;
    assert_int_equal(writes(), 0);
    assert_false(empty());
    /* nobody rewrote anything: empty at 0 */
    assert_int_equal(record_empty("0"), 1);
    assert_true(empty());
    /* a rewrite, even of a uid without a profile, makes the state stale */
    assert_int_equal(hr_user_rewrite(db, rd, &uid, 1, cfg, NULL, errstr, sizeof errstr), 0);
    assert_int_equal(writes(), 1);
    assert_false(empty());
    /* a sync that read the count before that rewrite records nothing */
    assert_int_equal(record_empty("0"), 0);
    assert_false(empty());
    assert_int_equal(record_empty("1"), 1);
    assert_true(empty());
}

/* The sync: a profile in MySQL keeps the state from saying empty, and a
 * profile written through herald (hr_user_rewrite) ends it. */
static void test_sync(void **state)
{
    int64_t uid = base + 2;
    bool before;

    (void)state;
    assert_int_equal(itest_sql_exec(db,
                                    "INSERT INTO push_user (uid, tz) VALUES (?, 'Europe/Paris')",
                                    (hr_mysql_param[]){HR_P_I64(uid)}, 1),
                     0);
    sync_ok();
    assert_false(empty());
    sync_ok();
    assert_false(empty());
    /* The sync that rewrites the deleted uid's hash began a rewrite after
     * it read the count: the next one, with nothing to rewrite, records. */
    assert_int_equal(itest_sql_exec(db, "DELETE FROM push_user WHERE uid = ?",
                                    (hr_mysql_param[]){HR_P_I64(uid)}, 1),
                     0);
    sync_ok();
    assert_false(empty());
    before = table_empty();
    sync_ok();
    if (before && table_empty()) {
        assert_true(empty());
    } else {
        assert_false(empty());
        fprintf(stderr, "test_user_book: other tests' profiles in push_user: the sync's "
                        "empty case not checked this run\n");
    }
    assert_int_equal(itest_sql_exec(db,
                                    "INSERT INTO push_user (uid, tz) VALUES (?, 'Europe/Paris')",
                                    (hr_mysql_param[]){HR_P_I64(uid)}, 1),
                     0);
    assert_int_equal(
        hr_mirror_rewrite_one(&hr_user_mirror, db, rd, uid, cfg, errstr, sizeof errstr), 0);
    assert_false(empty());
    sync_ok();
    assert_false(empty());
}

/* Runs the Redis command ARGV (ARGC words), its reply dropped. */
static void redis_ok(int argc, const char **argv)
{
    redisReply *reply = hr_redis_cmd(rd, errstr, sizeof errstr, argc, argv, NULL);

    if (reply == NULL || reply->type == REDIS_REPLY_ERROR)
        fail_msg("%s: %s", argv[0], reply != NULL ? reply->str : errstr);
    freeReplyObject(reply);
}

/* A part of a chunk's open, the members of C's set (sorted) from FROM on
 * (0: the open's first part, which reads the marks): whether it read the
 * profiles, and member OPTED's verdict into *VERDICT (-1: not read). */
static bool open_reads(const wk_chunk *c, size_t from, const char *opted, int *verdict)
{
    wk_consent cs = {0};
    const char *sort[] = {"SORT", c->k_set, "ALPHA"};
    redisReply *members = hr_redis_cmd(rd, errstr, sizeof errstr, 3, sort, NULL);
    bool read;

    if (members == NULL || members->type != REDIS_REPLY_ARRAY)
        fail_msg("SORT: %s", errstr);
    if (wk_consent_read(&cs, rd, c, members, from, members->elements, NULL, "", errstr,
                        sizeof errstr) != 0 ||
        wk_consent_decide(&cs, rd, c, members, 1800000000000LL, errstr, sizeof errstr) != 0)
        fail_msg("open: %s", errstr);
    read = cs.users != NULL;
    *verdict = -1;
    for (size_t i = from; i < members->elements; i++)
        if (strcmp(members->element[i]->str, opted) == 0)
            *verdict = cs.verdicts[i - from];
    wk_consent_free(&cs);
    freeReplyObject(members);
    return read;
}

/* The worker's side: no read while the state says empty (the member's
 * hash, there against the state's word, left unread), then a rewrite's
 * count and the reads again, its opt-out honoured. */
static void test_open(void **state)
{
    char synced[HR_KEY_MAX], bkey[HR_KEY_MAX], ukey[HR_KEY_MAX], a[24], b[24];
    hr_task *row = calloc(1, sizeof *row);
    hr_chunkmsg msg = {.task = 7700000002, .seq = 1, .count = 2};
    wk_task *wt = NULL;
    wk_chunk *c;
    int verdict;

    (void)state;
    snprintf(a, sizeof a, "%" PRId64, base + 11);
    snprintf(b, sizeof b, "%" PRId64, base + 12);
    assert_non_null(row);
    row->channel = strdup("webhook");
    row->category = strdup("reminder");
    row->id = msg.task;
    row->chunk_size = 5000;
    row->due_ms = 1;
    row->priority = HR_PRIORITY_HIGH;
    assert_int_equal(wk_task_build(cfg, row, NULL, &wt, errstr, sizeof errstr), 0);
    assert_false(wt->mandatory);
    c = wk_chunk_new(hr_redis_prefix(rd), &msg, 0, 0, wt, 100, NULL, NULL);
    assert_non_null(c);
    hr_key_user_synced(hr_redis_prefix(rd), synced, sizeof synced);
    hr_key_user_book(hr_redis_prefix(rd), bkey, sizeof bkey);
    hr_key_user(hr_redis_prefix(rd), ukey, sizeof ukey, a);
    redis_ok(3, (const char *[]){"SET", synced, "1"});
    redis_ok(3, (const char *[]){"DEL", bkey, ukey});
    redis_ok(4, (const char *[]){"SADD", c->k_set, a, b});
    /* no state: the profiles are read */
    assert_true(open_reads(c, 0, a, &verdict));
    assert_int_equal(verdict, WK_CONSENT_PUSH);
    /* empty at the count there is: nothing read, everyone pushed */
    redis_ok(6, (const char *[]){"HSET", bkey, "writes", "4", "empty", "4"});
    redis_ok(4, (const char *[]){"HSET", ukey, HR_USER_F_OPTOUT, "reminder/*"});
    assert_false(open_reads(c, 0, a, &verdict));
    assert_int_equal(verdict, WK_CONSENT_PUSH);
    /* a rewrite counted itself: read again, the opt-out honoured */
    redis_ok(4, (const char *[]){"HINCRBY", bkey, "writes", "1"});
    assert_true(open_reads(c, 0, a, &verdict));
    assert_int_equal(verdict, WK_CONSENT_OPTED_OUT);
    /* a later part goes by what its open's first part found (kept in the
     * chunk), not by the state now: b's opt-out read only when it found
     * profiles may exist (a, acknowledged as opted out, back in the set
     * to be the part's first member) */
    redis_ok(3, (const char *[]){"SADD", c->k_set, a});
    hr_key_user(hr_redis_prefix(rd), ukey, sizeof ukey, b);
    redis_ok(4, (const char *[]){"HSET", ukey, HR_USER_F_OPTOUT, "reminder/*"});
    c->no_profiles = true;
    assert_false(open_reads(c, 1, b, &verdict));
    assert_int_equal(verdict, WK_CONSENT_PUSH);
    c->no_profiles = false;
    assert_true(open_reads(c, 1, b, &verdict));
    assert_int_equal(verdict, WK_CONSENT_OPTED_OUT);
    redis_ok(2, (const char *[]){"DEL", ukey});
    hr_key_user(hr_redis_prefix(rd), ukey, sizeof ukey, a);
    redis_ok(5, (const char *[]){"DEL", c->k_set, c->k_wait, c->k_waves, c->k_stats});
    c->task = NULL;
    wk_chunk_free(c);
    wk_task_free(wt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_sync),
        cmocka_unit_test(test_open),
    };

    if (getenv("HERALD_TEST_CONFIG") == NULL || *getenv("HERALD_TEST_CONFIG") == '\0') {
        fprintf(stderr, "test_user_book: HERALD_TEST_CONFIG is not set -- skipping\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
