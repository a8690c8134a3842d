/* cmd_purge: `heraldctl purge --finished-before DATE|TIME [--dry-run]
 * [--batch N]` — finished tasks (done, failed, cancelled) that finished
 * before then, and every row and key they left (common/hr_purge.c); a line
 * per task and a total.  A DATE is its 00:00 UTC; a time in the future is
 * refused, so a typo cannot take the tasks that just finished. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "hr_clock.h"
#include "hr_parse.h"
#include "hr_purge.h"

#define PURGE_DEFAULT_BATCH 10000

static void cmd_purge_each(void *ctx, const hr_purge_task *pt)
{
    const bool *dry_run = ctx;

    printf("task %" PRId64 " (%s%s%s): %s%" PRId64 " subscriptions, %" PRId64
           " delivery rows, %" PRId64 " chunk rows, %" PRId64 " shard rows",
           pt->id,
           pt->state == HR_STATE__COUNT ? "left by a purge cut short" : hr_state_name(pt->state),
           pt->finished_at[0] != '\0' ? ", finished " : "", pt->finished_at,
           *dry_run ? "would delete " : "", pt->subscriptions, pt->deliveries, pt->chunks,
           pt->shard_rows);
    if (!*dry_run)
        printf(", %" PRId64 " Redis keys; %" PRId64 " DELETEs", pt->keys, pt->deletes);
    printf("\n");
}

int ctl_cmd_purge(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"finished-before", required_argument, NULL, 'f'},
        {"dry-run", no_argument, NULL, 'd'},
        {"batch", required_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    const char *before = NULL;
    int64_t batch = PURGE_DEFAULT_BATCH;
    hr_purge_opts o = {.each = cmd_purge_each};
    hr_purge_result res;
    char errstr[1024], when[40];
    hr_mysql *m;
    hr_redis *r;
    int opt;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 'f') {
            before = optarg;
        } else if (opt == 'd') {
            o.dry_run = true;
        } else if (opt == 'b') {
            if (ctl_fmt_parse_int("--batch", optarg, 1, HR_PURGE_BATCH_MAX, &batch, errstr,
                                  sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
        } else {
            return ctl_usage(ctx, NULL);
        }
    }
    if (optind < argc)
        return ctl_usage(ctx, "unexpected argument \"%s\"", argv[optind]);
    if (before == NULL)
        return ctl_usage(ctx, "--finished-before is required");
    if ((strlen(before) == 10
             ? hr_parse_date("--finished-before", before, &o.before_ms, errstr, sizeof errstr)
             : hr_parse_time("--finished-before", before, &o.before_ms, errstr, sizeof errstr)) < 0)
        return ctl_usage(ctx, "%s", errstr);
    if (o.before_ms > hr_clock_now_ms())
        return ctl_usage(ctx, "--finished-before %s is in the future", before);
    o.batch = (int)batch;
    o.ctx = &o.dry_run;
    if (ctl_mysql(ctx, &m) < 0 || ctl_redis(ctx, &r) < 0)
        return CTL_EXIT_FAIL;
    if (hr_purge(m, r, &o, &res, errstr, sizeof errstr) < 0)
        return ctl_fail("purge: %s (what is done stays done; run it again to finish)", errstr);
    /* Many statements in batches, so the row comes after them, as a
     * redrive's: a row that then fails is said, the purge being done. */
    if (!o.dry_run && (res.tasks > 0 || res.past_intervals > 0)) {
        cJSON *after = cJSON_CreateObject();
        int arc;

        cJSON_AddStringToObject(after, "finished_before",
                                ctl_fmt_time_iso(o.before_ms, when, sizeof when));
        cJSON_AddNumberToObject(after, "tasks", (double)res.tasks);
        cJSON_AddNumberToObject(after, "subscriptions", (double)res.subscriptions);
        cJSON_AddNumberToObject(after, "deliveries", (double)res.deliveries);
        cJSON_AddNumberToObject(after, "past_intervals", (double)res.past_intervals);
        arc = ctl_audit(ctx, m, NULL, 0, NULL, NULL, after);
        cJSON_Delete(after);
        if (arc != 0)
            return CTL_EXIT_FAIL;
    }
    printf("%s %" PRId64 " tasks finished before %s", o.dry_run ? "would purge" : "purged",
           res.tasks, ctl_fmt_time_iso(o.before_ms, when, sizeof when));
    if (res.resumed > 0)
        printf(" (%" PRId64 " of them left by a purge cut short)", res.resumed);
    printf(": %" PRId64 " subscriptions, %" PRId64 " delivery rows, %" PRId64
           " chunk rows, %" PRId64 " shard rows, %" PRId64 " past series subscription intervals",
           res.subscriptions, res.deliveries, res.chunks, res.shard_rows, res.past_intervals);
    if (!o.dry_run)
        printf(", %" PRId64 " Redis keys; %" PRId64 " DELETEs of at most %d rows", res.keys,
               res.deletes, o.batch);
    printf("\n");
    return CTL_EXIT_OK;
}
