/* wk_control: control key reads and lease renewals (see wk_control.h). */
#include "wk_control.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_pipe.h"

/* ---- control keys ------------------------------------------------------------ */

typedef struct wk_control_read_job {
    wk_redis_job job;
    char prefix[HR_KEY_MAX];
    wk_control_read_fn done;
    void *ctx;
    bool failed;
    char errstr[256];
    size_t n;
    int64_t *tasks;
    wk_chunk_halt *halts;
} wk_control_read_job;

static int wk_control_read_queue(wk_redis_job *job, hr_pipe *pipe)
{
    wk_control_read_job *j = (wk_control_read_job *)job;
    char key[HR_KEY_MAX];
    const char *ping[] = {"PING"};

    if (j->n == 0)
        return hr_pipe_cmd(pipe, 1, ping, NULL);
    for (size_t i = 0; i < j->n; i++) {
        const char *argv[] = {"GET", key};

        hr_key_task(j->prefix, key, sizeof key, j->tasks[i], HR_KEY_CTL);
        if (hr_pipe_cmd(pipe, 2, argv, NULL) != 0)
            return -1;
    }
    return 0;
}

static void wk_control_read_read(wk_redis_job *job, hr_pipe *pipe)
{
    wk_control_read_job *j = (wk_control_read_job *)job;
    size_t n = j->n > 0 ? j->n : 1;

    for (size_t i = 0; i < n; i++) {
        redisReply *reply = wk_redis_job_reply(job, pipe, i, j->errstr, sizeof j->errstr);

        if (reply == NULL) {
            j->failed = true;
            continue;
        }
        if (j->n > 0)
            j->halts[i] = wk_chunk_halt_of(reply);
        freeReplyObject(reply);
    }
}

static void wk_control_read_done(wk_redis_job *job)
{
    wk_control_read_job *j = (wk_control_read_job *)job;

    j->done(j->ctx, j->tasks, j->halts, j->n, j->failed, j->errstr);
    free(j);
}

static const wk_redis_ops wk_control_read_ops = {
    .queue = wk_control_read_queue, .read = wk_control_read_read, .done = wk_control_read_done};

int wk_control_read(wk_redis *rd, const int64_t *tasks, size_t n, wk_control_read_fn done,
                    void *ctx)
{
    /* One allocation: the job, then the tasks, then the halts. */
    wk_control_read_job *j = calloc(1, sizeof *j + n * (sizeof *tasks + sizeof *j->halts));

    if (j == NULL)
        return -1;
    j->job.ops = &wk_control_read_ops;
    snprintf(j->prefix, sizeof j->prefix, "%s", wk_redis_prefix(rd));
    j->done = done;
    j->ctx = ctx;
    j->n = n;
    j->tasks = (int64_t *)(j + 1);
    j->halts = (wk_chunk_halt *)(j->tasks + n);
    if (n > 0)
        memcpy(j->tasks, tasks, n * sizeof *tasks);
    /* The halts are RUN (0) until read. */
    if (wk_redis_submit(rd, &j->job) != 0) {
        free(j);
        return -1;
    }
    return 0;
}

/* ---- lease renewals -------------------------------------------------------------- */

typedef struct wk_control_lease {
    uint64_t id;
    char key[HR_KEY_MAX], pending[HR_KEY_MAX], seq[24];
} wk_control_lease;

typedef struct wk_control_renew_job {
    wk_redis_job job;
    char owner[160], ms[24];
    wk_control_renew_fn done;
    void *ctx;
    size_t n, nlost, failed;
    wk_control_lease *leases;
    uint64_t *lost;
    char errstr[256];
} wk_control_renew_job;

static int wk_control_renew_queue(wk_redis_job *job, hr_pipe *pipe)
{
    wk_control_renew_job *j = (wk_control_renew_job *)job;

    for (size_t i = 0; i < j->n; i++) {
        /* With the pending hash: a lease gone (expired in an outage)
         * while the chunk is pending is taken again. */
        const char *argv[] = {j->leases[i].key, j->leases[i].pending, j->owner, j->ms,
                              j->leases[i].seq};

        if (hr_pipe_eval(pipe, HR_LUA_LEASE_RENEW, 2, 5, argv, NULL) != 0)
            return -1;
    }
    return 0;
}

static void wk_control_renew_read(wk_redis_job *job, hr_pipe *pipe)
{
    wk_control_renew_job *j = (wk_control_renew_job *)job;

    for (size_t i = 0; i < j->n; i++) {
        redisReply *reply = wk_redis_job_reply(job, pipe, i, j->errstr, sizeof j->errstr);

        if (reply == NULL) {
            j->failed++;
            continue;
        }
        if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0)
            j->lost[j->nlost++] = j->leases[i].id;
        freeReplyObject(reply);
    }
}

static void wk_control_renew_done(wk_redis_job *job)
{
    wk_control_renew_job *j = (wk_control_renew_job *)job;

    j->done(j->ctx, j->lost, j->nlost, j->failed, j->errstr);
    free(j);
}

static const wk_redis_ops wk_control_renew_ops = {
    .queue = wk_control_renew_queue, .read = wk_control_renew_read, .done = wk_control_renew_done};

int wk_control_renew(wk_redis *rd, wk_chunk *const *held, size_t n, const char *owner, int lease_ms,
                     wk_control_renew_fn done, void *ctx)
{
    /* One allocation: the job, then the leases, then the lost ids. */
    wk_control_renew_job *j = calloc(1, sizeof *j + n * (sizeof *j->leases + sizeof *j->lost));

    if (j == NULL)
        return -1;
    j->job.ops = &wk_control_renew_ops;
    snprintf(j->owner, sizeof j->owner, "%s", owner);
    snprintf(j->ms, sizeof j->ms, "%d", lease_ms);
    j->done = done;
    j->ctx = ctx;
    j->n = n;
    j->leases = (wk_control_lease *)(j + 1);
    j->lost = (uint64_t *)(j->leases + n);
    for (size_t i = 0; i < n; i++) {
        j->leases[i].id = held[i]->id;
        memcpy(j->leases[i].key, held[i]->k_lease, sizeof j->leases[i].key);
        memcpy(j->leases[i].pending, held[i]->k_pending, sizeof j->leases[i].pending);
        snprintf(j->leases[i].seq, sizeof j->leases[i].seq, "%" PRId64, held[i]->msg.seq);
    }
    if (wk_redis_submit(rd, &j->job) != 0) {
        free(j);
        return -1;
    }
    return 0;
}
