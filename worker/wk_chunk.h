/* wk_chunk: one chunk being pushed, and its Redis side.
 *
 * A wk_chunk is created by the worker for a chunk message, holds its task
 * (a wk_task reference the worker takes and puts), the lease, the members
 * read from the chunk set (the SMEMBERS reply owns the uid strings every
 * push points at), the HGETALL replies of the recipients when the task's
 * templates use user.*, one wk_push per member, and the uids delivered but
 * not yet acknowledged.  The Redis operations are synchronous, on the loop
 * thread, each one script call (common/lua/):
 *   open      SET lease NX PX, SMEMBERS, pipelined HGETALLs
 *   throttle  pipelined throttle.lua per member (hr_throttle), then ack.lua
 *             counting the blocked ones under 'throttled'
 *   ack       buffered; flushed per ack_batch with ack.lua
 *   dead      buffered with the acks (ack_batch counts both); flushed with
 *             dead_letter.lua in the same pipeline as ack.lua
 * ack.lua, dead_letter.lua and chunk_done.lua answer the task's stats hash
 * counters after the call; the chunk keeps the latest (C->counters) for the
 * worker to hand to the reporter, which writes them as absolute values.
 *   close     chunk_done.lua once every recipient is settled
 *   release   lease_release.lua when the chunk is abandoned or parked
 *   drop      hr_finish_drop (drop_set.lua) when the task is cancelled or
 *             expired (wk_lifecycle_halted)
 * Keys are built once at creation ({t<ID>} hash tag on every one; the
 * shard's {t<ID>:s<k>} for a chunk of a sharded task's shard k >= 1). */
#ifndef WK_CHUNK_H
#define WK_CHUNK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hr_addr.h"
#include "hr_chunkmsg.h"
#include "hr_redis.h"
#include "wk_sender.h"
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

/* The stats hash's counters as a script left them (absolute values). */
typedef struct wk_chunk_counters {
    int64_t sent, failed, throttled, retried, unregistered;
} wk_chunk_counters;

typedef struct wk_chunk {
    TAILQ_ENTRY(wk_chunk) link;
    hr_chunkmsg msg;
    int32_t partition;
    int64_t offset;
    wk_task *task;
    char k_set[HR_KEY_MAX], k_lease[HR_KEY_MAX], k_pending[HR_KEY_MAX];
    char k_stats[HR_KEY_MAX], k_subs[HR_KEY_MAX], k_failed[HR_KEY_MAX];
    redisReply *members; /* SMEMBERS reply */
    redisReply **users;  /* per member, or NULL when not needed */
    wk_push *pushes;
    uint8_t *verdicts; /* hr_throttle_verdict per push, NULL = not throttled */
    size_t npushes;
    size_t open;       /* pushes not yet settled */
    const char **acks; /* delivered, awaiting ack.lua */
    size_t nacks, ack_batch;
    const char **unregs; /* no live address, awaiting ack.lua under 'unregistered' */
    size_t nunregs;
    hr_addr_list addrs; /* addressed channels: the members' addresses on it */
    struct wk_chunk_dead {
        const char *uid;
        char *reason; /* owned */
    } * dead;         /* failed for good, awaiting dead_letter.lua; NULL until needed */
    size_t ndead;
    int64_t retried_unflushed;
    int64_t sent, failed, retried, throttled,
        unregistered;     /* totals, for the chunk_done log line */
    int64_t invalid;      /* members dead-lettered as "invalid uid" at open */
    int64_t user_errors;  /* HGETALL error replies (the user got no attributes) */
    char user_error[160]; /* the first of them, for the log */
    int64_t started_ms;
    /* > 0: another process held the lease at the first open; the open is
     * retried until then (a dead holder's lease runs out by it). */
    int64_t lease_wait_until_ms;
    wk_chunk_counters counters; /* latest stats hash values seen */
    bool counters_new;          /* COUNTERS changed since the worker took them */
    wk_chunk_halt halt;
    bool revoked; /* its partition is being revoked: finish in-flight, then give up */
    bool held;    /* pushes' hold flag: set once halt is not RUN or revoked */
} wk_chunk;

typedef enum wk_chunk_open_result {
    WK_CHUNK_STARTED = 0, /* lease held, pushes ready to submit */
    WK_CHUNK_BUSY = 1,    /* another worker holds the lease */
    WK_CHUNK_EMPTY = 2,   /* the set is empty or gone: already done */
} wk_chunk_open_result;

/* A new chunk for MSG with TASK (the reference passes to the chunk's
 * owner, who puts it).  NULL when out of memory. */
wk_chunk *wk_chunk_new(hr_redis *r, const hr_chunkmsg *msg, int32_t partition, int64_t offset,
                       wk_task *task, int ack_batch);
void wk_chunk_free(wk_chunk *c);

/* Takes the lease and reads the members.  Members that are not valid uids
 * are dead-lettered at once ("invalid uid", counted in C->invalid and
 * C->failed)
 * and get no push; a user hash that answers an error reply (not a hash)
 * leaves that recipient without attributes (C->user_errors).  A
 * wk_chunk_open_result, or -1 with ERRSTR on a Redis (connection) error. */
int wk_chunk_open(wk_chunk *c, hr_redis *r, const char *owner, int lease_ms, char *errstr,
                  size_t errlen);

/* For an opened chunk whose channel pushes to addresses: reads the
 * pushes' addresses on PLATFORM (and APP) from the address book
 * (hr_addr_fetch: pipelined, a batch of uids per round trip) and gives
 * each push its own (none: it will be settled unregistered).  *BAD counts
 * members Redis holds that do not parse.  0, or -1 with ERRSTR, also when
 * Redis lacks the address book's synced mark (it lost the book; the chunk
 * must wait for the dispatchers' sync rather than count its recipients
 * unregistered). */
int wk_chunk_fetch_addrs(wk_chunk *c, hr_redis *r, hr_addr_platform platform, const char *app,
                         size_t *bad, char *errstr, size_t errlen);

/* A chunk member is a uid: decimal digits only, 1..INT64_MAX. */
bool wk_chunk_uid_valid(const char *s);

/* Buffers UID as delivered; true when the buffers reached the ack batch
 * and should be flushed. */
bool wk_chunk_ack(wk_chunk *c, const char *uid);
/* Buffers UID as unregistered (no live address), the same way. */
bool wk_chunk_unregistered(wk_chunk *c, const char *uid);
/* Buffers UID as failed for good with REASON (copied): 1 when the buffers
 * reached the ack batch and should be flushed, 0, or -1 when out of
 * memory. */
int wk_chunk_dead(wk_chunk *c, const char *uid, const char *reason);
/* One pipelined round trip: ack.lua for the buffered uids and retries
 * (those that left the set are added to C->sent), ack.lua for the
 * buffered unregistered ones (C->unregistered), dead_letter.lua for the
 * buffered failures (added to C->failed).  A buffer is emptied only when
 * its call succeeded. */
int wk_chunk_flush(wk_chunk *c, hr_redis *r, char *errstr, size_t errlen);
/* What wk_chunk_throttle decided. */
typedef struct wk_chunk_throttled {
    int64_t blocked;     /* pushes not to be submitted (settled already) */
    int64_t removed;     /* of those, left the set now: counted as throttled */
    int64_t shadowed;    /* over the limit but pushed (shadow mode) */
    int64_t key_missing; /* throttle_key attribute absent */
} wk_chunk_throttled;

/* For an opened chunk whose task throttles: checks every member, fills
 * C->verdicts, acknowledges the blocked ones (ack.lua, 'throttled'; they
 * leave C->open) and counts throttle_shadowed / throttle_key_missing in the
 * stats hash.  0, or -1 with ERRSTR on a Redis error. */
int wk_chunk_throttle(wk_chunk *c, hr_redis *r, wk_chunk_throttled *out, char *errstr,
                      size_t errlen);
/* What the reporter counts C's counters on: its shard for a chunk of a
 * sharded task (the message carries it), else HR_SHARD_NONE. */
int wk_chunk_row(const wk_chunk *c);
/* A sharded task's chunk closed with its shard's pending and subs empty:
 * *PENDING and *SUBS get the sums over every shard of the task (one
 * pipelined round trip each), so only the task's last chunk asks for
 * done.  0 or -1 (ERRSTR). */
int wk_chunk_task_left(const wk_chunk *c, hr_redis *r, int64_t *pending, int64_t *subs,
                       char *errstr, size_t errlen);
/* chunk_done.lua: RES gets {removed, pending left, subs left}. */
int wk_chunk_close(wk_chunk *c, hr_redis *r, const char *owner, int64_t res[3], char *errstr,
                   size_t errlen);
/* lease_release.lua. */
int wk_chunk_release(wk_chunk *c, hr_redis *r, const char *owner, char *errstr, size_t errlen);

#endif
