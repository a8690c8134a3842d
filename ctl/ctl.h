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
 * configuration is read. */
#ifndef CTL_H
#define CTL_H

/* The whole program: options, configuration, command.  Returns the exit
 * code; callable more than once (tests). */
int ctl_main(int argc, char **argv);

#endif
