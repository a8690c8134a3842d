/* wk_chunk_open: a chunk's open and the later parts of its read, jobs on
 * the Redis thread (see wk_chunk_open.h). */
#include "wk_chunk_open.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_clock.h"
#include "hr_pipe.h"
#include "wk_chunk_acks.h"
#include "wk_consent.h"

/* ---- open ----------------------------------------------------------------------- */

typedef struct wk_chunk_open_job {
    wk_redis_job job;
    wk_chunk *c;
    bool open; /* the open (lease, members, first part), or a later part */
    char owner[160];
    int lease_ms;
    bool addressed;
    hr_addr_platform platform;
    const char *app; /* the channel's configuration: stays */
    wk_chunk_opened res;
    /* moved into the chunk by DONE */
    redisReply *members;  /* the open's */
    wk_chunk_part *parts; /* the open's: room for every part's */
    wk_consent cs;        /* users, addresses, the consent verdicts (wk_consent.h) */
    wk_push *pushes;      /* the open's: room for every member; a part's: its own */
    size_t npushes;
    wk_chunk_acked dead; /* the invalid members' dead_letter.lua */
    char errstr[512];
} wk_chunk_open_job;

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
    j->res.invalid = (int64_t)a.ndead;
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

/* One push per member read that the consent lets through, with its
 * addresses on an addressed channel (none: it will be settled
 * unregistered), into J->pushes (the open's has room for them all). */
static int wk_chunk_make_pushes(wk_chunk_open_job *j, const redisReply *members)
{
    wk_chunk *c = j->c;
    const wk_consent *cs = &j->cs;

    if (j->pushes == NULL && (j->pushes = calloc(cs->n ? cs->n : 1, sizeof *j->pushes)) == NULL) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < cs->n; k++) {
        wk_push *push;

        if (cs->verdicts[k] != WK_CONSENT_PUSH)
            continue;
        push = &j->pushes[j->npushes++];
        push->owner = c;
        push->task = c->task;
        push->uid = members->element[cs->from + k]->str;
        push->user = cs->full_users ? cs->users[k] : NULL;
        push->variant = wk_task_variant(c->task, push->uid, wk_consent_locale(cs, k));
        push->hold = &c->held;
        push->state = WK_PUSH_IDLE;
        if (cs->addr_n != NULL && cs->addr_n[k] > 0) {
            push->addrs = &cs->addrs.a.v[cs->addr_first[k]];
            push->naddrs = cs->addr_n[k];
        }
    }
    return 0;
}

size_t wk_chunk_parts(size_t n)
{
    return n <= WK_CHUNK_FIRST_PART
               ? 1
               : 1 + (n - WK_CHUNK_FIRST_PART + HR_ADDR_FETCH_BATCH - 1) / HR_ADDR_FETCH_BATCH;
}

void wk_chunk_part_range(size_t n, size_t i, size_t *from, size_t *to)
{
    *from = i == 0 ? 0 : WK_CHUNK_FIRST_PART + (i - 1) * HR_ADDR_FETCH_BATCH;
    *to = i == 0 ? WK_CHUNK_FIRST_PART : *from + HR_ADDR_FETCH_BATCH;
    if (*to > n)
        *to = n;
}

/* The open before its first part's read: lease and members, the invalid
 * members dead-lettered, room for every member's push and every part's
 * addresses.  0 when the first part is to be read. */
static int wk_chunk_open_start(wk_chunk_open_job *j, hr_redis *r)
{
    const wk_chunk *c = j->c;
    size_t n;

    j->res.rc = wk_chunk_open_lease(j, r);
    /* Halted, expired, busy or empty: the lifecycle needs no more. */
    if (j->res.rc != WK_CHUNK_STARTED || j->res.halt != WK_CHUNK_RUN ||
        hr_task_expired(c->task->row, hr_clock_now_ms()))
        return -1;
    n = j->members->elements;
    if (wk_chunk_drop_invalid(j, r) != 0)
        goto failed;
    if ((j->parts = calloc(wk_chunk_parts(n), sizeof *j->parts)) == NULL ||
        (j->pushes = calloc(n, sizeof *j->pushes)) == NULL) {
        snprintf(j->errstr, sizeof j->errstr, "out of memory");
        goto failed;
    }
    wk_chunk_part_range(n, 0, &j->res.from, &j->res.to);
    return 0;
failed:
    j->res.rc = -1;
    return -1;
}

static void wk_chunk_open_run(wk_redis_job *job, hr_redis *r)
{
    wk_chunk_open_job *j = (wk_chunk_open_job *)job;
    const wk_chunk *c = j->c;
    const redisReply *members;

    if (j->open && wk_chunk_open_start(j, r) != 0)
        return;
    members = j->open ? j->members : c->members;
    if (wk_consent_read(&j->cs, r, c, members, j->res.from, j->res.to,
                        j->addressed ? &j->platform : NULL, j->app, j->errstr,
                        sizeof j->errstr) != 0 ||
        wk_consent_decide(&j->cs, r, c, members, hr_clock_now_ms(), j->errstr, sizeof j->errstr) !=
            0 ||
        wk_chunk_make_pushes(j, members) != 0)
        j->res.rc = -1;
}

/* Moves what the part read into C: its pushes after C's, what they point
 * at into C's parts. */
static void wk_chunk_open_keep(wk_chunk *c, wk_chunk_open_job *j)
{
    if (j->open) {
        c->npushes = j->npushes; /* made in place */
    } else {
        memcpy(c->pushes + c->npushes, j->pushes, j->npushes * sizeof *j->pushes);
        c->npushes += j->npushes;
    }
    /* The templates read the whole hashes; the consent fields alone are
     * not kept. */
    c->parts[c->nparts].arena = j->cs.full_users ? j->cs.arena : NULL;
    c->parts[c->nparts++].addrs = j->cs.addrs;
    if (j->cs.full_users)
        j->cs.arena = NULL;
    memset(&j->cs.addrs, 0, sizeof j->cs.addrs);
}

static void wk_chunk_open_done(wk_redis_job *job)
{
    wk_chunk_open_job *j = (wk_chunk_open_job *)job;
    wk_chunk *c = j->c;

    c->jobs--;
    /* Only one open runs at a time, a busy or failed one left the chunk's
     * members empty, and its later parts run only after it answered and
     * before a reset (the chunk's jobs are done first): nothing of C is
     * overwritten. */
    if (j->open && j->members != NULL && c->members == NULL && j->res.rc == WK_CHUNK_STARTED) {
        c->members = j->members;
        c->parts = j->parts;
        c->pushes = j->pushes;
        c->no_profiles = j->cs.no_profiles;
        j->members = NULL;
        j->parts = NULL;
        j->pushes = NULL;
    }
    if (j->res.rc == WK_CHUNK_STARTED && j->cs.verdicts != NULL && c->parts != NULL)
        wk_chunk_open_keep(c, j);
    j->res.npushes = j->npushes;
    c->invalid += j->res.invalid;
    c->user_errors += j->cs.user_errors;
    if (c->user_error[0] == '\0')
        memcpy(c->user_error, j->cs.user_error, sizeof c->user_error);
    c->deferred += j->cs.deferred;
    /* A failure fails the open too, and the members not written stay in
     * the set for the open that follows: nothing to give back. */
    wk_chunk_acked_apply(c, &(wk_chunk_acks){0}, &j->dead);
    wk_chunk_acked_apply(c, &(wk_chunk_acks){0}, &j->cs.acked);
    j->res.bad_addrs = j->cs.bad_addrs;
    j->res.user_errors = j->cs.user_errors;
    j->res.user_error = j->cs.user_error;
    j->res.verdicts = j->cs.verdicts;
    j->res.deferred = j->cs.deferred;
    j->res.errstr = j->errstr;
    if (j->open)
        c->hooks->opened(c, &j->res);
    else
        c->hooks->read(c, &j->res);
    wk_consent_free(&j->cs);
    if (j->members != NULL)
        freeReplyObject(j->members);
    free(j->parts);
    free(j->pushes);
    free(j);
}

static const wk_redis_ops wk_chunk_open_ops = {.run = wk_chunk_open_run,
                                               .done = wk_chunk_open_done};

/* A job for C (NULL when out of memory); PLATFORM and APP as
 * wk_chunk_open's. */
static wk_chunk_open_job *wk_chunk_open_job_new(wk_chunk *c, const hr_addr_platform *platform,
                                                const char *app)
{
    wk_chunk_open_job *j = calloc(1, sizeof *j);

    if (j == NULL)
        return NULL;
    j->job.ops = &wk_chunk_open_ops;
    j->c = c;
    if (platform != NULL) {
        j->addressed = true;
        j->platform = *platform;
        j->app = app;
    }
    return j;
}

int wk_chunk_open(wk_redis *rd, wk_chunk *c, const char *owner, int lease_ms,
                  const hr_addr_platform *platform, const char *app)
{
    wk_chunk_open_job *j = wk_chunk_open_job_new(c, platform, app);

    if (j == NULL)
        return -1;
    j->open = true;
    snprintf(j->owner, sizeof j->owner, "%s", owner);
    j->lease_ms = lease_ms;
    return wk_chunk_submit(rd, c, &j->job);
}

int wk_chunk_read(wk_redis *rd, wk_chunk *c, size_t from, size_t to,
                  const hr_addr_platform *platform, const char *app)
{
    wk_chunk_open_job *j = wk_chunk_open_job_new(c, platform, app);

    if (j == NULL)
        return -1;
    j->res.from = from;
    j->res.to = to;
    return wk_chunk_submit(rd, c, &j->job);
}
