/* hr_redis: one synchronous hiredis connection with reconnection, key
 * naming and the Lua script registry (see hr_redis.h).
 *
 * An hr_redis copies what it needs from the config (it outlives nothing),
 * holds the live redisContext and the SHA1 of every embedded script.  Every
 * single command goes through hr_redis_exec(): the command is formatted
 * once, so a retry after a reconnect sends exactly the same bytes.  hiredis
 * marks a context dead (c->err) after any I/O or protocol error; the next
 * call then reconnects before sending.  A command that failed on I/O or EOF
 * is retried once on a fresh connection, so it may run twice (its reply, not
 * the command, may be what was lost).  Every script whose answer drives a
 * decision is therefore idempotent on its own output: a re-run answers what
 * the first run did (chunk_move.lua, redrive.lua) or an absolute counter
 * (ack, dead_letter, drop_set); docs/reliability.md, "Lost
 * replies and racing cancels".  A failed
 * connect opens a fail-fast window (100 ms, doubling to 2 s): reconnects
 * within it fail at once with "redis HOST:PORT down (retrying in N ms)". */
#include "hr_redis.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define HR_REDIS_SHA_LEN 40

struct hr_redis {
    redisContext *c;
    char *host;
    int port;
    char *password; /* "" = no AUTH */
    int db;
    int timeout_ms;
    char *prefix;
    char sha[HR_LUA__COUNT][HR_REDIS_SHA_LEN + 1];
    /* After a failed connect, calls fail at once until retry_at_ms (a
     * monotonic time), so a dead server costs one connect timeout per
     * window instead of one per call. */
    int64_t retry_at_ms;
    int backoff_ms;
};

/* First and longest fail-fast window after a failed connect. */
#define HR_REDIS_BACKOFF_MIN_MS 100
#define HR_REDIS_BACKOFF_MAX_MS 2000

static int64_t hr_redis_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void hr_redis_ctx_error(const hr_redis *r, char *errstr, size_t errlen)
{
    snprintf(errstr, errlen, "redis %s:%d: %s", r->host, r->port,
             r->c != NULL && r->c->errstr[0] != '\0' ? r->c->errstr : "connection failed");
}

/* Sends one formatted command on the current context and reads its reply.
 * NULL when the connection failed (the context is then dead). */
static redisReply *hr_redis_roundtrip(hr_redis *r, const char *cmd, size_t len)
{
    void *reply = NULL;

    if (redisAppendFormattedCommand(r->c, cmd, len) != REDIS_OK)
        return NULL;
    if (redisGetReply(r->c, &reply) != REDIS_OK)
        return NULL;
    return reply;
}

redisReply *hr_redis_check(redisReply *reply, char *errstr, size_t errlen)
{
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR) {
        snprintf(errstr, errlen, "%s", reply->str);
        freeReplyObject(reply);
        return NULL;
    }
    return reply;
}

int hr_redis_load_script(hr_redis *r, hr_lua_id id, char *errstr, size_t errlen)
{
    const hr_embedded *script = &hr_lua_files[id];
    const char *argv[] = {"SCRIPT", "LOAD", script->text};
    const size_t argvlen[] = {6, 4, script->len};
    char *cmd = NULL;
    redisReply *reply = NULL;
    int len = redisFormatCommandArgv(&cmd, 3, argv, argvlen);
    int rc = -1;

    if (len < 0) {
        snprintf(errstr, errlen, "out of memory");
        goto out;
    }
    reply = hr_redis_roundtrip(r, cmd, (size_t)len);
    if (reply == NULL) {
        hr_redis_ctx_error(r, errstr, errlen);
        goto out;
    }
    if (reply->type != REDIS_REPLY_STRING || reply->len != HR_REDIS_SHA_LEN) {
        snprintf(errstr, errlen, "SCRIPT LOAD %s: %s", script->name,
                 reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
        goto out;
    }
    memcpy(r->sha[id], reply->str, HR_REDIS_SHA_LEN);
    r->sha[id][HR_REDIS_SHA_LEN] = '\0';
    rc = 0;
out:
    freeReplyObject(reply);
    redisFreeCommand(cmd);
    return rc;
}

static int hr_redis_load_all(hr_redis *r, char *errstr, size_t errlen)
{
    for (int id = 0; id < HR_LUA__COUNT; id++)
        if (hr_redis_load_script(r, (hr_lua_id)id, errstr, errlen) != 0)
            return -1;
    return 0;
}

/* Runs a setup command (AUTH, SELECT) that must answer +OK. */
static int hr_redis_setup_cmd(hr_redis *r, const char *what, char *cmd, int len, char *errstr,
                              size_t errlen)
{
    redisReply *reply = NULL;
    int rc = -1;

    if (len < 0) {
        snprintf(errstr, errlen, "out of memory");
        goto out;
    }
    reply = hr_redis_roundtrip(r, cmd, (size_t)len);
    if (reply == NULL) {
        hr_redis_ctx_error(r, errstr, errlen);
        goto out;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(errstr, errlen, "redis %s:%d: %s: %s", r->host, r->port, what, reply->str);
        goto out;
    }
    rc = 0;
out:
    freeReplyObject(reply);
    redisFreeCommand(cmd);
    return rc;
}

/* Drops the current context and opens a new one: timeouts, AUTH, SELECT,
 * scripts. */
static int hr_redis_reconnect(hr_redis *r, char *errstr, size_t errlen)
{
    struct timeval tv = {r->timeout_ms / 1000, (r->timeout_ms % 1000) * 1000};
    char *cmd = NULL;
    int64_t now = hr_redis_mono_ms();
    int len;

    if (now < r->retry_at_ms) {
        snprintf(errstr, errlen, "redis %s:%d down (retrying in %" PRId64 " ms)", r->host, r->port,
                 r->retry_at_ms - now);
        return -1;
    }
    redisFree(r->c);
    r->c = redisConnectWithTimeout(r->host, r->port, tv);
    if (r->c == NULL || r->c->err) {
        hr_redis_ctx_error(r, errstr, errlen);
        goto fail;
    }
    if (redisSetTimeout(r->c, tv) != REDIS_OK) {
        hr_redis_ctx_error(r, errstr, errlen);
        goto fail;
    }
    if (r->password[0] != '\0') {
        len = redisFormatCommand(&cmd, "AUTH %s", r->password);
        if (hr_redis_setup_cmd(r, "AUTH", cmd, len, errstr, errlen) != 0)
            goto fail;
    }
    if (r->db != 0) {
        len = redisFormatCommand(&cmd, "SELECT %d", r->db);
        if (hr_redis_setup_cmd(r, "SELECT", cmd, len, errstr, errlen) != 0)
            goto fail;
    }
    if (hr_redis_load_all(r, errstr, errlen) != 0)
        goto fail;
    r->backoff_ms = 0;
    r->retry_at_ms = 0;
    return 0;

fail:
    redisFree(r->c);
    r->c = NULL;
    r->backoff_ms = r->backoff_ms == 0 ? HR_REDIS_BACKOFF_MIN_MS : r->backoff_ms * 2;
    if (r->backoff_ms > HR_REDIS_BACKOFF_MAX_MS)
        r->backoff_ms = HR_REDIS_BACKOFF_MAX_MS;
    r->retry_at_ms = hr_redis_mono_ms() + r->backoff_ms;
    return -1;
}

/* One formatted command with reconnect-and-retry-once on I/O or EOF.
 * Returns every reply, error replies included; NULL + ERRSTR otherwise. */
static redisReply *hr_redis_exec(hr_redis *r, const char *cmd, size_t len, char *errstr,
                                 size_t errlen)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (hr_redis_ready(r, errstr, errlen) != 0)
            return NULL;
        redisReply *reply = hr_redis_roundtrip(r, cmd, len);
        if (reply != NULL)
            return reply;
        hr_redis_ctx_error(r, errstr, errlen);
        if (r->c->err != REDIS_ERR_IO && r->c->err != REDIS_ERR_EOF)
            return NULL;
    }
    return NULL;
}

static redisReply *hr_redis_exec_argv(hr_redis *r, int argc, const char **argv,
                                      const size_t *argvlen, char *errstr, size_t errlen)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    redisReply *reply;

    if (len < 0) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    reply = hr_redis_exec(r, cmd, (size_t)len, errstr, errlen);
    redisFreeCommand(cmd);
    return reply;
}

int hr_redis_connect(const hr_config *cfg, hr_redis **out, char *errstr, size_t errlen)
{
    hr_redis *r = calloc(1, sizeof *r);

    *out = NULL;
    if (r == NULL)
        goto oom;
    r->host = strdup(cfg->redis.host);
    r->password = strdup(cfg->redis.password != NULL ? cfg->redis.password : "");
    r->prefix = strdup(cfg->redis.prefix);
    if (r->host == NULL || r->password == NULL || r->prefix == NULL)
        goto oom;
    r->port = cfg->redis.port;
    r->db = cfg->redis.db;
    r->timeout_ms = cfg->redis.timeout_ms > 0 ? cfg->redis.timeout_ms : 5000;
    if (hr_redis_reconnect(r, errstr, errlen) != 0)
        goto fail;
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
    redisFree(r->c);
    free(r->host);
    free(r->password);
    free(r->prefix);
    free(r);
}

redisContext *hr_redis_context(hr_redis *r)
{
    return r->c;
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

redisReply *hr_redis_cmdf(hr_redis *r, char *errstr, size_t errlen, const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    int len;
    redisReply *reply;

    va_start(ap, fmt);
    len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    if (len < 0) {
        snprintf(errstr, errlen, "bad command format or out of memory");
        return NULL;
    }
    reply = hr_redis_exec(r, cmd, (size_t)len, errstr, errlen);
    redisFreeCommand(cmd);
    return hr_redis_check(reply, errstr, errlen);
}

int hr_redis_evalsha_format(const hr_redis *r, hr_lua_id id, int nkeys, int argc, const char **argv,
                            const size_t *argvlen, char **out)
{
    size_t n = (size_t)argc + 3;
    void *block = malloc(n * (sizeof(const char *) + sizeof(size_t)));
    const char **av = block;
    size_t *al;
    char nkeys_s[16];
    int len;

    *out = NULL;
    if (block == NULL)
        return -1;
    al = (size_t *)(av + n);
    snprintf(nkeys_s, sizeof nkeys_s, "%d", nkeys);
    av[0] = "EVALSHA";
    av[1] = r->sha[id];
    av[2] = nkeys_s;
    for (int i = 0; i < 3; i++)
        al[i] = strlen(av[i]);
    for (int i = 0; i < argc; i++) {
        av[i + 3] = argv[i];
        al[i + 3] = argvlen != NULL ? argvlen[i] : strlen(argv[i]);
    }
    len = redisFormatCommandArgv(out, (int)n, av, al);
    free(block);
    return len;
}

redisReply *hr_redis_eval(hr_redis *r, hr_lua_id id, int nkeys, int argc, const char **argv,
                          const size_t *argvlen, char *errstr, size_t errlen)
{
    char *cmd = NULL;
    int len = hr_redis_evalsha_format(r, id, nkeys, argc, argv, argvlen, &cmd);
    redisReply *reply = NULL;

    if (len < 0) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    reply = hr_redis_exec(r, cmd, (size_t)len, errstr, errlen);
    if (hr_redis_noscript(reply)) {
        /* Redis lost its script cache (restart, SCRIPT FLUSH): load, repeat. */
        freeReplyObject(reply);
        reply = NULL;
        if (hr_redis_load_script(r, id, errstr, errlen) == 0)
            reply = hr_redis_exec(r, cmd, (size_t)len, errstr, errlen);
    }
    redisFreeCommand(cmd);
    return hr_redis_check(reply, errstr, errlen);
}

int hr_redis_ready(hr_redis *r, char *errstr, size_t errlen)
{
    /* A dead context means what was in flight on it is lost anyway; start
     * the next batch on a fresh connection. */
    if (r->c == NULL || r->c->err)
        return hr_redis_reconnect(r, errstr, errlen);
    return 0;
}

bool hr_redis_noscript(const redisReply *reply)
{
    return reply != NULL && reply->type == REDIS_REPLY_ERROR &&
           strncmp(reply->str, "NOSCRIPT", 8) == 0;
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
