/* hr_addr: the address book's two stores (see hr_addr.h).  The one path
 * that writes a uid's Redis set is hr_addr_rewrite — the rows MySQL holds
 * for a batch of uids, checked, written with addr_set.lua in one pipelined
 * round trip — shared by every write, the import and the sync; only the
 * worker's prune removes a member directly.  This file holds the values
 * (platform names, lists, checks, the member format) and that one write
 * path; the admin's writes and the import are hr_addr_store.c's, the
 * worker's fetch and prune hr_addr_fetch.c's; the sync is hr_mirror.c's, given
 * the book's statements and this rewrite (hr_addr_mirror). */
#include "hr_addr_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_pipe.h"
#include "hr_wpsub.h"

#define HR_ADDR_BLOCK 65536 /* arena block size */

static const char *const hr_addr_names[HR_ADDR__COUNT] = {
    [HR_ADDR_FCM] = "fcm",         [HR_ADDR_APNS] = "apns",       [HR_ADDR_EMAIL] = "email",
    [HR_ADDR_WEBHOOK] = "webhook", [HR_ADDR_WEBPUSH] = "webpush",
};

static const char *const hr_addr_supp_names[HR_ADDR_SUPP__COUNT] = {
    [HR_ADDR_SUPP_UNSUBSCRIBED] = "unsubscribed",
    [HR_ADDR_SUPP_COMPLAINED] = "complained",
    [HR_ADDR_SUPP_BOUNCED] = "bounced",
};

const char *hr_addr_supp_name(hr_addr_supp s)
{
    return (unsigned)s < HR_ADDR_SUPP__COUNT ? hr_addr_supp_names[s] : NULL;
}

int hr_addr_supp_parse(const char *s, hr_addr_supp *out)
{
    for (int i = HR_ADDR_SUPP_NONE + 1; i < HR_ADDR_SUPP__COUNT; i++)
        if (strcmp(s, hr_addr_supp_names[i]) == 0) {
            *out = (hr_addr_supp)i;
            return 0;
        }
    return -1;
}

const char *hr_addr_platform_name(hr_addr_platform p)
{
    return (unsigned)p < HR_ADDR__COUNT ? hr_addr_names[p] : NULL;
}

int hr_addr_platform_parse(const char *s, hr_addr_platform *out)
{
    for (int i = 0; i < HR_ADDR__COUNT; i++)
        if (strcmp(s, hr_addr_names[i]) == 0) {
            *out = (hr_addr_platform)i;
            return 0;
        }
    return -1;
}

void hr_addr_list_free(hr_addr_list *l)
{
    for (size_t i = 0; i < l->blocks.n; i++)
        free(l->blocks.v[i]);
    hr_vec_free(&l->blocks);
    hr_vec_free(&l->a);
    l->used = l->avail = 0;
}

/* N bytes of S plus a NUL in L's arena; NULL when out of memory.  Blocks
 * are never moved, so earlier strings stay where they are. */
static char *hr_addr_dup(hr_addr_list *l, const char *s, size_t n)
{
    char *dst;

    if (n + 1 > l->avail) {
        size_t size = n + 1 > HR_ADDR_BLOCK ? n + 1 : HR_ADDR_BLOCK;
        char *block = malloc(size);

        if (block == NULL || hr_vec_push(&l->blocks, block) != 0) {
            free(block);
            return NULL;
        }
        l->used = 0;
        l->avail = size;
    }
    dst = l->blocks.v[l->blocks.n - 1] + l->used;
    memcpy(dst, s, n);
    dst[n] = '\0';
    l->used += n + 1;
    l->avail -= n + 1;
    return dst;
}

int hr_addr_list_push(hr_addr_list *l, const hr_addr *a)
{
    hr_addr c = *a;

    c.app = hr_addr_dup(l, a->app, strlen(a->app));
    c.address = c.app != NULL ? hr_addr_dup(l, a->address, strlen(a->address)) : NULL;
    if (c.address == NULL)
        return -1;
    return hr_vec_push(&l->a, c);
}

cJSON *hr_addr_list_json(const hr_addr_list *l)
{
    cJSON *a = cJSON_CreateArray();

    for (size_t i = 0; a != NULL && i < l->a.n; i++) {
        cJSON *o = cJSON_CreateObject();

        if (o == NULL || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            goto fail;
        }
        /* O belongs to A from here on. */
        if (cJSON_AddStringToObject(o, "platform", hr_addr_platform_name(l->a.v[i].platform)) ==
                NULL ||
            cJSON_AddStringToObject(o, "app", l->a.v[i].app) == NULL ||
            cJSON_AddStringToObject(o, "address", l->a.v[i].address) == NULL ||
            (l->a.v[i].supp != HR_ADDR_SUPP_NONE &&
             cJSON_AddStringToObject(o, "suppressed", hr_addr_supp_name(l->a.v[i].supp)) == NULL))
            goto fail;
    }
    return a;
fail:
    cJSON_Delete(a);
    return NULL;
}

/* Every byte of S is in SET (a string of allowed characters) or, with
 * ALNUM, a letter or digit. */
static bool hr_addr_chars(const char *s, bool alnum, const char *set)
{
    /* A bitmap of the characters allowed: every address an open reads is
     * checked again, a device token's 64 hex digits a strchr each before. */
    uint64_t ok[4] = {alnum ? 0x3ffULL << '0' : 0,
                      alnum ? (0x3ffffffULL << ('A' - 64)) | (0x3ffffffULL << ('a' - 64)) : 0};

    for (; *set != '\0'; set++)
        ok[(unsigned char)*set >> 6] |= 1ULL << ((unsigned char)*set & 63);
    for (; *s != '\0'; s++)
        if (!((ok[(unsigned char)*s >> 6] >> ((unsigned char)*s & 63)) & 1))
            return false;
    return true;
}

/* A domain: dot-separated labels of letters, digits and inner '-',
 * 1..63 bytes each. */
static bool hr_addr_domain(const char *s, size_t n)
{
    size_t label = 0;

    if (n == 0)
        return false;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            if (label == 0 || label > 63 || s[i - 1] == '-' || s[i - label] == '-')
                return false;
            label = 0;
        } else if (isalnum((unsigned char)s[i]) || s[i] == '-') {
            label++;
        } else {
            return false;
        }
    }
    return true;
}

static bool hr_addr_email(const char *s)
{
    const char *at = strrchr(s, '@');
    size_t local;

    if (at == NULL || strlen(s) > 254)
        return false;
    local = (size_t)(at - s);
    if (local == 0 || local > 64)
        return false;
    for (size_t i = 0; i < local; i++)
        if (s[i] <= ' ' || s[i] >= 0x7f || strchr("\"(),:;<>@[\\]", s[i]) != NULL)
            return false;
    return hr_addr_domain(at + 1, strlen(at + 1));
}

static bool hr_addr_url(const char *s)
{
    size_t skip = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;

    if (skip == 0 || s[skip] == '\0' || s[skip] == '/')
        return false;
    for (const char *c = s; *c != '\0'; c++)
        if (*c <= ' ' || *c >= 0x7f)
            return false;
    return true;
}

/* hr_addr_check, and hr_addr_parse_member's reading of a member: with
 * CURVE a webpush address's p256dh point is checked on P-256 as well (see
 * hr_addr_parse_member for why a member's is not). */
static int hr_addr_check_as(hr_addr_platform p, const char *app, const char *address, bool curve,
                            char *errstr, size_t errlen)
{
    size_t alen = strlen(app), n = strlen(address);
    const char *bad = NULL;
    hr_wpsub ws;

    if (hr_addr_platform_name(p) == NULL) {
        snprintf(errstr, errlen, "platform: must be fcm, apns, email, webhook or webpush");
        return HR_ADDR_EINVAL;
    }
    if (n == 0 || n > HR_ADDR_ADDRESS_MAX) {
        snprintf(errstr, errlen, "address: must be 1..%d bytes", HR_ADDR_ADDRESS_MAX);
        return HR_ADDR_EINVAL;
    }
    if (alen > HR_ADDR_APP_MAX) {
        snprintf(errstr, errlen, "app: must be at most %d bytes", HR_ADDR_APP_MAX);
        return HR_ADDR_EINVAL;
    }
    switch (p) {
    case HR_ADDR_FCM:
        if (alen == 0 || !hr_addr_chars(app, true, "-"))
            bad = "app: an fcm address needs its FCM project id (letters, digits, '-')";
        else if (!hr_addr_chars(address, true, "_:.-"))
            bad = "address: an FCM registration token holds letters, digits, '_', ':', '.', '-'";
        break;
    case HR_ADDR_APNS:
        if (alen == 0 || !hr_addr_chars(app, true, ".-"))
            bad = "app: an apns address needs its bundle topic (letters, digits, '.', '-')";
        else if (n < 64 || n > 200 || n % 2 != 0 ||
                 !hr_addr_chars(address, false, "0123456789abcdefABCDEF"))
            bad = "address: an APNs device token is an even number of 64..200 hex digits";
        break;
    case HR_ADDR_EMAIL:
        if (alen != 0)
            bad = "app: must be empty for an email address";
        else if (!hr_addr_email(address))
            bad = "address: not an email address local@domain (ASCII, at most 254 bytes)";
        break;
    case HR_ADDR_WEBHOOK:
        if (alen != 0)
            bad = "app: must be empty for a webhook address";
        else if (!hr_addr_url(address))
            bad = "address: a webhook address is an http:// or https:// URL without spaces";
        break;
    case HR_ADDR_WEBPUSH:
        if (alen != 0)
            bad = "app: must be empty for a webpush address";
        else if ((curve ? hr_wpsub_parse : hr_wpsub_split)(address, &ws, errstr, errlen) != 0)
            return HR_ADDR_EINVAL;
        break;
    default:
        break;
    }
    if (bad != NULL) {
        snprintf(errstr, errlen, "%s", bad);
        return HR_ADDR_EINVAL;
    }
    return 0;
}

int hr_addr_check(hr_addr_platform p, const char *app, const char *address, char *errstr,
                  size_t errlen)
{
    return hr_addr_check_as(p, app, address, true, errstr, errlen);
}

char *hr_addr_member(char *buf, size_t len, hr_addr_platform p, const char *app,
                     const char *address, hr_addr_supp supp)
{
    const char *name = hr_addr_platform_name(p), *reason = hr_addr_supp_name(supp);
    int n;

    if (name == NULL)
        return NULL;
    n = reason != NULL ? snprintf(buf, len, "%s %s %s %s", name, app, address, reason)
                       : snprintf(buf, len, "%s %s %s", name, app, address);
    return n >= 0 && (size_t)n < len ? buf : NULL;
}

int hr_addr_parse_member(hr_addr_list *l, const char *member, size_t len, hr_addr *out)
{
    char buf[HR_ADDR_MEMBER_MAX + 1], err[8];
    char *app, *address, *reason;

    if (len > HR_ADDR_MEMBER_MAX || memchr(member, '\0', len) != NULL)
        return -1;
    memcpy(buf, member, len);
    buf[len] = '\0';
    app = strchr(buf, ' ');
    address = app != NULL ? strchr(app + 1, ' ') : NULL;
    if (address == NULL)
        return -1;
    *app++ = '\0';
    *address++ = '\0';
    /* No address holds a space: a fourth field is a suppression's reason. */
    reason = strchr(address, ' ');
    out->supp = HR_ADDR_SUPP_NONE;
    if (reason != NULL) {
        *reason++ = '\0';
        if (hr_addr_supp_parse(reason, &out->supp) != 0)
            return -1;
    }
    if (hr_addr_platform_parse(buf, &out->platform) != 0 ||
        hr_addr_check_as(out->platform, app, address, false, err, sizeof err) != 0)
        return -1;
    out->app = hr_addr_dup(l, app, strlen(app));
    out->address = out->app != NULL ? hr_addr_dup(l, address, strlen(address)) : NULL;
    return out->address != NULL ? 0 : -1;
}

/* The push_address rows of the N distinct UIDS (sorted), in (uid,
 * platform, app, address) order: columns uid, platform, app, address and
 * the suppression's reason (NULL: not suppressed).
 * The statement is HEAD, one '?' per uid, TAIL: only marks are added to
 * its text, every value is a parameter. */
int hr_addr_select(hr_mysql *m, const int64_t *uids, size_t n, hr_mysql_rows **rows, char *errstr,
                   size_t errlen)
{
    static const char head[] = "SELECT a.uid, a.platform, a.app, a.address, s.reason "
                               "FROM push_address a LEFT JOIN push_suppression s "
                               "ON s.platform = a.platform AND s.app = a.app "
                               "AND s.address = a.address WHERE a.uid IN (",
                      tail[] = ") ORDER BY a.uid, a.platform, a.app, a.address";
    hr_mysql_param *p = malloc(n * sizeof *p);
    char *sql = malloc(sizeof head + 2 * n + sizeof tail), *at;
    int rc = -1;

    if (p == NULL || sql == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    at = memcpy(sql, head, sizeof head - 1);
    at += sizeof head - 1;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            *at++ = ',';
        *at++ = '?';
        p[i] = HR_P_I64(uids[i]);
    }
    memcpy(at, tail, sizeof tail);
    rc = hr_mysql_query(m, sql, p, n, rows, errstr, errlen);
done:
    free(sql);
    free(p);
    return rc;
}

/* Rewrites the Redis sets of the N uids at UIDS (sorted in place, repeats
 * dropped) from the rows MySQL holds: one SELECT, one pipelined round
 * trip of addr_set.lua.  Rows hr_addr_check refuses are left out and
 * counted in RES (may be NULL).  0 or -1. */
int hr_addr_rewrite(hr_mysql *m, hr_redis *r, int64_t *uids, size_t n, const void *ctx,
                    hr_mirror_result *res, char *errstr, size_t errlen)
{
    hr_mysql_rows *rows = NULL;
    hr_addr_list arena = {0};
    hr_pipe *pipe = NULL;
    const char **argv = NULL;
    size_t row = 0;
    int rc = -1;

    (void)ctx; /* the address book's checks need no configuration */
    n = hr_mirror_uniq(uids, n);
    if (n == 0)
        return 0;
    if (hr_addr_select(m, uids, n, &rows, errstr, errlen) != 0)
        return -1;
    pipe = hr_pipe_new(r);
    argv = malloc((rows->nrows + 1) * sizeof *argv);
    if (pipe == NULL || argv == NULL)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        char key[HR_KEY_MAX], uid_s[24];
        int argc = 1;

        snprintf(uid_s, sizeof uid_s, "%" PRId64, uids[i]);
        argv[0] = hr_key_addr(hr_redis_prefix(r), key, sizeof key, uid_s);
        for (; row < rows->nrows && strtoll(hr_mysql_cell(rows, row, 0), NULL, 10) == uids[i];
             row++) {
            const char *app = hr_mysql_cell(rows, row, 2), *address = hr_mysql_cell(rows, row, 3);
            const char *reason = hr_mysql_cell(rows, row, 4);
            char member[HR_ADDR_MEMBER_MAX + 1], why[128] = "platform: not one of the four";
            hr_addr_supp supp = HR_ADDR_SUPP_NONE;
            hr_addr_platform p;

            if (hr_addr_platform_parse(hr_mysql_cell(rows, row, 1), &p) != 0 ||
                hr_addr_check(p, app, address, why, sizeof why) != 0) {
                hr_mirror_refused(res, uids[i], why);
                continue;
            }
            /* An ENUM column holds one of the three reasons. */
            if (reason != NULL)
                hr_addr_supp_parse(reason, &supp);
            hr_addr_member(member, sizeof member, p, app, address, supp);
            if ((argv[argc] = hr_addr_dup(&arena, member, strlen(member))) == NULL)
                goto oom;
            argc++;
        }
        if (hr_pipe_eval(pipe, HR_LUA_ADDR_SET, 1, argc, argv, NULL) != 0)
            goto oom;
        if (res != NULL) {
            res->uids++;
            res->stored += argc - 1;
        }
    }
    rc = hr_pipe_exec_all(pipe, errstr, errlen);
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    hr_pipe_free(pipe);
    free(argv);
    hr_addr_list_free(&arena);
    hr_mysql_rows_free(rows);
    return rc;
}

const hr_mirror hr_addr_mirror = {
    .name = "address",
    HR_MIRROR_TABLES("push_address"),
    .all_sql = "SELECT DISTINCT uid, uid FROM push_address WHERE uid > ? ORDER BY uid LIMIT ?",
    .lock_key = hr_key_addr_lock,
    .synced_key = hr_key_addr_synced,
    .rewrite = hr_addr_rewrite,
};
