/* cmd_recover: `heraldctl recover TASK` — rebuilds a task's Redis state from
 * MySQL (common/hr_recover.c, which the API's POST /v1/tasks/{id}/recover
 * calls too); this file says what it waits for and prints the result. */
#include <inttypes.h>
#include <stdio.h>

#include <unistd.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "hr_clock.h"
#include "hr_recover.h"

static void cmd_recover_waiting(void *ctx, int64_t id, int renewal_ms, int quiet_ms)
{
    (void)ctx;
    fprintf(stderr,
            "heraldctl: task %" PRId64 ": waiting for its workers' last reports (lease "
            "renewal %d ms, then the delivery log standing still for %d ms)\n",
            id, renewal_ms, quiet_ms);
}

int ctl_cmd_recover(ctl_ctx *ctx, int argc, char **argv)
{
    hr_mysql *m;
    hr_redis *r;
    hr_task *t = NULL;
    hr_recover_result res;
    char errstr[1024], token[64];
    cJSON *after = NULL;
    int rc;

    rc = ctl_task_arg(ctx, argc, argv, &m, &r, &t);
    if (rc != CTL_EXIT_OK)
        return rc;
    snprintf(token, sizeof token, "heraldctl/%ld", (long)getpid());
    const hr_recover_opts o = {.token = token,
                               .lease_ms = ctx->cfg->worker.lease_ms,
                               .now_ms = hr_clock_now_ms(),
                               .cfg = ctx->cfg,
                               .retention_days = ctx->cfg->dispatcher.delivery_retention_days,
                               .waiting = cmd_recover_waiting};
    if (hr_recover(m, r, t, &o, &res, errstr, sizeof errstr) != 0) {
        rc = ctl_fail("%s", errstr);
        goto done;
    }
    printf("task %" PRId64 ": recovered subs=%" PRId64 " (undelivered subscriptions=%" PRId64
           ") dropped_chunks=%" PRId64 " dropped_leases=%" PRId64 " seq=%" PRId64
           " state=%s books=%s book_uids=%" PRId64 "\n",
           t->id, res.subs, res.undelivered, res.dropped_chunks, res.dropped_leases, res.seq,
           hr_state_name(res.state), res.books_reloaded ? "reloaded" : "synced", res.book_uids);
    /* Redis and several statements: the audit row comes after them. */
    after = cJSON_CreateObject();
    cJSON_AddNumberToObject(after, "subs", (double)res.subs);
    cJSON_AddNumberToObject(after, "undelivered", (double)res.undelivered);
    cJSON_AddNumberToObject(after, "dropped_chunks", (double)res.dropped_chunks);
    cJSON_AddNumberToObject(after, "seq", (double)res.seq);
    cJSON_AddStringToObject(after, "state", hr_state_name(res.state));
    cJSON_AddNumberToObject(after, "book_uids", (double)res.book_uids);
    if (ctl_audit(ctx, m, NULL, t->id, NULL, NULL, after) != 0)
        rc = CTL_EXIT_FAIL;
done:
    cJSON_Delete(after);
    hr_task_free(t);
    return rc;
}
