/* The worker's reporter (worker/wk_reporter.c) against the stack's MariaDB:
 * - a batch larger than one prepared statement can bind (65,535
 *   placeholders, 9,362 rows of 7 columns) is written in several INSERTs,
 *   none refused (MariaDB answers errno 1390 to a statement of more, and
 *   the reporter used to fall back to one INSERT per row: 4x MariaDB's
 *   CPU).  Its log lines go to stderr, which the test reads back from a
 *   file;
 * - part batches of many sizes (flushed by the 200 ms timer) prepare at
 *   most 15 distinct INSERTs, not one per size: MariaDB's global
 *   Prepared_stmt_count, read while the reporter still holds its
 *   connection, rises by at most 20 (the INSERTs and the counter
 *   statements).  The suite runs this test alone (is_parallel: false),
 *   so no other client prepares meanwhile. */
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

/* Deletes task ID's row and its delivery log. */
static void t_drop(hr_mysql *m, int64_t id)
{
    hr_mysql_param p[] = {HR_P_I64(id)};
    char errstr[512];

    assert_int_equal(hr_mysql_exec(m, "DELETE FROM push_delivery WHERE task_id = ?", p, 1, NULL,
                                   NULL, NULL, errstr, sizeof errstr),
                     0);
    assert_int_equal(hr_mysql_exec(m, "DELETE FROM push_task WHERE id = ?", p, 1, NULL, NULL, NULL,
                                   errstr, sizeof errstr),
                     0);
}

/* Queues outcomes of uids FIRST..LAST of TASK, sent. */
static void t_push(wk_reporter *rp, int64_t task, int first, int last)
{
    for (int i = first; i <= last; i++) {
        wk_event ev = {.kind = WK_EVENT_OUTCOME, .task = task};

        ev.u.outcome.uid = (uint64_t)i;
        ev.u.outcome.status = WK_DELIVERY_SENT;
        ev.u.outcome.attempts = 1;
        ev.u.outcome.http_status = 200;
        ev.u.outcome.at_ms = itest_now_ms();
        wk_reporter_push(rp, &ev);
    }
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
    char errstr[512], log[] = "/tmp/herald-test-reporter-XXXXXX", line[1024];
    int64_t id;
    int fd, saved;
    FILE *f;
    int rejected = 0;

    (void)state;
    cfg->worker.reporter_batch = T_BATCH;
    id = t_setup(cfg, &m, &met, "reporter batch");
    fd = mkstemp(log);
    assert_true(fd >= 0);
    saved = dup(STDERR_FILENO);
    assert_true(saved >= 0 && dup2(fd, STDERR_FILENO) >= 0);
    assert_int_equal(wk_reporter_start(cfg, "test-reporter", met, &rp, errstr, sizeof errstr), 0);
    t_push(rp, id, 1, T_ROWS);
    wk_reporter_stop(rp);
    dup2(saved, STDERR_FILENO);
    close(saved);
    f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    while (fgets(line, sizeof line, f) != NULL) {
        if (strstr(line, "delivery_batch_rejected") != NULL) {
            rejected++;
            fputs(line, stderr);
        }
    }
    fclose(f);
    unlink(log);
    assert_int_equal(rejected, 0);
    assert_int_equal(
        t_count(m, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ? AND status = 'sent'", id),
        T_ROWS);
    assert_true(hr_metrics_value(met->reporter_dropped[WK_DROP_QUEUE_FULL]) == 0);
    assert_true(hr_metrics_value(met->reporter_dropped[WK_DROP_REJECTED]) == 0);
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
    int64_t id, before, during;
    int uid = 0;

    (void)state;
    id = t_setup(cfg, &m, &met, "reporter part batches");
    before = t_prepared(m);
    assert_int_equal(wk_reporter_start(cfg, "test-reporter", met, &rp, errstr, sizeof errstr), 0);
    /* 40 bursts of 40 distinct sizes under the batch (1,000), each
     * flushed alone by the 200 ms timer. */
    for (int k = 0; k < 40; k++) {
        int size = 17 + 23 * k;
        struct timespec pause = {0, 300 * 1000000L};

        t_push(rp, id, uid + 1, uid + size);
        uid += size;
        nanosleep(&pause, NULL);
    }
    during = t_prepared(m);
    wk_reporter_stop(rp);
    printf("prepared statements: %" PRId64 " before, %" PRId64 " with the reporter\n", before,
           during);
    assert_true(during - before <= 20);
    assert_int_equal(
        t_count(m, "SELECT COUNT(*) FROM push_delivery WHERE task_id = ? AND status = 'sent'", id),
        uid);
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
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
