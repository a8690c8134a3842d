/* wk_gate: the events gate (docs/architecture.md "Events").  With events
 * on, a recipient's acknowledgement may reach Redis only once its event is
 * in Kafka: otherwise a worker killed between the two would leave a
 * recipient acknowledged (never pushed again) whose event is lost.  So a
 * chunk's Redis jobs wait here (wk_chunk_submit) while an event of its
 * recipients, numbered by the reporter (wk_reporter_push), is not yet
 * confirmed; the gate holds the reporter's watermark, which the worker
 * stores when the reporter's confirmed hook fires, and then lets the
 * waiting jobs go to the Redis thread (wk_gate_release).
 *
 * The waiting jobs form one FIFO.  A chunk's jobs keep their order: a job
 * of a chunk that has one waiting waits too, and a chunk's event numbers
 * only grow, so whenever a job is let through every earlier one of its
 * chunk is too.  A waiting job counts in its chunk's jobs, so the chunk
 * stays allocated; one whose chunk is gone meanwhile is still let through
 * (its acknowledgements are written) and its answer dropped as usual.
 *
 * Forced open (a stop's or a revoke's grace ran out: the worker cannot
 * wait for Kafka any longer) it lets everything through, and the jobs let
 * through before their events were confirmed are counted
 * (herald_events_gate_forced_total): their events are still published,
 * but a crash before Kafka confirms them would lose them.
 *
 * Threads: CONFIRMED is written on the events publisher's thread and read on the
 * loop; the rest is the loop's. */
#ifndef WK_GATE_H
#define WK_GATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_metrics.h"
#include "wk_redis.h"

typedef struct wk_gate_node wk_gate_node;

typedef struct wk_gate {
    _Atomic uint64_t confirmed; /* every event numbered up to it is in Kafka */
    bool forced;
    hr_metrics_child *forced_jobs; /* herald_events_gate_forced_total */
    wk_gate_node *head, *tail;     /* the waiting jobs, oldest first */
    size_t waiting;
} wk_gate;

/* Whether a job that follows event number UPTO may go to Redis (G NULL:
 * events are off, no gate). */
static inline bool wk_gate_open(const wk_gate *g, uint64_t upto)
{
    return g == NULL || upto == 0 || g->forced || atomic_load(&g->confirmed) >= upto;
}

/* Queues JOB, which follows event number UPTO; *HELD counts the jobs of
 * its chunk waiting here (raised now, lowered when it goes).  0, or -1
 * when out of memory (JOB is then not queued). */
int wk_gate_hold(wk_gate *g, uint64_t upto, wk_redis_job *job, unsigned *held);
/* Hands every waiting job the gate lets through to RD, in order; a job
 * the Redis thread refuses (its queue full) stops the walk and waits for
 * the next call. */
void wk_gate_release(wk_gate *g, wk_redis *rd);
/* Opens the gate for good and releases everything. */
void wk_gate_force(wk_gate *g, wk_redis *rd);
/* Frees what still waits (the Redis thread is gone: nothing can run it). */
void wk_gate_clear(wk_gate *g);

#endif
