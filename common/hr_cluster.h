/* hr_cluster: Redis Cluster routing under hr_redis and hr_pipe — the slot
 * map, one hr_node per cluster node, and what a command does when the
 * cluster answers that it is elsewhere or not ready.
 *
 * The slot map comes from CLUSTER SLOTS, asked of the seed nodes
 * (redis.nodes, else redis.host:port) and then of any known node.  Each
 * slot maps to its master; every node named (masters, replicas, seeds,
 * redirection targets; at most HR_CLUSTER_NODES_MAX) is an hr_node that
 * connects on its first command, with AUTH and the scripts loaded (script
 * caches are per node), and keeps its own fail-fast window.
 *
 * hr_cluster_exec() runs one formatted command (hr_slot.h finds its slot;
 * keyless commands go to the first master that is not down):
 *   - MOVED slot host:port: that slot's owner is updated at once, the whole
 *     map is read again before the next command (the cluster resharded or
 *     failed over), and the command is sent to the new owner;
 *   - ASK slot host:port (the slot is being migrated): ASKING and the
 *     command go to the target, once, and the map is left alone;
 *   - at most HR_CLUSTER_REDIRECTS_MAX redirections (MOVED, ASK, or a move
 *     to another node after a connection failure) per call;
 *   - TRYAGAIN (a multi-key command during a migration) and CLUSTERDOWN (no
 *     master for some slot: a failover in progress): the command did not
 *     run; it is sent again after 20 ms, doubling to 500 ms, for as long as
 *     the call has spent less than redis.timeout_ms (a pipeline: the commands
 *     it sends again, together), then that error is the answer; CLUSTERDOWN
 *     also has the map read again first;
 *   - a connection failure (after hr_node's own reconnect-and-retry-once):
 *     the map is read again (at most every HR_CLUSTER_REFRESH_MIN_MS) from
 *     any node that answers; when it names another master for the slot the
 *     command goes there, else the call fails at once with the node's
 *     error (the node's fail-fast window keeps the next calls from waiting
 *     on it).  So while a master is dead and before its replica is promoted
 *     (cluster-node-timeout, then an election), calls for its slots fail
 *     and their callers retry later, as with a single Redis that is down.
 *
 * SCAN: a MATCH pattern that spells a hash tag (hr_keys's chunk and lease
 * patterns: "herald:{t42}:chunk:*") goes to the master of that slot, so the
 * cursor is that node's.  A SCAN without one walks every master in turn,
 * ordered by their first slot: the cursor handed back is "<i>-<cursor>"
 * (the i-th master's own cursor) until the last master is done ("0"); a
 * reshard or failover during such a walk may skip or repeat keys.  KEYS
 * without a tag is refused.
 *
 * An hr_cluster belongs to the thread of its hr_redis. */
#ifndef HR_CLUSTER_H
#define HR_CLUSTER_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_clock.h"
#include "hr_node.h"

#define HR_CLUSTER_NODES_MAX 1024
#define HR_CLUSTER_REDIRECTS_MAX 8
#define HR_CLUSTER_REFRESH_MIN_MS 100
/* room for a node's host name (an answer's longer one is not followed) */
#define HR_CLUSTER_HOST_MAX 256

typedef struct hr_cluster hr_cluster;

/* What a reply says about where its command belongs. */
typedef enum hr_cluster_answer {
    HR_CLUSTER_RAN,      /* the command ran (its reply may still be an error) */
    HR_CLUSTER_MOVED,    /* MOVED: the slot has another owner */
    HR_CLUSTER_ASK,      /* ASK: the key is on the slot's migration target */
    HR_CLUSTER_TRYAGAIN, /* TRYAGAIN: a migration splits the command's keys */
    HR_CLUSTER_DOWN,     /* CLUSTERDOWN: the cluster cannot serve the slot now */
} hr_cluster_answer;

/* A cluster that knows NSEEDS seed nodes SEEDS ("host:port"), with no map
 * and nothing connected yet (hr_cluster_refresh() reads the map).  OPTS
 * must outlive it.  0, or -1 with ERRSTR (a bad seed, out of memory). */
int hr_cluster_new(const char *const *seeds, size_t nseeds, const hr_node_opts *opts,
                   hr_cluster **out, char *errstr, size_t errlen);
void hr_cluster_free(hr_cluster *cl);

/* Reads the slot map with CLUSTER SLOTS from the first known node that
 * answers (masters first, nodes in their fail-fast window skipped).  0, or
 * -1 with ERRSTR (the map is then unchanged). */
int hr_cluster_refresh(hr_cluster *cl, char *errstr, size_t errlen);
/* Applies the CLUSTER SLOTS reply REPLY that node host FROM sent (its host
 * stands in for an empty or missing endpoint).  Slots it does not cover have
 * no master afterwards.  0, or -1 with ERRSTR when the reply is malformed
 * (the map is then unchanged). */
int hr_cluster_apply_slots(hr_cluster *cl, const redisReply *reply, const char *from, char *errstr,
                           size_t errlen);

/* The master of SLOT (0..16383), or for HR_SLOT_ANY the first master that
 * is not down.  NULL with ERRSTR when the map has none (or for HR_SLOT_ALL). */
hr_node *hr_cluster_node(hr_cluster *cl, int slot, char *errstr, size_t errlen);

/* Marks the map stale: the next hr_cluster_settle() or routed call reads
 * it again (a pipeline found its slot's master unreachable). */
void hr_cluster_mark_stale(hr_cluster *cl);
/* Reads the map again when a MOVED or CLUSTERDOWN made it stale (at most
 * every HR_CLUSTER_REFRESH_MIN_MS): what a pipeline does before it routes
 * a batch. */
void hr_cluster_settle(hr_cluster *cl);
/* The node formatted command CMD of LEN bytes goes to first: its slot's
 * master in the map as it is (NULL with ERRSTR as hr_cluster_node()).  It
 * sends nothing, so a pipeline may route while commands it wrote to some
 * nodes wait there for their replies to be read. */
hr_node *hr_cluster_route(hr_cluster *cl, const char *cmd, size_t len, char *errstr, size_t errlen);

/* Runs formatted command CMD of LEN bytes (a call of script SCRIPT, or -1)
 * as the header says, waiting on TRYAGAIN / CLUSTERDOWN until DEADLINE
 * (hr_clock_mono_ms() time; hr_cluster_deadline() for one call, one shared
 * by all the commands a pipeline sends again, so a batch waits once).
 * FIRST, when not NULL, is a reply the command already got from node FROM
 * (a pipeline's MOVED, ASK, TRYAGAIN or CLUSTERDOWN): it is taken over and
 * acted on before anything is sent.  The reply (error replies included;
 * the caller frees), or NULL with ERRSTR. */
redisReply *hr_cluster_exec(hr_cluster *cl, const char *cmd, size_t len, int script,
                            redisReply *first, hr_node *from, int64_t deadline, char *errstr,
                            size_t errlen);
/* redis.timeout_ms from now: the deadline of a call, or of a batch. */
int64_t hr_cluster_deadline(const hr_cluster *cl);

/* What REPLY says (see hr_cluster_answer); for MOVED and ASK also the slot
 * and the target (HOST may come back "" when the server left it out: the
 * node that answered is meant). */
hr_cluster_answer hr_cluster_parse_answer(const redisReply *reply, int *slot, char *host,
                                          size_t hostlen, int *port);

#endif
