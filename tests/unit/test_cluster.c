/* test_cluster: hr_slot (CRC16 and the hash tag rules against Redis's
 * published vectors, the key of a formatted command) and hr_cluster's
 * parsing (CLUSTER SLOTS replies, MOVED / ASK answers), without a server:
 * replies are built by hiredis's own reader from canned RESP bytes, and no
 * node is ever connected (hr_cluster connects on a node's first command). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "hr_cluster.h"
#include "hr_keys.h"
#include "hr_redis.h"
#include "hr_slot.h"

static int slot_of(const char *key)
{
    return hr_slot_of_key(key, strlen(key));
}

/* The reply hiredis reads from the RESP bytes TEXT. */
static redisReply *resp(const char *text)
{
    redisReader *reader = redisReaderCreate();
    void *reply = NULL;

    assert_non_null(reader);
    assert_int_equal(redisReaderFeed(reader, text, strlen(text)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(reader, &reply), REDIS_OK);
    assert_non_null(reply);
    redisReaderFree(reader);
    return reply;
}

/* The slot of the command formatted from ARGC C strings ARGV. */
static int command_slot(int argc, const char **argv)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, NULL), slot;

    assert_true(len > 0);
    slot = hr_slot_of_command(cmd, (size_t)len);
    redisFreeCommand(cmd);
    return slot;
}

/* hr_redis_format_argv writes the bytes hiredis's formatter writes: C
 * strings, lengths given (a NUL inside, an empty argument), many
 * arguments (lengths of two digits and more). */
static void test_format(void **state)
{
    const char *plain[] = {"HMGET", "herald:u:42", "_tz", "_quiet"};
    const char *bin[] = {"SET", "k\0ey", "", "value"};
    const size_t binlen[] = {3, 4, 0, 5};
    const char *many[120];
    char big[300];
    struct {
        int argc;
        const char **argv;
        const size_t *len;
    } cases[] = {{4, plain, NULL}, {4, bin, binlen}, {120, many, NULL}, {1, plain, NULL}};

    (void)state;
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (size_t i = 0; i < 120; i++)
        many[i] = i % 7 == 0 ? big : plain[i % 4];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *want = NULL, *got = NULL;
        int wlen = redisFormatCommandArgv(&want, cases[c].argc, cases[c].argv, cases[c].len);
        int glen = hr_redis_format_argv(cases[c].argc, cases[c].argv, cases[c].len, &got);

        assert_true(wlen > 0);
        assert_int_equal(glen, wlen);
        assert_memory_equal(got, want, (size_t)wlen);
        redisFreeCommand(want);
        redisFreeCommand(got);
    }
}

static void test_crc16(void **state)
{
    (void)state;
    /* the check value of CRC-16/XMODEM, quoted by the cluster spec */
    assert_int_equal(hr_slot_crc16("123456789", 9), 0x31C3);
    assert_int_equal(hr_slot_crc16("", 0), 0);
    /* CLUSTER KEYSLOT answers of a Redis 7.0 cluster */
    assert_int_equal(slot_of("foo"), 12182);
    assert_int_equal(slot_of("bar"), 5061);
    assert_int_equal(slot_of("hello"), 866);
    assert_int_equal(slot_of("123456789"), 0x31C3 % 16384);
}

/* The hash tag rules of the cluster spec, case by case. */
static void test_hash_tags(void **state)
{
    (void)state;
    assert_int_equal(slot_of("{user1000}.following"), slot_of("{user1000}.followers"));
    assert_int_equal(slot_of("{user1000}.following"), slot_of("user1000"));
    /* the first '{' and the first '}' after it */
    assert_int_equal(slot_of("foo{bar}{zap}"), slot_of("bar"));
    assert_int_equal(slot_of("foo{{bar}}zap"), slot_of("{bar"));
    /* an empty tag, or no '}' after the '{': the whole key */
    assert_int_equal(slot_of("foo{}{bar}"), hr_slot_crc16("foo{}{bar}", 10) % 16384);
    assert_int_not_equal(slot_of("foo{}{bar}"), slot_of("bar"));
    assert_int_equal(slot_of("foo{bar"), hr_slot_crc16("foo{bar", 7) % 16384);
    assert_int_equal(slot_of("}foo{bar}"), slot_of("bar"));
    /* a key with a NUL byte is hashed whole, past the NUL */
    assert_int_not_equal(hr_slot_of_key("a\0b", 3), hr_slot_of_key("a", 1));
}

/* herald's keys: one task's keys (and one channel's budget) share a slot,
 * other tasks spread. */
static void test_herald_keys(void **state)
{
    char a[HR_KEY_MAX], b[HR_KEY_MAX];
    int seen[3] = {-1, -1, -1};

    (void)state;
    hr_key_task("herald:", a, sizeof a, 42, HR_KEY_SUBS);
    hr_key_chunk("herald:", b, sizeof b, 42, 7);
    assert_int_equal(slot_of(a), slot_of(b));
    assert_int_equal(slot_of(a), slot_of("t42"));
    hr_key_pace_rl("herald:", b, sizeof b, 42, "push");
    assert_int_equal(slot_of(a), slot_of(b));
    hr_key_share("herald:", a, sizeof a, "web", -1);
    hr_key_share("herald:", b, sizeof b, "web", 1);
    assert_int_equal(slot_of(a), slot_of(b));
    for (int t = 1; t <= 3; t++) {
        hr_key_task("herald:", a, sizeof a, t, HR_KEY_STATS);
        seen[t - 1] = slot_of(a);
    }
    assert_true(seen[0] != seen[1] && seen[1] != seen[2]);
}

static void test_patterns(void **state)
{
    char m[HR_KEY_MAX];

    (void)state;
    hr_key_chunks_match("herald:", m, sizeof m, 42);
    assert_int_equal(hr_slot_of_pattern(m, strlen(m)), slot_of("t42"));
    /* the prefix's glob characters are escaped: the tag is then not literal */
    hr_key_leases_match("he*ld:", m, sizeof m, 42);
    assert_string_equal(m, "he\\*ld:{t42}:lease:*");
    assert_int_equal(hr_slot_of_pattern(m, strlen(m)), HR_SLOT_ALL);
    assert_int_equal(hr_slot_of_pattern("hrtest:1:*", 10), HR_SLOT_ALL);
    assert_int_equal(hr_slot_of_pattern("a{t*}:b", 7), HR_SLOT_ALL);
    assert_int_equal(hr_slot_of_pattern("a{t1}*", 6), slot_of("t1"));
    assert_int_equal(hr_slot_of_pattern("a{}:*", 5), HR_SLOT_ALL);
    assert_int_equal(hr_slot_of_pattern("a{t1", 4), HR_SLOT_ALL);
}

static void test_command_slot(void **state)
{
    (void)state;
    {
        const char *argv[] = {"SET", "foo", "1"};
        assert_int_equal(command_slot(3, argv), 12182);
    }
    {
        const char *argv[] = {"hgetall", "herald:user:7"};
        assert_int_equal(command_slot(2, argv), slot_of("herald:user:7"));
    }
    {
        const char *argv[] = {"EVALSHA", "0123", "2", "herald:{t9}:subs", "herald:{t9}:seq", "x"};
        assert_int_equal(command_slot(6, argv), slot_of("t9"));
    }
    {
        const char *argv[] = {"evalsha", "0123", "0", "x"};
        assert_int_equal(command_slot(4, argv), HR_SLOT_ANY);
    }
    {
        const char *argv[] = {"EVAL", "return 1", "1", "k"};
        assert_int_equal(command_slot(4, argv), slot_of("k"));
    }
    {
        const char *keyless[][2] = {{"PING", NULL},
                                    {"TIME", NULL},
                                    {"SCRIPT", "FLUSH"},
                                    {"INFO", "memory"},
                                    {"CLUSTER", "SLOTS"}};
        for (size_t i = 0; i < sizeof keyless / sizeof keyless[0]; i++)
            assert_int_equal(command_slot(keyless[i][1] != NULL ? 2 : 1, keyless[i]), HR_SLOT_ANY);
    }
    {
        const char *argv[] = {"SCAN", "0", "MATCH", "herald:{t42}:chunk:*", "COUNT", "1000"};
        assert_int_equal(command_slot(6, argv), slot_of("t42"));
        argv[3] = "hrtest:1:*";
        assert_int_equal(command_slot(6, argv), HR_SLOT_ALL);
        assert_int_equal(command_slot(2, argv), HR_SLOT_ALL);
    }
    {
        const char *argv[] = {"KEYS", "herald:{t3}:*"};
        assert_int_equal(command_slot(2, argv), slot_of("t3"));
        argv[1] = "herald:*";
        assert_int_equal(command_slot(2, argv), HR_SLOT_ALL);
    }
    /* a long command is read no further than its key */
    {
        const char *argv[2000];
        argv[0] = "SADD";
        argv[1] = "herald:{t5}:chunk:1";
        for (int i = 2; i < 2000; i++)
            argv[i] = "12345";
        assert_int_equal(command_slot(2000, argv), slot_of("t5"));
    }
    /* bytes that are not a formatted command */
    assert_int_equal(hr_slot_of_command("PING\r\n", 6), HR_SLOT_ANY);
    assert_int_equal(hr_slot_of_command("*2\r\n$3\r\nGET\r\n$9\r\nk\r\n", 19), HR_SLOT_ANY);
}

static void test_args(void **state)
{
    static const char cmd[] = "*3\r\n$3\r\nSET\r\n$3\r\na\r\n\r\n$0\r\n\r\n";
    hr_slot_arg a[2];

    (void)state;
    /* a binary argument (CR LF inside), an empty one; only MAX filled */
    assert_int_equal(hr_slot_args(cmd, sizeof cmd - 1, a, 2), 3);
    assert_int_equal(a[0].len, 3);
    assert_memory_equal(a[1].p, "a\r\n", 3);
    assert_int_equal(hr_slot_args(cmd, sizeof cmd - 3, a, 2), 3);
    assert_int_equal(hr_slot_args(cmd, 12, a, 2), -1);
    assert_int_equal(hr_slot_args("*x\r\n", 4, a, 2), -1);
}

static const hr_node_opts opts = {.password = "", .timeout_ms = 1000};

/* Three masters with a replica each; the second master's ip is empty (the
 * node that answered stands in); slots 16000-16383 have no master. */
static const char slots_reply[] = "*3\r\n"
                                  "*4\r\n:0\r\n:5460\r\n"
                                  "*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$3\r\nid0\r\n"
                                  "*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$3\r\nid3\r\n"
                                  "*4\r\n:5461\r\n:10922\r\n"
                                  "*3\r\n$0\r\n\r\n:7001\r\n$3\r\nid1\r\n"
                                  "*3\r\n$9\r\n127.0.0.1\r\n:7004\r\n$3\r\nid4\r\n"
                                  "*4\r\n:10923\r\n:15999\r\n"
                                  "*4\r\n$9\r\n127.0.0.1\r\n:7002\r\n$3\r\nid2\r\n*0\r\n"
                                  "*3\r\n$9\r\n127.0.0.1\r\n:7005\r\n$3\r\nid5\r\n";

static void assert_node(hr_node *node, const char *host, int port)
{
    assert_non_null(node);
    assert_string_equal(hr_node_host(node), host);
    assert_int_equal(hr_node_port(node), port);
}

static void test_slot_map(void **state)
{
    const char *seeds[] = {"seed.svc:7000"};
    hr_cluster *cl = NULL;
    redisReply *reply = resp(slots_reply);
    char err[256];

    (void)state;
    assert_int_equal(hr_cluster_new(seeds, 1, &opts, &cl, err, sizeof err), 0);
    /* no map yet */
    assert_null(hr_cluster_node(cl, 0, err, sizeof err));
    assert_non_null(strstr(err, "no master known for slot 0"));
    assert_null(hr_cluster_node(cl, HR_SLOT_ANY, err, sizeof err));

    assert_int_equal(hr_cluster_apply_slots(cl, reply, "10.1.1.1", err, sizeof err), 0);
    assert_node(hr_cluster_node(cl, 0, err, sizeof err), "127.0.0.1", 7000);
    assert_node(hr_cluster_node(cl, 5460, err, sizeof err), "127.0.0.1", 7000);
    assert_node(hr_cluster_node(cl, 5461, err, sizeof err), "10.1.1.1", 7001);
    assert_node(hr_cluster_node(cl, 10922, err, sizeof err), "10.1.1.1", 7001);
    assert_node(hr_cluster_node(cl, 15999, err, sizeof err), "127.0.0.1", 7002);
    assert_null(hr_cluster_node(cl, 16000, err, sizeof err));
    assert_null(hr_cluster_node(cl, 16383, err, sizeof err));
    /* keyless: the master of the lowest slot (none is down: none connected) */
    assert_node(hr_cluster_node(cl, HR_SLOT_ANY, err, sizeof err), "127.0.0.1", 7000);
    assert_null(hr_cluster_node(cl, HR_SLOT_ALL, err, sizeof err));
    assert_non_null(strstr(err, "needs every master"));
    /* the same node twice is one hr_node */
    assert_ptr_equal(hr_cluster_node(cl, 0, err, sizeof err),
                     hr_cluster_node(cl, 100, err, sizeof err));
    freeReplyObject(reply);

    /* a failover: 7003 now serves 0-5460; the rest unchanged */
    reply = resp("*1\r\n*3\r\n:0\r\n:5460\r\n*2\r\n$9\r\n127.0.0.1\r\n:7003\r\n");
    assert_int_equal(hr_cluster_apply_slots(cl, reply, "x", err, sizeof err), 0);
    assert_node(hr_cluster_node(cl, 42, err, sizeof err), "127.0.0.1", 7003);
    assert_null(hr_cluster_node(cl, 5461, err, sizeof err));
    freeReplyObject(reply);
    hr_cluster_free(cl);
}

/* A malformed reply is refused and changes nothing. */
static void test_slot_map_bad(void **state)
{
    static const struct {
        const char *resp, *why;
    } bad[] = {
        {"+OK\r\n", "not an array"},
        {"*1\r\n:5\r\n", "range 0 is malformed"},
        {"*1\r\n*2\r\n:0\r\n:5\r\n", "range 0 is malformed"},
        {"*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n", "bad range 5-4"},
        {"*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n", "bad range 0-16384"},
        {"*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n", "bad master"},
        {"*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n$4\r\n7000\r\n", "bad master"},
        {"*1\r\n*4\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n:7\r\n", "bad replica 0"},
    };
    const char *seeds[] = {"[::1]:7000", "h2:7001"};
    hr_cluster *cl = NULL;
    redisReply *good = resp(slots_reply);
    char err[256];

    (void)state;
    assert_int_equal(hr_cluster_new(seeds, 2, &opts, &cl, err, sizeof err), 0);
    assert_int_equal(hr_cluster_apply_slots(cl, good, "h", err, sizeof err), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *reply = resp(bad[i].resp);

        err[0] = '\0';
        assert_int_equal(hr_cluster_apply_slots(cl, reply, "h", err, sizeof err), -1);
        if (strstr(err, bad[i].why) == NULL)
            fail_msg("case %zu: %s", i, err);
        assert_node(hr_cluster_node(cl, 1, err, sizeof err), "127.0.0.1", 7000);
        freeReplyObject(reply);
    }
    /* "?" (a node that does not know its endpoint): its slots have no master */
    {
        redisReply *reply = resp("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\n?\r\n:7000\r\n");
        assert_int_equal(hr_cluster_apply_slots(cl, reply, "h", err, sizeof err), 0);
        assert_null(hr_cluster_node(cl, 0, err, sizeof err));
        freeReplyObject(reply);
    }
    freeReplyObject(good);
    hr_cluster_free(cl);
}

static void test_seeds(void **state)
{
    const char *bad[][1] = {{"nohost"}, {":7000"}, {"h:0"}, {"h:70000"}, {"h:7x"}, {"h:"}};
    const char *v6[] = {"[::1]:7000"};
    hr_cluster *cl = (hr_cluster *)&cl;
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(hr_cluster_new(bad[i], 1, &opts, &cl, err, sizeof err), -1);
        assert_null(cl);
        assert_non_null(strstr(err, "is not host:port"));
    }
    assert_int_equal(hr_cluster_new(v6, 0, &opts, &cl, err, sizeof err), -1);
    assert_non_null(strstr(err, "no seed node"));
    assert_int_equal(hr_cluster_new(v6, 1, &opts, &cl, err, sizeof err), 0);
    hr_cluster_free(cl);
    hr_cluster_free(NULL);
}

static void test_answers(void **state)
{
    static const struct {
        const char *resp;
        hr_cluster_answer kind;
        int slot;
        const char *host;
        int port;
    } cases[] = {
        {"-MOVED 3999 127.0.0.1:6381\r\n", HR_CLUSTER_MOVED, 3999, "127.0.0.1", 6381},
        {"-ASK 16383 10.0.0.2:7002\r\n", HR_CLUSTER_ASK, 16383, "10.0.0.2", 7002},
        {"-MOVED 0 :7001\r\n", HR_CLUSTER_MOVED, 0, "", 7001},
        {"-MOVED 12 ::1:7001\r\n", HR_CLUSTER_MOVED, 12, "::1", 7001},
        {"-MOVED 12 redis-1.svc:7001\r\n", HR_CLUSTER_MOVED, 12, "redis-1.svc", 7001},
        {"-TRYAGAIN Multiple keys request during rehashing of slot\r\n", HR_CLUSTER_TRYAGAIN, 0, "",
         0},
        {"-CLUSTERDOWN The cluster is down\r\n", HR_CLUSTER_DOWN, 0, "", 0},
        /* what cannot be followed is passed on as the error it is */
        {"-MOVED 16384 h:1\r\n", HR_CLUSTER_RAN, 0, "", 0},
        {"-MOVED x h:1\r\n", HR_CLUSTER_RAN, 0, "", 0},
        {"-MOVED 5 ?:7001\r\n", HR_CLUSTER_RAN, 0, "", 0},
        {"-MOVED 5 h\r\n", HR_CLUSTER_RAN, 0, "", 0},
        {"-ERR unknown command\r\n", HR_CLUSTER_RAN, 0, "", 0},
        {"-CROSSSLOT Keys in request don't hash to the same slot\r\n", HR_CLUSTER_RAN, 0, "", 0},
        {"$5\r\nMOVED\r\n", HR_CLUSTER_RAN, 0, "", 0},
        {":1\r\n", HR_CLUSTER_RAN, 0, "", 0},
    };
    char host[HR_CLUSTER_HOST_MAX];
    int slot, port;

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisReply *reply = resp(cases[i].resp);

        slot = port = -1;
        assert_int_equal(hr_cluster_parse_answer(reply, &slot, host, sizeof host, &port),
                         cases[i].kind);
        if (cases[i].kind == HR_CLUSTER_MOVED || cases[i].kind == HR_CLUSTER_ASK) {
            assert_int_equal(slot, cases[i].slot);
            assert_string_equal(host, cases[i].host);
            assert_int_equal(port, cases[i].port);
        }
        freeReplyObject(reply);
    }
    assert_int_equal(hr_cluster_parse_answer(NULL, &slot, host, sizeof host, &port),
                     HR_CLUSTER_RAN);
    /* a host longer than the buffer is not followed */
    {
        redisReply *reply = resp("-MOVED 1 averyveryverylonghost:1\r\n");
        assert_int_equal(hr_cluster_parse_answer(reply, &slot, host, 8, &port), HR_CLUSTER_RAN);
        freeReplyObject(reply);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),       cmocka_unit_test(test_crc16),
        cmocka_unit_test(test_hash_tags),    cmocka_unit_test(test_herald_keys),
        cmocka_unit_test(test_patterns),     cmocka_unit_test(test_command_slot),
        cmocka_unit_test(test_args),         cmocka_unit_test(test_slot_map),
        cmocka_unit_test(test_slot_map_bad), cmocka_unit_test(test_seeds),
        cmocka_unit_test(test_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
