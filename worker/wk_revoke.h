/* wk_revoke: a revoke of partitions, drained (eager protocol: every
 * partition, on every scale event).  Giving the chunks up at once would
 * abort requests the provider already received, and the next owner would
 * push those recipients again.  So the revoke is drained: the revoked
 * partitions are paused and their messages no longer started, their chunks
 * start no new request (held), the running ones finish and are
 * acknowledged, then each chunk is given up (lease released, the rest stays
 * in the set, offset not stored) and, once none is left, the partitions are
 * unassigned — librdkafka waits for that call (the other members wait in
 * the rebalance, at most max.poll.interval.ms), and the worker keeps
 * polling meanwhile.  They are resumed just before the unassign, so that
 * the next assignment starts unpaused with no resume of its own: librdkafka
 * keeps a partition's pause flag across an unassign, and a resume right
 * after an assign (2.0.2 bumps the partition's fetch version even when it
 * is not paused, librdkafka issues 4686 and 5591) can leave a partition
 * never fetched: CI's recover-stopped-holder row on 2026-12-03 saw one
 * partition of a worker unread from its assign on, its chunks and their
 * redeliveries never started (3,328 recipients left, task dispatched).  Bounded by the slowest channel's timeout_ms + 1 s, at
 * most WK_REVOKE_GRACE_MAX_MS.  A planned scale event thus duplicates
 * nothing.
 *
 * Owns the partitions being drained and the grace timer; lent the
 * consumer, the lifecycle and the inbox by the worker, whose loop runs it. */
#ifndef WK_REVOKE_H
#define WK_REVOKE_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "hr_config.h"
#include "wk_inbox.h"
#include "wk_lifecycle.h"

/* A revoke waits at most this for its chunks' running requests. */
#define WK_REVOKE_GRACE_MAX_MS 4000

typedef struct wk_revoke_hooks {
    void *ctx;
    /* The partitions were unassigned: the assignment's pause flags are the
     * worker's again (a new assignment starts unpaused). */
    void (*unassigned)(void *ctx);
} wk_revoke_hooks;

typedef struct wk_revoke {
    rd_kafka_t *rk;
    const hr_config *cfg;
    wk_lifecycle *life;
    wk_inbox *inbox;
    wk_revoke_hooks hooks;
    rd_kafka_topic_partition_list_t *parts; /* the revoke being drained, or NULL */
    uv_timer_t grace;
} wk_revoke;

/* Readies RV on LOOP (its grace timer) for consumer RK. */
void wk_revoke_init(wk_revoke *rv, uv_loop_t *loop, rd_kafka_t *rk, const hr_config *cfg,
                    wk_lifecycle *life, wk_inbox *inbox, const wk_revoke_hooks *hooks);
/* Starts draining PARTS (the rebalance callback's list, copied); at once
 * finished when nothing drains or STOPPING. */
void wk_revoke_start(wk_revoke *rv, rd_kafka_topic_partition_list_t *parts, bool stopping);
/* Ends the revoke being drained, if any: what is left of its chunks is
 * abandoned (requests still running are aborted: those recipients may be
 * pushed again by the next owner), the partitions' unsettled messages are
 * forgotten (consumed again by the next owner) and the assignment is
 * dropped, which lets the group's rebalance go on. */
void wk_revoke_finish(wk_revoke *rv);
/* Finishes the revoke once none of its chunks is left (the loop's idle
 * turn). */
void wk_revoke_check(wk_revoke *rv);
/* True while a revoke drains; true when PARTITION is in it. */
bool wk_revoke_active(const wk_revoke *rv);
bool wk_revoke_has(const wk_revoke *rv, int32_t partition);
/* Closes the grace timer (with the loop's other handles). */
void wk_revoke_close(wk_revoke *rv);
/* Frees what is left once the loop ran down; RV itself is the caller's. */
void wk_revoke_clear(wk_revoke *rv);

#endif
