/* hr_subs: filling a task's Redis subscriber set from push_subscription,
 * shared by the dispatcher's prepare (scanner and poller) and `heraldctl
 * recover`, and the task's prepare lock that keeps a refill and the first
 * chunk apart.
 *
 * A task of several shards (docs/architecture.md "Sharded tasks") has one
 * set per shard; every page of uids is split by shard here, and the
 * claimed sync creates every shard's seq.  S is read from push_task.
 *
 * The prepare lock ({t<ID>}prep) is a Redis string holding its owner's
 * token with an expiry.  The refill holds it for its whole run and renews it
 * before every batch (lease_renew.lua); the dispatcher's first chunk takes
 * it around its INCR of seq.  Once seq exists refill_add.lua refuses to add,
 * so a refill never brings back recipients already moved into chunks.
 *
 * An occurrence of a series (docs/architecture.md "Series") has, beside
 * its own push_subscription rows, the series' subscribers at its claim
 * (push_series_subscription, 026_series_subscription.sql): no row per
 * occurrence.  The syncs before the claim fill the set with the series'
 * subscribers at an instant of MySQL's clock ({t<ID>}series holds it), the
 * first one whole, the later ones by the delta: the uids whose
 * subscription changed since (028_series_changes.sql), each added or taken
 * out as it is a subscriber then or not.  The claimed sync applies the
 * delta up to the claim (the whole read when the key is missing) before it
 * creates seq; the refill (recover) reads them whole.  An unsubscribe
 * before the claim still stops the occurrence: the claim's delta takes the
 * uid out.  HR_SUBS_SERIES_MEMBER says which they are, for every
 * statement that reads or counts a task's recipients; a uid that also has
 * a push_subscription row of the task is one recipient (HR_SUBS_COUNT
 * subtracts it; the set holds it once). */
#ifndef HR_SUBS_H
#define HR_SUBS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hr_mysql.h"
#include "hr_redis.h"

/* Takes task ID's prepare lock for TOKEN for MS milliseconds.  A lock that
 * already holds TOKEN (a retried SET whose first reply was lost) counts as
 * taken.  1 = ours, 0 = another party holds it, -1 on a Redis error. */
int hr_subs_lock(hr_redis *r, int64_t id, const char *token, int ms, char *errstr, size_t errlen);
/* Releases the lock if TOKEN still holds it.  0 or -1. */
int hr_subs_unlock(hr_redis *r, int64_t id, const char *token, char *errstr, size_t errlen);

/* Whether series subscription SS (an SQL alias) is a subscriber at the
 * instant AT (an SQL expression). */
#define HR_SUBS_MEMBER_AT(ss, at)                                                \
    "(" ss ".subscribed_at <= " at " AND (" ss ".unsubscribed_at IS NULL OR " ss \
    ".unsubscribed_at > " at "))"

/* Whether series subscription SS is of the day occurrence T of a drip
 * takes (push_task.drip_from, drip_until; any day for another series). */
#define HR_SUBS_DRIP(ss, t)                                                        \
    "(" t ".drip_from IS NULL OR (" ss ".subscribed_at >= " t ".drip_from AND " ss \
    ".subscribed_at < " t ".drip_until))"

/* Whether series subscription SS was a subscriber of claimed occurrence T
 * (SQL aliases): T is a claimed occurrence of SS's series, SS a subscriber
 * at T's claim (started_at, written by MySQL's clock as SS's times are),
 * of the day T takes if the series is a drip (HR_SUBS_DRIP). */
#define HR_SUBS_SERIES_MEMBER(ss, t)                                                               \
    "(" ss ".series_id = " t ".series_id AND " t ".started_at IS NOT NULL AND " HR_SUBS_MEMBER_AT( \
        ss, t ".started_at") " AND " HR_SUBS_DRIP(ss, t) ")"

/* Whether series subscription SS is a recipient of occurrence T of its
 * series as far as is known now: a subscriber at T's claim, or, before the
 * claim, now (the pull and the open event ask before and after it). */
#define HR_SUBS_SERIES_RECIPIENT(ss, t)                           \
    "(" ss ".series_id = " t ".series_id AND " HR_SUBS_MEMBER_AT( \
        ss, "COALESCE(" t ".started_at, UTC_TIMESTAMP(3))") " AND " HR_SUBS_DRIP(ss, t) ")"

/* The number of T's recipients (an SQL expression of alias T): its
 * push_subscription rows, plus the series subscribers at its claim by
 * their row or by a past interval of theirs (push_series_subscription_past:
 * a uid is a subscriber at an instant by at most one of its intervals),
 * minus those of them that have a push_subscription row too, counted from
 * the task's rows (usually none): a probe of push_subscription per series
 * subscriber made a count of 1,000,000 take 3 s, where this takes 0.4 s.
 * A task of no series has none of those four terms, and the IF leaves
 * their subqueries unrun: the two that scan the task's rows would read
 * each of its subscriptions twice more to find nothing. */
#define HR_SUBS_COUNT(t)                                                                           \
    "((SELECT COUNT(*) FROM push_subscription cs WHERE cs.task_id = " t ".id) + "                  \
    "IF(" t ".series_id IS NULL, 0, "                                                              \
    "(SELECT COUNT(*) FROM push_series_subscription css WHERE " HR_SUBS_SERIES_MEMBER(             \
        "css",                                                                                     \
        t) ") + "                                                                                  \
           "(SELECT COUNT(*) FROM push_series_subscription_past cps WHERE " HR_SUBS_SERIES_MEMBER( \
               "cps", t) ") - "                                                                    \
                         "(SELECT COUNT(*) FROM push_subscription bs STRAIGHT_JOIN "               \
                         "push_series_subscription bss ON bss.series_id = " t                      \
                         ".series_id AND bss.uid = bs.uid WHERE bs.task_id = " t                   \
                         ".id AND " HR_SUBS_SERIES_MEMBER(                                         \
                             "bss", t) ") - "                                                      \
                                       "(SELECT COUNT(*) FROM "                                    \
                                       "push_subscription bp STRAIGHT_JOIN "                       \
                                       "push_series_subscription_past bps "                        \
                                       "ON bps.series_id = " t ".series_id AND bps.uid = bp.uid "  \
                                       "WHERE bp.task_id = " t                                     \
                                       ".id AND " HR_SUBS_SERIES_MEMBER("bps", t) ")))"

/* The ids of the occurrences uid ? (given twice) is a series recipient of
 * (HR_SUBS_SERIES_RECIPIENT), by its subscription or a past interval. */
#define HR_SUBS_SERIES_TASKS_OF_UID                                                              \
    "SELECT t2.id FROM push_series_subscription ss STRAIGHT_JOIN push_task t2 "                  \
    "ON " HR_SUBS_SERIES_RECIPIENT("ss", "t2") " WHERE ss.uid = ? UNION ALL SELECT t2.id FROM "  \
                                               "push_series_subscription_past ss STRAIGHT_JOIN " \
                                               "push_task t2 ON " HR_SUBS_SERIES_RECIPIENT(      \
                                                   "ss", "t2") " WHERE ss.uid = ?"

/* The FROM and WHERE of the pull (GET /v1/users/{uid}/reminders): the
 * unfinished, frozen, unexpired tasks due in [?, ?) (ms) that uid ? (given
 * three times, before the two instants) subscribes to, its own
 * subscriptions and its series' occurrences (a task reached both ways
 * once: UNION), in due order.  The uid's task ids are read first, by its
 * indexes, and joined to push_task by its key (STRAIGHT_JOIN), so a pull
 * reads the uid's history, not everyone's: written as `id IN (…) OR id IN
 * (…)`, MariaDB read every row of push_task and ran both lists for each
 * (docs/performance.md, "The pull and the task history"). */
#define HR_SUBS_PULL_TASKS_FROM                                                       \
    " FROM (SELECT task_id AS tid FROM push_subscription WHERE uid = ? "              \
    "UNION (" HR_SUBS_SERIES_TASKS_OF_UID ")) u STRAIGHT_JOIN push_task "             \
    "ON push_task.id = u.tid "                                                        \
    "WHERE due_at >= FROM_UNIXTIME(? / 1000) AND due_at < FROM_UNIXTIME(? / 1000) "   \
    "AND state NOT IN ('done', 'cancelled', 'failed') "                               \
    "AND COALESCE(freeze_at, CAST(DATE(due_at) AS DATETIME(3))) <= UTC_TIMESTAMP(3) " \
    "AND (expire_at IS NULL OR expire_at > UTC_TIMESTAMP(3)) ORDER BY due_at, id"

typedef struct hr_subs_refill_opts {
    const char *token;       /* the prepare lock's owner */
    int lock_ms;             /* its expiry, renewed every batch */
    int batch;               /* uids per MySQL page and per refill_add.lua call */
    bool exclude_delivered;  /* skip uids push_delivery shows settled (not cancelled) */
    int64_t delivery_day;    /* with exclude_delivered: the task's push_delivery.day (hr_dlog) */
    const atomic_bool *stop; /* NULL, or stop between batches when it becomes true */
} hr_subs_refill_opts;

typedef enum hr_subs_result {
    HR_SUBS_DONE = 0,      /* every page was read and added */
    HR_SUBS_BUSY = 1,      /* another party holds the prepare lock (or, for a sync,
                              an open transaction the task row): nothing done */
    HR_SUBS_STARTED = 2,   /* chunking started (seq exists) before the last page */
    HR_SUBS_LOCK_LOST = 3, /* the lock expired and was taken meanwhile: stopped */
    HR_SUBS_STOPPED = 4,   /* *STOP became true */
    HR_SUBS_CLAIMED = 5,   /* hr_subs_sync before the claim: the task was claimed */
} hr_subs_result;

/* Adds task ID's push_subscription uids (minus the pulled set; minus the
 * delivered ones when asked) to its subscriber set by keyset pages under
 * the prepare lock.  *ADDED gets the number added, *SEEN the rows read
 * (either may be NULL).  Returns an hr_subs_result, or -1 on a database
 * error (ERRSTR). */
int hr_subs_refill(hr_mysql *m, hr_redis *r, int64_t id, const hr_subs_refill_opts *o,
                   int64_t *added, int64_t *seen, char *errstr, size_t errlen);

/* Adds the subscriptions of the epochs the set does not hold yet (see
 * schemas/mysql/003_subscription_guard.sql; all of them when {t<ID>}synced
 * is missing) to the set under the prepare lock, then, for an occurrence
 * of a series, its series' subscribers (above), then records the new
 * synced epoch.  CLAIMED false (the scanner, before the claim): bumps the
 * task's subs_epoch first, and answers HR_SUBS_CLAIMED when the task is no
 * longer scheduled.  CLAIMED true (the owner's reconciliation, after the
 * claim and before the first chunk): reads everything up to the current
 * epoch, then creates seq (SET NX), after which nothing is added to the set
 * any more.  An hr_subs_result, or -1 (ERRSTR). */
int hr_subs_sync(hr_mysql *m, hr_redis *r, int64_t id, const hr_subs_refill_opts *o, bool claimed,
                 int64_t *added, int64_t *seen, char *errstr, size_t errlen);

/* refill_add.lua for the N uids UIDS (decimal text) of task ID, each into
 * its shard's set (SHARDS < 2: the task's one set), one script call per
 * shard: a uid that pulled is left out, and a shard whose chunking started
 * (its seq exists) adds nothing.  *ADDED gets the number added.  0, 1 when
 * a shard refused (chunking started; the others still added), -1 on a
 * Redis error (ERRSTR).  What import, the API and the refill share. */
int hr_subs_add_sharded(hr_redis *r, int64_t id, int shards, const char **uids, size_t n,
                        int64_t *added, char *errstr, size_t errlen);

/* The number of task ID's recipients (HR_SUBS_COUNT; 0 for a task that
 * does not exist), or -1 when MySQL does not answer (ERRSTR). */
int64_t hr_subs_count(hr_mysql *m, int64_t id, char *errstr, size_t errlen);

/* Drops the synced mark and the series mark, so that the next sync reads
 * every subscription and every series subscriber (the set was seen to
 * hold fewer members than push_subscription rows). */
int hr_subs_forget_synced(hr_redis *r, int64_t id, char *errstr, size_t errlen);

const char *hr_subs_result_str(int result);

#endif
