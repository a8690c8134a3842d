/* hr_user_audit: audited changes of a uid's profile and preferences (see
 * hr_user_audit.h): one hr_audit_change whose side is the profile and its
 * opt-outs, whose apply is the hr_user call a kind names, and whose
 * restore rewrites the uid's hash. */
#include "hr_user_audit.h"

#include <inttypes.h>
#include <stdio.h>

/* What one call changes. */
typedef enum hr_user_audit_kind {
    HR_USER_AUDIT_PUT,
    HR_USER_AUDIT_PATCH,
    HR_USER_AUDIT_DELETE,
    HR_USER_AUDIT_PREFS,
} hr_user_audit_kind;

/* The arg of the change. */
typedef struct hr_user_audit_arg {
    hr_user_audit_kind kind;
    hr_redis *r;
    const hr_config *cfg;
    int64_t uid;
    const hr_user *u;       /* PUT's */
    const cJSON *patch;     /* PATCH's */
    hr_user *out;           /* PATCH's */
    const hr_user_prefs *p; /* PREFS's */
    hr_user_source source;  /* PREFS's */
} hr_user_audit_arg;

/* The profile's fields and its opt-outs, or NULL when the uid has no
 * profile (its preferences go with it). */
static int hr_user_audit_side(hr_mysql *m, void *arg, cJSON **out, char *errstr, size_t errlen)
{
    const hr_user_audit_arg *x = arg;
    hr_user u = {0};
    hr_user_prefs p = {0};
    cJSON *prefs = NULL;
    int rc;

    *out = NULL;
    if ((rc = hr_user_get(m, x->uid, &u, errstr, errlen)) != 0 ||
        hr_user_prefs_get(m, x->uid, &p, errstr, errlen) != 0) {
        rc = rc == 1 ? 0 : -1;
        goto done;
    }
    rc = -1;
    /* The times change with every write: what changed is the rest. */
    u.created_ms = 0;
    if ((*out = hr_user_to_json(&u)) == NULL ||
        (prefs = hr_user_prefs_to_json(x->uid, &p, x->cfg)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(*out, "uid");
    cJSON_AddItemToObject(*out, "opt_out",
                          cJSON_DetachItemFromObjectCaseSensitive(prefs, "opt_out"));
    rc = 0;
done:
    if (rc != 0) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    cJSON_Delete(prefs);
    hr_user_clear(&u);
    hr_user_prefs_clear(&p);
    return rc;
}

static int hr_user_audit_apply(hr_mysql *m, hr_audit_change *c, cJSON *note, char *errstr,
                               size_t errlen)
{
    const hr_user_audit_arg *x = c->arg;

    (void)note;
    switch (x->kind) {
    case HR_USER_AUDIT_PUT:
        return hr_user_put(m, x->r, x->u, x->cfg, errstr, errlen);
    case HR_USER_AUDIT_PATCH:
        return hr_user_patch(m, x->r, x->uid, x->patch, x->cfg, x->out, errstr, errlen);
    case HR_USER_AUDIT_DELETE:
        return hr_user_delete(m, x->r, x->uid, errstr, errlen);
    default:
        return hr_user_prefs_put(m, x->r, x->uid, x->p, x->source, x->cfg, errstr, errlen);
    }
}

static int hr_user_audit_restore(hr_mysql *m, void *arg, char *errstr, size_t errlen)
{
    hr_user_audit_arg *x = arg;

    return hr_mirror_rewrite_one(&hr_user_mirror, m, x->r, x->uid, x->cfg, errstr, errlen);
}

/* X's change audited as ACTION by WHO. */
static int hr_user_audit_run(hr_mysql *m, hr_user_audit_arg *x, const hr_audit_who *who,
                             const char *action, char *errstr, size_t errlen)
{
    hr_audit_change c = {.side = hr_user_audit_side,
                         .apply = hr_user_audit_apply,
                         .restore = hr_user_audit_restore,
                         .arg = x};

    snprintf(c.target, sizeof c.target, "uid %" PRId64, x->uid);
    return hr_audit_apply(m, &c, who, action, errstr, errlen);
}

int hr_user_audit_put(hr_mysql *m, hr_redis *r, const hr_user *u, const hr_config *cfg,
                      const hr_audit_who *who, const char *action, char *errstr, size_t errlen)
{
    hr_user_audit_arg x = {.kind = HR_USER_AUDIT_PUT, .r = r, .cfg = cfg, .uid = u->uid, .u = u};

    return hr_user_audit_run(m, &x, who, action, errstr, errlen);
}

int hr_user_audit_patch(hr_mysql *m, hr_redis *r, int64_t uid, const cJSON *patch,
                        const hr_config *cfg, hr_user *out, const hr_audit_who *who,
                        const char *action, char *errstr, size_t errlen)
{
    hr_user_audit_arg x = {
        .kind = HR_USER_AUDIT_PATCH, .r = r, .cfg = cfg, .uid = uid, .patch = patch, .out = out};

    return hr_user_audit_run(m, &x, who, action, errstr, errlen);
}

int hr_user_audit_delete(hr_mysql *m, hr_redis *r, int64_t uid, const hr_config *cfg,
                         const hr_audit_who *who, const char *action, char *errstr, size_t errlen)
{
    hr_user_audit_arg x = {.kind = HR_USER_AUDIT_DELETE, .r = r, .cfg = cfg, .uid = uid};

    return hr_user_audit_run(m, &x, who, action, errstr, errlen);
}

int hr_user_audit_prefs_put(hr_mysql *m, hr_redis *r, int64_t uid, const hr_user_prefs *p,
                            hr_user_source source, const hr_config *cfg, const hr_audit_who *who,
                            const char *action, char *errstr, size_t errlen)
{
    hr_user_audit_arg x = {
        .kind = HR_USER_AUDIT_PREFS, .r = r, .cfg = cfg, .uid = uid, .p = p, .source = source};

    return hr_user_audit_run(m, &x, who, action, errstr, errlen);
}
