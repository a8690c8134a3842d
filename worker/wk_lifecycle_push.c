/* wk_lifecycle_push: a chunk's pushes (see wk_lifecycle_push.h): their
 * outcomes and acknowledgements, and the throttle slices that let them
 * go. */
#include "wk_lifecycle_push.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_clock.h"
#include "hr_log.h"
#include "wk_chunk_acks.h"
#include "wk_chunk_check.h"
#include "wk_lifecycle_end.h"
#include "wk_lifecycle_stall.h"

/* ---- push outcomes and acknowledgements -------------------------------------- */

void wk_lifecycle_outcome(wk_lifecycle *l, wk_chunk *c, const char *uid, const wk_push *push,
                          wk_delivery status, const wk_push_result *res)
{
    wk_event ev = {.kind = WK_EVENT_OUTCOME, .task = c->msg.task, .shard = wk_chunk_row(c)};
    uint64_t num;

    /* wk_chunk_open settles only valid uids (1..INT64_MAX). */
    ev.u.outcome.uid = strtoull(uid, NULL, 10);
    ev.u.outcome.status = status;
    ev.u.outcome.attempts = push != NULL ? push->attempts : 0;
    ev.u.outcome.http_status = (int)res->http_status;
    ev.u.outcome.latency_ms = res->latency_ms;
    ev.u.outcome.at_ms = res->at_ms;
    ev.u.outcome.channel = c->task->ch->name;
    ev.u.outcome.due_ms = c->task->row->due_ms;
    if (push != NULL && c->task->variants.n > 0)
        snprintf(ev.u.outcome.variant, sizeof ev.u.outcome.variant, "%s",
                 wk_task_content(c->task, push->variant)->key);
    /* The address the push went to last (an addressed channel walks its
     * addresses: ADDR is past the last one once it settled). */
    if (push != NULL && push->naddrs > 0 && push->attempts > 0) {
        const char *a =
            push->addrs[push->addr < push->naddrs ? push->addr : push->naddrs - 1].address;

        hr_event_hash(a, strlen(a), ev.u.outcome.hash);
        ev.u.outcome.has_hash = true;
    }
    num = wk_reporter_push(l->reporter, &ev);
    /* The chunk's acknowledgements from now on wait for this event
     * (wk_gate.h). */
    if (num > 0)
        c->ev_last = num;
}

bool wk_lifecycle_reports(const wk_lifecycle *l)
{
    return l->cfg->worker.delivery_log || l->cfg->events.enabled;
}

/* A flush of C answered: the counters go to the reporter; a failure drops
 * the chunk (one ending already sees it in its own answer). */
void wk_lifecycle_flushed(wk_chunk *c, int rc, const char *errstr)
{
    wk_lifecycle *l = c->ctx;

    if (wk_lifecycle_gone(l, c))
        return;
    wk_lifecycle_report_counters(l, c);
    if (c->state == WK_CHUNK_STALLED) {
        wk_lifecycle_stall_flushed(l, c, rc, errstr);
        return;
    }
    if (rc == 0 || wk_chunk_is_ending(c))
        return;
    hr_log_error("ack_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", c->msg.task, c->msg.seq,
                 errstr);
    wk_lifecycle_drop(l, c, "ack failed", errstr);
}

void wk_lifecycle_push_done(void *ctx, wk_push *push, const wk_push_result *res)
{
    wk_lifecycle *l = ctx;
    wk_chunk *c = push->owner;
    wk_metrics_chan *mc = &l->met->chans[c->task->ch_index];
    int retries = push->attempts - push->firsts; /* an address's first request is no retry */
    wk_delivery status = res->delivered      ? WK_DELIVERY_SENT
                         : res->unregistered ? WK_DELIVERY_UNREGISTERED
                                             : WK_DELIVERY_FAILED;
    int full;

    c->open--;
    if (retries > 0) {
        c->retried += retries;
        c->acks.retried += retries;
        hr_metrics_add(mc->retried, (uint64_t)retries);
        hr_metrics_add(l->met->retries, (uint64_t)retries);
    }
    if (res->held) {
        /* The sender refused to start a push of an expired task
         * (wk_chan_next; a retry due past expire_at waited until then):
         * the rest of the chunk expires with it. */
        if (c->state == WK_CHUNK_PUSHING && hr_task_expired(c->task->row, res->at_ms))
            wk_lifecycle_halt(l, c, WK_CHUNK_EXPIRE);
        else if (c->open == 0)
            wk_lifecycle_settled(l, c);
        return;
    }
    if (wk_lifecycle_reports(l))
        wk_lifecycle_outcome(l, c, push->uid, push, status, res);
    switch (status) {
    case WK_DELIVERY_SENT:
        hr_metrics_inc(mc->sent);
        hr_metrics_observe(l->met->due_to_delivery, (double)(res->at_ms - c->msg.due_ms) / 1000.0);
        full = wk_chunk_ack(c, WK_CHUNK_SENT, push->uid, NULL);
        break;
    case WK_DELIVERY_UNREGISTERED:
        hr_metrics_inc(mc->unregistered);
        full = wk_chunk_ack(c, WK_CHUNK_UNREGISTERED, push->uid, NULL);
        break;
    default:
        hr_metrics_inc(mc->failed);
        hr_log_debug("push_failed", "task=%" PRId64 " uid=%s reason=%s", c->msg.task, push->uid,
                     res->reason);
        full = wk_chunk_ack(c, WK_CHUNK_DEAD, push->uid, res->reason);
        break;
    }
    if (full < 0 || (full == 1 && wk_chunk_flush(l->rd, c) != 0)) {
        wk_lifecycle_drop(l, c, full < 0 ? "out of memory" : "the Redis thread took no job", NULL);
        return;
    }
    if (c->open == 0)
        wk_lifecycle_settled(l, c);
    if (l->stopping)
        l->hooks.wake(l->hooks.privdata);
}

/* ---- throttle ------------------------------------------------------------------ */

/* Checks C's pushes FIRST..FIRST+N-1 through the throttle in slices (the
 * chunk's first one small), all submitted at once: the Redis thread runs
 * them back to back, and the pushes of a slice start as soon as its
 * verdicts are back.  0, or -1 when C was dropped. */
int wk_lifecycle_throttle(wk_lifecycle *l, wk_chunk *c, size_t first, size_t n)
{
    size_t end = first + n, slice = first == 0 ? WK_CHUNK_FIRST_SLICE : HR_THROTTLE_PIPE_MAX;

    c->unchecked += n;
    for (; first < end; first += slice, slice = HR_THROTTLE_PIPE_MAX) {
        if (slice > end - first)
            slice = end - first;
        if (wk_chunk_check(l->rd, c, first, slice) != 0) {
            wk_lifecycle_drop(l, c, "the Redis thread took no job", NULL);
            return -1;
        }
    }
    return 0;
}

/* A throttle slice of C answered: blocked recipients were acknowledged as
 * throttled and are reported; the others are pushed. */
void wk_lifecycle_checked(wk_chunk *c, const wk_chunk_checked *res)
{
    const wk_push_result none = {.delivered = false, .at_ms = hr_clock_now_ms()};
    wk_lifecycle *l = c->ctx;
    size_t submitted = 0;

    if (wk_lifecycle_gone(l, c))
        return;
    wk_lifecycle_report_counters(l, c);
    if (res->rc != 0) {
        if (!wk_chunk_is_ending(c))
            wk_lifecycle_drop(l, c, "throttle check failed", res->errstr);
        return;
    }
    hr_metrics_add(l->met->chans[c->task->ch_index].throttled, (uint64_t)res->blocked);
    hr_metrics_add(l->met->throttled, (uint64_t)res->blocked);
    if (wk_lifecycle_reports(l) && res->blocked > 0)
        for (size_t i = res->first; i < res->first + res->n; i++)
            if (c->verdicts[i] == HR_THROTTLE_BLOCKED)
                wk_lifecycle_outcome(l, c, c->pushes[i].uid, &c->pushes[i], WK_DELIVERY_THROTTLED,
                                     &none);
    /* Held or ending meanwhile: these pushes were counted out when it
     * held (wk_lifecycle_hold). */
    if (c->state != WK_CHUNK_PUSHING)
        return;
    c->unchecked -= res->n;
    c->open -= (size_t)res->blocked;
    for (size_t i = res->first; i < res->first + res->n; i++)
        if (c->verdicts[i] != HR_THROTTLE_BLOCKED) {
            wk_sender_submit(l->sender, &c->pushes[i]);
            submitted++;
        }
    if (c->open == 0) {
        wk_lifecycle_settled(l, c);
        return;
    }
    /* May settle pushes, even finish or drop C: C is not touched after. */
    if (submitted > 0)
        wk_sender_kick(l->sender);
}
