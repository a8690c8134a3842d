/* dsp_mirror: the syncs of the books mirrored into Redis (hr_mirror.h: the
 * recipients' profiles, the address book), run by the background job and
 * every reconciliation, each on its own connections; d->mirror remembers
 * when one last started. */
#ifndef DSP_MIRROR_H
#define DSP_MIRROR_H

#include <stdbool.h>

#include "dsp.h"

#define DSP_MIRROR_SYNC_MS 5000 /* the syncs from the background job */

/* The syncs' memory into d->mirror.  0, or -1 out of memory. */
int dsp_mirror_new(dsp *d);
void dsp_mirror_free(dsp *d);
/* The books' syncs on CONN's connections, the address book's only with
 * ADDRESSES; DUE_ONLY: only when DSP_MIRROR_SYNC_MS passed since the last
 * one started. */
void dsp_mirror_sync(dsp *d, dsp_conn *conn, bool due_only, bool addresses);

#endif
