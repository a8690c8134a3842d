/* ctl: heraldctl, the admin command line, as a library (libherald-ctl).
 *
 * ctl.c owns the command table (name, one-line help, usage, function) and
 * the global options; the context and the helpers every command uses are
 * ctl_ctx.h; each command lives in its own file ctl/cmd_<name>.c.  Adding a
 * command is: write cmd_<name>.c with
 *
 *     int ctl_cmd_<name>(ctl_ctx *ctx, int argc, char **argv);
 *
 * declare it in ctl_cmd.h, add its line to ctl_commands[] in ctl.c and its
 * file to ctl/meson.build.
 *
 * `heraldctl help NAME` and `heraldctl NAME --help` print the command's
 * usage line, summary and details (every flag) on stdout, before any
 * configuration is read.  A command's usage error prints that command's
 * usage (ctl_usage() reads it from the context, which holds the running
 * command's entry), so the commands never look into the table: the table
 * calls them, not the other way round.
 *
 * A module calls and includes only modules on its own line or below, and
 * calls nothing but common/ outside ctl/.  The commands take several lines
 * only to fit 100 columns: none calls another.  A new module goes on a
 * line.
 * Layers (checked by scripts/check-graph):
 *   ctl_ctx ctl_fmt ctl_uids: the context and the helpers every command uses; formats; uid files
 *   ctl_variant: the per-locale variant options of create and series create
 *   ctl_cmd: the commands' prototypes
 *   cmd_address cmd_control cmd_create cmd_import cmd_list: the commands, one a file,
 *   cmd_audit cmd_hooks cmd_migrate cmd_purge: on four lines
 *   cmd_recover cmd_redrive cmd_status cmd_token: for the width
 *   cmd_series cmd_suppression cmd_user
 *   ctl: the command table, the global options, dispatch
 */
#ifndef CTL_H
#define CTL_H

/* The whole program: options, configuration, command.  Returns the exit
 * code; callable more than once (tests). */
int ctl_main(int argc, char **argv);

#endif
