/* hr_config_channel: a channel of herald.yaml.  Its types (hr_channel and
 * the enums of its keys) are the public part, which hr_config.h includes;
 * the rest is for hr_config.c: the walk of the channels mapping into an
 * array of hr_channel (the apply() and clear_item() of the "channels" key)
 * with the channel's key table, the keys only one type reads and those a
 * type requires. */
#ifndef HR_CONFIG_CHANNEL_H
#define HR_CONFIG_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>

#include "hr_kv.h"

typedef enum hr_throttle_mode {
    HR_THROTTLE_ENFORCE = 0, /* throttled recipients are not pushed */
    HR_THROTTLE_SHADOW = 1,  /* counted as would-be throttled, pushed anyway */
} hr_throttle_mode;

/* What a channel talks to: its requests, its answers and its addresses. */
typedef enum hr_channel_type {
    HR_CHANNEL_WEBHOOK = 0, /* an HTTP template of the operator's (the default) */
    HR_CHANNEL_FCM = 1,     /* Firebase Cloud Messaging HTTP v1 */
    HR_CHANNEL_APNS = 2,    /* Apple Push Notification service over HTTP/2 */
    HR_CHANNEL_SMTP = 3,    /* e-mail through an SMTP relay */
    HR_CHANNEL_WEBPUSH = 4, /* web push (RFC 8030, 8291, 8292) to browsers' subscriptions */
} hr_channel_type;

typedef enum hr_apns_push { HR_APNS_ALERT = 0, HR_APNS_BACKGROUND = 1 } hr_apns_push;

#define HR_CHANNEL_BATCH_MAX 1000          /* recipients per batched request */
#define HR_CHANNEL_BATCH_ITEMS "{{items}}" /* where batch_body takes the items */

/* Keys marked (webhook), (fcm), (apns), (smtp) or (webpush) belong to that type: a
 * channel of another type that writes them is refused. */
typedef struct hr_channel {
    char *name;           /* map key under channels: */
    hr_channel_type type; /* type: webhook (default) | fcm | apns | smtp | webpush */
    /* webhook: http(s):// absolute URL, template allowed, required;
     * fcm / apns: http(s):// base URL without templates, NULL = the
     * provider's; smtp: smtp:// (STARTTLS) or smtps:// relay, required;
     * webpush: none (each subscription names its endpoint) */
    char *url;
    char *method;   /* (webhook) GET POST PUT PATCH; default POST */
    hr_kv *headers; /* values may be templates */
    size_t nheaders;
    char *body;      /* body template; default the DESIGN.md webhook body */
    int concurrency; /* requests in flight per worker, 1..10000, default 256 */
    long rate_limit; /* pushes/s across the cluster, 0 = none, 0..10000000 */
    long
        throughput; /* pushes/s the provider was measured to take (admission control), 0 = unknown */
    int timeout_ms;                 /* per request, 1..600000, default 5000 */
    bool http2;                     /* negotiate HTTP/2 (h2c prior knowledge on http://) */
    int retry_max_attempts;         /* 1..100, default 5 */
    int retry_backoff_ms;           /* first backoff, 1..3600000, default 200 */
    int retry_max_backoff_ms;       /* cap, >= backoff_ms, default 30000 */
    int *success;                   /* HTTP codes that mean delivered, each 100..599 */
    size_t nsuccess;                /* default 200 201 202 204 */
    bool json_escape;               /* escape: json (default) | none */
    hr_throttle_mode throttle_mode; /* throttle: enforce (default) | shadow */
    char *ca_file;                  /* optional CA bundle for https providers */
    bool tls_verify;                /* default true */
    /* (webhook) Standard Webhooks secrets "whsec_<base64>", 0..2 (signing
     * is off when none; two while one is rotated out) */
    char **signing_secrets;
    size_t nsigning_secrets;
    char *signing_secrets_file; /* (webhook) more of them, one a line, read at load */
    /* (webhook) Batched requests: up to batch recipients per request, 1..1000
     * (default 1: one request per recipient).  The request's body is
     * batch_body with its one {{items}} replaced by every recipient's body
     * (the body template), comma-separated; default "[{{items}}]". */
    int batch;
    char *batch_body;
    struct {
        char *service_account_file; /* Google's service-account JSON key, required */
        char *token_uri;            /* http(s) URL; NULL = the account's token_uri */
    } fcm;
    struct {
        char *key_file;         /* the .p8 signing key (PEM, P-256), required */
        char *key_id;           /* 10 characters, required */
        char *team_id;          /* 10 characters, required */
        char *topic;            /* the app's bundle id, required */
        hr_apns_push push_type; /* push_type: alert (default) | background */
        bool high_priority;     /* priority: high (default, 10) | normal (5) */
        int connections;        /* HTTP/2 connections per worker, 1..16, default 2 */
    } apns;
    struct {
        char *username;         /* AUTH; NULL = no AUTH */
        char *password;         /* from password (use ${VAR}) or password_file; never logged */
        char *password_file;    /* read at load into password, then NULL */
        char *from;             /* addr-spec local@domain, required */
        char *from_name;        /* display name, optional */
        char *subject;          /* template, default "{{title}}" */
        char *text;             /* text/plain template, default "{{body}}"; "" = none */
        char *html;             /* text/html template; NULL = none */
        char *list_unsubscribe; /* https:// or mailto: template; NULL = no header */
        bool require_starttls;  /* smtp://: refuse a relay without STARTTLS, default true */
    } smtp;
    struct {
        char *vapid_key_file; /* the VAPID signing key (PEM, P-256), required */
        char *vapid_subject;  /* the VAPID "sub": a mailto: or https: URI, required */
    } webpush;
} hr_channel;

/* The name of type T as written in the file ("webhook", "fcm", ...). */
const char *hr_channel_type_name(hr_channel_type t);
/* The type named S.  0, or -1. */
int hr_channel_type_parse(const char *s, hr_channel_type *out);

struct cfg_ctx;
struct cfg_key;
struct cfg_node;

/* Frees one channel's (an hr_channel's) fields and name. */
void cfg_channel_clear(void *item);
/* The channels mapping NODE into the channel list K describes in BASE
 * (PATH is "channels", which the messages spell). */
int cfg_apply_channels(const struct cfg_ctx *ctx, const struct cfg_key *k, void *base,
                       const struct cfg_node *node, const char *path);

#endif
