/* hr_addr_audit: a change of one uid's addresses made by a person (the
 * API, heraldctl address add|rm) together with its audit row (hr_audit.h),
 * in one MySQL transaction: the row records the uid's addresses before and
 * after.  hr_addr rewrites the uid's Redis set from what MySQL holds inside
 * that transaction, so when it does not commit (the audit row or the
 * commit failed) the set is written again from the addresses of before,
 * in a transaction of their own: Redis never keeps a change MySQL
 * refused.  A change of the suppression list goes the same way
 * (hr_addr_audit_suppression). */
#ifndef HR_ADDR_AUDIT_H
#define HR_ADDR_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_addr.h"
#include "hr_audit.h"

/* What to do to a uid's addresses. */
typedef enum hr_addr_audit_kind {
    HR_ADDR_AUDIT_ADD,     /* LIST[0] added (hr_addr_add) */
    HR_ADDR_AUDIT_REMOVE,  /* LIST[0] removed (hr_addr_remove) */
    HR_ADDR_AUDIT_REPLACE, /* the N of LIST are all there is (hr_addr_replace) */
} hr_addr_audit_kind;

/* KIND on UID's addresses, audited as ACTION by WHO (target "uid <UID>").
 * The hr_addr function's code (>= 0: added or removed), or a negative one:
 * HR_ADDR_EINVAL, HR_ADDR_EFULL, or -1 (a backend, or the audit row), with
 * ERRSTR; nothing changed then. */
int hr_addr_audit_change(hr_mysql *m, hr_redis *r, int64_t uid, hr_addr_audit_kind kind,
                         const hr_addr *list, size_t n, const hr_audit_who *who, const char *action,
                         char *errstr, size_t errlen);

/* hr_addr_suppress (SUPPRESS) or hr_addr_unsuppress of the address
 * P/APP/ADDRESS, audited as ACTION by WHO in one transaction
 * (hr_audit_apply): target "suppression <platform>/<app>/<address>",
 * before and after its {"reason", "note"} (null when it is not on the
 * list); the sets of the uids holding it rewritten from MySQL again when
 * the row or the commit failed.  A call that changes nothing writes no
 * row.  The hr_addr function's code (>= 0), HR_ADDR_EINVAL, or -1 with
 * ERRSTR (nothing changed). */
int hr_addr_audit_suppression(hr_mysql *m, hr_redis *r, bool suppress, hr_addr_platform p,
                              const char *app, const char *address, hr_addr_supp reason,
                              const char *note, const hr_audit_who *who, const char *action,
                              char *errstr, size_t errlen);

#endif
