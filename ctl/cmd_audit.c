/* cmd_audit: `heraldctl audit`, the audit log (hr_audit.h):
 *
 *   audit [--task ID] [--actor A] [--action S] [--since T] [--until T]
 *         [--before ID] [--limit N] [--json]
 *       the newest rows first, one a line (or a JSON array), and the
 *       --before of the next page on stderr when there is one;
 *   audit purge --older-than D
 *       the retention purge: deletes the rows older than D (at least 30
 *       days; the table's trigger refuses younger ones) and writes its own
 *       row, in one transaction. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "hr_clock.h"

/* Member NAME of O as text for a table cell ("-" for null). */
static const char *audit_cell(const cJSON *o, const char *name, char *buf, size_t len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    char *text;

    if (v == NULL || cJSON_IsNull(v))
        return "-";
    if (cJSON_IsString(v))
        return v->valuestring;
    text = cJSON_PrintUnformatted(v);
    snprintf(buf, len, "%s", text != NULL ? text : "?");
    free(text);
    return buf;
}

static int audit_purge(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"older-than", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    int64_t age_ms = -1, deleted = 0, now = hr_clock_now_ms();
    char errstr[512], when[40];
    hr_mysql *m;
    int opt;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt != 'o')
            return ctl_usage(ctx, NULL);
        if (ctl_fmt_parse_duration("--older-than", optarg, &age_ms, errstr, sizeof errstr) < 0)
            return ctl_usage(ctx, "%s", errstr);
    }
    if (optind != argc || age_ms < 0)
        return ctl_usage(ctx, "purge takes --older-than D only");
    if (age_ms < (int64_t)HR_AUDIT_KEEP_MIN_DAYS * 86400 * 1000)
        return ctl_usage(ctx, "--older-than must be at least %dd: the audit log keeps that much",
                         HR_AUDIT_KEEP_MIN_DAYS);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (hr_audit_purge(m, ctl_who(ctx), now, now - age_ms, &deleted, errstr, sizeof errstr) != 0)
        return ctl_fail("audit purge: %s", errstr);
    printf("deleted %" PRId64 " audit row(s) older than %s\n", deleted,
           ctl_fmt_time_iso(now - age_ms, when, sizeof when));
    return CTL_EXIT_OK;
}

int ctl_cmd_audit(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"task", required_argument, NULL, 't'},
        {"actor", required_argument, NULL, 'a'},
        {"action", required_argument, NULL, 'A'},
        {"since", required_argument, NULL, 's'},
        {"until", required_argument, NULL, 'u'},
        {"before", required_argument, NULL, 'b'},
        {"limit", required_argument, NULL, 'l'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    hr_audit_filter f = {.since_ms = -1, .until_ms = -1, .limit = 50};
    char errstr[512], cell[HR_AUDIT_JSON_MAX + 64];
    int64_t v, next = 0;
    bool json = false;
    cJSON *rows = NULL, *row;
    hr_mysql *m;
    int opt;

    if (argc >= 2 && strcmp(argv[1], "purge") == 0)
        return audit_purge(ctx, argc - 1, argv + 1);
    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 't':
        case 'b':
        case 'l':
            if (ctl_fmt_parse_int(opt == 't'   ? "--task"
                                  : opt == 'b' ? "--before"
                                               : "--limit",
                                  optarg, 1, opt == 'l' ? HR_AUDIT_LIST_MAX : INT64_MAX, &v, errstr,
                                  sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            if (opt == 't')
                f.task_id = v;
            else if (opt == 'b')
                f.before_id = v;
            else
                f.limit = (int)v;
            break;
        case 'a':
            f.actor = optarg;
            break;
        case 'A':
            f.action = optarg;
            break;
        case 's':
        case 'u':
            if (ctl_fmt_parse_time(opt == 's' ? "--since" : "--until", optarg,
                                   opt == 's' ? &f.since_ms : &f.until_ms, errstr,
                                   sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        case 'j':
            json = true;
            break;
        default:
            return ctl_usage(ctx, NULL);
        }
    }
    if (optind != argc)
        return ctl_usage(ctx, "unexpected argument '%s'", argv[optind]);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (hr_audit_list(m, &f, &rows, &next, errstr, sizeof errstr) != 0)
        return ctl_fail("%s", errstr);
    if (json) {
        char *text = cJSON_PrintUnformatted(rows);

        printf("%s\n", text != NULL ? text : "[]");
        free(text);
    } else {
        /* One line a row: the first six bare, the rest NAME=VALUE. */
        static const char *const cols[] = {"id",     "at",      "actor",  "via",    "peer",
                                           "action", "task_id", "target", "before", "after"};
        cJSON_ArrayForEach(row, rows)
        {
            for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
                printf("%s%s%s%s", i > 0 ? "  " : "", i >= 6 ? cols[i] : "", i >= 6 ? "=" : "",
                       audit_cell(row, cols[i], cell, sizeof cell));
            putchar('\n');
        }
    }
    if (next > 0)
        fprintf(stderr, "more: heraldctl audit --before %" PRId64 " ...\n", next);
    cJSON_Delete(rows);
    return CTL_EXIT_OK;
}
