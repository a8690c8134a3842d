/* herald-bench-redis: times herald's Redis client on the worker's per-uid
 * read, HGETALL user:<uid>, against the configured Redis (one server or a
 * cluster).  Used for the single-node before/after figure of the cluster
 * layer (docs/performance.md, "Redis client"); not a daemon and not
 * installed.
 *
 *   herald-bench-redis -c CONFIG [-n COMMANDS] [-r ROUNDS] [-s SINGLE]
 *
 * Each round queues COMMANDS (100,000) HGETALL of uids 1..COMMANDS in one
 * hr_pipe, executes it and takes every reply; then SINGLE (20,000) of them
 * are sent one hr_redis_cmd at a time.  The keys are read, never written
 * (missing users answer an empty hash), so nothing needs cleaning up.
 * Prints one JSON object: the best and the median round of each. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hr_config.h"
#include "hr_pipe.h"
#include "hr_redis.h"

#define BENCH_ROUNDS_MAX 50

static double bench_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* One pipeline of N HGETALL; its milliseconds, or -1 with ERRSTR. */
static double bench_pipe(hr_redis *r, hr_pipe *pipe, long n, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX], uid[24];
    const char *argv[] = {"HGETALL", key};
    double t0 = bench_now_ms();

    hr_pipe_reset(pipe);
    for (long i = 1; i <= n; i++) {
        snprintf(uid, sizeof uid, "%ld", i);
        if (hr_key_user(hr_redis_prefix(r), key, sizeof key, uid) == NULL ||
            hr_pipe_cmd(pipe, 2, argv, NULL) != 0) {
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
    }
    if (hr_pipe_exec(pipe, errstr, errlen) != 0)
        return -1;
    for (long i = 0; i < n; i++) {
        redisReply *reply = hr_pipe_reply(pipe, (size_t)i, errstr, errlen);
        if (reply == NULL)
            return -1;
        freeReplyObject(reply);
    }
    return bench_now_ms() - t0;
}

/* N single HGETALL; their milliseconds, or -1 with ERRSTR. */
static double bench_single(hr_redis *r, long n, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX], uid[24];
    const char *argv[] = {"HGETALL", key};
    double t0 = bench_now_ms();

    for (long i = 1; i <= n; i++) {
        snprintf(uid, sizeof uid, "%ld", i);
        hr_key_user(hr_redis_prefix(r), key, sizeof key, uid);
        redisReply *reply = hr_redis_cmd(r, errstr, errlen, 2, argv, NULL);
        if (reply == NULL)
            return -1;
        freeReplyObject(reply);
    }
    return bench_now_ms() - t0;
}

int main(int argc, char **argv)
{
    const char *path = getenv("HERALD_CONFIG");
    hr_config *cfg = NULL;
    hr_redis *r = NULL;
    hr_pipe *pipe = NULL;
    double piped[BENCH_ROUNDS_MAX], single[BENCH_ROUNDS_MAX];
    long n = 100000, nsingle = 20000, rounds = 7;
    char errstr[1024];
    int opt, rc = 1;

    while ((opt = getopt(argc, argv, "c:n:r:s:")) != -1) {
        if (opt == 'c')
            path = optarg;
        else if (opt == 'n')
            n = strtol(optarg, NULL, 10);
        else if (opt == 'r')
            rounds = strtol(optarg, NULL, 10);
        else if (opt == 's')
            nsingle = strtol(optarg, NULL, 10);
        else
            goto usage;
    }
    if (path == NULL || optind != argc || n < 1 || nsingle < 1 || rounds < 1 ||
        rounds > BENCH_ROUNDS_MAX)
        goto usage;
    if (hr_config_load(path, &cfg, errstr, sizeof errstr) != 0 ||
        hr_redis_connect(cfg, &r, errstr, sizeof errstr) != 0)
        goto fail;
    pipe = hr_pipe_new(r);
    if (pipe == NULL) {
        snprintf(errstr, sizeof errstr, "out of memory");
        goto fail;
    }
    for (long i = 0; i < rounds; i++) {
        piped[i] = bench_pipe(r, pipe, n, errstr, sizeof errstr);
        single[i] = piped[i] < 0 ? -1 : bench_single(r, nsingle, errstr, sizeof errstr);
        if (piped[i] < 0 || single[i] < 0)
            goto fail;
    }
    qsort(piped, (size_t)rounds, sizeof piped[0], bench_cmp);
    qsort(single, (size_t)rounds, sizeof single[0], bench_cmp);
    printf("{\"cluster\": %s, \"commands\": %ld, \"rounds\": %ld, \"pipe_best_ms\": %.1f, "
           "\"pipe_median_ms\": %.1f, \"single\": %ld, \"single_best_ms\": %.1f, "
           "\"single_median_ms\": %.1f}\n",
           cfg->redis.cluster ? "true" : "false", n, rounds, piped[0], piped[rounds / 2], nsingle,
           single[0], single[rounds / 2]);
    rc = 0;
    goto done;
usage:
    fprintf(stderr, "usage: herald-bench-redis -c CONFIG [-n COMMANDS] [-r ROUNDS] [-s SINGLE]\n");
    return 2;
fail:
    fprintf(stderr, "herald-bench-redis: %s\n", errstr);
done:
    hr_pipe_free(pipe);
    hr_redis_free(r);
    hr_config_free(cfg);
    return rc;
}
