/* herald-bench-h2push: the HTTP/2 engine alone (worker/send/wk_h2) pushing
 * N APNs-shaped notifications to one endpoint, normally nghttpd serving
 * the device token's file (bench/run h2engine), with S streams in flight
 * over C connections: each completion submits the next push, as the Go
 * peer's goroutines do (bench/peers/apns2).  Every push is a POST of the
 * body file to /3/device/<token> with the headers herald's apns channel
 * sends (authorization, apns-topic, apns-push-type, apns-priority, a
 * fresh apns-id).  Prints one JSON object: pushes, ok, failed, seconds,
 * pushes_per_s, cpu_s and cpu_us_per_push (this process, user + system,
 * from the first submission to the last answer).  Not a daemon, not
 * installed; for instruction counts per push run it under
 *
 *   valgrind --tool=callgrind herald-bench-h2push ... -n N
 *
 * twice (two N) and divide the difference by the difference of N. */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <uv.h>

#include "wk_h2.h"

typedef struct bench {
    wk_h2 *h2;
    char *body;
    size_t body_len;
    char path[256];
    char bearer[512];
    const char *topic;
    size_t n, submitted, done, ok, failed;
    char last_error[200];
} bench;

static double bench_cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static double bench_wall_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void bench_done(void *user, const wk_h2_response *resp);

/* Submits push number b->submitted. */
static int bench_submit(bench *b)
{
    char apns_id[40], err[256];
    uint64_t i = b->submitted;
    wk_h2_nv headers[] = {
        {"authorization", b->bearer, 13, strlen(b->bearer), false},
        {"apns-topic", b->topic, 10, strlen(b->topic), false},
        {"apns-push-type", "alert", 14, 5, false},
        {"apns-priority", "10", 13, 2, false},
        {"apns-id", apns_id, 7, 36, true},
    };
    wk_h2_request rq = {.method = "POST",
                        .path = b->path,
                        .headers = headers,
                        .nheaders = sizeof headers / sizeof *headers,
                        .body = b->body,
                        .body_len = b->body_len,
                        .done = bench_done,
                        .user = b};

    /* A UUID that differs per push, as herald's derived apns-id does
     * (written by hand: snprintf would cost the bench more than the
     * engine's submission). */
    memcpy(apns_id, "00000000-0000-4000-8000-000000000000", 37);
    for (int d = 35; i > 0 && d >= 24; d--, i >>= 4)
        apns_id[d] = "0123456789abcdef"[i & 15];
    if (wk_h2_submit(b->h2, &rq, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "h2push: %s\n", err);
        return -1;
    }
    b->submitted++;
    return 0;
}

static void bench_done(void *user, const wk_h2_response *resp)
{
    bench *b = user;

    b->done++;
    if (resp->err == WK_H2_OK && resp->status == 200) {
        b->ok++;
    } else {
        b->failed++;
        snprintf(b->last_error, sizeof b->last_error, "%s %d %s", wk_h2_err_names[resp->err],
                 resp->status, resp->msg);
    }
    if (b->submitted < b->n)
        bench_submit(b);
}

static int bench_read_file(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    long size;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        if (f != NULL)
            fclose(f);
        return -1;
    }
    *out = malloc((size_t)size + 1);
    *len = *out != NULL ? fread(*out, 1, (size_t)size, f) : 0;
    fclose(f);
    return *out != NULL && *len == (size_t)size ? 0 : -1;
}

static void usage(void)
{
    fprintf(stderr, "usage: herald-bench-h2push -H HOST -p PORT -a CA_FILE -b BODY_FILE "
                    "-k DEVICE_TOKEN -T TOPIC -j JWT [-n PUSHES] [-c CONNECTIONS] "
                    "[-s STREAMS]\n");
}

int main(int argc, char **argv)
{
    bench b = {.n = 100000, .topic = "org.herald.bench"};
    wk_h2_conf conf;
    uv_loop_t loop;
    const char *body_file = NULL, *token = NULL, *jwt = NULL;
    size_t streams = 100;
    double wall0, cpu0, wall, cpu;
    char err[256];
    int opt, rc = 1;

    wk_h2_conf_init(&conf);
    conf.host = "127.0.0.1";
    while ((opt = getopt(argc, argv, "H:p:a:b:k:T:j:n:c:s:")) != -1) {
        switch (opt) {
        case 'H':
            conf.host = optarg;
            break;
        case 'p':
            conf.port = atoi(optarg);
            break;
        case 'a':
            conf.ca_file = optarg;
            break;
        case 'b':
            body_file = optarg;
            break;
        case 'k':
            token = optarg;
            break;
        case 'T':
            b.topic = optarg;
            break;
        case 'j':
            jwt = optarg;
            break;
        case 'n':
            b.n = strtoull(optarg, NULL, 10);
            break;
        case 'c':
            conf.connections = atoi(optarg);
            break;
        case 's':
            streams = strtoull(optarg, NULL, 10);
            break;
        default:
            usage();
            return 2;
        }
    }
    if (body_file == NULL || token == NULL || jwt == NULL || b.n == 0 || streams == 0) {
        usage();
        return 2;
    }
    if (bench_read_file(body_file, &b.body, &b.body_len) != 0) {
        fprintf(stderr, "h2push: cannot read %s\n", body_file);
        return 2;
    }
    snprintf(b.path, sizeof b.path, "/3/device/%s", token);
    snprintf(b.bearer, sizeof b.bearer, "bearer %s", jwt);
    conf.keep[0] = "apns-id";
    conf.nkeep = 1;
    conf.max_requests = streams;
    signal(SIGPIPE, SIG_IGN);
    uv_loop_init(&loop);
    if (wk_h2_new(&loop, &conf, &b.h2, err, sizeof err) != 0) {
        fprintf(stderr, "h2push: %s\n", err);
        goto out;
    }
    wall0 = bench_wall_s();
    cpu0 = bench_cpu_s();
    while (b.submitted < streams && b.submitted < b.n)
        if (bench_submit(&b) != 0)
            goto out;
    while (b.done < b.n && uv_run(&loop, UV_RUN_ONCE) != 0)
        ;
    wall = bench_wall_s() - wall0;
    cpu = bench_cpu_s() - cpu0;
    printf("{\"pushes\": %zu, \"ok\": %zu, \"failed\": %zu, \"connections\": %d, \"streams\": %zu, "
           "\"seconds\": %.3f, \"pushes_per_s\": %.0f, \"cpu_s\": %.3f, "
           "\"cpu_us_per_push\": %.2f}\n",
           b.done, b.ok, b.failed, conf.connections, streams, wall, b.done / wall, cpu,
           cpu * 1e6 / (double)(b.done ? b.done : 1));
    if (b.failed > 0)
        fprintf(stderr, "h2push: %zu failed, the last: %s\n", b.failed, b.last_error);
    rc = b.ok == b.n ? 0 : 1;
out:
    wk_h2_free(b.h2);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free(b.body);
    return rc;
}
