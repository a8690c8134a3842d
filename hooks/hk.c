/* hk: herald-hooks' loop (see hk.h). */
#include "hk.h"

#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_endpoint.h"
#include "hk_event.h"
#include "hk_http.h"
#include "hk_metrics.h"
#include "hr_clock.h"
#include "hr_kafka.h"
#include "hr_log.h"
#include "hr_mysql.h"

/* Records read per round at most, so deliveries are started in between. */
#define HK_READ_PER_ROUND 1000
/* How long a round waits for the network when nothing is due. */
#define HK_ROUND_WAIT_MS 20
#define HK_MAX_PARTITIONS 1024

typedef struct hk {
    const hr_config *cfg;
    char owner[192];
    rd_kafka_t *rk;
    hr_mysql *m;
    hk_metrics *met;
    hk_offsets *offsets;
    hk_dedupe *dedupe;
    hk_endpoints *endpoints;
    hk_http *http;
    int32_t assigned[HK_MAX_PARTITIONS];
    size_t nassigned;
    bool paused; /* the assigned partitions' fetching, while no room */
} hk;

static volatile sig_atomic_t hk_stop;

static void hk_on_signal(int sig)
{
    (void)sig;
    hk_stop = 1;
}

/* Stores each assigned partition's committable offset. */
static void hk_store_offsets(hk *h)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)h->nassigned);

    for (size_t i = 0; i < h->nassigned; i++) {
        int64_t at = hk_offsets_committable(h->offsets, h->assigned[i]);

        if (at >= 0)
            rd_kafka_topic_partition_list_add(l, h->cfg->events.topic, h->assigned[i])->offset = at;
    }
    if (l->cnt > 0)
        rd_kafka_offsets_store(h->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
}

/* Pauses (PAUSE) or resumes fetching the assigned partitions.  Paused,
 * the loop still polls (a consumer that stops polling leaves its group
 * after max.poll.interval.ms) and librdkafka drops what it had fetched
 * ahead; resumed, it fetches again from the first record not read. */
static void hk_pause(hk *h, bool pause)
{
    rd_kafka_topic_partition_list_t *l;
    rd_kafka_resp_err_t err;

    if (pause == h->paused || h->nassigned == 0)
        return;
    l = rd_kafka_topic_partition_list_new((int)h->nassigned);
    for (size_t i = 0; i < h->nassigned; i++)
        rd_kafka_topic_partition_list_add(l, h->cfg->events.topic, h->assigned[i]);
    err = pause ? rd_kafka_pause_partitions(h->rk, l) : rd_kafka_resume_partitions(h->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        hr_log_warn("kafka_pause_failed", "pause=%d error=%s", pause, rd_kafka_err2str(err));
        return;
    }
    h->paused = pause;
}

static void hk_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    hk *h = opaque;

    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        h->nassigned = 0;
        for (int i = 0; i < parts->cnt && h->nassigned < HK_MAX_PARTITIONS; i++)
            h->assigned[h->nassigned++] = parts->elems[i].partition;
        /* A new assignment fetches: the next round pauses it if need be. */
        h->paused = false;
        hr_log_info("partitions_assigned", "count=%d", parts->cnt);
        rd_kafka_assign(rk, parts);
        return;
    }
    /* Revoked: what is finished is stored (and committed on the way out);
     * the rest is the next owner's to read again.  The events still queued
     * here are delivered all the same (a receiver may see them twice). */
    hk_store_offsets(h);
    /* Resumed while still assigned: librdkafka keeps a partition's pause
     * flag across an unassign, and the next assignment, which starts with
     * h->paused false, would never fetch a partition paused here (the
     * worker's revoke does the same, worker/wk_revoke.h). */
    hk_pause(h, false);
    for (size_t i = 0; i < h->nassigned; i++)
        hk_offsets_forget(h->offsets, h->assigned[i]);
    h->nassigned = 0;
    hr_log_info("partitions_revoked", "count=%d", parts->cnt);
    rd_kafka_assign(rk, NULL);
}

static void hk_kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    hk *h = opaque;

    (void)rk;
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        atomic_store(&h->met->kafka_ok, false);
    hr_log_warn("kafka_error", "error=%s reason=%s", rd_kafka_err2name(err), reason);
}

static int hk_consumer(hk *h, char *errstr, size_t errlen)
{
    rd_kafka_conf_t *conf = hr_kafka_conf_new(h->cfg, HR_KAFKA_CONSUMER, errstr, errlen);

    if (conf == NULL)
        return -1;
    /* Its own group: every process of it shares the events, apart from
     * the workers' chunks. */
    if (rd_kafka_conf_set(conf, "group.id", h->cfg->events.hooks.group, errstr, errlen) !=
        RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_conf_set_rebalance_cb(conf, hk_rebalance);
    rd_kafka_conf_set_error_cb(conf, hk_kafka_error);
    rd_kafka_conf_set_opaque(conf, h);
    if ((h->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, errlen)) == NULL) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_poll_set_consumer(h->rk);
    return hr_kafka_subscribe(h->rk, h->cfg->events.topic, errstr, errlen);
}

/* One record: an event for the endpoints, a repeat, or no event. */
static void hk_record(hk *h, const rd_kafka_message_t *msg, int64_t now_ms)
{
    char err[256];
    hk_event *ev = hk_event_read(msg->payload, msg->len, err, sizeof err);

    if (ev == NULL) {
        /* Skipped (its offset counts as finished): a record that is no
         * event would be read again for ever. */
        hr_metrics_inc(h->met->bad);
        hr_log_warn("event_unread", "partition=%" PRId32 " offset=%" PRId64 " error=%s",
                    msg->partition, msg->offset, err);
        if ((ev = calloc(1, sizeof *ev)) == NULL)
            return;
        ev->refs = 1;
    }
    ev->partition = msg->partition;
    ev->offset = msg->offset;
    hk_offsets_add(h->offsets, ev);
    if (ev->value != NULL && hk_dedupe_seen(h->dedupe, ev->id))
        hr_metrics_inc(h->met->duplicates);
    else if (ev->value != NULL)
        hk_endpoints_dispatch(h->endpoints, ev, now_ms);
    /* The read's own ref: the endpoints hold theirs. */
    hk_offsets_put(h->offsets, ev);
}

/* One round: endpoints re-read when due, records read (unless stopping; no
 * more than the endpoints have room for), deliveries started, the network
 * waited on, offsets stored. */
static void hk_round(hk *h, bool reading)
{
    int64_t now = hr_clock_now_ms();
    size_t room;
    char err[512];

    if (hk_endpoints_reload(h->endpoints, now, err, sizeof err) < 0) {
        if (atomic_exchange(&h->met->mysql_ok, false))
            hr_log_error("mysql_down", "error=%s", err);
    } else if (!atomic_exchange(&h->met->mysql_ok, true)) {
        hr_log_info("mysql_up", "owner=%s", h->owner);
    }
    room = hk_endpoints_room(h->endpoints, now);
    hk_pause(h, room == 0);
    /* Paused, one poll still goes (it serves the group; a record fetched
     * before the pause may come and is queued all the same). */
    for (size_t i = 0; reading && hk_endpoints_loaded(h->endpoints) && i < HK_READ_PER_ROUND &&
                       (i == 0 || i < room);
         i++) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(h->rk, 0);

        if (msg == NULL)
            break;
        if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            atomic_store(&h->met->kafka_ok, true);
            hk_record(h, msg, now);
        } else if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            hr_log_warn("kafka_consume_error", "error=%s", rd_kafka_message_errstr(msg));
        }
        rd_kafka_message_destroy(msg);
    }
    hk_endpoints_pump(h->endpoints, h->http, now);
    hk_http_wait(h->http, HK_ROUND_WAIT_MS);
    hk_store_offsets(h);
}

static void hk_free(hk *h)
{
    /* Deliveries in flight hold endpoints: stopped first. */
    hk_http_free(h->http);
    hk_endpoints_free(h->endpoints);
    if (h->rk != NULL)
        rd_kafka_destroy(h->rk);
    hk_offsets_free(h->offsets);
    hk_dedupe_free(h->dedupe);
    hr_mysql_free(h->m);
    hk_metrics_free(h->met);
}

int hk_run(const hr_config *cfg)
{
    hk h = {.cfg = cfg};
    char err[512];
    int64_t grace_until;
    rd_kafka_resp_err_t kerr;

    snprintf(h.owner, sizeof h.owner, "%s/%ld", cfg->instance, (long)getpid());
    signal(SIGTERM, hk_on_signal);
    signal(SIGINT, hk_on_signal);
    signal(SIGPIPE, SIG_IGN);
    if ((h.met = hk_metrics_new(err, sizeof err)) == NULL ||
        hk_metrics_serve(h.met, cfg->events.hooks.listen, err, sizeof err) < 0 ||
        hr_mysql_connect(cfg, &h.m, err, sizeof err) < 0)
        goto fail;
    h.offsets = hk_offsets_new();
    h.dedupe = hk_dedupe_new((size_t)cfg->events.hooks.dedupe_window);
    h.endpoints = hk_endpoints_new(cfg, h.owner, h.m, h.met, h.offsets);
    h.http = hk_http_new(hk_endpoints_answered);
    if (h.offsets == NULL || h.dedupe == NULL || h.endpoints == NULL || h.http == NULL) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    if (hk_consumer(&h, err, sizeof err) < 0)
        goto fail;
    atomic_store(&h.met->mysql_ok, true);
    hr_log_info("hooks_started", "owner=%s topic=%s group=%s listen=%s port=%d", h.owner,
                cfg->events.topic, cfg->events.hooks.group, cfg->events.hooks.listen,
                hr_httpd_port(h.met->httpd));
    while (!hk_stop)
        hk_round(&h, true);
    hr_log_info("hooks_stopping", "held=%zu in_flight=%zu", hk_endpoints_held(h.endpoints),
                hk_http_running(h.http));
    grace_until = hr_clock_mono_ms() + HK_STOP_GRACE_MS;
    while (hk_http_running(h.http) > 0 && hr_clock_mono_ms() < grace_until)
        hk_round(&h, false);
    hk_store_offsets(&h);
    kerr = rd_kafka_consumer_close(h.rk);
    if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn("consumer_close_failed", "error=%s", rd_kafka_err2str(kerr));
    hr_log_info("hooks_stopped", "held=%zu", hk_endpoints_held(h.endpoints));
    hk_free(&h);
    return 0;
fail:
    hr_log_error("startup_failed", "error=%s", err);
    hk_free(&h);
    return 1;
}
