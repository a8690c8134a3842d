/* hr_hooks_audit: audited changes of the event webhooks (see
 * hr_hooks_audit.h): one hr_audit_change whose side is the endpoint's
 * fields and whose apply is the hr_hooks call a kind names. */
#include "hr_hooks_audit.h"

#include <inttypes.h>
#include <stdio.h>

/* What one call changes. */
typedef enum hr_hooks_audit_kind {
    HR_HOOKS_AUDIT_CREATE,
    HR_HOOKS_AUDIT_UPDATE,
    HR_HOOKS_AUDIT_DELETE,
    HR_HOOKS_AUDIT_REDRIVE,
} hr_hooks_audit_kind;

/* The arg of the change. */
typedef struct hr_hooks_audit_arg {
    hr_hooks_audit_kind kind;
    int64_t id;              /* 0 until a creation made it */
    hr_hook *h;              /* CREATE's */
    const hr_hook_update *u; /* UPDATE's */
    int64_t marked;          /* REDRIVE's */
} hr_hooks_audit_arg;

/* {"url", "types", "description", "state"} of the endpoint, or NULL when
 * there is none (yet). */
static int hr_hooks_audit_side(hr_mysql *m, void *arg, cJSON **out, char *errstr, size_t errlen)
{
    const hr_hooks_audit_arg *x = arg;
    hr_hook h;
    int rc;

    *out = NULL;
    if (x->id == 0 || (rc = hr_hooks_get(m, x->id, &h, errstr, errlen)) == 1)
        return 0;
    if (rc < 0)
        return -1;
    if ((*out = cJSON_CreateObject()) == NULL ||
        cJSON_AddStringToObject(*out, "url", h.url) == NULL ||
        cJSON_AddStringToObject(*out, "types", h.types) == NULL ||
        cJSON_AddStringToObject(*out, "description", h.description) == NULL ||
        cJSON_AddStringToObject(*out, "state", h.enabled ? "enabled" : "disabled") == NULL) {
        cJSON_Delete(*out);
        *out = NULL;
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static int hr_hooks_audit_apply(hr_mysql *m, hr_audit_change *c, cJSON *note, char *errstr,
                                size_t errlen)
{
    hr_hooks_audit_arg *x = c->arg;
    int rc;

    switch (x->kind) {
    case HR_HOOKS_AUDIT_CREATE:
        if ((rc = hr_hooks_create(m, x->h, errstr, errlen)) == 0) {
            x->id = x->h->id;
            snprintf(c->target, sizeof c->target, "hook %" PRId64, x->id);
            /* That it has one; never what it is. */
            if (cJSON_AddStringToObject(note, "secret", "set") == NULL) {
                snprintf(errstr, errlen, "out of memory");
                rc = -1;
            }
        }
        return rc;
    case HR_HOOKS_AUDIT_UPDATE:
        return hr_hooks_update(m, x->id, x->u, errstr, errlen);
    case HR_HOOKS_AUDIT_DELETE:
        return hr_hooks_delete(m, x->id, errstr, errlen);
    default:
        if ((rc = hr_hooks_redrive(m, x->id, &x->marked, errstr, errlen)) == 0 &&
            cJSON_AddNumberToObject(note, "redrive_marked", (double)x->marked) == NULL) {
            snprintf(errstr, errlen, "out of memory");
            rc = -1;
        }
        return rc;
    }
}

/* X's change audited as ACTION by WHO. */
static int hr_hooks_audit_run(hr_mysql *m, hr_hooks_audit_arg *x, const hr_audit_who *who,
                              const char *action, char *errstr, size_t errlen)
{
    hr_audit_change c = {.side = hr_hooks_audit_side, .apply = hr_hooks_audit_apply, .arg = x};

    if (x->id != 0)
        snprintf(c.target, sizeof c.target, "hook %" PRId64, x->id);
    return hr_audit_apply(m, &c, who, action, errstr, errlen);
}

int hr_hooks_audit_create(hr_mysql *m, hr_hook *h, const hr_audit_who *who, const char *action,
                          char *errstr, size_t errlen)
{
    hr_hooks_audit_arg x = {.kind = HR_HOOKS_AUDIT_CREATE, .h = h};

    return hr_hooks_audit_run(m, &x, who, action, errstr, errlen);
}

int hr_hooks_audit_update(hr_mysql *m, int64_t id, const hr_hook_update *u, const hr_audit_who *who,
                          const char *action, char *errstr, size_t errlen)
{
    hr_hooks_audit_arg x = {.kind = HR_HOOKS_AUDIT_UPDATE, .id = id, .u = u};

    return hr_hooks_audit_run(m, &x, who, action, errstr, errlen);
}

int hr_hooks_audit_delete(hr_mysql *m, int64_t id, const hr_audit_who *who, const char *action,
                          char *errstr, size_t errlen)
{
    hr_hooks_audit_arg x = {.kind = HR_HOOKS_AUDIT_DELETE, .id = id};

    return hr_hooks_audit_run(m, &x, who, action, errstr, errlen);
}

int hr_hooks_audit_redrive(hr_mysql *m, int64_t id, int64_t *marked, const hr_audit_who *who,
                           const char *action, char *errstr, size_t errlen)
{
    hr_hooks_audit_arg x = {.kind = HR_HOOKS_AUDIT_REDRIVE, .id = id};
    int rc = hr_hooks_audit_run(m, &x, who, action, errstr, errlen);

    *marked = x.marked;
    return rc;
}
