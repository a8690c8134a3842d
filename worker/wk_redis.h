/* wk_redis: the worker's Redis thread.  The worker's one Redis connection
 * (an hr_redis, and so whatever routing hr_redis and hr_pipe do) belongs
 * to this thread, so a slow or stalled Redis never stalls the libuv loop:
 * curl completions, Kafka polls and the timers go on while Redis answers.
 *
 * The loop hands work over as jobs.  A job is a wk_redis_job embedded in
 * the caller's own struct (which the caller allocates and frees, usually in
 * DONE); it is submitted with wk_redis_submit() and runs on the Redis
 * thread in one of two ways:
 *   batched  QUEUE appends its commands to the round's pipeline, READ takes
 *            their replies.  Every batched job waiting when a round starts
 *            shares that round's one pipeline (up to WK_REDIS_BATCH_MAX
 *            commands), so the acknowledgements of several chunks, the lease
 *            renewals and the control reads cost one round trip together.
 *   run      RUN makes whatever calls it needs on the connection (a chunk's
 *            open, a throttle slice, a rate-limit grant, a drop): a
 *            sequence of round trips that depend on each other.
 * Then DONE is called on the loop thread (woken with uv_async), where the
 * job's results are acted on.
 *
 * Order: jobs run in the order they were submitted, and DONE is called in
 * that order too.  A round is sent only when every job before it is done,
 * and one connection's commands run in order, so Redis sees the commands in
 * submission order — an ack before the chunk_done behind it.  On a Redis
 * Cluster hr_pipe keeps that order per slot, which is enough: a chunk's
 * keys share its task's slot ({t<ID>}).  (hr_pipe's one NOSCRIPT replay
 * re-sends a call after the commands queued behind it; the worker's
 * scripts allow that: a close finds its set not empty and changes
 * nothing.)
 *
 * Bound: the worker never has more than a few jobs per open chunk, one per
 * timer and one per channel or task budget in flight (each submitter waits
 * for its job's DONE before it submits the next of its kind), so the queue
 * stays far below WK_REDIS_QUEUE_MAX; at the cap wk_redis_submit refuses
 * (-1) and the caller treats it as a Redis error.
 *
 * Threads: the loop thread submits and receives DONE; the Redis thread runs
 * QUEUE, READ and RUN, and touches nothing but the job and what the job
 * points at that stays unchanged while it runs (a chunk's keys and members,
 * a task's row).  One mutex guards the two lists (to do, done); nothing is
 * called under it. */
#ifndef WK_REDIS_H
#define WK_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "hr_pipe.h"
#include "hr_redis.h"

/* Commands in one round's pipeline, at most (a round goes on past it only
 * to finish the job that crossed it). */
#define WK_REDIS_BATCH_MAX 4000
/* Jobs waiting or running, at most. */
#define WK_REDIS_QUEUE_MAX 4096

typedef struct wk_redis wk_redis;
typedef struct wk_redis_job wk_redis_job;

/* What a job does; one static table per kind of job.  Either QUEUE and
 * READ (batched) or RUN is set. */
typedef struct wk_redis_ops {
    /* Redis thread: appends the job's commands to PIPE; 0, or -1 when out
     * of memory (READ then sees fewer replies than it queued commands). */
    int (*queue)(wk_redis_job *job, hr_pipe *pipe);
    /* Redis thread: the replies of the job's commands are PIPE's
     * JOB->first .. JOB->first + JOB->count - 1 (fewer than QUEUE meant
     * when it ran out of memory; hr_pipe_reply reports a command that got
     * no reply). */
    void (*read)(wk_redis_job *job, hr_pipe *pipe);
    /* Redis thread: the whole job, on the connection. */
    void (*run)(wk_redis_job *job, hr_redis *r);
    /* Loop thread: the job is finished (may free it). */
    void (*done)(wk_redis_job *job);
} wk_redis_ops;

struct wk_redis_job {
    const wk_redis_ops *ops;
    wk_redis_job *next;  /* the lists' link; wk_redis's */
    size_t first, count; /* batched: its commands' places in the round's pipeline */
};

/* Starts the thread on R (taken: freed by wk_redis_free) and the loop's
 * wake-up on LOOP.  0, or -1 with ERRSTR. */
int wk_redis_start(uv_loop_t *loop, hr_redis *r, wk_redis **out, char *errstr, size_t errlen);
/* The connection's key prefix (for the hr_keys builders on the loop). */
const char *wk_redis_prefix(const wk_redis *rd);

/* Queues JOB (its ops set).  0, or -1 when the queue is full or the thread
 * is stopping (DONE is then never called). */
int wk_redis_submit(wk_redis *rd, wk_redis_job *job);
/* Jobs submitted whose DONE has not run yet. */
size_t wk_redis_pending(const wk_redis *rd);

/* For a batched job's READ: the reply of its command I (the caller frees
 * it), or NULL with ERRSTR (the command got no reply, or QUEUE ran out of
 * memory before it: "out of memory"). */
redisReply *wk_redis_job_reply(const wk_redis_job *job, hr_pipe *pipe, size_t i, char *errstr,
                               size_t errlen);

/* The two jobs most callers need, allocated and freed here:
 *
 * wk_redis_call: RUN(R, ARG) on the Redis thread, then DONE(ARG) on the
 * loop.  ARG (the caller's inputs and outputs) is the caller's.
 * wk_redis_cmd: one command (ARGV copied), batched with the round's other
 * commands; DONE(ARG, REPLY, ERRSTR) on the loop gets the reply (NULL with
 * ERRSTR on an error reply or a failed connection), freed after DONE.
 * Both: 0, or -1 when out of memory or refused (DONE is then not called). */
int wk_redis_call(wk_redis *rd, void (*run)(hr_redis *r, void *arg), void (*done)(void *arg),
                  void *arg);
int wk_redis_cmd(wk_redis *rd, int argc, const char **argv,
                 void (*done)(void *arg, const redisReply *reply, const char *errstr), void *arg);

/* Stops the thread once every job submitted is done and closes the
 * wake-up handle once every DONE ran (the caller keeps running the loop
 * until then).  No job may be submitted afterwards. */
void wk_redis_close(wk_redis *rd);
/* Joins the thread and frees the connection.  Accepts NULL. */
void wk_redis_free(wk_redis *rd);

#endif
