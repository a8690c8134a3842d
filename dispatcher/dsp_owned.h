/* dsp_owned: the tasks this dispatcher owns and the shards it claimed (the
 * owned-task table, d->owned, loop thread) and their leases (DESIGN.md
 * "Ownership and leases").  Each entry is a dsp_task, found by task id
 * through a hash index (a delivery report, a renewal's row, a
 * reconciliation's outcome), walked by position (the chunker's tick). */
#ifndef DSP_OWNED_H
#define DSP_OWNED_H

#include <stdbool.h>
#include <stdint.h>

#include "dsp.h"
#include "hr_shard.h"
#include "hr_task.h"
#include "hr_tz.h"
#include "hr_vec.h"

typedef struct dsp_owned dsp_owned;

/* A task this dispatcher owns (claimed_by = owner) and chunks, or a shard
 * of a sharded task it claimed (docs/architecture.md "Sharded tasks"):
 *   shards < 2, shard HR_SHARD_NONE: a task of one set, owned and chunked;
 *   shards > 1, shard HR_SHARD_NONE: the task's coordinator (owned): it
 *     reconciles, writes the shard rows and moves the task to dispatched
 *     once every shard is chunked, and chunks nothing itself;
 *   shards > 1, shard k: shard k, claimed in push_task_shard and chunked.
 * Written by the chunker (dsp_chunk.c) and the reconciliation's outcome
 * (dsp_reconcile.c) on the loop thread; the table's links are dsp_owned.c's. */
typedef struct dsp_task {
    int64_t id;
    int shards;
    int shard;
    int64_t due_ms;
    int64_t chunk_size;
    int64_t rate_limit; /* effective; 0 = unlimited */
    int64_t expire_ms;  /* expire_at; <= 0 = never (dsp_chunk_expire) */
    int64_t next_ms;    /* do not chunk before (rate limit, retry) */
    uint64_t gen;       /* this ownership; reports of an earlier one are ignored */
    int outstanding;    /* produced, delivery report not yet served */
    int64_t chunks;     /* chunks this owner moved */
    bool started;       /* the seq key exists: reconciled, refills can no longer run */
    bool addressed;     /* its channel pushes to addresses (not a webhook) */
    bool reconciling;   /* its reconciliation is queued or running */
    bool subs_empty;
    /* local time and send windows (dsp_wait.c) */
    bool waits;                           /* recipients pass through the wait set */
    bool leads;                           /* event_at: plan the leads' waves (hr_task_leads) */
    bool window;                          /* a send window (below) */
    int64_t window_start_s, window_end_s; /* seconds of the local day */
    char window_tz[HR_TZ_NAME_MAX + 1];   /* "" = the recipient's zone */
    int64_t wait_next_ms;                 /* the next release instant, or a recheck; 0 = now */
    int64_t wait_left;                    /* members in the wait set after the last release */
    /* an A/B test's winner step (dsp_ab.c): the rest held until the pick */
    bool ab;          /* the task has one */
    bool ab_released; /* this owner moved the held rest to due */
    int64_t ab_wait_s;
    /* pacing (dsp_owned_gauges) */
    int64_t finish_ms; /* finish_by, -1 = not paced; rate_limit is then the rate in force */
    int64_t cap;       /* the effective rate_limit a paced rate never exceeds; 0 = none */
    /* the table's (dsp_owned.c) */
    size_t at;                /* position */
    struct dsp_task *next_id; /* the next entry of the same index bucket */
    uint64_t renewed;         /* the last renewal whose rows held it */
} dsp_task;

/* One kind of lease the renewal keeps: the tasks and coordinators (their
 * push_task rows, dsp_owned.c) or the claimed shards (their push_task_shard
 * rows, dsp_shard.c).  RENEW_SQL (? lease_s, ? owner) pushes every lease
 * of ours out; READ_SQL (? owner) answers the rows we hold as (task id,
 * shard or NULL, running 1/0, control). */
typedef struct dsp_owned_lease {
    const char *renew_sql, *read_sql;
    bool shards; /* whose entries: claimed shards, or tasks and coordinators */
    /* An entry with no row any more (taken over, ended): logs it. */
    void (*lost)(dsp *d, const dsp_task *dt);
    /* An entry whose row no longer runs (paused, cancelled): logs and
     * undoes what it must; the entry is dropped after. */
    void (*stopped)(dsp *d, const dsp_task *dt, const hr_mysql_rows *rows, size_t row);
    /* A running row we hold without an entry, or NULL. */
    void (*stray)(dsp *d, const hr_mysql_rows *rows, size_t row);
} dsp_owned_lease;

/* The table (empty) into d->owned.  0, or -1 out of memory. */
int dsp_owned_new(dsp *d);
/* Frees the table and every entry; NULL-safe. */
void dsp_owned_free(dsp *d);

/* Entry SHARD (HR_SHARD_NONE: the task or coordinator) of task ID, or NULL. */
dsp_task *dsp_owned_find(dsp *d, int64_t id, int shard);
/* Whether we chunk a shard (not the coordinator) of task ID. */
bool dsp_owned_has_shard(dsp *d, int64_t id);
/* The entries, by position 0..count-1 (dsp_owned_drop moves the last one
 * into the dropped one's place, so walk down when dropping). */
size_t dsp_owned_count(const dsp *d);
dsp_task *dsp_owned_at(dsp *d, size_t i);
/* Whether any entry is a claimed shard. */
bool dsp_owned_any_shard(const dsp *d);

/* Takes over claimed task T (only read); VIA is timer, poller, takeover or
 * adopt.  An entry it has already counts, but for a takeover from another
 * owner (or none: a resumed task), which replaces it with a new one.
 * false when out of memory (the caller frees the claim or lets its lease
 * lapse). */
bool dsp_owned_add(dsp *d, const hr_task *t, const char *via);
/* Chunks shard SHARD of T, claimed by dsp_shard.c; false when out of
 * memory (the caller ends the claim's lease). */
bool dsp_owned_add_shard(dsp *d, const hr_task *t, int shard);
/* Forgets entry DT and frees it. */
void dsp_owned_drop(dsp *d, dsp_task *dt);

/* Renews the leases of kind LEASE and drops the entries lost or stopped
 * (see dsp_owned_lease).  HOLD_STRAYS: the rows of ours with no entry are
 * left as they are this time; true when there was one. */
bool dsp_owned_renew(dsp *d, const dsp_owned_lease *lease, bool hold_strays);
/* dsp_owned_renew of the tasks and coordinators; a running task claimed
 * under our name that we do not own is adopted, or its lease ended.
 * CLAIMING: the background job runs, and may have claimed tasks it has not
 * handed over yet (dsp_jobs_done): such rows are left for a later renewal,
 * at most DSP_OWNED_STRAY_WAITS in a row. */
void dsp_owned_renew_tasks(dsp *d, bool claiming);

/* herald_paced_tasks / herald_paced_rate from the entries with a
 * finish_by (called when one's rate or the table changed). */
void dsp_owned_gauges(dsp *d);

#endif
