/* dsp_addr: keeps Redis's address sets (herald:addr:<uid>) in step with
 * push_address, so that rows an admin inserted, changed or deleted with
 * raw SQL reach the workers, and a Redis that lost them is refilled
 * (hr_addr_sync; the rule is in docs/architecture.md, "Addresses").
 *
 * Two callers, each on its own connections: the reconciliation of every
 * claimed task (dsp_reconcile.c), so a campaign starts from addresses as
 * fresh as its subscribers, and the background job every
 * DSP_ADDR_SYNC_MS (dsp_jobs.c).  Syncs of all dispatchers exclude each
 * other through hr_addr's Redis lock: a busy answer means another one is
 * doing the work.  A failure is logged and left to the next round — a
 * stale address set never stops a task. */
#include "dsp_mirror.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "hr_addr.h"
#include "hr_clock.h"
#include "hr_log.h"

struct dsp_addr {
    atomic_int_least64_t synced_ms; /* when a sync last started (any thread) */
};

int dsp_addr_new(dsp *d)
{
    d->addr = calloc(1, sizeof *d->addr);
    if (d->addr == NULL)
        return -1;
    atomic_init(&d->addr->synced_ms, 0);
    return 0;
}

void dsp_addr_free(dsp *d)
{
    free(d->addr);
    d->addr = NULL;
}

void dsp_addr_sync(dsp *d, dsp_conn *conn, bool due_only)
{
    hr_addr_sync_result res;
    char token[256], err[512];
    int64_t now = hr_clock_now_ms(), last = atomic_load(&d->addr->synced_ms);
    int rc;

    if (due_only && now - last < DSP_ADDR_SYNC_MS)
        return;
    atomic_store(&d->addr->synced_ms, now);
    snprintf(token, sizeof token, "%s/addr", d->owner);
    rc = hr_addr_sync(conn->m, conn->r, token, d->cfg->dispatcher.refill_batch, &res, err,
                      sizeof err);
    if (rc < 0) {
        hr_log_warn("addr_sync_failed", "error=%s", err);
        return;
    }
    if (rc == HR_ADDR_SYNC_BUSY)
        return;
    if (res.full || res.uids > 0)
        hr_log_info("addr_synced",
                    "full=%d uids=%" PRId64 " addresses=%" PRId64 " refused=%" PRId64
                    " ms=%" PRId64,
                    res.full, res.uids, res.stored, res.refused, hr_clock_now_ms() - now);
    if (res.refused > 0)
        hr_log_warn("addr_refused", "rows=%" PRId64 " first=%s", res.refused, res.first_refused);
}
