/* ctl migrate: applies the compiled-in schemas/mysql migrations that the
 * database has not recorded yet (hr_migrate_apply), then says which ran or
 * which version the schema is at.  Safe to run twice or concurrently. */
#include <stdio.h>

#include "ctl_cmd.h"
#include "hr_migrate.h"

/* Prints the names of the N migrations recorded last, in the order they
 * were applied, and writes them into the audit log (after them: DDL
 * commits on its own).  hr_migrate_apply held the migration lock while it
 * recorded them, so the last N rows are this run's. */
static int ctl_migrate_report(ctl_ctx *ctx, hr_mysql *m, int n)
{
    hr_mysql_rows *rows = NULL;
    char errstr[512];
    cJSON *after = cJSON_CreateObject(), *names = cJSON_AddArrayToObject(after, "applied");
    int rc;

    if (hr_mysql_query(m,
                       "SELECT name FROM schema_migrations"
                       " ORDER BY applied_at DESC, version DESC LIMIT ?",
                       (hr_mysql_param[]){HR_P_I64(n)}, 1, &rows, errstr, sizeof errstr) != 0) {
        cJSON_Delete(after);
        return ctl_fail("migrate: applied %d migrations, but cannot list them: %s", n, errstr);
    }
    printf("applied %d migration%s (", n, n == 1 ? "" : "s");
    for (size_t i = rows->nrows; i > 0; i--) {
        const char *name = hr_mysql_cell(rows, i - 1, 0);
        printf("%s%s", name ? name : "?", i > 1 ? ", " : "");
        cJSON_AddItemToArray(names, cJSON_CreateString(name ? name : "?"));
    }
    printf(")\n");
    hr_mysql_rows_free(rows);
    rc = ctl_audit(ctx, m, NULL, 0, NULL, NULL, after) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
    cJSON_Delete(after);
    return rc;
}

int ctl_cmd_migrate(ctl_ctx *ctx, int argc, char **argv)
{
    hr_mysql *m;
    hr_mysql_rows *rows = NULL;
    char errstr[1024];
    int applied;

    if (argc > 1)
        return ctl_usage(ctx, "unexpected argument '%s'", argv[1]);
    if (ctl_mysql(ctx, &m) != 0)
        return CTL_EXIT_FAIL;
    if (hr_migrate_apply(m, hr_sql_files, HR_SQL__COUNT, &applied, errstr, sizeof errstr) != 0)
        return ctl_fail("migrate: %s", errstr);
    if (applied > 0)
        return ctl_migrate_report(ctx, m, applied);
    if (hr_mysql_query(m, "SELECT MAX(version) FROM schema_migrations", NULL, 0, &rows, errstr,
                       sizeof errstr) != 0)
        return ctl_fail("migrate: %s", errstr);
    printf("schema is up to date (version %s)\n",
           hr_mysql_cell(rows, 0, 0) ? hr_mysql_cell(rows, 0, 0) : "none");
    hr_mysql_rows_free(rows);
    return CTL_EXIT_OK;
}
