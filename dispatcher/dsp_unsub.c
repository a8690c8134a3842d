/* dsp_unsub: one-click unsubscribe and the preference page
 * (docs/recipients.md), served at /u/{token} to anyone who holds the link
 * of a mail (recipients.unsubscribe.public_url + "/u/" + the token of
 * hr_ctoken.h): the token is the capability, so these routes have no auth
 * hook, and every request checks it first (signature, a configured key,
 * its lifetime); a refused token changes nothing.
 *
 * - POST /u/{token} with the body List-Unsubscribe=One-Click (RFC 8058, as
 *   a mail client sends it, urlencoded or multipart): the uid opts out of
 *   the token's category by its channel type; 200.  The page's own button
 *   adds from=page and is sent back to the page (303).
 * - GET /u/{token}: a small page, no script, no framework: the token's
 *   opt-out as one button, then every category that is not mandatory by
 *   every channel type configured as a table of checkboxes (checked =
 *   received), and the quiet hours; native controls with labels, so a
 *   keyboard and a screen reader use it as they use any form.
 * - POST /u/{token} with save=1 and the checked cells (in=<category>/<type>)
 *   and quiet_start/quiet_end: the preferences as the page shows them
 *   (written with hr_user_prefs_put, source "unsubscribe"); 303 back.
 * Bodies are forms of at most DSP_UNSUB_MAX_BODY bytes (hr_httpd refuses
 * more before reading them); the pages carry a CSP that allows nothing but
 * this origin's stylesheet and forms posting to it. */
#include "dsp_unsub.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hr_consent.h"
#include "hr_ctoken.h"
#include "hr_httpd_req.h"
#include "hr_log.h"
#include "hr_parse.h"
#include "hr_user.h"

#define DSP_UNSUB_CSP                                                                    \
    "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; " \
    "base-uri 'none'"
#define DSP_UNSUB_TYPES 4 /* channel types: webhook, fcm, apns, smtp */
#define DSP_UNSUB_FIELD_MAX 128

/* ---- the token ------------------------------------------------------------------- */

static void dsp_unsub_headers(hr_httpd_resp *resp);

/* A refused link's page (403 stays): a person followed it, not a client. */
static void dsp_unsub_refusal(bool expired, hr_httpd_resp *resp)
{
    static const char page[] =
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<title>Notification preferences</title>"
        "<link rel=\"stylesheet\" href=\"/console/prefs.css\"></head>\n<body><main>\n"
        "<h1>Notification preferences</h1>\n<p role=\"alert\">";
    static const char tail[] = "</p>\n</main></body></html>\n";
    const char *why = expired ? "This link is not valid any more: it has expired. A newer "
                                "message carries a new one."
                              : "This link is not valid.";

    hr_buf_reset(&resp->body);
    hr_buf_append(&resp->body, page, sizeof page - 1);
    hr_buf_append(&resp->body, why, strlen(why));
    hr_buf_append(&resp->body, tail, sizeof tail - 1);
    resp->content_type = "text/html; charset=utf-8";
    dsp_unsub_headers(resp);
}

/* The token of REQ's path checked into *U: true, or false after answering
 * (404 when herald's links are not configured, 403 for a refused token:
 * an HTML page for a GET, the JSON error otherwise). */
static bool dsp_unsub_token(dsp *d, const hr_httpd_req *req, hr_utoken *u, hr_httpd_resp *resp)
{
    const hr_config *cfg = d->cfg;
    const char *token = hr_httpd_param(req, "token");
    char err[128];
    int rc;

    if (cfg->recipients.unsubscribe.nkeys == 0) {
        hr_httpd_error(resp, 404, "not_found", "one-click unsubscribe is not configured");
        return false;
    }
    rc = hr_ctoken_unsub_verify(token != NULL ? token : "", cfg->recipients.unsubscribe.keys,
                                cfg->recipients.unsubscribe.nkeys, (int64_t)time(NULL),
                                cfg->recipients.unsubscribe.token_ttl_s, u, err, sizeof err);
    if (rc == 0)
        return true;
    hr_log_info("unsubscribe_refused", "reason=\"%s\"", err);
    hr_httpd_error(resp, 403, rc == HR_CTOKEN_EXPIRED ? "expired" : "forbidden",
                   "this link is not valid: %s", err);
    if (strcmp(req->method, "GET") == 0)
        dsp_unsub_refusal(rc == HR_CTOKEN_EXPIRED, resp);
    return false;
}

/* ---- the page -------------------------------------------------------------------- */

/* Appends S HTML-escaped.  0 or -1. */
static int dsp_unsub_esc(hr_buf *b, const char *s)
{
    for (; *s != '\0'; s++) {
        const char *e = *s == '<'    ? "&lt;"
                        : *s == '>'  ? "&gt;"
                        : *s == '&'  ? "&amp;"
                        : *s == '"'  ? "&quot;"
                        : *s == '\'' ? "&#39;"
                                     : NULL;

        if ((e != NULL ? hr_buf_append(b, e, strlen(e)) : hr_buf_append(b, s, 1)) != 0)
            return -1;
    }
    return 0;
}

/* Appends the text of FMT (no escaping: the caller's literals and
 * numbers).  0 or -1. */
static int dsp_unsub_put(hr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int dsp_unsub_put(hr_buf *b, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= sizeof text ? -1 : hr_buf_append(b, text, (size_t)n);
}

/* The channel types the configuration has, in its order, each once. */
static size_t dsp_unsub_types(const hr_config *cfg, hr_channel_type *types)
{
    size_t n = 0;

    for (size_t i = 0; i < cfg->nchannels; i++) {
        size_t k = 0;

        while (k < n && types[k] != cfg->channels[i].type)
            k++;
        if (k == n && n < DSP_UNSUB_TYPES)
            types[n++] = cfg->channels[i].type;
    }
    return n;
}

/* What a channel type is called on the page. */
static const char *dsp_unsub_label(hr_channel_type t)
{
    switch (t) {
    case HR_CHANNEL_SMTP:
        return "email";
    case HR_CHANNEL_FCM:
        return "push (Android)";
    case HR_CHANNEL_APNS:
        return "push (Apple)";
    case HR_CHANNEL_WEBPUSH:
        return "push (browser)";
    default:
        return "webhook";
    }
}

/* P's opt-outs as the _optout field hr_consent reads. */
static char *dsp_unsub_optouts(const hr_user_prefs *p)
{
    char *s = calloc(1, p->noptouts * (HR_CATEGORY_NAME_MAX + HR_USER_CHANNEL_MAX + 2) + 1);
    size_t len = 0;

    for (size_t i = 0; s != NULL && i < p->noptouts; i++)
        len += (size_t)sprintf(s + len, "%s%s/%s", i ? "," : "", p->optouts[i].category,
                               p->optouts[i].channel);
    return s;
}

/* "HH:MM" of the local second S into BUF. */
static void dsp_unsub_hhmm(int32_t s, char *buf, size_t len)
{
    snprintf(buf, len, "%02d:%02d", (int)(s / 3600 % 24), (int)(s / 60 % 60));
}

/* The page of token U (TOKEN as given) for the preferences P, with NOTE a
 * line to announce (NULL: none), into B.  0 or -1. */
static int dsp_unsub_page(const hr_config *cfg, const char *token, const hr_utoken *u,
                          const hr_user_prefs *p, const char *zone, const char *note, hr_buf *b)
{
    hr_channel_type types[DSP_UNSUB_TYPES], tt;
    size_t ntypes = dsp_unsub_types(cfg, types);
    char *optout = dsp_unsub_optouts(p), qs[8] = "", qe[8] = "";
    const char *label =
        hr_channel_type_parse(u->channel, &tt) == 0 ? dsp_unsub_label(tt) : u->channel;
    int rc = -1;

    if (optout == NULL)
        return -1;
    if (p->quiet.set) {
        dsp_unsub_hhmm(p->quiet.start_s, qs, sizeof qs);
        dsp_unsub_hhmm(p->quiet.end_s, qe, sizeof qe);
    }
    if (dsp_unsub_put(b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                         "<meta name=\"viewport\" content=\"width=device-width, "
                         "initial-scale=1\"><title>Notification preferences</title>"
                         "<link rel=\"stylesheet\" href=\"/console/prefs.css\"></head>\n"
                         "<body><main>\n<h1>Notification preferences</h1>\n") != 0)
        goto done;
    if (note != NULL && (dsp_unsub_put(b, "<p role=\"status\" class=\"note\">") != 0 ||
                         dsp_unsub_esc(b, note) != 0 || dsp_unsub_put(b, "</p>\n") != 0))
        goto done;
    /* The link's own opt-out: one button. */
    if (dsp_unsub_put(b, "<form method=\"post\" action=\"/u/") != 0 ||
        dsp_unsub_esc(b, token) != 0 ||
        dsp_unsub_put(b, "\"><p>This link was sent with <strong>") != 0 ||
        dsp_unsub_esc(b, u->category) != 0 || dsp_unsub_put(b, "</strong> messages by ") != 0 ||
        dsp_unsub_esc(b, label) != 0 ||
        dsp_unsub_put(b, ".</p><input type=\"hidden\" name=\"List-Unsubscribe\" "
                         "value=\"One-Click\"><input type=\"hidden\" name=\"from\" "
                         "value=\"page\"><button type=\"submit\" id=\"unsubscribe\">Unsubscribe "
                         "from ") != 0 ||
        dsp_unsub_esc(b, u->category) != 0 || dsp_unsub_put(b, " by ") != 0 ||
        dsp_unsub_esc(b, label) != 0 || dsp_unsub_put(b, "</button></form>\n") != 0)
        goto done;
    /* Everything else: the table of categories by channel type. */
    if (dsp_unsub_put(b, "<form method=\"post\" action=\"/u/") != 0 ||
        dsp_unsub_esc(b, token) != 0 ||
        dsp_unsub_put(b, "\"><input type=\"hidden\" name=\"save\" value=\"1\">"
                         "<table><caption>What you receive (checked: received)</caption>"
                         "<thead><tr><th scope=\"col\">Category</th>") != 0)
        goto done;
    for (size_t t = 0; t < ntypes; t++)
        if (dsp_unsub_put(b, "<th scope=\"col\">") != 0 ||
            dsp_unsub_esc(b, dsp_unsub_label(types[t])) != 0 || dsp_unsub_put(b, "</th>") != 0)
            goto done;
    if (dsp_unsub_put(b, "</tr></thead><tbody>") != 0)
        goto done;
    for (size_t c = 0; c < cfg->recipients.ncategories; c++) {
        const hr_category *cat = &cfg->recipients.categories[c];

        if (cat->mandatory)
            continue;
        if (dsp_unsub_put(b, "<tr><th scope=\"row\">") != 0 || dsp_unsub_esc(b, cat->name) != 0 ||
            dsp_unsub_put(b, "</th>") != 0)
            goto done;
        for (size_t t = 0; t < ntypes; t++) {
            const char *type = hr_channel_type_name(types[t]);
            bool on = !hr_consent_opted_out(optout, cat->name, type);

            if (dsp_unsub_put(b,
                              "<td><input type=\"checkbox\" name=\"in\" value=\"%s/%s\" "
                              "id=\"in-%s-%s\"%s aria-label=\"",
                              cat->name, type, cat->name, type, on ? " checked" : "") != 0 ||
                dsp_unsub_esc(b, cat->name) != 0 || dsp_unsub_put(b, " by ") != 0 ||
                dsp_unsub_esc(b, dsp_unsub_label(types[t])) != 0 ||
                dsp_unsub_put(b, "\"></td>") != 0)
                goto done;
        }
        if (dsp_unsub_put(b, "</tr>") != 0)
            goto done;
    }
    if (dsp_unsub_put(b, "</tbody></table>\n") != 0)
        goto done;
    for (size_t c = 0; c < cfg->recipients.ncategories; c++)
        if (cfg->recipients.categories[c].mandatory &&
            (dsp_unsub_put(b, "<p class=\"mandatory\">") != 0 ||
             dsp_unsub_esc(b, cfg->recipients.categories[c].name) != 0 ||
             dsp_unsub_put(b, " messages are always sent.</p>\n") != 0))
            goto done;
    if (dsp_unsub_put(b, "<fieldset><legend>Quiet hours, your time (") != 0 ||
        dsp_unsub_esc(b, zone) != 0 ||
        dsp_unsub_put(b,
                      ")</legend><p id=\"quiet-help\">Nothing but mandatory messages "
                      "between these times; leave both empty for none.</p>"
                      "<label for=\"quiet_start\">From</label> <input type=\"time\" "
                      "id=\"quiet_start\" name=\"quiet_start\" value=\"%s\" "
                      "aria-describedby=\"quiet-help\"> <label for=\"quiet_end\">to</label> "
                      "<input type=\"time\" id=\"quiet_end\" name=\"quiet_end\" value=\"%s\" "
                      "aria-describedby=\"quiet-help\"></fieldset>\n"
                      "<button type=\"submit\" id=\"save\">Save preferences</button></form>\n"
                      "</main></body></html>\n",
                      qs, qe) != 0)
        goto done;
    rc = 0;
done:
    free(optout);
    return rc;
}

/* The headers of every page: only this origin's stylesheet and forms
 * posting here, never cached (it holds a capability), no sniffing, no
 * referrer leaking the link. */
static void dsp_unsub_headers(hr_httpd_resp *resp)
{
    hr_httpd_resp_header(resp, "Content-Security-Policy", DSP_UNSUB_CSP);
    hr_httpd_resp_header(resp, "Cache-Control", "no-store");
    hr_httpd_resp_header(resp, "X-Content-Type-Options", "nosniff");
    hr_httpd_resp_header(resp, "Referrer-Policy", "no-referrer");
}

/* Answers STATUS with the page of token U for its uid's preferences as
 * MySQL holds them. */
static void dsp_unsub_show(dsp *d, dsp_api_conn *ac, const char *token, const hr_utoken *u,
                           int status, const char *note, hr_httpd_resp *resp)
{
    hr_user_prefs p = {0};
    hr_user profile = {0};
    char err[512];

    if (hr_user_prefs_get(ac->m, u->uid, &p, err, sizeof err) != 0 ||
        hr_user_get(ac->m, u->uid, &profile, err, sizeof err) < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    hr_buf_reset(&resp->body);
    if (dsp_unsub_page(d->cfg, token, u, &p, profile.tz != NULL ? profile.tz : "UTC", note,
                       &resp->body) != 0) {
        hr_httpd_error(resp, 500, "internal", "the page does not fit");
        goto done;
    }
    resp->status = status;
    resp->content_type = "text/html; charset=utf-8";
    dsp_unsub_headers(resp);
done:
    hr_user_clear(&profile);
    hr_user_prefs_clear(&p);
}

void dsp_unsub_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_utoken u;
    const char *done = hr_httpd_query(req, "done");

    if (!dsp_unsub_token(d, req, &u, resp))
        return;
    dsp_unsub_show(d, ac, hr_httpd_param(req, "token"), &u, 200,
                   done == NULL                        ? NULL
                   : strcmp(done, "unsubscribed") == 0 ? "You are unsubscribed."
                                                       : "Your preferences are saved.",
                   resp);
}

/* ---- the form ---------------------------------------------------------------------- */

/* Decodes the LEN bytes at S (application/x-www-form-urlencoded) into OUT
 * (at most CAP - 1 bytes).  0, or -1 when malformed or too long. */
static int dsp_unsub_decode(const char *s, size_t len, char *out, size_t cap)
{
    size_t w = 0;

    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)s[i];

        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            if (i + 2 >= len || !isxdigit((unsigned char)s[i + 1]) ||
                !isxdigit((unsigned char)s[i + 2]))
                return -1;
            c = (int)strtol((char[]){s[i + 1], s[i + 2], '\0'}, NULL, 16);
            i += 2;
        }
        if (c == '\0' || w + 1 >= cap)
            return -1;
        out[w++] = (char)c;
    }
    out[w] = '\0';
    return 0;
}

/* The next name=value pair of the urlencoded form at *AT (END its end),
 * decoded.  1 with the pair, 0 at the end, -1 when malformed. */
static int dsp_unsub_next(const char **at, const char *end, char *name, char *value)
{
    const char *amp, *eq;

    while (*at < end && **at == '&')
        (*at)++;
    if (*at >= end)
        return 0;
    amp = memchr(*at, '&', (size_t)(end - *at));
    if (amp == NULL)
        amp = end;
    eq = memchr(*at, '=', (size_t)(amp - *at));
    if (eq == NULL || dsp_unsub_decode(*at, (size_t)(eq - *at), name, DSP_UNSUB_FIELD_MAX) != 0 ||
        dsp_unsub_decode(eq + 1, (size_t)(amp - eq - 1), value, DSP_UNSUB_FIELD_MAX) != 0)
        return -1;
    *at = amp;
    return 1;
}

/* What the form says. */
typedef struct dsp_unsub_form {
    bool one_click, from_page, save;
    char quiet_start[DSP_UNSUB_FIELD_MAX], quiet_end[DSP_UNSUB_FIELD_MAX];
    char (*in)[DSP_UNSUB_FIELD_MAX]; /* checked cells, "<category>/<type>" */
    size_t nin;
} dsp_unsub_form;

/* A multipart body (a mail client's one-click POST may be one): only the
 * one-click part is looked for. */
static bool dsp_unsub_multipart_one_click(const char *body, size_t len)
{
    static const char name[] = "name=\"List-Unsubscribe\"";
    const char *at = body, *end = body + len;

    while ((at = memmem(at, (size_t)(end - at), name, sizeof name - 1)) != NULL) {
        const char *value = memmem(at, (size_t)(end - at), "\r\n\r\n", 4);

        if (value != NULL && (size_t)(end - value) >= 4 + 9 &&
            memcmp(value + 4, "One-Click", 9) == 0)
            return true;
        at += sizeof name - 1;
    }
    return false;
}

/* REQ's form into *F.  0, or -1 when malformed. */
static int dsp_unsub_form_read(const hr_httpd_req *req, dsp_unsub_form *f)
{
    const char *ct = hr_httpd_header(req, "Content-Type"), *at = req->body;
    const char *end = req->body + req->body_len;
    char name[DSP_UNSUB_FIELD_MAX], value[DSP_UNSUB_FIELD_MAX];
    int rc;

    if (ct != NULL && strncasecmp(ct + strspn(ct, " \t"), "multipart/", 10) == 0) {
        f->one_click = dsp_unsub_multipart_one_click(req->body, req->body_len);
        return 0;
    }
    while ((rc = dsp_unsub_next(&at, end, name, value)) == 1) {
        if (strcmp(name, "List-Unsubscribe") == 0)
            f->one_click = strcmp(value, "One-Click") == 0;
        else if (strcmp(name, "from") == 0)
            f->from_page = strcmp(value, "page") == 0;
        else if (strcmp(name, "save") == 0)
            f->save = true;
        else if (strcmp(name, "quiet_start") == 0)
            memcpy(f->quiet_start, value, sizeof value);
        else if (strcmp(name, "quiet_end") == 0)
            memcpy(f->quiet_end, value, sizeof value);
        else if (strcmp(name, "in") == 0) {
            char(*grown)[DSP_UNSUB_FIELD_MAX] = realloc(f->in, (f->nin + 1) * sizeof *f->in);

            if (grown == NULL)
                return -1;
            f->in = grown;
            memcpy(f->in[f->nin++], value, sizeof value);
        }
    }
    return rc;
}

/* Whether the form checked the cell CATEGORY/TYPE. */
static bool dsp_unsub_checked(const dsp_unsub_form *f, const char *category, const char *type)
{
    char cell[DSP_UNSUB_FIELD_MAX];

    snprintf(cell, sizeof cell, "%s/%s", category, type);
    for (size_t i = 0; i < f->nin; i++)
        if (strcmp(f->in[i], cell) == 0)
            return true;
    return false;
}

/* The preferences the saved page asks for into *OUT, from the old ones
 * OLD: the cells left unchecked as opt-outs — a whole row as (category,
 * any channel), a whole column as (any category, type), every cell as
 * (any, any) — plus the old opt-outs the table does not show (a mandatory
 * or undeclared category, a channel type not configured).  0, or
 * HR_USER_EINVAL with ERRSTR. */
static int dsp_unsub_wanted(const hr_config *cfg, const dsp_unsub_form *f, const hr_user_prefs *old,
                            hr_user_prefs *out, char *errstr, size_t errlen)
{
    hr_channel_type types[DSP_UNSUB_TYPES];
    size_t ntypes = dsp_unsub_types(cfg, types), ncats = 0, off_cats = 0;
    bool col_off[DSP_UNSUB_TYPES], shown_cat, shown_type;
    int64_t qs, qe;
    int rc;

    if ((f->quiet_start[0] == '\0') != (f->quiet_end[0] == '\0')) {
        snprintf(errstr, errlen, "quiet hours: give both times, or neither");
        return HR_USER_EINVAL;
    }
    if (f->quiet_start[0] != '\0') {
        if (hr_parse_time_of_day("quiet hours from", f->quiet_start, &qs, errstr, errlen) != 0 ||
            hr_parse_time_of_day("quiet hours to", f->quiet_end, &qe, errstr, errlen) != 0)
            return HR_USER_EINVAL;
        if (qs == qe) {
            snprintf(errstr, errlen, "quiet hours: two different times, please");
            return HR_USER_EINVAL;
        }
        out->quiet = (hr_user_quiet){.set = true, .start_s = (int32_t)qs, .end_s = (int32_t)qe};
    }
    for (size_t t = 0; t < ntypes; t++)
        col_off[t] = true;
    for (size_t c = 0; c < cfg->recipients.ncategories; c++) {
        const hr_category *cat = &cfg->recipients.categories[c];
        bool row_off = true;

        if (cat->mandatory)
            continue;
        ncats++;
        for (size_t t = 0; t < ntypes; t++) {
            bool on = dsp_unsub_checked(f, cat->name, hr_channel_type_name(types[t]));

            row_off = row_off && !on;
            col_off[t] = col_off[t] && !on;
        }
        off_cats += row_off;
    }
    if (ncats > 0 && off_cats == ncats) {
        if ((rc = hr_user_prefs_add(out, "*", "*", errstr, errlen)) != 0)
            return rc;
    } else {
        for (size_t t = 0; t < ntypes; t++)
            if (ncats > 0 && col_off[t] &&
                (rc = hr_user_prefs_add(out, "*", hr_channel_type_name(types[t]), errstr,
                                        errlen)) != 0)
                return rc;
        for (size_t c = 0; c < cfg->recipients.ncategories; c++) {
            const hr_category *cat = &cfg->recipients.categories[c];
            bool row_off = true;

            if (cat->mandatory)
                continue;
            for (size_t t = 0; t < ntypes; t++)
                row_off =
                    row_off && !dsp_unsub_checked(f, cat->name, hr_channel_type_name(types[t]));
            if (row_off && (rc = hr_user_prefs_add(out, cat->name, "*", errstr, errlen)) != 0)
                return rc;
            for (size_t t = 0; !row_off && t < ntypes; t++)
                if (!col_off[t] &&
                    !dsp_unsub_checked(f, cat->name, hr_channel_type_name(types[t])) &&
                    (rc = hr_user_prefs_add(out, cat->name, hr_channel_type_name(types[t]), errstr,
                                            errlen)) != 0)
                    return rc;
        }
    }
    for (size_t i = 0; i < old->noptouts; i++) {
        const hr_category *cat = hr_config_category(cfg, old->optouts[i].category);
        hr_channel_type type;

        shown_cat = strcmp(old->optouts[i].category, "*") == 0 || (cat != NULL && !cat->mandatory);
        shown_type = strcmp(old->optouts[i].channel, "*") == 0;
        for (size_t t = 0; !shown_type && t < ntypes; t++)
            shown_type =
                hr_channel_type_parse(old->optouts[i].channel, &type) == 0 && type == types[t];
        if ((!shown_cat || !shown_type) &&
            (rc = hr_user_prefs_add(out, old->optouts[i].category, old->optouts[i].channel, errstr,
                                    errlen)) != 0)
            return rc;
    }
    return 0;
}

/* Sends the page's POST back to it (303), NOTE naming what happened. */
static void dsp_unsub_back(const char *token, const char *done, hr_httpd_resp *resp)
{
    char location[HR_UTOKEN_MAX + 40];

    snprintf(location, sizeof location, "/u/%s?done=%s", token, done);
    resp->status = 303;
    resp->content_type = "text/plain; charset=utf-8";
    hr_httpd_resp_header(resp, "Location", location);
    hr_buf_append(&resp->body, "see other\n", 10);
}

void dsp_unsub_post(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *token = hr_httpd_param(req, "token");
    dsp_unsub_form f = {0};
    hr_user_prefs old = {0}, want = {0};
    hr_utoken u;
    char err[512];
    int rc;

    if (!dsp_unsub_token(d, req, &u, resp))
        return;
    if (dsp_unsub_form_read(req, &f) != 0 || (!f.one_click && !f.save)) {
        hr_httpd_error(resp, 400, "bad_form",
                       "the body must be List-Unsubscribe=One-Click (RFC 8058) or the page's form");
        goto done;
    }
    if (f.one_click) {
        /* The link's category may have left the configuration since: the
         * wish is recorded all the same (NULL: any well-formed name). */
        rc = hr_user_opt_out(ac->m, ac->r, u.uid, u.category, u.channel, HR_USER_SRC_UNSUBSCRIBE,
                             NULL, err, sizeof err);
        if (rc < 0) {
            dsp_api_backend_error(resp, "mysql", err);
            goto done;
        }
        hr_log_info("unsubscribed", "uid=%" PRId64 " category=%s channel=%s new=%d", u.uid,
                    u.category, u.channel, rc);
        if (f.from_page) {
            dsp_unsub_back(token, "unsubscribed", resp);
        } else {
            resp->content_type = "text/plain; charset=utf-8";
            hr_buf_append(&resp->body, "unsubscribed\n", 13);
        }
        goto done;
    }
    if (hr_user_prefs_get(ac->m, u.uid, &old, err, sizeof err) != 0) {
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    rc = dsp_unsub_wanted(d->cfg, &f, &old, &want, err, sizeof err);
    if (rc == 0)
        rc = hr_user_prefs_put(ac->m, ac->r, u.uid, &want, HR_USER_SRC_UNSUBSCRIBE, d->cfg, err,
                               sizeof err);
    if (rc == HR_USER_EINVAL) {
        dsp_unsub_show(d, ac, token, &u, 400, err, resp);
        goto done;
    }
    if (rc < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    hr_log_info("preferences_saved", "uid=%" PRId64 " opt_outs=%zu quiet=%d via=page", u.uid,
                want.noptouts, want.quiet.set);
    dsp_unsub_back(token, "saved", resp);
done:
    free(f.in);
    hr_user_prefs_clear(&old);
    hr_user_prefs_clear(&want);
}
