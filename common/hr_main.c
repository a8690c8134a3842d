/* hr_main: the daemons' shared command line and start (see hr_main.h).
 * The options common to every daemon are one table here; a daemon adds
 * its own behind them.  Runs once, on the main thread, before any other
 * thread starts (getopt's state is the process's). */
#include "hr_main.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hr_log.h"

/* The options every daemon has, then room for its own. */
#define HR_MAIN_OPTS_MAX 16

static const struct option hr_main_opts[] = {
    {"config", required_argument, NULL, 'c'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
};
#define HR_MAIN_NOPTS (sizeof hr_main_opts / sizeof hr_main_opts[0])

/* A spec's optional text: NULL stands for none. */
#define HR_MAIN_STR(s) ((s) != NULL ? (s) : "")

void hr_main_usage(const hr_main_spec *spec, FILE *out)
{
    fprintf(out,
            "usage: %s [-c CONFIG]%s\n"
            "%s"
            "\n"
            "  -c, --config CONFIG  configuration file (default: $HERALD_CONFIG)\n"
            "%s"
            "  -h, --help           show this help\n"
            "  -V, --version        show the version\n"
            "%s"
            "\n"
            "Exit status: 0 after %s, 1 on a startup failure, 2 on a bad\n"
            "command line or configuration.\n",
            spec->name, HR_MAIN_STR(spec->synopsis), spec->about, HR_MAIN_STR(spec->options_mid),
            HR_MAIN_STR(spec->options_end), spec->stopped);
}

/* A bad command line: WHAT (may be NULL: getopt said it) and the usage on
 * stderr; the exit status. */
static int hr_main_bad(const hr_main_spec *spec, const char *what)
{
    if (what != NULL)
        fprintf(stderr, "%s: %s\n", spec->name, what);
    hr_main_usage(spec, stderr);
    return 2;
}

int hr_main_start(const hr_main_spec *spec, int argc, char **argv, hr_config **cfg)
{
    struct option opts[HR_MAIN_OPTS_MAX] = {{0}};
    char shortopts[64], err[1024];
    const char *path = getenv("HERALD_CONFIG");
    size_t n = HR_MAIN_NOPTS;
    int opt, rc;

    *cfg = NULL;
    memcpy(opts, hr_main_opts, sizeof hr_main_opts);
    for (size_t i = 0; spec->extra != NULL && spec->extra[i].name != NULL; i++) {
        /* a daemon's table outgrowing this is a programming error */
        if (n + 1 >= HR_MAIN_OPTS_MAX)
            abort();
        opts[n++] = spec->extra[i];
    }
    snprintf(shortopts, sizeof shortopts, "c:hV%s", HR_MAIN_STR(spec->extra_short));
    while ((opt = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'h':
            hr_main_usage(spec, stdout);
            return 0;
        case 'V':
            printf("%s %s\n", spec->name, spec->version);
            if (spec->version_note != NULL)
                printf("%s\n", spec->version_note);
            return 0;
        case '?':
            return hr_main_bad(spec, NULL);
        default:
            rc = spec->option != NULL ? spec->option(spec->ctx, opt, optarg) : -1;
            if (rc < 0)
                return hr_main_bad(spec, NULL);
            if (rc > 0)
                return 0;
        }
    }
    if (optind != argc) {
        snprintf(err, sizeof err, "unexpected argument '%s'", argv[optind]);
        return hr_main_bad(spec, err);
    }
    if (path == NULL || path[0] == '\0')
        return hr_main_bad(spec, "no configuration: give -c CONFIG or set HERALD_CONFIG");
    if (hr_config_load(path, cfg, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        *cfg = NULL;
        return 2;
    }
    hr_log_setup((*cfg)->log.level, (*cfg)->log.format, (*cfg)->instance);
    return -1;
}
