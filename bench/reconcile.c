/* herald-bench-reconcile: times hr_subs_sync, the sync the dispatcher's
 * scanner runs before due and its owner after the claim (dispatcher/
 * dsp_reconcile.c), on an existing task's subscriptions.  Used by
 * `bench/run reconcile`; not a daemon and not installed.
 *
 *   herald-bench-reconcile -c CONFIG TASK full|delta
 *
 * full: drops the synced mark first, so the sync reads every row (what a
 * Redis that lost the set costs); delta: reads the rows added since the
 * last sync (the usual case).  Prints one JSON object: the rows read, the
 * members added and the milliseconds. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hr_config.h"
#include "hr_mysql.h"
#include "hr_redis.h"
#include "hr_subs.h"

static double bench_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    const char *path = getenv("HERALD_CONFIG");
    hr_config *cfg = NULL;
    hr_mysql *m = NULL;
    hr_redis *r = NULL;
    char errstr[1024];
    hr_subs_refill_opts o = {.token = "bench-reconcile", .lock_ms = 600000, .batch = 10000};
    int64_t task, added = 0, seen = 0;
    double t0, ms;
    int opt, rc = 2;
    bool full;

    while ((opt = getopt(argc, argv, "c:")) != -1) {
        if (opt != 'c')
            goto usage;
        path = optarg;
    }
    if (path == NULL || argc - optind != 2)
        goto usage;
    task = strtoll(argv[optind], NULL, 10);
    full = strcmp(argv[optind + 1], "full") == 0;
    if (task <= 0 || (!full && strcmp(argv[optind + 1], "delta") != 0))
        goto usage;
    if (hr_config_load(path, &cfg, errstr, sizeof errstr) != 0 ||
        hr_mysql_connect(cfg, &m, errstr, sizeof errstr) != 0 ||
        hr_redis_connect(cfg, &r, errstr, sizeof errstr) != 0)
        goto fail;
    o.batch = cfg->dispatcher.refill_batch;
    if (full && hr_subs_forget_synced(r, task, errstr, sizeof errstr) != 0)
        goto fail;
    t0 = bench_now_ms();
    rc = hr_subs_sync(m, r, task, &o, false, &added, &seen, errstr, sizeof errstr);
    ms = bench_now_ms() - t0;
    if (rc != HR_SUBS_DONE) {
        if (rc > 0)
            snprintf(errstr, sizeof errstr, "%s", hr_subs_result_str(rc));
        goto fail;
    }
    printf("{\"task\": %lld, \"mode\": \"%s\", \"read\": %lld, \"added\": %lld, "
           "\"ms\": %.1f}\n",
           (long long)task, full ? "full" : "delta", (long long)seen, (long long)added, ms);
    rc = 0;
    goto done;
usage:
    fprintf(stderr, "usage: herald-bench-reconcile -c CONFIG TASK full|delta\n");
    return 2;
fail:
    fprintf(stderr, "herald-bench-reconcile: %s\n", errstr);
    rc = 1;
done:
    hr_redis_free(r);
    hr_mysql_free(m);
    hr_config_free(cfg);
    return rc;
}
