/* cmd_control: `heraldctl pause|resume|cancel TASK` — the admin's wish, as
 * the API takes it: push_task.control is set (for an unfinished task) and
 * the task's ctl key at once, so workers react within their next batch;
 * the dispatchers' control scan carries out the state change. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "hr_task.h"

int ctl_cmd_control(ctl_ctx *ctx, int argc, char **argv)
{
    const char *control = strcmp(argv[0], "resume") == 0 ? "run" : argv[0];
    hr_mysql *m;
    hr_redis *r;
    hr_task *t = NULL;
    char err[512], *end;
    long long id;
    int rc = CTL_EXIT_FAIL;

    if (argc != 2)
        return ctl_usage(argv[0], "expected one TASK id");
    id = strtoll(argv[1], &end, 10);
    if (id <= 0 || *end != '\0')
        return ctl_usage(argv[0], "TASK must be a positive integer, not '%s'", argv[1]);
    if (ctl_mysql(ctx, &m) < 0 || ctl_redis(ctx, &r) < 0)
        return CTL_EXIT_FAIL;
    switch (hr_task_load(m, id, &t, err, sizeof err)) {
    case 1:
        return ctl_fail("task %lld does not exist", id);
    case -1:
        return ctl_fail("%s", err);
    }
    if (strcmp(t->state, "done") == 0 || strcmp(t->state, "cancelled") == 0 ||
        strcmp(t->state, "failed") == 0) {
        ctl_fail("task %lld is already %s", id, t->state);
        goto done;
    }
    switch (hr_task_set_control(m, r, id, control, err, sizeof err)) {
    case -1:
        ctl_fail("%s", err);
        goto done;
    case 1:
        ctl_fail("control is %s in MySQL, but the ctl key was not set (%s); the dispatcher "
                 "sets it at its next scan", control, err);
        goto done;
    }
    printf("task %lld: control=%s (state %s)\n", id, control, t->state);
    rc = CTL_EXIT_OK;
done:
    hr_task_free(t);
    return rc;
}
