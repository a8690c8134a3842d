/* wk_prune: an address a provider called dead, removed from both stores:
 * out of Redis (hr_addr_unlist, a job on the Redis thread), then out of
 * MySQL (hr_addr_forget, on the loop), so no later campaign tries it.  A
 * failure is logged; the next campaign's answer prunes it then. */
#ifndef WK_PRUNE_H
#define WK_PRUNE_H

#include "hr_addr.h"
#include "wk_lifecycle.h"

/* The sender's prune callback (CTX: the wk_lifecycle). */
void wk_lifecycle_prune(void *ctx, wk_push *push, const hr_addr *a);

#endif
