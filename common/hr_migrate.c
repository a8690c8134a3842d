/* hr_migrate: applies the schema migrations compiled into the binaries
 * (schemas/mysql/NNN_*.sql, embed.py) that a database has not recorded in
 * schema_migrations, under the named lock herald_migrate, so two
 * `heraldctl migrate` never apply one file twice.  The lock belongs to the
 * session: hr_mysql_set_locked keeps hr_mysql from running a statement
 * again on a new connection, which would not hold it. */
#include "hr_migrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Below the connection's read timeout (heraldctl's CTL_MYSQL_TIMEOUT_S),
 * so that waiting for the lock is not taken for a dead server. */
#define HR_MIGRATE_LOCK_WAIT_S 30

/* "001_tables.sql" -> version 1 and name length 10 ("001_tables"). */
static int hr_migrate_version(const char *file, long *version, int *namelen)
{
    char *end;
    const char *dot = strrchr(file, '.');

    *version = strtol(file, &end, 10);
    if (end == file || *end != '_' || *version < 0 || *version > INT32_MAX)
        return -1;
    *namelen = (int)(dot ? (size_t)(dot - file) : strlen(file));
    return 0;
}

static bool hr_migrate_recorded(const hr_mysql_rows *done, long version)
{
    for (size_t r = 0; r < done->nrows; r++) {
        const char *v = hr_mysql_cell(done, r, 0);
        if (v && strtol(v, NULL, 10) == version)
            return true;
    }
    return false;
}

int hr_migrate_apply(hr_mysql *m, const hr_embedded *files, size_t nfiles, int *applied,
                     char *errstr, size_t errlen)
{
    hr_mysql_rows *lock = NULL, *done = NULL;
    char err[1024];
    bool locked = false;
    int rc = -1;

    *applied = 0;
    if (hr_mysql_query(m, "SELECT GET_LOCK('herald_migrate', ?)",
                       (hr_mysql_param[]){HR_P_I64(HR_MIGRATE_LOCK_WAIT_S)}, 1, &lock, errstr,
                       errlen) != 0)
        goto out;
    if (!hr_mysql_cell(lock, 0, 0) || strcmp(hr_mysql_cell(lock, 0, 0), "1") != 0) {
        snprintf(errstr, errlen, "another migration holds the lock herald_migrate (waited %d s)",
                 HR_MIGRATE_LOCK_WAIT_S);
        goto out;
    }
    hr_mysql_set_locked(m, true);
    locked = true;
    if (hr_mysql_script(m,
                        "CREATE TABLE IF NOT EXISTS schema_migrations ("
                        " version INT NOT NULL PRIMARY KEY,"
                        " name VARCHAR(255) NOT NULL,"
                        " applied_at DATETIME(3) NOT NULL"
                        ") ENGINE=InnoDB",
                        err, sizeof err) != 0) {
        snprintf(errstr, errlen, "schema_migrations: %s", err);
        goto out;
    }
    if (hr_mysql_query(m, "SELECT version FROM schema_migrations", NULL, 0, &done, errstr,
                       errlen) != 0)
        goto out;
    for (size_t i = 0; i < nfiles; i++) {
        long version;
        int namelen;

        if (hr_migrate_version(files[i].name, &version, &namelen) != 0) {
            snprintf(errstr, errlen, "migration %s: name does not start with NNN_", files[i].name);
            goto out;
        }
        if (hr_migrate_recorded(done, version))
            continue;
        /* DDL commits implicitly, so each file is recorded as soon as it
         * has run: a later failure does not make it run again. */
        if (hr_mysql_script(m, files[i].text, err, sizeof err) != 0) {
            snprintf(errstr, errlen, "migration %s: %s", files[i].name, err);
            goto out;
        }
        if (hr_mysql_exec(
                m,
                "INSERT INTO schema_migrations (version, name, applied_at)"
                " VALUES (?, ?, UTC_TIMESTAMP(3))",
                (hr_mysql_param[]){HR_P_I64(version), HR_P_STRN(files[i].name, (size_t)namelen)}, 2,
                NULL, NULL, NULL, err, sizeof err) != 0) {
            snprintf(errstr, errlen, "migration %s ran but was not recorded: %s", files[i].name,
                     err);
            goto out;
        }
        ++*applied;
    }
    rc = 0;

out:
    if (locked) {
        hr_mysql_rows *released = NULL;
        /* Losing the connection releases the lock as well. */
        if (hr_mysql_query(m, "SELECT RELEASE_LOCK('herald_migrate')", NULL, 0, &released, err,
                           sizeof err) == 0)
            hr_mysql_rows_free(released);
        hr_mysql_set_locked(m, false);
    }
    hr_mysql_rows_free(lock);
    hr_mysql_rows_free(done);
    return rc;
}
