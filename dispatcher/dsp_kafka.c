/* dsp_kafka: the chunk producer (dsp_kafka.h).  Each produced message
 * carries a copy of its dsp_kafka_msg as librdkafka's opaque, handed to
 * the delivered hook by the report and freed after it; a purge at exit
 * hands every message still queued back the same way. */
#include "dsp_kafka.h"

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>

#include "hr_chunkmsg.h"
#include "hr_clock.h"
#include "hr_kafka.h"
#include "hr_log.h"
#include "hr_shard.h"

/* Topic metadata at start-up. */
#define DSP_KAFKA_WARM_MS 5000

struct dsp_kafka {
    rd_kafka_t *rk;
    const char *topic; /* the config's */
    dsp_kafka_hooks hooks;
};

static void dsp_kafka_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    dsp_kafka *kafka = opaque;

    (void)rk;
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || err == RD_KAFKA_RESP_ERR__TRANSPORT ||
        err == RD_KAFKA_RESP_ERR__FATAL)
        kafka->hooks.down(kafka->hooks.ctx, reason);
    else
        hr_log_warn("kafka_error", "error=%s", reason);
}

static void dsp_kafka_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    dsp_kafka *kafka = opaque;
    dsp_kafka_msg *om = msg->_private;

    (void)rk;
    kafka->hooks.delivered(kafka->hooks.ctx, om,
                           msg->err != RD_KAFKA_RESP_ERR_NO_ERROR ? rd_kafka_err2str(msg->err)
                                                                  : NULL);
    free(om);
}

/* Learns the chunk topic's partition leaders now: a producer that meets a
 * topic for the first time holds its messages until that metadata arrives,
 * which put most of a second between the first claim after a start and the
 * first chunk on the wire.  A broker that is down is no error here; the
 * producer retries by itself. */
static void dsp_kafka_warm(dsp_kafka *kafka)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(kafka->rk, kafka->topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err;

    if (rkt == NULL)
        return;
    err = rd_kafka_metadata(kafka->rk, 0, rkt, &md, DSP_KAFKA_WARM_MS);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn("kafka_metadata_failed", "topic=%s error=%s", kafka->topic,
                    rd_kafka_err2str(err));
    else if (md->topic_cnt == 1 && md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn("kafka_topic_unavailable", "topic=%s error=%s", kafka->topic,
                    rd_kafka_err2str(md->topics[0].err));
    if (md != NULL)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
}

int dsp_kafka_new(const hr_config *cfg, const dsp_kafka_hooks *hooks, dsp_kafka **out, char *errstr,
                  size_t errlen)
{
    dsp_kafka *kafka = calloc(1, sizeof *kafka);
    rd_kafka_conf_t *conf = NULL;

    *out = NULL;
    if (kafka == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    kafka->topic = cfg->kafka.topic;
    kafka->hooks = *hooks;
    conf = hr_kafka_conf_new(cfg, HR_KAFKA_PRODUCER, errstr, errlen);
    if (conf == NULL)
        goto fail;
    rd_kafka_conf_set_opaque(conf, kafka);
    rd_kafka_conf_set_dr_msg_cb(conf, dsp_kafka_dr_cb);
    rd_kafka_conf_set_error_cb(conf, dsp_kafka_error_cb);
    kafka->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errlen);
    if (kafka->rk == NULL)
        goto fail;
    conf = NULL; /* the producer's now */
    dsp_kafka_warm(kafka);
    *out = kafka;
    return 0;
fail:
    if (conf != NULL)
        rd_kafka_conf_destroy(conf);
    dsp_kafka_free(kafka);
    return -1;
}

int dsp_kafka_produce(dsp_kafka *kafka, dsp_kafka_msg *msg, char *errstr, size_t errlen)
{
    hr_chunkmsg cm = {.task = msg->task,
                      .seq = msg->seq,
                      .count = msg->count,
                      .due_ms = msg->due_ms,
                      .published_ms = hr_clock_now_ms(),
                      .sharded = msg->shard != HR_SHARD_NONE,
                      .shard = msg->shard != HR_SHARD_NONE ? msg->shard : 0};
    char key[64], value[HR_CHUNKMSG_MAX_BYTES];
    int klen = hr_chunkmsg_key(&cm, msg->republish, key, sizeof key);
    int vlen = hr_chunkmsg_encode(&cm, value, sizeof value);
    dsp_kafka_msg *om;
    rd_kafka_resp_err_t err;

    if (klen < 0 || vlen < 0) {
        snprintf(errstr, errlen, "chunk message does not fit");
        return -1;
    }
    msg->published_ms = cm.published_ms;
    om = malloc(sizeof *om);
    if (om == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    *om = *msg;
    err = rd_kafka_producev(
        kafka->rk, RD_KAFKA_V_TOPIC(kafka->topic), RD_KAFKA_V_KEY(key, (size_t)klen),
        RD_KAFKA_V_VALUE(value, (size_t)vlen), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_OPAQUE(om), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(errstr, errlen, "produce: %s", rd_kafka_err2str(err));
        free(om);
        return -1;
    }
    return 0;
}

void dsp_kafka_poll(dsp_kafka *kafka)
{
    rd_kafka_poll(kafka->rk, 0);
}

void dsp_kafka_flush(dsp_kafka *kafka, int timeout_ms)
{
    if (rd_kafka_flush(kafka->rk, timeout_ms) == RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    /* Their chunks stay pending and the sweepers republish them; the purge
     * hands every message back to the delivery report, which frees it. */
    hr_log_warn("flush_incomplete", "messages=%d", rd_kafka_outq_len(kafka->rk));
    rd_kafka_purge(kafka->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_poll(kafka->rk, 0);
}

void dsp_kafka_free(dsp_kafka *kafka)
{
    if (kafka == NULL)
        return;
    if (kafka->rk != NULL)
        rd_kafka_destroy(kafka->rk);
    free(kafka);
}
