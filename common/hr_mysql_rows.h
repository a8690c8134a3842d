/* hr_mysql_rows: a result set of a prepared statement fetched whole into
 * NUL-terminated strings (hr_mysql_query hands it over; the caller frees it). */
#ifndef HR_MYSQL_ROWS_H
#define HR_MYSQL_ROWS_H

#include <stddef.h>

/* libmariadb's MYSQL_STMT, not included here: hr_mysql.h's users need
 * not see mysql.h. */
struct st_mysql_stmt;

/* A fully fetched result: nrows x ncols cells, row-major. */
typedef struct hr_mysql_rows {
    size_t nrows, ncols;
    char **cells; /* NULL pointer = SQL NULL */
    char **names; /* column names */
} hr_mysql_rows;

void hr_mysql_rows_free(hr_mysql_rows *rows);
const char *hr_mysql_cell(const hr_mysql_rows *rows, size_t row, size_t col);

/* Fetches the whole result of an executed STMT into a new *OUT; *ERR gets
 * the server error of a failed fetch.  0, or -1 with ERRSTR. */
int hr_mysql_rows_fetch(struct st_mysql_stmt *stmt, hr_mysql_rows **out, unsigned *err,
                        char *errstr, size_t errlen);

#endif
