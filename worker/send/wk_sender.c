/* wk_sender: the send wing's front (see wk_sender.h).  Read top-down: a
 * channel's timers and how a verdict is carried out, starting a push and
 * the fcm token request, a run of the channels, the transports' finished
 * requests, then set-up and the public calls. */
#include "wk_sender.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#include "hr_clock.h"
#include "hr_log.h"
#include "wk_chan.h"
#include "wk_curl.h"
#include "wk_curl_uv.h"
#include "wk_h2send.h"
#include "wk_xfer.h"

/* A channel as the sender runs it: on one transport, libcurl (a webhook,
 * an smtp or a webpush channel) or HTTP/2 (apns, fcm). */
typedef struct wk_sender_chan {
    wk_sender *s;
    wk_chan chan;       /* its decisions */
    wk_curl *curl;      /* its transport: webhook, smtp */
    wk_h2send *h2;      /* its transport: apns, fcm */
    uv_timer_t wake;    /* the end of a pause, of a rate-limit wait or of a token back-off */
    uv_timer_t retry;   /* the earliest delayed push */
    wk_stream *auth_sx; /* fcm: the token request's stream (not in the pool) */
    bool auth_busy;     /* it runs */
    wk_xfer *settling;  /* a batched request whose pushes are being settled */
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
    wk_push_result stamped;

    push->state = WK_PUSH_IDLE;
    /* An answer carries its time; a push settled without one (none
     * started, a hold, no address) is stamped now. */
    if (res->at_ms == 0) {
        stamped = *res;
        stamped.at_ms = hr_clock_now_ms();
        res = &stamped;
    }
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

/* PUSH's request (started at START_MS; TRANSPORT_ERROR: no answer came)
 * was answered V with HTTP status CODE at NOW (wall clock ms): the channel
 * says what that means, and the sender does it. */
static void wk_sender_answered(wk_sender_chan *sc, wk_push *push, const wk_provider_result *v,
                               long code, int64_t start_ms, int64_t now, bool transport_error)
{
    wk_sender *s = sc->s;
    wk_chan_outcome out = {
        .res = {.latency_ms = (int)(now - start_ms), .http_status = code, .at_ms = now}};
    wk_chan_verdict verdict;

    hr_metrics_observe(s->m->chans[sc - s->chans].latency, out.res.latency_ms / 1000.0);
    if (transport_error)
        hr_metrics_inc(s->m->backend_errors[WK_BACKEND_HTTP]);
    verdict = wk_chan_answer(&sc->chan, push, v, now, &s->rnd, &out);
    wk_sender_act(sc, push, verdict, &out);
}

/* ---- starting requests ----------------------------------------------------- */

/* Builds PUSH's next request on X: the webhook's, the mail, or the web
 * push.  0, or -1
 * with ERRSTR. */
static int wk_sender_prepare(wk_sender_chan *sc, wk_xfer *x, wk_push *push, char *errstr,
                             size_t errlen)
{
    const hr_channel *ch = sc->chan.cfg;
    size_t stripped = 0;

    if (ch->type == HR_CHANNEL_SMTP)
        return wk_xfer_prepare_smtp(x, ch, push->task, push->variant, push->uid, push->user,
                                    push->addrs[push->addr].address, errstr, errlen);
    if (ch->type == HR_CHANNEL_WEBPUSH)
        return wk_xfer_prepare_webpush(x, sc->chan.webpush, sc->chan.ece, push->task, push->variant,
                                       push->uid, push->user, push->addrs[push->addr].address,
                                       errstr, errlen);
    if (wk_xfer_prepare(x, ch, push->task, push->variant, push->uid, push->user, &stripped, errstr,
                        errlen) != 0)
        return -1;
    if (stripped > 0)
        hr_metrics_add(sc->s->m->anomalies[WK_ANOMALY_HEADER_STRIPPED], (uint64_t)stripped);
    return 0;
}

/* Builds PUSH's next request on SX at NOW (wall clock ms): the APNs
 * request signed with the provider token, or the messages:send of its
 * current address with the channel's access token.  0, or -1 with
 * ERRSTR. */
static int wk_sender_prepare_h2(wk_sender_chan *sc, wk_stream *sx, wk_push *push, int64_t now,
                                char *errstr, size_t errlen)
{
    const wk_chan *chan = &sc->chan;
    const char *token, *address = push->addrs[push->addr].address;
    uint64_t gen;
    bool request;
    int64_t wake;

    if (chan->apns != NULL) {
        token = wk_apns_signer_token(chan->apns, now / 1000, errstr, errlen);
        if (token == NULL)
            return -1;
        return wk_stream_prepare_apns(sx, chan->cfg, wk_h2send_path(sc->h2), token, push->task,
                                      push->variant, push->uid, push->user, address, now, errstr,
                                      errlen);
    }
    /* The channel lets an fcm push start only with a token at hand. */
    token = wk_fcm_auth_token(chan->fcm, now, &gen, &request, &wake);
    if (token == NULL) {
        snprintf(errstr, errlen, "no access token");
        return -1;
    }
    push->token_gen = gen;
    return wk_stream_prepare_fcm(sx, wk_h2send_path(sc->h2), token, push->task, push->variant,
                                 push->uid, push->user, address, now, errstr, errlen);
}

/* PUSH's request went out (on X or SX): it counts as in flight. */
static void wk_sender_sent(wk_sender_chan *sc, wk_push *push)
{
    wk_sender *s = sc->s;

    wk_chan_sent(&sc->chan, push);
    s->inflight++;
    hr_metrics_set(s->m->inflight, (double)s->inflight);
}

/* PUSH's request ended, or was aborted, its handle back in the pool: PUSH
 * is idle. */
static void wk_sender_ended(wk_sender_chan *sc, wk_push *push)
{
    wk_sender *s = sc->s;

    wk_chan_ended(&sc->chan, push);
    s->inflight--;
    hr_metrics_set(s->m->inflight, (double)s->inflight);
}

/* Builds and starts PUSH's request on a handle of SC's transport at NOW
 * (wall clock ms): 0, or -1 with ERRSTR (the handle is back in the pool). */
static int wk_sender_request(wk_sender_chan *sc, wk_xfer *x, wk_stream *sx, wk_push *push,
                             int64_t now, char *errstr, size_t errlen)
{
    if (sx != NULL) {
        if (wk_sender_prepare_h2(sc, sx, push, now, errstr, errlen) == 0) {
            sx->p = push;
            if (wk_h2send_add(sc->h2, sx, false, errstr, errlen) == 0) {
                push->stream = sx;
                return 0;
            }
        }
        wk_h2send_give(sc->h2, sx);
        return -1;
    }
    if (wk_sender_prepare(sc, x, push, errstr, errlen) == 0) {
        x->p = push;
        if (wk_curl_add(sc->curl, x, errstr, errlen) == 0) {
            push->xfer = x;
            return 0;
        }
        x->p = NULL;
    }
    wk_curl_give(sc->curl, x);
    return -1;
}

/* Settles every push of X's batched request, each with its own result
 * from A (PER_PUSH) or with ALL, in order.  A push cancelled meanwhile
 * (also by a done callback of this loop: wk_sender_batch_drop) is
 * skipped; the caller puts X back into the pool afterwards. */
static void wk_sender_batch_settle(wk_sender_chan *sc, wk_xfer *x, bool per_push,
                                   wk_batch_answer *a, const wk_provider_result *all, long code,
                                   bool transport_error)
{
    wk_provider_result v;
    int64_t now = hr_clock_now_ms(); /* the request's answer, for each of its pushes */

    sc->settling = x;
    for (size_t i = 0; i < x->npushes; i++) {
        wk_push *push = x->pushes[i];

        if (per_push)
            wk_batch_answer_next(a, &v);
        else
            v = *all;
        if (push == NULL)
            continue;
        x->pushes[i] = NULL;
        wk_sender_ended(sc, push);
        wk_sender_answered(sc, push, &v, code, x->start_ms, now, transport_error);
    }
    sc->settling = NULL;
    x->npushes = 0;
}

/* Starts a batched request on X for PUSH, the first of task WT, and as
 * many more of WT's ready pushes as the channel's batch and the task's
 * tokens allow.  One that cannot be rendered or added fails every push of
 * it for good (settled as a request that failed, so a cancel from a done
 * callback finds them where it looks). */
static void wk_sender_start_batch(wk_sender_chan *sc, wk_xfer *x, wk_task *wt, wk_push *push)
{
    const hr_channel *ch = sc->chan.cfg;
    size_t n, stripped = 0;
    wk_provider_result failed;
    char errstr[256];
    int rc;

    x->pushes[0] = push;
    n = 1 + wk_chan_take_more(&sc->chan, wt, x->pushes + 1, (size_t)ch->batch - 1);
    x->npushes = n;
    rc = wk_xfer_prepare_batch(x, ch, wt, x->pushes, n, &stripped, errstr, sizeof errstr);
    if (rc == 0)
        rc = wk_curl_add(sc->curl, x, errstr, sizeof errstr);
    if (stripped > 0)
        hr_metrics_add(sc->s->m->anomalies[WK_ANOMALY_HEADER_STRIPPED], (uint64_t)stripped);
    for (size_t i = 0; i < n; i++) {
        x->pushes[i]->xfer = x;
        wk_sender_sent(sc, x->pushes[i]);
    }
    if (rc == 0)
        return;
    wk_provider_set(&failed, WK_VERDICT_FAILED, 0, NULL);
    snprintf(failed.reason, sizeof failed.reason, "%.120s", errstr);
    x->start_ms = hr_clock_now_ms();
    wk_sender_batch_settle(sc, x, false, NULL, &failed, 0, false);
    wk_curl_give(sc->curl, x);
}

/* Starts the next push of task WT on a free handle at NOW (the channel
 * run's wall clock ms); false when no handle could be had (the channel
 * waits WK_CHAN_RETRY_MS). */
static bool wk_sender_start(wk_sender_chan *sc, wk_task *wt, int64_t now)
{
    wk_stream *sx = sc->h2 != NULL ? wk_h2send_take(sc->h2) : NULL;
    wk_xfer *x = sc->curl != NULL ? wk_curl_take(sc->curl) : NULL;
    wk_chan_outcome out;
    wk_chan_verdict verdict;
    wk_push *push;
    char errstr[256];

    if (x == NULL && sx == NULL) {
        hr_log_error("request_handle_error", "channel=%s", sc->chan.cfg->name);
        wk_sender_wake_in(sc, WK_CHAN_RETRY_MS);
        return false;
    }
    if (wk_chan_take(&sc->chan, wt, &push, &out) == WK_CHAN_SETTLED) {
        if (sx != NULL)
            wk_h2send_give(sc->h2, sx);
        else
            wk_curl_give(sc->curl, x);
        wk_sender_act(sc, push, WK_CHAN_SETTLED, &out);
        return true;
    }
    if (sc->chan.cfg->batch > 1) {
        wk_sender_start_batch(sc, x, wt, push);
        return true;
    }
    if (wk_sender_request(sc, x, sx, push, now, errstr, sizeof errstr) == 0) {
        wk_sender_sent(sc, push);
        return true;
    }
    /* Not rendered, or not added: the address fails for good. */
    out.res = (wk_push_result){.delivered = false};
    verdict = wk_chan_unsent(&sc->chan, push, errstr, &out);
    wk_sender_act(sc, push, verdict, &out);
    return true;
}

/* Starts the fcm channel's token request on its own stream. */
static void wk_sender_auth_start(wk_sender_chan *sc, int64_t now)
{
    const hr_buf *form;
    char errstr[256], why[256];

    if (wk_fcm_auth_request(sc->chan.fcm, now, &form, errstr, sizeof errstr) != 0)
        return; /* logged, back-off set */
    if (wk_stream_prepare_form(sc->auth_sx, wk_h2send_token_path(sc->h2), form, why, sizeof why) !=
            0 ||
        wk_h2send_add(sc->h2, sc->auth_sx, true, why, sizeof why) != 0) {
        wk_fcm_auth_done(sc->chan.fcm, now, 0, NULL, 0, why, errstr, sizeof errstr);
        return;
    }
    sc->auth_busy = true;
}

/* The token request ended: its answer is in SX. */
static void wk_sender_auth_finished(wk_sender_chan *sc, const wk_stream *sx)
{
    char errstr[256], why[WK_STREAM_MSG_MAX + 32] = "";

    sc->auth_busy = false;
    if (sx->err != WK_H2_OK)
        snprintf(why, sizeof why, "h2 %s: %s", wk_h2_err_names[sx->err], sx->msg);
    if (wk_fcm_auth_done(sc->chan.fcm, hr_clock_now_ms(), sx->err == WK_H2_OK ? sx->status : 0,
                         sx->resp.data, sx->resp.len, why, errstr, sizeof errstr) != 0)
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
    /* A batched channel's cap counts pushes: with every handle busy, the
     * end of a request runs the channel again. */
    while (!s->draining && (sc->curl == NULL || wk_curl_can_take(sc->curl))) {
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
            if (!wk_sender_start(sc, step.task, now))
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

/* ---- the transports' reports ------------------------------------------------ */

/* X's batched request ended with curl result RC and HTTP status CODE:
 * each of its pushes is settled with its own result. */
static void wk_sender_batch_finished(wk_sender_chan *sc, wk_xfer *x, CURLcode rc, long code)
{
    const hr_channel *ch = sc->chan.cfg;
    wk_provider_result all;
    wk_batch_answer a;
    bool per_push = wk_xfer_batch_verdict(ch, x, rc, code, &all, &a);

    if (per_push && a.results == NULL)
        hr_log_warn("batch_answer_bad", "channel=%s status=%ld recipients=%zu error=\"%s\"",
                    ch->name, code, x->npushes, a.error);
    wk_sender_batch_settle(sc, x, per_push, &a, &all, code, rc != CURLE_OK);
    wk_batch_answer_free(&a);
    wk_curl_release(sc->curl, x);
}

/* Cancels PUSH, one of the pushes of X's batched request: the request
 * goes on for the others, and is aborted when none is left (unless they
 * are being settled). */
static void wk_sender_batch_drop(wk_sender_chan *sc, wk_xfer *x, wk_push *push)
{
    size_t live = 0;

    for (size_t i = 0; i < x->npushes; i++) {
        if (x->pushes[i] == push)
            x->pushes[i] = NULL;
        else if (x->pushes[i] != NULL)
            live++;
    }
    wk_sender_ended(sc, push);
    if (live == 0 && sc->settling != x) {
        x->npushes = 0;
        wk_curl_release(sc->curl, x);
    }
}

/* wk_curl_hooks.finished: X's request ended with curl result RC. */
static void wk_sender_finished(void *ctx, wk_xfer *x, CURLcode rc)
{
    wk_sender_chan *sc = ctx;
    const hr_channel *ch = sc->chan.cfg;
    wk_push *push = x->p;
    int64_t start_ms = x->start_ms;
    wk_provider_result v;
    long code = 0;

    if (rc == CURLE_OK || ch->type == HR_CHANNEL_SMTP)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    if (x->npushes > 0) {
        wk_sender_batch_finished(sc, x, rc, code);
        return;
    }
    wk_xfer_verdict(ch, x, rc, code, &v);
    wk_curl_release(sc->curl, x);
    wk_sender_ended(sc, push);
    wk_sender_answered(sc, push, &v, code, start_ms, hr_clock_now_ms(), rc != CURLE_OK);
}

/* wk_h2send_hooks.finished: SX's request ended (its answer in SX). */
static void wk_sender_h2_finished(void *ctx, wk_stream *sx)
{
    wk_sender_chan *sc = ctx;
    wk_push *push = sx->p;
    int64_t start_ms = sx->start_ms;
    bool transport_error = sx->err != WK_H2_OK;
    long code = sx->status;
    wk_provider_result v;

    if (sx == sc->auth_sx) {
        wk_sender_auth_finished(sc, sx);
        return;
    }
    wk_stream_verdict(sc->chan.cfg, sx, &v);
    wk_h2send_give(sc->h2, sx);
    wk_sender_ended(sc, push);
    wk_sender_answered(sc, push, &v, code, start_ms, sx->end_ms, transport_error);
}

/* wk_curl_hooks.drained, wk_h2send_hooks.drained: every finished request
 * was handed over. */
static void wk_sender_drained(void *ctx)
{
    wk_sender_chan *sc = ctx;

    wk_sender_run(sc->s);
}

/* ---- set-up and the public calls ------------------------------------------- */

/* Channel I's transport: HTTP/2 for apns (the channel's URL, else
 * Apple's) and fcm (the messages:send URL, and the token URI), its
 * stream for the token requests; libcurl for the others. */
static int wk_sender_transport(wk_sender *s, size_t i, char *errstr, size_t errlen)
{
    wk_sender_chan *sc = &s->chans[i];
    const hr_channel *ch = &s->cfg->channels[i];
    const wk_curl_hooks curl_hooks = {
        .ctx = sc, .finished = wk_sender_finished, .drained = wk_sender_drained};
    const wk_h2send_hooks h2_hooks = {
        .ctx = sc, .finished = wk_sender_h2_finished, .drained = wk_sender_drained};
    char detail[256];

    if (ch->type == HR_CHANNEL_APNS) {
        if (wk_h2send_new(s->loop, ch, ch->url != NULL ? ch->url : WK_APNS_BASE_URL, NULL,
                          &h2_hooks, &sc->h2, detail, sizeof detail) == 0)
            return 0;
    } else if (ch->type == HR_CHANNEL_FCM) {
        if (wk_h2send_new(s->loop, ch, wk_fcm_auth_send_url(sc->chan.fcm),
                          wk_fcm_auth_token_uri(sc->chan.fcm), &h2_hooks, &sc->h2, detail,
                          sizeof detail) == 0) {
            if ((sc->auth_sx = wk_h2send_extra(sc->h2)) != NULL)
                return 0;
            snprintf(detail, sizeof detail, "out of memory");
        }
    } else if (wk_curl_new(ch, wk_curl_uv_io(s->uv), &curl_hooks, &sc->curl, detail,
                           sizeof detail) == 0) {
        return 0;
    }
    snprintf(errstr, errlen, "channel %s: %s", ch->name, detail);
    return -1;
}

/* Sets up channel I of S: its decisions, its transport, its timers. */
static int wk_sender_chan_init(wk_sender *s, size_t i, wk_redis *rd, char *errstr, size_t errlen)
{
    wk_sender_chan *sc = &s->chans[i];
    const hr_channel *ch = &s->cfg->channels[i];

    sc->s = s;
    uv_timer_init(s->loop, &sc->wake);
    uv_timer_init(s->loop, &sc->retry);
    sc->wake.data = sc->retry.data = sc;
    s->nchans++;
    if (wk_chan_init(&sc->chan, ch, rd, s->m, wk_sender_woken, sc, errstr, errlen) != 0)
        return -1;
    return wk_sender_transport(s, i, errstr, errlen);
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
    push->stream = NULL;
    wk_chan_submit(&s->chans[push->task->ch_index].chan, push);
}

void wk_sender_kick(wk_sender *s)
{
    wk_sender_run(s);
}

void wk_sender_cancel(wk_sender *s, wk_push *push)
{
    wk_sender_chan *sc = &s->chans[push->task->ch_index];

    if (push->state == WK_PUSH_INFLIGHT && push->stream != NULL) {
        wk_h2send_cancel(sc->h2, push->stream);
        wk_h2send_give(sc->h2, push->stream);
        wk_sender_ended(sc, push);
    } else if (push->state == WK_PUSH_INFLIGHT && push->xfer->npushes > 0) {
        wk_sender_batch_drop(sc, push->xfer, push);
    } else if (push->state == WK_PUSH_INFLIGHT) {
        wk_curl_release(sc->curl, push->xfer);
        wk_sender_ended(sc, push);
    } else {
        wk_chan_cancel(&sc->chan, push);
    }
    push->state = WK_PUSH_IDLE;
    push->xfer = NULL;
    push->stream = NULL;
}

void wk_sender_warm(wk_sender *s, size_t ch_index)
{
    wk_sender_chan *sc = &s->chans[ch_index];

    if (sc->h2 != NULL && !s->draining)
        wk_h2send_warm(sc->h2);
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
        wk_h2send_close(sc->h2);
        sc->auth_sx = NULL;
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
        wk_h2send_free(s->chans[i].h2);
        wk_chan_free(&s->chans[i].chan);
    }
    free(s->chans);
    wk_curl_uv_free(s->uv);
    free(s);
}
