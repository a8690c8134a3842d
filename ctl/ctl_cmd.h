/* ctl_cmd: heraldctl's commands, one file each (ctl/cmd_<name>.c), as the
 * command table in ctl.c calls them.  A command gets ARGV starting with its
 * own name (so getopt works; reset optind to 0 first) and returns an exit
 * code (ctl_ctx.h). */
#ifndef CTL_CMD_H
#define CTL_CMD_H

#include "ctl_ctx.h"

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
int ctl_cmd_purge(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_address(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_token(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_user(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_suppression(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_audit(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_hooks(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_series(ctl_ctx *ctx, int argc, char **argv);

#endif
