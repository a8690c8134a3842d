/* hr_user_audit: a change of one uid's profile or preferences made by a
 * person (the API's /v1/users/{uid}..., heraldctl user) together with its
 * audit row (hr_audit.h), in one MySQL transaction (hr_audit_apply): target
 * "uid <uid>", before and after the profile's fields (tz, locale,
 * attributes, quiet_hours) and its opt_out list, only those that changed.
 * hr_user rewrites the uid's hash from what MySQL holds inside that
 * transaction, so when it does not commit (the audit row or the commit
 * failed) the hash is rewritten again from MySQL after the rollback: Redis
 * never keeps a change MySQL refused (as hr_addr_audit does for the
 * addresses).  A call that changes nothing writes no row.
 *
 * Each returns the hr_user function's code (hr_user.h), or -1 with ERRSTR
 * (a backend, or the audit row: nothing changed).  CFG is required (the
 * preferences' categories). */
#ifndef HR_USER_AUDIT_H
#define HR_USER_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "hr_audit.h"
#include "hr_user.h"

/* hr_user_put of U, audited as ACTION by WHO. */
int hr_user_audit_put(hr_mysql *m, hr_redis *r, const hr_user *u, const hr_config *cfg,
                      const hr_audit_who *who, const char *action, char *errstr, size_t errlen);
/* hr_user_patch. */
int hr_user_audit_patch(hr_mysql *m, hr_redis *r, int64_t uid, const cJSON *patch,
                        const hr_config *cfg, hr_user *out, const hr_audit_who *who,
                        const char *action, char *errstr, size_t errlen);
/* hr_user_delete. */
int hr_user_audit_delete(hr_mysql *m, hr_redis *r, int64_t uid, const hr_config *cfg,
                         const hr_audit_who *who, const char *action, char *errstr, size_t errlen);
/* hr_user_prefs_put. */
int hr_user_audit_prefs_put(hr_mysql *m, hr_redis *r, int64_t uid, const hr_user_prefs *p,
                            hr_user_source source, const hr_config *cfg, const hr_audit_who *who,
                            const char *action, char *errstr, size_t errlen);

#endif
