/* hr_addr_int: what the address book's files share and nobody else sees
 * (hr_addr.c, hr_addr_store.c, hr_addr_fetch.c, hr_mirror.c). */
#ifndef HR_ADDR_INT_H
#define HR_ADDR_INT_H

#include "hr_addr.h"

/* The four parameters naming one address of UID. */
#define HR_ADDR_PARAMS(uid, p, app, address) \
    HR_P_I64(uid), HR_P_STR(hr_addr_platform_name(p)), HR_P_STR(app), HR_P_STR(address)

/* The push_address rows of the N distinct UIDS (sorted), in (uid,
 * platform, app, address) order.  0 or -1. */
int hr_addr_select(hr_mysql *m, const int64_t *uids, size_t n, hr_mysql_rows **rows, char *errstr,
                   size_t errlen);
/* The one path that writes a uid's Redis set: the sets of the N uids at
 * UIDS (sorted in place, repeats dropped) rewritten from the rows MySQL
 * holds; refused rows counted in RES (may be NULL).  0 or -1. */
int hr_addr_rewrite(hr_mysql *m, hr_redis *r, int64_t *uids, size_t n, const void *ctx,
                    hr_mirror_result *res, char *errstr, size_t errlen);

#endif
