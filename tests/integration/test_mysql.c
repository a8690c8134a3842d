/* test_mysql: hr_mysql and `heraldctl migrate` against the stack's MariaDB.
 *
 * Round trips go through a TEMPORARY table (private to the connection); the
 * freeze trigger is tested on push_task rows named "hrtest-mysql-<pid>-*",
 * deleted at the end.  The schema is the real one of the shared database,
 * which is why migrate is only ever expected to be idempotent here.
 *
 * usage: test_mysql HERALDCTL (the built binary, passed by meson) */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hr_batch.h"
#include "hr_clock.h"
#include "hr_migrate.h"
#include "hr_mysql.h"
#include "hr_seams.h"
#include "hr_state.h"
#include "itest.h"

#define BIG_TEXT_LEN (100 * 1024)
#define CTL_TIMEOUT_MS 60000

static hr_config *cfg;
static hr_mysql *db;
static const char *heraldctl;
static char task_prefix[64];

static int group_setup(void **state)
{
    char errstr[512];
    int applied;

    (void)state;
    cfg = itest_config_shared();
    if (hr_mysql_connect(cfg, &db, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "test_mysql: %s\n", errstr);
        return -1;
    }
    if (hr_migrate_apply(db, hr_sql_files, HR_SQL__COUNT, &applied, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "test_mysql: migrate: %s\n", errstr);
        return -1;
    }
    snprintf(task_prefix, sizeof task_prefix, "hrtest-mysql-%ld-", (long)getpid());
    return 0;
}

static int group_teardown(void **state)
{
    char name[80], errstr[512];

    (void)state;
    snprintf(name, sizeof name, "%s%%", task_prefix);
    if (db && hr_mysql_exec(db, "DELETE FROM push_task WHERE name LIKE ?",
                            (hr_mysql_param[]){HR_P_STR(name)}, 1, NULL, NULL, NULL, errstr,
                            sizeof errstr) != 0)
        fprintf(stderr, "test_mysql: cleanup: %s\n", errstr);
    hr_mysql_free(db);
    hr_config_free(cfg);
    return 0;
}

static void exec_ok(const char *sql, const hr_mysql_param *params, size_t nparams,
                    uint64_t *affected)
{
    char errstr[512] = "";
    int rc = hr_mysql_exec(db, sql, params, nparams, affected, NULL, NULL, errstr, sizeof errstr);

    if (rc != 0)
        fail_msg("%s: %s", sql, errstr);
}

static hr_mysql_rows *query_ok(const char *sql, const hr_mysql_param *params, size_t nparams)
{
    hr_mysql_rows *rows = NULL;
    char errstr[512] = "";

    if (hr_mysql_query(db, sql, params, nparams, &rows, errstr, sizeof errstr) != 0)
        fail_msg("%s: %s", sql, errstr);
    return rows;
}

/* The single cell of a one-row, one-column query, copied. */
static char *query_value(const char *sql, const hr_mysql_param *params, size_t nparams)
{
    hr_mysql_rows *rows = query_ok(sql, params, nparams);
    char *value;

    assert_int_equal(rows->nrows, 1);
    assert_non_null(hr_mysql_cell(rows, 0, 0));
    value = strdup(hr_mysql_cell(rows, 0, 0));
    hr_mysql_rows_free(rows);
    return value;
}

static void create_scratch_table(void)
{
    char errstr[512];

    assert_int_equal(hr_mysql_script(db,
                                     "DROP TEMPORARY TABLE IF EXISTS hrtest_rt;"
                                     "CREATE TEMPORARY TABLE hrtest_rt ("
                                     " id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,"
                                     " s VARCHAR(255) NULL, big BIGINT NULL, small BIGINT NULL,"
                                     " d DOUBLE NULL, n VARCHAR(10) NULL, t MEDIUMTEXT NULL"
                                     ") DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
                                     errstr, sizeof errstr),
                     0);
}

static void test_roundtrip(void **state)
{
    static const char tricky[] = "it's a \"quote\" \\ back\\slash '); DROP TABLE push_task; -- "
                                 "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x8e\x89";
    char *big = malloc(BIG_TEXT_LEN + 1);
    char errstr[512], idbuf[32];
    uint64_t affected = 0, id = 0;
    hr_mysql_rows *rows;

    (void)state;
    assert_non_null(big);
    for (size_t i = 0; i < BIG_TEXT_LEN; i++)
        big[i] = (char)('a' + (i * 7) % 26);
    big[BIG_TEXT_LEN] = '\0';
    create_scratch_table();
    assert_int_equal(hr_mysql_exec(db,
                                   "INSERT INTO hrtest_rt (s, big, small, d, n, t)"
                                   " VALUES (?, ?, ?, ?, ?, ?)",
                                   (hr_mysql_param[]){HR_P_STR(tricky),
                                                      HR_P_I64(INT64_MAX),
                                                      HR_P_I64(INT64_MIN),
                                                      {.type = HR_MYSQL_DOUBLE, .dbl = 3.25},
                                                      HR_P_NULL,
                                                      HR_P_STRN(big, BIG_TEXT_LEN)},
                                   6, &affected, &id, NULL, errstr, sizeof errstr),
                     0);
    assert_int_equal(affected, 1);
    assert_true(id > 0);

    snprintf(idbuf, sizeof idbuf, "%llu", (unsigned long long)id);
    rows = query_ok("SELECT s, big, small, d, n, t, LENGTH(t) FROM hrtest_rt WHERE id = ?",
                    (hr_mysql_param[]){HR_P_STR(idbuf)}, 1);
    assert_int_equal(rows->nrows, 1);
    assert_int_equal(rows->ncols, 7);
    assert_string_equal(rows->names[0], "s");
    assert_string_equal(rows->names[6], "LENGTH(t)");
    assert_string_equal(hr_mysql_cell(rows, 0, 0), tricky);
    assert_string_equal(hr_mysql_cell(rows, 0, 1), "9223372036854775807");
    assert_string_equal(hr_mysql_cell(rows, 0, 2), "-9223372036854775808");
    assert_float_equal(strtod(hr_mysql_cell(rows, 0, 3), NULL), 3.25, 1e-9);
    assert_null(hr_mysql_cell(rows, 0, 4));
    assert_int_equal(strlen(hr_mysql_cell(rows, 0, 5)), BIG_TEXT_LEN);
    assert_memory_equal(hr_mysql_cell(rows, 0, 5), big, BIG_TEXT_LEN);
    assert_string_equal(hr_mysql_cell(rows, 0, 6), "102400");
    assert_null(hr_mysql_cell(rows, 1, 0));
    assert_null(hr_mysql_cell(rows, 0, 7));
    hr_mysql_rows_free(rows);

    /* An empty result and a statement without a result set. */
    rows = query_ok("SELECT s FROM hrtest_rt WHERE id = 0", NULL, 0);
    assert_int_equal(rows->nrows, 0);
    assert_int_equal(rows->ncols, 1);
    hr_mysql_rows_free(rows);
    exec_ok("UPDATE hrtest_rt SET n = ? WHERE id = ?",
            (hr_mysql_param[]){HR_P_STR(""), HR_P_I64(id)}, 2, &affected);
    assert_int_equal(affected, 1);
    rows = query_ok("SELECT n, n IS NULL FROM hrtest_rt WHERE id = ?",
                    (hr_mysql_param[]){HR_P_I64(id)}, 1);
    assert_string_equal(hr_mysql_cell(rows, 0, 0), "");
    assert_string_equal(hr_mysql_cell(rows, 0, 1), "0");
    hr_mysql_rows_free(rows);
    free(big);
}

/* More distinct statements than the cache holds, each run repeatedly, and
 * many rows in one result. */
/* HR_P_TIME_MS is the instant FROM_UNIXTIME(ms / 1000) gives in the
 * session's UTC, to the millisecond: a leap day, the last ms of a day, and
 * an instant before 1970 (floor, not truncation, of the day). */
static void test_time_ms(void **state)
{
    static const int64_t ms[] = {1709251199999, 1709164800123, 1764547200000, -86399001};
    static const char *const text[] = {"2024-02-29 23:59:59.999", "2024-02-29 00:00:00.123",
                                       "2025-12-01 00:00:00.000", "1969-12-31 00:00:00.999"};
    hr_mysql_rows *rows;

    (void)state;
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        rows = query_ok("SELECT DATE_FORMAT(CAST(? AS DATETIME(3)), '%Y-%m-%d %H:%i:%s.%f')",
                        (hr_mysql_param[]){HR_P_TIME_MS(ms[i])}, 1);
        assert_int_equal(rows->nrows, 1);
        /* %f is microseconds: the ms and three zeros. */
        assert_memory_equal(hr_mysql_cell(rows, 0, 0), text[i], strlen(text[i]));
        assert_string_equal(hr_mysql_cell(rows, 0, 0) + strlen(text[i]), "000");
        hr_mysql_rows_free(rows);
    }
    rows = query_ok("SELECT CAST(? AS DATETIME(3)) = FROM_UNIXTIME(? / 1000)",
                    (hr_mysql_param[]){HR_P_TIME_MS(ms[0]), HR_P_I64(ms[0])}, 2);
    assert_string_equal(hr_mysql_cell(rows, 0, 0), "1");
    hr_mysql_rows_free(rows);
}

/* hr_mysql_exec_rows: each row's values, NULLs among a column's others,
 * an upsert of a key twice in one batch (the later row wins), a refused
 * row failing the whole batch, and a column of two types refused before
 * anything is sent; the statement, cached, still runs with one row. */
static const char exec_rows_sql[] =
    "INSERT INTO hrtest_rt (id, s, big, d, n) VALUES (?, ?, ?, ?, ?) "
    "ON DUPLICATE KEY UPDATE s = VALUES(s), big = VALUES(big)";

/* Three rows into a new hrtest_rt through hr_mysql_exec_rows, checked:
 * each row's values, NULLs among a column's others, and a key upserted
 * twice (the later row wins). */
static void exec_rows_three(void)
{
    const hr_mysql_param p[3][5] = {
        {HR_P_I64(1), HR_P_STR("one"), HR_P_I64(10), HR_P_TIME_MS(1709164800123), HR_P_NULL},
        {HR_P_I64(2), HR_P_NULL, HR_P_I64(-20), HR_P_NULL, HR_P_STR("b")},
        {HR_P_I64(1), HR_P_STR("uno"), HR_P_NULL, HR_P_TIME_MS(0), HR_P_STR("c")},
    };
    char errstr[512] = "";
    uint64_t affected = 0;
    hr_mysql_rows *rows;

    assert_int_equal(hr_mysql_script(db,
                                     "DROP TEMPORARY TABLE IF EXISTS hrtest_rt;"
                                     "CREATE TEMPORARY TABLE hrtest_rt ("
                                     " id BIGINT NOT NULL PRIMARY KEY, s VARCHAR(10) NULL,"
                                     " big BIGINT NULL, d DATETIME(3) NULL, n VARCHAR(10) NULL)",
                                     errstr, sizeof errstr),
                     0);
    if (hr_mysql_exec_rows(db, exec_rows_sql, &p[0][0], 5, 3, &affected, NULL, errstr,
                           sizeof errstr) != 0)
        fail_msg("exec_rows: %s", errstr);
    /* Two rows inserted (1 each), one updated (2). */
    assert_int_equal(affected, 4);
    rows = query_ok("SELECT id, s, big, DATE_FORMAT(d, '%Y-%m-%d %H:%i:%s.%f'), n FROM hrtest_rt "
                    "ORDER BY id",
                    NULL, 0);
    assert_int_equal(rows->nrows, 2);
    assert_string_equal(hr_mysql_cell(rows, 0, 1), "uno");
    assert_null(hr_mysql_cell(rows, 0, 2));
    /* The update leaves d and n as the first row had them. */
    assert_string_equal(hr_mysql_cell(rows, 0, 3), "2024-02-29 00:00:00.123000");
    assert_null(hr_mysql_cell(rows, 0, 4));
    assert_null(hr_mysql_cell(rows, 1, 1));
    assert_string_equal(hr_mysql_cell(rows, 1, 2), "-20");
    assert_null(hr_mysql_cell(rows, 1, 3));
    assert_string_equal(hr_mysql_cell(rows, 1, 4), "b");
    hr_mysql_rows_free(rows);
}

/* The session's executes of prepared statements so far (this read's own
 * included). */
static int64_t stmt_executes(void)
{
    char *v = query_value("SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS "
                          "WHERE VARIABLE_NAME = 'COM_STMT_EXECUTE'",
                          NULL, 0);
    int64_t n = strtoll(v, NULL, 10);

    free(v);
    return n;
}

/* Against a server without array binding (the seam), the same rows go one
 * execute each (three, where the array binding is one), with the same
 * result. */
static void test_exec_rows_one_by_one(void **state)
{
    int64_t before, bulk, one_by_one;

    (void)state;
    if (!HR_SEAMS_ON)
        skip();
    before = stmt_executes();
    exec_rows_three();
    bulk = stmt_executes() - before;
    setenv("HERALD_TEST_MYSQL_NO_BULK", "1", 1);
    before = stmt_executes();
    exec_rows_three();
    one_by_one = stmt_executes() - before;
    unsetenv("HERALD_TEST_MYSQL_NO_BULK");
    printf("executes: %" PRId64 " array-bound, %" PRId64 " one by one\n", bulk, one_by_one);
    assert_int_equal(one_by_one, bulk + 2);
}

static void test_exec_rows(void **state)
{
    const hr_mysql_param bad[2][5] = {
        {HR_P_I64(3), HR_P_STR("x"), HR_P_I64(1), HR_P_NULL, HR_P_NULL},
        {HR_P_I64(4), HR_P_STR("y"), HR_P_I64(1), HR_P_NULL, HR_P_STR("far too long for ten")},
    };
    const hr_mysql_param mixed[2][5] = {
        {HR_P_I64(5), HR_P_STR("x"), HR_P_I64(1), HR_P_NULL, HR_P_NULL},
        {HR_P_I64(6), HR_P_I64(7), HR_P_I64(1), HR_P_NULL, HR_P_NULL},
    };
    char errstr[512] = "";
    uint64_t affected = 0;
    unsigned err = 0;
    hr_mysql_rows *rows;

    (void)state;
    exec_rows_three();

    /* Strict mode refuses the second row's n: neither row stays. */
    assert_int_equal(
        hr_mysql_exec_rows(db, exec_rows_sql, &bad[0][0], 5, 2, NULL, &err, errstr, sizeof errstr),
        -1);
    assert_int_equal(err, 1406);
    assert_int_equal(hr_mysql_exec_rows(db, exec_rows_sql, &mixed[0][0], 5, 2, NULL, &err, errstr,
                                        sizeof errstr),
                     -1);
    assert_non_null(strstr(errstr, "parameter 2 has types"));
    exec_ok(exec_rows_sql, bad[0], 5, &affected);
    assert_int_equal(affected, 1);
    rows = query_ok("SELECT GROUP_CONCAT(id ORDER BY id) FROM hrtest_rt", NULL, 0);
    assert_string_equal(hr_mysql_cell(rows, 0, 0), "1,2,3");
    hr_mysql_rows_free(rows);
}

static void test_statement_cache(void **state)
{
    char sql[64], expect[32];
    char *value;

    (void)state;
    create_scratch_table();
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 40; i++) {
            snprintf(sql, sizeof sql, "SELECT ? + %d", i);
            value = query_value(sql, (hr_mysql_param[]){HR_P_I64(round * 1000)}, 1);
            snprintf(expect, sizeof expect, "%d", round * 1000 + i);
            assert_string_equal(value, expect);
            free(value);
        }
    }
    for (int i = 0; i < 500; i++)
        exec_ok("INSERT INTO hrtest_rt (big) VALUES (?)", (hr_mysql_param[]){HR_P_I64(i)}, 1, NULL);
    hr_mysql_rows *rows = query_ok("SELECT big FROM hrtest_rt ORDER BY big", NULL, 0);
    assert_int_equal(rows->nrows, 500);
    assert_string_equal(hr_mysql_cell(rows, 499, 0), "499");
    hr_mysql_rows_free(rows);
}

/* hr_batch_select's offers: how many each batch row got, the sum of their
 * values, and whether it takes an answered row (TAKE) or lets the next
 * batch row of the same key see it too. */
typedef struct batch_seen {
    int got[6];
    int64_t sum[6];
    bool take;
} batch_seen;

static bool batch_offer(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row)
{
    batch_seen *seen = ctx;

    seen->got[i]++;
    seen->sum[i] += strtoll(hr_mysql_cell(rows, row, 2), NULL, 10);
    return seen->take;
}

/* A batch of (task, seq) pairs through JSON_TABLE, the answered rows
 * matched back by both columns.  The statement answers each pair but
 * (8, 8) with the value a * 10 + b, and three rows of its own: (7, 1) once
 * more, (6, 6) that no pair has, and a NULL key.  (7, 1) is batch rows 0
 * and 3: a row 0 takes is not offered to row 3; one it does not take is. */
static void test_batch(void **state)
{
    static const int64_t pairs[6][2] = {{7, 1}, {7, 2}, {5, 9}, {7, 1}, {8, 8}, {1, -3}};
    const hr_batch b = {&pairs[0][0], 6, 2};
    const char *sql = "SELECT j.a, j.b, j.a * 10 + j.b FROM JSON_TABLE(?, '$[*]' COLUMNS "
                      "(a BIGINT PATH '$[0]', b BIGINT PATH '$[1]')) j WHERE j.a <> ? "
                      "UNION ALL SELECT 7, 1, 100 UNION ALL SELECT 6, 6, 0 "
                      "UNION ALL SELECT NULL, 1, 0";
    const hr_mysql_param p[] = {HR_P_I64(8)};
    batch_seen taken = {.take = true}, offered = {.take = false};
    char errstr[512] = "";
    hr_mysql_rows *rows = NULL;
    uint64_t affected = 1;

    (void)state;
    assert_int_equal(
        hr_batch_select(db, sql, &b, p, 1, 2, batch_offer, &taken, errstr, sizeof errstr), 0);
    assert_int_equal(taken.got[0], 3);
    assert_int_equal(taken.sum[0], 71 + 71 + 100);
    assert_int_equal(taken.got[1], 1);
    assert_int_equal(taken.sum[1], 72);
    assert_int_equal(taken.got[2], 1);
    assert_int_equal(taken.got[3], 0);
    assert_int_equal(taken.got[4], 0);
    assert_int_equal(taken.got[5], 1);
    assert_int_equal(taken.sum[5], 7);
    assert_int_equal(
        hr_batch_select(db, sql, &b, p, 1, 2, batch_offer, &offered, errstr, sizeof errstr), 0);
    assert_int_equal(offered.got[0], 3);
    assert_int_equal(offered.got[3], 3);
    assert_int_equal(offered.sum[3], 71 + 71 + 100);
    /* Matched on the first column alone, (7, 2) is one of task 7's too. */
    memset(&taken, 0, sizeof taken);
    offered = (batch_seen){.take = false};
    assert_int_equal(
        hr_batch_select(db, sql, &b, p, 1, 1, batch_offer, &offered, errstr, sizeof errstr), 0);
    assert_int_equal(offered.got[1], 4);
    assert_int_equal(hr_batch_query(db, sql, &b, p, 1, &rows, errstr, sizeof errstr), 0);
    assert_int_equal(rows->nrows, 8);
    hr_mysql_rows_free(rows);
    assert_int_equal(
        hr_batch_exec(db, "DO JSON_LENGTH(?)", &b, NULL, 0, &affected, NULL, errstr, sizeof errstr),
        0);
    assert_int_equal(affected, 0);
    assert_int_equal(
        hr_batch_select(db, sql, &b, p, 1, 3, batch_offer, &taken, errstr, sizeof errstr), -1);
}

static void test_transaction(void **state)
{
    char errstr[512];
    char *value;

    (void)state;
    create_scratch_table();
    assert_int_equal(hr_mysql_begin(db, errstr, sizeof errstr), 0);
    exec_ok("INSERT INTO hrtest_rt (s) VALUES ('rolled back')", NULL, 0, NULL);
    assert_int_equal(hr_mysql_rollback(db), 0);
    assert_int_equal(hr_mysql_begin(db, errstr, sizeof errstr), 0);
    exec_ok("INSERT INTO hrtest_rt (s) VALUES ('committed')", NULL, 0, NULL);
    assert_int_equal(hr_mysql_commit(db, errstr, sizeof errstr), 0);
    value = query_value("SELECT GROUP_CONCAT(s) FROM hrtest_rt", NULL, 0);
    assert_string_equal(value, "committed");
    free(value);
}

static void test_errors(void **state)
{
    hr_mysql_rows *rows = NULL;
    char errstr[512] = "";
    unsigned err = 0;

    (void)state;
    assert_int_equal(hr_mysql_exec(db, "SELEC 1", NULL, 0, NULL, NULL, &err, errstr, sizeof errstr),
                     -1);
    assert_int_equal(err, 1064);
    assert_non_null(strstr(errstr, "SQL syntax"));
    assert_int_equal(hr_mysql_query(db, "SELECT * FROM hrtest_no_such_table", NULL, 0, &rows,
                                    errstr, sizeof errstr),
                     -1);
    assert_null(rows);
    assert_non_null(strstr(errstr, "doesn't exist"));
    assert_int_equal(
        hr_mysql_exec(db, "SELECT ?", NULL, 0, NULL, NULL, NULL, errstr, sizeof errstr), -1);
    assert_non_null(strstr(errstr, "parameters"));
    assert_int_equal(hr_mysql_script(db, "SELECT 1; SELEC 2; SELECT 3", errstr, sizeof errstr), -1);
    assert_true(strncmp(errstr, "statement 2: ", 13) == 0);
    /* The connection is still usable after each error. */
    char *value = query_value("SELECT 'alive'", NULL, 0);
    assert_string_equal(value, "alive");
    free(value);
}

/* A killed connection is replaced, with the session settings, outside a
 * transaction; inside one the error reaches the caller. */
static void test_reconnect(void **state)
{
    hr_mysql *victim = NULL;
    char errstr[512], kill[64];
    char *conn_id;
    hr_mysql_rows *rows = NULL;
    unsigned err = 0;

    (void)state;
    assert_int_equal(hr_mysql_connect(cfg, &victim, errstr, sizeof errstr), 0);
    for (int in_txn = 0; in_txn < 2; in_txn++) {
        assert_int_equal(
            hr_mysql_query(victim, "SELECT CONNECTION_ID()", NULL, 0, &rows, errstr, sizeof errstr),
            0);
        conn_id = strdup(hr_mysql_cell(rows, 0, 0));
        hr_mysql_rows_free(rows);
        if (in_txn)
            assert_int_equal(hr_mysql_begin(victim, errstr, sizeof errstr), 0);
        snprintf(kill, sizeof kill, "KILL CONNECTION %s", conn_id);
        assert_int_equal(hr_mysql_script(db, kill, errstr, sizeof errstr), 0);
        free(conn_id);
        rows = NULL;
        int rc = hr_mysql_exec(victim, "SELECT @@session.time_zone", NULL, 0, NULL, NULL, &err,
                               errstr, sizeof errstr);
        if (in_txn) {
            assert_int_equal(rc, -1);
            assert_true(err == 2006 || err == 2013);
            hr_mysql_rollback(victim);
        } else {
            assert_int_equal(rc, 0);
        }
        assert_int_equal(hr_mysql_query(victim, "SELECT @@session.time_zone, @@session.sql_mode",
                                        NULL, 0, &rows, errstr, sizeof errstr),
                         0);
        assert_string_equal(hr_mysql_cell(rows, 0, 0), "+00:00");
        assert_non_null(strstr(hr_mysql_cell(rows, 0, 1), "STRICT_ALL_TABLES"));
        hr_mysql_rows_free(rows);
    }
    hr_mysql_free(victim);
}

/* A session limited by hr_mysql_limit_idle_txn that stops between two
 * statements of a transaction (a frozen worker) loses it to the server:
 * another session waiting for its row gets it within its own lock wait,
 * the frozen session's next call fails as a lost connection, and the limit
 * is set again on the connection that replaces it. */
static void test_idle_txn_limit(void **state)
{
    hr_mysql *frozen = NULL;
    char errstr[512], table[32], sql[192];
    unsigned limit = cfg->mysql.timeout_s > 0 ? (unsigned)cfg->mysql.timeout_s : 10;
    hr_mysql_rows *rows = NULL;
    uint64_t affected = 0;
    int64_t t0;
    char *value;

    (void)state;
    limit = limit > 1 ? (limit - 1) / 2 : 0;
    if (limit == 0)
        limit = 1;
    snprintf(table, sizeof table, "hrtest_idle_%ld", (long)getpid());
    snprintf(sql, sizeof sql,
             "DROP TABLE IF EXISTS %s; CREATE TABLE %s (id INT PRIMARY KEY, n INT)", table, table);
    assert_int_equal(hr_mysql_script(db, sql, errstr, sizeof errstr), 0);
    snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (1, 0)", table);
    exec_ok(sql, NULL, 0, NULL);

    assert_int_equal(hr_mysql_connect(cfg, &frozen, errstr, sizeof errstr), 0);
    assert_int_equal(hr_mysql_limit_idle_txn(frozen, errstr, sizeof errstr), 0);
    assert_int_equal(hr_mysql_begin(frozen, errstr, sizeof errstr), 0);
    snprintf(sql, sizeof sql, "UPDATE %s SET n = n + 1 WHERE id = 1", table);
    assert_int_equal(hr_mysql_exec(frozen, sql, NULL, 0, NULL, NULL, NULL, errstr, sizeof errstr),
                     0);
    /* The frozen session sends nothing more; this one waits for its row. */
    t0 = hr_clock_mono_ms();
    snprintf(sql, sizeof sql, "UPDATE %s SET n = n + 10 WHERE id = 1", table);
    exec_ok(sql, NULL, 0, &affected);
    assert_int_equal(affected, 1);
    assert_true(hr_clock_mono_ms() - t0 >= (int64_t)limit * 1000 - 500);
    snprintf(sql, sizeof sql, "SELECT n FROM %s WHERE id = 1", table);
    value = query_value(sql, NULL, 0);
    assert_string_equal(value, "10"); /* the frozen transaction was rolled back */
    free(value);

    assert_int_equal(hr_mysql_commit(frozen, errstr, sizeof errstr), -1);
    hr_mysql_rollback(frozen);
    assert_int_equal(hr_mysql_query(frozen, "SELECT @@session.idle_write_transaction_timeout", NULL,
                                    0, &rows, errstr, sizeof errstr),
                     0);
    assert_int_equal(strtoul(hr_mysql_cell(rows, 0, 0), NULL, 10), limit);
    hr_mysql_rows_free(rows);
    hr_mysql_free(frozen);
    snprintf(sql, sizeof sql, "DROP TABLE %s", table);
    assert_int_equal(hr_mysql_script(db, sql, errstr, sizeof errstr), 0);
}

static void test_migrate_idempotent(void **state)
{
    char errstr[512];
    char *value;
    int applied = -1;

    (void)state;
    assert_int_equal(
        hr_migrate_apply(db, hr_sql_files, HR_SQL__COUNT, &applied, errstr, sizeof errstr), 0);
    assert_int_equal(applied, 0);
    value = query_value("SELECT GROUP_CONCAT(name ORDER BY version) FROM schema_migrations"
                        " WHERE version IN (1, 2)",
                        NULL, 0);
    assert_string_equal(value, "001_tables,002_freeze_trigger");
    free(value);
    /* A failing file is reported with its statement and not recorded; a
     * file without a version is refused before anything runs. */
    const hr_embedded broken[] = {{"999_hrtest_broken.sql", "SELECT 1; SELEC 2", 17}};
    assert_int_equal(hr_migrate_apply(db, broken, 1, &applied, errstr, sizeof errstr), -1);
    static const char expect[] =
        "migration 999_hrtest_broken.sql: statement 2: You have an error in your SQL syntax";
    if (strncmp(errstr, expect, sizeof expect - 1) != 0 || !strstr(errstr, "'SELEC 2'"))
        fail_msg("unexpected migrate error: %s", errstr);
    assert_int_equal(applied, 0);
    const hr_embedded unnamed[] = {{"hrtest.sql", "SELECT 1", 8}};
    assert_int_equal(hr_migrate_apply(db, unnamed, 1, &applied, errstr, sizeof errstr), -1);
    assert_non_null(strstr(errstr, "NNN_"));
    value = query_value("SELECT COUNT(*) FROM schema_migrations WHERE version = 999", NULL, 0);
    assert_string_equal(value, "0");
    free(value);
    /* The lock was released: another session can take it at once. */
    value = query_value("SELECT IS_FREE_LOCK('herald_migrate')", NULL, 0);
    assert_string_equal(value, "1");
    free(value);
}

static uint64_t insert_task(const char *suffix, const char *freeze_expr)
{
    char sql[512], name[96], errstr[512];
    uint64_t id = 0;

    snprintf(name, sizeof name, "%s%s", task_prefix, suffix);
    snprintf(sql, sizeof sql,
             "INSERT INTO push_task (name, channel, title, body, payload, due_at, freeze_at)"
             " VALUES (?, 'webhook', 'hello', 'body', '{\"a\":1}', UTC_TIMESTAMP(3), %s)",
             freeze_expr);
    if (hr_mysql_exec(db, sql, (hr_mysql_param[]){HR_P_STR(name)}, 1, NULL, &id, NULL, errstr,
                      sizeof errstr) != 0)
        fail_msg("insert task: %s", errstr);
    return id;
}

/* An UPDATE of task ID setting SET, refused by the guard trigger with a
 * message holding NEEDLE. */
static void expect_refused(uint64_t id, const char *set, const char *needle)
{
    char sql[256], errstr[512] = "";
    unsigned err = 0;

    snprintf(sql, sizeof sql, "UPDATE push_task SET %s WHERE id = ?", set);
    assert_int_equal(hr_mysql_exec(db, sql, (hr_mysql_param[]){HR_P_I64(id)}, 1, NULL, NULL, &err,
                                   errstr, sizeof errstr),
                     -1);
    assert_int_equal(err, 1644);
    if (!strstr(errstr, needle))
        fail_msg("expected \"%s\" in the refusal: %s", needle, errstr);
}

/* An UPDATE of task ID setting SET, which the guard trigger lets through. */
static void set_task(uint64_t id, const char *set)
{
    char sql[256];
    uint64_t affected = 0;

    snprintf(sql, sizeof sql, "UPDATE push_task SET %s WHERE id = ?", set);
    exec_ok(sql, (hr_mysql_param[]){HR_P_I64(id)}, 1, &affected);
    assert_int_equal(affected, 1);
}

/* push_task's guard trigger (030_task_guard.sql): the freeze rule and the
 * fixed shards. */
static void test_task_guard(void **state)
{
    uint64_t past = insert_task("past", "UTC_TIMESTAMP(3) - INTERVAL 1 HOUR");
    uint64_t dueday = insert_task("dueday", "NULL");
    uint64_t future = insert_task("future", "UTC_TIMESTAMP(3) + INTERVAL 1 DAY");
    char *value;

    (void)state;
    expect_refused(past, "title = 'x'", "is frozen");
    expect_refused(past, "title = 'x'", "is frozen"); /* the cached statement survives the SIGNAL */
    expect_refused(past, "title = 'hello '", "is frozen");
    expect_refused(past, "body = 'other'", "is frozen");
    expect_refused(past, "payload = NULL", "is frozen");
    expect_refused(past, "due_at = due_at + INTERVAL 1 DAY", "is frozen");
    expect_refused(dueday, "title = 'x'", "is frozen");

    set_task(past, "state = 'dispatching', sent = sent + 5, control = 'pause', last_error = 'e'");
    value = query_value("SELECT CONCAT(state, ',', sent, ',', control, ',', title) FROM push_task"
                        " WHERE id = ?",
                        (hr_mysql_param[]){HR_P_I64(past)}, 1);
    assert_string_equal(value, "dispatching,5,pause,hello");
    free(value);

    set_task(future, "title = 'changed'");
    value = query_value("SELECT title FROM push_task WHERE id = ?",
                        (hr_mysql_param[]){HR_P_I64(future)}, 1);
    assert_string_equal(value, "changed");
    free(value);

    /* The shards rule, fixed before the first subscriber. */
    set_task(future, "shards = 2");
    exec_ok("INSERT INTO push_subscription (task_id, uid) VALUES (?, 7)",
            (hr_mysql_param[]){HR_P_I64(future)}, 1, NULL);
    expect_refused(future, "shards = 3", "has subscriptions: shards can no longer change");
    exec_ok("DELETE FROM push_subscription WHERE task_id = ?", (hr_mysql_param[]){HR_P_I64(future)},
            1, NULL);
    set_task(future, "state = 'dispatching'");
    expect_refused(future, "shards = 4", "is dispatching: shards can no longer change");
    /* Both rules broken: the freeze answers, as its trigger fired first. */
    expect_refused(past, "shards = 4, title = 'x'", "is frozen");
    value = query_value("SELECT CONCAT(shards, ',', title) FROM push_task WHERE id = ?",
                        (hr_mysql_param[]){HR_P_I64(past)}, 1);
    assert_string_equal(value, "1,hello");
    free(value);
    /* One trigger (030) where 002 and 010 each had theirs. */
    value = query_value("SELECT GROUP_CONCAT(TRIGGER_NAME) FROM information_schema.TRIGGERS"
                        " WHERE EVENT_OBJECT_SCHEMA = DATABASE()"
                        " AND EVENT_OBJECT_TABLE = 'push_task' AND ACTION_TIMING = 'BEFORE'"
                        " AND EVENT_MANIPULATION = 'UPDATE'",
                        NULL, 0);
    assert_string_equal(value, "push_task_guard");
    free(value);
}

/* Runs heraldctl with ARGS (NULL-terminated after the binary), returning
 * its exit code and its output (stdout and stderr) in a new string. */
static int run_ctl(char **output, ...)
{
    char *argv[16], logpath[] = "/tmp/hrtest-ctl-XXXXXX";
    int n = 0, status = 0, fd;
    va_list ap;
    FILE *f;
    long len;
    pid_t pid;

    argv[n++] = (char *)heraldctl;
    va_start(ap, output);
    while (n < 15 && (argv[n] = va_arg(ap, char *)) != NULL)
        n++;
    va_end(ap);
    argv[n] = NULL;
    fd = mkstemp(logpath);
    assert_true(fd >= 0);
    close(fd);
    pid = itest_spawn(argv, logpath);
    assert_true(pid > 0);
    if (itest_wait_exit(pid, CTL_TIMEOUT_MS, &status) != 0) {
        itest_kill(pid, SIGKILL);
        itest_wait_exit(pid, 5000, NULL);
        fail_msg("heraldctl did not exit within %d ms", CTL_TIMEOUT_MS);
    }
    f = fopen(logpath, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    rewind(f);
    *output = calloc(1, (size_t)len + 1);
    assert_int_equal(fread(*output, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    unlink(logpath);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* Two reporters lock the dispatched tasks of their own batches at once
 * (hr_state_lock_dispatched): neither waits for the other.  Read through
 * the state index (the plan MariaDB chose for the covering SELECT while
 * few tasks were dispatched), the lock took every dispatched task's entry
 * in due order, so two reporters waited for each other's batches and
 * deadlocked, and a dispatcher's statement behind them waited 10 s. */
static void test_lock_dispatched(void **state)
{
    int64_t mine[2], other;
    bool locked[2] = {false, false};
    hr_mysql *second = NULL;
    char errstr[512];

    (void)state;
    mine[0] = (int64_t)insert_task("lock-a", "UTC_TIMESTAMP(3) + INTERVAL 1 DAY");
    mine[1] = (int64_t)insert_task("lock-b", "UTC_TIMESTAMP(3) + INTERVAL 1 DAY");
    other = (int64_t)insert_task("lock-c", "UTC_TIMESTAMP(3) + INTERVAL 1 DAY");
    for (int i = 0; i < 2; i++)
        set_task((uint64_t)mine[i], "state = 'dispatched'");
    set_task((uint64_t)other, "state = 'dispatched'");
    assert_int_equal(hr_mysql_connect(cfg, &second, errstr, sizeof errstr), 0);
    assert_int_equal(
        hr_mysql_script(second, "SET SESSION innodb_lock_wait_timeout = 1", errstr, sizeof errstr),
        0);
    assert_int_equal(hr_mysql_begin(db, errstr, sizeof errstr), 0);
    assert_int_equal(hr_state_lock_dispatched(db, mine, 2, locked, errstr, sizeof errstr), 0);
    assert_true(locked[0] && locked[1]);
    assert_int_equal(hr_mysql_begin(second, errstr, sizeof errstr), 0);
    if (hr_state_lock_dispatched(second, &other, 1, locked, errstr, sizeof errstr) != 0)
        fail_msg("the other batch's lock waited for this one's: %s", errstr);
    assert_true(locked[0]);
    hr_mysql_rollback(second);
    hr_mysql_rollback(db);
    hr_mysql_free(second);
}

static void test_heraldctl(void **state)
{
    const char *config = getenv("HERALD_TEST_CONFIG");
    char badpath[] = "/tmp/hrtest-badcfg-XXXXXX";
    char expect[128];
    char *out;
    FILE *f;
    int fd;

    (void)state;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(run_ctl(&out, "-c", config, "migrate", NULL), 0);
        if (strncmp(out, "schema is up to date (version ", 30) != 0)
            fail_msg("unexpected migrate output: %s", out);
        free(out);
    }

    fd = mkstemp(badpath);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("mysql:\n  port: lots\n", f);
    fclose(f);
    assert_int_equal(run_ctl(&out, "-c", badpath, "migrate", NULL), 2);
    snprintf(expect, sizeof expect, "%s:2:", badpath);
    if (strncmp(out, expect, strlen(expect)) != 0)
        fail_msg("bad config output lacks %s: %s", expect, out);
    free(out);
    unlink(badpath);

    assert_int_equal(run_ctl(&out, "-c", config, "frobnicate", NULL), 2);
    assert_non_null(strstr(out, "unknown command 'frobnicate'"));
    assert_non_null(strstr(out, "usage: heraldctl"));
    free(out);
    assert_int_equal(run_ctl(&out, "-c", config, "migrate", "extra", NULL), 2);
    assert_non_null(strstr(out, "usage: heraldctl [-c CONFIG] migrate"));
    free(out);
    assert_int_equal(run_ctl(&out, "--version", NULL), 0);
    assert_true(strncmp(out, "heraldctl ", 10) == 0);
    free(out);
    assert_int_equal(run_ctl(&out, "help", NULL), 0);
    assert_non_null(strstr(out, "migrate"));
    free(out);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),      cmocka_unit_test(test_statement_cache),
        cmocka_unit_test(test_transaction),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_reconnect),      cmocka_unit_test(test_migrate_idempotent),
        cmocka_unit_test(test_task_guard),     cmocka_unit_test(test_lock_dispatched),
        cmocka_unit_test(test_heraldctl),      cmocka_unit_test(test_batch),
        cmocka_unit_test(test_idle_txn_limit), cmocka_unit_test(test_time_ms),
        cmocka_unit_test(test_exec_rows),      cmocka_unit_test(test_exec_rows_one_by_one),
    };

    if (argc < 2) {
        fprintf(stderr, "usage: %s HERALDCTL\n", argv[0]);
        return 2;
    }
    heraldctl = argv[1];
    if (!getenv("HERALD_TEST_CONFIG") || !*getenv("HERALD_TEST_CONFIG")) {
        fprintf(stderr, "test_mysql: HERALD_TEST_CONFIG is not set -- skipping\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
