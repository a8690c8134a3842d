/* Integration test of hr_redis and hr_pipe on a real Redis Cluster
 * (hr_cluster, hr_slot): the test starts its own cluster of 3 masters and
 * 3 replicas (redis-server --cluster-enabled yes, requirepass/masterauth)
 * plus one standalone server on loopback ports of its own band
 * (16379 + HERALD_PORT_OFFSET + 700.., bus ports +10), creates it with
 * redis-cli --cluster create, and checks:
 *   - commands and pipelines over keys of every slot land on every master,
 *     and hr_slot agrees with CLUSTER KEYSLOT;
 *   - scripts run on every node, and a NOSCRIPT after SCRIPT FLUSH on every
 *     master is reloaded (single calls and pipelines, each run once);
 *   - SCAN with a tag goes to one node, without one walks every master;
 *   - a slot migration: ASK mid-migration (single calls, a pipeline, and
 *     one whose replies are built in an arena),
 *     then one MOVED after SETSLOT NODE and the new owner used from then on;
 *   - AUTH: a wrong or missing password is refused at connect, and a seed
 *     that is not a cluster is refused;
 *   - a failover: kill -9 of a master; calls for its slots fail cleanly
 *     (each within the timeout) until its replica is promoted, then
 *     succeed, as do pipelines over every slot.
 * It needs no stack (no HERALD_TEST_CONFIG), only redis-server and
 * redis-cli: without them it exits 77 (skipped).  Every wait is bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hr_keys.h"
#include "hr_pipe.h"
#include "hr_redis.h"
#include "hr_slot.h"
#include "itest.h"

#define NNODES 6          /* 3 masters + 3 replicas */
#define STANDALONE NNODES /* the index of the server without cluster mode */
#define PASS "herald-cluster-secret"
#define TIMEOUT_MS 2000 /* redis.timeout_ms of the client under test */
#define NKEYS 3000

static int base_port;
static char dir[] = "/tmp/hrtest-cluster-XXXXXX";
static bool dir_made; /* mkdtemp made DIR: teardown removes it */
static pid_t pids[NNODES + 1];
static hr_redis *rn[NNODES + 1]; /* one single-node client per server */
static hr_redis *rc;             /* the cluster client under test */
static char errstr[512];

static int node_port(int i)
{
    return base_port + i;
}

/* A client from a config text: single node HOST:PORT, or a cluster with
 * the seed list SEEDS (a YAML flow sequence) when SEEDS is not NULL. */
static int connect_client(int port, const char *seeds, const char *password, hr_redis **out)
{
    char text[1024];
    hr_config *cfg = NULL;
    int rc_;

    snprintf(text, sizeof text,
             "redis:\n  host: 127.0.0.1\n  port: %d\n  password: \"%s\"\n  prefix: \"hc:\"\n"
             "  timeout_ms: %d\n  cluster: %s\n  nodes: %s\n"
             "channels:\n  webhook: {url: \"http://127.0.0.1/\"}\n",
             port, password, TIMEOUT_MS, seeds != NULL ? "true" : "false",
             seeds != NULL ? seeds : "[]");
    if (hr_config_load_buffer("test_cluster", text, strlen(text), &cfg, errstr, sizeof errstr) != 0)
        fail_msg("config: %s", errstr);
    rc_ = hr_redis_connect(cfg, out, errstr, sizeof errstr);
    hr_config_free(cfg);
    return rc_;
}

/* A command on server I directly (no routing): the reply, NULL on error. */
static redisReply *on_node(int i, const char *fmt, ...)
{
    va_list ap;
    redisReply *reply;

    if (rn[i] == NULL && connect_client(node_port(i), NULL, PASS, &rn[i]) != 0)
        return NULL;
    va_start(ap, fmt);
    reply = hr_redis_vcmdf(rn[i], errstr, sizeof errstr, fmt, ap);
    va_end(ap);
    return reply;
}

static long long reply_int(redisReply *reply)
{
    long long v;

    if (reply == NULL)
        fail_msg("%s", errstr);
    v = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    freeReplyObject(reply);
    return v;
}

/* "field:value" of an INFO-like text, as an integer; -1 when absent. */
static long long info_field(const char *text, const char *field)
{
    const char *p = strstr(text, field);

    return p != NULL ? strtoll(p + strlen(field), NULL, 10) : -1;
}

/* The index of the server with client port PORT, or -1. */
static int node_of_port(long long port)
{
    for (int i = 0; i < NNODES; i++)
        if (node_port(i) == port)
            return i;
    return -1;
}

/* The master of SLOT and (when REPLICA is not NULL) its first replica, from
 * CLUSTER SLOTS on server ASK. */
static int owner_of(int ask, int slot, int *replica)
{
    redisReply *reply = on_node(ask, "CLUSTER SLOTS");
    int owner = -1;

    if (reply == NULL)
        fail_msg("CLUSTER SLOTS: %s", errstr);
    for (size_t i = 0; i < reply->elements; i++) {
        redisReply *r = reply->element[i];
        if (slot < r->element[0]->integer || slot > r->element[1]->integer)
            continue;
        owner = node_of_port(r->element[2]->element[1]->integer);
        if (replica != NULL)
            *replica = r->elements > 3 ? node_of_port(r->element[3]->element[1]->integer) : -1;
    }
    freeReplyObject(reply);
    return owner;
}

/* The three masters' indexes, in slot order. */
static void masters(int m[3])
{
    m[0] = owner_of(0, 0, NULL);
    m[1] = owner_of(0, 8000, NULL);
    m[2] = owner_of(0, 16383, NULL);
    assert_true(m[0] >= 0 && m[1] >= 0 && m[2] >= 0);
    assert_true(m[0] != m[1] && m[1] != m[2] && m[0] != m[2]);
}

static int write_conf(int i, bool cluster)
{
    char path[128], sub[96];
    FILE *f;

    snprintf(sub, sizeof sub, "%s/n%d", dir, i);
    if (mkdir(sub, 0700) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/redis.conf", sub);
    f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "bind 127.0.0.1\nport %d\ndir %s\nlogfile %s/redis.log\n", node_port(i), sub, sub);
    fprintf(f, "save \"\"\nappendonly no\nrequirepass %s\nmasterauth %s\n", PASS, PASS);
    if (cluster)
        fprintf(f,
                "cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-port %d\n"
                "cluster-node-timeout 2000\n",
                node_port(i) + 10);
    return fclose(f);
}

static bool all_up(void *ctx)
{
    (void)ctx;
    for (int i = 0; i <= NNODES; i++) {
        redisReply *reply = on_node(i, "PING");
        if (reply == NULL) {
            hr_redis_free(rn[i]);
            rn[i] = NULL;
            return false;
        }
        freeReplyObject(reply);
    }
    return true;
}

/* Every cluster node says the cluster is ok and knows all six, and every
 * master's replica synced. */
static bool cluster_ok(void *ctx)
{
    (void)ctx;
    for (int i = 0; i < NNODES; i++) {
        redisReply *reply = on_node(i, "CLUSTER INFO");
        bool ok;

        if (reply == NULL)
            return false;
        ok = strstr(reply->str, "cluster_state:ok") != NULL &&
             info_field(reply->str, "cluster_known_nodes:") == NNODES &&
             info_field(reply->str, "cluster_slots_assigned:") == HR_SLOT_COUNT;
        freeReplyObject(reply);
        if (!ok)
            return false;
    }
    /* and every master has a replica that synced (CLUSTER SLOTS lists a
     * replica only once it reported an offset) */
    redisReply *slots = on_node(0, "CLUSTER SLOTS");
    bool synced = slots != NULL && slots->elements > 0;
    for (size_t i = 0; synced && i < slots->elements; i++)
        synced = slots->element[i]->elements > 3;
    freeReplyObject(slots);
    return synced;
}

static int teardown(void **state);

/* FILE's text to stderr (what redis-cli said, before the files go). */
static void print_file(const char *path)
{
    char buf[4096];
    size_t n;
    FILE *f = fopen(path, "r");

    while (f != NULL && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, stderr);
    if (f != NULL)
        fclose(f);
}

/* Starts the servers and creates the cluster; on failure stops what it
 * started. */
static int setup(void **state)
{
    char *argv[3 + NNODES + 4], ports[NNODES][32], conf[128], log[128], *env;
    int status, n = 0;
    pid_t create;

    (void)state;
    env = getenv("HERALD_PORT_OFFSET");
    base_port = 16379 + (env != NULL ? atoi(env) : 0) + 700;
    if (mkdtemp(dir) == NULL)
        return -1;
    dir_made = true;
    for (int i = 0; i <= NNODES; i++) {
        char *srv[] = {"redis-server", conf, NULL};

        if (write_conf(i, i != STANDALONE) != 0)
            goto fail;
        snprintf(conf, sizeof conf, "%s/n%d/redis.conf", dir, i);
        pids[i] = itest_spawn(srv, NULL);
        if (pids[i] < 0)
            goto fail;
    }
    if (!itest_wait_until(all_up, NULL, 15000)) {
        fprintf(stderr, "test_cluster: servers not up: %s\n", errstr);
        goto fail;
    }
    /* the password reaches redis-cli through its environment, not argv */
    setenv("REDISCLI_AUTH", PASS, 1);
    argv[n++] = "redis-cli";
    argv[n++] = "--cluster";
    argv[n++] = "create";
    for (int i = 0; i < NNODES; i++) {
        snprintf(ports[i], sizeof ports[i], "127.0.0.1:%d", node_port(i));
        argv[n++] = ports[i];
    }
    argv[n++] = "--cluster-replicas";
    argv[n++] = "1";
    argv[n++] = "--cluster-yes";
    argv[n] = NULL;
    snprintf(log, sizeof log, "%s/create.log", dir);
    create = itest_spawn(argv, log);
    if (create < 0 || itest_wait_exit(create, 60000, &status) != 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "test_cluster: redis-cli --cluster create failed:\n");
        print_file(log);
        goto fail;
    }
    if (!itest_wait_until(cluster_ok, NULL, 30000)) {
        fprintf(stderr, "test_cluster: cluster not ok: %s\n", errstr);
        goto fail;
    }
    return 0;

fail:
    teardown(state);
    return -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Safe to run twice (a failed setup runs it, and cmocka may run it again):
 * everything it frees or stops is forgotten. */
static int teardown(void **state)
{
    (void)state;
    hr_redis_free(rc);
    rc = NULL;
    for (int i = 0; i <= NNODES; i++) {
        hr_redis_free(rn[i]);
        rn[i] = NULL;
        if (pids[i] > 0 && itest_kill(pids[i], SIGKILL) == 0)
            itest_wait_exit(pids[i], 5000, NULL);
        pids[i] = 0;
    }
    if (dir_made)
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    dir_made = false;
    return 0;
}

/* AUTH: a wrong or missing password, and a seed that is not a cluster, are
 * refused at connect; the cluster client connects through a dead seed and
 * a replica. */
static void test_connect(void **state)
{
    char seeds[128];
    hr_redis *r = NULL;

    (void)state;
    snprintf(seeds, sizeof seeds, "[\"127.0.0.1:%d\"]", node_port(0));
    assert_int_equal(connect_client(node_port(0), seeds, "wrong", &r), -1);
    assert_null(r);
    assert_non_null(strstr(errstr, "AUTH"));
    assert_int_equal(connect_client(node_port(0), seeds, "", &r), -1);
    assert_non_null(strstr(errstr, "NOAUTH"));
    snprintf(seeds, sizeof seeds, "[\"127.0.0.1:%d\"]", node_port(STANDALONE));
    assert_int_equal(connect_client(node_port(0), seeds, PASS, &r), -1);
    assert_non_null(strstr(errstr, "cluster support disabled"));

    /* the first seed has no server; the second is whatever node 4 is */
    snprintf(seeds, sizeof seeds, "[\"127.0.0.1:%d\", \"127.0.0.1:%d\"]", node_port(9),
             node_port(4));
    if (connect_client(node_port(0), seeds, PASS, &rc) != 0)
        fail_msg("connect: %s", errstr);
}

/* Keys of every slot: SET, GET, spread over the three masters; hr_slot
 * agrees with CLUSTER KEYSLOT; keyless commands work. */
static void test_commands(void **state)
{
    char key[64];
    int m[3];
    long long total = 0;
    int64_t ms;

    (void)state;
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof key, "hc:k:%d", i);
        redisReply *reply = hr_redis_cmdf(rc, errstr, sizeof errstr, "SET %s %d", key, i);
        if (reply == NULL)
            fail_msg("SET %s: %s", key, errstr);
        freeReplyObject(reply);
    }
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof key, "hc:k:%d", i);
        redisReply *reply = hr_redis_cmdf(rc, errstr, sizeof errstr, "GET %s", key);
        if (reply == NULL)
            fail_msg("GET %s: %s", key, errstr);
        assert_int_equal(atoi(reply->str), i);
        freeReplyObject(reply);
    }
    masters(m);
    for (int j = 0; j < 3; j++) {
        long long n = reply_int(on_node(m[j], "DBSIZE"));
        print_message("master %d (port %d): %lld keys\n", m[j], node_port(m[j]), n);
        assert_true(n > NKEYS / 6);
        total += n;
    }
    assert_int_equal(total, NKEYS);
    /* the CRC and the tag rules, against the server's own */
    {
        static const char *const keys[] = {"foo",
                                           "{user1000}.following",
                                           "foo{}{bar}",
                                           "foo{{bar}}zap",
                                           "foo{bar}{zap}",
                                           "hc:{t42}:subs",
                                           "hc:share:{c:web}:tasks",
                                           "a{b",
                                           "",
                                           "}{x}"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            assert_int_equal(reply_int(on_node(0, "CLUSTER KEYSLOT %s", keys[i])),
                             hr_slot_of_key(keys[i], strlen(keys[i])));
        for (int i = 0; i < 500; i++) {
            snprintf(key, sizeof key, "hc:user:%d", i * 7919);
            assert_int_equal(reply_int(on_node(0, "CLUSTER KEYSLOT %s", key)),
                             hr_slot_of_key(key, strlen(key)));
        }
    }
    assert_int_equal(hr_redis_time_ms(rc, &ms, errstr, sizeof errstr), 0);
    assert_true(llabs((long long)(ms - itest_now_ms())) < 5000);
    /* a multi-key command over two slots is Redis's CROSSSLOT, passed on */
    assert_null(hr_redis_cmdf(rc, errstr, sizeof errstr, "DEL hc:k:1 hc:k:2"));
    assert_non_null(strstr(errstr, "CROSSSLOT"));
}

/* Waits out the last 10 s of Redis's hour, so that the rate-limit calls
 * that follow (well under 10 s) count against one one-hour window. */
static void rl_hour_start(void)
{
    int64_t ms = 0;

    assert_int_equal(hr_redis_time_ms(rc, &ms, errstr, sizeof errstr), 0);
    if (3600000 - ms % 3600000 < 10000)
        usleep((useconds_t)(3600000 - ms % 3600000 + 100) * 1000);
}

/* ratelimit.lua (one-hour windows) on the counter of task T; the units
 * granted. */
static long long rl_eval(int t, const char *limit, const char *want)
{
    char key[HR_KEY_MAX], scope[32];
    const char *argv[] = {key, limit, want, "3600000"};
    redisReply *reply;
    long long v;

    snprintf(scope, sizeof scope, "task%d", t);
    hr_key_ratelimit(hr_redis_prefix(rc), key, sizeof key, scope);
    reply = hr_redis_eval(rc, HR_LUA_RATELIMIT, 1, 4, argv, NULL, errstr, sizeof errstr);
    if (reply == NULL)
        fail_msg("eval task %d: %s", t, errstr);
    assert_int_equal(reply->type, REDIS_REPLY_ARRAY);
    v = reply->element[0]->integer;
    freeReplyObject(reply);
    return v;
}

static void flush_scripts(void)
{
    int m[3];

    masters(m);
    for (int j = 0; j < 3; j++) {
        redisReply *reply = on_node(m[j], "SCRIPT FLUSH");
        assert_non_null(reply);
        freeReplyObject(reply);
    }
}

/* Scripts on every node; after SCRIPT FLUSH on every master each call is
 * reloaded and runs once (the counters say so); a script over several
 * keys of one task's slot. */
static void test_scripts(void **state)
{
    enum { NT = 300 };
    char chunk[HR_KEY_MAX], stats[HR_KEY_MAX];
    int m[3];

    (void)state;
    rl_hour_start();
    for (int t = 0; t < NT; t++)
        assert_int_equal(rl_eval(t, "10", "7"), 7);
    masters(m);
    for (int j = 0; j < 3; j++) {
        /* every master ran scripts (loaded there on its first command) */
        redisReply *reply = on_node(m[j], "INFO commandstats");
        assert_non_null(reply);
        assert_true(info_field(reply->str, "cmdstat_evalsha:calls=") > 0);
        freeReplyObject(reply);
    }
    flush_scripts();
    for (int t = 0; t < NT; t++)
        assert_int_equal(rl_eval(t, "10", "7"), 3);
    for (int t = 0; t < NT; t++)
        assert_int_equal(rl_eval(t, "10", "1"), 0);

    /* ack.lua: SREM from a chunk and count in the stats hash, one slot */
    hr_key_chunk(hr_redis_prefix(rc), chunk, sizeof chunk, 31, 1);
    hr_key_task(hr_redis_prefix(rc), stats, sizeof stats, 31, HR_KEY_STATS);
    assert_int_equal(reply_int(hr_redis_cmdf(rc, errstr, sizeof errstr, "SADD %s 1 2 3", chunk)),
                     3);
    {
        const char *argv[] = {chunk, stats, "0", "sent", "1", "3"};
        redisReply *reply = hr_redis_eval(rc, HR_LUA_ACK, 2, 6, argv, NULL, errstr, sizeof errstr);
        if (reply == NULL)
            fail_msg("ack: %s", errstr);
        freeReplyObject(reply);
    }
    assert_int_equal(reply_int(hr_redis_cmdf(rc, errstr, sizeof errstr, "SCARD %s", chunk)), 1);
    redisReply *sent = hr_redis_cmdf(rc, errstr, sizeof errstr, "HGET %s sent", stats);
    assert_non_null(sent);
    assert_string_equal(sent->str, "2");
    freeReplyObject(sent);
}

/* A pipeline over every slot: replies in queue order; after SCRIPT FLUSH
 * on every master the script calls are replayed per node, once each. */
static void test_pipeline(void **state)
{
    enum { N = 1000 };
    char keys[N][32], hkeys[N][32], rlkeys[N][HR_KEY_MAX], vals[N][16];
    hr_pipe *pipe = hr_pipe_new(rc);
    redisReply *reply;

    (void)state;
    assert_non_null(pipe);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "hc:p:%d", i);
        snprintf(hkeys[i], sizeof hkeys[i], "hc:h:%d", i);
        snprintf(vals[i], sizeof vals[i], "%d", i);
        char scope[32];

        snprintf(scope, sizeof scope, "pipe%d", i);
        hr_key_ratelimit("hc:", rlkeys[i], sizeof rlkeys[i], scope);
    }
    rl_hour_start();
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            flush_scripts();
        for (int i = 0; i < N; i++) {
            const char *incr[] = {"INCR", keys[i]};
            const char *hset[] = {"HSET", hkeys[i], "f", vals[i]};
            const char *hget[] = {"HGET", hkeys[i], "f"};
            const char *rl[] = {rlkeys[i], "1000", "1", "3600000"};
            assert_int_equal(hr_pipe_cmd(pipe, 2, incr, NULL), 0);
            assert_int_equal(hr_pipe_cmd(pipe, 4, hset, NULL), 0);
            assert_int_equal(hr_pipe_cmd(pipe, 3, hget, NULL), 0);
            assert_int_equal(hr_pipe_eval(pipe, HR_LUA_RATELIMIT, 1, 4, rl, NULL), 0);
        }
        if (hr_pipe_exec(pipe, errstr, sizeof errstr) != 0)
            fail_msg("round %d: %s", round, errstr);
        for (int i = N - 1; i >= 0; i--) {
            reply = hr_pipe_reply(pipe, 4 * (size_t)i, errstr, sizeof errstr);
            assert_non_null(reply);
            assert_int_equal(reply->integer, round + 1);
            freeReplyObject(reply);
            reply = hr_pipe_reply(pipe, 4 * (size_t)i + 1, errstr, sizeof errstr);
            assert_non_null(reply);
            assert_int_equal(reply->integer, round == 0 ? 1 : 0);
            freeReplyObject(reply);
            reply = hr_pipe_reply(pipe, 4 * (size_t)i + 2, errstr, sizeof errstr);
            assert_non_null(reply);
            assert_string_equal(reply->str, vals[i]);
            freeReplyObject(reply);
            reply = hr_pipe_reply(pipe, 4 * (size_t)i + 3, errstr, sizeof errstr);
            if (reply == NULL)
                fail_msg("round %d eval %d: %s", round, i, errstr);
            assert_int_equal(reply->element[0]->integer, 1);
            freeReplyObject(reply);
        }
        hr_pipe_reset(pipe);
    }
    /* each script call ran exactly once per round */
    for (int i = 0; i < N; i += 97) {
        reply = hr_redis_cmdf(rc, errstr, sizeof errstr, "HGET %s n", rlkeys[i]);
        assert_non_null(reply);
        assert_string_equal(reply->str, "2");
        freeReplyObject(reply);
    }
    hr_pipe_free(pipe);
}

/* SCAN: with a hash tag, the keys of that slot; without one, every master
 * walked with the composite cursor; KEYS without a tag is refused. */
static void test_scan(void **state)
{
    char match[HR_KEY_MAX], cursor[64] = "0";
    static unsigned char seen[NKEYS];
    int rounds = 0, found = 0, chunks = 0;

    (void)state;
    for (int s = 1; s <= 50; s++) {
        char chunk[HR_KEY_MAX];
        hr_key_chunk("hc:", chunk, sizeof chunk, 77, s);
        freeReplyObject(hr_redis_cmdf(rc, errstr, sizeof errstr, "SADD %s x", chunk));
    }
    hr_key_chunks_match("hc:", match, sizeof match, 77);
    do {
        redisReply *reply =
            hr_redis_cmdf(rc, errstr, sizeof errstr, "SCAN %s MATCH %s COUNT 1000", cursor, match);
        if (reply == NULL)
            fail_msg("SCAN: %s", errstr);
        chunks += (int)reply->element[1]->elements;
        snprintf(cursor, sizeof cursor, "%s", reply->element[0]->str);
        freeReplyObject(reply);
    } while (strcmp(cursor, "0") != 0 && ++rounds < 1000);
    assert_int_equal(chunks, 50);

    rounds = 0;
    do {
        redisReply *reply =
            hr_redis_cmdf(rc, errstr, sizeof errstr, "SCAN %s MATCH hc:k:* COUNT 200", cursor);
        if (reply == NULL)
            fail_msg("SCAN: %s", errstr);
        for (size_t i = 0; i < reply->element[1]->elements; i++) {
            int k = atoi(reply->element[1]->element[i]->str + 5);
            assert_true(k >= 0 && k < NKEYS);
            found += !seen[k];
            seen[k] = 1;
        }
        snprintf(cursor, sizeof cursor, "%s", reply->element[0]->str);
        freeReplyObject(reply);
    } while (strcmp(cursor, "0") != 0 && ++rounds < 10000);
    assert_int_equal(found, NKEYS);

    assert_null(hr_redis_cmdf(rc, errstr, sizeof errstr, "KEYS hc:*"));
    assert_non_null(strstr(errstr, "needs every master"));
}

static void node_id(int i, char *out, size_t len)
{
    redisReply *reply = on_node(i, "CLUSTER MYID");

    assert_non_null(reply);
    snprintf(out, len, "%s", reply->str);
    freeReplyObject(reply);
}

static void ok_reply(redisReply *reply)
{
    if (reply == NULL)
        fail_msg("%s", errstr);
    freeReplyObject(reply);
}

static void assert_get(const char *key, const char *want)
{
    redisReply *reply = hr_redis_cmdf(rc, errstr, sizeof errstr, "GET %s", key);

    if (reply == NULL)
        fail_msg("GET %s: %s", key, errstr);
    assert_int_equal(reply->type, REDIS_REPLY_STRING);
    assert_string_equal(reply->str, want);
    freeReplyObject(reply);
}

/* The MOVED answers server I gave since its last CONFIG RESETSTAT. */
static long long moved_count(int i)
{
    redisReply *reply = on_node(i, "INFO errorstats");
    long long n;

    assert_non_null(reply);
    n = info_field(reply->str, "errorstat_MOVED:count=");
    freeReplyObject(reply);
    return n < 0 ? 0 : n;
}

/* GET K1 and K2, then SET K3 v3 when K3 is not NULL, in one pipeline
 * whose replies are built in ARENA (NULL: hiredis's own, freed here); the
 * GETs answer v1 and v2. */
static void pipe_migrating(hr_arena *arena, const char *k1, const char *k2, const char *k3)
{
    static const char *const want[] = {"v1", "v2"};
    const char *g1[] = {"GET", k1}, *g2[] = {"GET", k2}, *s3[] = {"SET", k3, "v3"};
    hr_pipe *pipe = hr_pipe_new(rc);
    size_t n = k3 != NULL ? 3 : 2;

    assert_non_null(pipe);
    hr_pipe_set_arena(pipe, arena);
    assert_int_equal(hr_pipe_cmd(pipe, 2, g1, NULL), 0);
    assert_int_equal(hr_pipe_cmd(pipe, 2, g2, NULL), 0);
    if (k3 != NULL)
        assert_int_equal(hr_pipe_cmd(pipe, 3, s3, NULL), 0);
    if (hr_pipe_exec(pipe, errstr, sizeof errstr) != 0)
        fail_msg("pipe: %s", errstr);
    for (size_t i = 0; i < n; i++) {
        redisReply *reply = hr_pipe_reply(pipe, i, errstr, sizeof errstr);

        if (reply == NULL)
            fail_msg("command %zu: %s", i, errstr);
        if (i < 2)
            assert_string_equal(reply->str, want[i]);
        if (arena == NULL)
            freeReplyObject(reply);
    }
    hr_pipe_free(pipe);
}

/* A slot migrated between masters: ASK while it moves (single calls and
 * a pipeline, a new key created on the target), then after SETSLOT NODE one
 * MOVED and the new owner from then on. */
static void test_migration(void **state)
{
    const char *k1 = "hc:{mig}:a", *k2 = "hc:{mig}:b", *k3 = "hc:{mig}:c";
    int slot = hr_slot_of_key("mig", 3), src, dst, m[3];
    char src_id[64], dst_id[64];
    hr_arena *arena;

    (void)state;
    ok_reply(hr_redis_cmdf(rc, errstr, sizeof errstr, "SET %s v1", k1));
    ok_reply(hr_redis_cmdf(rc, errstr, sizeof errstr, "SET %s v2", k2));
    masters(m);
    src = owner_of(0, slot, NULL);
    dst = src == m[0] ? m[1] : m[0];
    node_id(src, src_id, sizeof src_id);
    node_id(dst, dst_id, sizeof dst_id);
    ok_reply(on_node(dst, "CLUSTER SETSLOT %d IMPORTING %s", slot, src_id));
    ok_reply(on_node(src, "CLUSTER SETSLOT %d MIGRATING %s", slot, dst_id));
    ok_reply(on_node(src, "MIGRATE 127.0.0.1 %d %s 0 5000 AUTH %s KEYS %s", node_port(dst), "",
                     PASS, k1));

    /* k1 is on the target now: the source answers ASK */
    assert_get(k1, "v1");
    assert_get(k2, "v2");
    pipe_migrating(NULL, k1, k2, k3);
    /* the same reads with an arena (hr_pipe_set_arena): the ASK answer is
     * the arena's, so the read goes again from the map and is redirected
     * again; both replies are the arena's, freed with it */
    arena = hr_arena_new();
    assert_non_null(arena);
    pipe_migrating(arena, k1, k2, NULL);
    hr_arena_free(arena);
    /* the new key went to the target (which takes it after ASKING only) */
    ok_reply(on_node(dst, "ASKING"));
    assert_int_equal(reply_int(on_node(dst, "EXISTS %s", k3)), 1);

    ok_reply(on_node(src, "MIGRATE 127.0.0.1 %d %s 0 5000 AUTH %s KEYS %s", node_port(dst), "",
                     PASS, k2));
    for (int j = 0; j < 3; j++)
        ok_reply(on_node(m[j], "CLUSTER SETSLOT %d NODE %s", slot, dst_id));
    ok_reply(on_node(src, "CONFIG RESETSTAT"));
    for (int i = 0; i < 10; i++) {
        assert_get(k1, "v1");
        assert_get(k2, "v2");
        assert_get(k3, "v3");
    }
    /* one MOVED, then the map says the target */
    assert_int_equal(moved_count(src), 1);
    assert_int_equal(owner_of(src, slot, NULL), dst);
}

/* kill -9 of the master of a slot: calls for it fail, each within the
 * timeout, until the replica is promoted; then they succeed, and so does
 * a pipeline over every slot. */
/* Waits (at most 30 s) until every node but DEAD answers CLUSTER INFO with
 * cluster_state:ok. */
static void wait_cluster_ok(int dead)
{
    int64_t start = itest_now_ms();

    for (;;) {
        int ok = 0, live = 0;

        for (int i = 0; i < NNODES; i++) {
            redisReply *reply;

            if (i == dead)
                continue;
            live++;
            reply = on_node(i, "CLUSTER INFO");
            ok += reply != NULL && reply->type == REDIS_REPLY_STRING &&
                  strstr(reply->str, "cluster_state:ok") != NULL;
            freeReplyObject(reply);
        }
        if (ok == live)
            return;
        if (itest_now_ms() - start > 30000)
            fail_msg("cluster_state not ok on %d of %d live nodes after 30 s", live - ok, live);
        usleep(100 * 1000);
    }
}

static void test_failover(void **state)
{
    const char *key = "hc:{fo}:x";
    int slot = hr_slot_of_key("fo", 2), replica = -1, owner, fails = 0;
    int64_t start, worst = 0;
    bool ok = false;
    hr_pipe *pipe;

    (void)state;
    ok_reply(hr_redis_cmdf(rc, errstr, sizeof errstr, "SET %s before", key));
    owner = owner_of(0, slot, &replica);
    if (owner < 0 || replica < 0)
        fail_msg("slot %d: master %d, replica %d", slot, owner, replica);
    print_message("killing master %d (port %d); replica %d\n", owner, node_port(owner), replica);
    assert_int_equal(itest_kill(pids[owner], SIGKILL), 0);
    assert_int_equal(itest_wait_exit(pids[owner], 5000, NULL), 0);
    pids[owner] = 0;
    hr_redis_free(rn[owner]);
    rn[owner] = NULL;

    start = itest_now_ms();
    while (!ok && itest_now_ms() - start < 60000) {
        int64_t t0 = itest_now_ms(), took;
        redisReply *reply = hr_redis_cmdf(rc, errstr, sizeof errstr, "SET %s after", key);

        took = itest_now_ms() - t0;
        worst = took > worst ? took : worst;
        /* never past the timeout: a connect or a wait on CLUSTERDOWN is
         * bounded by redis.timeout_ms (+ slack for a loaded machine) */
        assert_true(took < TIMEOUT_MS + 3000);
        if (reply != NULL) {
            ok = true;
            freeReplyObject(reply);
        } else {
            assert_true(errstr[0] != '\0');
            if (fails++ % 10 == 0)
                print_message("  %lld ms: %s\n", (long long)(t0 - start), errstr);
            usleep(100 * 1000);
        }
    }
    print_message("back after %lld ms, %d failed calls, slowest %lld ms\n",
                  (long long)(itest_now_ms() - start), fails, (long long)worst);
    assert_true(ok);
    assert_true(fails > 0);
    assert_get(key, "after");
    assert_int_equal(owner_of(replica, slot, NULL), replica);

    /* Every slot again, single calls and a pipeline, once every live node
     * says the cluster is ok: until the others have taken in the
     * promotion, some answer CLUSTERDOWN for the dead master's slots, and
     * a batch gives up on them after one redis.timeout_ms (each reply
     * then says so: the callers check every reply). */
    wait_cluster_ok(owner);
    pipe = hr_pipe_new(rc);
    for (int i = 0; i < NKEYS; i += 3) {
        char k[32], v[16];
        const char *argv[] = {"SET", k, v};
        snprintf(k, sizeof k, "hc:k:%d", i);
        snprintf(v, sizeof v, "%d", -i);
        assert_int_equal(hr_pipe_cmd(pipe, 3, argv, NULL), 0);
    }
    if (hr_pipe_exec(pipe, errstr, sizeof errstr) != 0)
        fail_msg("pipe after failover: %s", errstr);
    for (size_t i = 0; i < hr_pipe_count(pipe); i++) {
        redisReply *reply = hr_pipe_reply(pipe, i, errstr, sizeof errstr);

        if (reply == NULL)
            fail_msg("pipe after failover, command %zu: %s", i, errstr);
        freeReplyObject(reply);
    }
    hr_pipe_free(pipe);
    for (int i = 0; i < NKEYS; i += 3) {
        char k[32], v[16];
        snprintf(k, sizeof k, "hc:k:%d", i);
        snprintf(v, sizeof v, "%d", -i);
        assert_get(k, v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connect),  cmocka_unit_test(test_commands),
        cmocka_unit_test(test_scripts),  cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_scan),     cmocka_unit_test(test_migration),
        cmocka_unit_test(test_failover),
    };

    if (system("command -v redis-server >/dev/null && command -v redis-cli >/dev/null") != 0) {
        fprintf(stderr, "test_cluster: redis-server or redis-cli missing: skipped\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
