/* hr_migrate: the schema migrations, applied once each (hr_migrate.c). */
#ifndef HR_MIGRATE_H
#define HR_MIGRATE_H

#include <stddef.h>

#include "hr_mysql.h"
#include "hr_sql_migrations.h"

/* Applies, in name order, every migration of FILES (the schemas/mysql/
 * NNN_*.sql files compiled in by embed.py) whose version NNN is not yet
 * recorded in schema_migrations; *APPLIED gets how many ran. */
int hr_migrate_apply(hr_mysql *m, const hr_embedded *files, size_t nfiles, int *applied,
                     char *errstr, size_t errlen);

#endif
