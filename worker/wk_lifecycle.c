/* wk_lifecycle: a chunk from intake to offset store (see wk_lifecycle.h):
 * the one place a chunk's state changes (wk_lifecycle_set, after curl's
 * mstate()), and the bookkeeping the lifecycle's files share — the
 * offsets, the counters handed to the reporter, a chunk taken off the
 * list, a chunk held.  The rest of the life is in wk_lifecycle_open.c
 * (intake, open), wk_lifecycle_push.c (throttle slices, outcomes,
 * acknowledgements), wk_lifecycle_end.c (the endings, revoke, shutdown)
 * and wk_lifecycle_timers.c (renewal, control, watchdog). */
#include "wk_lifecycle.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_clock.h"
#include "hr_log.h"

/* ---- the chunk's state ---------------------------------------------------- */

/* The states' names, for the log (wk_chunk_state). */
static const char *const wk_lifecycle_states[WK_CHUNK__STATES] = {
    [WK_CHUNK_NEW] = "new",
    [WK_CHUNK_OPENING] = "opening",
    [WK_CHUNK_LEASE_WAIT] = "lease_wait",
    [WK_CHUNK_PUSHING] = "pushing",
    [WK_CHUNK_HELD_PAUSE] = "held_pause",
    [WK_CHUNK_HELD_EXPIRE] = "held_expire",
    [WK_CHUNK_HELD_CANCEL] = "held_cancel",
    [WK_CHUNK_HELD_REVOKE] = "held_revoke",
    [WK_CHUNK_STALLED] = "stalled",
    [WK_CHUNK_CLOSING] = "closing",
    [WK_CHUNK_PARKING] = "parking",
    [WK_CHUNK_EXPIRING] = "expiring",
    [WK_CHUNK_CANCELLING] = "cancelling",
    [WK_CHUNK_ABANDONING] = "abandoning",
    [WK_CHUNK_YIELDING] = "yielding",
    [WK_CHUNK_HANDING_BACK] = "handing_back",
    [WK_CHUNK_GONE] = "gone",
};

#define WK_S(s) (1u << WK_CHUNK_##s)
/* The held states a halt or a revoke moves a chunk to. */
#define WK_HELD (WK_S(HELD_PAUSE) | WK_S(HELD_EXPIRE) | WK_S(HELD_CANCEL) | WK_S(HELD_REVOKE))
/* The endings whose job runs (wk_chunk_is_ending) but the hand-back. */
#define WK_ENDS                                                                             \
    (WK_S(CLOSING) | WK_S(PARKING) | WK_S(EXPIRING) | WK_S(CANCELLING) | WK_S(ABANDONING) | \
     WK_S(YIELDING))
/* What every chunk not ending yet may come to: given up, dropped, or
 * stalled on a failover. */
#define WK_LEAVE (WK_S(ABANDONING) | WK_S(GONE) | WK_S(STALLED))

/* The transitions of wk_chunk.h: bit T of [S] when S -> T is one. */
static const unsigned wk_lifecycle_next[WK_CHUNK__STATES] = {
    [WK_CHUNK_NEW] = WK_S(OPENING) | WK_S(HANDING_BACK), /* its task lacks a channel here */
    [WK_CHUNK_OPENING] = WK_S(LEASE_WAIT) | WK_S(PUSHING) | WK_S(CLOSING) | WK_HELD | WK_LEAVE,
    [WK_CHUNK_LEASE_WAIT] = WK_S(OPENING) | WK_HELD | WK_LEAVE,
    [WK_CHUNK_PUSHING] = WK_HELD | WK_S(CLOSING) | WK_S(YIELDING) | WK_LEAVE,
    [WK_CHUNK_HELD_PAUSE] = WK_S(HELD_EXPIRE) | WK_S(HELD_CANCEL) | WK_S(HELD_REVOKE) |
                            WK_S(PARKING) | WK_S(YIELDING) | WK_LEAVE,
    [WK_CHUNK_HELD_EXPIRE] =
        WK_S(HELD_CANCEL) | WK_S(HELD_REVOKE) | WK_S(EXPIRING) | WK_S(YIELDING) | WK_LEAVE,
    [WK_CHUNK_HELD_CANCEL] = WK_S(HELD_REVOKE) | WK_S(CANCELLING) | WK_S(YIELDING) | WK_LEAVE,
    [WK_CHUNK_HELD_REVOKE] = WK_S(YIELDING) | WK_LEAVE,
    /* back where it came from, or given up; never dropped: a stall's
     * failures are failovers */
    [WK_CHUNK_STALLED] = WK_S(OPENING) | WK_HELD | WK_ENDS | WK_S(HANDING_BACK),
    [WK_CHUNK_CLOSING] = WK_S(GONE) | WK_S(STALLED),
    [WK_CHUNK_PARKING] = WK_S(GONE) | WK_S(STALLED),
    [WK_CHUNK_EXPIRING] = WK_S(GONE) | WK_S(STALLED),
    [WK_CHUNK_CANCELLING] = WK_S(GONE) | WK_S(STALLED),
    [WK_CHUNK_ABANDONING] = WK_S(GONE) | WK_S(STALLED),
    [WK_CHUNK_YIELDING] = WK_S(GONE) | WK_S(STALLED),
    [WK_CHUNK_HANDING_BACK] = WK_S(GONE),
    [WK_CHUNK_GONE] = 0,
};

const char *wk_lifecycle_state_name(wk_chunk_state state)
{
    return wk_lifecycle_states[state];
}

bool wk_lifecycle_may(wk_chunk_state from, wk_chunk_state to)
{
    return (wk_lifecycle_next[from] & (1u << to)) != 0;
}

void wk_lifecycle_set(wk_chunk *c, wk_chunk_state to, const char *why)
{
    if (!wk_lifecycle_may(c->state, to))
        hr_log_error("chunk_state_unexpected",
                     "task=%" PRId64 " seq=%" PRId64 " from=%s to=%s why=%s", c->msg.task,
                     c->msg.seq, wk_lifecycle_states[c->state], wk_lifecycle_states[to], why);
    hr_log_debug("chunk_state", "task=%" PRId64 " seq=%" PRId64 " from=%s to=%s why=%s",
                 c->msg.task, c->msg.seq, wk_lifecycle_states[c->state], wk_lifecycle_states[to],
                 why);
    c->state = to;
    c->why = why;
    /* The pushes see it: a held or ending chunk starts no request. */
    c->held = to >= WK_CHUNK_HELD_PAUSE;
}

void wk_lifecycle_init(wk_lifecycle *l, const hr_config *cfg, const char *owner,
                       const wk_lifecycle_hooks *hooks)
{
    l->cfg = cfg;
    l->owner = owner;
    l->hooks = *hooks;
    TAILQ_INIT(&l->chunks);
}

/* ---- offsets ------------------------------------------------------------ */

/* The message at PARTITION/OFFSET needs nothing more. */
void wk_lifecycle_settle_offset(wk_lifecycle *l, int32_t partition, int64_t offset)
{
    int64_t store;

    if (wk_offsets_finish(l->offsets, partition, offset, &store) == 1)
        l->hooks.store_offset(l->hooks.privdata, partition, store);
}

/* ---- the list ------------------------------------------------------------ */

/* Hands the stats hash counters C's last script call answered to the
 * reporter (absolute values: see wk_reporter.h). */
void wk_lifecycle_report_counters(wk_lifecycle *l, wk_chunk *c)
{
    wk_event ev = {.kind = WK_EVENT_COUNTERS, .task = c->msg.task, .shard = wk_chunk_row(c)};

    if (!c->counters_new)
        return;
    ev.u.counters.sent = c->counters.sent;
    ev.u.counters.failed = c->counters.failed;
    ev.u.counters.throttled = c->counters.throttled;
    ev.u.counters.retried = c->counters.retried;
    ev.u.counters.unregistered = c->counters.unregistered;
    ev.u.counters.opted_out = c->counters.opted_out;
    ev.u.counters.suppressed = c->counters.suppressed;
    wk_reporter_push(l->reporter, &ev);
    c->counters_new = false;
}

static void wk_lifecycle_free(wk_lifecycle *l, wk_chunk *c)
{
    wk_task_put(l->tasks, c->task);
    wk_chunk_free(c);
}

/* A job of C answered: true when the lifecycle was done with C already
 * (the answer is dropped; C is freed once no job points at it). */
bool wk_lifecycle_gone(wk_lifecycle *l, wk_chunk *c)
{
    if (c->state != WK_CHUNK_GONE)
        return false;
    if (c->jobs == 0)
        wk_lifecycle_free(l, c);
    return true;
}

/* Takes C off the list: no request of it runs any more, no job of it is
 * waited for (those in flight keep it allocated). */
void wk_lifecycle_unlink(wk_lifecycle *l, wk_chunk *c, const char *why)
{
    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_cancel(l->sender, &c->pushes[i]);
    TAILQ_REMOVE(&l->chunks, c, link);
    l->nchunks--;
    wk_lifecycle_set(c, WK_CHUNK_GONE, why);
    if (c->jobs == 0)
        wk_lifecycle_free(l, c);
    l->hooks.wake(l->hooks.privdata);
}

size_t wk_lifecycle_count(const wk_lifecycle *l, int32_t partition)
{
    const wk_chunk *c;
    size_t n = 0;

    TAILQ_FOREACH(c, &l->chunks, link)
    if (c->partition == partition)
        n++;
    return n;
}

void wk_lifecycle_release(wk_lifecycle *l, bool force)
{
    if (force)
        wk_gate_force(&l->gate, l->rd);
    else if (l->gate.waiting > 0)
        wk_gate_release(&l->gate, l->rd);
}

void wk_lifecycle_hold(wk_lifecycle *l, wk_chunk *c)
{
    for (size_t i = 0; i < c->npushes; i++) {
        wk_push *push = &c->pushes[i];

        if (push->state == WK_PUSH_READY || push->state == WK_PUSH_DELAYED) {
            wk_sender_cancel(l->sender, push);
            c->open--;
        }
    }
    /* Their slices' verdicts are only counted when they come; the members
     * not read yet get no push (wk_lifecycle_read: the set keeps them for
     * the ending). */
    c->open -= c->unchecked + c->unread;
    c->unchecked = c->unread = 0;
}
