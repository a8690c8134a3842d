/* wk_redis: the worker's Redis thread (see wk_redis.h).
 *
 * Two FIFO lists under one mutex: QUEUED (submitted, not taken by the thread)
 * and DONE (finished, DONE not called yet).  The thread takes the whole
 * QUEUED list at once and works through it in order: a run job alone, a
 * stretch of batched jobs in one pipeline; after each it moves what it
 * finished to DONE and wakes the loop (uv_async_send), so the loop acts on
 * a result as soon as it is there, not when the whole list is through.
 * PENDING (loop thread only) counts the jobs submitted whose DONE has not
 * run: the close waits for it to reach 0.  The wake-up handle keeps the
 * loop alive only while jobs are pending or a close is under way (uv_ref),
 * so an idle Redis thread does not, like an idle socket. */
#include "wk_redis.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wk_redis {
    hr_redis *r;
    hr_pipe *pipe; /* the thread's, reset every round */
    uv_async_t wake;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    /* under mu */
    wk_redis_job *queued, *queued_tail, *done, *done_tail;
    bool stop, exited;
    /* loop thread */
    size_t pending;
    bool closing;
};

/* Appends the chain FIRST..LAST (LAST->next already NULL) to a list. */
static void wk_redis_append(wk_redis_job **head, wk_redis_job **tail, wk_redis_job *first,
                            wk_redis_job *last)
{
    if (*tail != NULL)
        (*tail)->next = first;
    else
        *head = first;
    *tail = last;
}

/* Hands the finished chain FIRST..LAST to the loop. */
static void wk_redis_post(wk_redis *rd, wk_redis_job *first, wk_redis_job *last)
{
    last->next = NULL;
    pthread_mutex_lock(&rd->mu);
    wk_redis_append(&rd->done, &rd->done_tail, first, last);
    pthread_mutex_unlock(&rd->mu);
    uv_async_send(&rd->wake);
}

/* One round: the batched jobs from FIRST on, up to the next run job or
 * WK_REDIS_BATCH_MAX commands, in one pipeline.  Returns the job after the
 * round's last. */
static wk_redis_job *wk_redis_round(wk_redis *rd, wk_redis_job *first)
{
    wk_redis_job *job, *last = first, *next;
    char errstr[256];

    hr_pipe_reset(rd->pipe);
    for (job = first; job != NULL && job->ops->run == NULL; job = job->next) {
        job->first = hr_pipe_count(rd->pipe);
        job->ops->queue(job, rd->pipe);
        job->count = hr_pipe_count(rd->pipe) - job->first;
        last = job;
        if (hr_pipe_count(rd->pipe) >= WK_REDIS_BATCH_MAX)
            break;
    }
    next = last->next;
    /* A connection that failed makes every reply below report it. */
    hr_pipe_exec(rd->pipe, errstr, sizeof errstr);
    for (job = first;; job = job->next) {
        job->ops->read(job, rd->pipe);
        if (job == last)
            break;
    }
    wk_redis_post(rd, first, last);
    return next;
}

static void *wk_redis_main(void *arg)
{
    wk_redis *rd = arg;
    wk_redis_job *job, *next;

    pthread_mutex_lock(&rd->mu);
    for (;;) {
        while (rd->queued == NULL && !rd->stop)
            pthread_cond_wait(&rd->cond, &rd->mu);
        if (rd->queued == NULL)
            break;
        job = rd->queued;
        rd->queued = rd->queued_tail = NULL;
        pthread_mutex_unlock(&rd->mu);
        while (job != NULL) {
            if (job->ops->run == NULL) {
                job = wk_redis_round(rd, job);
                continue;
            }
            next = job->next;
            job->ops->run(job, rd->r);
            wk_redis_post(rd, job, job);
            job = next;
        }
        pthread_mutex_lock(&rd->mu);
    }
    rd->exited = true;
    pthread_mutex_unlock(&rd->mu);
    uv_async_send(&rd->wake);
    return NULL;
}

/* The loop's side: calls DONE of every finished job, in order; closes the
 * wake-up handle once a close asked for it and nothing is left. */
static void wk_redis_wake_cb(uv_async_t *h)
{
    wk_redis *rd = h->data;
    wk_redis_job *job, *next;
    bool exited;

    pthread_mutex_lock(&rd->mu);
    job = rd->done;
    rd->done = rd->done_tail = NULL;
    exited = rd->exited;
    pthread_mutex_unlock(&rd->mu);
    for (; job != NULL; job = next) {
        next = job->next;
        rd->pending--;
        job->ops->done(job);
    }
    if (rd->pending == 0 && !rd->closing)
        uv_unref((uv_handle_t *)&rd->wake);
    if (rd->closing && exited && rd->pending == 0 && !uv_is_closing((uv_handle_t *)&rd->wake))
        uv_close((uv_handle_t *)&rd->wake, NULL);
}

/* Frees what wk_redis_start allocated (the thread never ran). */
static void wk_redis_destroy(wk_redis *rd)
{
    pthread_mutex_destroy(&rd->mu);
    pthread_cond_destroy(&rd->cond);
    hr_pipe_free(rd->pipe);
    free(rd);
}

static void wk_redis_destroy_cb(uv_handle_t *h)
{
    wk_redis_destroy(h->data);
}

int wk_redis_start(uv_loop_t *loop, hr_redis *r, wk_redis **out, char *errstr, size_t errlen)
{
    wk_redis *rd = calloc(1, sizeof *rd);

    *out = NULL;
    if (rd == NULL || (rd->pipe = hr_pipe_new(r)) == NULL) {
        free(rd);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&rd->mu, NULL);
    pthread_cond_init(&rd->cond, NULL);
    if (uv_async_init(loop, &rd->wake, wk_redis_wake_cb) != 0) {
        wk_redis_destroy(rd);
        snprintf(errstr, errlen, "uv_async_init failed");
        return -1;
    }
    rd->wake.data = rd;
    uv_unref((uv_handle_t *)&rd->wake);
    rd->r = r;
    if (pthread_create(&rd->thread, NULL, wk_redis_main, rd) != 0) {
        /* R is not taken; the handle goes with the caller's next loop run. */
        uv_close((uv_handle_t *)&rd->wake, wk_redis_destroy_cb);
        snprintf(errstr, errlen, "cannot start the Redis thread");
        return -1;
    }
    *out = rd;
    return 0;
}

const char *wk_redis_prefix(const wk_redis *rd)
{
    return hr_redis_prefix(rd->r);
}

redisReply *wk_redis_job_reply(const wk_redis_job *job, hr_pipe *pipe, size_t i, char *errstr,
                               size_t errlen)
{
    if (i >= job->count) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    return hr_pipe_reply(pipe, job->first + i, errstr, errlen);
}

int wk_redis_submit(wk_redis *rd, wk_redis_job *job)
{
    if (rd->closing || rd->pending >= WK_REDIS_QUEUE_MAX)
        return -1;
    job->next = NULL;
    if (rd->pending++ == 0)
        uv_ref((uv_handle_t *)&rd->wake);
    pthread_mutex_lock(&rd->mu);
    wk_redis_append(&rd->queued, &rd->queued_tail, job, job);
    pthread_cond_signal(&rd->cond);
    pthread_mutex_unlock(&rd->mu);
    return 0;
}

size_t wk_redis_pending(const wk_redis *rd)
{
    return rd->pending;
}

void wk_redis_close(wk_redis *rd)
{
    if (rd == NULL || rd->closing)
        return;
    rd->closing = true;
    /* The loop runs until the thread's last wake-up closed the handle. */
    uv_ref((uv_handle_t *)&rd->wake);
    pthread_mutex_lock(&rd->mu);
    rd->stop = true;
    pthread_cond_signal(&rd->cond);
    pthread_mutex_unlock(&rd->mu);
    /* The thread's last wake-up (after it exited) closes the handle once
     * every DONE ran. */
}

void wk_redis_free(wk_redis *rd)
{
    if (rd == NULL)
        return;
    wk_redis_close(rd);
    pthread_join(rd->thread, NULL);
    hr_redis_free(rd->r);
    wk_redis_destroy(rd);
}

/* ---- the generic jobs ------------------------------------------------------ */

typedef struct wk_redis_call_job {
    wk_redis_job job;
    void (*run)(hr_redis *r, void *arg);
    void (*done)(void *arg);
    void *arg;
} wk_redis_call_job;

static void wk_redis_call_run(wk_redis_job *job, hr_redis *r)
{
    wk_redis_call_job *j = (wk_redis_call_job *)job;

    j->run(r, j->arg);
}

static void wk_redis_call_done(wk_redis_job *job)
{
    wk_redis_call_job *j = (wk_redis_call_job *)job;

    j->done(j->arg);
    free(j);
}

static const wk_redis_ops wk_redis_call_ops = {.run = wk_redis_call_run,
                                               .done = wk_redis_call_done};

int wk_redis_call(wk_redis *rd, void (*run)(hr_redis *r, void *arg), void (*done)(void *arg),
                  void *arg)
{
    wk_redis_call_job *j = calloc(1, sizeof *j);

    if (j == NULL)
        return -1;
    j->job.ops = &wk_redis_call_ops;
    j->run = run;
    j->done = done;
    j->arg = arg;
    if (wk_redis_submit(rd, &j->job) != 0) {
        free(j);
        return -1;
    }
    return 0;
}

typedef struct wk_redis_cmd_job {
    wk_redis_job job;
    int argc;
    char **argv; /* one allocation with the strings */
    void (*done)(void *arg, const redisReply *reply, const char *errstr);
    void *arg;
    redisReply *reply;
    char errstr[256];
} wk_redis_cmd_job;

static int wk_redis_cmd_queue(wk_redis_job *job, hr_pipe *pipe)
{
    wk_redis_cmd_job *j = (wk_redis_cmd_job *)job;

    return hr_pipe_cmd(pipe, j->argc, (const char **)j->argv, NULL);
}

static void wk_redis_cmd_read(wk_redis_job *job, hr_pipe *pipe)
{
    wk_redis_cmd_job *j = (wk_redis_cmd_job *)job;

    if (job->count == 0)
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
    else
        j->reply = hr_pipe_reply(pipe, job->first, j->errstr, sizeof j->errstr);
}

static void wk_redis_cmd_done(wk_redis_job *job)
{
    wk_redis_cmd_job *j = (wk_redis_cmd_job *)job;

    j->done(j->arg, j->reply, j->errstr);
    freeReplyObject(j->reply);
    free(j->argv);
    free(j);
}

static const wk_redis_ops wk_redis_cmd_ops = {
    .queue = wk_redis_cmd_queue, .read = wk_redis_cmd_read, .done = wk_redis_cmd_done};

int wk_redis_cmd(wk_redis *rd, int argc, const char **argv,
                 void (*done)(void *arg, const redisReply *reply, const char *errstr), void *arg)
{
    wk_redis_cmd_job *j = calloc(1, sizeof *j);
    size_t size = (size_t)argc * sizeof(char *);
    char *p;

    if (j == NULL)
        return -1;
    for (int i = 0; i < argc; i++)
        size += strlen(argv[i]) + 1;
    j->argv = malloc(size);
    if (j->argv == NULL) {
        free(j);
        return -1;
    }
    p = (char *)(j->argv + argc);
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(argv[i]) + 1;

        j->argv[i] = memcpy(p, argv[i], n);
        p += n;
    }
    j->job.ops = &wk_redis_cmd_ops;
    j->argc = argc;
    j->done = done;
    j->arg = arg;
    snprintf(j->errstr, sizeof j->errstr, "no reply");
    if (wk_redis_submit(rd, &j->job) != 0) {
        free(j->argv);
        free(j);
        return -1;
    }
    return 0;
}
