/* Unit tests of wk_metrics: the families render (the per-channel ones with
 * their channel), and librdkafka statistics become the consumer-lag gauge
 * and the Kafka health flag. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "wk_metrics.h"

/* Two partitions assigned (lags 5 and 2), one with an unknown lag, one not
 * assigned (lag 100), and the UA partition -1. */
static const char t_stats_up[] =
    "{\"name\":\"rdkafka#consumer-1\",\"brokers\":{\"b1\":{\"state\":\"UP\"},"
    "\"b2\":{\"state\":\"DOWN\"}},\"topics\":{\"t\":{\"partitions\":{"
    "\"0\":{\"desired\":true,\"consumer_lag\":5},"
    "\"1\":{\"desired\":true,\"consumer_lag\":2},"
    "\"2\":{\"desired\":true,\"consumer_lag\":-1},"
    "\"3\":{\"desired\":false,\"consumer_lag\":100},"
    "\"-1\":{\"desired\":false,\"consumer_lag\":-1}}}}}";

static const char t_stats_down[] = "{\"brokers\":{\"b1\":{\"state\":\"CONNECT\"}},\"topics\":{}}";

static wk_metrics *t_new(hr_config *cfg, hr_channel *ch)
{
    char errstr[256];
    wk_metrics *m;

    memset(cfg, 0, sizeof *cfg);
    memset(ch, 0, sizeof *ch);
    ch->name = "webhook";
    cfg->channels = ch;
    cfg->nchannels = 1;
    m = wk_metrics_new(cfg, errstr, sizeof errstr);
    assert_non_null(m);
    return m;
}

static void test_kafka_stats(void **state)
{
    hr_config cfg;
    hr_channel ch;
    wk_metrics *m = t_new(&cfg, &ch);
    hr_buf out;

    (void)state;
    hr_buf_init(&out, 1 << 20);
    assert_int_equal(wk_metrics_kafka_stats(m, t_stats_up, strlen(t_stats_up)), 0);
    assert_true(atomic_load(&m->kafka_ok));
    assert_int_equal(atomic_load(&m->kafka_lag_sum), 7);
    assert_int_equal(hr_metrics_render(m->reg, &out), 0);
    assert_int_equal(hr_buf_append(&out, "", 1), 0);
    assert_non_null(strstr(out.data, "\nherald_kafka_consumer_lag 7\n"));

    assert_int_equal(wk_metrics_kafka_stats(m, t_stats_down, strlen(t_stats_down)), 0);
    assert_false(atomic_load(&m->kafka_ok));
    assert_int_equal(atomic_load(&m->kafka_lag_sum), 0);
    assert_int_equal(wk_metrics_kafka_stats(m, "{not json", 9), -1);
    hr_buf_free(&out);
    wk_metrics_free(m);
}

static void test_children_render(void **state)
{
    hr_config cfg;
    hr_channel ch;
    wk_metrics *m = t_new(&cfg, &ch);
    hr_buf out;

    (void)state;
    hr_buf_init(&out, 1 << 20);
    hr_metrics_inc(m->chans[0].sent);
    hr_metrics_add(m->chans[0].throttled, 3);
    hr_metrics_inc(m->backend_errors[WK_BACKEND_HTTP]);
    hr_metrics_inc(m->bad[WK_BAD_DECODE]);
    assert_int_equal(hr_metrics_render(m->reg, &out), 0);
    assert_int_equal(hr_buf_append(&out, "", 1), 0);
    assert_non_null(
        strstr(out.data, "herald_pushes_total{channel=\"webhook\",outcome=\"sent\"} 1\n"));
    assert_non_null(
        strstr(out.data, "herald_pushes_total{channel=\"webhook\",outcome=\"throttled\"} 3\n"));
    assert_non_null(strstr(out.data, "herald_backend_errors_total{backend=\"http\"} 1\n"));
    assert_non_null(strstr(out.data, "herald_bad_messages_total{reason=\"decode\"} 1\n"));
    assert_non_null(strstr(out.data, "# TYPE herald_push_latency_seconds histogram\n"));
    hr_buf_free(&out);
    wk_metrics_free(m);
}

/* Issue 27: herald_addresses_pruned_total carries its channel, as
 * docs/providers.md says (it had no label). */
static void test_pruned_by_channel(void **state)
{
    hr_config cfg;
    hr_channel ch[2];
    char errstr[256];
    wk_metrics *m;
    hr_buf out;

    (void)state;
    memset(&cfg, 0, sizeof cfg);
    memset(ch, 0, sizeof ch);
    ch[0].name = "fcm";
    ch[1].name = "apns";
    cfg.channels = ch;
    cfg.nchannels = 2;
    m = wk_metrics_new(&cfg, errstr, sizeof errstr);
    assert_non_null(m);
    hr_buf_init(&out, 1 << 20);
    hr_metrics_add(m->chans[0].pruned, 2);
    assert_int_equal(hr_metrics_render(m->reg, &out), 0);
    assert_int_equal(hr_buf_append(&out, "", 1), 0);
    assert_non_null(strstr(out.data, "\nherald_addresses_pruned_total{channel=\"fcm\"} 2\n"));
    assert_non_null(strstr(out.data, "\nherald_addresses_pruned_total{channel=\"apns\"} 0\n"));
    assert_null(strstr(out.data, "\nherald_addresses_pruned_total "));
    hr_buf_free(&out);
    wk_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kafka_stats),
        cmocka_unit_test(test_children_render),
        cmocka_unit_test(test_pruned_by_channel),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
