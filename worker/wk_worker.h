/* wk_worker: the herald-worker daemon — one libuv loop thread that drives
 * the Kafka consumer, the chunks, the sender and the timers, plus the Redis
 * thread (wk_redis) that makes every Redis call and the reporter thread
 * (wk_reporter) for MySQL writes.
 *
 * Flow per chunk message (DESIGN.md flows 6-8, docs/architecture.md
 * "Runtime contract"): decode strictly (bad → count, skip); load the task
 * (unknown → count, skip); read the control key (pause → park, cancel →
 * cancel, below); take the lease (foreign → skip); read the set (empty →
 * close it idempotently); when the task throttles, check every member and
 * acknowledge the blocked ones as throttled; push the rest; acknowledge in
 * batches; close with chunk_done.lua; then store the offset — only once
 * every earlier message of the partition is finished too (wk_offsets).
 * "Skip" always means: the offset counts as finished.
 *
 * Control: the control keys of tasks with open chunks are re-read every
 * 250 ms (one pipelined GET per task).  pause/cancel stops starting
 * requests for the task's chunks; running ones finish (no retries), their
 * acks are written, then the chunk is parked (lease released, recipients
 * and pending kept, push_chunk 'parked') or cancelled (drop_set.lua,
 * counted as cancelled, push_chunk 'cancelled'); the offset is stored.
 * Expiry: past its task's expire_at a chunk is halted the same way (at
 * intake, by the sender before it starts a push or schedules a retry, and
 * by the 250 ms timer) and what is left counts expired (drop_set.lua,
 * push_chunk 'expired').
 * A lease found lost at renewal abandons its chunk (offset stored: the new
 * holder does the rest).  Metrics and /readyz: wk_metrics.
 *
 * Received messages wait in the inbox (wk_inbox) until fewer than
 * worker.max_chunks_in_flight chunks are open; only a full inbox pauses
 * the assignment, and the consumer is still polled so that the member
 * stays in the group (max.poll.interval.ms) and rebalances are served.
 * A revoke is drained: the revoked partitions' chunks start no new
 * request, the running ones finish and are acknowledged, then the chunks
 * are abandoned (acks flushed, lease released; the rest stays in the set
 * for the next owner) and the partitions unassigned — bounded, after which
 * what still runs is aborted.  A chunk whose lease another process holds
 * is retried until lease_ms has passed (a killed holder's lease runs out)
 * before it is skipped.  SIGTERM/SIGINT: stop fetching and starting requests, wait for
 * running requests (at most worker.shutdown_grace_ms), abandon what is
 * left, commit offsets, close the consumer, flush the reporter.
 *
 * Modules, bottom to top: an arrow (an include, a call) only ever points
 * down a layer or more; what calls up does so through a hook or a callback
 * set once (the lifecycle's store_offset and wake hooks to the worker, the
 * chunk's job hooks to the lifecycle, the sender's done and prune
 * callbacks, the Redis thread's DONE).
 *
 * Layers (checked by scripts/check-graph):
 *   wk_offsets wk_inbox wk_metrics wk_redis wk_task wk_event
 *   send/: the send wing (worker/send/wk_sender.h), which may call the line above
 *   wk_gate: the events gate (its jobs go to wk_redis)
 *   wk_task_cache: the tasks by id, reference counted
 *   wk_deliveries wk_chunkrows wk_tally wk_chunk wk_prune
 *   wk_reporter wk_chunk_acks wk_control
 *   wk_consent: an open's recipients read, their consent carried out
 *   wk_chunk_open wk_chunk_check wk_chunk_end
 *   wk_lifecycle
 *   wk_lifecycle_stall
 *   wk_lifecycle_end
 *   wk_lifecycle_push
 *   wk_lifecycle_open
 *   wk_lifecycle_timers
 *   wk_revoke: a revoke drained before the partitions go
 *   wk_worker
 *
 * What each owns:
 *   wk_worker       Kafka consumer, inbox, pause/resume, the loop's handles
 *                   and timers, shutdown
 *   wk_revoke       a revoke's partitions drained, then unassigned
 *   wk_lifecycle*   a chunk from intake to offset store; the chunk's state
 *                   (wk_chunk_state) changes only in wk_lifecycle.c
 *   wk_chunk*       one chunk and its Redis jobs (open, throttle slices,
 *                   acknowledgements, end), which report and decide nothing
 *   wk_control      control-key reads and lease renewals (batched jobs)
 *   wk_reporter     the MySQL writer thread: the ring, the transaction, the
 *                   events' hand-off; push_delivery rows are wk_deliveries',
 *                   push_chunk rows wk_chunkrows', the counters, series and
 *                   task failures wk_tally's
 *   wk_prune        a dead address out of both stores
 *   wk_redis        the Redis thread (jobs in, DONE back on the loop)
 *   wk_task         a task's templates and rendering
 *   wk_task_cache   the tasks by id (loaded, reused, prefetched, negative)
 *   wk_gate         chunk jobs held until their recipients' events are in
 *                   Kafka (events.enabled)
 *   wk_offsets, wk_inbox, wk_metrics, wk_event: leaves
 * The send wing, worker/send/ (its own layers in send/wk_sender.h), sits
 * between the first two layers: it uses wk_task, wk_redis and wk_metrics,
 * and wk_chunk and wk_prune (wk_push.h) and the lifecycle and the worker
 * (wk_sender.h) use it.
 *
 * Threads and lock order (the one place they are written down):
 *   loop      the libuv loop (wk_worker_run): the Kafka consumer and its
 *             rebalance callback, the inbox, every chunk and push, the
 *             sender (curl multi, HTTP/2 engines), the task cache, the offsets, the MySQL
 *             connection of task loads and prunes, the timers.  It never
 *             calls Redis: it submits jobs to the Redis thread and acts on
 *             their DONE, which runs on the loop (uv_async).
 *   redis     wk_redis: owns the hr_redis connection and a pipeline; runs
 *             the jobs in submission order.  It reads what a job points at
 *             that does not change while the job is in flight (a chunk's
 *             keys, members, pushes' uids and user hashes, a task's row and
 *             rule) and writes only the job; the loop moves results into
 *             the chunk in DONE.  A chunk stays allocated while a job points
 *             at it (wk_chunk.jobs).
 *   reporter  wk_reporter (and the writers it calls, wk_deliveries and
 *             wk_chunkrows): its own MySQL connection; events in through
 *             its ring, nothing back but the events' watermark (an atomic).
 *   the events publisher's thread (hr_evpub, polling its producer):
 *             delivery reports; calls the reporter's confirmed hook, which
 *             stores the watermark into the gate and wakes the loop
 *             (uv_async_send under the worker's ev_mu, so never after the
 *             handle closed).
 *   httpd     libmicrohttpd's threads for /metrics, /healthz, /readyz: read
 *             the metric registry and wk_metrics' atomics only.
 *   librdkafka's own threads, reached only through its API.
 * Locks: wk_redis's mutex (its two job lists) is taken alone, and nothing
 * is called while it is held; so are the reporter's ev_mu and the worker's
 * ev_mu (the confirmed hook takes the latter after releasing the former).  The others: hr_metrics' registry mutex
 * before a family's (common/hr_metrics.c), and a family's before the
 * reporter's mutex (the queue-depth gauge's callback reads the ring while
 * /metrics renders); the loop takes the reporter's alone. */
#ifndef WK_WORKER_H
#define WK_WORKER_H

#include <stdint.h>

#include "hr_config.h"
#include "wk_lifecycle.h"

typedef struct wk_worker wk_worker;

/* Counters of skipped input, for logs and tests (kept by the lifecycle). */
typedef wk_lifecycle_stats wk_worker_stats;

/* Connects to Redis, MySQL and Kafka and starts the reporter.  CFG must
 * outlive the worker. */
int wk_worker_new(const hr_config *cfg, wk_worker **out, char *errstr, size_t errlen);
/* Runs until a signal asks it to stop and the drain is done; 0, or -1 with
 * ERRSTR when Kafka cannot be set up. */
int wk_worker_run(wk_worker *w, char *errstr, size_t errlen);
void wk_worker_get_stats(const wk_worker *w, wk_worker_stats *out);
void wk_worker_free(wk_worker *w);

#endif
