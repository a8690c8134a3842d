/* hr_redrive: `heraldctl redrive TASK` and POST /v1/tasks/{id}/redrive — the
 * task's dead letters (the
 * `failed` hash) go back into new chunks of at most the task's chunk_size
 * (a chunk message may not claim more than 100,000 recipients): the hash
 * is read with HSCAN, and each slice gets a new seq (INCR), then
 * redrive.lua moves its uids from the hash into chunk:<seq>, records
 * pending[seq] with a publish time older than the redelivery timeout (so
 * the next sweep publishes it) and takes them off stats.failed and
 * stats.published.  The script records its result under redrive:<seq>, so
 * the retry hr_redis makes after a lost reply answers what the first run
 * moved instead of 0.  MySQL's failed counter and total drop by the number
 * moved, and a `done` task becomes `dispatched` again so the sweeper serves
 * it.  The new chunk's first publish adds its size to total and
 * stats.published (dsp_chunk.c), which brings both back to what they were:
 * a redriven recipient is published, and counted in total, once.  Their
 * 'failed' rows of the delivery log go too (redrive_forget).  A done
 * transition (the sweeper's or a worker's reporter's) that read an empty
 * pending just before the move can still land after that UPDATE, so the
 * task also goes into the redriven set first: dispatchers reopen a done
 * task of that set while its pending hash is not empty (dispatcher/dsp_control.c).
 * A sharded task's shards are redriven one after the other, each into its
 * own new chunks, and each shard row's failed drops by what left it. */
#include "hr_redrive.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_finish.h"
#include "hr_keys.h"
#include "hr_shard.h"
#include "hr_state.h"

#define HR_REDRIVE_SCAN_COUNT 1000
#define HR_REDRIVE_SCAN_ROUNDS 1000000
#define HR_REDRIVE_LOG_BATCH 500

typedef struct hr_redrive_job {
    hr_redis *r;
    hr_mysql *m;
    int64_t id;
    int shards, shard;   /* the task's, and the one being redriven */
    int64_t shard_moved; /* moved from the current shard */
    const char *prefix;
    char keys[5][HR_KEY_MAX], seq_s[24], at_s[24];
    const char **argv; /* 5 keys, seq, at, then up to chunk_size uids */
    char **uids;       /* owned copies, argv + 7 points at them */
    size_t n, max;
    int64_t moved, chunks;
} hr_redrive_job;

/* Deletes the 'failed' delivery log rows of the collected uids: a redriven
 * recipient is not delivered any more, and recover's refill (which skips
 * what the log shows delivered) must bring it back if Redis loses its new
 * chunk.  The worker writes a new row when it settles it.  0 or -1. */
static int hr_redrive_forget(hr_redrive_job *j, char *errstr, size_t errlen)
{
    hr_mysql_param p[1 + HR_REDRIVE_LOG_BATCH];
    char sql[128 + HR_REDRIVE_LOG_BATCH * 2];
    size_t i, k, off;

    for (i = 0; i < j->n; i += k) {
        p[0] = HR_P_I64(j->id);
        off = (size_t)snprintf(sql, sizeof sql,
                               "DELETE FROM push_delivery WHERE task_id = ? "
                               "AND status = 'failed' AND uid IN (");
        for (k = 0; k < HR_REDRIVE_LOG_BATCH && i + k < j->n; k++) {
            p[1 + k] = HR_P_STR(j->uids[i + k]);
            off += (size_t)snprintf(sql + off, sizeof sql - off, k ? ",?" : "?");
        }
        snprintf(sql + off, sizeof sql - off, ")");
        if (hr_mysql_exec(j->m, sql, p, 1 + k, NULL, NULL, NULL, errstr, errlen) < 0)
            return -1;
    }
    return 0;
}

/* Moves the collected uids into a new chunk.  0 or -1 (ERR). */
static int hr_redrive_flush(hr_redrive_job *j, char *errstr, size_t errlen)
{
    redisReply *reply;
    char key[HR_KEY_MAX];
    int64_t seq;
    size_t i;
    int rc = -1;

    if (j->n == 0)
        return 0;
    /* The shard's own chunk count, striped into the task's numbers. */
    reply = hr_redis_cmdf(j->r, errstr, errlen, "INCR %s",
                          hr_key_shard(j->prefix, key, sizeof key, j->id, j->shard, HR_KEY_SEQ));
    if (reply == NULL)
        goto done;
    seq = hr_shard_seq(j->shards, j->shard, reply->integer);
    freeReplyObject(reply);
    snprintf(j->seq_s, sizeof j->seq_s, "%" PRId64, seq);
    hr_key_shard_chunk(j->prefix, j->keys[1], sizeof j->keys[1], j->id, j->shard, seq);
    hr_key_shard_redrive(j->prefix, j->keys[4], sizeof j->keys[4], j->id, j->shard, seq);
    for (i = 0; i < j->n; i++)
        j->argv[7 + i] = j->uids[i];
    reply = hr_redis_eval(j->r, HR_LUA_REDRIVE, 5, 7 + (int)j->n, j->argv, NULL, errstr, errlen);
    if (reply == NULL)
        goto done;
    if (reply->integer > 0) {
        j->moved += reply->integer;
        j->shard_moved += reply->integer;
        j->chunks++;
    }
    freeReplyObject(reply);
    if (hr_redrive_forget(j, errstr, errlen) < 0)
        goto done;
    rc = 0;
done:
    for (i = 0; i < j->n; i++)
        free(j->uids[i]);
    j->n = 0;
    return rc;
}

/* HSCAN over the current shard's hash, a slice of at most J->max uids at a
 * time. */
static int hr_redrive_all(hr_redrive_job *j, char *errstr, size_t errlen)
{
    char cursor[32] = "0";
    long rounds = 0;
    size_t i;

    hr_key_shard(j->prefix, j->keys[0], sizeof j->keys[0], j->id, j->shard, HR_KEY_FAILED);
    hr_key_shard(j->prefix, j->keys[2], sizeof j->keys[2], j->id, j->shard, HR_KEY_PENDING);
    hr_key_shard(j->prefix, j->keys[3], sizeof j->keys[3], j->id, j->shard, HR_KEY_STATS);

    do {
        redisReply *reply = hr_redis_cmdf(j->r, errstr, errlen, "HSCAN %s %s COUNT %d", j->keys[0],
                                          cursor, HR_REDRIVE_SCAN_COUNT);

        if (reply == NULL)
            return -1;
        snprintf(cursor, sizeof cursor, "%s", reply->element[0]->str);
        for (i = 0; i < reply->element[1]->elements; i += 2) {
            if ((j->uids[j->n] = strdup(reply->element[1]->element[i]->str)) == NULL) {
                snprintf(errstr, errlen, "out of memory");
                freeReplyObject(reply);
                return -1;
            }
            if (++j->n == j->max && hr_redrive_flush(j, errstr, errlen) < 0) {
                freeReplyObject(reply);
                return -1;
            }
        }
        freeReplyObject(reply);
    } while (strcmp(cursor, "0") != 0 && ++rounds < HR_REDRIVE_SCAN_ROUNDS);
    return hr_redrive_flush(j, errstr, errlen);
}

int hr_redrive(hr_mysql *m, hr_redis *r, const hr_task *t, int redelivery_timeout_s,
               hr_redrive_result *out, char *errstr, size_t errlen)
{
    hr_redrive_job j = {.r = r,
                        .m = m,
                        .id = t->id,
                        .shards = t->shards > 1 ? (int)t->shards : 1,
                        .prefix = hr_redis_prefix(r)};
    char err[512], key[HR_KEY_MAX];
    redisReply *reply;
    int64_t now;
    size_t i;
    bool failed;
    int rc = -1;

    memset(out, 0, sizeof *out);
    if (t->state != HR_STATE_DISPATCHING && t->state != HR_STATE_DISPATCHED &&
        t->state != HR_STATE_DONE) {
        snprintf(errstr, errlen,
                 "task %" PRId64 " is %s; redrive serves dispatching, dispatched and done tasks",
                 t->id, hr_state_name(t->state));
        return 1;
    }
    if (hr_redis_time_ms(r, &now, errstr, errlen) < 0)
        return -1;
    j.max = t->chunk_size >= 1 && t->chunk_size <= HR_TASK_MAX_CHUNK ? (size_t)t->chunk_size
                                                                     : HR_TASK_MAX_CHUNK;
    j.argv = malloc((7 + j.max) * sizeof *j.argv);
    j.uids = malloc(j.max * sizeof *j.uids);
    if (j.argv == NULL || j.uids == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    snprintf(j.at_s, sizeof j.at_s, "%" PRId64, now - ((int64_t)redelivery_timeout_s + 1) * 1000);
    for (i = 0; i < 5; i++)
        j.argv[i] = j.keys[i];
    j.argv[5] = j.seq_s;
    j.argv[6] = j.at_s;
    /* Each shard's dead letters into that shard's new chunks; its row's
     * failed counter drops by what moved (push_task's below). */
    failed = false;
    for (j.shard = 0; j.shard < j.shards && !failed; j.shard++) {
        j.shard_moved = 0;
        failed = hr_redrive_all(&j, err, sizeof err) < 0;
        if (j.shards > 1 && j.shard_moved > 0 &&
            hr_finish_add(m, t->id, j.shard, HR_OUTCOME_FAILED, -j.shard_moved, err, sizeof err) <
                0)
            failed = true;
    }
    out->moved = j.moved;
    out->chunks = j.chunks;
    out->last_seq = j.moved > 0 ? strtoll(j.seq_s, NULL, 10) : 0;
    if (failed)
        snprintf(errstr, errlen,
                 "redrive stopped after %" PRId64 " recipients in %" PRId64 " chunks: %s", j.moved,
                 j.chunks, err);
    if (j.moved == 0) {
        rc = failed ? -1 : 0;
        goto done;
    }
    reply = hr_redis_cmdf(r, err, sizeof err, "SADD %s %" PRId64,
                          hr_key_redriven(j.prefix, key, sizeof key), t->id);
    if (reply == NULL) {
        snprintf(errstr, errlen,
                 "%" PRId64 " recipients are in %" PRId64 " new chunks, but the task is not "
                 "marked redriven (%s): run redrive again",
                 j.moved, j.chunks, err);
        goto done;
    }
    freeReplyObject(reply);
    if (hr_state_redrive(m, t->id, j.moved, err, sizeof err) < 0) {
        snprintf(errstr, errlen,
                 "%" PRId64 " recipients are in %" PRId64 " new chunks, but MySQL was not "
                 "updated: %s",
                 j.moved, j.chunks, err);
        goto done;
    }
    /* MySQL counts what moved; a scan failure stays the answer. */
    rc = failed ? -1 : 0;
done:
    for (i = 0; i < j.n; i++)
        free(j.uids[i]);
    free(j.uids);
    free(j.argv);
    return rc;
}
