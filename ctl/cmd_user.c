/* cmd_user: `heraldctl user ...` — the recipients' profiles and
 * preferences (docs/recipients.md), both stores written through hr_user.
 *
 *   get UID [--json]                  the profile and the preferences
 *   set UID [--tz Z] [--locale L] [--quiet HH:MM-HH:MM|none] [--attr K=V]...
 *           [--json PATCH]            change fields (the API's PATCH rules),
 *                                     creating the profile when there is none
 *   rm UID                            the profile and its preferences
 *   opt-out UID CATEGORY|* CHANNEL|*  add an opt-out (source admin)
 *   opt-in UID CATEGORY|* CHANNEL|*   remove one
 *   import FILE|- [--format csv|jsonl] profiles in bulk, with progress
 *   link UID CATEGORY CHANNEL         the one-click unsubscribe link a mail
 *                                     would carry (support, tests)
 *
 * import: CSV with a header line (uid, tz, locale, quiet_start, quiet_end;
 * every other column is an attribute of that name, an empty cell leaves
 * it out; fields may be quoted, RFC 4180) or JSON Lines of the API's
 * profile objects with a "uid".  Each row is the whole profile (as PUT);
 * its preferences stay.  Rows are checked (hr_user_check) and refused ones
 * reported on stderr with their line number (the first CTL_USER_REPORT_MAX,
 * then a count); the others go in batches of CTL_USER_BATCH, one MySQL
 * transaction and pipelined Redis round trips each (hr_user_import).
 * Progress (rows, rows/s) on stderr every second; exit 1 when a row was
 * refused.  Running it again is safe.
 *
 * set, rm, opt-out and opt-in write their audit row ("heraldctl user
 * <verb>") in the change's transaction (hr_user_audit.h). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "hr_clock.h"
#include "hr_ctoken.h"
#include "hr_parse.h"
#include "hr_user_audit.h"

#define CTL_USER_BATCH 5000
#define CTL_USER_REPORT_MAX 20
#define CTL_USER_LINE_MAX (64 * 1024 + 4096) /* the largest attributes and the rest */
#define CTL_USER_COLS_MAX 256

static const struct option ctl_user_options[] = {
    {"json", optional_argument, NULL, 'j'},
    {"tz", required_argument, NULL, 'z'},
    {"locale", required_argument, NULL, 'l'},
    {"quiet", required_argument, NULL, 'q'},
    {"attr", required_argument, NULL, 'a'},
    {"format", required_argument, NULL, 'f'},
    {NULL, 0, NULL, 0},
};

/* The uid argument S into *UID.  CTL_EXIT_OK or the usage error. */
static int ctl_user_uid(const ctl_ctx *ctx, const char *s, int64_t *uid)
{
    if (hr_parse_uid(s, strlen(s), uid) != 0)
        return ctl_usage(ctx, "UID must be an integer in 1..9223372036854775807, not '%s'", s);
    return CTL_EXIT_OK;
}

/* Prints J (consumed) on one line.  CTL_EXIT_OK or the failure. */
static int ctl_user_print(cJSON *j)
{
    char *text = j != NULL ? cJSON_PrintUnformatted(j) : NULL;

    cJSON_Delete(j);
    if (text == NULL)
        return ctl_fail("out of memory");
    printf("%s\n", text);
    free(text);
    return CTL_EXIT_OK;
}

static int ctl_user_get(ctl_ctx *ctx, int argc, char **argv)
{
    hr_user u = {0};
    hr_user_prefs p = {0};
    bool json = false;
    hr_mysql *m;
    char errstr[512];
    int64_t uid;
    int opt, rc;

    optind = 0;
    while ((opt = getopt_long(argc, argv, ":", ctl_user_options, NULL)) != -1)
        if (opt != 'j')
            return ctl_usage(ctx, "get: unknown or incomplete option '%s'", argv[optind - 1]);
        else
            json = true;
    if (argc - optind != 1)
        return ctl_usage(ctx, "get needs one UID");
    if ((rc = ctl_user_uid(ctx, argv[optind], &uid)) != CTL_EXIT_OK)
        return rc;
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    rc = hr_user_get(m, uid, &u, errstr, sizeof errstr);
    if (rc == 0)
        rc = hr_user_prefs_get(m, uid, &p, errstr, sizeof errstr);
    if (rc < 0) {
        rc = ctl_fail("user get: %s", errstr);
        goto done;
    }
    if (rc == 1) {
        rc = ctl_fail("uid %" PRId64 " has no profile", uid);
        goto done;
    }
    if (json) {
        cJSON *o = hr_user_to_json(&u), *prefs = hr_user_prefs_to_json(uid, &p, ctx->cfg);

        if (o != NULL && prefs != NULL) {
            cJSON_AddItemToObject(o, "opt_out", cJSON_DetachItemFromObject(prefs, "opt_out"));
            cJSON_Delete(prefs);
        }
        rc = ctl_user_print(o);
        goto done;
    }
    printf("uid %" PRId64 "\ntz %s\nlocale %s\n", uid, u.tz ? u.tz : "-",
           u.locale ? u.locale : "-");
    if (u.quiet.set)
        printf("quiet %02d:%02d-%02d:%02d\n", u.quiet.start_s / 3600, u.quiet.start_s / 60 % 60,
               u.quiet.end_s / 3600, u.quiet.end_s / 60 % 60);
    for (size_t i = 0; i < p.noptouts; i++)
        printf("opt-out %s %s\n", p.optouts[i].category, p.optouts[i].channel);
    if (u.attributes != NULL) {
        char *attrs = cJSON_PrintUnformatted(u.attributes);

        printf("attributes %s\n", attrs != NULL ? attrs : "?");
        free(attrs);
    }
    rc = CTL_EXIT_OK;
done:
    hr_user_clear(&u);
    hr_user_prefs_clear(&p);
    return rc;
}

/* --quiet HH:MM-HH:MM (or none) as the API's quiet_hours into PATCH. */
static int ctl_user_quiet_json(const ctl_ctx *ctx, const char *s, cJSON *patch)
{
    char start[16], end[16];
    const char *dash = strchr(s, '-');
    cJSON *q;

    if (strcmp(s, "none") == 0)
        return cJSON_AddNullToObject(patch, "quiet_hours") != NULL ? CTL_EXIT_OK
                                                                   : ctl_fail("out of memory");
    if (dash == NULL || dash - s >= (long)sizeof start || strlen(dash + 1) >= sizeof end)
        return ctl_usage(ctx, "--quiet: HH:MM-HH:MM or none, not '%s'", s);
    snprintf(start, sizeof start, "%.*s", (int)(dash - s), s);
    snprintf(end, sizeof end, "%s", dash + 1);
    q = cJSON_AddObjectToObject(patch, "quiet_hours");
    if (q == NULL || cJSON_AddStringToObject(q, "start", start) == NULL ||
        cJSON_AddStringToObject(q, "end", end) == NULL)
        return ctl_fail("out of memory");
    return CTL_EXIT_OK;
}

/* set: the flags as one PATCH object, applied to the profile (or a new
 * one), written whole. */
static int ctl_user_set(ctl_ctx *ctx, int argc, char **argv)
{
    cJSON *patch = cJSON_CreateObject(), *attrs = NULL, *given = NULL;
    hr_user u = {0};
    hr_mysql *m;
    hr_redis *r;
    char errstr[512];
    int opt, rc = CTL_EXIT_OK;

    if (patch == NULL)
        return ctl_fail("out of memory");
    optind = 0;
    while (rc == CTL_EXIT_OK &&
           (opt = getopt_long(argc, argv, ":", ctl_user_options, NULL)) != -1) {
        const char *eq;

        switch (opt) {
        case 'z':
        case 'l':
            if (cJSON_AddStringToObject(patch, opt == 'z' ? "tz" : "locale", optarg) == NULL)
                rc = ctl_fail("out of memory");
            break;
        case 'q':
            rc = ctl_user_quiet_json(ctx, optarg, patch);
            break;
        case 'a':
            eq = strchr(optarg, '=');
            if (eq == NULL || eq == optarg) {
                rc = ctl_usage(ctx, "--attr: KEY=VALUE, not '%s'", optarg);
                break;
            }
            if (attrs == NULL && (attrs = cJSON_AddObjectToObject(patch, "attributes")) == NULL) {
                rc = ctl_fail("out of memory");
                break;
            }
            {
                char key[HR_USER_ATTR_KEY_MAX + 2];

                snprintf(key, sizeof key, "%.*s", (int)(eq - optarg), optarg);
                /* An empty value removes the key (the PATCH rules). */
                if ((eq[1] == '\0' ? cJSON_AddNullToObject(attrs, key)
                                   : cJSON_AddStringToObject(attrs, key, eq + 1)) == NULL)
                    rc = ctl_fail("out of memory");
            }
            break;
        case 'j':
            if (optarg == NULL || (given = cJSON_Parse(optarg)) == NULL || !cJSON_IsObject(given))
                rc = ctl_usage(ctx, "--json: a JSON object of profile fields");
            break;
        default:
            rc = ctl_usage(ctx, "set: unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (rc != CTL_EXIT_OK)
        goto done;
    if (argc - optind != 1) {
        rc = ctl_usage(ctx, "set needs one UID");
        goto done;
    }
    if ((rc = ctl_user_uid(ctx, argv[optind], &u.uid)) != CTL_EXIT_OK)
        goto done;
    if (ctl_mysql(ctx, &m) < 0 || ctl_redis(ctx, &r) < 0) {
        rc = CTL_EXIT_FAIL;
        goto done;
    }
    if (hr_user_get(m, u.uid, &u, errstr, sizeof errstr) < 0) {
        rc = ctl_fail("user set: %s", errstr);
        goto done;
    }
    /* --json first, then the flags, as one PATCH each. */
    if ((given != NULL &&
         (rc = hr_user_from_json(given, ctx->cfg, true, &u, errstr, sizeof errstr)) != 0) ||
        (rc = hr_user_from_json(patch, ctx->cfg, true, &u, errstr, sizeof errstr)) != 0 ||
        (rc = hr_user_audit_put(m, r, &u, ctx->cfg, ctl_who(ctx), "heraldctl user set", errstr,
                                sizeof errstr)) < 0) {
        rc = rc == HR_USER_EINVAL ? ctl_usage(ctx, "%s", errstr) : ctl_fail("user set: %s", errstr);
        goto done;
    }
    printf("%s uid %" PRId64 "\n", rc == 1 ? "created" : "updated", u.uid);
    rc = CTL_EXIT_OK;
done:
    hr_user_clear(&u);
    cJSON_Delete(given);
    cJSON_Delete(patch);
    return rc;
}

static int ctl_user_rm(ctl_ctx *ctx, int argc, char **argv)
{
    hr_mysql *m;
    hr_redis *r;
    char errstr[512];
    int64_t uid;
    int rc;

    if (argc != 2)
        return ctl_usage(ctx, "rm needs one UID");
    if ((rc = ctl_user_uid(ctx, argv[1], &uid)) != CTL_EXIT_OK)
        return rc;
    if (ctl_mysql(ctx, &m) < 0 || ctl_redis(ctx, &r) < 0)
        return CTL_EXIT_FAIL;
    rc = hr_user_audit_delete(m, r, uid, ctx->cfg, ctl_who(ctx), "heraldctl user rm", errstr,
                              sizeof errstr);
    if (rc < 0)
        return ctl_fail("user rm: %s", errstr);
    printf("%s\n", rc == 1 ? "removed" : "not present");
    return CTL_EXIT_OK;
}

/* opt-out / opt-in: ARGV = {name, UID, CATEGORY, CHANNEL}. */
static int ctl_user_opt(ctl_ctx *ctx, bool out, int argc, char **argv)
{
    hr_user_prefs p = {0}, keep = {0};
    hr_mysql *m;
    hr_redis *r;
    char errstr[512], action[40];
    int64_t uid;
    size_t before;
    int rc;

    if (argc != 4)
        return ctl_usage(ctx, "%s needs UID CATEGORY CHANNEL ('*' for every one)", argv[0]);
    if ((rc = ctl_user_uid(ctx, argv[1], &uid)) != CTL_EXIT_OK)
        return rc;
    if (hr_user_check_optout(ctx->cfg, argv[2], argv[3], errstr, sizeof errstr) != 0)
        return ctl_usage(ctx, "%s", errstr);
    if (ctl_mysql(ctx, &m) < 0 || ctl_redis(ctx, &r) < 0)
        return CTL_EXIT_FAIL;
    if (hr_user_prefs_get(m, uid, &p, errstr, sizeof errstr) != 0) {
        rc = ctl_fail("user %s: %s", argv[0], errstr);
        goto done;
    }
    before = p.noptouts;
    keep.quiet = p.quiet;
    for (size_t i = 0; i < p.noptouts; i++)
        if ((out || strcmp(p.optouts[i].category, argv[2]) != 0 ||
             strcmp(p.optouts[i].channel, argv[3]) != 0) &&
            hr_user_prefs_add(&keep, p.optouts[i].category, p.optouts[i].channel, errstr,
                              sizeof errstr) != 0) {
            rc = ctl_fail("user %s: %s", argv[0], errstr);
            goto done;
        }
    if (out && (rc = hr_user_prefs_add(&keep, argv[2], argv[3], errstr, sizeof errstr)) != 0) {
        rc = rc == HR_USER_EINVAL ? ctl_usage(ctx, "%s", errstr) : ctl_fail("%s", errstr);
        goto done;
    }
    snprintf(action, sizeof action, "heraldctl user %s", argv[0]);
    rc = hr_user_audit_prefs_put(m, r, uid, &keep, HR_USER_SRC_ADMIN, ctx->cfg, ctl_who(ctx),
                                 action, errstr, sizeof errstr);
    if (rc != 0) {
        rc = ctl_fail("user %s: %s", argv[0], errstr);
        goto done;
    }
    printf("%s\n", keep.noptouts == before ? "unchanged" : out ? "opted out" : "opted in");
    rc = CTL_EXIT_OK;
done:
    hr_user_prefs_clear(&p);
    hr_user_prefs_clear(&keep);
    return rc;
}

/* link: the one-click link a mail to UID of CATEGORY by CHANNEL carries. */
static int ctl_user_link(ctl_ctx *ctx, int argc, char **argv)
{
    const hr_config *cfg = ctx->cfg;
    hr_utoken u = {.iat_s = (int64_t)time(NULL)};
    char token[HR_UTOKEN_MAX], errstr[256];
    int rc;

    if (argc != 4)
        return ctl_usage(ctx, "link needs UID CATEGORY CHANNEL");
    if ((rc = ctl_user_uid(ctx, argv[1], &u.uid)) != CTL_EXIT_OK)
        return rc;
    if (cfg->recipients.unsubscribe.nkeys == 0 || cfg->recipients.unsubscribe.public_url == NULL)
        return ctl_fail("link: recipients.unsubscribe has no public_url or no keys");
    snprintf(u.category, sizeof u.category, "%s", argv[2]);
    snprintf(u.channel, sizeof u.channel, "%s", argv[3]);
    if (hr_user_check_optout(cfg, u.category, u.channel, errstr, sizeof errstr) != 0 ||
        strcmp(u.category, "*") == 0 || strcmp(u.channel, "*") == 0)
        return ctl_usage(ctx, "link: a declared CATEGORY and a channel type, not '*'");
    if (hr_ctoken_unsub_issue(&cfg->recipients.unsubscribe.keys[0], &u, token, sizeof token, errstr,
                              sizeof errstr) != 0)
        return ctl_fail("link: %s", errstr);
    printf("%s/u/%s\n", cfg->recipients.unsubscribe.public_url, token);
    return CTL_EXIT_OK;
}

/* ---- import ------------------------------------------------------------------- */

/* What the import counted. */
typedef struct ctl_user_counts {
    size_t lines, rows, refused;
    hr_user_import_result total;
    int64_t start_ms, report_ms;
} ctl_user_counts;

static void ctl_user_refuse(ctl_user_counts *c, size_t line, const char *why)
{
    if (c->refused++ < CTL_USER_REPORT_MAX)
        fprintf(stderr, "heraldctl: line %zu refused: %s\n", line, why);
}

/* Progress on stderr, at most once a second (and once at the end, FINAL). */
static void ctl_user_progress(ctl_user_counts *c, bool final)
{
    int64_t now = hr_clock_mono_ms(), ms = now - c->start_ms;

    if (!final && now - c->report_ms < 1000)
        return;
    c->report_ms = now;
    fprintf(stderr, "heraldctl: user import: %zu rows imported, %zu refused, %.0f rows/s\n",
            c->rows, c->refused, ms > 0 ? (double)c->rows * 1000.0 / (double)ms : 0.0);
}

/* The Redis hashes of the N profiles of BATCH rewritten from MySQL, after
 * their batch was rolled back (hr_user_import had written them). */
static void ctl_user_restore(hr_mysql *m, hr_redis *r, const hr_user *batch, size_t n,
                             const hr_config *cfg)
{
    int64_t *uids = malloc((n ? n : 1) * sizeof *uids);
    char errstr[512];

    for (size_t i = 0; uids != NULL && i < n; i++)
        uids[i] = batch[i].uid;
    if (uids == NULL || hr_user_rewrite(m, r, uids, n, cfg, NULL, errstr, sizeof errstr) != 0)
        ctl_fail("user import: the batch's Redis hashes may hold what MySQL rolled back: the "
                 "dispatcher's mirror rewrites them from MySQL (%s)",
                 uids == NULL ? "out of memory" : errstr);
    free(uids);
}

/* Imports the N profiles of BATCH and clears them: each batch with its
 * audit row (the counts, not the profiles) in one transaction, the import's
 * own a savepoint inside it.  0 or -1 (printed). */
static int ctl_user_flush(ctl_ctx *ctx, hr_mysql *m, hr_redis *r, hr_user *batch, size_t *n,
                          ctl_user_counts *c)
{
    hr_user_import_result res;
    char errstr[512] = "";
    cJSON *after = NULL;
    int rc = 0;

    if (*n > 0) {
        bool ok = hr_mysql_begin(m, errstr, sizeof errstr) == 0;

        if (ok && hr_user_import(m, r, batch, *n, ctx->cfg, &res, errstr, sizeof errstr) != 0)
            ok = false;
        if (ok) {
            after = cJSON_CreateObject();
            cJSON_AddNumberToObject(after, "received", (double)*n);
            cJSON_AddNumberToObject(after, "created", (double)res.created);
            cJSON_AddNumberToObject(after, "replaced", (double)res.replaced);
            if (ctl_audit(ctx, m, "heraldctl user import", 0, NULL, NULL, after) != 0) {
                snprintf(errstr, sizeof errstr, "the batch's audit row was not written");
                ok = false;
            }
        }
        if (ok && hr_mysql_commit(m, errstr, sizeof errstr) != 0)
            ok = false;
        if (!ok) {
            hr_mysql_rollback(m);
            ctl_user_restore(m, r, batch, *n, ctx->cfg);
            ctl_fail("user import: %s (the rows before this batch were imported; run the import "
                     "again)",
                     errstr);
            rc = -1;
        } else {
            c->total.created += res.created;
            c->total.replaced += res.replaced;
            c->rows += *n;
        }
    }
    cJSON_Delete(after);
    for (size_t i = 0; i < *n; i++)
        hr_user_clear(&batch[i]);
    *n = 0;
    ctl_user_progress(c, false);
    return rc;
}

/* The next CSV field of *AT (RFC 4180: quoted fields may hold commas and
 * doubled quotes) into OUT of CAP bytes.  1 with a field and *AT past its
 * comma, 0 at the end of the line, -1 when malformed or too long. */
static int ctl_user_csv_field(const char **at, char *out, size_t cap)
{
    const char *p = *at;
    size_t w = 0;

    if (p == NULL)
        return 0;
    if (*p == '"') {
        for (p++;; p++) {
            if (*p == '\0')
                return -1;
            if (*p == '"' && p[1] != '"')
                break;
            if (*p == '"')
                p++;
            if (w + 1 >= cap)
                return -1;
            out[w++] = *p;
        }
        p++;
        if (*p != ',' && *p != '\0')
            return -1;
    } else {
        for (; *p != ',' && *p != '\0'; p++) {
            if (*p == '"' || w + 1 >= cap)
                return -1;
            out[w++] = *p;
        }
    }
    out[w] = '\0';
    *at = *p == ',' ? p + 1 : NULL;
    return 1;
}

/* One CSV line of the columns NAMES[N] as a profile PUT body into *OUT
 * (the caller's), its fields read into CELL of CAP bytes.  0, or -1 with
 * WHY. */
static int ctl_user_csv_row(const char *line, char *const *names, size_t n, char *cell, size_t cap,
                            cJSON **out, char *why, size_t len)
{
    cJSON *o = cJSON_CreateObject(), *attrs = NULL, *quiet = NULL;
    const char *at = line;
    size_t col = 0;
    int rc;

    while (o != NULL && (rc = ctl_user_csv_field(&at, cell, cap)) == 1) {
        const char *name = col < n ? names[col] : NULL;

        col++;
        if (name == NULL) {
            snprintf(why, len, "more fields than the header's %zu", n);
            goto fail;
        }
        if (cell[0] == '\0')
            continue;
        if (strcmp(name, "uid") == 0 || strcmp(name, "tz") == 0 || strcmp(name, "locale") == 0) {
            if (cJSON_AddStringToObject(o, name, cell) == NULL)
                goto oom;
        } else if (strcmp(name, "quiet_start") == 0 || strcmp(name, "quiet_end") == 0) {
            if ((quiet == NULL && (quiet = cJSON_AddObjectToObject(o, "quiet_hours")) == NULL) ||
                cJSON_AddStringToObject(quiet, strcmp(name, "quiet_start") == 0 ? "start" : "end",
                                        cell) == NULL)
                goto oom;
        } else if ((attrs == NULL && (attrs = cJSON_AddObjectToObject(o, "attributes")) == NULL) ||
                   cJSON_AddStringToObject(attrs, name, cell) == NULL) {
            goto oom;
        }
    }
    if (o == NULL)
        goto oom;
    if (rc < 0) {
        snprintf(why, len, "a malformed or too long field");
        goto fail;
    }
    *out = o;
    return 0;
oom:
    snprintf(why, len, "out of memory");
fail:
    cJSON_Delete(o);
    return -1;
}

/* A profile object (a CSV row's or a JSON line's) with its "uid" into *U
 * (checked).  0, or -1 with WHY. */
static int ctl_user_from_row(const ctl_ctx *ctx, cJSON *o, hr_user *u, char *why, size_t len)
{
    cJSON *uid = cJSON_DetachItemFromObject(o, "uid");
    int rc = -1;

    *u = (hr_user){0};
    if (uid == NULL || hr_parse_json_uid(uid, &u->uid) != 0) {
        snprintf(why, len, "uid: an integer in 1..9223372036854775807 is required");
        goto done;
    }
    rc = hr_user_from_json(o, ctx->cfg, false, u, why, len) == 0 ? 0 : -1;
    if (rc != 0)
        hr_user_clear(u);
done:
    cJSON_Delete(uid);
    return rc;
}

static int ctl_user_import(ctl_ctx *ctx, int argc, char **argv)
{
    char *line = malloc(CTL_USER_LINE_MAX + 2), *cell = malloc(CTL_USER_LINE_MAX);
    char why[512], *names[CTL_USER_COLS_MAX] = {0};
    const char *format = NULL, *file;
    ctl_user_counts c = {.start_ms = hr_clock_mono_ms(), .report_ms = hr_clock_mono_ms()};
    hr_user *batch = calloc(CTL_USER_BATCH, sizeof *batch);
    size_t nbatch = 0, ncols = 0, n;
    bool jsonl;
    hr_mysql *m;
    hr_redis *r;
    FILE *in = NULL;
    int opt, got, rc = CTL_EXIT_FAIL;

    if (batch == NULL || line == NULL || cell == NULL) {
        ctl_fail("out of memory");
        goto done;
    }
    optind = 0;
    while ((opt = getopt_long(argc, argv, ":", ctl_user_options, NULL)) != -1) {
        if (opt != 'f') {
            rc = ctl_usage(ctx, "import: unknown or incomplete option '%s'", argv[optind - 1]);
            goto done;
        }
        format = optarg;
    }
    if (argc - optind != 1) {
        rc = ctl_usage(ctx, "import needs one FILE (or - for stdin)");
        goto done;
    }
    file = argv[optind];
    if (format == NULL)
        format =
            strlen(file) > 6 && strcmp(file + strlen(file) - 6, ".jsonl") == 0 ? "jsonl" : "csv";
    if (strcmp(format, "csv") != 0 && strcmp(format, "jsonl") != 0) {
        rc = ctl_usage(ctx, "--format: csv or jsonl, not '%s'", format);
        goto done;
    }
    jsonl = strcmp(format, "jsonl") == 0;
    if (ctl_mysql(ctx, &m) < 0 || ctl_redis(ctx, &r) < 0)
        goto done;
    in = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
    if (in == NULL) {
        ctl_fail("user import: cannot open %s", file);
        goto done;
    }
    while ((got = ctl_fmt_read_line(in, line, CTL_USER_LINE_MAX + 2, &n)) != 0) {
        cJSON *o = NULL;

        c.lines++;
        if (got == CTL_FMT_LINE_LONG) {
            ctl_user_refuse(&c, c.lines, "longer than any valid line");
            continue;
        }
        if (n == 0 || line[0] == '#')
            continue;
        if (!jsonl && ncols == 0) {
            /* The header: the columns' names. */
            const char *at = line;

            while (ncols < CTL_USER_COLS_MAX &&
                   ctl_user_csv_field(&at, cell, CTL_USER_LINE_MAX) == 1)
                if ((names[ncols++] = strdup(cell)) == NULL) {
                    ctl_fail("out of memory");
                    goto done;
                }
            if (ncols == 0 || strcmp(names[0], "uid") != 0) {
                rc = ctl_fail("user import: the first line must be the header, starting with uid "
                              "(uid,tz,locale,quiet_start,quiet_end,<attribute>...)");
                goto done;
            }
            continue;
        }
        /* hr_parse_json keeps a number's digits: a uid past 2^53 stays exact. */
        if (jsonl ? hr_parse_json(line, n, &o, why, sizeof why) != 0 || !cJSON_IsObject(o)
                  : ctl_user_csv_row(line, names, ncols, cell, CTL_USER_LINE_MAX, &o, why,
                                     sizeof why) != 0) {
            ctl_user_refuse(&c, c.lines,
                            o != NULL && !cJSON_IsObject(o) ? "not a JSON object" : why);
            cJSON_Delete(o);
            continue;
        }
        if (ctl_user_from_row(ctx, o, &batch[nbatch], why, sizeof why) != 0)
            ctl_user_refuse(&c, c.lines, why);
        else
            nbatch++;
        cJSON_Delete(o);
        if (nbatch == CTL_USER_BATCH && ctl_user_flush(ctx, m, r, batch, &nbatch, &c) != 0)
            goto done;
    }
    if (ferror(in)) {
        ctl_fail("user import: reading %s failed", file);
        goto done;
    }
    if (ctl_user_flush(ctx, m, r, batch, &nbatch, &c) != 0)
        goto done;
    ctl_user_progress(&c, true);
    if (c.refused > CTL_USER_REPORT_MAX)
        fprintf(stderr, "heraldctl: ... %zu more lines refused\n", c.refused - CTL_USER_REPORT_MAX);
    printf("created %zu, replaced %zu, refused %zu\n", c.total.created, c.total.replaced,
           c.refused);
    rc = c.refused > 0 ? CTL_EXIT_FAIL : CTL_EXIT_OK;
done:
    for (size_t i = 0; batch != NULL && i < nbatch; i++)
        hr_user_clear(&batch[i]);
    free(batch);
    free(line);
    free(cell);
    for (size_t i = 0; i < ncols; i++)
        free(names[i]);
    if (in != NULL && in != stdin)
        fclose(in);
    return rc;
}

int ctl_cmd_user(ctl_ctx *ctx, int argc, char **argv)
{
    if (argc < 2)
        return ctl_usage(ctx, "expected get, set, rm, opt-out, opt-in, import or link");
    if (strcmp(argv[1], "get") == 0)
        return ctl_user_get(ctx, argc - 1, argv + 1);
    if (strcmp(argv[1], "set") == 0)
        return ctl_user_set(ctx, argc - 1, argv + 1);
    if (strcmp(argv[1], "rm") == 0)
        return ctl_user_rm(ctx, argc - 1, argv + 1);
    if (strcmp(argv[1], "opt-out") == 0 || strcmp(argv[1], "opt-in") == 0)
        return ctl_user_opt(ctx, strcmp(argv[1], "opt-out") == 0, argc - 1, argv + 1);
    if (strcmp(argv[1], "import") == 0)
        return ctl_user_import(ctx, argc - 1, argv + 1);
    if (strcmp(argv[1], "link") == 0)
        return ctl_user_link(ctx, argc - 1, argv + 1);
    return ctl_usage(ctx, "unknown subcommand '%s' (get, set, rm, opt-out, opt-in, import, link)",
                     argv[1]);
}
