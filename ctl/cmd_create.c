/* cmd_create: `heraldctl create` — one push_task row from flags.
 *
 * The flags fill an hr_task in memory that goes through hr_task_validate,
 * the check the dispatcher applies before it dispatches, so a task the
 * dispatcher would fail is refused here with the same words and nothing is
 * inserted.  The row is then written with one prepared INSERT; every column
 * not given keeps the table's default. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_cmd.h"
#include "hr_clock.h"
#include "hr_config_file.h"
#include "hr_parse.h"
#include "ctl_fmt.h"
#include "ctl_variant.h"
#include "hr_shard.h"
#include "hr_task.h"
#include "hr_tz.h"
#include "hr_variant.h"

/* Every flag of create_options[], for `heraldctl help create`. */
const char ctl_create_flags[] =
    "  --name N             required; shown in lists\n"
    "  --channel C          required; a channel of the configuration\n"
    "  --due-at TIME        due time, UTC: 'YYYY-MM-DD HH:MM:SS[.mmm]'\n"
    "  --due-in D           or due D from now: 250ms, 30s, 5m, 2h, 1d\n"
    "                       (one of --due-at and --due-in is required)\n"
    "  --topic T            default \"default\"\n"
    "  --title T            title template ({{uid}}, {{payload.x}}, {{user.x}}, ...)\n"
    "  --body B             body template, same placeholders\n"
    "  --payload JSON       a JSON object, {{payload.x}} in the templates\n"
    "  --freeze-at TIME     title, body, payload and due time no longer change after it\n"
    "                       (default 00:00 UTC of the due day)\n"
    "  --rate-limit N       pushes/s across the cluster (default 0 = the channel's)\n"
    "  --chunk-size N       recipients per chunk (default 5000)\n"
    "  --throttle-limit N   at most N pushes per recipient in a window (0 = none)\n"
    "  --throttle-window D  that window: 30s, 5m, 1h, 1d (whole seconds)\n"
    "  --throttle-scope S   the name of the shared window (default: the topic)\n"
    "  --throttle-key K     an attribute: one window per value of it (docs/throttle.md)\n"
    "  --throttle-mode M    enforce or shadow (default: the channel's)\n"
    "  --ttl D              how long a provider keeps an undelivered push: 0s, 1h, 7d\n"
    "                       (whole seconds, at most 28d; default: the provider's)\n"
    "  --collapse-key K     a newer push with K replaces an undelivered one (fcm, apns)\n"
    "  --category C         one of recipients.categories (default reminder): opt-outs and\n"
    "                       quiet hours apply unless it is mandatory (docs/recipients.md)\n"
    "  --priority P         high (default) or normal (fcm, apns; the task's weight in\n"
    "                       its channel's rate_limit: high 2, normal 1)\n"
    "  --finish-by TIME     pace the task to end by then (docs/scheduling.md)\n"
    "  --finish-in D        or to end D after the due time: 10m, 2h, 1d\n"
    "  --local-time         the due time's wall clock is read in each recipient's zone\n"
    "                       (user attribute tz, else --default-tz, else UTC)\n"
    "  --default-tz Z       IANA zone of recipients without a tz attribute\n"
    "  --window HH:MM-HH:MM deliver only inside this daily window (may wrap midnight)\n"
    "  --window-tz Z        read the window in zone Z (default: each recipient's)\n"
    "  --expire-at TIME     recipients not pushed by then count expired (UTC, after the\n"
    "                       due time; default: never)\n"
    "  --expire-in D        or expire D after the due time: 30m, 2h, 1d\n"
    "  --shards N           split the subscribers over N sets (1..256, default 1), each\n"
    "                       chunked by any dispatcher (docs/architecture.md)\n"
    "  --expected-recipients N\n"
    "                       or N / 250,000 shards, rounded up\n"
    "  --rich JSON          image, buttons, sound, badge, thread, category,\n"
    "                       mutable_content, silent (docs/providers.md)\n"
    "  --variant L=JSON     content for recipients whose locale is L (or falls back to\n"
    "                       it: pt-BR, then pt): a JSON object of title, body, payload,\n"
    "                       subject, text, html (docs/api.md \"Variants\"); repeatable\n"
    "  --variants FILE      or a JSON array of them, each with \"locale\", or A/B arms\n"
    "                       with \"name\" and \"split\" (docs/api.md; - for stdin)\n"
    "  --ab JSON            test then winner: the arms to a sample, the winner to the\n"
    "                       rest: {\"sample_pct\": 1..99, \"wait_s\": N, \"metric\":\n"
    "                       \"click\" | \"open\" | \"delivered\"} (docs/api.md)\n"
    "  --event-at TIME      the event subscribers' leads count back from (UTC; import\n"
    "                       --lead, docs/scheduling.md \"Lead times\")\n"
    "  --quiet              print only the new id\n";

enum {
    OPT_NAME = 256,
    OPT_CHANNEL,
    OPT_TOPIC,
    OPT_TITLE,
    OPT_BODY,
    OPT_PAYLOAD,
    OPT_DUE_AT,
    OPT_DUE_IN,
    OPT_FREEZE_AT,
    OPT_RATE_LIMIT,
    OPT_CHUNK_SIZE,
    OPT_THROTTLE_LIMIT,
    OPT_THROTTLE_WINDOW,
    OPT_THROTTLE_SCOPE,
    OPT_THROTTLE_KEY,
    OPT_THROTTLE_MODE,
    OPT_TTL,
    OPT_COLLAPSE_KEY,
    OPT_PRIORITY,
    /* pacing */
    OPT_FINISH_BY,
    OPT_FINISH_IN,
    OPT_QUIET,
    OPT_LOCAL_TIME,
    OPT_DEFAULT_TZ,
    OPT_WINDOW,
    OPT_WINDOW_TZ,
    /* expiry */
    OPT_EXPIRE_AT,
    OPT_EXPIRE_IN,
    /* sharded tasks */
    OPT_SHARDS,
    OPT_EXPECTED,
    /* recipients */
    OPT_CATEGORY,
    /* per-locale variants */
    OPT_VARIANT,
    OPT_VARIANTS,
    /* rich and silent pushes */
    OPT_RICH,
    /* A/B tests' winner step */
    OPT_AB,
    /* lead times */
    OPT_EVENT_AT,
};

static const struct option create_options[] = {
    {"name", required_argument, NULL, OPT_NAME},
    {"channel", required_argument, NULL, OPT_CHANNEL},
    {"topic", required_argument, NULL, OPT_TOPIC},
    {"title", required_argument, NULL, OPT_TITLE},
    {"body", required_argument, NULL, OPT_BODY},
    {"payload", required_argument, NULL, OPT_PAYLOAD},
    {"due-at", required_argument, NULL, OPT_DUE_AT},
    {"due-in", required_argument, NULL, OPT_DUE_IN},
    {"freeze-at", required_argument, NULL, OPT_FREEZE_AT},
    {"rate-limit", required_argument, NULL, OPT_RATE_LIMIT},
    {"chunk-size", required_argument, NULL, OPT_CHUNK_SIZE},
    {"throttle-limit", required_argument, NULL, OPT_THROTTLE_LIMIT},
    {"throttle-window", required_argument, NULL, OPT_THROTTLE_WINDOW},
    {"throttle-scope", required_argument, NULL, OPT_THROTTLE_SCOPE},
    {"throttle-key", required_argument, NULL, OPT_THROTTLE_KEY},
    {"throttle-mode", required_argument, NULL, OPT_THROTTLE_MODE},
    {"ttl", required_argument, NULL, OPT_TTL},
    {"collapse-key", required_argument, NULL, OPT_COLLAPSE_KEY},
    {"priority", required_argument, NULL, OPT_PRIORITY},
    {"category", required_argument, NULL, OPT_CATEGORY},
    {"finish-by", required_argument, NULL, OPT_FINISH_BY},
    {"finish-in", required_argument, NULL, OPT_FINISH_IN},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"local-time", no_argument, NULL, OPT_LOCAL_TIME},
    {"default-tz", required_argument, NULL, OPT_DEFAULT_TZ},
    {"window", required_argument, NULL, OPT_WINDOW},
    {"window-tz", required_argument, NULL, OPT_WINDOW_TZ},
    {"expire-at", required_argument, NULL, OPT_EXPIRE_AT},
    {"expire-in", required_argument, NULL, OPT_EXPIRE_IN},
    {"shards", required_argument, NULL, OPT_SHARDS},
    {"expected-recipients", required_argument, NULL, OPT_EXPECTED},
    {"variant", required_argument, NULL, OPT_VARIANT},
    {"variants", required_argument, NULL, OPT_VARIANTS},
    {"rich", required_argument, NULL, OPT_RICH},
    {"ab", required_argument, NULL, OPT_AB},
    {"event-at", required_argument, NULL, OPT_EVENT_AT},
    {NULL, 0, NULL, 0},
};

/* The task as given; strings point into argv.  FREEZE_MS -1 = not given. */
typedef struct create_args {
    hr_task t;
    int64_t freeze_ms;
    char *scope; /* NULL = the topic (the column stays NULL) */
    bool due_given, quiet, shards_given;
    int64_t expire_in_ms; /* --expire-in, -1 = not given: resolved against the due time */
    int64_t finish_in_ms; /* --finish-in, -1 = not given */
    cJSON *variants;      /* --variant / --variants: the API's array (owned) */
} create_args;

/* A duration flag FLAG that must be whole seconds into *SECONDS (capped at
 * INT32_MAX; the range is hr_task_validate's).  0, or -1 with ERRSTR. */
static int create_seconds(const char *flag, const char *arg, int64_t *seconds, char *errstr,
                          size_t errlen)
{
    int64_t ms;

    if (ctl_fmt_parse_duration(flag, arg, &ms, errstr, errlen) < 0)
        return -1;
    if (ms % 1000 != 0) {
        snprintf(errstr, errlen, "%s: \"%s\" is not whole seconds", flag, arg);
        return -1;
    }
    *seconds = ms / 1000 > INT32_MAX ? INT32_MAX : ms / 1000;
    return 0;
}

/* --window "HH:MM[:SS]-HH:MM[:SS]" into T's window.  0, or -1 with ERRSTR. */
static int create_window(const char *arg, hr_task *t, char *errstr, size_t errlen)
{
    char start[16];
    const char *dash = strchr(arg, '-');

    if (dash == NULL || (size_t)(dash - arg) >= sizeof start) {
        snprintf(errstr, errlen, "--window: \"%s\" is not HH:MM-HH:MM", arg);
        return -1;
    }
    memcpy(start, arg, (size_t)(dash - arg));
    start[dash - arg] = '\0';
    if (hr_parse_time_of_day("--window", start, &t->window_start_s, errstr, errlen) < 0 ||
        hr_parse_time_of_day("--window", dash + 1, &t->window_end_s, errstr, errlen) < 0)
        return -1;
    t->window = true;
    return 0;
}

/* Parses the flags into A.  CTL_EXIT_OK, or the exit code after printing. */
static int create_parse(const ctl_ctx *ctx, int argc, char **argv, create_args *a)
{
    char errstr[256];
    int64_t v;
    int opt;

    hr_task_defaults(&a->t);
    a->freeze_ms = -1;
    a->expire_in_ms = -1;
    a->finish_in_ms = -1;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "", create_options, NULL)) != -1) {
        switch (opt) {
        case OPT_NAME:
            a->t.name = optarg;
            break;
        case OPT_CHANNEL:
            a->t.channel = optarg;
            break;
        case OPT_TOPIC:
            a->t.topic = optarg;
            break;
        case OPT_TITLE:
            a->t.title = optarg;
            break;
        case OPT_BODY:
            a->t.body = optarg;
            break;
        case OPT_PAYLOAD:
            a->t.payload = optarg;
            break;
        case OPT_THROTTLE_SCOPE:
            a->scope = optarg;
            break;
        case OPT_THROTTLE_KEY:
            a->t.throttle_key = optarg;
            break;
        case OPT_QUIET:
            a->quiet = true;
            break;
        case OPT_THROTTLE_MODE:
            if (strcmp(optarg, "enforce") != 0 && strcmp(optarg, "shadow") != 0)
                return ctl_usage(ctx, "--throttle-mode: \"%s\" is not enforce or shadow", optarg);
            a->t.throttle_mode = optarg;
            break;
        case OPT_DUE_AT:
        case OPT_DUE_IN:
            if (a->due_given)
                return ctl_usage(ctx, "give one of --due-at and --due-in");
            a->due_given = true;
            if (opt == OPT_DUE_AT) {
                if (ctl_fmt_parse_time("--due-at", optarg, &a->t.due_ms, errstr, sizeof errstr) < 0)
                    return ctl_usage(ctx, "%s", errstr);
            } else {
                if (ctl_fmt_parse_duration("--due-in", optarg, &v, errstr, sizeof errstr) < 0)
                    return ctl_usage(ctx, "%s", errstr);
                a->t.due_ms = hr_clock_now_ms() + v;
            }
            break;
        case OPT_FREEZE_AT:
            if (ctl_fmt_parse_time("--freeze-at", optarg, &a->freeze_ms, errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        case OPT_RATE_LIMIT:
        case OPT_CHUNK_SIZE:
        case OPT_THROTTLE_LIMIT:
            /* Range checks are hr_task_validate's; here only "an integer".
             * create_options[] lists the flags in enum order. */
            if (ctl_fmt_parse_int(create_options[opt - OPT_NAME].name, optarg, INT32_MIN, INT32_MAX,
                                  &v, errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "--%s", errstr);
            if (opt == OPT_RATE_LIMIT)
                a->t.rate_limit = v;
            else if (opt == OPT_CHUNK_SIZE)
                a->t.chunk_size = v;
            else
                a->t.throttle_limit = v;
            break;
        case OPT_THROTTLE_WINDOW:
        case OPT_TTL:
            if (create_seconds(opt == OPT_TTL ? "--ttl" : "--throttle-window", optarg,
                               opt == OPT_TTL ? &a->t.ttl_s : &a->t.throttle_window_s, errstr,
                               sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        case OPT_COLLAPSE_KEY:
            a->t.collapse_key = optarg;
            break;
        case OPT_PRIORITY:
            if (hr_priority_parse(optarg, &a->t.priority) < 0)
                return ctl_usage(ctx, "--priority: \"%s\" is not high or normal", optarg);
            break;
        case OPT_CATEGORY:
            a->t.category = optarg; /* hr_task_validate checks it against the config */
            break;
        case OPT_FINISH_BY:
            if (ctl_fmt_parse_time("--finish-by", optarg, &a->t.finish_ms, errstr, sizeof errstr) <
                0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        case OPT_FINISH_IN:
            if (ctl_fmt_parse_duration("--finish-in", optarg, &a->finish_in_ms, errstr,
                                       sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        case OPT_LOCAL_TIME:
            a->t.local_time = 1;
            break;
        case OPT_DEFAULT_TZ:
        case OPT_WINDOW_TZ:
            /* Existence is hr_task_validate's; the name rules first. */
            if (!hr_tz_name_ok(optarg))
                return ctl_usage(ctx, "--%s: \"%s\" is not a time zone name",
                                 create_options[opt - OPT_NAME].name, optarg);
            *(opt == OPT_DEFAULT_TZ ? &a->t.default_tz : &a->t.window_tz) = optarg;
            break;
        case OPT_WINDOW:
            if (create_window(optarg, &a->t, errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        case OPT_EXPIRE_AT:
        case OPT_EXPIRE_IN:
            if (a->t.expire_ms >= 0 || a->expire_in_ms >= 0)
                return ctl_usage(ctx, "give one of --expire-at and --expire-in");
            if (opt == OPT_EXPIRE_AT) {
                if (ctl_fmt_parse_time("--expire-at", optarg, &a->t.expire_ms, errstr,
                                       sizeof errstr) < 0)
                    return ctl_usage(ctx, "%s", errstr);
            } else if (ctl_fmt_parse_duration("--expire-in", optarg, &a->expire_in_ms, errstr,
                                              sizeof errstr) < 0) {
                return ctl_usage(ctx, "%s", errstr);
            }
            break;
        case OPT_RICH:
            a->t.rich = optarg; /* hr_task_validate reads it */
            break;
        case OPT_EVENT_AT:
            if (ctl_fmt_parse_time("--event-at", optarg, &a->t.event_ms, errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        case OPT_AB: {
            cJSON *ab = cJSON_Parse(optarg);
            int rc = hr_variant_ab_from_json(ab, &a->t, errstr, sizeof errstr);

            cJSON_Delete(ab);
            if (rc != 0)
                return ctl_usage(ctx, "--ab: %s", ab != NULL ? errstr : "not JSON");
            break;
        }
        case OPT_VARIANT:
        case OPT_VARIANTS:
            if (a->variants == NULL && (a->variants = cJSON_CreateArray()) == NULL)
                return ctl_fail("out of memory");
            if ((opt == OPT_VARIANT
                     ? ctl_variant_arg(a->variants, optarg, errstr, sizeof errstr)
                     : ctl_variant_file(a->variants, optarg, errstr, sizeof errstr)) != 0)
                return ctl_usage(ctx, "%s", errstr);
            break;
        case OPT_SHARDS:
        case OPT_EXPECTED:
            if (a->shards_given)
                return ctl_usage(ctx, "give one of --shards and --expected-recipients");
            a->shards_given = true;
            if (ctl_fmt_parse_int(create_options[opt - OPT_NAME].name, optarg, 1, INT32_MAX, &v,
                                  errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "--%s", errstr);
            a->t.shards = opt == OPT_SHARDS ? v : hr_shard_for_size(v);
            break;
        default:
            return ctl_usage(ctx, NULL);
        }
    }
    if (a->finish_in_ms >= 0 && hr_task_paced(&a->t))
        return ctl_usage(ctx, "give one of --finish-by and --finish-in");
    if (optind < argc)
        return ctl_usage(ctx, "unexpected argument \"%s\"", argv[optind]);
    if (a->t.name == NULL || a->t.channel == NULL || !a->due_given)
        return ctl_usage(ctx, "--name, --channel and --due-at or --due-in are required");
    /* The API's rules for names (hr_parse_name): an empty one would be
     * stored and match nothing. */
    {
        static const struct {
            const char *flag;
            size_t max;
        } names[] = {{"--name", 200},
                     {"--topic", 100},
                     {"--channel", 64},
                     {"--throttle-scope", 100},
                     {"--throttle-key", 100}};
        const char *values[] = {a->t.name, a->t.topic, a->t.channel, a->scope, a->t.throttle_key};

        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (values[i] != NULL &&
                hr_parse_name(names[i].flag, values[i], names[i].max, errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
    }
    if (a->freeze_ms >= 0 && a->freeze_ms > a->t.due_ms)
        return ctl_usage(ctx, "--freeze-at must not be after the due time (the task "
                              "would never be in the pull on its day)");
    a->t.throttle_scope = a->scope != NULL ? a->scope : a->t.topic;
    if (a->expire_in_ms >= 0)
        a->t.expire_ms = a->t.due_ms + a->expire_in_ms;
    if (a->finish_in_ms >= 0)
        a->t.finish_ms = a->t.due_ms + a->finish_in_ms;
    return CTL_EXIT_OK;
}

static int create_insert(ctl_ctx *ctx, int argc, char **argv, const create_args *a,
                         hr_variant_set *vs);

int ctl_cmd_create(ctl_ctx *ctx, int argc, char **argv)
{
    create_args a = {0};
    hr_variant_set vs = {0};
    char errstr[512];
    int rc;

    rc = create_parse(ctx, argc, argv, &a);
    if (rc == CTL_EXIT_OK && a.variants != NULL &&
        hr_variant_from_json(a.variants, &vs, errstr, sizeof errstr) != 0)
        rc = ctl_fail("task refused: %s", errstr);
    if (rc == CTL_EXIT_OK)
        rc = create_insert(ctx, argc, argv, &a, &vs);
    hr_variant_set_clear(&vs);
    cJSON_Delete(a.variants);
    return rc;
}

/* Checks A (the task) and VS (its variants) and writes them with their
 * audit row. */
static int create_insert(ctl_ctx *ctx, int argc, char **argv, const create_args *a,
                         hr_variant_set *vs)
{
    char errstr[512], due[40];
    hr_mysql *m;
    uint64_t id = 0;
    cJSON *after;
    int rc;

    if (hr_task_validate(&a->t, ctx->cfg, errstr, sizeof errstr) < 0 ||
        hr_variant_check(vs, &a->t, ctx->cfg, errstr, sizeof errstr) != 0)
        return ctl_fail("task refused: %s", errstr);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;

    /* The row and its audit row (the flags it was made from) together. */
    if (hr_mysql_begin(m, errstr, sizeof errstr) < 0)
        return ctl_fail("create: %s", errstr);
    if (hr_task_insert(m, &a->t, a->scope, a->freeze_ms, 0, &id, NULL, errstr, sizeof errstr) < 0) {
        hr_mysql_rollback(m);
        return ctl_fail("create: %s", errstr);
    }
    if (hr_variant_insert(m, (int64_t)id, vs, errstr, sizeof errstr) != 0) {
        hr_mysql_rollback(m);
        return ctl_fail("create: %s", errstr);
    }
    after = ctl_args_json(argc, argv);
    rc = ctl_audit(ctx, m, NULL, (int64_t)id, NULL, NULL, after);
    cJSON_Delete(after);
    if (rc != 0) {
        hr_mysql_rollback(m);
        return CTL_EXIT_FAIL;
    }
    if (hr_mysql_commit(m, errstr, sizeof errstr) < 0)
        return ctl_fail("create: %s", errstr);

    if (a->quiet)
        printf("%" PRIu64 "\n", id);
    else
        printf("created task %" PRIu64 " due %s\n", id,
               ctl_fmt_time_iso(a->t.due_ms, due, sizeof due));
    return CTL_EXIT_OK;
}
