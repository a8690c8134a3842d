/* itest: shared helpers for herald's integration tests (see itest.h).
 *
 * The unique suffix "<pid>:<rand>" is drawn once per process, so every
 * itest_config() of one test names the same prefix, topic and group, and
 * two tests started in the same second never collide. */
#include "itest.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hr_kafka.h"
#include "hr_log.h"
#include "hr_migrate.h"
#include "hr_redis.h"

#define ITEST_TOPIC_PARTITIONS 12
#define ITEST_TOPIC_TIMEOUT_MS 30000
#define ITEST_SCAN_ROUNDS 10000

static const char *itest_path(void)
{
    const char *path = getenv("HERALD_TEST_CONFIG");

    if (path == NULL || *path == '\0') {
        fprintf(stderr, "itest: HERALD_TEST_CONFIG is not set; "
                        "start the stack (deploy/local/stack up) and export it -- skipping\n");
        exit(77);
    }
    return path;
}

hr_config *itest_config_shared(void)
{
    char errstr[512];
    hr_config *cfg = NULL;

    if (hr_config_load(itest_path(), &cfg, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "itest: %s\n", errstr);
        exit(1);
    }
    return cfg;
}

static unsigned itest_random(void)
{
    static unsigned value;
    static bool drawn;

    if (!drawn) {
        if (getrandom(&value, sizeof value, 0) != (ssize_t)sizeof value)
            value = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
        drawn = true;
    }
    return value;
}

hr_config *itest_config(void)
{
    hr_config *cfg = itest_config_shared();
    char buf[128];
    long pid = (long)getpid();
    unsigned rnd = itest_random();

    snprintf(buf, sizeof buf, "hrtest:%ld:%08x:", pid, rnd);
    itest_set_str(&cfg->redis.prefix, buf);
    snprintf(buf, sizeof buf, "herald.test.%ld.%08x", pid, rnd);
    itest_set_str(&cfg->kafka.topic, buf);
    snprintf(buf, sizeof buf, "herald-test-%ld-%08x", pid, rnd);
    itest_set_str(&cfg->kafka.group, buf);
    /* Several daemons of several tests run at once: each HTTP server takes
     * any free port instead of the stack's fixed ones. */
    itest_set_str(&cfg->dispatcher.listen, "127.0.0.1:0");
    itest_set_str(&cfg->dispatcher.probe_listen, "127.0.0.1:0");
    itest_set_str(&cfg->worker.listen, "127.0.0.1:0");
    return cfg;
}

void itest_set_str(char **field, const char *value)
{
    char *copy = strdup(value);

    if (copy == NULL) {
        fprintf(stderr, "itest: out of memory\n");
        exit(1);
    }
    free(*field);
    *field = copy;
}

int64_t itest_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void itest_free_ports(int *ports, size_t n)
{
    char cmd[sizeof ITEST_PORTS_SCRIPT + 32];
    size_t got = 0;
    FILE *f;
    int rc;

    /* The Python helper, not a bind(0) here: it claims each port in the
     * registry that every test process of this user shares, so a Python
     * test running beside this one (CI's cluster step runs beside the fault
     * matrix) is never handed a port this test is about to bind. */
    snprintf(cmd, sizeof cmd, "python3 '%s' %zu", ITEST_PORTS_SCRIPT, n);
    f = popen(cmd, "r");
    if (f == NULL) {
        fprintf(stderr, "itest: cannot run %s: %s\n", cmd, strerror(errno));
        exit(1);
    }
    while (got < n && fscanf(f, "%d", &ports[got]) == 1 && ports[got] > 0 && ports[got] < 65536)
        got++;
    rc = pclose(f);
    if (got != n || rc != 0) {
        fprintf(stderr, "itest: %s gave %zu of %zu ports (exit status %d)\n", cmd, got, n, rc);
        exit(1);
    }
}

bool itest_wait_until(bool (*fn)(void *ctx), void *ctx, int timeout_ms)
{
    int64_t deadline = itest_now_ms() + timeout_ms;

    for (;;) {
        if (fn(ctx))
            return true;
        if (itest_now_ms() >= deadline)
            return false;
        usleep(20 * 1000);
    }
}

int itest_create_topic(const hr_config *cfg)
{
    char errstr[512];

    if (hr_kafka_ensure_topic(cfg, cfg->kafka.topic, ITEST_TOPIC_PARTITIONS, -1,
                              ITEST_TOPIC_TIMEOUT_MS, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "itest: create topic %s: %s\n", cfg->kafka.topic, errstr);
        return -1;
    }
    return 0;
}

rd_kafka_t *itest_consumer_join(const hr_config *cfg, int timeout_ms)
{
    char errstr[512];
    rd_kafka_conf_t *conf = hr_kafka_conf_new(cfg, HR_KAFKA_CONSUMER, errstr, sizeof errstr);
    rd_kafka_t *rk =
        conf != NULL ? rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr) : NULL;
    rd_kafka_topic_partition_list_t *topics;
    rd_kafka_resp_err_t err;

    if (rk == NULL) {
        if (conf != NULL)
            rd_kafka_conf_destroy(conf);
        fprintf(stderr, "itest: consumer: %s\n", errstr);
        return NULL;
    }
    rd_kafka_poll_set_consumer(rk);
    topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, cfg->kafka.topic, RD_KAFKA_PARTITION_UA);
    err = rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    for (int64_t end = itest_now_ms() + timeout_ms;
         err == RD_KAFKA_RESP_ERR_NO_ERROR && itest_now_ms() < end;) {
        rd_kafka_topic_partition_list_t *parts = NULL;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        bool assigned;

        if (m != NULL)
            rd_kafka_message_destroy(m);
        assigned = rd_kafka_assignment(rk, &parts) == RD_KAFKA_RESP_ERR_NO_ERROR && parts->cnt > 0;
        if (parts != NULL)
            rd_kafka_topic_partition_list_destroy(parts);
        if (assigned)
            return rk;
    }
    fprintf(stderr, "itest: consumer of %s: %s\n", cfg->kafka.topic,
            err != RD_KAFKA_RESP_ERR_NO_ERROR ? rd_kafka_err2str(err) : "no partitions in time");
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return NULL;
}

int itest_profiles_synced(hr_redis *r)
{
    char key[HR_KEY_MAX], err[256];
    redisReply *reply = hr_redis_cmdf(r, err, sizeof err, "SET %s 1 EX 86400",
                                      hr_key_user_synced(hr_redis_prefix(r), key, sizeof key));

    if (reply == NULL) {
        fprintf(stderr, "itest: %s: %s\n", key, err);
        return -1;
    }
    freeReplyObject(reply);
    return 0;
}

int itest_redis_setup(hr_config **cfg, hr_redis **rd)
{
    char errstr[512];

    *cfg = itest_config();
    if (hr_redis_connect(*cfg, rd, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "itest: redis connect: %s\n", errstr);
        return -1;
    }
    return 0;
}

void itest_redis_teardown(hr_config *cfg, hr_redis *rd)
{
    hr_redis_free(rd);
    itest_redis_cleanup(cfg);
    hr_config_free(cfg);
}

int itest_stores_setup(hr_config **cfg, hr_redis **rd, hr_mysql **db)
{
    char errstr[512];
    int applied;

    if (itest_redis_setup(cfg, rd) != 0)
        return -1;
    if (hr_mysql_connect(*cfg, db, errstr, sizeof errstr) != 0 ||
        hr_migrate_apply(*db, hr_sql_files, HR_SQL__COUNT, &applied, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "itest: mysql: %s\n", errstr);
        return -1;
    }
    return 0;
}

void itest_stores_teardown(hr_config *cfg, hr_redis *rd, hr_mysql *db, const char *table,
                           int64_t first, int64_t last)
{
    char errstr[512], sql[128];

    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE uid BETWEEN ? AND ?", table);
    if (db != NULL && hr_mysql_exec(db, sql, (hr_mysql_param[]){HR_P_I64(first), HR_P_I64(last)}, 2,
                                    NULL, NULL, NULL, errstr, sizeof errstr) != 0)
        fprintf(stderr, "itest: cleanup of %s: %s\n", table, errstr);
    hr_mysql_free(db);
    itest_redis_teardown(cfg, rd);
}

int64_t itest_sql_i64(hr_mysql *db, const char *sql, size_t col)
{
    char errstr[512];
    hr_mysql_rows *rows = NULL;
    int64_t n = -1;

    if (hr_mysql_query(db, sql, NULL, 0, &rows, errstr, sizeof errstr) != 0)
        fprintf(stderr, "itest: %s: %s\n", sql, errstr);
    else if (rows->nrows < 1 || hr_mysql_cell(rows, 0, col) == NULL)
        fprintf(stderr, "itest: %s: no row\n", sql);
    else
        n = strtoll(hr_mysql_cell(rows, 0, col), NULL, 10);
    hr_mysql_rows_free(rows);
    return n;
}

int itest_sql_exec(hr_mysql *db, const char *sql, const hr_mysql_param *p, size_t n)
{
    char errstr[512];

    if (hr_mysql_exec(db, sql, p, n, NULL, NULL, NULL, errstr, sizeof errstr) == 0)
        return 0;
    fprintf(stderr, "itest: %s: %s\n", sql, errstr);
    return -1;
}

long itest_redis_cleanup(const hr_config *cfg)
{
    char errstr[512], pattern[256], cursor[32] = "0";
    hr_redis *r = NULL;
    redisReply *reply = NULL;
    long deleted = 0;
    int round;

    if (hr_redis_connect(cfg, &r, errstr, sizeof errstr) != 0)
        goto fail;
    snprintf(pattern, sizeof pattern, "%s*", cfg->redis.prefix);
    for (round = 0; round < ITEST_SCAN_ROUNDS; round++) {
        reply =
            hr_redis_cmdf(r, errstr, sizeof errstr, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (reply == NULL)
            goto fail;
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) {
            snprintf(errstr, sizeof errstr, "unexpected SCAN reply");
            goto fail;
        }
        snprintf(cursor, sizeof cursor, "%s", reply->element[0]->str);
        redisReply *keys = reply->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            redisReply *del = hr_redis_cmdf(r, errstr, sizeof errstr, "DEL %b",
                                            keys->element[i]->str, keys->element[i]->len);
            if (del == NULL)
                goto fail;
            deleted += del->integer;
            freeReplyObject(del);
        }
        freeReplyObject(reply);
        reply = NULL;
        if (strcmp(cursor, "0") == 0)
            break;
    }
    hr_redis_free(r);
    return deleted;

fail:
    fprintf(stderr, "itest: redis cleanup of %s: %s\n", cfg->redis.prefix, errstr);
    freeReplyObject(reply);
    hr_redis_free(r);
    return -1;
}

/* YAML double-quoted scalar: backslash, quote and control bytes escaped. */
static void itest_yaml_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s != NULL && *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void itest_yaml_kv(FILE *f, const char *indent, const char *key, const char *value)
{
    fprintf(f, "%s%s: ", indent, key);
    itest_yaml_str(f, value);
    fputc('\n', f);
}

static void itest_yaml_map(FILE *f, const char *indent, const char *key, const hr_kv *kv, size_t n)
{
    fprintf(f, "%s%s:%s\n", indent, key, n == 0 ? " {}" : "");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s  ", indent);
        itest_yaml_str(f, kv[i].key);
        fputs(": ", f);
        itest_yaml_str(f, kv[i].value);
        fputc('\n', f);
    }
}

static const char *itest_level_name(int level)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};

    return level >= HR_LOG_DEBUG && level <= HR_LOG_ERROR ? names[level] : "info";
}

static void itest_yaml_channel(FILE *f, const hr_channel *ch)
{
    fprintf(f, "  ");
    itest_yaml_str(f, ch->name);
    fputs(":\n", f);
    itest_yaml_kv(f, "    ", "url", ch->url);
    itest_yaml_kv(f, "    ", "method", ch->method);
    itest_yaml_map(f, "    ", "headers", ch->headers, ch->nheaders);
    itest_yaml_kv(f, "    ", "body", ch->body);
    fprintf(f, "    concurrency: %d\n", ch->concurrency);
    fprintf(f, "    rate_limit: %ld\n", ch->rate_limit);
    fprintf(f, "    timeout_ms: %d\n", ch->timeout_ms);
    fprintf(f, "    http2: %s\n", ch->http2 ? "true" : "false");
    fprintf(f, "    retry: {max_attempts: %d, backoff_ms: %d, max_backoff_ms: %d}\n",
            ch->retry_max_attempts, ch->retry_backoff_ms, ch->retry_max_backoff_ms);
    fputs("    success: [", f);
    for (size_t i = 0; i < ch->nsuccess; i++)
        fprintf(f, "%s%d", i ? ", " : "", ch->success[i]);
    fputs("]\n", f);
    fprintf(f, "    escape: %s\n", ch->json_escape ? "json" : "none");
    fprintf(f, "    throttle: %s\n",
            ch->throttle_mode == HR_THROTTLE_SHADOW ? "shadow" : "enforce");
    if (ch->ca_file != NULL)
        itest_yaml_kv(f, "    ", "ca_file", ch->ca_file);
    fprintf(f, "    tls_verify: %s\n", ch->tls_verify ? "true" : "false");
}

static void itest_yaml_emit(FILE *f, const hr_config *cfg)
{
    fputs("# written by tests/integration/itest.c\n", f);
    itest_yaml_kv(f, "", "instance", cfg->instance);
    fprintf(f, "log: {level: %s, format: %s}\n", itest_level_name(cfg->log.level),
            cfg->log.format == HR_LOG_FORMAT_JSON ? "json" : "logfmt");

    fputs("mysql:\n", f);
    itest_yaml_kv(f, "  ", "host", cfg->mysql.host);
    fprintf(f, "  port: %d\n", cfg->mysql.port);
    itest_yaml_kv(f, "  ", "user", cfg->mysql.user);
    itest_yaml_kv(f, "  ", "password", cfg->mysql.password);
    itest_yaml_kv(f, "  ", "database", cfg->mysql.database);
    fprintf(f, "  connect_timeout_s: %d\n", cfg->mysql.connect_timeout_s);

    fputs("redis:\n", f);
    itest_yaml_kv(f, "  ", "host", cfg->redis.host);
    fprintf(f, "  port: %d\n", cfg->redis.port);
    itest_yaml_kv(f, "  ", "password", cfg->redis.password);
    itest_yaml_kv(f, "  ", "prefix", cfg->redis.prefix);
    fprintf(f, "  db: %d\n  timeout_ms: %d\n", cfg->redis.db, cfg->redis.timeout_ms);
    fprintf(f, "  cluster: %s\n  nodes: [", cfg->redis.cluster ? "true" : "false");
    for (size_t i = 0; i < cfg->redis.nnodes; i++) {
        fputs(i ? ", " : "", f);
        itest_yaml_str(f, cfg->redis.nodes[i]);
    }
    fputs("]\n", f);

    fputs("kafka:\n", f);
    itest_yaml_kv(f, "  ", "brokers", cfg->kafka.brokers);
    itest_yaml_kv(f, "  ", "topic", cfg->kafka.topic);
    itest_yaml_kv(f, "  ", "group", cfg->kafka.group);
    itest_yaml_map(f, "  ", "properties", cfg->kafka.properties, cfg->kafka.nproperties);

    fputs("dispatcher:\n", f);
    itest_yaml_kv(f, "  ", "listen", cfg->dispatcher.listen);
    itest_yaml_kv(f, "  ", "probe_listen", cfg->dispatcher.probe_listen);
    fputs("  api:\n    tokens: [", f);
    for (size_t i = 0; i < cfg->dispatcher.api.ntokens; i++) {
        fputs(i ? ", " : "", f);
        itest_yaml_str(f, cfg->dispatcher.api.tokens[i]);
    }
    fputs("]\n", f);
    fprintf(f, "    max_body_bytes: %ld\n    max_ids: %d\n    insecure: %s\n    threads: %d\n",
            cfg->dispatcher.api.max_body_bytes, cfg->dispatcher.api.max_ids,
            cfg->dispatcher.api.insecure ? "true" : "false", cfg->dispatcher.api.threads);
    fprintf(f, "  scan_interval_ms: %d\n  timer_interval_ms: %d\n  poller_interval_ms: %d\n",
            cfg->dispatcher.scan_interval_ms, cfg->dispatcher.timer_interval_ms,
            cfg->dispatcher.poller_interval_ms);
    fprintf(f, "  poller_grace_ms: %d\n  horizon_s: %d\n  lease_s: %d\n",
            cfg->dispatcher.poller_grace_ms, cfg->dispatcher.horizon_s, cfg->dispatcher.lease_s);
    fprintf(f, "  redelivery_timeout_s: %d\n  sweep_interval_ms: %d\n  refill_batch: %d\n",
            cfg->dispatcher.redelivery_timeout_s, cfg->dispatcher.sweep_interval_ms,
            cfg->dispatcher.refill_batch);
    fprintf(f, "  chunks_ahead: %d\n", cfg->dispatcher.chunks_ahead);

    fputs("worker:\n", f);
    itest_yaml_kv(f, "  ", "listen", cfg->worker.listen);
    fprintf(f, "  ack_batch: %d\n  delivery_log: %s\n  reporter_queue: %d\n", cfg->worker.ack_batch,
            cfg->worker.delivery_log ? "true" : "false", cfg->worker.reporter_queue);
    fprintf(f, "  reporter_batch: %d\n  max_chunks_in_flight: %d\n  lease_ms: %d\n",
            cfg->worker.reporter_batch, cfg->worker.max_chunks_in_flight, cfg->worker.lease_ms);
    fprintf(f, "  shutdown_grace_ms: %d\n", cfg->worker.shutdown_grace_ms);

    fputs("channels:\n", f);
    for (size_t i = 0; i < cfg->nchannels; i++)
        itest_yaml_channel(f, &cfg->channels[i]);
}

int itest_write_config(const hr_config *cfg, char *path, size_t len)
{
    char tmpl[] = "/tmp/herald-itest-XXXXXX.yaml";
    FILE *f;
    bool bad;
    int fd = mkstemps(tmpl, 5);

    if (fd < 0)
        goto fail;
    f = fdopen(fd, "w");
    if (f == NULL) {
        close(fd);
        goto fail_unlink;
    }
    itest_yaml_emit(f, cfg);
    bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad)
        goto fail_unlink;
    if ((size_t)snprintf(path, len, "%s", tmpl) >= len) {
        errno = ENAMETOOLONG;
        goto fail_unlink;
    }
    return 0;

fail_unlink:
    unlink(tmpl);
fail:
    fprintf(stderr, "itest: write config: %s\n", strerror(errno));
    return -1;
}

pid_t itest_spawn(char *const argv[], const char *logfile)
{
    pid_t pid = fork();

    if (pid != 0) {
        if (pid < 0)
            fprintf(stderr, "itest: fork: %s\n", strerror(errno));
        return pid;
    }
    if (logfile != NULL) {
        int fd = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) {
            fprintf(stderr, "itest: %s: %s\n", logfile, strerror(errno));
            _exit(127);
        }
    }
    execvp(argv[0], argv);
    fprintf(stderr, "itest: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int itest_kill(pid_t pid, int sig)
{
    return kill(pid, sig) == 0 ? 0 : -1;
}

int itest_wait_exit(pid_t pid, int timeout_ms, int *status)
{
    int64_t deadline = itest_now_ms() + timeout_ms;
    int st;

    for (;;) {
        pid_t got = waitpid(pid, &st, WNOHANG);
        if (got == pid) {
            if (status != NULL)
                *status = st;
            return 0;
        }
        if (got < 0 || itest_now_ms() >= deadline)
            return -1;
        usleep(10 * 1000);
    }
}
