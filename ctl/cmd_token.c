/* cmd_token: `heraldctl token UID [--ttl D] [--key ID]` — issues a client
 * token for UID (hr_ctoken.h) under one of dispatcher.api.client_keys: the
 * one named, else the first listed (the current key, by convention).  For
 * operators and tests; a platform's backend issues its own with the same
 * HMAC (docs/api.md shows the recipe). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "hr_ctoken.h"

#define TOKEN_TTL_MAX_MS ((int64_t)366 * 86400 * 1000)

int ctl_cmd_token(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"ttl", required_argument, NULL, 't'},
        {"key", required_argument, NULL, 'k'},
        {NULL, 0, NULL, 0},
    };
    const hr_client_key *keys = ctx->cfg->dispatcher.api.client_keys, *key = NULL;
    size_t nkeys = ctx->cfg->dispatcher.api.nclient_keys, i;
    const char *key_id = NULL;
    int64_t uid, ttl_ms = 86400 * 1000;
    char errstr[512], token[HR_CTOKEN_MAX];
    int opt;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 't') {
            if (ctl_fmt_parse_duration("--ttl", optarg, &ttl_ms, errstr, sizeof errstr) < 0)
                return ctl_usage(ctx, "%s", errstr);
            if (ttl_ms < 1000 || ttl_ms > TOKEN_TTL_MAX_MS)
                return ctl_usage(ctx, "--ttl must be 1s..366d");
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
