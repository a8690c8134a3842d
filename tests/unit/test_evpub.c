/* Unit tests of hr_evpub's path for events Kafka did not take, with no
 * broker at all (a closed port, message.timeout.ms 300): the publisher
 * produces from a buffer it reuses and librdkafka copies the value, so an
 * event whose report failed is kept from the report's message and produced
 * again from that copy (hr_evpub_retry), again and again while it fails;
 * it stays held, the watermark does not pass it, and the stop counts it
 * lost.  Under ASan/LSan the copies are checked for leaks and use after
 * free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hr_config.h"
#include "hr_evpub.h"

static const char config[] = "kafka:\n"
                             "  brokers: 127.0.0.1:1\n"
                             "  properties: {message.timeout.ms: \"300\", log_level: \"0\"}\n"
                             "events: {enabled: true, topic: evpub.test}\n"
                             "channels:\n"
                             "  webhook:\n"
                             "    url: http://127.0.0.1:9099/push\n";

static void test_failed_reports_held_and_retried(void **state)
{
    hr_config *cfg = NULL;
    hr_evpub *p = NULL;
    hr_evpub_stats st;
    char err[512];
    uint64_t lost = 0;

    (void)state;
    assert_int_equal(
        hr_config_load_buffer("evpub.yaml", config, sizeof config - 1, &cfg, err, sizeof err), 0);
    assert_int_equal(hr_evpub_new(cfg, NULL, &p, err, sizeof err), 0);
    for (uint64_t uid = 1; uid <= 3; uid++) {
        hr_event ev = {.type = HR_EVENT_SENT, .task = 7, .uid = uid, .channel = "webhook"};

        assert_int_equal(hr_evpub_publish(p, &ev), uid);
    }
    /* Each report fails (timed out), the event goes again from its copy,
     * and fails again: wait for two retries of each, at most 15 s. */
    for (int i = 0; i < 150; i++) {
        hr_evpub_retry(p);
        hr_evpub_stats_get(p, &st);
        if (st.retried >= 6)
            break;
        usleep(100 * 1000);
    }
    hr_evpub_stats_get(p, &st);
    assert_true(st.retried >= 6);
    assert_int_equal(st.held, 3);
    assert_int_equal(st.published, 0);
    assert_int_equal(st.lost, 0);
    assert_int_equal(hr_evpub_confirmed(p), 0);
    assert_int_equal(hr_evpub_wait(p, 1, 50), -1);
    hr_evpub_free(p, 0, &lost);
    assert_int_equal(lost, 3);
    hr_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_reports_held_and_retried),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
