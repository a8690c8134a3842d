/* hr_series_subs: the subscribers of a series (push_series_subscription,
 * schemas/mysql/026_series_subscription.sql; docs/scheduling.md
 * "Subscribers of a series"), the SQL that the API and heraldctl share.
 *
 * A subscription is a row per series and uid, never one per occurrence;
 * an unsubscribe keeps the row with its unsubscribed_at, and a subscribe
 * again keeps the closed interval (push_series_subscription_past, by the
 * trigger), so an occurrence claimed before still knows the uid as its
 * recipient (hr_subs.h, HR_SUBS_SERIES_MEMBER).  The times are MySQL's, written by the table's
 * triggers.  Each function runs in the caller's transaction, if any.
 *
 * Functions return 0 or -1 with the reason in ERRSTR. */
#ifndef HR_SERIES_SUBS_H
#define HR_SERIES_SUBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_mysql.h"

/* A page of a listing at most. */
#define HR_SERIES_SUBS_PAGE_MAX 10000

/* Whether series ID exists: 0, 1 when it does not, or -1. */
int hr_series_subs_check(hr_mysql *m, int64_t id, char *errstr, size_t errlen);

/* Subscribes the N uids UIDS to series ID: a new uid gets a row, one that
 * unsubscribed is subscribed again (from now), one subscribed stays as it
 * is.  *ADDED gets the uids new or subscribed again.  The series must
 * exist (the trigger refuses a row of a missing one: -1). */
int hr_series_subs_add(hr_mysql *m, int64_t id, const int64_t *uids, size_t n, uint64_t *added,
                       char *errstr, size_t errlen);

/* Unsubscribes the N uids UIDS from series ID from now; *REMOVED gets
 * those that were subscribed. */
int hr_series_subs_del(hr_mysql *m, int64_t id, const int64_t *uids, size_t n, uint64_t *removed,
                       char *errstr, size_t errlen);

/* The number of series ID's subscribers now into *N. */
int hr_series_subs_count(hr_mysql *m, int64_t id, int64_t *n, char *errstr, size_t errlen);

/* Up to LIMIT (1..HR_SERIES_SUBS_PAGE_MAX) subscribers of series ID now
 * with a uid above AFTER, by uid, into *ROWS: uid, subscribed_at
 * ('YYYY-MM-DDTHH:MM:SS.mmmZ'). */
int hr_series_subs_list(hr_mysql *m, int64_t id, int64_t after, int64_t limit, hr_mysql_rows **rows,
                        char *errstr, size_t errlen);

#endif
