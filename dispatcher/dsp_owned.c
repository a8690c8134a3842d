/* dsp_owned: the tasks this dispatcher owns and the shards it claimed
 * (d->owned, loop thread) and their leases (DESIGN.md "Ownership and
 * leases").
 *
 * - The table: every entry in one array (walked by the chunker, each
 *   entry knowing its position, so a drop moves the last one into its
 *   place) and a hash index by task id whose buckets chain the entries of
 *   the ids that hash there (a task's coordinator and the shards of it we
 *   chunk share an id).  The index doubles when the entries outnumber its
 *   buckets.  Before, every delivery report, reconciliation outcome and
 *   renewal row looked its entry up with a walk over the whole array.
 * - Owning: a claimed task (timer pop, poller, takeover, adoption) joins
 *   with a new generation, copied into its messages, so the delivery
 *   reports of an earlier ownership of the same task do not count against
 *   the current one's outstanding chunks.  A shard of a sharded task
 *   claimed by dsp_shard.c is an entry of its own (dsp_task.shard).
 * - Leases: one renewal routine for both kinds of lease (dsp_owned_lease):
 *   every lease_s/3 the leases are pushed out in one statement and the
 *   rows we hold read back; an entry whose row is gone is lost, one whose
 *   row no longer runs is stopped, either is dropped at once.  A running
 *   task row that names us but has no entry (a claim whose reply or load
 *   failed) is adopted, or its lease is ended so another dispatcher takes
 *   it. */
#include "dsp_owned.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_conn.h"
#include "dsp_store.h"
#include "hr_clock.h"
#include "hr_log.h"
#include "hr_state.h"

#define DSP_OWNED_BUCKETS_MIN 64 /* a power of two */

struct dsp_owned {
    HR_VEC(dsp_task *) all;
    dsp_task **buckets; /* nbuckets chains by id */
    size_t nbuckets;
    size_t nshards;    /* entries that are claimed shards */
    uint64_t gen_next; /* dsp_task.gen of the next entry */
    uint64_t renewals; /* dsp_task.renewed of the last renewal */
    int stray_waits;   /* task renewals in a row that held strays back */
};

/* A task row of ours with no entry, seen while the background job runs, may
 * be that run's claim (its takeover or poller claim joins the table only
 * when the run ends): adopted then, the task's ownership started twice, the
 * run's entry replacing the adopted one (task_owned_anew).  Such a row
 * waits for a renewal outside a run, at most this many in a row: a claim
 * that was really lost is adopted one lease_s later at most. */
#define DSP_OWNED_STRAY_WAITS 3

static size_t dsp_owned_bucket(const dsp_owned *owned, int64_t id)
{
    /* Fibonacci hashing: ids are dense and ascending, the top bits mix them. */
    return (size_t)(((uint64_t)id * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & (owned->nbuckets - 1);
}

int dsp_owned_new(dsp *d)
{
    dsp_owned *owned = calloc(1, sizeof *owned);

    if (owned == NULL ||
        (owned->buckets = calloc(DSP_OWNED_BUCKETS_MIN, sizeof *owned->buckets)) == NULL) {
        free(owned);
        return -1;
    }
    owned->nbuckets = DSP_OWNED_BUCKETS_MIN;
    d->owned = owned;
    return 0;
}

void dsp_owned_free(dsp *d)
{
    dsp_owned *owned = d->owned;

    if (owned == NULL)
        return;
    for (size_t i = 0; i < owned->all.n; i++)
        free(owned->all.v[i]);
    hr_vec_free(&owned->all);
    free(owned->buckets);
    free(owned);
    d->owned = NULL;
}

dsp_task *dsp_owned_find(dsp *d, int64_t id, int shard)
{
    dsp_task *dt = d->owned->buckets[dsp_owned_bucket(d->owned, id)];

    while (dt != NULL && (dt->id != id || dt->shard != shard))
        dt = dt->next_id;
    return dt;
}

bool dsp_owned_has_shard(dsp *d, int64_t id)
{
    dsp_task *dt = d->owned->buckets[dsp_owned_bucket(d->owned, id)];

    while (dt != NULL && (dt->id != id || dt->shard == HR_SHARD_NONE))
        dt = dt->next_id;
    return dt != NULL;
}

size_t dsp_owned_count(const dsp *d)
{
    return d->owned->all.n;
}

dsp_task *dsp_owned_at(dsp *d, size_t i)
{
    return d->owned->all.v[i];
}

bool dsp_owned_any_shard(const dsp *d)
{
    return d->owned->nshards > 0;
}

/* Room for one more entry: the array, and the index doubled (rehashed)
 * when the entries would outnumber its buckets.  0, or -1. */
static int dsp_owned_reserve(dsp_owned *owned)
{
    dsp_task **buckets;
    size_t nbuckets = owned->nbuckets;

    if (hr_vec_reserve(&owned->all, owned->all.n + 1) != 0)
        return -1;
    if (owned->all.n + 1 <= nbuckets)
        return 0;
    buckets = calloc(nbuckets * 2, sizeof *buckets);
    if (buckets == NULL)
        return -1;
    free(owned->buckets);
    owned->buckets = buckets;
    owned->nbuckets = nbuckets * 2;
    for (size_t i = 0; i < owned->all.n; i++) {
        dsp_task *dt = owned->all.v[i];
        size_t b = dsp_owned_bucket(owned, dt->id);

        dt->next_id = owned->buckets[b];
        owned->buckets[b] = dt;
    }
    return 0;
}

/* A new entry for shard SHARD of T (HR_SHARD_NONE: T itself), or NULL when
 * out of memory. */
static dsp_task *dsp_owned_insert(dsp *d, const hr_task *t, int shard)
{
    dsp_owned *owned = d->owned;
    const hr_channel *ch;
    dsp_task *dt;
    size_t b;

    /* Room first: once made, the insert below cannot fail. */
    if (dsp_owned_reserve(owned) != 0)
        return NULL;
    dt = calloc(1, sizeof *dt);
    if (dt == NULL)
        return NULL;
    dt->id = t->id;
    dt->shards = t->shards > 1 ? (int)t->shards : 1;
    dt->shard = shard;
    dt->due_ms = t->due_ms;
    dt->chunk_size = t->chunk_size;
    ch = hr_config_channel(d->cfg, t->channel);
    dt->addressed = ch == NULL || ch->type != HR_CHANNEL_WEBHOOK;
    dt->rate_limit = dsp_store_rate_limit(d, t);
    dt->cap = dt->rate_limit;
    dt->finish_ms = hr_task_paced(t) ? t->finish_ms : -1;
    dt->expire_ms = t->expire_ms;
    dt->gen = ++owned->gen_next;
    dt->waits = hr_task_waits(t);
    dt->leads = hr_task_leads(t);
    dt->ab = t->ab_sample_pct > 0;
    dt->ab_wait_s = t->ab_wait_s;
    dt->window = t->window;
    dt->window_start_s = t->window_start_s;
    dt->window_end_s = t->window_end_s;
    snprintf(dt->window_tz, sizeof dt->window_tz, "%s", t->window_tz != NULL ? t->window_tz : "");
    b = dsp_owned_bucket(owned, dt->id);
    dt->next_id = owned->buckets[b];
    owned->buckets[b] = dt;
    dt->at = owned->all.n;
    owned->all.v[owned->all.n++] = dt;
    if (shard != HR_SHARD_NONE)
        owned->nshards++;
    return dt;
}

void dsp_owned_drop(dsp *d, dsp_task *dt)
{
    dsp_owned *owned = d->owned;
    dsp_task **link = &owned->buckets[dsp_owned_bucket(owned, dt->id)];

    while (*link != NULL && *link != dt)
        link = &(*link)->next_id;
    if (*link == NULL)
        return; /* not ours */
    *link = dt->next_id;
    owned->all.v[dt->at] = owned->all.v[--owned->all.n];
    owned->all.v[dt->at]->at = dt->at;
    if (dt->shard != HR_SHARD_NONE)
        owned->nshards--;
    free(dt);
    dsp_owned_gauges(d);
}

bool dsp_owned_add_shard(dsp *d, const hr_task *t, int shard)
{
    dsp_task *dt;

    if (dsp_owned_find(d, t->id, shard) != NULL)
        return true;
    dt = dsp_owned_insert(d, t, shard);
    if (dt == NULL) {
        hr_log_error("shard_not_owned", "task=%" PRId64 " shard=%d error=out of memory", t->id,
                     shard);
        return false;
    }
    /* The coordinator's reconciliation wrote the rows after every seq
     * existed: a claimable shard is complete. */
    dt->started = true;
    hr_log_info("shard_claimed", "task=%" PRId64 " shard=%d shards=%d", t->id, shard, dt->shards);
    return true;
}

bool dsp_owned_add(dsp *d, const hr_task *t, const char *via)
{
    bool fresh = strcmp(via, "timer") == 0 || strcmp(via, "poller") == 0;
    dsp_task *dt = dsp_owned_find(d, t->id, HR_SHARD_NONE);

    if (dt != NULL) {
        /* T is as the takeover read it: an owner other than us (none after a
         * resume) means the entry's ownership ended, though no lease tick
         * dropped it yet (a pause, a recover and a resume within lease_s/3).
         * Its plan (lead and local-time waves, A/B holds) and its
         * reconciliation are of a set a recover may have rebuilt since:
         * kept, the recipients put back into subs went out at the entry's
         * next release, later waves' with the first.  So a new ownership
         * starts, as on another dispatcher.  Any other claim of a task we
         * own (a retried one) keeps the entry. */
        if (strcmp(via, "takeover") != 0 ||
            (t->claimed_by != NULL && strcmp(t->claimed_by, d->owner) == 0))
            return true;
        hr_log_info("task_owned_anew", "task=%" PRId64 " reason=taken over from %s", t->id,
                    t->claimed_by != NULL ? t->claimed_by : "no owner");
        dsp_owned_drop(d, dt);
    }
    dt = dsp_owned_insert(d, t, HR_SHARD_NONE);
    if (dt == NULL)
        goto oom;
    hr_metrics_inc(strcmp(via, "timer") == 0    ? d->met.claimed_timer
                   : strcmp(via, "poller") == 0 ? d->met.claimed_poller
                                                : d->met.claimed_takeover);
    if (fresh) /* a takeover's or adoption's lag is not a claim's */
        hr_metrics_observe(d->met.claim_lag,
                           (double)(hr_clock_now_ms() - hr_task_first_due_ms(t)) / 1000.0);
    hr_log_info("task_claimed",
                "task=%" PRId64 " via=%s lag_ms=%" PRId64 " rate_limit=%" PRId64 " shards=%d",
                t->id, via, (hr_clock_now_ms() - hr_task_first_due_ms(t)), dt->rate_limit,
                dt->shards);
    return true;
oom:
    hr_log_error("task_not_owned", "task=%" PRId64 " error=out of memory", t->id);
    return false;
}

bool dsp_owned_renew(dsp *d, const dsp_owned_lease *lease, bool hold_strays)
{
    dsp_owned *owned = d->owned;
    dsp_conn *conn = &d->loop_conn;
    const hr_mysql_param pr[] = {HR_P_I64(d->cfg->dispatcher.lease_s), HR_P_STR(d->owner)};
    const hr_mysql_param ps[] = {HR_P_STR(d->owner)};
    hr_mysql_rows *rows = NULL;
    uint64_t round = ++owned->renewals;
    char err[512];
    size_t i, j;
    bool held = false;

    if (!dsp_conn_ready(d, conn))
        return false;
    if (hr_mysql_exec(conn->m, lease->renew_sql, pr, 2, NULL, NULL, NULL, err, sizeof err) < 0 ||
        hr_mysql_query(conn->m, lease->read_sql, ps, 1, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return false;
    }
    /* The rows we hold: their entries are renewed, or stopped. */
    for (j = 0; j < rows->nrows; j++) {
        const char *shard = hr_mysql_cell(rows, j, 1), *running = hr_mysql_cell(rows, j, 2);
        dsp_task *dt = dsp_owned_find(d, strtoll(hr_mysql_cell(rows, j, 0), NULL, 10),
                                      shard != NULL ? atoi(shard) : HR_SHARD_NONE);

        if (dt == NULL)
            continue;
        dt->renewed = round;
        if (running == NULL || strcmp(running, "1") != 0) {
            lease->stopped(d, dt, rows, j);
            dsp_owned_drop(d, dt);
        }
    }
    /* The entries of this kind no row held. */
    for (i = owned->all.n; i-- > 0;) {
        dsp_task *dt = owned->all.v[i];

        if ((dt->shard != HR_SHARD_NONE) != lease->shards || dt->renewed == round)
            continue;
        lease->lost(d, dt);
        dsp_owned_drop(d, dt);
    }
    for (j = 0; lease->stray != NULL && j < rows->nrows; j++) {
        const char *shard = hr_mysql_cell(rows, j, 1), *running = hr_mysql_cell(rows, j, 2);

        if (running == NULL || strcmp(running, "1") != 0 ||
            dsp_owned_find(d, strtoll(hr_mysql_cell(rows, j, 0), NULL, 10),
                           shard != NULL ? atoi(shard) : HR_SHARD_NONE) != NULL)
            continue;
        if (hold_strays) {
            held = true;
            break;
        }
        lease->stray(d, rows, j);
    }
    hr_mysql_rows_free(rows);
    return held;
}

static void dsp_owned_task_lost(dsp *d, const dsp_task *dt)
{
    (void)d;
    hr_log_warn("task_lost", "task=%" PRId64 " reason=lease taken over", dt->id);
}

/* Pause and cancel are carried out by workers and heraldctl; the
 * dispatcher stops chunking and mirrors the wish.  An unknown control stops
 * chunking too, with nothing to mirror. */
static void dsp_owned_task_stopped(dsp *d, const dsp_task *dt, const hr_mysql_rows *rows,
                                   size_t row)
{
    const char *control = hr_mysql_cell(rows, row, 3);
    hr_control wish = HR_CONTROL__COUNT; /* a name this binary does not know */
    char err[512];

    if (control != NULL && hr_control_parse(control, &wish) == 0 &&
        hr_task_set_control(NULL, d->loop_conn.r, dt->id, wish, err, sizeof err) < 0)
        dsp_health_fail(d, DSP_REDIS, err);
    hr_log_info("task_stopped", "task=%" PRId64 " control=%s", dt->id,
                control != NULL ? control : "");
}

/* A task claimed under our name that we do not chunk (its claim's reply or
 * load failed, or dsp_owned_add ran out of memory): own it now, or give the
 * claim up at once so that a poller takes it over.  Without this the
 * renewal would keep it ours, unchunked, forever. */
static void dsp_owned_adopt(dsp *d, const hr_mysql_rows *rows, size_t row)
{
    dsp_conn *conn = &d->loop_conn;
    int64_t id = strtoll(hr_mysql_cell(rows, row, 0), NULL, 10);
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_STR(d->owner)};
    hr_task *t = NULL;
    char err[512];

    /* Validated first: the check after its claim may have failed on MySQL,
     * and a bad row is made failed here instead of chunked. */
    if (hr_task_load(conn->m, id, &t, err, sizeof err) == 0 &&
        (!dsp_store_check(d, conn->m, t) || dsp_owned_add(d, t, "adopt"))) {
        hr_task_free(t);
        return;
    }
    hr_task_free(t);
    hr_log_warn("task_released", "task=%" PRId64 " reason=claimed but not owned", id);
    if (hr_mysql_exec(conn->m,
                      "UPDATE push_task SET lease_until = UTC_TIMESTAMP(3) "
                      "WHERE id = ? AND claimed_by = ? AND state = 'dispatching'",
                      p, 2, NULL, NULL, NULL, err, sizeof err) < 0)
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
}

/* The leases of the tasks and coordinators: their push_task rows. */
static const dsp_owned_lease dsp_owned_tasks = {
    .renew_sql = "UPDATE push_task SET lease_until = UTC_TIMESTAMP(3) + INTERVAL ? SECOND "
                 "WHERE claimed_by = ? AND state = 'dispatching' AND control = 'run'",
    .read_sql = "SELECT id, NULL, control = 'run', control FROM push_task "
                "WHERE claimed_by = ? AND state = 'dispatching'",
    .shards = false,
    .lost = dsp_owned_task_lost,
    .stopped = dsp_owned_task_stopped,
    .stray = dsp_owned_adopt,
};

void dsp_owned_renew_tasks(dsp *d, bool claiming)
{
    dsp_owned *owned = d->owned;
    bool hold = claiming && owned->stray_waits < DSP_OWNED_STRAY_WAITS;

    owned->stray_waits = dsp_owned_renew(d, &dsp_owned_tasks, hold) ? owned->stray_waits + 1 : 0;
}

void dsp_owned_gauges(dsp *d)
{
    double rate = 0, tasks = 0;

    for (size_t i = 0; i < d->owned->all.n; i++) {
        const dsp_task *dt = d->owned->all.v[i];

        if (dt->finish_ms <= 0)
            continue;
        tasks++;
        rate += (double)dt->rate_limit;
    }
    hr_metrics_set(d->met.paced_tasks, tasks);
    hr_metrics_set(d->met.paced_rate, rate);
}
