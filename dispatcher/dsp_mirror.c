/* dsp_mirror: keeps the Redis mirrors of the books in step with MySQL
 * (hr_mirror.h): the recipients' profiles and preferences
 * (herald:user:<uid>, push_user and push_user_pref; docs/recipients.md)
 * and the address sets with their suppressions (herald:addr:<uid>,
 * push_address and push_suppression), so that rows an admin inserted,
 * changed or deleted with raw SQL reach the workers, and a Redis that lost
 * them is refilled (the rule is in docs/architecture.md, "Addresses").
 *
 * Two callers, each on its own connections: the reconciliation of every
 * claimed task (dsp_reconcile.c), so a campaign starts from books as
 * fresh as its subscribers, and the background job every
 * DSP_MIRROR_SYNC_MS (dsp_jobs.c).  Syncs of all dispatchers exclude each
 * other through each book's Redis lock: a busy answer means another one is
 * doing the work.  A failure is logged and left to the next round — a
 * stale book never stops a task. */
#include "dsp_mirror.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "hr_addr.h"
#include "hr_clock.h"
#include "hr_log.h"
#include "hr_user.h"

struct dsp_mirror {
    atomic_int_least64_t synced_ms; /* when a sync last started (any thread) */
};

/* The books, each synced in turn: the profiles first (every task's
 * consent reads them), then the addresses (only addressed channels'). */
static const hr_mirror *const dsp_mirror_books[] = {&hr_user_mirror, &hr_addr_mirror};

int dsp_mirror_new(dsp *d)
{
    d->mirror = calloc(1, sizeof *d->mirror);
    if (d->mirror == NULL)
        return -1;
    atomic_init(&d->mirror->synced_ms, 0);
    return 0;
}

void dsp_mirror_free(dsp *d)
{
    free(d->mirror);
    d->mirror = NULL;
}

/* One book's sync; logged "<book>_synced" when it rewrote anything. */
static void dsp_mirror_book(dsp *d, dsp_conn *conn, const hr_mirror *mr)
{
    hr_mirror_result res;
    char token[256], err[512];
    int64_t start = hr_clock_now_ms();
    int rc;

    snprintf(token, sizeof token, "%s/%s", d->owner, mr->name);
    rc = hr_mirror_sync(mr, conn->m, conn->r, token, d->cfg->dispatcher.refill_batch, d->cfg, &res,
                        err, sizeof err);
    if (rc < 0) {
        hr_log_warn("mirror_sync_failed", "book=%s error=%s", mr->name, err);
        return;
    }
    if (rc == HR_MIRROR_BUSY)
        return;
    if (res.full || res.uids > 0)
        hr_log_info(
            "mirror_synced",
            "book=%s full=%d uids=%" PRId64 " stored=%" PRId64 " refused=%" PRId64 " ms=%" PRId64,
            mr->name, res.full, res.uids, res.stored, res.refused, hr_clock_now_ms() - start);
    if (res.refused > 0)
        hr_log_warn("mirror_refused", "book=%s rows=%" PRId64 " first=%s", mr->name, res.refused,
                    res.first_refused);
}

void dsp_mirror_sync(dsp *d, dsp_conn *conn, bool due_only, bool addresses)
{
    int64_t now = hr_clock_now_ms(), last = atomic_load(&d->mirror->synced_ms);

    if (due_only && now - last < DSP_MIRROR_SYNC_MS)
        return;
    atomic_store(&d->mirror->synced_ms, now);
    for (size_t i = 0; i < sizeof dsp_mirror_books / sizeof *dsp_mirror_books; i++)
        if (addresses || dsp_mirror_books[i] != &hr_addr_mirror)
            dsp_mirror_book(d, conn, dsp_mirror_books[i]);
}
