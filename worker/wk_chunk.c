/* wk_chunk: a chunk's lease, members, acknowledgements and close
 * (see wk_chunk.h). */
#include "wk_chunk.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_pipe.h"
#include "hr_shard.h"

wk_chunk *wk_chunk_new(hr_redis *r, const hr_chunkmsg *msg, int32_t partition, int64_t offset,
                       wk_task *task, int ack_batch)
{
    wk_chunk *c = calloc(1, sizeof *c);
    const char *prefix = hr_redis_prefix(r);

    if (c == NULL)
        return NULL;
    c->msg = *msg;
    c->partition = partition;
    c->offset = offset;
    c->task = task;
    c->ack_batch = (size_t)ack_batch;
    c->acks = calloc(c->ack_batch, sizeof *c->acks);
    c->unregs = calloc(c->ack_batch, sizeof *c->unregs);
    if (c->acks == NULL || c->unregs == NULL) {
        free(c->acks);
        free(c->unregs);
        free(c);
        return NULL;
    }
    /* HR_KEY_MAX holds every task key (hr_keys.h): no builder fails.  The
     * shard's keys (shard 0 = the task's own for a task of one set). */
    hr_key_shard_chunk(prefix, c->k_set, sizeof c->k_set, msg->task, msg->shard, msg->seq);
    hr_key_shard_lease(prefix, c->k_lease, sizeof c->k_lease, msg->task, msg->shard, msg->seq);
    hr_key_shard(prefix, c->k_pending, sizeof c->k_pending, msg->task, msg->shard, HR_KEY_PENDING);
    hr_key_shard(prefix, c->k_stats, sizeof c->k_stats, msg->task, msg->shard, HR_KEY_STATS);
    hr_key_shard(prefix, c->k_subs, sizeof c->k_subs, msg->task, msg->shard, HR_KEY_SUBS);
    hr_key_shard(prefix, c->k_failed, sizeof c->k_failed, msg->task, msg->shard, HR_KEY_FAILED);
    return c;
}

int wk_chunk_row(const wk_chunk *c)
{
    return c->msg.sharded ? c->msg.shard : HR_SHARD_NONE;
}

int wk_chunk_task_left(const wk_chunk *c, hr_redis *r, int64_t *pending, int64_t *subs,
                       char *errstr, size_t errlen)
{
    int shards = (int)c->task->row->shards;

    return hr_shard_sum(r, c->msg.task, shards, "HLEN", HR_KEY_PENDING, pending, errstr, errlen) ==
                       0 &&
                   hr_shard_sum(r, c->msg.task, shards, "SCARD", HR_KEY_SUBS, subs, errstr,
                                errlen) == 0
               ? 0
               : -1;
}

/* Frees the buffered dead letters' reasons and empties the buffer. */
static void wk_chunk_dead_clear(wk_chunk *c)
{
    for (size_t i = 0; i < c->ndead; i++)
        free(c->dead[i].reason);
    c->ndead = 0;
}

void wk_chunk_free(wk_chunk *c)
{
    if (c == NULL)
        return;
    if (c->users != NULL)
        for (size_t i = 0; i < c->members->elements; i++)
            if (c->users[i] != NULL)
                freeReplyObject(c->users[i]);
    free(c->users);
    if (c->members != NULL)
        freeReplyObject(c->members);
    free(c->pushes);
    free(c->verdicts);
    free(c->acks);
    free(c->unregs);
    hr_addr_list_free(&c->addrs);
    wk_chunk_dead_clear(c);
    free(c->dead);
    free(c);
}

/* SET NX PX; when taken, whether the holder is us.  A lease that expires
 * between the SET and the GET is tried once more. */
static int wk_chunk_lease(wk_chunk *c, hr_redis *r, const char *owner, int lease_ms, char *errstr,
                          size_t errlen)
{
    char ms[24];
    const char *set[] = {"SET", c->k_lease, owner, "NX", "PX", ms};
    const char *get[] = {"GET", c->k_lease};
    redisReply *reply;
    int rc = WK_CHUNK_BUSY;

    snprintf(ms, sizeof ms, "%d", lease_ms);
    for (int round = 0; round < 2; round++) {
        bool gone;

        reply = hr_redis_cmd(r, errstr, errlen, 6, set, NULL);
        if (reply == NULL)
            return -1;
        rc = reply->type == REDIS_REPLY_STATUS ? WK_CHUNK_STARTED : WK_CHUNK_BUSY;
        freeReplyObject(reply);
        if (rc == WK_CHUNK_STARTED)
            return rc;
        reply = hr_redis_cmd(r, errstr, errlen, 2, get, NULL);
        if (reply == NULL)
            return -1;
        /* Our own id: a redelivery of a chunk this process held before (the
         * worker has already ruled out one it is pushing now). */
        if (reply->type == REDIS_REPLY_STRING && strcmp(reply->str, owner) == 0)
            rc = WK_CHUNK_STARTED;
        gone = reply->type == REDIS_REPLY_NIL;
        freeReplyObject(reply);
        if (!gone)
            break;
    }
    return rc;
}

static int wk_chunk_fetch_users(wk_chunk *c, hr_redis *r, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX];
    size_t n = c->members->elements;
    hr_pipe *pipe = hr_pipe_new(r);
    int rc = -1;

    c->users = calloc(n, sizeof *c->users);
    if (c->users == NULL || pipe == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const char *argv[] = {"HGETALL", key};

        /* Only a member that is no uid (dead-lettered, never pushed) can
         * be too long for a key: its HGETALL then reads nothing. */
        if (hr_key_user(hr_redis_prefix(r), key, sizeof key, c->members->element[i]->str) == NULL)
            key[0] = '\0';
        if (hr_pipe_cmd(pipe, 2, argv, NULL) != 0) {
            snprintf(errstr, errlen, "out of memory");
            goto done;
        }
    }
    if (hr_pipe_exec(pipe, errstr, errlen) != 0)
        goto done;
    for (size_t i = 0; i < n; i++) {
        char detail[256];

        c->users[i] = hr_pipe_reply(pipe, i, detail, sizeof detail);
        if (c->users[i] != NULL)
            continue;
        /* An error reply for this user alone (WRONGTYPE: not a hash): the
         * recipient gets no attributes, the chunk goes on. */
        c->user_errors++;
        if (c->user_error[0] == '\0')
            snprintf(c->user_error, sizeof c->user_error, "uid=%.40s error=%.100s",
                     c->members->element[i]->str, detail);
    }
    rc = 0;
done:
    hr_pipe_free(pipe);
    return rc;
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

/* Dead-letters the members that are not valid uids ("invalid uid"): they
 * are never pushed; push_delivery and the limiter key on numeric uids. */
static int wk_chunk_drop_invalid(wk_chunk *c, hr_redis *r, char *errstr, size_t errlen)
{
    for (size_t i = 0; i < c->members->elements; i++) {
        const redisReply *m = c->members->element[i];
        int full;

        if (m->type == REDIS_REPLY_STRING && wk_chunk_uid_valid(m->str))
            continue;
        full = wk_chunk_dead(c, m->type == REDIS_REPLY_STRING ? m->str : "", "invalid uid");
        if (full < 0) {
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
        if (full == 1 && wk_chunk_flush(c, r, errstr, errlen) != 0)
            return -1;
        c->invalid++;
    }
    return wk_chunk_flush(c, r, errstr, errlen);
}

int wk_chunk_open(wk_chunk *c, hr_redis *r, const char *owner, int lease_ms, char *errstr,
                  size_t errlen)
{
    const char *smembers[] = {"SMEMBERS", c->k_set};
    int rc = wk_chunk_lease(c, r, owner, lease_ms, errstr, errlen);

    if (rc != WK_CHUNK_STARTED)
        return rc;
    c->members = hr_redis_cmd(r, errstr, errlen, 2, smembers, NULL);
    if (c->members == NULL)
        return -1;
    if (c->members->type != REDIS_REPLY_ARRAY) {
        snprintf(errstr, errlen, "SMEMBERS: unexpected reply type %d", c->members->type);
        return -1;
    }
    if (c->members->elements == 0)
        return WK_CHUNK_EMPTY;
    if (wk_chunk_drop_invalid(c, r, errstr, errlen) != 0)
        return -1;
    if (c->task->uses_user && wk_chunk_fetch_users(c, r, errstr, errlen) != 0)
        return -1;
    c->pushes = calloc(c->members->elements, sizeof *c->pushes);
    if (c->pushes == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < c->members->elements; i++) {
        const redisReply *m = c->members->element[i];
        wk_push *push;

        if (m->type != REDIS_REPLY_STRING || !wk_chunk_uid_valid(m->str))
            continue;
        push = &c->pushes[c->npushes++];
        push->owner = c;
        push->task = c->task;
        push->uid = m->str;
        push->user = c->users != NULL ? c->users[i] : NULL;
        push->hold = &c->held;
        push->state = WK_PUSH_IDLE;
    }
    c->open = c->npushes;
    return WK_CHUNK_STARTED;
}

/* The stats hash counters the scripts answer after their own values. */
#define WK_CHUNK_NCOUNTERS 5

int wk_chunk_fetch_addrs(wk_chunk *c, hr_redis *r, hr_addr_platform platform, const char *app,
                         size_t *bad, char *errstr, size_t errlen)
{
    const char **uids;
    size_t k = 0;
    char key[HR_KEY_MAX];
    redisReply *reply;
    bool synced;

    *bad = 0;
    /* Without the synced mark Redis lost the address book (a flush, a
     * restart without its AOF) and the dispatchers' sync has not rebuilt
     * it yet: an empty set would read as "no address" and the recipient
     * would be counted unregistered though MySQL holds its addresses.  The
     * chunk waits for the sync instead (the caller drops it, the sweeper
     * publishes it again). */
    reply = hr_redis_cmdf(r, errstr, errlen, "EXISTS %s",
                          hr_key_addr_synced(hr_redis_prefix(r), key, sizeof key));
    if (reply == NULL)
        return -1;
    synced = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    if (!synced) {
        snprintf(errstr, errlen,
                 "the address book is not in Redis (no %s): waiting for the "
                 "dispatchers' address sync",
                 key);
        return -1;
    }
    uids = calloc(c->npushes ? c->npushes : 1, sizeof *uids);
    if (uids == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < c->npushes; i++)
        uids[i] = c->pushes[i].uid;
    if (hr_addr_fetch(r, uids, c->npushes, platform, app, &c->addrs, bad, errstr, errlen) != 0) {
        free(uids);
        return -1;
    }
    free(uids);
    /* A uid's addresses are contiguous, in the order of the pushes. */
    for (size_t i = 0; i < c->npushes; i++) {
        wk_push *push = &c->pushes[i];

        push->addrs = k < c->addrs.a.n ? &c->addrs.a.v[k] : NULL;
        while (k < c->addrs.a.n && c->addrs.a.v[k].idx == i) {
            push->naddrs++;
            k++;
        }
        if (push->naddrs == 0)
            push->addrs = NULL;
    }
    return 0;
}

/* Reads REPLY (taken; NULL = the call failed, ERRSTR set) of script ID: an
 * array of N integers into OUT, then the stats hash counters into
 * C->counters.  -1 with ERRSTR on another reply. */
static int wk_chunk_counted(wk_chunk *c, hr_lua_id id, redisReply *reply, int64_t *out, size_t n,
                            char *errstr, size_t errlen)
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
    c->counters = (wk_chunk_counters){.sent = v[n],
                                      .failed = v[n + 1],
                                      .throttled = v[n + 2],
                                      .retried = v[n + 3],
                                      .unregistered = v[n + 4]};
    c->counters_new = true;
    rc = 0;
done:
    freeReplyObject(reply);
    return rc;
}

/* Reads an integer reply of script ID; -1 with ERRSTR otherwise. */
static int wk_chunk_eval_int(hr_redis *r, hr_lua_id id, int nkeys, int argc, const char **argv,
                             int64_t *out, char *errstr, size_t errlen)
{
    redisReply *reply = hr_redis_eval(r, id, nkeys, argc, argv, NULL, errstr, errlen);

    if (reply == NULL)
        return -1;
    if (reply->type != REDIS_REPLY_INTEGER) {
        snprintf(errstr, errlen, "script %d: unexpected reply type %d", (int)id, reply->type);
        freeReplyObject(reply);
        return -1;
    }
    *out = reply->integer;
    freeReplyObject(reply);
    return 0;
}

/* The arguments of ack.lua for the N UIDS, counted under stats FIELD, plus
 * RETRIED_S (the caller's buffer); the caller frees the array.  NULL when
 * out of memory. */
static const char **wk_chunk_ack_argv(const wk_chunk *c, const char *field, const char *retried_s,
                                      const char *const *uids, size_t n)
{
    const char **argv = calloc(n + 4, sizeof *argv);

    if (argv == NULL)
        return NULL;
    argv[0] = c->k_set;
    argv[1] = c->k_stats;
    argv[2] = retried_s;
    argv[3] = field;
    if (n > 0)
        memcpy(argv + 4, uids, n * sizeof *argv);
    return argv;
}

/* The arguments of dead_letter.lua for the buffered failures; the caller
 * frees the array.  NULL when out of memory. */
static const char **wk_chunk_dead_argv(const wk_chunk *c)
{
    const char **argv = calloc(2 * c->ndead + 3, sizeof *argv);

    if (argv == NULL)
        return NULL;
    argv[0] = c->k_set;
    argv[1] = c->k_failed;
    argv[2] = c->k_stats;
    for (size_t i = 0; i < c->ndead; i++) {
        argv[3 + 2 * i] = c->dead[i].uid;
        argv[4 + 2 * i] = c->dead[i].reason;
    }
    return argv;
}

/* ack.lua for the N UIDS, counted under stats FIELD (no retries). */
static int wk_chunk_ack_eval(wk_chunk *c, hr_redis *r, const char *field, const char *const *uids,
                             size_t n, int64_t *removed, char *errstr, size_t errlen)
{
    const char **argv = wk_chunk_ack_argv(c, field, "0", uids, n);
    redisReply *reply;

    if (argv == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    reply = hr_redis_eval(r, HR_LUA_ACK, 2, (int)n + 4, argv, NULL, errstr, errlen);
    free(argv);
    return wk_chunk_counted(c, HR_LUA_ACK, reply, removed, 1, errstr, errlen);
}

/* Whether the buffers hold an ack batch. */
static bool wk_chunk_full(const wk_chunk *c)
{
    return c->nacks + c->ndead + c->nunregs >= c->ack_batch;
}

bool wk_chunk_ack(wk_chunk *c, const char *uid)
{
    c->acks[c->nacks++] = uid;
    return wk_chunk_full(c);
}

bool wk_chunk_unregistered(wk_chunk *c, const char *uid)
{
    c->unregs[c->nunregs++] = uid;
    return wk_chunk_full(c);
}

int wk_chunk_dead(wk_chunk *c, const char *uid, const char *reason)
{
    if (c->dead == NULL && (c->dead = calloc(c->ack_batch, sizeof *c->dead)) == NULL)
        return -1;
    c->dead[c->ndead].reason = strdup(reason);
    if (c->dead[c->ndead].reason == NULL)
        return -1;
    c->dead[c->ndead++].uid = uid;
    return wk_chunk_full(c);
}

/* One pipelined round trip: ack.lua for the buffered deliveries and
 * retries, ack.lua under 'unregistered' for the buffered recipients
 * without a live address, dead_letter.lua for the buffered failures.
 * What succeeded leaves its buffer even when another call failed.  A
 * NOSCRIPT is replayed by the pipeline (the scripts only count uids still
 * in the set: a repeat is safe). */
int wk_chunk_flush(wk_chunk *c, hr_redis *r, char *errstr, size_t errlen)
{
    bool ack = c->nacks > 0 || c->retried_unflushed > 0, dead = c->ndead > 0;
    bool unreg = c->nunregs > 0;
    const char **ack_argv = NULL, **dead_argv = NULL, **unreg_argv = NULL;
    char retried_s[24];
    hr_pipe *pipe = NULL;
    /* the calls' places in the pipeline, in this order */
    size_t iunreg = ack ? 1 : 0, idead = iunreg + (unreg ? 1 : 0);
    int64_t removed;
    int rc = -1;

    if (!ack && !dead && !unreg)
        return 0;
    snprintf(retried_s, sizeof retried_s, "%" PRId64, c->retried_unflushed);
    if (ack)
        ack_argv = wk_chunk_ack_argv(c, "sent", retried_s, c->acks, c->nacks);
    if (unreg)
        unreg_argv = wk_chunk_ack_argv(c, "unregistered", "0", c->unregs, c->nunregs);
    if (dead)
        dead_argv = wk_chunk_dead_argv(c);
    pipe = hr_pipe_new(r);
    if ((ack && ack_argv == NULL) || (dead && dead_argv == NULL) || (unreg && unreg_argv == NULL) ||
        pipe == NULL ||
        (ack && hr_pipe_eval(pipe, HR_LUA_ACK, 2, (int)c->nacks + 4, ack_argv, NULL) != 0) ||
        (unreg && hr_pipe_eval(pipe, HR_LUA_ACK, 2, (int)c->nunregs + 4, unreg_argv, NULL) != 0) ||
        (dead &&
         hr_pipe_eval(pipe, HR_LUA_DEAD_LETTER, 3, 2 * (int)c->ndead + 3, dead_argv, NULL) != 0)) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    /* A connection that failed makes every reply below report it. */
    hr_pipe_exec(pipe, errstr, errlen);
    rc = 0;
    if (ack) {
        if (wk_chunk_counted(c, HR_LUA_ACK, hr_pipe_reply(pipe, 0, errstr, errlen), &removed, 1,
                             errstr, errlen) == 0) {
            c->sent += removed;
            c->nacks = 0;
            c->retried_unflushed = 0;
        } else {
            rc = -1;
        }
    }
    if (unreg) {
        if (wk_chunk_counted(c, HR_LUA_ACK, hr_pipe_reply(pipe, iunreg, errstr, errlen), &removed,
                             1, errstr, errlen) == 0) {
            c->unregistered += removed;
            c->nunregs = 0;
        } else {
            rc = -1;
        }
    }
    if (dead) {
        if (wk_chunk_counted(c, HR_LUA_DEAD_LETTER, hr_pipe_reply(pipe, idead, errstr, errlen),
                             &removed, 1, errstr, errlen) == 0) {
            c->failed += removed;
            wk_chunk_dead_clear(c);
        } else {
            rc = -1;
        }
    }
done:
    hr_pipe_free(pipe);
    free(ack_argv);
    free(unreg_argv);
    free(dead_argv);
    return rc;
}

/* HINCRBY stats FIELD N, when N > 0. */
static int wk_chunk_count(wk_chunk *c, hr_redis *r, const char *field, int64_t n, char *errstr,
                          size_t errlen)
{
    char n_s[24];
    const char *argv[] = {"HINCRBY", c->k_stats, field, n_s};
    redisReply *reply;

    if (n == 0)
        return 0;
    snprintf(n_s, sizeof n_s, "%" PRId64, n);
    reply = hr_redis_cmd(r, errstr, errlen, 4, argv, NULL);
    if (reply == NULL)
        return -1;
    freeReplyObject(reply);
    return 0;
}

/* The throttle keys of pushes [FIRST, FIRST+N) into KEYS (N slots of
 * HR_THROTTLE_KEY_MAX) and REQS; *MISSING counts absent attributes. */
static int wk_chunk_throttle_keys(wk_chunk *c, hr_redis *r, size_t first, size_t n,
                                  char (*keys)[HR_THROTTLE_KEY_MAX], hr_throttle_req *reqs,
                                  int64_t *missing, char *errstr, size_t errlen)
{
    const hr_task *row = c->task->row;

    for (size_t i = 0; i < n; i++) {
        const wk_push *push = &c->pushes[first + i];
        char vbuf[HR_THROTTLE_VALUE_MAX];
        const char *value = NULL;

        if (row->throttle_key != NULL) {
            value = hr_throttle_value(row->throttle_key, c->task->payload, push->user, vbuf,
                                      sizeof vbuf);
            if (value == NULL)
                (*missing)++;
        }
        if (hr_throttle_key(r, row->throttle_scope, push->uid, value, keys[i], sizeof keys[i],
                            errstr, errlen) != 0)
            return -1;
        reqs[i].key = keys[i];
        reqs[i].rule = &c->task->throttle;
    }
    return 0;
}

int wk_chunk_throttle(wk_chunk *c, hr_redis *r, wk_chunk_throttled *out, char *errstr,
                      size_t errlen)
{
    size_t slice = c->npushes < HR_THROTTLE_PIPE_MAX ? c->npushes : HR_THROTTLE_PIPE_MAX;
    char(*keys)[HR_THROTTLE_KEY_MAX] = calloc(slice, sizeof *keys);
    hr_throttle_req *reqs = calloc(slice, sizeof *reqs);
    hr_throttle_result *res = calloc(slice, sizeof *res);
    const char **blocked = calloc(slice, sizeof *blocked);
    int rc = -1;

    memset(out, 0, sizeof *out);
    c->verdicts = calloc(c->npushes, sizeof *c->verdicts);
    if (keys == NULL || reqs == NULL || res == NULL || blocked == NULL || c->verdicts == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    /* Slices bound the key memory; each is one pipelined round trip. */
    for (size_t first = 0; first < c->npushes; first += slice) {
        size_t n = c->npushes - first < slice ? c->npushes - first : slice, nblocked = 0;
        int64_t removed;

        if (wk_chunk_throttle_keys(c, r, first, n, keys, reqs, &out->key_missing, errstr, errlen) !=
                0 ||
            hr_throttle_check(r, reqs, n, res, errstr, errlen) != 0)
            goto done;
        for (size_t i = 0; i < n; i++) {
            c->verdicts[first + i] = (uint8_t)res[i].verdict;
            if (res[i].verdict == HR_THROTTLE_BLOCKED)
                blocked[nblocked++] = c->pushes[first + i].uid;
            else if (res[i].verdict == HR_THROTTLE_SHADOWED)
                out->shadowed++;
        }
        if (nblocked == 0)
            continue;
        if (wk_chunk_ack_eval(c, r, "throttled", blocked, nblocked, &removed, errstr, errlen) != 0)
            goto done;
        out->blocked += (int64_t)nblocked;
        out->removed += removed;
        c->open -= nblocked;
    }
    if (wk_chunk_count(c, r, "throttle_shadowed", out->shadowed, errstr, errlen) != 0 ||
        wk_chunk_count(c, r, "throttle_key_missing", out->key_missing, errstr, errlen) != 0)
        goto done;
    c->throttled = out->removed;
    rc = 0;
done:
    free(keys);
    free(reqs);
    free(res);
    free(blocked);
    return rc;
}

int wk_chunk_close(wk_chunk *c, hr_redis *r, const char *owner, int64_t res[3], char *errstr,
                   size_t errlen)
{
    char seq[24];
    const char *argv[] = {c->k_set, c->k_lease, c->k_pending, c->k_stats, c->k_subs, seq, owner};

    snprintf(seq, sizeof seq, "%" PRId64, c->msg.seq);
    return wk_chunk_counted(c, HR_LUA_CHUNK_DONE,
                            hr_redis_eval(r, HR_LUA_CHUNK_DONE, 5, 7, argv, NULL, errstr, errlen),
                            res, 3, errstr, errlen);
}

int wk_chunk_release(wk_chunk *c, hr_redis *r, const char *owner, char *errstr, size_t errlen)
{
    const char *argv[] = {c->k_lease, owner};
    int64_t released;

    return wk_chunk_eval_int(r, HR_LUA_LEASE_RELEASE, 1, 2, argv, &released, errstr, errlen);
}
