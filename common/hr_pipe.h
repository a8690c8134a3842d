/* hr_pipe: a Redis pipeline on an hr_redis — queue commands and script
 * calls, send them in one write per node, read every reply.
 *
 * The pipeline keeps each queued command formatted, so when a script call
 * answers NOSCRIPT (Redis restarted or ran SCRIPT FLUSH since the
 * connection loaded its scripts) it loads that script and sends the same
 * bytes again, once; such a call did not run, so running it later counts
 * nothing twice, but it then runs after the commands queued behind it.  A
 * connection that breaks mid-batch is not retried (the batch may have run
 * in part): every reply not read yet from that node reports the
 * connection's error, and the next hr_pipe_send() reconnects.
 *
 * On a Redis Cluster (hr_cluster.h) each command goes to the master of its
 * key's slot: the batch is split per node (one write and one read pass per
 * master; the per-uid commands of the worker and the throttle spread over
 * all of them), commands of one slot keep their order, and the commands
 * that did not run — answered MOVED, ASK, TRYAGAIN or CLUSTERDOWN, or not
 * written because their node was down or unknown — are sent again one by one with the
 * redirections followed, after the rest of the batch.  hr_pipe_reply(i)
 * stays the reply of the i-th command queued.
 *
 * Use: hr_pipe_cmd() / hr_pipe_eval() to queue, hr_pipe_exec() (or
 * hr_pipe_send() now and hr_pipe_recv() later, to overlap other work with
 * Redis; no other call on the same hr_redis in between), then
 * hr_pipe_reply() for each queued command in any order, then
 * hr_pipe_reset() to queue the next batch.  A pipeline belongs to the
 * thread that owns its hr_redis.
 *
 * Replies are the caller's to free with freeReplyObject, unless the
 * pipeline has an arena (hr_pipe_set_arena): then every reply it reads is
 * built in the arena and stays the arena's (hr_arena.h), valid until the
 * arena is freed, past hr_pipe_reset() and hr_pipe_free(). */
#ifndef HR_PIPE_H
#define HR_PIPE_H

#include <stddef.h>

#include "hr_arena.h"
#include "hr_redis.h"

typedef struct hr_pipe hr_pipe;

/* A pipeline on R (not owned).  NULL when out of memory. */
hr_pipe *hr_pipe_new(hr_redis *r);
/* Frees queued commands and unclaimed replies; NULL is fine. */
void hr_pipe_free(hr_pipe *pipe);
/* Empties PIPE for the next batch (replies not taken are freed, unless
 * they are an arena's). */
void hr_pipe_reset(hr_pipe *pipe);
/* Builds the replies read from now on in ARENA (not owned; NULL: back to
 * hiredis's own allocations), which owns them: hr_pipe_reply's replies are
 * then never passed to freeReplyObject. */
void hr_pipe_set_arena(hr_pipe *pipe, hr_arena *arena);

/* Queues one command (argv form; ARGVLEN may be NULL for C strings).  The
 * arguments are copied.  0, or -1 when out of memory. */
int hr_pipe_cmd(hr_pipe *pipe, int argc, const char **argv, const size_t *argvlen);
/* Queues EVALSHA of script ID with NKEYS keys then the other arguments. */
int hr_pipe_eval(hr_pipe *pipe, hr_lua_id id, int nkeys, int argc, const char **argv,
                 const size_t *argvlen);
/* Commands queued since the last reset. */
size_t hr_pipe_count(const hr_pipe *pipe);

/* Writes every command queued and not sent yet.  0, or -1 with ERRSTR
 * when none could be written (they then answer that error; on a cluster a
 * command whose node alone was down is sent again by hr_pipe_recv()). */
int hr_pipe_send(hr_pipe *pipe, char *errstr, size_t errlen);
/* Reads the replies of the commands sent, replaying NOSCRIPT once (and on
 * a cluster sending again what did not run).  0 when every command has a
 * reply (which may be an error reply), -1 with ERRSTR when a connection
 * failed. */
int hr_pipe_recv(hr_pipe *pipe, char *errstr, size_t errlen);
/* hr_pipe_send() then hr_pipe_recv(). */
int hr_pipe_exec(hr_pipe *pipe, char *errstr, size_t errlen);

/* hr_pipe_exec() for writes whose answers only say whether they ran: 0
 * when every queued command answered without an error, else -1 with the
 * first failure in ERRSTR.  The replies are consumed. */
int hr_pipe_exec_all(hr_pipe *pipe, char *errstr, size_t errlen);

/* The reply of queued command I (0-based), handed over (free it with
 * freeReplyObject; with an arena, the arena's); NULL with ERRSTR for an error reply, a command that
 * has no reply (connection failed, not sent) or one already taken. */
redisReply *hr_pipe_reply(hr_pipe *pipe, size_t i, char *errstr, size_t errlen);
/* The same, except that a command the batch brought no reply for (its
 * connection failed: it may have run, or was not sent) is sent again
 * alone through hr_redis_exec, which reconnects and retries once: what a
 * single call of it would have done.  Only for a command that may run
 * twice: a read, a script idempotent on its output, an INCR whose double
 * run only skips a number. */
redisReply *hr_pipe_reply_retry(hr_pipe *pipe, size_t i, char *errstr, size_t errlen);

#endif
