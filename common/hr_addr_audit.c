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
