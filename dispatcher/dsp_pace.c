/* dsp_pace: admission control, and what it knows of finish-by pacing
 * (docs/scheduling.md); the arithmetic is common/hr_pace.c.
 *
 * Pacing: a task with a finish_by has its rate derived at every grant by
 * the limiter's script (common/lua/ratelimit.lua through
 * hr_ratelimit_take_paced), at the owner's chunking (dsp_chunk.c) and at
 * every worker's pushes alike, from what is left (recipients not chunked
 * + chunked and not settled) and the time left, capped by its effective
 * rate_limit; so a plan that lags (a slow provider, a restart) corrects
 * itself, and the workers keep pacing the last chunks after the owner let
 * the task go.  The rate in force is in the stats hash (`planned_rate`,
 * for the API) and, summed over the owned tasks, in herald_paced_rate
 * (dsp_owned_gauges).
 *
 * Admission (API threads and the background scan, each with its own
 * connections): the estimate of hr_pace_estimate_run from the task's size
 * (its subscriber set in Redis plus what it published and did not settle),
 * its channel's budget (the lower of rate_limit and the configured
 * `throughput`) and the other unfinished tasks of the channel due within
 * the hour before or HR_PACE_WINDOW_MS after it, sized alike; its text goes
 * to push_task.last_warning when it changed, and the first warning of a
 * task is counted in herald_task_warnings_total{kind}.  A warning never holds the task.
 *
 * Sizes read once per scan (dsp_pace_memo): the scanner estimates a page
 * of tasks in a row, and each estimate sized up to 64 tasks of the same
 * channel, mostly the same ones: with 1,500 small tasks due together that
 * was 65 SCARDs an estimate, 13,680 of them in the second after due alone.
 * The scan's memo keeps each task's subscriber count (every shard's SCARD
 * summed) from the first estimate that read it, so one scan SCARDs a set
 * once; it lives for one scan's admissions (DSP_ADMIT_BUDGET_MS), so a
 * count is at most that old, and the next scan reads it again (a set that
 * grew meanwhile is estimated as the API's or the next scan's estimate
 * sees it).  The API's estimates (one task each, on their own threads)
 * read every size themselves, as before.
 *
 * The channel's tasks read once per scan too: each estimate selected its
 * 63 neighbours with a SELECT that, with 1,500 tasks of a channel due
 * together, read and sorted all 1,500 rows (3.6 ms of query time), and
 * every task is estimated again every DSP_RECHECK_MS on every dispatcher:
 * O(tasks^2) a channel, the scans' whole budget.  The memo reads a
 * channel's rows in the scan's window (its tasks' due times, less the
 * lookback, plus the window) with its first estimate on that channel, at
 * most DSP_PACE_CHANNEL_ROWS of them (a channel with more is read per
 * estimate, as before), and each estimate picks its neighbours from them
 * (hr_pace_neighbours, the same rows its own SELECT reads). */
#include "dsp_pace.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_keys.h"
#include "hr_log.h"
#include "hr_pace.h"
#include "hr_pipe.h"

/* The channel's budget for the estimate: the lower of its rate_limit and
 * its measured throughput (0 = unlimited). */
static int64_t dsp_pace_capacity(const hr_channel *ch)
{
    int64_t limit = ch->rate_limit, tp = ch->throughput;

    if (limit > 0 && tp > 0)
        return limit < tp ? limit : tp;
    return limit > 0 ? limit : tp;
}

/* A scan's memo: task id -> its subscriber sets' size, open addressing
 * (ids are > 0; 0 marks a free slot).  Full at DSP_PACE_MEMO_FULL entries:
 * further sizes are read and not kept. */
#define DSP_PACE_MEMO_SLOTS 8192 /* a power of two */
#define DSP_PACE_MEMO_FULL (DSP_PACE_MEMO_SLOTS / 4 * 3)

/* Channels a memo reads whole, and the rows it keeps of one (a channel
 * with more, or a channel past the first DSP_PACE_CHANNELS, is read per
 * estimate). */
#define DSP_PACE_CHANNELS 16
#define DSP_PACE_CHANNEL_ROWS 16384 /* about 1 MiB */

/* A channel's rows in the memo's window, the latest due first; ROWS NULL
 * when it had too many. */
typedef struct dsp_pace_channel {
    char *name;
    hr_pace_row *rows;
    size_t n;
} dsp_pace_channel;

struct dsp_pace_memo {
    int64_t ids[DSP_PACE_MEMO_SLOTS];
    int64_t sizes[DSP_PACE_MEMO_SLOTS];
    size_t n;
    int64_t first_due_ms, last_due_ms; /* the tasks the channels' rows serve */
    dsp_pace_channel channels[DSP_PACE_CHANNELS];
    size_t nchannels;
};

dsp_pace_memo *dsp_pace_memo_new(int64_t first_due_ms, int64_t last_due_ms)
{
    dsp_pace_memo *memo = calloc(1, sizeof(dsp_pace_memo));

    if (memo != NULL) {
        memo->first_due_ms = first_due_ms;
        memo->last_due_ms = last_due_ms;
    }
    return memo;
}

void dsp_pace_memo_free(dsp_pace_memo *memo)
{
    if (memo == NULL)
        return;
    for (size_t i = 0; i < memo->nchannels; i++) {
        free(memo->channels[i].name);
        free(memo->channels[i].rows);
    }
    free(memo);
}

/* The slot of ID in MEMO: its own, or the free one it would take. */
static size_t dsp_pace_memo_slot(const dsp_pace_memo *memo, int64_t id)
{
    size_t at = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15u >> 51) & (DSP_PACE_MEMO_SLOTS - 1);

    while (memo->ids[at] != 0 && memo->ids[at] != id)
        at = (at + 1) & (DSP_PACE_MEMO_SLOTS - 1);
    return at;
}

/* Sizes LOADS[0..N) of tasks IDS (of SHARDS shards each): the recipients
 * not chunked yet (SCARD subs of every shard, which the API fills at once
 * and the scanner's prepare before due) plus what each already had
 * (published and not settled: the load's size as the caller set it).
 * O(shards) per task on Redis, where a COUNT of push_subscription would
 * read every row of a large campaign; the tasks MEMO (NULL = none) knows
 * are not read again, the others are read in one round trip and kept
 * there.  0, or -1. */
static int dsp_pace_sizes(hr_redis *r, dsp_pace_memo *memo, const int64_t *ids, const int *shards,
                          hr_pace_load *loads, size_t n, char *errstr, size_t errlen)
{
    hr_pipe *pipe = hr_pipe_new(r);
    char key[HR_KEY_MAX];
    bool read[HR_PACE_MAX_LOADS] = {false};
    size_t at = 0, nread = 0;
    int rc = -1;

    if (pipe == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        size_t slot = memo != NULL ? dsp_pace_memo_slot(memo, ids[i]) : 0;

        if (memo != NULL && memo->ids[slot] == ids[i]) {
            loads[i].size += memo->sizes[slot];
            continue;
        }
        read[i] = true;
        nread++;
        for (int k = 0; k < (shards[i] > 1 ? shards[i] : 1); k++) {
            const char *argv[] = {"SCARD", key};

            hr_key_shard(hr_redis_prefix(r), key, sizeof key, ids[i], k, HR_KEY_SUBS);
            if (hr_pipe_cmd(pipe, 2, argv, NULL) != 0) {
                snprintf(errstr, errlen, "out of memory");
                goto done;
            }
        }
    }
    if (nread > 0 && hr_pipe_exec(pipe, errstr, errlen) < 0)
        goto done;
    for (size_t i = 0; i < n; i++) {
        int64_t size = 0;
        size_t slot;

        if (!read[i])
            continue;
        for (int k = 0; k < (shards[i] > 1 ? shards[i] : 1); k++) {
            redisReply *reply = hr_pipe_reply(pipe, at++, errstr, errlen);

            if (reply == NULL)
                goto done;
            if (reply->type == REDIS_REPLY_INTEGER)
                size += reply->integer;
            freeReplyObject(reply);
        }
        loads[i].size += size;
        if (memo == NULL || memo->n >= DSP_PACE_MEMO_FULL)
            continue;
        slot = dsp_pace_memo_slot(memo, ids[i]);
        if (memo->ids[slot] == 0) { /* an id twice in IDS is kept once */
            memo->ids[slot] = ids[i];
            memo->sizes[slot] = size;
            memo->n++;
        }
    }
    rc = 0;
done:
    hr_pipe_free(pipe);
    return rc;
}

/* Reads into ROWS (room for MAX) the unfinished tasks of CHANNEL but
 * EXCLUDE (0: none) that may share a budget with tasks due from FIRST_MS
 * to LAST_MS: due by a window after LAST_MS, and a scheduled one not
 * before the lookback before FIRST_MS; the latest due first, their
 * recipients published and not settled in MySQL's counters.  The count
 * (MAX when there were more), or -1. */
static int dsp_pace_read(hr_mysql *m, const char *channel, int64_t exclude, int64_t first_ms,
                         int64_t last_ms, hr_pace_row *rows, size_t max, char *errstr,
                         size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(channel), HR_P_I64(exclude),
                                HR_P_I64(last_ms + HR_PACE_WINDOW_MS),
                                HR_P_I64(first_ms - HR_PACE_LOOKBACK_MS), HR_P_I64((int64_t)max)};
    hr_mysql_rows *res = NULL;
    size_t n = 0;

    if (hr_mysql_query(m, DSP_PACE_READ_SQL, p, 5, &res, errstr, errlen) < 0)
        return -1;
    for (size_t i = 0; i < res->nrows && n < max; i++, n++) {
        hr_pace_row *row = &rows[n];
        hr_priority prio;

        row->id = strtoll(hr_mysql_cell(res, i, 0), NULL, 10);
        row->load.due_ms = strtoll(hr_mysql_cell(res, i, 1), NULL, 10);
        row->load.size = strtoll(hr_mysql_cell(res, i, 2), NULL, 10);
        row->load.cap = strtoll(hr_mysql_cell(res, i, 3), NULL, 10);
        (void)hr_priority_parse(hr_mysql_cell(res, i, 4), &prio);
        row->load.weight = hr_pace_weight(prio);
        row->finish_ms = strtoll(hr_mysql_cell(res, i, 5), NULL, 10);
        row->shards = atoi(hr_mysql_cell(res, i, 6));
        row->scheduled = atoi(hr_mysql_cell(res, i, 7)) != 0;
    }
    hr_mysql_rows_free(res);
    return (int)n;
}

/* MEMO's rows of channel NAME, read with its first estimate there; NULL
 * when they are not kept (too many, too many channels, out of memory: the
 * estimate reads its own).  *FAILED on a MySQL error. */
static const dsp_pace_channel *dsp_pace_memo_channel(dsp_pace_memo *memo, hr_mysql *m,
                                                     const char *name, bool *failed, char *errstr,
                                                     size_t errlen)
{
    dsp_pace_channel *c;
    int n;

    *failed = false;
    for (size_t i = 0; i < memo->nchannels; i++)
        if (strcmp(memo->channels[i].name, name) == 0)
            return memo->channels[i].rows != NULL ? &memo->channels[i] : NULL;
    if (memo->nchannels == DSP_PACE_CHANNELS)
        return NULL;
    c = &memo->channels[memo->nchannels];
    /* One row more than kept: a channel that fills it has more. */
    if ((c->name = strdup(name)) == NULL ||
        (c->rows = malloc((DSP_PACE_CHANNEL_ROWS + 1) * sizeof *c->rows)) == NULL) {
        free(c->name);
        c->name = NULL;
        return NULL;
    }
    memo->nchannels++;
    n = dsp_pace_read(m, name, 0, memo->first_due_ms, memo->last_due_ms, c->rows,
                      DSP_PACE_CHANNEL_ROWS + 1, errstr, errlen);
    if (n < 0 || n > DSP_PACE_CHANNEL_ROWS) {
        /* Not kept: a failure is this estimate's, the next one reads its own. */
        *failed = n < 0;
        free(c->rows);
        c->rows = NULL;
        return NULL;
    }
    c->n = (size_t)n;
    return c;
}

/* Loads [1..] of the estimate of T, their ids, shards and finish_by (-1 =
 * none): the channel's other unfinished tasks sharing its budget, at most
 * MAX (< HR_PACE_MAX_LOADS; hr_pace_neighbours), from MEMO's rows of the
 * channel when it keeps them, else read for T alone.  The count, or -1. */
static int dsp_pace_others(hr_mysql *m, dsp_pace_memo *memo, const hr_task *t, int64_t *ids,
                           int *shards, int64_t *finish, hr_pace_load *loads, size_t max,
                           char *errstr, size_t errlen)
{
    hr_pace_row own[HR_PACE_MAX_LOADS];
    const hr_pace_row *rows = own;
    const dsp_pace_channel *c = NULL;
    size_t pick[HR_PACE_MAX_LOADS], n;
    bool failed = false;
    int nrows;

    if (memo != NULL && t->due_ms >= memo->first_due_ms && t->due_ms <= memo->last_due_ms)
        c = dsp_pace_memo_channel(memo, m, t->channel, &failed, errstr, errlen);
    if (failed)
        return -1;
    if (c != NULL) {
        rows = c->rows;
        nrows = (int)c->n;
    } else if ((nrows = dsp_pace_read(m, t->channel, t->id, t->due_ms, t->due_ms, own, max, errstr,
                                      errlen)) < 0) {
        return -1;
    }
    n = hr_pace_neighbours(rows, (size_t)nrows, t->id, t->due_ms, pick, max);
    for (size_t i = 0; i < n; i++) {
        ids[i] = rows[pick[i]].id;
        loads[i] = rows[pick[i]].load;
        finish[i] = rows[pick[i]].finish_ms;
        shards[i] = rows[pick[i]].shards;
    }
    return (int)n;
}

int dsp_pace_admit(dsp *d, hr_mysql *m, hr_redis *r, dsp_pace_memo *memo, const hr_task *t,
                   int64_t now, char *errstr, size_t errlen)
{
    const hr_channel *ch = hr_config_channel(d->cfg, t->channel);
    int64_t capacity = ch != NULL ? dsp_pace_capacity(ch) : 0;
    hr_pace_load loads[HR_PACE_MAX_LOADS];
    int64_t ids[HR_PACE_MAX_LOADS], finish[HR_PACE_MAX_LOADS];
    int shards[HR_PACE_MAX_LOADS];
    hr_pace_estimate e;
    char text[1000];
    uint64_t changed = 0;
    unsigned kinds;
    int n;

    if (ch == NULL || t->due_ms < 0)
        return 0; /* hr_task_validate refuses it */
    ids[0] = t->id;
    shards[0] = (int)t->shards;
    finish[0] = -1; /* its own finish_by is what the estimate is checked against */
    loads[0] = (hr_pace_load){.due_ms = t->due_ms,
                              .size = t->total - t->sent - t->failed - t->throttled - t->pulled -
                                      t->cancelled - t->unregistered - t->expired - t->opted_out -
                                      t->suppressed,
                              .cap = t->rate_limit,
                              .weight = hr_pace_weight(t->priority)};
    n = dsp_pace_others(m, memo, t, ids + 1, shards + 1, finish + 1, loads + 1,
                        HR_PACE_MAX_LOADS - 1, errstr, errlen);
    if (n < 0 || dsp_pace_sizes(r, memo, ids, shards, loads, (size_t)n + 1, errstr, errlen) < 0)
        return -1;
    for (int i = 0; i <= n; i++) {
        if (loads[i].size < 0)
            loads[i].size = 0;
        if (loads[i].due_ms < now)
            loads[i].due_ms = now; /* overdue or running: it takes its share from now */
        if (finish[i] > 0)         /* a paced task wants no more than its plan */
            loads[i].cap = hr_pace_rate(loads[i].size, loads[i].due_ms, finish[i], loads[i].cap);
    }
    hr_pace_estimate_run(loads, (size_t)n + 1, capacity, &e);
    kinds = hr_pace_warning(&e, ch->name, capacity, t->finish_ms, t->expire_ms, text, sizeof text);
    /* Unchanged (as T was read): no statement, no row lock.  Changed: a
     * short lock wait, as the claim's: an admin's transaction still
     * inserting the task's subscriptions holds the row, and the scan must
     * not stall behind it (the next estimate writes it). */
    if (kinds != 0 ? t->last_warning != NULL && strcmp(t->last_warning, text) == 0
                   : t->last_warning == NULL)
        return 0;
    {
        const hr_mysql_param p[] = {kinds ? HR_P_STR(text) : HR_P_NULL, HR_P_I64(t->id),
                                    kinds ? HR_P_STR(text) : HR_P_NULL};
        unsigned errnum = 0;

        if (hr_mysql_exec(m,
                          "SET STATEMENT innodb_lock_wait_timeout = 1 FOR "
                          "UPDATE push_task SET last_warning = ? "
                          "WHERE id = ? AND NOT (last_warning <=> ?)",
                          p, 3, &changed, NULL, &errnum, errstr, errlen) < 0)
            return errnum == HR_MYSQL_ER_LOCK_WAIT_TIMEOUT ? 0 : -1;
    }
    /* Counted once per task that had none: a warning whose estimate moved
     * (another task came, a PATCH) is rewritten, not counted again. */
    if (changed > 0 && kinds != 0 && t->last_warning == NULL) {
        for (int k = 0; k < HR_PACE__WARN_KINDS; k++)
            if (kinds & (1u << k))
                hr_metrics_inc(d->met.task_warnings[k]);
        hr_log_warn("task_warning", "task=%" PRId64 " warning=%s", t->id, text);
    }
    return 0;
}
