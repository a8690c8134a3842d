/* herald-bench-sendpath: the worker's sender alone (the send wing,
 * worker/send/: wk_sender and what it calls — wk_chan, a transport (wk_curl
 * and its libuv adapter wk_curl_uv with wk_xfer, or HTTP/2: wk_h2send,
 * wk_stream, wk_h2), rendering)
 * pushing N recipients of one in-memory task through one channel, with no
 * Kafka, MySQL or chunk bookkeeping around it.  Not a daemon, not
 * installed; for instruction and syscall counts per push that do not
 * depend on the machine's load:
 *
 *   valgrind --tool=callgrind herald-bench-sendpath -c CONFIG -n N
 *   strace -c -f herald-bench-sendpath -c CONFIG -n N
 *
 * Run it twice (two N) and divide the difference by the difference of N:
 * start-up cost drops out.  The channel (-C, default the config's first)
 * must point at a server that answers, normally bench/sink.c.  Redis is
 * the config's (the sender reads the channel's cluster slow-down and its
 * rate limit from it, through the worker's Redis thread, wk_redis).  Pushes are submitted in chunks of 5,000 (-k), the
 * next one when the previous chunk is done, as a worker with one chunk
 * open would; the title and body are bench/run's.  A channel that pushes
 * to addresses (apns, fcm, smtp) gives every recipient the one address -a
 * (an apns channel against nghttpd: bench/run's device token).  Prints
 * one JSON object: pushes, delivered, failed, ms. */
#include <curl/curl.h>
#include <getopt.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "hr_config.h"
#include "hr_log.h"
#include "hr_redis.h"
#include "wk_metrics.h"
#include "wk_redis.h"
#include "wk_sender.h"
#include "wk_task.h"

typedef struct bench {
    wk_sender *s;
    wk_task *wt;
    wk_push *pushes;
    char (*uids)[24];
    hr_addr addr; /* every push's one address (-a), for an addressed channel */
    size_t n, chunk, submitted, settled, delivered, failed;
} bench;

static double bench_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Submits the next chunk of pushes; the sender starts them on the kick. */
static void bench_submit(bench *b)
{
    size_t end = b->submitted + b->chunk < b->n ? b->submitted + b->chunk : b->n;

    for (; b->submitted < end; b->submitted++) {
        wk_push *push = &b->pushes[b->submitted];

        push->task = b->wt;
        push->uid = b->uids[b->submitted];
        if (b->addr.address != NULL) {
            push->addrs = &b->addr;
            push->naddrs = 1;
        }
        wk_sender_submit(b->s, push);
    }
}

static void bench_done(void *ctx, wk_push *push, const wk_push_result *res)
{
    bench *b = ctx;

    (void)push;
    b->settled++;
    if (res->delivered)
        b->delivered++;
    else
        b->failed++;
    /* The callback may submit: the sender re-reads its queues after it. */
    if (b->settled == b->submitted && b->submitted < b->n)
        bench_submit(b);
    if (b->settled == b->n)
        wk_sender_drain(b->s);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *channel = NULL;
    hr_config *cfg = NULL;
    hr_redis *r = NULL;
    wk_redis *rd = NULL;
    wk_metrics *m = NULL;
    hr_task *row = NULL;
    uv_loop_t loop;
    bench b = {.n = 10000, .chunk = 5000};
    char errstr[1024];
    double t0, ms;
    int opt, rc = 2;

    while ((opt = getopt(argc, argv, "c:C:n:k:a:")) != -1) {
        if (opt == 'c')
            path = optarg;
        else if (opt == 'C')
            channel = optarg;
        else if (opt == 'n')
            b.n = strtoul(optarg, NULL, 10);
        else if (opt == 'k')
            b.chunk = strtoul(optarg, NULL, 10);
        else if (opt == 'a')
            b.addr.address = optarg;
        else
            goto usage;
    }
    if (path == NULL || optind != argc || b.n == 0 || b.chunk == 0)
        goto usage;
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    uv_loop_init(&loop);
    if (hr_config_load(path, &cfg, errstr, sizeof errstr) != 0 ||
        hr_redis_connect(cfg, &r, errstr, sizeof errstr) != 0 ||
        wk_redis_start(&loop, r, &rd, errstr, sizeof errstr) != 0)
        goto fail;
    r = NULL; /* the worker's Redis thread's now, as in herald-worker */
    if ((m = wk_metrics_new(cfg, errstr, sizeof errstr)) == NULL)
        goto fail;
    hr_log_setup(cfg->log.level, cfg->log.format, cfg->instance);
    row = calloc(1, sizeof *row);
    b.pushes = calloc(b.n, sizeof *b.pushes);
    b.uids = calloc(b.n, sizeof *b.uids);
    if (row == NULL || b.pushes == NULL || b.uids == NULL) {
        snprintf(errstr, sizeof errstr, "out of memory");
        goto fail;
    }
    row->id = 1;
    row->name = strdup("sendpath");
    row->topic = strdup("bench");
    row->channel = strdup(channel != NULL ? channel : cfg->channels[0].name);
    row->title = strdup("Your reminder");
    row->body = strdup("Hello {{uid}}, the live show starts now");
    row->lease_until_ms = row->ttl_s = row->finish_ms = row->expire_ms = -1;
    row->chunk_size = (int64_t)b.chunk;
    /* wk_task_build takes ROW over, built or not. */
    opt = wk_task_build(cfg, row, NULL, &b.wt, errstr, sizeof errstr);
    row = NULL;
    if (opt != 0)
        goto fail;
    for (size_t i = 0; i < b.n; i++)
        snprintf(b.uids[i], sizeof b.uids[i], "%" PRIu64, (uint64_t)1000000001 + i);
    if (wk_sender_new(&loop, cfg, rd, m, bench_done, &b, &b.s, errstr, sizeof errstr) != 0)
        goto fail;
    t0 = bench_now_ms();
    bench_submit(&b);
    wk_sender_kick(b.s);
    while (b.settled < b.n && uv_run(&loop, UV_RUN_ONCE) != 0)
        ;
    ms = bench_now_ms() - t0;
    printf("{\"pushes\": %zu, \"delivered\": %zu, \"failed\": %zu, \"ms\": %.1f}\n", b.settled,
           b.delivered, b.failed, ms);
    rc = b.settled == b.n && b.failed == 0 ? 0 : 1;
    wk_sender_close(b.s);
    wk_redis_close(rd);
    uv_run(&loop, UV_RUN_DEFAULT);
    wk_sender_free(b.s);
    goto done;
usage:
    fprintf(stderr,
            "usage: herald-bench-sendpath -c CONFIG [-C CHANNEL] [-n N] [-k CHUNK] [-a ADDRESS]\n");
    return 2;
fail:
    fprintf(stderr, "herald-bench-sendpath: %s\n", errstr);
done:
    /* The Redis thread's wake-up handle goes once its jobs answered. */
    wk_redis_close(rd);
    uv_run(&loop, UV_RUN_DEFAULT);
    wk_redis_free(rd);
    uv_loop_close(&loop);
    hr_task_free(row);
    wk_task_free(b.wt);
    free(b.pushes);
    free(b.uids);
    wk_metrics_free(m);
    hr_redis_free(r);
    hr_config_free(cfg);
    curl_global_cleanup();
    return rc;
}
