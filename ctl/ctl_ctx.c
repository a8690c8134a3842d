/* ctl_ctx: the helpers every heraldctl command calls (see ctl_ctx.h). */
#include "ctl_ctx.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_print_command(FILE *out, const ctl_command *cmd)
{
    fprintf(out, "usage: heraldctl [-c CONFIG] %s%s%s\n\n%s\n\n%s", cmd->name,
            *cmd->usage ? " " : "", cmd->usage, cmd->summary, cmd->details);
}

void ctl_vsay(const char *fmt, va_list ap)
{
    fputs("heraldctl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int ctl_fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    ctl_vsay(fmt, ap);
    va_end(ap);
    return CTL_EXIT_FAIL;
}

int ctl_usage(const ctl_ctx *ctx, const char *fmt, ...)
{
    va_list ap;

    if (fmt) {
        va_start(ap, fmt);
        ctl_vsay(fmt, ap);
        va_end(ap);
    }
    ctl_print_command(stderr, ctx->cmd);
    return CTL_EXIT_USAGE;
}

const hr_audit_who *ctl_who(ctl_ctx *ctx)
{
    if (!ctx->who_set) {
        hr_audit_who_cli(&ctx->who);
        ctx->who_set = true;
    }
    return &ctx->who;
}

int ctl_audit(ctl_ctx *ctx, hr_mysql *m, const char *action, int64_t task_id, const char *target,
              const cJSON *before, const cJSON *after)
{
    char name[64], errstr[512];

    if (action == NULL) {
        snprintf(name, sizeof name, "heraldctl %s", ctx->cmd->name);
        action = name;
    }
    if (hr_audit_write(m,
                       &(hr_audit){.who = ctl_who(ctx),
                                   .action = action,
                                   .task_id = task_id,
                                   .target = target,
                                   .before = before,
                                   .after = after},
                       errstr, sizeof errstr) == 0)
        return 0;
    ctl_fail("audit log: %s", errstr);
    return -1;
}

cJSON *ctl_args_json(int argc, char **argv)
{
    cJSON *o = cJSON_CreateObject(), *args = o != NULL ? cJSON_AddArrayToObject(o, "args") : NULL;

    for (int i = 1; args != NULL && i < argc; i++)
        cJSON_AddItemToArray(args, cJSON_CreateString(argv[i]));
    if (args == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int ctl_mysql(ctl_ctx *ctx, hr_mysql **out)
{
    char errstr[512];

    /* An admin's command may run one long statement (a migration's ALTER,
     * recover's read of a large task's delivery log, the migration lock's
     * wait), which the daemons' mysql.timeout_s would cut: heraldctl waits
     * at least CTL_MYSQL_TIMEOUT_S, and its admin sees a hang. */
    if (ctx->cfg->mysql.timeout_s < CTL_MYSQL_TIMEOUT_S)
        ctx->cfg->mysql.timeout_s = CTL_MYSQL_TIMEOUT_S;
    if (!ctx->mysql && hr_mysql_connect(ctx->cfg, &ctx->mysql, errstr, sizeof errstr) != 0) {
        ctl_fail("%s", errstr);
        return -1;
    }
    *out = ctx->mysql;
    return 0;
}

int ctl_redis(ctl_ctx *ctx, hr_redis **out)
{
    char errstr[512];

    if (!ctx->redis && hr_redis_connect(ctx->cfg, &ctx->redis, errstr, sizeof errstr) != 0) {
        ctl_fail("%s", errstr);
        return -1;
    }
    *out = ctx->redis;
    return 0;
}

int ctl_task_arg(ctl_ctx *ctx, int argc, char **argv, hr_mysql **m, hr_redis **r, hr_task **t)
{
    char errstr[512], *end;
    int64_t id;

    *t = NULL;
    if (argc != 2)
        return ctl_usage(ctx, "expected one TASK id");
    id = strtoll(argv[1], &end, 10);
    if (id <= 0 || *end != '\0')
        return ctl_usage(ctx, "TASK must be a positive integer, not '%s'", argv[1]);
    if (ctl_mysql(ctx, m) < 0 || ctl_redis(ctx, r) < 0)
        return CTL_EXIT_FAIL;
    switch (hr_task_load(*m, id, t, errstr, sizeof errstr)) {
    case 1:
        return ctl_fail("task %" PRId64 " does not exist", id);
    case -1:
        return ctl_fail("%s", errstr);
    }
    return CTL_EXIT_OK;
}
