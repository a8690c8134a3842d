/* hr_ratelimit: the cluster-wide per-second (or per-window) rate limiter
 * (lua/ratelimit.lua, lua/share.lua).
 *
 * One counter per scope and window, "herald:rl:<scope>:<window>", grown
 * with INCRBY and given an expiry (the window and a second) in the same
 * script, so a key never leaks and the grants of one window never add up
 * to more than LIMIT.  The dispatcher uses scope "task<ID>" for a task's
 * rate_limit; workers use "push:task<ID>".  A task with a finish_by counts
 * in its own slot (hr_ratelimit_take_paced), where the script derives its
 * rate from its stats and subscriber set at every grant.  A channel's
 * budget is shared by its tasks by weight (hr_ratelimit_take_share,
 * docs/scheduling.md).  The window is the caller's wall clock (hosts run
 * NTP); the key must be named by the caller so that it appears in KEYS, as
 * Redis Cluster requires. */
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

/* hr_ratelimit_take for task TASK with a finish_by FINISH_MS (WHO "chunk"
 * or "push"): the limit is the rate that ends what is left by then,
 * derived by the script at this grant, at most CAP (0 = none); *RATE gets
 * it (0 = none: finish_by passed without a cap), and so does the stats
 * hash's planned_rate. */
int hr_ratelimit_take_paced(hr_redis *r, int64_t task, const char *who, int64_t cap,
                            int64_t finish_ms, int64_t want, int64_t *granted, int64_t *wait_ms,
                            int64_t *rate, char *errstr, size_t errlen);

/* hr_ratelimit_take of CHANNEL's budget LIMIT (>0) for TASK of weight
 * WEIGHT (>= 1): its weighted share, plus what the others leave. */
int hr_ratelimit_take_share(hr_redis *r, const char *channel, int64_t task, int weight,
                            int64_t limit, int64_t want, int64_t *granted, int64_t *wait_ms,
                            char *errstr, size_t errlen);

#endif
