/* Integration test of herald-dispatcher against the stack's servers.
 *
 * Each case inserts its own push_task rows under a task topic of its own
 * and starts herald-dispatcher processes with HERALD_TEST_TASK_TOPIC set to
 * it (so dispatchers of other tests never touch these rows), a config with
 * the test's Redis prefix and Kafka topic, and short intervals.  The cases
 * then inspect MySQL, the Redis chunk sets and the Kafka topic (read with a
 * consumer group of the test's own). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dsp_control.h"
#include "dsp_pace.h"
#include "dsp_poll.h"
#include "dsp_scan.h"
#include "dsp_sweep.h"
#include "hr_chunkmsg.h"
#include "hr_kafka.h"
#include "hr_mysql.h"
#include "hr_redis.h"
#include "hr_subs.h"
#include "itest.h"

#define MAX_DISPATCHERS 2
#define MAX_MSGS 4096

static hr_config *cfg;
static hr_mysql *db;
static hr_redis *rd;
static rd_kafka_t *consumer;
static char errstr[1024];
static char cfg_path[512];
static char task_topic[200];
static char log_path[MAX_DISPATCHERS][512];
static pid_t pids[MAX_DISPATCHERS];
static int ncase;

/* Every chunk message read so far from the test's topic. */
static hr_chunkmsg msgs[MAX_MSGS];
static char msg_keys[MAX_MSGS][64];
static int32_t msg_parts[MAX_MSGS];
static size_t nmsgs;

static int64_t sql_int(const char *sql, const hr_mysql_param *p, size_t np)
{
    hr_mysql_rows *rows = NULL;
    int64_t v = -1;

    if (hr_mysql_query(db, sql, p, np, &rows, errstr, sizeof errstr) != 0)
        fail_msg("%s: %s", sql, errstr);
    if (rows->nrows > 0 && hr_mysql_cell(rows, 0, 0) != NULL)
        v = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    return v;
}

static void sql_exec(const char *sql, const hr_mysql_param *p, size_t np)
{
    if (hr_mysql_exec(db, sql, p, np, NULL, NULL, NULL, errstr, sizeof errstr) != 0)
        fail_msg("%s: %s", sql, errstr);
}

static int64_t redis_int(const char *fmt, const char *key)
{
    redisReply *r = hr_redis_cmdf(rd, errstr, sizeof errstr, fmt, key);
    int64_t v;

    assert_non_null(r);
    v = r->type == REDIS_REPLY_INTEGER  ? r->integer
        : r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10)
                                        : -1;
    freeReplyObject(r);
    return v;
}

/* A valid task of this case's topic; bad-row cases UPDATE it afterwards. */
static int64_t task_insert(int64_t due_ms, int chunk_size, int rate_limit)
{
    const hr_mysql_param p[] = {HR_P_STR(task_topic), HR_P_I64(due_ms), HR_P_I64(due_ms),
                                HR_P_I64(chunk_size), HR_P_I64(rate_limit)};
    uint64_t id = 0;

    /* freeze_at a day after due, so that bad-row cases may still edit it */
    if (hr_mysql_exec(db,
                      "INSERT INTO push_task (name, topic, channel, title, body, due_at, "
                      "freeze_at, chunk_size, rate_limit) VALUES ('itest', ?, 'webhook', 'hi', "
                      "'hello {{uid}}', FROM_UNIXTIME(? / 1000), "
                      "FROM_UNIXTIME(? / 1000) + INTERVAL 1 DAY, ?, ?)",
                      p, 5, NULL, &id, NULL, errstr, sizeof errstr) != 0)
        fail_msg("insert task: %s", errstr);
    return (int64_t)id;
}

/* Subscribers FIRST..FIRST+N-1 in Redis (SADD) and/or push_subscription. */
static void subs_add(int64_t task, int64_t first, int64_t n, bool redis, bool mysql)
{
    char key[256], *argv[1002], nums[1000][24];
    int64_t i, j;

    if (mysql) {
        const hr_mysql_param p[] = {HR_P_I64(task), HR_P_I64(first - 1), HR_P_I64(n)};

        sql_exec("INSERT INTO push_subscription (task_id, uid) SELECT ?, seq + ? "
                 "FROM seq_1_to_1000000 LIMIT ?",
                 p, 3);
    }
    if (!redis)
        return;
    hr_key_task(hr_redis_prefix(rd), key, sizeof key, task, HR_KEY_SUBS);
    argv[0] = "SADD";
    argv[1] = key;
    for (i = 0; i < n; i += 1000) {
        int64_t m = n - i < 1000 ? n - i : 1000;
        redisReply *r;

        for (j = 0; j < m; j++) {
            snprintf(nums[j], sizeof nums[j], "%lld", (long long)(first + i + j));
            argv[2 + j] = nums[j];
        }
        r = hr_redis_cmd(rd, errstr, sizeof errstr, (int)(2 + m), (const char **)argv, NULL);
        assert_non_null(r);
        freeReplyObject(r);
    }
}

static char *task_state(int64_t task, char *buf, size_t len)
{
    const hr_mysql_param p[] = {HR_P_I64(task)};
    hr_mysql_rows *rows = NULL;

    if (hr_mysql_query(db, "SELECT state FROM push_task WHERE id = ?", p, 1, &rows, errstr,
                       sizeof errstr) != 0)
        fail_msg("state: %s", errstr);
    snprintf(buf, len, "%s", rows->nrows ? hr_mysql_cell(rows, 0, 0) : "?");
    hr_mysql_rows_free(rows);
    return buf;
}

typedef struct state_wait {
    int64_t task;
    const char *state;
} state_wait;

static bool state_reached(void *ctx)
{
    const state_wait *w = ctx;
    char st[32];

    return strcmp(task_state(w->task, st, sizeof st), w->state) == 0;
}

static void wait_state(int64_t task, const char *state, int timeout_ms)
{
    state_wait w = {task, state};
    char st[32];

    if (!itest_wait_until(state_reached, &w, timeout_ms))
        fail_msg("task %lld: state %s after %d ms, want %s", (long long)task,
                 task_state(task, st, sizeof st), timeout_ms, state);
}

/* Starts dispatcher I with the case's config and topic filter. */
static void dispatcher_start(int i, const char *extra_env)
{
    char *argv[] = {(char *)HERALD_DISPATCHER, "-c", cfg_path, NULL};

    snprintf(log_path[i], sizeof log_path[i], "/tmp/itest-dispatcher-%d-%d-%d.log", (int)getpid(),
             ncase, i);
    unlink(log_path[i]);
    setenv("HERALD_TEST_TASK_TOPIC", task_topic, 1);
    if (extra_env != NULL)
        putenv((char *)extra_env);
    pids[i] = itest_spawn(argv, log_path[i]);
    unsetenv("HERALD_TEST_CRASH_AFTER_MOVE");
    assert_true(pids[i] > 0);
}

static void dispatcher_stop(int i)
{
    int status = 0;

    if (pids[i] <= 0)
        return;
    itest_kill(pids[i], SIGTERM);
    if (itest_wait_exit(pids[i], 20000, &status) != 0) {
        itest_kill(pids[i], SIGKILL);
        itest_wait_exit(pids[i], 5000, &status);
        fail_msg("dispatcher %d did not stop on SIGTERM", i);
    }
    pids[i] = 0;
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Reads the topic for up to TIMEOUT_MS or until TASK has WANT messages. */
static size_t consume_for(int64_t task, size_t want, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;
    size_t i, have;

    for (;;) {
        for (have = 0, i = 0; i < nmsgs; i++)
            have += msgs[i].task == task;
        if (have >= want || itest_now_ms() >= end)
            return have;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer, 200);
        if (m == NULL)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && nmsgs < MAX_MSGS) {
            char why[256];

            if (hr_chunkmsg_decode(m->payload, m->len, &msgs[nmsgs], why, sizeof why) != 0)
                fail_msg("bad chunk message: %s", why);
            snprintf(msg_keys[nmsgs], sizeof msg_keys[nmsgs], "%.*s", (int)m->key_len,
                     (const char *)m->key);
            msg_parts[nmsgs] = m->partition;
            nmsgs++;
        }
        rd_kafka_message_destroy(m);
    }
}

/* Checks that TASK's chunk sets are disjoint and together are exactly
 * FIRST..FIRST+N-1; *SIZES gets each chunk's size by seq (index seq-1). */
static int64_t check_chunks(int64_t task, int64_t first, int64_t n, int64_t *sizes, int64_t max_seq)
{
    char key[HR_KEY_MAX];
    unsigned char *seen = calloc((size_t)n, 1);
    int64_t seq, nseq, total = 0;
    size_t i;

    assert_non_null(seen);
    hr_key_task(hr_redis_prefix(rd), key, sizeof key, task, HR_KEY_SEQ);
    nseq = redis_int("GET %s", key);
    assert_true(nseq >= 1 && nseq <= max_seq);
    for (seq = 1; seq <= nseq; seq++) {
        redisReply *r;

        hr_key_chunk(hr_redis_prefix(rd), key, sizeof key, task, seq);
        r = hr_redis_cmdf(rd, errstr, sizeof errstr, "SMEMBERS %s", key);
        assert_non_null(r);
        sizes[seq - 1] = (int64_t)r->elements;
        for (i = 0; i < r->elements; i++) {
            int64_t uid = strtoll(r->element[i]->str, NULL, 10);

            assert_true(uid >= first && uid < first + n);
            if (seen[uid - first])
                fail_msg("task %lld: uid %lld in two chunks", (long long)task, (long long)uid);
            seen[uid - first] = 1;
            total++;
        }
        freeReplyObject(r);
    }
    free(seen);
    assert_int_equal(total, n);
    hr_key_task(hr_redis_prefix(rd), key, sizeof key, task, HR_KEY_SUBS);
    assert_int_equal(redis_int("SCARD %s", key), 0);
    return nseq;
}

/* How many of TASK's seqs 1..MAX_SEQ have COPIES messages so far. */
static size_t seqs_with(int64_t task, int64_t max_seq, unsigned copies)
{
    unsigned seen[128] = {0};
    size_t i, n = 0;

    assert_true(max_seq < 128);
    for (i = 0; i < nmsgs; i++)
        if (msgs[i].task == task && msgs[i].seq <= max_seq && ++seen[msgs[i].seq] == copies)
            n++;
    return n;
}

/* Reads the topic until each of TASK's seqs 1..MAX_SEQ has COPIES messages,
 * for at most TIMEOUT_MS; fails the case if one has not. */
static void consume_copies(int64_t task, int64_t max_seq, unsigned copies, int timeout_ms)
{
    for (int64_t end = itest_now_ms() + timeout_ms;
         seqs_with(task, max_seq, copies) < (size_t)max_seq && itest_now_ms() < end;)
        consume_for(task, SIZE_MAX, 200);
    assert_int_equal(seqs_with(task, max_seq, copies), max_seq);
}

/* The first publish of each of TASK's chunks 1..MAX_SEQ (every message's
 * seq must be in range): FIRST[seq] its index in msgs[] (-1: none yet); the
 * sweeper republishes chunks that no worker took (there are none here)
 * after redelivery_timeout_s. */
static void first_publishes(int64_t task, int64_t max_seq, ssize_t *first)
{
    size_t i;

    for (int64_t seq = 1; seq <= max_seq; seq++)
        first[seq] = -1;
    for (i = 0; i < nmsgs; i++) {
        int64_t seq = msgs[i].seq;

        if (msgs[i].task != task)
            continue;
        assert_true(seq >= 1 && seq <= max_seq);
        if (first[seq] < 0 || msgs[i].published_ms < msgs[first[seq]].published_ms)
            first[seq] = (ssize_t)i;
    }
}

static size_t log_count(int i, const char *event, int64_t task)
{
    char line[4096], want_event[128], want_task[64];
    FILE *f = fopen(log_path[i], "r");
    size_t n = 0;

    if (f == NULL)
        return 0;
    snprintf(want_event, sizeof want_event, "event=%s ", event);
    snprintf(want_task, sizeof want_task, " task=%lld ", (long long)task);
    while (fgets(line, sizeof line, f) != NULL)
        if (strstr(line, want_event) && strstr(line, want_task))
            n++;
    fclose(f);
    return n;
}

static int case_setup(void **state)
{
    (void)state;
    ncase++;
    snprintf(task_topic, sizeof task_topic, "%s.c%d", cfg->kafka.topic, ncase);
    return 0;
}

static int case_teardown(void **state)
{
    int i;

    (void)state;
    for (i = 0; i < MAX_DISPATCHERS; i++) {
        if (pids[i] > 0) {
            itest_kill(pids[i], SIGKILL);
            itest_wait_exit(pids[i], 5000, NULL);
            pids[i] = 0;
        }
    }
    return 0;
}

/* 12,345 subscribers in Redis -> chunks 5000, 5000, 2345 and one message
 * per chunk with the right fields; push_chunk rows and total recorded. */
static void test_chunks(void **state)
{
    int64_t due = itest_now_ms() + 1000, task = task_insert(due, 5000, 0);
    int64_t sizes[8] = {0}, nseq, seen_seq[8] = {0};
    const hr_mysql_param p[] = {HR_P_I64(task)};
    size_t i, got;

    (void)state;
    subs_add(task, 1, 12345, true, false);
    dispatcher_start(0, NULL);
    wait_state(task, "dispatched", 20000);
    /* The third move took fewer than it asked for, so subs was empty: no
     * fourth, empty move. */
    nseq = check_chunks(task, 1, 12345, sizes, 4);
    assert_int_equal(nseq, 3);
    assert_int_equal(sizes[0], 5000);
    assert_int_equal(sizes[1], 5000);
    assert_int_equal(sizes[2], 2345);
    got = consume_for(task, 3, 15000);
    assert_int_equal(got, 3);
    for (i = 0; i < nmsgs; i++) {
        char key[64];

        if (msgs[i].task != task)
            continue;
        assert_true(msgs[i].seq >= 1 && msgs[i].seq <= 3);
        assert_int_equal(msgs[i].count, sizes[msgs[i].seq - 1]);
        assert_int_equal(msgs[i].due_ms, due);
        assert_true(msgs[i].published_ms >= due);
        snprintf(key, sizeof key, "%lld:%lld", (long long)task, (long long)msgs[i].seq);
        assert_string_equal(msg_keys[i], key);
        assert_int_equal(seen_seq[msgs[i].seq]++, 0);
    }
    assert_int_equal(sql_int("SELECT COUNT(*) FROM push_chunk WHERE task_id = ?", p, 1), 3);
    assert_int_equal(sql_int("SELECT total FROM push_task WHERE id = ?", p, 1), 12345);
    dispatcher_stop(0);
}

/* Due in 2 s -> claimed within a second of due (target: 200 ms). */
static void test_claim_lag(void **state)
{
    int64_t due = itest_now_ms() + 2000, task, lag;
    hr_mysql_param p[1];

    (void)state;
    dispatcher_start(0, NULL);
    task = task_insert(due, 5000, 0);
    subs_add(task, 1, 10, true, false);
    wait_state(task, "dispatched", 10000);
    p[0] = HR_P_I64(task);
    lag = sql_int("SELECT CAST(ROUND(UNIX_TIMESTAMP(started_at) * 1000) AS SIGNED) - "
                  "CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED) FROM push_task "
                  "WHERE id = ?",
                  p, 1);
    printf("# claim lag %lld ms\n", (long long)lag);
    assert_true(lag >= 0 && lag <= 1000);
    assert_int_equal(log_count(0, "task_claimed", task), 1);
    dispatcher_stop(0);
}

static bool timer_has(void *ctx)
{
    char key[256];
    redisReply *r;
    bool has;

    hr_key_timer(hr_redis_prefix(rd), key, sizeof key);
    r = hr_redis_cmdf(rd, errstr, sizeof errstr, "ZSCORE %s %lld", key, (long long)*(int64_t *)ctx);
    has = r != NULL && r->type == REDIS_REPLY_STRING;
    freeReplyObject(r);
    return has;
}

/* The timer entry deleted by hand -> the DB poller claims the task 3-5 s
 * after due (poller_grace_ms 3000, poller_interval_ms 1000). */
static void test_poller(void **state)
{
    int64_t due = itest_now_ms() + 2500, task = task_insert(due, 5000, 0), lag;
    const hr_mysql_param p[] = {HR_P_I64(task)};
    char key[256];

    (void)state;
    subs_add(task, 1, 10, true, false);
    dispatcher_start(0, NULL);
    assert_true(itest_wait_until(timer_has, &task, 2000));
    hr_key_timer(hr_redis_prefix(rd), key, sizeof key);
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "ZREM %s %lld", key, (long long)task));
    wait_state(task, "dispatched", 10000);
    lag = sql_int("SELECT CAST(ROUND(UNIX_TIMESTAMP(started_at) * 1000) AS SIGNED) - "
                  "CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED) FROM push_task "
                  "WHERE id = ?",
                  p, 1);
    printf("# poller claim lag %lld ms\n", (long long)lag);
    assert_true(lag >= 3000 && lag <= 5000);
    dispatcher_stop(0);
}

/* Two dispatchers, 50 tasks due the same second: each claimed once, every
 * chunk published once, chunk sets disjoint. */
static void test_two_dispatchers(void **state)
{
    int64_t due = (itest_now_ms() / 1000 + 3) * 1000, tasks[50], sizes[8];
    size_t i, k, claims;

    (void)state;
    for (i = 0; i < 50; i++) {
        tasks[i] = task_insert(due + (int64_t)(i % 10), 40, 0);
        subs_add(tasks[i], 1, 100, true, false);
    }
    dispatcher_start(0, NULL);
    dispatcher_start(1, NULL);
    for (i = 0; i < 50; i++)
        wait_state(tasks[i], "dispatched", 20000);
    for (i = 0; i < 50; i++) {
        assert_int_equal(check_chunks(tasks[i], 1, 100, sizes, 4), 3); /* 40+40+20 */
        claims = log_count(0, "task_claimed", tasks[i]) + log_count(1, "task_claimed", tasks[i]);
        assert_int_equal(claims, 1);
    }
    consume_for(tasks[49], 3, 15000);
    for (i = 0; i < 50; i++) {
        size_t per_seq[5] = {0};

        consume_for(tasks[i], 3, 5000);
        for (k = 0; k < nmsgs; k++)
            if (msgs[k].task == tasks[i])
                per_seq[msgs[k].seq]++;
        assert_int_equal(per_seq[1], 1);
        assert_int_equal(per_seq[2], 1);
        assert_int_equal(per_seq[3], 1);
    }
    dispatcher_stop(0);
    dispatcher_stop(1);
}

/* kill -9 of the owner in the middle of a 50,000-recipient task: the other
 * dispatcher takes over after the lease; every recipient is in exactly one
 * chunk and every chunk is published. */
static void test_takeover(void **state)
{
    int64_t due = itest_now_ms() + 1000, task = task_insert(due, 2500, 10000);
    int64_t sizes[64], nseq, seq;
    const hr_mysql_param p[] = {HR_P_I64(task)};
    hr_mysql_rows *rows = NULL;
    char key[256], owner[256];
    int victim;
    size_t k;

    (void)state;
    subs_add(task, 1, 50000, true, false);
    dispatcher_start(0, NULL);
    dispatcher_start(1, NULL);
    wait_state(task, "dispatching", 5000);
    hr_key_task(hr_redis_prefix(rd), key, sizeof key, task, HR_KEY_SEQ);
    for (k = 0; k < 200 && redis_int("GET %s", key) < 5; k++)
        usleep(20000);
    assert_true(redis_int("GET %s", key) >= 5);
    if (hr_mysql_query(db, "SELECT claimed_by FROM push_task WHERE id = ?", p, 1, &rows, errstr,
                       sizeof errstr) != 0)
        fail_msg("%s", errstr);
    snprintf(owner, sizeof owner, "%s", hr_mysql_cell(rows, 0, 0));
    hr_mysql_rows_free(rows);
    victim = atoi(strrchr(owner, '/') + 1) == pids[0] ? 0 : 1;
    assert_int_equal(atoi(strrchr(owner, '/') + 1), pids[victim]);
    itest_kill(pids[victim], SIGKILL);
    itest_wait_exit(pids[victim], 5000, NULL);
    pids[victim] = 0;
    wait_state(task, "dispatched", 30000);
    assert_int_equal(log_count(1 - victim, "task_claimed", task), 1);
    nseq = check_chunks(task, 1, 50000, sizes, 64);
    for (seq = 1; seq <= nseq; seq++) {
        size_t have = 0;
        int64_t end = itest_now_ms() + 10000;

        if (sizes[seq - 1] == 0)
            continue;
        while (have == 0 && itest_now_ms() < end) {
            consume_for(task, (size_t)nseq + 100, 200);
            for (k = 0; k < nmsgs; k++)
                have += msgs[k].task == task && msgs[k].seq == seq;
        }
        if (have == 0)
            fail_msg("task %lld: chunk %lld never published", (long long)task, (long long)seq);
    }
    dispatcher_stop(1 - victim);
}

/* rate_limit 2000/s, 20,000 recipients, chunk_size 500: no second (by
 * published_ms) carries more than 2000 recipients but one chunk, and by the
 * end of each second no more than 2000 a second have been published but one
 * chunk.  The grant is counted in the second Redis read (dsp_grant gives up
 * one whose call crossed a second), but the chunk is stamped at its produce,
 * after the tick's seq and move round trips: the tick in flight across a
 * second's end carries its one chunk of this task into the next second's
 * stamps (a CI run beside other suites saw 1,000 then 2,500).  The ticks run
 * one after another, so at most that one chunk per second's end. */
static void test_rate_limit(void **state)
{
    int64_t due = itest_now_ms() + 500, task = task_insert(due, 500, 2000);
    int64_t sizes[64], first_s = -1, last_s = 0, per[64] = {0}, first_pub[41] = {0}, seq, sum = 0;
    ssize_t first[41];
    size_t i;

    (void)state;
    subs_add(task, 1, 20000, true, false);
    dispatcher_start(0, NULL);
    wait_state(task, "dispatched", 30000);
    assert_int_equal(check_chunks(task, 1, 20000, sizes, 64), 41);
    consume_copies(task, 40, 1, 15000);
    first_publishes(task, 40, first);
    for (seq = 1; seq <= 40; seq++) {
        assert_true(first[seq] >= 0);
        first_pub[seq] = msgs[first[seq]].published_ms;
        if (first_s < 0 || first_pub[seq] / 1000 < first_s)
            first_s = first_pub[seq] / 1000;
    }
    for (seq = 1; seq <= 40; seq++) {
        int64_t s = first_pub[seq] / 1000 - first_s;

        assert_true(s >= 0 && s < 64);
        per[s] += sizes[seq - 1];
        if (s > last_s)
            last_s = s;
    }
    for (i = 0; i <= (size_t)last_s; i++) {
        printf("# second %zu: %lld recipients\n", i, (long long)per[i]);
        sum += per[i];
        assert_true(per[i] <= 2000 + 500);
        assert_true(sum <= 2000 * (int64_t)(i + 1) + 500);
    }
    assert_true(last_s >= 9); /* 20,000 at 2000/s needs ten seconds */
    dispatcher_stop(0);
}

/* A redelivery is keyed apart from its chunk's first publish (its publish
 * time appended), so the partitioner places it afresh: a chunk whose first
 * copy sits on a partition no consumer fetches is not redelivered to that
 * partition for ever.  No worker runs here, so the sweeper redelivers every
 * chunk after redelivery_timeout_s (2 s).  With the first publish's key on
 * every copy, as before, every copy of a chunk landed on one partition. */
static void test_redelivery_moves(void **state)
{
    int64_t due = itest_now_ms() + 500, task = task_insert(due, 500, 0), sizes[16];
    ssize_t first[9];
    int64_t seq;
    size_t i, moved = 0, copies = 0;

    (void)state;
    subs_add(task, 1, 3900, true, false);
    dispatcher_start(0, NULL);
    wait_state(task, "dispatched", 30000);
    assert_int_equal(check_chunks(task, 1, 3900, sizes, 16), 8);
    consume_copies(task, 8, 2, 20000);
    first_publishes(task, 8, first);
    for (i = 0; i < nmsgs; i++) {
        char key[64];

        if (msgs[i].task != task)
            continue;
        seq = msgs[i].seq;
        if ((ssize_t)i == first[seq]) {
            snprintf(key, sizeof key, "%lld:%lld", (long long)task, (long long)seq);
        } else {
            snprintf(key, sizeof key, "%lld:%lld:%lld", (long long)task, (long long)seq,
                     (long long)msgs[i].published_ms);
            copies++;
            moved += msg_parts[i] != msg_parts[first[seq]];
        }
        assert_string_equal(msg_keys[i], key);
    }
    /* Each copy leaves its first partition with chance 11/12 (12 partitions):
     * none of at least 8 doing so has odds below 1e-8. */
    printf("# %zu redeliveries, %zu on another partition than their first publish\n", copies,
           moved);
    assert_true(copies >= 8);
    assert_true(moved > 0);
    dispatcher_stop(0);
}

/* Every bad row becomes failed with a readable last_error while a good
 * task beside it is dispatched; subscribers loaded only into
 * push_subscription by raw SQL are dispatched all the same. */
static void test_bad_rows_and_raw_sql(void **state)
{
    static const char *const bad[] = {
        "channel = 'nosuch'",
        "chunk_size = 0",
        "chunk_size = 100001",
        "due_at = NULL",
        "local_time = 3",
        "local_time = 3, due_at = UTC_TIMESTAMP(3) + INTERVAL 30 DAY",
        "throttle_limit = 5, throttle_window_s = 0",
        "throttle_limit = 5, throttle_window_s = 2678401",
        "rate_limit = -1",
        "payload = '[1, 2]'",
        "payload = 'not json'",
        "title = 'hello {{uid'",
        "body = '{{nosuch}}'",
    };
    const size_t nbad = sizeof bad / sizeof bad[0];
    int64_t due = itest_now_ms() + 1500, ids[16], good, sizes[8];
    size_t i;

    (void)state;
    for (i = 0; i < nbad; i++) {
        char sql[256];
        hr_mysql_param p[1];

        ids[i] = task_insert(due, 5000, 0);
        snprintf(sql, sizeof sql, "UPDATE push_task SET %s WHERE id = ?", bad[i]);
        p[0] = HR_P_I64(ids[i]);
        sql_exec(sql, p, 1);
        subs_add(ids[i], 1, 10, true, false);
    }
    good = task_insert(due, 1000, 0);
    subs_add(good, 1, 2345, false, true); /* MySQL only */
    dispatcher_start(0, NULL);
    wait_state(good, "dispatched", 20000);
    for (i = 0; i < nbad; i++) {
        const hr_mysql_param p[] = {HR_P_I64(ids[i])};
        hr_mysql_rows *rows = NULL;

        wait_state(ids[i], "failed", 5000);
        if (hr_mysql_query(db, "SELECT last_error FROM push_task WHERE id = ?", p, 1, &rows, errstr,
                           sizeof errstr) != 0)
            fail_msg("%s", errstr);
        assert_non_null(hr_mysql_cell(rows, 0, 0));
        printf("# %s -> %s\n", bad[i], hr_mysql_cell(rows, 0, 0));
        assert_true(strlen(hr_mysql_cell(rows, 0, 0)) > 5);
        hr_mysql_rows_free(rows);
    }
    assert_int_equal(check_chunks(good, 1, 2345, sizes, 4), 3);
    assert_int_equal(sizes[0] + sizes[1] + sizes[2], 2345);
    dispatcher_stop(0);
}

/* A row claimed under the dispatcher's name that it never took into
 * memory (a claim whose reply was lost): renewal must not keep it ours and
 * unchunked forever; the dispatcher adopts and dispatches it. */
static void test_orphan_adopted(void **state)
{
    /* due beyond the horizon: neither the scanner nor the poller touch it */
    int64_t task = task_insert(itest_now_ms() + 3600 * 1000, 50, 0), sizes[4];
    char owner[256];

    (void)state;
    subs_add(task, 1, 120, true, false);
    dispatcher_start(0, NULL);
    snprintf(owner, sizeof owner, "%s/%d", cfg->instance, (int)pids[0]);
    {
        const hr_mysql_param p[] = {HR_P_STR(owner), HR_P_I64(task)};

        sql_exec("UPDATE push_task SET state = 'dispatching', claimed_by = ?, "
                 "started_at = UTC_TIMESTAMP(3), "
                 "lease_until = UTC_TIMESTAMP(3) + INTERVAL 1 HOUR WHERE id = ?",
                 p, 2);
    }
    wait_state(task, "dispatched", 10000);
    assert_int_equal(check_chunks(task, 1, 120, sizes, 4), 3); /* 50+50+20 */
    dispatcher_stop(0);
}

static bool timer_lacks(void *ctx)
{
    return !timer_has(ctx);
}

/* A task postponed beyond the horizon: the scanner takes its timer entry
 * out; and a stale entry that pops anyway (score of the old due time) is
 * refused by the claim, so the task stays scheduled. */
static void test_postponed(void **state)
{
    int64_t now = itest_now_ms(), moved = task_insert(now + 4000, 50, 0);
    int64_t stale = task_insert(now + 7200 * 1000, 50, 0);
    char key[256], st[32];
    const hr_mysql_param p[] = {HR_P_I64(moved)};

    (void)state;
    subs_add(moved, 1, 10, true, false);
    subs_add(stale, 1, 10, true, false);
    hr_key_timer(hr_redis_prefix(rd), key, sizeof key);
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "ZADD %s %lld %lld", key,
                                  (long long)(now - 1000), (long long)stale));
    dispatcher_start(0, NULL);
    assert_true(itest_wait_until(timer_has, &moved, 3000));
    sql_exec("UPDATE push_task SET due_at = due_at + INTERVAL 2 HOUR, "
             "freeze_at = freeze_at + INTERVAL 2 HOUR WHERE id = ?",
             p, 1);
    /* well before the old due time: only the scanner can have removed it */
    assert_true(itest_wait_until(timer_lacks, &moved, 2500));
    assert_true(itest_wait_until(timer_lacks, &stale, 3000)); /* popped, refused */
    usleep(3000 * 1000); /* past the old due time and one poller round */
    assert_string_equal(task_state(moved, st, sizeof st), "scheduled");
    assert_string_equal(task_state(stale, st, sizeof st), "scheduled");
    dispatcher_stop(0);
}

/* Task ID's pending chunks no worker holds (the run-ahead, dsp_ahead.c). */
static int64_t chunks_unheld(int64_t id)
{
    char key[HR_KEY_MAX];
    redisReply *r;
    int64_t n = 0;

    hr_key_task(hr_redis_prefix(rd), key, sizeof key, id, HR_KEY_PENDING);
    r = hr_redis_cmdf(rd, errstr, sizeof errstr, "HKEYS %s", key);
    assert_non_null(r);
    for (size_t i = 0; i < r->elements; i++) {
        hr_key_lease(hr_redis_prefix(rd), key, sizeof key, id,
                     strtoll(r->element[i]->str, NULL, 10));
        n += redis_int("EXISTS %s", key) == 0;
    }
    freeReplyObject(r);
    return n;
}

/* Takes (LEASE true) or ends (false: the chunk is done, set, pending entry
 * and lease gone) chunk SEQ of task ID, as a worker would.  The size of
 * the chunk ended, or 0. */
static int64_t chunk_as_worker(int64_t id, int64_t seq, bool lease)
{
    char key[HR_KEY_MAX], seq_s[24];
    int64_t size;

    hr_key_lease(hr_redis_prefix(rd), key, sizeof key, id, seq);
    freeReplyObject(
        hr_redis_cmdf(rd, errstr, sizeof errstr, lease ? "SET %s itest" : "DEL %s", key));
    if (lease)
        return 0;
    hr_key_chunk(hr_redis_prefix(rd), key, sizeof key, id, seq);
    size = redis_int("SCARD %s", key);
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "DEL %s", key));
    hr_key_task(hr_redis_prefix(rd), key, sizeof key, id, HR_KEY_PENDING);
    snprintf(seq_s, sizeof seq_s, "%lld", (long long)seq);
    freeReplyObject(hr_redis_cmdf(rd, errstr, sizeof errstr, "HDEL %s %s", key, seq_s));
    return size;
}

typedef struct seq_wait {
    int64_t task, seq;
} seq_wait;

static bool seq_reached(void *ctx)
{
    const seq_wait *w = ctx;
    char key[HR_KEY_MAX];

    hr_key_task(hr_redis_prefix(rd), key, sizeof key, w->task, HR_KEY_SEQ);
    return redis_int("GET %s", key) >= w->seq;
}

/* Whether task *CTX was made dispatched (dispatched_at is set): the
 * sweeper may already have made it done, tens of ms after. */
static bool dispatched_reached(void *ctx)
{
    const hr_mysql_param p[] = {HR_P_I64(*(const int64_t *)ctx)};

    return sql_int("SELECT dispatched_at IS NOT NULL FROM push_task WHERE id = ?", p, 1) == 1;
}

/* dispatcher.chunks_ahead 3, no worker: a task of 10 chunks stops after 3
 * moves; each chunk a worker takes (its lease) lets one more move, a chunk
 * that ends lets none (it was taken before); the task is dispatched once
 * every chunk moved.  At no time do more than 3 wait for a worker. */
static void test_chunks_ahead(void **state)
{
    int64_t task = task_insert(itest_now_ms() + 500, 100, 0), seq, pushed = 0;
    char saved[sizeof cfg_path], st[32];
    seq_wait w = {task, 3};

    (void)state;
    subs_add(task, 1, 1000, true, false);
    snprintf(saved, sizeof saved, "%s", cfg_path);
    cfg->dispatcher.chunks_ahead = 3;
    assert_int_equal(itest_write_config(cfg, cfg_path, sizeof cfg_path), 0);
    cfg->dispatcher.chunks_ahead = 0;
    dispatcher_start(0, NULL);
    assert_true(itest_wait_until(seq_reached, &w, 10000));
    usleep(1000 * 1000); /* twenty rechecks: still 3 */
    w.seq = 4;
    assert_false(seq_reached(&w));
    assert_int_equal(chunks_unheld(task), 3);
    assert_string_equal(task_state(task, st, sizeof st), "dispatching");
    /* Workers take and finish the chunks one at a time: each one taken
     * lets one more move. */
    for (seq = 1; seq <= 10; seq++) {
        chunk_as_worker(task, seq, true);
        w.seq = seq + 3 < 10 ? seq + 3 : 10;
        assert_true(itest_wait_until(seq_reached, &w, 5000));
        assert_true(chunks_unheld(task) <= 3);
        pushed += chunk_as_worker(task, seq, false);
    }
    /* Every chunk ended here, so the sweeper makes the task done as soon as
     * it sees it dispatched: under load that came within one poll of the
     * state (logs: task_dispatched, then task_done 10-18 ms later). */
    assert_true(itest_wait_until(dispatched_reached, &task, 10000));
    assert_int_equal(pushed, 1000);
    dispatcher_stop(0);
    unlink(cfg_path);
    snprintf(cfg_path, sizeof cfg_path, "%s", saved);
}

/* Puts TASKS[N] into the timer at DUE in one ZADD, so that one pop gets
 * them all. */
static void timer_add_all(const int64_t *tasks, size_t n, int64_t due)
{
    char key[HR_KEY_MAX], nums[16][2][24];
    const char *argv[2 + 2 * 16];
    size_t i, argc = 0;
    redisReply *r;

    assert_true(n <= 16);
    hr_key_timer(hr_redis_prefix(rd), key, sizeof key);
    argv[argc++] = "ZADD";
    argv[argc++] = key;
    for (i = 0; i < n; i++) {
        snprintf(nums[i][0], sizeof nums[i][0], "%lld", (long long)due);
        snprintf(nums[i][1], sizeof nums[i][1], "%lld", (long long)tasks[i]);
        argv[argc++] = nums[i][0];
        argv[argc++] = nums[i][1];
    }
    r = hr_redis_cmd(rd, errstr, sizeof errstr, (int)argc, argv, NULL);
    assert_non_null(r);
    freeReplyObject(r);
}

/* Four due tasks popped together and claimed in one statement; one of them
 * became invalid after the scanner last saw it (here: it never did, its
 * topic is not the scanner's): that one is failed with its last_error, the
 * three others are claimed and dispatched. */
static void test_claim_batch_bad_row(void **state)
{
    int64_t due = itest_now_ms() + 1500, tasks[4], sizes[4];
    char st[32];
    hr_mysql_rows *rows = NULL;
    size_t i;

    (void)state;
    for (i = 0; i < 4; i++) {
        tasks[i] = task_insert(due, 100, 0);
        subs_add(tasks[i], 1, 150, true, true);
    }
    {
        const hr_mysql_param pu[] = {HR_P_I64(tasks[0]), HR_P_I64(tasks[3])};

        /* Out of the scanner's and the poller's sight (topic filter): only
         * the timer entries below can start them. */
        sql_exec("UPDATE push_task SET topic = CONCAT(topic, '.hidden') "
                 "WHERE id BETWEEN ? AND ?",
                 pu, 2);
    }
    {
        const hr_mysql_param pb[] = {HR_P_I64(tasks[2])};

        sql_exec("UPDATE push_task SET chunk_size = 0 WHERE id = ?", pb, 1);
    }
    timer_add_all(tasks, 4, due);
    dispatcher_start(0, NULL);
    wait_state(tasks[2], "failed", 10000);
    for (i = 0; i < 4; i++)
        if (i != 2) {
            wait_state(tasks[i], "dispatched", 10000);
            assert_int_equal(check_chunks(tasks[i], 1, 150, sizes, 4), 2);
        }
    {
        const hr_mysql_param pb[] = {HR_P_I64(tasks[2])};

        if (hr_mysql_query(db,
                           "SELECT last_error, claimed_by IS NOT NULL FROM push_task WHERE id = ?",
                           pb, 1, &rows, errstr, sizeof errstr) != 0)
            fail_msg("%s", errstr);
    }
    assert_non_null(strstr(hr_mysql_cell(rows, 0, 0), "chunk_size 0 is outside"));
    assert_string_equal(hr_mysql_cell(rows, 0, 1), "1"); /* it was claimed, then failed */
    hr_mysql_rows_free(rows);
    assert_string_equal(task_state(tasks[2], st, sizeof st), "failed");
    assert_int_equal(log_count(0, "task_claimed", tasks[2]), 0);
    assert_int_equal(log_count(0, "claim_deferred", tasks[0]), 0);
    dispatcher_stop(0);
}

/* A claim batch racing a subscription insert: a transaction inserts a
 * subscription into task B and stays open for 2.5 s while A and B are due
 * and popped together.  The batch waits for B's row, gives up after a
 * second, and claims one at a time: A at once, B deferred (claim_deferred)
 * and claimed by the poller once the insert committed, its new subscriber
 * chunked with the others (the guard: nothing inserted before the claim is
 * skipped). */
static void test_claim_batch_insert_race(void **state)
{
    int64_t due = itest_now_ms() + 1500, tasks[2], sizes[4];
    hr_mysql *tx = NULL;

    (void)state;
    tasks[0] = task_insert(due, 100, 0);
    tasks[1] = task_insert(due, 100, 0);
    subs_add(tasks[0], 1, 150, true, true);
    subs_add(tasks[1], 1, 150, true, true);
    if (hr_mysql_connect(cfg, &tx, errstr, sizeof errstr) != 0)
        fail_msg("connect: %s", errstr);
    dispatcher_start(0, NULL);
    while (itest_now_ms() < due - 300)
        usleep(20 * 1000);
    {
        const hr_mysql_param p[] = {HR_P_I64(tasks[1])};

        if (hr_mysql_begin(tx, errstr, sizeof errstr) != 0 ||
            hr_mysql_exec(tx, "INSERT INTO push_subscription (task_id, uid) VALUES (?, 151)", p, 1,
                          NULL, NULL, NULL, errstr, sizeof errstr) != 0)
            fail_msg("insert: %s", errstr);
    }
    wait_state(tasks[0], "dispatched", 5000);
    usleep(1500 * 1000); /* the transaction stays open 2.5 s or more */
    if (hr_mysql_commit(tx, errstr, sizeof errstr) != 0)
        fail_msg("commit: %s", errstr);
    hr_mysql_free(tx);
    wait_state(tasks[1], "dispatched", 15000);
    assert_true(log_count(0, "claim_deferred", tasks[1]) >= 1);
    assert_int_equal(log_count(0, "claim_deferred", tasks[0]), 0);
    assert_int_equal(check_chunks(tasks[0], 1, 150, sizes, 4), 2);
    assert_int_equal(check_chunks(tasks[1], 1, 151, sizes, 4), 2);
    dispatcher_stop(0);
}

/* Redis's count of SCARD calls so far (INFO commandstats). */
static int64_t scard_calls(void)
{
    redisReply *r = hr_redis_cmdf(rd, errstr, sizeof errstr, "INFO commandstats");
    const char *at;
    int64_t n = 0;

    assert_non_null(r);
    at = r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_scard:calls=") : NULL;
    if (at != NULL)
        n = strtoll(at + strlen("cmdstat_scard:calls="), NULL, 10);
    freeReplyObject(r);
    return n;
}

/* 60 tasks of one channel due together, admitted by one scan: each
 * estimate sizes the other 59 too, but the scan reads each subscriber set
 * once (dsp_pace.c's memo).  Read per estimate, the first scan's admissions
 * alone took 60 x 60 SCARDs; what remains is the scans' own count of each
 * task's subs and pulled sets (2 a task every 200 ms) and one per task for
 * admission. */
static void test_admit_sizes_once(void **state)
{
    enum { N = 60 };
    int64_t due = itest_now_ms() + 8000, tasks[N], before, spent;
    size_t i;

    (void)state;
    for (i = 0; i < N; i++) {
        tasks[i] = task_insert(due, 5000, 0);
        subs_add(tasks[i], 1, 10, true, false);
    }
    before = scard_calls();
    dispatcher_start(0, NULL);
    for (i = 0; i < N; i++)
        assert_true(itest_wait_until(timer_has, &tasks[i], 5000));
    usleep(1000 * 1000); /* the first scan's admissions are done */
    spent = scard_calls() - before;
    dispatcher_stop(0);
    assert_true(itest_now_ms() < due); /* every estimate was before due */
    printf("# %lld SCARDs for %d tasks' scans and admissions\n", (long long)spent, N);
    assert_true(spent < N * N);
}

/* Makes TASK `dispatched` by OWNER (NULL: none recorded) AGO_S seconds
 * ago, nothing pending and nothing left: what a sweeper ends. */
static void dispatched_by(int64_t task, const char *owner, int ago_s)
{
    const hr_mysql_param p[] = {owner ? HR_P_STR(owner) : HR_P_NULL, HR_P_I64(ago_s),
                                HR_P_I64(task)};

    sql_exec("UPDATE push_task SET state = 'dispatched', claimed_by = ?, "
             "started_at = UTC_TIMESTAMP(3), "
             "dispatched_at = UTC_TIMESTAMP(3) - INTERVAL ? SECOND WHERE id = ?",
             p, 3);
}

static bool done_reached(void *ctx)
{
    char st[32];

    return strcmp(task_state(*(const int64_t *)ctx, st, sizeof st), "done") == 0;
}

/* Milliseconds from TASK's dispatched_at to its finished_at. */
static int64_t done_after_ms(int64_t task)
{
    const hr_mysql_param p[] = {HR_P_I64(task)};

    return sql_int("SELECT TIMESTAMPDIFF(MICROSECOND, dispatched_at, finished_at) DIV 1000 "
                   "FROM push_task WHERE id = ?",
                   p, 1);
}

/* A `dispatched` task another dispatcher made so is that one's sweeper's
 * for two sweep intervals (500 ms here): this sweeper leaves it meanwhile,
 * then ends it, the safety net for an owner that died.  Its own tasks,
 * those with no owner recorded and those dispatched that long ago it ends
 * at its next sweep. */
static void test_sweep_owner(void **state)
{
    int64_t later = itest_now_ms() + 3600 * 1000, mine = task_insert(later, 100, 0);
    int64_t other = task_insert(later, 100, 0), old = task_insert(later, 100, 0);
    int64_t none = task_insert(later, 100, 0), grace = 2 * cfg->dispatcher.sweep_interval_ms;
    char owner[256];

    (void)state;
    dispatcher_start(0, NULL);
    snprintf(owner, sizeof owner, "%s/%d", cfg->instance, (int)pids[0]);
    dispatched_by(mine, owner, 0);
    dispatched_by(other, "elsewhere/1", 0);
    dispatched_by(old, "elsewhere/1", 2 * (int)grace / 1000 + 1);
    dispatched_by(none, NULL, 0);
    assert_true(itest_wait_until(done_reached, &mine, 10000));
    assert_true(itest_wait_until(done_reached, &old, 5000));
    assert_true(itest_wait_until(done_reached, &none, 5000));
    assert_true(itest_wait_until(done_reached, &other, 10000));
    printf("# done after dispatched: own %lld ms, another's %lld ms\n",
           (long long)done_after_ms(mine), (long long)done_after_ms(other));
    assert_true(done_after_ms(other) >= grace);
    assert_int_equal(log_count(0, "task_done", other), 1);
    dispatcher_stop(0);
}

/* Whether the dispatcher under test carries the test seams this suite
 * relies on (the topic filter, the crash after a move): its --version says
 * so when built with -Dtest_seams=true. */
static bool dispatcher_has_seams(void)
{
    FILE *f = popen(HERALD_DISPATCHER " --version", "r");
    char line[256];
    bool on = false;

    if (f == NULL)
        return false;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "test seams: on", 14) == 0)
            on = true;
    pclose(f);
    return on;
}

/* This connection's Handler_read_next so far (SHOW SESSION STATUS). */
static int64_t rows_read(void)
{
    int64_t n = itest_sql_i64(db, "SHOW SESSION STATUS LIKE 'Handler_read_next'", 1);

    assert_true(n >= 0);
    return n;
}

/* The count of a task of no series (the finish's, heraldctl status's)
 * reads each of its subscriptions once: the series terms' scans of the
 * task's rows are not run. */
static void test_count_reads(void **state)
{
    int64_t task = task_insert(itest_now_ms() + 3600000, 5000, 0), before;

    (void)state;
    subs_add(task, 1, 3000, false, true);
    before = rows_read();
    assert_int_equal(hr_subs_count(db, task, errstr, sizeof errstr), 3000);
    assert_in_range(rows_read() - before, 3000, 3010);
}

/* Rows MariaDB read on the test's connection so far, by any access, with
 * the index entries an index condition (ICP) looked at and passed over
 * inside InnoDB: Handler_read_next counts only those it handed on. */
static int64_t rows_read_any(void)
{
    return rows_read() + itest_sql_i64(db, "SHOW SESSION STATUS LIKE 'Handler_read_rnd_next'", 1) +
           itest_sql_i64(db, "SHOW SESSION STATUS LIKE 'Handler_read_key'", 1) +
           itest_sql_i64(db, "SHOW SESSION STATUS LIKE 'Handler_icp_attempts'", 1) -
           itest_sql_i64(db, "SHOW SESSION STATUS LIKE 'Handler_icp_match'", 1);
}

/* Rows read by STATEMENT (params P, NP), which must succeed; its result
 * in *ROWS (the caller frees it) unless ROWS is NULL. */
static int64_t reads_of(const char *sql, const hr_mysql_param *p, size_t np, hr_mysql_rows **rows)
{
    int64_t before = rows_read_any(), read;
    hr_mysql_rows *got = NULL;

    if (hr_mysql_query(db, sql, p, np, &got, errstr, sizeof errstr) != 0)
        fail_msg("%s: %s", sql, errstr);
    read = rows_read_any() - before;
    if (rows != NULL)
        *rows = got;
    else
        hr_mysql_rows_free(got);
    return read;
}

/* The pull's tasks of a uid (HR_SUBS_PULL_TASKS_FROM) are read from its
 * subscriptions and its series' occurrences, not from a scan of every
 * task: 500 finished tasks of history beside them add no read.  A
 * cancelled task the uid subscribes to is not returned; an occurrence it
 * reaches only by its series is; one it reaches both ways is returned
 * once. */
static void test_pull_reads(void **state)
{
    int64_t due = itest_now_ms() + 3600000, uid = 7000000000000 + (int64_t)getpid(), live, gone;
    int64_t occ, series, read;
    const hr_mysql_param hist[] = {HR_P_STR(task_topic)};
    const hr_mysql_param pull[] = {HR_P_I64(uid), HR_P_I64(uid), HR_P_I64(uid),
                                   HR_P_I64(due - 43200000), HR_P_I64(due + 43200000)};
    hr_mysql_rows *rows = NULL;

    (void)state;
    live = task_insert(due, 5000, 0);
    gone = task_insert(due + 60000, 5000, 0);
    subs_add(live, uid, 1, false, true);
    subs_add(gone, uid, 1, false, true);
    {
        const hr_mysql_param p[] = {HR_P_I64(live), HR_P_I64(gone)};

        sql_exec("UPDATE push_task SET freeze_at = UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE "
                 "WHERE id IN (?, ?)",
                 p, 2);
    }
    {
        const hr_mysql_param p[] = {HR_P_I64(gone)};

        sql_exec("UPDATE push_task SET state = 'cancelled' WHERE id = ?", p, 1);
    }
    /* An ended series (no scanner writes occurrences of it) whose two
     * occurrences are LIVE and OCC, the uid subscribed to it. */
    {
        uint64_t id = 0;

        if (hr_mysql_exec(db,
                          "INSERT INTO push_series (name, topic, channel, rrule, dtstart, state) "
                          "VALUES ('itest pull', ?, 'webhook', 'FREQ=DAILY', UTC_TIMESTAMP(), "
                          "'ended')",
                          hist, 1, NULL, &id, NULL, errstr, sizeof errstr) != 0)
            fail_msg("insert series: %s", errstr);
        series = (int64_t)id;
    }
    occ = task_insert(due + 120000, 5000, 0);
    {
        const hr_mysql_param p[] = {HR_P_I64(series), HR_P_I64(live), HR_P_I64(occ),
                                    HR_P_I64(series), HR_P_I64(uid)};

        sql_exec("UPDATE push_task SET series_id = ?, occurrence_at = due_at, "
                 "freeze_at = UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE WHERE id IN (?, ?)",
                 p, 3);
        sql_exec("INSERT INTO push_series_subscription (series_id, uid, subscribed_at) "
                 "VALUES (?, ?, UTC_TIMESTAMP(3) - INTERVAL 1 HOUR)",
                 p + 3, 2);
    }
    sql_exec("INSERT INTO push_task (name, topic, channel, due_at, state) SELECT 'history', ?, "
             "'webhook', UTC_TIMESTAMP(3) - INTERVAL seq HOUR, 'done' FROM seq_1_to_500",
             hist, 1);
    read = reads_of("SELECT push_task.id" HR_SUBS_PULL_TASKS_FROM, pull, 5, &rows);
    assert_int_equal(rows->nrows, 2);
    assert_int_equal(strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10), live);
    assert_int_equal(strtoll(hr_mysql_cell(rows, 1, 0), NULL, 10), occ);
    hr_mysql_rows_free(rows);
    /* Two subscriptions, a series subscription and its occurrences, their
     * tasks by key and the derived tables' rows; a scan of push_task
     * reads 500 and more. */
    assert_in_range(read, 1, 50);
    /* Not left scheduled on the shared stack, for a dispatcher without a
     * topic filter to push an hour later. */
    {
        const hr_mysql_param p[] = {HR_P_I64(live), HR_P_I64(occ)};

        sql_exec("UPDATE push_task SET state = 'cancelled' WHERE id IN (?, ?)", p, 2);
    }
}

/* The ids a statement returned (its first column), as "id id ..." into
 * OUT, and the rows MariaDB read for it. */
static int64_t reads_and_ids(const char *sql, const hr_mysql_param *p, size_t np, char *out,
                             size_t outlen)
{
    hr_mysql_rows *rows = NULL;
    int64_t read = reads_of(sql, p, np, &rows);
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; i < rows->nrows && used < outlen; i++)
        used += (size_t)snprintf(out + used, outlen - used, "%s%s", i > 0 ? " " : "",
                                 hr_mysql_cell(rows, i, 0));
    hr_mysql_rows_free(rows);
    return read;
}

/* One task of the case's topic due at now + AT_S seconds, LOCAL_TIME. */
static int64_t task_ahead(int64_t at_s, int local_time)
{
    const hr_mysql_param p[] = {HR_P_STR(task_topic), HR_P_I64(at_s), HR_P_I64(local_time)};

    sql_exec("INSERT INTO push_task (name, topic, channel, due_at, local_time) VALUES ('window', "
             "?, 'webhook', UTC_TIMESTAMP(3) + INTERVAL ? SECOND, ?)",
             p, 3);
    return itest_sql_i64(db, "SELECT LAST_INSERT_ID()", 0);
}

/* The dispatcher's periodic reads of push_task follow the tasks they act
 * on, not the history nor the tasks scheduled far ahead: beside 3,000
 * finished tasks, with 600 scheduled 60 days ahead and 600 dispatched ones
 * of the case's topic (enough for MariaDB to prefer the primary key for an
 * ORDER BY id LIMIT), the sweep's page (DSP_SWEEP_PAGE_SQL) reads at most
 * the stack's unfinished tasks and a few rows more, the control scan
 * (DSP_CONTROL_SCAN_SQL) at most the tasks a control asks to move and a few
 * more.  The scan's page (DSP_SCAN_PAGE_SQL) and the poller's
 * (DSP_POLL_OVERDUE_SQL), asked for the tasks due within 40 days, return
 * the two whose first due instant is within (a task due at 40 days
 * less an hour; a local_time one due at 40 days and 10 hours, first due 14
 * hours before) and not the two after it (due at 40 days and 10 hours; a
 * local_time one at 40 days and 20 hours), and read at most the stack's
 * scheduled tasks within and a few more: with HR_STATE_FIRST_DUE_SQL in
 * the condition each read every scheduled task's row. */
static void test_scan_reads(void **state)
{
    const int64_t within_s = 40 * 86400;
    const hr_mysql_param topic[] = {HR_P_STR(task_topic)};
    const hr_mysql_param pc[] = {HR_P_STR(task_topic), HR_P_STR(task_topic), HR_P_I64(100)};
    const hr_mysql_param ps[] = {HR_P_I64(0),          HR_P_STR(task_topic),
                                 HR_P_STR(task_topic), HR_P_STR("test-scan-reads"),
                                 HR_P_I64(60000000),   HR_P_I64(1000)};
    const hr_mysql_param pn[] = {HR_P_I64(within_s),   HR_P_I64(within_s), HR_P_STR(task_topic),
                                 HR_P_STR(task_topic), HR_P_I64(0),        HR_P_I64(0),
                                 HR_P_I64(0),          HR_P_I64(0),        HR_P_I64(0),
                                 HR_P_I64(0),          HR_P_I64(1000)};
    const hr_mysql_param pp[] = {HR_P_I64(-within_s * 1000000), HR_P_I64(-within_s * 1000000),
                                 HR_P_STR(task_topic), HR_P_STR(task_topic), HR_P_I64(100)};
    const hr_mysql_param pw[] = {HR_P_I64(within_s)};
    /* The pacing's neighbours of a task due 60 days and 645 minutes ahead:
     * the scheduled 'ahead' tasks due 640 to 650 minutes after 60 days,
     * and every task in flight. */
    const int64_t day60 = itest_now_ms() + (int64_t)60 * 86400 * 1000;
    const hr_mysql_param pa[] = {HR_P_STR("webhook"), HR_P_I64(0), HR_P_I64(day60 + 650 * 60000),
                                 HR_P_I64(day60 + 640 * 60000), HR_P_I64(100000)};
    int64_t unfinished, acting, within, control, sweep, scan, poll, a, b, inflight, paced;
    int64_t pace, pace_scheduled = 0, paced_returned = 0;
    char want_scan[64], want_poll[64], got_scan[256], got_poll[256];

    (void)state;
    sql_exec("INSERT INTO push_task (name, topic, channel, due_at, state) SELECT 'history', ?, "
             "'webhook', UTC_TIMESTAMP(3) - INTERVAL seq HOUR, 'done' FROM seq_1_to_3000",
             topic, 1);
    sql_exec("INSERT INTO push_task (name, topic, channel, due_at) SELECT 'ahead', ?, 'webhook', "
             "UTC_TIMESTAMP(3) + INTERVAL 60 DAY + INTERVAL seq MINUTE FROM seq_1_to_1200",
             topic, 1);
    sql_exec("UPDATE push_task SET state = 'dispatched', claimed_by = 'test-scan-reads-other', "
             "dispatched_at = UTC_TIMESTAMP(3) WHERE topic = ? AND name = 'ahead' "
             "ORDER BY id LIMIT 600",
             topic, 1);
    a = task_ahead(within_s - 3600, 0);
    b = task_ahead(within_s + 36000, 1);
    task_ahead(within_s + 36000, 0);
    task_ahead(within_s + 72000, 1);
    /* The scan's soonest first due first, the poller's soonest due_at. */
    snprintf(want_scan, sizeof want_scan, "%" PRId64 " %" PRId64, b, a);
    snprintf(want_poll, sizeof want_poll, "%" PRId64 " %" PRId64, a, b);
    reads_of("ANALYZE TABLE push_task", NULL, 0, NULL);
    unfinished = itest_sql_i64(db,
                               "SELECT COUNT(*) FROM push_task WHERE state IN ('scheduled', "
                               "'dispatching', 'dispatched', 'paused')",
                               0);
    acting = itest_sql_i64(db,
                           "SELECT COUNT(*) FROM push_task WHERE state IN ('scheduled', "
                           "'dispatching', 'dispatched', 'paused') "
                           "AND (control <> 'run' OR state = 'paused')",
                           0);
    {
        hr_mysql_rows *rows = NULL;

        if (hr_mysql_query(db,
                           "SELECT COUNT(*) FROM push_task WHERE state = 'scheduled' "
                           "AND " HR_STATE_FIRST_DUE_SQL " <= UTC_TIMESTAMP(3) + INTERVAL ? "
                           "SECOND + INTERVAL 1 HOUR",
                           pw, 1, &rows, errstr, sizeof errstr) != 0)
            fail_msg("%s", errstr);
        within = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
        hr_mysql_rows_free(rows);
    }
    inflight = itest_sql_i64(db,
                             "SELECT COUNT(*) FROM push_task WHERE state IN ('dispatching', "
                             "'dispatched')",
                             0);
    {
        hr_mysql_rows *rows = NULL;

        if (hr_mysql_query(db,
                           "SELECT COUNT(*) FROM push_task WHERE channel = ? AND state = "
                           "'scheduled' AND control = 'run' AND due_at >= FROM_UNIXTIME(? / 1000) "
                           "AND due_at <= FROM_UNIXTIME(? / 1000)",
                           (const hr_mysql_param[]){pa[0], pa[3], pa[2]}, 3, &rows, errstr,
                           sizeof errstr) != 0)
            fail_msg("%s", errstr);
        paced = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
        hr_mysql_rows_free(rows);
    }
    {
        hr_mysql_rows *rows = NULL;

        pace = reads_of(DSP_PACE_READ_SQL, pa, 5, &rows);
        for (size_t i = 0; i < rows->nrows; i++)
            if (strcmp(hr_mysql_cell(rows, i, 7), "1") == 0)
                pace_scheduled++;
        paced_returned = (int64_t)rows->nrows;
        hr_mysql_rows_free(rows);
    }
    control = reads_of(DSP_CONTROL_SCAN_SQL, pc, 3, NULL);
    sweep = reads_of(DSP_SWEEP_PAGE_SQL, ps, 6, NULL);
    scan = reads_and_ids(DSP_SCAN_PAGE_SQL, pn, 11, got_scan, sizeof got_scan);
    poll = reads_and_ids(DSP_POLL_OVERDUE_SQL, pp, 5, got_poll, sizeof got_poll);
    /* Finished: no dispatcher of another suite sees them unfinished. */
    sql_exec("UPDATE push_task SET state = 'done' WHERE topic = ? AND name IN ('ahead', 'window')",
             topic, 1);
    printf("# reads: control %" PRId64 " (%" PRId64 " to act on), sweep %" PRId64 " (%" PRId64
           " unfinished), scan %" PRId64 " and poll %" PRId64 " (%" PRId64 " within)\n",
           control, acting, sweep, unfinished, scan, poll, within);
    printf("# reads: pace %" PRId64 " (%" PRId64 " returned, %" PRId64 " scheduled of %" PRId64
           " in its window, %" PRId64 " in flight)\n",
           pace, paced_returned, pace_scheduled, paced, inflight);
    if (pace_scheduled != paced || paced < 9 || pace > inflight + paced + 20)
        fail_msg("the pacing's read returned %" PRId64 " scheduled tasks of %" PRId64
                 " in its window, reading %" PRId64 " rows with %" PRId64 " tasks in flight",
                 pace_scheduled, paced, pace, inflight);
    if (control > acting + 10 || sweep > unfinished + 10)
        fail_msg("the control scan read %" PRId64 " rows with %" PRId64
                 " to act on, the sweep's page %" PRId64 " with %" PRId64 " tasks unfinished",
                 control, acting, sweep, unfinished);
    if (strcmp(got_scan, want_scan) != 0 || strcmp(got_poll, want_poll) != 0)
        fail_msg("due within 40 days: the scan returned [%s] (want [%s]), the poller [%s] (want "
                 "[%s])",
                 got_scan, want_scan, got_poll, want_poll);
    if (scan > within + 20 || poll > within + 20)
        fail_msg("the scan read %" PRId64 " rows, the poller %" PRId64 ", with %" PRId64
                 " scheduled tasks due within",
                 scan, poll, within);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_chunks, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_claim_lag, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_poller, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_two_dispatchers, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_takeover, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_rate_limit, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_redelivery_moves, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_bad_rows_and_raw_sql, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_orphan_adopted, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_postponed, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_claim_batch_bad_row, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_claim_batch_insert_race, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_chunks_ahead, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_admit_sizes_once, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_sweep_owner, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_count_reads, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_pull_reads, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(test_scan_reads, case_setup, case_teardown),
    };
    int rc;

    if (!dispatcher_has_seams()) {
        fprintf(stderr,
                "test_dispatcher: %s lacks the test seams (configure with "
                "-Dtest_seams=true) -- skipping\n",
                HERALD_DISPATCHER);
        return 77;
    }
    cfg = itest_config();
    cfg->dispatcher.scan_interval_ms = 200;
    cfg->dispatcher.timer_interval_ms = 50;
    cfg->dispatcher.poller_interval_ms = 1000;
    cfg->dispatcher.poller_grace_ms = 3000;
    cfg->dispatcher.lease_s = 3;
    cfg->dispatcher.redelivery_timeout_s = 2;
    cfg->dispatcher.sweep_interval_ms = 500;
    /* No worker runs here: nothing takes the chunks (test_chunks_ahead
     * writes a config of its own with a bound). */
    cfg->dispatcher.chunks_ahead = 0;
    if (itest_create_topic(cfg) != 0 || itest_write_config(cfg, cfg_path, sizeof cfg_path) != 0)
        return 1;
    if (hr_mysql_connect(cfg, &db, errstr, sizeof errstr) != 0 ||
        hr_redis_connect(cfg, &rd, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "connect: %s\n", errstr);
        return 1;
    }
    /* The group's first assignment before any test counts messages: on
     * three loaded brokers the join outlasted the first tests' waits.  The
     * run's topic is new, so the polls of the join drop no message. */
    consumer = itest_consumer_join(cfg, 60000);
    if (consumer == NULL)
        return 1;

    rc = cmocka_run_group_tests(tests, NULL, NULL);

    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
    itest_redis_cleanup(cfg);
    hr_redis_free(rd);
    hr_mysql_free(db);
    unlink(cfg_path);
    hr_config_free(cfg);
    return rc;
}
