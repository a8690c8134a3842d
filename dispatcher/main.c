/* herald-dispatcher: turns push_task rows into Kafka chunk messages.
 *
 *   herald-dispatcher [-c CONFIG]      (default $HERALD_CONFIG)
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 1 on a startup failure, 2 on a bad
 * command line or configuration (printed as "file:line:col: message"). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dsp.h"
#include "hr_log.h"

static void usage(void)
{
    fprintf(stderr, "usage: herald-dispatcher [-c CONFIG]  (default $HERALD_CONFIG)\n");
}

int main(int argc, char **argv)
{
    const char *path = getenv("HERALD_CONFIG");
    hr_config *cfg = NULL;
    char err[1024];
    int opt, rc;

    while ((opt = getopt(argc, argv, "c:h")) != -1) {
        if (opt == 'c') {
            path = optarg;
        } else {
            usage();
            return opt == 'h' ? 0 : 2;
        }
    }
    if (optind != argc || path == NULL || path[0] == '\0') {
        usage();
        return 2;
    }
    if (hr_config_load(path, &cfg, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    hr_log_setup(cfg->log.level, cfg->log.format, cfg->instance);
    rc = dsp_run(cfg);
    hr_config_free(cfg);
    return rc;
}
