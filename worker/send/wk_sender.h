/* wk_sender: pushes recipients over HTTP with libcurl multi on a libuv loop.
 *
 * The sender owns one CURLM driven by uv (CURLMOPT_SOCKETFUNCTION puts a
 * uv_poll on every socket curl cares about, CURLMOPT_TIMERFUNCTION arms one
 * uv_timer; finished transfers are drained with curl_multi_info_read), and
 * one runtime state per configured channel:
 *   - one ready queue of wk_push (intrusive links, in the wk_task) per
 *     task with pushes waiting, served round-robin so that one task cannot hold up the
 *     others (a task waiting for rate-limit tokens is skipped until its
 *     wait ends), and a min-heap of the pushes waiting out a retry backoff
 *     (the pushes are owned by their chunk, the sender only links them),
 *   - a pool of easy handles kept configured between requests so
 *     connections are reused (at most the channel's concurrency),
 *   - the AIMD in-flight cap (wk_retry) and a pause deadline set by
 *     429/503 with Retry-After, shared with every worker through Redis
 *     (hr_key_slowdown: written by the worker that got the answer, read
 *     every WK_SENDER_SLOW_POLL_MS while pushes wait),
 *   - tokens granted by the cluster-wide rate limiter (scope
 *     "push:ch:<name>"; the task's share "push:task<ID>" is kept in its
 *     wk_task), asked for in grants of max(1, limit/20) so the rate is
 *     smooth; a token is spent only when its push starts (a grant is never
 *     thrown away: what is left waits for the next push of that task or
 *     channel); when the channel's limiter says no, a per-channel uv_timer
 *     wakes the channel at the next second while other channels keep
 *     sending, and when a task's says no, the channel's other tasks go on,
 *   - for an fcm channel, its account and shared access token
 *     (wk_fcm_auth): no push starts without an unexpired token; the token
 *     request runs on the same multi handle when one is due;
 *   - for an apns channel, its provider-token signer (wk_apns); its
 *     requests are HTTP/2 streams and its in-flight cap starts at one per
 *     connection (see wk_sender_new).
 * A push to an addressed channel (fcm, apns) walks the uid's addresses (given
 * by its chunk) one request after the other, each with its own retry
 * budget: an address the provider calls dead is handed to the prune
 * callback; the push is delivered when one address took it, failed when
 * one failed for good, else unregistered.  A 401 drops the access token
 * and re-sends (like a slow-down, not against the retry budget).
 * Retryable failures (5xx, curl errors such as timeouts or refused
 * connections) wait an exponential backoff with full jitter on the delayed
 * heap, unless the push's hold flag is set (its owner is pausing or
 * cancelling): then it is settled as held.  A push whose task is past its
 * expire_at (hr_task_expired) is never started but settled as held too,
 * and the owner counts the rest of its chunk expired; a retry that would
 * start past expire_at waits only until then, so it is never sent.  When a push is settled —
 * delivered, failed for good, unregistered, or held — the done callback is called once
 * with the result and the push is no longer linked anywhere.  The callback
 * may cancel other pushes and submit new ones.  Nothing but a finished
 * request, a timer or wk_sender_kick() runs the queues: whoever cancels an
 * in-flight push (freeing its slot) must kick the sender afterwards. */
#ifndef WK_SENDER_H
#define WK_SENDER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

#include "hr_addr.h"
#include "hr_config.h"
#include "wk_metrics.h"
#include "wk_redis.h"
#include "wk_push.h"
#include "wk_task.h"

typedef void (*wk_sender_done_fn)(void *ctx, wk_push *push, const wk_push_result *res);
/* Address A of PUSH is dead (the provider said so): remove it. */
typedef void (*wk_sender_prune_fn)(void *ctx, wk_push *push, const hr_addr *a);

typedef struct wk_sender wk_sender;

/* RD (the worker's Redis thread) gets the rate-limit grants and the
 * slow-down key's reads and writes as jobs: the loop never waits for them.
 * M (which must outlive the sender) gets the request latency, in-flight,
 * rate-limit wait and HTTP / limiter error metrics. */
int wk_sender_new(uv_loop_t *loop, const hr_config *cfg, wk_redis *rd, wk_metrics *m,
                  wk_sender_done_fn done, void *ctx, wk_sender **out, char *errstr, size_t errlen);

/* Whether channel CH_INDEX pushes to addresses from the address book, and
 * which: *PLATFORM and *APP (the fcm project).  False for a webhook. */
bool wk_sender_addressed(const wk_sender *s, size_t ch_index, hr_addr_platform *platform,
                         const char **app);
/* Called (with the done callback's CTX) for every dead address. */
void wk_sender_set_prune(wk_sender *s, wk_sender_prune_fn prune);

/* Queues PUSH (state IDLE) for its first attempt; nothing starts (and no
 * callback runs) until wk_sender_kick(). */
void wk_sender_submit(wk_sender *s, wk_push *push);
/* Starts what the queues, caps, pauses and rate limits allow. */
void wk_sender_kick(wk_sender *s);
/* Unlinks PUSH wherever it is (an in-flight request is aborted); no callback.
 * PUSH is IDLE afterwards. */
void wk_sender_cancel(wk_sender *s, wk_push *push);

/* True when channel CH_INDEX has pushes waiting (ready or backing off) but
 * nothing will run the pump for them: no request in flight, no wake-up or
 * retry timer armed, not draining.  Never true unless a caller forgot a
 * wk_sender_kick() after freeing slots; the worker's watchdog checks it. */
bool wk_sender_stuck(const wk_sender *s, size_t ch_index);

/* Stops starting requests (shutdown); running ones finish. */
void wk_sender_drain(wk_sender *s);
size_t wk_sender_in_flight(const wk_sender *s);

/* Closes every handle; the caller then runs the loop until it has no
 * active handles and calls wk_sender_free.  No push may be linked. */
void wk_sender_close(wk_sender *s);
void wk_sender_free(wk_sender *s);

#endif
