/* wk_chunk_open: a chunk's open, one job on the worker's Redis thread:
 * in one round trip GET ctl, SET lease NX PX, SMEMBERS; then, as needed,
 * the invalid members dead-lettered, the members' profile hashes and
 * addresses read and their consent carried out (wk_consent.h).  Its answer
 * comes back through the chunk's opened hook (wk_chunk.h). */
#ifndef WK_CHUNK_OPEN_H
#define WK_CHUNK_OPEN_H

#include <stddef.h>

#include "hr_addr.h"
#include "wk_chunk.h"
#include "wk_redis.h"

/* What an open found (wk_chunk_hooks.opened). */
typedef struct wk_chunk_opened {
    int rc;             /* a wk_chunk_open_result, or -1 (ERRSTR) */
    wk_chunk_halt halt; /* what the control key said */
    size_t bad_addrs;   /* address members that do not parse */
    /* The consent's verdict of each member of C->members (a
     * wk_consent_verdict; NULL when the open read no members), valid
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
 * get no push; the profile hashes are read when the task uses user.* or
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

#endif
