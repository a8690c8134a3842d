/* herald-bench-delivery: what the delivery log costs MariaDB, without the
 * rest of a campaign.  The worker's own reporter (worker/wk_reporter.c) is
 * fed N outcome events of one task, in random uid order (as a chunk's SPOP
 * hands them out), at RATE a second (a worker's pace); the reporter writes
 * them as the worker does, and the MariaDB server's CPU time (utime + stime
 * of PID from /proc) is read before the first event and one second after
 * the reporter stopped (InnoDB's page flushes included).  Used by
 * `bench/run delivery`; not a daemon and not installed.
 *
 *   herald-bench-delivery -c CONFIG TASK N RATE MYSQLD_PID
 *
 * Prints one JSON object: rows pushed, rows the reporter dropped, the
 * wall milliseconds, MariaDB's CPU seconds and CPU microseconds per row,
 * and this process's own CPU (the reporter's thread and, with
 * events.enabled, the events publisher's and librdkafka's: a worker's
 * share of an outcome) over the same span, per row.  Run under callgrind
 * with events on and off, the difference in instructions per row is the
 * worker's cost of an event (docs/performance.md "Issue 30").
 * The caller owns the task row and deletes its push_delivery rows. */
#include <inttypes.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hr_clock.h"
#include "hr_config.h"
#include "wk_metrics.h"
#include "wk_reporter.h"

static double bench_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* utime + stime of PID in seconds, or -1. */
static double bench_cpu_s(long pid)
{
    char path[64], buf[1024], *p;
    unsigned long long ut, st;
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    /* fields 14 and 15 (utime, stime) are the 12th and 13th after ") " */
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* This process's utime + stime in seconds, every thread's. */
static double bench_self_cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void bench_sleep_ms(double ms)
{
    struct timespec d = {(time_t)(ms / 1000), (long)((ms - (time_t)(ms / 1000) * 1000) * 1e6)};

    if (ms > 0)
        nanosleep(&d, NULL);
}

int main(int argc, char **argv)
{
    hr_config *cfg = NULL;
    wk_metrics *met = NULL;
    wk_reporter *rp = NULL;
    uint64_t *uids = NULL;
    char errstr[1024];
    int64_t task, n, rate, due_ms;
    long pid;
    double cpu0, cpu1, self0, self1, t0, ms;
    int rc = 2;

    if (argc != 7 || strcmp(argv[1], "-c") != 0)
        goto usage;
    task = strtoll(argv[3], NULL, 10);
    n = strtoll(argv[4], NULL, 10);
    rate = strtoll(argv[5], NULL, 10);
    pid = strtol(argv[6], NULL, 10);
    if (task <= 0 || n <= 0 || rate <= 0 || pid <= 0)
        goto usage;
    uids = malloc((size_t)n * sizeof *uids);
    if (uids == NULL) {
        snprintf(errstr, sizeof errstr, "out of memory");
        goto fail;
    }
    /* The task's uids (task x 1e9 + 1..N, as bench/run's campaigns) in
     * random order: Fisher-Yates with a fixed seed, so runs compare. */
    srand48(19);
    for (int64_t i = 0; i < n; i++)
        uids[i] = (uint64_t)task * 1000000000u + (uint64_t)i + 1;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(drand48() * (double)(i + 1));
        uint64_t u = uids[i];

        uids[i] = uids[j];
        uids[j] = u;
    }
    if (hr_config_load(argv[2], &cfg, errstr, sizeof errstr) != 0)
        goto fail;
    met = wk_metrics_new(cfg, errstr, sizeof errstr);
    if (met == NULL || wk_reporter_start(cfg, "bench-delivery", WK_REPORTER_ROW_WAIT_MS, met, NULL,
                                         &rp, errstr, sizeof errstr))
        goto fail;
    due_ms = hr_clock_now_ms(); /* the task is due about now: today's partition */
    cpu0 = bench_cpu_s(pid);
    self0 = bench_self_cpu_s();
    t0 = bench_now_ms();
    for (int64_t i = 0; i < n; i++) {
        struct timespec now;
        wk_event ev = {.kind = WK_EVENT_OUTCOME, .task = task};

        clock_gettime(CLOCK_REALTIME, &now);
        ev.u.outcome.uid = uids[i];
        /* The worker's outcomes always name their task's channel (the
         * reporter's per-minute series counts by it). */
        ev.u.outcome.channel = cfg->channels[0].name;
        ev.u.outcome.status = WK_DELIVERY_SENT;
        ev.u.outcome.attempts = 1;
        ev.u.outcome.http_status = 200;
        ev.u.outcome.latency_ms = 3;
        ev.u.outcome.at_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
        ev.u.outcome.due_ms = due_ms;
        wk_reporter_push(rp, &ev);
        /* Pace in steps of 100 events: RATE a second on average. */
        if (i % 100 == 99)
            bench_sleep_ms(t0 + (double)(i + 1) * 1000.0 / (double)rate - bench_now_ms());
    }
    wk_reporter_stop(rp);
    rp = NULL;
    self1 = bench_self_cpu_s();
    ms = bench_now_ms() - t0;
    bench_sleep_ms(1000);
    cpu1 = bench_cpu_s(pid);
    if (cpu0 < 0 || cpu1 < 0) {
        snprintf(errstr, sizeof errstr, "cannot read /proc/%ld/stat", pid);
        goto fail;
    }
    printf("{\"rows\": %" PRId64 ", \"dropped\": %.0f, \"wall_ms\": %.0f, \"mysqld_cpu_s\": %.3f, "
           "\"mysqld_us_per_row\": %.2f, \"self_cpu_s\": %.3f, \"self_us_per_row\": %.2f}\n",
           n,
           hr_metrics_value(met->reporter_dropped[WK_DROP_QUEUE_FULL]) +
               hr_metrics_value(met->reporter_dropped[WK_DROP_REJECTED]),
           ms, cpu1 - cpu0, (cpu1 - cpu0) * 1e6 / (double)n, self1 - self0,
           (self1 - self0) * 1e6 / (double)n);
    rc = 0;
    goto done;
usage:
    fprintf(stderr, "usage: herald-bench-delivery -c CONFIG TASK N RATE MYSQLD_PID\n");
    goto done;
fail:
    fprintf(stderr, "herald-bench-delivery: %s\n", errstr);
    rc = 1;
done:
    wk_reporter_stop(rp);
    wk_metrics_free(met);
    hr_config_free(cfg);
    free(uids);
    return rc;
}
