/* hr_throttle: the per-recipient sliding-window throttle (see hr_throttle.h
 * and docs/throttle.md); the atomic step is common/lua/throttle.lua.
 *
 * This file resolves a task's rule, finds the throttle_key value, names the
 * window's key, and drives the script over a batch: up to THR_KEYS_PER_CALL
 * recipients of one rule per call, and the calls of up to
 * HR_THROTTLE_PIPE_MAX recipients in one hr_pipe, so a chunk costs one
 * round trip per slice. */
#include "hr_throttle.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hr_pipe.h"

/* The script's verdicts (lua/throttle.lua), each key's answered as
 * verdict + THR_LUA_COUNT_STEP * count. */
enum { THR_LUA_THROTTLED = 0, THR_LUA_ADDED = 1, THR_LUA_COUNTED = 2 };
#define THR_LUA_COUNT_STEP 4

int hr_throttle_rule_from_task(const hr_task *t, const hr_channel *ch, hr_throttle_rule *rule,
                               char *errstr, size_t errlen)
{
    memset(rule, 0, sizeof *rule);
    rule->task = t->id;
    if (t->throttle_limit == 0)
        return 0;
    if (t->throttle_limit < 0 || t->throttle_window_s < 1 ||
        t->throttle_window_s > HR_TASK_MAX_WINDOW_S) {
        snprintf(errstr, errlen,
                 "throttle_limit %" PRId64 " / throttle_window_s %" PRId64 " out of range",
                 t->throttle_limit, t->throttle_window_s);
        return -1;
    }
    if (t->throttle_mode == NULL)
        rule->mode = ch->throttle_mode;
    else if (strcmp(t->throttle_mode, "enforce") == 0)
        rule->mode = HR_THROTTLE_ENFORCE;
    else if (strcmp(t->throttle_mode, "shadow") == 0)
        rule->mode = HR_THROTTLE_SHADOW;
    else {
        snprintf(errstr, errlen, "throttle_mode \"%.32s\" is neither enforce nor shadow",
                 t->throttle_mode);
        return -1;
    }
    rule->limit = t->throttle_limit;
    rule->window_ms = t->throttle_window_s * 1000;
    return 0;
}

/* Copies S (length N) into BUF when it is a usable value. */
static const char *thr_copy(const char *s, size_t n, char *buf, size_t len)
{
    if (n == 0 || n >= len)
        return NULL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

/* A payload scalar as text; NULL for the types that cannot name a window. */
static const char *thr_payload_value(const cJSON *v, char *buf, size_t len)
{
    double d;
    int n;

    if (cJSON_IsString(v))
        return thr_copy(v->valuestring, strlen(v->valuestring), buf, len);
    if (cJSON_IsBool(v))
        return cJSON_IsTrue(v) ? thr_copy("true", 4, buf, len) : thr_copy("false", 5, buf, len);
    if (!cJSON_IsNumber(v))
        return NULL;
    /* 7 and 7.0 are one number in JSON; they must name one window. */
    d = v->valuedouble;
    if (d == floor(d) && fabs(d) < 9007199254740992.0)
        n = snprintf(buf, len, "%.0f", d);
    else
        n = snprintf(buf, len, "%.17g", d);
    return n > 0 && (size_t)n < len ? buf : NULL;
}

const char *hr_throttle_value(const char *attr, const cJSON *payload, const redisReply *user,
                              char *buf, size_t len)
{
    const char *found;
    size_t i;

    if (cJSON_IsObject(payload)) {
        found = thr_payload_value(cJSON_GetObjectItemCaseSensitive(payload, attr), buf, len);
        if (found != NULL)
            return found;
    }
    if (user == NULL || user->type != REDIS_REPLY_ARRAY)
        return NULL;
    /* HGETALL: field, value, field, value, ... */
    for (i = 0; i + 1 < user->elements; i += 2) {
        const redisReply *f = user->element[i], *v = user->element[i + 1];

        if (f->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
            strlen(attr) == f->len && memcmp(f->str, attr, f->len) == 0)
            return thr_copy(v->str, v->len, buf, len);
    }
    return NULL;
}

int hr_throttle_key(const hr_redis *r, const char *scope, const char *uid, const char *value,
                    char *buf, size_t len, char *errstr, size_t errlen)
{
    if (hr_key_throttle(hr_redis_prefix(r), buf, len, scope, uid, value) == NULL) {
        snprintf(errstr, errlen, "throttle key for uid %.32s longer than %zu bytes", uid, len - 1);
        return -1;
    }
    return 0;
}

/* Keys per script call on one Redis server.  A call of 100 keys took half
 * the Redis CPU per recipient of one call each (the EVALSHA, TIME and reply
 * once per call) and holds the server about half a millisecond; a cluster
 * gets one key per call (a script's keys must share a slot, and a chunk's
 * uids spread over all of them). */
#define THR_KEYS_PER_CALL 100

/* Whether two requests can share a call: the script takes one rule. */
static bool thr_same_rule(const hr_throttle_rule *a, const hr_throttle_rule *b)
{
    return a == b || (a->limit == b->limit && a->window_ms == b->window_ms && a->task == b->task);
}

/* Queues one script call for the N requests REQS, all under REQS[0]'s rule. */
static int thr_call(hr_pipe *pipe, const hr_throttle_req *reqs, size_t n, char *errstr,
                    size_t errlen)
{
    char limit_s[24], window_s[24], task_s[24];
    const char *argv[THR_KEYS_PER_CALL + 3];
    size_t i;

    for (i = 0; i < n; i++)
        argv[i] = reqs[i].key;
    snprintf(limit_s, sizeof limit_s, "%" PRId64, reqs[0].rule->limit);
    snprintf(window_s, sizeof window_s, "%" PRId64, reqs[0].rule->window_ms);
    snprintf(task_s, sizeof task_s, "%" PRId64, reqs[0].rule->task);
    argv[n] = limit_s;
    argv[n + 1] = window_s;
    argv[n + 2] = task_s;
    if (hr_pipe_eval(pipe, HR_LUA_THROTTLE, (int)n, (int)n + 3, argv, NULL) != 0) {
        snprintf(errstr, errlen, "throttle: out of memory");
        return -1;
    }
    return 0;
}

/* Turns the reply of the call for the N requests REQS into OUT.  Takes
 * ownership of REPLY. */
static int thr_parse(redisReply *reply, const hr_throttle_req *reqs, size_t n,
                     hr_throttle_result *out, char *errstr, size_t errlen)
{
    size_t i;
    int rc = -1;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 1 + n) {
        snprintf(errstr, errlen, "throttle.lua: unexpected reply type %d with %zu elements",
                 reply->type, reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0);
        goto done;
    }
    for (i = 0; i < reply->elements; i++) {
        if (reply->element[i]->type != REDIS_REPLY_INTEGER || reply->element[i]->integer < 0) {
            snprintf(errstr, errlen, "throttle.lua: element %zu of type %d", i,
                     reply->element[i]->type);
            goto done;
        }
    }
    for (i = 0; i < n; i++) {
        hr_throttle_result *res = &out[i];
        long long code = reply->element[1 + i]->integer;

        switch (code % THR_LUA_COUNT_STEP) {
        case THR_LUA_ADDED:
        case THR_LUA_COUNTED:
            res->verdict = HR_THROTTLE_PASS;
            break;
        case THR_LUA_THROTTLED:
            res->verdict = reqs[i].rule->mode == HR_THROTTLE_SHADOW ? HR_THROTTLE_SHADOWED
                                                                    : HR_THROTTLE_BLOCKED;
            break;
        default:
            snprintf(errstr, errlen, "throttle.lua: unknown verdict %lld",
                     code % THR_LUA_COUNT_STEP);
            goto done;
        }
        res->now_ms = reply->element[0]->integer;
        res->count = code / THR_LUA_COUNT_STEP;
    }
    rc = 0;
done:
    freeReplyObject(reply);
    return rc;
}

/* One slice of at most HR_THROTTLE_PIPE_MAX requests in one round trip, in
 * calls of up to PER_CALL requests under one rule (hr_pipe replays a call
 * that met NOSCRIPT). */
static int thr_slice(hr_pipe *pipe, size_t per_call, const hr_throttle_req *reqs, size_t n,
                     hr_throttle_result *out, char *errstr, size_t errlen)
{
    size_t first[HR_THROTTLE_PIPE_MAX + 1]; /* each call's first request */
    size_t i, k, c, ncalls = 0;
    redisReply *reply;
    char detail[256];
    int rc = 0;

    hr_pipe_reset(pipe);
    for (i = 0; i < n; i += k) {
        for (k = 1; i + k < n && k < per_call && thr_same_rule(reqs[i].rule, reqs[i + k].rule); k++)
            ;
        first[ncalls++] = i;
        if (thr_call(pipe, reqs + i, k, errstr, errlen) != 0)
            return -1;
    }
    first[ncalls] = n;
    if (hr_pipe_exec(pipe, detail, sizeof detail) != 0) {
        snprintf(errstr, errlen, "throttle: %s", detail);
        return -1;
    }
    for (c = 0; c < ncalls && rc == 0; c++) {
        reply = hr_pipe_reply(pipe, c, detail, sizeof detail);
        if (reply == NULL) {
            snprintf(errstr, errlen, "throttle: %s", detail);
            rc = -1;
        } else {
            rc = thr_parse(reply, reqs + first[c], first[c + 1] - first[c], out + first[c], errstr,
                           errlen);
        }
    }
    return rc;
}

int hr_throttle_check(hr_redis *r, const hr_throttle_req *reqs, size_t n, hr_throttle_result *out,
                      char *errstr, size_t errlen)
{
    size_t done, slice, per_call = hr_redis_cluster(r) != NULL ? 1 : THR_KEYS_PER_CALL;
    hr_pipe *pipe;

    /* A limit of 0 would make the script throttle everyone. */
    for (done = 0; done < n; done++) {
        if (reqs[done].rule->limit < 1 || reqs[done].rule->window_ms < 1) {
            snprintf(errstr, errlen,
                     "throttle: limit %" PRId64 " / window %" PRId64 " ms out of range",
                     reqs[done].rule->limit, reqs[done].rule->window_ms);
            return -1;
        }
    }
    pipe = hr_pipe_new(r);
    if (pipe == NULL) {
        snprintf(errstr, errlen, "throttle: out of memory");
        return -1;
    }
    for (done = 0; done < n; done += slice) {
        slice = n - done < HR_THROTTLE_PIPE_MAX ? n - done : HR_THROTTLE_PIPE_MAX;
        if (thr_slice(pipe, per_call, reqs + done, slice, out + done, errstr, errlen) != 0)
            break;
    }
    hr_pipe_free(pipe);
    return done < n ? -1 : 0;
}
