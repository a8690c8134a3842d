/* wk_event: what the loop thread hands the reporter (wk_reporter_push):
 * one recipient's outcome (a push_delivery row, and an event of the events
 * topic when events.enabled), a task's counters (the stats hash's,
 * absolute), a chunk's end (its push_chunk row).  Types only; the
 * reporter, its writers (wk_deliveries, wk_chunkrows) and the lifecycle
 * share them. */
#ifndef WK_EVENT_H
#define WK_EVENT_H

#include <stdbool.h>
#include <stdint.h>

#include "hr_event.h"

/* How a chunk ended: its push_chunk.state (the dispatcher writes the
 * fourth value, 'published'). */
typedef enum wk_chunk_end {
    WK_CHUNK_END_DONE,
    WK_CHUNK_END_PARKED,
    WK_CHUNK_END_CANCELLED,
    WK_CHUNK_END_EXPIRED
} wk_chunk_end;

typedef enum wk_event_kind {
    WK_EVENT_OUTCOME,    /* one recipient settled: a push_delivery row */
    WK_EVENT_COUNTERS,   /* push_task counters: absolute values, and a delta */
    WK_EVENT_CHUNK_DONE, /* a chunk closed by chunk_done.lua, parked, cancelled or expired */
} wk_event_kind;

typedef enum wk_delivery {
    WK_DELIVERY_SENT,
    WK_DELIVERY_FAILED,
    WK_DELIVERY_THROTTLED,    /* blocked by the throttle, never pushed */
    WK_DELIVERY_UNREGISTERED, /* no live address on the channel */
    WK_DELIVERY_OPTED_OUT,    /* the user opted out of the category or channel type */
    WK_DELIVERY_SUPPRESSED,   /* every address on the channel is suppressed */
    /* Dropped by drop_set.lua with their chunk: an event, no push_delivery
     * row (the stats hash counts them). */
    WK_DELIVERY_EXPIRED,
    WK_DELIVERY_CANCELLED,
} wk_delivery;

typedef struct wk_event {
    wk_event_kind kind;
    int64_t task;
    /* The shard whose push_task_shard row the counters raise (a task of
     * several shards, docs/architecture.md "Sharded tasks"); HR_SHARD_NONE
     * (-1): a task of one set, push_task itself.  Every event sets it. */
    int shard;
    union {
        struct {
            uint64_t uid;
            wk_delivery status;
            int attempts;
            int http_status; /* 0 = none (connection error) */
            int latency_ms;
            int64_t at_ms;
            /* For the event (events.enabled): the task's channel (the
             * config's string, which outlives the reporter), its due time,
             * and the SHA-256 of the address pushed to (hr_event.h). */
            const char *channel;
            int64_t due_ms; /* the task's due_at: the row's partition (hr_dlog_day) */
            bool has_hash;
            unsigned char hash[HR_EVENT_HASH_LEN];
        } outcome;
        struct {
            /* The stats hash's values (newest wins); -1 = not carried. */
            int64_t sent, failed, throttled, retried, unregistered, opted_out, suppressed;
            int64_t cancelled; /* the stats hash's; the largest wins, 0 = none */
            int64_t expired;   /* likewise */
        } counters;
        struct {
            wk_chunk_end state;
            int64_t seq;
            int64_t done_ms;
            int64_t pending_left; /* HLEN pending after the close */
            int64_t subs_left;    /* SCARD subs + ZCARD wait: not chunked yet */
        } chunk;
    } u;
} wk_event;

/* The event type of an outcome. */
static inline hr_event_type wk_delivery_event_type(wk_delivery status)
{
    static const hr_event_type types[] = {
        [WK_DELIVERY_SENT] = HR_EVENT_SENT,
        [WK_DELIVERY_FAILED] = HR_EVENT_FAILED,
        [WK_DELIVERY_THROTTLED] = HR_EVENT_THROTTLED,
        [WK_DELIVERY_UNREGISTERED] = HR_EVENT_UNREGISTERED,
        [WK_DELIVERY_OPTED_OUT] = HR_EVENT_OPTED_OUT,
        [WK_DELIVERY_SUPPRESSED] = HR_EVENT_SUPPRESSED,
        [WK_DELIVERY_EXPIRED] = HR_EVENT_EXPIRED,
        [WK_DELIVERY_CANCELLED] = HR_EVENT_CANCELLED,
    };

    return types[status];
}

#endif
