/* wk_chunk_end: a chunk's end, a job on the Redis thread (see
 * wk_chunk_end.h). */
#include "wk_chunk_end.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_finish.h"
#include "hr_log.h"
#include "hr_pipe.h"
#include "hr_shard.h"
#include "hr_vec.h"
#include "wk_chunk_acks.h"

/* ---- end ----------------------------------------------------------------------------- */

typedef struct wk_chunk_end_job {
    wk_redis_job job;
    wk_chunk *c;
    wk_chunk_ending how;
    hr_outcome outcome; /* DROP_*: what the dropped recipients count as */
    char owner[160], seq[24];
    wk_chunk_acks acks;
    wk_chunk_acked acked;
    wk_chunk_ended res;
    hr_outcomes *stats;       /* a sharded task's last chunk: every shard's (res.stats) */
    HR_VEC(uint64_t) dropped; /* DROP with the events gate on: the uids (res.dropped) */
    bool dropped_oom;
    char errstr[256];
} wk_chunk_end_job;

/* A slice of a DROP's uids (hr_finish_drop), kept for their events. */
static void wk_chunk_end_dropped(void *ctx, const uint64_t *uids, size_t n)
{
    wk_chunk_end_job *j = ctx;

    if (hr_vec_reserve(&j->dropped, j->dropped.n + n) != 0) {
        j->dropped_oom = true;
        return;
    }
    memcpy(j->dropped.v + j->dropped.n, uids, n * sizeof *uids);
    j->dropped.n += n;
}

/* CLOSE and RELEASE: the flush's calls, then the script, in the round.
 * A close drops the lease itself, also when it finds the set not empty
 * (chunk_done.lua): a lease_release.lua behind every close found nothing
 * to drop but in that rare case, one script call more per chunk (issue
 * 33: a small task is one chunk). */
static int wk_chunk_end_queue(wk_redis_job *job, hr_pipe *pipe)
{
    wk_chunk_end_job *j = (wk_chunk_end_job *)job;
    const wk_chunk *c = j->c;
    const char *close[] = {c->k_set,  c->k_lease, c->k_pending, c->k_stats,
                           c->k_subs, c->k_wait,  j->seq,       j->owner};
    const char *release[] = {c->k_lease, j->owner};

    if (wk_chunk_acks_queue(c, &j->acks, pipe) != 0)
        return -1;
    if (j->how == WK_CHUNK_CLOSE)
        return hr_pipe_eval(pipe, HR_LUA_CHUNK_DONE, 6, 8, close, NULL);
    return hr_pipe_eval(pipe, HR_LUA_LEASE_RELEASE, 1, 2, release, NULL);
}

static void wk_chunk_end_read(wk_redis_job *job, hr_pipe *pipe)
{
    wk_chunk_end_job *j = (wk_chunk_end_job *)job;
    size_t at = job->first, calls = job->count, acks = wk_chunk_acks_ncalls(&j->acks);
    redisReply *reply;

    wk_chunk_acks_read(&j->acks, pipe, &at, calls < acks ? calls : acks, &j->acked);
    calls = calls < acks ? 0 : calls - acks;
    j->res.rc = -1;
    if (calls < 1) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        return;
    }
    if (j->how == WK_CHUNK_CLOSE) {
        if (wk_chunk_counted(HR_LUA_CHUNK_DONE,
                             hr_pipe_reply(pipe, at, j->errstr, sizeof j->errstr), j->res.res, 3,
                             &j->acked.counters, j->errstr, sizeof j->errstr) != 0)
            return;
        j->acked.counters_new = true;
    } else {
        reply = hr_pipe_reply(pipe, at, j->errstr, sizeof j->errstr);
        if (reply == NULL)
            return;
        freeReplyObject(reply);
    }
    j->res.rc = 0;
}

/* DROP: the flush, then drop_set.lua (hr_finish_drop), which must not
 * count as cancelled or expired what the flush failed to acknowledge. */
static void wk_chunk_end_run(wk_redis_job *job, hr_redis *r)
{
    wk_chunk_end_job *j = (wk_chunk_end_job *)job;
    const wk_chunk *c = j->c;

    j->res.rc = -1;
    wk_chunk_acks_run(c, &j->acks, r, &j->acked);
    if (j->acked.rc != 0) {
        snprintf(j->errstr, sizeof j->errstr, "%s", j->acked.errstr);
        return;
    }
    if (hr_finish_drop(r, c->msg.task, c->msg.shard, c->msg.seq, j->outcome, j->owner,
                       c->gate != NULL ? wk_chunk_end_dropped : NULL, j, &j->res.res[0],
                       &j->res.res[1], j->errstr, sizeof j->errstr) == 0)
        j->res.rc = 0;
    if (j->dropped_oom)
        hr_log_error("events_lost", "task=%" PRId64 " seq=%" PRId64 " reason=out_of_memory",
                     c->msg.task, c->msg.seq);
    j->res.dropped = j->dropped.v;
    j->res.ndropped = j->dropped.n;
}

/* HANDBACK: the buffered acks, if Redis takes them now (what it does not
 * is pushed again by the chunk's next holder), then handback.lua (lease
 * released, the chunk stale for any sweep), then the chunk into the
 * hand-back set, which may live on another node: its failure leaves the
 * chunk to the next sweep (sweep_interval_ms) instead of the next second. */
static void wk_chunk_end_handback_run(wk_redis_job *job, hr_redis *r)
{
    wk_chunk_end_job *j = (wk_chunk_end_job *)job;
    const wk_chunk *c = j->c;
    const char *argv[] = {c->k_pending, c->k_lease, j->seq, j->owner};
    char key[HR_KEY_MAX], member[96];
    redisReply *reply;

    j->res.rc = -1;
    wk_chunk_acks_run(c, &j->acks, r, &j->acked);
    reply = hr_redis_eval(r, HR_LUA_HANDBACK, 2, 4, argv, NULL, j->errstr, sizeof j->errstr);
    if (reply == NULL)
        return;
    j->res.res[0] = reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0;
    freeReplyObject(reply);
    j->res.rc = 0;
    if (j->res.res[0] != 1)
        return;
    hr_key_handback(hr_redis_prefix(r), key, sizeof key);
    snprintf(member, sizeof member, "%" PRId64 ":%d:%" PRId64 ":%" PRId64, c->msg.task,
             wk_chunk_row(c), c->msg.seq, c->msg.due_ms);
    reply = hr_redis_cmdf(r, j->errstr, sizeof j->errstr, "SADD %s %s", key, member);
    j->res.res[1] = reply != NULL;
    freeReplyObject(reply);
}

/* The close of a sharded task's chunk, which left its shard empty: are
 * the task's other shards empty too (one pipelined round trip each for
 * pending and subs), and then every shard's stats hash (see
 * wk_chunk_ended.stats).  Leaves res[1] -1 when they could not be read. */
static void wk_chunk_end_task_left(wk_chunk_end_job *j, hr_redis *r)
{
    const wk_chunk *c = j->c;
    int shards = (int)c->task->row->shards;
    int64_t pending, subs, waiting;

    /* Not chunked yet: subs, and the recipients put off in a wait set. */
    if (hr_shard_sum(r, c->msg.task, shards, "HLEN", HR_KEY_PENDING, &pending, j->errstr,
                     sizeof j->errstr) != 0 ||
        hr_shard_sum(r, c->msg.task, shards, "SCARD", HR_KEY_SUBS, &subs, j->errstr,
                     sizeof j->errstr) != 0 ||
        hr_shard_sum(r, c->msg.task, shards, "ZCARD", HR_KEY_WAIT, &waiting, j->errstr,
                     sizeof j->errstr) != 0)
        goto unknown;
    subs += waiting;
    j->res.res[1] = pending;
    j->res.res[2] = subs;
    if (pending != 0 || subs != 0)
        return;
    if ((j->stats = calloc((size_t)shards, sizeof *j->stats)) == NULL)
        goto unknown;
    for (int k = 0; k < shards; k++)
        if (hr_finish_read_stats(r, c->msg.task, k, &j->stats[k], j->errstr, sizeof j->errstr) != 0)
            goto unknown;
    j->res.stats = j->stats;
    j->res.nstats = shards;
    return;
unknown:
    hr_log_warn("shard_counters_unread", "task=%" PRId64 " seq=%" PRId64 " error=%s", c->msg.task,
                c->msg.seq, j->errstr);
    j->res.res[1] = -1;
}

/* CLOSE of a sharded task's chunk: the batched close's calls in a
 * pipeline of their own, then, when its shard ran dry, the rest of the
 * task (wk_chunk_end_task_left). */
static void wk_chunk_end_sharded_run(wk_redis_job *job, hr_redis *r)
{
    wk_chunk_end_job *j = (wk_chunk_end_job *)job;
    hr_pipe *pipe = hr_pipe_new(r);

    j->res.rc = -1;
    if (pipe == NULL) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        return;
    }
    job->first = 0;
    wk_chunk_end_queue(job, pipe); /* out of memory: READ sees fewer replies */
    job->count = hr_pipe_count(pipe);
    /* A connection that failed makes every reply READ takes report it. */
    hr_pipe_exec(pipe, j->errstr, sizeof j->errstr);
    wk_chunk_end_read(job, pipe);
    hr_pipe_free(pipe);
    if (j->res.rc == 0 && j->acked.rc == 0 && j->res.res[0] >= 0 && j->res.res[1] == 0 &&
        j->res.res[2] == 0)
        wk_chunk_end_task_left(j, r);
}

static void wk_chunk_end_done(wk_redis_job *job)
{
    wk_chunk_end_job *j = (wk_chunk_end_job *)job;
    wk_chunk *c = j->c;

    c->jobs--;
    wk_chunk_acked_apply(c, &j->acks, &j->acked);
    j->res.ack_failed = c->ack_failed;
    j->res.errstr = j->res.rc != 0 ? j->errstr : j->acked.errstr;
    c->hooks->ended(c, &j->res);
    free(j->stats);
    hr_vec_free(&j->dropped);
    free(j);
}

static const wk_redis_ops wk_chunk_end_batched_ops = {
    .queue = wk_chunk_end_queue, .read = wk_chunk_end_read, .done = wk_chunk_end_done};
static const wk_redis_ops wk_chunk_end_run_ops = {.run = wk_chunk_end_run,
                                                  .done = wk_chunk_end_done};
static const wk_redis_ops wk_chunk_end_sharded_ops = {.run = wk_chunk_end_sharded_run,
                                                      .done = wk_chunk_end_done};
static const wk_redis_ops wk_chunk_end_handback_ops = {.run = wk_chunk_end_handback_run,
                                                       .done = wk_chunk_end_done};

int wk_chunk_finalize(wk_redis *rd, wk_chunk *c, wk_chunk_ending how, const char *owner)
{
    wk_chunk_end_job *j = calloc(1, sizeof *j);

    if (j == NULL)
        return -1;
    j->job.ops = how == WK_CHUNK_DROP_EXPIRE || how == WK_CHUNK_DROP_CANCEL ? &wk_chunk_end_run_ops
                 : how == WK_CHUNK_HANDBACK                ? &wk_chunk_end_handback_ops
                 : how == WK_CHUNK_CLOSE && c->msg.sharded ? &wk_chunk_end_sharded_ops
                                                           : &wk_chunk_end_batched_ops;
    j->c = c;
    j->how = how;
    j->outcome = how == WK_CHUNK_DROP_EXPIRE ? HR_OUTCOME_EXPIRED : HR_OUTCOME_CANCELLED;
    snprintf(j->owner, sizeof j->owner, "%s", owner);
    snprintf(j->seq, sizeof j->seq, "%" PRId64, c->msg.seq);
    j->acks = c->acks;
    if (wk_chunk_submit(rd, c, &j->job) != 0)
        return -1;
    memset(&c->acks, 0, sizeof c->acks);
    return 0;
}
