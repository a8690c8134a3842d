/* hr_addr_audit: an audited change of a uid's addresses (see
 * hr_addr_audit.h). */
#include "hr_addr_audit.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* {"addresses": [...]} of L. */
static cJSON *hr_addr_audit_side(const hr_addr_list *l)
{
    cJSON *o = cJSON_CreateObject();

    if (o != NULL)
        cJSON_AddItemToObject(o, "addresses", hr_addr_list_json(l));
    return o;
}

static int hr_addr_audit_write(hr_mysql *m, hr_redis *r, int64_t uid, hr_addr_audit_kind kind,
                               const hr_addr *list, size_t n, char *errstr, size_t errlen)
{
    switch (kind) {
    case HR_ADDR_AUDIT_ADD:
        return hr_addr_add(m, r, uid, list->platform, list->app, list->address, errstr, errlen);
    case HR_ADDR_AUDIT_REMOVE:
        return hr_addr_remove(m, r, uid, list->platform, list->app, list->address, errstr, errlen);
    default:
        return hr_addr_replace(m, r, uid, list, n, errstr, errlen);
    }
}

int hr_addr_audit_change(hr_mysql *m, hr_redis *r, int64_t uid, hr_addr_audit_kind kind,
                         const hr_addr *list, size_t n, const hr_audit_who *who, const char *action,
                         char *errstr, size_t errlen)
{
    hr_addr_list old = {0}, now = {0};
    cJSON *before = NULL, *after = NULL;
    char target[40], err[256];
    int rc;

    if (hr_mysql_begin(m, errstr, errlen) != 0)
        return -1;
    if (hr_addr_list_uid(m, uid, &old, errstr, errlen) != 0) {
        hr_mysql_rollback(m);
        rc = -1;
        goto done;
    }
    if ((rc = hr_addr_audit_write(m, r, uid, kind, list, n, errstr, errlen)) < 0) {
        hr_mysql_rollback(m);
        goto done;
    }
    snprintf(target, sizeof target, "uid %" PRId64, uid);
    if (hr_addr_list_uid(m, uid, &now, errstr, errlen) != 0 ||
        (before = hr_addr_audit_side(&old)) == NULL || (after = hr_addr_audit_side(&now)) == NULL ||
        hr_audit_write(
            m,
            &(hr_audit){
                .who = who, .action = action, .target = target, .before = before, .after = after},
            errstr, errlen) != 0 ||
        hr_mysql_commit(m, errstr, errlen) != 0) {
        if (before == NULL || after == NULL)
            snprintf(errstr, errlen, "out of memory");
        rc = -1;
        hr_mysql_rollback(m);
        /* The set was rewritten from the change MySQL just dropped. */
        if (hr_addr_replace(m, r, uid, old.a.v, old.a.n, err, sizeof err) != 0)
            snprintf(errstr + strnlen(errstr, errlen), errlen - strnlen(errstr, errlen),
                     "; and uid %" PRId64 "'s Redis set could not be restored: %s", uid, err);
    }
done:
    hr_addr_list_free(&old);
    hr_addr_list_free(&now);
    cJSON_Delete(before);
    cJSON_Delete(after);
    return rc;
}

/* ---- the suppression list -------------------------------------------------- */

/* The arg of a suppression's change. */
typedef struct hr_addr_audit_supp {
    hr_redis *r;
    bool suppress;
    hr_addr_platform p;
    const char *app, *address, *note;
    hr_addr_supp reason;
} hr_addr_audit_supp;

/* {"reason", "note"} of the address on the list, or NULL when it is not. */
static int hr_addr_audit_supp_side(hr_mysql *m, void *arg, cJSON **out, char *errstr, size_t errlen)
{
    const hr_addr_audit_supp *x = arg;
    cJSON *list = hr_addr_suppressions(m, x->p, x->app, x->address, NULL, 1, NULL, errstr, errlen);
    cJSON *row;

    *out = NULL;
    if (list == NULL)
        return -1;
    if ((row = cJSON_DetachItemFromArray(list, 0)) != NULL) {
        static const char *const gone[] = {"platform", "app", "address", "created_at"};

        /* The target names the address; the time is the row's own. */
        for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
            cJSON_DeleteItemFromObjectCaseSensitive(row, gone[i]);
        *out = row;
    }
    cJSON_Delete(list);
    return 0;
}

static int hr_addr_audit_supp_apply(hr_mysql *m, hr_audit_change *c, cJSON *note, char *errstr,
                                    size_t errlen)
{
    const hr_addr_audit_supp *x = c->arg;

    (void)note;
    return x->suppress ? hr_addr_suppress(m, x->r, x->p, x->app, x->address, x->reason, x->note,
                                          errstr, errlen)
                       : hr_addr_unsuppress(m, x->r, x->p, x->app, x->address, errstr, errlen);
}

static int hr_addr_audit_supp_restore(hr_mysql *m, void *arg, char *errstr, size_t errlen)
{
    const hr_addr_audit_supp *x = arg;

    return hr_addr_rewrite_holders(m, x->r, x->p, x->app, x->address, errstr, errlen);
}

int hr_addr_audit_suppression(hr_mysql *m, hr_redis *r, bool suppress, hr_addr_platform p,
                              const char *app, const char *address, hr_addr_supp reason,
                              const char *note, const hr_audit_who *who, const char *action,
                              char *errstr, size_t errlen)
{
    hr_addr_audit_supp x = {.r = r,
                            .suppress = suppress,
                            .p = p,
                            .app = app,
                            .address = address,
                            .note = note,
                            .reason = reason};
    hr_audit_change c = {.side = hr_addr_audit_supp_side,
                         .apply = hr_addr_audit_supp_apply,
                         .restore = hr_addr_audit_supp_restore,
                         .arg = &x};
    const char *name = hr_addr_platform_name(p);

    snprintf(c.target, sizeof c.target, "suppression %s/%.40s/%.120s", name != NULL ? name : "?",
             app, address);
    return hr_audit_apply(m, &c, who, action, errstr, errlen);
}
