/* wk_push: one recipient of a chunk on its way through the send wing, and
 * what became of it.  The chunk owns its pushes (and the strings they
 * point at); the sender links them into its queues, heaps and handles
 * while they wait or run, and hands each back once, settled, through its
 * done callback (wk_sender.h).  Its own header, so that the chunk that
 * makes pushes need not include the sender. */
#ifndef WK_PUSH_H
#define WK_PUSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hr_addr.h"
#include "wk_retry.h"
#include "wk_task.h"

typedef enum wk_push_state {
    WK_PUSH_IDLE,     /* not known to the sender */
    WK_PUSH_READY,    /* waiting for a slot, a token or the end of a pause */
    WK_PUSH_DELAYED,  /* waiting out a retry backoff */
    WK_PUSH_INFLIGHT, /* a request is running */
} wk_push_state;

typedef struct wk_push {
    TAILQ_ENTRY(wk_push) link;
    void *owner; /* the chunk; not used by the sender */
    wk_task *task;
    const char *uid;        /* owned by the chunk */
    const redisReply *user; /* HGETALL reply, or NULL */
    unsigned variant;       /* the content it gets (wk_task_variant): 0 the task's own */
    const bool *hold;       /* when *hold: no further attempt (owner halting) */
    /* An addressed channel (fcm): the uid's addresses on it (owned by the
     * chunk), pushed one after the other; none: the uid is unregistered. */
    const hr_addr *addrs;
    size_t naddrs;
    size_t addr;     /* the one being pushed */
    bool any_sent;   /* an address took the push */
    bool any_failed; /* an address failed for good (reason in .failure) */
    char failure[128];
    wk_push_state state;
    int attempts;             /* requests sent */
    int firsts;               /* of those, an address's first: the rest are retries */
    int addr_attempts;        /* requests to the current address */
    int slowdowns;            /* of those, answered "slow down" (429, 503 + Retry-After)
                               * or "refresh the token": not counted against
                               * retry.max_attempts */
    uint64_t token_gen;       /* fcm: the access token's generation sent */
    wk_retry_node delay;      /* DELAYED until delay.due_ms, in the channel's heap */
    struct wk_xfer *xfer;     /* INFLIGHT on this curl handle (webhook, smtp)... */
    struct wk_stream *stream; /* ...or this HTTP/2 stream (apns, fcm) */
} wk_push;

typedef struct wk_push_list wk_push_list; /* wk_task.h */

typedef struct wk_push_result {
    bool delivered;
    bool unregistered;  /* not delivered: the uid has no live address on the channel */
    long http_status;   /* 0 when no response came */
    int latency_ms;     /* of the last request */
    const char *reason; /* why it failed for good; valid during the callback */
    bool held;          /* not delivered, not tried again because of *hold */
    int64_t at_ms;      /* when it settled (wall clock ms): the answer's time, else the
                         * settle's; what the outcome is logged and timed at */
} wk_push_result;

#endif
