/* hr_mysql_watch: the MySQL calls' latency, slow calls and timeouts (see hr_mysql_watch.h). */
#include "hr_mysql_watch.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

/* Call latency, seconds: up to the timeout's range. */
static const double hr_mysql_seconds_buckets[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
                                                  1,     2,     5,    10,   30,  60};

struct hr_mysql_watched hr_mysql_watched;

int hr_mysql_watch(hr_metrics *reg, hr_mysql_slow_fn slow, char *errstr, size_t errlen)
{
    hr_metrics_family *seconds, *slow_calls, *timeouts;
    const hr_metrics_spec specs[] = {
        {&seconds, "herald_mysql_call_seconds",
         "MySQL calls (statements, BEGIN, COMMIT; each attempt), by how long they took",
         HR_METRICS_HISTOGRAM, NULL, HR_METRICS_BUCKETS(hr_mysql_seconds_buckets)},
        {&slow_calls, "herald_mysql_slow_calls_total",
         "MySQL calls that took a second or more (those the timeout ended included)",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&timeouts, "herald_mysql_timeouts_total",
         "MySQL calls that mysql.timeout_s ended (the server did not answer in time)",
         HR_METRICS_COUNTER, NULL, NULL, 0},
    };

    atomic_store(&hr_mysql_watched.on, false);
    if (reg == NULL)
        return 0;
    if (hr_metrics_register(reg, specs, sizeof specs / sizeof specs[0], errstr, errlen) < 0)
        return -1;
    hr_mysql_watched.seconds = hr_metrics_labels(seconds, NULL);
    hr_mysql_watched.slow = hr_metrics_labels(slow_calls, NULL);
    hr_mysql_watched.timeouts = hr_metrics_labels(timeouts, NULL);
    hr_mysql_watched.hook = slow;
    atomic_store(&hr_mysql_watched.hooked_ms, 0);
    atomic_store(&hr_mysql_watched.suppressed, 0);
    atomic_store(&hr_mysql_watched.on, true);
    return 0;
}

const char *hr_mysql_slow_fields(const hr_mysql_slow *slow, char *buf, size_t len)
{
    snprintf(buf, len, "mysql=%s:%u ms=%" PRId64 " suppressed=%" PRIu64 " sql=%.80s", slow->host,
             slow->port, slow->ms, (uint64_t)slow->suppressed, slow->sql);
    return slow->timed_out ? "mysql_timeout" : "mysql_slow";
}

