/* herald-dispatcher: turns push_task rows into Kafka chunk messages.
 *
 *   herald-dispatcher [-c CONFIG]      (default $HERALD_CONFIG)
 *   herald-dispatcher --help | --version   (on stdout, exit 0)
 *   herald-dispatcher --print-routes       (the API's route table, exit 0)
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 1 on a startup failure, 2 on a bad
 * command line or configuration (printed as "file:line:col: message";
 * the command line is hr_main's). */
#include <stdio.h>

#include "dispatcher.h"
#include "dsp_api_routes.h"
#include "dsp_seams.h"
#include "hr_main.h"

/* --print-routes: the route table on stdout, then exit 0. */
static int dsp_main_option(void *ctx, int val, const char *arg)
{
    (void)ctx;
    (void)arg;
    if (val != 'R')
        return -1;
    dsp_api_routes_print(stdout);
    return 1;
}

int main(int argc, char **argv)
{
    static const struct option extra[] = {
        {"print-routes", no_argument, NULL, 'R'},
        {NULL, 0, NULL, 0},
    };
    const hr_main_spec spec = {
        .name = "herald-dispatcher",
        .version = HR_VERSION,
        .about = "Turns due push tasks into Kafka chunk messages and serves the HTTP API.\n",
        .options_end =
            "      --print-routes   print the HTTP API's routes (METHOD PATTERN) and exit\n",
        .stopped = "SIGTERM/SIGINT",
        .extra = extra,
        .option = dsp_main_option,
        .version_note = DSP_SEAMS_ON ? "test seams: on" : NULL,
    };
    hr_config *cfg = NULL;
    int rc = hr_main_start(&spec, argc, argv, &cfg);

    if (rc >= 0)
        return rc;
    rc = dsp_run(cfg);
    hr_config_free(cfg);
    return rc;
}
