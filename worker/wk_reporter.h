/* wk_reporter: the worker's MySQL writer thread.
 *
 * The loop thread never talks to MySQL for writes.  Per-recipient outcomes
 * go into a bounded ring (capacity worker.reporter_queue, mutex + condition
 * variables); counters are kept per task in a small table and
 * chunk events appended to a list, both beside the ring, so they never wait
 * for room and are never dropped.  A reporter thread with its own hr_mysql
 * connection drains everything every 200 ms or when worker.reporter_batch
 * outcomes wait, in one transaction: outcomes become multi-row INSERTs into
 * push_delivery (when worker.delivery_log is on; a full batch in INSERTs
 * of reporter_batch rows, at most 8,191 for MariaDB's 65,535 placeholders
 * of a prepared statement, a part batch in INSERTs of the powers of two of
 * its size, so at most 15 distinct statements are prepared), counters one UPDATE
 * push_task per task (sent, failed, throttled, retried, unregistered are the stats hash's
 * absolute values, newest per task and shard — a sharded task's raise its shard's
 * push_task_shard row, then push_task the rows' sum — written with GREATEST so a report lost
 * with a killed worker is made good by the next one and a late or replayed
 * one never lowers or doubles a counter; cancelled too is the stats hash's
 * counter, as drop_set.lua answers it, the largest seen, since the
 * dispatcher's cancel writes the same counter; expired likewise), chunk events set push_chunk
 * rows' state (done, parked, cancelled, expired — never over 'done') and, for done, when the chunk was
 * the task's last pending one and its subs set is empty, move a
 * 'dispatched' task to 'done' (after the counters).  Nothing leaves before
 * its transaction committed; a failed one waits an exponential backoff
 * (100 ms .. 5 s) before the retry, logged once per state change.  A row
 * MySQL refuses for its data (not a connection error) is retried alone and
 * then dropped (logged, herald_reporter_dropped_total{reason="rejected"}).
 * When the ring stays full for 20 ms (MySQL slow or down) an outcome is
 * dropped (herald_reporter_dropped_total{reason="queue_full"}): the
 * delivery log is optional, and the loop thread must not stall.
 * wk_reporter_stop() writes everything queued before it returns.
 *
 * Events (events.enabled; docs/architecture.md "Events"): every outcome is
 * also an event of the events topic, published from this thread beside the
 * delivery rows, never per push on the loop: the outcome goes into a list
 * of its own (never dropped, unlike the ring), which the thread hands to
 * the publisher (hr_evpub) every round — at once when WK_REPORTER_EVENTS
 * wait, else after events.flush_ms — whether MySQL answers or not (a
 * MySQL backoff delays the delivery rows only).  wk_reporter_push numbers
 * each event (1, 2, ...); wk_reporter_events_confirmed says up to which
 * number Kafka confirmed them all (acks=all), and the confirmed hook tells
 * the worker when that moved, on the publisher's thread.  The worker holds a
 * chunk's acknowledgements until its events are confirmed (wk_chunk.h,
 * the gate), so a recipient acknowledged in Redis has its event in Kafka:
 * a killed worker loses no event, and repeats (with the same event id)
 * only those of the recipients it pushes again.  The list needs no cap:
 * it holds the events of recipients not yet acknowledged, at most the
 * open chunks' members.
 *
 * A chunk end can come before its push_chunk row (the dispatcher writes
 * the rows in batches after Kafka confirmed the publishes): wk_chunkrows
 * keeps such an end and writes it again in every later flush until the row
 * appears, bounded by ROW_WAIT (wk_reporter_start's row_wait_ms,
 * WK_REPORTER_ROW_WAIT_MS in the worker) and WK_REPORTER_ROW_WAIT_MAX
 * ends.  At a stop they are written again for at most 2 s more, then given
 * up.  The outcomes' INSERTs are wk_deliveries'.
 *
 * Thread hand-off: the loop thread only calls wk_reporter_push(); the ring's
 * head and count, the delta table and the chunk list are read and written
 * under the mutex; the writer takes the table and the list whole, and the
 * ring slots [head, head+n) it is writing are not touched by the pusher
 * until it advances head (back to slot 0 when the ring is empty, so the
 * pages it touches follow the largest backlog, not the pushes made). */
#ifndef WK_REPORTER_H
#define WK_REPORTER_H

#include <stdint.h>

#include "hr_config.h"
#include "wk_chunkrows.h"
#include "wk_event.h"
#include "wk_metrics.h"

typedef struct wk_reporter wk_reporter;

/* Events waiting that wake the thread at once rather than after
 * events.flush_ms. */
#define WK_REPORTER_EVENTS 256

typedef struct wk_reporter_hooks {
    void *ctx;
    /* wk_reporter_events_confirmed moved to UPTO; on the publisher's thread
     * (or the reporter's), must not block (the worker wakes its loop). */
    void (*confirmed)(void *ctx, uint64_t upto);
} wk_reporter_hooks;

/* How long a chunk end waits for its push_chunk row, and how many ends wait
 * at most (see above). */
#define WK_REPORTER_ROW_WAIT_MS (5 * 60 * 1000)
#define WK_REPORTER_ROW_WAIT_MAX WK_CHUNKROWS_WAIT_MAX

/* Starts the thread, and the events publisher when events.enabled.  OWNER
 * (copied) goes into push_chunk.worker; a chunk end whose row is missing is
 * written again for ROW_WAIT_MS.  MET (which must outlive the reporter)
 * gets the flush time, MySQL errors and health, the queue depth and the
 * events' counters (gauge callbacks, so stop the metrics server before the
 * reporter).  HOOKS is copied (NULL: none). */
int wk_reporter_start(const hr_config *cfg, const char *owner, int64_t row_wait_ms, wk_metrics *met,
                      const wk_reporter_hooks *hooks, wk_reporter **out, char *errstr,
                      size_t errlen);

/* Queues a copy of EV; an outcome's push_delivery row waits at most 20 ms
 * for ring room and is dropped (counted) after that.  Never blocks longer.
 * An outcome's event number when events are on (else 0). */
uint64_t wk_reporter_push(wk_reporter *rp, const wk_event *ev);

/* Every event numbered up to this is confirmed by Kafka (or lost, and
 * counted); any thread. */
uint64_t wk_reporter_events_confirmed(wk_reporter *rp);

/* Marks TASK 'failed' with last_error WHY (copied) when it is still
 * 'dispatched': a task this worker can never push (unknown channel, bad
 * template or payload).  Never blocks. */
void wk_reporter_fail_task(wk_reporter *rp, int64_t task, const char *why);

/* Writes everything queued (giving up after a long MySQL outage, which is
 * logged with the number of events lost), joins the thread and frees.
 * Accepts NULL. */
void wk_reporter_stop(wk_reporter *rp);

#endif
