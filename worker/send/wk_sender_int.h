/* wk_sender_int: what the sender's files share and nobody else sees: a
 * channel's runtime state (wk_chan), the sender itself, and the calls
 * between the engine (wk_sender.c), a channel's queues, tokens and
 * slow-downs (wk_chan.c) and the curl <-> libuv glue (wk_sender_uv.c). */
#ifndef WK_SENDER_INT_H
#define WK_SENDER_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "hr_vec.h"
#include "wk_apns.h"
#include "wk_fcm_auth.h"
#include "wk_retry.h"
#include "wk_sender.h"
#include "wk_xfer.h"

/* How often one push may be told "slow down" before that counts as a
 * failed attempt: bounds a provider that never lets up. */
#define WK_SENDER_MAX_SLOWDOWNS 100
/* Pause when a 429 carries no (or an HTTP-date) Retry-After. */
#define WK_SENDER_DEFAULT_PAUSE_MS 1000
/* A limiter error (Redis down): try again after this. */
#define WK_SENDER_LIMITER_RETRY_MS 1000
#define WK_SENDER_GRANT_DIVISOR 20
/* A task with a finish_by: its first grant's size, before the limiter said
 * which rate is in force (hr_ratelimit_take_paced). */
#define WK_SENDER_PACED_WANT 10
#define WK_SENDER_KEY_FILE_MAX 16384 /* a .p8 key is ~250 bytes */
/* How often a channel with pushes waiting reads the cluster's slow-down:
 * other workers stop within this of one worker's 429. */
#define WK_SENDER_SLOW_POLL_MS 250

/* A channel's connections per curl multi handle.  libcurl 7.88 looks for
 * an idle connection by walking its connections to the host on every
 * transfer (ConnectionExists): with a channel's 256 connections in one
 * multi handle the walk cost about 10,000 instructions a push
 * (docs/performance.md, issue 19), so a channel's handles are spread over
 * multi handles of at most this many connections each. */
#define WK_SENDER_MULTI_CONNS 32

typedef struct wk_chan wk_chan;
typedef struct wk_sock wk_sock; /* wk_sender_uv.c */

/* One curl multi handle and the timer curl asks for.  Its connections
 * serve one channel's transfers only. */
typedef struct wk_multi {
    CURLM *multi;
    uv_timer_t timer;
    wk_sender *s;
} wk_multi;

struct wk_chan {
    wk_sender *s;
    const hr_channel *cfg;                   /* its configuration */
    TAILQ_HEAD(wk_task_list, wk_task) tasks; /* with ready pushes, round robin */
    wk_retry_heap delayed;                   /* by due time */
    wk_multi *multis;                        /* the channel's multi handles */
    size_t nmultis;                          /* handle i runs on multis[i % nmultis] */
    wk_xfer **all;                           /* every handle created, up to concurrency */
    wk_xfer **free;                          /* stack of idle handles */
    size_t nall, nfree;
    size_t inflight;
    wk_retry_cap cap;
    int64_t paused_until_ms;
    uv_timer_t wake;         /* end of a pause, of a rate-limit wait or of a token back-off */
    uv_timer_t retry;        /* earliest delayed push */
    wk_fcm_auth *fcm;        /* fcm channels: the account and the shared access token */
    wk_apns_signer *apns;    /* apns channels: the provider token's signer */
    wk_xfer *auth_x;         /* fcm: the token request's handle (not in the pool) */
    bool auth_busy;          /* it is on the multi handle */
    char k_slow[HR_KEY_MAX]; /* the channel's cluster-wide slow-down (hr_key_slowdown) */
    int64_t slow_checked_ms; /* when it was last read */
    bool slow_reading;       /* a read is on its way (the Redis thread) */
    int64_t slow_seen_until; /* the latest slow-down this worker took part in */
};

struct wk_sender {
    uv_loop_t *loop;
    const hr_config *cfg;
    wk_redis *rd;
    wk_metrics *m;
    wk_sender_done_fn done;
    wk_sender_prune_fn prune;
    void *ctx;
    wk_chan *chans;
    size_t nchans;
    size_t inflight;
    bool draining;
    bool closed; /* wk_sender_close ran: a Redis job's late answer runs no queue */
    bool pumping, pump_again;
    uint64_t rnd;
    HR_VEC(wk_sock *) socks; /* by descriptor: the sockets opened for curl (wk_sender_uv.c) */
};

/* How one address (or a webhook push) ended. */
typedef enum wk_end {
    WK_END_SENT,
    WK_END_FAILED, /* for good: REASON says why */
    WK_END_DEAD,   /* the provider says the address is dead: pruned */
    WK_END_HELD,   /* not tried again: the owner is halting */
} wk_end;

/* wk_sender.c */
void wk_sender_pump(wk_sender *s);
void wk_sender_settle(wk_sender *s, wk_push *push, const wk_push_result *res);
uint64_t wk_sender_random(wk_sender *s);
bool wk_chan_authorized(wk_chan *chan, int64_t now);
bool wk_chan_start(wk_chan *chan, wk_xfer *x, wk_push *push);

/* wk_curl.c */
wk_xfer *wk_chan_take_xfer(wk_chan *chan);
void wk_chan_release_xfer(wk_chan *chan, wk_xfer *x);
int wk_chan_multis(wk_chan *chan);
void wk_sender_check(wk_sender *s, wk_multi *mh);

/* wk_sender_uv.c */
/* A multi handle driven by the loop, CONNS connections per host at most;
 * -1 when curl cannot make one.  wk_sender_uv_multi_close accepts one that
 * failed. */
int wk_sender_uv_multi_init(wk_sender *s, wk_multi *mh, long conns);
void wk_sender_uv_multi_close(wk_multi *mh);
/* After every multi handle of S was cleaned up: closes the polls of the
 * sockets left in its table (ones curl closed without the callback). */
void wk_sender_uv_close_all(wk_sender *s);
/* Sets the socket open and close callbacks of an easy handle of S. */
void wk_sender_uv_easy(wk_sender *s, CURL *easy);

/* wk_chan.c */
void wk_chan_wake_cb(uv_timer_t *t);
void wk_chan_arm_retry(wk_chan *chan);
void wk_chan_enqueue(wk_chan *chan, wk_push *push, bool head);
void wk_chan_dequeue(wk_chan *chan, wk_push *push);
bool wk_chan_addressed(const wk_chan *chan);
void wk_chan_end(wk_chan *chan, wk_push *push, wk_push_result *res, wk_end end, const char *reason);
void wk_chan_auth_finished(wk_chan *chan, CURLcode rc);
void wk_chan_slow(wk_chan *chan, int64_t until_ms, const char *why, long status);
void wk_chan_publish_slow(wk_chan *chan, int64_t until_ms, int64_t pause_ms);
void wk_chan_pump(wk_chan *chan);
void wk_sender_finished(wk_sender *s, wk_xfer *x, CURLcode rc);
int wk_chan_apns_signer(wk_chan *chan, char *errstr, size_t errlen);

#endif
