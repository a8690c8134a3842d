/* dsp_shard: the shards of sharded tasks (docs/architecture.md "Sharded
 * tasks"): claims, their leases, the chunked rows, on the loop thread
 * except dsp_shard_rows (the reconciliation job's). */
#ifndef DSP_SHARD_H
#define DSP_SHARD_H

#include "dsp.h"
#include "dsp_owned.h"

/* Loop thread (t_shard): claims at most one claimable shard (ready, or
 * chunking with an expired lease) of a dispatching task, one this
 * dispatcher holds no shard of. */
void dsp_shard_poll(dsp *d);
/* Loop thread, with the lease renewal: renews our shard leases and drops
 * the shards we lost or whose task is no longer dispatching with control
 * run (ending their lease at once). */
void dsp_shard_renew(dsp *d);
/* Loop thread: shard DT's subs ran out and its reports are written: its
 * row becomes chunked, DT is dropped and the next shard is looked for. */
void dsp_shard_chunked(dsp *d, dsp_task *dt);
/* Loop thread, coordinator DT: 1 when every shard row of its task is
 * chunked, 0 when not yet, -1 on a MySQL error (ERRSTR). */
int dsp_shard_all_chunked(dsp *d, const dsp_task *dt, char *errstr, size_t errlen);
/* At exit: ends the leases of the shards we hold. */
void dsp_shard_release_all(dsp *d);
/* Reconciliation job: writes task ID's SHARDS rows (ready) if missing, and
 * makes a chunked shard whose subs holds recipients again ready (after a
 * resume, recover or redispatch).  0 or -1 (ERRSTR). */
int dsp_shard_rows(dsp_conn *conn, int64_t id, int shards, char *errstr, size_t errlen);

#endif
