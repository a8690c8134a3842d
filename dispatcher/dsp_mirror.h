/* dsp_addr: the address sync (Redis's address sets kept in step with
 * push_address), run by the background job and every reconciliation, each
 * on its own connections; d->addr remembers when one last started. */
#ifndef DSP_ADDR_H
#define DSP_ADDR_H

#include <stdbool.h>

#include "dsp.h"

#define DSP_ADDR_SYNC_MS 5000 /* address sync from the background job */

/* The sync's memory into d->addr.  0, or -1 out of memory. */
int dsp_addr_new(dsp *d);
void dsp_addr_free(dsp *d);
/* The address sync on CONN's connections; DUE_ONLY: only when
 * DSP_ADDR_SYNC_MS passed since the last one started. */
void dsp_addr_sync(dsp *d, dsp_conn *conn, bool due_only);

#endif
