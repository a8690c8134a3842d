/* ctl: heraldctl's command table and global options (see ctl.h).  `help`
 * lives here because it prints this table. */
#include "ctl.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_cmd.h"

static int ctl_cmd_help(ctl_ctx *ctx, int argc, char **argv);

#define CTL_TASK_ARG "  TASK                 the task's id\n"

static const ctl_command ctl_commands[] = {
    {"help", "show the commands, or how to use one", "[COMMAND]",
     "  COMMAND              show its arguments and every flag\n"
     "                       ('heraldctl COMMAND --help' does the same)\n",
     ctl_cmd_help},
    {"migrate", "apply the MySQL schema migrations not applied yet", "",
     "  (no arguments; safe to run twice or concurrently)\n", ctl_cmd_migrate},
    {"create", "create a task from flags; prints its id",
     "--name N --channel C --due-in D|--due-at T [FLAGS]", ctl_create_flags, ctl_cmd_create},
    {"import", "add subscribers (one id a line) to a scheduled task", "TASK FILE|- [--lead D]",
     CTL_TASK_ARG "  FILE                 subscriber ids, one decimal uid a line; - reads stdin\n"
                  "                       (idempotent: run it again after an error)\n"
                  "  --lead D             push them D before the task's --event-at: 15m, 1d\n"
                  "                       (docs/scheduling.md \"Lead times\")\n",
     ctl_cmd_import},
    {"status", "a task's state, counters, progress and ETA", "TASK [--watch] [--interval D]",
     CTL_TASK_ARG
     "  --watch              redraw until the task is finished (exit 1 if it failed)\n"
     "  --interval D         time between samples of --watch (default 1s, at least 100ms)\n",
     ctl_cmd_status},
    {"list", "the newest tasks as a table", "[--state S] [--limit N] [--json]",
     "  --state S            only tasks in state S: scheduled, dispatching, dispatched,\n"
     "                       done, paused, cancelled or failed\n"
     "  --limit N            at most N tasks, newest first (default 20, at most 10000)\n"
     "  --json               one JSON array of task objects with every counter\n"
     "                       (total, sent, failed, throttled, pulled, cancelled,\n"
     "                       retried) and last_error, instead of the table\n",
     ctl_cmd_list},
    {"pause", "pause a task: workers park their chunks", "TASK", CTL_TASK_ARG, ctl_cmd_control},
    {"resume", "resume a paused task", "TASK", CTL_TASK_ARG, ctl_cmd_control},
    {"cancel", "cancel a task: remaining recipients count as cancelled", "TASK", CTL_TASK_ARG,
     ctl_cmd_control},
    {"recover", "rebuild a task's Redis state from MySQL after a loss", "TASK", CTL_TASK_ARG,
     ctl_cmd_recover},
    {"redrive", "put a task's dead-lettered recipients into a new chunk", "TASK", CTL_TASK_ARG,
     ctl_cmd_redrive},
    {"purge", "delete finished tasks and everything they left",
     "--finished-before DATE|TIME [--dry-run] [--batch N]",
     "  --finished-before D  tasks done, failed or cancelled before D: a day YYYY-MM-DD\n"
     "                       (its 00:00 UTC) or a UTC time YYYY-MM-DDTHH:MM:SSZ, not in\n"
     "                       the future; an unfinished task is never touched\n"
     "  --dry-run            count what would go (rows per task), change nothing\n"
     "  --batch N            rows per DELETE (default 10000, 1..100000): each its own\n"
     "                       transaction; a purge cut short is finished by the next one\n",
     ctl_cmd_purge},
    {"token", "operators' API tokens (create, list, revoke) and client tokens of the pull",
     "create --name N --role R [--expires D] | list [--all] [--json] | revoke ID|NAME | "
     "client UID [--ttl D] [--key ID]",
     "  create               make an API token for an operator (stored hashed in MySQL);\n"
     "                       it is printed once, on stdout, and nowhere else\n"
     "  --name N             1..64 of A-Z a-z 0-9 _ . @ -, never used before (the audit\n"
     "                       log names the caller token:N)\n"
     "  --role R             viewer (reads), operator (also pause, resume, cancel,\n"
     "                       redrive, recover, subscribers, addresses) or admin (also\n"
     "                       create and change tasks, tokens, the audit log)\n"
     "  --expires D          how long it is valid (default 90d, 1s..366d)\n"
     "  list                 the live API tokens (--all: revoked and expired too;\n"
     "                       --json: a JSON array); never the tokens themselves\n"
     "  revoke ID|NAME       revoke one: every dispatcher refuses it within 5 s\n"
     "  client UID           a client token: UID may pull its own reminders\n"
     "                       (also 'heraldctl token UID'; nothing is stored)\n"
     "  --ttl D              how long it is valid (default 1d, at most\n"
     "                       dispatcher.api.client_token_max_ttl_s)\n"
     "  --key ID             the dispatcher.api.client_keys entry to sign with\n"
     "                       (default: the first listed)\n",
     ctl_cmd_token},
    {"audit", "the audit log: who changed what, when, from where; its retention purge",
     "[--task ID] [--actor A] [--action S] [--since T] [--until T] [--before ID] [--limit N] "
     "[--json] | purge --older-than D",
     "  --task ID            only the rows of task ID\n"
     "  --actor A            only those of A (token:NAME, bootstrap:N, jwt:SUBJECT,\n"
     "                       cli:USER, insecure)\n"
     "  --action S           only those of one route or command, e.g.\n"
     "                       'POST /v1/tasks/{id}/pause' or 'heraldctl pause'\n"
     "  --since T, --until T only rows at or after T, before T (UTC)\n"
     "  --before ID          the next page: rows with a smaller id\n"
     "  --limit N            rows, newest first (default 50, at most 200)\n"
     "  --json               one JSON array of rows\n"
     "  purge --older-than D delete the rows older than D (at least 30d), with a row\n"
     "                       of its own\n",
     ctl_cmd_audit},
    {"address", "the recipients' addresses: add, remove, list, import",
     "add|rm UID PLATFORM ADDRESS [--app APP] | ls UID [--json] | import FILE|-",
     "  add UID PLATFORM ADDRESS   add one address (already present: changes nothing)\n"
     "  rm UID PLATFORM ADDRESS    remove one address\n"
     "  ls UID                     the uid's addresses, tab-separated: platform, app, address\n"
     "  import FILE                CSV lines uid,platform,app,address (- reads stdin; a\n"
     "                             header line, blank lines and # comments are skipped);\n"
     "                             refused lines are reported on stderr and the others\n"
     "                             imported in batches of 5000; exit 1 when a line was\n"
     "                             refused (safe to run again)\n"
     "  PLATFORM                   fcm, apns, email, webhook, webpush\n"
     "  ADDRESS                    webpush: <endpoint>#<p256dh>.<auth>, or the browser's\n"
     "                             PushSubscription JSON (add, rm)\n"
     "  --app APP                  the FCM project id or the APNs bundle topic (required\n"
     "                             for fcm and apns, empty for email, webhook, webpush)\n"
     "  --json                     ls: one JSON array of {platform, app, address}\n",
     ctl_cmd_address},
    {"user", "the recipients' profiles and preferences (docs/recipients.md)",
     "get UID [--json] | set UID [FLAGS] | rm UID | opt-out|opt-in UID CATEGORY CHANNEL |\n"
     "                 import FILE|- [--format csv|jsonl] | link UID CATEGORY CHANNEL",
     "  get UID                    the profile, its quiet hours and opt-outs (--json: the\n"
     "                             API's profile object with opt_out)\n"
     "  set UID                    change the profile (created when there is none):\n"
     "    --tz ZONE                  an IANA zone (local-time sends, quiet hours)\n"
     "    --locale TAG               a language tag such as de-DE\n"
     "    --quiet HH:MM-HH:MM|none   the user's own quiet hours, in its zone\n"
     "    --attr KEY=VALUE           a template attribute (user.KEY); KEY= removes it\n"
     "    --json OBJECT              any profile fields, as the API's PATCH\n"
     "  rm UID                     the profile and its preferences\n"
     "  opt-out UID CAT CHANNEL    the uid receives nothing of CAT by channels of type\n"
     "                             CHANNEL (webhook, fcm, apns, smtp); '*' for every one\n"
     "  opt-in UID CAT CHANNEL     remove that opt-out\n"
     "  import FILE                profiles in bulk, each row a whole profile: CSV with a\n"
     "                             header uid,tz,locale,quiet_start,quiet_end,<attr>...\n"
     "                             or JSON Lines of profile objects with a uid (--format,\n"
     "                             else by the .jsonl extension); progress on stderr;\n"
     "                             refused lines reported, exit 1 (safe to run again)\n"
     "  link UID CAT CHANNEL       the one-click unsubscribe link a mail would carry\n",
     ctl_cmd_user},
    {"suppression", "the suppression list: addresses never sent to",
     "add PLATFORM ADDRESS REASON [--app APP] [--note N] | rm PLATFORM ADDRESS [--app APP] |\n"
     "                 ls PLATFORM [ADDRESS] [--app APP]",
     "  add PLATFORM ADDRESS REASON  suppress an address: REASON unsubscribed (mandatory\n"
     "                             categories still go), complained or bounced\n"
     "  rm PLATFORM ADDRESS        take it off the list\n"
     "  ls PLATFORM [ADDRESS]      the suppressed addresses of the platform (and app), or one\n"
     "  PLATFORM                   fcm, apns, email, webhook, webpush\n"
     "  --app APP                  the FCM project id or APNs bundle topic\n"
     "  --note N                   a note kept with it (at most 255 bytes)\n",
     ctl_cmd_suppression},
    {"hooks", "event webhooks: register, list, enable, disable, remove, dead letters, redrive",
     "add URL [--types T,..] [--description D] [--secret S] | ls [--json] | "
     "enable|disable|rm|dead|redrive ID",
     "  add URL                    register an endpoint; prints its id and its signing\n"
     "                             secret (shown once)\n"
     "  --types T,..               only these event types (sent, failed, ..., opened,\n"
     "                             clicked; default: every type, also later ones)\n"
     "  --description D            a note for operators\n"
     "  --secret S                 its signing secret, whsec_<base64> (default: a new one)\n"
     "  ls                         every endpoint: id, state, dead letters, types, url\n"
     "  enable ID | disable ID     switch it on (its failure forgotten) or off\n"
     "  rm ID                      delete it and its dead letters\n"
     "  dead ID [--limit N]        its dead letters, oldest first (default 100)\n"
     "  redrive ID                 deliver its dead letters again (once it is enabled)\n",
     ctl_cmd_hooks},
    {"series",
     "reminders that repeat: create, list, show, next occurrences, pause, resume, end, "
     "subscribers",
     "create --name N --channel C --rrule R --dtstart TIME [OPTIONS] | list [--json] |\n"
     "                 show ID | next ID [--count N] | pause|resume|end ID |\n"
     "                 subscribe|unsubscribe ID UID...|--file FILE | subscribers ID [--after UID] "
     "[--limit N]",
     "  create                     a series: its occurrences become tasks (docs/scheduling.md)\n"
     "  --rrule R                  an RFC 5545 RRULE value, e.g. 'FREQ=WEEKLY;BYDAY=MO,TU,WE,\n"
     "                             TH,FR;UNTIL=20270630T235959'\n"
     "  --dtstart TIME             the first occurrence, 'YYYY-MM-DD HH:MM:SS', wall time in --tz\n"
     "  --tz Z                     its zone (default UTC); with --local-time the zone of\n"
     "                             recipients without one\n"
     "  --local-time               each occurrence at the wall time in each recipient's zone\n"
     "  --exdate LIST              wall times skipped, YYYYMMDDTHHMMSS,...\n"
     "  --catch-up P               occurrences missed while no dispatcher ran: none, latest\n"
     "                             (default) or all\n"
     "  --lead D                   written as a task D before due (default\n"
     "                             dispatcher.series_lead_s)\n"
     "  --expire-after D           an occurrence expires D after its due time\n"
     "  --drip-days N              a drip: each daily occurrence reaches only the subscribers\n"
     "                             of the day N days before it (FREQ=DAILY, --catch-up all)\n"
     "  --topic, --title, --body, --payload, --category, --priority  as for create\n"
     "  --variant L=JSON, --variants FILE  per-locale content as for create, copied to\n"
     "                             each occurrence\n"
     "  list                       every series: id, state, name, next, occurrences, rule\n"
     "  show ID                    one series (its variants' locales) and its next 5\n"
     "                             occurrences\n"
     "  next ID [--count N]        its next N occurrences (at most 100)\n"
     "  pause ID | resume ID | end ID  no new occurrences / again / for good\n"
     "  subscribe ID UID...        the uids receive every occurrence claimed from now on\n"
     "  unsubscribe ID UID...      they receive none claimed from now on\n"
     "  --file FILE                the uids of FILE (- = stdin), one a line, as import reads\n"
     "                             them, in transactions of 10,000\n"
     "  subscribers ID             the count now and the uids by uid (--after UID, --limit N\n"
     "                             at most 10000, default 1000)\n",
     ctl_cmd_series},
};

#define CTL_NCOMMANDS (sizeof ctl_commands / sizeof ctl_commands[0])

static const ctl_command *ctl_find(const char *name)
{
    for (size_t i = 0; i < CTL_NCOMMANDS; i++)
        if (strcmp(ctl_commands[i].name, name) == 0)
            return &ctl_commands[i];
    return NULL;
}

static void ctl_print_help(FILE *out)
{
    fprintf(out, "usage: heraldctl [-c CONFIG] COMMAND [ARGS]\n"
                 "\n"
                 "  -c, --config CONFIG  configuration file\n"
                 "                       (default: $HERALD_CONFIG, else ./herald.yaml)\n"
                 "  -h, --help           show this help\n"
                 "  -V, --version        show the version\n"
                 "\n"
                 "commands:\n");
    for (size_t i = 0; i < CTL_NCOMMANDS; i++)
        fprintf(out, "  %-10s %s\n", ctl_commands[i].name, ctl_commands[i].summary);
    fprintf(out, "\n'heraldctl help COMMAND' shows the arguments of a command.\n");
}

/* Whether ARGV (a command's arguments) asks for its help: -h or --help
 * before a "--".  Checked before the configuration is read, so help works
 * without one. */
static bool ctl_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    }
    return false;
}

/* A usage error found before any command runs (a global option, a missing
 * or unknown command): "heraldctl: MESSAGE" and the list of commands on
 * stderr; returns CTL_EXIT_USAGE.  A command's own errors go through
 * ctl_usage(), which prints that command's usage. */
static int ctl_usage_main(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int ctl_usage_main(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    ctl_vsay(fmt, ap);
    va_end(ap);
    ctl_print_help(stderr);
    return CTL_EXIT_USAGE;
}

static int ctl_cmd_help(ctl_ctx *ctx, int argc, char **argv)
{
    const ctl_command *cmd;

    if (argc > 2)
        return ctl_usage(ctx, "unexpected argument '%s'", argv[2]);
    if (argc == 1) {
        ctl_print_help(stdout);
        return CTL_EXIT_OK;
    }
    cmd = ctl_find(argv[1]);
    if (!cmd)
        return ctl_usage_main("unknown command '%s'", argv[1]);
    ctl_print_command(stdout, cmd);
    return CTL_EXIT_OK;
}

int ctl_main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    ctl_ctx ctx = {0};
    const ctl_command *cmd;
    char errstr[1024];
    int opt, rc;

    ctx.config_path = getenv("HERALD_CONFIG");
    if (!ctx.config_path || !*ctx.config_path)
        ctx.config_path = "herald.yaml";
    /* "+": stop at the command name, its options are its own.  ":": tell a
     * missing value from an unknown option. */
    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:c:hV", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            ctx.config_path = optarg;
            break;
        case 'h':
            ctl_print_help(stdout);
            return CTL_EXIT_OK;
        case 'V':
            printf("heraldctl %s\n", HR_VERSION);
            return CTL_EXIT_OK;
        case ':':
            return ctl_usage_main("option %s needs a value", argv[optind - 1]);
        default:
            return ctl_usage_main("unknown option %s", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return ctl_usage_main("no command given");
    cmd = ctl_find(argv[optind]);
    if (!cmd)
        return ctl_usage_main("unknown command '%s'", argv[optind]);
    ctx.cmd = cmd;
    argc -= optind;
    argv += optind;
    optind = 0;
    if (cmd->run == ctl_cmd_help)
        return ctl_cmd_help(&ctx, argc, argv);
    if (ctl_wants_help(argc, argv)) {
        ctl_print_command(stdout, cmd);
        return CTL_EXIT_OK;
    }
    if (hr_config_load(ctx.config_path, &ctx.cfg, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "%s\n", errstr);
        return CTL_EXIT_USAGE;
    }
    rc = cmd->run(&ctx, argc, argv);
    hr_redis_free(ctx.redis);
    hr_mysql_free(ctx.mysql);
    hr_config_free(ctx.cfg);
    return rc;
}
