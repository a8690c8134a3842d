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
    cJSON *after = NULL;
    int rc;

    rc = ctl_task_arg(ctx, argc, argv, &m, &r, &t);
    if (rc != CTL_EXIT_OK)
        return rc;
    if (hr_redrive(m, r, t, ctx->cfg->dispatcher.redelivery_timeout_s, &res, errstr,
                   sizeof errstr) != 0) {
        rc = ctl_fail("%s", errstr);
        goto done;
    }
    if (res.moved == 0)
        printf("task %" PRId64 ": no dead letters\n", t->id);
    else if (res.chunks == 1)
        printf("task %" PRId64 ": redrove %" PRId64 " recipients into chunk %" PRId64 "\n", t->id,
               res.moved, res.last_seq);
    else
        printf("task %" PRId64 ": redrove %" PRId64 " recipients into %" PRId64
               " chunks (last %" PRId64 ")\n",
               t->id, res.moved, res.chunks, res.last_seq);
    /* Redis moves and several statements: the audit row comes after them. */
    after = cJSON_CreateObject();
    cJSON_AddNumberToObject(after, "redriven", (double)res.moved);
    cJSON_AddNumberToObject(after, "chunks", (double)res.chunks);
    if (ctl_audit(ctx, m, NULL, t->id, NULL, NULL, after) != 0)
        rc = CTL_EXIT_FAIL;
done:
    cJSON_Delete(after);
    hr_task_free(t);
    return rc;
}
