/* hr_mysql_rows: a result set fetched whole (see hr_mysql_rows.h).
 *
 * Each column is bound to a HR_MYSQL_CELL_BUF buffer, and a longer value
 * (a MEDIUMTEXT payload) is fetched again whole with
 * mysql_stmt_fetch_column; every cell is its own allocation, freed by
 * hr_mysql_rows_free. */
#include "hr_mysql_rows.h"

#include <mysql.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HR_MYSQL_CELL_BUF 256

/* Copies the current row's column COL into a new string; a value longer
 * than the bound buffer is fetched again whole. */
static char *hr_mysql_cell_dup(MYSQL_STMT *stmt, unsigned col, const char *buf, unsigned long len)
{
    char *cell = malloc((size_t)len + 1);

    if (!cell)
        return NULL;
    if (len <= HR_MYSQL_CELL_BUF) {
        memcpy(cell, buf, len);
    } else {
        unsigned long got = 0;
        MYSQL_BIND b = {.buffer_type = MYSQL_TYPE_STRING,
                        .buffer = cell,
                        .buffer_length = len + 1,
                        .length = &got};
        if (mysql_stmt_fetch_column(stmt, &b, col, 0) != 0 || got != len) {
            free(cell);
            return NULL;
        }
    }
    cell[len] = '\0';
    return cell;
}

/* Fetches the whole result of an executed STMT into a new hr_mysql_rows. */
int hr_mysql_rows_fetch(MYSQL_STMT *stmt, hr_mysql_rows **out, unsigned *err, char *errstr,
                        size_t errlen)
{
    hr_mysql_rows *rows = calloc(1, sizeof *rows);
    MYSQL_RES *meta = NULL;
    MYSQL_BIND *binds = NULL;
    char *bufs = NULL;
    unsigned long *lens = NULL;
    my_bool *nulls = NULL, *truncs = NULL;
    unsigned ncols = mysql_stmt_field_count(stmt);
    MYSQL_FIELD *fields;
    int rc = -1;

    if (!rows)
        goto oom;
    if (ncols == 0) {
        *out = rows;
        return 0;
    }
    meta = mysql_stmt_result_metadata(stmt);
    if (!meta || mysql_stmt_store_result(stmt) != 0) {
        *err = mysql_stmt_errno(stmt);
        snprintf(errstr, errlen, "%s", mysql_stmt_error(stmt));
        goto out;
    }
    fields = mysql_fetch_fields(meta);
    rows->ncols = ncols;
    rows->nrows = (size_t)mysql_stmt_num_rows(stmt);
    rows->names = calloc(ncols, sizeof *rows->names);
    if (rows->nrows > SIZE_MAX / ncols / sizeof *rows->cells)
        goto oom;
    rows->cells = calloc(rows->nrows * ncols + 1, sizeof *rows->cells);
    binds = calloc(ncols, sizeof *binds);
    bufs = malloc((size_t)ncols * HR_MYSQL_CELL_BUF);
    lens = calloc(ncols, sizeof *lens);
    nulls = calloc(ncols, sizeof *nulls);
    truncs = calloc(ncols, sizeof *truncs);
    if (!rows->names || !rows->cells || !binds || !bufs || !lens || !nulls || !truncs)
        goto oom;
    for (unsigned c = 0; c < ncols; c++) {
        rows->names[c] = strdup(fields[c].name ? fields[c].name : "");
        if (!rows->names[c])
            goto oom;
        binds[c] = (MYSQL_BIND){.buffer_type = MYSQL_TYPE_STRING,
                                .buffer = bufs + (size_t)c * HR_MYSQL_CELL_BUF,
                                .buffer_length = HR_MYSQL_CELL_BUF,
                                .length = &lens[c],
                                .is_null = &nulls[c],
                                .error = &truncs[c]};
    }
    if (mysql_stmt_bind_result(stmt, binds) != 0) {
        snprintf(errstr, errlen, "%s", mysql_stmt_error(stmt));
        goto out;
    }
    for (size_t r = 0; r < rows->nrows; r++) {
        int f = mysql_stmt_fetch(stmt);
        if (f == MYSQL_NO_DATA) {
            rows->nrows = r;
            break;
        }
        if (f != 0 && f != MYSQL_DATA_TRUNCATED) {
            *err = mysql_stmt_errno(stmt);
            snprintf(errstr, errlen, "%s", mysql_stmt_error(stmt));
            goto out;
        }
        for (unsigned c = 0; c < ncols; c++) {
            char **cell = &rows->cells[r * ncols + c];
            if (nulls[c])
                continue;
            *cell = hr_mysql_cell_dup(stmt, c, (const char *)binds[c].buffer, lens[c]);
            if (!*cell) {
                snprintf(errstr, errlen, "mysql: cannot fetch column %s of %lu bytes",
                         rows->names[c], lens[c]);
                goto out;
            }
        }
    }
    *out = rows;
    rows = NULL;
    rc = 0;
    goto out;

oom:
    snprintf(errstr, errlen, "mysql: out of memory");
out:
    mysql_stmt_free_result(stmt);
    if (meta)
        mysql_free_result(meta);
    free(binds);
    free(bufs);
    free(lens);
    free(nulls);
    free(truncs);
    hr_mysql_rows_free(rows);
    return rc;
}

void hr_mysql_rows_free(hr_mysql_rows *rows)
{
    if (!rows)
        return;
    if (rows->cells)
        for (size_t i = 0; i < rows->nrows * rows->ncols; i++)
            free(rows->cells[i]);
    if (rows->names)
        for (size_t c = 0; c < rows->ncols; c++)
            free(rows->names[c]);
    free(rows->cells);
    free(rows->names);
    free(rows);
}

const char *hr_mysql_cell(const hr_mysql_rows *rows, size_t row, size_t col)
{
    if (!rows || row >= rows->nrows || col >= rows->ncols)
        return NULL;
    return rows->cells[row * rows->ncols + col];
}
