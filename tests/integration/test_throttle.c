/* Integration test of hr_throttle and lua/throttle.lua against the stack's
 * Redis: every decision of random pipelined batches checked against a
 * reference model, two racing clients never letting more than the limit
 * through a window, window keys expiring with the window, shadow mode, keys
 * with a throttle_key value, a 31-day window, and a window a worker from
 * before issue 19 left as a stream.  Keys live under the
 * test's own prefix (itest_config).
 *
 * Redis time cannot be simulated, so the model test runs in real time with
 * short windows and random sleeps; the script returns the server time it
 * decided at, and the model decides by exactly that timestamp. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hr_throttle.h"
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

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static void make_key(char *buf, const char *scope, const char *uid, const char *value)
{
    if (hr_throttle_key(rd, scope, uid, value, buf, HR_THROTTLE_KEY_MAX, errstr, sizeof errstr))
        fail_msg("key: %s", errstr);
}

/* One request alone; returns its result. */
static hr_throttle_result check1(hr_redis *r, const char *key, const hr_throttle_rule *rule)
{
    hr_throttle_req req = {key, rule};
    hr_throttle_result res;

    if (hr_throttle_check(r, &req, 1, &res, errstr, sizeof errstr) != 0)
        fail_msg("check: %s", errstr);
    return res;
}

static long long cmd_int(const char *cmd, const char *key)
{
    redisReply *reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "%s %s", cmd, key);
    long long v;

    if (reply == NULL)
        fail_msg("%s: %s", cmd, errstr);
    assert_int_equal(reply->type, REDIS_REPLY_INTEGER);
    v = reply->integer;
    freeReplyObject(reply);
    return v;
}

/* The passes stored in window KEY, whatever its layout (throttle.lua: a
 * string "<task>:<ms>" for one pass, else a sorted set): up to MAX of them
 * into TASK/T; their count. */
static size_t window_read(const char *key, int64_t *task, int64_t *t, size_t max)
{
    redisReply *type = hr_redis_cmdf(rd, errstr, sizeof errstr, "TYPE %s", key), *reply = NULL;
    size_t n = 0, i;

    if (type == NULL)
        fail_msg("TYPE: %s", errstr);
    if (strcmp(type->str, "string") == 0) {
        reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "GET %s", key);
        if (reply == NULL || reply->type != REDIS_REPLY_STRING)
            fail_msg("GET: %s", errstr);
        if (sscanf(reply->str, "%" SCNd64 ":%" SCNd64, &task[0], &t[0]) != 2)
            fail_msg("window %s holds '%s'", key, reply->str);
        n = 1;
    } else if (strcmp(type->str, "zset") == 0) {
        reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "ZRANGE %s 0 -1 WITHSCORES", key);
        if (reply == NULL || reply->type != REDIS_REPLY_ARRAY)
            fail_msg("ZRANGE: %s", errstr);
        for (i = 0; i + 1 < reply->elements && n < max; i += 2, n++) {
            task[n] = strtoll(reply->element[i]->str, NULL, 10);
            t[n] = strtoll(reply->element[i + 1]->str, NULL, 10);
        }
    } else if (strcmp(type->str, "none") != 0) {
        fail_msg("window %s is a %s", key, type->str);
    }
    freeReplyObject(type);
    if (reply != NULL)
        freeReplyObject(reply);
    return n;
}

/* How many passes window KEY stores. */
static size_t window_passes(const char *key)
{
    int64_t task[64], t[64];

    return window_read(key, task, t, 64);
}

/* The Redis type of KEY ("string", "zset", ...), into BUF. */
static const char *key_type(const char *key, char *buf, size_t len)
{
    redisReply *reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "TYPE %s", key);

    if (reply == NULL)
        fail_msg("TYPE: %s", errstr);
    snprintf(buf, len, "%s", reply->str);
    freeReplyObject(reply);
    return buf;
}

/* ---- the reference model: one list of (time, task) per key ---- */

#define M_KEYS 8
#define M_MAX 16

typedef struct m_entry {
    int64_t t, task;
} m_entry;

typedef struct m_key {
    m_entry e[M_MAX];
    size_t n;
    m_entry passes[512]; /* every entry ever added, for the window check */
    size_t npasses;
    int64_t now; /* the server time of its last decision */
} m_key;

/* What throttle.lua must answer at NOW for TASK; updates the model.
 * Returns the script's verdict code (1 added, 2 counted, 0 throttled). */
static int model_decide(m_key *k, const hr_throttle_rule *rule, int64_t now, int64_t *count)
{
    size_t i, kept = 0;

    for (i = 0; i < k->n; i++)
        if (k->e[i].t > now - rule->window_ms)
            k->e[kept++] = k->e[i];
    k->n = kept;
    *count = (int64_t)k->n;
    for (i = 0; i < k->n; i++)
        if (k->e[i].task == rule->task)
            return 2;
    if (k->n >= (size_t)rule->limit)
        return 0;
    assert_true(k->n < M_MAX && k->npasses < 512);
    k->e[k->n++] = (m_entry){now, rule->task};
    k->passes[k->npasses++] = (m_entry){now, rule->task};
    *count = (int64_t)k->n;
    return 1;
}

/* No window [t - window + 1, t] ending at a pass holds more than LIMIT
 * passes; the times are in order (one Redis serialises the scripts). */
static void assert_windows(const m_entry *p, size_t n, int64_t limit, int64_t window_ms)
{
    size_t i, j;

    for (i = 0; i < n; i++) {
        int64_t inside = 0;

        for (j = 0; j <= i; j++)
            if (p[j].t > p[i].t - window_ms)
                inside++;
        if (inside > limit)
            fail_msg("%" PRId64 " passes in the window ending at %" PRId64 " (limit %" PRId64 ")",
                     inside, p[i].t, limit);
    }
}

/* The window KEY holds exactly the model's entries (both are trimmed by the
 * same calls): every member scored inside the window is a model entry
 * there, the same task at the same time, and none is missing.  A task
 * passes at most once per window, so the members inside it are unique.
 * The key may expire in between, when its newest entry leaves the window,
 * so both sides are compared from the server time after the read on, with
 * 2 ms to spare for the expiry's own clock reading. */
static void assert_window_matches(const char *key, const m_key *k, int64_t window_ms)
{
    int64_t tasks[M_MAX * 2], ts[M_MAX * 2], now;
    size_t n = window_read(key, tasks, ts, M_MAX * 2), i, j, got = 0, want = 0;

    if (hr_redis_time_ms(rd, &now, errstr, sizeof errstr) != 0)
        fail_msg("TIME: %s", errstr);
    now += 2;
    for (i = 0; i < k->n; i++)
        if (k->e[i].t > now - window_ms)
            want++;
    for (i = 0; i < n; i++) {
        if (ts[i] <= now - window_ms)
            continue;
        for (j = 0; j < k->n && !(k->e[j].task == tasks[i] && k->e[j].t > now - window_ms); j++)
            ;
        if (j == k->n)
            fail_msg("task %" PRId64 " passed at %" PRId64 " but not in the model", tasks[i],
                     ts[i]);
        assert_int_equal(ts[i], k->e[j].t);
        got++;
    }
    assert_int_equal(got, want);
}

/* Random batches to 4 recipients in 2 scopes from 6 tasks per scope, over
 * about 6.5 s of real time; every result must be the model's. */
static void test_model(void **state)
{
    (void)state;
    /* Scope a: 2 per 1 s; scope b: 3 per 2.5 s; one rule per (scope, task). */
    hr_throttle_rule rules[2][6];
    static const int64_t limits[2] = {2, 3}, windows[2] = {1000, 2500};
    static m_key model[M_KEYS];
    char keys[M_KEYS][HR_THROTTLE_KEY_MAX];
    hr_throttle_req reqs[6];
    hr_throttle_result res[6];
    size_t ki[6];
    int64_t start = itest_now_ms(), calls = 0, verdicts[3] = {0, 0, 0};
    int s, tsk, u, iter;
    unsigned seed = (unsigned)time(NULL);

    printf("model seed %u\n", seed);
    srand(seed);
    memset(model, 0, sizeof model);
    for (s = 0; s < 2; s++) {
        for (tsk = 0; tsk < 6; tsk++)
            rules[s][tsk] =
                (hr_throttle_rule){limits[s], windows[s], 100 + tsk, HR_THROTTLE_ENFORCE};
        for (u = 0; u < 4; u++) {
            char uid[8];

            snprintf(uid, sizeof uid, "%d", u);
            make_key(keys[s * 4 + u], s == 0 ? "a" : "b", uid, NULL);
        }
    }
    for (iter = 0; iter < 400 && itest_now_ms() - start < 6500; iter++) {
        size_t n = 1 + (size_t)(rand() % 6), i;

        for (i = 0; i < n; i++) {
            /* Half the requests take the rule (and so the scope) of the one
             * before: one server decides such a run in one script call, a
             * key named twice in it included. */
            if (i > 0 && rand() % 2) {
                s = (int)(ki[i - 1] / 4);
                ki[i] = (size_t)(s * 4 + rand() % 4);
                reqs[i] = (hr_throttle_req){keys[ki[i]], reqs[i - 1].rule};
                continue;
            }
            s = rand() % 2;
            ki[i] = (size_t)(s * 4 + rand() % 4);
            reqs[i] = (hr_throttle_req){keys[ki[i]], &rules[s][rand() % 6]};
        }
        assert_int_equal(hr_throttle_check(rd, reqs, n, res, errstr, sizeof errstr), 0);
        for (i = 0; i < n; i++) {
            int64_t count;
            int code;

            /* One pipeline: the server of each key ran its calls in order
             * (on a Redis Cluster the keys of a batch are on several). */
            assert_true(res[i].now_ms >= model[ki[i]].now);
            model[ki[i]].now = res[i].now_ms;
            code = model_decide(&model[ki[i]], reqs[i].rule, res[i].now_ms, &count);
            verdicts[code]++;
            calls++;
            assert_int_equal(res[i].verdict, code == 0 ? HR_THROTTLE_BLOCKED : HR_THROTTLE_PASS);
            assert_int_equal(res[i].count, count);
        }
        for (i = 0; i < n; i++)
            assert_window_matches(reqs[i].key, &model[ki[i]], reqs[i].rule->window_ms);
        sleep_ms(rand() % 120);
    }
    for (s = 0; s < 2; s++)
        for (u = 0; u < 4; u++)
            assert_windows(model[s * 4 + u].passes, model[s * 4 + u].npasses, limits[s],
                           windows[s]);
    printf("model: %" PRId64 " calls, %" PRId64 " added, %" PRId64 " already counted, %" PRId64
           " throttled\n",
           calls, verdicts[1], verdicts[2], verdicts[0]);
    /* The run must have exercised every branch, or it proved little. */
    assert_true(verdicts[0] > 0 && verdicts[1] > 0 && verdicts[2] > 0);
}

/* ---- two racing clients ---- */

#define RACE_UIDS 5
#define RACE_LIMIT 3
#define RACE_WINDOW 2000
#define RACE_MAX 4096

typedef struct race_arg {
    int id;
    const char (*keys)[HR_THROTTLE_KEY_MAX];
    int64_t passes[RACE_UIDS][RACE_MAX]; /* server times of this client's passes */
    size_t npasses[RACE_UIDS];
    int64_t throttled;
    unsigned seed;
    int failed;
    char err[256];
} race_arg;

static void *race_run(void *p)
{
    race_arg *a = p;
    hr_redis *r = NULL;
    hr_throttle_rule rule = {RACE_LIMIT, RACE_WINDOW, 0, HR_THROTTLE_ENFORCE};
    hr_throttle_req reqs[RACE_UIDS];
    hr_throttle_result res[RACE_UIDS];
    int64_t start = itest_now_ms();
    int iter, u;

    if (hr_redis_connect(cfg, &r, a->err, sizeof a->err) != 0) {
        a->failed = 1;
        return NULL;
    }
    for (iter = 0; iter < 1000 && itest_now_ms() - start < 3000; iter++) {
        /* A new task per batch: every pass is an added entry, none is a
         * re-check of one already counted. */
        rule.task = a->id * 100000 + iter;
        for (u = 0; u < RACE_UIDS; u++)
            reqs[u] = (hr_throttle_req){a->keys[u], &rule};
        if (hr_throttle_check(r, reqs, RACE_UIDS, res, a->err, sizeof a->err) != 0) {
            a->failed = 1;
            break;
        }
        for (u = 0; u < RACE_UIDS; u++) {
            if (res[u].verdict != HR_THROTTLE_PASS)
                a->throttled++;
            else if (a->npasses[u] < RACE_MAX)
                a->passes[u][a->npasses[u]++] = res[u].now_ms;
        }
        sleep_ms(rand_r(&a->seed) % 5);
    }
    hr_redis_free(r);
    return NULL;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

    return (a > b) - (a < b);
}

static void test_race(void **state)
{
    (void)state;
    static race_arg args[2];
    static char keys[RACE_UIDS][HR_THROTTLE_KEY_MAX];
    pthread_t th[2];
    int i, u;

    for (u = 0; u < RACE_UIDS; u++) {
        char uid[8];

        snprintf(uid, sizeof uid, "%d", u);
        make_key(keys[u], "race", uid, NULL);
    }
    memset(args, 0, sizeof args);
    for (i = 0; i < 2; i++) {
        args[i].id = i + 1;
        args[i].seed = (unsigned)time(NULL) + (unsigned)i;
        args[i].keys = (const char(*)[HR_THROTTLE_KEY_MAX])keys;
        assert_int_equal(pthread_create(&th[i], NULL, race_run, &args[i]), 0);
    }
    for (i = 0; i < 2; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (i = 0; i < 2; i++)
        if (args[i].failed)
            fail_msg("client %d: %s", i, args[i].err);
    assert_true(args[0].throttled > 0 && args[1].throttled > 0);
    for (u = 0; u < RACE_UIDS; u++) {
        int64_t all[2 * RACE_MAX];
        m_entry p[2 * RACE_MAX];
        size_t n = 0, j;

        for (i = 0; i < 2; i++)
            for (j = 0; j < args[i].npasses[u]; j++)
                all[n++] = args[i].passes[u][j];
        qsort(all, n, sizeof all[0], cmp_i64);
        for (j = 0; j < n; j++)
            p[j] = (m_entry){all[j], 0};
        assert_windows(p, n, RACE_LIMIT, RACE_WINDOW);
        /* 3 s is at least one full window: the limit was reached. */
        assert_true(n >= RACE_LIMIT);
        if (u == 0)
            printf("race uid 0: %zu + %zu passes, %" PRId64 " + %" PRId64 " throttled (all uids)\n",
                   args[0].npasses[u], args[1].npasses[u], args[0].throttled, args[1].throttled);
    }
}

/* ---- expiry, shadow, key values, bounds ---- */

static bool key_gone(void *ctx)
{
    return cmd_int("EXISTS", ctx) == 0;
}

static void test_expiry(void **state)
{
    (void)state;
    hr_throttle_rule rule = {1, 1000, 7, HR_THROTTLE_ENFORCE};
    char key[HR_THROTTLE_KEY_MAX];
    long long pttl;
    int64_t t0;

    make_key(key, "exp", "1", NULL);
    assert_int_equal(check1(rd, key, &rule).verdict, HR_THROTTLE_PASS);
    t0 = itest_now_ms();
    pttl = cmd_int("PTTL", key);
    assert_true(pttl > 0 && pttl <= 1000);
    rule.task = 8;
    assert_int_equal(check1(rd, key, &rule).verdict, HR_THROTTLE_BLOCKED);
    /* The key goes with its last entry: no memory left behind. */
    assert_true(itest_wait_until(key_gone, key, 3000));
    assert_true(itest_now_ms() - t0 >= 900);
    assert_int_equal(check1(rd, key, &rule).verdict, HR_THROTTLE_PASS);
}

static void test_shadow(void **state)
{
    (void)state;
    hr_throttle_rule shadow = {1, 60000, 1, HR_THROTTLE_SHADOW};
    hr_throttle_rule enforce = {1, 60000, 99, HR_THROTTLE_ENFORCE};
    char key[HR_THROTTLE_KEY_MAX];
    hr_throttle_result res;
    int i, shadowed = 0;

    make_key(key, "shadow", "1", NULL);
    res = check1(rd, key, &shadow);
    assert_int_equal(res.verdict, HR_THROTTLE_PASS);
    assert_int_equal(res.count, 1);
    for (i = 0; i < 3; i++) {
        shadow.task = 2 + i;
        res = check1(rd, key, &shadow);
        shadowed += res.verdict == HR_THROTTLE_SHADOWED;
        assert_int_equal(res.count, 1);
    }
    assert_int_equal(shadowed, 3);
    /* Would-be-throttled sends add nothing: enforce sees the one pass. */
    assert_int_equal(window_passes(key), 1);
    res = check1(rd, key, &enforce);
    assert_int_equal(res.verdict, HR_THROTTLE_BLOCKED);
    assert_int_equal(res.count, 1);
}

static void test_key_value(void **state)
{
    (void)state;
    hr_throttle_rule rule = {1, 60000, 5, HR_THROTTLE_ENFORCE};
    char key[HR_THROTTLE_KEY_MAX], want[HR_THROTTLE_KEY_MAX], user_key[256];
    char value_buf[HR_THROTTLE_VALUE_MAX], big[HR_THROTTLE_KEY_MAX];
    cJSON *payload = cJSON_Parse("{\"level\":3}");
    const char *value;
    redisReply *user;

    assert_non_null(payload);
    make_key(key, "games", "7", "chess");
    snprintf(want, sizeof want, "%sthr:games:7:chess", hr_redis_prefix(rd));
    assert_string_equal(key, want);
    make_key(key, "games", "7", NULL);
    snprintf(want, sizeof want, "%sthr:games:7", hr_redis_prefix(rd));
    assert_string_equal(key, want);
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(hr_throttle_key(rd, "games", "7", big, key, sizeof key, errstr, sizeof errstr),
                     -1);

    /* uid 7 has the attribute in its user hash, uid 8 has no hash. */
    hr_key_user(hr_redis_prefix(rd), user_key, sizeof user_key, "7");
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "HSET %s game chess", user_key));
    user = hr_redis_cmdf(rd, errstr, sizeof errstr, "HGETALL %s", user_key);
    assert_non_null(user);
    value = hr_throttle_value("game", payload, user, value_buf, sizeof value_buf);
    assert_non_null(value);
    make_key(key, "games", "7", value);
    assert_int_equal(check1(rd, key, &rule).verdict, HR_THROTTLE_PASS);
    freeReplyObject(user);
    user = hr_redis_cmdf(rd, errstr, sizeof errstr, "HGETALL %suser:8", hr_redis_prefix(rd));
    assert_non_null(user);
    assert_null(hr_throttle_value("game", payload, user, value_buf, sizeof value_buf));
    freeReplyObject(user);

    /* Windows per value are separate; a missing value has its own. */
    make_key(key, "games", "7", "go");
    assert_int_equal(check1(rd, key, &rule).verdict, HR_THROTTLE_PASS);
    make_key(key, "games", "7", NULL);
    assert_int_equal(check1(rd, key, &rule).verdict, HR_THROTTLE_PASS);
    make_key(key, "games", "7", "chess");
    rule.task = 6;
    assert_int_equal(check1(rd, key, &rule).verdict, HR_THROTTLE_BLOCKED);
    /* The same task again is already counted, never throttled by itself. */
    rule.task = 5;
    assert_int_equal(check1(rd, key, &rule).verdict, HR_THROTTLE_PASS);
    assert_int_equal(window_passes(key), 1);
    cJSON_Delete(payload);
}

static void test_bounds(void **state)
{
    (void)state;
    hr_throttle_rule month = {2, INT64_C(2678400000), 1, HR_THROTTLE_ENFORCE};
    hr_throttle_rule none = {0, 1000, 1, HR_THROTTLE_ENFORCE};
    char key[HR_THROTTLE_KEY_MAX];
    hr_throttle_req req;
    hr_throttle_result res;
    long long pttl;

    make_key(key, "month", "1", NULL);
    res = check1(rd, key, &month);
    assert_int_equal(res.verdict, HR_THROTTLE_PASS);
    pttl = cmd_int("PTTL", key);
    assert_true(pttl > INT64_C(2678400000) - 60000 && pttl <= INT64_C(2678400000));
    /* A limit of 0 is a caller bug, refused before Redis sees it. */
    req = (hr_throttle_req){key, &none};
    assert_int_equal(hr_throttle_check(rd, &req, 1, &res, errstr, sizeof errstr), -1);
    assert_int_equal(window_passes(key), 1);
}

/* RES answered VERDICT with a count of 1, and window KEY holds one pass, of
 * TASK; that pass's ms. */
static int64_t assert_one_pass(const char *key, hr_throttle_result res, hr_throttle_verdict verdict,
                               int64_t task)
{
    int64_t tasks[4], ts[4];

    assert_int_equal(res.verdict, verdict);
    assert_int_equal(res.count, 1);
    assert_int_equal(window_read(key, tasks, ts, 4), 1);
    assert_int_equal(tasks[0], task);
    return ts[0];
}

/* A window holding one pass is a string "<task>:<ms>" with that pass's
 * expiry; another task's pass inside the window makes it the sorted set of
 * both, and a string whose pass left the window (a longer window's expiry)
 * or that is not a pass at all is replaced by the new pass. */
static void test_string_window(void **state)
{
    (void)state;
    hr_throttle_rule rule = {3, 60000, 1, HR_THROTTLE_ENFORCE};
    hr_throttle_rule single = {1, 60000, 1, HR_THROTTLE_ENFORCE};
    char key[HR_THROTTLE_KEY_MAX], type[32];
    int64_t tasks[4], ts[4], now, first;
    hr_throttle_result res;
    long long pttl;

    make_key(key, "str", "1", NULL);
    res = check1(rd, key, &rule);
    assert_int_equal(res.verdict, HR_THROTTLE_PASS);
    assert_int_equal(res.count, 1);
    assert_string_equal(key_type(key, type, sizeof type), "string");
    assert_int_equal(window_read(key, tasks, ts, 4), 1);
    assert_int_equal(tasks[0], 1);
    assert_int_equal(ts[0], res.now_ms);
    first = res.now_ms;
    pttl = cmd_int("PTTL", key);
    assert_true(pttl > 50000 && pttl <= 60000);
    /* The same task: counted already, still the string. */
    res = check1(rd, key, &rule);
    assert_int_equal(res.verdict, HR_THROTTLE_PASS);
    assert_int_equal(res.count, 1);
    assert_string_equal(key_type(key, type, sizeof type), "string");
    /* Another task: the sorted set of both, the string's pass at its own
     * ms, and the expiry of the newest. */
    rule.task = 2;
    res = check1(rd, key, &rule);
    assert_int_equal(res.verdict, HR_THROTTLE_PASS);
    assert_int_equal(res.count, 2);
    assert_string_equal(key_type(key, type, sizeof type), "zset");
    assert_int_equal(window_read(key, tasks, ts, 4), 2);
    assert_int_equal(tasks[0], 1);
    assert_int_equal(ts[0], first);
    assert_int_equal(tasks[1], 2);
    assert_int_equal(ts[1], res.now_ms);
    pttl = cmd_int("PTTL", key);
    assert_true(pttl > 50000 && pttl <= 60000);

    /* Limit 1: a second task is throttled and the string stays as it was. */
    make_key(key, "str", "2", NULL);
    assert_int_equal(check1(rd, key, &single).verdict, HR_THROTTLE_PASS);
    single.task = 2;
    assert_one_pass(key, check1(rd, key, &single), HR_THROTTLE_BLOCKED, 1);

    /* A pass 100 s old kept by a 500 s expiry: out of this 60 s window. */
    make_key(key, "str", "3", NULL);
    if (hr_redis_time_ms(rd, &now, errstr, sizeof errstr) != 0)
        fail_msg("TIME: %s", errstr);
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "SET %s 7:%" PRId64 " PX 500000", key,
                                  now - 100000));
    assert_one_pass(key, check1(rd, key, &single), HR_THROTTLE_PASS, 2);
    assert_true(cmd_int("PTTL", key) <= 60000);
    /* Not a pass at all: replaced, never an error. */
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "SET %s junk", key));
    res = check1(rd, key, &single);
    assert_int_equal(res.verdict, HR_THROTTLE_PASS);
    assert_int_equal(window_read(key, tasks, ts, 4), 1);

    /* A task id of many digits read whole from the string: its own pass
     * 10 s ago is counted, not another task's (with limit 1 that would
     * throttle), and nothing is written. */
    make_key(key, "str", "4", NULL);
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "SET %s 1234567:%" PRId64 " PX 50000",
                                  key, now - 10000));
    single.task = 1234567;
    assert_int_equal(assert_one_pass(key, check1(rd, key, &single), HR_THROTTLE_PASS, 1234567),
                     now - 10000);
    assert_true(cmd_int("PTTL", key) <= 50000);
}

/* A window a worker from before issue 19 wrote (a stream: entry id = the
 * pass's ms, field t = the task) is read as the same window: the first
 * call rewrites it as a sorted set with the passes still in the window and
 * the key's expiry, and they go on counting. */
static void test_stream_window(void **state)
{
    (void)state;
    hr_throttle_rule rule = {2, 60000, 41, HR_THROTTLE_ENFORCE};
    char key[HR_THROTTLE_KEY_MAX];
    redisReply *reply;
    long long pttl;
    int64_t now;

    make_key(key, "old", "1", NULL);
    if (hr_redis_time_ms(rd, &now, errstr, sizeof errstr) != 0)
        fail_msg("TIME: %s", errstr);
    /* Task 40 passed 100 s ago (out of the window), task 41 a second ago. */
    freeReplyObject(
        hr_redis_cmdf(rd, errstr, sizeof errstr, "XADD %s %" PRId64 "-0 t 40", key, now - 100000));
    freeReplyObject(
        hr_redis_cmdf(rd, errstr, sizeof errstr, "XADD %s %" PRId64 "-0 t 41", key, now - 1000));
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "PEXPIRE %s 59000", key));
    /* Task 41 again: already counted, not throttled by itself. */
    assert_int_equal(check1(rd, key, &rule).verdict, HR_THROTTLE_PASS);
    reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "TYPE %s", key);
    assert_non_null(reply);
    assert_string_equal(reply->str, "zset");
    freeReplyObject(reply);
    assert_int_equal(window_passes(key), 1);
    pttl = cmd_int("PTTL", key);
    assert_true(pttl > 50000 && pttl <= 59000);
    /* Task 42 is the second pass in the window; task 43 is one too many. */
    rule.task = 42;
    assert_int_equal(check1(rd, key, &rule).count, 2);
    rule.task = 43;
    assert_int_equal(check1(rd, key, &rule).verdict, HR_THROTTLE_BLOCKED);
}

/* A batch larger than one pipeline slice: every request answered, in
 * order, one pass per key. */
static void test_large_batch(void **state)
{
    (void)state;
    enum { N = HR_THROTTLE_PIPE_MAX + 250 };
    static const hr_throttle_rule rule = {1, 60000, 1, HR_THROTTLE_ENFORCE};
    static const hr_throttle_rule other = {1, 60000, 2, HR_THROTTLE_ENFORCE};
    static char keys[N / 2][64];
    static hr_throttle_req reqs[N];
    static hr_throttle_result res[N];
    size_t i;

    for (i = 0; i < N / 2; i++)
        snprintf(keys[i], sizeof keys[i], "%sthr:big:%zu", hr_redis_prefix(rd), i);
    /* Each key twice, the second time by another task: pass, then blocked. */
    for (i = 0; i < N; i++)
        reqs[i] = (hr_throttle_req){keys[i % (N / 2)], i < N / 2 ? &rule : &other};
    assert_int_equal(hr_throttle_check(rd, reqs, N, res, errstr, sizeof errstr), 0);
    for (i = 0; i < N; i++)
        assert_int_equal(res[i].verdict, i < N / 2 ? HR_THROTTLE_PASS : HR_THROTTLE_BLOCKED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_value),     cmocka_unit_test(test_shadow),
        cmocka_unit_test(test_bounds),        cmocka_unit_test(test_large_batch),
        cmocka_unit_test(test_expiry),        cmocka_unit_test(test_race),
        cmocka_unit_test(test_model),         cmocka_unit_test(test_stream_window),
        cmocka_unit_test(test_string_window),
    };

    cfg = itest_config(); /* exits 77 before cmocka starts when unset */
    hr_config_free(cfg);
    return cmocka_run_group_tests(tests, setup, teardown);
}
