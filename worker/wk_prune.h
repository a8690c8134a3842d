/* wk_prune: an address a provider called dead, removed from both stores:
 * out of Redis (hr_addr_unlist, a job on the Redis thread), then out of
 * MySQL (hr_addr_forget, on the loop), so no later campaign tries it, and
 * counted in herald_addresses_pruned_total{channel}.  A failure is
 * logged; the next campaign's answer prunes it then.  Loop thread only. */
#ifndef WK_PRUNE_H
#define WK_PRUNE_H

#include "hr_addr.h"
#include "hr_mysql.h"
#include "wk_metrics.h"
#include "wk_push.h"
#include "wk_redis.h"

/* What a prune needs, lent by the worker (its Redis thread, the loop's
 * MySQL connection, the metrics); it outlives the jobs. */
typedef struct wk_prune {
    wk_redis *rd;
    hr_mysql *mysql;
    wk_metrics *met;
} wk_prune;

/* The sender's prune callback (wk_sender_set_prune; CTX: a wk_prune):
 * address A of PUSH is dead. */
void wk_prune_address(void *ctx, wk_push *push, const hr_addr *a);

#endif
