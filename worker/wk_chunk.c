/* wk_chunk: a chunk's lease, members, throttle, acknowledgements and end,
 * as jobs on the worker's Redis thread (see wk_chunk.h).
 *
 * Each job is a struct of its own that holds its inputs (copied or
 * immutable: the chunk's keys, members and task) and its results; RUN or
 * QUEUE/READ fill the results on the Redis thread, and the job's DONE moves
 * them into the chunk on the loop thread, then calls the chunk's hook and
 * frees the job.  Read top-down: the acknowledgement buffers and their
 * calls (shared by flush and end), then open, check, flush, end. */
#include "wk_chunk.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_finish.h"
#include "hr_log.h"
#include "hr_pipe.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_clock.h"

/* The stats hash counters the scripts answer after their own values. */
#define WK_CHUNK_NCOUNTERS 5

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
    hr_key_task(prefix, c->k_ctl, sizeof c->k_ctl, msg->task, HR_KEY_CTL);
    return c;
}

int wk_chunk_row(const wk_chunk *c)
{
    return c->msg.sharded ? c->msg.shard : HR_SHARD_NONE;
}

/* Frees the buffers of A and empties it. */
static void wk_chunk_acks_free(wk_chunk_acks *a)
{
    for (size_t i = 0; i < a->ndead; i++)
        free(a->dead[i].reason);
    free(a->sent);
    free(a->unregs);
    free(a->dead);
    memset(a, 0, sizeof *a);
}

/* The users of a members reply of N elements (NULL = none). */
static void wk_chunk_users_free(redisReply **users, size_t n)
{
    if (users == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        if (users[i] != NULL)
            freeReplyObject(users[i]);
    free(users);
}

void wk_chunk_free(wk_chunk *c)
{
    if (c == NULL)
        return;
    wk_chunk_users_free(c->users, c->members != NULL ? c->members->elements : 0);
    if (c->members != NULL)
        freeReplyObject(c->members);
    free(c->pushes);
    free(c->verdicts);
    hr_addr_list_free(&c->addrs);
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

/* ---- acknowledgements -------------------------------------------------------- */

int wk_chunk_ack(wk_chunk *c, wk_chunk_settled how, const char *uid, const char *reason)
{
    wk_chunk_acks *a = &c->acks;

    /* The buffers hold one ack batch in all; a flush takes them, so the
     * next settled recipient allocates anew. */
    switch (how) {
    case WK_CHUNK_SENT:
        if (a->sent == NULL && (a->sent = calloc(c->ack_batch, sizeof *a->sent)) == NULL)
            return -1;
        a->sent[a->nsent++] = uid;
        break;
    case WK_CHUNK_UNREGISTERED:
        if (a->unregs == NULL && (a->unregs = calloc(c->ack_batch, sizeof *a->unregs)) == NULL)
            return -1;
        a->unregs[a->nunregs++] = uid;
        break;
    case WK_CHUNK_DEAD:
        if (a->dead == NULL && (a->dead = calloc(c->ack_batch, sizeof *a->dead)) == NULL)
            return -1;
        a->dead[a->ndead].reason = strdup(reason);
        if (a->dead[a->ndead].reason == NULL)
            return -1;
        a->dead[a->ndead++].uid = uid;
        break;
    }
    return a->nsent + a->nunregs + a->ndead >= c->ack_batch;
}

/* Reads REPLY (taken; NULL = the call failed, ERRSTR set) of script ID: an
 * array of N integers into OUT, then the stats hash counters into
 * *COUNTERS.  -1 with ERRSTR on another reply. */
static int wk_chunk_counted(hr_lua_id id, redisReply *reply, int64_t *out, size_t n,
                            wk_chunk_counters *counters, char *errstr, size_t errlen)
{
    int64_t v[8];
    int rc = -1;

    if (reply == NULL)
        return -1;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != n + WK_CHUNK_NCOUNTERS ||
        n + WK_CHUNK_NCOUNTERS > 8) {
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
                                    .unregistered = v[n + 4]};
    rc = 0;
done:
    freeReplyObject(reply);
    return rc;
}

/* Queues ack.lua for the N UIDS of C, counted under stats FIELD, plus
 * RETRIED retries.  0, or -1 when out of memory. */
static int wk_chunk_ack_queue(const wk_chunk *c, hr_pipe *pipe, const char *field, int64_t retried,
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

/* The calls a flush of A makes, in this order: ack.lua (sent and
 * retries), ack.lua (unregistered), dead_letter.lua. */
static void wk_chunk_acks_calls(const wk_chunk_acks *a, bool calls[3])
{
    calls[0] = a->nsent > 0 || a->retried > 0;
    calls[1] = a->nunregs > 0;
    calls[2] = a->ndead > 0;
}

/* Queues the calls of A on PIPE.  0, or -1 when out of memory (the calls
 * queued so far stay queued). */
static int wk_chunk_acks_queue(const wk_chunk *c, const wk_chunk_acks *a, hr_pipe *pipe)
{
    bool calls[3];

    wk_chunk_acks_calls(a, calls);
    if (calls[0] && wk_chunk_ack_queue(c, pipe, "sent", a->retried, a->sent, a->nsent) != 0)
        return -1;
    if (calls[1] && wk_chunk_ack_queue(c, pipe, "unregistered", 0, a->unregs, a->nunregs) != 0)
        return -1;
    if (calls[2] && wk_chunk_dead_queue(c, pipe, a->dead, a->ndead) != 0)
        return -1;
    return 0;
}

/* What the calls of one flush answered. */
typedef struct wk_chunk_acked {
    int64_t removed[3]; /* left the set: sent, unregistered, failed */
    wk_chunk_counters counters;
    bool counters_new;
    int rc;
    char errstr[256];
} wk_chunk_acked;

/* Reads the replies of A's calls, the first at PIPE's *AT (advanced past
 * them), of which AVAIL were queued. */
static void wk_chunk_acks_read(const wk_chunk_acks *a, hr_pipe *pipe, size_t *at, size_t avail,
                               wk_chunk_acked *out)
{
    static const hr_lua_id ids[3] = {HR_LUA_ACK, HR_LUA_ACK, HR_LUA_DEAD_LETTER};
    bool calls[3];

    wk_chunk_acks_calls(a, calls);
    for (int k = 0; k < 3; k++) {
        redisReply *reply;

        if (!calls[k])
            continue;
        if (avail == 0) {
            snprintf(out->errstr, sizeof out->errstr, "out of memory");
            out->rc = -1;
            continue;
        }
        reply = hr_pipe_reply(pipe, (*at)++, out->errstr, sizeof out->errstr);
        avail--;
        if (wk_chunk_counted(ids[k], reply, &out->removed[k], 1, &out->counters, out->errstr,
                             sizeof out->errstr) == 0)
            out->counters_new = true;
        else
            out->rc = -1;
    }
}

/* Runs the calls of A on R (one round trip). */
static void wk_chunk_acks_run(const wk_chunk *c, const wk_chunk_acks *a, hr_redis *r,
                              wk_chunk_acked *out)
{
    hr_pipe *pipe = hr_pipe_new(r);
    size_t at = 0;

    if (pipe == NULL) {
        snprintf(out->errstr, sizeof out->errstr, "out of memory");
        out->rc = -1;
        return;
    }
    wk_chunk_acks_queue(c, a, pipe);
    /* A connection that failed makes every reply below report it. */
    hr_pipe_exec(pipe, out->errstr, sizeof out->errstr);
    wk_chunk_acks_read(a, pipe, &at, hr_pipe_count(pipe), out);
    hr_pipe_free(pipe);
}

/* Loop thread: what a flush answered, into C. */
static void wk_chunk_acked_apply(wk_chunk *c, const wk_chunk_acked *acked)
{
    c->sent += acked->removed[0];
    c->unregistered += acked->removed[1];
    c->failed += acked->removed[2];
    if (acked->counters_new) {
        c->counters = acked->counters;
        c->counters_new = true;
    }
    if (acked->rc != 0)
        c->ack_failed = true;
}

/* Submits JOB (the start of its allocated struct) for C: 0 with C->jobs
 * counting it, or -1 with JOB freed. */
static int wk_chunk_submit(wk_redis *rd, wk_chunk *c, wk_redis_job *job)
{
    if (wk_redis_submit(rd, job) != 0) {
        free(job);
        return -1;
    }
    c->jobs++;
    return 0;
}

/* ---- open ----------------------------------------------------------------------- */

typedef struct wk_chunk_open_job {
    wk_redis_job job;
    wk_chunk *c;
    char owner[160];
    int lease_ms;
    bool addressed;
    hr_addr_platform platform;
    const char *app; /* the channel's configuration: stays */
    wk_chunk_opened res;
    /* moved into the chunk by DONE */
    redisReply *members;
    redisReply **users;
    wk_push *pushes;
    size_t npushes;
    hr_addr_list addrs;
    int64_t invalid;
    wk_chunk_acked dead; /* the invalid members' dead_letter.lua */
    int64_t user_errors;
    char user_error[160];
    char errstr[512];
} wk_chunk_open_job;

wk_chunk_halt wk_chunk_halt_of(const redisReply *reply)
{
    hr_control control;

    if (reply->type != REDIS_REPLY_STRING || hr_control_parse(reply->str, &control) < 0)
        return WK_CHUNK_RUN;
    return control == HR_CONTROL_PAUSE    ? WK_CHUNK_PARK
           : control == HR_CONTROL_CANCEL ? WK_CHUNK_CANCEL
                                          : WK_CHUNK_RUN;
}

/* SMEMBERS of C's set into J->members. */
static int wk_chunk_read_members(wk_chunk_open_job *j, hr_redis *r)
{
    const char *argv[] = {"SMEMBERS", j->c->k_set};

    j->members = hr_redis_cmd(r, j->errstr, sizeof j->errstr, 2, argv, NULL);
    if (j->members == NULL)
        return -1;
    if (j->members->type != REDIS_REPLY_ARRAY) {
        snprintf(j->errstr, sizeof j->errstr, "SMEMBERS: unexpected reply type %d",
                 j->members->type);
        return -1;
    }
    return 0;
}

/* The lease after a SET NX that found it taken: ours (a redelivery of a
 * chunk this process held before; the lifecycle has already ruled out one
 * it is pushing now), or gone meanwhile (SET once more), or another's.  1
 * held, 0 busy, -1 error. */
static int wk_chunk_lease_retry(wk_chunk_open_job *j, hr_redis *r, const char *ms)
{
    const char *set[] = {"SET", j->c->k_lease, j->owner, "NX", "PX", ms};
    const char *get[] = {"GET", j->c->k_lease};

    for (int round = 0; round < 2; round++) {
        redisReply *reply = hr_redis_cmd(r, j->errstr, sizeof j->errstr, 2, get, NULL);
        bool ours, gone;

        if (reply == NULL)
            return -1;
        ours = reply->type == REDIS_REPLY_STRING && strcmp(reply->str, j->owner) == 0;
        gone = reply->type == REDIS_REPLY_NIL;
        freeReplyObject(reply);
        if (ours)
            return 1;
        if (!gone || round == 1)
            return 0;
        reply = hr_redis_cmd(r, j->errstr, sizeof j->errstr, 6, set, NULL);
        if (reply == NULL)
            return -1;
        gone = reply->type == REDIS_REPLY_STATUS;
        freeReplyObject(reply);
        if (gone)
            return 1;
    }
    return 0;
}

/* One round trip: the control key, SET lease NX PX, SMEMBERS.  A
 * wk_chunk_open_result or -1; J->res.halt gets the control key's word. */
static int wk_chunk_open_lease(wk_chunk_open_job *j, hr_redis *r)
{
    const wk_chunk *c = j->c;
    char ms[24];
    const char *get[] = {"GET", c->k_ctl};
    const char *set[] = {"SET", c->k_lease, j->owner, "NX", "PX", ms};
    const char *smembers[] = {"SMEMBERS", c->k_set};
    hr_pipe *pipe = hr_pipe_new(r);
    redisReply *reply;
    int held, rc = -1;

    snprintf(ms, sizeof ms, "%d", j->lease_ms);
    if (pipe == NULL || hr_pipe_cmd(pipe, 2, get, NULL) != 0 ||
        hr_pipe_cmd(pipe, 6, set, NULL) != 0 || hr_pipe_cmd(pipe, 2, smembers, NULL) != 0) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        goto done;
    }
    /* A connection that failed makes every reply below report it. */
    hr_pipe_exec(pipe, j->errstr, sizeof j->errstr);
    if ((reply = hr_pipe_reply(pipe, 0, j->errstr, sizeof j->errstr)) == NULL)
        goto done;
    j->res.halt = wk_chunk_halt_of(reply);
    freeReplyObject(reply);
    if ((reply = hr_pipe_reply(pipe, 1, j->errstr, sizeof j->errstr)) == NULL)
        goto done;
    held = reply->type == REDIS_REPLY_STATUS;
    freeReplyObject(reply);
    if (!held && (held = wk_chunk_lease_retry(j, r, ms)) < 0)
        goto done;
    if (!held) {
        rc = WK_CHUNK_BUSY;
        goto done;
    }
    /* Read with the lease already ours, or once more now that it is: a
     * holder that let it go may have acknowledged some meanwhile. */
    j->members = hr_pipe_reply(pipe, 2, j->errstr, sizeof j->errstr);
    if (j->members != NULL && j->members->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(j->members);
        j->members = NULL;
    }
    if (j->members == NULL && wk_chunk_read_members(j, r) != 0)
        goto done;
    rc = j->members->elements == 0 ? WK_CHUNK_EMPTY : WK_CHUNK_STARTED;
done:
    hr_pipe_free(pipe);
    return rc;
}

/* Dead-letters the members that are not valid uids ("invalid uid"): they
 * are never pushed; push_delivery and the limiter key on numeric uids. */
static int wk_chunk_drop_invalid(wk_chunk_open_job *j, hr_redis *r)
{
    wk_chunk_acks a = {0};
    size_t n = j->members->elements;
    int rc = -1;

    for (size_t i = 0; i < n; i++) {
        const redisReply *m = j->members->element[i];

        if (m->type == REDIS_REPLY_STRING && wk_chunk_uid_valid(m->str))
            continue;
        if (a.dead == NULL && (a.dead = calloc(n, sizeof *a.dead)) == NULL)
            goto oom;
        a.dead[a.ndead].uid = m->type == REDIS_REPLY_STRING ? m->str : "";
        if ((a.dead[a.ndead++].reason = strdup("invalid uid")) == NULL)
            goto oom;
    }
    j->invalid = (int64_t)a.ndead;
    if (a.ndead == 0)
        return 0;
    wk_chunk_acks_run(j->c, &a, r, &j->dead);
    if (j->dead.rc != 0)
        snprintf(j->errstr, sizeof j->errstr, "%s", j->dead.errstr);
    rc = j->dead.rc;
    wk_chunk_acks_free(&a);
    return rc;
oom:
    snprintf(j->errstr, sizeof j->errstr, "out of memory");
    wk_chunk_acks_free(&a);
    return -1;
}

/* HGETALL user:<uid> of every member, pipelined, into J->users. */
static int wk_chunk_fetch_users(wk_chunk_open_job *j, hr_redis *r)
{
    char key[HR_KEY_MAX];
    size_t n = j->members->elements;
    hr_pipe *pipe = hr_pipe_new(r);
    int rc = -1;

    j->users = calloc(n, sizeof *j->users);
    if (j->users == NULL || pipe == NULL) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const char *argv[] = {"HGETALL", key};

        /* Only a member that is no uid (dead-lettered, never pushed) can
         * be too long for a key: its HGETALL then reads nothing. */
        if (hr_key_user(hr_redis_prefix(r), key, sizeof key, j->members->element[i]->str) == NULL)
            key[0] = '\0';
        if (hr_pipe_cmd(pipe, 2, argv, NULL) != 0) {
            snprintf(j->errstr, sizeof j->errstr, "out of memory");
            goto done;
        }
    }
    if (hr_pipe_exec(pipe, j->errstr, sizeof j->errstr) != 0)
        goto done;
    for (size_t i = 0; i < n; i++) {
        char detail[256];

        j->users[i] = hr_pipe_reply(pipe, i, detail, sizeof detail);
        if (j->users[i] != NULL)
            continue;
        /* An error reply for this user alone (WRONGTYPE: not a hash): the
         * recipient gets no attributes, the chunk goes on. */
        j->user_errors++;
        if (j->user_error[0] == '\0')
            snprintf(j->user_error, sizeof j->user_error, "uid=%.40s error=%.100s",
                     j->members->element[i]->str, detail);
    }
    rc = 0;
done:
    hr_pipe_free(pipe);
    return rc;
}

/* The addresses of J's pushes on its platform; each push gets its own
 * (none: it will be settled unregistered). */
static int wk_chunk_fetch_addrs(wk_chunk_open_job *j, hr_redis *r)
{
    const char **uids;
    size_t k = 0;
    char key[HR_KEY_MAX];
    redisReply *reply;
    bool synced;

    /* Without the synced mark Redis lost the address book (a flush, a
     * restart without its AOF) and the dispatchers' sync has not rebuilt
     * it yet: an empty set would read as "no address" and the recipient
     * would be counted unregistered though MySQL holds its addresses.  The
     * chunk waits for the sync instead (the lifecycle drops it, the sweeper
     * publishes it again). */
    reply = hr_redis_cmdf(r, j->errstr, sizeof j->errstr, "EXISTS %s",
                          hr_key_addr_synced(hr_redis_prefix(r), key, sizeof key));
    if (reply == NULL)
        return -1;
    synced = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    if (!synced) {
        snprintf(j->errstr, sizeof j->errstr,
                 "the address book is not in Redis (no %s): waiting for the "
                 "dispatchers' address sync",
                 key);
        return -1;
    }
    uids = calloc(j->npushes ? j->npushes : 1, sizeof *uids);
    if (uids == NULL) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < j->npushes; i++)
        uids[i] = j->pushes[i].uid;
    if (hr_addr_fetch(r, uids, j->npushes, j->platform, j->app, &j->addrs, &j->res.bad_addrs,
                      j->errstr, sizeof j->errstr) != 0) {
        free(uids);
        return -1;
    }
    free(uids);
    /* A uid's addresses are contiguous, in the order of the pushes. */
    for (size_t i = 0; i < j->npushes; i++) {
        wk_push *push = &j->pushes[i];

        push->addrs = k < j->addrs.a.n ? &j->addrs.a.v[k] : NULL;
        while (k < j->addrs.a.n && j->addrs.a.v[k].idx == i) {
            push->naddrs++;
            k++;
        }
        if (push->naddrs == 0)
            push->addrs = NULL;
    }
    return 0;
}

/* One push per valid member. */
static int wk_chunk_make_pushes(wk_chunk_open_job *j)
{
    wk_chunk *c = j->c;

    j->pushes = calloc(j->members->elements, sizeof *j->pushes);
    if (j->pushes == NULL) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < j->members->elements; i++) {
        const redisReply *m = j->members->element[i];
        wk_push *push;

        if (m->type != REDIS_REPLY_STRING || !wk_chunk_uid_valid(m->str))
            continue;
        push = &j->pushes[j->npushes++];
        push->owner = c;
        push->task = c->task;
        push->uid = m->str;
        push->user = j->users != NULL ? j->users[i] : NULL;
        push->hold = &c->held;
        push->state = WK_PUSH_IDLE;
    }
    return 0;
}

static void wk_chunk_open_run(wk_redis_job *job, hr_redis *r)
{
    wk_chunk_open_job *j = (wk_chunk_open_job *)job;
    const wk_chunk *c = j->c;
    int rc = wk_chunk_open_lease(j, r);

    j->res.rc = rc;
    /* Halted, expired, busy or empty: the lifecycle needs no more. */
    if (rc != WK_CHUNK_STARTED || j->res.halt != WK_CHUNK_RUN ||
        hr_task_expired(c->task->row, hr_clock_now_ms()))
        return;
    if (wk_chunk_drop_invalid(j, r) != 0 ||
        (c->task->uses_user && wk_chunk_fetch_users(j, r) != 0) || wk_chunk_make_pushes(j) != 0 ||
        (j->addressed && wk_chunk_fetch_addrs(j, r) != 0))
        j->res.rc = -1;
}

static void wk_chunk_open_done(wk_redis_job *job)
{
    wk_chunk_open_job *j = (wk_chunk_open_job *)job;
    wk_chunk *c = j->c;

    c->jobs--;
    /* Only one open runs at a time, and a busy or failed one left the
     * chunk's members empty: nothing of C is overwritten. */
    if (j->members != NULL && c->members == NULL) {
        c->members = j->members;
        c->users = j->users;
        c->pushes = j->pushes;
        c->npushes = j->npushes;
        c->addrs = j->addrs;
        j->members = NULL;
        j->users = NULL;
        j->pushes = NULL;
        memset(&j->addrs, 0, sizeof j->addrs);
    }
    c->invalid += j->invalid;
    c->user_errors += j->user_errors;
    if (c->user_error[0] == '\0')
        memcpy(c->user_error, j->user_error, sizeof c->user_error);
    wk_chunk_acked_apply(c, &j->dead); /* a failure fails the open too: C is dropped */
    if (c->phase == WK_CHUNK_OPENING)
        c->phase = WK_CHUNK_NEW;
    j->res.errstr = j->errstr;
    c->hooks->opened(c, &j->res);
    wk_chunk_users_free(j->users, j->members != NULL ? j->members->elements : 0);
    if (j->members != NULL)
        freeReplyObject(j->members);
    free(j->pushes);
    hr_addr_list_free(&j->addrs);
    free(j);
}

static const wk_redis_ops wk_chunk_open_ops = {.run = wk_chunk_open_run,
                                               .done = wk_chunk_open_done};

int wk_chunk_open(wk_redis *rd, wk_chunk *c, const char *owner, int lease_ms,
                  const hr_addr_platform *platform, const char *app)
{
    wk_chunk_open_job *j = calloc(1, sizeof *j);

    if (j == NULL)
        return -1;
    j->job.ops = &wk_chunk_open_ops;
    j->c = c;
    snprintf(j->owner, sizeof j->owner, "%s", owner);
    j->lease_ms = lease_ms;
    if (platform != NULL) {
        j->addressed = true;
        j->platform = *platform;
        j->app = app;
    }
    if (wk_chunk_submit(rd, c, &j->job) != 0)
        return -1;
    c->phase = WK_CHUNK_OPENING;
    return 0;
}

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
            value = hr_throttle_value(row->throttle_key, c->task->payload, push->user, vbuf,
                                      sizeof vbuf);
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

    if (c->verdicts == NULL && (c->verdicts = calloc(c->npushes ? c->npushes : 1, 1)) == NULL)
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
    wk_chunk_acked_apply(c, &j->acked);
    c->hooks->flushed(c, j->acked.rc, j->acked.errstr);
    wk_chunk_acks_free(&j->acks);
    free(j);
}

static const wk_redis_ops wk_chunk_flush_ops = {
    .queue = wk_chunk_flush_queue, .read = wk_chunk_flush_read, .done = wk_chunk_flush_done};

int wk_chunk_flush(wk_redis *rd, wk_chunk *c)
{
    wk_chunk_flush_job *j;
    bool calls[3];

    wk_chunk_acks_calls(&c->acks, calls);
    if (!calls[0] && !calls[1] && !calls[2])
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

/* ---- end ----------------------------------------------------------------------------- */

typedef struct wk_chunk_end_job {
    wk_redis_job job;
    wk_chunk *c;
    wk_chunk_ending how;
    hr_outcome outcome; /* DROP */
    char owner[160], seq[24];
    wk_chunk_acks acks;
    wk_chunk_acked acked;
    wk_chunk_ended res;
    hr_outcomes *stats; /* a sharded task's last chunk: every shard's (res.stats) */
    char errstr[256];
} wk_chunk_end_job;

/* CLOSE and RELEASE: the flush's calls, then the scripts, in the round. */
static int wk_chunk_end_queue(wk_redis_job *job, hr_pipe *pipe)
{
    wk_chunk_end_job *j = (wk_chunk_end_job *)job;
    const wk_chunk *c = j->c;
    const char *close[] = {c->k_set,  c->k_lease, c->k_pending, c->k_stats,
                           c->k_subs, j->seq,     j->owner};
    const char *release[] = {c->k_lease, j->owner};

    if (wk_chunk_acks_queue(c, &j->acks, pipe) != 0 ||
        (j->how == WK_CHUNK_CLOSE && hr_pipe_eval(pipe, HR_LUA_CHUNK_DONE, 5, 7, close, NULL) != 0))
        return -1;
    /* Behind a close, for a set found not empty (members appeared after
     * the read, or an ack failed): the sweeper redelivers the chunk, and
     * the next holder need not wait out the lease.  After a close that
     * deleted the lease it finds nothing. */
    return hr_pipe_eval(pipe, HR_LUA_LEASE_RELEASE, 1, 2, release, NULL);
}

static void wk_chunk_end_read(wk_redis_job *job, hr_pipe *pipe)
{
    wk_chunk_end_job *j = (wk_chunk_end_job *)job;
    size_t at = job->first, calls = job->count, acks;
    bool flags[3];
    redisReply *reply;

    wk_chunk_acks_calls(&j->acks, flags);
    acks = (size_t)flags[0] + (size_t)flags[1] + (size_t)flags[2];
    wk_chunk_acks_read(&j->acks, pipe, &at, calls < acks ? calls : acks, &j->acked);
    calls = calls < acks ? 0 : calls - acks;
    j->res.rc = -1;
    if (calls < (j->how == WK_CHUNK_CLOSE ? 2u : 1u)) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        return;
    }
    if (j->how == WK_CHUNK_CLOSE &&
        wk_chunk_counted(HR_LUA_CHUNK_DONE, hr_pipe_reply(pipe, at++, j->errstr, sizeof j->errstr),
                         j->res.res, 3, &j->acked.counters, j->errstr, sizeof j->errstr) != 0)
        return;
    if (j->how == WK_CHUNK_CLOSE)
        j->acked.counters_new = true;
    reply = hr_pipe_reply(pipe, at, j->errstr, sizeof j->errstr);
    if (reply == NULL && j->how == WK_CHUNK_RELEASE)
        return;
    freeReplyObject(reply);
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
                       &j->res.res[0], &j->res.res[1], j->errstr, sizeof j->errstr) == 0)
        j->res.rc = 0;
}

/* The close of a sharded task's chunk, which left its shard empty: are
 * the task's other shards empty too (one pipelined round trip each for
 * pending and subs), and then every shard's stats hash (see
 * wk_chunk_ended.stats).  Leaves res[1] -1 when they could not be read. */
static void wk_chunk_end_task_left(wk_chunk_end_job *j, hr_redis *r)
{
    const wk_chunk *c = j->c;
    int shards = (int)c->task->row->shards;
    int64_t pending, subs;

    if (hr_shard_sum(r, c->msg.task, shards, "HLEN", HR_KEY_PENDING, &pending, j->errstr,
                     sizeof j->errstr) != 0 ||
        hr_shard_sum(r, c->msg.task, shards, "SCARD", HR_KEY_SUBS, &subs, j->errstr,
                     sizeof j->errstr) != 0)
        goto unknown;
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
    wk_chunk_acked_apply(c, &j->acked);
    j->res.ack_failed = c->ack_failed;
    j->res.errstr = j->res.rc != 0 ? j->errstr : j->acked.errstr;
    c->hooks->ended(c, &j->res);
    wk_chunk_acks_free(&j->acks);
    free(j->stats);
    free(j);
}

static const wk_redis_ops wk_chunk_end_batched_ops = {
    .queue = wk_chunk_end_queue, .read = wk_chunk_end_read, .done = wk_chunk_end_done};
static const wk_redis_ops wk_chunk_end_run_ops = {.run = wk_chunk_end_run,
                                                  .done = wk_chunk_end_done};
static const wk_redis_ops wk_chunk_end_sharded_ops = {.run = wk_chunk_end_sharded_run,
                                                      .done = wk_chunk_end_done};

int wk_chunk_finalize(wk_redis *rd, wk_chunk *c, wk_chunk_ending how, const char *owner)
{
    wk_chunk_end_job *j = calloc(1, sizeof *j);

    if (j == NULL)
        return -1;
    j->job.ops = how == WK_CHUNK_DROP                      ? &wk_chunk_end_run_ops
                 : how == WK_CHUNK_CLOSE && c->msg.sharded ? &wk_chunk_end_sharded_ops
                                                           : &wk_chunk_end_batched_ops;
    j->c = c;
    j->how = how;
    j->outcome = c->halt == WK_CHUNK_EXPIRE ? HR_OUTCOME_EXPIRED : HR_OUTCOME_CANCELLED;
    snprintf(j->owner, sizeof j->owner, "%s", owner);
    snprintf(j->seq, sizeof j->seq, "%" PRId64, c->msg.seq);
    j->acks = c->acks;
    if (wk_chunk_submit(rd, c, &j->job) != 0)
        return -1;
    memset(&c->acks, 0, sizeof c->acks);
    c->phase = WK_CHUNK_ENDING;
    c->ending = how;
    return 0;
}
