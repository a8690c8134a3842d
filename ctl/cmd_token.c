/* cmd_token: `heraldctl token`, the two kinds of token herald takes
 * (docs/api.md):
 *
 *   token create --name N --role viewer|operator|admin [--expires D]
 *   token list [--all] [--json]
 *   token revoke ID|NAME
 *       operators' API tokens (hr_apitoken.h), stored hashed in MySQL: the
 *       new token is printed once, on stdout, and nowhere else; create and
 *       revoke write their audit row in the same transaction;
 *   token client UID [--ttl D] [--key ID]   (also: token UID ...)
 *       a client token of the pull for UID (hr_ctoken.h) under one of
 *       dispatcher.api.client_keys: the one named, else the first listed
 *       (the current key, by convention), for operators and tests; a
 *       platform's backend issues its own with the same HMAC (docs/api.md
 *       shows the recipe).  Nothing is stored: it is not audited. */
#include <getopt.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "hr_apitoken.h"
#include "hr_clock.h"
#include "hr_ctoken.h"

/* token client UID [--ttl D] [--key ID]; ARGV[0] is "client" or the UID
 * itself (ARGV then starts at "token"). */
static int token_client(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"ttl", required_argument, NULL, 't'},
        {"key", required_argument, NULL, 'k'},
        {NULL, 0, NULL, 0},
    };
    const hr_client_key *keys = ctx->cfg->dispatcher.api.client_keys, *key = NULL;
    size_t nkeys = ctx->cfg->dispatcher.api.nclient_keys, i;
    int64_t max_ms = (int64_t)ctx->cfg->dispatcher.api.client_token_max_ttl_s * 1000;
    const char *key_id = NULL;
    int64_t uid, ttl_ms = 86400 * 1000;
    char errstr[512], token[HR_CTOKEN_MAX];
    int opt;

    if (ttl_ms > max_ms)
        ttl_ms = max_ms;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 't') {
            if (ctl_fmt_parse_duration("--ttl", optarg, &ttl_ms, errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            if (ttl_ms < 1000 || ttl_ms > max_ms)
                return ctl_usage(ctx,
                                 "--ttl must be 1s..%ds (dispatcher.api.client_token_max_ttl_s: "
                                 "the dispatcher refuses a token valid for longer)",
                                 ctx->cfg->dispatcher.api.client_token_max_ttl_s);
        } else if (opt == 'k') {
            key_id = optarg;
        } else {
            return ctl_usage(ctx, NULL);
        }
    }
    if (optind != argc - 1)
        return ctl_usage(ctx, optind >= argc ? "UID is required" : "one UID only");
    if (ctl_fmt_parse_int("UID", argv[optind], 1, INT64_MAX, &uid, errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "%s", errstr);
    if (nkeys == 0)
        return ctl_fail("no dispatcher.api.client_keys in %s: add one to issue client tokens",
                        ctx->config_path);
    for (i = 0; i < nkeys && key == NULL; i++)
        if (key_id == NULL || strcmp(keys[i].id, key_id) == 0)
            key = &keys[i];
    if (key == NULL)
        return ctl_fail("no client key '%s' in dispatcher.api.client_keys", key_id);
    if (hr_ctoken_issue(key, uid, (int64_t)time(NULL) + ttl_ms / 1000, token, sizeof token, errstr,
                        sizeof errstr) < 0)
        return ctl_fail("%s", errstr);
    printf("%s\n", token);
    return CTL_EXIT_OK;
}

/* token create --name N --role R [--expires D] */
static int token_create(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"name", required_argument, NULL, 'n'},
        {"role", required_argument, NULL, 'r'},
        {"expires", required_argument, NULL, 'e'},
        {NULL, 0, NULL, 0},
    };
    const char *name = NULL;
    hr_role role = HR_ROLE_NONE;
    int64_t ttl_ms = HR_APITOKEN_TTL_DEFAULT_MS, now = hr_clock_now_ms();
    char errstr[512], token[HR_APITOKEN_MAX] = "", target[40];
    hr_apitoken t;
    hr_mysql *m;
    cJSON *after = NULL;
    int opt, rc = CTL_EXIT_FAIL;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 'n') {
            name = optarg;
        } else if (opt == 'r') {
            if (hr_role_parse(optarg, &role) != 0)
                return ctl_usage(ctx, "--role must be viewer, operator or admin");
        } else if (opt == 'e') {
            if (ctl_fmt_parse_duration("--expires", optarg, &ttl_ms, errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            if (ttl_ms < 1000 || ttl_ms > HR_APITOKEN_TTL_MAX_MS)
                return ctl_usage(ctx, "--expires must be 1s..366d");
        } else {
            return ctl_usage(ctx, NULL);
        }
    }
    if (optind != argc)
        return ctl_usage(ctx, "unexpected argument '%s'", argv[optind]);
    if (name == NULL || role == HR_ROLE_NONE)
        return ctl_usage(ctx, "--name and --role are required");
    if (hr_apitoken_name_ok(name, errstr, sizeof errstr) != 0)
        return ctl_usage(ctx, "--name: %s", errstr);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (hr_mysql_begin(m, errstr, sizeof errstr) != 0)
        return ctl_fail("%s", errstr);
    if (hr_apitoken_create(m, name, role, now, now + ttl_ms, ctl_who(ctx)->actor, token, &t, errstr,
                           sizeof errstr) != 0) {
        ctl_fail("%s", errstr);
        goto rollback;
    }
    snprintf(target, sizeof target, "token %" PRId64, t.id);
    if ((after = hr_apitoken_json(&t)) == NULL ||
        ctl_audit(ctx, m, "heraldctl token create", 0, target, NULL, after) != 0)
        goto rollback;
    if (hr_mysql_commit(m, errstr, sizeof errstr) != 0) {
        ctl_fail("%s", errstr);
        goto done;
    }
    /* The token on stdout alone, so `TOKEN=$(heraldctl token create ...)`
     * takes just it; what it is goes to stderr. */
    printf("%s\n", token);
    fprintf(stderr, "API token %" PRId64 " '%s' (%s), valid until %s: shown this once\n", t.id,
            t.name, hr_role_name(t.role), ctl_fmt_time_iso(t.expires_ms, errstr, sizeof errstr));
    rc = CTL_EXIT_OK;
    goto done;
rollback:
    hr_mysql_rollback(m);
done:
    OPENSSL_cleanse(token, sizeof token);
    cJSON_Delete(after);
    return rc;
}

/* token list [--all] [--json] */
static int token_list(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"all", no_argument, NULL, 'a'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    bool all = false, json = false;
    hr_apitoken *tokens = NULL;
    char errstr[512], exp[40], rev[40];
    size_t n = 0;
    hr_mysql *m;
    int opt;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 'a')
            all = true;
        else if (opt == 'j')
            json = true;
        else
            return ctl_usage(ctx, NULL);
    }
    if (optind != argc)
        return ctl_usage(ctx, "unexpected argument '%s'", argv[optind]);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (hr_apitoken_list(m, all, hr_clock_now_ms(), &tokens, &n, errstr, sizeof errstr) != 0)
        return ctl_fail("%s", errstr);
    if (json) {
        cJSON *arr = cJSON_CreateArray();
        char *text;

        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(arr, hr_apitoken_json(&tokens[i]));
        text = cJSON_PrintUnformatted(arr);
        printf("%s\n", text != NULL ? text : "[]");
        free(text);
        cJSON_Delete(arr);
    } else {
        printf("%-6s %-24s %-8s %-24s %s\n", "ID", "NAME", "ROLE", "EXPIRES (UTC)", "REVOKED");
        for (size_t i = 0; i < n; i++)
            printf("%-6" PRId64 " %-24s %-8s %-24s %s\n", tokens[i].id, tokens[i].name,
                   hr_role_name(tokens[i].role),
                   ctl_fmt_time_iso(tokens[i].expires_ms, exp, sizeof exp),
                   tokens[i].revoked_ms >= 0
                       ? ctl_fmt_time_iso(tokens[i].revoked_ms, rev, sizeof rev)
                       : "-");
    }
    free(tokens);
    return CTL_EXIT_OK;
}

/* token revoke ID|NAME */
static int token_revoke(ctl_ctx *ctx, int argc, char **argv)
{
    hr_apitoken found, before, after;
    char errstr[512], target[40];
    cJSON *b = NULL, *a = NULL;
    int64_t id = 0;
    hr_mysql *m;
    int rc = CTL_EXIT_FAIL;

    if (argc != 2)
        return ctl_usage(ctx, "expected one token ID or NAME");
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (argv[1][strspn(argv[1], "0123456789")] != '\0' ||
        ctl_fmt_parse_int("ID", argv[1], 1, INT64_MAX, &id, errstr, sizeof errstr) != 0)
        id = 0;
    if (hr_apitoken_find(m, id, id == 0 ? argv[1] : NULL, &found, errstr, sizeof errstr) != 0)
        return ctl_fail("%s", errstr);
    if (hr_mysql_begin(m, errstr, sizeof errstr) != 0)
        return ctl_fail("%s", errstr);
    if (hr_apitoken_revoke(m, found.id, ctl_who(ctx)->actor, &before, errstr, sizeof errstr) != 0 ||
        hr_apitoken_find(m, found.id, NULL, &after, errstr, sizeof errstr) != 0) {
        ctl_fail("%s", errstr);
        goto rollback;
    }
    b = hr_apitoken_json(&before);
    a = hr_apitoken_json(&after);
    hr_audit_diff(b, a);
    snprintf(target, sizeof target, "token %" PRId64, found.id);
    if (ctl_audit(ctx, m, "heraldctl token revoke", 0, target, b, a) != 0)
        goto rollback;
    if (hr_mysql_commit(m, errstr, sizeof errstr) != 0) {
        ctl_fail("%s", errstr);
        goto done;
    }
    printf("revoked API token %" PRId64 " '%s'; dispatchers refuse it within %d s\n", found.id,
           found.name, HR_APITOKEN_CACHE_MS / 1000);
    rc = CTL_EXIT_OK;
    goto done;
rollback:
    hr_mysql_rollback(m);
done:
    cJSON_Delete(b);
    cJSON_Delete(a);
    return rc;
}

int ctl_cmd_token(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(ctl_ctx *ctx, int argc, char **argv);
    } subs[] = {
        {"create", token_create},
        {"list", token_list},
        {"revoke", token_revoke},
        {"client", token_client},
    };

    if (argc < 2)
        return ctl_usage(ctx, "expected create, list, revoke or client");
    /* `token UID ...`: the client token, as heraldctl always took it. */
    if (argv[1][0] >= '0' && argv[1][0] <= '9')
        return token_client(ctx, argc, argv);
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strcmp(argv[1], subs[i].name) == 0)
            return subs[i].run(ctx, argc - 1, argv + 1);
    return ctl_usage(ctx, "unknown token command '%s' (create, list, revoke, client)", argv[1]);
}
