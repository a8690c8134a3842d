/* wk_chunk: one chunk being pushed, and its Redis side.
 *
 * A wk_chunk is created by the lifecycle for a chunk message, holds its
 * task (a wk_task reference the lifecycle takes and puts), the lease, the
 * members read from the chunk set (the SMEMBERS reply owns the uid strings
 * every push points at), the HGETALL replies of the recipients when the
 * task's templates use user.*, one wk_push per member, and the recipients
 * settled but not yet acknowledged.
 *
 * Every Redis operation is a job on the worker's Redis thread (wk_redis):
 * the calls below only submit it, and its answer comes back on the loop
 * thread through the chunk's hooks (the lifecycle's).  The scripts are in
 * common/lua/:
 *   open      one round trip: GET ctl, SET lease NX PX, SMEMBERS; then,
 *             as needed, the invalid members dead-lettered, pipelined
 *             HGETALLs (user.*), the addresses (fcm, apns, smtp channels)
 *   check     a slice of the members through the throttle (hr_throttle:
 *             throttle.lua for up to 100 members per call, pipelined), then
 *             ack.lua counting the blocked ones under 'throttled'; the
 *             lifecycle checks the first slice small and pushes its
 *             recipients while the next slices are checked
 *   flush     the buffered acknowledgements: ack.lua (sent), ack.lua
 *             (unregistered) and dead_letter.lua in the round's pipeline,
 *             which the flushes of other chunks, the renewals and the
 *             control reads share (batched)
 *   end       the last flush, then chunk_done.lua (close: every recipient
 *             settled; lease_release.lua behind it, for a set found not
 *             empty), lease_release.lua (abandon, park) or drop_set.lua
 *             through hr_finish_drop (cancel, expire)
 * ack.lua, dead_letter.lua and chunk_done.lua answer the task's stats hash
 * counters after the call; the chunk keeps the latest (C->counters) for the
 * lifecycle to hand to the reporter, which writes them as absolute values.
 *
 * Lifetime: a job in flight points at its chunk (keys, members: they do not
 * change while jobs run), so C->jobs counts them and a chunk the lifecycle
 * is done with (gone) is freed only once that count is 0.  Each job moves
 * its results into the chunk on the loop thread before its hook runs, so
 * the Redis thread never writes a chunk.  Keys are built once at creation
 * ({t<ID>} hash tag on every one; the shard's {t<ID>:s<k>} for a chunk of
 * a sharded task's shard k >= 1, but the control key, which is the
 * task's). */
#ifndef WK_CHUNK_H
#define WK_CHUNK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hr_addr.h"
#include "hr_chunkmsg.h"
#include "hr_finish.h"
#include "hr_redis.h"
#include "wk_push.h"
#include "wk_redis.h"
#include "wk_task.h"

/* The config's bound on worker.max_chunks_in_flight. */
#define WK_CHUNK_MAX_OPEN 64

/* Why a chunk stops before its set is empty (the task's control key). */
typedef enum wk_chunk_halt {
    WK_CHUNK_RUN = 0,
    WK_CHUNK_PARK,   /* pause: recipients stay, lease released, row 'parked' */
    WK_CHUNK_EXPIRE, /* the task's expire_at passed: recipients counted as expired and dropped */
    WK_CHUNK_CANCEL, /* cancel: recipients counted as cancelled and dropped */
} wk_chunk_halt;

/* Where a chunk is in its life (the lifecycle's view; jobs move it). */
typedef enum wk_chunk_phase {
    WK_CHUNK_NEW = 0, /* not opened yet, or waiting for a foreign lease */
    WK_CHUNK_OPENING, /* its open job runs */
    WK_CHUNK_OPEN,    /* lease held, members read: pushes go */
    WK_CHUNK_ENDING,  /* its end job runs: nothing else starts, no push is linked */
} wk_chunk_phase;

/* How a chunk ends in Redis (wk_chunk_finalize). */
typedef enum wk_chunk_ending {
    WK_CHUNK_CLOSE,   /* chunk_done.lua: every recipient settled */
    WK_CHUNK_RELEASE, /* lease_release.lua: abandoned or parked */
    WK_CHUNK_DROP,    /* drop_set.lua: what is left counted as C->halt says (cancel, expire) */
} wk_chunk_ending;

/* The stats hash's counters as a script left them (absolute values). */
typedef struct wk_chunk_counters {
    int64_t sent, failed, throttled, retried, unregistered;
} wk_chunk_counters;

/* Recipients settled and not yet acknowledged; a flush takes them all. */
typedef struct wk_chunk_acks {
    const char **sent; /* delivered: ack.lua under 'sent' */
    size_t nsent;
    const char **unregs; /* no live address: ack.lua under 'unregistered' */
    size_t nunregs;
    struct wk_chunk_dead {
        const char *uid;
        char *reason; /* owned */
    } * dead;         /* failed for good: dead_letter.lua */
    size_t ndead;
    int64_t retried; /* retries spent since the last flush */
} wk_chunk_acks;

typedef struct wk_chunk wk_chunk;

/* The answers of a chunk's jobs, on the loop thread (C->jobs already
 * counts the job out; C may be gone). */
/* What the jobs answer (wk_chunk_open.h, wk_chunk_check.h, wk_chunk_end.h). */
struct wk_chunk_opened;
struct wk_chunk_checked;
struct wk_chunk_ended;

typedef struct wk_chunk_hooks {
    void (*opened)(wk_chunk *c, const struct wk_chunk_opened *res);
    void (*checked)(wk_chunk *c, const struct wk_chunk_checked *res);
    void (*flushed)(wk_chunk *c, int rc, const char *errstr);
    void (*ended)(wk_chunk *c, const struct wk_chunk_ended *res);
} wk_chunk_hooks;

struct wk_chunk {
    TAILQ_ENTRY(wk_chunk) link;
    uint64_t id; /* unique in the process: jobs that outlive a chunk name it by this */
    void *ctx;   /* the hooks' owner (the lifecycle) */
    const wk_chunk_hooks *hooks;
    hr_chunkmsg msg;
    int32_t partition;
    int64_t offset;
    wk_task *task;
    char k_set[HR_KEY_MAX], k_lease[HR_KEY_MAX], k_pending[HR_KEY_MAX];
    char k_stats[HR_KEY_MAX], k_subs[HR_KEY_MAX], k_failed[HR_KEY_MAX], k_ctl[HR_KEY_MAX];
    wk_chunk_phase phase;
    wk_chunk_ending ending; /* ENDING: how */
    const char *end_why;    /* RELEASE of an abandon: why (static); NULL for a park */
    bool end_settle;        /* an abandon that lets the offset count as finished */
    unsigned jobs;          /* jobs in flight that point at the chunk */
    bool gone;              /* the lifecycle is done with it: freed when JOBS is 0 */
    redisReply *members;    /* SMEMBERS reply */
    redisReply **users;     /* per member, or NULL when not needed */
    wk_push *pushes;
    uint8_t *verdicts; /* hr_throttle_verdict per push, NULL = not throttled */
    size_t npushes;
    size_t open;      /* pushes not yet settled */
    size_t unchecked; /* of those, waiting for their throttle slice (not submitted) */
    size_t slices;    /* throttle slices in flight */
    wk_chunk_acks acks;
    size_t ack_batch;
    hr_addr_list addrs; /* addressed channels: the members' addresses on it */
    int64_t sent, failed, retried, throttled,
        unregistered;              /* totals, for the chunk_done log line */
    int64_t invalid;               /* members dead-lettered as "invalid uid" at open */
    int64_t user_errors;           /* HGETALL error replies (the user got no attributes) */
    char user_error[160];          /* the first of them, for the log */
    int64_t shadowed, key_missing; /* throttle, for the logs */
    int64_t started_ms, opened_ms;
    /* > 0: another process held the lease at the first open; the open is
     * retried until then (a dead holder's lease runs out by it). */
    int64_t lease_wait_until_ms;
    wk_chunk_counters counters; /* latest stats hash values seen */
    bool counters_new;          /* COUNTERS changed since the worker took them */
    bool ack_failed;            /* a flush failed: the set still holds delivered recipients */
    wk_chunk_halt halt;
    bool revoked; /* its partition is being revoked: finish in-flight, then give up */
    bool held;    /* pushes' hold flag: set once halt is not RUN or revoked */
};

/* A new chunk for MSG with TASK (the reference passes to the chunk's
 * owner, who puts it), its keys under PREFIX; HOOKS and CTX get its jobs'
 * answers.  NULL when out of memory. */
wk_chunk *wk_chunk_new(const char *prefix, const hr_chunkmsg *msg, int32_t partition,
                       int64_t offset, wk_task *task, int ack_batch, const wk_chunk_hooks *hooks,
                       void *ctx);
/* Frees C (no job may point at it: C->jobs is 0). */
void wk_chunk_free(wk_chunk *c);

/* For the job modules (wk_chunk_open, _check, _acks, _end): */
/* Submits JOB (the start of its allocated struct) for C: 0 with C->jobs
 * counting it, or -1 with JOB freed. */
int wk_chunk_submit(wk_redis *rd, wk_chunk *c, wk_redis_job *job);
/* Frees the buffers of A and empties it. */
void wk_chunk_acks_free(wk_chunk_acks *a);
/* Frees USERS, the HGETALL replies of a members reply of N elements (NULL
 * = none). */
void wk_chunk_users_free(redisReply **users, size_t n);

/* What a GET of a task's control key (REPLY) says: run unless pause or
 * cancel. */
wk_chunk_halt wk_chunk_halt_of(const redisReply *reply);

/* A chunk member is a uid: decimal digits only, 1..INT64_MAX. */
bool wk_chunk_uid_valid(const char *s);

/* What the reporter counts C's counters on: its shard for a chunk of a
 * sharded task (the message carries it), else HR_SHARD_NONE. */
int wk_chunk_row(const wk_chunk *c);

#endif
