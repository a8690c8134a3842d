/* cmd_series: `heraldctl series create|list|show|next|pause|resume|end` —
 * reminders that repeat (common/hr_series.h; docs/scheduling.md "Series").
 *
 *   create --name N --channel C --rrule R --dtstart 'YYYY-MM-DD HH:MM:SS'
 *          [--tz Z] [--local-time] [--exdate LIST] [--catch-up P] [--lead D]
 *          [--expire-after D] [--drip-days N] [--topic T] [--title T] [--body B]
 *          [--payload JSON] [--category C] [--priority P]
 *          [--variant L=JSON]... [--variants FILE]
 *                              checked as the dispatcher will (the rule by
 *                              libical, the zone, an occurrence as a task,
 *                              the variants as a task's), then written;
 *                              prints its id
 *   list [--json]              every series: id, state, next, occurrences, rule
 *   show ID                    one series (its variants' keys) and its next 5
 *                              occurrences
 *   next ID [--count N]        its next N occurrences (wall time, due instant)
 *   pause|resume|end ID        an admin's change (hr_series_set_state)
 *   subscribe ID UID...|--file FILE|-
 *                              subscribes the uids from now (those who
 *                              left subscribe again; hr_series_subs_add);
 *                              a file as `heraldctl import` reads it
 *   unsubscribe ID UID...|--file FILE|-
 *                              unsubscribes them from now
 *   subscribers ID [--after UID] [--limit N]
 *                              the count now, then a page of uids and
 *                              since when (by uid, 1000 by default)
 *
 * A change writes its audit row (target "series <id>") in its transaction.
 * A series' subscribers receive every occurrence claimed while they are
 * subscribed (docs/scheduling.md "Subscribers of a series"). */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "ctl_uids.h"
#include "ctl_variant.h"
#include "hr_series.h"
#include "hr_series_subs.h"
#include "hr_vec.h"

#define CTL_SERIES_NEXT_MAX 100
#define CTL_SERIES_SUBS_BATCH 10000 /* uids a transaction of subscribe --file */

/* create's options into S (whose template is T); --variant and
 * --variants into *VARIANTS (the API's array, created when first given;
 * the caller deletes it). */
static int ctl_series_parse(ctl_ctx *ctx, int argc, char **argv, hr_series *s, hr_task *t,
                            cJSON **variants)
{
    static const struct option options[] = {
        {"name", required_argument, NULL, 'n'},      {"channel", required_argument, NULL, 'c'},
        {"rrule", required_argument, NULL, 'r'},     {"dtstart", required_argument, NULL, 's'},
        {"tz", required_argument, NULL, 'z'},        {"local-time", no_argument, NULL, 'l'},
        {"exdate", required_argument, NULL, 'x'},    {"catch-up", required_argument, NULL, 'u'},
        {"lead", required_argument, NULL, 'L'},      {"expire-after", required_argument, NULL, 'e'},
        {"drip-days", required_argument, NULL, 'd'}, {"topic", required_argument, NULL, 'T'},
        {"title", required_argument, NULL, 't'},     {"body", required_argument, NULL, 'b'},
        {"payload", required_argument, NULL, 'p'},   {"category", required_argument, NULL, 'C'},
        {"priority", required_argument, NULL, 'P'},  {"variant", required_argument, NULL, 'v'},
        {"variants", required_argument, NULL, 'V'},  {NULL, 0, NULL, 0},
    };
    char errstr[256];
    int64_t ms;
    int opt;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 'n':
            t->name = optarg;
            break;
        case 'c':
            t->channel = optarg;
            break;
        case 'r':
            s->rrule = optarg;
            break;
        case 'z':
            s->tz = optarg;
            break;
        case 'l':
            s->local_time = true;
            break;
        case 'x':
            s->exdate = optarg;
            break;
        case 'T':
            t->topic = optarg;
            break;
        case 't':
            t->title = optarg;
            break;
        case 'b':
            t->body = optarg;
            break;
        case 'p':
            t->payload = optarg;
            break;
        case 'C':
            t->category = optarg;
            break;
        case 's':
            if (ctl_fmt_parse_time("--dtstart", optarg, &s->dtstart_wall_ms, errstr,
                                   sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        case 'u':
            if (hr_series_catch_up_parse(optarg, &s->catch_up) < 0)
                return ctl_usage(ctx, "--catch-up: none, latest or all");
            break;
        case 'P':
            if (hr_priority_parse(optarg, &t->priority) < 0)
                return ctl_usage(ctx, "--priority: high or normal");
            break;
        case 'd':
            if (ctl_fmt_parse_int("--drip-days", optarg, 0, HR_SERIES_DRIP_DAYS_MAX, &s->drip_days,
                                  errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        case 'L':
        case 'e':
            if (ctl_fmt_parse_duration(opt == 'L' ? "--lead" : "--expire-after", optarg, &ms,
                                       errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            *(opt == 'L' ? &s->lead_s : &s->expire_after_s) = ms / 1000;
            break;
        case 'v':
        case 'V':
            if (*variants == NULL && (*variants = cJSON_CreateArray()) == NULL)
                return ctl_fail("out of memory");
            if ((opt == 'v' ? ctl_variant_arg(*variants, optarg, errstr, sizeof errstr)
                            : ctl_variant_file(*variants, optarg, errstr, sizeof errstr)) != 0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        default:
            return ctl_usage(ctx, NULL);
        }
    }
    if (optind != argc || t->name == NULL || t->channel == NULL || s->rrule == NULL ||
        s->dtstart_wall_ms == INT64_MIN)
        return ctl_usage(ctx, "create needs --name, --channel, --rrule and --dtstart");
    t->throttle_scope = t->topic; /* what a loaded template has */
    return CTL_EXIT_OK;
}

static int ctl_series_create(ctl_ctx *ctx, int argc, char **argv)
{
    hr_task t;
    hr_series s;
    char errstr[512], target[40];
    hr_mysql *m;
    int64_t id = 0;
    cJSON *after, *variants = NULL;
    int rc;

    hr_series_defaults(&s, &t);
    rc = ctl_series_parse(ctx, argc, argv, &s, &t, &variants);
    if (rc == CTL_EXIT_OK && variants != NULL &&
        hr_variant_from_json(variants, &s.variants, errstr, sizeof errstr) != 0)
        rc = ctl_fail("series refused: %s", errstr);
    cJSON_Delete(variants);
    if (rc == CTL_EXIT_OK && hr_series_validate(&s, ctx->cfg, errstr, sizeof errstr) < 0)
        rc = ctl_fail("series refused: %s", errstr);
    if (rc == CTL_EXIT_OK && ctl_mysql(ctx, &m) < 0)
        rc = CTL_EXIT_FAIL;
    if (rc != CTL_EXIT_OK)
        goto done;
    if (hr_mysql_begin(m, errstr, sizeof errstr) < 0 ||
        hr_series_insert(m, &s, &id, errstr, sizeof errstr) < 0) {
        hr_mysql_rollback(m);
        rc = ctl_fail("series create: %s", errstr);
        goto done;
    }
    snprintf(target, sizeof target, "series %" PRId64, id);
    after = ctl_args_json(argc, argv);
    rc = ctl_audit(ctx, m, "heraldctl series create", 0, target, NULL, after);
    cJSON_Delete(after);
    if (rc != 0) {
        hr_mysql_rollback(m);
        rc = CTL_EXIT_FAIL;
        goto done;
    }
    if (hr_mysql_commit(m, errstr, sizeof errstr) < 0) {
        rc = ctl_fail("series create: %s", errstr);
        goto done;
    }
    printf("created series %" PRId64 "\n", id);
    rc = CTL_EXIT_OK;
done:
    hr_variant_set_clear(&s.variants);
    return rc;
}

static int ctl_series_list(ctl_ctx *ctx, int argc, char **argv)
{
    bool json = argc == 2 && strcmp(argv[1], "--json") == 0;
    hr_mysql_rows *rows = NULL;
    int64_t after = 0;
    char errstr[512];
    bool first = true;
    hr_mysql *m;

    if (argc > 2 || (argc == 2 && !json))
        return ctl_usage(ctx, "list takes --json only");
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    printf("%s", json ? "[" : "");
    do {
        hr_mysql_rows_free(rows);
        rows = NULL;
        if (hr_series_list(m, after, 1000, &rows, errstr, sizeof errstr) < 0)
            return ctl_fail("series list: %s", errstr);
        for (size_t i = 0; i < rows->nrows; i++) {
            const char *c[11];

            for (size_t k = 0; k < 11; k++)
                c[k] = hr_mysql_cell(rows, i, k);
            after = strtoll(c[0], NULL, 10);
            if (json) {
                cJSON *o = cJSON_CreateObject();
                char *text;

                cJSON_AddNumberToObject(o, "id", (double)after);
                cJSON_AddStringToObject(o, "name", c[1]);
                cJSON_AddStringToObject(o, "state", c[2]);
                cJSON_AddStringToObject(o, "rrule", c[3]);
                cJSON_AddStringToObject(o, "dtstart", c[4]);
                cJSON_AddStringToObject(o, "tz", c[5]);
                cJSON_AddBoolToObject(o, "local_time", strcmp(c[6], "1") == 0);
                cJSON_AddStringToObject(o, "catch_up", c[7]);
                cJSON_AddStringToObject(o, "next_at", c[8]);
                cJSON_AddNumberToObject(o, "occurrences", strtod(c[9], NULL));
                cJSON_AddStringToObject(o, "last_error", c[10]);
                text = cJSON_PrintUnformatted(o);
                printf("%s%s", first ? "" : ",", text ? text : "{}");
                first = false;
                free(text);
                cJSON_Delete(o);
            } else {
                printf("%s\t%s\t%s\t%s\t%s occurrences\t%s %s%s\t%s%s%s\n", c[0], c[2], c[1],
                       c[8][0] ? c[8] : "-", c[9], c[3], c[5],
                       strcmp(c[6], "1") == 0 ? " (each recipient's zone)" : "", c[7],
                       c[10][0] ? "\t" : "", c[10]);
            }
        }
    } while (rows->nrows == 1000);
    hr_mysql_rows_free(rows);
    printf("%s", json ? "]\n" : "");
    return CTL_EXIT_OK;
}

/* show ID, next ID [--count N]: the series' next occurrences. */
static int ctl_series_next(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {{"count", required_argument, NULL, 'n'},
                                            {NULL, 0, NULL, 0}};
    bool show = strcmp(argv[0], "show") == 0;
    int64_t id, count = 5, wall[CTL_SERIES_NEXT_MAX], due[CTL_SERIES_NEXT_MAX];
    char errstr[512], a[40], b[40];
    hr_series *s = NULL;
    hr_mysql *m;
    size_t got = 0;
    int opt, rc;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1)
        if (show || opt != 'n' ||
            ctl_fmt_parse_int("--count", optarg, 1, CTL_SERIES_NEXT_MAX, &count, errstr,
                              sizeof errstr) < 0)
            return ctl_usage(ctx, "%s", opt == 'n' && !show ? errstr : "unknown option");
    if (argc - optind != 1 ||
        ctl_fmt_parse_int("ID", argv[optind], 1, INT64_MAX, &id, errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "%s needs ID", argv[0]);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    rc = hr_series_load(m, id, &s, errstr, sizeof errstr);
    if (rc != 0)
        return rc == 1 ? ctl_fail("series %" PRId64 " does not exist", id)
                       : ctl_fail("series %s: %s", argv[0], errstr);
    if (show)
        printf("series %" PRId64 " %s: %s, channel %s, %s from %s in %s%s, catch_up %s, "
               "%" PRId64 " occurrences written\n",
               id, s->tmpl->name, hr_series_state_name(s->state), s->tmpl->channel, s->rrule,
               ctl_fmt_time_sql(s->dtstart_wall_ms, a, sizeof a), s->tz,
               s->local_time ? " (each recipient's zone)" : "",
               hr_series_catch_up_name(s->catch_up), s->occurrences);
    for (size_t i = 0; show && i < s->variants.n; i++)
        printf("%s%s%s", i == 0 ? "variants " : ", ", s->variants.v[i].key,
               i + 1 == s->variants.n ? "\n" : "");
    rc = hr_series_next(s, (size_t)count, wall, due, &got, errstr, sizeof errstr);
    if (rc < 0)
        rc = ctl_fail("series %" PRId64 ": %s", id, errstr);
    for (size_t i = 0; rc == 0 && i < got; i++)
        printf("%s %s\t%s\n", ctl_fmt_time_sql(wall[i], a, sizeof a), s->tz,
               s->local_time ? "in each recipient's zone" : ctl_fmt_time_iso(due[i], b, sizeof b));
    if (rc == 0 && got < (size_t)count)
        printf("(no more: the rule ends)\n");
    hr_series_free(s);
    return rc == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

/* pause, resume, end: ARGV = {verb, ID}. */
static int ctl_series_change(ctl_ctx *ctx, int argc, char **argv)
{
    const char *verb = argv[0];
    hr_series_state to = strcmp(verb, "pause") == 0    ? HR_SERIES_PAUSED
                         : strcmp(verb, "resume") == 0 ? HR_SERIES_ACTIVE
                                                       : HR_SERIES_ENDED;
    hr_series_state from = HR_SERIES_ACTIVE;
    char errstr[512], target[40], action[40];
    cJSON *before, *after;
    hr_mysql *m;
    int64_t id;
    int rc;

    if (argc != 2 || ctl_fmt_parse_int("ID", argv[1], 1, INT64_MAX, &id, errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "%s needs ID", verb);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (hr_mysql_begin(m, errstr, sizeof errstr) < 0)
        return ctl_fail("series %s: %s", verb, errstr);
    rc = hr_series_set_state(m, id, to, &from, errstr, sizeof errstr);
    if (rc != 0) {
        hr_mysql_rollback(m);
        if (rc == 1)
            return ctl_fail("series %" PRId64 " does not exist", id);
        if (rc == 2)
            return ctl_fail("series %" PRId64 " is %s: it cannot %s", id,
                            hr_series_state_name(from), verb);
        return ctl_fail("series %s: %s", verb, errstr);
    }
    snprintf(target, sizeof target, "series %" PRId64, id);
    snprintf(action, sizeof action, "heraldctl series %s", verb);
    before = cJSON_CreateObject();
    after = cJSON_CreateObject();
    cJSON_AddStringToObject(before, "state", hr_series_state_name(from));
    cJSON_AddStringToObject(after, "state", hr_series_state_name(to));
    rc = ctl_audit(ctx, m, action, 0, target, before, after);
    cJSON_Delete(before);
    cJSON_Delete(after);
    if (rc != 0) {
        hr_mysql_rollback(m);
        return CTL_EXIT_FAIL;
    }
    if (hr_mysql_commit(m, errstr, sizeof errstr) < 0)
        return ctl_fail("series %s: %s", verb, errstr);
    printf("series %" PRId64 " %s\n", id, hr_series_state_name(to));
    return CTL_EXIT_OK;
}

/* One batch of subscribe (SUBSCRIBE) or unsubscribe of series ID in its
 * own transaction with its audit row (the counts, not the uids); *CHANGED
 * adds the uids changed.  0, 1 when the series does not exist, or -1
 * (printed). */
static int ctl_series_subs_batch(ctl_ctx *ctx, hr_mysql *m, int64_t id, bool subscribe,
                                 const int64_t *uids, size_t n, uint64_t *changed)
{
    char errstr[512], target[40], action[48];
    uint64_t got = 0;
    cJSON *after;
    int rc;

    if (hr_mysql_begin(m, errstr, sizeof errstr) < 0) {
        ctl_fail("series: %s", errstr);
        return -1;
    }
    rc = hr_series_subs_check(m, id, errstr, sizeof errstr);
    if (rc == 0)
        rc = subscribe ? hr_series_subs_add(m, id, uids, n, &got, errstr, sizeof errstr)
                       : hr_series_subs_del(m, id, uids, n, &got, errstr, sizeof errstr);
    if (rc != 0) {
        hr_mysql_rollback(m);
        if (rc < 0)
            ctl_fail("series: %s", errstr);
        return rc;
    }
    snprintf(target, sizeof target, "series %" PRId64, id);
    snprintf(action, sizeof action, "heraldctl series %s", subscribe ? "subscribe" : "unsubscribe");
    after = cJSON_CreateObject();
    cJSON_AddNumberToObject(after, "received", (double)n);
    cJSON_AddNumberToObject(after, subscribe ? "added" : "removed", (double)got);
    rc = ctl_audit(ctx, m, action, 0, target, NULL, after);
    cJSON_Delete(after);
    if (rc != 0) {
        hr_mysql_rollback(m);
        return -1;
    }
    if (hr_mysql_commit(m, errstr, sizeof errstr) < 0) {
        ctl_fail("series: %s", errstr);
        return -1;
    }
    *changed += got;
    return 0;
}

/* subscribe, unsubscribe: ARGV = {verb, ID, UID...} or {verb, ID, --file,
 * FILE|-}.  Every uid is read and checked before anything is written, then
 * they go in batches of CTL_SERIES_SUBS_BATCH, each in its own
 * transaction (a long one would hold the series row's shared lock, which
 * an occurrence's reconciliation waits for); both are idempotent, so a run
 * that failed half way is run again. */
static int ctl_series_subscribe(ctl_ctx *ctx, int argc, char **argv)
{
    const char *verb = argv[0];
    bool subscribe = strcmp(verb, "subscribe") == 0;
    char errstr[512];
    ctl_uids uids = {0};
    uint64_t changed = 0;
    int64_t id;
    hr_mysql *m;
    int rc = CTL_EXIT_FAIL, got;

    if (argc < 3 || ctl_fmt_parse_int("ID", argv[1], 1, INT64_MAX, &id, errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "%s needs ID and UIDs (or --file FILE)", verb);
    if (strcmp(argv[2], "--file") == 0) {
        if (argc != 4)
            return ctl_usage(ctx, "%s ID --file FILE (or -)", verb);
        if (ctl_uids_read(argv[3], &uids, errstr, sizeof errstr) < 0) {
            ctl_fail("series %s: %s (nothing written)", verb, errstr);
            goto done;
        }
    } else {
        for (int i = 2; i < argc; i++) {
            int64_t v;

            if (ctl_fmt_parse_int("UID", argv[i], 1, INT64_MAX, &v, errstr, sizeof errstr) < 0) {
                rc = ctl_usage(ctx, "%s", errstr);
                goto done;
            }
            if (hr_vec_push(&uids, v) < 0) {
                ctl_fail("out of memory");
                goto done;
            }
        }
    }
    if (ctl_mysql(ctx, &m) < 0)
        goto done;
    for (size_t at = 0; at < uids.n; at += CTL_SERIES_SUBS_BATCH) {
        size_t n = uids.n - at < CTL_SERIES_SUBS_BATCH ? uids.n - at : CTL_SERIES_SUBS_BATCH;

        got = ctl_series_subs_batch(ctx, m, id, subscribe, uids.v + at, n, &changed);
        if (got == 1)
            ctl_fail("series %" PRId64 " does not exist", id);
        if (got != 0)
            goto done;
    }
    printf("series %" PRId64 ": %zu uid(s), %" PRIu64 " %s\n", id, uids.n, changed,
           subscribe ? "subscribed (new or again)" : "unsubscribed");
    rc = CTL_EXIT_OK;
done:
    hr_vec_free(&uids);
    return rc;
}

/* subscribers ID [--after UID] [--limit N]. */
static int ctl_series_subscribers(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {{"after", required_argument, NULL, 'a'},
                                            {"limit", required_argument, NULL, 'n'},
                                            {NULL, 0, NULL, 0}};
    int64_t id, after = 0, limit = 1000, count = 0;
    hr_mysql_rows *rows = NULL;
    char errstr[512];
    hr_mysql *m;
    int opt, found;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1)
        if ((opt != 'a' && opt != 'n') ||
            ctl_fmt_parse_int(opt == 'a' ? "--after" : "--limit", optarg, opt == 'a' ? 0 : 1,
                              opt == 'a' ? INT64_MAX : HR_SERIES_SUBS_PAGE_MAX,
                              opt == 'a' ? &after : &limit, errstr, sizeof errstr) < 0)
            return ctl_usage(ctx, "%s", opt == 'a' || opt == 'n' ? errstr : "unknown option");
    if (optind != argc - 1 ||
        ctl_fmt_parse_int("ID", argv[optind], 1, INT64_MAX, &id, errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "subscribers needs ID");
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    found = hr_series_subs_check(m, id, errstr, sizeof errstr);
    if (found == 1)
        return ctl_fail("series %" PRId64 " does not exist", id);
    if (found < 0 || hr_series_subs_count(m, id, &count, errstr, sizeof errstr) < 0 ||
        hr_series_subs_list(m, id, after, limit, &rows, errstr, sizeof errstr) < 0)
        return ctl_fail("series subscribers: %s", errstr);
    printf("series %" PRId64 ": %" PRId64 " subscriber(s)\n", id, count);
    for (size_t i = 0; i < rows->nrows; i++)
        printf("%s\t%s\n", hr_mysql_cell(rows, i, 0), hr_mysql_cell(rows, i, 1));
    hr_mysql_rows_free(rows);
    return CTL_EXIT_OK;
}

int ctl_cmd_series(ctl_ctx *ctx, int argc, char **argv)
{
    const char *verb = argc >= 2 ? argv[1] : "";

    if (strcmp(verb, "create") == 0)
        return ctl_series_create(ctx, argc - 1, argv + 1);
    if (strcmp(verb, "list") == 0)
        return ctl_series_list(ctx, argc - 1, argv + 1);
    if (strcmp(verb, "show") == 0 || strcmp(verb, "next") == 0)
        return ctl_series_next(ctx, argc - 1, argv + 1);
    if (strcmp(verb, "pause") == 0 || strcmp(verb, "resume") == 0 || strcmp(verb, "end") == 0)
        return ctl_series_change(ctx, argc - 1, argv + 1);
    if (strcmp(verb, "subscribe") == 0 || strcmp(verb, "unsubscribe") == 0)
        return ctl_series_subscribe(ctx, argc - 1, argv + 1);
    if (strcmp(verb, "subscribers") == 0)
        return ctl_series_subscribers(ctx, argc - 1, argv + 1);
    return ctl_usage(ctx,
                     argc < 2 ? "expected create, list, show, next, pause, resume, end, "
                                "subscribe, unsubscribe or subscribers"
                              : "unknown subcommand '%s'",
                     verb);
}
