/* wk_deliveries: the delivery log (push_delivery), written by the reporter
 * thread inside its transaction (wk_reporter).  The outcomes of a batch go
 * as one execute of a one-row upsert bound to all of them (MariaDB's array
 * binding, hr_mysql_exec_rows): the server runs the INSERT once and reads
 * each row's 8 parameters in turn, where a multi-row INSERT of 8 x rows
 * placeholders cost it their setup and cleanup per execute (and a
 * statement per batch size, at most 65,535 placeholders).  `at` goes as a
 * DATETIME (no FROM_UNIXTIME a row).  A batch MySQL refuses for its data
 * (not a connection, deadlock or lock-wait error) goes again row by row,
 * and a row refused again is logged (delivery_row_dropped), counted
 * (herald_reporter_dropped_total{reason="rejected"}) and dropped.
 * Reporter thread only. */
#ifndef WK_DELIVERIES_H
#define WK_DELIVERIES_H

#include <stddef.h>

#include "hr_mysql.h"
#include "wk_event.h"
#include "wk_metrics.h"

typedef struct wk_deliveries wk_deliveries;

/* A writer for batches of up to BATCH rows; MET (which must outlive it)
 * counts the rows refused.  NULL when out of memory. */
wk_deliveries *wk_deliveries_new(size_t batch, wk_metrics *met);
/* Writes the outcome events among the N events of RING (CAP slots) from
 * slot HEAD on, on M (in the caller's transaction): 0, or -1 with ERRSTR
 * when the transaction must be given up (a connection error, out of
 * memory). */
int wk_deliveries_write(wk_deliveries *dl, hr_mysql *m, const wk_event *ring, size_t cap,
                        size_t head, size_t n, char *errstr, size_t errlen);
/* Accepts NULL. */
void wk_deliveries_free(wk_deliveries *dl);

#endif
