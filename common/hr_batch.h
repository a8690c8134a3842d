/* hr_batch: a batch of rows of integers sent to MySQL as one bound value
 * (hr_batch_json: "[[a,b],[c,d]]"), which a statement reads with
 * JSON_TABLE, and the rows a SELECT (or an INSERT ... RETURNING) answers for
 * it matched back to the batch's rows.
 *
 * One prepared statement then serves every batch size, where an IN list of
 * placeholders would prepare one per size.  The match sorts an index of
 * the batch by its key columns once and looks each answered row up in it,
 * so a batch of N rows answered by M costs O((N + M) log N), where the
 * loops it replaced compared every answered row with every batch row.
 *
 * A statement joins the table to the JSON_TABLE with FORCE INDEX (PRIMARY)
 * (or the key it looks rows up by): JSON_TABLE has no row estimate, and on
 * a table of a few rows MariaDB scans the table instead, so an UPDATE locks
 * every row it reads.  An admin's transaction still inserting one task's
 * subscriptions (the guard trigger share-locks that task's row) then held
 * back every other task's totals, counters and finish until it ended
 * (test_sql_path, "a task due beside it", on a fresh stack). */
#ifndef HR_BATCH_H
#define HR_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_mysql.h"

/* Key columns a match compares at most (a task id, or a task and a seq). */
#define HR_BATCH_KEY_MAX 2

/* NROWS rows of NCOLS integers, row-major, in V (the caller's memory). */
typedef struct hr_batch {
    const int64_t *v;
    size_t nrows, ncols;
} hr_batch;

/* A statement without a result whose first parameter is batch B (its
 * JSON_TABLE's), followed by P[NP]; as hr_mysql_exec.  0, or -1 with
 * ERRSTR. */
int hr_batch_exec(hr_mysql *m, const char *sql, const hr_batch *b, const hr_mysql_param *p,
                  size_t np, uint64_t *affected, unsigned *errno_out, char *errstr, size_t errlen);

/* The same for a statement with a result, fetched whole into *ROWS. */
int hr_batch_query(hr_mysql *m, const char *sql, const hr_batch *b, const hr_mysql_param *p,
                   size_t np, hr_mysql_rows **rows, char *errstr, size_t errlen);

/* Called for a batch row I whose first key columns are those of answered
 * row ROW; true when batch row I took the answered row (it is offered to
 * no later batch row), false to offer it to the next one with the same
 * key. */
typedef bool (*hr_batch_match_fn)(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row);

/* An hr_batch_match_fn for a read that only tells which batch rows were
 * answered: CTX is a bool array, and every batch row whose key an
 * answered row has is set true. */
bool hr_batch_mark(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row);

/* Runs SQL as hr_batch_query, then offers each answered row whose first
 * NKEY columns (1..HR_BATCH_KEY_MAX, decimal integers) equal the first NKEY
 * integers of batch rows to FN, those batch rows in batch order; an
 * answered row with a NULL or a non-integer key matches nothing.  0, or -1
 * with ERRSTR (the statement failed, or out of memory: nothing was
 * offered). */
int hr_batch_select(hr_mysql *m, const char *sql, const hr_batch *b, const hr_mysql_param *p,
                    size_t np, size_t nkey, hr_batch_match_fn fn, void *ctx, char *errstr,
                    size_t errlen);

#endif
