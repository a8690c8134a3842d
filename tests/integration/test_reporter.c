/* The worker's reporter (worker/wk_reporter.c) against the stack's MariaDB:
 * - a batch larger than a multi-row INSERT could bind (65,535
 *   placeholders, 8,191 rows of 8 columns) is written, none refused
 *   (MariaDB answers errno 1390 to a statement of more, and
 *   the reporter used to fall back to one INSERT per row: 4x MariaDB's
 *   CPU).  Its log lines go to stderr, which the test reads back from a
 *   file.  Every row lands in its task's day (push_delivery.day =
 *   DATE(due_at), the partition key of 013_delivery_partitions.sql);
 * - part batches of many sizes (flushed by the 200 ms timer) prepare one
 *   INSERT, not one per size (each batch is one array-bound execute):
 *   MariaDB's global Prepared_stmt_count, read while the reporter still
 *   holds its connection, rises by at most 6 (the INSERT and the counter
 *   statements); two outcomes of one recipient in one batch, sent in key
 *   order, leave the later one as the row.  The suite runs this test alone (is_parallel: false),
 *   so no other client prepares meanwhile;
 * - a chunk end that comes before the dispatcher's push_chunk row (the
 *   race of its batched INSERT with a small chunk) is written when the row
 *   is inserted 500 ms later; one whose row never comes is given up after
 *   the row wait (300 ms here) and counted, ends that change nothing in a
 *   row that exists are not taken for missing, and beyond
 *   WK_REPORTER_ROW_WAIT_MAX waiting ends the oldest are given up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hr_mysql.h"
#include "itest.h"
#include "wk_metrics.h"
#include "wk_reporter.h"

/* Three full batches of 10,000: after the first write the pusher is far
 * ahead, so the later batches are surely whole. */
#define T_ROWS 30000
#define T_BATCH 10000

static int64_t t_count(hr_mysql *m, const char *sql, int64_t task)
{
    hr_mysql_param p = HR_P_I64(task);
    hr_mysql_rows *rows = NULL;
    char errstr[512];
    int64_t v;

    assert_int_equal(hr_mysql_query(m, sql, &p, 1, &rows, errstr, sizeof errstr), 0);
    assert_int_equal(rows->nrows, 1);
    v = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    return v;
}

/* A 'dispatched' task row of CFG's first channel; its id. */
static int64_t t_task(const hr_config *cfg, hr_mysql *m, const char *name)
{
    hr_mysql_param p[] = {HR_P_STR(name), HR_P_STR(cfg->channels[0].name)};
    uint64_t id = 0;
    char errstr[512];

    assert_int_equal(hr_mysql_exec(m,
                                   "INSERT INTO push_task (name, topic, channel, title, body, "
                                   "due_at, state) VALUES (?, 'reporter-test', ?, "
                                   "'t', 'b', UTC_TIMESTAMP(3), 'dispatched')",
                                   p, 2, NULL, &id, NULL, errstr, sizeof errstr),
                     0);
    return (int64_t)id;
}

/* Deletes task ID's row, its delivery log and its chunk rows. */
static void t_drop(hr_mysql *m, int64_t id)
{
    hr_mysql_param p[] = {HR_P_I64(id)};
    char errstr[512];

    assert_int_equal(hr_mysql_exec(m, "DELETE FROM push_delivery WHERE task_id = ?", p, 1, NULL,
                                   NULL, NULL, errstr, sizeof errstr),
                     0);
    assert_int_equal(hr_mysql_exec(m, "DELETE FROM push_chunk WHERE task_id = ?", p, 1, NULL, NULL,
                                   NULL, errstr, sizeof errstr),
                     0);
    assert_int_equal(hr_mysql_exec(m, "DELETE FROM push_task WHERE id = ?", p, 1, NULL, NULL, NULL,
                                   errstr, sizeof errstr),
                     0);
}

/* Queues outcomes of uids FIRST..LAST of TASK, sent on CHANNEL (the
 * worker's outcomes always name their task's channel); the events carry
 * the task's due_at, as the worker's do. */
/* The due time of TASK, as the worker's events carry it. */
static int64_t t_due_ms(hr_mysql *m, int64_t task)
{
    return t_count(m,
                   "SELECT CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED) FROM push_task "
                   "WHERE id = ?",
                   task);
}

/* One outcome of TASK (due at DUE_MS) for UID. */
static void t_push_one(wk_reporter *rp, int64_t task, const char *channel, int64_t due_ms, int uid,
                       wk_delivery status, int attempts, int http_status)
{
    wk_event ev = {.kind = WK_EVENT_OUTCOME, .task = task};

    ev.u.outcome.uid = (uint64_t)uid;
    ev.u.outcome.channel = channel;
    ev.u.outcome.status = status;
    ev.u.outcome.attempts = attempts;
    ev.u.outcome.http_status = http_status;
    ev.u.outcome.at_ms = itest_now_ms();
    ev.u.outcome.due_ms = due_ms;
    wk_reporter_push(rp, &ev);
}

static void t_push(hr_mysql *m, wk_reporter *rp, int64_t task, const char *channel, int first,
                   int last)
{
    int64_t due_ms = t_due_ms(m, task);

    for (int i = first; i <= last; i++)
        t_push_one(rp, task, channel, due_ms, i, WK_DELIVERY_SENT, 1, 200);
}

/* The MySQL connection *M, the metrics *MET and a task named NAME (its id)
 * of a test with CFG's delivery log on. */
static int64_t t_setup(hr_config *cfg, hr_mysql **m, wk_metrics **met, const char *name)
{
    char errstr[512];

    cfg->worker.delivery_log = true;
    assert_int_equal(hr_mysql_connect(cfg, m, errstr, sizeof errstr), 0);
    *met = wk_metrics_new(cfg, errstr, sizeof errstr);
    assert_non_null(*met);
    return t_task(cfg, *m, name);
}

/* The reporter's log lines (stderr) go into a temporary file while a test
 * runs; t_log_end puts stderr back and returns the lines holding NEEDLE
 * (each echoed), then removes the file. */
typedef struct t_log {
    char path[64];
    int fd, saved;
} t_log;

static void t_log_start(t_log *log)
{
    snprintf(log->path, sizeof log->path, "/tmp/herald-test-reporter-XXXXXX");
    log->fd = mkstemp(log->path);
    assert_true(log->fd >= 0);
    log->saved = dup(STDERR_FILENO);
    assert_true(log->saved >= 0 && dup2(log->fd, STDERR_FILENO) >= 0);
}

/* The lines of LOG holding NEEDLE and, when not NULL, ALSO; LINES gets
 * them (room for LEN bytes). */
static int t_log_end(t_log *log, const char *needle, const char *also, char *lines, size_t len)
{
    char line[1024];
    size_t used = 0;
    int found = 0;
    FILE *f;

    dup2(log->saved, STDERR_FILENO);
    close(log->saved);
    f = fdopen(log->fd, "r");
    assert_non_null(f);
    rewind(f);
    if (len > 0)
        lines[0] = '\0';
    while (fgets(line, sizeof line, f) != NULL) {
        if (strstr(line, needle) == NULL || (also != NULL && strstr(line, also) == NULL))
            continue;
        found++;
        fputs(line, stderr);
        if (used + strlen(line) < len) {
            memcpy(lines + used, line, strlen(line) + 1);
            used += strlen(line);
        }
    }
    fclose(f);
    unlink(log->path);
    return found;
}

static int64_t t_prepared(hr_mysql *m)
{
    hr_mysql_rows *rows = NULL;
    char errstr[512];
    int64_t v;

    assert_int_equal(hr_mysql_query(m,
                                    "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                                    "WHERE VARIABLE_NAME = 'PREPARED_STMT_COUNT'",
                                    NULL, 0, &rows, errstr, sizeof errstr),
                     0);
    assert_int_equal(rows->nrows, 1);
    v = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    return v;
}

static void test_reporter_batch_over_placeholder_limit(void **state)
{
    hr_config *cfg = itest_config();
    hr_mysql *m = NULL;
    wk_metrics *met;
    wk_reporter *rp = NULL;
    char errstr[512];
    int64_t id;
    t_log log;

    (void)state;
    cfg->worker.reporter_batch = T_BATCH;
    id = t_setup(cfg, &m, &met, "reporter batch");
    t_log_start(&log);
    assert_int_equal(wk_reporter_start(cfg, "test-reporter", WK_REPORTER_ROW_WAIT_MS, met, NULL,
                                       &rp, errstr, sizeof errstr),
                     0);
    t_push(m, rp, id, cfg->channels[0].name, 1, T_ROWS);
    wk_reporter_stop(rp);
    assert_int_equal(t_log_end(&log, "delivery_batch_rejected", NULL, NULL, 0), 0);
    assert_int_equal(
        t_count(m, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ? AND status = 'sent'", id),
        T_ROWS);
    assert_int_equal(t_count(m,
                             "SELECT COUNT(*) FROM push_delivery d JOIN push_task t "
                             "ON t.id = d.task_id WHERE d.task_id = ? AND d.day = DATE(t.due_at)",
                             id),
                     T_ROWS);
    assert_true(hr_metrics_value(met->reporter_dropped[WK_DROP_QUEUE_FULL]) == 0);
    assert_true(hr_metrics_value(met->reporter_dropped[WK_DROP_REJECTED]) == 0);
    t_drop(m, id);
    wk_metrics_free(met);
    hr_mysql_free(m);
    hr_config_free(cfg);
}

/* A batch with a row MariaDB refuses (latency_ms -1 in an INT UNSIGNED,
 * strict mode): the array-bound execute fails whole, the rows go again one
 * by one, the other 99 are written and the refused one is logged and
 * counted. */
static void test_reporter_refused_row(void **state)
{
    hr_config *cfg = itest_config();
    hr_mysql *m = NULL;
    wk_metrics *met;
    wk_reporter *rp = NULL;
    wk_event ev;
    char errstr[512], lines[4096];
    int64_t id, due_ms;
    t_log log;

    (void)state;
    id = t_setup(cfg, &m, &met, "reporter refused row");
    due_ms = t_due_ms(m, id);
    t_log_start(&log);
    assert_int_equal(wk_reporter_start(cfg, "test-reporter", WK_REPORTER_ROW_WAIT_MS, met, NULL,
                                       &rp, errstr, sizeof errstr),
                     0);
    t_push(m, rp, id, cfg->channels[0].name, 1, 50);
    ev = (wk_event){.kind = WK_EVENT_OUTCOME, .task = id};
    ev.u.outcome.uid = 51;
    ev.u.outcome.channel = cfg->channels[0].name;
    ev.u.outcome.status = WK_DELIVERY_SENT;
    ev.u.outcome.attempts = 1;
    ev.u.outcome.latency_ms = -1;
    ev.u.outcome.at_ms = itest_now_ms();
    ev.u.outcome.due_ms = due_ms;
    wk_reporter_push(rp, &ev);
    t_push(m, rp, id, cfg->channels[0].name, 52, 100);
    wk_reporter_stop(rp);
    assert_true(t_log_end(&log, "delivery_", NULL, lines, sizeof lines) >= 2);
    assert_non_null(strstr(lines, "delivery_batch_rejected"));
    assert_non_null(strstr(lines, "delivery_row_dropped"));
    assert_non_null(strstr(lines, "uid=51 "));
    assert_int_equal(t_count(m, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ?", id), 99);
    assert_int_equal(
        t_count(m, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ? AND uid = 51", id), 0);
    assert_true(hr_metrics_value(met->reporter_dropped[WK_DROP_REJECTED]) == 1);
    t_drop(m, id);
    wk_metrics_free(met);
    hr_mysql_free(m);
    hr_config_free(cfg);
}

static void test_reporter_part_batches_few_statements(void **state)
{
    hr_config *cfg = itest_config();
    hr_mysql *m = NULL;
    wk_metrics *met;
    wk_reporter *rp = NULL;
    char errstr[512];
    int64_t id, before, during, due_ms;
    int uid = 0;

    (void)state;
    id = t_setup(cfg, &m, &met, "reporter part batches");
    before = t_prepared(m);
    assert_int_equal(wk_reporter_start(cfg, "test-reporter", WK_REPORTER_ROW_WAIT_MS, met, NULL,
                                       &rp, errstr, sizeof errstr),
                     0);
    /* 40 bursts of 40 distinct sizes under the batch (1,000), each
     * flushed alone by the 200 ms timer. */
    for (int k = 0; k < 40; k++) {
        int size = 17 + 23 * k;
        struct timespec pause = {0, 300 * 1000000L};

        t_push(m, rp, id, cfg->channels[0].name, uid + 1, uid + size);
        uid += size;
        nanosleep(&pause, NULL);
    }
    /* Two outcomes of one recipient in one burst, the higher uids first:
     * the batch goes in key order, and the later outcome is the row. */
    due_ms = t_due_ms(m, id);
    t_push_one(rp, id, cfg->channels[0].name, due_ms, uid + 2, WK_DELIVERY_SENT, 1, 200);
    t_push_one(rp, id, cfg->channels[0].name, due_ms, uid + 1, WK_DELIVERY_SENT, 1, 200);
    t_push_one(rp, id, cfg->channels[0].name, due_ms, uid + 2, WK_DELIVERY_SENT, 2, 200);
    t_push_one(rp, id, cfg->channels[0].name, due_ms, uid + 1, WK_DELIVERY_FAILED, 3, 503);
    nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL);
    during = t_prepared(m);
    wk_reporter_stop(rp);
    printf("prepared statements: %" PRId64 " before, %" PRId64 " with the reporter\n", before,
           during);
    /* One INSERT whatever the batch's size, and the counters' statements
     * (a statement per part-batch size would be 10 more here). */
    assert_true(during - before <= 6);
    assert_int_equal(
        t_count(m, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ? AND status = 'sent'", id),
        uid + 1);
    assert_int_equal(t_count(m,
                             "SELECT COUNT(*) FROM push_delivery WHERE task_id = ? AND "
                             "status = 'failed' AND attempts = 3 AND http_status = 503",
                             id),
                     1);
    assert_int_equal(t_count(m, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ?", id),
                     uid + 2);
    t_drop(m, id);
    wk_metrics_free(met);
    hr_mysql_free(m);
    hr_config_free(cfg);
}

/* An end STATE of TASK's chunk SEQ, another chunk of the task still
 * pending (so the task does not finish). */
static void t_chunk_end(wk_reporter *rp, int64_t task, int64_t seq, wk_chunk_end state,
                        int64_t done_ms)
{
    wk_event ev = {.kind = WK_EVENT_CHUNK_DONE, .task = task};

    ev.u.chunk.state = state;
    ev.u.chunk.seq = seq;
    ev.u.chunk.done_ms = done_ms;
    ev.u.chunk.pending_left = 1;
    ev.u.chunk.subs_left = 0;
    wk_reporter_push(rp, &ev);
}

/* TASK's chunk SEQ's row as the dispatcher's first publish writes it. */
static void t_chunk_row(hr_mysql *m, int64_t task, int64_t seq)
{
    hr_mysql_param p[] = {HR_P_I64(task), HR_P_I64(seq)};
    char errstr[512];

    assert_int_equal(hr_mysql_exec(m,
                                   "INSERT INTO push_chunk (task_id, seq, size, state, "
                                   "published_at) VALUES (?, ?, 10, 'published', "
                                   "UTC_TIMESTAMP(3))",
                                   p, 2, NULL, NULL, NULL, errstr, sizeof errstr),
                     0);
}

/* TASK's chunk SEQ: "state worker done_at-set", or "none". */
static void t_chunk_state(hr_mysql *m, int64_t task, int64_t seq, char *out, size_t len)
{
    hr_mysql_param p[] = {HR_P_I64(task), HR_P_I64(seq)};
    hr_mysql_rows *rows = NULL;
    char errstr[512];

    assert_int_equal(hr_mysql_query(m,
                                    "SELECT state, IFNULL(worker, '-'), done_at IS NOT NULL "
                                    "FROM push_chunk WHERE task_id = ? AND seq = ?",
                                    p, 2, &rows, errstr, sizeof errstr),
                     0);
    if (rows->nrows == 0)
        snprintf(out, len, "none");
    else
        snprintf(out, len, "%s %s %s", hr_mysql_cell(rows, 0, 0), hr_mysql_cell(rows, 0, 1),
                 hr_mysql_cell(rows, 0, 2));
    hr_mysql_rows_free(rows);
}

typedef struct t_chunk_wait {
    hr_mysql *m;
    int64_t task, seq;
    const char *want;
} t_chunk_wait;

static bool t_chunk_is(void *ctx)
{
    const t_chunk_wait *cw = ctx;
    char got[256];

    t_chunk_state(cw->m, cw->task, cw->seq, got, sizeof got);
    return strcmp(got, cw->want) == 0;
}

/* Waits at most TIMEOUT_MS for chunk SEQ of TASK to read WANT (see
 * t_chunk_state); fails the test with what it reads otherwise. */
static void t_chunk_wait_for(hr_mysql *m, int64_t task, int64_t seq, const char *want,
                             int timeout_ms)
{
    t_chunk_wait cw = {.m = m, .task = task, .seq = seq, .want = want};
    char got[256];

    if (itest_wait_until(t_chunk_is, &cw, timeout_ms))
        return;
    t_chunk_state(m, task, seq, got, sizeof got);
    fail_msg("chunk %" PRId64 " of task %" PRId64 " is \"%s\", not \"%s\"", seq, task, got, want);
}

/* The race of the dispatcher's batched INSERT with a small chunk's end: the
 * worker reports the end before the row exists (its UPDATE matches
 * nothing); the row is inserted 500 ms later, after a few of the
 * reporter's flushes, and must still end 'done' with the worker and
 * done_at. */
static void test_reporter_chunk_end_before_row(void **state)
{
    hr_config *cfg = itest_config();
    hr_mysql *m = NULL;
    wk_metrics *met;
    wk_reporter *rp = NULL;
    char errstr[512], got[256];
    struct timespec later = {0, 500 * 1000000L};
    int64_t id;

    (void)state;
    id = t_setup(cfg, &m, &met, "reporter chunk end before row");
    assert_int_equal(wk_reporter_start(cfg, "test-reporter", WK_REPORTER_ROW_WAIT_MS, met, NULL,
                                       &rp, errstr, sizeof errstr),
                     0);
    t_chunk_end(rp, id, 1, WK_CHUNK_END_DONE, itest_now_ms());
    nanosleep(&later, NULL);
    t_chunk_state(m, id, 1, got, sizeof got);
    assert_string_equal(got, "none");
    t_chunk_row(m, id, 1);
    t_chunk_wait_for(m, id, 1, "done test-reporter 1", 5000);
    wk_reporter_stop(rp);
    assert_true(hr_metrics_value(met->chunk_rows_missing) == 0);
    t_drop(m, id);
    wk_metrics_free(met);
    hr_mysql_free(m);
    hr_config_free(cfg);
}

typedef struct t_metric_wait {
    const hr_metrics_child *child;
    double want;
} t_metric_wait;

static bool t_metric_reached(void *ctx)
{
    const t_metric_wait *mw = ctx;

    return hr_metrics_value(mw->child) >= mw->want;
}

/* The bound: with a row wait of 300 ms, an end whose row never comes is
 * given up (logged chunk_row_missing with task and seq, counted) and not
 * written afterwards, when the row appears late; an end written twice with
 * the same values (the second UPDATE changes no row: MariaDB counts rows
 * changed) and one of a row already 'done' are not taken for missing. */
static void test_reporter_chunk_row_never_appears(void **state)
{
    hr_config *cfg = itest_config();
    hr_mysql *m = NULL;
    wk_metrics *met;
    wk_reporter *rp = NULL;
    char errstr[512], lines[2048], needle[64];
    struct timespec pause = {0, 800 * 1000000L};
    int64_t id, done_ms = itest_now_ms();
    t_metric_wait mw;
    t_log log;

    (void)state;
    id = t_setup(cfg, &m, &met, "reporter chunk row never appears");
    t_chunk_row(m, id, 3);
    t_chunk_row(m, id, 4);
    t_log_start(&log);
    assert_int_equal(
        wk_reporter_start(cfg, "test-reporter", 300, met, NULL, &rp, errstr, sizeof errstr), 0);
    t_chunk_end(rp, id, 2, WK_CHUNK_END_DONE, done_ms);
    t_chunk_end(rp, id, 3, WK_CHUNK_END_PARKED, done_ms);
    t_chunk_end(rp, id, 4, WK_CHUNK_END_DONE, done_ms);
    mw = (t_metric_wait){.child = met->chunk_rows_missing, .want = 1};
    assert_true(itest_wait_until(t_metric_reached, &mw, 5000));
    t_chunk_wait_for(m, id, 3, "parked test-reporter 1", 5000);
    t_chunk_wait_for(m, id, 4, "done test-reporter 1", 5000);
    /* The same ends again: nothing to change in either row. */
    t_chunk_end(rp, id, 3, WK_CHUNK_END_PARKED, done_ms);
    t_chunk_end(rp, id, 4, WK_CHUNK_END_DONE, done_ms);
    /* Chunk 2's row comes after its end was given up: it stays published. */
    t_chunk_row(m, id, 2);
    nanosleep(&pause, NULL);
    wk_reporter_stop(rp);
    snprintf(needle, sizeof needle, "task=%" PRId64 " ", id);
    assert_int_equal(t_log_end(&log, "event=chunk_row_missing", needle, lines, sizeof lines), 1);
    assert_non_null(strstr(lines, "seq=2 "));
    assert_non_null(strstr(lines, "reason=timeout"));
    assert_true(hr_metrics_value(met->chunk_rows_missing) == 1);
    t_chunk_wait_for(m, id, 2, "published - 0", 0);
    t_chunk_wait_for(m, id, 3, "parked test-reporter 1", 0);
    t_drop(m, id);
    wk_metrics_free(met);
    hr_mysql_free(m);
    hr_config_free(cfg);
}

/* The cap: with WK_REPORTER_ROW_WAIT_MAX + 4 ends waiting, the 4 oldest are
 * given up at once (counted) and the others still written when their row
 * comes; at the stop the rest are given up and counted too. */
static void test_reporter_chunk_ends_capped(void **state)
{
    const int64_t first = 1000, n = WK_REPORTER_ROW_WAIT_MAX + 4;
    hr_config *cfg = itest_config();
    hr_mysql *m = NULL;
    wk_metrics *met;
    wk_reporter *rp = NULL;
    char errstr[512];
    int64_t id, done_ms = itest_now_ms();
    t_metric_wait mw;

    (void)state;
    id = t_setup(cfg, &m, &met, "reporter chunk ends capped");
    assert_int_equal(wk_reporter_start(cfg, "test-reporter", WK_REPORTER_ROW_WAIT_MS, met, NULL,
                                       &rp, errstr, sizeof errstr),
                     0);
    for (int64_t seq = first; seq < first + n; seq++)
        t_chunk_end(rp, id, seq, WK_CHUNK_END_DONE, done_ms);
    mw = (t_metric_wait){.child = met->chunk_rows_missing, .want = 4};
    assert_true(itest_wait_until(t_metric_reached, &mw, 60000));
    assert_true(hr_metrics_value(met->chunk_rows_missing) == 4);
    for (int64_t seq = first; seq < first + 5; seq++)
        t_chunk_row(m, id, seq);
    t_chunk_row(m, id, first + n - 1);
    t_chunk_wait_for(m, id, first + 4, "done test-reporter 1", 10000);
    t_chunk_wait_for(m, id, first + n - 1, "done test-reporter 1", 10000);
    for (int64_t seq = first; seq < first + 4; seq++)
        t_chunk_wait_for(m, id, seq, "published - 0", 0);
    wk_reporter_stop(rp);
    assert_true(hr_metrics_value(met->chunk_rows_missing) == (double)(n - 2));
    t_drop(m, id);
    wk_metrics_free(met);
    hr_mysql_free(m);
    hr_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reporter_batch_over_placeholder_limit),
        cmocka_unit_test(test_reporter_part_batches_few_statements),
        cmocka_unit_test(test_reporter_refused_row),
        cmocka_unit_test(test_reporter_chunk_end_before_row),
        cmocka_unit_test(test_reporter_chunk_row_never_appears),
        cmocka_unit_test(test_reporter_chunk_ends_capped),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
