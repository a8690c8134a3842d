/* wk_task: task cache and per-recipient rendering (see wk_task.h). */
#include "wk_task.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_clock.h"
#include "hr_ctoken.h"
#include "hr_pace.h"
#include "hr_track.h"

/* The task's rendered title and body are bounded like any template value. */
#define WK_TASK_TEXT_MAX (64 * 1024)
/* A request's URL, and its body or header lines. */
#define WK_TASK_URL_MAX (16 * 1024)
#define WK_TASK_BODY_MAX (256 * 1024)

static void wk_content_clear(wk_content *c)
{
    hr_template_free(c->title);
    hr_template_free(c->body);
    hr_buf_free(&c->fixed_title);
    hr_buf_free(&c->fixed_body);
    cJSON_Delete(c->payload);
    for (size_t i = 0; i < WK_TASK_UNSUBSCRIBE; i++)
        hr_template_free(c->mail[i]);
}

void wk_task_free(wk_task *wt)
{
    if (wt == NULL)
        return;
    hr_task_free(wt->row);
    for (size_t i = 0; i < wt->ncontent; i++)
        wk_content_clear(&wt->content[i]);
    free(wt->content);
    hr_variant_set_clear(&wt->variants);
    hr_template_free(wt->url);
    hr_template_free(wt->chbody);
    if (wt->headers != NULL)
        for (size_t i = 0; i < wt->ch->nheaders; i++)
            hr_template_free(wt->headers[i]);
    free(wt->headers);
    for (size_t i = 0; i < WK_TASK__MAIL; i++)
        hr_template_free(wt->mail[i]);
    free(wt);
}

static int wk_task_compile(const char *what, const char *src, hr_template_escape esc,
                           hr_template **out, char *errstr, size_t errlen)
{
    char detail[256];

    if (hr_template_compile_escape(src ? src : "", src ? strlen(src) : 0, esc, out, detail,
                                   sizeof detail) != 0) {
        snprintf(errstr, errlen, "%s template: %s", what, detail);
        return -1;
    }
    return 0;
}

static void wk_task_fix_texts(wk_task *wt, wk_content *c); /* with the rendering, below */

/* Compiles content C of WT from TITLE, BODY, PAYLOAD (an object's text or
 * NULL) and, for a variant, MAIL (its subject, text, html; NULL each: the
 * channel's).  0, or -1 with ERRSTR. */
static int wk_content_build(wk_task *wt, wk_content *c, const char *title, const char *body,
                            const char *payload, const char *const *mail, char *errstr,
                            size_t errlen)
{
    /* Title and body are rendered raw: the channel template escapes them
     * when it inserts them. */
    if (wk_task_compile("title", title, HR_TEMPLATE_RAW, &c->title, errstr, errlen) != 0 ||
        wk_task_compile("body", body, HR_TEMPLATE_RAW, &c->body, errstr, errlen) != 0)
        return -1;
    if (payload != NULL && (c->payload = cJSON_Parse(payload)) == NULL) {
        snprintf(errstr, errlen, "payload is not JSON");
        return -1;
    }
    for (size_t i = 0; mail != NULL && i < WK_TASK_UNSUBSCRIBE; i++)
        if (mail[i] != NULL &&
            wk_task_compile("mail", mail[i], i == WK_TASK_HTML ? HR_TEMPLATE_HTML : HR_TEMPLATE_RAW,
                            &c->mail[i], errstr, errlen) != 0)
            return -1;
    wt->uses_user =
        wt->uses_user || hr_template_uses_user(c->title) || hr_template_uses_user(c->body);
    for (size_t i = 0; i < WK_TASK_UNSUBSCRIBE; i++)
        wt->uses_user = wt->uses_user || (c->mail[i] != NULL && hr_template_uses_user(c->mail[i]));
    wk_task_fix_texts(wt, c);
    return 0;
}

/* The task's own content and its variants' (wt->variants, checked).  0,
 * or -1 with ERRSTR. */
static int wk_task_contents(wk_task *wt, char *errstr, size_t errlen)
{
    const hr_task *row = wt->row;
    char detail[512];

    wt->content = calloc(1 + wt->variants.n, sizeof *wt->content);
    if (wt->content == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    wt->ncontent = 1 + wt->variants.n;
    wt->content[0].key = HR_VARIANT_DEFAULT;
    if (wk_content_build(wt, &wt->content[0], row->title, row->body, row->payload, NULL, errstr,
                         errlen) != 0)
        return -1;
    for (size_t i = 0; i < wt->variants.n; i++) {
        const hr_variant *v = &wt->variants.v[i];
        const char *mail[WK_TASK_UNSUBSCRIBE] = {v->subject, v->text, v->html};

        wt->content[1 + i].key = v->key;
        if (wk_content_build(wt, &wt->content[1 + i], v->title ? v->title : row->title,
                             v->body ? v->body : row->body, v->payload ? v->payload : row->payload,
                             mail, detail, sizeof detail) != 0) {
            snprintf(errstr, errlen, "variant %s: %s", v->key, detail);
            return -1;
        }
    }
    return 0;
}

unsigned wk_task_variant(const wk_task *wt, const char *uid, const char *locale)
{
    int v;

    if (wt->variants.n == 0)
        return 0;
    v = hr_variant_ab_pick(&wt->variants, wt->row, strtoull(uid, NULL, 10), locale);
    return v >= 0 ? (unsigned)v + 1 : 0;
}

bool wk_task_undecided(const wk_task *wt)
{
    return wt->row->ab_sample_pct > 0 && wt->row->ab_winner == NULL;
}

bool wk_task_held(const wk_task *wt, const char *uid)
{
    return wk_task_undecided(wt) &&
           hr_variant_ab_pick(&wt->variants, wt->row, strtoull(uid, NULL, 10), NULL) ==
               HR_VARIANT_HELD;
}

const wk_content *wk_task_content(const wk_task *wt, unsigned variant)
{
    return &wt->content[variant < wt->ncontent ? variant : 0];
}

int wk_task_build(const hr_config *cfg, hr_task *row, hr_variant_set *variants, wk_task **out,
                  char *errstr, size_t errlen)
{
    wk_task *wt = calloc(1, sizeof *wt);

    *out = NULL;
    if (wt == NULL) {
        hr_task_free(row);
        hr_variant_set_clear(variants);
        snprintf(errstr, errlen, "out of memory");
        return 2;
    }
    wt->row = row;
    if (variants != NULL) {
        wt->variants = *variants;
        *variants = (hr_variant_set){0};
    }
    /* During a rolling configuration change one worker may lack a channel
     * the others have: that is no fault of the task. */
    if (row->channel != NULL && hr_config_channel(cfg, row->channel) == NULL) {
        snprintf(errstr, errlen, "channel \"%s\" is not in this worker's configuration",
                 row->channel);
        wk_task_free(wt);
        return WK_TASK_NO_CHANNEL;
    }
    if (hr_task_validate(row, cfg, errstr, errlen) != 0 ||
        hr_variant_check(&wt->variants, row, cfg, errstr, errlen) != 0)
        goto fail;
    wt->ch = hr_config_channel(cfg, row->channel);
    wt->ch_index = (size_t)(wt->ch - cfg->channels);
    /* hr_task_validate refused a category the configuration lacks. */
    wt->mandatory = hr_config_category(cfg, hr_task_category(row))->mandatory;
    if (wt->ch->type == HR_CHANNEL_SMTP && wt->ch->smtp.list_unsubscribe == NULL &&
        cfg->recipients.unsubscribe.public_url != NULL && cfg->recipients.unsubscribe.nkeys > 0) {
        wt->unsub_base = cfg->recipients.unsubscribe.public_url;
        wt->unsub_key = &cfg->recipients.unsubscribe.keys[0];
    }
    if (/* Values in the URL are percent-encoded: a payload or user
         * attribute cannot change the path or add query parameters. */
        wk_task_compile("channel url", wt->ch->url, HR_TEMPLATE_URL, &wt->url, errstr, errlen) !=
            0 ||
        wk_task_compile("channel body", wt->ch->body,
                        wt->ch->json_escape ? HR_TEMPLATE_JSON : HR_TEMPLATE_RAW, &wt->chbody,
                        errstr, errlen) != 0)
        goto fail;
    if (wt->ch->type == HR_CHANNEL_SMTP) {
        const char *src[WK_TASK__MAIL] = {wt->ch->smtp.subject, wt->ch->smtp.text,
                                          wt->ch->smtp.html, wt->ch->smtp.list_unsubscribe};

        /* The HTML part escapes its values: a user attribute holding a
         * link or markup must not become part of the mail ({{raw x}} opts out). */
        for (size_t i = 0; i < WK_TASK__MAIL; i++)
            if (src[i] != NULL &&
                wk_task_compile("mail", src[i],
                                i == WK_TASK_HTML ? HR_TEMPLATE_HTML : HR_TEMPLATE_RAW,
                                &wt->mail[i], errstr, errlen) != 0)
                goto fail;
        if (wt->mail[WK_TASK_HTML] != NULL && cfg->events.tracking.base_url != NULL &&
            cfg->events.tracking.base_url[0] != '\0') {
            wt->track_base = cfg->events.tracking.base_url;
            wt->track_key = cfg->events.tracking.key;
        }
    }
    wt->headers = calloc(wt->ch->nheaders ? wt->ch->nheaders : 1, sizeof *wt->headers);
    if (wt->headers == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < wt->ch->nheaders; i++)
        if (wk_task_compile("channel header", wt->ch->headers[i].value, HR_TEMPLATE_RAW,
                            &wt->headers[i], errstr, errlen) != 0)
            goto fail;
    if (wk_task_contents(wt, errstr, errlen) != 0 ||
        hr_rich_parse(row->rich, &wt->rich, errstr, errlen) != 0)
        goto fail;
    wt->has_rich = hr_rich_any(&wt->rich);
    if (hr_throttle_rule_from_task(row, wt->ch, &wt->throttle, errstr, errlen) != 0)
        goto fail;
    /* A throttle_key value may come from the user hash (payload first). */
    wt->uses_user = wt->uses_user || hr_template_uses_user(wt->url) ||
                    hr_template_uses_user(wt->chbody) ||
                    (wt->throttle.limit > 0 && row->throttle_key != NULL);
    for (size_t i = 0; i < wt->ch->nheaders; i++)
        wt->uses_user = wt->uses_user || hr_template_uses_user(wt->headers[i]);
    for (size_t i = 0; i < WK_TASK__MAIL; i++)
        wt->uses_user =
            wt->uses_user || (wt->mail[i] != NULL && hr_template_uses_user(wt->mail[i]));
    wt->rate_limit = row->rate_limit > 0 ? row->rate_limit : wt->ch->rate_limit;
    snprintf(wt->rl_scope, sizeof wt->rl_scope, "push:task%" PRId64, row->id);
    wt->id_len = (size_t)snprintf(wt->id_text, sizeof wt->id_text, "%" PRId64, row->id);
    wt->weight = hr_pace_weight(row->priority);
    *out = wt;
    return 0;
fail:
    wk_task_free(wt);
    return 2;
}

/* Everything a lookup needs for one recipient. */
typedef struct wk_render_ctx {
    const wk_task *t;
    const wk_content *c; /* the recipient's content */
    const char *uid;
    const redisReply *user;
    hr_buf title, body;                 /* the task's, rendered first ... */
    const hr_buf *title_out, *body_out; /* ... here, or the task's fixed ones */
    char num[64];                       /* a number or boolean printed from the payload */
    char *printed;                      /* a payload object/array printed, freed by the caller */
} wk_render_ctx;

static const char *wk_render_payload(wk_render_ctx *rx, const char *name, size_t *len)
{
    const cJSON *item = rx->c->payload;
    char part[128];

    /* FIELD may be a dotted path into nested objects. */
    while (item != NULL && *name != '\0') {
        const char *dot = strchr(name, '.');
        size_t n = dot ? (size_t)(dot - name) : strlen(name);

        if (n >= sizeof part)
            return NULL;
        memcpy(part, name, n);
        part[n] = '\0';
        item = cJSON_GetObjectItemCaseSensitive(item, part);
        name += n + (dot ? 1 : 0);
    }
    if (item == NULL || cJSON_IsNull(item))
        return NULL;
    if (cJSON_IsString(item)) {
        *len = strlen(item->valuestring);
        return item->valuestring;
    }
    if (cJSON_IsBool(item)) {
        *len = cJSON_IsTrue(item) ? 4 : 5;
        return cJSON_IsTrue(item) ? "true" : "false";
    }
    if (cJSON_IsNumber(item)) {
        double d = item->valuedouble;

        /* The cast is defined only inside int64_t's range (1e300 is not). */
        if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == (double)(int64_t)d)
            *len = (size_t)snprintf(rx->num, sizeof rx->num, "%" PRId64, (int64_t)d);
        else
            *len = (size_t)snprintf(rx->num, sizeof rx->num, "%.17g", d);
        return rx->num;
    }
    free(rx->printed);
    rx->printed = cJSON_PrintUnformatted(item);
    if (rx->printed == NULL)
        return NULL;
    *len = strlen(rx->printed);
    return rx->printed;
}

static const char *wk_render_lookup(void *ctx, hr_tvar_kind kind, const char *name, size_t *len)
{
    wk_render_ctx *rx = ctx;
    const hr_task *row = rx->t->row;

    switch (kind) {
    case HR_TVAR_UID:
        *len = strlen(rx->uid);
        return rx->uid;
    case HR_TVAR_TITLE:
        *len = rx->title_out->len;
        return rx->title_out->data ? rx->title_out->data : "";
    case HR_TVAR_BODY:
        *len = rx->body_out->len;
        return rx->body_out->data ? rx->body_out->data : "";
    case HR_TVAR_TASK:
        if (strcmp(name, "id") == 0) {
            *len = rx->t->id_len;
            return rx->t->id_text;
        }
        if (strcmp(name, "name") == 0 && row->name != NULL) {
            *len = strlen(row->name);
            return row->name;
        }
        if (strcmp(name, "topic") == 0 && row->topic != NULL) {
            *len = strlen(row->topic);
            return row->topic;
        }
        /* A webhook's mapping of the rich options: the object's JSON text
         * ({{raw task.rich}} in a JSON body), "null" without them. */
        if (strcmp(name, "rich") == 0) {
            *len = row->rich != NULL ? strlen(row->rich) : 4;
            return row->rich != NULL ? row->rich : "null";
        }
        return NULL;
    case HR_TVAR_PAYLOAD:
        return wk_render_payload(rx, name, len);
    case HR_TVAR_USER:
        if (rx->user == NULL || rx->user->type != REDIS_REPLY_ARRAY)
            return NULL;
        for (size_t i = 0; i + 1 < rx->user->elements; i += 2) {
            const redisReply *k = rx->user->element[i], *v = rx->user->element[i + 1];

            if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
                strcmp(k->str, name) == 0) {
                *len = (size_t)v->len;
                return v->str;
            }
        }
        return NULL;
    }
    return NULL;
}

/* Removes control bytes (< 0x20, 0x7f) from LINE after byte FROM: libcurl
 * sends header lines verbatim, so a CR/LF in a rendered value would end the
 * header and start another.  Returns how many were removed. */
static size_t wk_task_strip_ctl(hr_buf *line, size_t from)
{
    size_t w = from, removed = 0;

    for (size_t r = from; r < line->len; r++) {
        unsigned char ch = (unsigned char)line->data[r];

        if (ch < 0x20 || ch == 0x7f)
            removed++;
        else
            line->data[w++] = (char)ch;
    }
    line->len = w;
    line->data[w] = '\0';
    return removed;
}

/* Renders the task's title into TITLE, then its body into BODY (which
 * C->title_out and C->body_out point at). */
static int wk_render_texts(wk_render_ctx *rx, hr_buf *title, hr_buf *body)
{
    if (hr_template_render(rx->c->title, wk_render_lookup, rx, title, NULL) != 0 ||
        hr_template_render(rx->c->body, wk_render_lookup, rx, body, NULL) != 0)
        return -1;
    return 0;
}

/* Renders title and body once when they are the same for every recipient
 * (no uid, no user.*); when that fails (a size cap) they are rendered per
 * push, which reports the failure there. */
static void wk_task_fix_texts(wk_task *wt, wk_content *c)
{
    wk_render_ctx rx = {.t = wt, .c = c, .uid = ""};

    if (hr_template_uses(c->title, HR_TVAR_UID) || hr_template_uses_user(c->title) ||
        hr_template_uses(c->body, HR_TVAR_UID) || hr_template_uses_user(c->body))
        return;
    hr_buf_init(&c->fixed_title, WK_TASK_TEXT_MAX);
    hr_buf_init(&c->fixed_body, WK_TASK_TEXT_MAX);
    rx.title_out = &c->fixed_title;
    rx.body_out = &c->fixed_body;
    c->fixed = wk_render_texts(&rx, &c->fixed_title, &c->fixed_body) == 0;
    free(rx.printed);
}

int wk_task_render_texts(const wk_task *wt, unsigned variant, const char *uid,
                         const redisReply *user, hr_buf *title, hr_buf *body, char *errstr,
                         size_t errlen)
{
    const wk_content *c = wk_task_content(wt, variant);
    wk_render_ctx rx = {.t = wt, .c = c, .uid = uid, .user = user};
    int rc = 0;

    hr_buf_reset(title);
    hr_buf_reset(body);
    rx.title_out = title;
    rx.body_out = body;
    if (!c->fixed)
        rc = wk_render_texts(&rx, title, body);
    else if (hr_buf_append(title, c->fixed_title.data ? c->fixed_title.data : "",
                           c->fixed_title.len) != 0 ||
             hr_buf_append(body, c->fixed_body.data ? c->fixed_body.data : "", c->fixed_body.len) !=
                 0)
        rc = -1;
    free(rx.printed);
    if (rc != 0)
        snprintf(errstr, errlen, "rendering exceeds its size cap");
    return rc;
}

/* OUT = herald's one-click link for UID: <public_url>/u/<token>, the token
 * of UID, the task's category and the smtp channel type, issued now
 * (docs/recipients.md).  0 or -1. */
static int wk_task_unsub_url(const wk_task *wt, const char *uid, hr_buf *out)
{
    hr_utoken u = {.uid = strtoll(uid, NULL, 10), .iat_s = hr_clock_now_ms() / 1000};
    char token[HR_UTOKEN_MAX], err[128];

    snprintf(u.category, sizeof u.category, "%s", hr_task_category(wt->row));
    snprintf(u.channel, sizeof u.channel, "%s", hr_channel_type_name(wt->ch->type));
    hr_buf_reset(out);
    if (hr_ctoken_unsub_issue(wt->unsub_key, &u, token, sizeof token, err, sizeof err) != 0 ||
        hr_buf_append(out, wt->unsub_base, strlen(wt->unsub_base)) != 0 ||
        hr_buf_append(out, "/u/", 3) != 0 || hr_buf_append(out, token, strlen(token) + 1) != 0)
        return -1;
    out->len--;
    return 0;
}

/* HTML, rendered for UID, with its links tracked (hr_track_rewrite); left
 * as it is when the rewrite would pass its cap. */
static void wk_task_track(const wk_task *wt, const char *uid, hr_buf *html)
{
    hr_buf tracked, old;

    hr_buf_init(&tracked, html->max);
    if (hr_track_rewrite(wt->track_base, wt->track_key, wt->row->id, strtoull(uid, NULL, 10),
                         html->data, html->len, &tracked) == 0) {
        old = *html;
        *html = tracked;
        tracked = old;
    }
    hr_buf_free(&tracked);
}

int wk_task_render_mail(const wk_task *wt, unsigned variant, const char *uid,
                        const redisReply *user, hr_buf out[WK_TASK__MAIL], char *errstr,
                        size_t errlen)
{
    const wk_content *c = wk_task_content(wt, variant);
    wk_render_ctx rx = {.t = wt, .c = c, .uid = uid, .user = user};
    int rc = -1;

    hr_buf_init(&rx.title, WK_TASK_TEXT_MAX);
    hr_buf_init(&rx.body, WK_TASK_TEXT_MAX);
    rx.title_out = c->fixed ? &c->fixed_title : &rx.title;
    rx.body_out = c->fixed ? &c->fixed_body : &rx.body;
    if (!c->fixed && wk_render_texts(&rx, &rx.title, &rx.body) != 0)
        goto done;
    for (size_t i = 0; i < WK_TASK__MAIL; i++) {
        /* The variant's subject, text or html in place of the channel's. */
        const hr_template *tm =
            i < WK_TASK_UNSUBSCRIBE && c->mail[i] != NULL ? c->mail[i] : wt->mail[i];

        hr_buf_reset(&out[i]);
        /* An empty rendering still gets its terminator: "" is a value. */
        if (tm != NULL && (hr_template_render(tm, wk_render_lookup, &rx, &out[i], NULL) != 0 ||
                           hr_buf_append(&out[i], "", 1) != 0))
            goto done;
        if (tm != NULL)
            out[i].len--;
    }
    if (wt->unsub_key != NULL && wk_task_unsub_url(wt, uid, &out[WK_TASK_UNSUBSCRIBE]) != 0)
        goto done;
    if (wt->track_base != NULL && out[WK_TASK_HTML].data != NULL)
        wk_task_track(wt, uid, &out[WK_TASK_HTML]);
    rc = 0;
done:
    if (rc != 0)
        snprintf(errstr, errlen, "rendering exceeds its size cap");
    hr_buf_free(&rx.title);
    hr_buf_free(&rx.body);
    free(rx.printed);
    return rc;
}

void wk_task_out_init(wk_task_out *out)
{
    hr_buf_init(&out->url, WK_TASK_URL_MAX);
    hr_buf_init(&out->body, WK_TASK_BODY_MAX);
    hr_buf_init(&out->headers, WK_TASK_BODY_MAX);
    hr_buf_init(&out->title, WK_TASK_TEXT_MAX);
    hr_buf_init(&out->text, WK_TASK_TEXT_MAX);
    out->nheaders = out->stripped = 0;
}

void wk_task_out_free(wk_task_out *out)
{
    hr_buf_free(&out->url);
    hr_buf_free(&out->body);
    hr_buf_free(&out->headers);
    hr_buf_free(&out->title);
    hr_buf_free(&out->text);
}

int wk_task_render(const wk_task *wt, unsigned variant, const char *uid, const redisReply *user,
                   wk_task_out *out, char *errstr, size_t errlen)
{
    const wk_content *c = wk_task_content(wt, variant);
    wk_render_ctx rx = {.t = wt, .c = c, .uid = uid, .user = user};
    int rc = -1;

    hr_buf_reset(&out->url);
    hr_buf_reset(&out->body);
    hr_buf_reset(&out->headers);
    out->nheaders = out->stripped = 0;
    rx.title_out = c->fixed ? &c->fixed_title : &out->title;
    rx.body_out = c->fixed ? &c->fixed_body : &out->text;
    if (!c->fixed) {
        hr_buf_reset(&out->title);
        hr_buf_reset(&out->text);
    }
    if ((!c->fixed && wk_render_texts(&rx, &out->title, &out->text) != 0) ||
        hr_template_render(wt->url, wk_render_lookup, &rx, &out->url, NULL) != 0 ||
        hr_template_render(wt->chbody, wk_render_lookup, &rx, &out->body, NULL) != 0 ||
        hr_buf_append(&out->url, "", 1) != 0) {
        snprintf(errstr, errlen, "rendering exceeds its size cap");
        goto done;
    }
    out->url.len--; /* keep the terminator appended above out of the length */
    for (size_t i = 0; i < wt->ch->nheaders; i++) {
        const char *key = wt->ch->headers[i].key;
        size_t start = out->headers.len, value_at;

        if (hr_buf_append(&out->headers, key, strlen(key)) != 0 ||
            hr_buf_append(&out->headers, ": ", 2) != 0 ||
            hr_template_render(wt->headers[i], wk_render_lookup, &rx, &out->headers, NULL) != 0 ||
            hr_buf_append(&out->headers, "", 1) != 0) {
            snprintf(errstr, errlen, "header %s exceeds its size cap", key);
            goto done;
        }
        /* The line's own NUL stays last: control bytes (NUL included)
         * go from the value only. */
        value_at = start + strlen(key) + 2;
        out->headers.len--;
        out->stripped += wk_task_strip_ctl(&out->headers, value_at);
        out->headers.len++;
        out->nheaders++;
    }
    rc = 0;
done:
    free(rx.printed);
    return rc;
}

int wk_task_render_item(const wk_task *wt, unsigned variant, const char *uid,
                        const redisReply *user, wk_task_out *scratch, hr_buf *out, char *errstr,
                        size_t errlen)
{
    const wk_content *c = wk_task_content(wt, variant);
    wk_render_ctx rx = {.t = wt, .c = c, .uid = uid, .user = user};
    int rc = -1;

    rx.title_out = c->fixed ? &c->fixed_title : &scratch->title;
    rx.body_out = c->fixed ? &c->fixed_body : &scratch->text;
    if (!c->fixed) {
        hr_buf_reset(&scratch->title);
        hr_buf_reset(&scratch->text);
    }
    if ((c->fixed || wk_render_texts(&rx, &scratch->title, &scratch->text) == 0) &&
        hr_template_render(wt->chbody, wk_render_lookup, &rx, out, NULL) == 0)
        rc = 0;
    else
        snprintf(errstr, errlen, "rendering exceeds its size cap");
    free(rx.printed);
    return rc;
}
