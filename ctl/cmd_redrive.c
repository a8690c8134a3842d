/* cmd_redrive: `heraldctl redrive TASK` — the task's dead letters back into
 * new chunks (common/hr_redrive.c, which the API's
 * POST /v1/tasks/{id}/redrive calls too); this file prints the result. */
#include <inttypes.h>
#include <stdio.h>

#include "ctl_cmd.h"
#include "hr_redrive.h"

int ctl_cmd_redrive(ctl_ctx *ctx, int argc, char **argv)
{
    hr_mysql *m;
    hr_redis *r;
    hr_task *t = NULL;
    hr_redrive_result res;
    char errstr[1024];
    int rc;

    rc = ctl_task_arg(ctx, argc, argv, &m, &r, &t);
    if (rc != CTL_EXIT_OK)
        return rc;
    if (hr_redrive(m, r, t, ctx->cfg->dispatcher.redelivery_timeout_s, &res, errstr,
                   sizeof errstr) != 0)
        rc = ctl_fail("%s", errstr);
    else if (res.moved == 0)
        printf("task %" PRId64 ": no dead letters\n", t->id);
    else if (res.chunks == 1)
        printf("task %" PRId64 ": redrove %" PRId64 " recipients into chunk %" PRId64 "\n", t->id,
               res.moved, res.last_seq);
    else
        printf("task %" PRId64 ": redrove %" PRId64 " recipients into %" PRId64
               " chunks (last %" PRId64 ")\n",
               t->id, res.moved, res.chunks, res.last_seq);
    hr_task_free(t);
    return rc;
}
