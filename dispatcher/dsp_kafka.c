/* dsp_kafka: the chunk producer and its delivery reports (moved here from
 * dsp_chunk.c and dispatcher.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsp.h"
#include "hr_chunkmsg.h"
#include "hr_clock.h"
#include "hr_kafka.h"
#include "hr_log.h"

static void dsp_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || err == RD_KAFKA_RESP_ERR__TRANSPORT ||
        err == RD_KAFKA_RESP_ERR__FATAL)
        dsp_health_fail(opaque, DSP_KAFKA, reason);
    else
        hr_log_warn("kafka_error", "error=%s", reason);
}

/* Learns the chunk topic's partition leaders now: a producer that meets a
 * topic for the first time holds its messages until that metadata arrives,
 * which put most of a second between the first claim after a start and the
 * first chunk on the wire.  A broker that is down is no error here; the
 * producer retries by itself. */
static void dsp_topic_warm(dsp *d)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(d->rk, d->cfg->kafka.topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err;

    if (rkt == NULL)
        return;
    err = rd_kafka_metadata(d->rk, 0, rkt, &md, DSP_WARM_TIMEOUT_MS);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn("kafka_metadata_failed", "topic=%s error=%s", d->cfg->kafka.topic,
                    rd_kafka_err2str(err));
    else if (md->topic_cnt == 1 && md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn("kafka_topic_unavailable", "topic=%s error=%s", d->cfg->kafka.topic,
                    rd_kafka_err2str(md->topics[0].err));
    if (md != NULL)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
}

int dsp_producer_new(dsp *d, char *errstr, size_t errlen)
{
    rd_kafka_conf_t *conf = hr_kafka_conf_new(d->cfg, HR_KAFKA_PRODUCER, errstr, errlen);

    if (conf == NULL)
        return -1;
    rd_kafka_conf_set_opaque(conf, d);
    rd_kafka_conf_set_dr_msg_cb(conf, dsp_dr_cb);
    rd_kafka_conf_set_error_cb(conf, dsp_error_cb);
    d->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errlen);
    if (d->rk == NULL) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    dsp_topic_warm(d);
    return 0;
}

/* What a produced message carries to its delivery report. */
typedef struct dsp_msg {
    int64_t task, seq, size, published_ms;
    int shard;    /* HR_SHARD_NONE for a task of one set */
    uint64_t gen; /* dsp_task.gen of the owner that produced it */
    bool republish;
} dsp_msg;

int dsp_produce(dsp *d, int64_t task, int shard, int64_t seq, int64_t count, int64_t due_ms,
                bool republish, char *errstr, size_t errlen)
{
    dsp_task *owned = republish ? NULL : dsp_task_find_shard(d, task, shard);
    hr_chunkmsg cm = {.task = task,
                      .seq = seq,
                      .count = count,
                      .due_ms = due_ms,
                      .published_ms = hr_clock_now_ms(),
                      .sharded = shard != HR_SHARD_NONE,
                      .shard = shard != HR_SHARD_NONE ? shard : 0};
    char key[64], value[HR_CHUNKMSG_MAX_BYTES];
    int klen = hr_chunkmsg_key(&cm, key, sizeof key);
    int vlen = hr_chunkmsg_encode(&cm, value, sizeof value);
    dsp_msg *om;
    rd_kafka_resp_err_t err;

    if (klen < 0 || vlen < 0) {
        snprintf(errstr, errlen, "chunk message does not fit");
        return -1;
    }
    om = malloc(sizeof *om);
    if (om == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    *om = (dsp_msg){.task = task,
                    .seq = seq,
                    .shard = shard,
                    .size = count,
                    .published_ms = cm.published_ms,
                    .gen = owned ? owned->gen : 0,
                    .republish = republish};
    err = rd_kafka_producev(
        d->rk, RD_KAFKA_V_TOPIC(d->cfg->kafka.topic), RD_KAFKA_V_KEY(key, (size_t)klen),
        RD_KAFKA_V_VALUE(value, (size_t)vlen), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_OPAQUE(om), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(errstr, errlen, "produce: %s", rd_kafka_err2str(err));
        free(om);
        return -1;
    }
    return 0;
}

void dsp_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    dsp *d = opaque;
    dsp_msg *om = msg->_private;
    dsp_task *dt = om->republish ? NULL : dsp_task_find_shard(d, om->task, om->shard);

    (void)rk;
    /* A report of an earlier ownership (the task was dropped and owned
     * again meanwhile) was never counted in this one's outstanding. */
    if (dt != NULL && dt->gen == om->gen)
        dt->outstanding--;
    if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        /* pending[seq] stays: the sweeper republishes the chunk. */
        dsp_health_fail(d, DSP_KAFKA, rd_kafka_err2str(msg->err));
        hr_log_warn("chunk_publish_failed", "task=%" PRId64 " seq=%" PRId64 " error=%s", om->task,
                    om->seq, rd_kafka_err2str(msg->err));
        goto done;
    }
    dsp_health_ok(d, DSP_KAFKA);
    if (!om->republish)
        hr_metrics_inc(d->met.chunks_published);
    dsp_report_add(d, &(dsp_report){.task = om->task,
                                    .seq = om->seq,
                                    .size = om->size,
                                    .published_ms = om->published_ms,
                                    .shard = om->shard});
done:
    free(om);
}
