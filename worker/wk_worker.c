/* wk_worker: the loop thread of herald-worker (see wk_worker.h).
 *
 * Handles on the loop: the Kafka queue's io-event pipe (uv_poll), a kick
 * timer that polls the consumer queue as a fallback and after fetching was
 * paused, an idle handle that runs deferred work outside callbacks (fetch
 * more, finish the shutdown), the lease renewal timer, the shutdown grace
 * timer and the two signals.  The sender adds its own.
 *
 * What happens to a message once started is the lifecycle's
 * (wk_lifecycle); this file consumes into the inbox (wk_inbox), starts
 * queued messages while chunk slots are free, pauses and resumes the
 * assignment when the inbox is full, drains revokes, stores the offsets
 * the lifecycle hands back through its hooks, and runs the shutdown.
 * Ownership: the worker owns the inbox, the connections, the task cache,
 * the offsets, the sender, the reporter and the metrics, and lends all
 * but the inbox to the lifecycle it embeds. */
#include "wk_worker.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "hr_kafka.h"
#include "hr_log.h"
#include "hr_mysql.h"
#include "hr_redis.h"
#include "wk_inbox.h"
#include "wk_lifecycle.h"
#include "wk_lifecycle_end.h"
#include "wk_lifecycle_open.h"
#include "wk_lifecycle_push.h"
#include "wk_lifecycle_timers.h"
#include "wk_metrics.h"
#include "wk_offsets.h"
#include "wk_prune.h"
#include "wk_redis.h"
#include "wk_reporter.h"
#include "wk_revoke.h"
#include "wk_sender.h"
#include "wk_task.h"
#include "wk_task_cache.h"

#define WK_WORKER_KICK_MS 250
#define WK_WORKER_CLOSE_TIMEOUT_MS 10000
/* The inbox's caps (wk_inbox.h): chunk messages are about 100 bytes, so
 * the count binds first (well under a MiB with the entries); the byte cap
 * bounds a topic that carries big messages. */
#define WK_WORKER_INBOX_MSGS 4096
#define WK_WORKER_INBOX_BYTES (4u << 20)

struct wk_worker {
    const hr_config *cfg;
    char owner[160];
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    uv_timer_t kick, renew, grace, ctl;
    uv_idle_t idle;
    uv_poll_t kpoll;
    int kpipe[2];
    bool handles_ready;
    rd_kafka_t *rk;
    rd_kafka_queue_t *kq;
    /* Holds the connections, the task cache, the offsets, the sender, the
     * reporter and the metrics: the worker creates and frees them there. */
    wk_lifecycle life;
    wk_prune prune; /* the sender's dead addresses (lends the lifecycle's connections) */
    bool stopping, finished;
    /* Messages received and not started yet (max_chunks_in_flight open). */
    wk_inbox *inbox;
    bool paused;      /* the assignment is paused: the inbox is full */
    wk_revoke revoke; /* a revoke being drained */
    /* The events gate moved (the reporter's confirmed hook, on librdkafka's
     * thread): the loop releases the waiting jobs.  ev_mu orders the hook's
     * send against the handle's close. */
    uv_async_t ev_wake;
    pthread_mutex_t ev_mu;
    bool ev_wake_open;
};

static void wk_worker_fetch(wk_worker *w);

/* ---- the events gate ----------------------------------------------------------- */

/* The reporter's confirmed hook (the publisher's thread): the watermark into
 * the gate, and the loop woken to release what it lets through. */
static void wk_worker_events_confirmed(void *ctx, uint64_t upto)
{
    wk_worker *w = ctx;

    atomic_store(&w->life.gate.confirmed, upto);
    pthread_mutex_lock(&w->ev_mu);
    if (w->ev_wake_open)
        uv_async_send(&w->ev_wake);
    pthread_mutex_unlock(&w->ev_mu);
}

static void wk_worker_ev_wake_cb(uv_async_t *h)
{
    wk_worker *w = h->data;

    wk_lifecycle_release(&w->life, false);
}

/* ---- offsets ------------------------------------------------------------ */

/* The lifecycle's store_offset hook. */
static void wk_worker_store(void *privdata, int32_t partition, int64_t offset)
{
    wk_worker *w = privdata;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_resp_err_t err;

    rd_kafka_topic_partition_list_add(l, w->cfg->kafka.topic, partition)->offset = offset;
    err = rd_kafka_offsets_store(w->rk, l);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        err = l->elems[0].err;
    /* __STATE: the partition was revoked meanwhile, which is expected. */
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__STATE)
        hr_log_warn("offset_store_failed", "partition=%" PRId32 " offset=%" PRId64 " error=%s",
                    partition, offset, rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(l);
}

static void wk_worker_soon(wk_worker *w);

/* The lifecycle's wake hook. */
static void wk_worker_wake(void *privdata)
{
    wk_worker_soon(privdata);
}

static void wk_worker_message(wk_worker *w, const rd_kafka_message_t *m)
{
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            hr_metrics_inc(w->life.met->backend_errors[WK_BACKEND_KAFKA]);
            hr_log_warn("kafka_error", "error=%s", rd_kafka_message_errstr(m));
        }
        return;
    }
    /* Fetched before the revoke paused it: the next owner consumes it. */
    if (wk_revoke_has(&w->revoke, m->partition))
        return;
    /* Out of memory: a later message's offset will be stored past this
     * one, so, like a chunk the lifecycle cannot allocate, it is pushed by
     * the sweeper's redelivery (redelivery_timeout_s). */
    if (wk_inbox_push(w->inbox, m->partition, m->offset, m->payload, m->len) != 0) {
        w->life.stats.errors++;
        hr_log_error("out_of_memory", "partition=%" PRId32 " offset=%" PRId64, m->partition,
                     m->offset);
    }
}

/* Starts queued messages, oldest first, while a chunk slot is free; the
 * task rows of the messages received since the last time are loaded
 * first, in one statement (wk_lifecycle_prefetch). */
static void wk_worker_start_queued(wk_worker *w)
{
    wk_inbox_msg m, fresh[WK_TASK_PREFETCH_MAX];
    size_t n;

    if (!w->stopping && w->life.nchunks < (size_t)w->cfg->worker.max_chunks_in_flight &&
        (n = wk_inbox_take_new(w->inbox, fresh, WK_TASK_PREFETCH_MAX)) > 0)
        wk_lifecycle_prefetch(&w->life, fresh, n);
    while (!w->stopping && w->life.nchunks < (size_t)w->cfg->worker.max_chunks_in_flight &&
           wk_inbox_peek(w->inbox, &m)) {
        wk_lifecycle_intake(&w->life, m.partition, m.offset, m.payload, m.len);
        wk_inbox_pop(w->inbox);
    }
}

/* Pauses (PAUSE) or resumes every assigned partition.  librdkafka drops
 * what it prefetched for a paused partition and fetches it again from the
 * consumed position on resume, hence only at the inbox's caps. */
static void wk_worker_pause(wk_worker *w, bool pause)
{
    rd_kafka_topic_partition_list_t *parts = NULL;
    rd_kafka_resp_err_t err = rd_kafka_assignment(w->rk, &parts);

    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        err = pause ? rd_kafka_pause_partitions(w->rk, parts)
                    : rd_kafka_resume_partitions(w->rk, parts);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn(pause ? "pause_failed" : "resume_failed", "error=%s", rd_kafka_err2str(err));
    else
        w->paused = pause;
    if (parts != NULL)
        rd_kafka_topic_partition_list_destroy(parts);
}

/* Polls the consumer into the inbox, up to a prefetch's worth of messages
 * (what librdkafka has queued), then starts what the free chunk slots
 * take: the messages of many small tasks that arrived together are
 * started after one statement has loaded their task rows
 * (wk_lifecycle_prefetch), not each after its own (docs/performance.md
 * "Issue 33").  The consumer is polled even while the assignment is
 * paused (the inbox full): a consumer that is not polled for
 * max.poll.interval.ms leaves the group, and rebalances wait for it.
 * Paused at the inbox's caps, resumed once it drained to half of them
 * (wk_inbox.h). */
static void wk_worker_fetch(wk_worker *w)
{
    bool drained = false;

    while (!w->stopping && !drained) {
        bool pause;
        size_t got = 0;

        for (; got < WK_TASK_PREFETCH_MAX; got++) {
            rd_kafka_message_t *m = rd_kafka_consumer_poll(w->rk, 0);

            if (m == NULL) {
                drained = true;
                break;
            }
            wk_worker_message(w, m);
            rd_kafka_message_destroy(m);
        }
        wk_worker_start_queued(w);
        pause = w->paused ? !wk_inbox_low(w->inbox) : wk_inbox_full(w->inbox);
        /* While a revoke drains, the assignment's pause flags are the
         * revoke's (wk_revoke). */
        if (pause != w->paused && !wk_revoke_active(&w->revoke))
            wk_worker_pause(w, pause);
    }
}

/* The revoke's unassigned hook. */
static void wk_worker_unassigned(void *ctx)
{
    wk_worker *w = ctx;

    w->paused = false;
}

static void wk_worker_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    wk_worker *w = opaque;

    /* A new assignment starts unpaused (the revoke resumed what was paused
     * before it unassigned: wk_revoke.h); the next fetch pauses it if the
     * inbox is full. */
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        w->paused = false;
        hr_log_info("partitions_assigned", "count=%d", parts->cnt);
        rd_kafka_assign(rk, parts);
        return;
    }
    if (err != RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS)
        hr_log_error("rebalance_error", "error=%s", rd_kafka_err2str(err));
    wk_revoke_start(&w->revoke, parts, w->stopping);
}

/* ---- loop callbacks ------------------------------------------------------------ */

static void wk_worker_kpoll_cb(uv_poll_t *h, int status, int events)
{
    wk_worker *w = h->data;
    char buf[64];

    (void)status;
    (void)events;
    while (read(w->kpipe[0], buf, sizeof buf) > 0)
        ;
    wk_worker_fetch(w);
}

static void wk_worker_kick_cb(uv_timer_t *t)
{
    wk_worker_fetch(t->data);
}

static void wk_worker_renew_cb(uv_timer_t *t)
{
    wk_worker *w = t->data;

    wk_lifecycle_renew(&w->life);
}

static void wk_worker_ctl_cb(uv_timer_t *t)
{
    wk_worker *w = t->data;

    wk_lifecycle_control(&w->life);
    /* A job the Redis thread refused waits for the next try. */
    wk_lifecycle_release(&w->life, false);
}

static void wk_worker_close_handles(wk_worker *w);

/* Abandons what is left, commits offsets, leaves the group. */
static void wk_worker_shutdown_now(wk_worker *w)
{
    rd_kafka_resp_err_t err;

    if (w->finished)
        return;
    w->finished = true;
    wk_lifecycle_abandon_all(&w->life, "shutdown");
    wk_revoke_finish(&w->revoke);
    /* The Redis thread closes next: whatever still waits for its events
     * goes now (counted), or it would never run. */
    wk_lifecycle_release(&w->life, true);
    err = rd_kafka_commit(w->rk, NULL, 0);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
        hr_log_warn("offset_commit_failed", "error=%s", rd_kafka_err2str(err));
    err = rd_kafka_consumer_close(w->rk);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn("consumer_close_failed", "error=%s", rd_kafka_err2str(err));
    wk_worker_close_handles(w);
}

static void wk_worker_idle_cb(uv_idle_t *h)
{
    wk_worker *w = h->data;

    uv_idle_stop(h);
    if (w->stopping) {
        /* Chunks closing or parking store their offsets when Redis
         * answered: the commit waits for them (at most the grace). */
        if (wk_sender_in_flight(w->life.sender) == 0 && !wk_lifecycle_ending(&w->life))
            wk_worker_shutdown_now(w);
        return;
    }
    wk_revoke_check(&w->revoke);
    /* A chunk that left (finished, abandoned, dropped, halted) may have
     * freed sender slots by cancelling its requests; no transfer or timer
     * would start the other chunks' waiting pushes. */
    wk_sender_kick(w->life.sender);
    wk_worker_fetch(w);
}

/* Runs the idle callback once the current callback has returned. */
static void wk_worker_soon(wk_worker *w)
{
    if (!w->finished)
        uv_idle_start(&w->idle, wk_worker_idle_cb);
}

static void wk_worker_grace_cb(uv_timer_t *t)
{
    wk_worker *w = t->data;

    hr_log_warn("shutdown_grace_expired", "in_flight=%zu", wk_sender_in_flight(w->life.sender));
    wk_worker_shutdown_now(w);
}

static void wk_worker_signal_cb(uv_signal_t *h, int signum)
{
    wk_worker *w = h->data;

    if (w->stopping)
        return;
    w->stopping = true;
    w->life.stopping = true;
    atomic_store(&w->life.met->assigned, false);
    /* The inbox's messages are never started: the partitions' next owner
     * consumes them (no offset is stored past them). */
    hr_log_info("worker_stopping", "signal=%d chunks=%zu in_flight=%zu queued=%zu", signum,
                w->life.nchunks, wk_sender_in_flight(w->life.sender), wk_inbox_count(w->inbox));
    uv_poll_stop(&w->kpoll);
    uv_timer_stop(&w->kick);
    wk_sender_drain(w->life.sender);
    uv_timer_start(&w->grace, wk_worker_grace_cb, (uint64_t)w->cfg->worker.shutdown_grace_ms, 0);
    wk_worker_soon(w);
}

/* The gate's wake-up handle closes; the hook sends nothing after. */
static void wk_worker_close_ev_wake(wk_worker *w)
{
    pthread_mutex_lock(&w->ev_mu);
    if (w->ev_wake_open)
        uv_close((uv_handle_t *)&w->ev_wake, NULL);
    w->ev_wake_open = false;
    pthread_mutex_unlock(&w->ev_mu);
}

static void wk_worker_close_handles(wk_worker *w)
{
    uv_close((uv_handle_t *)&w->sigterm, NULL);
    uv_close((uv_handle_t *)&w->sigint, NULL);
    uv_close((uv_handle_t *)&w->kick, NULL);
    uv_close((uv_handle_t *)&w->renew, NULL);
    uv_close((uv_handle_t *)&w->grace, NULL);
    uv_close((uv_handle_t *)&w->ctl, NULL);
    wk_revoke_close(&w->revoke);
    uv_close((uv_handle_t *)&w->idle, NULL);
    uv_close((uv_handle_t *)&w->kpoll, NULL);
    wk_worker_close_ev_wake(w);
    wk_sender_close(w->life.sender);
    /* The jobs queued (the shutdown's abandons among them) still run;
     * their answers come while the loop runs down (wk_worker_free). */
    wk_redis_close(w->life.rd);
}

/* ---- setup ------------------------------------------------------------------- */

int wk_worker_new(const hr_config *cfg, wk_worker **out, char *errstr, size_t errlen)
{
    wk_worker *w = calloc(1, sizeof *w);
    const wk_lifecycle_hooks hooks = {
        .privdata = w, .store_offset = wk_worker_store, .wake = wk_worker_wake};
    const wk_reporter_hooks rhooks = {.ctx = w, .confirmed = wk_worker_events_confirmed};
    hr_redis *r = NULL;

    *out = NULL;
    if (w == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    w->cfg = cfg;
    w->kpipe[0] = w->kpipe[1] = -1;
    snprintf(w->owner, sizeof w->owner, "%s/%ld", cfg->instance, (long)getpid());
    wk_lifecycle_init(&w->life, cfg, w->owner, &hooks);
    if (uv_loop_init(&w->loop) != 0) {
        snprintf(errstr, errlen, "uv_loop_init failed");
        free(w);
        return -1;
    }
    pthread_mutex_init(&w->ev_mu, NULL);
    uv_async_init(&w->loop, &w->ev_wake, wk_worker_ev_wake_cb);
    w->ev_wake.data = w;
    w->ev_wake_open = true;
    if (hr_redis_connect(cfg, &r, errstr, errlen) != 0)
        goto fail;
    /* From here on the connection is the Redis thread's. */
    if (wk_redis_start(&w->loop, r, &w->life.rd, errstr, errlen) != 0) {
        hr_redis_free(r);
        goto fail;
    }
    if (hr_mysql_connect(cfg, &w->life.mysql, errstr, errlen) != 0)
        goto fail;
    if (wk_task_cache_new(cfg, &w->life.tasks) != 0 || wk_offsets_new(&w->life.offsets) != 0 ||
        wk_inbox_new(WK_WORKER_INBOX_MSGS, WK_WORKER_INBOX_BYTES, &w->inbox) != 0) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    w->life.met = wk_metrics_new(cfg, errstr, errlen);
    if (w->life.met == NULL)
        goto fail;
    w->life.gate.forced_jobs = w->life.met->gate_forced;
    if (wk_sender_new(&w->loop, cfg, w->life.rd, w->life.met, wk_lifecycle_push_done, &w->life,
                      &w->life.sender, errstr, errlen) != 0 ||
        wk_reporter_start(cfg, w->owner, WK_REPORTER_ROW_WAIT_MS, w->life.met, &rhooks,
                          &w->life.reporter, errstr, errlen) != 0)
        goto fail;
    w->prune = (wk_prune){.rd = w->life.rd, .mysql = w->life.mysql, .met = w->life.met};
    wk_sender_set_prune(w->life.sender, wk_prune_address, &w->prune);
    if (wk_metrics_serve(w->life.met, cfg->worker.listen, errstr, errlen) != 0)
        goto fail;
    hr_log_info("metrics_listening", "listen=%s port=%d", cfg->worker.listen,
                hr_httpd_port(w->life.met->httpd));
    *out = w;
    return 0;
fail:
    wk_worker_free(w);
    return -1;
}

/* librdkafka statistics (served by the consumer poll on the loop thread):
 * consumer lag and broker health for /metrics and /readyz. */
static int wk_worker_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    wk_worker *w = opaque;

    (void)rk;
    if (wk_metrics_kafka_stats(w->life.met, json, len) != 0)
        hr_log_warn("kafka_stats_unparsed", "bytes=%zu", len);
    return 0; /* librdkafka frees JSON */
}

static void wk_worker_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    wk_worker *w = opaque;

    (void)rk;
    hr_metrics_inc(w->life.met->backend_errors[WK_BACKEND_KAFKA]);
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        atomic_store(&w->life.met->kafka_ok, false);
    hr_log_warn("kafka_error", "error=%s reason=%s", rd_kafka_err2name(err), reason);
}

/* The consumer, its io-event pipe and the loop handles. */
static int wk_worker_setup(wk_worker *w, char *errstr, size_t errlen)
{
    rd_kafka_conf_t *conf = hr_kafka_conf_new(w->cfg, HR_KAFKA_CONSUMER, errstr, errlen);

    if (conf == NULL)
        return -1;
    rd_kafka_conf_set_rebalance_cb(conf, wk_worker_rebalance);
    rd_kafka_conf_set_stats_cb(conf, wk_worker_stats_cb);
    rd_kafka_conf_set_error_cb(conf, wk_worker_error_cb);
    if (rd_kafka_conf_set(conf, "statistics.interval.ms", "5000", errstr, errlen) !=
        RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_conf_set_opaque(conf, w);
    w->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, errlen);
    if (w->rk == NULL) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_poll_set_consumer(w->rk);
    w->kq = rd_kafka_queue_get_consumer(w->rk);
    if (pipe2(w->kpipe, O_NONBLOCK | O_CLOEXEC) != 0) {
        snprintf(errstr, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    rd_kafka_queue_io_event_enable(w->kq, w->kpipe[1], "1", 1);
    if (hr_kafka_subscribe(w->rk, w->cfg->kafka.topic, errstr, errlen) != 0)
        return -1;
    atomic_store(&w->life.met->assigned, true);

    uv_signal_init(&w->loop, &w->sigterm);
    uv_signal_init(&w->loop, &w->sigint);
    uv_timer_init(&w->loop, &w->kick);
    uv_timer_init(&w->loop, &w->renew);
    uv_timer_init(&w->loop, &w->grace);
    uv_timer_init(&w->loop, &w->ctl);
    wk_revoke_init(&w->revoke, &w->loop, w->rk, w->cfg, &w->life, w->inbox,
                   &(wk_revoke_hooks){.ctx = w, .unassigned = wk_worker_unassigned});
    uv_idle_init(&w->loop, &w->idle);
    uv_poll_init(&w->loop, &w->kpoll, w->kpipe[0]);
    w->handles_ready = true;
    w->sigterm.data = w->sigint.data = w;
    w->kick.data = w->renew.data = w->grace.data = w->ctl.data = w;
    w->idle.data = w->kpoll.data = w;
    uv_signal_start(&w->sigterm, wk_worker_signal_cb, SIGTERM);
    uv_signal_start(&w->sigint, wk_worker_signal_cb, SIGINT);
    uv_timer_start(&w->kick, wk_worker_kick_cb, WK_WORKER_KICK_MS, WK_WORKER_KICK_MS);
    uv_timer_start(&w->renew, wk_worker_renew_cb, (uint64_t)w->cfg->worker.lease_ms / 3,
                   (uint64_t)w->cfg->worker.lease_ms / 3);
    uv_timer_start(&w->ctl, wk_worker_ctl_cb, WK_LIFECYCLE_CTL_MS, WK_LIFECYCLE_CTL_MS);
    uv_poll_start(&w->kpoll, UV_READABLE, wk_worker_kpoll_cb);
    return 0;
}

int wk_worker_run(wk_worker *w, char *errstr, size_t errlen)
{
    if (wk_worker_setup(w, errstr, errlen) != 0)
        return -1;
    hr_log_info("worker_started", "owner=%s topic=%s group=%s max_chunks_in_flight=%d", w->owner,
                w->cfg->kafka.topic, w->cfg->kafka.group, w->cfg->worker.max_chunks_in_flight);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    hr_log_info("worker_stopped",
                "chunks_done=%" PRId64 " bad_messages=%" PRId64 " unknown_tasks=%" PRId64
                " busy_chunks=%" PRId64 " parked_chunks=%" PRId64,
                w->life.stats.chunks_done, w->life.stats.bad_messages, w->life.stats.unknown_tasks,
                w->life.stats.busy_chunks, w->life.stats.parked_chunks);
    return 0;
}

void wk_worker_get_stats(const wk_worker *w, wk_worker_stats *out)
{
    *out = w->life.stats;
}

void wk_worker_free(wk_worker *w)
{
    if (w == NULL)
        return;
    if (!w->finished && w->handles_ready) {
        /* Run failed half way or never finished: close what was opened. */
        w->finished = true;
        wk_worker_close_handles(w);
    } else if (!w->handles_ready) {
        wk_worker_close_ev_wake(w);
        if (w->life.sender != NULL)
            wk_sender_close(w->life.sender);
        wk_redis_close(w->life.rd);
    }
    uv_run(&w->loop, UV_RUN_DEFAULT);
    wk_gate_clear(&w->life.gate);
    /* Every job answered (the loop ran until the Redis thread's wake-up
     * handle closed): the thread has ended. */
    wk_redis_free(w->life.rd);
    /* The scrape callbacks read the reporter: stop serving first. */
    if (w->life.met != NULL)
        wk_metrics_stop(w->life.met);
    wk_sender_free(w->life.sender);
    wk_reporter_stop(w->life.reporter);
    if (w->kq != NULL)
        rd_kafka_queue_destroy(w->kq);
    if (w->rk != NULL)
        rd_kafka_destroy(w->rk);
    if (w->kpipe[0] >= 0)
        close(w->kpipe[0]);
    if (w->kpipe[1] >= 0)
        close(w->kpipe[1]);
    wk_revoke_clear(&w->revoke);
    wk_inbox_free(w->inbox);
    wk_offsets_free(w->life.offsets);
    wk_task_cache_free(w->life.tasks);
    hr_mysql_free(w->life.mysql);
    wk_metrics_free(w->life.met);
    uv_loop_close(&w->loop);
    pthread_mutex_destroy(&w->ev_mu);
    free(w);
}
