/* wk_sender: the send wing's front (see wk_sender.h).  Read top-down: a
 * channel's timers and how a verdict is carried out, starting a push and
 * the fcm token request, a run of the channels, the transport's finished
 * transfers, then set-up and the public calls. */
#include "wk_sender.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#include "hr_clock.h"
#include "hr_log.h"
#include "wk_chan.h"
#include "wk_curl.h"
#include "wk_curl_uv.h"
#include "wk_xfer.h"

/* A channel as the sender runs it. */
typedef struct wk_sender_chan {
    wk_sender *s;
    wk_chan chan;     /* its decisions */
    wk_curl *curl;    /* its transport */
    uv_timer_t wake;  /* the end of a pause, of a rate-limit wait or of a token back-off */
    uv_timer_t retry; /* the earliest delayed push */
    wk_xfer *auth_x;  /* fcm: the token request's handle (not in the pool) */
    bool auth_busy;   /* it runs */
} wk_sender_chan;

struct wk_sender {
    uv_loop_t *loop;
    const hr_config *cfg;
    wk_metrics *m;
    wk_sender_done_fn done;
    void *ctx;
    wk_sender_prune_fn prune;
    void *prune_ctx;
    wk_curl_uv *uv; /* the transports' libuv adapter */
    wk_sender_chan *chans;
    size_t nchans;
    size_t inflight;
    bool draining;
    bool running, run_again;
    uint64_t rnd; /* the retries' jitter (wk_retry_random) */
};

static void wk_sender_run(wk_sender *s);

/* ---- timers and verdicts ------------------------------------------------- */

static void wk_sender_wake_cb(uv_timer_t *t)
{
    wk_sender_chan *sc = t->data;

    wk_sender_run(sc->s);
}

/* The channel's wake-up, WAIT_MS from now. */
static void wk_sender_wake_in(wk_sender_chan *sc, int64_t wait_ms)
{
    uv_timer_start(&sc->wake, wk_sender_wake_cb, (uint64_t)wait_ms, 0);
}

/* The retry timer, at the channel's earliest due retry (stopped when none
 * waits, also after a cancel took the one it was armed for). */
static void wk_sender_arm_retry(wk_sender_chan *sc)
{
    int64_t due = wk_chan_due(&sc->chan), now = hr_clock_now_ms();

    if (due < 0)
        uv_timer_stop(&sc->retry);
    else
        uv_timer_start(&sc->retry, wk_sender_wake_cb, due > now ? (uint64_t)(due - now) : 0, 0);
}

static void wk_sender_settle(wk_sender *s, wk_push *push, const wk_push_result *res)
{
    push->state = WK_PUSH_IDLE;
    s->done(s->ctx, push, res);
}

/* Carries out what the channel said of PUSH. */
static void wk_sender_act(wk_sender_chan *sc, wk_push *push, wk_chan_verdict verdict,
                          const wk_chan_outcome *out)
{
    wk_sender *s = sc->s;

    if (out->dead != NULL && s->prune != NULL)
        s->prune(s->prune_ctx, push, out->dead);
    if (verdict == WK_CHAN_SETTLED)
        wk_sender_settle(s, push, &out->res);
    else if (verdict == WK_CHAN_DELAYED)
        wk_sender_arm_retry(sc);
}

/* ---- starting requests ----------------------------------------------------- */

/* Builds PUSH's next request on X: the webhook's, the messages:send of its
 * current address with the channel's access token, the APNs request
 * signed with the provider token, or the mail.  0, or -1 with ERRSTR. */
static int wk_sender_prepare(wk_sender_chan *sc, wk_xfer *x, wk_push *push, char *errstr,
                             size_t errlen)
{
    const wk_chan *chan = &sc->chan;
    const hr_channel *ch = chan->cfg;
    size_t stripped = 0;
    uint64_t gen;
    bool request;
    int64_t wake;
    const char *token;

    if (chan->apns != NULL) {
        token = wk_apns_signer_token(chan->apns, hr_clock_now_ms() / 1000, errstr, errlen);
        if (token == NULL)
            return -1;
        return wk_xfer_prepare_apns(x, ch, ch->url != NULL ? ch->url : WK_APNS_BASE_URL, token,
                                    push->task, push->uid, push->user,
                                    push->addrs[push->addr].address, errstr, errlen);
    }
    if (ch->type == HR_CHANNEL_SMTP)
        return wk_xfer_prepare_smtp(x, ch, push->task, push->uid, push->user,
                                    push->addrs[push->addr].address, errstr, errlen);
    if (chan->fcm == NULL) {
        if (wk_xfer_prepare(x, ch, push->task, push->uid, push->user, &stripped, errstr, errlen) !=
            0)
            return -1;
        if (stripped > 0)
            hr_metrics_add(sc->s->m->anomalies[WK_ANOMALY_HEADER_STRIPPED], (uint64_t)stripped);
        return 0;
    }
    /* The channel lets an fcm push start only with a token at hand. */
    token = wk_fcm_auth_token(chan->fcm, hr_clock_now_ms(), &gen, &request, &wake);
    if (token == NULL) {
        snprintf(errstr, errlen, "no access token");
        return -1;
    }
    push->token_gen = gen;
    return wk_xfer_prepare_fcm(x, wk_fcm_auth_send_url(chan->fcm), token, push->task, push->uid,
                               push->user, push->addrs[push->addr].address, errstr, errlen);
}

/* Starts the next push of task WT on a free handle; false when no handle
 * could be had (the channel waits WK_CHAN_RETRY_MS). */
static bool wk_sender_start(wk_sender_chan *sc, wk_task *wt)
{
    wk_sender *s = sc->s;
    wk_xfer *x = wk_curl_take(sc->curl);
    wk_chan_outcome out;
    wk_chan_verdict verdict;
    wk_push *push;
    char errstr[256];

    if (x == NULL) {
        hr_log_error("curl_handle_error", "channel=%s", sc->chan.cfg->name);
        wk_sender_wake_in(sc, WK_CHAN_RETRY_MS);
        return false;
    }
    if (wk_chan_take(&sc->chan, wt, &push, &out) == WK_CHAN_SETTLED) {
        wk_curl_give(sc->curl, x);
        wk_sender_act(sc, push, WK_CHAN_SETTLED, &out);
        return true;
    }
    if (wk_sender_prepare(sc, x, push, errstr, sizeof errstr) == 0) {
        x->p = push;
        if (wk_curl_add(sc->curl, x, errstr, sizeof errstr) == 0) {
            push->xfer = x;
            wk_chan_sent(&sc->chan, push);
            s->inflight++;
            hr_metrics_set(s->m->inflight, (double)s->inflight);
            return true;
        }
        x->p = NULL;
    }
    /* Not rendered, or not added: the address fails for good. */
    wk_curl_give(sc->curl, x);
    out.res = (wk_push_result){.delivered = false};
    verdict = wk_chan_unsent(&sc->chan, push, errstr, &out);
    wk_sender_act(sc, push, verdict, &out);
    return true;
}

/* X's request ended, or was aborted: X back into the pool, PUSH idle. */
static void wk_sender_release(wk_sender_chan *sc, wk_xfer *x)
{
    wk_sender *s = sc->s;
    wk_push *push = x->p;

    wk_curl_release(sc->curl, x);
    wk_chan_ended(&sc->chan, push);
    s->inflight--;
    hr_metrics_set(s->m->inflight, (double)s->inflight);
}

/* Starts the fcm channel's token request on its own handle. */
static void wk_sender_auth_start(wk_sender_chan *sc, int64_t now)
{
    char errstr[256], why[256];

    if (wk_fcm_auth_request(sc->chan.fcm, now, sc->auth_x, errstr, sizeof errstr) != 0)
        return; /* logged, back-off set */
    if (wk_curl_add(sc->curl, sc->auth_x, why, sizeof why) != 0) {
        wk_fcm_auth_done(sc->chan.fcm, now, 0, NULL, 0, why, errstr, sizeof errstr);
        return;
    }
    sc->auth_busy = true;
}

/* The token request ended with curl result RC. */
static void wk_sender_auth_finished(wk_sender_chan *sc, CURLcode rc)
{
    wk_xfer *x = sc->auth_x;
    char errstr[256], why[CURL_ERROR_SIZE + 8] = "";
    long code = 0;

    wk_curl_remove(sc->curl, x);
    sc->auth_busy = false;
    if (rc == CURLE_OK)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    else
        snprintf(why, sizeof why, "curl: %s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
    if (wk_fcm_auth_done(sc->chan.fcm, hr_clock_now_ms(), code, x->resp.data, x->resp.len, why,
                         errstr, sizeof errstr) != 0)
        hr_metrics_inc(sc->s->m->backend_errors[WK_BACKEND_HTTP]);
}

/* ---- running the channels -------------------------------------------------- */

/* Does what channel SC lets happen now: starts as many ready pushes as its
 * cap, pause and tokens allow, one per task in turn. */
static void wk_sender_run_chan(wk_sender_chan *sc)
{
    wk_sender *s = sc->s;
    int64_t now = hr_clock_now_ms();
    wk_chan_step step;

    wk_chan_tick(&sc->chan, now);
    wk_sender_arm_retry(sc);
    while (!s->draining) {
        switch (wk_chan_next(&sc->chan, now, &step)) {
        case WK_CHAN_IDLE:
            return;
        case WK_CHAN_WAIT:
            wk_sender_wake_in(sc, step.wait_ms);
            return;
        case WK_CHAN_AUTH:
            wk_sender_auth_start(sc, now);
            break;
        case WK_CHAN_SETTLE:
            wk_sender_act(sc, step.push, WK_CHAN_SETTLED, &step.out);
            break;
        case WK_CHAN_START:
            if (!wk_sender_start(sc, step.task))
                return;
            break;
        }
    }
}

/* Runs every channel; a run asked for while one runs (from a callback) is
 * folded into it. */
static void wk_sender_run(wk_sender *s)
{
    if (s->running) {
        s->run_again = true;
        return;
    }
    s->running = true;
    do {
        s->run_again = false;
        for (size_t i = 0; i < s->nchans; i++)
            wk_sender_run_chan(&s->chans[i]);
    } while (s->run_again);
    s->running = false;
}

/* wk_chan's wake hook: one of its Redis jobs answered. */
static void wk_sender_woken(void *ctx)
{
    wk_sender_chan *sc = ctx;

    wk_sender_run(sc->s);
}

/* ---- the transport's reports ---------------------------------------------- */

/* wk_curl_hooks.finished: X's request ended with curl result RC. */
static void wk_sender_finished(void *ctx, wk_xfer *x, CURLcode rc)
{
    wk_sender_chan *sc = ctx;
    wk_sender *s = sc->s;
    const hr_channel *ch = sc->chan.cfg;
    wk_push *push = x->p;
    int64_t now = hr_clock_now_ms();
    wk_chan_outcome out = {.res = {.latency_ms = (int)(now - x->start_ms)}};
    wk_chan_verdict verdict;
    wk_provider_result v;
    long code = 0;

    if (x == sc->auth_x) {
        wk_sender_auth_finished(sc, rc);
        return;
    }
    if (rc == CURLE_OK || ch->type == HR_CHANNEL_SMTP)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    wk_xfer_verdict(ch, x, rc, code, &v);
    wk_sender_release(sc, x);
    out.res.http_status = code;
    hr_metrics_observe(s->m->chans[sc - s->chans].latency, out.res.latency_ms / 1000.0);
    if (rc != CURLE_OK)
        hr_metrics_inc(s->m->backend_errors[WK_BACKEND_HTTP]);
    verdict = wk_chan_answer(&sc->chan, push, &v, now, &s->rnd, &out);
    wk_sender_act(sc, push, verdict, &out);
}

/* wk_curl_hooks.drained: every finished transfer was handed over. */
static void wk_sender_drained(void *ctx)
{
    wk_sender_chan *sc = ctx;

    wk_sender_run(sc->s);
}

/* ---- set-up and the public calls ------------------------------------------- */

/* Sets up channel I of S: its decisions, its transport, its timers, an fcm
 * channel's token handle. */
static int wk_sender_chan_init(wk_sender *s, size_t i, wk_redis *rd, char *errstr, size_t errlen)
{
    wk_sender_chan *sc = &s->chans[i];
    const hr_channel *ch = &s->cfg->channels[i];
    const wk_curl_hooks hooks = {
        .ctx = sc, .finished = wk_sender_finished, .drained = wk_sender_drained};

    sc->s = s;
    uv_timer_init(s->loop, &sc->wake);
    uv_timer_init(s->loop, &sc->retry);
    sc->wake.data = sc->retry.data = sc;
    s->nchans++;
    if (wk_curl_new(ch, wk_curl_uv_io(s->uv), &hooks, &sc->curl, errstr, errlen) != 0 ||
        wk_chan_init(&sc->chan, ch, rd, s->m, wk_sender_woken, sc, errstr, errlen) != 0)
        return -1;
    if (ch->type == HR_CHANNEL_FCM && (sc->auth_x = wk_curl_extra(sc->curl)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int wk_sender_new(uv_loop_t *loop, const hr_config *cfg, wk_redis *rd, wk_metrics *m,
                  wk_sender_done_fn done, void *ctx, wk_sender **out, char *errstr, size_t errlen)
{
    wk_sender *s = calloc(1, sizeof *s);

    *out = NULL;
    if (s == NULL || (s->uv = wk_curl_uv_new(loop)) == NULL ||
        (s->chans = calloc(cfg->nchannels, sizeof *s->chans)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    s->loop = loop;
    s->cfg = cfg;
    s->m = m;
    s->done = done;
    s->ctx = ctx;
    if (getrandom(&s->rnd, sizeof s->rnd, 0) != (ssize_t)sizeof s->rnd || s->rnd == 0)
        s->rnd = (uint64_t)hr_clock_now_ms() ^ ((uint64_t)getpid() << 32) ^ 1;
    for (size_t i = 0; i < cfg->nchannels; i++)
        if (wk_sender_chan_init(s, i, rd, errstr, errlen) != 0)
            goto fail;
    *out = s;
    return 0;
fail:
    if (s != NULL) {
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
    return wk_chan_addressed(&s->chans[ch_index].chan, platform, app);
}

void wk_sender_set_prune(wk_sender *s, wk_sender_prune_fn prune, void *ctx)
{
    s->prune = prune;
    s->prune_ctx = ctx;
}

void wk_sender_submit(wk_sender *s, wk_push *push)
{
    push->xfer = NULL;
    wk_chan_submit(&s->chans[push->task->ch_index].chan, push);
}

void wk_sender_kick(wk_sender *s)
{
    wk_sender_run(s);
}

void wk_sender_cancel(wk_sender *s, wk_push *push)
{
    wk_sender_chan *sc = &s->chans[push->task->ch_index];

    if (push->state == WK_PUSH_INFLIGHT)
        wk_sender_release(sc, push->xfer);
    else
        wk_chan_cancel(&sc->chan, push);
    push->state = WK_PUSH_IDLE;
    push->xfer = NULL;
}

bool wk_sender_stuck(const wk_sender *s, size_t ch_index)
{
    const wk_sender_chan *sc = &s->chans[ch_index];

    /* A token request's end runs the channel too. */
    if (s->draining || sc->chan.inflight > 0 || sc->auth_busy)
        return false;
    if (wk_chan_ready(&sc->chan) && !uv_is_active((const uv_handle_t *)&sc->wake))
        return true;
    return wk_chan_due(&sc->chan) >= 0 && !uv_is_active((const uv_handle_t *)&sc->retry);
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
        wk_sender_chan *sc = &s->chans[i];

        wk_chan_close(&sc->chan);
        wk_curl_close(sc->curl);
        sc->auth_x = NULL;
        sc->auth_busy = false;
        uv_close((uv_handle_t *)&sc->wake, NULL);
        uv_close((uv_handle_t *)&sc->retry, NULL);
    }
    wk_curl_uv_close(s->uv);
}

void wk_sender_free(wk_sender *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nchans; i++) {
        wk_curl_free(s->chans[i].curl);
        wk_chan_free(&s->chans[i].chan);
    }
    free(s->chans);
    wk_curl_uv_free(s->uv);
    free(s);
}
