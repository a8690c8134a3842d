/* herald-hooks: delivers the events topic to signed event webhooks.
 *
 *   herald-hooks [-c CONFIG]      (default $HERALD_CONFIG)
 *   herald-hooks --help | --version   (on stdout, exit 0)
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 1 on a startup failure, 2 on a bad
 * command line or configuration (printed as "file:line:col: message"). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hk.h"
#include "hr_log.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: herald-hooks [-c CONFIG]\n"
                 "Delivers the events topic (events.topic) to the event webhooks registered in\n"
                 "push_hook, batched and signed (Standard Webhooks).\n"
                 "\n"
                 "  -c, --config CONFIG  configuration file (default: $HERALD_CONFIG)\n"
                 "  -h, --help           show this help\n"
                 "  -V, --version        show the version\n"
                 "\n"
                 "Exit status: 0 after SIGTERM/SIGINT, 1 on a startup failure, 2 on a bad\n"
                 "command line or configuration.\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *path = getenv("HERALD_CONFIG");
    hr_config *cfg = NULL;
    char err[1024];
    int opt, rc;

    while ((opt = getopt_long(argc, argv, "c:hV", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("herald-hooks %s\n", HR_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "herald-hooks: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (path == NULL || path[0] == '\0') {
        fprintf(stderr, "herald-hooks: no configuration: give -c CONFIG or set HERALD_CONFIG\n");
        usage(stderr);
        return 2;
    }
    if (hr_config_load(path, &cfg, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    hr_log_setup(cfg->log.level, cfg->log.format, cfg->instance);
    rc = hk_run(cfg);
    hr_config_free(cfg);
    return rc;
}
