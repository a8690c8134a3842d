/* Integration tests of herald-worker against the local stack: real Redis,
 * MariaDB and Kafka, the herald-sink as the provider, herald-worker
 * processes spawned with a test YAML (HERALD_WORKER_BIN, HERALD_SINK_BIN
 * name the binaries; meson sets them).
 *
 * Each scenario creates its own push_task row in state 'dispatched' (no
 * dispatcher needed), fills chunk sets and pending in Redis under the
 * test's private prefix, produces the chunk messages on the test's private
 * topic and waits for the task to become 'done'.  Every wait is bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hr_chunkmsg.h"
#include "hr_kafka.h"
#include "hr_mysql.h"
#include "hr_redis.h"
#include "itest.h"

#define T_WAIT_DONE_MS 120000
#define T_MAX_WORKERS 2
/* The ports of a scenario: the sink's, the e2e dispatcher's API, then the
 * workers' metrics. */
#define T_PORT_SINK 0
#define T_PORT_DSP 1
#define T_PORTS (2 + T_MAX_WORKERS)

/* One scenario's processes and files. */
typedef struct t_run {
    hr_config *cfg;
    hr_mysql *m;
    hr_redis *r;
    char cfg_path[256];
    char record[256];
    char sink_log[256];
    char worker_log[T_MAX_WORKERS][256];
    pid_t sink, workers[T_MAX_WORKERS];
    pid_t dispatcher;   /* an end-to-end scenario's (t_e2e_dispatch) */
    int ports[T_PORTS]; /* T_PORT_SINK, T_PORT_DSP, then each worker's metrics */
    int64_t task;
    int64_t total;
} t_run;

static int t_scenario;
/* The scenario running now, so that a failed one's processes are stopped
 * by t_teardown instead of consuming the next scenario's messages.  Every
 * scenario's t_run is static: a failed assertion leaves the test's frame
 * (longjmp) before t_teardown reads it. */
static t_run *t_current;
/* test_e2e_stuck_member's consumer, closed by t_teardown if the case
 * failed: left in the group it would drop the next scenarios' chunks. */
static rd_kafka_t *t_stuck;

static const char *t_env(const char *name)
{
    const char *v = getenv(name);

    if (v == NULL || *v == '\0') {
        fprintf(stderr, "%s is not set\n", name);
        exit(1);
    }
    return v;
}

static bool t_port_open(void *ctx)
{
    const t_run *run = ctx;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)run->ports[T_PORT_SINK])};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bool ok;

    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Config, connections, sink (with EXTRA options, NULL-terminated). */
static void t_start(t_run *run, const char *const *extra)
{
    char url[128], listen[64], errstr[512];
    char *argv[16];
    int argc = 0;

    memset(run, 0, sizeof *run);
    t_current = run;
    t_scenario++;
    run->cfg = itest_config();
    assert_int_equal(itest_create_topic(run->cfg), 0);
    /* Ports the kernel found free: a fixed band could be a stack's (base
     * ports plus an offset) or another test's. */
    itest_free_ports(run->ports, T_PORTS);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/push", run->ports[T_PORT_SINK]);
    itest_set_str(&run->cfg->channels[0].url, url);
    run->cfg->channels[0].concurrency = 64;
    run->cfg->channels[0].retry_backoff_ms = 50;
    run->cfg->channels[0].retry_max_backoff_ms = 500;
    run->cfg->worker.ack_batch = 100;
    run->cfg->worker.max_chunks_in_flight = 2;
    run->cfg->worker.lease_ms = 2000; /* expires before the 6 s session timeout */
    run->cfg->worker.shutdown_grace_ms = 5000;
    run->cfg->worker.reporter_batch = 500;
    /* A killed worker's partitions move after the session timeout: keep it
     * at the broker's minimum so the kill -9 scenario stays short. */
    for (size_t i = 0; i < run->cfg->kafka.nproperties; i++) {
        free(run->cfg->kafka.properties[i].key);
        free(run->cfg->kafka.properties[i].value);
    }
    free(run->cfg->kafka.properties);
    run->cfg->kafka.properties = calloc(1, sizeof *run->cfg->kafka.properties);
    assert_non_null(run->cfg->kafka.properties);
    run->cfg->kafka.properties[0].key = strdup("session.timeout.ms");
    run->cfg->kafka.properties[0].value = strdup("6000");
    run->cfg->kafka.nproperties = 1;
    assert_int_equal(itest_write_config(run->cfg, run->cfg_path, sizeof run->cfg_path), 0);
    assert_int_equal(hr_mysql_connect(run->cfg, &run->m, errstr, sizeof errstr), 0);
    assert_int_equal(hr_redis_connect(run->cfg, &run->r, errstr, sizeof errstr), 0);
    assert_int_equal(itest_profiles_synced(run->r), 0);

    snprintf(run->record, sizeof run->record, "/tmp/herald-test-worker-%d-%d.record", getpid(),
             t_scenario);
    snprintf(run->sink_log, sizeof run->sink_log, "/tmp/herald-test-worker-%d-%d.sink.log",
             getpid(), t_scenario);
    unlink(run->record);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", run->ports[T_PORT_SINK]);
    argv[argc++] = (char *)t_env("HERALD_SINK_BIN");
    argv[argc++] = "--listen";
    argv[argc++] = listen;
    argv[argc++] = "--record";
    argv[argc++] = run->record;
    for (size_t i = 0; extra != NULL && extra[i] != NULL && argc < 14; i++)
        argv[argc++] = (char *)extra[i];
    argv[argc] = NULL;
    run->sink = itest_spawn(argv, run->sink_log);
    assert_true(run->sink > 0);
    assert_true(itest_wait_until(t_port_open, run, 10000));
}

/* Worker I's metrics port. */
static int t_metrics_port(const t_run *run, int i)
{
    return run->ports[2 + i];
}

static void t_spawn_worker(t_run *run, int i)
{
    char listen[64];
    char *argv[] = {
        (char *)t_env("HERALD_WORKER_BIN"), "-c", run->cfg_path, "--listen", listen, NULL};

    snprintf(listen, sizeof listen, "127.0.0.1:%d", t_metrics_port(run, i));
    snprintf(run->worker_log[i], sizeof run->worker_log[i],
             "/tmp/herald-test-worker-%d-%d.worker%d.log", getpid(), t_scenario, i);
    run->workers[i] = itest_spawn(argv, run->worker_log[i]);
    assert_true(run->workers[i] > 0);
}

/* Occurrences of "event=NAME" in worker I's log. */
static int t_log_count(const t_run *run, int i, const char *event)
{
    char needle[96], line[4096];
    FILE *f = fopen(run->worker_log[i], "r");
    int n = 0;

    if (f == NULL)
        return 0;
    snprintf(needle, sizeof needle, "event=%s ", event);
    while (fgets(line, sizeof line, f) != NULL)
        if (strstr(line, needle) != NULL)
            n++;
    fclose(f);
    return n;
}

typedef struct t_wait_log {
    const t_run *run;
    int worker;
    const char *event;
} t_wait_log;

static bool t_log_seen(void *ctx)
{
    const t_wait_log *w = ctx;

    return t_log_count(w->run, w->worker, w->event) > 0;
}

static void t_wait_assigned(const t_run *run, int nworkers)
{
    for (int i = 0; i < nworkers; i++) {
        t_wait_log w = {run, i, "partitions_assigned"};

        assert_true(itest_wait_until(t_log_seen, &w, 60000));
    }
}

static void t_stop_worker(t_run *run, int i)
{
    int status = 0;

    if (run->workers[i] <= 0)
        return;
    itest_kill(run->workers[i], SIGTERM);
    assert_int_equal(itest_wait_exit(run->workers[i], 15000, &status), 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    run->workers[i] = 0;
}

/* Removes the scenario's files in /tmp (record, logs, config). */
static void t_remove_files(t_run *run)
{
    unlink(run->record);
    unlink(run->sink_log);
    for (int i = 0; i < T_MAX_WORKERS; i++)
        if (run->worker_log[i][0] != '\0')
            unlink(run->worker_log[i]);
    if (run->cfg_path[0] != '\0')
        unlink(run->cfg_path);
}

static void t_finish(t_run *run)
{
    for (int i = 0; i < T_MAX_WORKERS; i++)
        t_stop_worker(run, i);
    if (run->sink > 0) {
        itest_kill(run->sink, SIGTERM);
        itest_wait_exit(run->sink, 5000, NULL);
    }
    itest_redis_cleanup(run->cfg);
    hr_redis_free(run->r);
    hr_mysql_free(run->m);
    t_remove_files(run);
    hr_config_free(run->cfg);
    t_current = NULL;
}

static int t_teardown(void **state)
{
    (void)state;
    if (t_stuck != NULL) {
        rd_kafka_consumer_close(t_stuck);
        rd_kafka_destroy(t_stuck);
        t_stuck = NULL;
    }
    if (t_current == NULL)
        return 0;
    for (int i = 0; i < T_MAX_WORKERS; i++)
        if (t_current->workers[i] > 0) {
            itest_kill(t_current->workers[i], SIGKILL);
            itest_wait_exit(t_current->workers[i], 5000, NULL);
        }
    if (t_current->sink > 0) {
        itest_kill(t_current->sink, SIGKILL);
        itest_wait_exit(t_current->sink, 5000, NULL);
    }
    if (t_current->dispatcher > 0) {
        itest_kill(t_current->dispatcher, SIGKILL);
        itest_wait_exit(t_current->dispatcher, 5000, NULL);
    }
    /* A failed scenario keeps its logs for a look, and says where. */
    fprintf(stderr, "scenario failed; logs kept: %s %s %s\n", t_current->sink_log,
            t_current->worker_log[0], t_current->worker_log[1]);
    unlink(t_current->record);
    unlink(t_current->cfg_path);
    t_current = NULL;
    return 0;
}

/* A 'dispatched' task row with TITLE; its id goes to run->task. */
static void t_create_task_titled(t_run *run, const char *name, const char *title)
{
    hr_mysql_param p[] = {HR_P_STR(name), HR_P_STR(run->cfg->channels[0].name), HR_P_STR(title)};
    uint64_t id = 0;
    char errstr[512];

    assert_int_equal(hr_mysql_exec(run->m,
                                   "INSERT INTO push_task (name, topic, channel, title, body, "
                                   "due_at, state) VALUES (?, 'worker-test', ?, ?, "
                                   "'Task \"{{task.name}}\"', UTC_TIMESTAMP(3), 'dispatched')",
                                   p, 3, NULL, &id, NULL, errstr, sizeof errstr),
                     0);
    run->task = (int64_t)id;
}

static void t_create_task(t_run *run, const char *name)
{
    t_create_task_titled(run, name, "Hello {{uid}}");
}

/* A 'dispatched' task row that throttles: limit 1 per 60 s in SCOPE, MODE
 * enforce or shadow.  Its id goes to run->task. */
static void t_create_throttled_task(t_run *run, const char *name, const char *scope,
                                    const char *mode)
{
    hr_mysql_param p[] = {HR_P_STR(name), HR_P_STR(run->cfg->channels[0].name), HR_P_STR(scope),
                          HR_P_STR(mode)};
    uint64_t id = 0;
    char errstr[512];

    assert_int_equal(hr_mysql_exec(run->m,
                                   "INSERT INTO push_task (name, topic, channel, title, body, "
                                   "due_at, state, throttle_limit, throttle_window_s, "
                                   "throttle_scope, throttle_mode) VALUES (?, 'worker-test', ?, "
                                   "'Hello {{uid}}', 'Throttled', UTC_TIMESTAMP(3), 'dispatched', "
                                   "1, 60, ?, ?)",
                                   p, 4, NULL, &id, NULL, errstr, sizeof errstr),
                     0);
    run->task = (int64_t)id;
}

/* Chunk SEQ holds uids FIRST..FIRST+COUNT-1; pending[seq] is set. */
static void t_fill_chunk(t_run *run, int64_t seq, int64_t first, int64_t count)
{
    char key[256], errstr[512];
    const char **argv = calloc((size_t)count + 2, sizeof *argv);
    char(*uids)[24] = calloc((size_t)count, sizeof *uids);
    redisReply *reply;

    assert_non_null(argv);
    assert_non_null(uids);
    hr_key_chunk(hr_redis_prefix(run->r), key, sizeof key, run->task, seq);
    argv[0] = "SADD";
    argv[1] = key;
    for (int64_t i = 0; i < count; i++) {
        snprintf(uids[i], sizeof uids[i], "%" PRId64, first + i);
        argv[i + 2] = uids[i];
    }
    reply = hr_redis_cmd(run->r, errstr, sizeof errstr, (int)count + 2, argv, NULL);
    assert_non_null(reply);
    assert_int_equal(reply->integer, count);
    freeReplyObject(reply);
    hr_key_task(hr_redis_prefix(run->r), key, sizeof key, run->task, HR_KEY_PENDING);
    reply = hr_redis_cmdf(run->r, errstr, sizeof errstr, "HSET %s %lld %lld", key, (long long)seq,
                          (long long)itest_now_ms());
    assert_non_null(reply);
    freeReplyObject(reply);
    run->total += count;
    free(argv);
    free(uids);
}

/* Produces raw VALUE with KEY on the test topic. */
static void t_produce_raw(const t_run *run, const char *key, const char *value, size_t len)
{
    char errstr[512];
    rd_kafka_conf_t *conf = hr_kafka_conf_new(run->cfg, HR_KAFKA_PRODUCER, errstr, sizeof errstr);
    rd_kafka_t *rk;

    assert_non_null(conf);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    assert_non_null(rk);
    assert_int_equal(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(run->cfg->kafka.topic),
                                       RD_KAFKA_V_KEY(key, strlen(key)),
                                       RD_KAFKA_V_VALUE((void *)value, len),
                                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(rd_kafka_flush(rk, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(rk);
}

static void t_produce_chunk(const t_run *run, int64_t task, int64_t seq, int64_t count)
{
    hr_chunkmsg msg = {.task = task,
                       .seq = seq,
                       .count = count,
                       .due_ms = itest_now_ms(),
                       .published_ms = itest_now_ms()};
    char key[64], value[HR_CHUNKMSG_MAX_BYTES];
    int n;

    assert_true(hr_chunkmsg_key(&msg, false, key, sizeof key) > 0);
    n = hr_chunkmsg_encode(&msg, value, sizeof value);
    assert_true(n > 0);
    t_produce_raw(run, key, value, (size_t)n);
}

static int64_t t_sql_int(const t_run *run, const char *sql)
{
    hr_mysql_param p = HR_P_I64(run->task);
    hr_mysql_rows *rows = NULL;
    char errstr[512];
    int64_t v;

    assert_int_equal(hr_mysql_query(run->m, sql, &p, 1, &rows, errstr, sizeof errstr), 0);
    assert_int_equal(rows->nrows, 1);
    v = hr_mysql_cell(rows, 0, 0) ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : -1;
    hr_mysql_rows_free(rows);
    return v;
}

static int64_t t_pending(const t_run *run)
{
    char key[256], errstr[512];
    redisReply *reply;
    int64_t n;

    hr_key_task(hr_redis_prefix(run->r), key, sizeof key, run->task, HR_KEY_PENDING);
    reply = hr_redis_cmdf(run->r, errstr, sizeof errstr, "HLEN %s", key);
    assert_non_null(reply);
    n = reply->integer;
    freeReplyObject(reply);
    return n;
}

/* Done by the worker: no pending chunk under the test's private prefix
 * (a dispatcher of the shared stack may sweep our 'dispatched' rows and
 * set 'done' on its own, so the state alone proves nothing) and the row
 * says 'done'. */
static bool t_task_done(void *ctx)
{
    const t_run *run = ctx;

    return t_pending(run) == 0 &&
           t_sql_int(run, "SELECT state = 'done' FROM push_task WHERE id = ?") == 1;
}

static int64_t t_stat(const t_run *run, const char *field)
{
    char key[256], errstr[512];
    redisReply *reply;
    int64_t v = 0;

    hr_key_task(hr_redis_prefix(run->r), key, sizeof key, run->task, HR_KEY_STATS);
    reply = hr_redis_cmdf(run->r, errstr, sizeof errstr, "HGET %s %s", key, field);
    assert_non_null(reply);
    if (reply->type == REDIS_REPLY_STRING)
        v = strtoll(reply->str, NULL, 10);
    freeReplyObject(reply);
    return v;
}

/* What the sink recorded for uids FIRST..FIRST+total-1. */
typedef struct t_record {
    int *ok;     /* successes per uid */
    int *bad400; /* 400 answers per uid */
    int64_t lines, successes, missing, duplicates, permanent;
} t_record;

static void t_read_record(const t_run *run, int64_t first, t_record *rec)
{
    FILE *f = fopen(run->record, "r");
    char uid[64];
    int status;
    long long ms;

    memset(rec, 0, sizeof *rec);
    rec->ok = calloc((size_t)run->total, sizeof *rec->ok);
    rec->bad400 = calloc((size_t)run->total, sizeof *rec->bad400);
    assert_non_null(rec->ok);
    assert_non_null(rec->bad400);
    assert_non_null(f);
    while (fscanf(f, "%63s %d %lld", uid, &status, &ms) == 3) {
        int64_t i = strtoll(uid, NULL, 10) - first;

        rec->lines++;
        if (i < 0 || i >= run->total)
            continue;
        if (status == 200) {
            rec->ok[i]++;
            rec->successes++;
        } else if (status == 400) {
            rec->bad400[i]++;
        }
    }
    fclose(f);
    for (int64_t i = 0; i < run->total; i++) {
        if (rec->ok[i] == 0)
            rec->missing++;
        if (rec->ok[i] > 1)
            rec->duplicates += rec->ok[i] - 1;
        if (rec->bad400[i] > 0)
            rec->permanent++;
    }
}

static void t_record_free(t_record *rec)
{
    free(rec->ok);
    free(rec->bad400);
}

/* Stops the sink so its record file is complete. */
static void t_stop_sink(t_run *run)
{
    assert_int_equal(itest_kill(run->sink, SIGTERM), 0);
    assert_int_equal(itest_wait_exit(run->sink, 10000, NULL), 0);
    run->sink = 0;
}

/* ---- scenarios ---------------------------------------------------------------- */

/* 10,000 recipients in 2 chunks, 2 workers: each uid exactly once, Redis and
 * MySQL counters agree, delivery rows, task done. */
static void test_two_workers_exactly_once(void **state)
{
    static t_run run;
    t_record rec;

    (void)state;
    t_start(&run, NULL);
    t_create_task(&run, "worker exactly once");
    t_fill_chunk(&run, 1, 1000001, 5000);
    t_fill_chunk(&run, 2, 1005001, 5000);
    t_spawn_worker(&run, 0);
    t_spawn_worker(&run, 1);
    t_wait_assigned(&run, 2);
    t_produce_chunk(&run, run.task, 1, 5000);
    t_produce_chunk(&run, run.task, 2, 5000);
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    t_stop_worker(&run, 0);
    t_stop_worker(&run, 1);
    t_stop_sink(&run);

    t_read_record(&run, 1000001, &rec);
    assert_int_equal(rec.missing, 0);
    assert_int_equal(rec.duplicates, 0);
    assert_int_equal(rec.successes, 10000);
    assert_int_equal(t_stat(&run, "sent"), 10000);
    assert_int_equal(t_stat(&run, "chunks_done"), 2);
    assert_int_equal(t_sql_int(&run, "SELECT sent FROM push_task WHERE id = ?"), 10000);
    assert_int_equal(t_sql_int(&run, "SELECT failed FROM push_task WHERE id = ?"), 0);
    assert_int_equal(t_sql_int(&run, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ? "
                                     "AND status = 'sent'"),
                     10000);
    t_record_free(&rec);
    t_finish(&run);
}

/* The scenario most tests share: one worker pushes one chunk of N
 * recipients FIRST.. against a sink started with EXTRA until the task is
 * done; the sink's record goes to *REC. */
static void t_one_chunk(t_run *run, const char *const *extra, const char *name, int64_t first,
                        int64_t n, t_record *rec)
{
    t_start(run, extra);
    t_create_task(run, name);
    t_fill_chunk(run, 1, first, n);
    t_spawn_worker(run, 0);
    t_wait_assigned(run, 1);
    t_produce_chunk(run, run->task, 1, n);
    assert_true(itest_wait_until(t_task_done, run, T_WAIT_DONE_MS));
    t_stop_worker(run, 0);
    t_stop_sink(run);
    t_read_record(run, first, rec);
}

/* 10 % of first attempts get 500: all delivered, retries counted. */
static void test_fail_first_retried(void **state)
{
    static const char *const extra[] = {"--fail-first", "10", NULL};
    static t_run run;
    t_record rec;

    (void)state;
    t_one_chunk(&run, extra, "worker fail first", 2000001, 2000, &rec);
    assert_int_equal(rec.missing, 0);
    assert_int_equal(t_stat(&run, "sent"), 2000);
    assert_true(t_stat(&run, "retried") > 0);
    assert_true(t_sql_int(&run, "SELECT retried FROM push_task WHERE id = ?") > 0);
    assert_int_equal(t_sql_int(&run, "SELECT sent FROM push_task WHERE id = ?"), 2000);
    /* Every 500 was retried: one extra request per retried uid. */
    assert_int_equal(rec.lines - rec.successes, t_stat(&run, "retried"));
    t_record_free(&rec);
    t_finish(&run);
}

/* 5 % permanent 400s: dead-lettered with the reason, the rest delivered. */
static void test_fail_permanent_dead_letters(void **state)
{
    static const char *const extra[] = {"--fail-permanent", "5", NULL};
    char key[256], errstr[512];
    redisReply *reply;
    static t_run run;
    t_record rec;
    int64_t failed;

    (void)state;
    t_one_chunk(&run, extra, "worker fail permanent", 3000001, 2000, &rec);
    failed = t_stat(&run, "failed");
    assert_true(failed > 0);
    assert_int_equal(failed, rec.permanent);
    assert_int_equal(rec.missing, rec.permanent);
    assert_int_equal(t_stat(&run, "sent") + failed, 2000);
    assert_int_equal(t_sql_int(&run, "SELECT sent + failed FROM push_task WHERE id = ?"), 2000);
    assert_int_equal(t_sql_int(&run, "SELECT failed FROM push_task WHERE id = ?"), failed);
    /* 400 is not retried: one request per failed uid. */
    assert_int_equal(rec.lines, 2000);
    hr_key_task(hr_redis_prefix(run.r), key, sizeof key, run.task, HR_KEY_FAILED);
    reply = hr_redis_cmdf(run.r, errstr, sizeof errstr, "HGETALL %s", key);
    assert_non_null(reply);
    assert_int_equal((int64_t)reply->elements, 2 * failed);
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        int64_t uid = strtoll(reply->element[i]->str, NULL, 10) - 3000001;

        assert_true(uid >= 0 && uid < 2000);
        assert_true(rec.bad400[uid] > 0);
        assert_string_equal(reply->element[i + 1]->str, "http 400");
    }
    freeReplyObject(reply);
    t_record_free(&rec);
    t_finish(&run);
}

static int t_http_get(int port, const char *path, char **body);
static double t_metrics_parse(const char *text, const char *want);

/* 429 + Retry-After: 1 for 2 s: the channel slows down and finishes.
 * Every re-send after a 429 is a retry like one after a 500 (issue 21): the
 * stats hash, push_task.retried, the delivery log's attempts and
 * herald_retries_total all count the requests beyond each uid's first,
 * which is what the sink saw beyond its successes. */
static void test_throttled_channel_recovers(void **state)
{
    static const char *const extra[] = {"--throttle-ms", "2000", NULL};
    static t_run run;
    t_record rec;
    char *body = NULL;
    double retries;
    int64_t resent;

    (void)state;
    t_start(&run, extra);
    t_create_task(&run, "worker throttled");
    t_fill_chunk(&run, 1, 4000001, 3000);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    t_produce_chunk(&run, run.task, 1, 3000);
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    assert_int_equal(t_http_get(t_metrics_port(&run, 0), "/metrics", &body), 200);
    retries = t_metrics_parse(body, "herald_retries_total");
    free(body);
    t_stop_worker(&run, 0);
    t_stop_sink(&run);
    t_read_record(&run, 4000001, &rec);

    assert_int_equal(rec.missing, 0);
    assert_true(rec.lines > rec.successes); /* some 429s were answered */
    assert_true(t_log_count(&run, 0, "channel_slowdown") > 0);
    assert_int_equal(t_stat(&run, "sent"), 3000);
    assert_int_equal(t_stat(&run, "failed"), 0);
    resent = rec.lines - rec.successes;
    fprintf(stderr, "429: requests=%" PRId64 " re-sent=%" PRId64 "\n", rec.lines, resent);
    assert_int_equal(t_stat(&run, "retried"), resent);
    assert_int_equal((int64_t)retries, resent);
    /* The worker stopped with SIGTERM: its reporter flushed. */
    assert_int_equal(t_sql_int(&run, "SELECT retried FROM push_task WHERE id = ?"), resent);
    assert_int_equal(t_sql_int(&run, "SELECT SUM(attempts) - COUNT(*) FROM push_delivery "
                                     "WHERE task_id = ?"),
                     resent);
    t_record_free(&rec);
    t_finish(&run);
}

/* A garbage message and one for a task that does not exist are skipped
 * and counted; the chunk produced after them is still pushed. */
static void test_bad_messages_skipped(void **state)
{
    static const char garbage[] = "{\"v\":1,\"task\":\"oops\"";
    static const char unknown[] = "{\"v\":1,\"task\":999999999,\"seq\":1,\"count\":1,"
                                  "\"due_ms\":1,\"published_ms\":1}";
    char key[64];
    static t_run run;
    t_record rec;

    (void)state;
    t_start(&run, NULL);
    t_create_task(&run, "worker bad messages");
    t_fill_chunk(&run, 1, 5000001, 500);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    /* The chunk's own key sends all three to one partition, in this
     * order, so the bad ones are consumed before the chunk. */
    snprintf(key, sizeof key, "%" PRId64 ":1", run.task);
    t_produce_raw(&run, key, garbage, sizeof garbage - 1);
    t_produce_raw(&run, key, unknown, sizeof unknown - 1);
    t_produce_chunk(&run, run.task, 1, 500);
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    t_stop_worker(&run, 0);
    t_stop_sink(&run);

    assert_true(t_log_count(&run, 0, "bad_message") >= 1);
    assert_true(t_log_count(&run, 0, "unknown_task") >= 1);
    t_read_record(&run, 5000001, &rec);
    assert_int_equal(rec.missing, 0);
    assert_int_equal(t_stat(&run, "sent"), 500);
    t_record_free(&rec);
    t_finish(&run);
}

typedef struct t_progress {
    const t_run *run;
    int64_t at_least;
} t_progress;

static bool t_sink_progress(void *ctx)
{
    const t_progress *p = ctx;
    FILE *f = fopen(p->run->record, "r");
    int64_t lines = 0;
    int ch;

    if (f == NULL)
        return false;
    while ((ch = fgetc(f)) != EOF)
        lines += ch == '\n';
    fclose(f);
    return lines >= p->at_least;
}

/* MySQL's push_task.sent equals the wanted value (t_counter_want). */
typedef struct t_counter_want {
    const t_run *run;
    int64_t sent;
} t_counter_want;

static bool t_sql_sent_is(void *ctx)
{
    const t_counter_want *want = ctx;

    return t_sql_int(want->run, "SELECT sent FROM push_task WHERE id = ?") == want->sent;
}

/* kill -9 in the middle: after a restart every uid arrived at least once;
 * duplicates are bounded by what the dead worker had delivered but not
 * acknowledged (ack batch per open chunk) plus its requests in flight; the
 * MySQL counters end exactly equal to the Redis stats (the reporter writes
 * the stats hash's absolute values, so the next report makes good what the
 * dead worker's reporter still held). */
static void test_kill9_redelivers(void **state)
{
    static const char *const extra[] = {"--latency-ms", "50", NULL};
    t_progress prog;
    static t_run run;
    t_record rec;
    t_counter_want want;
    int64_t bound;

    (void)state;
    t_start(&run, extra);
    t_create_task(&run, "worker kill -9");
    for (int64_t seq = 1; seq <= 4; seq++)
        t_fill_chunk(&run, seq, 6000001 + (seq - 1) * 2500, 2500);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    for (int64_t seq = 1; seq <= 4; seq++)
        t_produce_chunk(&run, run.task, seq, 2500);
    prog = (t_progress){&run, 2000};
    assert_true(itest_wait_until(t_sink_progress, &prog, 60000));
    assert_int_equal(itest_kill(run.workers[0], SIGKILL), 0);
    assert_int_equal(itest_wait_exit(run.workers[0], 5000, NULL), 0);
    run.workers[0] = 0;
    assert_false(t_task_done(&run));
    t_spawn_worker(&run, 0);
    /* The dead worker's chunks are pushed again within 10 s of the kill:
     * the group's 6 s session timeout, then the chunk's lease (2 s here)
     * is long gone (docs/reliability.md "Worker crash"). */
    {
        t_wait_log started = {&run, 0, "chunk_start"};

        assert_true(itest_wait_until(t_log_seen, &started, 10000));
    }
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    t_stop_worker(&run, 0);
    t_stop_sink(&run);

    t_read_record(&run, 6000001, &rec);
    assert_int_equal(rec.missing, 0);
    bound = (int64_t)run.cfg->worker.ack_batch * run.cfg->worker.max_chunks_in_flight +
            run.cfg->channels[0].concurrency;
    fprintf(stderr, "kill -9: duplicates=%" PRId64 " bound=%" PRId64 "\n", rec.duplicates, bound);
    assert_true(rec.duplicates <= bound);
    assert_int_equal(t_stat(&run, "sent"), 10000);
    /* The restarted worker stopped with SIGTERM (reporter flushed); the
     * short wait only covers a slow MySQL commit. */
    want = (t_counter_want){&run, 10000};
    assert_true(itest_wait_until(t_sql_sent_is, &want, 5000));
    assert_int_equal(t_sql_int(&run, "SELECT failed FROM push_task WHERE id = ?"),
                     t_stat(&run, "failed"));
    assert_int_equal(t_sql_int(&run, "SELECT retried FROM push_task WHERE id = ?"),
                     t_stat(&run, "retried"));
    t_record_free(&rec);
    t_finish(&run);
}

/* Two tasks on one channel: A limited to 100 pushes/s (1,000 recipients,
 * about 10 s), B unlimited (5,000) started after A.  The channel serves its
 * tasks in turn and skips one waiting for tokens, so B is done long before
 * A (with one queue per channel B waited behind all of A: over 9 s). */
static void test_rate_limited_task_no_head_of_line(void **state)
{
    static t_run run;
    t_progress prog;
    hr_mysql_param p[2];
    uint64_t id = 0;
    int64_t task_a, task_b, b_start, b_ms, a_ms, a_start;
    char errstr[512];
    t_record rec;

    (void)state;
    t_start(&run, NULL);
    p[0] = HR_P_STR("worker fair A");
    p[1] = HR_P_STR(run.cfg->channels[0].name);
    assert_int_equal(hr_mysql_exec(run.m,
                                   "INSERT INTO push_task (name, topic, channel, title, body, "
                                   "due_at, state, rate_limit) VALUES (?, 'worker-test', ?, "
                                   "'Hello {{uid}}', 'Limited', UTC_TIMESTAMP(3), 'dispatched', "
                                   "100)",
                                   p, 2, NULL, &id, NULL, errstr, sizeof errstr),
                     0);
    task_a = run.task = (int64_t)id;
    t_fill_chunk(&run, 1, 9300001, 1000);
    t_create_task(&run, "worker fair B");
    task_b = run.task;
    t_fill_chunk(&run, 1, 9301001, 5000);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    a_start = itest_now_ms();
    t_produce_chunk(&run, task_a, 1, 1000);
    prog = (t_progress){&run, 50};
    assert_true(itest_wait_until(t_sink_progress, &prog, 30000));
    b_start = itest_now_ms();
    t_produce_chunk(&run, task_b, 1, 5000);
    run.task = task_b;
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    b_ms = itest_now_ms() - b_start;
    run.task = task_a;
    assert_false(t_task_done(&run));
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    a_ms = itest_now_ms() - a_start;
    fprintf(stderr, "fairness: B done in %" PRId64 " ms, A in %" PRId64 " ms\n", b_ms, a_ms);
    assert_true(b_ms < 5000);
    /* A kept its limit: 1,000 at 100/s takes about 10 s. */
    assert_true(a_ms >= 8000);
    assert_int_equal(t_stat(&run, "sent"), 1000);
    t_stop_worker(&run, 0);
    t_stop_sink(&run);
    t_read_record(&run, 9300001, &rec);
    assert_int_equal(rec.missing, 0);
    assert_int_equal(rec.duplicates, 0);
    t_record_free(&rec);
    t_finish(&run);
}

/* SIGTERM in the middle: exit 0 within the grace period; after a restart
 * MySQL's counter equals what the sink received, with nothing lost. */
static void test_sigterm_drains(void **state)
{
    static const char *const extra[] = {"--latency-ms", "50", NULL};
    t_progress prog;
    static t_run run;
    t_record rec;
    int status = 0;
    int64_t t0;

    (void)state;
    t_start(&run, extra);
    t_create_task(&run, "worker sigterm");
    for (int64_t seq = 1; seq <= 4; seq++)
        t_fill_chunk(&run, seq, 7000001 + (seq - 1) * 2500, 2500);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    for (int64_t seq = 1; seq <= 4; seq++)
        t_produce_chunk(&run, run.task, seq, 2500);
    prog = (t_progress){&run, 2000};
    assert_true(itest_wait_until(t_sink_progress, &prog, 60000));
    t0 = itest_now_ms();
    assert_int_equal(itest_kill(run.workers[0], SIGTERM), 0);
    assert_int_equal(
        itest_wait_exit(run.workers[0], run.cfg->worker.shutdown_grace_ms + 5000, &status), 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(itest_now_ms() - t0 < run.cfg->worker.shutdown_grace_ms + 5000);
    run.workers[0] = 0;
    assert_false(t_task_done(&run));
    t_spawn_worker(&run, 0);
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    t_stop_worker(&run, 0);
    t_stop_sink(&run);

    t_read_record(&run, 7000001, &rec);
    assert_int_equal(rec.missing, 0);
    assert_int_equal(t_sql_int(&run, "SELECT sent FROM push_task WHERE id = ?"), 10000);
    /* Running requests were finished and acknowledged before the exit. */
    assert_int_equal(rec.successes, 10000);
    t_record_free(&rec);
    t_finish(&run);
}

/* Every one of the 20 chunks closed by a worker, and the row is done. */
static bool t_e2e_done(void *ctx)
{
    const t_run *run = ctx;

    return t_stat(run, "chunks_done") == 20 && t_task_done(ctx);
}

#define T_E2E_DISPATCHER_LOG "/tmp/herald-test-worker-e2e-dispatcher.log"

/* An end-to-end scenario's start: skipped without HERALD_DISPATCHER_BIN,
 * else t_start and two workers with their partitions. */
static void t_e2e_start(t_run *run)
{
    const char *bin = getenv("HERALD_DISPATCHER_BIN");

    if (bin == NULL || *bin == '\0')
        skip();
    t_start(run, NULL);
    t_spawn_worker(run, 0);
    t_spawn_worker(run, 1);
    t_wait_assigned(run, 2);
}

/* A scheduled task of TOTAL subscribers (uids FIRST..), CHUNK_SIZE a
 * chunk, due in 2 s, and herald-dispatcher (HERALD_DISPATCHER_BIN) started
 * on run->cfg (written again, with an API port of its own) to dispatch it
 * (its pid in run->dispatcher, which t_teardown kills if the case fails).
 * The task's id goes to run->task. */
static void t_e2e_dispatch(t_run *run, int64_t total, int64_t first, int chunk_size)
{
    char topic[64], listen[64], key[256], errstr[512], nums[1000][24];
    const char *argv[1002];
    char *dargv[] = {(char *)t_env("HERALD_DISPATCHER_BIN"), "-c", run->cfg_path, NULL};
    uint64_t id = 0;

    snprintf(topic, sizeof topic, "worker-e2e-%d-%d", getpid(), t_scenario);
    hr_mysql_param p[] = {HR_P_STR(topic), HR_P_I64(itest_now_ms() + 2000), HR_P_I64(chunk_size)};

    assert_int_equal(hr_mysql_exec(run->m,
                                   "INSERT INTO push_task (name, topic, channel, title, body, "
                                   "due_at, freeze_at, chunk_size) VALUES ('worker e2e', ?, "
                                   "'webhook', 'Hi', 'hello {{uid}}', FROM_UNIXTIME(? / 1000), "
                                   "NULL, ?)",
                                   p, 3, NULL, &id, NULL, errstr, sizeof errstr),
                     0);
    run->task = (int64_t)id;
    run->total = total;
    hr_key_task(hr_redis_prefix(run->r), key, sizeof key, run->task, HR_KEY_SUBS);
    argv[0] = "SADD";
    argv[1] = key;
    for (int64_t i = 0; i < total; i += 1000) {
        int n = total - i < 1000 ? (int)(total - i) : 1000;
        redisReply *reply;

        for (int j = 0; j < n; j++) {
            snprintf(nums[j], sizeof nums[j], "%" PRId64, first + i + j);
            argv[2 + j] = nums[j];
        }
        reply = hr_redis_cmd(run->r, errstr, sizeof errstr, 2 + n, argv, NULL);
        assert_non_null(reply);
        freeReplyObject(reply);
    }
    snprintf(listen, sizeof listen, "127.0.0.1:%d", run->ports[T_PORT_DSP]);
    itest_set_str(&run->cfg->dispatcher.listen, listen);
    unlink(run->cfg_path);
    assert_int_equal(itest_write_config(run->cfg, run->cfg_path, sizeof run->cfg_path), 0);
    setenv("HERALD_TEST_TASK_TOPIC", topic, 1);
    run->dispatcher = itest_spawn(dargv, T_E2E_DISPATCHER_LOG);
    unsetenv("HERALD_TEST_TASK_TOPIC");
    assert_true(run->dispatcher > 0);
}

/* Stops t_e2e_dispatch's dispatcher, then the workers and the sink. */
static void t_e2e_stop(t_run *run)
{
    int status = 0;

    itest_kill(run->dispatcher, SIGTERM);
    assert_int_equal(itest_wait_exit(run->dispatcher, 15000, &status), 0);
    run->dispatcher = 0;
    unlink(T_E2E_DISPATCHER_LOG);
    t_stop_worker(run, 0);
    t_stop_worker(run, 1);
    t_stop_sink(run);
}

/* The sink got each of run->total uids from FIRST on exactly once, and the
 * stats hash and the task row say every one was sent. */
static void t_e2e_check(t_run *run, int64_t first)
{
    t_record rec;

    t_read_record(run, first, &rec);
    assert_int_equal(rec.missing, 0);
    assert_int_equal(rec.duplicates, 0);
    t_record_free(&rec);
    assert_int_equal(t_stat(run, "sent"), run->total);
    assert_int_equal(t_sql_int(run, "SELECT sent FROM push_task WHERE id = ?"), run->total);
}

/* End to end with herald-dispatcher: a scheduled task of 100,000
 * subscribers due in 2 s, one dispatcher, two workers → the sink got every
 * uid exactly once, Redis and MySQL agree, task done. */
static void test_e2e_dispatcher_100k(void **state)
{
    static t_run run;

    (void)state;
    t_e2e_start(&run);
    t_e2e_dispatch(&run, 100000, 8000001, 5000);
    assert_true(itest_wait_until(t_e2e_done, &run, 180000));
    t_e2e_stop(&run);
    t_e2e_check(&run, 8000001);
    assert_int_equal(t_sql_int(&run, "SELECT COUNT(*) FROM push_chunk WHERE task_id = ? "
                                     "AND state = 'done'"),
                     20);
    t_finish(&run);
}

/* Every worker I < N logged partitions_assigned at least TIMES times. */
static void t_wait_assigned_times(const t_run *run, int n, int times)
{
    for (int64_t end = itest_now_ms() + 60000; itest_now_ms() < end; usleep(100 * 1000)) {
        int i = 0;

        while (i < n && t_log_count(run, i, "partitions_assigned") >= times)
            i++;
        if (i == n)
            return;
    }
    fail_msg("the workers were not assigned %d times within 60 s", times);
}

/* A member of the workers' group (t_stuck) that takes its share of the
 * partitions and works none of it: it reads and drops every message, as a
 * worker whose fetch of a partition never resumed held that partition
 * without reading it (docs/reliability.md "A partition nobody reads").
 * Returned once it has partitions. */
static rd_kafka_t *t_stuck_member(const t_run *run)
{
    t_stuck = itest_consumer_join(run->cfg, 60000);
    assert_non_null(t_stuck);
    return t_stuck;
}

/* Polls the stuck member for up to TIMEOUT_MS until run->task is done; the
 * number of run->task's chunk messages it read and dropped. */
static int t_stuck_until_done(t_run *run, rd_kafka_t *stuck, int timeout_ms)
{
    int dropped = 0;

    for (int64_t end = itest_now_ms() + timeout_ms; itest_now_ms() < end;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(stuck, 100);
        hr_chunkmsg msg;
        char why[256];

        if (m != NULL && m->err == RD_KAFKA_RESP_ERR_NO_ERROR &&
            hr_chunkmsg_decode(m->payload, m->len, &msg, why, sizeof why) == 0 &&
            msg.task == run->task)
            dropped++;
        if (m != NULL)
            rd_kafka_message_destroy(m);
        if (t_task_done(run))
            return dropped;
    }
    fail_msg("task %" PRId64 " not done within %d ms (%d of its messages dropped)", run->task,
             timeout_ms, dropped);
    return dropped;
}

/* A third member of the group holds a third of the partitions and never
 * works them; 40 chunks of 500 are published over all twelve.  The sweeper
 * (redelivery_timeout_s 2) republishes the chunks it dropped, each under a
 * key of its own, so they reach the two workers: every uid pushed once, the
 * task done.  With a redelivery keyed like its first publish, every copy
 * went back to the member that drops it, and the task never ended. */
static void test_e2e_stuck_member(void **state)
{
    static t_run run;
    rd_kafka_t *stuck;
    int dropped;

    (void)state;
    t_e2e_start(&run);
    run.cfg->dispatcher.redelivery_timeout_s = 2; /* written by t_e2e_dispatch */
    run.cfg->dispatcher.sweep_interval_ms = 500;
    stuck = t_stuck_member(&run);
    t_wait_assigned_times(&run, 2, 2);
    t_e2e_dispatch(&run, 20000, 9500001, 500);
    dropped = t_stuck_until_done(&run, stuck, 120000);
    printf("# the stuck member dropped %d chunk messages of the task\n", dropped);
    assert_true(dropped > 0);
    rd_kafka_consumer_close(stuck);
    rd_kafka_destroy(stuck);
    t_stuck = NULL;
    t_e2e_stop(&run);
    t_e2e_check(&run, 9500001);
    t_finish(&run);
}

/* Two tasks of one scope (throttle 1 per 60 s) share 1,000 uids and run one
 * after the other: in enforce mode the second task's chunk is throttled
 * whole (each uid reaches the sink once, stats / MySQL / delivery log say
 * throttled); in shadow mode everything is pushed and counted as
 * throttle_shadowed. */
static void t_throttle_two_tasks(const char *mode)
{
    bool shadow = strcmp(mode, "shadow") == 0;
    char scope[64];
    static t_run run;
    t_record rec;

    t_start(&run, NULL);
    snprintf(scope, sizeof scope, "worker-test-%d-%d", getpid(), t_scenario);
    t_create_throttled_task(&run, "throttle first", scope, mode);
    t_fill_chunk(&run, 1, 3000001, 1000);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    t_produce_chunk(&run, run.task, 1, 1000);
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    assert_int_equal(t_stat(&run, "sent"), 1000);
    assert_int_equal(t_stat(&run, "throttled"), 0);

    t_create_throttled_task(&run, "throttle second", scope, mode);
    t_fill_chunk(&run, 1, 3000001, 1000);
    t_produce_chunk(&run, run.task, 1, 1000);
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    t_stop_worker(&run, 0);
    t_stop_sink(&run);

    run.total = 1000;
    t_read_record(&run, 3000001, &rec);
    assert_int_equal(rec.missing, 0);
    assert_int_equal(rec.successes, shadow ? 2000 : 1000);
    assert_int_equal(rec.duplicates, shadow ? 1000 : 0);
    assert_int_equal(t_stat(&run, "sent"), shadow ? 1000 : 0);
    assert_int_equal(t_stat(&run, "throttled"), shadow ? 0 : 1000);
    assert_int_equal(t_stat(&run, "throttle_shadowed"), shadow ? 1000 : 0);
    assert_int_equal(t_stat(&run, "chunks_done"), 1);
    assert_int_equal(t_sql_int(&run, "SELECT throttled FROM push_task WHERE id = ?"),
                     shadow ? 0 : 1000);
    assert_int_equal(t_sql_int(&run, "SELECT sent FROM push_task WHERE id = ?"), shadow ? 1000 : 0);
    assert_int_equal(t_sql_int(&run, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ? "
                                     "AND status = 'throttled'"),
                     shadow ? 0 : 1000);
    t_record_free(&rec);
    t_finish(&run);
}

static void test_throttle_enforce(void **state)
{
    (void)state;
    t_throttle_two_tasks("enforce");
}

static void test_throttle_shadow(void **state)
{
    (void)state;
    t_throttle_two_tasks("shadow");
}

/* ---- control: pause and cancel ------------------------------------------- */

#define T_CTL_CHUNKS 4
#define T_CTL_CHUNK_SIZE 5000
#define T_CTL_FIRST 4000001

static int64_t t_record_lines(const t_run *run)
{
    FILE *f = fopen(run->record, "r");
    int64_t lines = 0;
    int ch;

    if (f == NULL)
        return 0;
    while ((ch = fgetc(f)) != EOF)
        lines += ch == '\n';
    fclose(f);
    return lines;
}

static void t_set_ctl(const t_run *run, const char *value)
{
    char key[256], errstr[512];
    redisReply *reply;

    hr_key_task(hr_redis_prefix(run->r), key, sizeof key, run->task, HR_KEY_CTL);
    reply = hr_redis_cmdf(run->r, errstr, sizeof errstr, "SET %s %s", key, value);
    assert_non_null(reply);
    freeReplyObject(reply);
}

/* Recipients still in the chunk sets. */
static int64_t t_chunk_left(const t_run *run)
{
    char key[256], errstr[512];
    int64_t n = 0;

    for (int64_t seq = 1; seq <= T_CTL_CHUNKS; seq++) {
        redisReply *reply;

        hr_key_chunk(hr_redis_prefix(run->r), key, sizeof key, run->task, seq);
        reply = hr_redis_cmdf(run->r, errstr, sizeof errstr, "SCARD %s", key);
        assert_non_null(reply);
        n += reply->integer;
        freeReplyObject(reply);
    }
    return n;
}

/* Every partition's committed offset of the test group is its high
 * watermark: each message's offset was stored. */
static void t_assert_offsets_committed(const t_run *run)
{
    char errstr[512];
    rd_kafka_conf_t *conf = hr_kafka_conf_new(run->cfg, HR_KAFKA_CONSUMER, errstr, sizeof errstr);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(12);
    rd_kafka_t *rk;

    assert_non_null(conf);
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    assert_non_null(rk);
    for (int32_t i = 0; i < 12; i++)
        rd_kafka_topic_partition_list_add(parts, run->cfg->kafka.topic, i);
    assert_int_equal(rd_kafka_committed(rk, parts, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
    for (int i = 0; i < parts->cnt; i++) {
        int64_t lo = 0, hi = 0;

        assert_int_equal(rd_kafka_query_watermark_offsets(
                             rk, run->cfg->kafka.topic, parts->elems[i].partition, &lo, &hi, 10000),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
        if (hi > 0)
            assert_int_equal(parts->elems[i].offset, hi);
    }
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_destroy(rk);
}

/* 20,000 recipients in 4 chunks (with push_chunk rows) against a sink that
 * answers after 400 ms; returns once the sink saw some of them. */
static void t_ctl_start(t_run *run)
{
    const char *slow[] = {"--latency-ms", "400", NULL};
    char errstr[512];
    t_progress prog = {run, 200};

    t_start(run, slow);
    t_create_task(run, "worker control");
    for (int64_t seq = 1; seq <= T_CTL_CHUNKS; seq++) {
        hr_mysql_param p[] = {HR_P_I64(run->task), HR_P_I64(seq), HR_P_I64(T_CTL_CHUNK_SIZE)};

        t_fill_chunk(run, seq, T_CTL_FIRST + (seq - 1) * T_CTL_CHUNK_SIZE, T_CTL_CHUNK_SIZE);
        assert_int_equal(hr_mysql_exec(run->m,
                                       "INSERT INTO push_chunk (task_id, seq, size, published_at) "
                                       "VALUES (?, ?, ?, UTC_TIMESTAMP(3))",
                                       p, 3, NULL, NULL, NULL, errstr, sizeof errstr),
                         0);
    }
    t_spawn_worker(run, 0);
    t_wait_assigned(run, 1);
    for (int64_t seq = 1; seq <= T_CTL_CHUNKS; seq++)
        t_produce_chunk(run, run->task, seq, T_CTL_CHUNK_SIZE);
    assert_true(itest_wait_until(t_sink_progress, &prog, 60000));
}

typedef struct t_chunk_rows {
    const t_run *run;
    const char *sql;
    int64_t want;
} t_chunk_rows;

static bool t_sql_reached(void *ctx)
{
    const t_chunk_rows *q = ctx;

    return t_sql_int(q->run, q->sql) == q->want;
}

/* pause: within 2 s nothing more reaches the sink (flat for 3 s), the rest
 * stays in the chunk sets and pending, the offsets are stored, the rows
 * say 'parked'. */
static void test_ctl_pause_parks(void **state)
{
    static t_run run;
    t_chunk_rows parked = {&run,
                           "SELECT COUNT(*) FROM push_chunk WHERE task_id = ? AND "
                           "state = 'parked'",
                           T_CTL_CHUNKS};
    int64_t flat, left;

    (void)state;
    t_ctl_start(&run);
    t_set_ctl(&run, "pause");
    sleep(2);
    flat = t_record_lines(&run);
    sleep(3);
    assert_int_equal(t_record_lines(&run), flat);
    assert_true(flat < T_CTL_CHUNKS * T_CTL_CHUNK_SIZE);
    assert_true(itest_wait_until(t_sql_reached, &parked, 10000));
    left = t_chunk_left(&run);
    assert_true(left > 0);
    assert_int_equal(left + t_stat(&run, "sent"), T_CTL_CHUNKS * T_CTL_CHUNK_SIZE);
    assert_int_equal(t_pending(&run), T_CTL_CHUNKS);
    assert_int_equal(t_log_count(&run, 0, "chunk_parked"), T_CTL_CHUNKS);
    t_stop_worker(&run, 0);
    t_assert_offsets_committed(&run);
    t_finish(&run);
}

/* cancel: every recipient ends up sent or cancelled, in Redis and MySQL;
 * nothing is pending; the rows say 'cancelled'. */
static void test_ctl_cancel_drops(void **state)
{
    static t_run run;
    t_chunk_rows rows = {&run,
                         "SELECT COUNT(*) FROM push_chunk WHERE task_id = ? AND "
                         "state = 'cancelled'",
                         T_CTL_CHUNKS};
    t_chunk_rows counters = {&run, "SELECT sent + cancelled FROM push_task WHERE id = ?",
                             T_CTL_CHUNKS * T_CTL_CHUNK_SIZE};
    int64_t cancelled;

    (void)state;
    t_ctl_start(&run);
    t_set_ctl(&run, "cancel");
    assert_true(itest_wait_until(t_sql_reached, &rows, 20000));
    assert_true(itest_wait_until(t_sql_reached, &counters, 10000));
    cancelled = t_stat(&run, "cancelled");
    assert_true(cancelled > 0);
    assert_int_equal(cancelled + t_stat(&run, "sent"), T_CTL_CHUNKS * T_CTL_CHUNK_SIZE);
    assert_int_equal(t_sql_int(&run, "SELECT cancelled FROM push_task WHERE id = ?"), cancelled);
    assert_int_equal(t_chunk_left(&run), 0);
    assert_int_equal(t_pending(&run), 0);
    t_stop_worker(&run, 0);
    t_finish(&run);
}

/* ---- metrics ---------------------------------------------------------------- */

/* libcurl write callback: appends to the t_body, keeping it NUL-terminated. */
typedef struct {
    char *data;
    size_t len;
} t_body;

static size_t t_on_body(char *p, size_t size, size_t n, void *ud)
{
    t_body *b = ud;
    size_t add = size * n;
    char *grown = realloc(b->data, b->len + add + 1);

    if (grown == NULL)
        return 0; /* curl fails the transfer: CURLE_WRITE_ERROR */
    memcpy(grown + b->len, p, add);
    b->len += add;
    grown[b->len] = '\0';
    b->data = grown;
    return add;
}

/* GET PATH from 127.0.0.1:PORT (10 s at most).  Returns the status; *BODY
 * (malloc'ed, NUL-terminated) gets the body. */
static int t_http_get(int port, const char *path, char **body)
{
    t_body b = {.data = strdup("")};
    char url[256];
    long status = -1;
    CURL *c = curl_easy_init();

    assert_non_null(b.data);
    assert_non_null(c);
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, t_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    *body = b.data;
    return (int)status;
}

static bool t_metric_name_ok(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
            return false;
    return true;
}

/* Parses TEXT (exposition format 0.0.4) strictly: every line is a HELP, a
 * TYPE or a sample of a declared family with well-formed labels and a
 * number.  Returns the value of sample WANT (name and labels exactly as
 * rendered, e.g. 'x_total{a="b"}'), or -1 when absent. */
static double t_metrics_parse(const char *text, const char *want)
{
    char types[64][128];
    size_t ntypes = 0;
    double found = -1;
    const char *line = text;

    while (*line != '\0') {
        const char *end = strchr(line, '\n'), *p = line, *name_end;
        bool declared = false;
        char *vend;
        double v;

        assert_non_null(end); /* every line ends with a newline */
        if (strncmp(line, "# HELP ", 7) == 0) {
            p = line + 7;
            name_end = strchr(p, ' ');
            assert_true(name_end != NULL && name_end < end);
            assert_true(t_metric_name_ok(p, (size_t)(name_end - p)));
        } else if (strncmp(line, "# TYPE ", 7) == 0) {
            p = line + 7;
            name_end = strchr(p, ' ');
            assert_true(name_end != NULL && name_end < end);
            assert_true(t_metric_name_ok(p, (size_t)(name_end - p)));
            assert_true(ntypes < 64 && (size_t)(name_end - p) < sizeof types[0]);
            memcpy(types[ntypes], p, (size_t)(name_end - p));
            types[ntypes][name_end - p] = '\0';
            ntypes++;
            assert_true(strncmp(name_end + 1, "counter\n", 8) == 0 ||
                        strncmp(name_end + 1, "gauge\n", 6) == 0 ||
                        strncmp(name_end + 1, "histogram\n", 10) == 0);
        } else {
            name_end = p;
            while (name_end < end && *name_end != '{' && *name_end != ' ')
                name_end++;
            assert_true(t_metric_name_ok(p, (size_t)(name_end - p)));
            for (size_t i = 0; i < ntypes && !declared; i++) {
                size_t tl = strlen(types[i]);

                declared = strncmp(p, types[i], tl) == 0 &&
                           ((size_t)(name_end - p) == tl || strncmp(p + tl, "_bucket", 7) == 0 ||
                            strncmp(p + tl, "_sum", 4) == 0 || strncmp(p + tl, "_count", 6) == 0);
            }
            assert_true(declared);
            if (*name_end == '{') {
                const char *q = name_end + 1;

                while (*q != '}') {
                    const char *eq = strchr(q, '=');

                    assert_true(eq != NULL && eq < end);
                    assert_true(t_metric_name_ok(q, (size_t)(eq - q)));
                    assert_int_equal(eq[1], '"');
                    for (q = eq + 2; *q != '"'; q++) {
                        assert_true(q < end);
                        if (*q == '\\')
                            q++;
                    }
                    q++;
                    if (*q == ',')
                        q++;
                    else
                        assert_int_equal(*q, '}');
                }
                name_end = q + 1;
            }
            assert_int_equal(*name_end, ' ');
            v = strtod(name_end + 1, &vend);
            assert_true(vend == end);
            if ((size_t)(name_end - line) == strlen(want) && strncmp(line, want, strlen(want)) == 0)
                found = v;
        }
        line = end + 1;
    }
    return found;
}

/* A campaign through one worker, then a strict scrape: the sent pushes
 * equal what the sink received, the chunks are counted, /readyz is 200. */
static void test_metrics_scrape(void **state)
{
    char want[256], *body = NULL;
    static t_run run;
    t_record rec;
    double sent, acked, inflight;

    (void)state;
    t_start(&run, NULL);
    t_create_task(&run, "worker metrics");
    t_fill_chunk(&run, 1, 6000001, 2000);
    t_fill_chunk(&run, 2, 6002001, 2000);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    t_produce_chunk(&run, run.task, 1, 2000);
    t_produce_chunk(&run, run.task, 2, 2000);
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));

    assert_int_equal(t_http_get(t_metrics_port(&run, 0), "/metrics", &body), 200);
    snprintf(want, sizeof want, "herald_pushes_total{channel=\"%s\",outcome=\"sent\"}",
             run.cfg->channels[0].name);
    sent = t_metrics_parse(body, want);
    acked = t_metrics_parse(body, "herald_chunks_acked_total");
    inflight = t_metrics_parse(body, "herald_inflight_requests");
    snprintf(want, sizeof want, "herald_push_latency_seconds_count{channel=\"%s\"}",
             run.cfg->channels[0].name);
    assert_true(t_metrics_parse(body, want) >= 4000);
    free(body);
    assert_int_equal(t_http_get(t_metrics_port(&run, 0), "/readyz", &body), 200);
    free(body);
    assert_int_equal(t_http_get(t_metrics_port(&run, 0), "/healthz", &body), 200);
    free(body);
    t_stop_worker(&run, 0);
    t_stop_sink(&run);

    t_read_record(&run, 6000001, &rec);
    assert_int_equal(rec.successes, 4000);
    assert_int_equal((int64_t)sent, rec.successes);
    assert_int_equal((int64_t)acked, 2);
    assert_int_equal((int64_t)inflight, 0);
    t_record_free(&rec);
    t_finish(&run);
}

/* Occurrences of NEEDLE anywhere in worker I's log. */
static int t_log_grep(const t_run *run, int i, const char *needle)
{
    char line[4096];
    FILE *f = fopen(run->worker_log[i], "r");
    int n = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strstr(line, needle) != NULL)
            n++;
    fclose(f);
    return n;
}

/* One chunk slower than max.poll.interval.ms with max_chunks_in_flight 1:
 * the worker keeps polling (partitions paused) and stays in the group. */
static void test_full_keeps_polling(void **state)
{
    static t_run run;

    (void)state;
    t_start(&run, NULL);
    run.cfg->worker.max_chunks_in_flight = 1;
    run.cfg->channels[0].rate_limit = 10; /* 100 recipients: about 10 s */
    /* At least session.timeout.ms (6 s), well below the chunk's time. */
    run.cfg->kafka.properties =
        realloc(run.cfg->kafka.properties, 2 * sizeof *run.cfg->kafka.properties);
    assert_non_null(run.cfg->kafka.properties);
    run.cfg->kafka.properties[1].key = strdup("max.poll.interval.ms");
    run.cfg->kafka.properties[1].value = strdup("6500");
    run.cfg->kafka.nproperties = 2;
    assert_non_null(run.cfg->kafka.properties[1].value);
    unlink(run.cfg_path);
    assert_int_equal(itest_write_config(run.cfg, run.cfg_path, sizeof run.cfg_path), 0);
    t_create_task(&run, "worker full keeps polling");
    t_fill_chunk(&run, 1, 9000001, 100);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    t_produce_chunk(&run, run.task, 1, 100);
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    assert_int_equal(t_stat(&run, "sent"), 100);
    assert_int_equal(t_log_grep(&run, 0, "MAX_POLL"), 0);
    assert_int_equal(t_log_count(&run, 0, "partitions_revoked"), 0);
    t_finish(&run);
}

/* Members that are not uids are dead-lettered ("invalid uid") and never
 * pushed or written to push_delivery (a bad row would stall the reporter);
 * a user hash of the wrong type leaves that recipient without attributes. */
static void test_bad_members(void **state)
{
    static const char *const bad[] = {"-1", "18446744073709551615", "abc"};
    char key[256], ukey[256], errstr[512];
    redisReply *reply;
    static t_run run;
    t_record rec;

    (void)state;
    t_start(&run, NULL);
    t_create_task_titled(&run, "worker bad members", "Hi {{user.name}}");
    t_fill_chunk(&run, 1, 9100001, 2);
    hr_key_chunk(hr_redis_prefix(run.r), key, sizeof key, run.task, 1);
    reply = hr_redis_cmdf(run.r, errstr, sizeof errstr, "SADD %s %s %s %s", key, bad[0], bad[1],
                          bad[2]);
    assert_non_null(reply);
    freeReplyObject(reply);
    hr_key_user(hr_redis_prefix(run.r), ukey, sizeof ukey, "9100002");
    reply = hr_redis_cmdf(run.r, errstr, sizeof errstr, "SET %s not-a-hash", ukey);
    assert_non_null(reply);
    freeReplyObject(reply);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    t_produce_chunk(&run, run.task, 1, 5);
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    t_stop_worker(&run, 0);
    t_stop_sink(&run);

    t_read_record(&run, 9100001, &rec);
    assert_int_equal(rec.successes, 2);
    assert_int_equal(rec.lines, 2);
    t_record_free(&rec);
    assert_int_equal(t_stat(&run, "sent"), 2);
    assert_int_equal(t_stat(&run, "failed"), 3);
    assert_int_equal(t_sql_int(&run, "SELECT failed FROM push_task WHERE id = ?"), 3);
    assert_int_equal(t_sql_int(&run, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ?"), 2);
    hr_key_task(hr_redis_prefix(run.r), key, sizeof key, run.task, HR_KEY_FAILED);
    for (size_t i = 0; i < 3; i++) {
        reply = hr_redis_cmdf(run.r, errstr, sizeof errstr, "HGET %s %s", key, bad[i]);
        assert_non_null(reply);
        assert_int_equal(reply->type, REDIS_REPLY_STRING);
        assert_string_equal(reply->str, "invalid uid");
        freeReplyObject(reply);
    }
    assert_int_equal(t_log_count(&run, 0, "user_hash_error"), 1);
    assert_int_equal(t_log_count(&run, 0, "chunk_dropped"), 0);
    t_finish(&run);
}

/* The line number (from 1) of worker I's first log line holding NEEDLE, 0
 * when none does. */
static int t_log_line(const t_run *run, int i, const char *needle)
{
    char line[4096];
    FILE *f = fopen(run->worker_log[i], "r");
    int n = 0, at = 0;

    if (f == NULL)
        return 0;
    while (at == 0 && fgets(line, sizeof line, f) != NULL) {
        n++;
        if (strstr(line, needle) != NULL)
            at = n;
    }
    fclose(f);
    return at;
}

/* A chunk of 1,202 members (two of them not uids) is read in parts
 * (worker/wk_chunk_open.h): its first pushes are handed to the sender once
 * the open's first 100 members are read (chunk_start read=100), before the
 * last part's read answered (chunk_read, after it in the log), and every
 * member is still accounted for once: 1,200 sent, 2 dead-lettered, one
 * close. */
static void test_open_in_parts(void **state)
{
    char key[256], errstr[512];
    redisReply *reply;
    static t_run run;
    t_record rec;
    int start, read;

    (void)state;
    t_start(&run, NULL);
    t_create_task(&run, "worker open in parts");
    t_fill_chunk(&run, 1, 9300001, 1200);
    hr_key_chunk(hr_redis_prefix(run.r), key, sizeof key, run.task, 1);
    reply = hr_redis_cmdf(run.r, errstr, sizeof errstr, "SADD %s abc -5", key);
    assert_non_null(reply);
    freeReplyObject(reply);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    t_produce_chunk(&run, run.task, 1, 1202);
    assert_true(itest_wait_until(t_task_done, &run, T_WAIT_DONE_MS));
    t_stop_worker(&run, 0);
    t_stop_sink(&run);

    t_read_record(&run, 9300001, &rec);
    assert_int_equal(rec.missing, 0);
    assert_int_equal(rec.duplicates, 0);
    assert_int_equal(rec.successes, 1200);
    t_record_free(&rec);
    assert_int_equal(t_stat(&run, "sent"), 1200);
    assert_int_equal(t_stat(&run, "failed"), 2);
    assert_int_equal(t_stat(&run, "chunks_done"), 1);
    assert_int_equal(t_sql_int(&run, "SELECT sent FROM push_task WHERE id = ?"), 1200);
    assert_int_equal(t_sql_int(&run, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ? "
                                     "AND status = 'sent'"),
                     1200);
    start = t_log_line(&run, 0, "members=1202 read=100 ");
    read = t_log_line(&run, 0, "event=chunk_read ");
    assert_true(start > 0);
    assert_true(read > start);
    assert_int_equal(t_log_grep(&run, 0, "recipients=1200 members=1202 settled="), 1);
    assert_int_equal(t_log_count(&run, 0, "chunk_start"), 1);
    assert_int_equal(t_log_count(&run, 0, "chunk_dropped"), 0);
    t_finish(&run);
}

static bool t_log_twice(void *ctx)
{
    const t_wait_log *w = ctx;

    return t_log_count(w->run, w->worker, w->event) >= 2;
}

/* pending[SEQ] is gone: chunk_done.lua closed the chunk. */
typedef struct t_seq {
    const t_run *run;
    int64_t seq;
} t_seq;

static bool t_seq_closed(void *ctx)
{
    const t_seq *q = ctx;
    char key[256], errstr[512];
    redisReply *reply;
    bool closed;

    hr_key_task(hr_redis_prefix(q->run->r), key, sizeof key, q->run->task, HR_KEY_PENDING);
    reply =
        hr_redis_cmdf(q->run->r, errstr, sizeof errstr, "HEXISTS %s %lld", key, (long long)q->seq);
    assert_non_null(reply);
    closed = reply->integer == 0;
    freeReplyObject(reply);
    return closed;
}

/* Issue 20 item 3: one chunk abandoned while another waits for sender
 * slots.  Chunk 1 (2,000 recipients, one task queue, 8 slots, a 200 ms
 * sink) holds every slot; chunk 2's 100 pushes queue behind it.  Chunk 1's
 * lease is taken from it, so the next renewal abandons it and cancels its
 * 8 requests: nothing is in flight any more and no transfer will finish.
 * Chunk 2 must still be pushed and closed (before the fix the sender was
 * never pumped again and it sat there, lease renewed, until SIGTERM), and
 * the watchdog must not have had to step in. */
static void test_abandon_keeps_others(void **state)
{
    static const char *const extra[] = {"--latency-ms", "200", NULL};
    static t_run run;
    char key[256], errstr[512], *body = NULL;
    t_wait_log started = {&run, 0, "chunk_start"}, lost = {&run, 0, "lease_lost"};
    t_seq second = {&run, 2};
    redisReply *reply;

    (void)state;
    t_start(&run, extra);
    run.cfg->channels[0].concurrency = 8;
    unlink(run.cfg_path);
    assert_int_equal(itest_write_config(run.cfg, run.cfg_path, sizeof run.cfg_path), 0);
    t_create_task(&run, "worker abandon keeps others");
    t_fill_chunk(&run, 1, 7100001, 2000);
    t_fill_chunk(&run, 2, 7200001, 100);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    t_produce_chunk(&run, run.task, 1, 2000);
    assert_true(itest_wait_until(t_log_seen, &started, 20000));
    t_produce_chunk(&run, run.task, 2, 100);
    assert_true(itest_wait_until(t_log_twice, &started, 20000));
    hr_key_lease(hr_redis_prefix(run.r), key, sizeof key, run.task, 1);
    reply = hr_redis_cmdf(run.r, errstr, sizeof errstr, "SET %s someone-else PX 60000", key);
    assert_non_null(reply);
    freeReplyObject(reply);
    assert_true(itest_wait_until(t_log_seen, &lost, 5000));
    /* 100 recipients at 8 × 5/s: about 3 s once pumped. */
    assert_true(itest_wait_until(t_seq_closed, &second, 15000));
    assert_int_equal(t_http_get(t_metrics_port(&run, 0), "/metrics", &body), 200);
    assert_true(t_metrics_parse(body, "herald_worker_stalls_total") == 0);
    assert_true(t_metrics_parse(body, "herald_worker_stalled_chunks") == 0);
    free(body);
    assert_int_equal(t_log_count(&run, 0, "chunks_stalled"), 0);
    reply = hr_redis_cmdf(run.r, errstr, sizeof errstr, "DEL %s", key);
    assert_non_null(reply);
    freeReplyObject(reply);
    t_stop_worker(&run, 0);
    t_finish(&run);
}

/* A chunk redelivered while a dead worker's lease still runs (issue 12):
 * the lease (1.5 s left, below lease_ms 2 s) is waited for and the chunk
 * pushed, not skipped to the sweeper.  A lease a live holder keeps
 * renewing (60 s here) is skipped after lease_ms: chunk_busy, nothing
 * pushed. */
static void test_dead_holder_lease(void **state)
{
    char key[256], errstr[512];
    redisReply *reply;
    static t_run run;
    t_record rec;
    t_wait_log busy = {&run, 0, "chunk_busy"};
    int64_t t0;

    (void)state;
    t_start(&run, NULL);
    t_create_task(&run, "worker dead holder lease");
    t_fill_chunk(&run, 1, 9300001, 200);
    t_fill_chunk(&run, 2, 9400001, 10);
    hr_key_lease(hr_redis_prefix(run.r), key, sizeof key, run.task, 1);
    reply = hr_redis_cmdf(run.r, errstr, sizeof errstr, "SET %s dead-worker/1 PX 1500", key);
    assert_non_null(reply);
    freeReplyObject(reply);
    hr_key_lease(hr_redis_prefix(run.r), key, sizeof key, run.task, 2);
    reply = hr_redis_cmdf(run.r, errstr, sizeof errstr, "SET %s live-worker/1 PX 60000", key);
    assert_non_null(reply);
    freeReplyObject(reply);
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    t0 = itest_now_ms();
    t_produce_chunk(&run, run.task, 1, 200);
    t_produce_chunk(&run, run.task, 2, 10);
    assert_true(itest_wait_until(t_seq_closed, &(t_seq){&run, 1}, 20000));
    assert_true(itest_wait_until(t_log_seen, &busy, 10000));
    /* Waited for: the lease ran out 1.5 s after it was set. */
    assert_true(itest_now_ms() - t0 >= 1000);
    assert_int_equal(t_log_count(&run, 0, "chunk_lease_wait"), 2);
    assert_int_equal(t_log_count(&run, 0, "chunk_busy"), 1);
    t_stop_worker(&run, 0);
    t_stop_sink(&run);
    t_read_record(&run, 9300001, &rec);
    assert_int_equal(rec.successes, 200); /* chunk 1, and nobody of chunk 2 */
    assert_int_equal(rec.lines, 200);
    t_record_free(&rec);
    assert_int_equal(t_chunk_left(&run), 10);
    t_finish(&run);
}

/* A cancelled task's chunk whose lease another worker holds is left to
 * that holder: no recipient is dropped, the offset is settled. */
static void test_cancel_foreign_lease(void **state)
{
    char key[256], errstr[512];
    redisReply *reply;
    static t_run run;
    t_wait_log seen = {&run, 0, "chunk_cancel_foreign"};

    (void)state;
    t_start(&run, NULL);
    t_create_task(&run, "worker cancel foreign lease");
    t_fill_chunk(&run, 1, 9200001, 10);
    hr_key_lease(hr_redis_prefix(run.r), key, sizeof key, run.task, 1);
    reply = hr_redis_cmdf(run.r, errstr, sizeof errstr, "SET %s other-worker PX 60000", key);
    assert_non_null(reply);
    freeReplyObject(reply);
    t_set_ctl(&run, "cancel");
    t_spawn_worker(&run, 0);
    t_wait_assigned(&run, 1);
    t_produce_chunk(&run, run.task, 1, 10);
    assert_true(itest_wait_until(t_log_seen, &seen, 30000));
    assert_int_equal(t_chunk_left(&run), 10);
    assert_int_equal(t_pending(&run), 1);
    assert_int_equal(t_stat(&run, "cancelled"), 0);
    t_finish(&run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_two_workers_exactly_once, t_teardown),
        cmocka_unit_test_teardown(test_fail_first_retried, t_teardown),
        cmocka_unit_test_teardown(test_fail_permanent_dead_letters, t_teardown),
        cmocka_unit_test_teardown(test_throttled_channel_recovers, t_teardown),
        cmocka_unit_test_teardown(test_bad_messages_skipped, t_teardown),
        cmocka_unit_test_teardown(test_kill9_redelivers, t_teardown),
        cmocka_unit_test_teardown(test_rate_limited_task_no_head_of_line, t_teardown),
        cmocka_unit_test_teardown(test_sigterm_drains, t_teardown),
        cmocka_unit_test_teardown(test_e2e_dispatcher_100k, t_teardown),
        cmocka_unit_test_teardown(test_e2e_stuck_member, t_teardown),
        cmocka_unit_test_teardown(test_throttle_enforce, t_teardown),
        cmocka_unit_test_teardown(test_throttle_shadow, t_teardown),
        cmocka_unit_test_teardown(test_ctl_pause_parks, t_teardown),
        cmocka_unit_test_teardown(test_ctl_cancel_drops, t_teardown),
        cmocka_unit_test_teardown(test_metrics_scrape, t_teardown),
        cmocka_unit_test_teardown(test_full_keeps_polling, t_teardown),
        cmocka_unit_test_teardown(test_bad_members, t_teardown),
        cmocka_unit_test_teardown(test_open_in_parts, t_teardown),
        cmocka_unit_test_teardown(test_cancel_foreign_lease, t_teardown),
        cmocka_unit_test_teardown(test_abandon_keeps_others, t_teardown),
        cmocka_unit_test_teardown(test_dead_holder_lease, t_teardown),
    };

    hr_config_free(itest_config_shared()); /* exits 77 without a stack */
    /* TEST_WORKER_ONLY=<glob> runs a subset while debugging one scenario. */
    if (getenv("TEST_WORKER_ONLY") != NULL)
        cmocka_set_test_filter(getenv("TEST_WORKER_ONLY"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
