/* Integration test of hr_redis and hr_ratelimit against the stack's Redis:
 * SCRIPT LOAD + EVALSHA, the NOSCRIPT fallback, reconnect after the server
 * dropped the connection, the rate limiter under concurrent callers,
 * chunk_done.lua's lease, and pipelining.  Keys live under the test's own prefix (itest_config). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hr_pipe.h"
#include "hr_ratelimit.h"
#include "hr_redis.h"
#include "itest.h"

static hr_config *cfg;
static hr_redis *rd;
static char errstr[512];

static int setup(void **state)
{
    (void)state;
    return itest_redis_setup(&cfg, &rd);
}

static int teardown(void **state)
{
    (void)state;
    itest_redis_teardown(cfg, rd);
    return 0;
}

static long long cmd_int(hr_redis *r, const char *fmt, const char *arg)
{
    redisReply *reply = hr_redis_cmdf(r, errstr, sizeof errstr, fmt, arg);
    long long v;

    if (reply == NULL)
        fail_msg("%s: %s", fmt, errstr);
    assert_int_equal(reply->type, REDIS_REPLY_INTEGER);
    v = reply->integer;
    freeReplyObject(reply);
    return v;
}

#define RL_HOUR_MS 3600000
#define RL_SLACK_MS 100 /* see test_eval_ratelimit */

/* SCRIPT on ARGV (NKEYS keys of ARGC): the first integer of its array
 * answer of NELEMENTS. */
static long long eval_first(hr_lua_id script, int nkeys, int argc, const char **argv,
                            size_t nelements)
{
    redisReply *reply = hr_redis_eval(rd, script, nkeys, argc, argv, NULL, errstr, sizeof errstr);
    long long v;

    if (reply == NULL)
        fail_msg("eval: %s", errstr);
    assert_int_equal(reply->type, REDIS_REPLY_ARRAY);
    assert_int_equal(reply->elements, nelements);
    v = reply->element[0]->integer;
    freeReplyObject(reply);
    return v;
}

/* ratelimit.lua directly on a key with one-hour windows: the grant. */
static long long rl_eval(const char *key, const char *limit, const char *want)
{
    const char *argv[] = {key, limit, want, "3600000"};

    return eval_first(HR_LUA_RATELIMIT, 1, 4, argv, 3);
}

/* Redis's clock in ms. */
static int64_t redis_ms(void)
{
    int64_t ms = 0;

    assert_int_equal(hr_redis_time_ms(rd, &ms, errstr, sizeof errstr), 0);
    return ms;
}

/* Waits out the last 10 s of Redis's hour, so that the calls that follow
 * (well under 10 s) count against one one-hour window. */
static void rl_hour_start(void)
{
    int64_t left = RL_HOUR_MS - redis_ms() % RL_HOUR_MS;

    if (left < 10000)
        usleep((useconds_t)(left + 100) * 1000);
}

/* The isolation every integration test relies on (itest): a prefix of our
 * own, and a written config that loads back with it. */
static void test_itest_config(void **state)
{
    (void)state;
    hr_config *shared = itest_config_shared(), *reloaded = NULL;
    char path[256];

    assert_string_not_equal(shared->redis.prefix, cfg->redis.prefix);
    assert_string_not_equal(shared->kafka.topic, cfg->kafka.topic);
    assert_int_equal(itest_write_config(cfg, path, sizeof path), 0);
    if (hr_config_load(path, &reloaded, errstr, sizeof errstr) != 0)
        fail_msg("%s", errstr);
    unlink(path);
    assert_string_equal(reloaded->redis.prefix, cfg->redis.prefix);
    assert_string_equal(reloaded->kafka.group, cfg->kafka.group);
    assert_int_equal(reloaded->nchannels, cfg->nchannels);
    assert_int_equal(reloaded->redis.cluster, cfg->redis.cluster);
    assert_int_equal(reloaded->redis.nnodes, cfg->redis.nnodes);
    assert_string_equal(reloaded->channels[0].body, cfg->channels[0].body);
    hr_config_free(reloaded);
    hr_config_free(shared);
}

static void test_keys_and_time(void **state)
{
    (void)state;
    char buf[256], want[256];
    int64_t ms;

    snprintf(want, sizeof want, "%s{t42}:subs", cfg->redis.prefix);
    assert_string_equal(hr_key_task(hr_redis_prefix(rd), buf, sizeof buf, 42, HR_KEY_SUBS), want);
    snprintf(want, sizeof want, "%srl:task7", cfg->redis.prefix);
    assert_string_equal(hr_key_ratelimit(hr_redis_prefix(rd), buf, sizeof buf, "task7"), want);
    assert_string_equal(hr_redis_prefix(rd), cfg->redis.prefix);
    assert_int_equal(hr_redis_time_ms(rd, &ms, errstr, sizeof errstr), 0);
    assert_true(llabs((long long)(ms - itest_now_ms())) < 5000);
}

static void test_eval_ratelimit(void **state)
{
    (void)state;
    char key[256];

    hr_key_ratelimit(hr_redis_prefix(rd), key, sizeof key, "eval");
    rl_hour_start();
    assert_int_equal(rl_eval(key, "10", "7"), 7);
    assert_int_equal(rl_eval(key, "10", "7"), 3);
    assert_int_equal(rl_eval(key, "10", "1"), 0);
    /* The window is Redis's hour, and the counter lives until it ends and
     * a second more: within RL_SLACK_MS, since the script's TIME and the
     * base of its PEXPIRE are two reads of Redis's clock, which a busy
     * server may take milliseconds apart (a CI run beside a build saw the
     * TTL past the exact bound once). */
    int64_t ms = redis_ms();
    redisReply *w = hr_redis_cmdf(rd, errstr, sizeof errstr, "HGET %s w", key);
    assert_non_null(w);
    assert_int_equal(w->type, REDIS_REPLY_STRING);
    assert_int_equal(strtoll(w->str, NULL, 10), ms / RL_HOUR_MS);
    freeReplyObject(w);
    long long pttl = cmd_int(rd, "PTTL %s", key);
    assert_true(pttl > 0 && pttl <= RL_HOUR_MS - ms % RL_HOUR_MS + 1000 + RL_SLACK_MS);

    /* No grant on a new key must not create it (no key without a TTL). */
    hr_key_ratelimit(hr_redis_prefix(rd), key, sizeof key, "eval2");
    assert_int_equal(rl_eval(key, "10", "0"), 0);
    assert_int_equal(cmd_int(rd, "EXISTS %s", key), 0);

    /* A Redis error reply comes back as NULL with its text. */
    assert_null(hr_redis_cmdf(rd, errstr, sizeof errstr, "NOSUCHCOMMAND"));
    assert_non_null(strstr(errstr, "unknown command"));
}

/* chunk_done.lua on task KEYS' chunk 1 as OWNER: its first answer. */
static long long chunk_done(char keys[6][256], const char *owner)
{
    const char *argv[] = {keys[0], keys[1], keys[2], keys[3], keys[4], keys[5], "1", owner};

    return eval_first(HR_LUA_CHUNK_DONE, 6, 8, argv, 10);
}

/* chunk_done.lua drops the lease when its caller holds it, also when the
 * set is not empty (the worker sends no lease_release.lua behind a close
 * any more), and never another holder's. */
static void test_chunk_done_lease(void **state)
{
    (void)state;
    const char *prefix = hr_redis_prefix(rd);
    const int64_t task = 990033;
    char keys[6][256];

    hr_key_shard_chunk(prefix, keys[0], sizeof keys[0], task, 0, 1);
    hr_key_shard_lease(prefix, keys[1], sizeof keys[1], task, 0, 1);
    hr_key_shard(prefix, keys[2], sizeof keys[2], task, 0, HR_KEY_PENDING);
    hr_key_shard(prefix, keys[3], sizeof keys[3], task, 0, HR_KEY_STATS);
    hr_key_shard(prefix, keys[4], sizeof keys[4], task, 0, HR_KEY_SUBS);
    hr_key_shard(prefix, keys[5], sizeof keys[5], task, 0, HR_KEY_WAIT);
    for (int i = 0; i < 6; i++)
        cmd_int(rd, "DEL %s", keys[i]);
    cmd_int(rd, "SADD %s 7", keys[0]);
    cmd_int(rd, "HSET %s 1 0", keys[2]);
    /* Not empty, another's lease: nothing changes. */
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "SET %s other", keys[1]));
    assert_int_equal(chunk_done(keys, "me"), -1);
    assert_int_equal(cmd_int(rd, "EXISTS %s", keys[1]), 1);
    /* Not empty, our lease: dropped, the chunk stays pending. */
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "SET %s me", keys[1]));
    assert_int_equal(chunk_done(keys, "me"), -1);
    assert_int_equal(cmd_int(rd, "EXISTS %s", keys[1]), 0);
    assert_int_equal(cmd_int(rd, "HLEN %s", keys[2]), 1);
    assert_int_equal(cmd_int(rd, "SCARD %s", keys[0]), 1);
    /* Empty, our lease: closed and dropped; again: closed before. */
    cmd_int(rd, "DEL %s", keys[0]);
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "SET %s me", keys[1]));
    assert_int_equal(chunk_done(keys, "me"), 1);
    assert_int_equal(cmd_int(rd, "EXISTS %s", keys[1]), 0);
    assert_int_equal(cmd_int(rd, "HLEN %s", keys[2]), 0);
    assert_int_equal(chunk_done(keys, "me"), 0);
    for (int i = 0; i < 6; i++)
        cmd_int(rd, "DEL %s", keys[i]);
}

static void test_noscript_fallback(void **state)
{
    (void)state;
    char key[256];
    redisReply *reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "SCRIPT FLUSH");

    assert_non_null(reply);
    freeReplyObject(reply);
    hr_key_ratelimit(hr_redis_prefix(rd), key, sizeof key, "noscript");
    rl_hour_start();
    assert_int_equal(rl_eval(key, "5", "3"), 3);
    assert_int_equal(rl_eval(key, "5", "3"), 2);
}

static void test_reconnect(void **state)
{
    (void)state;
    hr_redis *killer = NULL;
    char id[32];
    long long before, after;

    assert_int_equal(hr_redis_connect(cfg, &killer, errstr, sizeof errstr), 0);
    before = cmd_int(rd, "CLIENT ID", NULL);
    snprintf(id, sizeof id, "%lld", before);
    /* Kill exactly our connection: TYPE normal would also cut the
     * connections of tests running next to this one. */
    assert_int_equal(cmd_int(killer, "CLIENT KILL ID %s", id), 1);
    hr_redis_free(killer);

    after = cmd_int(rd, "CLIENT ID", NULL);
    assert_true(after != before);
}

#define RL_THREADS 4
#define RL_LIMIT 300
#define RL_RUN_MS 2600
#define RL_MAX_SECONDS 8

typedef struct rl_worker {
    pthread_t thread;
    int64_t start_s;
    int64_t unambiguous[RL_MAX_SECONDS]; /* grants known to belong to a second */
    int64_t total;
    int calls;
    int failed;
    char err[256];
} rl_worker;

static const char rl_scope[] = "conc";

static int64_t now_s(void)
{
    return itest_now_ms() / 1000;
}

static void *rl_run(void *arg)
{
    rl_worker *w = arg;
    hr_redis *r = NULL;
    int64_t end = itest_now_ms() + RL_RUN_MS;

    if (hr_redis_connect(cfg, &r, w->err, sizeof w->err) != 0) {
        w->failed = 1;
        return NULL;
    }
    while (itest_now_ms() < end) {
        int64_t granted, wait_ms, s0 = now_s();
        if (hr_ratelimit_take(r, rl_scope, RL_LIMIT, 5, &granted, &wait_ms, w->err,
                              sizeof w->err) != 0) {
            w->failed = 1;
            break;
        }
        int64_t s1 = now_s();
        w->calls++;
        w->total += granted;
        /* The key's second was read between s0 and s1. */
        if (s0 == s1 && s0 - w->start_s >= 0 && s0 - w->start_s < RL_MAX_SECONDS)
            w->unambiguous[s0 - w->start_s] += granted;
        usleep(granted < 5 ? 20 * 1000 : 1000);
    }
    hr_redis_free(r);
    return NULL;
}

static void test_ratelimit_concurrent(void **state)
{
    (void)state;
    rl_worker workers[RL_THREADS];
    int64_t start_s = now_s(), end_s, total = 0;

    memset(workers, 0, sizeof workers);
    for (int i = 0; i < RL_THREADS; i++) {
        workers[i].start_s = start_s;
        assert_int_equal(pthread_create(&workers[i].thread, NULL, rl_run, &workers[i]), 0);
    }
    for (int i = 0; i < RL_THREADS; i++)
        pthread_join(workers[i].thread, NULL);
    end_s = now_s();

    /* The counter must carry a TTL of at most 2 s. */
    char key[256];
    hr_key_ratelimit(hr_redis_prefix(rd), key, sizeof key, rl_scope);
    long long pttl = cmd_int(rd, "PTTL %s", key);
    assert_true(pttl <= 2000);

    for (int i = 0; i < RL_THREADS; i++) {
        if (workers[i].failed)
            fail_msg("worker %d: %s", i, workers[i].err);
        assert_true(workers[i].calls > 10);
        total += workers[i].total;
    }
    /* Per second: never over the limit; every whole second got some. */
    for (int64_t s = 0; s <= end_s - start_s && s < RL_MAX_SECONDS; s++) {
        int64_t sum = 0;
        for (int i = 0; i < RL_THREADS; i++)
            sum += workers[i].unambiguous[s];
        print_message("second %lld: %lld granted\n", (long long)s, (long long)sum);
        assert_true(sum <= RL_LIMIT);
        if (s > 0 && s < end_s - start_s)
            assert_true(sum > 0);
    }
    assert_true(total <= RL_LIMIT * (end_s - start_s + 1));
    assert_true(total > RL_LIMIT); /* demand (4 x 5 per ms) spans several full budgets */

    /* The counter is gone 3 s later. */
    sleep(3);
    assert_int_equal(cmd_int(rd, "EXISTS %s", key), 0);
}

static void test_ratelimit_wait(void **state)
{
    (void)state;
    int64_t granted, wait_ms;

    /* The wait is to the end of Redis's second, granted or not (how long
     * the units are good for). */
    assert_int_equal(hr_ratelimit_take(rd, "wait", 3, 2, &granted, &wait_ms, errstr, sizeof errstr),
                     0);
    assert_true(wait_ms > 0 && wait_ms <= 1000);
    if (granted == 2)
        assert_int_equal(
            hr_ratelimit_take(rd, "wait", 3, 2, &granted, &wait_ms, errstr, sizeof errstr), 0);
    /* Either the second call got the last unit, or the second rolled over. */
    if (granted < 2)
        assert_true(wait_ms > 0 && wait_ms <= 1000);
    assert_int_equal(hr_ratelimit_take(rd, "wait", 0, 1, &granted, &wait_ms, errstr, sizeof errstr),
                     -1);
}

/* Finish-by pacing of a local-time task (issue 34, the fault row
 * clock-behind): its recipients wait in the wait set until the chunker
 * releases them, so subs is empty at the grant.  The rate must count them
 * (it used to be 1/s until finish_by, one recipient per chunk), and the
 * time left is Redis's. */
static void test_ratelimit_paced_wait_set(void **state)
{
    (void)state;
    enum { TASK = 901, WAITING = 9000, SPAN_MS = 8000 };
    char wait[HR_KEY_MAX], stats[HR_KEY_MAX];
    int64_t granted, wait_ms, rate, finish_ms;

    hr_key_task(hr_redis_prefix(rd), wait, sizeof wait, TASK, HR_KEY_WAIT);
    hr_key_task(hr_redis_prefix(rd), stats, sizeof stats, TASK, HR_KEY_STATS);
    for (int i = 0; i < WAITING; i += 1000) {
        const char *argv[2 + 2 * 1000];
        char uids[1000][16];

        argv[0] = "ZADD";
        argv[1] = wait;
        for (int j = 0; j < 1000; j++) {
            snprintf(uids[j], sizeof uids[j], "%d", i + j + 1);
            argv[2 + 2 * j] = "1";
            argv[3 + 2 * j] = uids[j];
        }
        redisReply *reply = hr_redis_cmd(rd, errstr, sizeof errstr, 2 + 2 * 1000, argv, NULL);

        if (reply == NULL)
            fail_msg("ZADD: %s", errstr);
        freeReplyObject(reply);
    }
    assert_int_equal(cmd_int(rd, "ZCARD %s", wait), WAITING);
    /* finish_by SPAN_MS ahead of Redis's clock: about WAITING * 1000 /
     * (SPAN_MS + 1000) = 1000/s. */
    finish_ms = redis_ms() + SPAN_MS;
    assert_int_equal(hr_ratelimit_take_paced(rd, TASK, "chunk", 0, finish_ms, 500, &granted,
                                             &wait_ms, &rate, errstr, sizeof errstr),
                     0);
    print_message("paced: rate %lld granted %lld\n", (long long)rate, (long long)granted);
    assert_true(rate >= 900 && rate <= 1200);
    assert_int_equal(granted, 500);
    assert_true(wait_ms > 0 && wait_ms <= 1000);
    redisReply *planned = hr_redis_cmdf(rd, errstr, sizeof errstr, "HGET %s planned_rate", stats);
    assert_non_null(planned);
    assert_int_equal(strtoll(planned->str, NULL, 10), rate);
    freeReplyObject(planned);
    /* finish_by passed by Redis's clock, no cap: no limit. */
    assert_int_equal(hr_ratelimit_take_paced(rd, TASK, "chunk", 0, redis_ms() - 1000, 5000,
                                             &granted, &wait_ms, &rate, errstr, sizeof errstr),
                     0);
    assert_int_equal(granted, 5000);
    assert_int_equal(rate, 0);
}

/* hr_pipe: replies in order and taken in any order; after SCRIPT FLUSH the
 * script calls of a batch answer NOSCRIPT and are replayed once (each ran
 * exactly once: the counters prove it), plain commands untouched. */
static void test_pipe_object(void **state)
{
    (void)state;
    enum { N = 200 };
    char key[256], rlkey[256];
    const char *argv[] = {"INCR", key};
    const char *eargv[] = {rlkey, "1000", "1", "3600000"};
    hr_pipe *pipe = hr_pipe_new(rd);
    redisReply *reply;

    assert_non_null(pipe);
    /* A STRING counter (then read as a hash, for a WRONGTYPE error). */
    hr_key_task(hr_redis_prefix(rd), key, sizeof key, 1, HR_KEY_SEQ);
    hr_key_ratelimit(hr_redis_prefix(rd), rlkey, sizeof rlkey, "pipeobj");
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "SCRIPT FLUSH");
            assert_non_null(reply);
            freeReplyObject(reply);
        }
        for (int i = 0; i < N; i++) {
            assert_int_equal(hr_pipe_cmd(pipe, 2, argv, NULL), 0);
            assert_int_equal(hr_pipe_eval(pipe, HR_LUA_RATELIMIT, 1, 4, eargv, NULL), 0);
        }
        assert_int_equal(hr_pipe_count(pipe), 2 * N);
        assert_int_equal(hr_pipe_exec(pipe, errstr, sizeof errstr), 0);
        for (int i = N - 1; i >= 0; i--) {
            reply = hr_pipe_reply(pipe, 2 * (size_t)i + 1, errstr, sizeof errstr);
            if (reply == NULL)
                fail_msg("round %d eval %d: %s", round, i, errstr);
            assert_int_equal(reply->type, REDIS_REPLY_ARRAY);
            assert_int_equal(reply->element[0]->integer, 1);
            freeReplyObject(reply);
            reply = hr_pipe_reply(pipe, 2 * (size_t)i, errstr, sizeof errstr);
            assert_non_null(reply);
            assert_int_equal(reply->integer, round * N + i + 1);
            freeReplyObject(reply);
        }
        assert_null(hr_pipe_reply(pipe, 0, errstr, sizeof errstr));
        assert_non_null(strstr(errstr, "taken"));
        hr_pipe_reset(pipe);
    }
    /* An error reply is an error for its command only. */
    {
        const char *bad[] = {"HGET", key, "f"};

        assert_int_equal(hr_pipe_cmd(pipe, 3, bad, NULL), 0);
        assert_int_equal(hr_pipe_cmd(pipe, 2, argv, NULL), 0);
        assert_int_equal(hr_pipe_exec(pipe, errstr, sizeof errstr), 0);
        assert_null(hr_pipe_reply(pipe, 0, errstr, sizeof errstr));
        assert_non_null(strstr(errstr, "WRONGTYPE"));
        reply = hr_pipe_reply(pipe, 1, errstr, sizeof errstr);
        assert_non_null(reply);
        assert_int_equal(reply->integer, 2 * N + 1);
        freeReplyObject(reply);
    }
    hr_pipe_free(pipe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_itest_config),
        cmocka_unit_test(test_keys_and_time),
        cmocka_unit_test(test_eval_ratelimit),
        cmocka_unit_test(test_chunk_done_lease),
        cmocka_unit_test(test_noscript_fallback),
        cmocka_unit_test(test_reconnect),
        cmocka_unit_test(test_ratelimit_wait),
        cmocka_unit_test(test_pipe_object),
        cmocka_unit_test(test_ratelimit_concurrent),
        cmocka_unit_test(test_ratelimit_paced_wait_set),
    };

    cfg = itest_config(); /* exits 77 before cmocka starts when unset */
    hr_config_free(cfg);
    return cmocka_run_group_tests(tests, setup, teardown);
}
