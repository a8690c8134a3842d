/* hr_mirror: a MySQL book mirrored into one Redis key per uid, kept in step
 * with raw SQL by triggers and an epoch — the pattern of the address book
 * (hr_addr.h: herald:addr:<uid>) and of the recipients' profiles
 * (hr_user.h: herald:user:<uid>), written once here.
 *
 * MySQL is the truth.  The book's triggers record the uid of every changed
 * row in a change table, stamped with the current epoch of an epoch table
 * read under a shared lock.  A sync (hr_mirror_sync):
 *
 *   1. takes the book's Redis lock (one sync at a time across
 *      dispatchers; busy = another does it);
 *   2. bumps the epoch, waiting at most a second for the writers in
 *      flight, so every change stamped below the new epoch is committed;
 *   3. rewrites, page by page, the Redis key of every uid changed in the
 *      epochs from the synced mark up to the new one — from what MySQL
 *      holds, so a deletion leaves nothing stale;
 *   4. when the synced mark is missing (Redis lost it, or no sync for a
 *      day) rewrites every uid the book holds first, then those of every
 *      change row kept (a uid emptied meanwhile loses a stale key);
 *   5. records the new epoch as the mark (a day's expiry) and drops change
 *      rows older than a week (not those below the mark: one database may
 *      serve several Redis, e.g. the tests' prefixes);
 *   6. for a book with a state key (the profiles'), records there that
 *      MySQL held nothing, unless a rewrite began since step 1 read the
 *      state's count of them (book_empty.lua): readers then know no key of
 *      the book exists without asking per uid.
 *
 * A book says what differs in an hr_mirror: its statements (table names
 * cannot be parameters), its two keys, and the rewrite of a page of uids,
 * which is the one path that writes the book's Redis keys (writes through
 * herald call it for their uids too).  Thread use follows the connections
 * passed in; no logging. */
#ifndef HR_MIRROR_H
#define HR_MIRROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_mysql.h"
#include "hr_redis.h"

/* What one sync (or rewrite) did. */
typedef struct hr_mirror_result {
    bool full;               /* Redis had no synced mark: every uid was reloaded */
    int64_t uids;            /* uid keys rewritten */
    int64_t stored;          /* entries written to Redis (addresses, fields) */
    int64_t refused;         /* rows the book's checks refuse (raw SQL): not in Redis */
    char first_refused[160]; /* "uid=<uid> <reason>" of the first, or "" */
} hr_mirror_result;

/* Counts a refused row of UID for REASON in RES (may be NULL). */
void hr_mirror_refused(hr_mirror_result *res, int64_t uid, const char *reason);

typedef struct hr_mirror {
    const char *name; /* "address", "user": for messages */
    /* UPDATE <epoch table> SET epoch = epoch + 1 WHERE id = 1 */
    const char *bump_sql;
    /* SELECT epoch FROM <epoch table> WHERE id = 1 */
    const char *epoch_sql;
    /* every uid of the book after ? (a cursor), at most ? of them, in
     * order: columns cursor, uid */
    const char *all_sql;
    /* the change rows of epochs ? .. ? - 1 after id ?, at most ?, by id:
     * columns id, uid */
    const char *changes_sql;
    /* DELETE the change rows older than a week, bounded */
    const char *prune_sql;
    char *(*lock_key)(const char *prefix, char *buf, size_t len);
    char *(*synced_key)(const char *prefix, char *buf, size_t len);
    /* Optional (NULL: neither): the key of the book's state (a HASH:
     * "writes", which the book's rewrite increments before it writes,
     * and "empty"), and SELECT 1 when the book holds nothing, else 0. */
    char *(*state_key)(const char *prefix, char *buf, size_t len);
    const char *empty_sql;
    /* Rewrites the Redis keys of the N uids at UIDS (sorted in place,
     * repeats dropped) from MySQL; CTX is what the sync was given (the
     * book's checks may need it); refused rows counted in RES (may be
     * NULL).  0 or -1. */
    int (*rewrite)(hr_mysql *m, hr_redis *r, int64_t *uids, size_t n, const void *ctx,
                   hr_mirror_result *res, char *errstr, size_t errlen);
} hr_mirror;

/* The statements of a book whose epoch and change tables are STEM_epoch
 * and STEM_change, laid out as push_address's (004_address.sql). */
#define HR_MIRROR_TABLES(stem)                                                           \
    .bump_sql = "UPDATE " stem "_epoch SET epoch = epoch + 1 WHERE id = 1",              \
    .epoch_sql = "SELECT epoch FROM " stem "_epoch WHERE id = 1",                        \
    .changes_sql = "SELECT id, uid FROM " stem "_change WHERE epoch >= ? AND epoch < ? " \
                   "AND id > ? ORDER BY id LIMIT ?",                                     \
    .prune_sql = "DELETE FROM " stem "_change WHERE at < NOW(3) - INTERVAL 7 DAY LIMIT 10000"

/* hr_mirror_sync: another sync holds the lock, or a writer's open
 * transaction held the epoch for a second. */
#define HR_MIRROR_BUSY 1

/* Brings book MR's Redis keys up to date with MySQL (the steps above),
 * BATCH uids per MySQL page and rewrite; TOKEN names the caller in the
 * lock; CTX goes to the rewrite.  0, HR_MIRROR_BUSY, or -1 (ERRSTR). */
int hr_mirror_sync(const hr_mirror *mr, hr_mysql *m, hr_redis *r, const char *token, int batch,
                   const void *ctx, hr_mirror_result *res, char *errstr, size_t errlen);

/* Rewrites the Redis keys of the N uids at UIDS (reordered: see the
 * rewrite) through book MR's rewrite, BATCH uids a call, after a write
 * through herald changed them; CTX goes to the rewrite.  Stops at the
 * first failure.  0 or -1 (ERRSTR). */
int hr_mirror_rewrite(const hr_mirror *mr, hr_mysql *m, hr_redis *r, int64_t *uids, size_t n,
                      size_t batch, const void *ctx, char *errstr, size_t errlen);

/* hr_mirror_rewrite of the one UID. */
int hr_mirror_rewrite_one(const hr_mirror *mr, hr_mysql *m, hr_redis *r, int64_t uid,
                          const void *ctx, char *errstr, size_t errlen);

/* Whether Redis holds book MR's synced mark: 1 yes, 0 no (a reader must
 * not take a missing key for an empty one), -1 on a Redis error. */
int hr_mirror_synced(const hr_mirror *mr, hr_redis *r, char *errstr, size_t errlen);

/* qsort order of int64_t. */
int hr_mirror_cmp_i64(const void *a, const void *b);
/* Sorts the N uids at UIDS and drops repeats; the new count. */
size_t hr_mirror_uniq(int64_t *uids, size_t n);

#endif
