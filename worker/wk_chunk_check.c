/* wk_chunk_check: a throttle slice of a chunk, a job on the Redis thread
 * (see wk_chunk_check.h). */
#include "wk_chunk_check.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_pipe.h"
#include "wk_chunk_acks.h"

/* ---- throttle --------------------------------------------------------------------- */

typedef struct wk_chunk_check_job {
    wk_redis_job job;
    wk_chunk *c;
    wk_chunk_checked res;
    uint8_t *verdicts;    /* N */
    wk_chunk_acked acked; /* the blocked ones' ack.lua */
    char errstr[512];
} wk_chunk_check_job;

/* The throttle keys of J's pushes into KEYS (N slots of
 * HR_THROTTLE_KEY_MAX) and REQS; J->res.key_missing counts absent
 * attributes. */
static int wk_chunk_throttle_keys(wk_chunk_check_job *j, hr_redis *r,
                                  char (*keys)[HR_THROTTLE_KEY_MAX], hr_throttle_req *reqs)
{
    const wk_chunk *c = j->c;
    const hr_task *row = c->task->row;

    for (size_t i = 0; i < j->res.n; i++) {
        const wk_push *push = &c->pushes[j->res.first + i];
        char vbuf[HR_THROTTLE_VALUE_MAX];
        const char *value = NULL;

        if (row->throttle_key != NULL) {
            value = hr_throttle_value(row->throttle_key,
                                      wk_task_content(c->task, push->variant)->payload, push->user,
                                      vbuf, sizeof vbuf);
            if (value == NULL)
                j->res.key_missing++;
        }
        if (hr_throttle_key(r, row->throttle_scope, push->uid, value, keys[i], sizeof keys[i],
                            j->errstr, sizeof j->errstr) != 0)
            return -1;
        reqs[i].key = keys[i];
        reqs[i].rule = &c->task->throttle;
    }
    return 0;
}

/* HINCRBY stats FIELD N on PIPE, when N > 0. */
static int wk_chunk_count_queue(const wk_chunk *c, hr_pipe *pipe, const char *field, int64_t n)
{
    char n_s[24];
    const char *argv[] = {"HINCRBY", c->k_stats, field, n_s};

    if (n == 0)
        return 0;
    snprintf(n_s, sizeof n_s, "%" PRId64, n);
    return hr_pipe_cmd(pipe, 4, argv, NULL);
}

/* The second round trip of a slice: the blocked ones acknowledged as
 * throttled, the shadowed and key-missing ones counted. */
static int wk_chunk_check_count(wk_chunk_check_job *j, hr_redis *r, const char **blocked,
                                size_t nblocked)
{
    const wk_chunk *c = j->c;
    hr_pipe *pipe;
    size_t at = 0;
    int rc = -1;

    if (nblocked == 0 && j->res.shadowed == 0 && j->res.key_missing == 0)
        return 0;
    if ((pipe = hr_pipe_new(r)) == NULL ||
        (nblocked > 0 && wk_chunk_ack_queue(c, pipe, "throttled", 0, blocked, nblocked) != 0) ||
        wk_chunk_count_queue(c, pipe, "throttle_shadowed", j->res.shadowed) != 0 ||
        wk_chunk_count_queue(c, pipe, "throttle_key_missing", j->res.key_missing) != 0) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        goto done;
    }
    /* A connection that failed makes every reply below report it. */
    hr_pipe_exec(pipe, j->errstr, sizeof j->errstr);
    if (nblocked > 0) {
        if (wk_chunk_counted(HR_LUA_ACK, hr_pipe_reply(pipe, at++, j->errstr, sizeof j->errstr),
                             &j->res.removed, 1, &j->acked.counters, j->errstr,
                             sizeof j->errstr) != 0)
            goto done;
        j->acked.counters_new = true;
    }
    for (; at < hr_pipe_count(pipe); at++) {
        redisReply *reply = hr_pipe_reply(pipe, at, j->errstr, sizeof j->errstr);

        if (reply == NULL)
            goto done;
        freeReplyObject(reply);
    }
    rc = 0;
done:
    hr_pipe_free(pipe);
    return rc;
}

static void wk_chunk_check_run(wk_redis_job *job, hr_redis *r)
{
    wk_chunk_check_job *j = (wk_chunk_check_job *)job;
    size_t n = j->res.n, nblocked = 0;
    char(*keys)[HR_THROTTLE_KEY_MAX] = calloc(n, sizeof *keys);
    hr_throttle_req *reqs = calloc(n, sizeof *reqs);
    hr_throttle_result *res = calloc(n, sizeof *res);
    const char **blocked = calloc(n, sizeof *blocked);

    j->res.rc = -1;
    if (keys == NULL || reqs == NULL || res == NULL || blocked == NULL) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        goto done;
    }
    if (wk_chunk_throttle_keys(j, r, keys, reqs) != 0 ||
        hr_throttle_check(r, reqs, n, res, j->errstr, sizeof j->errstr) != 0)
        goto done;
    for (size_t i = 0; i < n; i++) {
        j->verdicts[i] = (uint8_t)res[i].verdict;
        if (res[i].verdict == HR_THROTTLE_BLOCKED)
            blocked[nblocked++] = j->c->pushes[j->res.first + i].uid;
        else if (res[i].verdict == HR_THROTTLE_SHADOWED)
            j->res.shadowed++;
    }
    j->res.blocked = (int64_t)nblocked;
    if (wk_chunk_check_count(j, r, blocked, nblocked) == 0)
        j->res.rc = 0;
done:
    free(keys);
    free(reqs);
    free(res);
    free(blocked);
}

static void wk_chunk_check_done(wk_redis_job *job)
{
    wk_chunk_check_job *j = (wk_chunk_check_job *)job;
    wk_chunk *c = j->c;

    c->jobs--;
    c->slices--;
    if (j->res.rc == 0) {
        memcpy(c->verdicts + j->res.first, j->verdicts, j->res.n);
        c->throttled += j->res.removed;
        c->shadowed += j->res.shadowed;
        c->key_missing += j->res.key_missing;
    }
    if (j->acked.counters_new) {
        c->counters = j->acked.counters;
        c->counters_new = true;
    }
    j->res.errstr = j->errstr;
    c->hooks->checked(c, &j->res);
    free(j->verdicts);
    free(j);
}

static const wk_redis_ops wk_chunk_check_ops = {.run = wk_chunk_check_run,
                                                .done = wk_chunk_check_done};

int wk_chunk_check(wk_redis *rd, wk_chunk *c, size_t first, size_t n)
{
    wk_chunk_check_job *j;
    uint8_t *verdicts;

    /* Room for a push per member: the parts of the open's read add theirs
     * (wk_chunk_open.h). */
    if (c->verdicts == NULL &&
        (c->verdicts = calloc(c->members->elements ? c->members->elements : 1, 1)) == NULL)
        return -1;
    if ((j = calloc(1, sizeof *j)) == NULL)
        return -1;
    j->job.ops = &wk_chunk_check_ops;
    j->c = c;
    j->res.first = first;
    j->res.n = n;
    if ((verdicts = j->verdicts = calloc(n ? n : 1, 1)) == NULL) {
        free(j);
        return -1;
    }
    if (wk_chunk_submit(rd, c, &j->job) != 0) {
        free(verdicts);
        return -1;
    }
    c->slices++;
    return 0;
}
