/* hr_redis: the client behind every Redis call of herald (see hr_redis.h).
 *
 * An hr_redis copies what it needs from the config (it outlives nothing):
 * the settings every node shares (hr_node_opts: password, db, timeout and
 * the SHA1 of every embedded script, computed here so that EVALSHA can be
 * formatted before any node is connected), the key prefix, and either NODE
 * (single-node mode) or CL (cluster mode, hr_cluster.h).  Every single
 * command goes through hr_redis_exec(): the command is formatted once, so a
 * retry (after a reconnect, a NOSCRIPT reload or a cluster redirection)
 * sends exactly the same bytes.  The reconnect-and-retry-once, the
 * fail-fast window and the NOSCRIPT reload are hr_node's. */
#include "hr_redis.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_buf.h"

/* SCAN rounds hr_redis_del_matching makes at most. */
#define HR_REDIS_SCAN_ROUNDS 100000

struct hr_redis {
    hr_node *node;  /* single-node mode */
    hr_cluster *cl; /* cluster mode */
    hr_node_opts opts;
    char *password;
    char *prefix;
    char sha[HR_LUA__COUNT][HR_NODE_SHA_LEN + 1];
};

redisReply *hr_redis_check(redisReply *reply, char *errstr, size_t errlen)
{
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR) {
        snprintf(errstr, errlen, "%s", reply->str);
        freeReplyObject(reply);
        return NULL;
    }
    return reply;
}

redisReply *hr_redis_exec(hr_redis *r, const char *cmd, size_t len, int script, char *errstr,
                          size_t errlen)
{
    if (r->cl == NULL)
        return hr_node_exec(r->node, cmd, len, script, false, errstr, errlen);
    return hr_cluster_exec(r->cl, cmd, len, script, NULL, NULL, hr_cluster_deadline(r->cl), errstr,
                           errlen);
}

/* Runs CMD of LEN bytes as hiredis formatted it, then frees it; LEN < 0
 * (the format failed) answers NULL with WHY. */
static redisReply *hr_redis_exec_formatted(hr_redis *r, char *cmd, int len, const char *why,
                                           char *errstr, size_t errlen)
{
    redisReply *reply;

    if (len < 0) {
        snprintf(errstr, errlen, "%s", why);
        return NULL;
    }
    reply = hr_redis_exec(r, cmd, (size_t)len, -1, errstr, errlen);
    redisFreeCommand(cmd);
    return reply;
}

static redisReply *hr_redis_exec_argv(hr_redis *r, int argc, const char **argv,
                                      const size_t *argvlen, char *errstr, size_t errlen)
{
    char *cmd = NULL;
    int len = hr_redis_format_argv(argc, argv, argvlen, &cmd);

    return hr_redis_exec_formatted(r, cmd, len, "out of memory", errstr, errlen);
}

/* The SHA1 (hex) of every embedded script, as SCRIPT LOAD answers it. */
static int hr_redis_shas(hr_redis *r)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    for (int id = 0; id < HR_LUA__COUNT; id++) {
        if (EVP_Digest(hr_lua_files[id].text, hr_lua_files[id].len, md, &mdlen, EVP_sha1(), NULL) !=
                1 ||
            mdlen * 2 != HR_NODE_SHA_LEN)
            return -1;
        for (unsigned int i = 0; i < mdlen; i++) {
            r->sha[id][2 * i] = hex[md[i] >> 4];
            r->sha[id][2 * i + 1] = hex[md[i] & 0xf];
        }
        r->sha[id][HR_NODE_SHA_LEN] = '\0';
    }
    return 0;
}

/* Cluster mode: the seeds (redis.nodes, else redis.host:port) and the
 * slot map read from them. */
static int hr_redis_cluster_connect(hr_redis *r, const hr_config *cfg, char *errstr, size_t errlen)
{
    char seed[300];
    const char *one[] = {seed};

    snprintf(seed, sizeof seed, "%s:%d", cfg->redis.host, cfg->redis.port);
    if (cfg->redis.nnodes > 0) {
        if (hr_cluster_new((const char *const *)cfg->redis.nodes, cfg->redis.nnodes, &r->opts,
                           &r->cl, errstr, errlen) != 0)
            return -1;
    } else if (hr_cluster_new(one, 1, &r->opts, &r->cl, errstr, errlen) != 0) {
        return -1;
    }
    return hr_cluster_refresh(r->cl, errstr, errlen);
}

int hr_redis_connect(const hr_config *cfg, hr_redis **out, char *errstr, size_t errlen)
{
    hr_redis *r = calloc(1, sizeof *r);

    *out = NULL;
    if (r == NULL)
        goto oom;
    r->password = strdup(cfg->redis.password != NULL ? cfg->redis.password : "");
    r->prefix = strdup(cfg->redis.prefix);
    if (r->password == NULL || r->prefix == NULL)
        goto oom;
    if (hr_redis_shas(r) != 0) {
        snprintf(errstr, errlen, "SHA1 of the scripts: libcrypto failed");
        goto fail;
    }
    r->opts.password = r->password;
    r->opts.db = cfg->redis.db;
    r->opts.timeout_ms = cfg->redis.timeout_ms > 0 ? cfg->redis.timeout_ms : 5000;
    r->opts.sha = (const char(*)[HR_NODE_SHA_LEN + 1]) r->sha;
    if (cfg->redis.cluster) {
        if (hr_redis_cluster_connect(r, cfg, errstr, errlen) != 0)
            goto fail;
    } else {
        r->node = hr_node_new(cfg->redis.host, cfg->redis.port, &r->opts);
        if (r->node == NULL)
            goto oom;
        if (hr_node_ready(r->node, errstr, errlen) != 0)
            goto fail;
    }
    *out = r;
    return 0;

oom:
    snprintf(errstr, errlen, "out of memory");
fail:
    hr_redis_free(r);
    return -1;
}

void hr_redis_free(hr_redis *r)
{
    if (r == NULL)
        return;
    hr_node_free(r->node);
    hr_cluster_free(r->cl);
    free(r->password);
    free(r->prefix);
    free(r);
}

hr_node *hr_redis_route(hr_redis *r, const char *cmd, size_t len, char *errstr, size_t errlen)
{
    if (r->cl == NULL)
        return r->node;
    return hr_cluster_route(r->cl, cmd, len, errstr, errlen);
}

hr_cluster *hr_redis_cluster(hr_redis *r)
{
    return r->cl;
}

const char *hr_redis_prefix(const hr_redis *r)
{
    return r->prefix;
}

redisReply *hr_redis_cmd(hr_redis *r, char *errstr, size_t errlen, int argc, const char **argv,
                         const size_t *argvlen)
{
    return hr_redis_check(hr_redis_exec_argv(r, argc, argv, argvlen, errstr, errlen), errstr,
                          errlen);
}

redisReply *hr_redis_vcmdf(hr_redis *r, char *errstr, size_t errlen, const char *fmt, va_list ap)
{
    char *cmd = NULL;
    int len = redisvFormatCommand(&cmd, fmt, ap);

    return hr_redis_check(
        hr_redis_exec_formatted(r, cmd, len, "bad command format or out of memory", errstr, errlen),
        errstr, errlen);
}

redisReply *hr_redis_cmdf(hr_redis *r, char *errstr, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    redisReply *reply;

    va_start(ap, fmt);
    reply = hr_redis_vcmdf(r, errstr, errlen, fmt, ap);
    va_end(ap);
    return reply;
}

/* The RESP multi-bulk of the NPRE arguments PRE then the ARGC arguments
 * ARGV (lengths in PRELEN / ARGVLEN, or strlen when NULL) into *OUT, in
 * one allocation.  hiredis 0.14's redisFormatCommandArgv writes each
 * length with sprintf: with a command per recipient (an open's profile and
 * address reads) that was most of the formatting's cost.  Its length, or
 * -1 when out of memory. */
static int hr_redis_format(int npre, const char **pre, const size_t *prelen, int argc,
                           const char **argv, const size_t *argvlen, char **out)
{
    size_t total = 1 + HR_BUF_I64_MAX + 2, at = 0;
    int n = npre + argc;
    char *cmd;

    *out = NULL;
    for (int i = 0; i < n; i++) {
        const char *a = i < npre ? pre[i] : argv[i - npre];
        const size_t *al = i < npre ? prelen : argvlen;
        size_t len = al != NULL ? al[i < npre ? i : i - npre] : strlen(a);

        total += 1 + HR_BUF_I64_MAX + 2 + len + 2;
    }
    if ((cmd = malloc(total)) == NULL)
        return -1;
    cmd[at++] = '*';
    at += hr_buf_i64(n, cmd + at);
    cmd[at++] = '\r';
    cmd[at++] = '\n';
    for (int i = 0; i < n; i++) {
        const char *a = i < npre ? pre[i] : argv[i - npre];
        const size_t *al = i < npre ? prelen : argvlen;
        size_t len = al != NULL ? al[i < npre ? i : i - npre] : strlen(a);

        cmd[at++] = '$';
        at += hr_buf_i64((int64_t)len, cmd + at);
        cmd[at++] = '\r';
        cmd[at++] = '\n';
        memcpy(cmd + at, a, len);
        at += len;
        cmd[at++] = '\r';
        cmd[at++] = '\n';
    }
    cmd[at] = '\0';
    *out = cmd;
    return (int)at;
}

int hr_redis_format_argv(int argc, const char **argv, const size_t *argvlen, char **out)
{
    return hr_redis_format(0, NULL, NULL, argc, argv, argvlen, out);
}

int hr_redis_evalsha_format(const hr_redis *r, hr_lua_id id, int nkeys, int argc, const char **argv,
                            const size_t *argvlen, char **out)
{
    char nkeys_s[HR_BUF_I64_MAX];
    const char *pre[3] = {"EVALSHA", r->sha[id], nkeys_s};
    size_t prelen[3] = {7, strlen(r->sha[id]), hr_buf_i64(nkeys, nkeys_s)};

    return hr_redis_format(3, pre, prelen, argc, argv, argvlen, out);
}

redisReply *hr_redis_eval(hr_redis *r, hr_lua_id id, int nkeys, int argc, const char **argv,
                          const size_t *argvlen, char *errstr, size_t errlen)
{
    char *cmd = NULL;
    int len = hr_redis_evalsha_format(r, id, nkeys, argc, argv, argvlen, &cmd);
    redisReply *reply;

    if (len < 0) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    reply = hr_redis_exec(r, cmd, (size_t)len, (int)id, errstr, errlen);
    redisFreeCommand(cmd);
    return hr_redis_check(reply, errstr, errlen);
}

bool hr_redis_failover(const char *errstr)
{
    /* hiredis's and hr_node's texts for a connection that failed (a read
     * timeout is EAGAIN's), hr_cluster's for a map without the slot, and
     * the error replies of a server loading its data or of a cluster
     * between masters, found anywhere in the text (a reconnect's SCRIPT
     * LOAD reports its reply after the node's name); a redirection only
     * ever starts it. */
    static const char *const failover[] = {
        "Connection refused",
        "Connection reset",
        "Server closed the connection",
        "Broken pipe",
        "Resource temporarily unavailable",
        "timed out",
        "Timeout",
        "connection failed",
        "down (retrying in",
        "No route to host",
        "no node answers",
        "no master known",
        "not sent",
        "LOADING",
        "CLUSTERDOWN",
        "READONLY",
        "TRYAGAIN",
        "MASTERDOWN",
    };

    if (errstr == NULL)
        return false;
    if (strncmp(errstr, "MOVED ", 6) == 0 || strncmp(errstr, "ASK ", 4) == 0)
        return true;
    for (size_t i = 0; i < sizeof failover / sizeof *failover; i++)
        if (strstr(errstr, failover[i]) != NULL)
            return true;
    return false;
}

int hr_redis_time_ms(hr_redis *r, int64_t *out, char *errstr, size_t errlen)
{
    redisReply *reply = hr_redis_cmdf(r, errstr, errlen, "TIME");
    int rc = -1;

    if (reply == NULL)
        return -1;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(errstr, errlen, "TIME: unexpected reply");
        goto out;
    }
    *out = strtoll(reply->element[0]->str, NULL, 10) * 1000 +
           strtoll(reply->element[1]->str, NULL, 10) / 1000;
    rc = 0;
out:
    freeReplyObject(reply);
    return rc;
}

int64_t hr_redis_del_matching(hr_redis *r, const char *match, bool del, char *errstr, size_t errlen)
{
    char cursor[32] = "0";
    int64_t deleted = 0;
    size_t i;
    int rounds = 0;

    do {
        redisReply *reply =
            hr_redis_cmdf(r, errstr, errlen, "SCAN %s MATCH %s COUNT 1000", cursor, match);

        if (reply == NULL)
            return -1;
        snprintf(cursor, sizeof cursor, "%s", reply->element[0]->str);
        if (!del) {
            deleted += (int64_t)reply->element[1]->elements;
            freeReplyObject(reply);
            if (deleted > 0)
                break;
            continue;
        }
        for (i = 0; i < reply->element[1]->elements; i++) {
            redisReply *gone =
                hr_redis_cmdf(r, errstr, errlen, "DEL %s", reply->element[1]->element[i]->str);

            if (gone == NULL) {
                freeReplyObject(reply);
                return -1;
            }
            deleted += gone->integer;
            freeReplyObject(gone);
        }
        freeReplyObject(reply);
    } while (strcmp(cursor, "0") != 0 && ++rounds < HR_REDIS_SCAN_ROUNDS);
    return deleted;
}
