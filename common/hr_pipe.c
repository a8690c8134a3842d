/* hr_pipe: pipelined commands with one NOSCRIPT replay (see hr_pipe.h).
 *
 * Each entry holds its command formatted (the bytes sent, and sent again
 * after a reload), the script it calls (-1 for a plain command) and, once
 * read, its reply.  SENT and RECEIVED count the entries written and read;
 * a batch is the entries between them. */
#include "hr_pipe.h"

#include <stdio.h>
#include <stdlib.h>

#include "hr_vec.h"

typedef struct hr_pipe_entry {
    char *cmd; /* formatted, redisFreeCommand */
    size_t len;
    int script;        /* hr_lua_id, or -1 */
    redisReply *reply; /* NULL until read, or after hr_pipe_reply */
    bool taken;
} hr_pipe_entry;

struct hr_pipe {
    hr_redis *r;
    HR_VEC(hr_pipe_entry) q;
    size_t sent, received;
    char err[256]; /* why the entries without a reply have none */
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

void hr_pipe_reset(hr_pipe *pipe)
{
    for (size_t i = 0; i < pipe->q.n; i++) {
        redisFreeCommand(pipe->q.v[i].cmd);
        freeReplyObject(pipe->q.v[i].reply);
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
    int len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);

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

/* Appends entry I on the live context. */
static int hr_pipe_append(hr_pipe *pipe, size_t i)
{
    return redisAppendFormattedCommand(hr_redis_context(pipe->r), pipe->q.v[i].cmd,
                                       pipe->q.v[i].len) == REDIS_OK
               ? 0
               : -1;
}

/* Writes hiredis's output buffer now, so that Redis works on the batch
 * while the caller does something else. */
static int hr_pipe_flush(hr_pipe *pipe)
{
    redisContext *c = hr_redis_context(pipe->r);
    int done = 0;

    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK)
            return -1;
    return 0;
}

/* The connection failed: ERRSTR and PIPE->err say so. */
static int hr_pipe_failed(hr_pipe *pipe, char *errstr, size_t errlen)
{
    hr_redis_ctx_error(pipe->r, pipe->err, sizeof pipe->err);
    snprintf(errstr, errlen, "%s", pipe->err);
    return -1;
}

int hr_pipe_send(hr_pipe *pipe, char *errstr, size_t errlen)
{
    if (pipe->sent == pipe->q.n)
        return 0;
    if (hr_redis_ready(pipe->r, errstr, errlen) != 0) {
        snprintf(pipe->err, sizeof pipe->err, "%s", errstr);
        return -1;
    }
    for (; pipe->sent < pipe->q.n; pipe->sent++)
        if (hr_pipe_append(pipe, pipe->sent) != 0)
            return hr_pipe_failed(pipe, errstr, errlen);
    return hr_pipe_flush(pipe) == 0 ? 0 : hr_pipe_failed(pipe, errstr, errlen);
}

/* Reads the reply of entry I. */
static int hr_pipe_read(hr_pipe *pipe, size_t i)
{
    void *reply = NULL;

    if (redisGetReply(hr_redis_context(pipe->r), &reply) != REDIS_OK)
        return -1;
    pipe->q.v[i].reply = reply;
    return 0;
}

/* Loads the script of every NOSCRIPT reply in [FROM, TO), sends those
 * calls again and reads their new replies.  0 or -1 (connection). */
static int hr_pipe_replay(hr_pipe *pipe, size_t from, size_t to, char *errstr, size_t errlen)
{
    bool loaded[HR_LUA__COUNT] = {false};
    size_t n = 0;

    for (size_t i = from; i < to; i++) {
        hr_pipe_entry *e = &pipe->q.v[i];

        if (e->script < 0 || !hr_redis_noscript(e->reply))
            continue;
        if (!loaded[e->script]) {
            if (hr_redis_load_script(pipe->r, (hr_lua_id)e->script, errstr, errlen) != 0)
                return -1;
            loaded[e->script] = true;
        }
        if (hr_pipe_append(pipe, i) != 0)
            return hr_pipe_failed(pipe, errstr, errlen);
        n++;
    }
    for (size_t i = from; i < to && n > 0; i++) {
        hr_pipe_entry *e = &pipe->q.v[i];

        if (e->script < 0 || !hr_redis_noscript(e->reply))
            continue;
        freeReplyObject(e->reply);
        e->reply = NULL;
        if (hr_pipe_read(pipe, i) != 0)
            return hr_pipe_failed(pipe, errstr, errlen);
        n--;
    }
    return 0;
}

int hr_pipe_recv(hr_pipe *pipe, char *errstr, size_t errlen)
{
    size_t from = pipe->received;

    for (; pipe->received < pipe->sent; pipe->received++)
        if (hr_pipe_read(pipe, pipe->received) != 0)
            return hr_pipe_failed(pipe, errstr, errlen);
    return hr_pipe_replay(pipe, from, pipe->received, errstr, errlen);
}

int hr_pipe_exec(hr_pipe *pipe, char *errstr, size_t errlen)
{
    if (hr_pipe_send(pipe, errstr, errlen) != 0)
        return -1;
    return hr_pipe_recv(pipe, errstr, errlen);
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
        snprintf(errstr, errlen, "%s", pipe->err);
        return NULL;
    }
    reply = e->reply;
    e->reply = NULL;
    e->taken = true;
    return hr_redis_check(reply, errstr, errlen);
}
