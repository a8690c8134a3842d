/* cmd_hooks: `heraldctl hooks add|ls|enable|disable|rm|dead|redrive` — the
 * event webhooks herald-hooks delivers the events topic to (common/
 * hr_hooks.h; the API's /v1/hooks does the same).
 *
 *   add URL [--types a,b] [--description D] [--secret whsec_...]
 *                            registers one; prints its id and secret (shown
 *                            once: the receiver checks signatures with it)
 *   ls [--json]              every endpoint: id, state, dead letters, types, url
 *   enable ID | disable ID   an operator's switch (enable forgets a failure)
 *   rm ID                    deletes it and its dead letters
 *   dead ID [--limit N]      its dead letters, oldest first
 *   redrive ID               marks its dead letters: herald-hooks delivers them
 *                            again once the endpoint is enabled
 *
 * A change writes its audit row ("heraldctl hooks <verb>") in its own
 * transaction (hr_hooks_audit.h); the secret is never in it. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "hr_hooks_audit.h"

#define CTL_HOOKS_TYPES 64

/* --types "a,b" into OUT (hr_hooks_types).  CTL_EXIT_OK or the usage error. */
static int ctl_hooks_types(const ctl_ctx *ctx, char *list, char out[HR_HOOKS_TYPES_MAX + 1])
{
    const char *names[CTL_HOOKS_TYPES];
    size_t n = 0;
    char errstr[256], *save = NULL;

    for (char *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (n == CTL_HOOKS_TYPES)
            return ctl_usage(ctx, "--types: at most %d types", CTL_HOOKS_TYPES);
        names[n++] = t;
    }
    if (hr_hooks_types(names, n, out, errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "--%s", errstr);
    return CTL_EXIT_OK;
}

static int ctl_hooks_add(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"types", required_argument, NULL, 't'},
        {"description", required_argument, NULL, 'd'},
        {"secret", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    hr_hook h = {0};
    hr_mysql *m;
    char errstr[512];
    int opt, rc;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 't' && (rc = ctl_hooks_types(ctx, optarg, h.types)) != CTL_EXIT_OK)
            return rc;
        else if (opt == 'd')
            snprintf(h.description, sizeof h.description, "%s", optarg);
        else if (opt == 's')
            snprintf(h.secret, sizeof h.secret, "%s", optarg);
        else if (opt != 't')
            return ctl_usage(ctx, NULL);
    }
    if (argc - optind != 1)
        return ctl_usage(ctx, "add needs URL");
    if (strlen(argv[optind]) > HR_HOOKS_URL_MAX ||
        hr_hooks_check_url(argv[optind], errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "%s",
                         strlen(argv[optind]) > HR_HOOKS_URL_MAX ? "url: too long" : errstr);
    snprintf(h.url, sizeof h.url, "%s", argv[optind]);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (hr_hooks_audit_create(m, &h, ctl_who(ctx), "heraldctl hooks add", errstr, sizeof errstr) <
        0)
        return ctl_fail("hooks add: %s", errstr);
    printf("hook %" PRId64 "\nsecret %s\n", h.id, h.secret);
    return CTL_EXIT_OK;
}

static int ctl_hooks_ls(ctl_ctx *ctx, int argc, char **argv)
{
    hr_hook *hooks = NULL;
    size_t n = 0;
    hr_mysql *m;
    char errstr[512];
    bool json = argc == 2 && strcmp(argv[1], "--json") == 0;

    if (argc > 2 || (argc == 2 && !json))
        return ctl_usage(ctx, "ls takes --json only");
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (hr_hooks_list(m, &hooks, &n, errstr, sizeof errstr) < 0)
        return ctl_fail("hooks ls: %s", errstr);
    for (size_t i = 0; i < n && json; i++) {
        const hr_hook *h = &hooks[i];
        cJSON *o = cJSON_CreateObject();
        char *text;

        cJSON_AddNumberToObject(o, "id", (double)h->id);
        cJSON_AddStringToObject(o, "state", h->enabled ? "enabled" : "disabled");
        cJSON_AddNumberToObject(o, "dead_letters", (double)h->dead_letters);
        cJSON_AddStringToObject(o, "types", h->types);
        cJSON_AddStringToObject(o, "url", h->url);
        cJSON_AddStringToObject(o, "disabled_reason", h->disabled_reason);
        text = cJSON_PrintUnformatted(o);
        printf("%s%s", i > 0 ? "," : "[", text != NULL ? text : "{}");
        free(text);
        cJSON_Delete(o);
    }
    if (json)
        puts(n > 0 ? "]" : "[]");
    for (size_t i = 0; i < n && !json; i++) {
        const hr_hook *h = &hooks[i];

        printf("%" PRId64 "\t%s\t%" PRId64 " dead\t%s\t%s%s%s\n", h->id,
               h->enabled ? "enabled" : "disabled", h->dead_letters,
               h->types[0] != '\0' ? h->types : "*", h->url,
               h->disabled_reason[0] != '\0' ? "\t" : "", h->disabled_reason);
    }
    free(hooks);
    return CTL_EXIT_OK;
}

/* ARGV = {verb, ID}: ID into *ID.  CTL_EXIT_OK or the usage error. */
static int ctl_hooks_id(const ctl_ctx *ctx, int argc, char **argv, int64_t *id)
{
    char errstr[256];

    if (argc != 2)
        return ctl_usage(ctx, "%s needs ID", argv[0]);
    if (ctl_fmt_parse_int("ID", argv[1], 1, INT64_MAX, id, errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "%s", errstr);
    return CTL_EXIT_OK;
}

/* enable, disable, rm, redrive: ARGV = {verb, ID}. */
static int ctl_hooks_change(ctl_ctx *ctx, int argc, char **argv)
{
    const char *verb = argv[0];
    const hr_audit_who *who = ctl_who(ctx);
    hr_mysql *m;
    int64_t id, marked = 0;
    char errstr[512], action[40];
    int rc = ctl_hooks_id(ctx, argc, argv, &id);

    if (rc != CTL_EXIT_OK)
        return rc;
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    snprintf(action, sizeof action, "heraldctl hooks %s", verb);
    if (strcmp(verb, "rm") == 0) {
        rc = hr_hooks_audit_delete(m, id, who, action, errstr, sizeof errstr);
    } else if (strcmp(verb, "redrive") == 0) {
        rc = hr_hooks_audit_redrive(m, id, &marked, who, action, errstr, sizeof errstr);
    } else {
        const hr_hook_update u = {.enabled = strcmp(verb, "enable") == 0};

        rc = hr_hooks_audit_update(m, id, &u, who, action, errstr, sizeof errstr);
    }
    if (rc < 0)
        return ctl_fail("hooks %s: %s", verb, errstr);
    if (rc == 1)
        return ctl_fail("hook %" PRId64 " does not exist", id);
    if (strcmp(verb, "redrive") == 0)
        printf("marked %" PRId64 " dead letters of hook %" PRId64 " for a redrive\n", marked, id);
    return CTL_EXIT_OK;
}

static int ctl_hooks_dead(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"limit", required_argument, NULL, 'l'},
        {NULL, 0, NULL, 0},
    };
    hr_hook_dead *dead = NULL;
    int64_t id, limit = 100;
    size_t n = 0;
    hr_mysql *m;
    char errstr[512];
    int opt;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt != 'l')
            return ctl_usage(ctx, NULL);
        if (ctl_fmt_parse_int("--limit", optarg, 1, 10000, &limit, errstr, sizeof errstr) < 0)
            return ctl_usage(ctx, "%s", errstr);
    }
    if (argc - optind != 1)
        return ctl_usage(ctx, "dead needs ID");
    if (ctl_fmt_parse_int("ID", argv[optind], 1, INT64_MAX, &id, errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "%s", errstr);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (hr_hooks_dead(m, id, 0, (int)limit, &dead, &n, errstr, sizeof errstr) < 0)
        return ctl_fail("hooks dead: %s", errstr);
    for (size_t i = 0; i < n; i++)
        printf("%" PRId64 "\t%s\t%s\t%s\n", dead[i].id, dead[i].event_id,
               dead[i].redrive ? "redrive" : "-", dead[i].error);
    hr_hooks_dead_free(dead, n);
    return CTL_EXIT_OK;
}

int ctl_cmd_hooks(ctl_ctx *ctx, int argc, char **argv)
{
    const char *verb = argc >= 2 ? argv[1] : "";

    if (strcmp(verb, "add") == 0)
        return ctl_hooks_add(ctx, argc - 1, argv + 1);
    if (strcmp(verb, "ls") == 0)
        return ctl_hooks_ls(ctx, argc - 1, argv + 1);
    if (strcmp(verb, "dead") == 0)
        return ctl_hooks_dead(ctx, argc - 1, argv + 1);
    if (strcmp(verb, "enable") == 0 || strcmp(verb, "disable") == 0 || strcmp(verb, "rm") == 0 ||
        strcmp(verb, "redrive") == 0)
        return ctl_hooks_change(ctx, argc - 1, argv + 1);
    return ctl_usage(ctx,
                     argc < 2 ? "expected add, ls, enable, disable, rm, dead or redrive"
                              : "unknown subcommand '%s'",
                     verb);
}
