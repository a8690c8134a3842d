/* cmd_import: `heraldctl import TASK FILE|- [--lead D]` — subscribers into a
 * scheduled task, written to both stores (DESIGN.md "dual storage"); with
 * --lead, each subscription is pushed D before the task's event_at
 * (docs/scheduling.md "Lead times", checked as the API checks lead_s).
 *
 * The whole input is read and checked first (8 bytes an id), so a bad line
 * costs only its message: nothing is written unless every line is good.
 * Then the ids go in batches of IMPORT_BATCH:
 *
 *   MySQL, the durable truth: one transaction per batch that re-reads the
 *   task's state under a shared lock (a dispatcher cannot claim the task in
 *   the middle of a batch, and a task claimed meanwhile stops the import)
 *   and runs one prepared multi-row INSERT IGNORE, the same statement text
 *   for every full batch so hr_mysql's cache prepares it once.
 *
 *   Redis, after MySQL committed: one refill_add.lua of the batch on the
 *   task's subs set (the dispatcher's refill script: it skips pulled uids
 *   and refuses once chunking started; a task of several shards gets one
 *   call per shard, each on its own set), sent at once but its reply read
 *   only after the next batch's commit, so Redis works while MySQL does.
 *   Redis thus never holds an id MySQL lacks.  A refusal there (the task
 *   was claimed meanwhile) loses nothing: the batch committed before the
 *   claim, and the owner's reconciliation reads it from MySQL.  A batch
 *   after the claim is refused by MySQL (the state check, or the guard
 *   trigger of schemas/mysql/003_subscription_guard.sql), and the import
 *   stops saying which ids were refused.
 *
 * Both writes are idempotent, so an import that failed half way is simply
 * run again. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "ctl_uids.h"
#include "hr_clock.h"
#include "hr_pipe.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_task.h"
#include "hr_vec.h"

#define IMPORT_BATCH 10000
#define IMPORT_UID_LEN 24      /* a decimal int64 and its NUL, rounded up */
#define IMPORT_PROGRESS_MS 100 /* redraw period of the progress line */
#define IMPORT_BAR_WIDTH 30

#define IMPORT_INSERT_HEAD "INSERT IGNORE INTO push_subscription (task_id, uid, lead_s) VALUES "
#define IMPORT_ROW "(?,?,?)"
#define IMPORT_ROW_PARAMS 3
#define IMPORT_STATE_SQL "SELECT state FROM push_task WHERE id = ?"

typedef struct import_job {
    hr_mysql *m;
    hr_redis *r;
    hr_pipe *pipe; /* the refill_add.lua calls in flight */
    int64_t task;
    int shards;               /* push_task.shards */
    char keys[3][HR_KEY_MAX]; /* a shard's subs, pulled and seq keys */
    char *sql;                /* INSERT for SQL_ROWS rows */
    size_t sql_rows;
    hr_mysql_param *params;
    const char **argv;   /* refill_add.lua: 3 keys, then uids */
    const char **uids;   /* the batch's decimal uids, then sorted by shard into argv + 3 */
    size_t *bounds;      /* shard k's uids: argv[3 + bounds[k] .. 3 + bounds[k + 1]) */
    char *txt;           /* IMPORT_BATCH decimal uids, IMPORT_UID_LEN apart */
    size_t sadd_pending; /* refill_add calls sent whose replies are not read yet */
    uint64_t added;      /* rows MySQL inserted (the rest were there) */
    int64_t lead_s;      /* --lead in seconds; -1 = none (NULL) */
    ctl_ctx *ctx;        /* for each batch's audit row */
} import_job;

/* Refuses a task that does not exist or is past `scheduled`: 0 = it is
 * scheduled, 1 = refused, -1 = a database error (ERRSTR either way).
 * With LOCK (inside a transaction) the row stays share-locked until the
 * commit. */
static int import_check_task(hr_mysql *m, int64_t task, bool lock, char *errstr, size_t errlen)
{
    hr_mysql_param p = HR_P_I64(task);
    hr_mysql_rows *rows = NULL;
    const char *name;
    hr_task_state state;
    int rc = -1;

    if (hr_mysql_query(m, lock ? IMPORT_STATE_SQL " LOCK IN SHARE MODE" : IMPORT_STATE_SQL, &p, 1,
                       &rows, errstr, errlen) < 0)
        goto done;
    if (rows->nrows == 0) {
        snprintf(errstr, errlen, "task %" PRId64 " does not exist", task);
        goto done;
    }
    name = hr_mysql_cell(rows, 0, 0);
    if (hr_state_parse(name, &state) < 0 || state != HR_STATE_SCHEDULED) {
        snprintf(errstr, errlen,
                 "task %" PRId64 " is %s: subscribers can only be imported while it is scheduled",
                 task, name != NULL ? name : "NULL");
        rc = 1;
        goto done;
    }
    rc = 0;
done:
    hr_mysql_rows_free(rows);
    return rc;
}

/* The INSERT text for N rows, built when N changes (a full batch, then
 * the last one). */
static int import_sql(import_job *j, size_t n)
{
    size_t head = strlen(IMPORT_INSERT_HEAD);
    char *sql, *p;

    if (j->sql != NULL && j->sql_rows == n)
        return 0;
    sql = malloc(head + n * sizeof IMPORT_ROW + 1);
    if (sql == NULL)
        return -1;
    memcpy(sql, IMPORT_INSERT_HEAD, head);
    p = sql + head;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            *p++ = ',';
        memcpy(p, IMPORT_ROW, sizeof IMPORT_ROW - 1);
        p += sizeof IMPORT_ROW - 1;
    }
    *p = '\0';
    free(j->sql);
    j->sql = sql;
    j->sql_rows = n;
    return 0;
}

/* Reads the replies of the refill_add calls in flight, if any. */
static int import_sadd_finish(import_job *j, char *errstr, size_t errlen)
{
    size_t n = j->sadd_pending;

    if (n == 0)
        return 0;
    j->sadd_pending = 0;
    if (hr_pipe_recv(j->pipe, errstr, errlen) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        redisReply *reply = hr_pipe_reply(j->pipe, i, errstr, errlen);

        if (reply == NULL)
            return -1;
        /* A refusal (seq exists) loses nothing: the batch committed before
         * the claim (the guard trigger refuses rows after it), so the
         * owner's reconciliation read it from MySQL before creating seq. */
        freeReplyObject(reply);
    }
    return 0;
}

/* Sends refill_add.lua of UIDS, one call per shard that has some, without
 * waiting for the replies. */
static int import_sadd_send(import_job *j, const int64_t *uids, size_t n, char *errstr,
                            size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        char *t = j->txt + i * IMPORT_UID_LEN;
        snprintf(t, IMPORT_UID_LEN, "%" PRId64, uids[i]);
        j->uids[i] = t;
    }
    hr_pipe_reset(j->pipe);
    if (hr_shard_sort(j->uids, n, j->shards, j->argv + 3, j->bounds) != 0)
        goto oom;
    for (int k = 0; k < (j->shards > 1 ? j->shards : 1); k++) {
        size_t first = j->bounds[k], nk = j->bounds[k + 1] - first;

        if (nk == 0)
            continue;
        /* The pipeline copies the arguments: the slots before shard k's
         * uids take its keys, and the next shard overwrites them. */
        for (int i = 0; i < 3; i++)
            j->argv[first + (size_t)i] =
                hr_key_shard(hr_redis_prefix(j->r), j->keys[i], sizeof j->keys[i], j->task, k,
                             i == 0   ? HR_KEY_SUBS
                             : i == 1 ? HR_KEY_PULLED
                                      : HR_KEY_SEQ);
        if (hr_pipe_eval(j->pipe, HR_LUA_REFILL_ADD, 3, (int)(3 + nk), j->argv + first, NULL) < 0)
            goto oom;
        j->sadd_pending++;
    }
    /* Written now, read after the next MySQL batch: Redis works meanwhile. */
    return hr_pipe_send(j->pipe, errstr, errlen);
oom:
    snprintf(errstr, errlen, "out of memory");
    return -1;
}

/* One batch: MySQL transaction, then Redis.  0, or -1 with ERRSTR;
 * *REFUSED tells a refusal of the task's state (claimed meanwhile) from
 * a failure. */
/* One batch's transaction: the state under a shared lock, the INSERT,
 * the audit row.  1: refused (the task is no longer scheduled). */
static int import_batch_txn(import_job *j, size_t n, uint64_t *affected, char *errstr,
                            size_t errlen)
{
    unsigned errnum = 0;
    int rc;

    if (hr_mysql_begin(j->m, errstr, errlen) < 0)
        return -1;
    rc = import_check_task(j->m, j->task, true, errstr, errlen);
    if (rc == 0 && hr_mysql_exec(j->m, j->sql, j->params, IMPORT_ROW_PARAMS * n, affected, NULL,
                                 &errnum, errstr, errlen) < 0)
        rc = errnum == HR_MYSQL_ER_SIGNAL ? 1 : -1;
    /* Each batch's audit row in its transaction: the counts, not the ids. */
    if (rc == 0) {
        cJSON *after = cJSON_CreateObject();

        cJSON_AddNumberToObject(after, "received", (double)n);
        cJSON_AddNumberToObject(after, "added", (double)*affected);
        if (ctl_audit(j->ctx, j->m, NULL, j->task, NULL, NULL, after) != 0) {
            snprintf(errstr, errlen, "the batch's audit row was not written");
            rc = -1;
        }
        cJSON_Delete(after);
    }
    if (rc == 0 && hr_mysql_commit(j->m, errstr, errlen) < 0)
        rc = -1;
    if (rc != 0)
        hr_mysql_rollback(j->m);
    return rc;
}

static int import_batch(import_job *j, const int64_t *uids, size_t n, bool *refused, char *errstr,
                        size_t errlen)
{
    uint64_t affected = 0;
    int rc;

    if (import_sql(j, n) < 0) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        j->params[IMPORT_ROW_PARAMS * i] = HR_P_I64(j->task);
        j->params[IMPORT_ROW_PARAMS * i + 1] = HR_P_I64(uids[i]);
        j->params[IMPORT_ROW_PARAMS * i + 2] = j->lead_s >= 0 ? HR_P_I64(j->lead_s) : HR_P_NULL;
    }
    /* The shared lock on the task row meets a dispatcher claiming it (or
     * the API changing it) in an order InnoDB may resolve by rolling this
     * batch back: the server's "try restarting transaction" is taken
     * literally, and the state check in the retry sees the claim. */
    rc = import_batch_txn(j, n, &affected, errstr, errlen);
    for (int k = 0; rc < 0 && hr_mysql_deadlocked(j->m) && k < HR_MYSQL_DEADLOCK_RETRIES; k++)
        rc = import_batch_txn(j, n, &affected, errstr, errlen);
    if (rc != 0) {
        *refused = rc > 0;
        return -1;
    }
    j->added += affected;
    if (import_sadd_finish(j, errstr, errlen) < 0)
        return -1;
    return import_sadd_send(j, uids, n, errstr, errlen);
}

static void import_progress(size_t done, size_t total, int64_t elapsed_ms)
{
    char bar[IMPORT_BAR_WIDTH + 3], d[32], t[32], rate[32], eta[32];
    double per_s = elapsed_ms > 0 ? done * 1000.0 / elapsed_ms : 0;

    fprintf(stderr, "\r%s %3d%%  %s/%s ids  %s ids/s  ETA %s\033[K",
            ctl_fmt_bar(total ? (double)done / total : 1, IMPORT_BAR_WIDTH, bar, sizeof bar),
            total ? (int)(done * 100 / total) : 100, ctl_fmt_count((int64_t)done, d, sizeof d),
            ctl_fmt_count((int64_t)total, t, sizeof t),
            ctl_fmt_count((int64_t)per_s, rate, sizeof rate),
            ctl_fmt_eta(per_s > 0 ? (total - done) / per_s : -1, eta, sizeof eta));
}

static int import_job_init(import_job *j)
{
    j->params = malloc(IMPORT_ROW_PARAMS * IMPORT_BATCH * sizeof *j->params);
    j->argv = malloc((3 + IMPORT_BATCH) * sizeof *j->argv);
    j->uids = malloc(IMPORT_BATCH * sizeof *j->uids);
    j->bounds = malloc(((size_t)j->shards + 1) * sizeof *j->bounds);
    j->txt = malloc((size_t)IMPORT_BATCH * IMPORT_UID_LEN);
    j->pipe = hr_pipe_new(j->r);
    if (!j->params || !j->argv || !j->uids || !j->bounds || !j->txt || !j->pipe)
        return -1;
    return 0;
}

static void import_job_release(import_job *j)
{
    free(j->sql);
    free(j->params);
    free(j->argv);
    free(j->uids);
    free(j->bounds);
    free(j->txt);
    hr_pipe_free(j->pipe);
}

static const struct option import_options[] = {
    {"lead", required_argument, NULL, 'l'},
    {NULL, 0, NULL, 0},
};

/* --lead's checks against the task (hr_task_lead_check): 0, or -1 with
 * ERRSTR. */
static int import_check_lead(import_job *j, char *errstr, size_t errlen)
{
    hr_task *t = NULL;
    int rc;

    if (j->lead_s < 0)
        return 0;
    rc = hr_task_load(j->m, j->task, &t, errstr, errlen);
    if (rc == 1)
        snprintf(errstr, errlen, "task %" PRId64 " does not exist", j->task);
    if (rc == 0)
        rc = hr_task_lead_check(t, j->lead_s, errstr, errlen);
    hr_task_free(t);
    return rc == 0 ? 0 : -1;
}

int ctl_cmd_import(ctl_ctx *ctx, int argc, char **argv)
{
    import_job j = {.lead_s = -1};
    ctl_uids ids = {0};
    char errstr[1024], n1[32], n2[32], n3[32], n4[32];
    int64_t start = hr_clock_mono_ms(), last_draw = 0, elapsed;
    bool tty = isatty(STDERR_FILENO), refused = false;
    size_t done = 0;
    int rc = CTL_EXIT_FAIL, opt;
    int64_t lead_ms;

    optind = 0;
    while ((opt = getopt_long(argc, argv, ":", import_options, NULL)) != -1) {
        if (opt != 'l')
            return ctl_usage(ctx, "unknown or incomplete option '%s'", argv[optind - 1]);
        if (ctl_fmt_parse_duration("--lead", optarg, &lead_ms, errstr, sizeof errstr) < 0)
            return ctl_usage(ctx, "%s", errstr);
        if (lead_ms % 1000 != 0 || lead_ms / 1000 > INT32_MAX)
            return ctl_usage(ctx, "--lead %s: whole seconds, at most %d", optarg, INT32_MAX);
        j.lead_s = lead_ms / 1000;
    }
    argc -= optind - 1;
    argv += optind - 1;
    if (argc < 3)
        return ctl_usage(ctx, "TASK and FILE (or -) are required");
    if (argc > 3)
        return ctl_usage(ctx, "unexpected argument \"%s\"", argv[3]);
    if (ctl_fmt_parse_int("TASK", argv[1], 1, INT64_MAX, &j.task, errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "%s", errstr);
    j.ctx = ctx;
    if (ctl_mysql(ctx, &j.m) < 0 || ctl_redis(ctx, &j.r) < 0)
        return CTL_EXIT_FAIL;
    /* Refuse early: no point reading a million lines for a task that is gone. */
    if (import_check_task(j.m, j.task, false, errstr, sizeof errstr) != 0 ||
        import_check_lead(&j, errstr, sizeof errstr) < 0)
        return ctl_fail("import: %s", errstr);
    if (hr_shard_load(j.m, j.task, &j.shards, errstr, sizeof errstr) < 0)
        return ctl_fail("import: %s", errstr);
    if (ctl_uids_read(argv[2], &ids, errstr, sizeof errstr) < 0) {
        ctl_fail("import: %s (nothing imported)", errstr);
        goto done;
    }
    if (import_job_init(&j) < 0) {
        ctl_fail("import: out of memory");
        goto done;
    }
    while (done < ids.n) {
        size_t n = ids.n - done < IMPORT_BATCH ? ids.n - done : IMPORT_BATCH;
        if (import_batch(&j, ids.v + done, n, &refused, errstr, sizeof errstr) < 0) {
            if (tty)
                fputs("\r\033[K", stderr);
            if (refused)
                ctl_fail("import into task %" PRId64 ": %s.  The first %s ids were imported and "
                         "will be pushed; the other %s were refused (ids #%zu to #%zu of the "
                         "input, the first refused being %" PRId64 ")",
                         j.task, errstr, ctl_fmt_count((int64_t)done, n1, sizeof n1),
                         ctl_fmt_count((int64_t)(ids.n - done), n2, sizeof n2), done + 1, ids.n,
                         ids.v[done]);
            else
                ctl_fail("import into task %" PRId64 " stopped after %s of %s ids: %s (run it "
                         "again once fixed: importing is idempotent)",
                         j.task, ctl_fmt_count((int64_t)done, n1, sizeof n1),
                         ctl_fmt_count((int64_t)ids.n, n2, sizeof n2), errstr);
            goto done;
        }
        done += n;
        if (tty && hr_clock_mono_ms() - last_draw >= IMPORT_PROGRESS_MS) {
            last_draw = hr_clock_mono_ms();
            import_progress(done, ids.n, last_draw - start);
        }
    }
    if (import_sadd_finish(&j, errstr, sizeof errstr) < 0) {
        ctl_fail("import into task %" PRId64 ": every id is in MySQL but the last Redis batch "
                 "failed: %s (run it again: importing is idempotent)",
                 j.task, errstr);
        goto done;
    }
    if (tty)
        fputs("\r\033[K", stderr);
    elapsed = hr_clock_mono_ms() - start;
    printf("imported %s ids into task %" PRId64 " in %.1f s (%s ids/s; %s new, %s duplicates)\n",
           ctl_fmt_count((int64_t)ids.n, n1, sizeof n1), j.task, elapsed / 1000.0,
           ctl_fmt_count(elapsed > 0 ? (int64_t)(ids.n * 1000.0 / elapsed) : (int64_t)ids.n, n2,
                         sizeof n2),
           ctl_fmt_count((int64_t)j.added, n3, sizeof n3),
           ctl_fmt_count((int64_t)(ids.n - j.added), n4, sizeof n4));
    rc = CTL_EXIT_OK;
done:
    import_job_release(&j);
    hr_vec_free(&ids);
    return rc;
}
