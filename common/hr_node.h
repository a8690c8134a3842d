/* hr_node: one synchronous hiredis connection to one Redis server, with
 * reconnection, AUTH, SELECT and herald's Lua scripts loaded on it.
 *
 * hr_redis holds one node (single-node mode) or hr_cluster holds one per
 * cluster node; hr_pipe writes its batches on nodes.  A node connects
 * lazily: hr_node_new() only records where the server is.  A dead context
 * (hiredis sets c->err after any I/O or protocol error) is replaced by a
 * new connection before the next command.  hr_node_exec() retries a
 * command that failed on I/O or EOF once on a fresh connection (so a
 * command whose reply was lost runs twice: scripts are idempotent on their
 * own output) and reloads a script that answered NOSCRIPT, once.  After a
 * failed connect the node fails calls at once for a short window (100 ms
 * doubling to 500 ms) instead of each waiting out the connect timeout.
 *
 * A node belongs to the thread of its hr_redis (hiredis contexts are not
 * thread-safe).  OPTS and the SHA table it points to must outlive it. */
#ifndef HR_NODE_H
#define HR_NODE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

#include "hr_lua_scripts.h"

#define HR_NODE_SHA_LEN 40

/* What every node of one hr_redis shares. */
typedef struct hr_node_opts {
    const char *password; /* "" = no AUTH */
    int db;               /* SELECT when not 0 */
    int timeout_ms;       /* connect and command timeout */
    /* SHA1 (hex) of every embedded script, for SCRIPT LOAD's check */
    const char (*sha)[HR_NODE_SHA_LEN + 1];
} hr_node_opts;

typedef struct hr_node hr_node;

/* A node for the server HOST:PORT, not connected yet.  NULL when out of
 * memory. */
hr_node *hr_node_new(const char *host, int port, const hr_node_opts *opts);
void hr_node_free(hr_node *node);

const char *hr_node_host(const hr_node *node);
int hr_node_port(const hr_node *node);

/* Connects when there is no live context (AUTH, SELECT, every script).
 * 0, or -1 with ERRSTR (at once inside the fail-fast window). */
int hr_node_ready(hr_node *node, char *errstr, size_t errlen);
/* The live context, or NULL; valid until the next hr_node_* call. */
redisContext *hr_node_context(hr_node *node);
/* Inside the fail-fast window of a failed connect. */
bool hr_node_down(const hr_node *node);
/* Its last connect failed and none succeeded since (inside the window or
 * past it): a cluster master like this one is likely dead. */
bool hr_node_failed(const hr_node *node);
/* Drops the context (a caller found it unusable). */
void hr_node_close(hr_node *node);

/* One formatted command CMD of LEN bytes, preceded by ASKING when ASKING
 * (a cluster's ASK redirection), with the reconnect-and-retry-once and,
 * for a call of script SCRIPT (an hr_lua_id, or -1), the NOSCRIPT reload.
 * Every reply, error replies included (caller frees); NULL with ERRSTR
 * when the connection failed. */
redisReply *hr_node_exec(hr_node *node, const char *cmd, size_t len, int script, bool asking,
                         char *errstr, size_t errlen);
/* SCRIPT LOAD of script ID on the live context.  0 or -1 (ERRSTR). */
int hr_node_load_script(hr_node *node, hr_lua_id id, char *errstr, size_t errlen);
/* A NOSCRIPT error reply: the server lost its script cache (restart,
 * SCRIPT FLUSH). */
bool hr_node_noscript(const redisReply *reply);
/* ERRSTR = the context's error ("redis HOST:PORT: ..."). */
void hr_node_error(const hr_node *node, char *errstr, size_t errlen);

#endif
