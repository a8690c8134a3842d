/* wk_sender_int: what the sender's files share and nobody else sees: a
 * channel's runtime state (wk_chan), the sender itself, and the calls
 * between the engine (wk_sender.c), a channel's queues, tokens and
 * slow-downs (wk_chan.c) and the curl <-> libuv glue (wk_sender_uv.c). */
#ifndef WK_SENDER_INT_H
#define WK_SENDER_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

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

typedef struct wk_chan wk_chan;

struct wk_chan {
    wk_sender *s;
    const hr_channel *cfg;                   /* its configuration */
    TAILQ_HEAD(wk_task_list, wk_task) tasks; /* with ready pushes, round robin */
    wk_retry_heap delayed;                   /* by due time */
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
    CURLM *multi;
    uv_timer_t timer;
    wk_chan *chans;
    size_t nchans;
    size_t inflight;
    bool draining;
    bool pumping, pump_again;
    uint64_t rnd;
};

typedef struct wk_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    wk_sender *s;
} wk_sock;

/* How one address (or a webhook push) ended. */
typedef enum wk_end {
    WK_END_SENT,
    WK_END_FAILED, /* for good: REASON says why */
    WK_END_DEAD,   /* the provider says the address is dead: pruned */
    WK_END_HELD,   /* not tried again: the owner is halting */
} wk_end;

/* wk_sender.c */
void wk_sender_pump(wk_sender *s);
void wk_sender_check(wk_sender *s);
void wk_sender_settle(wk_sender *s, wk_push *push, const wk_push_result *res);

/* wk_sender_uv.c: CURLMOPT_SOCKETFUNCTION and CURLMOPT_TIMERFUNCTION */
int wk_sender_uv_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *sockp);
int wk_sender_uv_timer_cb(CURLM *multi, long timeout_ms, void *userp);

/* wk_chan.c */
void wk_chan_wake_cb(uv_timer_t *t);
void wk_chan_arm_retry(wk_chan *chan);
void wk_chan_release_xfer(wk_chan *chan, wk_xfer *x);
void wk_chan_enqueue(wk_chan *chan, wk_push *push, bool head);
void wk_chan_dequeue(wk_chan *chan, wk_push *push);
bool wk_chan_addressed(const wk_chan *chan);
void wk_chan_end(wk_chan *chan, wk_push *push, wk_push_result *res, wk_end end, const char *reason);
void wk_chan_auth_finished(wk_chan *chan, CURLcode rc);
void wk_chan_slow(wk_chan *chan, int64_t until_ms, const char *why, long status);
void wk_chan_publish_slow(wk_chan *chan, int64_t until_ms, int64_t pause_ms);
void wk_chan_pump(wk_chan *chan);

#endif
