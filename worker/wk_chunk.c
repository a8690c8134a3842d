/* wk_chunk: one chunk being pushed (see wk_chunk.h): made, keys built,
 * freed; the helpers its jobs share.  The jobs are wk_chunk_open,
 * wk_chunk_check, wk_chunk_acks (the flush) and wk_chunk_end: each is a
 * struct of its own that holds its inputs (copied or immutable: the
 * chunk's keys, members and task) and its results; RUN or QUEUE/READ fill
 * the results on the Redis thread, and the job's DONE moves them into the
 * chunk on the loop thread, then calls the chunk's hook and frees the
 * job. */
#include "wk_chunk.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hr_shard.h"
#include "hr_state.h"

static uint64_t wk_chunk_next_id = 1; /* loop thread only */

wk_chunk *wk_chunk_new(const char *prefix, const hr_chunkmsg *msg, int32_t partition,
                       int64_t offset, wk_task *task, int ack_batch, const wk_chunk_hooks *hooks,
                       void *ctx)
{
    wk_chunk *c = calloc(1, sizeof *c);

    if (c == NULL)
        return NULL;
    c->id = wk_chunk_next_id++;
    c->hooks = hooks;
    c->ctx = ctx;
    c->msg = *msg;
    c->partition = partition;
    c->offset = offset;
    c->task = task;
    c->ack_batch = (size_t)ack_batch;
    /* HR_KEY_MAX holds every task key (hr_keys.h): no builder fails.  The
     * shard's keys (shard 0 = the task's own for a task of one set); the
     * control key is the task's. */
    hr_key_shard_chunk(prefix, c->k_set, sizeof c->k_set, msg->task, msg->shard, msg->seq);
    hr_key_shard_lease(prefix, c->k_lease, sizeof c->k_lease, msg->task, msg->shard, msg->seq);
    hr_key_shard(prefix, c->k_pending, sizeof c->k_pending, msg->task, msg->shard, HR_KEY_PENDING);
    hr_key_shard(prefix, c->k_stats, sizeof c->k_stats, msg->task, msg->shard, HR_KEY_STATS);
    hr_key_shard(prefix, c->k_subs, sizeof c->k_subs, msg->task, msg->shard, HR_KEY_SUBS);
    hr_key_shard(prefix, c->k_failed, sizeof c->k_failed, msg->task, msg->shard, HR_KEY_FAILED);
    hr_key_shard(prefix, c->k_wait, sizeof c->k_wait, msg->task, msg->shard, HR_KEY_WAIT);
    hr_key_shard(prefix, c->k_waves, sizeof c->k_waves, msg->task, msg->shard, HR_KEY_WAVES);
    hr_key_task(prefix, c->k_ctl, sizeof c->k_ctl, msg->task, HR_KEY_CTL);
    return c;
}

int wk_chunk_row(const wk_chunk *c)
{
    return c->msg.sharded ? c->msg.shard : HR_SHARD_NONE;
}

/* Frees the buffers of A and empties it. */
void wk_chunk_acks_free(wk_chunk_acks *a)
{
    for (size_t i = 0; i < a->ndead; i++)
        free(a->dead[i].reason);
    for (int k = 0; k < WK_CHUNK_DEAD; k++)
        free(a->uids[k]);
    free(a->dead);
    memset(a, 0, sizeof *a);
}

void wk_chunk_reset(wk_chunk *c)
{
    for (size_t i = 0; i < c->nparts; i++) {
        hr_arena_free(c->parts[i].arena);
        hr_addr_list_free(&c->parts[i].addrs);
    }
    free(c->parts);
    if (c->members != NULL)
        freeReplyObject(c->members);
    free(c->pushes);
    free(c->verdicts);
    c->members = NULL;
    c->parts = NULL;
    c->pushes = NULL;
    c->verdicts = NULL;
    c->nparts = c->npushes = c->open = c->unchecked = c->unread = c->slices = 0;
    c->no_profiles = false;
}

void wk_chunk_free(wk_chunk *c)
{
    if (c == NULL)
        return;
    wk_chunk_reset(c);
    wk_chunk_acks_free(&c->acks);
    free(c);
}

bool wk_chunk_uid_valid(const char *s)
{
    uint64_t v = 0;

    if (*s == '\0')
        return false;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > (uint64_t)INT64_MAX)
            return false;
    }
    return v >= 1;
}

/* Submits JOB (the start of its allocated struct) for C: 0 with C->jobs
 * counting it, or -1 with JOB freed. */
int wk_chunk_submit(wk_redis *rd, wk_chunk *c, wk_redis_job *job)
{
    if (c->gated > 0 || !wk_gate_open(c->gate, c->ev_last)) {
        if (wk_gate_hold(c->gate, c->ev_last, job, &c->gated) != 0) {
            free(job);
            return -1;
        }
    } else if (wk_redis_submit(rd, job) != 0) {
        free(job);
        return -1;
    }
    c->jobs++;
    return 0;
}

wk_chunk_halt wk_chunk_halt_of(const redisReply *reply)
{
    hr_control control;

    if (reply->type != REDIS_REPLY_STRING || hr_control_parse(reply->str, &control) < 0)
        return WK_CHUNK_RUN;
    return control == HR_CONTROL_PAUSE    ? WK_CHUNK_PARK
           : control == HR_CONTROL_CANCEL ? WK_CHUNK_CANCEL
                                          : WK_CHUNK_RUN;
}
