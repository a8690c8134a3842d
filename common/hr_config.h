/* hr_config: the one YAML configuration file shared by every herald binary.
 *
 * The file is read with libyaml's event parser into an hr_config that the
 * caller owns and releases with hr_config_free().  Every key is described by
 * one table (name, type, bounds, default; hr_config.c, a channel's in
 * hr_config_channel.c), in the manner of redis' static_configs[]: unknown
 * keys, wrong types and out-of-range values are errors reported as
 * "file:line:column: message" (1-based, pointing at the offending node),
 * and the binaries exit 2 on them.
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

#include "hr_config_channel.h"
#include "hr_config_file.h"
#include "hr_config_records.h"
#include "hr_kv.h"
#include "hr_log.h"

#define HR_API_TOKEN_MIN 32 /* bytes of a dispatcher.api.tokens entry (e.g. openssl rand -hex 32) */
#define HR_TRACK_KEY_MIN 32 /* bytes of events.tracking.key, for the same reason */

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
        char *password;        /* default ""; or read from password_file */
        char *password_file;   /* read into password at load (not both) */
        char *database;        /* default herald */
        int connect_timeout_s; /* 1..600, default 5 */
        int timeout_s;         /* a network read or write, 1..3600, default 10 */
        struct {
            bool enabled;    /* default false; when true the connection is TLS or fails */
            char *ca_file;   /* the CA bundle (PEM); NULL or "" = the system's trust store */
            bool verify;     /* the server's certificate and host name, default true */
            char *cert_file; /* a client certificate (PEM), with key_file; NULL or "" = none */
            char *key_file;
        } tls;
    } mysql;

    struct {
        char *host;          /* default 127.0.0.1 */
        int port;            /* default 6379 */
        char *password;      /* default "" (no AUTH); or read from password_file */
        char *password_file; /* read into password at load (not both) */
        char *prefix;        /* key prefix, default "herald:" */
        int db;              /* 0..15, default 0; must be 0 with cluster */
        int timeout_ms;      /* connect and command timeout, default 5000 */
        bool cluster;        /* a Redis Cluster (hr_cluster.h), default false */
        char **nodes;        /* cluster seed nodes "host:port"; none = host:port */
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
            /* Bootstrap admin tokens (docs/api.md "Operators and roles"):
             * the list and the lines of tokens_file, each at least
             * HR_API_TOKEN_MIN bytes; empty strings are dropped. */
            char **tokens;
            size_t ntokens;
            char *tokens_file;
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
            /* The longest a client token may still be valid for, from now:
             * 60..31622400 s (366 d), default 2592000 (30 d).  A token whose
             * exp is further away is refused, and heraldctl issues none. */
            int client_token_max_ttl_s;
            /* Single sign-on (docs/api.md): bearer JWTs of an identity
             * provider, checked against the keys of jwks_file (hr_jwks.h).
             * Off while jwks_file is NULL; with it, issuer and audience are
             * required. */
            struct {
                char *jwks_file;
                char *issuer;
                char *audience;
                char *role_claim;    /* the claim naming the role, default herald_role */
                char *subject_claim; /* the claim naming the caller, default sub */
                int leeway_s;        /* clock skew allowed, 0..300, default 60 */
            } jwt;
        } api;
        int scan_interval_ms;        /* 100..60000, default 1000 */
        int timer_interval_ms;       /* 10..10000, default 100 */
        int poller_interval_ms;      /* 100..60000, default 3000 */
        int poller_grace_ms;         /* a due task older than this is the poller's, default 3000 */
        int horizon_s;               /* 1..86400, default 600 */
        int lease_s;                 /* 2..3600, default 30 */
        int redelivery_timeout_s;    /* 1..86400, default 120 */
        int sweep_interval_ms;       /* 100..600000, default 5000 */
        int refill_batch;            /* ids per refill round trip, 100..100000, default 10000 */
        int chunks_ahead;            /* chunks ahead of the workers, 0 (none)..100000, default 12 */
        int delivery_retention_days; /* delivery log partitions kept, 1..3650, default 30 */
        int series_lead_s; /* a series' occurrence written this long before due, default 600 */
    } dispatcher;

    struct {
        char *listen;             /* default 127.0.0.1:8081 */
        int ack_batch;            /* 1..4000, default 100 (bounded by ack.lua's arguments) */
        bool delivery_log;        /* default true */
        int reporter_queue;       /* events, 1000..10000000, default 100000 */
        int reporter_batch;       /* rows per INSERT, 10..10000, default 1000 */
        int max_chunks_in_flight; /* chunks processed at once, 1..64, default 4 */
        int lease_ms;             /* chunk lease, 1000..600000, default 6000 */
        /* How long a chunk waits out a Redis failover (STALLED) before it
         * is handed back, 1000..600000, default 30000: a Redis Cluster
         * failover takes cluster-node-timeout (the stack's 3 s, Redis's
         * default 15 s) plus an election (about 1 s). */
        int stall_max_ms;
        int shutdown_grace_ms; /* 1000..600000, default 25000 */
    } worker;

    struct {
        /* the categories tasks may have; none in the file = one, "reminder" */
        hr_category *categories;
        size_t ncategories;
        long attributes_max_bytes; /* a profile's attributes as JSON text, 64..65536, 4096 */
        struct {
            /* https://host[:port][/path] where /u/{token} reaches a dispatcher;
             * NULL = the smtp channels' List-Unsubscribe is their own
             * list_unsubscribe template, if any */
            char *public_url;
            long token_ttl_s; /* how long a link works, 3600..63072000, 15552000 (180 days) */
            /* 0..2 signing keys, the first signs: rotated like client_keys */
            hr_client_key *keys;
            size_t nkeys;
        } unsubscribe;
    } recipients;

    /* The events topic (docs/architecture.md "Events"): every outcome and
     * engagement published to Kafka, the tracking links of e-mail, and
     * herald-hooks, the daemon that delivers them to signed webhooks. */
    struct {
        bool enabled;  /* publish events, default false */
        char *topic;   /* default herald.events */
        int flush_ms;  /* the reporter's longest wait with events pending, 1..1000, default 10 */
        int queue_max; /* events not yet confirmed, per process, 1000..10000000, default 1000000 */
        int linger_ms; /* the events producer's linger.ms, 0..1000, default 20 */
        int confirm_timeout_ms; /* a request that publishes waits this long, 100..60000, default 5000 */
        struct {
            /* The dispatcher's public base URL ("https://herald.example.com"):
             * e-mail links are rewritten to <base_url>/t/c/..., the open pixel
             * is <base_url>/t/o/...; NULL or "" = no tracking. */
            char *base_url;
            char *key;      /* HMAC key of the links, at least HR_TRACK_KEY_MIN bytes */
            char *key_file; /* read into key at load, then NULL */
        } tracking;
        struct {
            char *listen;  /* herald-hooks' /healthz, /readyz, /metrics; default 127.0.0.1:8083 */
            char *group;   /* its consumer group, default herald-hooks */
            int batch_max; /* events per delivery, 1..1000, default 100 */
            int batch_ms;  /* a partial batch waits at most, 1..60000, default 1000 */
            int inflight_max; /* deliveries in flight per endpoint (uid lanes), 1..64, default 4 */
            int timeout_ms;   /* per request, 100..120000, default 10000 */
            int retry_backoff_ms;     /* first backoff, 10..3600000, default 1000 */
            int retry_max_backoff_ms; /* cap, default 60000 */
            int retry_for_ms; /* a batch is retried this long, then dead-lettered; default 600000 */
            int disable_after_ms; /* failing this long without a success: disabled; default 3600000 */
            int reload_ms;        /* endpoints re-read this often, 100..600000, default 2000 */
            int queue_max;        /* events waiting per endpoint, 100..10000000, default 100000 */
            int dead_letter_max; /* dead letters kept per endpoint, 0..100000000, default 1000000 */
            int dedupe_window; /* event ids remembered per partition, 0..10000000, default 100000 */
        } hooks;
    } events;

    hr_channel *channels; /* at least one */
    size_t nchannels;

    /* Secret files their group or others may read (mode & 044), as found
     * at load: each is a startup warning and a count of
     * herald_insecure_settings{setting="secret_file_mode"} (hr_insecure.h). */
    char **exposed_files;
    size_t nexposed_files;
} hr_config;

/* Reads and validates PATH.  On success *out owns a new hr_config and 0 is
 * returned; on failure -1 and ERRSTR holds "file:line:col: message". */
int hr_config_load(const char *path, hr_config **out, char *errstr, size_t errlen);

/* The same from a buffer; NAME stands for the file name in messages. */
int hr_config_load_buffer(const char *name, const char *text, size_t len, hr_config **out,
                          char *errstr, size_t errlen);

void hr_config_free(hr_config *cfg);

/* The category called NAME, or NULL (not declared). */
const hr_category *hr_config_category(const hr_config *cfg, const char *name);

/* Whether the API takes JWTs (dispatcher.api.jwt.jwks_file is set). */
bool hr_config_jwt_on(const hr_config *cfg);

/* The channel called NAME, or NULL. */
const hr_channel *hr_config_channel(const hr_config *cfg, const char *name);

#endif
