/* wk_chan: one channel of the send wing — which push may start next, and
 * what an answered request means for its push.  The channel decides; the
 * sender (wk_sender) asks and acts, and the channel never calls it.  A
 * channel holds:
 *   - one ready queue of wk_push per task with pushes waiting (intrusive
 *     links, in the wk_task), served round-robin so that one task cannot
 *     hold up the others (a task waiting for rate-limit tokens is skipped
 *     until its wait ends), and a min-heap of the pushes waiting out a
 *     retry backoff (the pushes are owned by their chunk, the channel only
 *     links them);
 *   - the AIMD in-flight cap (wk_retry; in pushes: a batched webhook's
 *     request carries up to `batch`) and the pause of a slow-down (429,
 *     or 503 with Retry-After), shared with every worker through Redis
 *     (hr_key_slowdown: written by the worker that got the answer, read
 *     every WK_CHAN_SLOW_POLL_MS while pushes wait);
 *   - tokens granted by the cluster-wide rate limiter (the task's budget,
 *     rate_limit or finish_by's rate, and its weighted share of the
 *     channel's rate_limit, kept in the wk_task), asked for in grants of
 *     max(1, limit/20) so the rate is smooth; a token is spent only when
 *     its push is taken (a grant is never thrown away);
 *   - its provider's credentials: an fcm channel's account and shared
 *     access token (wk_fcm_auth; no push starts without an unexpired
 *     token), an apns channel's provider-token signer (wk_apns), a webpush
 *     channel's VAPID tokens (wk_webpush) and its encryption (wk_ece).
 * A push to an addressed channel (fcm, apns, smtp, webpush) walks the uid's
 * addresses (given by its chunk) one request after the other, each with
 * its own retry budget: an address the provider calls dead is handed back
 * for pruning; the push is delivered when one address took it, failed
 * when one failed for good, else unregistered.  Retryable failures wait an
 * exponential backoff with full jitter on the heap, unless the push's hold
 * flag is set (its owner is halting): then it is settled as held; a retry
 * due past its task's expire_at waits only until then, and a push whose
 * task expired is never started but settled as held.
 *
 * The sender's calls, and what each answers:
 *   wk_chan_next    what may happen now (wk_chan_step_kind): nothing, wait
 *                   so long, start the fcm token request, settle a push, or
 *                   start the next push of a task (after wk_chan_take; a
 *                   batched webhook's request takes more with
 *                   wk_chan_take_more)
 *   wk_chan_answer  a request's answer (its wk_provider verdict) as a
 *                   wk_chan_verdict: settled (how), queued again, delayed
 *                   (and an address to prune)
 * The channel's own Redis jobs (grants, the cluster's slow-down) answer on
 * the loop and call the wake hook, so the sender runs the channel again.
 * Loop thread only. */
#ifndef WK_CHAN_H
#define WK_CHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hr_addr.h"
#include "hr_config.h"
#include "wk_apns.h"
#include "wk_ece.h"
#include "wk_fcm_auth.h"
#include "wk_metrics.h"
#include "wk_provider.h"
#include "wk_push.h"
#include "wk_redis.h"
#include "wk_retry.h"
#include "wk_task.h"
#include "wk_webpush.h"

/* A limiter error (Redis down), or no handle to start on: try again after
 * this. */
#define WK_CHAN_RETRY_MS 1000
/* How often a channel with pushes waiting reads the cluster's slow-down:
 * other workers stop within this of one worker's 429. */
#define WK_CHAN_SLOW_POLL_MS 250

typedef struct wk_chan {
    const hr_channel *cfg; /* its configuration */
    wk_redis *rd;
    wk_metrics *m;
    void (*wake)(void *ctx); /* a Redis job answered: run the channel again */
    void *wake_ctx;
    TAILQ_HEAD(wk_task_list, wk_task) tasks; /* with ready pushes, round robin */
    wk_retry_heap delayed;                   /* by due time */
    size_t inflight;                         /* requests running */
    wk_retry_cap cap;
    int64_t paused_until_ms;
    wk_fcm_auth *fcm;        /* fcm channels: the account and the shared access token */
    wk_apns_signer *apns;    /* apns channels: the provider token's signer */
    wk_webpush *webpush;     /* webpush channels: the VAPID key and tokens... */
    wk_ece *ece;             /* ...and the payload's encryption */
    char k_slow[HR_KEY_MAX]; /* the channel's cluster-wide slow-down (hr_key_slowdown) */
    int64_t slow_checked_ms; /* when it was last read */
    bool slow_reading;       /* a read is on its way (the Redis thread) */
    int64_t slow_seen_until; /* the latest slow-down this worker took part in */
    bool closed;             /* wk_chan_close ran: a late Redis answer wakes nothing */
} wk_chan;

/* What may happen on a channel now (wk_chan_next). */
typedef enum wk_chan_step_kind {
    WK_CHAN_IDLE,   /* nothing until a request ends, a job answers or a timer fires */
    WK_CHAN_WAIT,   /* pushes wait: run the channel again after STEP->wait_ms */
    WK_CHAN_AUTH,   /* the fcm token request is due: start it, then ask again */
    WK_CHAN_SETTLE, /* STEP->push is settled as STEP->out.res says (its task expired) */
    WK_CHAN_START,  /* the next push of STEP->task may start: a handle, then wk_chan_take */
} wk_chan_step_kind;

/* What became of a push (wk_chan_take, wk_chan_answer, wk_chan_unsent). */
typedef enum wk_chan_verdict {
    WK_CHAN_GO,      /* wk_chan_take: start it */
    WK_CHAN_SETTLED, /* done as OUT->res says; it is linked nowhere */
    WK_CHAN_QUEUED,  /* at the head of its task's ready queue again (the next address, or a
                        re-send after a slow-down or a refreshed credential) */
    WK_CHAN_DELAYED, /* on the retry heap until PUSH->delay.due_ms: arm the retry timer */
} wk_chan_verdict;

/* The details of a verdict. */
typedef struct wk_chan_outcome {
    /* SETTLED: how; the caller sets latency_ms and http_status before the
     * call.  Its reason stays valid until the next call with this
     * outcome. */
    wk_push_result res;
    const hr_addr *dead; /* an address the provider called dead: prune it (any verdict) */
    char reason[192];    /* what res.reason may point at */
} wk_chan_outcome;

typedef struct wk_chan_step {
    wk_task *task;       /* START */
    wk_push *push;       /* SETTLE */
    int64_t wait_ms;     /* WAIT */
    wk_chan_outcome out; /* SETTLE */
} wk_chan_step;

/* Sets CHAN up for channel CH: its credentials (an fcm channel's service
 * account, an apns channel's key file, a webpush channel's VAPID key), cap and slow-down key.  RD gets
 * its jobs, M its metrics; WAKE(CTX) runs when a job answered.  0, or -1
 * with ERRSTR ("channel NAME: ..."); wk_chan_free accepts the half-made
 * channel. */
int wk_chan_init(wk_chan *chan, const hr_channel *ch, wk_redis *rd, wk_metrics *m,
                 void (*wake)(void *ctx), void *ctx, char *errstr, size_t errlen);
/* Late answers of its jobs wake nothing any more (shutdown). */
void wk_chan_close(wk_chan *chan);
/* Frees the credentials and the heap.  No push may be linked. */
void wk_chan_free(wk_chan *chan);

/* Whether CHAN pushes to addresses from the address book, and which:
 * *PLATFORM and *APP (the fcm project, the apns topic; '' for email and
 * webpush).  False for a
 * webhook. */
bool wk_chan_addressed(const wk_chan *chan, hr_addr_platform *platform, const char **app);

/* Queues PUSH (IDLE) for its first attempt. */
void wk_chan_submit(wk_chan *chan, wk_push *push);
/* Unlinks PUSH if it waits (READY or DELAYED); a running one is the
 * sender's to abort. */
void wk_chan_cancel(wk_chan *chan, wk_push *push);

/* Moves the pushes whose backoff passed to the ready queues and, while
 * pushes wait, reads the cluster's slow-down (at most every
 * WK_CHAN_SLOW_POLL_MS).  The sender calls it before wk_chan_next. */
void wk_chan_tick(wk_chan *chan, int64_t now);
/* When the earliest retry is due, or -1 when none waits. */
int64_t wk_chan_due(const wk_chan *chan);
/* Whether pushes wait in the ready queues. */
bool wk_chan_ready(const wk_chan *chan);

/* What may happen now (see wk_chan_step_kind), into *STEP. */
wk_chan_step_kind wk_chan_next(wk_chan *chan, int64_t now, wk_chan_step *step);
/* Takes the next push of TASK (START of wk_chan_next) into *PUSH: its
 * tokens are spent and the task goes behind the others.  GO, or SETTLED
 * (OUT) when it has no address on an addressed channel. */
wk_chan_verdict wk_chan_take(wk_chan *chan, wk_task *task, wk_push **push, wk_chan_outcome *out);
/* After a START of a batched webhook channel (its `batch`) took the
 * first push of TASK: takes up to MAX more of its ready pushes into PUSHES
 * for the same request, as far as the task's tokens go.  Returns how
 * many. */
size_t wk_chan_take_more(wk_chan *chan, wk_task *task, wk_push **pushes, size_t max);
/* PUSH's request was sent: it counts against the cap. */
void wk_chan_sent(wk_chan *chan, wk_push *push);
/* PUSH's request ended (answered or aborted): PUSH is IDLE, the cap has
 * room again. */
void wk_chan_ended(wk_chan *chan, wk_push *push);
/* What answer V (HTTP status OUT->res.http_status) to PUSH's request means
 * at NOW; RND is the sender's jitter state. */
wk_chan_verdict wk_chan_answer(wk_chan *chan, wk_push *push, const wk_provider_result *v,
                               int64_t now, uint64_t *rnd, wk_chan_outcome *out);
/* PUSH's request could not be sent (WHY: not rendered, not added): its
 * address fails for good. */
wk_chan_verdict wk_chan_unsent(wk_chan *chan, wk_push *push, const char *why, wk_chan_outcome *out);

#endif
