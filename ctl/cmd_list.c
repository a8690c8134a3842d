/* cmd_list: `heraldctl list [--state S] [--limit N]` — the newest tasks as
 * a table (id, name, state, due, total, sent, failed).
 *
 * One prepared SELECT; the state filter is matched against the column's
 * own values so that a typo is refused instead of listing nothing. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_fmt.h"

#define LIST_DEFAULT_LIMIT 20
#define LIST_MAX_LIMIT 10000
#define LIST_NAME_WIDTH 28

#define LIST_SELECT                                                                  \
    "SELECT id, name, state, CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED), " \
    "total, sent, failed FROM push_task "

static const char *const list_states[] = {"scheduled", "dispatching", "dispatched", "done",
                                          "paused",    "cancelled",   "failed"};

static bool list_known_state(const char *s)
{
    for (size_t i = 0; i < sizeof list_states / sizeof list_states[0]; i++)
        if (strcmp(list_states[i], s) == 0)
            return true;
    return false;
}

static int64_t list_int(const hr_mysql_rows *rows, size_t row, size_t col)
{
    const char *v = hr_mysql_cell(rows, row, col);

    return v != NULL ? strtoll(v, NULL, 10) : -1;
}

int ctl_cmd_list(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"state", required_argument, NULL, 's'},
        {"limit", required_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    const char *state = NULL;
    int64_t limit = LIST_DEFAULT_LIMIT;
    hr_mysql_rows *rows = NULL;
    hr_mysql_param p[2];
    char err[512], due[40], total[32], sent[32], failed[32];
    hr_mysql *m;
    size_t np = 0;
    int opt, rc = CTL_EXIT_FAIL;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 's') {
            if (!list_known_state(optarg))
                return ctl_usage("list", "--state: \"%s\" is not one of scheduled, dispatching, "
                                         "dispatched, done, paused, cancelled, failed", optarg);
            state = optarg;
        } else if (opt == 'n') {
            if (ctl_fmt_parse_int("--limit", optarg, 1, LIST_MAX_LIMIT, &limit, err,
                                  sizeof err) < 0)
                return ctl_usage("list", "%s", err);
        } else {
            return ctl_usage("list", NULL);
        }
    }
    if (optind < argc)
        return ctl_usage("list", "unexpected argument \"%s\"", argv[optind]);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;

    if (state != NULL)
        p[np++] = HR_P_STR(state);
    p[np++] = HR_P_I64(limit);
    if (hr_mysql_query(m,
                       state != NULL ? LIST_SELECT "WHERE state = ? ORDER BY id DESC LIMIT ?"
                                     : LIST_SELECT "ORDER BY id DESC LIMIT ?",
                       p, np, &rows, err, sizeof err) < 0) {
        ctl_fail("list: %s", err);
        goto done;
    }
    printf("%8s  %-*s  %-11s  %-24s  %11s  %11s  %9s\n", "ID", LIST_NAME_WIDTH, "NAME", "STATE",
           "DUE (UTC)", "TOTAL", "SENT", "FAILED");
    for (size_t i = 0; i < rows->nrows; i++) {
        const char *name = hr_mysql_cell(rows, i, 1);
        printf("%8s  %-*.*s  %-11s  %-24s  %11s  %11s  %9s\n", hr_mysql_cell(rows, i, 0),
               LIST_NAME_WIDTH, LIST_NAME_WIDTH, name != NULL ? name : "",
               hr_mysql_cell(rows, i, 2), ctl_fmt_time_iso(list_int(rows, i, 3), due, sizeof due),
               ctl_fmt_count(list_int(rows, i, 4), total, sizeof total),
               ctl_fmt_count(list_int(rows, i, 5), sent, sizeof sent),
               ctl_fmt_count(list_int(rows, i, 6), failed, sizeof failed));
    }
    if (rows->nrows == 0)
        printf("(no tasks%s%s)\n", state != NULL ? " in state " : "", state != NULL ? state : "");
    rc = CTL_EXIT_OK;
done:
    hr_mysql_rows_free(rows);
    return rc;
}
