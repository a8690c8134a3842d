/* herald-hooks: delivers the events topic to signed event webhooks.
 *
 *   herald-hooks [-c CONFIG]      (default $HERALD_CONFIG)
 *   herald-hooks --help | --version   (on stdout, exit 0)
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 1 on a startup failure, 2 on a bad
 * command line or configuration (printed as "file:line:col: message";
 * the command line is hr_main's). */
#include "hk.h"
#include "hr_main.h"

int main(int argc, char **argv)
{
    const hr_main_spec spec = {
        .name = "herald-hooks",
        .version = HR_VERSION,
        .about = "Delivers the events topic (events.topic) to the event webhooks registered in\n"
                 "push_hook, batched and signed (Standard Webhooks).\n",
        .stopped = "SIGTERM/SIGINT",
    };
    hr_config *cfg = NULL;
    int rc = hr_main_start(&spec, argc, argv, &cfg);

    if (rc >= 0)
        return rc;
    rc = hk_run(cfg);
    hr_config_free(cfg);
    return rc;
}
