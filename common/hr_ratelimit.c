/* hr_ratelimit: the cluster-wide per-window rate limiter (see
 * hr_ratelimit.h); the atomic step is common/lua/ratelimit.lua. */
#include "hr_ratelimit.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

int hr_ratelimit_take(hr_redis *r, const char *scope, int64_t limit, int64_t want, int64_t *granted,
                      int64_t *wait_ms, char *errstr, size_t errlen)
{
    return hr_ratelimit_take_window(r, scope, limit, 1, want, granted, wait_ms, errstr, errlen);
}

int hr_ratelimit_take_window(hr_redis *r, const char *scope, int64_t limit, int window_s,
                             int64_t want, int64_t *granted, int64_t *wait_ms, char *errstr,
                             size_t errlen)
{
    struct timespec now;
    char key[512], limit_s[24], want_s[24], ttl_s[24];
    const char *argv[4] = {key, limit_s, want_s, ttl_s};
    int64_t window_ms = (int64_t)window_s * 1000;
    redisReply *reply;
    int64_t now_ms;

    *granted = 0;
    *wait_ms = 0;
    if (limit <= 0 || want < 0 || window_s < 1 || window_s > 3600) {
        snprintf(errstr, errlen, "rate limit %" PRId64 " / want %" PRId64 " out of range", limit,
                 want);
        return -1;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    if (hr_key_ratelimit(hr_redis_prefix(r), key, sizeof key, scope,
                         (int64_t)now.tv_sec / window_s) == NULL) {
        snprintf(errstr, errlen, "rate limit scope \"%.32s\" too long", scope);
        return -1;
    }
    snprintf(limit_s, sizeof limit_s, "%" PRId64, limit);
    snprintf(want_s, sizeof want_s, "%" PRId64, want);
    snprintf(ttl_s, sizeof ttl_s, "%" PRId64, window_ms + 1000);

    reply = hr_redis_eval(r, HR_LUA_RATELIMIT, 1, 4, argv, NULL, errstr, errlen);
    if (reply == NULL)
        return -1;
    if (reply->type != REDIS_REPLY_INTEGER) {
        snprintf(errstr, errlen, "ratelimit.lua: unexpected reply type %d", reply->type);
        freeReplyObject(reply);
        return -1;
    }
    *granted = reply->integer;
    freeReplyObject(reply);
    if (*granted < want)
        *wait_ms = window_ms - now_ms % window_ms;
    return 0;
}
