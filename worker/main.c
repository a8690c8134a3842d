/* herald-worker: consumes chunk messages and pushes their recipients
 * (see wk_worker.h).  Usage: herald-worker [-c CONFIG] [--listen HOST:PORT]
 * (--help and --version print on stdout and exit 0);
 * the config path defaults to $HERALD_CONFIG, --listen overrides
 * worker.listen (the metrics endpoint) so two workers can share a host.
 * Exit status: 0 after a clean stop, 1 on a startup failure (including a
 * listen address in use), 2 on a bad command line or configuration. */
#include <curl/curl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hr_config.h"
#include "hr_insecure.h"
#include "hr_log.h"
#include "wk_worker.h"

/* One startup warning per insecure setting (hr_insecure.h); the gauge is
 * wk_metrics.c's. */
static void warn_insecure(void *ctx, const char *setting, const char *detail)
{
    (void)ctx;
    hr_log_warn("insecure_setting", "setting=%s detail=%s", setting, detail);
}

/* On stdout for --help, on stderr after a bad command line. */
static void usage(FILE *out)
{
    fprintf(out, "usage: herald-worker [-c CONFIG] [--listen HOST:PORT]\n"
                 "Consumes chunk messages from Kafka and pushes their recipients.\n"
                 "\n"
                 "  -c, --config CONFIG  configuration file (default: $HERALD_CONFIG)\n"
                 "  -l, --listen ADDR    metrics endpoint, overrides worker.listen\n"
                 "  -h, --help           show this help\n"
                 "  -V, --version        show the version\n"
                 "\n"
                 "Exit status: 0 after a clean stop, 1 on a startup failure, 2 on a bad\n"
                 "command line or configuration.\n");
}

#define WK_MMAP_THRESHOLD (128 * 1024) /* glibc's default, kept fixed (main) */

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"listen", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *path = getenv("HERALD_CONFIG"), *listen = NULL;
    hr_config *cfg = NULL;
    wk_worker *w = NULL;
    char errstr[1024];
    int opt, rc = 1;

    while ((opt = getopt_long(argc, argv, "c:l:hV", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'l':
            listen = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("herald-worker %s\n", HR_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "herald-worker: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (path == NULL || *path == '\0') {
        fprintf(stderr, "herald-worker: no configuration: give -c CONFIG or set HERALD_CONFIG\n");
        usage(stderr);
        return 2;
    }
    if (hr_config_load(path, &cfg, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "%s\n", errstr);
        return 2;
    }
    if (listen != NULL) {
        char *copy = strdup(listen);

        if (copy == NULL) {
            fprintf(stderr, "out of memory\n");
            hr_config_free(cfg);
            return 2;
        }
        free(cfg->worker.listen);
        cfg->worker.listen = copy;
    }
    hr_log_setup(cfg->log.level, cfg->log.format, cfg->instance);
    hr_insecure_each(cfg, warn_insecure, NULL);
    /* Blocks of 128 KiB or more always come from mmap and go back to the
     * system when freed.  glibc raises that threshold each time such a block
     * is freed, after which those sizes come from the threads' arenas and
     * their freed pages stay: a worker's RSS grew 1.8 MB after a Kafka
     * outage (librdkafka's fetch buffers: 2.4 MB of its arena, 96 kB in
     * use) and kept it for good; with the threshold fixed 0.15 MB
     * (docs/reliability.md, "The soak").  An operator's
     * MALLOC_MMAP_THRESHOLD_ wins. */
    if (getenv("MALLOC_MMAP_THRESHOLD_") == NULL)
        mallopt(M_MMAP_THRESHOLD, WK_MMAP_THRESHOLD);
    /* A peer closing a connection must not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        hr_log_error("startup_failed", "error=%s", "curl_global_init failed");
        goto done;
    }
    if (wk_worker_new(cfg, &w, errstr, sizeof errstr) != 0 ||
        wk_worker_run(w, errstr, sizeof errstr) != 0) {
        hr_log_error("startup_failed", "error=%s", errstr);
        goto done;
    }
    rc = 0;
done:
    wk_worker_free(w);
    curl_global_cleanup();
    hr_config_free(cfg);
    return rc;
}
