/* hr_pipe: pipelined commands, one batch per node, with one NOSCRIPT
 * replay (see hr_pipe.h).
 *
 * Each entry holds its command formatted (the bytes sent, and sent again
 * after a reload or a redirection), the script it calls (-1 for a plain
 * command), the node it was written to, its state and, once read, its
 * reply.  SENT and RECEIVED count the entries handled by hr_pipe_send()
 * and hr_pipe_recv(); a batch is the entries between them.
 *
 * Entries are written in queue order, each on its node's connection (one
 * node unless the hr_redis is a cluster), then every node touched is
 * flushed; replies are read back in queue order, each from its entry's
 * node, which answers its own commands in the order they were written.
 * A node whose connection breaks loses the replies of its entries not read
 * yet; the other nodes' entries are still read.
 *
 * With an arena (hr_pipe_set_arena) the node's reader builds each reply
 * in it for the read alone (its own functions are put back after), and a
 * reply got another way (a redirection followed, a command sent again) is
 * adopted by it: every reply of the pipeline is then the arena's, and
 * none is freed here. */
#include "hr_pipe.h"

#include <stdio.h>
#include <stdlib.h>

#include "hr_arena.h"
#include "hr_vec.h"

typedef enum hr_pipe_state {
    HR_PIPE_QUEUED, /* not handed to hr_pipe_send() yet */
    HR_PIPE_UNSENT, /* its node could not be reached (or none is known): it did not run */
    HR_PIPE_SENT,   /* written; its reply not read yet */
    HR_PIPE_LOST,   /* written, then the connection failed: no reply (it may have run) */
    HR_PIPE_READ,   /* reply read (it may have been taken since) */
} hr_pipe_state;

typedef struct hr_pipe_entry {
    char *cmd; /* formatted, redisFreeCommand */
    size_t len;
    int script;    /* hr_lua_id, or -1 */
    hr_node *node; /* where it was written */
    hr_pipe_state state;
    redisReply *reply; /* NULL until read, or after hr_pipe_reply */
    bool taken;
    bool replayed; /* its NOSCRIPT was replayed (once only) */
} hr_pipe_entry;

struct hr_pipe {
    hr_redis *r;
    HR_VEC(hr_pipe_entry) q;
    size_t sent, received;
    hr_arena *arena; /* where replies are built (not owned), or NULL */
    char err[256];   /* why the entries without a reply have none */
};

hr_pipe *hr_pipe_new(hr_redis *r)
{
    hr_pipe *pipe = calloc(1, sizeof *pipe);

    if (pipe != NULL) {
        pipe->r = r;
        snprintf(pipe->err, sizeof pipe->err, "not sent");
    }
    return pipe;
}

void hr_pipe_set_arena(hr_pipe *pipe, hr_arena *arena)
{
    pipe->arena = arena;
}

/* Frees REPLY unless PIPE's arena owns it. */
static void hr_pipe_drop(hr_pipe *pipe, redisReply *reply)
{
    if (pipe->arena == NULL)
        freeReplyObject(reply);
}

/* REPLY, got outside the reader (NULL: none), made PIPE's arena's when
 * it has one; NULL with PIPE->err when out of memory. */
static redisReply *hr_pipe_keep(hr_pipe *pipe, redisReply *reply)
{
    if (pipe->arena == NULL || hr_arena_adopt(pipe->arena, reply) == 0)
        return reply;
    snprintf(pipe->err, sizeof pipe->err, "out of memory");
    return NULL;
}

void hr_pipe_reset(hr_pipe *pipe)
{
    for (size_t i = 0; i < pipe->q.n; i++) {
        redisFreeCommand(pipe->q.v[i].cmd);
        hr_pipe_drop(pipe, pipe->q.v[i].reply);
    }
    pipe->q.n = 0;
    pipe->sent = pipe->received = 0;
    snprintf(pipe->err, sizeof pipe->err, "not sent");
}

void hr_pipe_free(hr_pipe *pipe)
{
    if (pipe == NULL)
        return;
    hr_pipe_reset(pipe);
    hr_vec_free(&pipe->q);
    free(pipe);
}

/* Queues a formatted command (taking CMD) of LEN bytes; LEN < 0 = the
 * formatting failed. */
static int hr_pipe_queue(hr_pipe *pipe, char *cmd, int len, int script)
{
    hr_pipe_entry e = {.cmd = cmd, .len = (size_t)len, .script = script};

    if (len < 0 || hr_vec_push(&pipe->q, e) != 0) {
        redisFreeCommand(cmd);
        return -1;
    }
    return 0;
}

int hr_pipe_cmd(hr_pipe *pipe, int argc, const char **argv, const size_t *argvlen)
{
    char *cmd = NULL;
    int len = hr_redis_format_argv(argc, argv, argvlen, &cmd);

    return hr_pipe_queue(pipe, cmd, len, -1);
}

int hr_pipe_eval(hr_pipe *pipe, hr_lua_id id, int nkeys, int argc, const char **argv,
                 const size_t *argvlen)
{
    char *cmd = NULL;
    int len = hr_redis_evalsha_format(pipe->r, id, nkeys, argc, argv, argvlen, &cmd);

    return hr_pipe_queue(pipe, cmd, len, (int)id);
}

size_t hr_pipe_count(const hr_pipe *pipe)
{
    return pipe->q.n;
}

/* Appends entry E on its node's live context. */
static int hr_pipe_append(hr_pipe_entry *e)
{
    return redisAppendFormattedCommand(hr_node_context(e->node), e->cmd, e->len) == REDIS_OK ? 0
                                                                                             : -1;
}

/* Writes NODE's output buffer now, so that Redis works on the batch while
 * the caller does something else.  A buffer already written costs nothing,
 * so a node is flushed again whenever the queue switches to it. */
static int hr_pipe_flush(hr_node *node)
{
    redisContext *c = hr_node_context(node);
    int done = 0;

    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK)
            return -1;
    return 0;
}

/* NODE's connection failed: PIPE->err says so. */
static void hr_pipe_node_failed(hr_pipe *pipe, hr_node *node)
{
    hr_node_error(node, pipe->err, sizeof pipe->err);
}

/* Is NODE's context dead (a read or write on it failed)? */
static bool hr_pipe_dead(hr_node *node)
{
    redisContext *c = hr_node_context(node);

    return c == NULL || c->err != 0;
}

int hr_pipe_send(hr_pipe *pipe, char *errstr, size_t errlen)
{
    size_t from = pipe->sent;
    hr_cluster *cl = hr_redis_cluster(pipe->r);
    hr_node *last = NULL;
    bool written = false, rerouted = false, appended;

    if (pipe->sent == pipe->q.n)
        return 0;
again:
    appended = false;
    /* A map refresh is a command on some node: never once this batch has
     * written commands whose replies are not read yet. */
    if (cl != NULL)
        hr_cluster_settle(cl);
    for (; pipe->sent < pipe->q.n; pipe->sent++) {
        hr_pipe_entry *e = &pipe->q.v[pipe->sent];

        e->node = hr_redis_route(pipe->r, e->cmd, e->len, pipe->err, sizeof pipe->err);
        if (e->node != NULL && e->node != last &&
            hr_node_ready(e->node, pipe->err, sizeof pipe->err) != 0) {
            /* A master that cannot be reached may have been replaced by
             * its replica: the map is read again before the next send. */
            if (cl != NULL)
                hr_cluster_mark_stale(cl);
            e->node = NULL;
        }
        appended |= e->node != NULL;
        if (e->node != NULL && hr_pipe_append(e) != 0) {
            snprintf(pipe->err, sizeof pipe->err, "out of memory");
            e->node = NULL;
        }
        e->state = e->node != NULL ? HR_PIPE_SENT : HR_PIPE_UNSENT;
        last = e->node;
    }
    last = NULL;
    for (size_t i = from; i < pipe->sent; i++) {
        hr_pipe_entry *e = &pipe->q.v[i];

        if (e->state != HR_PIPE_SENT)
            continue;
        if (e->node != last && !hr_pipe_dead(e->node) && hr_pipe_flush(e->node) != 0)
            hr_pipe_node_failed(pipe, e->node);
        last = e->node;
        /* a failed flush may have written part of the batch: lost, not
         * unsent */
        if (hr_pipe_dead(e->node))
            e->state = HR_PIPE_LOST;
        written |= e->state == HR_PIPE_SENT;
    }
    /* Nothing reached a node because every node it went to was down: on
     * a cluster the map is read again and the batch routed once more (a
     * promoted replica; issue 34: without this a worker whose batches all
     * went to the dead master kept its map, and failed, for 5 s after the
     * promotion). */
    if (!written && !appended && cl != NULL && !rerouted) {
        rerouted = true;
        pipe->sent = from;
        last = NULL;
        goto again;
    }
    /* With nothing in flight the batch failed as a whole; otherwise
     * hr_pipe_recv() reads what was written (and on a cluster sends the
     * unsent entries again, one by one). */
    if (!written) {
        snprintf(errstr, errlen, "%s", pipe->err);
        return -1;
    }
    return 0;
}

/* Reads the next reply of context C, in PIPE's arena when it has one.
 * REDIS_OK or REDIS_ERR, as redisGetReply. */
static int hr_pipe_get(hr_pipe *pipe, redisContext *c, void **reply)
{
    redisReplyObjectFunctions *fn = c->reader->fn;
    void *privdata = c->reader->privdata;
    int rc;

    if (pipe->arena == NULL)
        return redisGetReply(c, reply);
    c->reader->fn = hr_arena_functions();
    c->reader->privdata = pipe->arena;
    rc = redisGetReply(c, reply);
    /* A reply half read when the connection failed is the arena's: the
     * reader, which frees what it holds with its own functions, must not
     * see it (the context is dead, and read no more). */
    c->reader->reply = NULL;
    c->reader->fn = fn;
    c->reader->privdata = privdata;
    return rc;
}

/* Reads the reply of entry E from its node. */
static void hr_pipe_read(hr_pipe *pipe, hr_pipe_entry *e)
{
    void *reply = NULL;

    if (hr_pipe_dead(e->node) || hr_pipe_get(pipe, hr_node_context(e->node), &reply) != REDIS_OK) {
        hr_pipe_node_failed(pipe, e->node);
        e->state = HR_PIPE_LOST;
        return;
    }
    e->reply = reply;
    e->state = HR_PIPE_READ;
}

/* Loads on NODE the script of every NOSCRIPT reply of NODE's entries in
 * [FROM, TO), sends those calls again and reads their new replies.  0, or
 * -1 when a load failed (those calls keep their NOSCRIPT). */
static int hr_pipe_replay_node(hr_pipe *pipe, hr_node *node, size_t from, size_t to)
{
    bool loaded[HR_LUA__COUNT] = {false};
    size_t n = 0;

    for (size_t i = from; i < to; i++) {
        hr_pipe_entry *e = &pipe->q.v[i];

        if (e->node != node || e->replayed || e->script < 0 || !hr_node_noscript(e->reply))
            continue;
        e->replayed = true;
        if (!loaded[e->script]) {
            if (hr_node_load_script(node, (hr_lua_id)e->script, pipe->err, sizeof pipe->err) != 0)
                break;
            loaded[e->script] = true;
        }
        if (hr_pipe_append(e) != 0) {
            snprintf(pipe->err, sizeof pipe->err, "out of memory");
            break;
        }
        hr_pipe_drop(pipe, e->reply);
        e->reply = NULL;
        e->state = HR_PIPE_SENT;
        n++;
    }
    for (size_t i = from; i < to && n > 0; i++) {
        hr_pipe_entry *e = &pipe->q.v[i];

        if (e->node == node && e->state == HR_PIPE_SENT) {
            hr_pipe_read(pipe, e);
            n--;
        }
    }
    return hr_pipe_dead(node) ? -1 : 0;
}

/* Replays the NOSCRIPT replies of [FROM, TO), node by node (not on a node
 * whose connection failed since: those keep their NOSCRIPT).  0, or -1 when
 * a node failed. */
static int hr_pipe_replay(hr_pipe *pipe, size_t from, size_t to)
{
    int rc = 0;

    for (size_t i = from; i < to; i++) {
        hr_pipe_entry *e = &pipe->q.v[i];

        if (e->state != HR_PIPE_READ || e->replayed || e->script < 0 || !hr_node_noscript(e->reply))
            continue;
        if (hr_pipe_dead(e->node) || hr_pipe_replay_node(pipe, e->node, i, to) != 0)
            rc = -1;
    }
    return rc;
}

/* Cluster mode: the entries of [FROM, TO) that did not run — never sent
 * (their node was down or unknown) or answered MOVED, ASK, TRYAGAIN or
 * CLUSTERDOWN — are sent again one by one through hr_cluster_exec(), which
 * follows the redirections.  They then run after the rest of the batch.
 * They share one deadline: a cluster that stays down costs the batch one
 * redis.timeout_ms, not one per command.  An arena's reply cannot be handed
 * over to hr_cluster_exec(): the command then goes again from the map (a
 * redirection is answered again, and followed). */
static void hr_pipe_redirect(hr_pipe *pipe, hr_cluster *cl, size_t from, size_t to)
{
    int64_t deadline = hr_cluster_deadline(cl);
    int slot, port;
    char host[HR_CLUSTER_HOST_MAX];

    for (size_t i = from; i < to; i++) {
        hr_pipe_entry *e = &pipe->q.v[i];

        if (e->state != HR_PIPE_UNSENT &&
            (e->state != HR_PIPE_READ ||
             hr_cluster_parse_answer(e->reply, &slot, host, sizeof host, &port) == HR_CLUSTER_RAN))
            continue;
        e->reply =
            hr_pipe_keep(pipe, hr_cluster_exec(cl, e->cmd, e->len, e->script,
                                               pipe->arena == NULL ? e->reply : NULL, e->node,
                                               deadline, pipe->err, sizeof pipe->err));
        e->state = e->reply != NULL ? HR_PIPE_READ : HR_PIPE_LOST;
    }
}

int hr_pipe_recv(hr_pipe *pipe, char *errstr, size_t errlen)
{
    size_t from = pipe->received;
    hr_cluster *cl = hr_redis_cluster(pipe->r);
    int rc;

    for (; pipe->received < pipe->sent; pipe->received++)
        if (pipe->q.v[pipe->received].state == HR_PIPE_SENT)
            hr_pipe_read(pipe, &pipe->q.v[pipe->received]);
    rc = hr_pipe_replay(pipe, from, pipe->received);
    if (cl != NULL)
        hr_pipe_redirect(pipe, cl, from, pipe->received);
    for (size_t i = from; i < pipe->received; i++)
        if (pipe->q.v[i].state != HR_PIPE_READ)
            rc = -1;
    if (rc != 0)
        snprintf(errstr, errlen, "%s", pipe->err);
    return rc;
}

int hr_pipe_exec(hr_pipe *pipe, char *errstr, size_t errlen)
{
    if (hr_pipe_send(pipe, errstr, errlen) != 0)
        return -1;
    return hr_pipe_recv(pipe, errstr, errlen);
}

int hr_pipe_exec_all(hr_pipe *pipe, char *errstr, size_t errlen)
{
    if (hr_pipe_exec(pipe, errstr, errlen) != 0)
        return -1;
    for (size_t i = 0; i < pipe->q.n; i++) {
        redisReply *reply = hr_pipe_reply(pipe, i, errstr, errlen);

        if (reply == NULL)
            return -1;
        hr_pipe_drop(pipe, reply);
    }
    return 0;
}

/* REPLY as hr_redis_check() has it, except that an error reply of PIPE's
 * arena is left to the arena. */
static redisReply *hr_pipe_check(hr_pipe *pipe, redisReply *reply, char *errstr, size_t errlen)
{
    if (pipe->arena == NULL || reply == NULL || reply->type != REDIS_REPLY_ERROR)
        return hr_redis_check(reply, errstr, errlen);
    snprintf(errstr, errlen, "%s", reply->str);
    return NULL;
}

redisReply *hr_pipe_reply(hr_pipe *pipe, size_t i, char *errstr, size_t errlen)
{
    hr_pipe_entry *e;
    redisReply *reply;

    if (i >= pipe->q.n) {
        snprintf(errstr, errlen, "no command %zu in the pipeline", i);
        return NULL;
    }
    e = &pipe->q.v[i];
    if (e->taken) {
        snprintf(errstr, errlen, "reply %zu already taken", i);
        return NULL;
    }
    if (e->reply == NULL) {
        snprintf(errstr, errlen, "%s", e->state == HR_PIPE_QUEUED ? "not sent" : pipe->err);
        return NULL;
    }
    reply = e->reply;
    e->reply = NULL;
    e->taken = true;
    return hr_pipe_check(pipe, reply, errstr, errlen);
}

redisReply *hr_pipe_reply_retry(hr_pipe *pipe, size_t i, char *errstr, size_t errlen)
{
    hr_pipe_entry *e = i < pipe->q.n ? &pipe->q.v[i] : NULL;
    redisReply *reply;

    if (e == NULL || e->taken || (e->state != HR_PIPE_LOST && e->state != HR_PIPE_UNSENT))
        return hr_pipe_reply(pipe, i, errstr, errlen);
    e->taken = true;
    reply = hr_redis_exec(pipe->r, e->cmd, e->len, e->script, errstr, errlen);
    if (pipe->arena != NULL && hr_arena_adopt(pipe->arena, reply) != 0) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    return hr_pipe_check(pipe, reply, errstr, errlen);
}
