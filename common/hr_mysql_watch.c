/* hr_mysql_watch: how long MySQL calls take, for the daemon's metrics.
 *
 * hr_mysql times each call and hands it here (hr_mysql_watch_note) with
 * what this needs of the connection (the server, whether the timeout
 * ended it), so the watch knows nothing of hr_mysql and calls nothing in
 * it.  Its state is process-wide: written by hr_mysql_watch before the
 * daemon's threads start (ON stored last), read by every thread after;
 * the slow hook's rate limit and its count of suppressed calls are
 * atomics, as several threads meet a stalled server at once. */
#include "hr_mysql_watch.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "hr_clock.h"
#include "hr_log.h"

/* Call latency, seconds: up to the timeout's range. */
static const double hr_mysql_seconds_buckets[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
                                                  1,     2,     5,    10,   30,  60};

/* The watch (hr_mysql_watch): ON is stored last, after the rest. */
static struct {
    atomic_bool on;
    hr_metrics_child *seconds, *slow, *timeouts;
    hr_mysql_slow_fn hook;
    atomic_int_fast64_t hooked_ms;   /* monotonic: the last hook call */
    atomic_uint_fast64_t suppressed; /* slow calls since, not handed over */
} hr_mysql_watched;

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

void hr_mysql_slow_log(const hr_mysql_slow *slow)
{
    hr_log_warn(slow->timed_out ? "mysql_timeout" : "mysql_slow",
                "mysql=%s:%u ms=%" PRId64 " suppressed=%" PRIu64 " sql=%.80s", slow->host,
                slow->port, slow->ms, (uint64_t)slow->suppressed, slow->sql);
}

void hr_mysql_watch_note(const char *sql, const char *host, unsigned port, int64_t ms,
                         bool timed_out)
{
    int64_t now, last;

    if (!atomic_load(&hr_mysql_watched.on))
        return;
    hr_metrics_observe(hr_mysql_watched.seconds, (double)ms / 1000.0);
    if (ms < HR_MYSQL_SLOW_MS && !timed_out)
        return;
    hr_metrics_inc(hr_mysql_watched.slow);
    if (timed_out)
        hr_metrics_inc(hr_mysql_watched.timeouts);
    if (hr_mysql_watched.hook == NULL)
        return;
    /* One hook call a second at most: a stalled server makes every thread's
     * calls slow at once. */
    now = hr_clock_mono_ms();
    last = atomic_load(&hr_mysql_watched.hooked_ms);
    if ((last != 0 && now - last < 1000) ||
        !atomic_compare_exchange_strong(&hr_mysql_watched.hooked_ms, &last, now)) {
        atomic_fetch_add(&hr_mysql_watched.suppressed, 1);
        return;
    }
    hr_mysql_watched.hook(
        &(hr_mysql_slow){.sql = sql,
                         .host = host,
                         .port = port,
                         .ms = ms,
                         .timed_out = timed_out,
                         .suppressed = atomic_exchange(&hr_mysql_watched.suppressed, 0)});
}
