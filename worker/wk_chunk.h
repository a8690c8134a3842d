/* wk_chunk: one chunk being pushed, and its Redis side.
 *
 * A wk_chunk is created by the lifecycle for a chunk message, holds its
 * task (a wk_task reference the lifecycle takes and puts), the lease, the
 * members read from the chunk set (the SMEMBERS reply owns the uid strings
 * every push points at), per part of the open's read (wk_chunk_open.h)
 * the HGETALL replies of the recipients when the task's templates use
 * user.* and their addresses, one wk_push per member read, and the
 * recipients settled but not yet acknowledged.
 *
 * Every Redis operation is a job on the worker's Redis thread (wk_redis),
 * each in a module of its own: wk_chunk_open (lease, members, user hashes,
 * addresses), wk_chunk_check (throttle slices), wk_chunk_acks (the
 * acknowledgement buffers and their flush) and wk_chunk_end (close, park,
 * drop, release).  A job's call only submits it; its answer comes back on
 * the loop thread through the chunk's hooks (the lifecycle's).  The jobs
 * run and report; what follows is the lifecycle's to decide, and only the
 * lifecycle changes a chunk's state (below).
 *
 * Lifetime: a job in flight points at its chunk (keys, members: they do not
 * change while jobs run), so C->jobs counts them and a chunk the lifecycle
 * is done with (GONE) is freed only once that count is 0.  Each job moves
 * its results into the chunk on the loop thread before its hook runs, so
 * the Redis thread never writes a chunk.
 *
 * The events gate (wk_gate.h): with events on, a job submitted while an
 * event of the chunk's recipients (C->ev_last) is not confirmed waits in
 * the gate, and so does every job of the chunk after it (a chunk's jobs
 * keep their order), until the gate lets it through.  A waiting job counts
 * in C->jobs like one in flight.  Keys are built once at creation
 * ({t<ID>} hash tag on every one; the shard's {t<ID>:s<k>} for a chunk of
 * a sharded task's shard k >= 1, but the control key, which is the
 * task's). */
#ifndef WK_CHUNK_H
#define WK_CHUNK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hr_addr.h"
#include "hr_arena.h"
#include "hr_chunkmsg.h"
#include "hr_finish.h"
#include "hr_redis.h"
#include "wk_gate.h"
#include "wk_push.h"
#include "wk_redis.h"
#include "wk_task.h"

/* The config's bound on worker.max_chunks_in_flight. */
#define WK_CHUNK_MAX_OPEN 64

/* What a task's control key (or its expire_at) says of its chunks. */
typedef enum wk_chunk_halt {
    WK_CHUNK_RUN = 0,
    WK_CHUNK_PARK,   /* pause: recipients stay, lease released, row 'parked' */
    WK_CHUNK_EXPIRE, /* the task's expire_at passed: recipients counted as expired and dropped */
    WK_CHUNK_CANCEL, /* cancel: recipients counted as cancelled and dropped */
} wk_chunk_halt;

/* Where a chunk is in its life.  The lifecycle alone changes it, through
 * wk_lifecycle_set (wk_lifecycle.c), which holds the name table and logs
 * every transition (event chunk_state, at debug level) and any it does not
 * expect (chunk_state_unexpected, an error).  The order matters: the held
 * states rise with the strength of what holds the chunk, and the endings
 * follow them.
 *
 * Transitions:
 *   NEW -> OPENING                     a message became the chunk
 *   NEW -> HANDING_BACK                its task's channel is not configured here
 *                                      (a chunk with no task: only its keys)
 *   OPENING -> PUSHING                 the open answered: lease held, members read
 *   OPENING -> CLOSING                 ... and the set was empty
 *   OPENING -> LEASE_WAIT -> OPENING   a live foreign lease: the open is tried
 *                                      again every WK_LIFECYCLE_CTL_MS
 *   OPENING -> GONE                    the lease stayed foreign past the wait
 *                                      (chunk_busy), or the open failed
 *   OPENING, LEASE_WAIT, PUSHING -> HELD_PAUSE | HELD_EXPIRE | HELD_CANCEL
 *                                      the task's control key or expire_at
 *   OPENING, LEASE_WAIT, PUSHING, HELD_PAUSE..HELD_CANCEL -> HELD_REVOKE
 *                                      its partition is being revoked
 *   HELD_PAUSE -> HELD_EXPIRE -> HELD_CANCEL   a stronger halt while held
 *   PUSHING -> CLOSING                 every recipient settled
 *   HELD_x -> PARKING | EXPIRING | CANCELLING | ABANDONING (its own)
 *                                      nothing of it open any more
 *   PUSHING, HELD_x -> YIELDING        its lease was found another's
 *   OPENING..HELD_REVOKE -> ABANDONING shutdown, or a revoke's grace ran out
 *   OPENING..YIELDING -> GONE          an end job answered, or a Redis error
 *                                      that is no failover's dropped the chunk
 *                                      (wk_lifecycle_drop)
 *   OPENING..YIELDING -> STALLED       a job failed on a failover (hr_redis_failover):
 *                                      held, retried with back-off
 *   STALLED -> OPENING                 from OPENING, LEASE_WAIT or PUSHING: its
 *                                      acks written, nothing in flight, the rest
 *                                      read again under the lease it kept
 *   STALLED -> HELD_x | CLOSING..YIELDING   back to the hold or ending it came from
 *   STALLED -> HANDING_BACK            worker.stall_max_ms passed, or its partition
 *                                      was revoked: given up loudly
 *   HANDING_BACK -> GONE               handed back (handback.lua: the dispatcher
 *                                      republishes it within a second; tried
 *                                      again while Redis is away), or the
 *                                      hand-back failed otherwise (drop)
 * A held chunk starts no request; those running finish and are
 * acknowledged.  An ending chunk's end job runs, the last acknowledgements
 * first; it stays on the lifecycle's list (and counts against
 * max_chunks_in_flight, and keeps a revoke draining) until it answered. */
typedef enum wk_chunk_state {
    WK_CHUNK_NEW,        /* made; its open not submitted yet */
    WK_CHUNK_OPENING,    /* its open job runs (control key, lease, members) */
    WK_CHUNK_LEASE_WAIT, /* another process held the lease: waiting to open again */
    WK_CHUNK_PUSHING,    /* lease held, members read: its pushes go */
    /* held, then the ending in brackets once nothing of it is open */
    WK_CHUNK_HELD_PAUSE,  /* its task was paused (PARKING) */
    WK_CHUNK_HELD_EXPIRE, /* its task's expire_at passed (EXPIRING) */
    WK_CHUNK_HELD_CANCEL, /* its task was cancelled (CANCELLING) */
    WK_CHUNK_HELD_REVOKE, /* its partition is being revoked (ABANDONING) */
    /* a job failed on a failover: no request starts, the lease is kept
     * (renewed), the failed acks are back in the buffer, and the step that
     * failed is tried again with back-off (wk_lifecycle_stall) */
    WK_CHUNK_STALLED,
    /* ending: its end job runs */
    WK_CHUNK_CLOSING,    /* every recipient settled: chunk_done.lua, row 'done' */
    WK_CHUNK_PARKING,    /* lease released, the rest kept for a resume, row 'parked' */
    WK_CHUNK_EXPIRING,   /* the rest dropped and counted expired, row 'expired' */
    WK_CHUNK_CANCELLING, /* the rest dropped and counted cancelled, row 'cancelled' */
    /* given up (revoke, shutdown): lease released, the rest stays in the
     * set, the offset is not stored (the partition's next owner takes the
     * chunk again) */
    WK_CHUNK_ABANDONING,
    /* its lease is another's: acknowledgements written, the offset stored
     * (the lease's holder does the rest) */
    WK_CHUNK_YIELDING,
    /* given up after a stall: the buffered acks written if Redis takes them,
     * the lease released, the chunk marked for the dispatcher to publish at
     * once (handback.lua), the offset stored */
    WK_CHUNK_HANDING_BACK,
    WK_CHUNK_GONE, /* off the list; freed once no job points at it */
    WK_CHUNK__STATES
} wk_chunk_state;

/* The stats hash's counters as a script left them (absolute values). */
typedef struct wk_chunk_counters {
    int64_t sent, failed, throttled, retried, unregistered, opted_out, suppressed;
} wk_chunk_counters;

/* What a settled recipient is acknowledged as: the first kinds by ack.lua,
 * each under the stats field of its name (wk_chunk_acks.c), the last by
 * dead_letter.lua with a reason. */
typedef enum wk_chunk_settled {
    WK_CHUNK_SENT,         /* delivered */
    WK_CHUNK_UNREGISTERED, /* no live address */
    WK_CHUNK_OPTED_OUT,    /* the user opted out (docs/recipients.md) */
    WK_CHUNK_SUPPRESSED,   /* every address suppressed */
    WK_CHUNK_DEAD,         /* failed for good */
    WK_CHUNK__SETTLED
} wk_chunk_settled;

/* Recipients settled and not yet acknowledged; a flush takes them all, and
 * a flush that failed gives back what it could not write
 * (wk_chunk_acks_give_back).  The arrays start at an ack batch and grow
 * while a stall keeps them (at most the chunk's members: each settles once
 * per open). */
typedef struct wk_chunk_acks {
    const char **uids[WK_CHUNK_DEAD]; /* per kind acknowledged by ack.lua */
    size_t n[WK_CHUNK_DEAD], cap[WK_CHUNK_DEAD];
    struct wk_chunk_dead {
        const char *uid;
        char *reason; /* owned */
    } * dead;         /* failed for good: dead_letter.lua */
    size_t ndead, capdead;
    int64_t retried; /* retries spent since the last flush */
} wk_chunk_acks;

/* What one part of an open's read keeps for its pushes (wk_chunk_open.h):
 * the arena of the users' hashes when the templates read them (NULL
 * otherwise), and the members' addresses on the channel. */
typedef struct wk_chunk_part {
    hr_arena *arena;
    hr_addr_list addrs;
} wk_chunk_part;

typedef struct wk_chunk wk_chunk;

/* The answers of a chunk's jobs, on the loop thread (C->jobs already
 * counts the job out; C may be gone). */
/* What the jobs answer (wk_chunk_open.h, wk_chunk_check.h, wk_chunk_end.h). */
struct wk_chunk_opened;
struct wk_chunk_checked;
struct wk_chunk_ended;

typedef struct wk_chunk_hooks {
    void (*opened)(wk_chunk *c, const struct wk_chunk_opened *res); /* the open: its first part */
    void (*read)(wk_chunk *c, const struct wk_chunk_opened *res);   /* each part after it */
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
    wk_task *task; /* NULL only for a chunk handed back unopened (NEW -> HANDING_BACK) */
    char k_set[HR_KEY_MAX], k_lease[HR_KEY_MAX], k_pending[HR_KEY_MAX];
    char k_stats[HR_KEY_MAX], k_subs[HR_KEY_MAX], k_failed[HR_KEY_MAX], k_ctl[HR_KEY_MAX];
    char k_wait[HR_KEY_MAX], k_waves[HR_KEY_MAX]; /* recipients put off (wait_park.lua) */
    wk_chunk_state state;                         /* the lifecycle's (wk_lifecycle_set) */
    const char *why;                              /* why it went into STATE (static), for the log */
    bool held;            /* the pushes' hold flag: STATE is held or ending */
    unsigned jobs;        /* jobs in flight that point at the chunk */
    redisReply *members;  /* SMEMBERS reply */
    wk_chunk_part *parts; /* one per part of the open's read: what its pushes point at */
    size_t nparts;
    wk_push *pushes;   /* room for one per member; the first NPUSHES made (in the parts read) */
    uint8_t *verdicts; /* hr_throttle_verdict per push, NULL = not throttled */
    size_t npushes;
    size_t open;      /* pushes not yet settled, and the members not read yet (UNREAD) */
    size_t unchecked; /* of those, waiting for their throttle slice (not submitted) */
    size_t unread;    /* members whose part of the open's read has not answered */
    bool no_profiles; /* the open found no profile exists: its later parts read none */
    size_t slices;    /* throttle slices in flight */
    wk_chunk_acks acks;
    size_t ack_batch;
    int64_t sent, failed, retried, throttled, unregistered, opted_out,
        suppressed;                /* totals, for the chunk_done log line */
    int64_t deferred;              /* put off to their quiet hours' end at open */
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
    bool ack_failed;            /* the last flush failed: its acks are back in ACKS */
    /* STALLED / HANDING_BACK (wk_lifecycle_stall): the state the stall came
     * from and goes back to, since when (monotonic ms), the next try and
     * the back-off to the one after it. */
    wk_chunk_state stalled_from;
    int64_t stall_since_ms, stall_retry_ms;
    int stall_backoff_ms;
    /* The events gate: the number of the last event of its recipients (0:
     * none), the gate (NULL: events off) and its jobs waiting there. */
    uint64_t ev_last;
    wk_gate *gate;
    unsigned gated;
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
 * counting it (in flight, or waiting in the events gate), or -1 with JOB
 * freed. */
int wk_chunk_submit(wk_redis *rd, wk_chunk *c, wk_redis_job *job);
/* Frees the buffers of A and empties it. */
void wk_chunk_acks_free(wk_chunk_acks *a);
/* Forgets what C's open read (members, users, pushes, verdicts,
 * addresses), so that an open may read the chunk again; nothing of it may
 * be in flight or buffered (the acks point at the members). */
void wk_chunk_reset(wk_chunk *c);

/* What a GET of a task's control key (REPLY) says: run unless pause or
 * cancel. */
wk_chunk_halt wk_chunk_halt_of(const redisReply *reply);

/* Whether STATE is one whose end job runs (CLOSING .. HANDING_BACK). */
static inline bool wk_chunk_state_ending(wk_chunk_state state)
{
    return state >= WK_CHUNK_CLOSING && state <= WK_CHUNK_HANDING_BACK;
}

/* Whether C's end job runs. */
static inline bool wk_chunk_is_ending(const wk_chunk *c)
{
    return wk_chunk_state_ending(c->state);
}

/* Whether C holds its lease: PUSHING, held or STALLED (a stall keeps the
 * lease it had, and takes it again if it expired meanwhile: lease_renew.lua). */
static inline bool wk_chunk_is_leased(const wk_chunk *c)
{
    return c->state >= WK_CHUNK_PUSHING && c->state <= WK_CHUNK_STALLED;
}

/* A chunk member is a uid: decimal digits only, 1..INT64_MAX. */
bool wk_chunk_uid_valid(const char *s);

/* What the reporter counts C's counters on: its shard for a chunk of a
 * sharded task (the message carries it), else HR_SHARD_NONE. */
int wk_chunk_row(const wk_chunk *c);

#endif
