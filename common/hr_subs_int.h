/* hr_subs_int: what hr_subs shares with hr_subs_batch (the batched sync
 * of many claimed tasks) and nobody else. */
#ifndef HR_SUBS_INT_H
#define HR_SUBS_INT_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "hr_subs.h"

/* Which rows a fill reads, by keyset pages.  The uid-ordered queries select
 * uid only; the epoch-ordered one selects uid, epoch (its cursor is both).
 * The SERIES ones read the series subscribers a claimed occurrence takes
 * (HR_SUBS_SERIES_MEMBER; none for any other task), by their rows or (PAST)
 * by the past intervals of those who subscribed again since; the _AT ones
 * those an occurrence's series has at an instant (ms, MySQL's clock), the
 * fill before its claim. */
typedef enum hr_subs_pages {
    HR_SUBS_ALL,
    HR_SUBS_UNDELIVERED,
    HR_SUBS_EPOCHS,
    HR_SUBS_SERIES,
    HR_SUBS_SERIES_UNDELIVERED,
    HR_SUBS_SERIES_PAST,
    HR_SUBS_SERIES_PAST_UNDELIVERED,
    HR_SUBS_SERIES_AT,
    HR_SUBS_SERIES_PAST_AT
} hr_subs_pages;

/* An integer reply of refill_add.lua or lease_renew.lua (freed): its
 * value; -1 for any other answer (refill_add's "chunking started"); -2
 * when there is no reply (ERRSTR). */
int64_t hr_subs_reply_added(redisReply *reply);

/* Adds the rows PAGES selects (for HR_SUBS_EPOCHS those of epochs
 * FROM..UPTO-1, for the _AT pages the subscribers at the instant FROM) to
 * the sets of task ID's SHARDS shards, holding the prepare
 * lock that the caller took (renewed before every batch).  An
 * hr_subs_result, or -1 (ERRSTR). */
int hr_subs_fill(hr_mysql *m, hr_redis *r, int64_t id, int shards, const hr_subs_refill_opts *o,
                 hr_subs_pages pages, int64_t from, int64_t upto, int64_t *added, int64_t *seen,
                 char *errstr, size_t errlen);

#endif
