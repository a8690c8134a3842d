/* herald-worker: consumes chunk messages and pushes their recipients
 * (see wk_worker.h).  Usage: herald-worker [-c CONFIG] [--listen HOST:PORT]
 * (--help and --version print on stdout and exit 0);
 * the config path defaults to $HERALD_CONFIG, --listen overrides
 * worker.listen (the metrics endpoint) so two workers can share a host.
 * Exit status: 0 after a clean stop, 1 on a startup failure (including a
 * listen address in use), 2 on a bad command line or configuration (the
 * command line is hr_main's). */
#include <curl/curl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_insecure.h"
#include "hr_log.h"
#include "hr_main.h"
#include "wk_worker.h"

/* One startup warning per insecure setting (hr_insecure.h); the gauge is
 * wk_metrics.c's. */
static void warn_insecure(void *ctx, const char *setting, const char *detail)
{
    (void)ctx;
    hr_log_warn("insecure_setting", "setting=%s detail=%s", setting, detail);
}

/* --listen ADDR: kept in CTX (a const char *) until the config is loaded. */
static int wk_main_option(void *ctx, int val, const char *arg)
{
    if (val != 'l')
        return -1;
    *(const char **)ctx = arg;
    return 0;
}

#define WK_MMAP_THRESHOLD (128 * 1024) /* glibc's default, kept fixed (main) */

int main(int argc, char **argv)
{
    static const struct option extra[] = {
        {"listen", required_argument, NULL, 'l'},
        {NULL, 0, NULL, 0},
    };
    const char *listen = NULL;
    const hr_main_spec spec = {
        .name = "herald-worker",
        .version = HR_VERSION,
        .synopsis = " [--listen HOST:PORT]",
        .about = "Consumes chunk messages from Kafka and pushes their recipients.\n",
        .options_mid = "  -l, --listen ADDR    metrics endpoint, overrides worker.listen\n",
        .stopped = "a clean stop",
        .extra = extra,
        .extra_short = "l:",
        .option = wk_main_option,
        .ctx = &listen,
    };
    hr_config *cfg = NULL;
    wk_worker *w = NULL;
    char errstr[1024];
    int rc = hr_main_start(&spec, argc, argv, &cfg);

    if (rc >= 0)
        return rc;
    rc = 1;
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
