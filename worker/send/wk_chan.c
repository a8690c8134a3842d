/* wk_chan: one channel of the sender: its pool of easy handles, the
 * round robin of its tasks' ready pushes and its retry heap, rate-limit
 * tokens (channel and task), the fcm channel's token request, the
 * cluster-wide slow-down, how a push's request ends (wk_chan_end) and the
 * pump that starts as many pushes as the channel may (see wk_sender.h). */
#include "wk_sender_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "hr_log.h"
#include "hr_clock.h"
#include "hr_ratelimit.h"

/* ---- easy handles (wk_xfer) --------------------------------------------- */

static wk_xfer *wk_chan_take_xfer(wk_chan *chan)
{
    wk_xfer *x;

    if (chan->nfree > 0)
        return chan->free[--chan->nfree];
    if (chan->nall == (size_t)chan->cfg->concurrency)
        return NULL;
    x = wk_xfer_new(chan->cfg, chan);
    if (x == NULL)
        return NULL;
    x->mh = &chan->multis[chan->nall % chan->nmultis];
    wk_sender_uv_easy(chan->s, x->easy);
    chan->all[chan->nall++] = x;
    return x;
}

/* Takes X out of the multi handle and back into the pool. */
void wk_chan_release_xfer(wk_chan *chan, wk_xfer *x)
{
    wk_sender *s = chan->s;

    curl_multi_remove_handle(x->mh->multi, x->easy);
    if (x->p != NULL) {
        x->p->xfer = NULL;
        x->p->state = WK_PUSH_IDLE;
    }
    x->p = NULL;
    chan->free[chan->nfree++] = x;
    chan->inflight--;
    s->inflight--;
    hr_metrics_set(s->m->inflight, (double)s->inflight);
}

/* ---- scheduling ---------------------------------------------------------- */

void wk_chan_wake_cb(uv_timer_t *t)
{
    wk_chan *chan = t->data;

    wk_sender_pump(chan->s);
}

void wk_chan_arm_retry(wk_chan *chan)
{
    const wk_retry_node *first = wk_retry_heap_min(&chan->delayed);
    int64_t now = hr_clock_now_ms();

    if (first == NULL)
        uv_timer_stop(&chan->retry);
    else
        uv_timer_start(&chan->retry, wk_chan_wake_cb,
                       first->due_ms > now ? (uint64_t)(first->due_ms - now) : 0, 0);
}

static wk_push *wk_push_of(wk_retry_node *n)
{
    return (wk_push *)((char *)n - offsetof(wk_push, delay));
}

/* Links PUSH READY into its task's queue (at the head when it goes next);
 * a task that had none joins the channel's round robin at the end. */
void wk_chan_enqueue(wk_chan *chan, wk_push *push, bool head)
{
    wk_task *wt = push->task;

    if (!wt->queued) {
        TAILQ_INIT(&wt->ready);
        TAILQ_INSERT_TAIL(&chan->tasks, wt, rr);
        wt->queued = true;
    }
    if (head)
        TAILQ_INSERT_HEAD(&wt->ready, push, link);
    else
        TAILQ_INSERT_TAIL(&wt->ready, push, link);
    push->state = WK_PUSH_READY;
}

/* Unlinks READY PUSH; its task leaves the round robin when nothing is left. */
void wk_chan_dequeue(wk_chan *chan, wk_push *push)
{
    wk_task *wt = push->task;

    TAILQ_REMOVE(&wt->ready, push, link);
    if (TAILQ_EMPTY(&wt->ready)) {
        TAILQ_REMOVE(&chan->tasks, wt, rr);
        wt->queued = false;
    }
}

/* Moves delayed pushes whose backoff passed to the ready queue. */
static void wk_chan_promote(wk_chan *chan, int64_t now)
{
    wk_retry_node *n;

    while ((n = wk_retry_heap_min(&chan->delayed)) != NULL && n->due_ms <= now) {
        wk_push *push = wk_push_of(n);

        wk_retry_heap_remove(&chan->delayed, n);
        wk_chan_enqueue(chan, push, false);
    }
    /* Also after a cancel took the node the timer was armed for. */
    wk_chan_arm_retry(chan);
}

/* The two budgets a push spends: its task's (rate_limit, or the planned
 * rate of a finish_by) and its task's share of the channel's rate_limit. */
typedef enum wk_budget { WK_BUDGET_TASK, WK_BUDGET_SHARE } wk_budget;

/* A grant asked of the limiter, on the Redis thread (wk_chan_token). */
typedef struct wk_chan_grant {
    wk_chan *chan;
    wk_task *wt; /* a reference, put when the answer came */
    wk_budget b;
    bool paced;
    int64_t limit, want, sec;
    int64_t granted, wait_ms, rate;
    int rc;
    char errstr[256];
} wk_chan_grant;

/* Redis thread: asks the limiter for up to WANT of budget B of WT (LIMIT >
 * 0; for a paced task 0 is no cap).  Reads only what stays: the task's
 * row, scope and weight, the channel's name. */
static void wk_chan_grant_run(hr_redis *r, void *arg)
{
    wk_chan_grant *g = arg;
    const wk_task *wt = g->wt;

    if (g->b == WK_BUDGET_SHARE)
        g->rc =
            hr_ratelimit_take_share(r, g->chan->cfg->name, wt->row->id, wt->weight, g->limit,
                                    g->want, &g->granted, &g->wait_ms, g->errstr, sizeof g->errstr);
    else if (g->paced)
        g->rc = hr_ratelimit_take_paced(r, wt->row->id, "push", g->limit, wt->row->finish_ms,
                                        g->want, &g->granted, &g->wait_ms, &g->rate, g->errstr,
                                        sizeof g->errstr);
    else
        g->rc = hr_ratelimit_take(r, wt->rl_scope, g->limit, g->want, &g->granted, &g->wait_ms,
                                  g->errstr, sizeof g->errstr);
}

/* The limiter answered: the tokens are WT's for the second they were asked
 * in (a later answer's are dropped: under-use, never overshoot), and the
 * channel is pumped. */
static void wk_chan_grant_done(void *arg)
{
    wk_chan_grant *g = arg;
    wk_chan *chan = g->chan;
    wk_task *wt = g->wt;
    bool task = g->b == WK_BUDGET_TASK;
    int64_t *tokens = task ? &wt->tokens : &wt->share_tokens;
    int64_t *sec = task ? &wt->tokens_sec : &wt->share_sec;
    int64_t now = hr_clock_now_ms();

    wt->granting[g->b] = false;
    if (g->rc != 0) {
        hr_log_warn("ratelimit_error", "task=%" PRId64 " budget=%s error=%s", wt->row->id,
                    task ? "task" : "channel", g->errstr);
        hr_metrics_inc(chan->s->m->backend_errors[WK_BACKEND_REDIS]);
        wt->wait_until_ms = now + WK_SENDER_LIMITER_RETRY_MS;
    } else {
        if (g->paced)
            wt->pace_rate = g->rate;
        if (*sec == g->sec && now / 1000 == g->sec)
            *tokens += g->granted;
        if (g->granted == 0) {
            hr_metrics_inc(chan->s->m->ratelimit_waits);
            wt->wait_until_ms = now + (g->wait_ms > 0 ? g->wait_ms : 1);
        } else {
            wt->wait_until_ms = 0;
        }
    }
    wt->refs--;
    /* A sender closed meanwhile (shutdown) has no queues left to run. */
    if (!chan->s->closed)
        wk_sender_pump(chan->s);
    free(g);
}

/* Whether a token of budget B of WT is at hand; false with *WAIT_MS set
 * when none is.  A budget with none left asks the limiter for a grant (a
 * job on the Redis thread, one per budget at a time) and waits for it:
 * its answer pumps the channel.  The token is spent (decremented) only
 * when a push starts, so a grant is never lost to a push that could not
 * start.  Tokens belong to the second they were granted in: the limiter
 * counted them against that second's budget, so the ones left when it is
 * over are dropped, never spent on top of a later second's (under-use,
 * never overshoot).  A paced task asks in steps of its rate in force (the
 * last grant's; WK_SENDER_PACED_WANT before the first), which the
 * limiter's script derives. */
static bool wk_chan_token(wk_chan *chan, wk_task *wt, wk_budget b, int64_t *wait_ms)
{
    bool task = b == WK_BUDGET_TASK, paced = task && hr_task_paced(wt->row);
    int64_t limit = task ? wt->rate_limit : chan->cfg->rate_limit;
    int64_t *tokens = task ? &wt->tokens : &wt->share_tokens;
    int64_t *sec = task ? &wt->tokens_sec : &wt->share_sec;
    int64_t want, now_sec;
    wk_chan_grant *g;

    if (limit <= 0 && !paced)
        return true;
    now_sec = hr_clock_now_ms() / 1000;
    if (*tokens > 0 && *sec != now_sec)
        *tokens = 0;
    if (*tokens > 0)
        return true;
    /* Until the grant answers (the wait is only a fallback: the answer
     * pumps the channel at once). */
    *wait_ms = WK_SENDER_LIMITER_RETRY_MS;
    if (wt->granting[b])
        return false;
    want = paced && wt->pace_rate > 0 ? wt->pace_rate / WK_SENDER_GRANT_DIVISOR
           : paced                    ? WK_SENDER_PACED_WANT
                                      : limit / WK_SENDER_GRANT_DIVISOR;
    g = calloc(1, sizeof *g);
    if (g != NULL) {
        *g = (wk_chan_grant){.chan = chan,
                             .wt = wt,
                             .b = b,
                             .paced = paced,
                             .limit = limit,
                             .want = want < 1 ? 1 : want,
                             .sec = now_sec};
        *sec = now_sec;
        /* The grant holds the task as a chunk does, so the cache keeps it
         * until the answer came. */
        wt->refs++;
        if (wk_redis_call(chan->s->rd, wk_chan_grant_run, wk_chan_grant_done, g) == 0) {
            wt->granting[b] = true;
            return false;
        }
        wt->refs--;
        free(g);
    }
    hr_log_warn("ratelimit_error", "task=%" PRId64 " budget=%s error=the Redis thread took no job",
                wt->row->id, task ? "task" : "channel");
    hr_metrics_inc(chan->s->m->backend_errors[WK_BACKEND_REDIS]);
    return false;
}

/* Whether CHAN pushes to addresses from the address book (fcm, apns). */
bool wk_chan_addressed(const wk_chan *chan)
{
    return chan->cfg->type != HR_CHANNEL_WEBHOOK;
}

/* PUSH's current request ended with END.  A webhook push is settled with it.
 * A push to addresses records it and goes on to its next address at the
 * head of the queue, or, after its last one (or when held), is settled
 * with what its addresses got: delivered when one took it, else failed
 * when one failed for good, else unregistered (every address dead, or
 * none); held when halted before any took it. */
void wk_chan_end(wk_chan *chan, wk_push *push, wk_push_result *res, wk_end end, const char *reason)
{
    wk_sender *s = chan->s;

    if (!wk_chan_addressed(chan)) {
        res->delivered = end == WK_END_SENT;
        res->held = end == WK_END_HELD;
        res->reason = end == WK_END_FAILED ? reason : NULL;
        wk_sender_settle(s, push, res);
        return;
    }
    if (end == WK_END_SENT) {
        push->any_sent = true;
    } else if (end == WK_END_DEAD) {
        s->prune(s->ctx, push, &push->addrs[push->addr]);
    } else if (end == WK_END_FAILED && !push->any_failed) {
        push->any_failed = true;
        snprintf(push->failure, sizeof push->failure, "%s", reason);
    }
    if (end != WK_END_HELD && ++push->addr < push->naddrs && !(push->hold != NULL && *push->hold)) {
        push->addr_attempts = 0;
        push->slowdowns = 0;
        wk_chan_enqueue(chan, push, true);
        return;
    }
    res->delivered = push->any_sent;
    res->held = !push->any_sent && push->addr < push->naddrs;
    res->unregistered = !push->any_sent && !res->held && !push->any_failed;
    res->reason = !push->any_sent && !res->held && push->any_failed ? push->failure : NULL;
    wk_sender_settle(s, push, res);
}

/* Builds PUSH's next request on X: the webhook's, the messages:send of its
 * current address with the channel's access token, or the APNs request
 * signed with the provider token.  0, or -1 with ERRSTR. */
static int wk_chan_prepare(wk_chan *chan, wk_xfer *x, wk_push *push, char *errstr, size_t errlen)
{
    size_t stripped = 0;
    uint64_t gen;
    bool request;
    int64_t wake;
    const char *token;

    if (chan->apns != NULL) {
        token = wk_apns_signer_token(chan->apns, hr_clock_now_ms() / 1000, errstr, errlen);
        if (token == NULL)
            return -1;
        return wk_xfer_prepare_apns(
            x, chan->cfg, chan->cfg->url != NULL ? chan->cfg->url : WK_APNS_BASE_URL, token,
            push->task, push->uid, push->user, push->addrs[push->addr].address, errstr, errlen);
    }
    if (chan->cfg->type == HR_CHANNEL_SMTP)
        return wk_xfer_prepare_smtp(x, chan->cfg, push->task, push->uid, push->user,
                                    push->addrs[push->addr].address, errstr, errlen);
    if (chan->fcm == NULL) {
        if (wk_xfer_prepare(x, chan->cfg, push->task, push->uid, push->user, &stripped, errstr,
                            errlen) != 0)
            return -1;
        if (stripped > 0)
            hr_metrics_add(chan->s->m->anomalies[WK_ANOMALY_HEADER_STRIPPED], (uint64_t)stripped);
        return 0;
    }
    /* The pump starts an fcm push only with a token at hand. */
    token = wk_fcm_auth_token(chan->fcm, hr_clock_now_ms(), &gen, &request, &wake);
    if (token == NULL) {
        snprintf(errstr, errlen, "no access token");
        return -1;
    }
    push->token_gen = gen;
    return wk_xfer_prepare_fcm(x, wk_fcm_auth_send_url(chan->fcm), token, push->task, push->uid,
                               push->user, push->addrs[push->addr].address, errstr, errlen);
}

/* Starts PUSH on a free handle X; false when PUSH was settled instead (it could
 * not be rendered or the request not added, or it has no address). */
static bool wk_chan_start(wk_chan *chan, wk_xfer *x, wk_push *push)
{
    wk_sender *s = chan->s;
    char errstr[256];
    wk_push_result res = {.delivered = false};
    CURLMcode mc;

    if (wk_chan_addressed(chan) && push->naddrs == 0) {
        chan->free[chan->nfree++] = x;
        res.unregistered = true;
        wk_sender_settle(s, push, &res);
        return false;
    }
    if (wk_chan_prepare(chan, x, push, errstr, sizeof errstr) != 0)
        goto fail;
    x->p = push;
    mc = curl_multi_add_handle(x->mh->multi, x->easy);
    if (mc != CURLM_OK) {
        x->p = NULL;
        snprintf(errstr, sizeof errstr, "curl: %s", curl_multi_strerror(mc));
        goto fail;
    }
    push->xfer = x;
    push->state = WK_PUSH_INFLIGHT;
    push->attempts++;
    if (++push->addr_attempts == 1)
        push->firsts++;
    chan->inflight++;
    s->inflight++;
    hr_metrics_set(s->m->inflight, (double)s->inflight);
    return true;
fail:
    chan->free[chan->nfree++] = x;
    wk_chan_end(chan, push, &res, WK_END_FAILED, errstr);
    return false;
}

/* Starts the token request of fcm channel CHAN on its own handle. */
static void wk_chan_auth_start(wk_chan *chan, int64_t now)
{
    char errstr[256];
    CURLMcode mc;

    if (wk_fcm_auth_request(chan->fcm, now, chan->auth_x, errstr, sizeof errstr) != 0)
        return; /* logged, back-off set */
    mc = curl_multi_add_handle(chan->auth_x->mh->multi, chan->auth_x->easy);
    if (mc != CURLM_OK) {
        wk_fcm_auth_done(chan->fcm, now, 0, NULL, 0, curl_multi_strerror(mc), errstr,
                         sizeof errstr);
        return;
    }
    chan->auth_busy = true;
}

/* The token request of CHAN ended with curl result RC. */
void wk_chan_auth_finished(wk_chan *chan, CURLcode rc)
{
    wk_xfer *x = chan->auth_x;
    char errstr[256], why[CURL_ERROR_SIZE + 8] = "";
    long code = 0;

    curl_multi_remove_handle(x->mh->multi, x->easy);
    chan->auth_busy = false;
    if (rc == CURLE_OK)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    else
        snprintf(why, sizeof why, "curl: %s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
    if (wk_fcm_auth_done(chan->fcm, hr_clock_now_ms(), code, x->resp.data, x->resp.len, why, errstr,
                         sizeof errstr) != 0)
        hr_metrics_inc(chan->s->m->backend_errors[WK_BACKEND_HTTP]);
}

/* Whether CHAN may start a push now: always for a webhook; for an fcm
 * channel with an unexpired access token.  Starts the token request when
 * one is due (sends go on with the current token meanwhile); while none
 * is usable the pushes wait, woken by the request's end or the back-off's
 * timer. */
static bool wk_chan_authorized(wk_chan *chan, int64_t now)
{
    uint64_t gen;
    bool request;
    int64_t wake;
    const char *token;

    if (chan->fcm == NULL)
        return true;
    token = wk_fcm_auth_token(chan->fcm, now, &gen, &request, &wake);
    if (request) {
        wk_chan_auth_start(chan, now);
        token = wk_fcm_auth_token(chan->fcm, now, &gen, &request, &wake);
    }
    if (token != NULL)
        return true;
    if (wake > now)
        uv_timer_start(&chan->wake, wk_chan_wake_cb, (uint64_t)(wake - now), 0);
    return false;
}

/* The next task of CHAN's round robin that has a token at hand, or NULL
 * with *WAIT_MS set to the end of the shortest wait.  Tasks whose limiter
 * said no are skipped until their wait ends (head-of-line: one slow task
 * must not stall the channel's others). */
static wk_task *wk_chan_next_task(wk_chan *chan, int64_t now, int64_t *wait_ms)
{
    wk_task *wt;

    *wait_ms = INT64_MAX;
    TAILQ_FOREACH(wt, &chan->tasks, rr)
    {
        int64_t wait = 0;

        if (now < wt->wait_until_ms) {
            wait = wt->wait_until_ms - now;
        } else if (!wk_chan_token(chan, wt, WK_BUDGET_TASK, &wait) ||
                   !wk_chan_token(chan, wt, WK_BUDGET_SHARE, &wait)) {
            wait = wait > 0 ? wait : 1;
            wt->wait_until_ms = now + wait;
        } else {
            return wt;
        }
        if (wait < *wait_ms)
            *wait_ms = wait;
    }
    return NULL;
}

/* A slow-down of CHAN until UNTIL_MS that this worker has not taken part
 * in yet: the channel pauses until then and halves its in-flight cap
 * once; deliveries then widen the cap again one by one (wk_retry), so
 * the channel recovers step by step. */
void wk_chan_slow(wk_chan *chan, int64_t until_ms, const char *why, long status)
{
    if (until_ms > chan->paused_until_ms)
        chan->paused_until_ms = until_ms;
    /* Within a window (the many requests in flight when the provider
     * pushed back report it together): extended, quietly. */
    if (chan->slow_seen_until >= hr_clock_now_ms()) {
        if (until_ms > chan->slow_seen_until)
            chan->slow_seen_until = until_ms;
        return;
    }
    wk_retry_cap_halve(&chan->cap);
    chan->slow_seen_until = until_ms;
    hr_log_warn("channel_slowdown", "channel=%s source=%s status=%ld pause_ms=%" PRId64 " cap=%d",
                chan->cfg->name, why, status, until_ms - hr_clock_now_ms(), chan->cap.cap);
}

/* The slow-down key's value (a read of wk_chan_read_slow): a slow-down
 * another worker published is taken part in.  A Redis error is counted
 * and the channel goes on. */
static void wk_chan_slow_read(void *arg, const redisReply *reply, const char *errstr)
{
    wk_chan *chan = arg;
    int64_t now = hr_clock_now_ms();

    (void)errstr;
    chan->slow_reading = false;
    if (reply == NULL) {
        hr_metrics_inc(chan->s->m->backend_errors[WK_BACKEND_REDIS]);
        return;
    }
    if (reply->type == REDIS_REPLY_STRING) {
        int64_t until = strtoll(reply->str, NULL, 10);

        if (until > now && until > chan->slow_seen_until && !chan->s->closed) {
            wk_chan_slow(chan, until, "cluster", 0);
            wk_sender_pump(chan->s);
        }
    }
}

/* Every WK_SENDER_SLOW_POLL_MS while CH has pushes waiting: the
 * cluster's slow-down key is read (a job on the Redis thread; its answer
 * pauses the channel when another worker published one). */
static void wk_chan_read_slow(wk_chan *chan, int64_t now)
{
    const char *argv[] = {"GET", chan->k_slow};

    if (now - chan->slow_checked_ms < WK_SENDER_SLOW_POLL_MS || chan->slow_reading)
        return;
    chan->slow_checked_ms = now;
    if (wk_redis_cmd(chan->s->rd, 2, argv, wk_chan_slow_read, chan) == 0)
        chan->slow_reading = true;
    else
        hr_metrics_inc(chan->s->m->backend_errors[WK_BACKEND_REDIS]);
}

/* The answer to a wk_chan_publish_slow. */
static void wk_chan_slow_published(void *arg, const redisReply *reply, const char *errstr)
{
    wk_chan *chan = arg;

    if (reply != NULL)
        return;
    hr_log_warn("slowdown_publish_failed", "channel=%s error=\"%s\"", chan->cfg->name, errstr);
    hr_metrics_inc(chan->s->m->backend_errors[WK_BACKEND_REDIS]);
}

/* Publishes this worker's slow-down of CH until UNTIL_MS to every worker:
 * the key holds the deadline and expires with it (a job on the Redis
 * thread). */
void wk_chan_publish_slow(wk_chan *chan, int64_t until_ms, int64_t pause_ms)
{
    char until[24], px[24];
    const char *argv[] = {"SET", chan->k_slow, until, "PX", px};

    snprintf(until, sizeof until, "%" PRId64, until_ms);
    snprintf(px, sizeof px, "%" PRId64, pause_ms > 0 ? pause_ms : 1);
    if (wk_redis_cmd(chan->s->rd, 5, argv, wk_chan_slow_published, chan) != 0)
        wk_chan_slow_published(chan, NULL, "the Redis thread took no job");
}

/* Starts as many ready pushes of CH as its cap, pause and tokens allow,
 * one per task in turn. */
void wk_chan_pump(wk_chan *chan)
{
    wk_sender *s = chan->s;
    int64_t now = hr_clock_now_ms(), wait_ms = 0;
    wk_task *wt;
    wk_push *push;
    wk_xfer *x;

    wk_chan_promote(chan, now);
    if (!TAILQ_EMPTY(&chan->tasks))
        wk_chan_read_slow(chan, now);
    while (!s->draining && !TAILQ_EMPTY(&chan->tasks) && chan->inflight < (size_t)chan->cap.cap) {
        if (now < chan->paused_until_ms) {
            uv_timer_start(&chan->wake, wk_chan_wake_cb, (uint64_t)(chan->paused_until_ms - now),
                           0);
            return;
        }
        if (!wk_chan_authorized(chan, now))
            return;
        if ((wt = wk_chan_next_task(chan, now, &wait_ms)) == NULL) {
            uv_timer_start(&chan->wake, wk_chan_wake_cb, (uint64_t)(wait_ms > 0 ? wait_ms : 1), 0);
            return;
        }
        if (hr_task_expired(wt->row, now)) {
            /* Useless now: settled held, spending no token; its chunk
             * counts it and the rest expired (wk_lifecycle_push_done). */
            wk_push_result res = {.delivered = false};

            push = TAILQ_FIRST(&wt->ready);
            wk_chan_dequeue(chan, push);
            wk_chan_end(chan, push, &res, WK_END_HELD, NULL);
            continue;
        }
        x = wk_chan_take_xfer(chan);
        if (x == NULL) {
            hr_log_error("curl_handle_error", "channel=%s", chan->cfg->name);
            uv_timer_start(&chan->wake, wk_chan_wake_cb, WK_SENDER_LIMITER_RETRY_MS, 0);
            return;
        }
        /* The tokens go with the push, started or settled. */
        if (wt->tokens > 0)
            wt->tokens--;
        if (wt->share_tokens > 0)
            wt->share_tokens--;
        push = TAILQ_FIRST(&wt->ready);
        wk_chan_dequeue(chan, push);
        /* Round robin: the task goes behind the others. */
        if (wt->queued) {
            TAILQ_REMOVE(&chan->tasks, wt, rr);
            TAILQ_INSERT_TAIL(&chan->tasks, wt, rr);
        }
        wk_chan_start(chan, x, push);
    }
}
