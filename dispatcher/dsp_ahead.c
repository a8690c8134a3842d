/* dsp_ahead: how far the chunker may run ahead of the workers (issue 19,
 * the slow start after due).
 *
 * A chunk is "ahead" when it is pending (moved, not done) and no worker
 * holds its lease yet: it waits in Kafka or in a worker's inbox.  The
 * chunker moves no further chunk of a task while dispatcher.chunks_ahead
 * of them are ahead (dsp_chunk.c asks before each move), so it keeps the
 * workers fed and no more: by default one per partition of the topic (12),
 * which measured better than two (a 500,000-recipient campaign, two
 * workers: 10,465 pushes/s in the first 6 s at 12, 7,703 at 24, 2,652
 * without a bound); a fleet of many workers with few partitions each may
 * want more, so a worker whose partitions ran dry rarely waits for a move.
 * 0 = no bound (the dispatch benchmark, which runs no workers).  Why: chunk_move.lua's SPOP of 5,000 members holds
 * Redis for tens of ms, and moving a large task's chunks back to back
 * (about 20 a second) kept Redis busy with them for the first seconds
 * after due, while every worker call (leases, members, acks) queued
 * behind the moves: in a 500,000-recipient campaign with two workers the
 * dispatcher was 88 chunks ahead of the workers after 4 s, and the workers
 * pushed at a third of their later speed until the chunking ended.  Bounded,
 * the moves are spread over the campaign, one as a worker takes a chunk.
 *
 * The check costs nothing until the owner has moved chunks_ahead chunks
 * of the task (small tasks never pay), then two round trips: HKEYS
 * of the pending hash, then EXISTS of each pending chunk's lease,
 * pipelined.  A lease that expired (a dead worker) counts the chunk as
 * ahead, which only delays the next move until the sweeper republished
 * it and a worker took it. */
#include "dsp_ahead.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsp_conn.h"
#include "hr_keys.h"
#include "hr_pipe.h"
#include "hr_shard.h"

/* The number of the pending chunks of shard SHARD of task ID (0: a task of
 * one set) that no worker holds, counting at most up to the first MAX
 * found; -1 on a Redis error (ERRSTR). */
static int64_t dsp_ahead_count(hr_redis *r, int64_t id, int shard, int64_t max, char *errstr,
                               size_t errlen)
{
    const char *prefix = hr_redis_prefix(r);
    char pending[HR_KEY_MAX], lease[HR_KEY_MAX];
    redisReply *keys;
    hr_pipe *pipe = NULL;
    int64_t ahead = -1;
    size_t i;

    hr_key_shard(prefix, pending, sizeof pending, id, shard, HR_KEY_PENDING);
    keys = hr_redis_cmdf(r, errstr, errlen, "HKEYS %s", pending);
    if (keys == NULL)
        return -1;
    if (keys->type != REDIS_REPLY_ARRAY || (int64_t)keys->elements < max) {
        ahead = keys->type == REDIS_REPLY_ARRAY ? (int64_t)keys->elements : 0;
        goto done;
    }
    pipe = hr_pipe_new(r);
    if (pipe == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (i = 0; i < keys->elements; i++) {
        const char *argv[] = {"EXISTS", lease};

        hr_key_shard_lease(prefix, lease, sizeof lease, id, shard,
                           strtoll(keys->element[i]->str, NULL, 10));
        if (hr_pipe_cmd(pipe, 2, argv, NULL) < 0) {
            snprintf(errstr, errlen, "out of memory");
            goto done;
        }
    }
    if (hr_pipe_exec(pipe, errstr, errlen) < 0)
        goto done;
    ahead = 0;
    for (i = 0; i < keys->elements; i++) {
        int64_t held = dsp_reply_int(hr_pipe_reply(pipe, i, errstr, errlen));

        if (held < 0) {
            ahead = -1;
            goto done;
        }
        ahead += held == 0;
    }
done:
    hr_pipe_free(pipe);
    freeReplyObject(keys);
    return ahead;
}

int dsp_ahead(dsp *d, const dsp_task *dt, char *errstr, size_t errlen)
{
    int64_t max = d->cfg->dispatcher.chunks_ahead, ahead;

    if (max == 0 || dt->chunks < max)
        return 0;
    /* Per shard for a sharded task: each shard's chunker keeps its own
     * chunks_ahead (the shards being cut at once are few, one per
     * dispatcher). */
    ahead = dsp_ahead_count(d->loop_conn.r, dt->id, dt->shard != HR_SHARD_NONE ? dt->shard : 0, max,
                            errstr, errlen);
    if (ahead < 0)
        return -1;
    return ahead >= max;
}
