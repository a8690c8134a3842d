/* hr_subs_batch: the batched sync of claimed tasks (see hr_subs_batch.h):
 * each step of hr_subs_sync done for every item of the batch in one round
 * trip, an item that cannot follow the batch handed to hr_subs_sync. */
#include "hr_subs_batch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_batch.h"
#include "hr_keys.h"
#include "hr_pipe.h"
#include "hr_subs_int.h"

/* What hr_subs_sync_claimed knows of one item between its steps. */
typedef struct hr_subs_at {
    bool locked;        /* we took its prepare lock: released at the end */
    bool alone;         /* synced by hr_subs_sync on its own */
    int64_t from, upto; /* the epochs it reads, [from, upto) */
    int64_t want;       /* rows of those epochs (the batch's count) */
    bool paged;         /* too many rows for the batch's read: its own pages */
    size_t row, nrows;  /* its rows in the batch's read */
} hr_subs_at;

/* The items of one batch and their steps (hr_subs_sync_claimed). */
typedef struct hr_subs_batch {
    hr_subs_item *items;
    hr_subs_at *at;
    size_t n;
} hr_subs_batch;

/* Gives item I its outcome RC (with ERR when RC is -1). */
static void hr_subs_item_end(hr_subs_batch *b, size_t i, int rc, const char *err)
{
    b->items[i].result = rc;
    if (rc < 0)
        snprintf(b->items[i].err, sizeof b->items[i].err, "%s", err);
}

/* Whether item I still waits for its outcome and does not sync alone. */
static bool hr_subs_open(const hr_subs_batch *b, size_t i)
{
    return b->items[i].result == HR_SUBS_DONE && !b->at[i].alone;
}

/* Every open item fails with ERR (a round trip of the whole batch failed). */
static void hr_subs_fail_open(hr_subs_batch *b, const char *err)
{
    for (size_t i = 0; i < b->n; i++)
        if (hr_subs_open(b, i))
            hr_subs_item_end(b, i, -1, err);
}

/* Step 1, one round trip: each prepare lock (SET NX) and the synced mark
 * behind it.  A lock found held (a retried SET of ours, or another party)
 * makes the item sync alone, which tells the two apart. */
static int hr_subs_b_lock(hr_redis *r, hr_pipe *pipe, hr_subs_batch *b,
                          const hr_subs_refill_opts *o, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX], ms[24];
    size_t i;

    snprintf(ms, sizeof ms, "%d", o->lock_ms);
    for (i = 0; i < b->n; i++) {
        const char *set[] = {"SET", key, o->token, "NX", "PX", ms}, *get[] = {"GET", key};

        hr_key_task(hr_redis_prefix(r), key, sizeof key, b->items[i].id, HR_KEY_PREP);
        if (hr_pipe_cmd(pipe, 6, set, NULL) < 0)
            goto oom;
        hr_key_task(hr_redis_prefix(r), key, sizeof key, b->items[i].id, HR_KEY_SYNCED);
        if (hr_pipe_cmd(pipe, 2, get, NULL) < 0)
            goto oom;
    }
    if (hr_pipe_exec(pipe, errstr, errlen) < 0)
        return -1;
    for (i = 0; i < b->n; i++) {
        redisReply *lock = hr_pipe_reply(pipe, 2 * i, errstr, errlen);
        redisReply *synced = lock != NULL ? hr_pipe_reply(pipe, 2 * i + 1, errstr, errlen) : NULL;

        if (lock == NULL || synced == NULL) {
            freeReplyObject(lock);
            return -1;
        }
        b->at[i].locked = lock->type == REDIS_REPLY_STATUS;
        b->at[i].alone = !b->at[i].locked;
        b->at[i].from = synced->type == REDIS_REPLY_STRING ? strtoll(synced->str, NULL, 10) : 0;
        if (b->at[i].from < 0)
            b->at[i].from = 0;
        freeReplyObject(lock);
        freeReplyObject(synced);
    }
    return 0;
oom:
    snprintf(errstr, errlen, "out of memory");
    return -1;
}

/* Step 2's answer for one task row: its epoch, shards and the rows to
 * read.  Batch row I is item AT[I]. */
typedef struct hr_subs_epochs {
    hr_subs_batch *b;
    const size_t *at;
    bool *found;
} hr_subs_epochs;

static bool hr_subs_epochs_row(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row)
{
    hr_subs_epochs *e = ctx;
    hr_subs_at *at = &e->b->at[e->at[i]];

    e->found[e->at[i]] = true;
    /* After the claim no row can be added: everything up to the current
     * epoch is read. */
    at->upto = strtoll(hr_mysql_cell(rows, row, 1), NULL, 10) + 1;
    at->want = strtoll(hr_mysql_cell(rows, row, 3), NULL, 10);
    /* A task of several shards splits its rows by shard, an occurrence of
     * a series takes the series' subscribers too: hr_subs_sync. */
    if (atoi(hr_mysql_cell(rows, row, 2)) > 1 || atoi(hr_mysql_cell(rows, row, 4)) == 1)
        at->alone = true;
    return true;
}

/* Step 2, one statement: every open item's subs_epoch and shards, and how
 * many subscriptions its epochs hold.  A task without a row was deleted:
 * HR_SUBS_CLAIMED, as hr_subs_sync answers.  The count's epoch bounds come
 * from the outer rows, which MariaDB cannot use as a range: it reads every
 * subscription of the task (200,000 index entries, 50-100 ms at a 200,000
 * task's claim, between its due time and its first chunk).  So the task's
 * newest epoch is looked up first (the (task_id, epoch) index's last entry,
 * one read), and the count runs only when an epoch from the mark on holds
 * a row: at a claim after the scanner's syncs, none does. */
static int hr_subs_b_epochs(hr_mysql *m, hr_subs_batch *b, char *errstr, size_t errlen)
{
    int64_t *cells = calloc(b->n * 2, sizeof *cells);
    size_t *at = calloc(b->n, sizeof *at);
    bool *found = calloc(b->n, sizeof *found);
    size_t i, k = 0;
    int rc = -1;

    if (cells == NULL || at == NULL || found == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (i = 0; i < b->n; i++)
        if (hr_subs_open(b, i)) {
            at[k] = i;
            cells[2 * k] = b->items[i].id;
            cells[2 * k++ + 1] = b->at[i].from;
        }
    if (k > 0 &&
        hr_batch_select(m,
                        "SELECT t.id, t.subs_epoch, t.shards, IF((SELECT s.epoch FROM "
                        "push_subscription s FORCE INDEX (push_subscription_epoch) "
                        "WHERE s.task_id = t.id ORDER BY s.epoch DESC LIMIT 1) >= j.sfrom, "
                        "(SELECT COUNT(*) FROM push_subscription s WHERE s.task_id = t.id "
                        "AND s.epoch >= j.sfrom AND s.epoch <= t.subs_epoch), 0), "
                        "t.series_id IS NOT NULL FROM "
                        "JSON_TABLE(?, '$[*]' COLUMNS "
                        "(task BIGINT PATH '$[0]', sfrom BIGINT PATH '$[1]')) j "
                        "STRAIGHT_JOIN push_task t FORCE INDEX (PRIMARY) ON t.id = j.task",
                        &(hr_batch){cells, k, 2}, NULL, 0, 1, hr_subs_epochs_row,
                        &(hr_subs_epochs){b, at, found}, errstr, errlen) < 0)
        goto done;
    for (i = 0; i < k; i++)
        if (!found[at[i]])
            hr_subs_item_end(b, at[i], HR_SUBS_CLAIMED, NULL);
    rc = 0;
done:
    free(cells);
    free(at);
    free(found);
    return rc;
}

/* Step 3, one statement: the rows of the open items whose epochs hold
 * any, as long as they add up to at most o->batch (the others read their
 * own pages, hr_subs_b_alone), into *ROWS, by task.  0 or -1. */
static int hr_subs_b_read(hr_mysql *m, hr_subs_batch *b, const hr_subs_refill_opts *o,
                          hr_mysql_rows **rows, char *errstr, size_t errlen)
{
    int64_t *cells = calloc(b->n * 3, sizeof *cells), sum = 0;
    size_t i, k = 0, row = 0;
    int rc = -1;

    if (cells == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (i = 0; i < b->n; i++) {
        if (!hr_subs_open(b, i) || b->at[i].want == 0)
            continue;
        if (sum + b->at[i].want > o->batch) {
            b->at[i].paged = true;
            continue;
        }
        sum += b->at[i].want;
        cells[3 * k] = b->items[i].id;
        cells[3 * k + 1] = b->at[i].from;
        cells[3 * k++ + 2] = b->at[i].upto;
    }
    if (k == 0) {
        rc = 0;
        goto done;
    }
    if (hr_batch_query(m,
                       "SELECT s.task_id, s.uid FROM JSON_TABLE(?, '$[*]' COLUMNS "
                       "(task BIGINT PATH '$[0]', sfrom BIGINT PATH '$[1]', "
                       "upto BIGINT PATH '$[2]')) j STRAIGHT_JOIN push_subscription s "
                       "ON s.task_id = j.task AND s.epoch >= j.sfrom AND s.epoch < j.upto "
                       "ORDER BY s.task_id",
                       &(hr_batch){cells, k, 3}, NULL, 0, rows, errstr, errlen) < 0)
        goto done;
    /* The items are sorted by id, the rows by task: one walk pairs them. */
    for (i = 0; i < b->n; i++) {
        while (row < (*rows)->nrows &&
               strtoll(hr_mysql_cell(*rows, row, 0), NULL, 10) < b->items[i].id)
            row++;
        b->at[i].row = row;
        while (row < (*rows)->nrows &&
               strtoll(hr_mysql_cell(*rows, row, 0), NULL, 10) == b->items[i].id)
            row++;
        b->at[i].nrows = row - b->at[i].row;
    }
    rc = 0;
done:
    free(cells);
    return rc;
}

/* Steps 4 and 5, a round trip each: the items with rows read renew their
 * lock (the read may have taken long: the lock must still be ours before
 * anything is added under it), then refill_add.lua adds their rows.  0,
 * or -1 when a round trip failed (the open items fail). */
static int hr_subs_b_add(hr_redis *r, hr_pipe *pipe, hr_subs_batch *b, const hr_subs_refill_opts *o,
                         const hr_mysql_rows *rows, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(r);
    char keys[3][HR_KEY_MAX], ms[24];
    const char **argv = NULL;
    size_t i, at = 0, most = 0;
    int rc = -1;

    snprintf(ms, sizeof ms, "%d", o->lock_ms);
    hr_pipe_reset(pipe);
    for (i = 0; i < b->n; i++) {
        const char *renew[] = {keys[0], o->token, ms};

        if (!hr_subs_open(b, i) || b->at[i].nrows == 0)
            continue;
        most = b->at[i].nrows > most ? b->at[i].nrows : most;
        hr_key_task(prefix, keys[0], sizeof keys[0], b->items[i].id, HR_KEY_PREP);
        if (hr_pipe_eval(pipe, HR_LUA_LEASE_RENEW, 1, 3, renew, NULL) < 0)
            goto oom;
    }
    if (most == 0)
        return 0;
    if (hr_pipe_exec(pipe, errstr, errlen) < 0)
        return -1;
    for (i = 0; i < b->n; i++) {
        int64_t held;

        if (!hr_subs_open(b, i) || b->at[i].nrows == 0)
            continue;
        held = hr_subs_reply_added(hr_pipe_reply(pipe, at++, errstr, errlen));
        if (held == -2)
            hr_subs_item_end(b, i, -1, errstr);
        else if (held != 1)
            hr_subs_item_end(b, i, HR_SUBS_LOCK_LOST, NULL);
    }
    argv = malloc((most + 3) * sizeof *argv);
    if (argv == NULL)
        goto oom;
    hr_pipe_reset(pipe);
    for (i = 0; i < b->n; i++) {
        if (!hr_subs_open(b, i) || b->at[i].nrows == 0)
            continue;
        argv[0] = hr_key_shard(prefix, keys[0], sizeof keys[0], b->items[i].id, 0, HR_KEY_SUBS);
        argv[1] = hr_key_shard(prefix, keys[1], sizeof keys[1], b->items[i].id, 0, HR_KEY_PULLED);
        argv[2] = hr_key_shard(prefix, keys[2], sizeof keys[2], b->items[i].id, 0, HR_KEY_SEQ);
        for (size_t k = 0; k < b->at[i].nrows; k++)
            argv[3 + k] = hr_mysql_cell(rows, b->at[i].row + k, 1);
        if (hr_pipe_eval(pipe, HR_LUA_REFILL_ADD, 3, 3 + (int)b->at[i].nrows, argv, NULL) < 0)
            goto oom;
    }
    if (hr_pipe_count(pipe) > 0 && hr_pipe_exec(pipe, errstr, errlen) < 0)
        goto done;
    for (i = 0, at = 0; i < b->n; i++) {
        int64_t got;

        if (!hr_subs_open(b, i) || b->at[i].nrows == 0)
            continue;
        /* -1 is refill_add's "chunking started", any other failure -2. */
        got = hr_subs_reply_added(hr_pipe_reply(pipe, at++, errstr, errlen));
        b->items[i].seen = (int64_t)b->at[i].nrows;
        if (got == -2)
            hr_subs_item_end(b, i, -1, errstr);
        else if (got < 0)
            hr_subs_item_end(b, i, HR_SUBS_STARTED, NULL);
        else
            b->items[i].added = got;
    }
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    free(argv);
    return rc;
}

/* Step 6, one round trip: the open items' synced mark and seq (after
 * which nothing is added to their sets any more, and the first chunk may
 * go), then every lock we took and did not lose is released. */
static int hr_subs_b_end(hr_redis *r, hr_pipe *pipe, hr_subs_batch *b, const hr_subs_refill_opts *o,
                         char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(r);
    char key[HR_KEY_MAX], upto[24];
    size_t i, at = 0;

    hr_pipe_reset(pipe);
    for (i = 0; i < b->n; i++) {
        const char *synced[] = {"SET", key, upto}, *seq[] = {"SET", key, "0", "NX"};
        const char *release[] = {key, o->token};

        if (hr_subs_open(b, i)) {
            snprintf(upto, sizeof upto, "%" PRId64, b->at[i].upto);
            hr_key_task(prefix, key, sizeof key, b->items[i].id, HR_KEY_SYNCED);
            if (hr_pipe_cmd(pipe, 3, synced, NULL) < 0)
                goto oom;
            hr_key_shard(prefix, key, sizeof key, b->items[i].id, 0, HR_KEY_SEQ);
            if (hr_pipe_cmd(pipe, 4, seq, NULL) < 0)
                goto oom;
        }
        if (!b->at[i].locked || b->at[i].alone || b->items[i].result == HR_SUBS_LOCK_LOST)
            continue;
        hr_key_task(prefix, key, sizeof key, b->items[i].id, HR_KEY_PREP);
        if (hr_pipe_eval(pipe, HR_LUA_LEASE_RELEASE, 1, 2, release, NULL) < 0)
            goto oom;
    }
    /* A failed release expires by itself after lock_ms. */
    if (hr_pipe_exec(pipe, errstr, errlen) < 0)
        return -1;
    for (i = 0; i < b->n; i++) {
        bool open = hr_subs_open(b, i);

        for (int k = 0; open && k < 2; k++) {
            redisReply *reply = hr_pipe_reply(pipe, at++, errstr, errlen);

            if (reply == NULL)
                hr_subs_item_end(b, i, -1, errstr);
            freeReplyObject(reply);
        }
        if (b->at[i].locked && !b->at[i].alone && b->items[i].result != HR_SUBS_LOCK_LOST)
            freeReplyObject(hr_pipe_reply(pipe, at++, errstr, errlen));
    }
    return 0;
oom:
    snprintf(errstr, errlen, "out of memory");
    return -1;
}

static int hr_subs_item_cmp(const void *a, const void *b)
{
    int64_t x = ((const hr_subs_item *)a)->id, y = ((const hr_subs_item *)b)->id;

    return (x > y) - (x < y);
}

void hr_subs_sync_claimed(hr_mysql *m, hr_redis *r, hr_subs_item *items, size_t n,
                          const hr_subs_refill_opts *o)
{
    hr_subs_batch b = {.items = items, .n = n, .at = calloc(n > 0 ? n : 1, sizeof *b.at)};
    hr_pipe *pipe = hr_pipe_new(r);
    hr_mysql_rows *rows = NULL;
    char err[256];
    size_t i;

    /* By id: the batch's read answers the rows by task. */
    if (n > 0)
        qsort(items, n, sizeof *items, hr_subs_item_cmp);
    for (i = 0; i < n; i++)
        items[i] = (hr_subs_item){.id = items[i].id, .result = HR_SUBS_DONE};
    if (b.at == NULL || pipe == NULL) {
        snprintf(err, sizeof err, "out of memory");
        hr_subs_fail_open(&b, err);
        goto done;
    }
    if (hr_subs_b_lock(r, pipe, &b, o, err, sizeof err) < 0) {
        /* Which SETs ran is unknown: the locks expire by themselves. */
        hr_subs_fail_open(&b, err);
        goto done;
    }
    if (hr_subs_b_epochs(m, &b, err, sizeof err) < 0 ||
        hr_subs_b_read(m, &b, o, &rows, err, sizeof err) < 0 ||
        hr_subs_b_add(r, pipe, &b, o, rows, err, sizeof err) < 0)
        hr_subs_fail_open(&b, err);
    for (i = 0; i < n; i++) {
        hr_subs_item *it = &items[i];

        if (o->stop != NULL && atomic_load(o->stop) && hr_subs_open(&b, i))
            hr_subs_item_end(&b, i, HR_SUBS_STOPPED, NULL);
        else if (hr_subs_open(&b, i) && b.at[i].paged)
            it->result = hr_subs_fill(m, r, it->id, 1, o, HR_SUBS_EPOCHS, b.at[i].from,
                                      b.at[i].upto, &it->added, &it->seen, it->err, sizeof it->err);
    }
    if (hr_subs_b_end(r, pipe, &b, o, err, sizeof err) < 0)
        hr_subs_fail_open(&b, err);
    /* A lock found taken (ours from a retried SET, or another party's), a
     * task of several shards: the single sync, which tells and handles
     * them. */
    for (i = 0; i < n; i++)
        if (b.at[i].alone)
            items[i].result = hr_subs_sync(m, r, items[i].id, o, true, &items[i].added,
                                           &items[i].seen, items[i].err, sizeof items[i].err);
done:
    hr_mysql_rows_free(rows);
    hr_pipe_free(pipe);
    free(b.at);
}
