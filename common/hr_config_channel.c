/* hr_config_channel: a channel's part of herald.yaml (see hr_config.h):
 * its key table, the keys only one type reads and those a type requires,
 * the smtp password file, and the walk of the channels mapping into
 * hr_channel, and the choices of a channel's keys (type, escape, throttle,
 * push_type, priority).  The tables are read by hr_config_key.c's walk. */
#include "hr_config_channel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hr_config_file.h"
#include "hr_config_key.h"
#include "hr_config_value.h"
#include "hr_seams.h"
#include "hr_sign.h"
#include "hr_template.h"

/* ---- choices: a name in the file -> a value in the channel ----------- */

static int cfg_choose_escape(void *field, const char *text)
{
    int i = CFG_CHOICE(text, "json", "none");
    if (i < 0)
        return -1;
    *(bool *)field = i == 0;
    return 0;
}

static int cfg_choose_throttle(void *field, const char *text)
{
    int i = CFG_CHOICE(text, [HR_THROTTLE_ENFORCE] = "enforce", [HR_THROTTLE_SHADOW] = "shadow");
    if (i < 0)
        return -1;
    *(hr_throttle_mode *)field = (hr_throttle_mode)i;
    return 0;
}

static const char *const cfg_channel_type_names[] = {
    [HR_CHANNEL_WEBHOOK] = "webhook", [HR_CHANNEL_FCM] = "fcm",         [HR_CHANNEL_APNS] = "apns",
    [HR_CHANNEL_SMTP] = "smtp",       [HR_CHANNEL_WEBPUSH] = "webpush",
};

const char *hr_channel_type_name(hr_channel_type t)
{
    return cfg_channel_type_names[t];
}

int hr_channel_type_parse(const char *s, hr_channel_type *out)
{
    int i = cfg_choice(s, cfg_channel_type_names,
                       sizeof(cfg_channel_type_names) / sizeof(cfg_channel_type_names[0]));

    if (i < 0)
        return -1;
    *out = (hr_channel_type)i;
    return 0;
}

static int cfg_choose_channel_type(void *field, const char *text)
{
    int i = cfg_choice(text, cfg_channel_type_names,
                       sizeof(cfg_channel_type_names) / sizeof(cfg_channel_type_names[0]));
    if (i < 0)
        return -1;
    *(hr_channel_type *)field = (hr_channel_type)i;
    return 0;
}

static int cfg_choose_push_type(void *field, const char *text)
{
    int i = CFG_CHOICE(text, [HR_APNS_ALERT] = "alert", [HR_APNS_BACKGROUND] = "background");
    if (i < 0)
        return -1;
    *(hr_apns_push *)field = (hr_apns_push)i;
    return 0;
}

static int cfg_choose_priority(void *field, const char *text)
{
    int i = CFG_CHOICE(text, "high", "normal");
    if (i < 0)
        return -1;
    *(bool *)field = i == 0;
    return 0;
}

/* ---- checks ---------------------------------------------------------- */

/* A batch body: one {{items}}, and no other template (what surrounds the
 * items is the same for every request). */
static int cfg_check_batch_body(const char *text, char *errstr, size_t errlen)
{
    const char *items = strstr(text, HR_CHANNEL_BATCH_ITEMS);
    const char *first = strstr(text, "{{");

    if (items == NULL || first != items ||
        strstr(items + strlen(HR_CHANNEL_BATCH_ITEMS), "{{") != NULL) {
        snprintf(errstr, errlen, "must hold %s once and no other {{...}}", HR_CHANNEL_BATCH_ITEMS);
        return -1;
    }
    return 0;
}

/* Whether the template TEXT (compiled with ESCAPE) names the recipient:
 * {{uid}} or a {{user.*}}.  -1 when it does not compile (its own key's
 * check reports that). */
static int cfg_per_recipient(const char *text, hr_template_escape escape)
{
    hr_template *t = NULL;
    char detail[CFG_WHY];
    int rc;

    if (hr_template_compile_escape(text, strlen(text), escape, &t, detail, sizeof(detail)) < 0)
        return -1;
    rc = hr_template_uses(t, HR_TVAR_UID) || hr_template_uses_user(t);
    hr_template_free(t);
    return rc;
}

/* A batched webhook (batch > 1): its URL and header values are rendered
 * once per request, so they may not name the recipient. */
static int cfg_batch_check(const cfg_ctx *ctx, const hr_channel *ch, const cfg_node *body)
{
    const cfg_node *at = cfg_map_get(body, "batch");

    if (ch->batch <= 1)
        return 0;
    if (cfg_per_recipient(ch->url, HR_TEMPLATE_URL) == 1)
        return cfg_err(ctx, at->line, at->col,
                       "channels.%s: a batched channel's url may not name {{uid}} or {{user.*}} "
                       "(one request carries many recipients)",
                       ch->name);
    for (size_t i = 0; i < ch->nheaders; i++)
        if (cfg_per_recipient(ch->headers[i].value, HR_TEMPLATE_RAW) == 1)
            return cfg_err(ctx, at->line, at->col,
                           "channels.%s: a batched channel's header %s may not name {{uid}} or "
                           "{{user.*}} (one request carries many recipients)",
                           ch->name, ch->headers[i].key);
    return 0;
}

/* A VAPID subject (RFC 8292 section 2.1): how the push service reaches
 * the sender, a mailto: or an https: URI, on one line without spaces. */
static int cfg_check_vapid_subject(const char *text, char *errstr, size_t errlen)
{
    size_t skip = strncasecmp(text, "mailto:", 7) == 0    ? 7
                  : strncasecmp(text, "https://", 8) == 0 ? 8
                                                          : 0;

    for (const char *c = text; skip > 0 && *c != '\0'; c++)
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
            skip = 0;
    if (skip == 0 || text[skip] == '\0') {
        snprintf(errstr, errlen, "must be a mailto: or https:// URI without spaces");
        return -1;
    }
    return 0;
}

/* ---- the tables ----------------------------------------------------- */

static const char cfg_default_body[] =
    "{\"uid\":\"{{uid}}\",\"title\":\"{{title}}\",\"body\":\"{{body}}\"}";

static const cfg_key cfg_retry_keys[] = {
    K_INT("max_attempts", hr_channel, retry_max_attempts, 1, 100, 5),
    K_INT("backoff_ms", hr_channel, retry_backoff_ms, 1, 3600000, 200),
    K_INT("max_backoff_ms", hr_channel, retry_max_backoff_ms, 1, 3600000, 30000),
    K_END,
};

/* url has no default: cfg_channel_finish() requires it.  headers and
 * success get their defaults there too, because only an absent key (not an
 * empty one) means "the default". */
static const cfg_key cfg_channel_keys[] = {
    K_CHOICE("type", hr_channel, type, "webhook", cfg_choose_channel_type,
             "webhook, fcm, apns, smtp, webpush"),
    K_CHECKED("url", hr_channel, url, NULL, cfg_check_url),
    K_CHECKED("method", hr_channel, method, "POST", cfg_check_method),
    K_KVMAP("headers", hr_channel, headers, nheaders, cfg_check_header),
    /* An empty body is allowed (a GET provider, say). */
    {.name = "body",
     .type = CFG_T_STR,
     .off = offsetof(hr_channel, body),
     .def = cfg_default_body,
     .check = cfg_check_body},
    K_INT("concurrency", hr_channel, concurrency, 1, 10000, 256),
    K_LONG("rate_limit", hr_channel, rate_limit, 0, 10000000, 0),
    K_LONG("throughput", hr_channel, throughput, 0, 10000000, 0),
    K_INT("timeout_ms", hr_channel, timeout_ms, 1, 600000, 5000),
    K_BOOL("http2", hr_channel, http2, false),
    K_SECTION("retry", cfg_retry_keys),
    K_LIST("success", CFG_T_CODES, hr_channel, success, nsuccess),
    K_CHOICE("escape", hr_channel, json_escape, "json", cfg_choose_escape, "json, none"),
    K_CHOICE("throttle", hr_channel, throttle_mode, "enforce", cfg_choose_throttle,
             "enforce, shadow"),
    K_STR("ca_file", hr_channel, ca_file, 0, NULL),
    K_BOOL("tls_verify", hr_channel, tls_verify, true),
    {.name = "signing_secrets",
     .type = CFG_T_STRLIST,
     .off = offsetof(hr_channel, signing_secrets),
     .count_off = offsetof(hr_channel, nsigning_secrets),
     .check = cfg_check_secret},
    K_CHECKED("signing_secrets_file", hr_channel, signing_secrets_file, NULL, NULL),
    K_INT("batch", hr_channel, batch, 1, HR_CHANNEL_BATCH_MAX, 1),
    K_CHECKED("batch_body", hr_channel, batch_body, "[{{items}}]", cfg_check_batch_body),
    K_CHECKED("service_account_file", hr_channel, fcm.service_account_file, NULL, NULL),
    K_CHECKED("token_uri", hr_channel, fcm.token_uri, NULL, cfg_check_url),
    K_CHECKED("key_file", hr_channel, apns.key_file, NULL, NULL),
    K_CHECKED("key_id", hr_channel, apns.key_id, NULL, cfg_check_apple_id),
    K_CHECKED("team_id", hr_channel, apns.team_id, NULL, cfg_check_apple_id),
    K_CHECKED("topic", hr_channel, apns.topic, NULL, NULL),
    K_CHOICE("push_type", hr_channel, apns.push_type, "alert", cfg_choose_push_type,
             "alert, background"),
    K_CHOICE("priority", hr_channel, apns.high_priority, "high", cfg_choose_priority,
             "high, normal"),
    K_INT("connections", hr_channel, apns.connections, 1, 16, 2),
    K_CHECKED("username", hr_channel, smtp.username, NULL, NULL),
    K_STR("password", hr_channel, smtp.password, 0, NULL),
    K_CHECKED("password_file", hr_channel, smtp.password_file, NULL, NULL),
    K_CHECKED("from", hr_channel, smtp.from, NULL, cfg_check_mailbox),
    K_CHECKED("from_name", hr_channel, smtp.from_name, NULL, NULL),
    K_CHECKED("subject", hr_channel, smtp.subject, "{{title}}", cfg_check_mail_template),
    {.name = "text",
     .type = CFG_T_STR,
     .off = offsetof(hr_channel, smtp.text),
     .def = "{{body}}",
     .check = cfg_check_mail_template},
    K_CHECKED("html", hr_channel, smtp.html, NULL, cfg_check_mail_template),
    K_CHECKED("list_unsubscribe", hr_channel, smtp.list_unsubscribe, NULL, cfg_check_unsubscribe),
    K_BOOL("require_starttls", hr_channel, smtp.require_starttls, true),
    K_CHECKED("vapid_key_file", hr_channel, webpush.vapid_key_file, NULL, NULL),
    K_CHECKED("vapid_subject", hr_channel, webpush.vapid_subject, NULL, cfg_check_vapid_subject),
    K_END,
};

/* The keys only one type reads.  Written on a channel of another type they
 * are refused: a mistyped `type:` would otherwise drop them silently. */
static const struct {
    const char *key;
    hr_channel_type type;
} cfg_type_keys[] = {
    {"method", HR_CHANNEL_WEBHOOK},
    {"headers", HR_CHANNEL_WEBHOOK},
    {"body", HR_CHANNEL_WEBHOOK},
    {"escape", HR_CHANNEL_WEBHOOK},
    {"success", HR_CHANNEL_WEBHOOK},
    {"http2", HR_CHANNEL_WEBHOOK},
    {"signing_secrets", HR_CHANNEL_WEBHOOK},
    {"signing_secrets_file", HR_CHANNEL_WEBHOOK},
    {"batch", HR_CHANNEL_WEBHOOK},
    {"batch_body", HR_CHANNEL_WEBHOOK},
    {"service_account_file", HR_CHANNEL_FCM},
    {"token_uri", HR_CHANNEL_FCM},
    {"key_file", HR_CHANNEL_APNS},
    {"key_id", HR_CHANNEL_APNS},
    {"team_id", HR_CHANNEL_APNS},
    {"topic", HR_CHANNEL_APNS},
    {"push_type", HR_CHANNEL_APNS},
    {"priority", HR_CHANNEL_APNS},
    {"connections", HR_CHANNEL_APNS},
    {"username", HR_CHANNEL_SMTP},
    {"password", HR_CHANNEL_SMTP},
    {"password_file", HR_CHANNEL_SMTP},
    {"from", HR_CHANNEL_SMTP},
    {"from_name", HR_CHANNEL_SMTP},
    {"subject", HR_CHANNEL_SMTP},
    {"text", HR_CHANNEL_SMTP},
    {"html", HR_CHANNEL_SMTP},
    {"list_unsubscribe", HR_CHANNEL_SMTP},
    {"require_starttls", HR_CHANNEL_SMTP},
    {"vapid_key_file", HR_CHANNEL_WEBPUSH},
    {"vapid_subject", HR_CHANNEL_WEBPUSH},
};

/* Per type, the keys it cannot do without (url is checked on its own). */
static const struct {
    hr_channel_type type;
    const char *key;
} cfg_type_required[] = {
    {HR_CHANNEL_FCM, "service_account_file"},
    {HR_CHANNEL_APNS, "key_file"},
    {HR_CHANNEL_APNS, "key_id"},
    {HR_CHANNEL_APNS, "team_id"},
    {HR_CHANNEL_APNS, "topic"},
    {HR_CHANNEL_SMTP, "from"},
    {HR_CHANNEL_WEBPUSH, "vapid_key_file"},
    {HR_CHANNEL_WEBPUSH, "vapid_subject"},
};

void cfg_channel_clear(void *item)
{
    hr_channel *ch = item;

    cfg_clear(cfg_channel_keys, ch);
    free(ch->name);
    ch->name = NULL;
}

/* password_file -> password, without its final line break. */
static int cfg_smtp_password(const cfg_ctx *ctx, hr_channel *ch, const cfg_node *body)
{
    const cfg_node *at = cfg_map_get(body, "password_file");
    char path[CFG_WHY];

    if (ch->smtp.password_file == NULL)
        return 0;
    if (ch->smtp.password != NULL)
        return cfg_err(ctx, at->line, at->col,
                       "channels.%s: password and password_file are both set (keep one)", ch->name);
    snprintf(path, sizeof(path), "channels.%s.password_file", ch->name);
    if (cfg_read_secret_file(ctx, at, path, ch->smtp.password_file, &ch->smtp.password) < 0)
        return -1;
    free(ch->smtp.password_file);
    ch->smtp.password_file = NULL;
    return 0;
}

/* True when URL is http:// for a channel of TYPE whose requests carry
 * credentials (fcm: the signed assertion and the access token; apns: the
 * provider token), outside a build with test seams (hr_seams.h), where the
 * providers' stand-ins may listen in clear text. */
static bool cfg_provider_http(hr_channel_type type, const char *url)
{
    return !HR_SEAMS_ON && (type == HR_CHANNEL_FCM || type == HR_CHANNEL_APNS) &&
           strncasecmp(url, "http://", 7) == 0;
}

/* The checks that depend on the channel's type: no key of another type,
 * the type's required keys, the URL's scheme, the type's own rules. */
static int cfg_channel_type_check(const cfg_ctx *ctx, hr_channel *ch, const cfg_node *name,
                                  const cfg_node *body)
{
    const char *type = hr_channel_type_name(ch->type);
    const cfg_node *url = cfg_map_get(body, "url");

    for (size_t i = 0; i + 1 < body->items.n; i += 2) {
        const cfg_node *key = body->items.v[i];
        for (size_t j = 0; j < sizeof(cfg_type_keys) / sizeof(cfg_type_keys[0]); j++)
            if (cfg_type_keys[j].type != ch->type && strcmp(cfg_type_keys[j].key, key->value) == 0)
                return cfg_err(ctx, key->line, key->col,
                               "channels.%s.%s: only for type %s channels (this one is %s)",
                               ch->name, key->value, hr_channel_type_name(cfg_type_keys[j].type),
                               type);
    }
    for (size_t j = 0; j < sizeof(cfg_type_required) / sizeof(cfg_type_required[0]); j++)
        if (cfg_type_required[j].type == ch->type &&
            cfg_map_get(body, cfg_type_required[j].key) == NULL)
            return cfg_err(ctx, name->line, name->col,
                           "channels.%s: missing required key \"%s\" (type %s)", ch->name,
                           cfg_type_required[j].key, type);
    if (ch->url == NULL && (ch->type == HR_CHANNEL_WEBHOOK || ch->type == HR_CHANNEL_SMTP))
        return cfg_err(ctx, name->line, name->col, "channels.%s: missing required key \"url\"",
                       ch->name);
    if (ch->url != NULL && ch->type == HR_CHANNEL_WEBPUSH)
        return cfg_err(ctx, url->line, url->col,
                       "channels.%s.url: type webpush takes no url (each subscription names "
                       "its endpoint)",
                       ch->name);
    if (ch->url != NULL) {
        bool smtp = strncasecmp(ch->url, "smtp", 4) == 0;
        if (smtp != (ch->type == HR_CHANNEL_SMTP))
            return cfg_err(ctx, url->line, url->col, "channels.%s.url: type %s takes %s", ch->name,
                           type, smtp ? "http:// or https://" : "smtp:// or smtps://");
        /* Only a webhook's URL is rendered per recipient. */
        if (ch->type != HR_CHANNEL_WEBHOOK && strstr(ch->url, "{{") != NULL)
            return cfg_err(ctx, url->line, url->col, "channels.%s.url: not a template for type %s",
                           ch->name, type);
        if (cfg_provider_http(ch->type, ch->url))
            return cfg_err(ctx, url->line, url->col,
                           "channels.%s.url: http:// would send the provider's credentials "
                           "in clear text; use https:// (http:// only in a build with "
                           "-Dtest_seams=true)",
                           ch->name);
    }
    if (ch->fcm.token_uri != NULL) {
        const cfg_node *at = cfg_map_get(body, "token_uri");
        if (strstr(ch->fcm.token_uri, "{{") != NULL)
            return cfg_err(ctx, at->line, at->col, "channels.%s.token_uri: not a template",
                           ch->name);
        if (cfg_provider_http(ch->type, ch->fcm.token_uri))
            return cfg_err(ctx, at->line, at->col,
                           "channels.%s.token_uri: http:// would send the signed assertion in "
                           "clear text; use https:// (http:// only in a build with "
                           "-Dtest_seams=true)",
                           ch->name);
    }
    if (ch->signing_secrets_file != NULL) {
        const cfg_node *at = cfg_map_get(body, "signing_secrets_file");
        char path[CFG_WHY];

        snprintf(path, sizeof(path), "channels.%s.signing_secrets_file", ch->name);
        for (const cfg_key *k = cfg_channel_keys; k->name != NULL; k++)
            if (strcmp(k->name, "signing_secrets") == 0 &&
                cfg_apply_list_file(ctx, k, ch, at, path, ch->signing_secrets_file) < 0)
                return -1;
    }
    if (ch->nsigning_secrets > HR_SIGN_MAX_SECRETS) {
        const cfg_node *at = cfg_map_get(body, "signing_secrets");
        return cfg_err(ctx, at->line, at->col,
                       "channels.%s.signing_secrets: %zu secrets; at most %d (the current one "
                       "and the one being rotated out)",
                       ch->name, ch->nsigning_secrets, HR_SIGN_MAX_SECRETS);
    }
    if (ch->type != HR_CHANNEL_SMTP)
        return 0;
    /* "text: ''" says "no text part". */
    if (ch->smtp.text != NULL && ch->smtp.text[0] == '\0') {
        free(ch->smtp.text);
        ch->smtp.text = NULL;
    }
    if (ch->smtp.text == NULL && ch->smtp.html == NULL) {
        const cfg_node *at = cfg_map_get(body, "text");
        return cfg_err(ctx, at->line, at->col, "channels.%s: a mail needs a text or an html part",
                       ch->name);
    }
    return cfg_smtp_password(ctx, ch, body);
}

/* Defaults that depend on whether a key was written, and checks across keys. */
static int cfg_channel_finish(const cfg_ctx *ctx, hr_channel *ch, const cfg_node *name,
                              const cfg_node *body)
{
    static const int success[] = {200, 201, 202, 204};
    const size_t nsuccess = sizeof(success) / sizeof(success[0]);

    if (cfg_channel_type_check(ctx, ch, name, body) < 0)
        return -1;
    if (ch->retry_max_backoff_ms < ch->retry_backoff_ms) {
        const cfg_node *retry = cfg_map_get(body, "retry");
        const cfg_node *at = cfg_map_get(retry, "max_backoff_ms");
        if (at == NULL)
            at = cfg_map_get(retry, "backoff_ms");
        if (at == NULL)
            at = name;
        return cfg_err(ctx, at->line, at->col,
                       "channels.%s.retry: max_backoff_ms (%d) is less than backoff_ms (%d)",
                       ch->name, ch->retry_max_backoff_ms, ch->retry_backoff_ms);
    }
    /* "${CA_FILE:-}" must be able to say "no CA file". */
    if (ch->ca_file != NULL && ch->ca_file[0] == '\0') {
        free(ch->ca_file);
        ch->ca_file = NULL;
    }
    if (ch->type != HR_CHANNEL_WEBHOOK)
        return 0;
    if (cfg_batch_check(ctx, ch, body) < 0)
        return -1;
    if (cfg_map_get(body, "headers") == NULL) {
        ch->headers = calloc(1, sizeof(hr_kv));
        if (ch->headers == NULL)
            goto oom;
        ch->nheaders = 1;
        ch->headers[0].key = strdup("Content-Type");
        ch->headers[0].value = strdup("application/json");
        if (ch->headers[0].key == NULL || ch->headers[0].value == NULL)
            goto oom;
    }
    if (ch->nsuccess == 0) {
        ch->success = malloc(sizeof(success));
        if (ch->success == NULL)
            goto oom;
        memcpy(ch->success, success, sizeof(success));
        ch->nsuccess = nsuccess;
    }
    return 0;
oom:
    return cfg_err(ctx, name->line, name->col, "out of memory");
}

int cfg_apply_channels(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                       const char *path)
{
    hr_channel **chs = CFG_FIELD(base, k);
    size_t *count = CFG_COUNT(base, k);
    char detail[CFG_WHY];

    (void)path;

    if (cfg_node_is_null(node) || (node->type == CFG_MAP && node->items.n == 0))
        return cfg_err(ctx, node->line, node->col,
                       "channels: no channel configured (at least one is required)");
    if (node->type != CFG_MAP)
        return cfg_err(ctx, node->line, node->col, "channels: expected a mapping, got %s",
                       cfg_node_kind(node));
    *chs = calloc(node->items.n / 2, sizeof(hr_channel));
    if (*chs == NULL)
        return cfg_err(ctx, node->line, node->col, "out of memory");
    for (size_t i = 0; i + 1 < node->items.n; i += 2) {
        const cfg_node *name = node->items.v[i], *body = node->items.v[i + 1];
        hr_channel *ch = &(*chs)[*count];
        char where[CFG_WHY];
        size_t n = strlen(name->value);
        if (n == 0 || n > 64 ||
            strspn(name->value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789_.-") != n)
            return cfg_err(ctx, name->line, name->col,
                           "channels: bad channel name \"%.64s\" (1 to 64 of A-Z a-z 0-9 _ . -)",
                           name->value);
        ch->name = strdup(name->value);
        (*count)++;
        if (ch->name == NULL)
            return cfg_err(ctx, name->line, name->col, "out of memory");
        if (body->type != CFG_MAP)
            return cfg_err(ctx, body->line, body->col, "channels.%s: expected a mapping, got %s",
                           ch->name, cfg_node_is_null(body) ? "nothing" : cfg_node_kind(body));
        if (cfg_set_defaults(cfg_channel_keys, ch, detail, sizeof(detail)) < 0)
            return cfg_err(ctx, name->line, name->col, "channels.%s: %s", ch->name, detail);
        snprintf(where, sizeof(where), "channels.%s", ch->name);
        if (cfg_apply_map(ctx, cfg_channel_keys, ch, body, where) < 0)
            return -1;
        if (cfg_channel_finish(ctx, ch, name, body) < 0)
            return -1;
    }
    return 0;
}
