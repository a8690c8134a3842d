/* ctl_ctx: what every heraldctl command runs with and the helpers each one
 * calls: the context (configuration, connections), the exit codes, the
 * error and usage lines, and the prologue of a command taking one TASK.
 * It sits below the commands and the command table (ctl.h's Layers).
 *
 * A command returns an exit code: CTL_EXIT_OK, CTL_EXIT_FAIL after
 * printing one line with ctl_fail(), or CTL_EXIT_USAGE through
 * ctl_usage(), which prints the usage of the running command from its
 * entry in the context (so no command looks into ctl.c's table).  The
 * configuration is loaded before the command runs; connections are opened
 * on first use with ctl_mysql() / ctl_redis() and closed by ctl_main(). */
#ifndef CTL_CTX_H
#define CTL_CTX_H

#include <stdarg.h>
#include <stdio.h>

#include <cJSON.h>
#include <stdbool.h>

#include "hr_audit.h"
#include "hr_config.h"
#include "hr_mysql.h"
#include "hr_redis.h"
#include "hr_task.h"

enum {
    CTL_EXIT_OK = 0,
    CTL_EXIT_FAIL = 1,  /* runtime error: one line on stderr */
    CTL_EXIT_USAGE = 2, /* bad usage or bad configuration */
};

typedef struct ctl_command ctl_command;

typedef struct ctl_ctx {
    const ctl_command *cmd; /* the running command's entry (ctl_main sets it) */
    const char *config_path;
    hr_config *cfg;
    hr_mysql *mysql;  /* NULL until ctl_mysql() */
    hr_redis *redis;  /* NULL until ctl_redis() */
    hr_audit_who who; /* the audit log's who of this run, once ctl_who() made it */
    bool who_set;
} ctl_ctx;

struct ctl_command {
    const char *name;
    const char *summary; /* one line for `heraldctl help` */
    const char *usage;   /* the arguments after the name, "" for none */
    const char *details; /* every argument and flag, for `heraldctl help NAME` */
    int (*run)(ctl_ctx *ctx, int argc, char **argv);
};

/* The connection of CTX, opened on first use.  0, or -1 after printing the
 * reason with ctl_fail(). */
/* heraldctl's MySQL read/write timeout at least, whatever mysql.timeout_s
 * says (the daemons' bound is for calls that must not stall a loop). */
#define CTL_MYSQL_TIMEOUT_S 600
int ctl_mysql(ctl_ctx *ctx, hr_mysql **out);
int ctl_redis(ctl_ctx *ctx, hr_redis **out);

/* Prints "heraldctl: MESSAGE" on stderr. */
void ctl_vsay(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
/* Prints "heraldctl: MESSAGE" on stderr; returns CTL_EXIT_FAIL. */
int ctl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "heraldctl: MESSAGE" (when FMT is not NULL) and the usage of
 * CTX's running command on stderr; returns CTL_EXIT_USAGE. */
int ctl_usage(const ctl_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The audit log's who of this run: "cli:<user>" from "host:<name>"
 * (hr_audit_who_cli), made on first use. */
const hr_audit_who *ctl_who(ctl_ctx *ctx);
/* Writes the audit row of a change the running command made, on M (inside
 * the caller's transaction, if one is open): ACTION ("heraldctl <command>"
 * when NULL), task TASK_ID (0: none), TARGET, the fields BEFORE and AFTER.
 * 0, or -1 after printing why with ctl_fail() (the caller rolls back). */
int ctl_audit(ctl_ctx *ctx, hr_mysql *m, const char *action, int64_t task_id, const char *target,
              const cJSON *before, const cJSON *after);
/* {"args": [ARGV[1] ... ARGV[ARGC-1]]}: what a command that sets many
 * fields (create) records as its audit row's after.  NULL when out of
 * memory. */
cJSON *ctl_args_json(int argc, char **argv);

/* The usage line, summary and details of CMD on OUT. */
void ctl_print_command(FILE *out, const ctl_command *cmd);

/* The prologue of a command whose only argument is a TASK id: checks the
 * arguments, opens both connections and loads the task into *T (the caller
 * frees it).  CTL_EXIT_OK, or the exit code to return after the message
 * was printed. */
int ctl_task_arg(ctl_ctx *ctx, int argc, char **argv, hr_mysql **m, hr_redis **r, hr_task **t);

#endif
