/* cmd_list: `heraldctl list [--state S] [--limit N] [--json]` — the newest
 * tasks as a table (id, name, state, due, every outcome counter and the
 * last error), or as one JSON array with every counter.
 *
 * One prepared SELECT; the state filter is matched against the column's
 * own values so that a typo is refused instead of listing nothing.  Names
 * and errors are admin or provider text in any script: cells are cut and
 * padded by terminal columns (ctl_fmt_cell), not bytes, so a CJK or emoji
 * name neither breaks UTF-8 nor shifts the columns after it. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "hr_state.h"

#define LIST_DEFAULT_LIMIT 20
#define LIST_MAX_LIMIT 10000
#define LIST_NAME_WIDTH 28  /* terminal columns */
#define LIST_ERROR_WIDTH 40 /* the last column: cut, not padded */
#define LIST_CELL_MAX (4 * LIST_ERROR_WIDTH + 8)

/* Column order of LIST_SELECT; the counters follow each other. */
enum {
    LIST_ID,
    LIST_NAME,
    LIST_STATE,
    LIST_DUE_MS,
    LIST_TOPIC,
    LIST_CHANNEL,
    LIST_CONTROL,
    LIST_FINISHED_MS,
    LIST_LAST_ERROR,
    LIST_TOTAL,
    LIST_SENT,
    LIST_FAILED,
    LIST_THROTTLED,
    LIST_PULLED,
    LIST_CANCELLED,
    LIST_RETRIED,
    LIST_EXPIRED,
    LIST_OPTED_OUT,
    LIST_SUPPRESSED,
    LIST_NCOLS
};

#define LIST_SELECT                                                                        \
    "SELECT id, name, state, CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED), "       \
    "topic, channel, control, CAST(ROUND(UNIX_TIMESTAMP(finished_at) * 1000) AS SIGNED), " \
    "last_error, total, sent, failed, throttled, pulled, cancelled, retried, expired, "    \
    "opted_out, suppressed FROM push_task "

static const char *const list_counters[] = {"total",     "sent",      "failed",  "throttled",
                                            "pulled",    "cancelled", "retried", "expired",
                                            "opted_out", "suppressed"};

static int64_t list_int(const hr_mysql_rows *rows, size_t row, size_t col)
{
    const char *v = hr_mysql_cell(rows, row, col);

    return v != NULL ? strtoll(v, NULL, 10) : -1;
}

static void list_table(const hr_mysql_rows *rows)
{
    char name[LIST_CELL_MAX], error[LIST_CELL_MAX], due[40], n[9][32];

    printf("%8s  %s  %-11s  %-19s  %11s  %11s  %9s  %9s  %9s  %9s  %9s  %9s  %10s  %s\n", "ID",
           ctl_fmt_cell("NAME", LIST_NAME_WIDTH, true, name, sizeof name), "STATE", "DUE (UTC)",
           "TOTAL", "SENT", "FAILED", "THROTTLED", "PULLED", "CANCELLED", "EXPIRED", "OPTED OUT",
           "SUPPRESSED", "LAST ERROR");
    for (size_t i = 0; i < rows->nrows; i++) {
        for (int c = 0; c < 6; c++)
            ctl_fmt_count(list_int(rows, i, LIST_TOTAL + (size_t)c), n[c], sizeof n[c]);
        ctl_fmt_count(list_int(rows, i, LIST_EXPIRED), n[6], sizeof n[6]);
        ctl_fmt_count(list_int(rows, i, LIST_OPTED_OUT), n[7], sizeof n[7]);
        ctl_fmt_count(list_int(rows, i, LIST_SUPPRESSED), n[8], sizeof n[8]);
        /* Seconds are enough to tell tasks apart in a list. */
        ctl_fmt_time_sql(list_int(rows, i, LIST_DUE_MS), due, sizeof due);
        due[19] = '\0';
        printf("%8s  %s  %-11s  %-19s  %11s  %11s  %9s  %9s  %9s  %9s  %9s  %9s  %10s  %s\n",
               hr_mysql_cell(rows, i, LIST_ID),
               ctl_fmt_cell(hr_mysql_cell(rows, i, LIST_NAME), LIST_NAME_WIDTH, true, name,
                            sizeof name),
               hr_mysql_cell(rows, i, LIST_STATE), due, n[0], n[1], n[2], n[3], n[4], n[5], n[6],
               n[7], n[8],
               ctl_fmt_cell(hr_mysql_cell(rows, i, LIST_LAST_ERROR), LIST_ERROR_WIDTH, false, error,
                            sizeof error));
    }
}

/* A string column as a JSON string, NULL as null. */
static bool list_json_str(cJSON *o, const char *key, const char *v)
{
    return (v != NULL ? cJSON_AddStringToObject(o, key, v) : cJSON_AddNullToObject(o, key)) != NULL;
}

/* Epoch ms as an ISO time string, a NULL column (-1) as null. */
static bool list_json_time(cJSON *o, const char *key, int64_t ms)
{
    char buf[40];

    return list_json_str(o, key, ms >= 0 ? ctl_fmt_time_iso(ms, buf, sizeof buf) : NULL);
}

/* The rows as one JSON array on stdout.  0, or -1 when out of memory. */
static int list_json(const hr_mysql_rows *rows)
{
    cJSON *arr = cJSON_CreateArray(), *o;
    char *text = NULL;
    bool ok = arr != NULL;

    for (size_t i = 0; ok && i < rows->nrows; i++) {
        o = cJSON_CreateObject();
        ok = o != NULL && cJSON_AddItemToArray(arr, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        /* Ids and counters are numbers: exact in a double below 2^53. */
        ok = cJSON_AddNumberToObject(o, "id", (double)list_int(rows, i, LIST_ID)) != NULL &&
             list_json_str(o, "name", hr_mysql_cell(rows, i, LIST_NAME)) &&
             list_json_str(o, "state", hr_mysql_cell(rows, i, LIST_STATE)) &&
             list_json_str(o, "control", hr_mysql_cell(rows, i, LIST_CONTROL)) &&
             list_json_str(o, "topic", hr_mysql_cell(rows, i, LIST_TOPIC)) &&
             list_json_str(o, "channel", hr_mysql_cell(rows, i, LIST_CHANNEL)) &&
             list_json_time(o, "due_at", list_int(rows, i, LIST_DUE_MS)) &&
             list_json_time(o, "finished_at", list_int(rows, i, LIST_FINISHED_MS));
        for (size_t c = 0; ok && c < sizeof list_counters / sizeof list_counters[0]; c++)
            ok = cJSON_AddNumberToObject(o, list_counters[c],
                                         (double)list_int(rows, i, LIST_TOTAL + c)) != NULL;
        ok = ok && list_json_str(o, "last_error", hr_mysql_cell(rows, i, LIST_LAST_ERROR));
    }
    if (ok)
        text = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    if (text == NULL)
        return -1;
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
}

int ctl_cmd_list(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"state", required_argument, NULL, 's'},
        {"limit", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    const char *state = NULL;
    hr_task_state known;
    int64_t limit = LIST_DEFAULT_LIMIT;
    hr_mysql_rows *rows = NULL;
    hr_mysql_param p[2];
    char errstr[512];
    hr_mysql *m;
    size_t np = 0;
    bool json = false;
    int opt, rc = CTL_EXIT_FAIL;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 's') {
            if (hr_state_parse(optarg, &known) < 0)
                return ctl_usage(ctx,
                                 "--state: \"%s\" is not one of scheduled, dispatching, "
                                 "dispatched, done, paused, cancelled, failed",
                                 optarg);
            state = optarg;
        } else if (opt == 'n') {
            if (ctl_fmt_parse_int("--limit", optarg, 1, LIST_MAX_LIMIT, &limit, errstr,
                                  sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
        } else if (opt == 'j') {
            json = true;
        } else {
            return ctl_usage(ctx, NULL);
        }
    }
    if (optind < argc)
        return ctl_usage(ctx, "unexpected argument \"%s\"", argv[optind]);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;

    if (state != NULL)
        p[np++] = HR_P_STR(state);
    p[np++] = HR_P_I64(limit);
    if (hr_mysql_query(m,
                       state != NULL ? LIST_SELECT "WHERE state = ? ORDER BY id DESC LIMIT ?"
                                     : LIST_SELECT "ORDER BY id DESC LIMIT ?",
                       p, np, &rows, errstr, sizeof errstr) < 0) {
        ctl_fail("list: %s", errstr);
        goto done;
    }
    if (rows->ncols != LIST_NCOLS) {
        ctl_fail("list: %zu columns instead of %d", rows->ncols, LIST_NCOLS);
        goto done;
    }
    if (json) {
        if (list_json(rows) < 0) {
            ctl_fail("list: out of memory");
            goto done;
        }
    } else {
        list_table(rows);
        if (rows->nrows == 0)
            printf("(no tasks%s%s)\n", state != NULL ? " in state " : "",
                   state != NULL ? state : "");
    }
    rc = CTL_EXIT_OK;
done:
    hr_mysql_rows_free(rows);
    return rc;
}
