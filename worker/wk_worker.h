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
 * Module graph (who calls whom; an arrow never points back up, and the
 * only calls upward are the hooks and callbacks named on the right):
 *
 *   main
 *    -> wk_worker      Kafka consumer, pause/resume, revoke, loop, shutdown
 *        -> wk_inbox       received messages waiting for a chunk slot
 *        -> wk_lifecycle   a chunk from intake to offset store
 *                          (up: store_offset and wake hooks to wk_worker)
 *                          (wk_lifecycle_timers: renewal, control, watchdog)
 *            -> wk_control     control-key reads, lease renewals (jobs)
 *                -> wk_chunk
 *            -> wk_chunk       one chunk's Redis side (jobs: open, throttle
 *                              slices, flushes, end; up: the chunk hooks to
 *                              wk_lifecycle)
 *            -> wk_sender      HTTP engine: pushes in, outcomes, retries
 *                              (up: the done callback to wk_lifecycle)
 *                -> wk_chan        a channel's queues, caps, tokens (grants
 *                                  as jobs), slow-down (key read and written
 *                                  as jobs)
 *                -> wk_sender_uv   curl multi on the libuv loop
 *                -> wk_xfer        one request: build, classify
 *                -> wk_retry       backoff, AIMD cap, delay heap
 *            -> wk_reporter    MySQL writer thread (events in, nothing back)
 *            -> wk_offsets     per-partition contiguous completion
 *            -> wk_task        task cache, templates, rendering
 *        -> wk_metrics     Prometheus families, /metrics, /readyz
 *   wk_redis (the Redis thread: jobs in, their DONE back on the loop) is
 *   used by wk_chunk, wk_control, wk_chan and wk_lifecycle (the prune), and
 *   created and closed by wk_worker; wk_clock is a leaf every module may
 *   read.
 *
 * Threads and lock order (the one place they are written down):
 *   loop      the libuv loop (wk_worker_run): the Kafka consumer and its
 *             rebalance callback, the inbox, every chunk and push, the
 *             sender (curl multi), the task cache, the offsets, the MySQL
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
 *   reporter  wk_reporter: its own MySQL connection; events in through its
 *             ring, nothing back.
 *   httpd     libmicrohttpd's threads for /metrics, /healthz, /readyz: read
 *             the metric registry and wk_metrics' atomics only.
 *   librdkafka's own threads, reached only through its API.
 * Locks: wk_redis's mutex (its two job lists) is taken alone, and nothing
 * is called while it is held.  The others: hr_metrics' registry mutex
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
