/* hr_config: herald.yaml -> struct hr_config.  See hr_config.h for the contract.
 *
 * Two passes.  First libyaml's event parser builds a small tree of cfg_node:
 * scalars, mappings and sequences, each with the 1-based line and column of
 * its first character.  Syntax errors, duplicate keys (anywhere, so duplicate
 * channel names too), aliases (refused: nothing needs them and they allow
 * expansion bombs) and excessive nesting are found here, in document order.
 *
 * Then the tree is walked against tables of keys, one per section, in the
 * manner of redis' static_configs[]: a cfg_key names a key, its type, its
 * bounds, its default written as it would appear in the file, and where the
 * value lives as an offset from a base object.  Nested sections (log, mysql,
 * dispatcher.api, a channel's retry) are namespaces over the same base, so
 * offsetof(hr_config, mysql.port) and offsetof(hr_channel, retry_max_attempts)
 * both work.  The same tables give defaults, env overrides, the "expected:"
 * list of unknown-key messages, and hr_config_free().
 *
 * Rules beyond the header: a plain null (`key:`, `~`) is an empty section or
 * list, or "" for a string; an empty instance means the default; a channel's
 * headers default only when the key is absent (`headers: {}` means none); an
 * empty ca_file is NULL; listen ports may be 0 (any free port).  A channel's
 * type decides which of its keys it may have (cfg_type_keys), which it must
 * have, and its URL's scheme (cfg_channel_type_check); an smtp
 * password_file is read at load into the password.
 *
 * The channels' tables and checks are hr_config_channel.c's; the tree is
 * hr_config_yaml.c's, the walk of the tables hr_config_key.c's, the checks
 * of single values hr_config_value.c's, reading files hr_config_file.c's.
 *
 * Ownership: the tree belongs to the load call and is freed before it
 * returns; every string and array in hr_config belongs to the hr_config. */
#include "hr_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hr_config_key.h"
#include "hr_config_value.h"
#include "hr_jwks.h"
#include "hr_parse.h"

#define CFG_MAX_FILE (16u * 1024 * 1024) /* a config is a few KiB */

/* ---- choices of the log section ------------------------------------- */

static int cfg_choose_level(void *field, const char *text)
{
    int level = hr_log_level_parse(text);
    if (level < 0)
        return -1;
    *(int *)field = level;
    return 0;
}

static int cfg_choose_format(void *field, const char *text)
{
    int i = CFG_CHOICE(text, [HR_LOG_FORMAT_LOGFMT] = "logfmt", [HR_LOG_FORMAT_JSON] = "json");
    if (i < 0)
        return -1;
    *(hr_log_format *)field = (hr_log_format)i;
    return 0;
}

/* ---- the tables ----------------------------------------------------- */

static const cfg_key cfg_log_keys[] = {
    K_CHOICE("level", hr_config, log.level, "info", cfg_choose_level, "debug, info, warn, error"),
    K_CHOICE("format", hr_config, log.format, "logfmt", cfg_choose_format, "logfmt, json"),
    K_END,
};

static const cfg_key cfg_mysql_tls_keys[] = {
    K_BOOL("enabled", hr_config, mysql.tls.enabled, false),
    K_STR("ca_file", hr_config, mysql.tls.ca_file, 0, NULL),
    K_BOOL("verify", hr_config, mysql.tls.verify, true),
    K_STR("cert_file", hr_config, mysql.tls.cert_file, 0, NULL),
    K_STR("key_file", hr_config, mysql.tls.key_file, 0, NULL),
    K_END,
};

static const cfg_key cfg_mysql_keys[] = {
    K_STR("host", hr_config, mysql.host, 1, "127.0.0.1"),
    K_INT("port", hr_config, mysql.port, 1, 65535, 3306),
    K_STR("user", hr_config, mysql.user, 1, "herald"),
    K_STR("password", hr_config, mysql.password, 0, ""),
    K_STR("password_file", hr_config, mysql.password_file, 1, NULL),
    K_STR("database", hr_config, mysql.database, 1, "herald"),
    K_INT("connect_timeout_s", hr_config, mysql.connect_timeout_s, 1, 600, 5),
    K_INT("timeout_s", hr_config, mysql.timeout_s, 1, 3600, 10),
    K_SECTION("tls", cfg_mysql_tls_keys),
    K_END,
};

static const cfg_key cfg_redis_keys[] = {
    K_STR("host", hr_config, redis.host, 1, "127.0.0.1"),
    K_INT("port", hr_config, redis.port, 1, 65535, 6379),
    K_STR("password", hr_config, redis.password, 0, ""),
    K_STR("password_file", hr_config, redis.password_file, 1, NULL),
    K_CHECKED("prefix", hr_config, redis.prefix, "herald:", cfg_check_prefix),
    K_INT("db", hr_config, redis.db, 0, 15, 0),
    K_INT("timeout_ms", hr_config, redis.timeout_ms, 1, 600000, 5000),
    K_BOOL("cluster", hr_config, redis.cluster, false),
    {.name = "nodes",
     .type = CFG_T_STRLIST,
     .off = offsetof(hr_config, redis.nodes),
     .count_off = offsetof(hr_config, redis.nnodes),
     .check = cfg_check_server},
    K_END,
};

static const cfg_key cfg_kafka_keys[] = {
    K_STR("brokers", hr_config, kafka.brokers, 1, "127.0.0.1:9092"),
    K_STR("topic", hr_config, kafka.topic, 1, "herald.chunks"),
    K_STR("group", hr_config, kafka.group, 1, "herald-workers"),
    K_KVMAP("properties", hr_config, kafka.properties, kafka.nproperties, NULL),
    K_END,
};

static const cfg_key cfg_jwt_keys[] = {
    K_STR("jwks_file", hr_config, dispatcher.api.jwt.jwks_file, 0, NULL),
    K_STR("issuer", hr_config, dispatcher.api.jwt.issuer, 1, NULL),
    K_STR("audience", hr_config, dispatcher.api.jwt.audience, 1, NULL),
    K_STR("role_claim", hr_config, dispatcher.api.jwt.role_claim, 1, "herald_role"),
    K_STR("subject_claim", hr_config, dispatcher.api.jwt.subject_claim, 1, "sub"),
    K_INT("leeway_s", hr_config, dispatcher.api.jwt.leeway_s, 0, HR_JWKS_LEEWAY_MAX, 60),
    K_END,
};

static const cfg_key cfg_api_keys[] = {
    K_LIST("tokens", CFG_T_STRLIST, hr_config, dispatcher.api.tokens, dispatcher.api.ntokens),
    K_STR("tokens_file", hr_config, dispatcher.api.tokens_file, 1, NULL),
    K_RECORDS("client_keys", hr_config, dispatcher.api.client_keys, dispatcher.api.nclient_keys,
              hr_client_key, cfg_apply_client_keys, cfg_client_key_clear),
    K_INT("pull_per_minute", hr_config, dispatcher.api.pull_per_minute, 1, 100000, 60),
    K_LONG("max_body_bytes", hr_config, dispatcher.api.max_body_bytes, 1024, 67108864, 1048576),
    K_INT("max_ids", hr_config, dispatcher.api.max_ids, 1, 100000, 10000),
    K_BOOL("insecure", hr_config, dispatcher.api.insecure, false),
    K_INT("threads", hr_config, dispatcher.api.threads, 1, 64, 4),
    K_INT("max_connections", hr_config, dispatcher.api.max_connections, 16, 65536, 1024),
    K_INT("max_connections_per_ip", hr_config, dispatcher.api.max_connections_per_ip, 1, 65536, 64),
    K_INT("header_timeout_ms", hr_config, dispatcher.api.header_timeout_ms, 100, 600000, 10000),
    K_INT("client_token_max_ttl_s", hr_config, dispatcher.api.client_token_max_ttl_s, 60, 31622400,
          2592000),
    K_SECTION("jwt", cfg_jwt_keys),
    K_END,
};

static const cfg_key cfg_dispatcher_keys[] = {
    K_CHECKED("listen", hr_config, dispatcher.listen, "127.0.0.1:8080", cfg_check_listen),
    K_CHECKED("probe_listen", hr_config, dispatcher.probe_listen, "127.0.0.1:8090",
              cfg_check_listen),
    K_SECTION("api", cfg_api_keys),
    K_INT("scan_interval_ms", hr_config, dispatcher.scan_interval_ms, 100, 60000, 1000),
    K_INT("timer_interval_ms", hr_config, dispatcher.timer_interval_ms, 10, 10000, 100),
    K_INT("poller_interval_ms", hr_config, dispatcher.poller_interval_ms, 100, 60000, 3000),
    K_INT("poller_grace_ms", hr_config, dispatcher.poller_grace_ms, 0, 600000, 3000),
    K_INT("horizon_s", hr_config, dispatcher.horizon_s, 1, 86400, 600),
    K_INT("lease_s", hr_config, dispatcher.lease_s, 2, 3600, 30),
    K_INT("redelivery_timeout_s", hr_config, dispatcher.redelivery_timeout_s, 1, 86400, 120),
    K_INT("sweep_interval_ms", hr_config, dispatcher.sweep_interval_ms, 100, 600000, 5000),
    K_INT("refill_batch", hr_config, dispatcher.refill_batch, 100, 100000, 10000),
    K_INT("chunks_ahead", hr_config, dispatcher.chunks_ahead, 0, 100000, 12),
    K_INT("delivery_retention_days", hr_config, dispatcher.delivery_retention_days, 1, 3650, 30),
    K_INT("series_lead_s", hr_config, dispatcher.series_lead_s, 0, 2678400, 600),
    K_END,
};

static const cfg_key cfg_worker_keys[] = {
    K_CHECKED("listen", hr_config, worker.listen, "127.0.0.1:8081", cfg_check_listen),
    K_INT("ack_batch", hr_config, worker.ack_batch, 1, 4000, 100),
    K_BOOL("delivery_log", hr_config, worker.delivery_log, true),
    K_INT("reporter_queue", hr_config, worker.reporter_queue, 1000, 10000000, 100000),
    K_INT("reporter_batch", hr_config, worker.reporter_batch, 10, 10000, 1000),
    K_INT("max_chunks_in_flight", hr_config, worker.max_chunks_in_flight, 1, 64, 4),
    K_INT("lease_ms", hr_config, worker.lease_ms, 1000, 600000, 6000),
    K_INT("stall_max_ms", hr_config, worker.stall_max_ms, 1000, 600000, 30000),
    K_INT("shutdown_grace_ms", hr_config, worker.shutdown_grace_ms, 1000, 600000, 25000),
    K_END,
};

static const cfg_key cfg_unsubscribe_keys[] = {
    K_CHECKED("public_url", hr_config, recipients.unsubscribe.public_url, NULL,
              cfg_check_public_url),
    K_LONG("token_ttl_s", hr_config, recipients.unsubscribe.token_ttl_s, 3600, 63072000, 15552000),
    K_RECORDS("keys", hr_config, recipients.unsubscribe.keys, recipients.unsubscribe.nkeys,
              hr_client_key, cfg_apply_client_keys, cfg_client_key_clear),
    K_END,
};

static const cfg_key cfg_recipients_keys[] = {
    K_RECORDS("categories", hr_config, recipients.categories, recipients.ncategories, hr_category,
              cfg_apply_categories, cfg_category_clear),
    K_LONG("attributes_max_bytes", hr_config, recipients.attributes_max_bytes, 64, 65536, 4096),
    K_SECTION("unsubscribe", cfg_unsubscribe_keys),
    K_END,
};

static const cfg_key cfg_tracking_keys[] = {
    K_STR("base_url", hr_config, events.tracking.base_url, 0, NULL),
    K_STR("key", hr_config, events.tracking.key, 1, NULL),
    K_STR("key_file", hr_config, events.tracking.key_file, 1, NULL),
    K_END,
};

static const cfg_key cfg_hooks_keys[] = {
    K_CHECKED("listen", hr_config, events.hooks.listen, "127.0.0.1:8083", cfg_check_listen),
    K_STR("group", hr_config, events.hooks.group, 1, "herald-hooks"),
    K_INT("batch_max", hr_config, events.hooks.batch_max, 1, 1000, 100),
    K_INT("batch_ms", hr_config, events.hooks.batch_ms, 1, 60000, 1000),
    K_INT("inflight_max", hr_config, events.hooks.inflight_max, 1, 64, 4),
    K_INT("timeout_ms", hr_config, events.hooks.timeout_ms, 100, 120000, 10000),
    K_INT("retry_backoff_ms", hr_config, events.hooks.retry_backoff_ms, 10, 3600000, 1000),
    K_INT("retry_max_backoff_ms", hr_config, events.hooks.retry_max_backoff_ms, 10, 3600000, 60000),
    K_INT("retry_for_ms", hr_config, events.hooks.retry_for_ms, 0, 86400000, 600000),
    K_INT("disable_after_ms", hr_config, events.hooks.disable_after_ms, 1000, 604800000, 3600000),
    K_INT("reload_ms", hr_config, events.hooks.reload_ms, 100, 600000, 2000),
    K_INT("queue_max", hr_config, events.hooks.queue_max, 100, 10000000, 100000),
    K_INT("dead_letter_max", hr_config, events.hooks.dead_letter_max, 0, 100000000, 1000000),
    K_INT("dedupe_window", hr_config, events.hooks.dedupe_window, 0, 10000000, 100000),
    K_END,
};

static const cfg_key cfg_events_keys[] = {
    K_BOOL("enabled", hr_config, events.enabled, false),
    K_STR("topic", hr_config, events.topic, 1, "herald.events"),
    K_INT("flush_ms", hr_config, events.flush_ms, 1, 1000, 10),
    K_INT("queue_max", hr_config, events.queue_max, 1000, 10000000, 1000000),
    K_INT("linger_ms", hr_config, events.linger_ms, 0, 1000, 20),
    K_INT("confirm_timeout_ms", hr_config, events.confirm_timeout_ms, 100, 60000, 5000),
    K_SECTION("tracking", cfg_tracking_keys),
    K_SECTION("hooks", cfg_hooks_keys),
    K_END,
};

static const cfg_key cfg_top_keys[] = {
    {.name = "instance",
     .type = CFG_T_STR,
     .off = offsetof(hr_config, instance),
     .check = cfg_check_instance},
    K_SECTION("log", cfg_log_keys),
    K_SECTION("mysql", cfg_mysql_keys),
    K_SECTION("redis", cfg_redis_keys),
    K_SECTION("kafka", cfg_kafka_keys),
    K_SECTION("dispatcher", cfg_dispatcher_keys),
    K_SECTION("worker", cfg_worker_keys),
    K_SECTION("recipients", cfg_recipients_keys),
    K_SECTION("events", cfg_events_keys),
    K_RECORDS("channels", hr_config, channels, nchannels, hr_channel, cfg_apply_channels,
              cfg_channel_clear),
    K_END,
};

/* Connection settings a Kubernetes Secret may supply; they win over the file. */
static const struct {
    const char *env;
    const cfg_key *section;
    const char *key;
} cfg_env_overrides[] = {
    {"HERALD_MYSQL_HOST", cfg_mysql_keys, "host"},
    {"HERALD_MYSQL_PORT", cfg_mysql_keys, "port"},
    {"HERALD_MYSQL_USER", cfg_mysql_keys, "user"},
    {"HERALD_MYSQL_PASSWORD", cfg_mysql_keys, "password"},
    {"HERALD_MYSQL_DATABASE", cfg_mysql_keys, "database"},
    {"HERALD_REDIS_HOST", cfg_redis_keys, "host"},
    {"HERALD_REDIS_PORT", cfg_redis_keys, "port"},
    {"HERALD_REDIS_PASSWORD", cfg_redis_keys, "password"},
    {"HERALD_REDIS_CLUSTER", cfg_redis_keys, "cluster"},
    {"HERALD_REDIS_NODES", cfg_redis_keys, "nodes"},
    {"HERALD_KAFKA_BROKERS", cfg_kafka_keys, "brokers"},
};

void hr_config_free(hr_config *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < cfg->nexposed_files; i++)
        free(cfg->exposed_files[i]);
    free(cfg->exposed_files);
    cfg_clear(cfg_top_keys, cfg);
    free(cfg->path);
    free(cfg);
}

/* instance: the file's value, else $HOSTNAME, else gethostname(). */
static int cfg_set_instance(hr_config *cfg)
{
    char host[256];
    const char *name = getenv("HOSTNAME");

    if (cfg->instance != NULL && cfg->instance[0] != '\0')
        return 0;
    if (name == NULL || name[0] == '\0') {
        if (gethostname(host, sizeof(host)) < 0)
            snprintf(host, sizeof(host), "herald");
        host[sizeof(host) - 1] = '\0';
        name = host;
    }
    free(cfg->instance);
    cfg->instance = strdup(name);
    return cfg->instance != NULL ? 0 : -1;
}

static int cfg_apply_env(hr_config *cfg, char *errstr, size_t errlen)
{
    char detail[CFG_WHY];
    for (size_t i = 0; i < sizeof(cfg_env_overrides) / sizeof(cfg_env_overrides[0]); i++) {
        const char *val = getenv(cfg_env_overrides[i].env);
        const cfg_key *k = cfg_env_overrides[i].section;
        if (val == NULL)
            continue;
        while (strcmp(k->name, cfg_env_overrides[i].key) != 0)
            k++;
        if (cfg_set_scalar(k, cfg, val, detail, sizeof(detail)) < 0) {
            snprintf(errstr, errlen, "%s: %s", cfg_env_overrides[i].env, detail);
            return -1;
        }
    }
    return 0;
}

/* What a Redis Cluster rules out, checked once the file and the env
 * overrides are applied: a cluster has only database 0, and a brace in the
 * prefix would put its hash tag before the {t<ID>} of every per-task key
 * (one slot for all of herald, or tags of the wrong span).  Neither key has
 * an env override, so the value at fault is in the file. */
static int cfg_check_redis(const cfg_ctx *ctx, const cfg_node *root, const hr_config *cfg)
{
    const cfg_node *redis = cfg_map_get(root, "redis"), *at;

    if (!cfg->redis.cluster)
        return 0;
    if (cfg->redis.db != 0 && (at = cfg_map_get(redis, "db")) != NULL)
        return cfg_err(ctx, at->line, at->col,
                       "redis.db: %d with redis.cluster true; a Redis Cluster has only "
                       "database 0",
                       cfg->redis.db);
    if (strpbrk(cfg->redis.prefix, "{}") != NULL && (at = cfg_map_get(redis, "prefix")) != NULL)
        return cfg_err(ctx, at->line, at->col,
                       "redis.prefix: \"%.64s\" has a brace; with redis.cluster true the "
                       "hash tags are herald's own ({t<ID>}, {c:<channel>})",
                       cfg->redis.prefix);
    return 0;
}

/* Insecure mode (an API without tokens) only on a loopback address: on any
 * other, anyone who reaches the port, or a web page that rebinds a name to
 * it, could drive the dispatcher. */
static int cfg_check_insecure(const cfg_ctx *ctx, const cfg_node *root, const hr_config *cfg)
{
    const cfg_node *dsp = cfg_map_get(root, "dispatcher");
    const cfg_node *at = cfg_map_get(cfg_map_get(dsp, "api"), "insecure");

    if (!cfg->dispatcher.api.insecure || hr_parse_loopback(cfg->dispatcher.listen) || at == NULL)
        return 0;
    return cfg_err(ctx, at->line, at->col,
                   "dispatcher.api.insecure: true needs a loopback dispatcher.listen (127.0.0.1, "
                   "[::1] or localhost), not \"%.64s\"; configure dispatcher.api.tokens instead",
                   cfg->dispatcher.listen);
}

/* The `password_file` of mysql or redis (SECTION): the password read from
 * it, which must not be given twice.  Before the env overrides, so that
 * HERALD_MYSQL_PASSWORD still wins. */
static int cfg_password_file(const cfg_ctx *ctx, const cfg_node *root, const char *section,
                             char **password, const char *file)
{
    const cfg_node *at = cfg_map_get(cfg_map_get(root, section), "password_file");
    char path[64], *read = NULL;

    if (file == NULL || at == NULL)
        return 0;
    snprintf(path, sizeof(path), "%s.password_file", section);
    if ((*password)[0] != '\0')
        return cfg_err(ctx, at->line, at->col,
                       "%s: password and password_file are both set "
                       "(keep one)",
                       section);
    if (cfg_read_secret_file(ctx, at, path, file, &read) < 0)
        return -1;
    free(*password);
    *password = read;
    return 0;
}

/* dispatcher.api: the lines of tokens_file join tokens; every token has
 * HR_API_TOKEN_MIN bytes (a short one is guessed; messages never quote
 * one). */
static int cfg_apply_tokens(const cfg_ctx *ctx, const cfg_node *root, hr_config *cfg)
{
    const cfg_node *api = cfg_map_get(cfg_map_get(root, "dispatcher"), "api");
    const cfg_node *file = cfg_map_get(api, "tokens_file"), *at;
    const cfg_key *k = cfg_api_keys; /* its first row is "tokens" */

    if (cfg->dispatcher.api.tokens_file != NULL &&
        cfg_apply_list_file(ctx, k, cfg, file, "dispatcher.api.tokens_file",
                            cfg->dispatcher.api.tokens_file) < 0)
        return -1;
    for (size_t i = 0; i < cfg->dispatcher.api.ntokens; i++)
        if (strlen(cfg->dispatcher.api.tokens[i]) < HR_API_TOKEN_MIN) {
            at = cfg_map_get(api, "tokens");
            if (at == NULL)
                at = file;
            return cfg_err(ctx, at->line, at->col,
                           "dispatcher.api.tokens: token %zu is %zu bytes; at least %d (e.g. "
                           "openssl rand -hex 32)",
                           i + 1, strlen(cfg->dispatcher.api.tokens[i]), HR_API_TOKEN_MIN);
        }
    return 0;
}

/* dispatcher.api.jwt: with a jwks_file, an issuer and an audience, and a
 * JWK Set with a signing key in the file (re-read by the dispatcher when
 * it changes, hr_jwks.h). */
static int cfg_check_jwt(const cfg_ctx *ctx, const cfg_node *root, const hr_config *cfg)
{
    const cfg_node *jwt = cfg_map_get(cfg_map_get(cfg_map_get(root, "dispatcher"), "api"), "jwt");
    const char *jwks = cfg->dispatcher.api.jwt.jwks_file;
    const cfg_node *at = cfg_map_get(jwt, "jwks_file");
    char detail[CFG_WHY], *text = NULL;
    hr_jwks *set = NULL;
    size_t len = 0;
    int rc;

    if (!hr_config_jwt_on(cfg) || at == NULL)
        return 0;
    if (cfg->dispatcher.api.jwt.issuer == NULL || cfg->dispatcher.api.jwt.audience == NULL)
        return cfg_err(ctx, jwt->line, jwt->col,
                       "dispatcher.api.jwt: issuer and audience are required with a jwks_file");
    if (hr_config_read_file(jwks, HR_JWKS_FILE_MAX, &text, &len, detail, sizeof(detail)) < 0)
        return cfg_err(ctx, at->line, at->col, "dispatcher.api.jwt.jwks_file: %s", detail);
    rc = hr_jwks_parse(text, len, &set, detail, sizeof(detail));
    free(text);
    hr_jwks_free(set);
    if (rc < 0)
        return cfg_err(ctx, at->line, at->col, "dispatcher.api.jwt.jwks_file: %s", detail);
    return 0;
}

/* The secret files that herald reads elsewhere (the worker's provider
 * keys, the TLS client key): noted when exposed, like those read here. */
static int cfg_note_key_files(const cfg_ctx *ctx, const hr_config *cfg)
{
    int rc = 0;

    if (cfg->mysql.tls.key_file != NULL && cfg->mysql.tls.key_file[0] != '\0')
        rc |= cfg_note_secret(ctx, cfg->mysql.tls.key_file);
    for (size_t i = 0; i < cfg->nchannels; i++) {
        const hr_channel *ch = &cfg->channels[i];

        if (ch->fcm.service_account_file != NULL)
            rc |= cfg_note_secret(ctx, ch->fcm.service_account_file);
        if (ch->apns.key_file != NULL)
            rc |= cfg_note_secret(ctx, ch->apns.key_file);
        if (ch->webpush.vapid_key_file != NULL)
            rc |= cfg_note_secret(ctx, ch->webpush.vapid_key_file);
    }
    return rc != 0 ? cfg_err(ctx, 1, 1, "out of memory") : 0;
}

/* mysql.tls: a file named while TLS is off is a mistake, not a choice; a
 * client certificate needs its key. */
static int cfg_check_mysql_tls(const cfg_ctx *ctx, const cfg_node *root, const hr_config *cfg)
{
    const cfg_node *tls = cfg_map_get(cfg_map_get(root, "mysql"), "tls");
    static const char *const files[] = {"ca_file", "cert_file", "key_file"};
    const char *values[] = {cfg->mysql.tls.ca_file, cfg->mysql.tls.cert_file,
                            cfg->mysql.tls.key_file};
    const cfg_node *at;

    for (size_t i = 0; i < 3 && !cfg->mysql.tls.enabled; i++)
        if (values[i] != NULL && values[i][0] != '\0' && (at = cfg_map_get(tls, files[i])) != NULL)
            return cfg_err(ctx, at->line, at->col,
                           "mysql.tls.%s is set but mysql.tls.enabled is false", files[i]);
    bool cert = values[1] != NULL && values[1][0] != '\0';
    bool key = values[2] != NULL && values[2][0] != '\0';
    if (cert != key && (at = cfg_map_get(tls, cert ? "cert_file" : "key_file")) != NULL)
        return cfg_err(ctx, at->line, at->col, "mysql.tls: cert_file and key_file go together");
    return 0;
}

/* events: the tracking key comes from key or key_file (read at load), is
 * long enough, and goes with a base URL (links need both); the hooks'
 * backoff cap is not below its first step. */
static int cfg_check_events(const cfg_ctx *ctx, const cfg_node *root, hr_config *cfg)
{
    const cfg_node *events = cfg_map_get(root, "events");
    const cfg_node *tracking = cfg_map_get(events, "tracking"), *at;
    char detail[CFG_WHY];
    bool base = cfg->events.tracking.base_url != NULL && cfg->events.tracking.base_url[0] != '\0';

    if (cfg->events.tracking.key != NULL && cfg->events.tracking.key_file != NULL)
        return cfg_err(ctx, tracking->line, tracking->col,
                       "events.tracking: give at most one of key and key_file");
    if (cfg->events.tracking.key_file != NULL) {
        at = cfg_map_get(tracking, "key_file");
        if (cfg_read_secret(cfg->events.tracking.key_file, &cfg->events.tracking.key, detail,
                            sizeof detail) < 0)
            return cfg_err(ctx, at->line, at->col, "events.tracking.key_file: %s", detail);
        free(cfg->events.tracking.key_file);
        cfg->events.tracking.key_file = NULL;
    }
    if (base && (strncmp(cfg->events.tracking.base_url, "https://", 8) != 0 &&
                 strncmp(cfg->events.tracking.base_url, "http://", 7) != 0)) {
        at = cfg_map_get(tracking, "base_url");
        return cfg_err(ctx, at->line, at->col,
                       "events.tracking.base_url: \"%.64s\" is no http(s):// URL",
                       cfg->events.tracking.base_url);
    }
    if (base != (cfg->events.tracking.key != NULL))
        return cfg_err(ctx, tracking->line, tracking->col,
                       "events.tracking: base_url and a key (key or key_file) go together");
    if (cfg->events.tracking.key != NULL && strlen(cfg->events.tracking.key) < HR_TRACK_KEY_MIN)
        return cfg_err(ctx, tracking->line, tracking->col,
                       "events.tracking: the key is %zu bytes; at least %d (e.g. openssl rand "
                       "-hex 32)",
                       strlen(cfg->events.tracking.key), HR_TRACK_KEY_MIN);
    if (cfg->events.hooks.retry_max_backoff_ms < cfg->events.hooks.retry_backoff_ms &&
        (at = cfg_map_get(cfg_map_get(events, "hooks"), "retry_max_backoff_ms")) != NULL)
        return cfg_err(ctx, at->line, at->col,
                       "events.hooks.retry_max_backoff_ms: %d is below retry_backoff_ms %d",
                       cfg->events.hooks.retry_max_backoff_ms, cfg->events.hooks.retry_backoff_ms);
    return 0;
}

int hr_config_load_buffer(const char *name, const char *text, size_t len, hr_config **out,
                          char *errstr, size_t errlen)
{
    cfg_paths exposed = {0};
    cfg_ctx ctx = {.name = name,
                   .text = text,
                   .len = len,
                   .errstr = errstr,
                   .errlen = errlen,
                   .exposed = &exposed};
    cfg_node *root = NULL;
    hr_config *cfg = NULL;
    char detail[CFG_WHY];
    int rc = -1;

    *out = NULL;
    if (errstr != NULL && errlen > 0)
        errstr[0] = '\0';
    if (cfg_tree_build(&ctx, &root) < 0)
        goto out;
    cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL || (cfg->path = strdup(name)) == NULL) {
        cfg_err(&ctx, 1, 1, "out of memory");
        goto out;
    }
    if (cfg_set_defaults(cfg_top_keys, cfg, detail, sizeof(detail)) < 0) {
        cfg_err(&ctx, 1, 1, "%s", detail);
        goto out;
    }
    if (cfg_apply_map(&ctx, cfg_top_keys, cfg, root, "") < 0)
        goto out;
    if (cfg->nchannels == 0) {
        cfg_err(&ctx, root->line, root->col,
                "no channels: add a \"channels:\" section with at least one channel");
        goto out;
    }
    if (cfg_set_instance(cfg) < 0 ||
        cfg_default_categories(&cfg->recipients.categories, &cfg->recipients.ncategories) < 0) {
        cfg_err(&ctx, 1, 1, "out of memory");
        goto out;
    }
    if (cfg_password_file(&ctx, root, "mysql", &cfg->mysql.password, cfg->mysql.password_file) <
            0 ||
        cfg_password_file(&ctx, root, "redis", &cfg->redis.password, cfg->redis.password_file) <
            0 ||
        cfg_apply_tokens(&ctx, root, cfg) < 0)
        goto out;
    if (cfg_apply_env(cfg, errstr, errlen) < 0)
        goto out;
    if (cfg_check_redis(&ctx, root, cfg) < 0 || cfg_check_insecure(&ctx, root, cfg) < 0 ||
        cfg_check_mysql_tls(&ctx, root, cfg) < 0 || cfg_check_jwt(&ctx, root, cfg) < 0 ||
        cfg_check_events(&ctx, root, cfg) < 0 || cfg_note_key_files(&ctx, cfg) < 0)
        goto out;
    cfg->exposed_files = exposed.v;
    cfg->nexposed_files = exposed.n;
    exposed = (cfg_paths){0};
    *out = cfg;
    cfg = NULL;
    rc = 0;
out:
    for (size_t i = 0; i < exposed.n; i++)
        free(exposed.v[i]);
    hr_vec_free(&exposed);
    hr_config_free(cfg);
    cfg_node_free(root);
    return rc;
}

int hr_config_load(const char *path, hr_config **out, char *errstr, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int rc;

    *out = NULL;
    if (hr_config_read_file(path, CFG_MAX_FILE, &text, &len, errstr, errlen) < 0)
        return -1;
    rc = hr_config_load_buffer(path, text, len, out, errstr, errlen);
    free(text);
    return rc;
}

const hr_category *hr_config_category(const hr_config *cfg, const char *name)
{
    if (cfg == NULL || name == NULL)
        return NULL;
    for (size_t i = 0; i < cfg->recipients.ncategories; i++)
        if (strcmp(cfg->recipients.categories[i].name, name) == 0)
            return &cfg->recipients.categories[i];
    return NULL;
}

bool hr_config_jwt_on(const hr_config *cfg)
{
    return cfg->dispatcher.api.jwt.jwks_file != NULL &&
           cfg->dispatcher.api.jwt.jwks_file[0] != '\0';
}

const hr_channel *hr_config_channel(const hr_config *cfg, const char *name)
{
    if (cfg == NULL || name == NULL)
        return NULL;
    for (size_t i = 0; i < cfg->nchannels; i++)
        if (strcmp(cfg->channels[i].name, name) == 0)
            return &cfg->channels[i];
    return NULL;
}
