/* wk_chunk_open: a chunk's open, jobs on the worker's Redis thread: in
 * one round trip GET ctl, SET lease NX PX, SMEMBERS; then, as needed, the
 * invalid members dead-lettered, and the members' profile hashes and
 * addresses read and their consent carried out (wk_consent.h) in parts:
 * the open reads the first WK_CHUNK_FIRST_PART members, and the chunk's
 * other members are read by one job per HR_ADDR_FETCH_BATCH of them
 * (wk_chunk_read), which the lifecycle submits together once the open
 * answered.  So the first pushes start after one small round trip, not
 * after the whole chunk's read (5,000 members: 60–300 ms), and the others
 * follow part by part while the sender pushes.  Each answer comes back
 * through the chunk's hooks (wk_chunk.h): the open's through OPENED, each
 * later part's through READ; each moves its pushes into C->pushes (room
 * for every member from the open on) and what they point at into
 * C->parts.  Until every part answered, the members not read yet count in
 * C->open (C->unread): the chunk cannot be found settled before. */
#ifndef WK_CHUNK_OPEN_H
#define WK_CHUNK_OPEN_H

#include <stddef.h>

#include "hr_addr.h"
#include "wk_chunk.h"
#include "wk_redis.h"

/* Members the open itself reads (as the throttle's first slice,
 * WK_CHUNK_FIRST_SLICE): one small round trip before the first pushes. */
#define WK_CHUNK_FIRST_PART 100

/* What an open or a later part found (wk_chunk_hooks.opened, .read). */
typedef struct wk_chunk_opened {
    int rc;                 /* a wk_chunk_open_result, or -1 (ERRSTR) */
    wk_chunk_halt halt;     /* what the control key said (the open's) */
    size_t from, to;        /* the members read: C->members' FROM..TO-1 */
    size_t npushes;         /* the pushes made of them: the last NPUSHES of C->pushes */
    size_t bad_addrs;       /* address members that do not parse */
    int64_t invalid;        /* members dead-lettered as not uids (the open's: all of them) */
    int64_t user_errors;    /* profile hashes answering an error */
    const char *user_error; /* the first of them */
    /* The consent's verdict of each member read (a wk_consent_verdict, of
     * member FROM + K at K; NULL when the open read no members), valid
     * during the hook: the opted out and suppressed ones were acknowledged
     * as such (with the events gate, C->gate, they were not: the loop
     * acknowledges them behind their events), DEFERRED of them put off to
     * their quiet hours' end. */
    const uint8_t *verdicts;
    int64_t deferred;
    const char *errstr;
} wk_chunk_opened;

typedef enum wk_chunk_open_result {
    WK_CHUNK_STARTED = 0, /* lease held, pushes ready to submit */
    WK_CHUNK_BUSY = 1,    /* another worker holds the lease */
    WK_CHUNK_EMPTY = 2,   /* the set is empty or gone: already done */
} wk_chunk_open_result;

/* Returns 0, or -1 when the job could not be submitted (out of memory,
 * the Redis thread's queue full or closing): no hook runs then. */
/* Reads the control key, takes the lease as OWNER for LEASE_MS and reads
 * the members; when the lease is ours, the control key says run and the
 * task is not expired, also: members that are not valid uids are
 * dead-lettered ("invalid uid", counted in C->invalid and C->failed) and
 * get no push; of the first part's members, the profile hashes are read when the task uses user.* or
 * its category is not mandatory (an error reply — not a hash — leaves that
 * recipient without attributes: C->user_errors); with PLATFORM not NULL,
 * the members' addresses on it (and APP); then the consent: opted out and
 * suppressed members are acknowledged as such (not with the events gate:
 * wk_consent.h), those in their quiet hours
 * put back into the wait set, and the others get a push (wk_consent.h).
 * An error when Redis lacks a book's synced mark (it lost the book: the
 * chunk must wait for the dispatchers' sync rather than push to opted-out
 * users or count its recipients unregistered). */
int wk_chunk_open(wk_redis *rd, wk_chunk *c, const char *owner, int lease_ms,
                  const hr_addr_platform *platform, const char *app);

/* The parts of the read of a set of N members, the open's first; part I
 * (0 .. wk_chunk_parts(N) - 1) is the members *FROM..*TO-1. */
size_t wk_chunk_parts(size_t n);
void wk_chunk_part_range(size_t n, size_t i, size_t *from, size_t *to);

/* Reads the members FROM..TO-1 of opened C as the open read its first part
 * (their profile hashes, addresses, consent; PLATFORM and APP as there),
 * under the lease the open took.  Its answer comes through C's read hook.
 * 0, or -1 when the job could not be submitted (no hook runs then). */
int wk_chunk_read(wk_redis *rd, wk_chunk *c, size_t from, size_t to,
                  const hr_addr_platform *platform, const char *app);

#endif
