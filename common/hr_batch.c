/* hr_batch: a batch of integer rows as one JSON_TABLE parameter, and the
 * answered rows matched back to it (hr_batch.h).  The JSON text is made and
 * freed here for each statement; the match's index is made and freed in
 * hr_batch_select. */
#include "hr_batch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* The parameters a statement may bind besides the batch. */
#define HR_BATCH_PARAMS_MAX 8

/* One batch row in the match's index: its key and its place in the batch. */
typedef struct hr_batch_key {
    int64_t key[HR_BATCH_KEY_MAX];
    size_t i;
} hr_batch_key;

static int hr_batch_key_cmp(const hr_batch_key *x, const hr_batch_key *y)
{
    for (size_t k = 0; k < HR_BATCH_KEY_MAX; k++)
        if (x->key[k] != y->key[k])
            return x->key[k] < y->key[k] ? -1 : 1;
    return 0;
}

/* By key, then by place: equal keys stay in batch order. */
static int hr_batch_index_cmp(const void *a, const void *b)
{
    const hr_batch_key *x = a, *y = b;
    int c = hr_batch_key_cmp(x, y);

    return c != 0 ? c : (x->i > y->i) - (x->i < y->i);
}

/* A batch of rows as one bound value: V holds NROWS rows of NCOLS
 * integers, row-major; *OUT gets the JSON text "[[a,b],[c,d]]" (NCOLS 1:
 * "[a,c]"; NROWS 0: "[]"), which a statement reads with JSON_TABLE.  One
 * prepared statement then serves every batch size, where an IN list of
 * placeholders would prepare one per size.  Free *OUT with free().  0, or
 * -1 when out of memory. */
static int hr_batch_json(const int64_t *v, size_t nrows, size_t ncols, char **out)
{
    /* A number is at most 20 characters, each followed by ',' or ']'; a
     * row of several opens with '['; then the outer brackets and NUL. */
    size_t cap, len = 0;
    char *s;

    *out = NULL;
    if (ncols == 0 || nrows > (SIZE_MAX - 3) / (ncols * 21 + 2))
        return -1;
    cap = nrows * (ncols * 21 + 2) + 3;
    s = malloc(cap);
    if (s == NULL)
        return -1;
    s[len++] = '[';
    for (size_t i = 0; i < nrows; i++) {
        if (i > 0)
            s[len++] = ',';
        if (ncols > 1)
            s[len++] = '[';
        for (size_t j = 0; j < ncols; j++)
            len += (size_t)snprintf(s + len, cap - len, j > 0 ? ",%" PRId64 : "%" PRId64,
                                    v[i * ncols + j]);
        if (ncols > 1)
            s[len++] = ']';
    }
    s[len++] = ']';
    s[len] = '\0';
    *out = s;
    return 0;
}

/* Runs SQL with batch B's JSON text before P[NP]: into *ROWS when ROWS is
 * not NULL, else as a statement without a result. */
static int hr_batch_run(hr_mysql *m, const char *sql, const hr_batch *b, const hr_mysql_param *p,
                        size_t np, hr_mysql_rows **rows, uint64_t *affected, unsigned *errno_out,
                        char *errstr, size_t errlen)
{
    hr_mysql_param all[1 + HR_BATCH_PARAMS_MAX];
    char *json = NULL;
    int rc;

    if (np > HR_BATCH_PARAMS_MAX) {
        snprintf(errstr, errlen, "batch statement with %zu parameters", np);
        return -1;
    }
    if (hr_batch_json(b->v, b->nrows, b->ncols, &json) < 0) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    all[0] = HR_P_STR(json);
    for (size_t k = 0; k < np; k++)
        all[1 + k] = p[k];
    rc = rows != NULL
             ? hr_mysql_query(m, sql, all, 1 + np, rows, errstr, errlen)
             : hr_mysql_exec(m, sql, all, 1 + np, affected, NULL, errno_out, errstr, errlen);
    free(json);
    return rc;
}

int hr_batch_exec(hr_mysql *m, const char *sql, const hr_batch *b, const hr_mysql_param *p,
                  size_t np, uint64_t *affected, unsigned *errno_out, char *errstr, size_t errlen)
{
    return hr_batch_run(m, sql, b, p, np, NULL, affected, errno_out, errstr, errlen);
}

int hr_batch_query(hr_mysql *m, const char *sql, const hr_batch *b, const hr_mysql_param *p,
                   size_t np, hr_mysql_rows **rows, char *errstr, size_t errlen)
{
    return hr_batch_run(m, sql, b, p, np, rows, NULL, NULL, errstr, errlen);
}

/* The first NKEY cells of answered row ROW into KEY; false for a NULL or
 * a cell that is no integer. */
static bool hr_batch_row_key(const hr_mysql_rows *rows, size_t row, size_t nkey, int64_t *key)
{
    for (size_t k = 0; k < nkey; k++) {
        const char *cell = hr_mysql_cell(rows, row, k);
        char *end;

        if (cell == NULL || *cell == '\0')
            return false;
        errno = 0;
        key[k] = strtoll(cell, &end, 10);
        if (*end != '\0' || errno != 0)
            return false;
    }
    return true;
}

int hr_batch_select(hr_mysql *m, const char *sql, const hr_batch *b, const hr_mysql_param *p,
                    size_t np, size_t nkey, hr_batch_match_fn fn, void *ctx, char *errstr,
                    size_t errlen)
{
    hr_mysql_rows *rows = NULL;
    hr_batch_key *index = NULL;
    int rc = -1;

    if (nkey == 0 || nkey > HR_BATCH_KEY_MAX || nkey > b->ncols) {
        snprintf(errstr, errlen, "batch match on %zu of %zu columns", nkey, b->ncols);
        return -1;
    }
    if (b->nrows > 0 && (index = calloc(b->nrows, sizeof *index)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < b->nrows; i++) {
        index[i].i = i;
        for (size_t k = 0; k < nkey; k++)
            index[i].key[k] = b->v[i * b->ncols + k];
    }
    if (b->nrows > 0)
        qsort(index, b->nrows, sizeof *index, hr_batch_index_cmp);
    if (hr_batch_query(m, sql, b, p, np, &rows, errstr, errlen) < 0)
        goto done;
    for (size_t row = 0; row < rows->nrows; row++) {
        hr_batch_key want = {.i = 0};
        size_t lo = 0, hi = b->nrows;

        if (!hr_batch_row_key(rows, row, nkey, want.key))
            continue;
        /* The first index entry of the key, if any. */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;

            if (hr_batch_key_cmp(&index[mid], &want) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < b->nrows && hr_batch_key_cmp(&index[lo], &want) == 0; lo++)
            if (fn(ctx, index[lo].i, rows, row))
                break;
    }
    rc = 0;
done:
    hr_mysql_rows_free(rows);
    free(index);
    return rc;
}
