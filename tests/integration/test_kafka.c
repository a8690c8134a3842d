/* Integration test of hr_kafka against the stack's broker: topic creation,
 * the idempotent producer's delivery reports, and manual offset storing in
 * consumer group herald-workers: a consumer stores the offsets of 60 of
 * 100 messages and leaves; the next member of the group gets exactly the
 * other 40.  The topic is the test's own; the group is the real one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_chunkmsg.h"
#include "hr_kafka.h"
#include "itest.h"

#define N_MESSAGES 100
#define N_STORED 60
#define WAIT_MS 60000

static hr_config *cfg;
static char errstr[512];

typedef struct delivery {
    int ok;
    int failed;
} delivery;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    delivery *d = opaque;

    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
        d->ok++;
    else
        d->failed++;
}

static void assert_conf(rd_kafka_conf_t *conf, const char *name, const char *want)
{
    char value[256];
    size_t len = sizeof value;

    assert_int_equal(rd_kafka_conf_get(conf, name, value, &len), RD_KAFKA_CONF_OK);
    if (strcmp(value, want) != 0)
        fail_msg("%s = %s, want %s", name, value, want);
}

static void test_conf(void **state)
{
    (void)state;
    hr_config bad = *cfg;
    hr_kv kv = {"no.such.property", "1"};
    rd_kafka_conf_t *conf = hr_kafka_conf_new(cfg, HR_KAFKA_CONSUMER, errstr, sizeof errstr);

    assert_non_null(conf);
    assert_conf(conf, "partition.assignment.strategy", "range");
    assert_conf(conf, "enable.auto.offset.store", "false");
    assert_conf(conf, "group.id", cfg->kafka.group);
    assert_conf(conf, "client.id", cfg->instance);
    /* Every node of the stack (three on stack up --kafka-brokers 3), so the
     * clients start even while one of them is down. */
    assert_conf(conf, "bootstrap.servers", cfg->kafka.brokers);
    /* Group liveness and a broker loss (docs/operations.md): a dead worker
     * leaves in 6 s, the survivors hear of it within a 1 s heartbeat. */
    assert_conf(conf, "session.timeout.ms", "6000");
    assert_conf(conf, "heartbeat.interval.ms", "1000");
    rd_kafka_conf_destroy(conf);

    conf = hr_kafka_conf_new(cfg, HR_KAFKA_PRODUCER, errstr, sizeof errstr);
    assert_non_null(conf);
    assert_conf(conf, "enable.idempotence", "true");
    assert_conf(conf, "acks", "-1"); /* librdkafka reads "all" back as -1 */
    rd_kafka_conf_destroy(conf);

    bad.kafka.properties = &kv;
    bad.kafka.nproperties = 1;
    assert_null(hr_kafka_conf_new(&bad, HR_KAFKA_PRODUCER, errstr, sizeof errstr));
    assert_non_null(strstr(errstr, "kafka.properties.no.such.property: "));
}

static void test_produce(void **state)
{
    (void)state;
    delivery d = {0, 0};
    rd_kafka_conf_t *conf = hr_kafka_conf_new(cfg, HR_KAFKA_PRODUCER, errstr, sizeof errstr);
    rd_kafka_t *rk;

    assert_non_null(conf);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_opaque(conf, &d);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (rk == NULL)
        fail_msg("producer: %s", errstr);
    for (int i = 0; i < N_MESSAGES; i++) {
        hr_chunkmsg msg = {
            .task = 1, .seq = i + 1, .count = i, .due_ms = 0, .published_ms = itest_now_ms()};
        char key[64], value[HR_CHUNKMSG_MAX_BYTES];
        int klen = hr_chunkmsg_key(&msg, false, key, sizeof key);
        int vlen = hr_chunkmsg_encode(&msg, value, sizeof value);
        rd_kafka_resp_err_t err = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(cfg->kafka.topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(key, (size_t)klen), RD_KAFKA_V_VALUE(value, (size_t)vlen),
            RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
            fail_msg("produce %d: %s", i, rd_kafka_err2str(err));
        rd_kafka_poll(rk, 0);
    }
    assert_int_equal(rd_kafka_flush(rk, WAIT_MS), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(rk);
    assert_int_equal(d.failed, 0);
    assert_int_equal(d.ok, N_MESSAGES);
}

/* Joins herald-workers on the test topic and polls until WANT messages
 * arrived (then QUIET_MS more, to catch extras) or WAIT_MS passed.
 * SEEN[seq] counts each message; the first STORE get their offsets stored
 * and are marked in STORED. */
static int consume(int want, int store, int quiet_ms, int seen[N_MESSAGES + 1],
                   bool stored[N_MESSAGES + 1])
{
    hr_config group_cfg = *cfg;
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *topics;
    int got = 0;
    int64_t deadline = itest_now_ms() + WAIT_MS, quiet_until = 0;

    group_cfg.kafka.group = "herald-workers";
    conf = hr_kafka_conf_new(&group_cfg, HR_KAFKA_CONSUMER, errstr, sizeof errstr);
    if (conf == NULL)
        fail_msg("consumer conf: %s", errstr);
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (rk == NULL)
        fail_msg("consumer: %s", errstr);
    rd_kafka_poll_set_consumer(rk);
    topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, cfg->kafka.topic, RD_KAFKA_PARTITION_UA);
    assert_int_equal(rd_kafka_subscribe(rk, topics), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(topics);

    while (itest_now_ms() < deadline && (quiet_until == 0 || itest_now_ms() < quiet_until)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        hr_chunkmsg msg;
        if (m == NULL)
            continue;
        if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            print_message("consumer event: %s\n", rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            continue;
        }
        if (hr_chunkmsg_decode(m->payload, m->len, &msg, errstr, sizeof errstr) != 0)
            fail_msg("message at offset %lld: %s", (long long)m->offset, errstr);
        assert_true(msg.seq >= 1 && msg.seq <= N_MESSAGES);
        seen[msg.seq]++;
        if (got < store) {
            rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new(1);
            rd_kafka_topic_partition_list_add(offsets, rd_kafka_topic_name(m->rkt), m->partition)
                ->offset = m->offset + 1;
            assert_int_equal(rd_kafka_offsets_store(rk, offsets), RD_KAFKA_RESP_ERR_NO_ERROR);
            rd_kafka_topic_partition_list_destroy(offsets);
            stored[msg.seq] = true;
        }
        got++;
        if (got == want)
            quiet_until = itest_now_ms() + quiet_ms;
        rd_kafka_message_destroy(m);
    }

    /* __NO_OFFSET: the auto-commit already sent everything stored. */
    rd_kafka_resp_err_t err = rd_kafka_commit(rk, NULL, 0);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
        fail_msg("commit: %s", rd_kafka_err2str(err));
    assert_int_equal(rd_kafka_consumer_close(rk), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(rk);
    return got;
}

static void test_consume_manual_store(void **state)
{
    (void)state;
    int first[N_MESSAGES + 1] = {0}, second[N_MESSAGES + 1] = {0};
    bool stored[N_MESSAGES + 1] = {false}, none[N_MESSAGES + 1] = {false};
    int got;

    got = consume(N_MESSAGES, N_STORED, 0, first, stored);
    assert_int_equal(got, N_MESSAGES);
    for (int seq = 1; seq <= N_MESSAGES; seq++)
        assert_int_equal(first[seq], 1);

    /* Within a partition delivery is in order, so the 60 stored offsets
     * form a prefix of each partition and the rest comes back. */
    got = consume(N_MESSAGES - N_STORED, 0, 3000, second, none);
    assert_int_equal(got, N_MESSAGES - N_STORED);
    for (int seq = 1; seq <= N_MESSAGES; seq++)
        assert_int_equal(second[seq], stored[seq] ? 0 : 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conf),
        cmocka_unit_test(test_produce),
        cmocka_unit_test(test_consume_manual_store),
    };
    int rc;

    cfg = itest_config();
    if (itest_create_topic(cfg) != 0) {
        hr_config_free(cfg);
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    hr_config_free(cfg);
    return rc;
}
