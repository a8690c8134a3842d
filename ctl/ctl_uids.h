/* ctl_uids: reading a file of user ids, one a line (blank lines and
 * '#' comments skipped), as `heraldctl import` takes them. */
#ifndef CTL_UIDS_H
#define CTL_UIDS_H

#include <stddef.h>
#include <stdint.h>

#include "hr_vec.h"

typedef HR_VEC(int64_t) ctl_uids;

/* Reads every id of PATH ("-" = stdin) into IDS.  0, or -1 with ERRSTR
 * "file:line: ..." for a bad line. */
int ctl_uids_read(const char *path, ctl_uids *ids, char *errstr, size_t errlen);

#endif
