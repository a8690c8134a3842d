/* wk_sender: libcurl multi over libuv, per-channel queues, rate limits,
 * retries and slow-downs (see wk_sender.h).  One request — its easy
 * handle, how it is built and what its response means — is wk_xfer's;
 * this file runs the requests and acts on their outcome.
 *
 * Re-entrancy: the done callback runs from wk_sender_check() (after
 * curl_multi_socket_action returned, never inside a curl callback) or from
 * wk_sender_pump() when a push cannot be rendered.  It may submit or cancel
 * pushes; queues are re-read after every callback, and a pump requested
 * while one runs is folded into the running one (s->pumping). */
#include "wk_sender.h"

#include <curl/curl.h>
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "hr_log.h"
#include "wk_clock.h"
#include "hr_ratelimit.h"
#include "wk_apns.h"
#include "wk_fcm_auth.h"
#include "wk_retry.h"
#include "wk_xfer.h"

/* How often one push may be told "slow down" before that counts as a
 * failed attempt: bounds a provider that never lets up. */
#define WK_SENDER_MAX_SLOWDOWNS 100
/* Pause when a 429 carries no (or an HTTP-date) Retry-After. */
#define WK_SENDER_DEFAULT_PAUSE_MS 1000
/* A limiter error (Redis down): try again after this. */
#define WK_SENDER_LIMITER_RETRY_MS 1000
#define WK_SENDER_GRANT_DIVISOR 20
#define WK_SENDER_KEY_FILE_MAX 16384 /* a .p8 key is ~250 bytes */
/* How often a channel with pushes waiting reads the cluster's slow-down:
 * other workers stop within this of one worker's 429. */
#define WK_SENDER_SLOW_POLL_MS 250

typedef struct wk_chan wk_chan;

struct wk_chan {
    wk_sender *s;
    const hr_channel *cfg;
    char rl_scope[96];
    TAILQ_HEAD(wk_task_list, wk_task) tasks; /* with ready pushes, round robin */
    wk_retry_heap delayed; /* by due time */
    wk_xfer **all;   /* every handle created, up to concurrency */
    wk_xfer **free;  /* stack of idle handles */
    size_t nall, nfree;
    size_t inflight;
    wk_retry_cap cap;
    int64_t paused_until_ms;
    int64_t tokens, tokens_sec; /* channel budget: see wk_chan_token */
    uv_timer_t wake;  /* end of a pause, of a rate-limit wait or of a token back-off */
    uv_timer_t retry; /* earliest delayed push */
    wk_fcm_auth *fcm; /* fcm channels: the account and the shared access token */
    wk_apns_signer *apns; /* apns channels: the provider token's signer */
    wk_xfer *auth_x;  /* fcm: the token request's handle (not in the pool) */
    bool auth_busy;   /* it is on the multi handle */
    char k_slow[HR_KEY_MAX];    /* the channel's cluster-wide slow-down (hr_key_slowdown) */
    int64_t slow_checked_ms;    /* when it was last read */
    int64_t slow_seen_until;    /* the latest slow-down this worker took part in */
};

struct wk_sender {
    uv_loop_t *loop;
    const hr_config *cfg;
    hr_redis *redis;
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

static void wk_sender_pump(wk_sender *s);
static void wk_sender_check(wk_sender *s);

static uint64_t wk_sender_random(wk_sender *s)
{
    /* xorshift64*: jitter needs spread, not secrecy. */
    s->rnd ^= s->rnd >> 12;
    s->rnd ^= s->rnd << 25;
    s->rnd ^= s->rnd >> 27;
    return s->rnd * 2685821657736338717ULL;
}

/* ---- curl <-> uv glue (after curl's docs/examples/multi-uv.c) --------- */

static void wk_sender_sock_closed(uv_handle_t *h)
{
    free(h->data);
}

static void wk_sender_poll_cb(uv_poll_t *poll, int status, int events)
{
    wk_sock *ss = poll->data;
    wk_sender *s = ss->s;
    int flags = 0, running;

    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    curl_multi_socket_action(s->multi, ss->fd, flags, &running);
    wk_sender_check(s);
}

static int wk_sender_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *sockp)
{
    wk_sender *s = userp;
    wk_sock *ss = sockp;
    int events = 0;

    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        if (ss != NULL) {
            uv_poll_stop(&ss->poll);
            uv_close((uv_handle_t *)&ss->poll, wk_sender_sock_closed);
            curl_multi_assign(s->multi, fd, NULL);
        }
        return 0;
    }
    if (ss == NULL) {
        ss = calloc(1, sizeof *ss);
        if (ss == NULL)
            return -1;
        ss->fd = fd;
        ss->s = s;
        if (uv_poll_init_socket(s->loop, &ss->poll, fd) != 0) {
            free(ss);
            return -1;
        }
        ss->poll.data = ss;
        curl_multi_assign(s->multi, fd, ss);
    }
    if (what & CURL_POLL_IN)
        events |= UV_READABLE;
    if (what & CURL_POLL_OUT)
        events |= UV_WRITABLE;
    uv_poll_start(&ss->poll, events, wk_sender_poll_cb);
    return 0;
}

static void wk_sender_timeout_cb(uv_timer_t *t)
{
    wk_sender *s = t->data;
    int running;

    curl_multi_socket_action(s->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    wk_sender_check(s);
}

static int wk_sender_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    wk_sender *s = userp;

    (void)multi;
    if (timeout_ms < 0)
        uv_timer_stop(&s->timer);
    else
        uv_timer_start(&s->timer, wk_sender_timeout_cb, (uint64_t)timeout_ms, 0);
    return 0;
}

/* ---- easy handles (wk_xfer) --------------------------------------------- */

static wk_xfer *wk_chan_take_xfer(wk_chan *ch)
{
    wk_xfer *x;

    if (ch->nfree > 0)
        return ch->free[--ch->nfree];
    if (ch->nall == (size_t)ch->cfg->concurrency)
        return NULL;
    x = wk_xfer_new(ch->cfg, ch);
    if (x != NULL)
        ch->all[ch->nall++] = x;
    return x;
}

/* Takes X out of the multi handle and back into the pool. */
static void wk_chan_release_xfer(wk_chan *ch, wk_xfer *x)
{
    wk_sender *s = ch->s;

    curl_multi_remove_handle(s->multi, x->easy);
    if (x->p != NULL) {
        x->p->xfer = NULL;
        x->p->state = WK_PUSH_IDLE;
    }
    x->p = NULL;
    ch->free[ch->nfree++] = x;
    ch->inflight--;
    s->inflight--;
    hr_metrics_set(s->m->inflight, (double)s->inflight);
}

/* ---- scheduling ---------------------------------------------------------- */

static void wk_chan_wake_cb(uv_timer_t *t)
{
    wk_chan *ch = t->data;

    wk_sender_pump(ch->s);
}

static void wk_chan_arm_retry(wk_chan *ch)
{
    const wk_retry_node *first = wk_retry_heap_min(&ch->delayed);
    int64_t now = wk_clock_now_ms();

    if (first == NULL)
        uv_timer_stop(&ch->retry);
    else
        uv_timer_start(&ch->retry, wk_chan_wake_cb,
                       first->due_ms > now ? (uint64_t)(first->due_ms - now) : 0, 0);
}

static wk_push *wk_push_of(wk_retry_node *n)
{
    return (wk_push *)((char *)n - offsetof(wk_push, delay));
}

/* Links P READY into its task's queue (at the head when it goes next);
 * a task that had none joins the channel's round robin at the end. */
static void wk_chan_enqueue(wk_chan *ch, wk_push *p, bool head)
{
    wk_task *t = p->task;

    if (!t->queued) {
        TAILQ_INIT(&t->ready);
        TAILQ_INSERT_TAIL(&ch->tasks, t, rr);
        t->queued = true;
    }
    if (head)
        TAILQ_INSERT_HEAD(&t->ready, p, link);
    else
        TAILQ_INSERT_TAIL(&t->ready, p, link);
    p->state = WK_PUSH_READY;
}

/* Unlinks READY P; its task leaves the round robin when nothing is left. */
static void wk_chan_dequeue(wk_chan *ch, wk_push *p)
{
    wk_task *t = p->task;

    TAILQ_REMOVE(&t->ready, p, link);
    if (TAILQ_EMPTY(&t->ready)) {
        TAILQ_REMOVE(&ch->tasks, t, rr);
        t->queued = false;
    }
}

/* Moves delayed pushes whose backoff passed to the ready queue. */
static void wk_chan_promote(wk_chan *ch, int64_t now)
{
    wk_retry_node *n;

    while ((n = wk_retry_heap_min(&ch->delayed)) != NULL && n->due_ms <= now) {
        wk_push *p = wk_push_of(n);

        wk_retry_heap_remove(&ch->delayed, n);
        wk_chan_enqueue(ch, p, false);
    }
    /* Also after a cancel took the node the timer was armed for. */
    wk_chan_arm_retry(ch);
}

/* Whether a token of SCOPE's LIMIT is at hand in *TOKENS, asking the
 * limiter for a grant when none is left; false with *WAIT_MS set.  The
 * token is spent (decremented) only when a push starts, so a grant is
 * never lost to a push that could not start.  Tokens belong to the second
 * they were granted in (*SEC): the limiter counted them against that
 * second's budget, so the ones left when it is over are dropped, never
 * spent on top of a later second's (under-use, never overshoot). */
static bool wk_chan_token(wk_chan *ch, const char *scope, int64_t limit, int64_t *tokens,
                          int64_t *sec, int64_t *wait_ms)
{
    int64_t want, granted = 0, now_sec;
    char errstr[256];

    if (limit <= 0)
        return true;
    now_sec = wk_clock_now_ms() / 1000;
    if (*tokens > 0 && *sec != now_sec)
        *tokens = 0;
    if (*tokens == 0) {
        *sec = now_sec;
        want = limit / WK_SENDER_GRANT_DIVISOR;
        if (want < 1)
            want = 1;
        if (hr_ratelimit_take(ch->s->redis, scope, limit, want, &granted, wait_ms, errstr,
                              sizeof errstr) != 0) {
            hr_log_warn("ratelimit_error", "scope=%s error=%s", scope, errstr);
            hr_metrics_inc(ch->s->m->backend_errors[WK_BACKEND_REDIS]);
            *wait_ms = WK_SENDER_LIMITER_RETRY_MS;
            return false;
        }
        *tokens += granted;
        if (*tokens == 0) {
            hr_metrics_inc(ch->s->m->ratelimit_waits);
            return false;
        }
    }
    return true;
}

static void wk_sender_settle(wk_sender *s, wk_push *p, const wk_push_result *res)
{
    p->state = WK_PUSH_IDLE;
    s->done(s->ctx, p, res);
}

/* Whether CH pushes to addresses from the address book (fcm, apns). */
static bool wk_chan_addressed(const wk_chan *ch)
{
    return ch->cfg->type != HR_CHANNEL_WEBHOOK;
}

/* How one address (or a webhook push) ended. */
typedef enum wk_end {
    WK_END_SENT,
    WK_END_FAILED, /* for good: REASON says why */
    WK_END_DEAD,   /* the provider says the address is dead: pruned */
    WK_END_HELD,   /* not tried again: the owner is halting */
} wk_end;

/* P's current request ended with END.  A webhook push is settled with it.
 * A push to addresses records it and goes on to its next address at the
 * head of the queue, or, after its last one (or when held), is settled
 * with what its addresses got: delivered when one took it, else failed
 * when one failed for good, else unregistered (every address dead, or
 * none); held when halted before any took it. */
static void wk_chan_end(wk_chan *ch, wk_push *p, wk_push_result *res, wk_end end,
                        const char *reason)
{
    wk_sender *s = ch->s;

    if (!wk_chan_addressed(ch)) {
        res->delivered = end == WK_END_SENT;
        res->held = end == WK_END_HELD;
        res->reason = end == WK_END_FAILED ? reason : NULL;
        wk_sender_settle(s, p, res);
        return;
    }
    if (end == WK_END_SENT) {
        p->any_sent = true;
    } else if (end == WK_END_DEAD) {
        s->prune(s->ctx, p, &p->addrs[p->addr]);
    } else if (end == WK_END_FAILED && !p->any_failed) {
        p->any_failed = true;
        snprintf(p->failure, sizeof p->failure, "%s", reason);
    }
    if (end != WK_END_HELD && ++p->addr < p->naddrs &&
        !(p->hold != NULL && *p->hold)) {
        p->addr_attempts = 0;
        p->slowdowns = 0;
        wk_chan_enqueue(ch, p, true);
        return;
    }
    res->delivered = p->any_sent;
    res->held = !p->any_sent && p->addr < p->naddrs;
    res->unregistered = !p->any_sent && !res->held && !p->any_failed;
    res->reason = !p->any_sent && !res->held && p->any_failed ? p->failure : NULL;
    wk_sender_settle(s, p, res);
}

/* Builds P's next request on X: the webhook's, the messages:send of its
 * current address with the channel's access token, or the APNs request
 * signed with the provider token.  0, or -1 with ERRSTR. */
static int wk_chan_prepare(wk_chan *ch, wk_xfer *x, wk_push *p, char *errstr, size_t errlen)
{
    size_t stripped = 0;
    uint64_t gen;
    bool request;
    int64_t wake;
    const char *token;

    if (ch->apns != NULL) {
        token = wk_apns_signer_token(ch->apns, wk_clock_now_ms() / 1000, errstr, errlen);
        if (token == NULL)
            return -1;
        return wk_xfer_prepare_apns(x, ch->cfg, ch->cfg->url != NULL ? ch->cfg->url
                                                                       : WK_APNS_BASE_URL,
                                    token, p->task, p->uid, p->user, p->addrs[p->addr].address,
                                    errstr, errlen);
    }
    if (ch->cfg->type == HR_CHANNEL_SMTP)
        return wk_xfer_prepare_smtp(x, ch->cfg, p->task, p->uid, p->user,
                                    p->addrs[p->addr].address, errstr, errlen);
    if (ch->fcm == NULL) {
        if (wk_xfer_prepare(x, ch->cfg, p->task, p->uid, p->user, &stripped, errstr, errlen) != 0)
            return -1;
        if (stripped > 0)
            hr_metrics_add(ch->s->m->anomalies[WK_ANOMALY_HEADER_STRIPPED], (uint64_t)stripped);
        return 0;
    }
    /* The pump starts an fcm push only with a token at hand. */
    token = wk_fcm_auth_token(ch->fcm, wk_clock_now_ms(), &gen, &request, &wake);
    if (token == NULL) {
        snprintf(errstr, errlen, "no access token");
        return -1;
    }
    p->token_gen = gen;
    return wk_xfer_prepare_fcm(x, wk_fcm_auth_send_url(ch->fcm), token, p->task, p->uid, p->user,
                               p->addrs[p->addr].address, errstr, errlen);
}

/* Starts P on a free handle X; false when P was settled instead (it could
 * not be rendered or the request not added, or it has no address). */
static bool wk_chan_start(wk_chan *ch, wk_xfer *x, wk_push *p)
{
    wk_sender *s = ch->s;
    char errstr[256];
    wk_push_result res = {.delivered = false};
    CURLMcode mc;

    if (wk_chan_addressed(ch) && p->naddrs == 0) {
        ch->free[ch->nfree++] = x;
        res.unregistered = true;
        wk_sender_settle(s, p, &res);
        return false;
    }
    if (wk_chan_prepare(ch, x, p, errstr, sizeof errstr) != 0)
        goto fail;
    x->p = p;
    mc = curl_multi_add_handle(s->multi, x->easy);
    if (mc != CURLM_OK) {
        x->p = NULL;
        snprintf(errstr, sizeof errstr, "curl: %s", curl_multi_strerror(mc));
        goto fail;
    }
    p->xfer = x;
    p->state = WK_PUSH_INFLIGHT;
    p->attempts++;
    if (++p->addr_attempts == 1)
        p->firsts++;
    ch->inflight++;
    s->inflight++;
    hr_metrics_set(s->m->inflight, (double)s->inflight);
    return true;
fail:
    ch->free[ch->nfree++] = x;
    wk_chan_end(ch, p, &res, WK_END_FAILED, errstr);
    return false;
}

/* Starts the token request of fcm channel CH on its own handle. */
static void wk_chan_auth_start(wk_chan *ch, int64_t now)
{
    char errstr[256];
    CURLMcode mc;

    if (wk_fcm_auth_request(ch->fcm, now, ch->auth_x, errstr, sizeof errstr) != 0)
        return; /* logged, back-off set */
    mc = curl_multi_add_handle(ch->s->multi, ch->auth_x->easy);
    if (mc != CURLM_OK) {
        wk_fcm_auth_done(ch->fcm, now, 0, NULL, 0, curl_multi_strerror(mc), errstr,
                         sizeof errstr);
        return;
    }
    ch->auth_busy = true;
}

/* The token request of CH ended with curl result RC. */
static void wk_chan_auth_finished(wk_chan *ch, CURLcode rc)
{
    wk_xfer *x = ch->auth_x;
    char errstr[256], why[CURL_ERROR_SIZE + 8] = "";
    long code = 0;

    curl_multi_remove_handle(ch->s->multi, x->easy);
    ch->auth_busy = false;
    if (rc == CURLE_OK)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    else
        snprintf(why, sizeof why, "curl: %s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
    if (wk_fcm_auth_done(ch->fcm, wk_clock_now_ms(), code, x->resp.data, x->resp.len, why, errstr,
                         sizeof errstr) != 0)
        hr_metrics_inc(ch->s->m->backend_errors[WK_BACKEND_HTTP]);
}

/* Whether CH may start a push now: always for a webhook; for an fcm
 * channel with an unexpired access token.  Starts the token request when
 * one is due (sends go on with the current token meanwhile); while none
 * is usable the pushes wait, woken by the request's end or the back-off's
 * timer. */
static bool wk_chan_authorized(wk_chan *ch, int64_t now)
{
    uint64_t gen;
    bool request;
    int64_t wake;
    const char *token;

    if (ch->fcm == NULL)
        return true;
    token = wk_fcm_auth_token(ch->fcm, now, &gen, &request, &wake);
    if (request) {
        wk_chan_auth_start(ch, now);
        token = wk_fcm_auth_token(ch->fcm, now, &gen, &request, &wake);
    }
    if (token != NULL)
        return true;
    if (wake > now)
        uv_timer_start(&ch->wake, wk_chan_wake_cb, (uint64_t)(wake - now), 0);
    return false;
}

/* The next task of CH's round robin that has a token at hand, or NULL
 * with *WAIT_MS set to the end of the shortest wait.  Tasks whose limiter
 * said no are skipped until their wait ends (head-of-line: one slow task
 * must not stall the channel's others). */
static wk_task *wk_chan_next_task(wk_chan *ch, int64_t now, int64_t *wait_ms)
{
    wk_task *t;

    *wait_ms = INT64_MAX;
    TAILQ_FOREACH(t, &ch->tasks, rr) {
        int64_t wait = 0;

        if (now < t->wait_until_ms) {
            wait = t->wait_until_ms - now;
        } else if (!wk_chan_token(ch, t->rl_scope, t->rate_limit, &t->tokens, &t->tokens_sec,
                                  &wait)) {
            wait = wait > 0 ? wait : 1;
            t->wait_until_ms = now + wait;
        } else {
            return t;
        }
        if (wait < *wait_ms)
            *wait_ms = wait;
    }
    return NULL;
}

/* A slow-down of CH until UNTIL_MS that this worker has not taken part
 * in yet: the channel pauses until then and halves its in-flight cap
 * once; deliveries then widen the cap again one by one (wk_retry), so
 * the channel recovers step by step. */
static void wk_chan_slow(wk_chan *ch, int64_t until_ms, const char *why, long status)
{
    if (until_ms > ch->paused_until_ms)
        ch->paused_until_ms = until_ms;
    /* Within a window (the many requests in flight when the provider
     * pushed back report it together): extended, quietly. */
    if (ch->slow_seen_until >= wk_clock_now_ms()) {
        if (until_ms > ch->slow_seen_until)
            ch->slow_seen_until = until_ms;
        return;
    }
    wk_retry_cap_halve(&ch->cap);
    ch->slow_seen_until = until_ms;
    hr_log_warn("channel_slowdown", "channel=%s source=%s status=%ld pause_ms=%" PRId64 " cap=%d",
                ch->cfg->name, why, status, until_ms - wk_clock_now_ms(), ch->cap.cap);
}

/* Every WK_SENDER_SLOW_POLL_MS while CH has pushes waiting: a slow-down
 * another worker published is taken part in.  A Redis error is counted
 * and the channel goes on. */
static void wk_chan_read_slow(wk_chan *ch, int64_t now)
{
    const char *argv[] = {"GET", ch->k_slow};
    char errstr[256];
    redisReply *reply;

    if (now - ch->slow_checked_ms < WK_SENDER_SLOW_POLL_MS)
        return;
    ch->slow_checked_ms = now;
    reply = hr_redis_cmd(ch->s->redis, errstr, sizeof errstr, 2, argv, NULL);
    if (reply == NULL) {
        hr_metrics_inc(ch->s->m->backend_errors[WK_BACKEND_REDIS]);
        return;
    }
    if (reply->type == REDIS_REPLY_STRING) {
        int64_t until = strtoll(reply->str, NULL, 10);

        if (until > now && until > ch->slow_seen_until)
            wk_chan_slow(ch, until, "cluster", 0);
    }
    freeReplyObject(reply);
}

/* Publishes this worker's slow-down of CH until UNTIL_MS to every worker:
 * the key holds the deadline and expires with it. */
static void wk_chan_publish_slow(wk_chan *ch, int64_t until_ms, int64_t pause_ms)
{
    char until[24], px[24], errstr[256];
    const char *argv[] = {"SET", ch->k_slow, until, "PX", px};
    redisReply *reply;

    snprintf(until, sizeof until, "%" PRId64, until_ms);
    snprintf(px, sizeof px, "%" PRId64, pause_ms > 0 ? pause_ms : 1);
    reply = hr_redis_cmd(ch->s->redis, errstr, sizeof errstr, 5, argv, NULL);
    if (reply == NULL) {
        hr_log_warn("slowdown_publish_failed", "channel=%s error=\"%s\"", ch->cfg->name, errstr);
        hr_metrics_inc(ch->s->m->backend_errors[WK_BACKEND_REDIS]);
        return;
    }
    freeReplyObject(reply);
}

/* Starts as many ready pushes of CH as its cap, pause and tokens allow,
 * one per task in turn. */
static void wk_chan_pump(wk_chan *ch)
{
    wk_sender *s = ch->s;
    int64_t now = wk_clock_now_ms(), wait_ms = 0;
    wk_task *t;
    wk_push *p;
    wk_xfer *x;

    wk_chan_promote(ch, now);
    if (!TAILQ_EMPTY(&ch->tasks))
        wk_chan_read_slow(ch, now);
    while (!s->draining && !TAILQ_EMPTY(&ch->tasks) && ch->inflight < (size_t)ch->cap.cap) {
        if (now < ch->paused_until_ms) {
            uv_timer_start(&ch->wake, wk_chan_wake_cb, (uint64_t)(ch->paused_until_ms - now), 0);
            return;
        }
        if (!wk_chan_authorized(ch, now))
            return;
        if (!wk_chan_token(ch, ch->rl_scope, ch->cfg->rate_limit, &ch->tokens, &ch->tokens_sec,
                           &wait_ms) ||
            (t = wk_chan_next_task(ch, now, &wait_ms)) == NULL) {
            uv_timer_start(&ch->wake, wk_chan_wake_cb, (uint64_t)(wait_ms > 0 ? wait_ms : 1), 0);
            return;
        }
        x = wk_chan_take_xfer(ch);
        if (x == NULL) {
            hr_log_error("curl_handle_error", "channel=%s", ch->cfg->name);
            uv_timer_start(&ch->wake, wk_chan_wake_cb, WK_SENDER_LIMITER_RETRY_MS, 0);
            return;
        }
        /* The tokens go with the push, started or settled. */
        if (ch->cfg->rate_limit > 0 && ch->tokens > 0)
            ch->tokens--;
        if (t->rate_limit > 0 && t->tokens > 0)
            t->tokens--;
        p = TAILQ_FIRST(&t->ready);
        wk_chan_dequeue(ch, p);
        /* Round robin: the task goes behind the others. */
        if (t->queued) {
            TAILQ_REMOVE(&ch->tasks, t, rr);
            TAILQ_INSERT_TAIL(&ch->tasks, t, rr);
        }
        wk_chan_start(ch, x, p);
    }
}

static void wk_sender_pump(wk_sender *s)
{
    if (s->pumping) {
        s->pump_again = true;
        return;
    }
    s->pumping = true;
    do {
        s->pump_again = false;
        for (size_t i = 0; i < s->nchans; i++)
            wk_chan_pump(&s->chans[i]);
    } while (s->pump_again);
    s->pumping = false;
}

/* ---- outcomes ------------------------------------------------------------ */

/* A finished request of X with curl result RC. */
static void wk_sender_finished(wk_sender *s, wk_xfer *x, CURLcode rc)
{
    wk_chan *ch = x->ch;
    wk_push *p = x->p;
    const hr_channel *cfg = ch->cfg;
    long code = 0;
    int64_t now = wk_clock_now_ms();
    wk_push_result res = {.latency_ms = (int)(now - x->start_ms)};
    wk_provider_result v;
    char reason[sizeof v.reason + 32];

    if (rc == CURLE_OK || cfg->type == HR_CHANNEL_SMTP)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    wk_xfer_verdict(cfg, x, rc, code, &v);
    wk_chan_release_xfer(ch, x);
    res.http_status = code;
    hr_metrics_observe(s->m->chans[ch - s->chans].latency, res.latency_ms / 1000.0);
    if (rc != CURLE_OK)
        hr_metrics_inc(s->m->backend_errors[WK_BACKEND_HTTP]);

    if (v.verdict == WK_VERDICT_DELIVERED) {
        wk_retry_cap_grow(&ch->cap);
        wk_chan_end(ch, p, &res, WK_END_SENT, NULL);
        return;
    }
    if (p->hold != NULL && *p->hold) {
        wk_chan_end(ch, p, &res, WK_END_HELD, NULL);
        return;
    }
    if (v.verdict == WK_VERDICT_UNREGISTERED) {
        wk_chan_end(ch, p, &res, WK_END_DEAD, NULL);
        return;
    }
    /* "Slow down" and "refresh the token" re-send without counting
     * against the retry budget, up to a bound; past it they are what
     * their status says. */
    if ((v.verdict == WK_VERDICT_SLOWDOWN || v.verdict == WK_VERDICT_REFRESH) &&
        p->slowdowns >= WK_SENDER_MAX_SLOWDOWNS)
        v.verdict = code >= 500 ? WK_VERDICT_RETRY : WK_VERDICT_FAILED;
    if (v.verdict == WK_VERDICT_REFRESH && ch->fcm != NULL) {
        wk_fcm_auth_rejected(ch->fcm, p->token_gen);
        p->slowdowns++;
        wk_chan_enqueue(ch, p, true);
        return;
    }
    /* APNs calls the provider token expired: a new one, unless the held
     * one is too young for Apple to accept a renewal (then the clock or
     * the key is wrong, and the push fails). */
    if (v.verdict == WK_VERDICT_REFRESH && ch->apns != NULL &&
        wk_apns_signer_expired(ch->apns, now / 1000) == 0) {
        p->slowdowns++;
        wk_chan_enqueue(ch, p, true);
        return;
    }
    if (v.verdict == WK_VERDICT_SLOWDOWN) {
        int64_t pause = v.retry_after_s > 0 ? (int64_t)v.retry_after_s * 1000
                                            : WK_SENDER_DEFAULT_PAUSE_MS;

        /* A provider's Retry-After may not stall the channel for longer
         * than the channel's longest retry backoff. */
        if (pause > cfg->retry_max_backoff_ms)
            pause = cfg->retry_max_backoff_ms;

        /* Every worker pauses with this one (wk_chan_read_slow): a new
         * window is published, and an extension worth a poll. */
        {
            int64_t before = ch->slow_seen_until;

            wk_chan_slow(ch, now + pause, "provider", code);
            if (before < now || now + pause > before + WK_SENDER_SLOW_POLL_MS)
                wk_chan_publish_slow(ch, now + pause, pause);
        }
        /* A re-send all the same (it counts as a retry in the stats, the
         * delivery log and herald_retries_total), but not against the
         * channel's retry budget: that is for failures. */
        p->slowdowns++;
        wk_chan_enqueue(ch, p, true);
        return;
    }
    if (v.verdict != WK_VERDICT_RETRY) {
        wk_chan_end(ch, p, &res, WK_END_FAILED, v.reason);
        return;
    }
    if (p->addr_attempts - p->slowdowns >= cfg->retry_max_attempts) {
        snprintf(reason, sizeof reason, "%s after %d attempts", v.reason, p->addr_attempts);
        wk_chan_end(ch, p, &res, WK_END_FAILED, reason);
        return;
    }
    p->delay.due_ms = now + wk_retry_backoff_ms(cfg->retry_backoff_ms, cfg->retry_max_backoff_ms,
                                                p->addr_attempts - p->slowdowns,
                                                wk_sender_random(s));
    if (wk_retry_heap_push(&ch->delayed, &p->delay) != 0) {
        wk_chan_end(ch, p, &res, WK_END_FAILED, "out of memory");
        return;
    }
    p->state = WK_PUSH_DELAYED;
    wk_chan_arm_retry(ch);
}

static void wk_sender_check(wk_sender *s)
{
    CURLMsg *msg;
    int left;

    while ((msg = curl_multi_info_read(s->multi, &left)) != NULL) {
        wk_xfer *x = NULL;

        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        if (x == x->ch->auth_x)
            wk_chan_auth_finished(x->ch, msg->data.result);
        else
            wk_sender_finished(s, x, msg->data.result);
    }
    wk_sender_pump(s);
}

/* ---- public -------------------------------------------------------------- */

/* An apns channel's signer from its .p8 key file. */
static int wk_chan_apns_signer(wk_chan *ch, char *errstr, size_t errlen)
{
    const hr_channel *cfg = ch->cfg;
    char detail[256];
    char *p8 = NULL;
    size_t len = 0;
    int rc = -1;

    if (hr_config_read_file(cfg->apns.key_file, WK_SENDER_KEY_FILE_MAX, &p8, &len, detail,
                            sizeof detail) != 0 ||
        wk_apns_signer_new(p8, len, cfg->apns.key_id, cfg->apns.team_id, &ch->apns, detail,
                           sizeof detail) != 0)
        snprintf(errstr, errlen, "channel %s: key_file %s", cfg->name, detail);
    else
        rc = 0;
    free(p8);
    return rc;
}

int wk_sender_new(uv_loop_t *loop, const hr_config *cfg, hr_redis *redis, wk_metrics *m,
                  wk_sender_done_fn done, void *ctx, wk_sender **out, char *errstr, size_t errlen)
{
    wk_sender *s = calloc(1, sizeof *s);
    long maxconn = 0, hostconn = 0, conns;

    *out = NULL;
    if (s == NULL)
        goto oom;
    s->loop = loop;
    s->cfg = cfg;
    s->redis = redis;
    s->m = m;
    s->done = done;
    s->ctx = ctx;
    if (getrandom(&s->rnd, sizeof s->rnd, 0) != (ssize_t)sizeof s->rnd || s->rnd == 0)
        s->rnd = (uint64_t)wk_clock_now_ms() ^ ((uint64_t)getpid() << 32) ^ 1;
    s->chans = calloc(cfg->nchannels, sizeof *s->chans);
    if (s->chans == NULL)
        goto oom;
    s->multi = curl_multi_init();
    if (s->multi == NULL) {
        snprintf(errstr, errlen, "curl_multi_init failed");
        goto fail;
    }
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    for (size_t i = 0; i < cfg->nchannels; i++) {
        wk_chan *ch = &s->chans[i];

        ch->s = s;
        ch->cfg = &cfg->channels[i];
        snprintf(ch->rl_scope, sizeof ch->rl_scope, "push:ch:%s", ch->cfg->name);
        /* The config's 64-byte channel names fit HR_KEY_MAX. */
        hr_key_slowdown(hr_redis_prefix(redis), ch->k_slow, sizeof ch->k_slow, ch->cfg->name);
        TAILQ_INIT(&ch->tasks);
        wk_retry_cap_init(&ch->cap, ch->cfg->concurrency);
        ch->all = calloc((size_t)ch->cfg->concurrency, sizeof *ch->all);
        ch->free = calloc((size_t)ch->cfg->concurrency, sizeof *ch->free);
        uv_timer_init(loop, &ch->wake);
        uv_timer_init(loop, &ch->retry);
        ch->wake.data = ch->retry.data = ch;
        s->nchans++;
        if (ch->all == NULL || ch->free == NULL)
            goto oom;
        if (ch->cfg->type == HR_CHANNEL_FCM) {
            if (wk_fcm_auth_new(ch->cfg, &ch->fcm, errstr, errlen) != 0)
                goto fail;
            if ((ch->auth_x = wk_xfer_new(ch->cfg, ch)) == NULL)
                goto oom;
        }
        if (ch->cfg->type == HR_CHANNEL_APNS) {
            if (wk_chan_apns_signer(ch, errstr, errlen) != 0)
                goto fail;
            /* Slow start: one request per connection until answers come
             * back, so curl knows each connection's
             * SETTINGS_MAX_CONCURRENT_STREAMS before it multiplexes (APNs
             * allows one stream until a provider token was accepted);
             * every delivery widens the cap by one (wk_retry). */
            if (ch->cfg->apns.connections < ch->cap.cap)
                ch->cap.cap = ch->cfg->apns.connections;
        }
        /* HTTP/1.1: a connection per request in flight; APNs: its few
         * multiplexed connections. */
        conns = ch->cfg->type == HR_CHANNEL_APNS ? ch->cfg->apns.connections
                                                 : ch->cfg->concurrency;
        maxconn += conns;
        if (conns > hostconn)
            hostconn = conns;
    }
    curl_multi_setopt(s->multi, CURLMOPT_SOCKETFUNCTION, wk_sender_socket_cb);
    curl_multi_setopt(s->multi, CURLMOPT_SOCKETDATA, s);
    curl_multi_setopt(s->multi, CURLMOPT_TIMERFUNCTION, wk_sender_timer_cb);
    curl_multi_setopt(s->multi, CURLMOPT_TIMERDATA, s);
    curl_multi_setopt(s->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    /* Connections per host (see above), kept for reuse.  The limit is the
     * multi handle's: an APNs host shares it with the webhook hosts. */
    curl_multi_setopt(s->multi, CURLMOPT_MAX_HOST_CONNECTIONS, hostconn);
    curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, maxconn);
    *out = s;
    return 0;
oom:
    snprintf(errstr, errlen, "out of memory");
fail:
    if (s != NULL && s->multi != NULL) {
        wk_sender_close(s);
        /* Handles were initialised but never started: closing them needs
         * one loop turn. */
        uv_run(loop, UV_RUN_NOWAIT);
    }
    wk_sender_free(s);
    return -1;
}

bool wk_sender_addressed(const wk_sender *s, size_t ch_index, hr_addr_platform *platform,
                         const char **app)
{
    const wk_chan *ch = &s->chans[ch_index];

    if (ch->fcm != NULL) {
        *platform = HR_ADDR_FCM;
        *app = wk_fcm_auth_project(ch->fcm);
        return true;
    }
    if (ch->apns != NULL) {
        *platform = HR_ADDR_APNS;
        *app = ch->cfg->apns.topic;
        return true;
    }
    if (ch->cfg->type == HR_CHANNEL_SMTP) {
        *platform = HR_ADDR_EMAIL;
        *app = "";
        return true;
    }
    return false;
}

void wk_sender_set_prune(wk_sender *s, wk_sender_prune_fn prune)
{
    s->prune = prune;
}

void wk_sender_submit(wk_sender *s, wk_push *p)
{
    wk_chan *ch = &s->chans[p->task->ch_index];

    p->xfer = NULL;
    wk_chan_enqueue(ch, p, false);
}

void wk_sender_kick(wk_sender *s)
{
    wk_sender_pump(s);
}

void wk_sender_cancel(wk_sender *s, wk_push *p)
{
    wk_chan *ch = &s->chans[p->task->ch_index];

    switch (p->state) {
    case WK_PUSH_READY:
        wk_chan_dequeue(ch, p);
        break;
    case WK_PUSH_DELAYED:
        wk_retry_heap_remove(&ch->delayed, &p->delay);
        break;
    case WK_PUSH_INFLIGHT:
        wk_chan_release_xfer(ch, p->xfer);
        break;
    case WK_PUSH_IDLE:
        break;
    }
    p->state = WK_PUSH_IDLE;
    p->xfer = NULL;
}

bool wk_sender_stuck(const wk_sender *s, size_t ch_index)
{
    const wk_chan *ch = &s->chans[ch_index];

    /* A token request's end runs the pump too. */
    if (s->draining || ch->inflight > 0 || ch->auth_busy)
        return false;
    if (!TAILQ_EMPTY(&ch->tasks) && !uv_is_active((const uv_handle_t *)&ch->wake))
        return true;
    return ch->delayed.n > 0 && !uv_is_active((const uv_handle_t *)&ch->retry);
}

void wk_sender_drain(wk_sender *s)
{
    s->draining = true;
}

size_t wk_sender_in_flight(const wk_sender *s)
{
    return s->inflight;
}

void wk_sender_close(wk_sender *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nchans; i++) {
        wk_chan *ch = &s->chans[i];

        for (size_t k = 0; k < ch->nall; k++) {
            if (ch->all[k]->p != NULL)
                curl_multi_remove_handle(s->multi, ch->all[k]->easy);
            wk_xfer_free(ch->all[k]);
        }
        ch->nall = ch->nfree = 0;
        if (ch->auth_busy)
            curl_multi_remove_handle(s->multi, ch->auth_x->easy);
        wk_xfer_free(ch->auth_x);
        ch->auth_x = NULL;
        ch->auth_busy = false;
        uv_close((uv_handle_t *)&ch->wake, NULL);
        uv_close((uv_handle_t *)&ch->retry, NULL);
    }
    /* Closes cached connections; the socket callback closes their polls. */
    curl_multi_cleanup(s->multi);
    s->multi = NULL;
    uv_close((uv_handle_t *)&s->timer, NULL);
}

void wk_sender_free(wk_sender *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nchans; i++) {
        free(s->chans[i].all);
        free(s->chans[i].free);
        wk_fcm_auth_free(s->chans[i].fcm);
        wk_apns_signer_free(s->chans[i].apns);
        wk_retry_heap_free(&s->chans[i].delayed);
    }
    free(s->chans);
    free(s);
}
