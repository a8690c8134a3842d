/* hr_config: the one YAML configuration file shared by every herald binary.
 *
 * The file is read with libyaml's event parser into an hr_config that the
 * caller owns and releases with hr_config_free().  Every key is described by
 * one table in hr_config.c (name, type, bounds, default), in the manner of
 * redis' static_configs[]: unknown keys, wrong types and out-of-range values
 * are errors reported as "file:line:column: message" (1-based, pointing at
 * the offending node), and the binaries exit 2 on them.
 *
 * Scalars may contain ${VAR} and ${VAR:-default}; a ${VAR} whose variable is
 * unset is an error.  After the file is read, environment variables override
 * connection settings (HERALD_MYSQL_HOST, HERALD_MYSQL_PORT, HERALD_MYSQL_USER,
 * HERALD_MYSQL_PASSWORD, HERALD_MYSQL_DATABASE, HERALD_REDIS_HOST,
 * HERALD_REDIS_PORT, HERALD_REDIS_PASSWORD, HERALD_REDIS_CLUSTER,
 * HERALD_REDIS_NODES as comma-separated host:port, HERALD_KAFKA_BROKERS), so
 * a Kubernetes Secret can supply them without templating the file. */
#ifndef HR_CONFIG_H
#define HR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

/* An ordered key/value pair (HTTP headers, librdkafka properties). */
typedef struct hr_kv {
    char *key;
    char *value;
} hr_kv;

typedef enum hr_log_format { HR_LOG_FORMAT_LOGFMT = 0, HR_LOG_FORMAT_JSON = 1 } hr_log_format;

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
} hr_channel_type;

typedef enum hr_apns_push { HR_APNS_ALERT = 0, HR_APNS_BACKGROUND = 1 } hr_apns_push;

/* Keys marked (webhook), (fcm), (apns) or (smtp) belong to that type: a
 * channel of another type that writes them is refused. */
typedef struct hr_channel {
    char *name;           /* map key under channels: */
    hr_channel_type type; /* type: webhook (default) | fcm | apns | smtp */
    /* webhook: http(s):// absolute URL, template allowed, required;
     * fcm / apns: http(s):// base URL without templates, NULL = the
     * provider's; smtp: smtp:// (STARTTLS) or smtps:// relay, required */
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
} hr_channel;

#define HR_CLIENT_KEYS_MAX 2
#define HR_CLIENT_SECRET_MIN 32 /* bytes: an HMAC-SHA256 key of a guessable size is no key */

/* One key of dispatcher.api.client_keys: {id, secret | secret_file}. */
typedef struct hr_client_key {
    char *id;          /* 1..32 of [A-Za-z0-9_-], unique */
    char *secret;      /* at least HR_CLIENT_SECRET_MIN bytes */
    char *secret_file; /* read into secret at load, then NULL */
} hr_client_key;

typedef struct hr_config {
    char *path;     /* the file as given, for messages */
    char *instance; /* default: $HOSTNAME, else the host name */

    struct {
        int level;            /* hr_log_level from hr_log.h; default info */
        hr_log_format format; /* default logfmt */
    } log;

    struct {
        char *host;            /* default 127.0.0.1 */
        int port;              /* 1..65535, default 3306 */
        char *user;            /* default herald */
        char *password;        /* default "" */
        char *database;        /* default herald */
        int connect_timeout_s; /* 1..600, default 5 */
        struct {
            bool enabled;    /* default false; when true the connection is TLS or fails */
            char *ca_file;   /* the CA bundle (PEM); NULL or "" = the system's trust store */
            bool verify;     /* the server's certificate and host name, default true */
            char *cert_file; /* a client certificate (PEM), with key_file; NULL or "" = none */
            char *key_file;
        } tls;
    } mysql;

    struct {
        char *host;     /* default 127.0.0.1 */
        int port;       /* default 6379 */
        char *password; /* default "" (no AUTH) */
        char *prefix;   /* key prefix, default "herald:" */
        int db;         /* 0..15, default 0; must be 0 with cluster */
        int timeout_ms; /* connect and command timeout, default 5000 */
        bool cluster;   /* a Redis Cluster (hr_cluster.h), default false */
        char **nodes;   /* cluster seed nodes "host:port"; none = host:port */
        size_t nnodes;
    } redis;

    struct {
        char *brokers;     /* bootstrap.servers, default 127.0.0.1:9092 */
        char *topic;       /* default herald.chunks */
        char *group;       /* default herald-workers */
        hr_kv *properties; /* passed to librdkafka as is, applied last */
        size_t nproperties;
    } kafka;

    struct {
        char *listen;       /* host:port of the API and console, default 127.0.0.1:8080 */
        char *probe_listen; /* host:port of /healthz, /readyz, /metrics, default 127.0.0.1:8090 */
        struct {
            char **tokens; /* bearer tokens; empty strings are dropped */
            size_t ntokens;
            /* Keys of the per-user client tokens (hr_ctoken.h), 0..2 so one
             * can be rotated out while the next is in; secret_file is read
             * into secret at load. */
            hr_client_key *client_keys;
            size_t nclient_keys;
            int pull_per_minute; /* pulls per uid per minute, cluster-wide, 1..100000, default 60 */
            long max_body_bytes; /* 1 KiB..64 MiB, default 1 MiB */
            int max_ids;         /* ids per request, 1..100000, default 10000 */
            bool insecure;       /* serve without tokens (development only, loopback only) */
            int threads;         /* libmicrohttpd pool size, 1..64, default 4 */
            int max_connections; /* open at once on listen, 16..65536, default 1024 */
            int max_connections_per_ip; /* from one client address, 1..65536, default 64 */
            int header_timeout_ms; /* to read a request's headers, 100..600000, default 10000 */
        } api;
        int scan_interval_ms;     /* 100..60000, default 1000 */
        int timer_interval_ms;    /* 10..10000, default 100 */
        int poller_interval_ms;   /* 100..60000, default 3000 */
        int poller_grace_ms;      /* a due task older than this is the poller's, default 3000 */
        int horizon_s;            /* 1..86400, default 600 */
        int lease_s;              /* 2..3600, default 30 */
        int redelivery_timeout_s; /* 1..86400, default 120 */
        int sweep_interval_ms;    /* 100..600000, default 5000 */
        int refill_batch;         /* ids per refill round trip, 100..100000, default 10000 */
        int chunks_ahead;         /* chunks ahead of the workers, 0 (none)..100000, default 12 */
    } dispatcher;

    struct {
        char *listen;             /* default 127.0.0.1:8081 */
        int ack_batch;            /* 1..4000, default 100 (bounded by ack.lua's arguments) */
        bool delivery_log;        /* default true */
        int reporter_queue;       /* events, 1000..10000000, default 100000 */
        int reporter_batch;       /* rows per INSERT, 10..10000, default 1000 */
        int max_chunks_in_flight; /* chunks processed at once, 1..64, default 4 */
        int lease_ms;             /* chunk lease, 1000..600000, default 6000 */
        int shutdown_grace_ms;    /* 1000..600000, default 25000 */
    } worker;

    hr_channel *channels; /* at least one */
    size_t nchannels;
} hr_config;

/* Reads and validates PATH.  On success *out owns a new hr_config and 0 is
 * returned; on failure -1 and ERRSTR holds "file:line:col: message". */
int hr_config_load(const char *path, hr_config **out, char *errstr, size_t errlen);

/* The same from a buffer; NAME stands for the file name in messages. */
int hr_config_load_buffer(const char *name, const char *text, size_t len, hr_config **out,
                          char *errstr, size_t errlen);

void hr_config_free(hr_config *cfg);

/* The name of type T as written in the file ("webhook", "fcm", ...). */
const char *hr_channel_type_name(hr_channel_type t);

/* Reads the whole regular file PATH, at most MAX bytes, into *OUT (NUL
 * added; the caller frees) and its length *LEN.  0, or -1 with ERRSTR
 * "path: reason".  For the configuration and the key files it names. */
int hr_config_read_file(const char *path, size_t max, char **out, size_t *len, char *errstr,
                        size_t errlen);

/* The channel called NAME, or NULL. */
const hr_channel *hr_config_channel(const hr_config *cfg, const char *name);

#endif
