/* hr_ratelimit: the cluster-wide per-window rate limiter (see
 * hr_ratelimit.h); the atomic steps are common/lua/ratelimit.lua and
 * common/lua/share.lua, which read Redis's clock (TIME). */
#include "hr_ratelimit.h"

#include <inttypes.h>
#include <stdio.h>

/* Runs script ID (NKEYS keys, then limit and want, then the NEXTRA
 * arguments EXTRA) and turns its reply, {grant, wait_ms[, rate]}, into
 * *GRANTED, *WAIT_MS and *RATE (when not NULL). */
static int rl_run(hr_redis *r, hr_lua_id id, int nkeys, char keys[][HR_KEY_MAX], int64_t limit,
                  int64_t want, const char *const *extra, int nextra, int64_t *granted,
                  int64_t *wait_ms, int64_t *rate, char *errstr, size_t errlen)
{
    char limit_s[24], want_s[24];
    const char *argv[10];
    size_t need = rate != NULL ? 3 : 2;
    int argc = 0;
    redisReply *reply;

    for (int i = 0; i < nkeys; i++)
        argv[argc++] = keys[i];
    snprintf(limit_s, sizeof limit_s, "%" PRId64, limit);
    snprintf(want_s, sizeof want_s, "%" PRId64, want);
    argv[argc++] = limit_s;
    argv[argc++] = want_s;
    for (int i = 0; i < nextra; i++)
        argv[argc++] = extra[i];
    reply = hr_redis_eval(r, id, nkeys, argc, argv, NULL, errstr, errlen);
    if (reply == NULL)
        return -1;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < need) {
        snprintf(errstr, errlen, "rate limit script: unexpected reply type %d", reply->type);
        freeReplyObject(reply);
        return -1;
    }
    for (size_t i = 0; i < need; i++)
        if (reply->element[i]->type != REDIS_REPLY_INTEGER) {
            snprintf(errstr, errlen, "rate limit script: unexpected reply");
            freeReplyObject(reply);
            return -1;
        }
    *granted = reply->element[0]->integer;
    *wait_ms = reply->element[1]->integer;
    if (rate != NULL)
        *rate = reply->element[2]->integer;
    freeReplyObject(reply);
    return 0;
}

static int rl_check(int64_t limit, int64_t want, int64_t *granted, int64_t *wait_ms, char *errstr,
                    size_t errlen)
{
    *granted = 0;
    *wait_ms = 0;
    if (limit <= 0 || want < 0) {
        snprintf(errstr, errlen, "rate limit %" PRId64 " / want %" PRId64 " out of range", limit,
                 want);
        return -1;
    }
    return 0;
}

int hr_ratelimit_take(hr_redis *r, const char *scope, int64_t limit, int64_t want, int64_t *granted,
                      int64_t *wait_ms, char *errstr, size_t errlen)
{
    return hr_ratelimit_take_window(r, scope, limit, 1, want, granted, wait_ms, errstr, errlen);
}

int hr_ratelimit_take_window(hr_redis *r, const char *scope, int64_t limit, int window_s,
                             int64_t want, int64_t *granted, int64_t *wait_ms, char *errstr,
                             size_t errlen)
{
    char keys[1][HR_KEY_MAX], window_ms[24];
    const char *extra[1] = {window_ms};

    if (rl_check(limit, want, granted, wait_ms, errstr, errlen) < 0)
        return -1;
    if (window_s < 1 || window_s > 3600) {
        snprintf(errstr, errlen, "rate limit window %d s out of range", window_s);
        return -1;
    }
    if (hr_key_ratelimit(hr_redis_prefix(r), keys[0], sizeof keys[0], scope) == NULL) {
        snprintf(errstr, errlen, "rate limit scope \"%.32s\" too long", scope);
        return -1;
    }
    snprintf(window_ms, sizeof window_ms, "%d", window_s * 1000);
    return rl_run(r, HR_LUA_RATELIMIT, 1, keys, limit, want, extra, 1, granted, wait_ms, NULL,
                  errstr, errlen);
}

int hr_ratelimit_take_paced(hr_redis *r, int64_t task, const char *who, int64_t cap,
                            int64_t finish_ms, int64_t want, int64_t *granted, int64_t *wait_ms,
                            int64_t *rate, char *errstr, size_t errlen)
{
    char keys[4][HR_KEY_MAX], finish_s[24];
    const char *extra[2] = {"1000", finish_s};

    *rate = 0;
    /* A cap of 0 is none: the script derives the limit. */
    if (rl_check(cap > 0 ? cap : 1, want, granted, wait_ms, errstr, errlen) < 0)
        return -1;
    if (hr_key_pace_rl(hr_redis_prefix(r), keys[0], sizeof keys[0], task, who) == NULL) {
        snprintf(errstr, errlen, "pace scope \"%.32s\" too long", who);
        return -1;
    }
    hr_key_task(hr_redis_prefix(r), keys[1], sizeof keys[1], task, HR_KEY_STATS);
    hr_key_task(hr_redis_prefix(r), keys[2], sizeof keys[2], task, HR_KEY_SUBS);
    hr_key_task(hr_redis_prefix(r), keys[3], sizeof keys[3], task, HR_KEY_WAIT);
    snprintf(finish_s, sizeof finish_s, "%" PRId64, finish_ms);
    return rl_run(r, HR_LUA_RATELIMIT, 4, keys, cap > 0 ? cap : 0, want, extra, 2, granted, wait_ms,
                  rate, errstr, errlen);
}

int hr_ratelimit_take_share(hr_redis *r, const char *channel, int64_t task, int weight,
                            int64_t limit, int64_t want, int64_t *granted, int64_t *wait_ms,
                            char *errstr, size_t errlen)
{
    char keys[3][HR_KEY_MAX], member[48];
    const char *extra[1] = {member};
    const char *prefix = hr_redis_prefix(r);

    if (rl_check(limit, want, granted, wait_ms, errstr, errlen) < 0)
        return -1;
    if (hr_key_share(prefix, keys[0], sizeof keys[0], channel, -1) == NULL ||
        hr_key_share(prefix, keys[1], sizeof keys[1], channel, 0) == NULL ||
        hr_key_share(prefix, keys[2], sizeof keys[2], channel, 1) == NULL) {
        snprintf(errstr, errlen, "channel name \"%.32s\" too long", channel);
        return -1;
    }
    snprintf(member, sizeof member, "%" PRId64 ":%d", task, weight > 0 ? weight : 1);
    return rl_run(r, HR_LUA_SHARE, 3, keys, limit, want, extra, 1, granted, wait_ms, NULL, errstr,
                  errlen);
}
