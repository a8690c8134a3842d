/* hr_throttle: the per-recipient sliding-window throttle (see hr_throttle.h
 * and docs/throttle.md); the atomic step is common/lua/throttle.lua.
 *
 * This file resolves a task's rule, finds the throttle_key value, names the
 * stream key, and drives the script over a batch: the calls of up to
 * HR_THROTTLE_PIPE_MAX recipients are appended to the connection, then all
 * their replies are read, so a chunk costs one round trip per slice.  Every
 * appended call is read back even after an error, so the connection stays
 * in step for the next command. */
#include "hr_throttle.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The script's verdict codes (lua/throttle.lua). */
enum { THR_LUA_THROTTLED = 0, THR_LUA_ADDED = 1, THR_LUA_COUNTED = 2 };

int hr_throttle_rule_from_task(const hr_task *t, const hr_channel *ch, hr_throttle_rule *rule,
                               char *errstr, size_t errlen)
{
    memset(rule, 0, sizeof *rule);
    rule->task = t->id;
    if (t->throttle_limit == 0)
        return 0;
    if (t->throttle_limit < 0 || t->throttle_window_s < 1 ||
        t->throttle_window_s > HR_TASK_MAX_WINDOW_S) {
        snprintf(errstr, errlen, "throttle_limit %" PRId64 " / throttle_window_s %" PRId64
                 " out of range", t->throttle_limit, t->throttle_window_s);
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
    int n;

    if (value != NULL)
        n = snprintf(buf, len, "%sthr:%s:%s:%s", hr_redis_prefix(r), scope, uid, value);
    else
        n = snprintf(buf, len, "%sthr:%s:%s", hr_redis_prefix(r), scope, uid);
    if (n < 0 || (size_t)n >= len) {
        snprintf(errstr, errlen, "throttle key for uid %.32s longer than %zu bytes", uid, len - 1);
        return -1;
    }
    return 0;
}

/* Appends (or, with PIPE false, runs) one script call for REQ; a run call's
 * reply goes to *REPLY. */
static int thr_call(hr_redis *r, const hr_throttle_req *req, bool pipe, redisReply **reply,
                    char *errstr, size_t errlen)
{
    char limit_s[24], window_s[24], task_s[24];
    const char *argv[4] = {req->key, limit_s, window_s, task_s};

    snprintf(limit_s, sizeof limit_s, "%" PRId64, req->rule->limit);
    snprintf(window_s, sizeof window_s, "%" PRId64, req->rule->window_ms);
    snprintf(task_s, sizeof task_s, "%" PRId64, req->rule->task);
    if (pipe) {
        if (hr_redis_pipe_eval(r, HR_LUA_THROTTLE, 1, 4, argv, NULL) != 0) {
            snprintf(errstr, errlen, "throttle: cannot queue the script call");
            return -1;
        }
        return 0;
    }
    *reply = hr_redis_eval(r, HR_LUA_THROTTLE, 1, 4, argv, NULL, errstr, errlen);
    return *reply != NULL ? 0 : -1;
}

/* Turns one script reply into RES.  Takes ownership of REPLY. */
static int thr_parse(redisReply *reply, const hr_throttle_rule *rule, hr_throttle_result *res,
                     char *errstr, size_t errlen)
{
    int rc = -1;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        reply->element[1]->type != REDIS_REPLY_INTEGER ||
        reply->element[2]->type != REDIS_REPLY_INTEGER) {
        snprintf(errstr, errlen, "throttle.lua: unexpected reply type %d", reply->type);
        goto done;
    }
    switch (reply->element[0]->integer) {
    case THR_LUA_ADDED:
    case THR_LUA_COUNTED:
        res->verdict = HR_THROTTLE_PASS;
        break;
    case THR_LUA_THROTTLED:
        res->verdict = rule->mode == HR_THROTTLE_SHADOW ? HR_THROTTLE_SHADOWED
                                                        : HR_THROTTLE_BLOCKED;
        break;
    default:
        snprintf(errstr, errlen, "throttle.lua: unknown verdict %lld",
                 reply->element[0]->integer);
        goto done;
    }
    res->now_ms = reply->element[1]->integer;
    res->count = reply->element[2]->integer;
    rc = 0;
done:
    freeReplyObject(reply);
    return rc;
}

/* One slice of at most HR_THROTTLE_PIPE_MAX requests: one round trip, plus
 * one more per call that met NOSCRIPT (SCRIPT FLUSH mid-batch; such a call
 * did not run, so running it again counts nothing twice). */
static int thr_slice(hr_redis *r, const hr_throttle_req *reqs, size_t n, hr_throttle_result *out,
                     char *errstr, size_t errlen)
{
    bool noscript[HR_THROTTLE_PIPE_MAX] = {false};
    size_t queued, i;
    bool any_noscript = false;
    redisReply *reply;
    char why[256];
    int rc = 0;

    for (queued = 0; queued < n; queued++) {
        if (thr_call(r, &reqs[queued], true, NULL, errstr, errlen) != 0) {
            rc = -1;
            break;
        }
    }
    for (i = 0; i < queued; i++) {
        reply = hr_redis_pipe_reply(r, why, sizeof why);
        if (reply == NULL) {
            if (strncmp(why, "NOSCRIPT", 8) == 0) {
                noscript[i] = any_noscript = true;
            } else if (rc == 0) {
                snprintf(errstr, errlen, "throttle: %s", why);
                rc = -1;
            }
            continue;
        }
        if (rc == 0)
            rc = thr_parse(reply, reqs[i].rule, &out[i], errstr, errlen);
        else
            freeReplyObject(reply);
    }
    if (rc != 0 || !any_noscript)
        return rc;
    /* hr_redis_eval reloads the script on NOSCRIPT and repeats the call. */
    for (i = 0; i < n; i++) {
        if (!noscript[i])
            continue;
        if (thr_call(r, &reqs[i], false, &reply, errstr, errlen) != 0 ||
            thr_parse(reply, reqs[i].rule, &out[i], errstr, errlen) != 0)
            return -1;
    }
    return 0;
}

int hr_throttle_check(hr_redis *r, const hr_throttle_req *reqs, size_t n,
                      hr_throttle_result *out, char *errstr, size_t errlen)
{
    size_t done, slice;

    /* A limit of 0 would make the script throttle everyone. */
    for (done = 0; done < n; done++) {
        if (reqs[done].rule->limit < 1 || reqs[done].rule->window_ms < 1) {
            snprintf(errstr, errlen, "throttle: limit %" PRId64 " / window %" PRId64
                     " ms out of range", reqs[done].rule->limit, reqs[done].rule->window_ms);
            return -1;
        }
    }
    for (done = 0; done < n; done += slice) {
        slice = n - done < HR_THROTTLE_PIPE_MAX ? n - done : HR_THROTTLE_PIPE_MAX;
        if (thr_slice(r, reqs + done, slice, out + done, errstr, errlen) != 0)
            return -1;
    }
    return 0;
}
