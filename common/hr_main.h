/* hr_main: the command line every herald daemon shares, and its start.
 *
 *   NAME [-c CONFIG] [EXTRA]     (the config path defaults to $HERALD_CONFIG)
 *   NAME --help | --version      (on stdout, exit 0)
 *
 * hr_main_start parses -c/--config, -h/--help, -V/--version and the
 * daemon's own options (handed to its callback), loads the configuration
 * and sets the log up from it.  Anything wrong is printed on stderr and
 * ends the process with status 2: a bad command line (with the usage), no
 * configuration, a bad configuration ("file:line:col: message",
 * hr_config_load's).  The help text is the daemon's description between
 * the shared usage line, option lines and exit-status lines. */
#ifndef HR_MAIN_H
#define HR_MAIN_H

#include <getopt.h>
#include <stdio.h>

#include "hr_config.h"

typedef struct hr_main_spec {
    const char *name;     /* "herald-worker": usage, --version, messages */
    const char *version;  /* HR_VERSION, the daemon's compile-time version */
    const char *synopsis; /* the usage line after "[-c CONFIG]": " [...]" or NULL */
    const char *about;    /* what the daemon does, whole lines */
    /* help lines of the daemon's options, whole lines (NULL for none):
     * OPTIONS_MID stand after -c, OPTIONS_END after -V */
    const char *options_mid, *options_end;
    const char *stopped; /* how a clean exit comes: "0 after <STOPPED>, ..." */
    /* the daemon's own options (getopt_long's, NULL-terminated; may be
     * NULL) and their short letters for getopt ("l:"; may be NULL) */
    const struct option *extra;
    const char *extra_short;
    /* Called for each of those with getopt's value and argument (NULL for
     * an option without one): 0 goes on, 1 ends the process with status
     * 0 (it printed what was asked).  May be NULL without EXTRA. */
    int (*option)(void *ctx, int val, const char *arg);
    void *ctx;
    /* a line after "NAME VERSION" on --version, or NULL */
    const char *version_note;
} hr_main_spec;

/* Prints SPEC's help on OUT (stdout for --help, stderr after a bad
 * command line). */
void hr_main_usage(const hr_main_spec *spec, FILE *out);

/* Parses ARGC/ARGV as above, loads the configuration into *CFG (the
 * caller frees it) and sets the log up.  -1 when the daemon goes on;
 * otherwise the exit status the process ends with (0 after --help,
 * --version or an option that answered, 2 after a bad command line or
 * configuration), *CFG then NULL. */
int hr_main_start(const hr_main_spec *spec, int argc, char **argv, hr_config **cfg);

#endif
