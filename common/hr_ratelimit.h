/* hr_ratelimit: the cluster-wide per-second (or per-window) rate limiter
 * (lua/ratelimit.lua, lua/share.lua).
 *
 * One counter per scope, "herald:rl:<scope>", holding the window it counts
 * and the units granted in it, given an expiry (the window's end and a
 * second) in the same script, so a key never leaks and the grants of one
 * window never add up to more than LIMIT.  The dispatcher uses scope
 * "task<ID>" for a task's rate_limit; workers use "push:task<ID>".  A task
 * with a finish_by counts in its own slot (hr_ratelimit_take_paced), where
 * the script derives its rate from its stats, subscriber set and wait set
 * at every grant.  A channel's budget is shared by its tasks by weight
 * (hr_ratelimit_take_share, docs/scheduling.md).  The window and the time
 * left to finish_by are Redis's clock (TIME inside the scripts), one clock
 * for every caller: a host whose clock is off neither gets a window of its
 * own nor paces to a finish_by of its own (docs/architecture.md "Clocks").
 * The keys carry no time, so that they can be named by the caller and
 * appear in KEYS, as Redis Cluster requires. */
#ifndef HR_RATELIMIT_H
#define HR_RATELIMIT_H

#include <stdint.h>

#include "hr_redis.h"

/* Asks for WANT units of SCOPE's budget LIMIT (>0) in the current second
 * (Redis's).  *GRANTED gets 0..WANT, *WAIT_MS the time to the next second
 * by Redis's clock: how long a caller granted less than WANT waits, and
 * how long the units granted are good for (spent later, they would add to
 * the next second's).  Returns 0, or -1 on a Redis error. */
int hr_ratelimit_take(hr_redis *r, const char *scope, int64_t limit, int64_t want, int64_t *granted,
                      int64_t *wait_ms, char *errstr, size_t errlen);
/* The same over windows of WINDOW_S (1..3600) seconds (window number
 * epoch_s / WINDOW_S), and *WAIT_MS is the time to the next window.
 * hr_ratelimit_take is WINDOW_S 1.  (The pull's per-uid limit: scope
 * "pull:<uid>", 60 s.) */
int hr_ratelimit_take_window(hr_redis *r, const char *scope, int64_t limit, int window_s,
                             int64_t want, int64_t *granted, int64_t *wait_ms, char *errstr,
                             size_t errlen);

/* hr_ratelimit_take for task TASK with a finish_by FINISH_MS (WHO "chunk"
 * or "push"): the limit is the rate that ends what is left (subs, the wait
 * set, chunked and not settled) by then, derived by the script at this
 * grant, at most CAP (0 = none); *RATE gets it (0 = none: finish_by passed
 * without a cap), and so does the stats hash's planned_rate.  A refusal
 * waits (*WAIT_MS) at most until finish_by, where the limit rises to the
 * cap. */
int hr_ratelimit_take_paced(hr_redis *r, int64_t task, const char *who, int64_t cap,
                            int64_t finish_ms, int64_t want, int64_t *granted, int64_t *wait_ms,
                            int64_t *rate, char *errstr, size_t errlen);

/* hr_ratelimit_take of CHANNEL's budget LIMIT (>0) for TASK of weight
 * WEIGHT (>= 1): its weighted share, plus what the others leave. */
int hr_ratelimit_take_share(hr_redis *r, const char *channel, int64_t task, int weight,
                            int64_t limit, int64_t want, int64_t *granted, int64_t *wait_ms,
                            char *errstr, size_t errlen);

#endif
