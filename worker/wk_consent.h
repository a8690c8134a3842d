/* wk_consent: a chunk's recipients read for their pushes and their consent
 * carried out, the part of a chunk's open (wk_chunk_open.h) that follows
 * the members' read, on the worker's Redis thread (docs/recipients.md).
 *
 * The read: one pipelined round trip per HR_ADDR_FETCH_BATCH members, each
 * member's profile hash (HGETALL user:<uid> when the task's templates use
 * user.*, else HMGET of the three consent fields and the locale, which
 * picks a task's per-locale variant; nothing for a mandatory category of a
 * task without per-locale variants) beside its addresses (SMEMBERS addr:<uid>, for an
 * addressed channel), so the per-push check costs no round trip of its
 * own.  Before the first batch, the books' synced marks: a Redis that lost
 * the profiles or the address book (no mark) would read as "no opt-out",
 * "no address": the read fails and the chunk waits for the dispatchers'
 * sync (the lifecycle drops it, the sweeper publishes it again).
 *
 * The verdicts (hr_consent.h): opted out and suppressed members are
 * acknowledged under their outcome (ack.lua), members in their quiet hours
 * go back to the task's (shard's) wait set scored with their release
 * (wait_park.lua: out of the chunk set and into the wait set at once), in
 * one round trip; the dispatcher releases them like a wave.  With the
 * events gate (C->gate, events on) the opted out and suppressed are not
 * acknowledged here: their events are not even produced yet, so the loop
 * reports them and acknowledges them behind their events like the pushes
 * (wk_lifecycle_consent), lest a worker killed in between lose the events
 * of recipients no longer in the set.  A suppressed
 * address is left out of the member's addresses.  What the open then
 * pushes is the members whose verdict is WK_CONSENT_PUSH.
 *
 * The read's replies are built in one arena (hr_arena.h): a batch costs a
 * few allocations, not a handful per member, and they are freed at once.
 *
 * A wk_consent covers the members FROM..FROM+N-1 of the chunk's set (an
 * open reads its members in parts, wk_chunk_open.h); its per-member
 * arrays are indexed from FROM.
 *
 * Ownership: a wk_consent belongs to its read job until the job's done
 * moves the arena (when the pushes keep the users it holds) and the
 * addresses into the chunk. */
#ifndef WK_CONSENT_H
#define WK_CONSENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_addr.h"
#include "hr_arena.h"
#include "hr_redis.h"
#include "wk_chunk.h"
#include "wk_chunk_acks.h"

/* What became of a member at open (wk_consent.verdicts). */
typedef enum wk_consent_verdict {
    WK_CONSENT_PUSH = 0,   /* pushed */
    WK_CONSENT_SKIP,       /* not a uid (dead-lettered as such) */
    WK_CONSENT_OPTED_OUT,  /* settled as opted_out */
    WK_CONSENT_SUPPRESSED, /* settled as suppressed */
    WK_CONSENT_DEFER,      /* back in the wait set until its quiet hours end */
} wk_consent_verdict;

typedef struct wk_consent {
    size_t from, n; /* the members read: FROM..FROM+N-1 of the set */
    /* read */
    redisReply **users;   /* per member (NULL = not read): HGETALL, or HMGET when !full_users */
    hr_arena *arena;      /* owns the replies read: USERS' and the addresses' (NULL: none read) */
    bool full_users;      /* USERS are the whole hashes (templates read them) */
    bool no_profiles;     /* the open's marks: no profile hash exists (hr_user_book_empty) */
    hr_addr_list addrs;   /* the members' addresses on the channel, by member (idx) */
    size_t *addr_first;   /* per member: its first address in ADDRS and how many */
    size_t *addr_n;       /* (after the verdicts, those not suppressed) */
    size_t bad_addrs;     /* address members that do not parse */
    int64_t user_errors;  /* profile hashes answering an error (WRONGTYPE) */
    char user_error[160]; /* the first of them */
    /* decided */
    uint8_t *verdicts;    /* wk_consent_verdict per member */
    int64_t opted_out;    /* members acknowledged as such by this open (none with C->gate) */
    int64_t suppressed;   /* likewise */
    int64_t deferred;     /* members put off to their quiet hours' end */
    wk_chunk_acked acked; /* what the acknowledgements answered */
} wk_consent;

/* The read of C's members FROM..TO-1 (MEMBERS, the SMEMBERS reply): users
 * when C's task uses user.* or its category is not mandatory, addresses on
 * PLATFORM (and APP) when PLATFORM is not NULL; the books' marks are
 * checked at the first part (FROM 0).  0, or -1 with ERRSTR (Redis failed,
 * a book not in Redis, out of memory). */
int wk_consent_read(wk_consent *cs, hr_redis *r, const wk_chunk *c, const redisReply *members,
                    size_t from, size_t to, const hr_addr_platform *platform, const char *app,
                    char *errstr, size_t errlen);

/* The verdicts at NOW_MS of the members read, and the acknowledgements
 * (not with C->gate) and deferrals they make (one round trip, none when
 * there are none).  0, or -1 with ERRSTR. */
int wk_consent_decide(wk_consent *cs, hr_redis *r, const wk_chunk *c, const redisReply *members,
                      int64_t now_ms, char *errstr, size_t errlen);

/* Member CS->from + K's profile locale as read (NULL: none, or not read):
 * what picks its content among the task's per-locale variants
 * (wk_task_variant). */
const char *wk_consent_locale(const wk_consent *cs, size_t k);

/* Frees what CS holds; the pointers a caller moved out (and set to NULL)
 * are left alone. */
void wk_consent_free(wk_consent *cs);

#endif
