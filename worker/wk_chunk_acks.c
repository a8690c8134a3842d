/* wk_chunk_acks: a chunk's settled recipients, buffered and written (see
 * wk_chunk_acks.h). */
#include "wk_chunk_acks.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_pipe.h"

/* ---- acknowledgements -------------------------------------------------------- */

/* The stats field each kind ack.lua writes is counted under. */
static const char *const wk_chunk_fields[WK_CHUNK_DEAD] = {
    [WK_CHUNK_SENT] = "sent",
    [WK_CHUNK_UNREGISTERED] = "unregistered",
    [WK_CHUNK_OPTED_OUT] = "opted_out",
    [WK_CHUNK_SUPPRESSED] = "suppressed",
};

/* Room for one more element of SIZE bytes in *V (holding N of *CAP):
 * the first allocation is BATCH, then it doubles.  0 or -1. */
static int wk_chunk_acks_room(void **v, size_t n, size_t *cap, size_t size, size_t batch)
{
    size_t want = *cap == 0 ? batch : 2 * *cap;
    void *grown;

    if (n < *cap)
        return 0;
    if ((grown = realloc(*v, want * size)) == NULL)
        return -1;
    *v = grown;
    *cap = want;
    return 0;
}

size_t wk_chunk_acks_held(const wk_chunk_acks *a)
{
    size_t held = a->ndead;

    for (int k = 0; k < WK_CHUNK_DEAD; k++)
        held += a->n[k];
    return held;
}

int wk_chunk_acks_add(wk_chunk_acks *a, size_t batch, wk_chunk_settled how, const char *uid,
                      const char *reason)
{

    /* A flush takes the buffers, so the next settled recipient allocates
     * anew; they grow past BATCH only while a stall keeps them. */
    if (how == WK_CHUNK_DEAD) {
        if (wk_chunk_acks_room((void **)&a->dead, a->ndead, &a->capdead, sizeof *a->dead, batch) !=
            0)
            return -1;
        a->dead[a->ndead].reason = strdup(reason);
        if (a->dead[a->ndead].reason == NULL)
            return -1;
        a->dead[a->ndead++].uid = uid;
    } else {
        if (wk_chunk_acks_room((void **)&a->uids[how], a->n[how], &a->cap[how],
                               sizeof *a->uids[how], batch) != 0)
            return -1;
        a->uids[how][a->n[how]++] = uid;
    }
    return wk_chunk_acks_held(a) >= batch;
}

int wk_chunk_ack(wk_chunk *c, wk_chunk_settled how, const char *uid, const char *reason)
{
    /* One ack batch in all. */
    return wk_chunk_acks_add(&c->acks, c->ack_batch, how, uid, reason);
}

int wk_chunk_acks_give_back(wk_chunk *c, wk_chunk_acks *from, const bool failed[WK_CHUNK__SETTLED])
{
    wk_chunk_acks *a = &c->acks;
    int rc = 0;

    if (failed[WK_CHUNK_SENT])
        a->retried += from->retried;
    for (int k = 0; k < WK_CHUNK_DEAD; k++)
        for (size_t i = 0; failed[k] && i < from->n[k] && rc == 0; i++)
            rc = wk_chunk_ack(c, (wk_chunk_settled)k, from->uids[k][i], NULL) < 0 ? -1 : 0;
    for (size_t i = 0; failed[WK_CHUNK_DEAD] && i < from->ndead && rc == 0; i++)
        rc = wk_chunk_ack(c, WK_CHUNK_DEAD, from->dead[i].uid, from->dead[i].reason) < 0 ? -1 : 0;
    wk_chunk_acks_free(from);
    return rc;
}

/* Reads REPLY (taken; NULL = the call failed, ERRSTR set) of script ID: an
 * array of N integers into OUT, then the stats hash counters into
 * *COUNTERS.  -1 with ERRSTR on another reply. */
int wk_chunk_counted(hr_lua_id id, redisReply *reply, int64_t *out, size_t n,
                     wk_chunk_counters *counters, char *errstr, size_t errlen)
{
    int64_t v[16];
    int rc = -1;

    if (reply == NULL)
        return -1;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != n + WK_CHUNK_NCOUNTERS ||
        n + WK_CHUNK_NCOUNTERS > 16) {
        snprintf(errstr, errlen, "script %d: unexpected reply", (int)id);
        goto done;
    }
    for (size_t i = 0; i < n + WK_CHUNK_NCOUNTERS; i++) {
        if (reply->element[i]->type != REDIS_REPLY_INTEGER) {
            snprintf(errstr, errlen, "script %d: unexpected reply", (int)id);
            goto done;
        }
        v[i] = reply->element[i]->integer;
    }
    memcpy(out, v, n * sizeof *out);
    *counters = (wk_chunk_counters){.sent = v[n],
                                    .failed = v[n + 1],
                                    .throttled = v[n + 2],
                                    .retried = v[n + 3],
                                    .unregistered = v[n + 4],
                                    .opted_out = v[n + 5],
                                    .suppressed = v[n + 6]};
    rc = 0;
done:
    freeReplyObject(reply);
    return rc;
}

/* Queues ack.lua for the N UIDS of C, counted under stats FIELD, plus
 * RETRIED retries.  0, or -1 when out of memory. */
int wk_chunk_ack_queue(const wk_chunk *c, hr_pipe *pipe, const char *field, int64_t retried,
                       const char *const *uids, size_t n)
{
    const char **argv = calloc(n + 4, sizeof *argv);
    char retried_s[24];
    int rc;

    if (argv == NULL)
        return -1;
    snprintf(retried_s, sizeof retried_s, "%" PRId64, retried);
    argv[0] = c->k_set;
    argv[1] = c->k_stats;
    argv[2] = retried_s;
    argv[3] = field;
    if (n > 0)
        memcpy(argv + 4, uids, n * sizeof *argv);
    rc = hr_pipe_eval(pipe, HR_LUA_ACK, 2, (int)n + 4, argv, NULL);
    free(argv);
    return rc;
}

/* Queues dead_letter.lua for the N failures of DEAD. */
static int wk_chunk_dead_queue(const wk_chunk *c, hr_pipe *pipe, const struct wk_chunk_dead *dead,
                               size_t n)
{
    const char **argv = calloc(2 * n + 3, sizeof *argv);
    int rc;

    if (argv == NULL)
        return -1;
    argv[0] = c->k_set;
    argv[1] = c->k_failed;
    argv[2] = c->k_stats;
    for (size_t i = 0; i < n; i++) {
        argv[3 + 2 * i] = dead[i].uid;
        argv[4 + 2 * i] = dead[i].reason;
    }
    rc = hr_pipe_eval(pipe, HR_LUA_DEAD_LETTER, 3, 2 * (int)n + 3, argv, NULL);
    free(argv);
    return rc;
}

void wk_chunk_acks_calls(const wk_chunk_acks *a, bool calls[WK_CHUNK__SETTLED])
{
    for (int k = 0; k < WK_CHUNK_DEAD; k++)
        calls[k] = a->n[k] > 0 || (k == WK_CHUNK_SENT && a->retried > 0);
    calls[WK_CHUNK_DEAD] = a->ndead > 0;
}

size_t wk_chunk_acks_ncalls(const wk_chunk_acks *a)
{
    bool calls[WK_CHUNK__SETTLED];
    size_t n = 0;

    wk_chunk_acks_calls(a, calls);
    for (int k = 0; k < WK_CHUNK__SETTLED; k++)
        n += calls[k];
    return n;
}

/* Queues the calls of A on PIPE.  0, or -1 when out of memory (the calls
 * queued so far stay queued). */
int wk_chunk_acks_queue(const wk_chunk *c, const wk_chunk_acks *a, hr_pipe *pipe)
{
    bool calls[WK_CHUNK__SETTLED];

    wk_chunk_acks_calls(a, calls);
    for (int k = 0; k < WK_CHUNK_DEAD; k++)
        if (calls[k] &&
            wk_chunk_ack_queue(c, pipe, wk_chunk_fields[k], k == WK_CHUNK_SENT ? a->retried : 0,
                               a->uids[k], a->n[k]) != 0)
            return -1;
    if (calls[WK_CHUNK_DEAD] && wk_chunk_dead_queue(c, pipe, a->dead, a->ndead) != 0)
        return -1;
    return 0;
}

/* Reads the replies of A's calls, the first at PIPE's *AT (advanced past
 * them), of which AVAIL were queued. */
void wk_chunk_acks_read(const wk_chunk_acks *a, hr_pipe *pipe, size_t *at, size_t avail,
                        wk_chunk_acked *out)
{
    bool calls[WK_CHUNK__SETTLED];

    wk_chunk_acks_calls(a, calls);
    for (int k = 0; k < WK_CHUNK__SETTLED; k++) {
        redisReply *reply;

        if (!calls[k])
            continue;
        if (avail == 0) {
            snprintf(out->errstr, sizeof out->errstr, "out of memory");
            out->failed[k] = true;
            out->rc = -1;
            continue;
        }
        reply = hr_pipe_reply(pipe, (*at)++, out->errstr, sizeof out->errstr);
        avail--;
        if (wk_chunk_counted(k == WK_CHUNK_DEAD ? HR_LUA_DEAD_LETTER : HR_LUA_ACK, reply,
                             &out->removed[k], 1, &out->counters, out->errstr,
                             sizeof out->errstr) == 0) {
            out->counters_new = true;
        } else {
            out->failed[k] = true;
            out->rc = -1;
        }
    }
}

/* Runs the calls of A on R (one round trip). */
void wk_chunk_acks_run(const wk_chunk *c, const wk_chunk_acks *a, hr_redis *r, wk_chunk_acked *out)
{
    hr_pipe *pipe = hr_pipe_new(r);
    size_t at = 0;

    if (pipe == NULL) {
        snprintf(out->errstr, sizeof out->errstr, "out of memory");
        wk_chunk_acks_calls(a, out->failed);
        out->rc = -1;
        return;
    }
    wk_chunk_acks_queue(c, a, pipe);
    /* A connection that failed makes every reply below report it. */
    hr_pipe_exec(pipe, out->errstr, sizeof out->errstr);
    wk_chunk_acks_read(a, pipe, &at, hr_pipe_count(pipe), out);
    hr_pipe_free(pipe);
}

/* Loop thread: what a flush of A answered, into C; what it could not
 * write goes back into C's buffers (A is emptied). */
void wk_chunk_acked_apply(wk_chunk *c, wk_chunk_acks *a, const wk_chunk_acked *acked)
{
    c->sent += acked->removed[WK_CHUNK_SENT];
    c->unregistered += acked->removed[WK_CHUNK_UNREGISTERED];
    c->opted_out += acked->removed[WK_CHUNK_OPTED_OUT];
    c->suppressed += acked->removed[WK_CHUNK_SUPPRESSED];
    c->failed += acked->removed[WK_CHUNK_DEAD];
    if (acked->counters_new) {
        c->counters = acked->counters;
        c->counters_new = true;
    }
    /* Written again with the next flush (ack.lua and dead_letter.lua count
     * only the uids still in the set, so a call that ran although its
     * reply was lost counts nobody twice); out of memory: they stay in
     * the set, for the chunk's next holder. */
    c->ack_failed = acked->rc != 0;
    if (wk_chunk_acks_give_back(c, a, acked->failed) != 0)
        c->ack_failed = true;
}

/* ---- flush ------------------------------------------------------------------------ */

typedef struct wk_chunk_flush_job {
    wk_redis_job job;
    wk_chunk *c;
    wk_chunk_acks acks;
    wk_chunk_acked acked;
} wk_chunk_flush_job;

static int wk_chunk_flush_queue(wk_redis_job *job, hr_pipe *pipe)
{
    wk_chunk_flush_job *j = (wk_chunk_flush_job *)job;

    return wk_chunk_acks_queue(j->c, &j->acks, pipe);
}

static void wk_chunk_flush_read(wk_redis_job *job, hr_pipe *pipe)
{
    wk_chunk_flush_job *j = (wk_chunk_flush_job *)job;
    size_t at = job->first;

    wk_chunk_acks_read(&j->acks, pipe, &at, job->count, &j->acked);
}

static void wk_chunk_flush_done(wk_redis_job *job)
{
    wk_chunk_flush_job *j = (wk_chunk_flush_job *)job;
    wk_chunk *c = j->c;

    c->jobs--;
    wk_chunk_acked_apply(c, &j->acks, &j->acked);
    c->hooks->flushed(c, j->acked.rc, j->acked.errstr);
    free(j);
}

static const wk_redis_ops wk_chunk_flush_ops = {
    .queue = wk_chunk_flush_queue, .read = wk_chunk_flush_read, .done = wk_chunk_flush_done};

int wk_chunk_flush(wk_redis *rd, wk_chunk *c)
{
    wk_chunk_flush_job *j;

    if (wk_chunk_acks_ncalls(&c->acks) == 0)
        return 0;
    if ((j = calloc(1, sizeof *j)) == NULL)
        return -1;
    j->job.ops = &wk_chunk_flush_ops;
    j->c = c;
    j->acks = c->acks;
    if (wk_chunk_submit(rd, c, &j->job) != 0)
        return -1;
    memset(&c->acks, 0, sizeof c->acks);
    return 0;
}
