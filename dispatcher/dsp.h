/* dsp: herald-dispatcher, the daemon.  struct dsp holds what every module
 * shares (the configuration, the owner id, the loop, the stop flag, the
 * loop thread's connections, the backends' health, the metric handles) and
 * one pointer per module to that module's own state, a struct declared and
 * written in the module's file alone (dsp_scan.c owns d->scan, ...).  The
 * module's header says what the others may ask of it.
 *
 * Threads (the one place where they are written down):
 *   - the loop thread runs the libuv loop: timer pops and their claims
 *     (dsp_timer.c), shard claims (dsp_shard.c), the chunker (dsp_chunk.c),
 *     Kafka delivery reports (rd_kafka_poll is only called here, through
 *     dsp_kafka_poll), the push_chunk rows (dsp_report.c), lease renewal
 *     (dsp_owned.c), shutdown (dispatcher.c).  It owns d->loop_conn, the
 *     owned-task table (d->owned), the report queue (d->report) and the
 *     reconciliation queue (d->rc).
 *   - up to DSP_RECONCILE_JOBS reconciliation jobs run on libuv's thread
 *     pool (dsp_reconcile.c), each with its own connections: claimed
 *     tasks' sets are made complete before their first chunk.
 *   - one background job at a time runs on libuv's thread pool (dsp_jobs.c):
 *     scanner + prepare (dsp_scan.c), DB poller (dsp_poll.c), sweeper
 *     (dsp_sweep.c), control transitions (dsp_control.c), the address sync
 *     (dsp_mirror.c; the reconciliation runs them too), the delivery log's
 *     partitions (dsp_dlog.c, under a lease in MySQL).  It owns the job's
 *     connections (d->jobs), d->scan (its memory of what it put into the
 *     timer) and d->sweep (the cursors), and fills the job's claimed
 *     tasks, which the loop thread takes over in the job's after-work
 *     callback (libuv orders the two, so no lock is needed).
 *   - both produce to Kafka (rd_kafka_producev is thread-safe).
 *   - the health flags (down, seen) are shared and guarded by health_mu;
 *     d->stopping is atomic; d->mirror's last sync time is atomic.
 *   - the HTTP API (dsp_api*.c) runs on libmicrohttpd's pool threads.  It
 *     never touches the loop's or the job's connections: it has its own
 *     pool (guarded by its pool_mu, one connection pair per request in
 *     flight).  It reads the health flags under health_mu.  Its auth hook
 *     reads the callers' identities (dsp_auth.c: the API tokens' cache and
 *     its connection under tokens_mu, the JWK Set under jwks_mu).
 *   - one thread runs the API's jobs (dsp_api_job.c: recover), in the
 *     order queued, with connections of its own; the request threads only
 *     queue them (under its mu).
 *   - metric handles (d->met) are looked up at start-up and updated
 *     lock-free from any thread.
 *   - the events publisher (d->events, hr_evpub) has its own thread for
 *     Kafka's delivery reports; the API's threads, the background job
 *     and the loop publish (thread-safe), the API's wait for them.
 *
 * Modules call only modules of lower layers, listed below one line per
 * layer, bottom first (the modules of a line call none of each other;
 * every one may use common/'s hr_*); where a lower module must reach a
 * higher one it is given a hook (dsp_kafka's delivery reports, dsp_owned's
 * lease kinds).
 * Layers (checked by scripts/check-graph):
 *   dsp_seams dsp_metrics dsp_kafka dsp_console dsp_api_parse dsp_auth
 *   dsp
 *   dsp_conn dsp_api_job dsp_events
 *   dsp_store dsp_mirror dsp_pace dsp_drop dsp_report dsp_dlog dsp_engage dsp_series
 *   dsp_owned
 *   dsp_wait dsp_ahead dsp_shard dsp_ab
 *   dsp_reconcile
 *   dsp_timer dsp_chunk dsp_sweep
 *   dsp_control dsp_scan
 *   dsp_poll
 *   dsp_jobs dsp_api
 *   dsp_api_view
 *   dsp_api_task dsp_api_subs dsp_api_addr dsp_api_admin dsp_api_track dsp_api_stats dsp_api_hooks
 *   dsp_api_series dsp_api_series_subs
 *   dsp_api_users dsp_unsub
 *   dsp_api_ops
 *   dsp_api_routes
 *   dispatcher
 *
 * Blocking MySQL work on the loop thread is limited to statements of
 * bounded size (a timer pop's claims, at most DSP_TIMER_POP_MAX; a tick's
 * chunk rows, at most DSP_REPORTS_PER_TICK; renewals); the scans whose
 * cost grows with the number of tasks or subscribers run in the background
 * job. */
#ifndef DSP_H
#define DSP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "hr_config.h"
#include "hr_mysql.h"
#include "hr_redis.h"

#include "dsp_metrics.h"
#include "dsp_seams.h"

/* The prepare lock a sync holds on a task's set (the scanner's prepare and
 * the owner's reconciliation, refill vs first chunk). */
#define DSP_PREP_LOCK_MS 120000

/* A thread's own connections, made lazily and retried with backoff
 * (dsp_conn.c). */
typedef struct dsp_conn {
    hr_mysql *m;
    hr_redis *r;
    int64_t retry_at_ms; /* no backend work before this after a failure */
    int backoff_ms;
} dsp_conn;

typedef struct dsp {
    /* the daemon (dispatcher.c): the loop, its periodic timers and signals */
    const hr_config *cfg;
    char owner[192]; /* "<instance>/<pid>" */
    uv_loop_t *loop;
    uv_timer_t t_scan, t_poll, t_sweep, t_handback, t_lease, t_tick, t_shard;
    uv_signal_t sig_term, sig_int;
    atomic_bool stopping;
    bool finished;

    /* the backends' health (dsp_conn.c), guarded by health_mu */
    pthread_mutex_t health_mu;
    bool down[DSP__BACKENDS];
    bool seen[DSP__BACKENDS]; /* worked at least once (readiness) */

    dsp_metrics met;    /* dsp_metrics.c */
    dsp_conn loop_conn; /* the loop thread's connections (dsp_conn.c) */

    /* the modules' own state, each written only by its file */
    struct dsp_kafka *kafka;         /* dsp_kafka.c: the producer */
    struct dsp_owned *owned;         /* dsp_owned.c: the owned tasks */
    struct dsp_report_queue *report; /* dsp_report.c: confirmed publishes */
    struct dsp_mirror *mirror;       /* dsp_mirror.c: the last mirror sync */
    struct dsp_reconcile *rc;        /* dsp_reconcile.c: queue and jobs */
    struct dsp_timer *timer;         /* dsp_timer.c: the pop's wake-up */
    struct dsp_scan *scan;           /* dsp_scan.c: the scanner's memory */
    struct dsp_sweep *sweep;         /* dsp_sweep.c: the sweeper's cursors */
    struct dsp_jobs *jobs;           /* dsp_jobs.c: the background job */
    struct dsp_dlog *dlog;           /* dsp_dlog.c: the delivery log's upkeep */
    struct dsp_series *series;       /* dsp_series.c: series' occurrences */
    struct dsp_api *api;             /* dsp_api.c: the HTTP server */
    struct dsp_events *events;       /* dsp_events.c: the events publisher, NULL when off */
} dsp;

#endif
