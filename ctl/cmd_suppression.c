/* cmd_suppression: `heraldctl suppression add|rm|ls` — the suppression
 * list (docs/recipients.md): addresses herald does not send to, written
 * through hr_addr (MySQL, then the sets of the uids holding the address).
 *
 *   add PLATFORM ADDRESS REASON [--app APP] [--note N]
 *   rm PLATFORM ADDRESS [--app APP]
 *   ls PLATFORM [ADDRESS] [--app APP]   one JSON object a line
 *
 * add and rm write their audit row ("heraldctl suppression add|rm") in
 * the change's transaction (hr_addr_audit_suppression). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_cmd.h"
#include "hr_addr_audit.h"

#define CTL_SUPP_PAGE 1000 /* addresses per query of ls */

static const struct option ctl_supp_options[] = {
    {"app", required_argument, NULL, 'a'},
    {"note", required_argument, NULL, 'n'},
    {NULL, 0, NULL, 0},
};

/* Prints each element of the JSON array A on a line; *LAST (may be NULL)
 * gets the last one's address (a copy, freed by the caller). */
static void ctl_supp_print(const cJSON *a, char **last)
{
    const cJSON *e;

    cJSON_ArrayForEach(e, a)
    {
        char *text = cJSON_PrintUnformatted(e);

        printf("%s\n", text != NULL ? text : "?");
        free(text);
        if (last != NULL) {
            free(*last);
            *last = strdup(cJSON_GetObjectItem(e, "address")->valuestring);
        }
    }
}

int ctl_cmd_suppression(ctl_ctx *ctx, int argc, char **argv)
{
    const char *app = "", *note = NULL, *sub = argc > 1 ? argv[1] : "";
    hr_addr_platform p;
    hr_addr_supp reason;
    hr_mysql *m;
    hr_redis *r;
    char errstr[512], action[40], *after = NULL;
    int opt, nargs, rc;

    optind = 0;
    argc--;
    argv++;
    while ((opt = getopt_long(argc, argv, ":", ctl_supp_options, NULL)) != -1) {
        if (opt == 'a')
            app = optarg;
        else if (opt == 'n' && strcmp(sub, "add") == 0)
            note = optarg;
        else
            return ctl_usage(ctx, "%s: unknown or incomplete option '%s'", sub, argv[optind - 1]);
    }
    nargs = argc - optind;
    argv += optind;
    if (strcmp(sub, "add") != 0 && strcmp(sub, "rm") != 0 && strcmp(sub, "ls") != 0)
        return ctl_usage(ctx, "expected add, rm or ls");
    if ((strcmp(sub, "add") == 0 && nargs != 3) || (strcmp(sub, "rm") == 0 && nargs != 2) ||
        (strcmp(sub, "ls") == 0 && (nargs < 1 || nargs > 2)))
        return ctl_usage(ctx, "wrong arguments for %s", sub);
    if (hr_addr_platform_parse(argv[0], &p) != 0)
        return ctl_usage(ctx, "PLATFORM must be fcm, apns, email, webhook or webpush, not '%s'",
                         argv[0]);
    if (strcmp(sub, "add") == 0 && hr_addr_supp_parse(argv[2], &reason) != 0)
        return ctl_usage(ctx, "REASON must be unsubscribed, complained or bounced, not '%s'",
                         argv[2]);
    if (ctl_mysql(ctx, &m) < 0 || (strcmp(sub, "ls") != 0 && ctl_redis(ctx, &r) < 0))
        return CTL_EXIT_FAIL;
    if (strcmp(sub, "ls") == 0) {
        bool more = true;

        /* One address, or every page of the platform's. */
        while (more) {
            cJSON *a = hr_addr_suppressions(m, p, app, nargs == 2 ? argv[1] : NULL, after,
                                            CTL_SUPP_PAGE, &more, errstr, sizeof errstr);

            if (a == NULL) {
                free(after);
                return ctl_fail("suppression ls: %s", errstr);
            }
            ctl_supp_print(a, &after);
            cJSON_Delete(a);
        }
        free(after);
        return CTL_EXIT_OK;
    }
    snprintf(action, sizeof action, "heraldctl suppression %s", sub);
    rc = hr_addr_audit_suppression(m, r, strcmp(sub, "add") == 0, p, app, argv[1],
                                   strcmp(sub, "add") == 0 ? reason : HR_ADDR_SUPP_NONE, note,
                                   ctl_who(ctx), action, errstr, sizeof errstr);
    if (rc == HR_ADDR_EINVAL)
        return ctl_usage(ctx, "%s", errstr);
    if (rc < 0)
        return ctl_fail("suppression %s: %s", sub, errstr);
    printf("%s\n", strcmp(sub, "add") == 0 ? (rc == 1 ? "suppressed" : "updated")
                                           : (rc == 1 ? "removed" : "not present"));
    return CTL_EXIT_OK;
}
