/* hr_kafka: librdkafka configuration and topic creation for herald (see
 * hr_kafka.h).
 *
 * The configuration is built in three layers, each overriding the one
 * before: connection (bootstrap.servers, client.id), the role's defaults
 * (one table per role), then the user's kafka.properties. */
#include "hr_kafka.h"

#include <stdio.h>
#include <string.h>

typedef struct hr_kafka_default {
    const char *name;
    const char *value;
} hr_kafka_default;

/* acks=all: a chunk counts as published (its delivery report) only once every
 * in-sync replica has it, so with min.insync.replicas=2 on a topic of
 * replication factor 3 a published chunk survives the loss of any one broker.
 * Idempotence: the retry of a batch whose answer was lost when its leader
 * died is deduplicated by the new leader (producer id and sequence), so a
 * leader change neither loses nor doubles a chunk message.  The retries stay
 * librdkafka's (unbounded within message.timeout.ms, 300 s); a chunk whose
 * report is an error stays pending and the sweeper publishes it again
 * (docs/operations.md "Kafka with three brokers").  linger.ms 1, not
 * librdkafka's 5: a task's first chunk is a lone message, and every ms it
 * waits for company is a ms of its first push (a dispatcher produces one
 * message per chunk, so batching gains little).  reconnect.backoff.max.ms
 * 1000, not librdkafka's 10 s: after an outage of every broker the clients
 * found them again up to 10 s after they served (issue 34: kafka-stop's
 * 10 s outage stalled the campaign 29 s); one refused connect a second to
 * a dead broker costs nothing. */
static const hr_kafka_default hr_kafka_producer_defaults[] = {
    {"enable.idempotence", "true"},       {"acks", "all"}, {"linger.ms", "1"},
    {"reconnect.backoff.max.ms", "1000"}, {NULL, NULL},
};

/* group.id is added from the config; it is not a constant.  Liveness:
 * heartbeats come from librdkafka's own thread, so the session timeout only
 * detects a dead process (or a cut network) and can be short: a kill -9'd
 * worker leaves the group after 6 s (the broker's default
 * group.min.session.timeout.ms) instead of 45 s, and the survivors hear of
 * the rebalance within a 1 s heartbeat.  A busy or stalled loop is covered
 * by max.poll.interval.ms (librdkafka's 300 s): the worker polls every
 * 250 ms whatever it is doing (docs/operations.md "Group liveness").
 * reconnect.backoff.max.ms as the producer's. */
static const hr_kafka_default hr_kafka_consumer_defaults[] = {
    {"partition.assignment.strategy", "range"},
    {"reconnect.backoff.max.ms", "1000"},
    {"session.timeout.ms", "6000"},
    {"heartbeat.interval.ms", "1000"},
    {"enable.auto.offset.store", "false"},
    {"enable.auto.commit", "true"},
    {"auto.offset.reset", "earliest"},
    {NULL, NULL},
};

static int hr_kafka_set(rd_kafka_conf_t *conf, const char *origin, const char *name,
                        const char *value, char *errstr, size_t errlen)
{
    char rkerr[512];

    if (rd_kafka_conf_set(conf, name, value, rkerr, sizeof rkerr) != RD_KAFKA_CONF_OK) {
        snprintf(errstr, errlen, "%s%s: %s", origin, name, rkerr);
        return -1;
    }
    return 0;
}

rd_kafka_conf_t *hr_kafka_conf_new(const hr_config *cfg, hr_kafka_role role, char *errstr,
                                   size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const hr_kafka_default *d =
        role == HR_KAFKA_PRODUCER ? hr_kafka_producer_defaults : hr_kafka_consumer_defaults;

    if (hr_kafka_set(conf, "", "bootstrap.servers", cfg->kafka.brokers, errstr, errlen) != 0 ||
        hr_kafka_set(conf, "", "client.id", cfg->instance, errstr, errlen) != 0)
        goto fail;
    for (; d->name != NULL; d++)
        if (hr_kafka_set(conf, "", d->name, d->value, errstr, errlen) != 0)
            goto fail;
    if (role == HR_KAFKA_CONSUMER &&
        hr_kafka_set(conf, "", "group.id", cfg->kafka.group, errstr, errlen) != 0)
        goto fail;
    for (size_t i = 0; i < cfg->kafka.nproperties; i++)
        if (hr_kafka_set(conf, "kafka.properties.", cfg->kafka.properties[i].key,
                         cfg->kafka.properties[i].value, errstr, errlen) != 0)
            goto fail;
    return conf;

fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

int hr_kafka_ensure_topic(const hr_config *cfg, const char *topic, int partitions, int rf,
                          int timeout_ms, char *errstr, size_t errlen)
{
    char rkerr[512];
    rd_kafka_conf_t *conf = hr_kafka_conf_new(cfg, HR_KAFKA_PRODUCER, errstr, errlen);
    rd_kafka_t *rk = NULL;
    rd_kafka_NewTopic_t *newt = NULL;
    rd_kafka_AdminOptions_t *options = NULL;
    rd_kafka_queue_t *queue = NULL;
    rd_kafka_event_t *ev = NULL;
    const rd_kafka_topic_result_t **results;
    size_t nresults;
    int rc = -1;

    if (conf == NULL)
        goto out;
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, rkerr, sizeof rkerr);
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        snprintf(errstr, errlen, "kafka: %s", rkerr);
        goto out;
    }
    newt = rd_kafka_NewTopic_new(topic, partitions, rf, rkerr, sizeof rkerr);
    if (newt == NULL) {
        snprintf(errstr, errlen, "topic %s: %s", topic, rkerr);
        goto out;
    }
    options = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    if (rd_kafka_AdminOptions_set_request_timeout(options, timeout_ms, rkerr, sizeof rkerr) ||
        rd_kafka_AdminOptions_set_operation_timeout(options, timeout_ms, rkerr, sizeof rkerr)) {
        snprintf(errstr, errlen, "topic %s: %s", topic, rkerr);
        goto out;
    }
    queue = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &newt, 1, options, queue);
    /* The admin request times out on its own; the extra second covers the
     * result's way back to this queue. */
    ev = rd_kafka_queue_poll(queue, timeout_ms + 1000);
    if (ev == NULL) {
        snprintf(errstr, errlen, "topic %s: no answer within %d ms", topic, timeout_ms);
        goto out;
    }
    if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(errstr, errlen, "topic %s: %s", topic, rd_kafka_event_error_string(ev));
        goto out;
    }
    results =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &nresults);
    for (size_t i = 0; i < nresults; i++) {
        rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            const char *msg = rd_kafka_topic_result_error_string(results[i]);
            snprintf(errstr, errlen, "topic %s: %s", topic,
                     msg != NULL ? msg : rd_kafka_err2str(err));
            goto out;
        }
    }
    rc = 0;
out:
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    if (queue != NULL)
        rd_kafka_queue_destroy(queue);
    if (options != NULL)
        rd_kafka_AdminOptions_destroy(options);
    if (newt != NULL)
        rd_kafka_NewTopic_destroy(newt);
    if (rk != NULL)
        rd_kafka_destroy(rk);
    return rc;
}

int hr_kafka_subscribe(rd_kafka_t *rk, const char *topic, char *errstr, size_t errlen)
{
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_resp_err_t err;

    rd_kafka_topic_partition_list_add(topics, topic, RD_KAFKA_PARTITION_UA);
    err = rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(errstr, errlen, "subscribe %s: %s", topic, rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}
