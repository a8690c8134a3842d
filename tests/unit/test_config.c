/* Unit tests for hr_config: good files (defaults, every key, ${VAR} expansion,
 * env overrides, the shipped example) and one test per kind of bad file, each
 * asserting the exact "file:line:col: " prefix and the distinctive part of
 * the message.
 *
 * Usage: test_config FIXTURE_DIR EXAMPLE_YAML (meson passes both). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hr_config.h"
#include "hr_log.h"
#include "hr_seams.h"

static const char *fixture_dir;
static const char *example_path;

static const char *const override_vars[] = {
    "HERALD_MYSQL_HOST",     "HERALD_MYSQL_PORT",    "HERALD_MYSQL_USER",  "HERALD_MYSQL_PASSWORD",
    "HERALD_MYSQL_DATABASE", "HERALD_REDIS_HOST",    "HERALD_REDIS_PORT",  "HERALD_REDIS_PASSWORD",
    "HERALD_KAFKA_BROKERS",  "HERALD_REDIS_CLUSTER", "HERALD_REDIS_NODES",
};

static void fixture(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", fixture_dir, name);
}

static hr_config *load_ok(const char *path)
{
    hr_config *cfg = NULL;
    char err[512] = "";
    if (hr_config_load(path, &cfg, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_non_null(cfg);
    return cfg;
}

/* Every default from hr_config.h, as the minimal file and the example give them. */
static void assert_defaults(const hr_config *cfg)
{
    /* recipients: the one category tasks default to, no herald links */
    assert_int_equal(cfg->recipients.ncategories, 1);
    assert_string_equal(cfg->recipients.categories[0].name, "reminder");
    assert_false(cfg->recipients.categories[0].mandatory);
    assert_int_equal(cfg->recipients.attributes_max_bytes, 4096);
    assert_null(cfg->recipients.unsubscribe.public_url);
    assert_int_equal(cfg->recipients.unsubscribe.token_ttl_s, 15552000);
    assert_int_equal(cfg->recipients.unsubscribe.nkeys, 0);
    assert_int_equal(cfg->log.level, HR_LOG_INFO);
    assert_int_equal(cfg->log.format, HR_LOG_FORMAT_LOGFMT);
    assert_string_equal(cfg->mysql.host, "127.0.0.1");
    assert_int_equal(cfg->mysql.port, 3306);
    assert_string_equal(cfg->mysql.user, "herald");
    assert_string_equal(cfg->mysql.password, "");
    assert_string_equal(cfg->mysql.database, "herald");
    assert_int_equal(cfg->mysql.connect_timeout_s, 5);
    assert_int_equal(cfg->mysql.timeout_s, 10);
    assert_false(cfg->mysql.tls.enabled);
    /* Absent or "" (the example) mean none alike. */
    assert_true(cfg->mysql.tls.ca_file == NULL || cfg->mysql.tls.ca_file[0] == '\0');
    assert_true(cfg->mysql.tls.verify);
    assert_true(cfg->mysql.tls.cert_file == NULL || cfg->mysql.tls.cert_file[0] == '\0');
    assert_true(cfg->mysql.tls.key_file == NULL || cfg->mysql.tls.key_file[0] == '\0');
    assert_string_equal(cfg->redis.host, "127.0.0.1");
    assert_int_equal(cfg->redis.port, 6379);
    assert_string_equal(cfg->redis.password, "");
    assert_string_equal(cfg->redis.prefix, "herald:");
    assert_int_equal(cfg->redis.db, 0);
    assert_int_equal(cfg->redis.timeout_ms, 5000);
    assert_false(cfg->redis.cluster);
    assert_int_equal(cfg->redis.nnodes, 0);
    assert_string_equal(cfg->kafka.brokers, "127.0.0.1:9092");
    assert_string_equal(cfg->kafka.topic, "herald.chunks");
    assert_string_equal(cfg->kafka.group, "herald-workers");
    assert_int_equal(cfg->kafka.nproperties, 0);
    assert_string_equal(cfg->dispatcher.listen, "127.0.0.1:8080");
    assert_string_equal(cfg->dispatcher.probe_listen, "127.0.0.1:8090");
    assert_int_equal(cfg->dispatcher.api.max_connections, 1024);
    assert_int_equal(cfg->dispatcher.api.max_connections_per_ip, 64);
    assert_int_equal(cfg->dispatcher.api.header_timeout_ms, 10000);
    assert_int_equal(cfg->dispatcher.api.ntokens, 0);
    assert_int_equal(cfg->dispatcher.api.max_body_bytes, 1048576);
    assert_int_equal(cfg->dispatcher.api.max_ids, 10000);
    assert_false(cfg->dispatcher.api.insecure);
    assert_int_equal(cfg->dispatcher.api.threads, 4);
    assert_int_equal(cfg->dispatcher.scan_interval_ms, 1000);
    assert_int_equal(cfg->dispatcher.timer_interval_ms, 100);
    assert_int_equal(cfg->dispatcher.poller_interval_ms, 3000);
    assert_int_equal(cfg->dispatcher.poller_grace_ms, 3000);
    assert_int_equal(cfg->dispatcher.horizon_s, 600);
    assert_int_equal(cfg->dispatcher.lease_s, 30);
    assert_int_equal(cfg->dispatcher.redelivery_timeout_s, 120);
    assert_int_equal(cfg->dispatcher.sweep_interval_ms, 5000);
    assert_int_equal(cfg->dispatcher.refill_batch, 10000);
    assert_int_equal(cfg->dispatcher.chunks_ahead, 12);
    assert_int_equal(cfg->dispatcher.delivery_retention_days, 30);
    assert_string_equal(cfg->worker.listen, "127.0.0.1:8081");
    assert_int_equal(cfg->worker.ack_batch, 100);
    assert_true(cfg->worker.delivery_log);
    assert_int_equal(cfg->worker.reporter_queue, 100000);
    assert_int_equal(cfg->worker.reporter_batch, 1000);
    assert_int_equal(cfg->worker.max_chunks_in_flight, 4);
    assert_int_equal(cfg->worker.lease_ms, 6000);
    assert_int_equal(cfg->worker.shutdown_grace_ms, 25000);

    assert_int_equal(cfg->nchannels, 1);
    const hr_channel *ch = hr_config_channel(cfg, "webhook");
    assert_non_null(ch);
    assert_string_equal(ch->name, "webhook");
    assert_string_equal(ch->url, "http://127.0.0.1:9099/push");
    assert_string_equal(ch->method, "POST");
    assert_int_equal(ch->nheaders, 1);
    assert_string_equal(ch->headers[0].key, "Content-Type");
    assert_string_equal(ch->headers[0].value, "application/json");
    assert_string_equal(ch->body,
                        "{\"uid\":\"{{uid}}\",\"title\":\"{{title}}\",\"body\":\"{{body}}\"}");
    assert_int_equal(ch->concurrency, 256);
    assert_int_equal(ch->rate_limit, 0);
    assert_int_equal(ch->timeout_ms, 5000);
    assert_false(ch->http2);
    assert_int_equal(ch->retry_max_attempts, 5);
    assert_int_equal(ch->retry_backoff_ms, 200);
    assert_int_equal(ch->retry_max_backoff_ms, 30000);
    assert_int_equal(ch->nsuccess, 4);
    assert_int_equal(ch->success[0], 200);
    assert_int_equal(ch->success[1], 201);
    assert_int_equal(ch->success[2], 202);
    assert_int_equal(ch->success[3], 204);
    assert_true(ch->json_escape);
    assert_int_equal(ch->throttle_mode, HR_THROTTLE_ENFORCE);
    assert_null(ch->ca_file);
    assert_true(ch->tls_verify);
    assert_int_equal(ch->type, HR_CHANNEL_WEBHOOK);
    assert_int_equal(ch->nsigning_secrets, 0);
}

static void test_minimal(void **state)
{
    (void)state;
    char path[512];
    fixture(path, sizeof(path), "minimal.yaml");

    setenv("HOSTNAME", "pod-abc", 1);
    hr_config *cfg = load_ok(path);
    assert_defaults(cfg);
    assert_string_equal(cfg->path, path);
    assert_string_equal(cfg->instance, "pod-abc");
    assert_null(hr_config_channel(cfg, "sms"));
    hr_config_free(cfg);

    /* Without $HOSTNAME the instance is the host name. */
    char host[256] = "";
    unsetenv("HOSTNAME");
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    cfg = load_ok(path);
    assert_string_equal(cfg->instance, host);
    hr_config_free(cfg);
}

/* The shipped example loads and documents the true defaults. */
static void test_example(void **state)
{
    (void)state;
    unsetenv("HERALD_API_TOKEN");
    hr_config *cfg = load_ok(example_path);
    assert_defaults(cfg);
    hr_config_free(cfg);

    setenv("HERALD_API_TOKEN", "tok-1-0123456789abcdef0123456789abcdef", 1);
    cfg = load_ok(example_path);
    assert_int_equal(cfg->dispatcher.api.ntokens, 1);
    assert_string_equal(cfg->dispatcher.api.tokens[0], "tok-1-0123456789abcdef0123456789abcdef");
    hr_config_free(cfg);
    unsetenv("HERALD_API_TOKEN");
}

/* Every key set to a non-default value lands in its own field. */
static void test_full(void **state)
{
    (void)state;
    char path[512];
    fixture(path, sizeof(path), "full.yaml");
    hr_config *cfg = load_ok(path);

    assert_string_equal(cfg->instance, "node-7");
    assert_int_equal(cfg->recipients.ncategories, 3);
    assert_string_equal(cfg->recipients.categories[2].name, "security");
    assert_true(cfg->recipients.categories[2].mandatory);
    assert_false(cfg->recipients.categories[1].mandatory);
    assert_non_null(hr_config_category(cfg, "marketing"));
    assert_null(hr_config_category(cfg, "promo"));
    assert_int_equal(cfg->recipients.attributes_max_bytes, 2048);
    assert_string_equal(cfg->recipients.unsubscribe.public_url, "https://push.example.com/h");
    assert_int_equal(cfg->recipients.unsubscribe.token_ttl_s, 86400);
    assert_int_equal(cfg->recipients.unsubscribe.nkeys, 2);
    assert_string_equal(cfg->recipients.unsubscribe.keys[1].id, "u1");
    assert_string_equal(cfg->recipients.unsubscribe.keys[0].secret,
                        "0123456789abcdef0123456789abcdef-u2");
    assert_int_equal(cfg->log.level, HR_LOG_DEBUG);
    assert_int_equal(cfg->log.format, HR_LOG_FORMAT_JSON);
    assert_string_equal(cfg->mysql.host, "db.internal");
    assert_int_equal(cfg->mysql.port, 13306);
    assert_string_equal(cfg->mysql.user, "app");
    assert_string_equal(cfg->mysql.password, "s3cret");
    assert_string_equal(cfg->mysql.database, "reminders");
    assert_int_equal(cfg->mysql.connect_timeout_s, 9);
    assert_int_equal(cfg->mysql.timeout_s, 20);
    assert_true(cfg->mysql.tls.enabled);
    assert_string_equal(cfg->mysql.tls.ca_file, "/etc/herald/mysql-ca.pem");
    assert_false(cfg->mysql.tls.verify);
    assert_string_equal(cfg->mysql.tls.cert_file, "/etc/herald/mysql-client.pem");
    assert_string_equal(cfg->mysql.tls.key_file, "/etc/herald/mysql-client.key");
    assert_string_equal(cfg->redis.host, "cache.internal");
    assert_int_equal(cfg->redis.port, 16379);
    assert_string_equal(cfg->redis.password, "rpass");
    assert_string_equal(cfg->redis.prefix, "t1:");
    assert_int_equal(cfg->redis.db, 3);
    assert_int_equal(cfg->redis.timeout_ms, 750);
    assert_string_equal(cfg->kafka.brokers, "k1:9092,k2:9092");
    assert_string_equal(cfg->kafka.topic, "chunks.test");
    assert_string_equal(cfg->kafka.group, "workers.test");
    assert_int_equal(cfg->kafka.nproperties, 3);
    assert_string_equal(cfg->kafka.properties[0].key, "security.protocol");
    assert_string_equal(cfg->kafka.properties[0].value, "SASL_SSL");
    assert_string_equal(cfg->kafka.properties[1].key, "enable.idempotence");
    assert_string_equal(cfg->kafka.properties[1].value, "true");
    assert_string_equal(cfg->kafka.properties[2].key, "linger.ms");
    assert_string_equal(cfg->kafka.properties[2].value, "5");
    assert_string_equal(cfg->dispatcher.listen, "[::1]:18080");
    assert_string_equal(cfg->dispatcher.probe_listen, "0.0.0.0:18082");
    assert_int_equal(cfg->dispatcher.api.max_connections, 300);
    assert_int_equal(cfg->dispatcher.api.max_connections_per_ip, 9);
    assert_int_equal(cfg->dispatcher.api.header_timeout_ms, 2500);
    assert_int_equal(cfg->dispatcher.api.ntokens, 2);
    assert_string_equal(cfg->dispatcher.api.tokens[0], "alpha-0123456789abcdef0123456789abcdef");
    assert_string_equal(cfg->dispatcher.api.tokens[1], "beta-0123456789abcdef0123456789abcdef0");
    assert_int_equal(cfg->dispatcher.api.max_body_bytes, 2048);
    assert_int_equal(cfg->dispatcher.api.max_ids, 77);
    assert_true(cfg->dispatcher.api.insecure);
    assert_int_equal(cfg->dispatcher.api.threads, 8);
    assert_int_equal(cfg->dispatcher.scan_interval_ms, 1100);
    assert_int_equal(cfg->dispatcher.timer_interval_ms, 50);
    assert_int_equal(cfg->dispatcher.poller_interval_ms, 4000);
    assert_int_equal(cfg->dispatcher.poller_grace_ms, 0);
    assert_int_equal(cfg->dispatcher.horizon_s, 300);
    assert_int_equal(cfg->dispatcher.lease_s, 15);
    assert_int_equal(cfg->dispatcher.redelivery_timeout_s, 60);
    assert_int_equal(cfg->dispatcher.sweep_interval_ms, 2500);
    assert_int_equal(cfg->dispatcher.refill_batch, 500);
    assert_int_equal(cfg->dispatcher.chunks_ahead, 0);
    assert_int_equal(cfg->dispatcher.delivery_retention_days, 90);
    assert_string_equal(cfg->worker.listen, "[::1]:0");
    assert_int_equal(cfg->worker.ack_batch, 10);
    assert_false(cfg->worker.delivery_log);
    assert_int_equal(cfg->worker.reporter_queue, 5000);
    assert_int_equal(cfg->worker.reporter_batch, 20);
    assert_int_equal(cfg->worker.max_chunks_in_flight, 2);
    assert_int_equal(cfg->worker.lease_ms, 20000);
    assert_int_equal(cfg->worker.shutdown_grace_ms, 5000);

    assert_int_equal(cfg->nchannels, 2);
    const hr_channel *ch = hr_config_channel(cfg, "webhook");
    assert_ptr_equal(ch, &cfg->channels[0]);
    assert_string_equal(ch->url, "https://push.example.com:8443/v1/{{uid}}?title={{title}}");
    assert_string_equal(ch->method, "PUT");
    assert_int_equal(ch->nheaders, 2);
    assert_string_equal(ch->headers[0].key, "Authorization");
    assert_string_equal(ch->headers[0].value, "Bearer abc");
    assert_string_equal(ch->headers[1].key, "X-Task");
    assert_string_equal(ch->headers[1].value, "{{task.id}}");
    assert_string_equal(ch->body, "{{body}}");
    assert_int_equal(ch->concurrency, 32);
    assert_int_equal(ch->rate_limit, 1000);
    assert_int_equal(ch->timeout_ms, 1500);
    assert_true(ch->http2);
    assert_int_equal(ch->retry_max_attempts, 3);
    assert_int_equal(ch->retry_backoff_ms, 100);
    assert_int_equal(ch->retry_max_backoff_ms, 100);
    assert_int_equal(ch->nsuccess, 2);
    assert_int_equal(ch->success[0], 200);
    assert_int_equal(ch->success[1], 299);
    assert_false(ch->json_escape);
    assert_int_equal(ch->throttle_mode, HR_THROTTLE_SHADOW);
    assert_string_equal(ch->ca_file, "/etc/ssl/custom.pem");
    assert_false(ch->tls_verify);

    /* An explicit empty headers mapping means no headers, not the default. */
    ch = hr_config_channel(cfg, "sms");
    assert_ptr_equal(ch, &cfg->channels[1]);
    assert_string_equal(ch->method, "GET");
    assert_int_equal(ch->nheaders, 0);
    assert_string_equal(ch->body, "");
    hr_config_free(cfg);
}

/* Each channel type with its own keys; a webhook without them keeps the
 * defaults (test_minimal). */
static void test_types(void **state)
{
    (void)state;
    char path[512], password[512];
    fixture(path, sizeof(path), "types.yaml");
    fixture(password, sizeof(password), "password.txt");
    setenv("HERALD_TEST_PASSWORD_FILE", password, 1);
    hr_config *cfg = load_ok(path);
    unsetenv("HERALD_TEST_PASSWORD_FILE");

    const hr_channel *ch = hr_config_channel(cfg, "hook");
    assert_int_equal(ch->type, HR_CHANNEL_WEBHOOK);
    assert_int_equal(ch->nsigning_secrets, 2);
    assert_string_equal(ch->signing_secrets[0],
                        "whsec_rAcwedxbCYcMQQYDYmNTVO+BYu8HaPjmj1ke6/R3mPI=");
    assert_int_equal(ch->nheaders, 1);

    ch = hr_config_channel(cfg, "android");
    assert_int_equal(ch->type, HR_CHANNEL_FCM);
    assert_string_equal(ch->fcm.service_account_file, "/etc/herald/fcm.json");
    assert_string_equal(ch->url, "https://127.0.0.1:9001");
    assert_string_equal(ch->fcm.token_uri, "https://127.0.0.1:9001/token");
    assert_int_equal(ch->concurrency, 64);
    assert_int_equal(ch->nheaders, 0);

    ch = hr_config_channel(cfg, "ios");
    assert_int_equal(ch->type, HR_CHANNEL_APNS);
    assert_null(ch->url);
    assert_string_equal(ch->apns.key_file, "/etc/herald/AuthKey_ABC123DEFG.p8");
    assert_string_equal(ch->apns.key_id, "ABC123DEFG");
    assert_string_equal(ch->apns.team_id, "TEAM123456");
    assert_string_equal(ch->apns.topic, "com.example.app");
    assert_int_equal(ch->apns.push_type, HR_APNS_BACKGROUND);
    assert_false(ch->apns.high_priority);
    assert_int_equal(ch->apns.connections, 4);
    assert_string_equal(ch->ca_file, "/etc/herald/test-ca.pem");

    ch = hr_config_channel(cfg, "browser");
    assert_int_equal(ch->type, HR_CHANNEL_WEBPUSH);
    assert_null(ch->url);
    assert_string_equal(ch->webpush.vapid_key_file, "/etc/herald/vapid.pem");
    assert_string_equal(ch->webpush.vapid_subject, "mailto:ops@example.com");
    assert_true(ch->tls_verify);
    assert_int_equal(ch->concurrency, 32);

    ch = hr_config_channel(cfg, "mail");
    assert_int_equal(ch->type, HR_CHANNEL_SMTP);
    assert_string_equal(ch->url, "smtps://relay.example.com:465");
    assert_string_equal(ch->smtp.username, "herald");
    assert_string_equal(ch->smtp.password, "pa55 word"); /* the file's line break dropped */
    assert_null(ch->smtp.password_file);
    assert_string_equal(ch->smtp.from, "noreply@example.com");
    assert_string_equal(ch->smtp.from_name, "Herald \xc3\x9cnicode");
    assert_string_equal(ch->smtp.subject, "Reminder: {{title}}");
    assert_null(ch->smtp.text);
    assert_string_equal(ch->smtp.html, "<p>{{body}}</p>");
    assert_string_equal(ch->smtp.list_unsubscribe, "https://example.com/unsub/{{uid}}");
    assert_false(ch->smtp.require_starttls);
    assert_null(ch->ca_file); /* "" is "none" for every type */
    hr_config_free(cfg);
}

static void test_env_expansion(void **state)
{
    (void)state;
    char path[512];
    fixture(path, sizeof(path), "env.yaml");
    setenv("HERALD_TEST_INSTANCE", "inst-9", 1);
    setenv("HERALD_TEST_PORT", "3307", 1);
    setenv("HERALD_TEST_SECRET", "s$cr}t-0123456789abcdef0123456789ab", 1);
    setenv("HERALD_TEST_EMPTY", "", 1);
    unsetenv("HERALD_TEST_UNSET");

    hr_config *cfg = load_ok(path);
    assert_string_equal(cfg->instance, "inst-9");
    assert_string_equal(cfg->mysql.host, "db.example");
    assert_int_equal(cfg->mysql.port, 3307);
    assert_string_equal(cfg->mysql.user, "pa$s");
    /* $$ -> $, empty with :- -> default, values are not expanded again. */
    assert_string_equal(cfg->mysql.password, "p$w-s$cr}t-0123456789abcdef0123456789ab-dflt");
    assert_int_equal(cfg->kafka.nproperties, 1);
    assert_string_equal(cfg->kafka.properties[0].value, "s$cr}t-0123456789abcdef0123456789ab");
    assert_int_equal(cfg->dispatcher.api.ntokens, 1);
    assert_string_equal(cfg->dispatcher.api.tokens[0], "s$cr}t-0123456789abcdef0123456789ab");
    const hr_channel *ch = hr_config_channel(cfg, "webhook");
    assert_string_equal(ch->url, "http://127.0.0.1:9099/{{uid}}");
    assert_string_equal(ch->headers[0].value, "Bearer s$cr}t-0123456789abcdef0123456789ab");
    assert_null(ch->ca_file);
    hr_config_free(cfg);

    /* A value from the environment is checked like one from the file. */
    char err[512];
    setenv("HERALD_TEST_PORT", "http", 1);
    cfg = NULL;
    assert_int_equal(hr_config_load(path, &cfg, err, sizeof(err)), -1);
    assert_null(cfg);
    char want[600];
    snprintf(want, sizeof(want), "%s:5:9: mysql.port: expected an integer, got \"http\"", path);
    assert_string_equal(err, want);

    unsetenv("HERALD_TEST_INSTANCE");
    unsetenv("HERALD_TEST_PORT");
    unsetenv("HERALD_TEST_SECRET");
    unsetenv("HERALD_TEST_EMPTY");
}

static void test_env_overrides(void **state)
{
    (void)state;
    char path[512], err[512];
    fixture(path, sizeof(path), "full.yaml");
    setenv("HERALD_MYSQL_HOST", "mysql.svc", 1);
    setenv("HERALD_MYSQL_PORT", "3310", 1);
    setenv("HERALD_MYSQL_USER", "u2", 1);
    setenv("HERALD_MYSQL_PASSWORD", "", 1); /* set but empty still wins */
    setenv("HERALD_MYSQL_DATABASE", "db2", 1);
    setenv("HERALD_REDIS_HOST", "redis.svc", 1);
    setenv("HERALD_REDIS_PORT", "6380", 1);
    setenv("HERALD_REDIS_PASSWORD", "rp2", 1);
    setenv("HERALD_KAFKA_BROKERS", "kafka.svc:9092", 1);

    hr_config *cfg = load_ok(path);
    assert_string_equal(cfg->mysql.host, "mysql.svc");
    assert_int_equal(cfg->mysql.port, 3310);
    assert_string_equal(cfg->mysql.user, "u2");
    assert_string_equal(cfg->mysql.password, "");
    assert_string_equal(cfg->mysql.database, "db2");
    assert_string_equal(cfg->redis.host, "redis.svc");
    assert_int_equal(cfg->redis.port, 6380);
    assert_string_equal(cfg->redis.password, "rp2");
    assert_string_equal(cfg->kafka.brokers, "kafka.svc:9092");
    assert_string_equal(cfg->redis.prefix, "t1:"); /* untouched */
    hr_config_free(cfg);

    setenv("HERALD_MYSQL_PORT", "70000", 1);
    cfg = NULL;
    assert_int_equal(hr_config_load(path, &cfg, err, sizeof(err)), -1);
    assert_null(cfg);
    assert_string_equal(err, "HERALD_MYSQL_PORT: 70000 is out of range (1..65535)");

    setenv("HERALD_MYSQL_PORT", "3306", 1);
    setenv("HERALD_REDIS_HOST", "", 1);
    assert_int_equal(hr_config_load(path, &cfg, err, sizeof(err)), -1);
    assert_string_equal(err, "HERALD_REDIS_HOST: must not be empty");

    for (size_t i = 0; i < sizeof(override_vars) / sizeof(override_vars[0]); i++)
        unsetenv(override_vars[i]);
}

/* redis.cluster and its seed nodes, from the file and from the env (a
 * comma-separated list that replaces the file's); db 3 is refused only once
 * the env turned the cluster on, at the db key's place in the file. */
static void test_redis_cluster(void **state)
{
    (void)state;
    char path[512], err[512], want[600];
    hr_config *cfg;

    fixture(path, sizeof(path), "cluster.yaml");
    cfg = load_ok(path);
    assert_true(cfg->redis.cluster);
    assert_int_equal(cfg->redis.nnodes, 3);
    assert_string_equal(cfg->redis.nodes[0], "10.0.0.1:7000");
    assert_string_equal(cfg->redis.nodes[1], "redis-2.svc:7001");
    assert_string_equal(cfg->redis.nodes[2], "[::1]:7002");
    hr_config_free(cfg);

    setenv("HERALD_REDIS_NODES", " a:1, ,b.svc:7002 ,", 1);
    setenv("HERALD_REDIS_CLUSTER", "false", 1);
    cfg = load_ok(path);
    assert_false(cfg->redis.cluster);
    assert_int_equal(cfg->redis.nnodes, 2);
    assert_string_equal(cfg->redis.nodes[0], "a:1");
    assert_string_equal(cfg->redis.nodes[1], "b.svc:7002");
    hr_config_free(cfg);

    setenv("HERALD_REDIS_NODES", "a:1,b", 1);
    cfg = NULL;
    assert_int_equal(hr_config_load(path, &cfg, err, sizeof(err)), -1);
    assert_null(cfg);
    assert_string_equal(
        err, "HERALD_REDIS_NODES: \"b\" is not a server address host:port (expected host:port)");
    unsetenv("HERALD_REDIS_NODES");

    fixture(path, sizeof(path), "full.yaml");
    cfg = load_ok(path);
    assert_false(cfg->redis.cluster);
    hr_config_free(cfg);
    setenv("HERALD_REDIS_CLUSTER", "true", 1);
    assert_int_equal(hr_config_load(path, &cfg, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "%s:23:7: redis.db: 3 with redis.cluster true", path);
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("got %s", err);
    unsetenv("HERALD_REDIS_CLUSTER");
}

static void test_cannot_open(void **state)
{
    (void)state;
    char path[512], err[512], want[600];
    hr_config *cfg = NULL;
    fixture(path, sizeof(path), "no-such-file.yaml");
    assert_int_equal(hr_config_load(path, &cfg, err, sizeof(err)), -1);
    assert_null(cfg);
    snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", path);
    assert_string_equal(err, want);

    assert_int_equal(hr_config_load(fixture_dir, &cfg, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "cannot read: not a regular file"));
    hr_config_free(NULL);
}

/* From a buffer: the name stands for the file; garbage of every byte value
 * and truncations of a good file never crash or leak. */
static void test_buffer(void **state)
{
    (void)state;
    static const char good[] = "channels:\n  a: {url: \"http://h/{{uid}}\", success: [204]}\n";
    hr_config *cfg = NULL;
    char err[512];

    assert_int_equal(hr_config_load_buffer("mem", good, strlen(good), &cfg, err, sizeof(err)), 0);
    assert_string_equal(cfg->path, "mem");
    assert_int_equal(hr_config_channel(cfg, "a")->nsuccess, 1);
    hr_config_free(cfg);

    /* Every proper prefix short of the final newline is broken somewhere. */
    for (size_t n = 0; n + 1 < strlen(good); n++) {
        int rc = hr_config_load_buffer("mem", good, n, &cfg, err, sizeof(err));
        assert_int_equal(rc, -1);
        assert_null(cfg);
        assert_memory_equal(err, "mem:", 4);
    }

    char junk[64];
    uint32_t x = 12345;
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < sizeof(junk); i++) {
            x = x * 1103515245u + 12345u;
            junk[i] = (char)(x >> 16);
        }
        int rc = hr_config_load_buffer("junk", junk, sizeof(junk), &cfg, err, sizeof(err));
        assert_int_equal(rc, -1);
        assert_null(cfg);
        assert_memory_equal(err, "junk:", 5);
    }

    /* Deep nesting is refused before it costs stack. */
    char deep[400];
    size_t n = (size_t)snprintf(deep, sizeof(deep), "channels: ");
    for (int i = 0; i < 100; i++)
        deep[n++] = '[';
    assert_int_equal(hr_config_load_buffer("deep", deep, n, &cfg, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "nested deeper than"));
}

/* Writes TEXT into a new temporary file of MODE; its path into PATH. */
static void secret_file(char *path, size_t len, const char *text, mode_t mode)
{
    int fd;

    snprintf(path, len, "/tmp/herald-test-secret-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

/* Every secret's *_file form: passwords, bootstrap tokens, signing secrets;
 * a file its group or others may read is noted, one of the owner's is not. */
static void test_secret_files(void **state)
{
    char mysql[64], redis[64], tokens[64], secrets[64], text[1024], err[512];
    hr_config *cfg = NULL;

    (void)state;
    secret_file(mysql, sizeof mysql, "my-pass\n", 0600);
    secret_file(redis, sizeof redis, "redis-pass", 0640);
    secret_file(tokens, sizeof tokens,
                "# bootstrap admins\n0123456789abcdef0123456789abcdef-a\n\n"
                "0123456789abcdef0123456789abcdef-b\r\n",
                0400);
    secret_file(secrets, sizeof secrets, "whsec_85nO1HtJpfe2YfAm1LqZpp2EDwbpOKZi\n", 0644);
    snprintf(text, sizeof text,
             "mysql: {password_file: %s}\nredis: {password_file: %s}\n"
             "dispatcher: {api: {tokens: [0123456789abcdef0123456789abcdef-y], "
             "tokens_file: %s}}\n"
             "channels:\n  hook: {url: \"http://h/\", signing_secrets_file: %s}\n",
             mysql, redis, tokens, secrets);
    assert_int_equal(hr_config_load_buffer("mem", text, strlen(text), &cfg, err, sizeof err), 0);
    assert_string_equal(cfg->mysql.password, "my-pass");
    assert_string_equal(cfg->redis.password, "redis-pass");
    assert_int_equal(cfg->dispatcher.api.ntokens, 3);
    assert_string_equal(cfg->dispatcher.api.tokens[1], "0123456789abcdef0123456789abcdef-a");
    assert_string_equal(cfg->dispatcher.api.tokens[2], "0123456789abcdef0123456789abcdef-b");
    assert_int_equal(hr_config_channel(cfg, "hook")->nsigning_secrets, 1);
    /* In the order they were read: the channels' first. */
    assert_int_equal(cfg->nexposed_files, 2);
    assert_string_equal(cfg->exposed_files[0], secrets);
    assert_string_equal(cfg->exposed_files[1], redis);
    hr_config_free(cfg);
    /* A short token in the file: its line is named, never its text. */
    unlink(tokens);
    secret_file(tokens, sizeof tokens, "0123456789abcdef0123456789abcdef-a\nshorty\n", 0600);
    snprintf(text, sizeof text,
             "dispatcher: {api: {tokens_file: %s}}\nchannels:\n  hook: {url: \"http://h/\"}\n",
             tokens);
    assert_int_equal(hr_config_load_buffer("mem", text, strlen(text), &cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "token 2 is 6 bytes"));
    assert_null(strstr(err, "shorty"));
    unlink(mysql);
    unlink(redis);
    unlink(tokens);
    unlink(secrets);
}

/* dispatcher.api.jwt with the unit tests' JWK Set; client tokens' lifetime. */
static void test_jwt_section(void **state)
{
    char text[1024], err[512];
    hr_config *cfg = NULL;

    (void)state;
    snprintf(text, sizeof text,
             "dispatcher:\n  api:\n    client_token_max_ttl_s: 3600\n    jwt:\n"
             "      jwks_file: %s/../keys/jwks.json\n      issuer: https://id.example.org\n"
             "      audience: herald\n      leeway_s: 5\n"
             "channels:\n  hook: {url: \"http://h/\"}\n",
             fixture_dir);
    assert_int_equal(hr_config_load_buffer("mem", text, strlen(text), &cfg, err, sizeof err), 0);
    assert_string_equal(cfg->dispatcher.api.jwt.issuer, "https://id.example.org");
    assert_string_equal(cfg->dispatcher.api.jwt.role_claim, "herald_role");
    assert_string_equal(cfg->dispatcher.api.jwt.subject_claim, "sub");
    assert_int_equal(cfg->dispatcher.api.jwt.leeway_s, 5);
    assert_int_equal(cfg->dispatcher.api.client_token_max_ttl_s, 3600);
    hr_config_free(cfg);
}

/* http:// for an fcm or apns endpoint sends credentials in clear text: only
 * a build with test seams (the stand-ins) takes it. */
static void test_provider_http(void **state)
{
    static const char *const texts[] = {
        "channels:\n  a: {type: fcm, service_account_file: /x.json, url: \"http://h\"}\n",
        "channels:\n  a: {type: fcm, service_account_file: /x.json, "
        "token_uri: \"http://h/t\"}\n",
        "channels:\n  a: {type: apns, key_file: /k.p8, key_id: ABC123DEFG, team_id: "
        "TEAM123456, topic: t, url: \"http://h\"}\n",
    };
    hr_config *cfg = NULL;
    char err[512];

    (void)state;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int rc = hr_config_load_buffer("mem", texts[i], strlen(texts[i]), &cfg, err, sizeof err);
        assert_int_equal(rc, HR_SEAMS_ON ? 0 : -1);
        if (!HR_SEAMS_ON)
            assert_non_null(strstr(err, "clear text; use https://"));
        hr_config_free(cfg);
        cfg = NULL;
    }
}

typedef struct bad_case {
    const char *file;
    const char *where; /* "line:col" */
    const char *message;
} bad_case;

static const bad_case bad_cases[] = {
    {"bad_type_int.yaml", "2:14", "worker.ack_batch: expected an integer, got \"many\""},
    {"bad_int_junk.yaml", "4:17", "channels.webhook.timeout_ms: expected an integer, got \"10ms\""},
    {"bad_type_map_for_scalar.yaml", "2:9", "mysql.host: expected a string, got a mapping"},
    {"bad_type_seq_for_map.yaml", "3:8", "mysql: expected a mapping, got a sequence"},
    {"bad_channel_scalar.yaml", "2:12", "channels.webhook: expected a mapping, got a scalar"},
    {"bad_top_sequence.yaml", "1:1", "the configuration must be a mapping of sections"},
    {"bad_unknown_top.yaml", "1:1",
     "unknown key \"mysqll\" at the top level (expected: instance, log, mysql, redis, kafka, "
     "dispatcher, worker, recipients, events, channels)"},
    {"bad_category_dup.yaml", "4:7", "recipients.categories[1].name: \"reminder\" is used twice"},
    {"bad_category_name.yaml", "3:7",
     "recipients.categories[0].name: required, 1..32 of a-z 0-9 _ -"},
    {"bad_public_url.yaml", "3:17",
     "recipients.unsubscribe.public_url: \"http://push.example.com\" is not an "
     "https://host[:port][/path] URL without a query, a fragment or a trailing slash"},
    {"bad_unsub_key_short.yaml", "4:9",
     "recipients.unsubscribe.keys[0]: the secret of key \"u1\" is 5 bytes; at least 32"},
    {"bad_attributes_max.yaml", "2:25",
     "recipients.attributes_max_bytes: 100000 is out of range (64..65536)"},
    {"bad_unknown_nested.yaml", "3:3",
     "unknown key \"hostt\" in mysql (expected: host, port, user, password, password_file, "
     "database, connect_timeout_s, timeout_s, tls)"},
    {"bad_unknown_channel_key.yaml", "4:30",
     "unknown key \"backof_ms\" in channels.webhook.retry (expected: max_attempts, backoff_ms, "
     "max_backoff_ms)"},
    {"bad_range_low.yaml", "5:14", "worker.ack_batch: 0 is out of range (1..4000)"},
    /* ack.lua takes the batch as arguments: kept well inside Lua's limits. */
    {"bad_ack_batch_high.yaml", "4:14", "worker.ack_batch: 4001 is out of range (1..4000)"},
    {"bad_range_high.yaml", "2:9", "mysql.port: 70000 is out of range (1..65535)"},
    {"bad_range_negative.yaml", "2:7", "redis.db: -1 is out of range (0..15)"},
    {"bad_overflow.yaml", "4:17",
     "channels.webhook.rate_limit: 99999999999999999999 is out of range (0..10000000)"},
    {"bad_url_ftp.yaml", "3:10", "is not an http(s):// or smtp(s):// URL"},
    {"bad_url_nohost.yaml", "3:10", "channels.webhook.url: URL \"http:///push\": no host"},
    {"bad_url_garbage.yaml", "3:10", "\"not a url\" is not an http(s):// or smtp(s):// URL"},
    {"bad_url_space.yaml", "3:10", "spaces and control characters must be %-encoded"},
    {"bad_url_missing.yaml", "2:3", "channels.webhook: missing required key \"url\""},
    {"bad_body_template.yaml", "4:11", "channels.webhook.body: body template: unclosed"},
    {"bad_url_template.yaml", "3:10", "url template:"},
    {"bad_header_template.yaml", "4:15", "header value template: unknown variable"},
    {"bad_env_missing.yaml", "5:13", "mysql.password: ${HERALD_TEST_NOT_SET} is not set"},
    {"bad_env_syntax.yaml", "2:13", "mysql.password: unterminated \"${\""},
    {"bad_dup_channel.yaml", "6:3", "duplicate key \"webhook\" (first at line 2)"},
    {"bad_dup_key.yaml", "4:3", "duplicate key \"port\" (first at line 2)"},
    {"bad_tab.yaml", "4:1",
     "found character that cannot start any token (tabs are not allowed for indentation)"},
    {"bad_empty.yaml", "1:1", "empty configuration"},
    {"bad_comments.yaml", "1:1", "empty configuration"},
    {"bad_binary_ctl.yaml", "2:11", "control characters are not allowed (byte 0x00)"},
    {"bad_binary_utf8.yaml", "2:11", "invalid trailing UTF-8 octet (byte 0x28)"},
    {"bad_no_channels.yaml", "1:1", "no channels: add a \"channels:\" section"},
    {"bad_channels_empty.yaml", "3:11", "channels: no channel configured"},
    {"bad_success_code.yaml", "4:20", "channels.webhook.success: 600 is out of range (100..599)"},
    {"bad_backoff.yaml", "6:23",
     "channels.webhook.retry: max_backoff_ms (1000) is less than backoff_ms (5000)"},
    /* Insecure mode only on loopback (issue 31, finding 6). */
    {"bad_insecure_listen.yaml", "3:19",
     "dispatcher.api.insecure: true needs a loopback dispatcher.listen (127.0.0.1, [::1] or "
     "localhost), not \"0.0.0.0:8080\""},
    {"bad_mysql_tls_off.yaml", "3:14", "mysql.tls.ca_file is set but mysql.tls.enabled is false"},
    {"bad_mysql_tls_key.yaml", "2:35", "mysql.tls: cert_file and key_file go together"},
    {"bad_listen.yaml", "2:11",
     "dispatcher.listen: \"localhost\" is not a listen address host:port"},
    {"bad_log_level.yaml", "2:10",
     "log.level: unknown value \"verbose\" (expected: debug, info, warn, error)"},
    {"bad_bool.yaml", "4:12", "channels.webhook.http2: expected true or false, got \"maybe\""},
    {"bad_escape.yaml", "4:13",
     "channels.webhook.escape: unknown value \"html\" (expected: json, none)"},
    {"bad_method.yaml", "4:13", "unknown method \"DELETE\" (expected: GET, POST, PUT, PATCH)"},
    {"bad_redis_prefix.yaml", "2:11", "redis.prefix: must not be empty"},
    {"bad_redis_cluster_db.yaml", "3:7",
     "redis.db: 2 with redis.cluster true; a Redis Cluster has only database 0"},
    {"bad_redis_cluster_prefix.yaml", "2:11",
     "redis.prefix: \"herald{x}:\" has a brace; with redis.cluster true"},
    {"bad_redis_nodes.yaml", "5:7",
     "redis.nodes: \"10.0.0.2\" is not a server address host:port (expected host:port)"},
    {"bad_instance_long.yaml", "1:11", "instance: 101 bytes long; at most 100"},
    {"bad_header.yaml", "5:7", "\"Bad Name\" is not a valid header name"},
    {"bad_unclosed_quote.yaml", "4:1",
     "found unexpected end of stream while scanning a quoted scalar that starts at 3:10"},
    {"bad_unclosed_flow.yaml", "5:1",
     "did not find expected ',' or ']' while parsing a flow sequence that starts at 4:14"},
    {"bad_alias.yaml", "4:9", "aliases (*hook) are not supported"},
    {"bad_two_documents.yaml", "3:1", "only one YAML document is allowed"},
    {"bad_type.yaml", "3:11",
     "channels.push.type: unknown value \"gcm\" (expected: webhook, fcm, apns, smtp, webpush)"},
    {"bad_type_key.yaml", "5:5",
     "channels.push.method: only for type webhook channels (this "
     "one is fcm)"},
    {"bad_fcm_missing.yaml", "2:3",
     "channels.push: missing required key \"service_account_file\" (type fcm)"},
    {"bad_apns_key_id.yaml", "5:13",
     "channels.ios.key_id: \"abc\" is not 10 characters of A-Z 0-9"},
    {"bad_apns_url_template.yaml", "4:10", "channels.ios.url: not a template for type apns"},
    {"bad_push_type.yaml", "8:16",
     "channels.ios.push_type: unknown value \"voip\" (expected: alert, background)"},
    {"bad_webpush_subject.yaml", "5:20",
     "channels.web.vapid_subject: must be a mailto: or https:// URI without spaces"},
    {"bad_webpush_url.yaml", "4:10",
     "channels.web.url: type webpush takes no url (each subscription names its endpoint)"},
    {"bad_webpush_missing.yaml", "2:3",
     "channels.web: missing required key \"vapid_subject\" (type webpush)"},
    {"bad_smtp_scheme.yaml", "4:10", "channels.mail.url: type smtp takes smtp:// or smtps://"},
    {"bad_webhook_smtp_url.yaml", "3:10",
     "channels.hook.url: type webhook takes http:// or https://"},
    {"bad_batch_body.yaml", "5:17",
     "channels.hook.batch_body: must hold {{items}} once and no other {{...}}"},
    {"bad_batch_url.yaml", "4:12",
     "channels.hook: a batched channel's url may not name {{uid}} or {{user.*}} (one request "
     "carries many recipients)"},
    {"bad_smtp_from.yaml", "5:11",
     "channels.mail.from: \"Herald <a@example.com>\" is not an address local@domain"},
    {"bad_smtp_no_part.yaml", "6:11", "channels.mail: a mail needs a text or an html part"},
    {"bad_smtp_password_both.yaml", "7:20",
     "channels.mail: password and password_file are both set (keep one)"},
    {"bad_smtp_password_file.yaml", "6:20",
     "channels.mail.password_file: /nonexistent/herald-password: cannot open"},
    {"bad_smtp_unsubscribe.yaml", "6:23",
     "channels.mail.list_unsubscribe: \"http://example.com/u\" is neither an https:// URL nor "
     "a mailto: address"},
    {"bad_secret.yaml", "5:9",
     "channels.hook.signing_secrets: webhook secret must start with \"whsec_\""},
    {"bad_secret_three.yaml", "5:7", "channels.hook.signing_secrets: 3 secrets; at most 2"},
    {"bad_client_keys_three.yaml", "4:7", "dispatcher.api.client_keys: 3 keys; at most 2"},
    {"bad_track_key_short.yaml", "4:5",
     "events.tracking: the key is 9 bytes; at least 32 (e.g. openssl rand -hex 32)"},
    {"bad_track_no_key.yaml", "4:5",
     "events.tracking: base_url and a key (key or key_file) go together"},
    {"bad_track_url.yaml", "4:15", "events.tracking.base_url: \"ftp://x\" is no http(s):// URL"},
    {"bad_hooks_batch.yaml", "4:16", "events.hooks.batch_max: 0 is out of range (1..1000)"},
    {"bad_client_key_short.yaml", "4:9",
     "dispatcher.api.client_keys[0]: the secret of key \"k1\" is 9 bytes; at least 32"},
    {"bad_client_key_dup.yaml", "5:9", "dispatcher.api.client_keys[1].id: \"k1\" is used twice"},
    {"bad_client_key_both.yaml", "4:9",
     "dispatcher.api.client_keys[0]: give exactly one of secret and secret_file"},
    {"bad_client_key_id.yaml", "4:9",
     "dispatcher.api.client_keys[0].id: required, 1..32 of A-Z a-z 0-9 _ -"},
    {"bad_client_key_file.yaml", "5:22",
     "dispatcher.api.client_keys[0].secret_file: /nonexistent/herald-client-key: cannot open"},
    {"bad_token_short.yaml", "3:13",
     "dispatcher.api.tokens: token 1 is 11 bytes; at least 32 (e.g. openssl rand -hex 32)"},
    {"bad_tokens_file.yaml", "3:18",
     "dispatcher.api.tokens_file: /nonexistent/herald-tokens: cannot open"},
    {"bad_mysql_password_both.yaml", "3:18",
     "mysql: password and password_file are both set (keep one)"},
    {"bad_jwt_issuer.yaml", "4:7",
     "dispatcher.api.jwt: issuer and audience are required with a jwks_file"},
    {"bad_jwt_jwks.yaml", "4:18",
     "dispatcher.api.jwt.jwks_file: /nonexistent/herald-jwks.json: cannot open"},
};

static void test_bad(void **state)
{
    const bad_case *c = *state;
    char path[512], err[512], prefix[600];
    hr_config *cfg = (hr_config *)&cfg; /* must be reset to NULL */

    fixture(path, sizeof(path), c->file);
    assert_int_equal(access(path, R_OK), 0);
    assert_int_equal(hr_config_load(path, &cfg, err, sizeof(err)), -1);
    assert_null(cfg);
    snprintf(prefix, sizeof(prefix), "%s:%s: ", path, c->where);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || strstr(err, c->message) == NULL)
        fail_msg("%s\n  got:  %s\n  want: %s...%s", c->file, err, prefix, c->message);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s FIXTURE_DIR EXAMPLE_YAML\n", argv[0]);
        return 2;
    }
    fixture_dir = argv[1];
    example_path = argv[2];
    /* A developer's shell may export the stack's settings; they would win. */
    for (size_t i = 0; i < sizeof(override_vars) / sizeof(override_vars[0]); i++)
        unsetenv(override_vars[i]);
    unsetenv("HERALD_TEST_NOT_SET");

    enum { NBAD = sizeof(bad_cases) / sizeof(bad_cases[0]) };
    struct CMUnitTest tests[12 + NBAD] = {
        cmocka_unit_test(test_minimal),       cmocka_unit_test(test_example),
        cmocka_unit_test(test_full),          cmocka_unit_test(test_env_expansion),
        cmocka_unit_test(test_env_overrides), cmocka_unit_test(test_cannot_open),
        cmocka_unit_test(test_buffer),        cmocka_unit_test(test_types),
        cmocka_unit_test(test_redis_cluster), cmocka_unit_test(test_secret_files),
        cmocka_unit_test(test_jwt_section),   cmocka_unit_test(test_provider_http),
    };
    size_t n = 12;
    for (size_t i = 0; i < NBAD; i++) {
        tests[n].name = bad_cases[i].file;
        tests[n].test_func = test_bad;
        tests[n].initial_state = (void *)&bad_cases[i];
        n++;
    }
    return _cmocka_run_group_tests("config", tests, n, NULL, NULL);
}
