/* hr_ratelimit: the cluster-wide per-second (or per-window) rate limiter
 * (lua/ratelimit.lua).
 *
 * One counter per scope and epoch second, "herald:rl:<scope>:<sec>", grown
 * with INCRBY and given a 2 s expiry in the same script, so a key never
 * leaks and the grants of one second never add up to more than LIMIT.  The
 * dispatcher uses scope "task<ID>" for a task's rate_limit; workers use
 * "ch:<channel>" and "task<ID>".  The second is the caller's wall clock
 * (hosts run NTP); the key must be named by the caller so that it appears in
 * KEYS, as Redis Cluster requires. */
#ifndef HR_RATELIMIT_H
#define HR_RATELIMIT_H

#include <stdint.h>

#include "hr_redis.h"

/* Asks for WANT units of SCOPE's budget LIMIT (>0) in the current second.
 * *GRANTED gets 0..WANT; when it is less than WANT, *WAIT_MS gets the time
 * to the next second.  Returns 0, or -1 on a Redis error. */
int hr_ratelimit_take(hr_redis *r, const char *scope, int64_t limit, int64_t want, int64_t *granted,
                      int64_t *wait_ms, char *errstr, size_t errlen);
/* The same over windows of WINDOW_S (1..3600) seconds: the counter is
 * "herald:rl:<scope>:<epoch_s / WINDOW_S>", kept one window and a second,
 * and *WAIT_MS is the time to the next window.  hr_ratelimit_take is
 * WINDOW_S 1.  (The pull's per-uid limit: scope "pull:<uid>", 60 s.) */
int hr_ratelimit_take_window(hr_redis *r, const char *scope, int64_t limit, int window_s,
                             int64_t want, int64_t *granted, int64_t *wait_ms, char *errstr,
                             size_t errlen);

#endif
