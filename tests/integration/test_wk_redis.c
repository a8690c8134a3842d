/* Integration test of wk_redis, the worker's Redis thread, against the
 * stack's Redis (its own key prefix): jobs of both kinds run and answer in
 * the order they were submitted (an INCR per job counts 1, 2, 3 ... in
 * submission order), batched jobs waiting behind a run job share one
 * pipeline, a command's error reply reaches its DONE alone, and a close
 * lets every queued job answer before the wake-up handle goes.
 *
 * Built also under ThreadSanitizer when configured with
 * -Db_sanitize=thread (the worker itself cannot be: librdkafka's threads
 * are not TSan's), which is how the thread hand-offs were checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "itest.h"
#include "wk_redis.h"

#define T_JOBS 300

static hr_config *cfg;
static char key[HR_KEY_MAX];

/* One job of either kind: INCR KEY; DONE records its place. */
typedef struct t_job {
    wk_redis_job job;
    int index;
    long long value; /* what INCR answered, -1 on an error */
    char errstr[128];
    size_t first;
} t_job;

static int t_done[T_JOBS], t_ndone;
static long long t_values[T_JOBS];
static size_t t_firsts[T_JOBS];

static int t_queue(wk_redis_job *job, hr_pipe *pipe)
{
    const char *argv[] = {"INCR", key};

    (void)job;
    return hr_pipe_cmd(pipe, 2, argv, NULL);
}

static void t_read(wk_redis_job *job, hr_pipe *pipe)
{
    t_job *j = (t_job *)job;
    redisReply *reply = hr_pipe_reply(pipe, job->first, j->errstr, sizeof j->errstr);

    j->first = job->first;
    j->value = reply != NULL && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    freeReplyObject(reply);
}

static void t_run(wk_redis_job *job, hr_redis *r)
{
    t_job *j = (t_job *)job;
    const char *argv[] = {"INCR", key};
    redisReply *reply = hr_redis_cmd(r, j->errstr, sizeof j->errstr, 2, argv, NULL);

    j->value = reply != NULL ? reply->integer : -1;
    freeReplyObject(reply);
}

static void t_job_done(wk_redis_job *job)
{
    t_job *j = (t_job *)job;

    t_done[t_ndone] = j->index;
    t_values[t_ndone] = j->value;
    t_firsts[t_ndone++] = j->first;
    free(j);
}

static const wk_redis_ops t_batched = {.queue = t_queue, .read = t_read, .done = t_job_done};
static const wk_redis_ops t_runs = {.run = t_run, .done = t_job_done};

/* A run job that holds the thread until the loop let it go: whatever is
 * submitted meanwhile waits behind it. */
typedef struct t_gate {
    wk_redis_job job;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool open, done;
} t_gate;

static void t_gate_run(wk_redis_job *job, hr_redis *r)
{
    t_gate *g = (t_gate *)job;

    (void)r;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void t_gate_done(wk_redis_job *job)
{
    ((t_gate *)job)->done = true;
}

static const wk_redis_ops t_gate_ops = {.run = t_gate_run, .done = t_gate_done};

static wk_redis *t_start(uv_loop_t *loop)
{
    hr_redis *r = NULL;
    wk_redis *rd = NULL;
    char errstr[256];

    assert_int_equal(uv_loop_init(loop), 0);
    if (hr_redis_connect(cfg, &r, errstr, sizeof errstr) != 0)
        fail_msg("connect: %s", errstr);
    if (wk_redis_start(loop, r, &rd, errstr, sizeof errstr) != 0)
        fail_msg("start: %s", errstr);
    hr_key_task(wk_redis_prefix(rd), key, sizeof key, 1, HR_KEY_STATS);
    t_ndone = 0;
    return rd;
}

static void t_submit(wk_redis *rd, int index, bool batched)
{
    t_job *j = calloc(1, sizeof *j);

    assert_non_null(j);
    j->job.ops = batched ? &t_batched : &t_runs;
    j->index = index;
    assert_int_equal(wk_redis_submit(rd, &j->job), 0);
}

/* Closes RD, runs LOOP until its handle is gone, frees both. */
static void t_stop(uv_loop_t *loop, wk_redis *rd)
{
    wk_redis_close(rd);
    assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(wk_redis_pending(rd), 0);
    wk_redis_free(rd);
    assert_int_equal(uv_loop_close(loop), 0);
}

static void test_order(void **state)
{
    uv_loop_t loop;
    wk_redis *rd;

    (void)state;
    rd = t_start(&loop);
    /* Stretches of batched jobs between run jobs, of varying lengths. */
    for (int i = 0; i < T_JOBS; i++)
        t_submit(rd, i, i % 7 != 3 && i % 11 != 5);
    assert_int_equal(wk_redis_pending(rd), T_JOBS);
    while (t_ndone < T_JOBS)
        uv_run(&loop, UV_RUN_ONCE);
    for (int i = 0; i < T_JOBS; i++) {
        assert_int_equal(t_done[i], i);
        assert_int_equal(t_values[i], i + 1);
    }
    t_stop(&loop, rd);
}

static void test_batched_behind_a_run(void **state)
{
    uv_loop_t loop;
    wk_redis *rd;
    t_gate gate = {.job.ops = &t_gate_ops};

    (void)state;
    rd = t_start(&loop);
    pthread_mutex_init(&gate.mu, NULL);
    pthread_cond_init(&gate.cond, NULL);
    assert_int_equal(wk_redis_submit(rd, &gate.job), 0);
    for (int i = 0; i < 50; i++)
        t_submit(rd, i, true);
    pthread_mutex_lock(&gate.mu);
    gate.open = true;
    pthread_cond_signal(&gate.cond);
    pthread_mutex_unlock(&gate.mu);
    while (t_ndone < 50)
        uv_run(&loop, UV_RUN_ONCE);
    assert_true(gate.done);
    /* One round: the 50 commands are the pipeline's first 50. */
    for (int i = 0; i < 50; i++) {
        assert_int_equal(t_done[i], i);
        assert_int_equal(t_firsts[i], i);
    }
    t_stop(&loop, rd);
    pthread_mutex_destroy(&gate.mu);
    pthread_cond_destroy(&gate.cond);
}

/* DONE of a wk_redis_cmd: records what came. */
static int t_cmd_calls;
static char t_cmd_err[256];
static long long t_cmd_value;

static void t_cmd_done(void *arg, const redisReply *reply, const char *errstr)
{
    (void)arg;
    t_cmd_calls++;
    t_cmd_value = reply != NULL && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    snprintf(t_cmd_err, sizeof t_cmd_err, "%s", reply == NULL ? errstr : "");
}

static void test_error_reply_alone(void **state)
{
    uv_loop_t loop;
    wk_redis *rd;
    char other[HR_KEY_MAX];
    const char *set[] = {"SET", other, "x"}, *incr[] = {"INCR", other};

    (void)state;
    rd = t_start(&loop);
    hr_key_task(wk_redis_prefix(rd), other, sizeof other, 2, HR_KEY_CTL);
    t_cmd_calls = 0;
    assert_int_equal(wk_redis_cmd(rd, 3, set, t_cmd_done, NULL), 0);
    t_submit(rd, 0, true);
    assert_int_equal(wk_redis_cmd(rd, 2, incr, t_cmd_done, NULL), 0);
    t_submit(rd, 1, true);
    while (t_ndone < 2 || t_cmd_calls < 2)
        uv_run(&loop, UV_RUN_ONCE);
    /* The INCR of a non-number failed; the jobs around it did not. */
    assert_int_equal(t_cmd_value, -1);
    assert_non_null(strstr(t_cmd_err, "not an integer"));
    assert_int_equal(t_values[0], 1);
    assert_int_equal(t_values[1], 2);
    t_stop(&loop, rd);
}

static void test_close_answers_queued(void **state)
{
    uv_loop_t loop;
    wk_redis *rd;
    t_job *late = calloc(1, sizeof *late);

    (void)state;
    rd = t_start(&loop);
    for (int i = 0; i < 20; i++)
        t_submit(rd, i, i % 2 == 0);
    wk_redis_close(rd);
    /* Refused once closing: its DONE never runs. */
    late->job.ops = &t_batched;
    assert_int_equal(wk_redis_submit(rd, &late->job), -1);
    free(late);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(t_ndone, 20);
    for (int i = 0; i < 20; i++)
        assert_int_equal(t_values[i], i + 1);
    wk_redis_free(rd);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static int t_cleanup(void **state)
{
    (void)state;
    itest_redis_cleanup(cfg);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_order, t_cleanup),
        cmocka_unit_test_teardown(test_batched_behind_a_run, t_cleanup),
        cmocka_unit_test_teardown(test_error_reply_alone, t_cleanup),
        cmocka_unit_test_teardown(test_close_answers_queued, t_cleanup),
    };
    int rc;

    cfg = itest_config(); /* exits 77 before cmocka starts when unset */
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    hr_config_free(cfg);
    return rc;
}
