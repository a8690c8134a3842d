/* wk_chan: one channel's decisions (see wk_chan.h).  Read top-down: set-up,
 * the queues and the retry heap, the rate-limit tokens, the cluster's
 * slow-down, then the two questions the sender asks — what may start now
 * (wk_chan_next, wk_chan_take) and what an answer means (wk_chan_answer). */
#include "wk_chan.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "hr_clock.h"
#include "hr_log.h"
#include "hr_ratelimit.h"

/* How often one push may be told "slow down" before that counts as a
 * failed attempt: bounds a provider that never lets up. */
#define WK_CHAN_MAX_SLOWDOWNS 100
/* Pause when a 429 carries no (or an HTTP-date) Retry-After. */
#define WK_CHAN_DEFAULT_PAUSE_MS 1000
#define WK_CHAN_GRANT_DIVISOR 20
/* A task with a finish_by: its first grant's size, before the limiter said
 * which rate is in force (hr_ratelimit_take_paced). */
#define WK_CHAN_PACED_WANT 10
#define WK_CHAN_KEY_FILE_MAX 16384 /* a .p8 key is ~250 bytes */

/* How one address (or a webhook push) ended. */
typedef enum wk_end {
    WK_END_SENT,
    WK_END_FAILED, /* for good: REASON says why */
    WK_END_DEAD,   /* the provider says the address is dead: pruned */
    WK_END_HELD,   /* not tried again: the owner is halting */
} wk_end;

/* ---- set-up ------------------------------------------------------------- */

/* A channel's private key file (at most WK_CHAN_KEY_FILE_MAX bytes) into
 * *KEY, *LEN; wk_chan_key_free wipes and frees it. */
static int wk_chan_key_read(const char *path, char **key, size_t *len, char *detail, size_t dlen)
{
    return hr_config_read_file(path, WK_CHAN_KEY_FILE_MAX, key, len, detail, dlen);
}

static void wk_chan_key_free(char *key, size_t len)
{
    if (key != NULL)
        OPENSSL_cleanse(key, len);
    free(key);
}

/* An apns channel's signer from its .p8 key file. */
static int wk_chan_apns_signer(wk_chan *chan, char *errstr, size_t errlen)
{
    const hr_channel *ch = chan->cfg;
    char detail[256];
    char *p8 = NULL;
    size_t len = 0;
    int rc = -1;

    if (wk_chan_key_read(ch->apns.key_file, &p8, &len, detail, sizeof detail) != 0 ||
        wk_apns_signer_new(p8, len, ch->apns.key_id, ch->apns.team_id, &chan->apns, detail,
                           sizeof detail) != 0)
        snprintf(errstr, errlen, "channel %s: key_file %s", ch->name, detail);
    else
        rc = 0;
    wk_chan_key_free(p8, len);
    return rc;
}

/* A webpush channel's VAPID key (its key file) and encryption. */
static int wk_chan_webpush(wk_chan *chan, char *errstr, size_t errlen)
{
    const hr_channel *ch = chan->cfg;
    char detail[256];
    char *pem = NULL;
    size_t len = 0;
    int rc = -1;

    if (wk_chan_key_read(ch->webpush.vapid_key_file, &pem, &len, detail, sizeof detail) != 0 ||
        wk_webpush_new(pem, len, ch->webpush.vapid_subject, &chan->webpush, detail,
                       sizeof detail) != 0)
        snprintf(errstr, errlen, "channel %s: vapid_key_file %s", ch->name, detail);
    else if (wk_ece_new(&chan->ece, detail, sizeof detail) != 0)
        snprintf(errstr, errlen, "channel %s: %s", ch->name, detail);
    else
        rc = 0;
    wk_chan_key_free(pem, len);
    return rc;
}

int wk_chan_init(wk_chan *chan, const hr_channel *ch, wk_redis *rd, wk_metrics *m,
                 void (*wake)(void *ctx), void *ctx, char *errstr, size_t errlen)
{
    chan->cfg = ch;
    chan->rd = rd;
    chan->m = m;
    chan->wake = wake;
    chan->wake_ctx = ctx;
    TAILQ_INIT(&chan->tasks);
    /* The config's 64-byte channel names fit HR_KEY_MAX. */
    hr_key_slowdown(wk_redis_prefix(rd), chan->k_slow, sizeof chan->k_slow, ch->name);
    /* The cap counts pushes: a batched webhook's request carries up to
     * ch->batch of them (1 for every other channel). */
    wk_retry_cap_init(&chan->cap, ch->concurrency * ch->batch);
    if (ch->type == HR_CHANNEL_FCM && wk_fcm_auth_new(ch, &chan->fcm, errstr, errlen) != 0)
        return -1;
    if (ch->type == HR_CHANNEL_APNS && wk_chan_apns_signer(chan, errstr, errlen) != 0)
        return -1;
    if (ch->type == HR_CHANNEL_WEBPUSH && wk_chan_webpush(chan, errstr, errlen) != 0)
        return -1;
    return 0;
}

void wk_chan_close(wk_chan *chan)
{
    chan->closed = true;
}

void wk_chan_free(wk_chan *chan)
{
    wk_fcm_auth_free(chan->fcm);
    chan->fcm = NULL;
    wk_apns_signer_free(chan->apns);
    chan->apns = NULL;
    wk_webpush_free(chan->webpush);
    chan->webpush = NULL;
    wk_ece_free(chan->ece);
    chan->ece = NULL;
    wk_retry_heap_free(&chan->delayed);
}

bool wk_chan_addressed(const wk_chan *chan, hr_addr_platform *platform, const char **app)
{
    if (chan->fcm != NULL) {
        *platform = HR_ADDR_FCM;
        *app = wk_fcm_auth_project(chan->fcm);
        return true;
    }
    if (chan->apns != NULL) {
        *platform = HR_ADDR_APNS;
        *app = chan->cfg->apns.topic;
        return true;
    }
    if (chan->cfg->type == HR_CHANNEL_SMTP || chan->cfg->type == HR_CHANNEL_WEBPUSH) {
        *platform = chan->cfg->type == HR_CHANNEL_SMTP ? HR_ADDR_EMAIL : HR_ADDR_WEBPUSH;
        *app = "";
        return true;
    }
    return false;
}

/* ---- queues ------------------------------------------------------------- */

static wk_push *wk_push_of(wk_retry_node *n)
{
    return (wk_push *)((char *)n - offsetof(wk_push, delay));
}

/* Links PUSH READY into its task's queue (at the head when it goes next);
 * a task that had none joins the channel's round robin at the end. */
static void wk_chan_enqueue(wk_chan *chan, wk_push *push, bool head)
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
static void wk_chan_dequeue(wk_chan *chan, wk_push *push)
{
    wk_task *wt = push->task;

    TAILQ_REMOVE(&wt->ready, push, link);
    if (TAILQ_EMPTY(&wt->ready)) {
        TAILQ_REMOVE(&chan->tasks, wt, rr);
        wt->queued = false;
    }
}

void wk_chan_submit(wk_chan *chan, wk_push *push)
{
    wk_chan_enqueue(chan, push, false);
}

void wk_chan_cancel(wk_chan *chan, wk_push *push)
{
    if (push->state == WK_PUSH_READY)
        wk_chan_dequeue(chan, push);
    else if (push->state == WK_PUSH_DELAYED)
        wk_retry_heap_remove(&chan->delayed, &push->delay);
}

int64_t wk_chan_due(const wk_chan *chan)
{
    const wk_retry_node *first = wk_retry_heap_min(&chan->delayed);

    return first != NULL ? first->due_ms : -1;
}

bool wk_chan_ready(const wk_chan *chan)
{
    return !TAILQ_EMPTY(&chan->tasks);
}

/* ---- rate-limit tokens -------------------------------------------------- */

/* The two budgets a push spends: its task's (rate_limit, or the planned
 * rate of a finish_by) and its task's share of the channel's rate_limit. */
typedef enum wk_budget { WK_BUDGET_TASK, WK_BUDGET_SHARE } wk_budget;

/* A grant asked of the limiter, on the Redis thread (wk_chan_token). */
typedef struct wk_chan_grant {
    wk_chan *chan;
    wk_task *wt; /* a reference, put when the answer came */
    wk_budget b;
    bool paced;
    int64_t limit, want, asked_ms; /* asked_ms: monotonic */
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

/* The limiter answered: the tokens are WT's until the end of the window
 * they were counted in, which the script said by Redis's clock (the time
 * left in it, counted from the ask: the answer's trip only shortens it, so
 * a token is never spent on top of a later window's budget; under-use,
 * never overshoot), and the channel runs again. */
static void wk_chan_grant_done(void *arg)
{
    wk_chan_grant *g = arg;
    wk_chan *chan = g->chan;
    wk_task *wt = g->wt;
    bool task = g->b == WK_BUDGET_TASK;
    int64_t *tokens = task ? &wt->tokens : &wt->share_tokens;
    int64_t *until = task ? &wt->tokens_until_ms : &wt->share_until_ms;
    int64_t now = hr_clock_now_ms(), mono = hr_clock_mono_ms();

    wt->granting[g->b] = false;
    if (g->rc != 0) {
        hr_log_warn("ratelimit_error", "task=%" PRId64 " budget=%s error=%s", wt->row->id,
                    task ? "task" : "channel", g->errstr);
        hr_metrics_inc(chan->m->backend_errors[WK_BACKEND_REDIS]);
        wt->wait_until_ms = now + WK_CHAN_RETRY_MS;
    } else {
        if (g->paced)
            wt->pace_rate = g->rate;
        if (g->granted > 0 && mono < g->asked_ms + g->wait_ms) {
            *tokens = g->granted;
            *until = g->asked_ms + g->wait_ms;
        }
        if (g->granted == 0) {
            hr_metrics_inc(chan->m->ratelimit_waits);
            wt->wait_until_ms = now + (g->wait_ms > 0 ? g->wait_ms : 1);
        } else {
            wt->wait_until_ms = 0;
        }
    }
    wt->refs--;
    /* A channel closed meanwhile (shutdown) has no queues left to run. */
    if (!chan->closed)
        chan->wake(chan->wake_ctx);
    free(g);
}

/* Whether a token of budget B of WT is at hand; false with *WAIT_MS set
 * when none is.  A budget with none left asks the limiter for a grant (a
 * job on the Redis thread, one per budget at a time) and waits for it:
 * its answer wakes the channel.  The token is spent (decremented) only
 * when a push starts, so a grant is never lost to a push that could not
 * start.  Tokens belong to the window (Redis's second) they were granted
 * in: the limiter counted them against that window's budget, so the ones
 * left when it is over are dropped, never spent on top of a later one's
 * (under-use, never overshoot).  A paced task asks in steps of its rate
 * in force (the last grant's; WK_CHAN_PACED_WANT before the first), which
 * the limiter's script derives. */
static bool wk_chan_token(wk_chan *chan, wk_task *wt, wk_budget b, int64_t *wait_ms)
{
    bool task = b == WK_BUDGET_TASK, paced = task && hr_task_paced(wt->row);
    int64_t limit = task ? wt->rate_limit : chan->cfg->rate_limit;
    int64_t *tokens = task ? &wt->tokens : &wt->share_tokens;
    int64_t until = task ? wt->tokens_until_ms : wt->share_until_ms;
    int64_t want, mono;
    wk_chan_grant *g;

    if (limit <= 0 && !paced)
        return true;
    mono = hr_clock_mono_ms();
    if (*tokens > 0 && mono >= until)
        *tokens = 0;
    if (*tokens > 0)
        return true;
    /* Until the grant answers (the wait is only a fallback: the answer
     * wakes the channel at once). */
    *wait_ms = WK_CHAN_RETRY_MS;
    if (wt->granting[b])
        return false;
    want = paced && wt->pace_rate > 0 ? wt->pace_rate / WK_CHAN_GRANT_DIVISOR
           : paced                    ? WK_CHAN_PACED_WANT
                                      : limit / WK_CHAN_GRANT_DIVISOR;
    g = calloc(1, sizeof *g);
    if (g != NULL) {
        *g = (wk_chan_grant){.chan = chan,
                             .wt = wt,
                             .b = b,
                             .paced = paced,
                             .limit = limit,
                             .want = want < 1 ? 1 : want,
                             .asked_ms = mono};
        /* The grant holds the task as a chunk does, so the cache keeps it
         * until the answer came. */
        wt->refs++;
        if (wk_redis_call(chan->rd, wk_chan_grant_run, wk_chan_grant_done, g) == 0) {
            wt->granting[b] = true;
            return false;
        }
        wt->refs--;
        free(g);
    }
    hr_log_warn("ratelimit_error", "task=%" PRId64 " budget=%s error=the Redis thread took no job",
                wt->row->id, task ? "task" : "channel");
    hr_metrics_inc(chan->m->backend_errors[WK_BACKEND_REDIS]);
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

/* ---- the cluster's slow-down ---------------------------------------------- */

/* A slow-down of CHAN until UNTIL_MS that this worker has not taken part
 * in yet: the channel pauses until then and halves its in-flight cap
 * once; deliveries then widen the cap again one by one (wk_retry), so
 * the channel recovers step by step. */
static void wk_chan_slow(wk_chan *chan, int64_t until_ms, const char *why, long status)
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
        hr_metrics_inc(chan->m->backend_errors[WK_BACKEND_REDIS]);
        return;
    }
    if (reply->type == REDIS_REPLY_STRING) {
        int64_t until = strtoll(reply->str, NULL, 10);

        if (until > now && until > chan->slow_seen_until && !chan->closed) {
            wk_chan_slow(chan, until, "cluster", 0);
            chan->wake(chan->wake_ctx);
        }
    }
}

/* Every WK_CHAN_SLOW_POLL_MS while CH has pushes waiting: the
 * cluster's slow-down key is read (a job on the Redis thread; its answer
 * pauses the channel when another worker published one). */
static void wk_chan_read_slow(wk_chan *chan, int64_t now)
{
    const char *argv[] = {"GET", chan->k_slow};

    if (now - chan->slow_checked_ms < WK_CHAN_SLOW_POLL_MS || chan->slow_reading)
        return;
    chan->slow_checked_ms = now;
    if (wk_redis_cmd(chan->rd, 2, argv, wk_chan_slow_read, chan) == 0)
        chan->slow_reading = true;
    else
        hr_metrics_inc(chan->m->backend_errors[WK_BACKEND_REDIS]);
}

/* The answer to a wk_chan_publish_slow. */
static void wk_chan_slow_published(void *arg, const redisReply *reply, const char *errstr)
{
    wk_chan *chan = arg;

    if (reply != NULL)
        return;
    hr_log_warn("slowdown_publish_failed", "channel=%s error=\"%s\"", chan->cfg->name, errstr);
    hr_metrics_inc(chan->m->backend_errors[WK_BACKEND_REDIS]);
}

/* Publishes this worker's slow-down of CH until UNTIL_MS to every worker:
 * the key holds the deadline and expires with it (a job on the Redis
 * thread). */
static void wk_chan_publish_slow(wk_chan *chan, int64_t until_ms, int64_t pause_ms)
{
    char until[24], px[24];
    const char *argv[] = {"SET", chan->k_slow, until, "PX", px};

    snprintf(until, sizeof until, "%" PRId64, until_ms);
    snprintf(px, sizeof px, "%" PRId64, pause_ms > 0 ? pause_ms : 1);
    if (wk_redis_cmd(chan->rd, 5, argv, wk_chan_slow_published, chan) != 0)
        wk_chan_slow_published(chan, NULL, "the Redis thread took no job");
}

void wk_chan_tick(wk_chan *chan, int64_t now)
{
    wk_retry_node *n;

    while ((n = wk_retry_heap_min(&chan->delayed)) != NULL && n->due_ms <= now) {
        wk_push *push = wk_push_of(n);

        wk_retry_heap_remove(&chan->delayed, n);
        wk_chan_enqueue(chan, push, false);
    }
    if (!TAILQ_EMPTY(&chan->tasks))
        wk_chan_read_slow(chan, now);
}

/* ---- what may start ------------------------------------------------------ */

/* Whether CHAN pushes to addresses (every channel but a webhook). */
static bool wk_chan_walks(const wk_chan *chan)
{
    return chan->cfg->type != HR_CHANNEL_WEBHOOK;
}

/* PUSH's current request ended with END.  A webhook push is settled with
 * it.  A push to addresses records it and goes on to its next address at
 * the head of the queue, or, after its last one (or when held), is settled
 * with what its addresses got: delivered when one took it, else failed
 * when one failed for good, else unregistered (every address dead, or
 * none); held when halted before any took it. */
static wk_chan_verdict wk_chan_end(wk_chan *chan, wk_push *push, wk_end end, const char *reason,
                                   wk_chan_outcome *out)
{
    wk_push_result *res = &out->res;

    out->dead = NULL;
    if (!wk_chan_walks(chan)) {
        res->delivered = end == WK_END_SENT;
        res->held = end == WK_END_HELD;
        res->reason = end == WK_END_FAILED ? reason : NULL;
        return WK_CHAN_SETTLED;
    }
    if (end == WK_END_SENT) {
        push->any_sent = true;
    } else if (end == WK_END_DEAD) {
        out->dead = &push->addrs[push->addr];
    } else if (end == WK_END_FAILED && !push->any_failed) {
        push->any_failed = true;
        snprintf(push->failure, sizeof push->failure, "%s", reason);
    }
    if (end != WK_END_HELD && ++push->addr < push->naddrs && !(push->hold != NULL && *push->hold)) {
        push->addr_attempts = 0;
        push->slowdowns = 0;
        wk_chan_enqueue(chan, push, true);
        return WK_CHAN_QUEUED;
    }
    res->delivered = push->any_sent;
    res->held = !push->any_sent && push->addr < push->naddrs;
    res->unregistered = !push->any_sent && !res->held && !push->any_failed;
    res->reason = !push->any_sent && !res->held && push->any_failed ? push->failure : NULL;
    return WK_CHAN_SETTLED;
}

wk_chan_step_kind wk_chan_next(wk_chan *chan, int64_t now, wk_chan_step *step)
{
    wk_task *wt;

    if (TAILQ_EMPTY(&chan->tasks) || chan->inflight >= (size_t)chan->cap.cap)
        return WK_CHAN_IDLE;
    if (now < chan->paused_until_ms) {
        step->wait_ms = chan->paused_until_ms - now;
        return WK_CHAN_WAIT;
    }
    /* An fcm channel starts a push only with an unexpired access token.
     * The token request is started when one is due (sends go on with the
     * current token meanwhile); while none is usable the pushes wait,
     * woken by the request's end or the back-off's timer. */
    if (chan->fcm != NULL) {
        uint64_t gen;
        bool request;
        int64_t wake;
        const char *token = wk_fcm_auth_token(chan->fcm, now, &gen, &request, &wake);

        if (request)
            return WK_CHAN_AUTH;
        if (token == NULL) {
            step->wait_ms = wake - now;
            return wake > now ? WK_CHAN_WAIT : WK_CHAN_IDLE;
        }
    }
    if ((wt = wk_chan_next_task(chan, now, &step->wait_ms)) == NULL) {
        if (step->wait_ms <= 0)
            step->wait_ms = 1;
        return WK_CHAN_WAIT;
    }
    if (hr_task_expired(wt->row, now)) {
        /* Useless now: settled held, spending no token; its chunk counts
         * it and the rest expired (wk_lifecycle_push_done). */
        step->push = TAILQ_FIRST(&wt->ready);
        step->out.res = (wk_push_result){.delivered = false};
        wk_chan_dequeue(chan, step->push);
        wk_chan_end(chan, step->push, WK_END_HELD, NULL, &step->out);
        return WK_CHAN_SETTLE;
    }
    step->task = wt;
    return WK_CHAN_START;
}

/* Takes the first ready push of WT; the tokens go with it, started or
 * settled. */
static wk_push *wk_chan_pop(wk_chan *chan, wk_task *wt)
{
    wk_push *push = TAILQ_FIRST(&wt->ready);

    if (wt->tokens > 0)
        wt->tokens--;
    if (wt->share_tokens > 0)
        wt->share_tokens--;
    wk_chan_dequeue(chan, push);
    return push;
}

wk_chan_verdict wk_chan_take(wk_chan *chan, wk_task *wt, wk_push **pushp, wk_chan_outcome *out)
{
    wk_push *push = wk_chan_pop(chan, wt);

    /* Round robin: the task goes behind the others. */
    if (wt->queued) {
        TAILQ_REMOVE(&chan->tasks, wt, rr);
        TAILQ_INSERT_TAIL(&chan->tasks, wt, rr);
    }
    *pushp = push;
    if (wk_chan_walks(chan) && push->naddrs == 0) {
        out->dead = NULL;
        out->res = (wk_push_result){.unregistered = true};
        return WK_CHAN_SETTLED;
    }
    return WK_CHAN_GO;
}

size_t wk_chan_take_more(wk_chan *chan, wk_task *wt, wk_push **pushes, size_t max)
{
    size_t n = 0;
    int64_t wait;

    /* A token of each budget at hand for every one (a budget that runs out
     * asks the limiter for its next grant, as wk_chan_next would). */
    while (n < max && wt->queued && wk_chan_token(chan, wt, WK_BUDGET_TASK, &wait) &&
           wk_chan_token(chan, wt, WK_BUDGET_SHARE, &wait))
        pushes[n++] = wk_chan_pop(chan, wt);
    return n;
}

void wk_chan_sent(wk_chan *chan, wk_push *push)
{
    push->state = WK_PUSH_INFLIGHT;
    push->attempts++;
    if (++push->addr_attempts == 1)
        push->firsts++;
    chan->inflight++;
}

void wk_chan_ended(wk_chan *chan, wk_push *push)
{
    push->state = WK_PUSH_IDLE;
    push->xfer = NULL;
    push->stream = NULL;
    chan->inflight--;
}

/* ---- what an answer means ------------------------------------------------ */

wk_chan_verdict wk_chan_unsent(wk_chan *chan, wk_push *push, const char *why, wk_chan_outcome *out)
{
    return wk_chan_end(chan, push, WK_END_FAILED, why, out);
}

/* A slow-down answer (V, its HTTP status CODE) at NOW: the channel pauses,
 * and every worker with it. */
static void wk_chan_slowed(wk_chan *chan, const wk_provider_result *v, long code, int64_t now)
{
    int64_t before = chan->slow_seen_until;
    int64_t pause =
        v->retry_after_s > 0 ? (int64_t)v->retry_after_s * 1000 : WK_CHAN_DEFAULT_PAUSE_MS;

    /* A provider's Retry-After may not stall the channel for longer than
     * the channel's longest retry backoff. */
    if (pause > chan->cfg->retry_max_backoff_ms)
        pause = chan->cfg->retry_max_backoff_ms;
    /* Every worker pauses with this one (wk_chan_read_slow): a new window
     * is published, and an extension worth a poll. */
    wk_chan_slow(chan, now + pause, "provider", code);
    if (before < now || now + pause > before + WK_CHAN_SLOW_POLL_MS)
        wk_chan_publish_slow(chan, now + pause, pause);
}

wk_chan_verdict wk_chan_answer(wk_chan *chan, wk_push *push, const wk_provider_result *v,
                               int64_t now, uint64_t *rnd, wk_chan_outcome *out)
{
    const hr_channel *ch = chan->cfg;
    long code = out->res.http_status;
    wk_verdict verdict = v->verdict;

    if (verdict == WK_VERDICT_DELIVERED) {
        wk_retry_cap_grow(&chan->cap);
        return wk_chan_end(chan, push, WK_END_SENT, NULL, out);
    }
    if (push->hold != NULL && *push->hold)
        return wk_chan_end(chan, push, WK_END_HELD, NULL, out);
    if (verdict == WK_VERDICT_UNREGISTERED)
        return wk_chan_end(chan, push, WK_END_DEAD, NULL, out);
    /* "Slow down" and "refresh the token" re-send without counting
     * against the retry budget, up to a bound; past it they are what
     * their status says. */
    if ((verdict == WK_VERDICT_SLOWDOWN || verdict == WK_VERDICT_REFRESH) &&
        push->slowdowns >= WK_CHAN_MAX_SLOWDOWNS)
        verdict = code >= 500 ? WK_VERDICT_RETRY : WK_VERDICT_FAILED;
    out->dead = NULL;
    if (verdict == WK_VERDICT_REFRESH && chan->fcm != NULL) {
        wk_fcm_auth_rejected(chan->fcm, push->token_gen);
        push->slowdowns++;
        wk_chan_enqueue(chan, push, true);
        return WK_CHAN_QUEUED;
    }
    /* APNs calls the provider token expired: a new one, unless the held
     * one is too young for Apple to accept a renewal (then the clock or
     * the key is wrong, and the push fails). */
    if (verdict == WK_VERDICT_REFRESH && chan->apns != NULL &&
        wk_apns_signer_expired(chan->apns, now / 1000) == 0) {
        push->slowdowns++;
        wk_chan_enqueue(chan, push, true);
        return WK_CHAN_QUEUED;
    }
    if (verdict == WK_VERDICT_SLOWDOWN) {
        wk_chan_slowed(chan, v, code, now);
        /* A re-send all the same (it counts as a retry in the stats, the
         * delivery log and herald_retries_total), but not against the
         * channel's retry budget: that is for failures. */
        push->slowdowns++;
        wk_chan_enqueue(chan, push, true);
        return WK_CHAN_QUEUED;
    }
    if (verdict != WK_VERDICT_RETRY)
        return wk_chan_end(chan, push, WK_END_FAILED, v->reason, out);
    if (push->addr_attempts - push->slowdowns >= ch->retry_max_attempts) {
        snprintf(out->reason, sizeof out->reason, "%s after %d attempts", v->reason,
                 push->addr_attempts);
        return wk_chan_end(chan, push, WK_END_FAILED, out->reason, out);
    }
    push->delay.due_ms =
        now + wk_retry_backoff_ms(ch->retry_backoff_ms, ch->retry_max_backoff_ms,
                                  push->addr_attempts - push->slowdowns, wk_retry_random(rnd));
    /* A retry due past the task's expire_at waits only until then: the
     * channel refuses to start it, and its chunk counts it and the rest
     * expired (wk_lifecycle_push_done).  Settling it at once would close a
     * chunk whose other pushes may still go out before expire_at. */
    if (hr_task_expired(push->task->row, push->delay.due_ms))
        push->delay.due_ms = push->task->row->expire_ms;
    if (wk_retry_heap_push(&chan->delayed, &push->delay) != 0)
        return wk_chan_end(chan, push, WK_END_FAILED, "out of memory", out);
    push->state = WK_PUSH_DELAYED;
    return WK_CHAN_DELAYED;
}
