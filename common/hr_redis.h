/* hr_redis: herald's Redis client — one server (the default) or a Redis
 * Cluster (redis.cluster), key naming and the Lua script registry.
 *
 * An hr_redis is owned by one thread (hiredis contexts are not thread-safe).
 * Each server is an hr_node (hr_node.h): commands that fail on a broken
 * connection reconnect once and retry (so a command whose reply was lost
 * runs twice: scripts must be idempotent on their own output); the caller
 * sees -1 and an errstr only when that fails too.  After a failed connect,
 * calls to that server fail at once for a short window (100 ms doubling to
 * 2 s) instead of each waiting out the connect timeout.  Lua scripts live
 * in common/lua/NAME.lua, are compiled into the binary (hr_lua_scripts.h is
 * generated from them), loaded with SCRIPT LOAD on every connect (on each
 * node of a cluster: script caches are per node) and called with EVALSHA;
 * a NOSCRIPT answer (Redis restarted, SCRIPT FLUSH) reloads the script and
 * repeats the call once.
 *
 * In cluster mode every command goes to the master of its key's slot, with
 * the redirections, failover handling and SCAN rules of hr_cluster.h;
 * callers do not change.  In single-node mode none of that runs: no slot
 * is computed and nothing is allocated per call.
 *
 * Keys are named by hr_keys.h (included here) from hr_redis_prefix(); every
 * per-task key carries the hash tag {t<ID>}: "herald:{t42}:subs". */
#ifndef HR_REDIS_H
#define HR_REDIS_H

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "hr_cluster.h"
#include "hr_config.h"
#include "hr_keys.h"
#include "hr_lua_scripts.h"
#include "hr_node.h"

typedef struct hr_redis hr_redis;

/* Connects (AUTH and SELECT as configured) and loads every script; in
 * cluster mode reads the slot map from the first seed that answers (the
 * masters are connected on their first command). */
int hr_redis_connect(const hr_config *cfg, hr_redis **out, char *errstr, size_t errlen);
void hr_redis_free(hr_redis *r);

/* The configured key prefix, for the hr_keys builders. */
const char *hr_redis_prefix(const hr_redis *r);

/* One command (argv form).  Returns the reply (caller frees with
 * freeReplyObject) or NULL with ERRSTR set; a Redis error reply is returned
 * as NULL with its text in ERRSTR. */
redisReply *hr_redis_cmd(hr_redis *r, char *errstr, size_t errlen, int argc, const char **argv,
                         const size_t *argvlen);
/* The same with a hiredis format string. */
redisReply *hr_redis_cmdf(hr_redis *r, char *errstr, size_t errlen, const char *fmt, ...);
redisReply *hr_redis_vcmdf(hr_redis *r, char *errstr, size_t errlen, const char *fmt, va_list ap);

/* EVALSHA of script ID with NKEYS keys followed by the other arguments
 * (ARGV holds keys then args; ARGVLEN may be NULL for C strings). */
redisReply *hr_redis_eval(hr_redis *r, hr_lua_id id, int nkeys, int argc, const char **argv,
                          const size_t *argvlen, char *errstr, size_t errlen);

/* Pipelines are hr_pipe (hr_pipe.h), which shares this client's internals
 * through the calls below and replays NOSCRIPT itself. */
/* The node formatted command CMD of LEN bytes goes to: the one server, or
 * in cluster mode its slot's master in the map as it is (NULL with ERRSTR
 * when none is known, or the command needs every master).  Sends nothing. */
hr_node *hr_redis_route(hr_redis *r, const char *cmd, size_t len, char *errstr, size_t errlen);
/* The cluster's router, or NULL in single-node mode. */
hr_cluster *hr_redis_cluster(hr_redis *r);
/* ARGV (lengths in ARGVLEN, or strlen when NULL) formatted as a command
 * into *OUT, as redisFormatCommandArgv does (free with redisFreeCommand);
 * its length, or -1 when out of memory. */
int hr_redis_format_argv(int argc, const char **argv, const size_t *argvlen, char **out);
/* "EVALSHA <sha> <nkeys> argv..." formatted into *OUT (free with
 * redisFreeCommand); its length, or -1 when out of memory. */
int hr_redis_evalsha_format(const hr_redis *r, hr_lua_id id, int nkeys, int argc, const char **argv,
                            const size_t *argvlen, char **out);
/* Formatted command CMD of LEN bytes (a call of script SCRIPT, an
 * hr_lua_id, or -1) as one call: routed, reconnected and retried once as
 * hr_redis_cmd's.  Every reply, error replies included; NULL with ERRSTR
 * when the connection failed. */
redisReply *hr_redis_exec(hr_redis *r, const char *cmd, size_t len, int script, char *errstr,
                          size_t errlen);
/* A reply that is an error becomes NULL (freed) with its text in ERRSTR. */
redisReply *hr_redis_check(redisReply *reply, char *errstr, size_t errlen);

/* Whether ERRSTR, what a failed call of this client reported, is one a
 * failover passes through: the server unreachable or gone (connection
 * refused, reset or closed, a timeout, the fail-fast window of a node that
 * is down), restarting (LOADING), or a cluster moving a slot's master
 * (MOVED / ASK left over, CLUSTERDOWN, READONLY from a demoted master,
 * TRYAGAIN, no master known for the slot).  Such a call may succeed when
 * tried again in a few seconds; any other error (a script's, a bad reply,
 * out of memory) will not.  Callers that hold work across an outage
 * (issue 34: the worker's chunks) retry on these and give up on the rest. */
bool hr_redis_failover(const char *errstr);

/* Milliseconds since the epoch by the Redis server's clock (TIME). */
int hr_redis_time_ms(hr_redis *r, int64_t *out, char *errstr, size_t errlen);

/* Deletes the keys matching MATCH (SCAN, bounded); with DEL false only
 * counts them, stopping at the first.  The number deleted (or found), or
 * -1.  MATCH spells the task's hash tag, so on a Redis Cluster the SCAN
 * runs on the master of the task's slot, where all its keys are
 * (hr_cluster.h). */
int64_t hr_redis_del_matching(hr_redis *r, const char *match, bool del, char *errstr,
                              size_t errlen);

#endif
