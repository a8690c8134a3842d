/* wk_deliveries: the delivery log (push_delivery), written by the reporter
 * thread inside its transaction (wk_reporter).  The outcomes of a batch go
 * as multi-row INSERTs of fixed sizes only: a full batch of reporter_batch
 * rows (at most 8,191, MariaDB's 65,535 placeholders per prepared
 * statement), a part batch as the powers of two of its size, so the
 * reporter's connection prepares at most 15 INSERTs (each holds ~800 bytes
 * of bindings per row in libmariadb).  A batch MySQL refuses for its data
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
