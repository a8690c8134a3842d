/* dispatcher: herald-dispatcher's event loop and lifecycle.
 *
 * dsp_run sets up the producer and the libuv handles and runs the loop:
 *   t_scan  (scan_interval_ms)   -> background scan + prepare
 *   t_poll  (poller_interval_ms) -> background DB poller
 *   t_sweep (sweep_interval_ms)  -> background sweeper
 *   t_handback (DSP_HANDBACK_MS) -> background: chunks workers handed back
 *   d->timer (the next due time, timer_interval_ms at most; dsp_timer.c)
 *                                -> timer pop + claims
 *   t_lease (lease_s / 3)        -> lease renewal (tasks, then claimed shards)
 *   t_shard (DSP_SHARD_POLL_MS; at once when a shard ended)
 *                                -> claims a shard of a sharded task
 *   t_tick  (DSP_TICK_MS; 1 ms after a tick that moved a chunk)
 *                                -> delivery reports, chunk rows, chunking
 * Each module's state is made here first (dsp_owned_new, ...) and freed
 * after the loop ended.  The producer (dsp_kafka.c) hands its delivery
 * reports to the chunker (dsp_chunk_delivered) and a lost broker to the
 * health.  The HTTP server (dsp_api.c, its table dsp_api_routes.c) runs
 * from start to exit on its own threads;
 * without API tokens (and without api.insecure) the dispatcher refuses to
 * start (exit 2).  SIGTERM/SIGINT stop claiming at once; when the background job in flight
 * has returned, the producer is flushed (bounded), the reports written,
 * the leases released (lease_until = now, so another dispatcher takes
 * over without waiting) and the loop ends.
 *
 * A build with -Dtest_seams=true also reads the test seams' environment
 * (dsp_seams.h) and says so in dispatcher_started. */
#include "dispatcher.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsp.h"
#include "dsp_dlog.h"
#include "dsp_series.h"
#include "dsp_mirror.h"
#include "dsp_api.h"
#include "dsp_api_routes.h"
#include "dsp_chunk.h"
#include "dsp_conn.h"
#include "dsp_events.h"
#include "dsp_jobs.h"
#include "dsp_kafka.h"
#include "dsp_owned.h"
#include "dsp_reconcile.h"
#include "dsp_report.h"
#include "dsp_scan.h"
#include "dsp_shard.h"
#include "dsp_sweep.h"
#include "dsp_timer.h"
#include "hr_log.h"

#define DSP_TICK_MS 10
#define DSP_SHARD_POLL_MS 250 /* look for a claimable shard (dsp_shard.c) */
/* The hand-back set's reader (dsp_sweep_handbacks): a chunk a worker gave
 * up is published again within this (issue 34). */
#define DSP_HANDBACK_MS 1000
/* libuv's pool: DSP_RECONCILE_JOBS reconciliations, the background job and
 * a spare (dsp_reconcile.h). */
#define DSP_POOL_THREADS "8"
#define DSP_MALLOC_ARENAS 1 /* glibc malloc arenas (below) */

static void dsp_close_all(dsp *d);

static void dsp_on_scan(uv_timer_t *h)
{
    dsp_jobs_kick(h->data, DSP_JOBS_SCAN);
}

static void dsp_on_poll(uv_timer_t *h)
{
    dsp_jobs_kick(h->data, DSP_JOBS_POLL);
}

static void dsp_on_sweep(uv_timer_t *h)
{
    dsp_jobs_kick(h->data, DSP_JOBS_SWEEP);
}

static void dsp_on_handback(uv_timer_t *h)
{
    dsp_jobs_kick(h->data, DSP_JOBS_HANDBACK);
}

static void dsp_on_lease(uv_timer_t *h)
{
    dsp_owned_renew_tasks(h->data, dsp_jobs_busy(h->data));
    dsp_shard_renew(h->data);
}

static void dsp_on_shard(uv_timer_t *h)
{
    dsp_shard_poll(h->data);
}

static void dsp_on_tick(uv_timer_t *h)
{
    dsp *d = h->data;

    dsp_events_retry(d);
    if (dsp_chunk_tick(d)) {
        /* libuv re-armed the timer from the loop time before this tick, which
         * a chunk move (tens of ms) leaves stale, so the next tick would
         * still wait a whole DSP_TICK_MS with Redis idle.  A chunk moved:
         * tick again after 1 ms, which lets the loop serve its I/O and the
         * other timers in between. */
        uv_update_time(h->loop);
        uv_timer_start(h, dsp_on_tick, 1, DSP_TICK_MS);
    }
    /* Shutting down: finish once the background job has returned. */
    if (atomic_load(&d->stopping) && !dsp_jobs_busy(d) && !dsp_reconcile_busy(d) && !d->finished) {
        d->finished = true;
        dsp_chunk_release_all(d);
        dsp_close_all(d);
    }
}

static void dsp_on_signal(uv_signal_t *h, int signum)
{
    dsp *d = h->data;

    if (atomic_exchange(&d->stopping, true))
        return;
    hr_log_info("shutdown", "signal=%d tasks=%zu", signum, dsp_owned_count(d));
    uv_timer_stop(&d->t_scan);
    uv_timer_stop(&d->t_poll);
    uv_timer_stop(&d->t_sweep);
    uv_timer_stop(&d->t_handback);
    dsp_timer_stop(d);
    uv_timer_stop(&d->t_lease);
    uv_timer_stop(&d->t_shard);
}

static void dsp_close_all(dsp *d)
{
    uv_close((uv_handle_t *)&d->t_scan, NULL);
    uv_close((uv_handle_t *)&d->t_poll, NULL);
    uv_close((uv_handle_t *)&d->t_sweep, NULL);
    uv_close((uv_handle_t *)&d->t_handback, NULL);
    dsp_timer_close(d);
    uv_close((uv_handle_t *)&d->t_lease, NULL);
    uv_close((uv_handle_t *)&d->t_shard, NULL);
    uv_close((uv_handle_t *)&d->t_tick, NULL);
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
}

/* A lost broker is the Kafka backend down (dsp_kafka_hooks.down). */
static void dsp_on_kafka_down(void *ctx, const char *reason)
{
    dsp_health_fail(ctx, DSP_KAFKA, reason);
}

/* Every module's state, empty.  0, or -1 out of memory. */
static int dsp_modules_new(dsp *d)
{
    return dsp_owned_new(d) < 0 || dsp_report_new(d) < 0 || dsp_mirror_new(d) < 0 ||
                   dsp_reconcile_new(d) < 0 || dsp_scan_new(d) < 0 || dsp_sweep_new(d) < 0 ||
                   dsp_jobs_new(d) < 0 || dsp_timer_new(d) < 0 || dsp_dlog_new(d) < 0 ||
                   dsp_series_new(d) < 0
               ? -1
               : 0;
}

static void dsp_every(dsp *d, uv_timer_t *t, uv_timer_cb cb, uint64_t every_ms)
{
    uv_timer_init(d->loop, t);
    t->data = d;
    uv_timer_start(t, cb, every_ms, every_ms);
}

int dsp_run(const hr_config *cfg)
{
    dsp *d = calloc(1, sizeof *d);
    char err[512];
    int rc = 1;

    if (d == NULL) {
        hr_log_error("startup_failed", "error=out of memory");
        return 1;
    }
    d->cfg = cfg;
    snprintf(d->owner, sizeof d->owner, "%s/%ld", cfg->instance, (long)getpid());
    dsp_seams_init();
    /* Read by libuv when its pool starts (the first job, below). */
    setenv("UV_THREADPOOL_SIZE", DSP_POOL_THREADS, 0);
    /* One malloc arena, not glibc's one per thread up to 8 per core: the
     * pool's threads each kept an arena of freed pages, and the peak RSS
     * after a 1M campaign was 25.0 MiB, growing 13 % from 200k to 1M
     * (bench/run rss); with two arenas 17.1 MiB, with one 15.4 MiB, flat
     * (docs/performance.md; 10.4 MiB of it are the libraries' pages).  The
     * loop thread does the allocating work; the pool's jobs wait on round
     * trips, so sharing one arena cost no measurable dispatch rate.  An
     * operator's MALLOC_ARENA_MAX wins. */
    if (getenv("MALLOC_ARENA_MAX") == NULL)
        mallopt(M_ARENA_MAX, DSP_MALLOC_ARENAS);
    pthread_mutex_init(&d->health_mu, NULL);
    atomic_init(&d->stopping, false);
    d->loop = uv_default_loop();
    if (cfg->dispatcher.api.ntokens == 0 && !hr_config_jwt_on(cfg) &&
        !cfg->dispatcher.api.insecure) {
        fprintf(stderr,
                "%s: dispatcher.api.tokens is empty and dispatcher.api.jwt is off; configure "
                "at least one bootstrap admin token or a JWK Set, or set "
                "dispatcher.api.insecure: true (development only)\n",
                cfg->path);
        rc = 2;
        goto done;
    }
    if (dsp_modules_new(d) < 0) {
        snprintf(err, sizeof err, "out of memory");
        hr_log_error("startup_failed", "error=%s", err);
        goto done;
    }
    if (dsp_metrics_new(&d->met, err, sizeof err) < 0 ||
        dsp_kafka_new(cfg,
                      &(dsp_kafka_hooks){
                          .ctx = d, .delivered = dsp_chunk_delivered, .down = dsp_on_kafka_down},
                      &d->kafka, err, sizeof err) < 0 ||
        dsp_events_start(d, err, sizeof err) < 0 || dsp_api_routes_start(d, err, sizeof err) < 0) {
        hr_log_error("startup_failed", "error=%s", err);
        goto done;
    }

    dsp_every(d, &d->t_scan, dsp_on_scan, (uint64_t)cfg->dispatcher.scan_interval_ms);
    dsp_every(d, &d->t_poll, dsp_on_poll, (uint64_t)cfg->dispatcher.poller_interval_ms);
    dsp_every(d, &d->t_sweep, dsp_on_sweep, (uint64_t)cfg->dispatcher.sweep_interval_ms);
    dsp_every(d, &d->t_handback, dsp_on_handback, DSP_HANDBACK_MS);
    dsp_timer_start(d);
    dsp_every(d, &d->t_lease, dsp_on_lease, (uint64_t)cfg->dispatcher.lease_s * 1000 / 3);
    dsp_every(d, &d->t_tick, dsp_on_tick, DSP_TICK_MS);
    dsp_every(d, &d->t_shard, dsp_on_shard, DSP_SHARD_POLL_MS);
    uv_signal_init(d->loop, &d->sig_term);
    uv_signal_init(d->loop, &d->sig_int);
    d->sig_term.data = d->sig_int.data = d;
    uv_signal_start(&d->sig_term, dsp_on_signal, SIGTERM);
    uv_signal_start(&d->sig_int, dsp_on_signal, SIGINT);

    hr_log_info("dispatcher_started", "owner=%s topic=%s test_seams=%s test_task_topic=%s",
                d->owner, cfg->kafka.topic, DSP_SEAMS_ON ? "on" : "off",
                dsp_seams_topic() ? dsp_seams_topic() : "");
    dsp_jobs_kick(d, DSP_JOBS_SCAN | DSP_JOBS_POLL);
    uv_run(d->loop, UV_RUN_DEFAULT);
    uv_loop_close(d->loop);
    hr_log_info("dispatcher_stopped", "owner=%s", d->owner);
    rc = 0;
done:
    dsp_api_stop(d);
    dsp_events_stop(d);
    dsp_owned_free(d);
    dsp_report_free(d);
    dsp_jobs_free(d);
    dsp_scan_free(d);
    dsp_sweep_free(d);
    dsp_reconcile_free(d);
    dsp_mirror_free(d);
    dsp_timer_free(d);
    dsp_dlog_free(d);
    dsp_series_free(d);
    dsp_conn_close(&d->loop_conn);
    dsp_kafka_free(d->kafka);
    dsp_metrics_free(&d->met);
    pthread_mutex_destroy(&d->health_mu);
    free(d);
    return rc;
}
