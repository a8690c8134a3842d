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

/* ---- scheduling ---------------------------------------------------------- */

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

/* A finished request of X with curl result RC. */
void wk_sender_finished(wk_sender *s, wk_xfer *x, CURLcode rc)
{
    wk_chan *chan = x->chan;
    wk_push *push = x->p;
    const hr_channel *ch = chan->cfg;
    long code = 0;
    int64_t now = hr_clock_now_ms();
    wk_push_result res = {.latency_ms = (int)(now - x->start_ms)};
    wk_provider_result v;
    char reason[sizeof v.reason + 32];

    if (rc == CURLE_OK || ch->type == HR_CHANNEL_SMTP)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    wk_xfer_verdict(ch, x, rc, code, &v);
    wk_chan_release_xfer(chan, x);
    res.http_status = code;
    hr_metrics_observe(s->m->chans[chan - s->chans].latency, res.latency_ms / 1000.0);
    if (rc != CURLE_OK)
        hr_metrics_inc(s->m->backend_errors[WK_BACKEND_HTTP]);

    if (v.verdict == WK_VERDICT_DELIVERED) {
        wk_retry_cap_grow(&chan->cap);
        wk_chan_end(chan, push, &res, WK_END_SENT, NULL);
        return;
    }
    if (push->hold != NULL && *push->hold) {
        wk_chan_end(chan, push, &res, WK_END_HELD, NULL);
        return;
    }
    if (v.verdict == WK_VERDICT_UNREGISTERED) {
        wk_chan_end(chan, push, &res, WK_END_DEAD, NULL);
        return;
    }
    /* "Slow down" and "refresh the token" re-send without counting
     * against the retry budget, up to a bound; past it they are what
     * their status says. */
    if ((v.verdict == WK_VERDICT_SLOWDOWN || v.verdict == WK_VERDICT_REFRESH) &&
        push->slowdowns >= WK_SENDER_MAX_SLOWDOWNS)
        v.verdict = code >= 500 ? WK_VERDICT_RETRY : WK_VERDICT_FAILED;
    if (v.verdict == WK_VERDICT_REFRESH && chan->fcm != NULL) {
        wk_fcm_auth_rejected(chan->fcm, push->token_gen);
        push->slowdowns++;
        wk_chan_enqueue(chan, push, true);
        return;
    }
    /* APNs calls the provider token expired: a new one, unless the held
     * one is too young for Apple to accept a renewal (then the clock or
     * the key is wrong, and the push fails). */
    if (v.verdict == WK_VERDICT_REFRESH && chan->apns != NULL &&
        wk_apns_signer_expired(chan->apns, now / 1000) == 0) {
        push->slowdowns++;
        wk_chan_enqueue(chan, push, true);
        return;
    }
    if (v.verdict == WK_VERDICT_SLOWDOWN) {
        int64_t pause =
            v.retry_after_s > 0 ? (int64_t)v.retry_after_s * 1000 : WK_SENDER_DEFAULT_PAUSE_MS;

        /* A provider's Retry-After may not stall the channel for longer
         * than the channel's longest retry backoff. */
        if (pause > ch->retry_max_backoff_ms)
            pause = ch->retry_max_backoff_ms;

        /* Every worker pauses with this one (wk_chan_read_slow): a new
         * window is published, and an extension worth a poll. */
        {
            int64_t before = chan->slow_seen_until;

            wk_chan_slow(chan, now + pause, "provider", code);
            if (before < now || now + pause > before + WK_SENDER_SLOW_POLL_MS)
                wk_chan_publish_slow(chan, now + pause, pause);
        }
        /* A re-send all the same (it counts as a retry in the stats, the
         * delivery log and herald_retries_total), but not against the
         * channel's retry budget: that is for failures. */
        push->slowdowns++;
        wk_chan_enqueue(chan, push, true);
        return;
    }
    if (v.verdict != WK_VERDICT_RETRY) {
        wk_chan_end(chan, push, &res, WK_END_FAILED, v.reason);
        return;
    }
    if (push->addr_attempts - push->slowdowns >= ch->retry_max_attempts) {
        snprintf(reason, sizeof reason, "%s after %d attempts", v.reason, push->addr_attempts);
        wk_chan_end(chan, push, &res, WK_END_FAILED, reason);
        return;
    }
    push->delay.due_ms =
        now + wk_retry_backoff_ms(ch->retry_backoff_ms, ch->retry_max_backoff_ms,
                                  push->addr_attempts - push->slowdowns, wk_sender_random(s));
    /* A retry due past the task's expire_at waits only until then: the pump
     * refuses to start it, and its chunk counts it and the rest expired
     * (wk_lifecycle_push_done).  Settling it at once would close a chunk
     * whose other pushes may still go out before expire_at. */
    if (hr_task_expired(push->task->row, push->delay.due_ms))
        push->delay.due_ms = push->task->row->expire_ms;
    if (wk_retry_heap_push(&chan->delayed, &push->delay) != 0) {
        wk_chan_end(chan, push, &res, WK_END_FAILED, "out of memory");
        return;
    }
    push->state = WK_PUSH_DELAYED;
    wk_chan_arm_retry(chan);
}

/* An apns channel's signer from its .p8 key file. */
int wk_chan_apns_signer(wk_chan *chan, char *errstr, size_t errlen)
{
    const hr_channel *ch = chan->cfg;
    char detail[256];
    char *p8 = NULL;
    size_t len = 0;
    int rc = -1;

    if (hr_config_read_file(ch->apns.key_file, WK_SENDER_KEY_FILE_MAX, &p8, &len, detail,
                            sizeof detail) != 0 ||
        wk_apns_signer_new(p8, len, ch->apns.key_id, ch->apns.team_id, &chan->apns, detail,
                           sizeof detail) != 0)
        snprintf(errstr, errlen, "channel %s: key_file %s", ch->name, detail);
    else
        rc = 0;
    free(p8);
    return rc;
}
