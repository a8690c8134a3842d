/* dsp: herald-dispatcher's shared state and the functions its modules call
 * on each other.
 *
 * Threads (the one place where they are written down):
 *   - the loop thread runs the libuv loop: timer pops and their claims,
 *     shard claims (dsp_shard.c), the chunker, Kafka delivery reports
 *     (rd_kafka_poll is only called here), push_chunk bookkeeping, lease
 *     renewal, shutdown.  It owns dsp.loop_conn and the owned-task table
 *     dsp.tasks.
 *   - up to DSP_RECONCILE_JOBS reconciliation jobs run on libuv's thread
 *     pool (dsp_reconcile.c), each with its own dsp.rc[i].conn: claimed
 *     tasks' sets are made complete before their first chunk.
 *   - one background job at a time runs on libuv's thread pool (dsp_jobs.c):
 *     scanner + prepare (dsp_scan.c), DB poller (dsp_poll.c), sweeper
 *     (dsp_sweep.c), control transitions (dsp_control.c), the address sync
 *     (dsp_addr.c; the reconciliation runs one too).  It owns dsp.bg_conn,
 *     dsp.scan (its memory of what it put into the timer) and fills
 *     dsp.bg_claimed, which the loop thread takes over in the job's
 *     after-work callback (libuv orders the two, so no lock is needed).
 *   - both produce to Kafka (rd_kafka_producev is thread-safe).
 *   - dsp.health is shared and guarded by health_mu; dsp.stopping is atomic.
 *   - the HTTP API (dsp_api.c) runs on libmicrohttpd's pool threads.  It
 *     never touches the loop's or the job's connections: it has its own
 *     pool (dsp_api.pool, guarded by pool_mu, one connection pair per
 *     request in flight).  It reads dsp.down/dsp.seen under health_mu.
 *   - metric children (dsp.met) are looked up at start-up and updated
 *     lock-free from any thread.
 * Modules and who calls whom, without cycles: a module calls only modules
 * listed below it (every one uses dsp_conn.c and common/'s hr_*; the API's
 * dsp_api*.c are one module with its own header, dsp_api.h):
 *   dispatcher.c -> dsp_api*.c, dsp_jobs.c, dsp_timer.c, dsp_lease.c,
 *                   dsp_chunk.c, dsp_reconcile.c, dsp_metrics.c, dsp_shard.c
 *   dsp_jobs.c    -> dsp_scan.c, dsp_poll.c, dsp_sweep.c, dsp_control.c, dsp_addr.c,
 *                    dsp_lease.c (owns what the poller claimed), dsp_metrics.c,
 *                    dsp_timer.c (wakes it after a scan)
 *   dsp_control.c -> dsp_sweep.c (republishes a resumed task's parked chunks,
 *                    retires a cancelled task's keys)
 *   dsp_poll.c    -> dsp_scan.c (prepare), dsp_store.c
 *   dsp_scan.c    -> dsp_timer.c, dsp_store.c
 *   dsp_timer.c   -> dsp_lease.c (owns what it claimed), dsp_store.c,
 *                    dsp_reconcile.c (queues the claimed tasks)
 *   dsp_sweep.c   -> dsp_chunk.c (produce)
 *   dsp_chunk.c   -> dsp_reconcile.c (before the first chunk), dsp_shard.c (a
 *                    shard chunked, the coordinator's check), dsp_lease.c,
 *                    dsp_wait.c (releases due recipients), dsp_report.c, dsp_ahead.c
 *   dsp_reconcile.c -> dsp_lease.c (the outcome on the owned task), dsp_addr.c,
 *                    dsp_wait.c (plans the wait set), dsp_shard.c (the rows)
 *   dsp_shard.c   -> dsp_lease.c (owns what it claimed; renewed beside it)
 *   dsp_lease.c   -> dsp_store.c
 *   dsp_api*.c    -> dsp_store.c
 *   dsp_store.c, dsp_metrics.c, dsp_conn.c, dsp_wait.c, dsp_report.c, dsp_ahead.c: leaves.
 * Blocking MySQL work on the loop thread is limited to statements of
 * bounded size (a timer pop's claims, at most DSP_TIMER_POP_MAX; a tick's
 * chunk rows, at most DSP_REPORTS_PER_TICK; renewals); the scans whose
 * cost grows with the number of tasks or subscribers run in the background
 * job. */
#ifndef DSP_H
#define DSP_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <uv.h>

#include "hr_config.h"
#include "hr_httpd.h"
#include "hr_metrics.h"
#include "hr_tz.h"
#include "hr_mysql.h"
#include "hr_pace.h"
#include "hr_progress.h"
#include "hr_redis.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_task.h"
#include "hr_vec.h"

#include "dsp_seams.h"

/* Bounds on the work of one step, so the loop stays responsive. */
#define DSP_TIMER_POP_MAX 100    /* ids per timer pop */
#define DSP_SCAN_MAX 1000        /* tasks per scan */
#define DSP_POLL_MAX 100         /* tasks per poller round */
#define DSP_SWEEP_MAX 100        /* republishes per sweep */
#define DSP_CHUNKS_PER_TICK 64   /* chunk moves per tick, all tasks */
#define DSP_OUTSTANDING_MAX 32   /* unconfirmed chunks per task */
#define DSP_REPORTS_MAX 100000   /* confirmed chunks waiting for MySQL */
#define DSP_REPORTS_PER_TICK 256 /* push_chunk rows written per tick */
#define DSP_RETIRE_MAX 100       /* finished tasks whose keys get a TTL, per sweep */
#define DSP_KEY_RETENTION_MS ((int64_t)7 * 86400 * 1000) /* a finished task's Redis keys */
#define DSP_DUE_EARLY_MS 1000 /* a claim accepts due_at at most this far ahead */
#define DSP_TICK_MS 10
#define DSP_PREP_LOCK_MS 120000  /* prepare lock (refill vs first chunk) */
#define DSP_RECHECK_MS 10000     /* recount a prepared task's subscribers */
#define DSP_ADMIT_BUDGET_MS 250  /* admission estimates per scan (time) */
#define DSP_AHEAD_RECHECK_MS 50  /* a task that ran ahead looks again */
#define DSP_CTL_RECHECK_MS 100   /* a task held by its ctl key looks again */
#define DSP_FLUSH_MS 10000       /* bound of the producer flush at exit */
#define DSP_WARM_TIMEOUT_MS 5000 /* topic metadata at start-up */
#define DSP_ADDR_SYNC_MS 5000    /* address sync from the background job */
#define DSP_SHARD_POLL_MS 250    /* look for a claimable shard (dsp_shard.c) */
#define DSP_SHARD_CHECK_MS 250   /* a coordinator looks whether every shard is chunked */
/* Reconciliations at once, each a job on libuv's pool, which dsp_run sizes
 * to DSP_POOL_THREADS (the background job and a spare besides; an
 * UV_THREADPOOL_SIZE in the environment wins).  A job takes up to
 * DSP_RECONCILE_BATCH queued tasks (one address sync for them all).  The
 * jobs wait on round trips far more than they compute, so they overlap. */
#define DSP_RECONCILE_JOBS 6
#define DSP_RECONCILE_BATCH 16
#define DSP_POOL_THREADS "8"
#define DSP_MALLOC_ARENAS 1 /* glibc malloc arenas (dispatcher.c) */

typedef enum dsp_backend { DSP_MYSQL, DSP_REDIS, DSP_KAFKA, DSP__BACKENDS } dsp_backend;

/* A thread's own connections, made lazily and retried with backoff. */
typedef struct dsp_conn {
    hr_mysql *m;
    hr_redis *r;
    int64_t retry_at_ms; /* no backend work before this after a failure */
    int backoff_ms;
} dsp_conn;

/* A task this dispatcher owns (claimed_by = owner) and chunks, or a shard
 * of a sharded task it claimed (docs/architecture.md "Sharded tasks"):
 *   shards < 2, shard HR_SHARD_NONE: a task of one set, owned and chunked;
 *   shards > 1, shard HR_SHARD_NONE: the task's coordinator (owned): it
 *     reconciles, writes the shard rows and moves the task to dispatched
 *     once every shard is chunked, and chunks nothing itself;
 *   shards > 1, shard k: shard k, claimed in push_task_shard and chunked. */
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
    bool window;                          /* a send window (below) */
    int64_t window_start_s, window_end_s; /* seconds of the local day */
    char window_tz[HR_TZ_NAME_MAX + 1];   /* "" = the recipient's zone */
    int64_t wait_next_ms;                 /* the next release instant, or a recheck; 0 = now */
    int64_t wait_left;                    /* members in the wait set after the last release */
    /* pacing (dsp_pace.c) */
    int64_t finish_ms; /* finish_by, -1 = not paced; rate_limit is then the rate in force */
    int64_t cap;       /* the effective rate_limit a paced rate never exceeds; 0 = none */
} dsp_task;

/* One task's reconciliation (dsp_reconcile.c): asked for by the chunker,
 * its outcome written by the job. */
typedef struct dsp_rc_item {
    int64_t id;
    bool waits;     /* a local-time or windowed task: plan its wait set */
    bool addressed; /* its channel pushes to the address book: sync it first */
    int shards;     /* a sharded task's: seq of each shard, and its rows */
    int result;     /* an hr_subs_result, or -1 */
    int64_t added, seen, parked, ms;
    char err[256];
} dsp_rc_item;

/* A reconciliation job: a batch of items on libuv's pool, its own
 * connections. */
typedef struct dsp_rc_job {
    uv_work_t work;
    struct dsp *d;
    dsp_conn conn;
    bool busy;
    size_t n;
    dsp_rc_item items[DSP_RECONCILE_BATCH];
} dsp_rc_job;

/* The scanner's memory of one task in the horizon. */
typedef struct dsp_scan_entry {
    int64_t id;
    int64_t due_ms;      /* as put into the timer; -1 = not put yet */
    int64_t have;        /* SCARD subs + SCARD pulled at the last count */
    int64_t checked_ms;  /* when subscribers were last counted; 0 = never */
    int64_t admitted_ms; /* when admission control last ran (dsp_admit); 0 = never */
} dsp_scan_entry;

/* What decides whether a task needs a prepare (dsp_scan.c): its Redis
 * count (subs + pulled), its subscriptions, and whether it must be looked
 * at (count changed, or not checked for DSP_RECHECK_MS). */
typedef struct dsp_prep_count {
    int64_t have, want;
    bool synced; /* {t<ID>}synced exists */
    bool need;
} dsp_prep_count;

/* A confirmed first publish or republish waiting for its push_chunk row. */
typedef struct dsp_report {
    int64_t task, seq, size, published_ms;
    int shard; /* whose stats hash counts it (0 for a task of one set) */
} dsp_report;

enum { DSP_BG_SCAN = 1, DSP_BG_POLL = 2, DSP_BG_SWEEP = 4 };

/* The dispatcher's metric handles (registered by dsp_metrics_new). */
typedef struct dsp_metrics {
    hr_metrics *reg;
    hr_metrics_child *chunks_published, *chunks_redelivered, *ratelimit_waits;
    hr_metrics_child *claimed_timer, *claimed_poller, *claimed_takeover;
    hr_metrics_child *claim_lag;
    hr_metrics_child *reconcile_added, *reconcile_seconds, *unaccounted;
    hr_metrics_child *expired; /* herald_recipients_expired_total */
    hr_metrics_child *backend_errors[DSP__BACKENDS];
    hr_metrics_family *tasks;        /* herald_tasks{state} */
    hr_metrics_family *api_requests; /* herald_api_requests_total{route,code} */
    /* pacing and admission (dsp_pace.c) */
    hr_metrics_child *paced_tasks, *paced_rate;
    hr_metrics_child *task_warnings[HR_PACE__WARN_KINDS];
} dsp_metrics;

typedef struct dsp_api dsp_api;

typedef struct dsp {
    const hr_config *cfg;
    char owner[192]; /* "<instance>/<pid>" */

    uv_loop_t *loop;
    uv_timer_t t_scan, t_timer, t_poll, t_sweep, t_lease, t_tick, t_shard;
    uv_signal_t sig_term, sig_int;
    atomic_bool stopping;
    bool finished;

    rd_kafka_t *rk;

    pthread_mutex_t health_mu;
    bool down[DSP__BACKENDS];
    bool seen[DSP__BACKENDS]; /* worked at least once (readiness) */

    dsp_metrics met;
    dsp_api *api;

    dsp_conn loop_conn;
    HR_VEC(dsp_task *) tasks;
    uint64_t gen_next; /* dsp_task.gen of the next owned task */
    HR_VEC(dsp_report) reports;

    /* background job */
    uv_work_t bg_work;
    bool bg_busy;
    unsigned bg_want, bg_doing;
    dsp_conn bg_conn;
    dsp_scan_entry *scan;
    size_t nscan;
    int64_t sweep_after;  /* the sweeper's page cursor (task id) */
    int64_t retire_after; /* the retirement pass's cursor (task id) */
    HR_VEC(hr_task *) bg_claimed;

    /* reconciliation jobs (dsp_reconcile.c): the loop thread owns the
     * queue, fills a job's items before it starts and reads them in its
     * after-work callback; the job writes them in between. */
    dsp_rc_job rc[DSP_RECONCILE_JOBS];
    HR_VEC(dsp_rc_item) rc_queue;

    /* when an address sync last started (background job or reconciliation) */
    atomic_int_least64_t addr_synced_ms;
} dsp;

/* dsp_conn.c */
/* Connects what is missing unless in backoff; true when both are there. */
bool dsp_conn_ready(dsp *d, dsp_conn *conn);
/* A backend call failed: log the state change once, back off. */
void dsp_conn_failed(dsp *d, dsp_conn *conn, dsp_backend b, const char *err);
/* A backend call worked: log a recovery once. */
void dsp_health_ok(dsp *d, dsp_backend b);
void dsp_health_fail(dsp *d, dsp_backend b, const char *err);
void dsp_conn_close(dsp_conn *conn);
/* An integer reply's value, -1 for an error or any other type; frees
 * REPLY. */
int64_t dsp_reply_int(redisReply *reply);

/* dsp_store.c: the dispatcher's MySQL statements. */
/* Claims a scheduled task due by NOW_MS (+ DSP_DUE_EARLY_MS); one we
 * already claimed counts again (a retried claim whose reply was lost).
 * 1 = ours, 0 = not (any more) claimable, HR_STATE_BUSY = its row stayed
 * locked (subscriptions being inserted in an open transaction; the DB
 * poller tries again), -1. */
int dsp_store_claim(dsp *d, hr_mysql *m, int64_t id, int64_t now_ms, char *errstr, size_t errlen);
/* Claims the due tasks IDS[N] (sorted ascending) in one statement, as
 * dsp_store_claim each, and hands the rows of those that are ours now to
 * *OUT (*NOUT of them; dsp_store_tasks_free).  0, HR_STATE_BUSY (a row
 * stayed locked: nothing claimed, claim them one at a time), -1. */
int dsp_store_claim_batch(dsp *d, hr_mysql *m, const int64_t *ids, size_t n, int64_t now_ms,
                          hr_task ***out, size_t *nout, char *errstr, size_t errlen);
/* Which of the N tasks IDS are in STATE and claimed by this dispatcher
 * (MINE[i]).  0 or -1. */
int dsp_store_mine(dsp *d, hr_mysql *m, const int64_t *ids, size_t n, hr_task_state state,
                   bool *mine, char *errstr, size_t errlen);
/* Marks a task that is in state FROM failed with REASON; 1 = changed, 0, -1. */
int dsp_store_fail(hr_mysql *m, int64_t id, hr_task_state from, const char *reason, char *errstr,
                   size_t errlen);
/* The tasks of a query that selected HR_TASK_COLUMNS, or -1. */
int dsp_store_tasks(hr_mysql *m, const char *sql, const hr_mysql_param *p, size_t np,
                    hr_task ***out, size_t *n, char *errstr, size_t errlen);
void dsp_store_tasks_free(hr_task **tasks, size_t n);
/* Validates T; an invalid task is made failed from the state T was read
 * in (logged once).  true = valid. */
bool dsp_store_check(dsp *d, hr_mysql *m, const hr_task *t);
/* The task's effective rate limit. */
int64_t dsp_task_rate_limit(const dsp *d, const hr_task *t);

/* dsp_pace.c: finish-by pacing's gauges (loop thread) and admission control. */
/* herald_paced_tasks / herald_paced_rate from the owned tasks. */
void dsp_pace_gauges(dsp *d);
/* Estimates task T as of NOW on its channel (with M and R) and writes its
 * last_warning (NULL when nothing is to warn about); a task's first
 * warning is counted and logged.  0, or -1 on a backend error. */
int dsp_admit(dsp *d, hr_mysql *m, hr_redis *r, const hr_task *t, int64_t now, char *errstr,
              size_t errlen);

/* dsp_lease.c (loop thread): the owned tasks and their leases. */
/* The owned task ID (a task of one set, or a coordinator), or NULL. */
dsp_task *dsp_task_find(dsp *d, int64_t id);
/* Shard SHARD of task ID (HR_SHARD_NONE: as dsp_task_find; -2: any shard
 * of it that is not the coordinator), or NULL. */
dsp_task *dsp_task_find_shard(dsp *d, int64_t id, int shard);
/* Forgets owned task DT and frees it. */
void dsp_task_drop(dsp *d, dsp_task *dt);
/* Takes over a claimed task (T is only read); VIA is timer, poller,
 * takeover or adopt.  false when out of memory (the caller frees the
 * claim or lets its lease lapse). */
bool dsp_own(dsp *d, const hr_task *t, const char *via);
/* Chunks shard SHARD of T, claimed by dsp_shard.c; false when out of
 * memory (the caller ends the claim's lease). */
bool dsp_own_shard(dsp *d, const hr_task *t, int shard);
void dsp_renew_leases(dsp *d);
void dsp_tasks_free(dsp *d);

/* dsp_chunk.c (loop thread): chunker, produce, delivery reports. */
/* Produces chunk SEQ of shard SHARD of TASK (HR_SHARD_NONE: a task of one
 * set, no shard in the message). */
int dsp_produce(dsp *d, int64_t task, int shard, int64_t seq, int64_t count, int64_t due_ms,
                bool republish, char *errstr, size_t errlen);
void dsp_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque);
/* Reports, chunk rows and at most one chunk per owned task.  true when it
 * moved a chunk: more may be waiting, so the caller ticks again at once. */
bool dsp_tick(dsp *d);
/* At exit: serve reports, write them, mark finished tasks, release leases. */
void dsp_release_all(dsp *d);

/* dsp_ahead.c (loop thread, chunker): 1 when dispatcher.chunks_ahead of
 * owned task DT's pending chunks wait for a worker (move no more now), 0,
 * or -1 on a Redis error (ERRSTR). */
int dsp_ahead(dsp *d, const dsp_task *dt, char *errstr, size_t errlen);

/* dsp_report.c (loop thread): push_chunk rows of confirmed publishes. */
/* Queues the row of a confirmed publish (a full queue loses it, logged). */
void dsp_report_add(dsp *d, const dsp_report *rp);
/* Whether a report of shard SHARD (HR_SHARD_NONE: a task of one set) of
 * task ID waits for its row. */
bool dsp_report_queued(const dsp *d, int64_t id, int shard);
/* Writes a batch of queued rows (DSP_REPORTS_PER_TICK at most). */
void dsp_report_write(dsp *d);
/* At exit: writes batches until the queue is empty or MySQL fails. */
void dsp_report_flush(dsp *d);

/* dsp_timer.c: the Redis timer. */
/* Background job: puts T into the timer and mirrors control=run for
 * workers.  0 or -1. */
int dsp_timer_add(dsp *d, const hr_task *t);
/* Background job: takes the timer entries of the last scan's tasks that
 * this complete scan no longer returned (claimed, paused, cancelled,
 * failed, or postponed beyond the horizon) out of the timer: a stale entry
 * would pop at the old due time.  OLD and NEXT are sorted by id. */
void dsp_timer_forget(dsp *d, const dsp_scan_entry *old, size_t nold, const dsp_scan_entry *next,
                      size_t nnext);
/* Loop thread, t_timer's callback: pops the due entries, claims them, and
 * sleeps until the next one is due (timer_interval_ms at most). */
void dsp_timer_on(uv_timer_t *h);
/* Loop thread: pops the due entries now (a scan put entries in). */
void dsp_timer_wake(dsp *d);

/* dsp_shard.c: the shards of sharded tasks (docs/architecture.md). */
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

/* dsp_reconcile.c (loop thread) */
/* Queues the reconciliation of owned task DT (once) and marks it
 * reconciling; false when out of memory. */
bool dsp_reconcile_want(dsp *d, dsp_task *dt);
/* Whether a reconciliation job is running (shutdown waits for it). */
bool dsp_reconcile_busy(const dsp *d);
void dsp_reconcile_free(dsp *d);

/* dsp_wait.c: local-time sends and send windows. */
/* Reconciliation job: parks task ID's recipients in its wait set by
 * release instant, once (a local-time or windowed task; others untouched).
 * *PARKED gets how many.  0 or -1 (ERRSTR). */
int dsp_wait_plan(dsp_conn *conn, int64_t id, int64_t now, int64_t *parked, char *errstr,
                  size_t errlen);
/* Loop thread, chunker: puts off the waves of DT whose window closed, then
 * releases up to MAX due recipients from the wait set into subs.  The
 * number released, or -1 (ERRSTR); *NEXT_MS gets the earliest release
 * instant still waiting (-1 = none), *LEFT how many still wait. */
int64_t dsp_wait_release(dsp_conn *conn, const dsp_task *dt, int64_t now, int64_t max,
                         int64_t *next_ms, int64_t *left, char *errstr, size_t errlen);

/* dsp_addr.c (background job, reconciliation): the address sync on CONN's
 * connections; DUE_ONLY: only when DSP_ADDR_SYNC_MS passed since the last. */
void dsp_addr_sync(dsp *d, dsp_conn *conn, bool due_only);

/* dsp_jobs.c: the background job runner. */
/* Asks for background work WHAT (DSP_BG_*) and starts the job if idle. */
void dsp_jobs_kick(dsp *d, unsigned what);
void dsp_jobs_free(dsp *d);

/* dsp_scan.c (background job): scanner and prepare. */
void dsp_scan(dsp *d);
/* Reads the counts that decide whether the N TASKS need a prepare (E[i]:
 * the scanner's memory of task i's last count) into C[i], in two round
 * trips.  0 or -1 (logged). */
int dsp_prepare_count(dsp *d, hr_task *const *tasks, size_t n, const dsp_scan_entry *e, int64_t now,
                      dsp_prep_count *c);
/* Brings T's subscriber set up to date before the claim, after
 * dsp_prepare_count (C); E carries the scanner's memory of it.  A task
 * already due is not synced (its owner's reconciliation reads the rows).
 * 0 = prepared (or left to the owner's reconciliation), -1 = not
 * prepared (logged). */
int dsp_prepare(dsp *d, const hr_task *t, dsp_scan_entry *e, const dsp_prep_count *c);

/* dsp_poll.c (background job): the DB poller. */
void dsp_poll(dsp *d);

/* dsp_sweep.c (background job): sweeper and key retirement. */
void dsp_sweep(dsp *d);
/* Republishes task ID's (every shard's of its SHARDS) pending chunks last published at or before STALE
 * (ms) that no worker holds; *BUDGET bounds the work.  Returns the number
 * of pending chunks, or -1 on a Redis error. */
int64_t dsp_sweep_task(dsp *d, int64_t id, int shards, int64_t due_ms, int64_t now, int64_t stale,
                       int *budget);
/* Gives a finished task's Redis keys (subs, seq, pending, stats, ctl,
 * pulled, failed, prep, synced; every shard's of its SHARDS) the DSP_KEY_RETENTION_MS expiry, only where they
 * have none, so a later pass does not push it further out.  Chunk and
 * lease keys are the workers' and go when a chunk ends.  0 or -1 (ERRSTR). */
int dsp_retire_keys(dsp_conn *conn, int64_t id, int shards, char *errstr, size_t errlen);

/* dsp_control.c: drops every pending chunk of shard SHARD of task ID (0 for
 * a task of one set) no live worker holds, counting its recipients as
 * OUTCOME (hr_finish_drop): adds the count to *DROPPED, raises *TOTAL to
 * the shard's stats hash counter, sets *HELD when a worker held one (that
 * worker drops it).  Used by cancel and by the chunker at expire_at.  0 or
 * -1. */
int dsp_drop_chunks(dsp_conn *conn, int64_t id, int shard, hr_outcome outcome, int64_t *dropped,
                    int64_t *total, bool *held, char *errstr, size_t errlen);

/* dsp_metrics.c */
int dsp_metrics_new(dsp *d, char *errstr, size_t errlen);
void dsp_metrics_free(dsp *d);
/* Sets herald_tasks{state} from a "state, count" result (every state not
 * in it becomes 0). */
void dsp_metrics_tasks(dsp *d, const hr_mysql_rows *rows);

/* dsp_control.c (background job): pause / resume / cancel transitions. */
void dsp_control_scan(dsp *d);

/* dsp_api.c: the HTTP server (metrics, probes, /v1 API). */
int dsp_api_start(dsp *d, char *errstr, size_t errlen);
void dsp_api_stop(dsp *d);
/* Prints the API's route table, "METHOD PATTERN" a line (GET routes answer
 * HEAD too), on OUT: what `herald-dispatcher --print-routes` shows and the
 * OpenAPI test compares with schemas/openapi.yaml.  0, or -1 out of memory. */
int dsp_api_print_routes(FILE *out);

/* dsp_kafka.c: the producer (with its delivery report and error callbacks). */
int dsp_producer_new(dsp *d, char *errstr, size_t errlen);

/* dispatcher.c */
/* Runs the dispatcher until SIGTERM/SIGINT; the exit code for main. */
int dsp_run(const hr_config *cfg);

#endif
