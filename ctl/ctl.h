/* ctl: heraldctl, the admin command line, as a library (libherald-ctl).
 *
 * ctl.c owns the command table (name, one-line help, usage, function), the
 * global options and the shared context; each command lives in its own
 * file ctl/cmd_<name>.c.  Adding a command is: write cmd_<name>.c with
 *
 *     int ctl_cmd_<name>(ctl_ctx *ctx, int argc, char **argv);
 *
 * declare it below, add its line to ctl_commands[] in ctl.c and its file to
 * ctl/meson.build.
 *
 * `heraldctl help NAME` and `heraldctl NAME --help` print the command's
 * usage line, summary and details (every flag) on stdout, before any
 * configuration is read.
 *
 * A command gets ARGV starting with its own name (so getopt works; reset
 * optind to 0 first) and returns an exit code: CTL_EXIT_OK, CTL_EXIT_FAIL
 * after printing one line with ctl_fail(), or CTL_EXIT_USAGE through
 * ctl_usage().  The configuration is loaded before the command runs;
 * connections are opened on first use with ctl_mysql() / ctl_redis() and
 * closed by ctl_main(). */
#ifndef CTL_H
#define CTL_H

#include "hr_config.h"
#include "hr_mysql.h"
#include "hr_redis.h"
#include "hr_task.h"

enum {
    CTL_EXIT_OK = 0,
    CTL_EXIT_FAIL = 1,  /* runtime error: one line on stderr */
    CTL_EXIT_USAGE = 2, /* bad usage or bad configuration */
};

typedef struct ctl_ctx {
    const char *config_path;
    hr_config *cfg;
    hr_mysql *mysql; /* NULL until ctl_mysql() */
    hr_redis *redis; /* NULL until ctl_redis() */
} ctl_ctx;

typedef struct ctl_command {
    const char *name;
    const char *summary; /* one line for `heraldctl help` */
    const char *usage;   /* the arguments after the name, "" for none */
    const char *details; /* every argument and flag, for `heraldctl help NAME` */
    int (*run)(ctl_ctx *ctx, int argc, char **argv);
} ctl_command;

/* The whole program: options, configuration, command.  Returns the exit
 * code; callable more than once (tests). */
int ctl_main(int argc, char **argv);

/* The connection of CTX, opened on first use.  0, or -1 after printing the
 * reason with ctl_fail(). */
int ctl_mysql(ctl_ctx *ctx, hr_mysql **out);
int ctl_redis(ctl_ctx *ctx, hr_redis **out);

/* Prints "heraldctl: MESSAGE" on stderr; returns CTL_EXIT_FAIL. */
int ctl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "heraldctl: MESSAGE" (when FMT is not NULL) and the usage of the
 * command named CMD on stderr; returns CTL_EXIT_USAGE. */
int ctl_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The prologue of a command whose only argument is a TASK id: checks the
 * arguments, opens both connections and loads the task into *T (the caller
 * frees it).  CTL_EXIT_OK, or the exit code to return after the message
 * was printed. */
int ctl_task_arg(ctl_ctx *ctx, int argc, char **argv, hr_mysql **m, hr_redis **r, hr_task **t);

int ctl_cmd_migrate(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_create(ctl_ctx *ctx, int argc, char **argv);
/* create's flags, one a line (its `help` details), next to its options. */
extern const char ctl_create_flags[];
int ctl_cmd_import(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_status(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_list(ctl_ctx *ctx, int argc, char **argv);
/* pause|resume|cancel: ARGV[0] names the wish. */
int ctl_cmd_control(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_recover(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_redrive(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_address(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_token(ctl_ctx *ctx, int argc, char **argv);

#endif
