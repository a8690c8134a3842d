/* hr_node: one connection to one Redis server (see hr_node.h).
 *
 * A node holds where the server is, the live redisContext (NULL until the
 * first command, and after a failed connect) and the fail-fast window.
 * hr_node_exec() sends bytes formatted by its caller, so a retry after a
 * reconnect sends exactly the same command.  A command that failed on I/O
 * or EOF is retried once on a fresh connection, so it may run twice (its
 * reply, not the command, may be what was lost).  Every script whose
 * answer drives a decision is therefore idempotent on its own output: a
 * re-run answers what the first run did (chunk_move.lua, redrive.lua) or an
 * absolute counter (ack, dead_letter, drop_set); docs/reliability.md, "Lost
 * replies and racing cancels".  A failed connect opens the fail-fast window
 * (100 ms, doubling to 500 ms): connects within it fail at once with "redis
 * HOST:PORT down (retrying in N ms)".  The window is short so that calls
 * reach a server at most half a second after it serves again (issue 34: at
 * 2 s they failed fast for up to 2 s after a restarted Redis answered, and
 * a LOADING reply on reconnect grew the window as a refused connect does);
 * a dead server on loopback or a LAN refuses at once, so the window saves
 * little more than that. */
#include "hr_node.h"
#include "hr_clock.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

struct hr_node {
    const hr_node_opts *opts;
    redisContext *c;
    char *host;
    int port;
    /* After a failed connect, calls fail at once until retry_at_ms (a
     * monotonic time), so a dead server costs one connect timeout per
     * window instead of one per call. */
    int64_t retry_at_ms;
    int backoff_ms;
};

/* First and longest fail-fast window after a failed connect. */
#define HR_NODE_BACKOFF_MIN_MS 100
#define HR_NODE_BACKOFF_MAX_MS 500

/* ASKING, formatted: sent before a command redirected by ASK. */
static const char hr_node_asking[] = "*1\r\n$6\r\nASKING\r\n";

hr_node *hr_node_new(const char *host, int port, const hr_node_opts *opts)
{
    hr_node *node = calloc(1, sizeof *node);

    if (node == NULL)
        return NULL;
    node->host = strdup(host);
    if (node->host == NULL) {
        free(node);
        return NULL;
    }
    node->port = port;
    node->opts = opts;
    return node;
}

void hr_node_free(hr_node *node)
{
    if (node == NULL)
        return;
    redisFree(node->c);
    free(node->host);
    free(node);
}

const char *hr_node_host(const hr_node *node)
{
    return node->host;
}

int hr_node_port(const hr_node *node)
{
    return node->port;
}

redisContext *hr_node_context(hr_node *node)
{
    return node->c;
}

bool hr_node_down(const hr_node *node)
{
    return node->c == NULL && hr_clock_mono_ms() < node->retry_at_ms;
}

bool hr_node_failed(const hr_node *node)
{
    return node->c == NULL && node->backoff_ms > 0;
}

void hr_node_close(hr_node *node)
{
    redisFree(node->c);
    node->c = NULL;
}

void hr_node_error(const hr_node *node, char *errstr, size_t errlen)
{
    snprintf(errstr, errlen, "redis %s:%d: %s", node->host, node->port,
             node->c != NULL && node->c->errstr[0] != '\0' ? node->c->errstr : "connection failed");
}

/* Reads one reply from the live context; NULL when the connection failed
 * (the context is then dead). */
static redisReply *hr_node_read(hr_node *node)
{
    void *reply = NULL;

    if (redisGetReply(node->c, &reply) != REDIS_OK)
        return NULL;
    return reply;
}

/* Sends one formatted command (after ASKING when ASKING) on the live
 * context and reads its reply: an error reply to ASKING stands for the
 * command's.  NULL when the connection failed. */
static redisReply *hr_node_roundtrip(hr_node *node, const char *cmd, size_t len, bool asking)
{
    redisReply *reply;

    if (asking &&
        redisAppendFormattedCommand(node->c, hr_node_asking, sizeof hr_node_asking - 1) != REDIS_OK)
        return NULL;
    if (redisAppendFormattedCommand(node->c, cmd, len) != REDIS_OK)
        return NULL;
    if (asking) {
        reply = hr_node_read(node);
        if (reply == NULL)
            return NULL;
        if (reply->type == REDIS_REPLY_ERROR) {
            /* the command's reply still has to be read off the wire */
            freeReplyObject(hr_node_read(node));
            return reply;
        }
        freeReplyObject(reply);
    }
    return hr_node_read(node);
}

/* Runs a setup command (AUTH, SELECT, SCRIPT LOAD: CMD of LEN bytes, LEN
 * < 0 when formatting it failed; freed here) on the live context.  Its
 * reply, or NULL with ERRSTR when the connection failed or the reply is an
 * error (reported as WHAT's). */
static redisReply *hr_node_setup(hr_node *node, const char *what, char *cmd, int len, char *errstr,
                                 size_t errlen)
{
    redisReply *reply = NULL;

    if (len < 0) {
        snprintf(errstr, errlen, "out of memory");
    } else if ((reply = hr_node_roundtrip(node, cmd, (size_t)len, false)) == NULL) {
        hr_node_error(node, errstr, errlen);
    } else if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(errstr, errlen, "redis %s:%d: %s: %s", node->host, node->port, what, reply->str);
        freeReplyObject(reply);
        reply = NULL;
    }
    redisFreeCommand(cmd);
    return reply;
}

int hr_node_load_script(hr_node *node, hr_lua_id id, char *errstr, size_t errlen)
{
    const hr_embedded *script = &hr_lua_files[id];
    const char *argv[] = {"SCRIPT", "LOAD", script->text};
    const size_t argvlen[] = {6, 4, script->len};
    char *cmd = NULL, what[96];
    int len = redisFormatCommandArgv(&cmd, 3, argv, argvlen);
    redisReply *reply;

    snprintf(what, sizeof what, "SCRIPT LOAD %s", script->name);
    reply = hr_node_setup(node, what, cmd, len, errstr, errlen);
    if (reply == NULL)
        return -1;
    if (reply->type != REDIS_REPLY_STRING || reply->len != HR_NODE_SHA_LEN ||
        memcmp(reply->str, node->opts->sha[id], HR_NODE_SHA_LEN) != 0) {
        snprintf(errstr, errlen, "redis %s:%d: %s: %s", node->host, node->port, what,
                 reply->type == REDIS_REPLY_STRING ? "not the script's SHA1" : "unexpected reply");
        freeReplyObject(reply);
        return -1;
    }
    freeReplyObject(reply);
    return 0;
}

static int hr_node_load_all(hr_node *node, char *errstr, size_t errlen)
{
    for (int id = 0; id < HR_LUA__COUNT; id++)
        if (hr_node_load_script(node, (hr_lua_id)id, errstr, errlen) != 0)
            return -1;
    return 0;
}

/* Runs a setup command that must not answer an error.  0 or -1. */
static int hr_node_setup_cmd(hr_node *node, const char *what, char *cmd, int len, char *errstr,
                             size_t errlen)
{
    redisReply *reply = hr_node_setup(node, what, cmd, len, errstr, errlen);

    freeReplyObject(reply);
    return reply != NULL ? 0 : -1;
}

/* Drops the current context and opens a new one: timeouts, AUTH, SELECT,
 * scripts. */
static int hr_node_connect(hr_node *node, char *errstr, size_t errlen)
{
    const hr_node_opts *opts = node->opts;
    struct timeval tv = {opts->timeout_ms / 1000, (opts->timeout_ms % 1000) * 1000};
    char *cmd = NULL;
    int64_t now = hr_clock_mono_ms();
    int len;

    if (now < node->retry_at_ms) {
        snprintf(errstr, errlen, "redis %s:%d down (retrying in %" PRId64 " ms)", node->host,
                 node->port, node->retry_at_ms - now);
        return -1;
    }
    redisFree(node->c);
    node->c = redisConnectWithTimeout(node->host, node->port, tv);
    if (node->c == NULL || node->c->err) {
        hr_node_error(node, errstr, errlen);
        goto fail;
    }
    if (redisSetTimeout(node->c, tv) != REDIS_OK) {
        hr_node_error(node, errstr, errlen);
        goto fail;
    }
    if (opts->password[0] != '\0') {
        len = redisFormatCommand(&cmd, "AUTH %s", opts->password);
        if (hr_node_setup_cmd(node, "AUTH", cmd, len, errstr, errlen) != 0)
            goto fail;
    }
    if (opts->db != 0) {
        len = redisFormatCommand(&cmd, "SELECT %d", opts->db);
        if (hr_node_setup_cmd(node, "SELECT", cmd, len, errstr, errlen) != 0)
            goto fail;
    }
    if (hr_node_load_all(node, errstr, errlen) != 0)
        goto fail;
    node->backoff_ms = 0;
    node->retry_at_ms = 0;
    return 0;

fail:
    redisFree(node->c);
    node->c = NULL;
    node->backoff_ms = node->backoff_ms == 0 ? HR_NODE_BACKOFF_MIN_MS : node->backoff_ms * 2;
    if (node->backoff_ms > HR_NODE_BACKOFF_MAX_MS)
        node->backoff_ms = HR_NODE_BACKOFF_MAX_MS;
    node->retry_at_ms = hr_clock_mono_ms() + node->backoff_ms;
    return -1;
}

int hr_node_ready(hr_node *node, char *errstr, size_t errlen)
{
    /* A dead context means what was in flight on it is lost anyway; start
     * the next command on a fresh connection. */
    if (node->c == NULL || node->c->err)
        return hr_node_connect(node, errstr, errlen);
    return 0;
}

bool hr_node_noscript(const redisReply *reply)
{
    return reply != NULL && reply->type == REDIS_REPLY_ERROR &&
           strncmp(reply->str, "NOSCRIPT", 8) == 0;
}

/* The command with reconnect-and-retry-once on I/O or EOF. */
static redisReply *hr_node_send(hr_node *node, const char *cmd, size_t len, bool asking,
                                char *errstr, size_t errlen)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (hr_node_ready(node, errstr, errlen) != 0)
            return NULL;
        redisReply *reply = hr_node_roundtrip(node, cmd, len, asking);
        if (reply != NULL)
            return reply;
        hr_node_error(node, errstr, errlen);
        if (node->c->err != REDIS_ERR_IO && node->c->err != REDIS_ERR_EOF)
            return NULL;
    }
    return NULL;
}

redisReply *hr_node_exec(hr_node *node, const char *cmd, size_t len, int script, bool asking,
                         char *errstr, size_t errlen)
{
    redisReply *reply = hr_node_send(node, cmd, len, asking, errstr, errlen);

    if (script >= 0 && hr_node_noscript(reply)) {
        /* The server lost its script cache (restart, SCRIPT FLUSH): load, repeat. */
        freeReplyObject(reply);
        reply = NULL;
        if (hr_node_load_script(node, (hr_lua_id)script, errstr, errlen) == 0)
            reply = hr_node_send(node, cmd, len, asking, errstr, errlen);
    }
    return reply;
}
