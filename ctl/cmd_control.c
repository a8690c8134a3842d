/* cmd_control: `heraldctl pause|resume|cancel TASK` — the admin's wish, as
 * the API takes it: push_task.control is set (for an unfinished task) with
 * its audit row, then the task's ctl key at once, so workers react within
 * their next batch; the dispatchers' control scan carries out the state
 * change. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_cmd.h"
#include "hr_state.h"
#include "hr_task.h"

int ctl_cmd_control(ctl_ctx *ctx, int argc, char **argv)
{
    hr_control control = HR_CONTROL_RUN; /* resume: "run" is no command name */
    hr_mysql *m;
    hr_redis *r;
    hr_task *t = NULL;
    cJSON *before = NULL, *after = NULL;
    char errstr[512];
    int64_t id;
    int rc;

    if (strcmp(argv[0], "resume") != 0 && hr_control_parse(argv[0], &control) < 0) {
        ctl_fail("no control \"%s\"", argv[0]);
        return CTL_EXIT_FAIL;
    }
    rc = ctl_task_arg(ctx, argc, argv, &m, &r, &t);
    if (rc != CTL_EXIT_OK)
        return rc;
    rc = CTL_EXIT_FAIL;
    id = t->id;
    if (hr_state_final(t->state)) {
        ctl_fail("task %" PRId64 " is already %s", id, hr_state_name(t->state));
        goto done;
    }
    /* push_task.control and its audit row together; then the ctl key. */
    before = cJSON_CreateObject();
    after = cJSON_CreateObject();
    cJSON_AddStringToObject(before, "control", hr_control_name(t->control));
    cJSON_AddStringToObject(after, "control", hr_control_name(control));
    if (hr_mysql_begin(m, errstr, sizeof errstr) < 0) {
        ctl_fail("%s", errstr);
        goto done;
    }
    if (hr_state_control(m, id, control, errstr, sizeof errstr) < 0) {
        ctl_fail("%s", errstr);
        hr_mysql_rollback(m);
        goto done;
    }
    if (ctl_audit(ctx, m, NULL, id, NULL, before, after) != 0) {
        hr_mysql_rollback(m);
        goto done;
    }
    if (hr_mysql_commit(m, errstr, sizeof errstr) < 0) {
        ctl_fail("%s", errstr);
        goto done;
    }
    if (hr_task_set_control(NULL, r, id, control, errstr, sizeof errstr) != 0) {
        ctl_fail("control is %s in MySQL, but the ctl key was not set (%s); the dispatcher "
                 "sets it at its next scan",
                 hr_control_name(control), errstr);
        goto done;
    }
    printf("task %" PRId64 ": control=%s (state %s)\n", id, hr_control_name(control),
           hr_state_name(t->state));
    rc = CTL_EXIT_OK;
done:
    cJSON_Delete(before);
    cJSON_Delete(after);
    hr_task_free(t);
    return rc;
}
