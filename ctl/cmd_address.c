/* cmd_address: `heraldctl address add|rm|ls|import` — the recipients'
 * address book (common/hr_addr.h), both stores written through hr_addr.
 *
 *   add UID PLATFORM ADDRESS [--app APP]   one address (idempotent)
 *   rm  UID PLATFORM ADDRESS [--app APP]   one address
 *     (a webpush ADDRESS may be the browser's PushSubscription JSON,
 *     turned into its address with hr_wpsub_from_json)
 *   ls  UID [--json]                       the uid's addresses (MySQL)
 *   import FILE|-                          CSV lines uid,platform,app,address
 *
 * The import checks each line (hr_parse_uid, hr_addr_check); a refused
 * line is reported with its number and reason on stderr (the first
 * CTL_ADDR_REPORT_MAX of them, then a count) and the others are imported
 * in batches of CTL_ADDR_BATCH, each one MySQL transaction and one
 * pipelined Redis round trip (hr_addr_import).  The exit code is 1 when
 * a line was refused, so a script notices; running the import again after
 * fixing the file is safe (existing rows count as present). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "hr_addr.h"
#include "hr_addr_audit.h"
#include "hr_parse.h"
#include "hr_wpsub.h"

#define CTL_ADDR_BATCH 5000
#define CTL_ADDR_REPORT_MAX 20
#define CTL_ADDR_LINE_MAX 1024 /* longer than any valid line */

/* The flags of add and rm; ls takes --json only. */
static const struct option ctl_addr_options[] = {
    {"app", required_argument, NULL, 'a'},
    {"json", no_argument, NULL, 'j'},
    {NULL, 0, NULL, 0},
};

/* The flags and arguments of add, rm and ls (ARGV[0] names it): only the
 * flag ALLOWED ('a' --app into *APP, 'j' --json into *JSON), then exactly
 * NARGS arguments (NEED says which), the first a uid into *UID; *ARGS
 * points at them.  CTL_EXIT_OK or the usage error. */
static int ctl_addr_args(const ctl_ctx *ctx, int argc, char **argv, int allowed, int nargs,
                         const char *need, const char **app, bool *json, char ***args, int64_t *uid)
{
    int opt;

    optind = 0;
    while ((opt = getopt_long(argc, argv, ":", ctl_addr_options, NULL)) != -1) {
        if (opt != allowed)
            return ctl_usage(ctx, "%s: unknown or incomplete option '%s'", argv[0],
                             argv[optind - 1]);
        if (opt == 'a')
            *app = optarg;
        else
            *json = true;
    }
    if (argc - optind != nargs)
        return ctl_usage(ctx, "%s needs %s", argv[0], need);
    *args = argv + optind;
    if (hr_parse_uid((*args)[0], strlen((*args)[0]), uid) != 0)
        return ctl_usage(ctx, "UID must be an integer in 1..9223372036854775807, not '%s'",
                         (*args)[0]);
    return CTL_EXIT_OK;
}

/* A webpush ADDRESS written as the browser's PushSubscription JSON ('{'
 * first) into OUT as its address; OUT stays empty for any other. */
static int ctl_addr_subscription(ctl_ctx *ctx, hr_addr_platform p, const char *address, hr_buf *out)
{
    char why[256];
    cJSON *j;
    int rc;

    if (p != HR_ADDR_WEBPUSH || address[0] != '{')
        return CTL_EXIT_OK;
    if ((j = cJSON_Parse(address)) == NULL)
        return ctl_usage(ctx, "ADDRESS: not a PushSubscription JSON object");
    rc = hr_wpsub_from_json(j, out, why, sizeof why);
    cJSON_Delete(j);
    return rc == 0 ? CTL_EXIT_OK : ctl_usage(ctx, "ADDRESS: %s", why);
}

/* add / rm: ARGV = {"add"|"rm", UID, PLATFORM, ADDRESS} after the flags. */
static int ctl_addr_change(ctl_ctx *ctx, bool add, int argc, char **argv)
{
    const char *app = "";
    hr_addr_platform p;
    hr_addr one;
    hr_mysql *m;
    hr_redis *r;
    char errstr[512], **args;
    bool json = false;
    int64_t uid;
    int rc;
    hr_buf sub;

    rc = ctl_addr_args(ctx, argc, argv, 'a', 3, "UID PLATFORM ADDRESS", &app, &json, &args, &uid);
    if (rc != CTL_EXIT_OK)
        return rc;
    if (hr_addr_platform_parse(args[1], &p) != 0)
        return ctl_usage(ctx, "PLATFORM must be fcm, apns, email, webhook or webpush, not '%s'",
                         args[1]);
    hr_buf_init(&sub, HR_ADDR_ADDRESS_MAX);
    rc = ctl_addr_subscription(ctx, p, args[2], &sub);
    if (rc != CTL_EXIT_OK) {
        hr_buf_free(&sub);
        return rc;
    }
    if (ctl_mysql(ctx, &m) < 0 || ctl_redis(ctx, &r) < 0) {
        hr_buf_free(&sub);
        return CTL_EXIT_FAIL;
    }
    one = (hr_addr){
        .uid = uid, .platform = p, .app = app, .address = sub.len > 0 ? sub.data : args[2]};
    rc = hr_addr_audit_change(m, r, uid, add ? HR_ADDR_AUDIT_ADD : HR_ADDR_AUDIT_REMOVE, &one, 1,
                              ctl_who(ctx), add ? "heraldctl address add" : "heraldctl address rm",
                              errstr, sizeof errstr);
    hr_buf_free(&sub);
    if (rc == HR_ADDR_EINVAL)
        return ctl_usage(ctx, "%s", errstr);
    if (rc < 0)
        return ctl_fail("address %s: %s", argv[0], errstr);
    printf("%s\n",
           add ? (rc == 1 ? "added" : "already present") : (rc == 1 ? "removed" : "not present"));
    return CTL_EXIT_OK;
}

static int ctl_addr_ls(ctl_ctx *ctx, int argc, char **argv)
{
    hr_addr_list l = {0};
    const char *app = "";
    bool json = false;
    hr_mysql *m;
    char errstr[512], **args;
    int64_t uid;
    int rc;

    rc = ctl_addr_args(ctx, argc, argv, 'j', 1, "one UID", &app, &json, &args, &uid);
    if (rc != CTL_EXIT_OK)
        return rc;
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (hr_addr_list_uid(m, uid, &l, errstr, sizeof errstr) != 0)
        return ctl_fail("address ls: %s", errstr);
    if (json) {
        cJSON *a = hr_addr_list_json(&l);
        char *text;

        text = a != NULL ? cJSON_PrintUnformatted(a) : NULL;
        printf("%s\n", text != NULL ? text : "[]");
        free(text);
        cJSON_Delete(a);
    } else {
        /* Tab-separated, so an empty app stays a column. */
        for (size_t i = 0; i < l.a.n; i++)
            printf("%s\t%s\t%s\n", hr_addr_platform_name(l.a.v[i].platform), l.a.v[i].app,
                   l.a.v[i].address);
    }
    hr_addr_list_free(&l);
    return CTL_EXIT_OK;
}

/* What the import counted. */
typedef struct ctl_addr_counts {
    size_t lines, refused;
    hr_addr_import_result total;
} ctl_addr_counts;

/* One refused line: its message (the first CTL_ADDR_REPORT_MAX) and count. */
static void ctl_addr_refuse(ctl_addr_counts *c, size_t line, const char *why)
{
    if (c->refused++ < CTL_ADDR_REPORT_MAX)
        fprintf(stderr, "heraldctl: line %zu refused: %s\n", line, why);
}

/* LINE (NUL-terminated, no newline) as an address into *A, its strings
 * pointing into LINE (cut at the commas).  0, or -1 with WHY. */
static int ctl_addr_parse_line(char *line, hr_addr *a, char *why, size_t len)
{
    char *f[4], *comma;

    f[0] = line;
    for (int i = 1; i < 4; i++) {
        /* The address is the rest of the line: a URL may hold commas. */
        if ((comma = strchr(f[i - 1], ',')) == NULL) {
            snprintf(why, len, "want 4 fields uid,platform,app,address");
            return -1;
        }
        *comma = '\0';
        f[i] = comma + 1;
    }
    *a = (hr_addr){.app = f[2], .address = f[3]};
    if (hr_parse_uid(f[0], strlen(f[0]), &a->uid) != 0) {
        snprintf(why, len, "uid '%.40s' is not an integer in 1..9223372036854775807", f[0]);
        return -1;
    }
    if (hr_addr_platform_parse(f[1], &a->platform) != 0) {
        snprintf(why, len, "platform '%.40s' is not fcm, apns, email, webhook or webpush", f[1]);
        return -1;
    }
    return hr_addr_check(a->platform, a->app, a->address, why, len) == 0 ? 0 : -1;
}

/* Imports the batch's N rows with their audit row (the batch's counts) in
 * one transaction and adds their counts.  0 or -1 (printed).  hr_addr_import
 * rewrites the batch's Redis sets inside it: when the audit row or the
 * commit fails they may hold this batch, which a new run puts in MySQL too. */
static int ctl_addr_flush(ctl_ctx *ctx, hr_mysql *m, hr_redis *r, hr_addr_list *batch,
                          ctl_addr_counts *c)
{
    hr_addr_import_result res;
    char errstr[512];
    cJSON *after;
    int rc;

    if (batch->a.n == 0)
        return 0;
    if (hr_mysql_begin(m, errstr, sizeof errstr) != 0 ||
        hr_addr_import(m, r, batch->a.v, batch->a.n, &res, errstr, sizeof errstr) != 0) {
        hr_mysql_rollback(m);
        ctl_fail("address import: %s (the lines before this batch were imported; run the "
                 "import again)",
                 errstr);
        return -1;
    }
    after = cJSON_CreateObject();
    cJSON_AddNumberToObject(after, "rows", (double)batch->a.n);
    cJSON_AddNumberToObject(after, "added", (double)res.added);
    cJSON_AddNumberToObject(after, "existed", (double)res.existed);
    cJSON_AddNumberToObject(after, "over_the_cap", (double)res.full);
    rc = ctl_audit(ctx, m, "heraldctl address import", 0, NULL, NULL, after);
    cJSON_Delete(after);
    if (rc != 0 || hr_mysql_commit(m, errstr, sizeof errstr) != 0) {
        hr_mysql_rollback(m);
        if (rc == 0)
            ctl_fail("address import: %s", errstr);
        ctl_fail("this batch was not imported (run the import again: the lines before it were)");
        return -1;
    }
    c->total.added += res.added;
    c->total.existed += res.existed;
    c->total.full += res.full;
    hr_addr_list_free(batch);
    return 0;
}

static int ctl_addr_import(ctl_ctx *ctx, int argc, char **argv)
{
    char line[CTL_ADDR_LINE_MAX + 2], why[256];
    ctl_addr_counts c = {0};
    hr_addr_list batch = {0};
    hr_mysql *m;
    hr_redis *r;
    FILE *in;
    size_t n;
    int got, rc = CTL_EXIT_FAIL;

    if (argc != 2)
        return ctl_usage(ctx, "import needs one FILE (or - for stdin)");
    if (ctl_mysql(ctx, &m) < 0 || ctl_redis(ctx, &r) < 0)
        return CTL_EXIT_FAIL;
    in = strcmp(argv[1], "-") == 0 ? stdin : fopen(argv[1], "r");
    if (in == NULL)
        return ctl_fail("address import: cannot open %s", argv[1]);
    while ((got = ctl_fmt_read_line(in, line, sizeof line, &n)) != 0) {
        hr_addr a;

        c.lines++;
        if (got == CTL_FMT_LINE_LONG) {
            ctl_addr_refuse(&c, c.lines, "longer than any valid line");
            continue;
        }
        /* Blank lines, comments and a header line are no addresses. */
        if (n == 0 || line[0] == '#' ||
            (c.lines == 1 && strcmp(line, "uid,platform,app,address") == 0))
            continue;
        if (ctl_addr_parse_line(line, &a, why, sizeof why) != 0) {
            ctl_addr_refuse(&c, c.lines, why);
            continue;
        }
        if (hr_addr_list_push(&batch, &a) != 0) {
            ctl_fail("address import: out of memory");
            goto done;
        }
        if (batch.a.n == CTL_ADDR_BATCH && ctl_addr_flush(ctx, m, r, &batch, &c) != 0)
            goto done;
    }
    if (ferror(in)) {
        ctl_fail("address import: reading %s failed", argv[1]);
        goto done;
    }
    if (ctl_addr_flush(ctx, m, r, &batch, &c) != 0)
        goto done;
    if (c.refused > CTL_ADDR_REPORT_MAX)
        fprintf(stderr, "heraldctl: ... %zu more lines refused\n", c.refused - CTL_ADDR_REPORT_MAX);
    printf("added %zu, already present %zu, over the cap of %d per uid %zu, refused %zu\n",
           c.total.added, c.total.existed, HR_ADDR_PER_UID_MAX, c.total.full, c.refused);
    rc = c.refused > 0 || c.total.full > 0 ? CTL_EXIT_FAIL : CTL_EXIT_OK;
done:
    hr_addr_list_free(&batch);
    if (in != stdin)
        fclose(in);
    return rc;
}

int ctl_cmd_address(ctl_ctx *ctx, int argc, char **argv)
{
    if (argc < 2)
        return ctl_usage(ctx, "expected add, rm, ls or import");
    if (strcmp(argv[1], "add") == 0 || strcmp(argv[1], "rm") == 0)
        return ctl_addr_change(ctx, strcmp(argv[1], "add") == 0, argc - 1, argv + 1);
    if (strcmp(argv[1], "ls") == 0)
        return ctl_addr_ls(ctx, argc - 1, argv + 1);
    if (strcmp(argv[1], "import") == 0)
        return ctl_addr_import(ctx, argc - 1, argv + 1);
    return ctl_usage(ctx, "unknown subcommand '%s' (add, rm, ls or import)", argv[1]);
}
