/* hr_hooks_audit: a change of the event webhooks' registry made by a
 * person (the API's /v1/hooks, heraldctl hooks) together with its audit
 * row (hr_audit.h), in one MySQL transaction (hr_audit_apply): target
 * "hook <id>", before and after the endpoint's url, types, description
 * and state.  The signing secret is never in a row: a creation says
 * "secret": "set"; a redrive adds "redrive_marked": N to the after.
 *
 * Each returns the hr_hooks function's code (0, or 1 when there is no
 * such endpoint: nothing changed, no row), or -1 with ERRSTR (a backend,
 * or the audit row: nothing changed). */
#ifndef HR_HOOKS_AUDIT_H
#define HR_HOOKS_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "hr_audit.h"
#include "hr_hooks.h"

/* hr_hooks_create, audited as ACTION by WHO. */
int hr_hooks_audit_create(hr_mysql *m, hr_hook *h, const hr_audit_who *who, const char *action,
                          char *errstr, size_t errlen);
/* hr_hooks_update. */
int hr_hooks_audit_update(hr_mysql *m, int64_t id, const hr_hook_update *u, const hr_audit_who *who,
                          const char *action, char *errstr, size_t errlen);
/* hr_hooks_delete. */
int hr_hooks_audit_delete(hr_mysql *m, int64_t id, const hr_audit_who *who, const char *action,
                          char *errstr, size_t errlen);
/* hr_hooks_redrive: *MARKED gets how many. */
int hr_hooks_audit_redrive(hr_mysql *m, int64_t id, int64_t *marked, const hr_audit_who *who,
                           const char *action, char *errstr, size_t errlen);

#endif
