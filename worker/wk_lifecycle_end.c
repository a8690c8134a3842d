/* wk_lifecycle_end: how a chunk stops (see wk_lifecycle_end.h).  Read
 * top-down: each ending submits the chunk's end job, and its answer
 * settles the offset and unlinks; then the hold and halt that lead to
 * them; then the revoke and shutdown entry points. */
#include "wk_lifecycle_end.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_clock.h"
#include "hr_log.h"
#include "wk_chunk_end.h"
#include "wk_lifecycle_stall.h"

void wk_lifecycle_end(wk_lifecycle *l, wk_chunk *c, wk_chunk_state to, const char *why)
{
    /* A yielded chunk is marked handed back (issue 34): its offset is
     * stored, so should its lease's holder not finish it (a lease taken
     * by mistake, a holder that dies), the dispatcher republishes it as
     * soon as that lease is gone, not redelivery_timeout_s later. */
    wk_chunk_ending how = to == WK_CHUNK_CLOSING      ? WK_CHUNK_CLOSE
                          : to == WK_CHUNK_EXPIRING   ? WK_CHUNK_DROP_EXPIRE
                          : to == WK_CHUNK_CANCELLING ? WK_CHUNK_DROP_CANCEL
                          : to == WK_CHUNK_YIELDING   ? WK_CHUNK_HANDBACK
                                                      : WK_CHUNK_RELEASE;

    if (wk_chunk_is_ending(c))
        return;
    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_cancel(l->sender, &c->pushes[i]);
    wk_lifecycle_set(c, to, why);
    if (wk_chunk_finalize(l->rd, c, how, l->owner) != 0)
        wk_lifecycle_drop(l, c, "the Redis thread took no job", NULL);
}

/* The end of C, given up (ABANDONING) or yielded to the lease's holder
 * (YIELDING), answered. */
static void wk_lifecycle_abandoned(wk_lifecycle *l, wk_chunk *c, const wk_chunk_ended *res)
{
    wk_lifecycle_report_counters(l, c);
    if (res->ack_failed)
        hr_log_error("ack_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", c->msg.task,
                     c->msg.seq, res->errstr);
    else if (res->rc != 0)
        hr_log_warn("lease_release_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s",
                    c->msg.task, c->msg.seq, res->errstr);
    hr_log_info("chunk_abandoned", "task=%" PRId64 " seq=%" PRId64 " reason=%s open=%zu",
                c->msg.task, c->msg.seq, c->why, c->open);
    if (c->state == WK_CHUNK_YIELDING)
        wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c, "abandoned");
}

/* The close of C answered: every recipient acknowledged, the row 'done'. */
static void wk_lifecycle_finished(wk_lifecycle *l, wk_chunk *c, const wk_chunk_ended *res)
{
    /* Also for a redelivered, already empty chunk: its close reports what
     * a killed worker's reporter could not write. */
    wk_lifecycle_report_counters(l, c);
    if (res->ack_failed || res->rc != 0) {
        /* The set still holds what the failed flush was to remove (back
         * in the buffer): the close changed nothing, and is tried again
         * after a failover (else the sweeper redelivers the chunk). */
        wk_lifecycle_drop(l, c, res->ack_failed ? "ack failed" : "close failed", res->errstr);
        return;
    }
    if (res->res[0] < 0) {
        /* Members appeared after we read the set: leave them to a
         * redelivery by the sweeper (the end job released the lease). */
        hr_log_warn("chunk_not_empty", "task=%" PRId64 " seq=%" PRId64, c->msg.task, c->msg.seq);
    } else {
        wk_event ev = {.kind = WK_EVENT_CHUNK_DONE, .task = c->msg.task, .shard = wk_chunk_row(c)};

        /* A sharded task's last chunk: every shard's counters go before
         * its done (wk_chunk_ended.stats). */
        for (int k = 0; k < res->nstats; k++) {
            wk_event shard = {.kind = WK_EVENT_COUNTERS, .task = c->msg.task, .shard = k};
            const hr_outcomes *o = &res->stats[k];

            shard.u.counters.sent = o->sent;
            shard.u.counters.failed = o->failed;
            shard.u.counters.throttled = o->throttled;
            shard.u.counters.retried = o->retried;
            shard.u.counters.unregistered = o->unregistered;
            shard.u.counters.opted_out = o->opted_out;
            shard.u.counters.suppressed = o->suppressed;
            shard.u.counters.cancelled = o->cancelled;
            shard.u.counters.expired = o->expired;
            wk_reporter_push(l->reporter, &shard);
        }
        ev.u.chunk.state = WK_CHUNK_END_DONE;
        ev.u.chunk.seq = c->msg.seq;
        ev.u.chunk.done_ms = hr_clock_now_ms();
        ev.u.chunk.pending_left = res->res[1];
        ev.u.chunk.subs_left = res->res[2];
        wk_reporter_push(l->reporter, &ev);
        l->stats.chunks_done++;
        hr_metrics_inc(l->met->chunks_acked);
    }
    if (c->key_missing > 0)
        hr_log_info("throttle_key_missing", "task=%" PRId64 " seq=%" PRId64 " count=%" PRId64,
                    c->msg.task, c->msg.seq, c->key_missing);
    hr_log_info("chunk_done",
                "task=%" PRId64 " seq=%" PRId64 " recipients=%zu sent=%" PRId64 " failed=%" PRId64
                " throttled=%" PRId64 " unregistered=%" PRId64 " opted_out=%" PRId64
                " suppressed=%" PRId64 " deferred=%" PRId64 " retried=%" PRId64
                " duration_ms=%" PRId64 " pending_left=%" PRId64,
                c->msg.task, c->msg.seq, c->npushes, c->sent, c->failed, c->throttled,
                c->unregistered, c->opted_out, c->suppressed, c->deferred, c->retried,
                hr_clock_now_ms() - c->started_ms, res->res[1]);
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c, "closed");
}

/* Events on: each recipient C's drop took becomes an event (published
 * after the drop: see docs/architecture.md "Events" for what a crash in
 * between costs). */
static void wk_lifecycle_dropped_events(wk_lifecycle *l, wk_chunk *c, const wk_chunk_ended *res,
                                        bool expire)
{
    wk_event ev = {.kind = WK_EVENT_OUTCOME, .task = c->msg.task, .shard = wk_chunk_row(c)};

    ev.u.outcome.status = expire ? WK_DELIVERY_EXPIRED : WK_DELIVERY_CANCELLED;
    ev.u.outcome.at_ms = hr_clock_now_ms();
    ev.u.outcome.channel = c->task->ch->name;
    ev.u.outcome.due_ms = c->msg.due_ms;
    for (size_t i = 0; i < res->ndropped; i++) {
        ev.u.outcome.uid = res->dropped[i];
        wk_reporter_push(l->reporter, &ev);
    }
}

/* The end of C, parked (lease released, the rest stays in the set and
 * pending for the dispatcher to republish on resume) or with the rest
 * dropped, counted as cancelled or expired (drop_set.lua), answered: the
 * offset counts as finished. */
static void wk_lifecycle_halt_ended(wk_lifecycle *l, wk_chunk *c, const wk_chunk_ended *res)
{
    wk_event ev = {.kind = WK_EVENT_CHUNK_DONE, .task = c->msg.task, .shard = wk_chunk_row(c)};
    int64_t dropped = 0;
    bool expire = c->state == WK_CHUNK_EXPIRING;

    wk_lifecycle_report_counters(l, c);
    if (res->ack_failed || res->rc != 0) {
        wk_lifecycle_drop(l, c, res->ack_failed ? "ack failed" : "halt failed", res->errstr);
        return;
    }
    if (c->state != WK_CHUNK_PARKING) {
        /* Only the outcome's counter (the stats hash's): sent .. retried
         * are not carried (-1). */
        wk_event counters = {.kind = WK_EVENT_COUNTERS,
                             .task = c->msg.task,
                             .shard = wk_chunk_row(c),
                             .u.counters = {.sent = -1,
                                            .failed = -1,
                                            .throttled = -1,
                                            .retried = -1,
                                            .unregistered = -1,
                                            .opted_out = -1,
                                            .suppressed = -1}};
        int64_t total = res->res[1];

        dropped = res->res[0];
        if (dropped < 0) {
            /* Another worker holds the lease: it drops the chunk. */
            hr_log_info(expire ? "chunk_expire_foreign" : "chunk_cancel_foreign",
                        "task=%" PRId64 " seq=%" PRId64, c->msg.task, c->msg.seq);
            wk_lifecycle_settle_offset(l, c->partition, c->offset);
            wk_lifecycle_unlink(l, c, "held by another");
            return;
        }
        if (expire) {
            counters.u.counters.expired = total;
            hr_metrics_add(l->met->chans[c->task->ch_index].expired, (uint64_t)dropped);
        } else {
            counters.u.counters.cancelled = total;
        }
        if (total > 0)
            wk_reporter_push(l->reporter, &counters);
        wk_lifecycle_dropped_events(l, c, res, expire);
        ev.u.chunk.state = expire ? WK_CHUNK_END_EXPIRED : WK_CHUNK_END_CANCELLED;
    } else {
        l->stats.parked_chunks++;
        ev.u.chunk.state = WK_CHUNK_END_PARKED;
    }
    ev.u.chunk.seq = c->msg.seq;
    ev.u.chunk.done_ms = hr_clock_now_ms();
    wk_reporter_push(l->reporter, &ev);
    hr_log_info(c->state == WK_CHUNK_CANCELLING ? "chunk_cancelled"
                : expire                        ? "chunk_expired"
                                                : "chunk_parked",
                "task=%" PRId64 " seq=%" PRId64 " sent=%" PRId64 " dropped=%" PRId64, c->msg.task,
                c->msg.seq, c->sent, dropped);
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c, "halted");
}

/* C's end job answered. */
void wk_lifecycle_ended(wk_chunk *c, const wk_chunk_ended *res)
{
    wk_lifecycle *l = c->ctx;

    if (wk_lifecycle_gone(l, c))
        return;
    switch (c->state) {
    case WK_CHUNK_CLOSING:
        wk_lifecycle_finished(l, c, res);
        break;
    case WK_CHUNK_PARKING:
    case WK_CHUNK_EXPIRING:
    case WK_CHUNK_CANCELLING:
        wk_lifecycle_halt_ended(l, c, res);
        break;
    case WK_CHUNK_HANDING_BACK:
        wk_lifecycle_handed_back(l, c, res->rc, res->res[0], res->res[1] == 1, res->errstr);
        break;
    default: /* ABANDONING, YIELDING */
        wk_lifecycle_abandoned(l, c, res);
        break;
    }
}

/* Holds C in state TO (for WHY): no request of it starts; once nothing
 * of it is in flight, its ending follows. */
static void wk_lifecycle_hold_in(wk_lifecycle *l, wk_chunk *c, wk_chunk_state to, const char *why)
{
    wk_lifecycle_set(c, to, why);
    wk_lifecycle_hold(l, c);
    if (c->open == 0)
        wk_lifecycle_settled(l, c);
}

void wk_lifecycle_halt(wk_lifecycle *l, wk_chunk *c, wk_chunk_halt halt)
{
    static const char *const why[] = {
        [WK_CHUNK_PARK] = "paused", [WK_CHUNK_EXPIRE] = "expired", [WK_CHUNK_CANCEL] = "cancelled"};
    wk_chunk_state to = halt == WK_CHUNK_PARK     ? WK_CHUNK_HELD_PAUSE
                        : halt == WK_CHUNK_EXPIRE ? WK_CHUNK_HELD_EXPIRE
                                                  : WK_CHUNK_HELD_CANCEL;

    /* A stronger halt under way stays; a chunk being revoked is given up
     * anyway (its next owner parks or cancels it); an ending one is past
     * halting. */
    if (halt == WK_CHUNK_RUN || c->state >= WK_CHUNK_HELD_REVOKE ||
        (c->state >= WK_CHUNK_HELD_PAUSE && to <= c->state))
        return;
    wk_lifecycle_hold_in(l, c, to, why[halt]);
}

void wk_lifecycle_settled(wk_lifecycle *l, wk_chunk *c)
{
    switch (c->state) {
    case WK_CHUNK_PUSHING:
        wk_lifecycle_end(l, c, WK_CHUNK_CLOSING, "settled");
        break;
    case WK_CHUNK_HELD_PAUSE:
        wk_lifecycle_end(l, c, WK_CHUNK_PARKING, "paused");
        break;
    case WK_CHUNK_HELD_EXPIRE:
        wk_lifecycle_end(l, c, WK_CHUNK_EXPIRING, "expired");
        break;
    case WK_CHUNK_HELD_CANCEL:
        wk_lifecycle_end(l, c, WK_CHUNK_CANCELLING, "cancelled");
        break;
    case WK_CHUNK_HELD_REVOKE:
        /* Its requests all answered and acknowledged: the partition's
         * next owner pushes nobody twice. */
        wk_lifecycle_end(l, c, WK_CHUNK_ABANDONING, "revoked");
        break;
    default: /* not open, or ending already */
        break;
    }
}

/* ---- revoke and shutdown ---------------------------------------------------- */

size_t wk_lifecycle_revoke(wk_lifecycle *l, int32_t partition)
{
    wk_chunk *c, *next;

    for (c = TAILQ_FIRST(&l->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        /* Abandoned at once when nothing of it is in flight. */
        if (c->partition == partition && c->state < WK_CHUNK_HELD_REVOKE)
            wk_lifecycle_hold_in(l, c, WK_CHUNK_HELD_REVOKE, "revoked");
        else if (c->partition == partition && c->state == WK_CHUNK_STALLED)
            wk_lifecycle_hand_back(l, c, "revoked while stalled");
    }
    /* What is left: requests in flight, or an end under way (an abandon
     * writing its acknowledgements, which the next owner must see). */
    return wk_lifecycle_count(l, partition);
}

void wk_lifecycle_abandon_revoked(wk_lifecycle *l, const char *why)
{
    wk_chunk *c, *next;

    for (c = TAILQ_FIRST(&l->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        if (c->state == WK_CHUNK_HELD_REVOKE)
            wk_lifecycle_end(l, c, WK_CHUNK_ABANDONING, why);
    }
}

void wk_lifecycle_forget(wk_lifecycle *l, int32_t partition)
{
    size_t pending = wk_offsets_pending(l->offsets, partition);

    /* Messages received but not settled are consumed again by the
     * partition's next owner. */
    if (pending > 0)
        hr_log_info("partition_unsettled", "partition=%" PRId32 " messages=%zu", partition,
                    pending);
    wk_offsets_drop(l->offsets, partition);
}

bool wk_lifecycle_ending(const wk_lifecycle *l)
{
    const wk_chunk *c;

    TAILQ_FOREACH(c, &l->chunks, link)
    if (wk_chunk_is_ending(c))
        return true;
    return false;
}

void wk_lifecycle_abandon_all(wk_lifecycle *l, const char *why)
{
    wk_chunk *c, *next;

    for (c = TAILQ_FIRST(&l->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        wk_lifecycle_end(l, c, WK_CHUNK_ABANDONING, why);
    }
}
