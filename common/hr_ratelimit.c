/* hr_ratelimit: the cluster-wide per-second rate limiter (see
 * hr_ratelimit.h); the atomic step is common/lua/ratelimit.lua. */
#include "hr_ratelimit.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

int hr_ratelimit_take(hr_redis *r, const char *scope, int64_t limit, int64_t want, int64_t *granted,
                      int64_t *wait_ms, char *errstr, size_t errlen)
{
    struct timespec now;
    char key[512], limit_s[24], want_s[24];
    const char *argv[3] = {key, limit_s, want_s};
    redisReply *reply;
    int64_t now_ms;

    *granted = 0;
    *wait_ms = 0;
    if (limit <= 0 || want < 0) {
        snprintf(errstr, errlen, "rate limit %" PRId64 " / want %" PRId64 " out of range", limit,
                 want);
        return -1;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    if (hr_key_ratelimit(hr_redis_prefix(r), key, sizeof key, scope, (int64_t)now.tv_sec) == NULL) {
        snprintf(errstr, errlen, "rate limit scope \"%.32s\" too long", scope);
        return -1;
    }
    snprintf(limit_s, sizeof limit_s, "%" PRId64, limit);
    snprintf(want_s, sizeof want_s, "%" PRId64, want);

    reply = hr_redis_eval(r, HR_LUA_RATELIMIT, 1, 3, argv, NULL, errstr, errlen);
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
        *wait_ms = 1000 - now_ms % 1000;
    return 0;
}
