/* test_ctl: heraldctl create, import, status and list against the stack.
 *
 * The built heraldctl runs as a child with a config written by itest (its
 * own Redis prefix); its exit code, stdout and stderr are checked, and the
 * rows and keys it wrote are read back through hr_mysql / hr_redis.  Every
 * task of this test has the topic "hrtest-ctl-<pid>"; rows and keys are
 * deleted at the end.
 *
 * usage: test_ctl HERALDCTL (the built binary, passed by meson) */
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

#include <cJSON.h>
#include <cmocka.h>

#include "ctl_fmt.h"
#include "hr_mysql.h"
#include "hr_redis.h"
#include "hr_task.h"
#include "itest.h"

#define CTL_TIMEOUT_MS 120000
/* The most a run's stdout or stderr may hold: a listing of a long-lived
 * stack's tasks (--limit 1000, some 450 bytes a task in --json) is far below
 * it; past it the test fails rather than read a cut listing. */
#define CTL_OUT_CAP (16 * 1024 * 1024)
#define IMPORT_IDS 50000

static hr_config *cfg;
static hr_mysql *db;
static hr_redis *rd;
static const char *heraldctl;
static char config_path[256];
static char topic[64];

/* What a heraldctl run left behind. */
typedef struct ctl_run {
    int rc;    /* exit code, -1 if it did not exit normally */
    char *out; /* all of stdout, NUL-terminated; replaced by the next run */
    char *err; /* all of stderr, likewise */
} ctl_run;

static int group_setup(void **state)
{
    char errstr[512];

    (void)state;
    cfg = itest_config();
    snprintf(topic, sizeof topic, "hrtest-ctl-%ld", (long)getpid());
    if (itest_write_config(cfg, config_path, sizeof config_path) != 0)
        return -1;
    if (hr_mysql_connect(cfg, &db, errstr, sizeof errstr) != 0 ||
        hr_redis_connect(cfg, &rd, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "test_ctl: %s\n", errstr);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    char errstr[512];
    hr_mysql_param p = HR_P_STR(topic);

    (void)state;
    if (db != NULL &&
        (hr_mysql_exec(db,
                       "DELETE s FROM push_subscription s JOIN push_task t ON t.id = s.task_id "
                       "WHERE t.topic = ?",
                       &p, 1, NULL, NULL, NULL, errstr, sizeof errstr) != 0 ||
         hr_mysql_exec(db, "DELETE FROM push_task WHERE topic = ?", &p, 1, NULL, NULL, NULL, errstr,
                       sizeof errstr) != 0))
        fprintf(stderr, "test_ctl: cleanup: %s\n", errstr);
    if (cfg != NULL)
        itest_redis_cleanup(cfg);
    hr_redis_free(rd);
    hr_mysql_free(db);
    hr_config_free(cfg);
    if (config_path[0] != '\0')
        unlink(config_path);
    return 0;
}

/* The whole of F, a heraldctl run's WHAT (stdout or stderr), as a new
 * NUL-terminated string; closes F.  Fails the test when it is past
 * CTL_OUT_CAP. */
static char *slurp(FILE *f, const char *what)
{
    long len;
    char *buf;

    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    assert_true(len >= 0);
    if (len > CTL_OUT_CAP)
        fail_msg("heraldctl's %s is %ld bytes, past the test's cap of %d", what, len, CTL_OUT_CAP);
    buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    rewind(f);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = '\0';
    fclose(f);
    return buf;
}

/* Frees R and what its last run captured; accepts NULL. */
static void ctl_run_free(ctl_run *r)
{
    if (r == NULL)
        return;
    free(r->out);
    free(r->err);
    free(r);
}

/* Fails, printing what heraldctl wrote, unless its stdout in R holds
 * WANT: a bare strstr assertion left a failure that did not repeat
 * unexplained. */
static void assert_out(const ctl_run *r, const char *want)
{
    if (strstr(r->out, want) == NULL)
        fail_msg("heraldctl's output lacks \"%s\":\n%s", want, r->out);
}

/* Runs heraldctl -c CONFIG ARGS... (NULL-terminated) with stdin from
 * STDIN_PATH (NULL = /dev/null). */
static void run_ctl(ctl_run *r, const char *stdin_path, ...)
{
    char *argv[64];
    FILE *out = tmpfile(), *err = tmpfile();
    va_list ap;
    size_t n = 0;
    int status;
    pid_t pid;

    assert_non_null(out);
    assert_non_null(err);
    argv[n++] = (char *)heraldctl;
    argv[n++] = "-c";
    argv[n++] = config_path;
    va_start(ap, stdin_path);
    while (n < 63 && (argv[n] = va_arg(ap, char *)) != NULL)
        n++;
    va_end(ap);
    argv[n] = NULL;

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *in = fopen(stdin_path ? stdin_path : "/dev/null", "r");
        if (in == NULL || dup2(fileno(in), 0) < 0 || dup2(fileno(out), 1) < 0 ||
            dup2(fileno(err), 2) < 0)
            _exit(127);
        execv(heraldctl, argv);
        _exit(127);
    }
    if (itest_wait_exit(pid, CTL_TIMEOUT_MS, &status) != 0) {
        itest_kill(pid, SIGKILL);
        itest_wait_exit(pid, 5000, NULL);
        fail_msg("heraldctl %s did not finish in %d ms", argv[3], CTL_TIMEOUT_MS);
    }
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    free(r->out);
    free(r->err);
    r->out = slurp(out, "stdout");
    r->err = slurp(err, "stderr");
}

static int64_t scalar(const char *sql, int64_t id)
{
    hr_mysql_param p = HR_P_I64(id);
    hr_mysql_rows *rows = NULL;
    char errstr[512];
    int64_t v;

    if (hr_mysql_query(db, sql, &p, 1, &rows, errstr, sizeof errstr) != 0)
        fail_msg("%s: %s", sql, errstr);
    assert_int_equal(rows->nrows, 1);
    v = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    return v;
}

static void exec_id(const char *sql, int64_t id)
{
    hr_mysql_param p = HR_P_I64(id);
    char errstr[512];

    if (hr_mysql_exec(db, sql, &p, 1, NULL, NULL, NULL, errstr, sizeof errstr) != 0)
        fail_msg("%s: %s", sql, errstr);
}

static int64_t tasks_of_topic(void)
{
    hr_mysql_param p = HR_P_STR(topic);
    hr_mysql_rows *rows = NULL;
    char errstr[512];
    int64_t v;

    if (hr_mysql_query(db, "SELECT COUNT(*) FROM push_task WHERE topic = ?", &p, 1, &rows, errstr,
                       sizeof errstr) != 0)
        fail_msg("count: %s", errstr);
    v = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    return v;
}

static int64_t subscriptions(int64_t id)
{
    return scalar("SELECT COUNT(*) FROM push_subscription WHERE task_id = ?", id);
}

static int64_t scard(int64_t id)
{
    char key[256], errstr[256];
    redisReply *reply;
    int64_t n;

    hr_key_task(hr_redis_prefix(rd), key, sizeof key, id, HR_KEY_SUBS);
    reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "SCARD %s", key);
    if (reply == NULL)
        fail_msg("SCARD: %s", errstr);
    n = reply->integer;
    freeReplyObject(reply);
    return n;
}

/* A task due in an hour, created through heraldctl --quiet. */
static int64_t new_task(const char *name)
{
    ctl_run *r = calloc(1, sizeof *r);
    int64_t id;

    assert_non_null(r);
    run_ctl(r, NULL, "create", "--name", name, "--channel", cfg->channels[0].name, "--topic", topic,
            "--due-in", "1h", "--quiet", NULL);
    if (r->rc != 0)
        fail_msg("create: rc %d: %s", r->rc, r->err);
    id = strtoll(r->out, NULL, 10);
    assert_true(id > 0);
    ctl_run_free(r);
    return id;
}

static void test_create_every_flag(void **state)
{
    ctl_run *r = calloc(1, sizeof *r);
    hr_task *t = NULL;
    char errstr[512], want[64];
    int64_t id;

    (void)state;
    assert_non_null(r);
    run_ctl(r, NULL, "create", "--name", "every flag", "--channel", cfg->channels[0].name,
            "--topic", topic, "--title", "Hello {{uid}}", "--body", "about {{payload.what}}",
            "--payload", "{\"what\":\"tea\"}", "--due-at", "2031-05-06 07:08:09.123", "--freeze-at",
            "2031-05-06 00:30:00", "--rate-limit", "250", "--chunk-size", "777", "--throttle-limit",
            "3", "--throttle-window", "2h", "--throttle-scope", "scope-x", "--throttle-key",
            "device", "--throttle-mode", "shadow", "--quiet", NULL);
    if (r->rc != 0)
        fail_msg("rc %d: %s", r->rc, r->err);
    id = strtoll(r->out, NULL, 10);
    assert_true(id > 0);
    snprintf(want, sizeof want, "%lld\n", (long long)id);
    assert_string_equal(r->out, want); /* --quiet: the id alone */

    assert_int_equal(hr_task_load(db, id, &t, errstr, sizeof errstr), 0);
    assert_string_equal(t->name, "every flag");
    assert_string_equal(t->topic, topic);
    assert_string_equal(t->channel, cfg->channels[0].name);
    assert_string_equal(t->title, "Hello {{uid}}");
    assert_string_equal(t->body, "about {{payload.what}}");
    assert_string_equal(t->payload, "{\"what\":\"tea\"}");
    assert_int_equal(t->due_ms, 1935817689123LL);    /* 2031-05-06 07:08:09.123Z */
    assert_int_equal(t->freeze_ms, 1935793800000LL); /* 2031-05-06 00:30:00Z */
    assert_int_equal(t->rate_limit, 250);
    assert_int_equal(t->chunk_size, 777);
    assert_int_equal(t->throttle_limit, 3);
    assert_int_equal(t->throttle_window_s, 7200);
    assert_string_equal(t->throttle_scope, "scope-x");
    assert_string_equal(t->throttle_key, "device");
    assert_string_equal(t->throttle_mode, "shadow");
    assert_int_equal(t->state, HR_STATE_SCHEDULED);
    assert_int_equal(t->control, HR_CONTROL_RUN);
    hr_task_free(t);

    /* Without --quiet: a sentence with the id and the due time. */
    run_ctl(r, NULL, "create", "--name", "plain", "--channel", cfg->channels[0].name, "--topic",
            topic, "--due-at", "2031-01-02T03:04:05Z", NULL);
    assert_int_equal(r->rc, 0);
    assert_out(r, "created task ");
    assert_out(r, " due 2031-01-02T03:04:05.000Z");
    ctl_run_free(r);
}

static void test_create_refuses_bad_input(void **state)
{
    static const struct {
        int rc;
        const char *flag, *value, *message;
    } cases[] = {
        {1, "--channel", "no-such-channel", "unknown channel \"no-such-channel\""},
        {1, "--chunk-size", "0", "chunk_size 0 is outside 1..100000"},
        {1, "--payload", "[1,2]", "payload is not a JSON object"},
        {1, "--throttle-limit", "5", "throttle_window_s 0 is outside"},
        {1, "--title", "Hi {{nope", "title template"},
        {1, "--rate-limit", "-1", "rate_limit -1 is negative"},
        {2, "--due-at", "2031-02-30 10:00:00", "is not a UTC time"},
        {2, "--due-in", "5", "is not a duration"},
        {2, "--chunk-size", "many", "is not an integer"},
        {2, "--throttle-window", "1500ms", "is not whole seconds"},
        {2, "--bogus", "x", "usage: heraldctl"},
    };
    ctl_run *r = calloc(1, sizeof *r);
    int64_t before = tasks_of_topic();

    (void)state;
    assert_non_null(r);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* The case's flag comes last so that it overrides --channel or
         * --due-in where it repeats them. */
        const char *due =
            strcmp(cases[i].flag, "--due-at") == 0 || strcmp(cases[i].flag, "--due-in") == 0
                ? "--name"
                : "--due-in";
        run_ctl(r, NULL, "create", "--name", "bad", "--topic", topic, "--channel",
                strcmp(cases[i].flag, "--channel") == 0 ? cases[i].value : cfg->channels[0].name,
                due, strcmp(due, "--name") == 0 ? "bad" : "1h", cases[i].flag, cases[i].value,
                NULL);
        if (r->rc != cases[i].rc || strstr(r->err, cases[i].message) == NULL)
            fail_msg("%s %s: rc %d (want %d), stderr: %s", cases[i].flag, cases[i].value, r->rc,
                     cases[i].rc, r->err);
    }
    run_ctl(r, NULL, "create", "--channel", cfg->channels[0].name, "--due-in", "1h", NULL);
    assert_int_equal(r->rc, 2);
    assert_non_null(strstr(r->err, "--name, --channel and --due-at or --due-in are required"));
    assert_int_equal(tasks_of_topic(), before);
    ctl_run_free(r);
}

/* IMPORT_IDS distinct ids (1..N, some twice) among comments, blank lines,
 * spaces and CRLF endings. */
static void write_ids(const char *path)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs("# subscribers of the test\n\n", f);
    for (int i = 1; i <= IMPORT_IDS; i++) {
        fprintf(f, i % 7 == 0 ? "  %d \r\n" : "%d\n", i);
        if (i % 1000 == 0)
            fprintf(f, "# dup\n%d\n\n", i / 2);
    }
    assert_int_equal(fclose(f), 0);
}

static void test_import(void **state)
{
    char path[] = "/tmp/hrtest-ctl-ids-XXXXXX", idtext[32];
    ctl_run *r = calloc(1, sizeof *r);
    int64_t id = new_task("import");
    int fd = mkstemp(path);

    (void)state;
    assert_non_null(r);
    assert_true(fd >= 0);
    close(fd);
    write_ids(path);
    snprintf(idtext, sizeof idtext, "%lld", (long long)id);

    run_ctl(r, NULL, "import", idtext, path, NULL);
    if (r->rc != 0)
        fail_msg("import: rc %d: %s", r->rc, r->err);
    assert_out(r, "imported 50,050 ids into task");
    assert_out(r, "50,000 new, 50 duplicates");
    assert_int_equal(subscriptions(id), IMPORT_IDS);
    assert_int_equal(scard(id), IMPORT_IDS);

    /* Again, from stdin: nothing new, nothing lost. */
    run_ctl(r, path, "import", idtext, "-", NULL);
    if (r->rc != 0)
        fail_msg("re-import: rc %d: %s", r->rc, r->err);
    assert_out(r, "0 new, 50,050 duplicates");
    assert_int_equal(subscriptions(id), IMPORT_IDS);
    assert_int_equal(scard(id), IMPORT_IDS);

    /* status shows the subscribers waiting in Redis and the counters. */
    run_ctl(r, NULL, "status", idtext, NULL);
    if (r->rc != 0)
        fail_msg("status: rc %d: %s", r->rc, r->err);
    assert_out(r, ": scheduled");
    assert_out(r, "subs left 50,000");
    assert_out(r, "0.0%  0 of 50,000");
    assert_out(r, "sent 0  failed 0  throttled 0  pulled 0  cancelled 0");
    unlink(path);
    ctl_run_free(r);
}

static void test_import_bad_line(void **state)
{
    static const char *const bad[] = {"12x", "0", "-5", "9223372036854775808", "1 2", "007"};
    char path[] = "/tmp/hrtest-ctl-bad-XXXXXX", idtext[32], want[128];
    ctl_run *r = calloc(1, sizeof *r);
    int64_t id = new_task("bad line");
    int fd = mkstemp(path);

    (void)state;
    assert_non_null(r);
    assert_true(fd >= 0);
    close(fd);
    snprintf(idtext, sizeof idtext, "%lld", (long long)id);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "1\n# two more\n2\n9223372036854775807\n%s\n3\n", bad[i]);
        fclose(f);
        run_ctl(r, NULL, "import", idtext, path, NULL);
        snprintf(want, sizeof want, "%s:5: \"%s\" is not a user id", path, bad[i]);
        if (r->rc != 1 || strstr(r->err, want) == NULL)
            fail_msg("%s: rc %d, stderr: %s", bad[i], r->rc, r->err);
    }
    /* A bad line anywhere means nothing is written. */
    assert_int_equal(subscriptions(id), 0);
    assert_int_equal(scard(id), 0);
    unlink(path);
    ctl_run_free(r);
}

static void test_import_refused(void **state)
{
    ctl_run *r = calloc(1, sizeof *r);
    int64_t id = new_task("not scheduled");
    char idtext[32];

    (void)state;
    assert_non_null(r);
    snprintf(idtext, sizeof idtext, "%lld", (long long)id);
    exec_id("UPDATE push_task SET state = 'dispatching' WHERE id = ?", id);
    run_ctl(r, "/dev/null", "import", idtext, "-", NULL);
    assert_int_equal(r->rc, 1);
    assert_non_null(strstr(r->err, "is dispatching: subscribers can only be imported while it "
                                   "is scheduled"));

    snprintf(idtext, sizeof idtext, "%lld", (long long)id + 1000000000LL);
    run_ctl(r, "/dev/null", "import", idtext, "-", NULL);
    assert_int_equal(r->rc, 1);
    assert_non_null(strstr(r->err, "does not exist"));
    assert_int_equal(subscriptions(id), 0);
    ctl_run_free(r);
}

/* Runs a Redis command given as a format (through hr_redis, so it is
 * routed like herald's own); the reply's integer (or the string parsed),
 * -1 for nil. */
static long long redis_ll(const char *fmt, ...)
{
    redisReply *reply;
    long long v;
    va_list ap;
    char err[256];

    va_start(ap, fmt);
    reply = hr_redis_vcmdf(rd, err, sizeof err, fmt, ap);
    va_end(ap);
    if (reply == NULL)
        fail_msg("%s", err);
    v = reply->type == REDIS_REPLY_INTEGER  ? reply->integer
        : reply->type == REDIS_REPLY_STRING ? strtoll(reply->str, NULL, 10)
                                            : -1;
    freeReplyObject(reply);
    return v;
}

/* Import into a task whose chunking started (seq exists) while MySQL
 * still says scheduled: Redis refuses the add, but the rows committed
 * before any claim, so the owner's reconciliation reads them.  The import
 * succeeds, the rows are in MySQL and subs is left alone. */
static void test_import_after_start(void **state)
{
    char path[] = "/tmp/hrtest-ctl-late-XXXXXX", idtext[32], key[256];
    ctl_run *r = calloc(1, sizeof *r);
    int64_t id = new_task("late import");
    int fd = mkstemp(path);

    (void)state;
    assert_non_null(r);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "1\n2\n3\n", 6), 6);
    close(fd);
    snprintf(idtext, sizeof idtext, "%lld", (long long)id);
    hr_key_task(hr_redis_prefix(rd), key, sizeof key, id, HR_KEY_SEQ);
    redis_ll("SET %s 1", key);
    run_ctl(r, NULL, "import", idtext, path, NULL);
    if (r->rc != 0)
        fail_msg("import after start: rc %d, stderr: %s", r->rc, r->err);
    assert_int_equal(scard(id), 0);
    assert_int_equal(subscriptions(id), 3);
    unlink(path);
    ctl_run_free(r);
}

/* 5 dead letters of a chunk_size-2 task: redrive makes chunks of 2, 2 and
 * 1 (never one chunk over chunk_size), all pending, the hash empty. */
static void test_redrive_slices(void **state)
{
    ctl_run *r = calloc(1, sizeof *r);
    int64_t id = new_task("redrive slices");
    char idtext[32], failed[HR_KEY_MAX], stats[HR_KEY_MAX], seqkey[HR_KEY_MAX];
    char pending[HR_KEY_MAX], chunk[HR_KEY_MAX];
    const char *prefix = hr_redis_prefix(rd);
    long long seq, total = 0, nchunks = 0;
    int uid;

    (void)state;
    assert_non_null(r);
    snprintf(idtext, sizeof idtext, "%lld", (long long)id);
    exec_id("UPDATE push_task SET state = 'done', chunk_size = 2, failed = 5 WHERE id = ?", id);
    hr_key_task(prefix, failed, sizeof failed, id, HR_KEY_FAILED);
    hr_key_task(prefix, stats, sizeof stats, id, HR_KEY_STATS);
    hr_key_task(prefix, seqkey, sizeof seqkey, id, HR_KEY_SEQ);
    hr_key_task(prefix, pending, sizeof pending, id, HR_KEY_PENDING);
    for (uid = 101; uid <= 105; uid++)
        redis_ll("HSET %s %d %s", failed, uid, "http 500");
    redis_ll("HSET %s failed 5", stats);
    redis_ll("SET %s 7", seqkey);
    run_ctl(r, NULL, "redrive", idtext, NULL);
    if (r->rc != 0 || strstr(r->out, "redrove 5 recipients into 3 chunks") == NULL)
        fail_msg("redrive: rc %d: %s%s", r->rc, r->out, r->err);
    for (seq = 8; seq <= 10; seq++) {
        long long n = redis_ll("SCARD %s", hr_key_chunk(prefix, chunk, sizeof chunk, id, seq));

        assert_true(n >= 1 && n <= 2);
        total += n;
        nchunks += redis_ll("HEXISTS %s %lld", pending, seq);
    }
    assert_int_equal(total, 5);
    assert_int_equal(nchunks, 3);
    assert_int_equal(redis_ll("EXISTS %s", failed), 0);
    assert_int_equal(redis_ll("HGET %s failed", stats), 0);
    ctl_run_free(r);
}

/* recover refuses a task a dispatcher is chunking (it would INCR seq while
 * recover rebuilds), and one whose prepare lock another party holds. */
static void test_recover_refused(void **state)
{
    ctl_run *r = calloc(1, sizeof *r);
    int64_t id = new_task("recover refused");
    char idtext[32], prep[HR_KEY_MAX];

    (void)state;
    assert_non_null(r);
    snprintf(idtext, sizeof idtext, "%lld", (long long)id);
    hr_key_task(hr_redis_prefix(rd), prep, sizeof prep, id, HR_KEY_PREP);
    redis_ll("SET %s someone-else", prep);
    run_ctl(r, NULL, "recover", idtext, NULL);
    if (r->rc != 1 || strstr(r->err, "prepare lock held") == NULL)
        fail_msg("recover with the lock held: rc %d: %s", r->rc, r->err);
    redis_ll("DEL %s", prep);
    exec_id("UPDATE push_task SET state = 'dispatching' WHERE id = ?", id);
    run_ctl(r, NULL, "recover", idtext, NULL);
    if (r->rc != 1 || strstr(r->err, "pause it first") == NULL)
        fail_msg("recover of a dispatching task: rc %d: %s", r->rc, r->err);
    ctl_run_free(r);
}

static void test_status_watch_and_list(void **state)
{
    ctl_run *r = calloc(1, sizeof *r);
    int64_t id = new_task("finished one");
    char idtext[32], name[64];

    (void)state;
    assert_non_null(r);
    snprintf(idtext, sizeof idtext, "%lld", (long long)id);
    exec_id("UPDATE push_task SET state = 'done', total = 100, sent = 90, failed = 4, "
            "throttled = 3, pulled = 2, cancelled = 1, retried = 7 WHERE id = ?",
            id);

    /* A finished task: --watch draws once and exits 0 (stdout is no tty:
     * one line per sample, then the report). */
    run_ctl(r, NULL, "status", idtext, "--watch", "--interval", "100ms", NULL);
    if (r->rc != 0)
        fail_msg("status --watch: rc %d: %s", r->rc, r->err);
    assert_out(r, "100.0%  100/100  sent 90 failed 4 throttled 3");
    assert_out(r, "total 100  sent 90  failed 4  throttled 3  pulled 2  "
                  "cancelled 1  retried 7");

    exec_id("UPDATE push_task SET state = 'failed', last_error = 'broken on purpose' WHERE id = ?",
            id);
    run_ctl(r, NULL, "status", idtext, "--watch", NULL);
    assert_int_equal(r->rc, 1);
    assert_out(r, "error     broken on purpose");

    run_ctl(r, NULL, "status", "999999999999", NULL);
    assert_int_equal(r->rc, 1);
    assert_non_null(strstr(r->err, "does not exist"));

    run_ctl(r, NULL, "list", "--state", "failed", "--limit", "1000", NULL);
    assert_int_equal(r->rc, 0);
    assert_out(r, "finished one");
    snprintf(name, sizeof name, "\n%8s  finished one", idtext);
    assert_out(r, name);
    run_ctl(r, NULL, "list", "--state", "scheduled", "--limit", "1000", NULL);
    assert_int_equal(r->rc, 0);
    assert_null(strstr(r->out, "finished one"));
    run_ctl(r, NULL, "list", "--state", "bogus", NULL);
    assert_int_equal(r->rc, 2);
    ctl_run_free(r);
}

/* The terminal columns of the first LEN bytes of S, which must be valid
 * UTF-8 (fails the test otherwise). */
static int columns(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    int w = 0;

    while (p < end) {
        uint32_t cp;
        int n = p[0] < 0x80             ? 1
                : (p[0] & 0xE0) == 0xC0 ? 2
                : (p[0] & 0xF0) == 0xE0 ? 3
                : (p[0] & 0xF8) == 0xF0 ? 4
                                        : 0;
        if (n == 0 || p + n > end)
            fail_msg("invalid UTF-8 at byte %td of \"%s\"", (const char *)p - s, s);
        cp = n == 1 ? p[0] : p[0] & (0x7F >> n);
        for (int i = 1; i < n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                fail_msg("invalid UTF-8 at byte %td of \"%s\"", (const char *)p - s, s);
            cp = cp << 6 | (p[i] & 0x3F);
        }
        w += ctl_fmt_cp_width(cp);
        p += n;
    }
    return w;
}

/* The line of OUT that starts with task ID (right-aligned in 8), copied
 * into LINE. */
static void list_line(const char *out, int64_t id, char *line, size_t len)
{
    char head[32];
    const char *p, *nl;

    snprintf(head, sizeof head, "\n%8lld  ", (long long)id);
    p = strstr(out, head);
    if (p == NULL)
        fail_msg("task %lld is not in the list:\n%s", (long long)id, out);
    p++;
    nl = strchr(p, '\n');
    assert_non_null(nl);
    assert_true((size_t)(nl - p) < len);
    memcpy(line, p, (size_t)(nl - p));
    line[nl - p] = '\0';
}

#define CJK_NAME                                                                           \
    "\xE6\x98\x8E\xE6\x99\x9A\xE7\x9B\xB4\xE6\x92\xAD\xE6\x8F\x90\xE9\x86\x92\xEF\xBC\x9A" \
    "\xE6\x96\xB0\xE5\xB9\xB4\xE6\xBC\x94\xE5\x94\xB1\xE4\xBC\x9A\xE5\x8D\xB3\xE5\xB0\x86" \
    "\xE5\xBC\x80\xE5\xA7\x8B" /* 16 CJK characters, 32 columns */
#define EMOJI_NAME                                                                          \
    "go \xF0\x9F\x8E\x89\xF0\x9F\x8E\x89\xF0\x9F\x8E\x89 live \xF0\x9F\x9A\x80\xF0\x9F\x9A" \
    "\x80 now \xE2\x9C\x85\xE2\x9C\x85\xE2\x9C\x85 ok" /* 33 columns */
#define CJK_ERROR                                                                           \
    "provider 429: \xE8\xAF\xB7\xE6\xB1\x82\xE8\xBF\x87\xE4\xBA\x8E\xE9\xA2\x91"            \
    "\xE7\xB9\x81\xEF\xBC\x8C\xE8\xAF\xB7\xE7\xA8\x8D\xE5\x90\x8E\xE9\x87\x8D\xE8\xAF\x95 " \
    "(every recipient throttled)"

/* list cuts CJK and emoji names at a character boundary and pads them by
 * terminal columns: every line is valid UTF-8 and the columns after the
 * name start at the same column as the header's.  A fully throttled task
 * shows its throttled count and last error; --json carries every counter. */
static void test_list_utf8_and_json(void **state)
{
    ctl_run *r = calloc(1, sizeof *r);
    int64_t ids[3] = {new_task(CJK_NAME), new_task(EMOJI_NAME), new_task("short ascii")};
    char line[1024];
    const char *hdr_state, *hdr_error;
    int state_col, error_col;
    size_t nfound = 0;
    cJSON *arr, *o;

    (void)state;
    assert_non_null(r);
    for (int i = 0; i < 3; i++)
        exec_id("UPDATE push_task SET state = 'done', total = 1000, throttled = 1000, "
                "last_error = '" CJK_ERROR "' WHERE id = ?",
                ids[i]);
    exec_id("UPDATE push_task SET pulled = 3, cancelled = 4, retried = 5, sent = 6, failed = 7, "
            "expired = 8 WHERE id = ?",
            ids[2]);

    run_ctl(r, NULL, "list", "--state", "done", "--limit", "1000", NULL);
    if (r->rc != 0)
        fail_msg("list: rc %d: %s", r->rc, r->err);
    (void)columns(r->out, strlen(r->out)); /* the whole output is valid UTF-8 */
    hdr_state = strstr(r->out, "STATE");
    hdr_error = strstr(r->out, "LAST ERROR");
    assert_non_null(hdr_state);
    assert_non_null(hdr_error);
    assert_out(r, "THROTTLED");
    assert_out(r, "PULLED");
    assert_out(r, "CANCELLED");
    assert_out(r, "EXPIRED");
    state_col = columns(r->out, (size_t)(hdr_state - r->out));
    error_col = columns(r->out, (size_t)(hdr_error - r->out));
    for (int i = 0; i < 3; i++) {
        char *st, *err, *tok, *save = NULL, *toks[8];
        int n = 0;

        list_line(r->out, ids[i], line, sizeof line);
        st = strstr(line, "  done  ");
        err = strstr(line, "provider 429: ");
        if (st == NULL || err == NULL)
            fail_msg("no state or last error in \"%s\"", line);
        st += 2;
        if (columns(line, (size_t)(st - line)) != state_col ||
            columns(line, (size_t)(err - line)) != error_col)
            fail_msg("columns shifted (state at %d, error at %d; header %d, %d):\n%s\n%s",
                     columns(line, (size_t)(st - line)), columns(line, (size_t)(err - line)),
                     state_col, error_col, r->out, line);
        /* The error is cut with an ellipsis, whole characters only. */
        assert_non_null(strstr(err, "\xE2\x80\xA6"));
        assert_null(strstr(err, "throttled)"));
        /* state, date, time, total, sent, failed, throttled, pulled, cancelled */
        err[-1] = '\0';
        for (tok = strtok_r(st, " ", &save); tok != NULL && n < 8; tok = strtok_r(NULL, " ", &save))
            toks[n++] = tok;
        assert_int_equal(n, 8);
        assert_string_equal(toks[3], "1,000"); /* total */
        assert_string_equal(toks[6], "1,000"); /* throttled */
        assert_string_equal(toks[4], i == 2 ? "6" : "0");
        assert_string_equal(toks[7], i == 2 ? "3" : "0");
    }
    /* The names were cut: the CJK one after 13 characters (26 columns and
     * the ellipsis, then one space of padding), never inside one. */
    list_line(r->out, ids[0], line, sizeof line);
    assert_non_null(strstr(line, "\xE5\x8D\xB3\xE2\x80\xA6   done"));

    run_ctl(r, NULL, "list", "--json", "--state", "done", "--limit", "1000", NULL);
    if (r->rc != 0)
        fail_msg("list --json: rc %d: %s", r->rc, r->err);
    arr = cJSON_Parse(r->out);
    if (!cJSON_IsArray(arr))
        fail_msg("list --json is not a JSON array:\n%s", r->out);
    cJSON_ArrayForEach(o, arr)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
        int k;

        assert_true(cJSON_IsNumber(id));
        for (k = 0; k < 3 && (double)ids[k] != id->valuedouble; k++)
            ;
        if (k == 3)
            continue;
        nfound++;
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring,
                            k == 0   ? CJK_NAME
                            : k == 1 ? EMOJI_NAME
                                     : "short ascii");
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "state")->valuestring, "done");
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "last_error")->valuestring,
                            CJK_ERROR);
        assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "due_at")));
        assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "finished_at")));
        static const char *const counters[] = {"total",  "sent",      "failed",  "throttled",
                                               "pulled", "cancelled", "retried", "expired"};
        const int want[2][8] = {{1000, 0, 0, 1000, 0, 0, 0, 0}, {1000, 6, 7, 1000, 3, 4, 5, 8}};
        for (int c = 0; c < 8; c++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, counters[c]);
            if (!cJSON_IsNumber(v) || v->valuedouble != want[k == 2][c])
                fail_msg("task %d: %s is not %d in --json", k, counters[c], want[k == 2][c]);
        }
    }
    cJSON_Delete(arr);
    assert_int_equal(nfound, 3);
    ctl_run_free(r);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_every_flag),
        cmocka_unit_test(test_create_refuses_bad_input),
        cmocka_unit_test(test_import),
        cmocka_unit_test(test_import_bad_line),
        cmocka_unit_test(test_import_refused),
        cmocka_unit_test(test_import_after_start),
        cmocka_unit_test(test_redrive_slices),
        cmocka_unit_test(test_recover_refused),
        cmocka_unit_test(test_status_watch_and_list),
        cmocka_unit_test(test_list_utf8_and_json),
    };

    if (getenv("HERALD_TEST_CONFIG") == NULL || *getenv("HERALD_TEST_CONFIG") == '\0') {
        fprintf(stderr, "test_ctl: HERALD_TEST_CONFIG is not set -- skipping\n");
        return 77;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: test_ctl HERALDCTL\n");
        return 2;
    }
    heraldctl = argv[1];
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
