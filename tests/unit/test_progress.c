/* test_progress: hr_progress, and a property test of the counters it reads.
 *
 * The model keeps one task's recipients and counters the way the code
 * updates them: chunk_move.lua (subs -> chunk), the first publish of a
 * chunk (stats.published and push_task.total += size, dsp_chunk.c), ack /
 * throttle / dead_letter.lua (chunk -> outcome), retries (no outcome),
 * pull_ack.lua (subs -> pulled), redrive (redrive.lua and cmd_redrive.c:
 * failed hash -> new chunk, failed, published and total -= moved, their
 * delivery log rows deleted), recover (cmd_recover.c: Redis loses subs and
 * chunks, maybe the stats hash; subs
 * rebuilt from the subscriptions minus the delivery log and pulled; total
 * and stats.published restart from the log), pause/resume, cancel
 * (drop_set.lua), expiry (drop_set.lua: the chunker drops subs and the
 * chunks no worker holds, a worker the rest of a chunk it holds; nothing is
 * chunked after it, recover refuses) and the reporter (MySQL =
 * GREATEST(MySQL, stats), delivery log rows).  For random sequences of those, at every
 * step: done <= total, ratio in [0, 1], nothing counted twice, each
 * recipient published at most once; at the end: the outcomes sum to the
 * subscriptions and the ratio is exactly 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hr_progress.h"

#define PM_MAX_UIDS 64
#define PM_RUNS 3000
#define PM_STEPS 200

enum { PM_SUBS, PM_CHUNK, PM_DEAD, PM_SETTLED };
/* In hr_outcome's order; the model never settles a recipient unregistered. */
enum {
    PM_ST_SENT,
    PM_ST_FAILED,
    PM_ST_THROTTLED,
    PM_ST_PULLED,
    PM_ST_CANCELLED,
    PM_ST_UNREGISTERED,
    PM_ST_EXPIRED,
    PM__ST
};

typedef struct pm_model {
    int n;                    /* subscriptions */
    int where[PM_MAX_UIDS];   /* PM_SUBS, PM_CHUNK, PM_DEAD (failed hash), PM_SETTLED */
    int chunk[PM_MAX_UIDS];   /* the chunk of a PM_CHUNK uid */
    int outcome[PM_MAX_UIDS]; /* PM_ST_* of a settled or dead uid */
    int logged[PM_MAX_UIDS];  /* delivery log: -1 or PM_ST_* */
    int pubs[PM_MAX_UIDS];    /* how often the uid was counted in published (net) */
    bool chunk_published[PM_MAX_UIDS * 4];
    int nchunks;
    int64_t stats[PM__ST], mysql[PM__ST];
    int64_t stats_published, mysql_total;
    bool paused, cancelled, expired;
    uint64_t rng;
} pm_model;

static unsigned pm_rand(pm_model *m, unsigned n)
{
    m->rng = m->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)((m->rng >> 33) % n);
}

/* The settled outcomes as hr_progress reads them. */
static void pm_progress(const pm_model *m, bool finished, int64_t subscriptions, hr_progress *pr)
{
    hr_progress_in in = {.subscriptions = subscriptions,
                         .published = hr_progress_merge(m->mysql_total, m->stats_published),
                         .subs_left = 0,
                         .finished = finished};
    int i;

    for (i = 0; i < m->n; i++)
        in.subs_left += m->where[i] == PM_SUBS;
    for (i = 0; i < PM__ST; i++)
        in.outcome[i] = hr_progress_merge(m->mysql[i], m->stats[i]);
    hr_progress_compute(&in, pr);
}

static void pm_check(const pm_model *m, bool finished)
{
    hr_progress pr, fallback;
    int i;

    pm_progress(m, finished, m->n, &pr);
    pm_progress(m, finished, -1, &fallback);
    assert_true(pr.done <= pr.total);
    assert_int_equal(pr.total, m->n);
    assert_int_equal(pr.over, 0);
    assert_true(pr.ratio >= 0 && pr.ratio <= 1);
    assert_true(fallback.done <= fallback.total);
    assert_true(fallback.ratio >= 0 && fallback.ratio <= 1);
    /* No recipient is in published more than once (the redrive and recover
     * inflation), and MySQL's total never runs ahead of the truth. */
    for (i = 0; i < m->n; i++)
        assert_true(m->pubs[i] == 0 || m->pubs[i] == 1);
    assert_true(m->stats_published <= m->n && m->mysql_total <= m->n);
}

static void pm_settle(pm_model *m, int uid, int st)
{
    m->where[uid] = st == PM_ST_FAILED ? PM_DEAD : PM_SETTLED;
    m->outcome[uid] = st;
    m->stats[st]++;
}

static void pm_report(pm_model *m)
{
    int i;

    for (i = 0; i < PM_ST_PULLED; i++) /* sent, failed, throttled: GREATEST */
        if (m->stats[i] > m->mysql[i])
            m->mysql[i] = m->stats[i];
    if (m->stats[PM_ST_EXPIRED] > m->mysql[PM_ST_EXPIRED]) /* the workers' expired */
        m->mysql[PM_ST_EXPIRED] = m->stats[PM_ST_EXPIRED];
    for (i = 0; i < m->n; i++)
        if (m->where[i] == PM_SETTLED || m->where[i] == PM_DEAD)
            m->logged[i] = m->outcome[i];
}

static int pm_new_chunk(pm_model *m)
{
    assert_true(m->nchunks < PM_MAX_UIDS * 4);
    m->chunk_published[m->nchunks] = false;
    return m->nchunks++;
}

static void pm_publish(pm_model *m, int c)
{
    int i, size = 0;

    if (m->chunk_published[c])
        return; /* a republish (sweeper, resume) adds nothing */
    m->chunk_published[c] = true;
    for (i = 0; i < m->n; i++)
        if (m->where[i] == PM_CHUNK && m->chunk[i] == c) {
            size++;
            m->pubs[i]++;
        }
    m->stats_published += size;
    m->mysql_total += size;
}

static void pm_chunk(pm_model *m, int max)
{
    int c = pm_new_chunk(m), i, moved = 0;

    for (i = 0; i < m->n && moved < max; i++)
        if (m->where[i] == PM_SUBS) {
            m->where[i] = PM_CHUNK;
            m->chunk[i] = c;
            moved++;
        }
}

/* A random uid at WHERE (and, for PM_CHUNK, in a published chunk); -1. */
static int pm_pick(pm_model *m, int where)
{
    int start = (int)pm_rand(m, (unsigned)m->n), k;

    for (k = 0; k < m->n; k++) {
        int i = (start + k) % m->n;
        if (m->where[i] == where && (where != PM_CHUNK || m->chunk_published[m->chunk[i]]))
            return i;
    }
    return -1;
}

static void pm_redrive(pm_model *m)
{
    int c = pm_new_chunk(m), i, moved = 0;

    for (i = 0; i < m->n; i++)
        if (m->where[i] == PM_DEAD) {
            m->where[i] = PM_CHUNK;
            m->chunk[i] = c;
            m->pubs[i]--;
            m->logged[i] = -1; /* cmd_redrive.c drops the 'failed' log row */
            moved++;
        }
    m->stats[PM_ST_FAILED] -= moved;
    m->stats_published -= moved;
    m->mysql[PM_ST_FAILED] = m->mysql[PM_ST_FAILED] > moved ? m->mysql[PM_ST_FAILED] - moved : 0;
    m->mysql_total = m->mysql_total > moved ? m->mysql_total - moved : 0;
}

static void pm_recover(pm_model *m, bool stats_lost)
{
    int i;

    /* recover runs on a paused or dispatched task whose workers reported. */
    pm_report(m);
    if (stats_lost) {
        memset(m->stats, 0, sizeof m->stats);
        m->stats_published = 0;
    }
    m->mysql_total = 0;
    for (i = 0; i < m->n; i++) {
        if (m->logged[i] == PM_ST_SENT || m->logged[i] == PM_ST_FAILED ||
            m->logged[i] == PM_ST_THROTTLED) {
            m->mysql_total++;
            m->pubs[i] = 1;
        } else {
            m->pubs[i] = 0;
        }
        if (m->where[i] == PM_CHUNK) {
            /* The lost chunk's members come back with the refill, which
             * skips what the log shows delivered: a chunk member must not
             * be in the log, or it would be lost for good. */
            assert_int_equal(m->logged[i], -1);
            m->where[i] = PM_SUBS;
        }
    }
    m->stats_published = m->mysql_total;
    for (i = 0; i < PM__ST; i++) /* recover_restore_stats */
        if (m->stats[i] < m->mysql[i])
            m->stats[i] = m->mysql[i];
}

static void pm_cancel(pm_model *m)
{
    int i, n = 0;

    for (i = 0; i < m->n; i++)
        if (m->where[i] == PM_SUBS || m->where[i] == PM_CHUNK) {
            m->where[i] = PM_SETTLED;
            m->outcome[i] = PM_ST_CANCELLED;
            n++;
        }
    m->stats[PM_ST_CANCELLED] += n;
    m->mysql[PM_ST_CANCELLED] += n;
    m->cancelled = true;
}

/* drop_set.lua with 'expired' on uids at WHERE (PM_SUBS: the chunker's
 * drop of subs; PM_CHUNK: chunk C, or every chunk when C < 0 and then only
 * those no worker holds, decided at random).  The stats hash counts them;
 * the dropper raises MySQL to it (hr_finish_count) or the reporter does. */
static void pm_expire(pm_model *m, int where, int c)
{
    int i;
    bool held[PM_MAX_UIDS * 4];

    for (i = 0; i < m->nchunks; i++)
        held[i] = c < 0 && pm_rand(m, 3) == 0;
    for (i = 0; i < m->n; i++)
        if (m->where[i] == where &&
            (where != PM_CHUNK || (c < 0 ? !held[m->chunk[i]] : m->chunk[i] == c))) {
            m->where[i] = PM_SETTLED;
            m->outcome[i] = PM_ST_EXPIRED;
            m->stats[PM_ST_EXPIRED]++;
        }
    if (c < 0 && m->stats[PM_ST_EXPIRED] > m->mysql[PM_ST_EXPIRED])
        m->mysql[PM_ST_EXPIRED] = m->stats[PM_ST_EXPIRED];
}

static void pm_step(pm_model *m)
{
    int uid, i;

    switch (pm_rand(m, 14)) {
    case 0:
        if (m->expired) /* past expire_at the chunker drops subs instead */
            pm_expire(m, PM_SUBS, -1);
        else if (!m->paused)
            pm_chunk(m, 1 + (int)pm_rand(m, 8));
        break;
    case 1:
        for (i = 0; i < m->nchunks; i++)
            if (!m->paused && pm_rand(m, 2) == 0)
                pm_publish(m, i);
        break;
    case 2:
    case 3: /* an ack */
        if (!m->paused && (uid = pm_pick(m, PM_CHUNK)) >= 0)
            pm_settle(m, uid, PM_ST_SENT);
        break;
    case 4: /* a retry: attempts, no outcome */
        break;
    case 5:
        if (!m->paused && (uid = pm_pick(m, PM_CHUNK)) >= 0)
            pm_settle(m, uid, pm_rand(m, 2) ? PM_ST_FAILED : PM_ST_THROTTLED);
        break;
    case 6:
        if ((uid = pm_pick(m, PM_SUBS)) >= 0) {
            m->where[uid] = PM_SETTLED;
            m->outcome[uid] = PM_ST_PULLED;
            m->stats[PM_ST_PULLED]++;
            m->mysql[PM_ST_PULLED]++; /* the API writes MySQL at once */
        }
        break;
    case 7:
        pm_redrive(m);
        break;
    case 8: /* recover refuses a task past its expire_at */
        if (pm_rand(m, 4) == 0 && !m->expired)
            pm_recover(m, pm_rand(m, 2) == 0);
        break;
    case 9:
        m->paused = !m->paused;
        break;
    case 10:
        if (pm_rand(m, 20) == 0)
            pm_cancel(m);
        break;
    case 11:
        pm_report(m);
        break;
    case 12: /* expire_at passes; the chunker's first pass after it */
        if (pm_rand(m, 20) == 0 && !m->expired) {
            m->expired = true;
            if (!m->paused) {
                pm_expire(m, PM_SUBS, -1);
                pm_expire(m, PM_CHUNK, -1);
            }
        }
        break;
    case 13: /* a worker past expire_at expires the rest of a chunk it holds
              * (in-flight requests still answer: acks go on meanwhile) */
        if (m->expired && (uid = pm_pick(m, PM_CHUNK)) >= 0)
            pm_expire(m, PM_CHUNK, m->chunk[uid]);
        break;
    }
}

/* Runs the task to its end: everything left is chunked, published and
 * pushed (sent or failed), or it was cancelled, or it expired (the
 * chunker's drop, then the workers' of the chunks they held). */
static void pm_finish(pm_model *m)
{
    int i, uid, rounds;

    m->paused = false;
    if (m->expired) {
        pm_expire(m, PM_SUBS, -1);
        pm_expire(m, PM_CHUNK, -1);
        while ((uid = pm_pick(m, PM_CHUNK)) >= 0)
            pm_expire(m, PM_CHUNK, m->chunk[uid]);
        for (i = 0; i < m->n; i++) /* the redriven chunks too, published or not */
            if (m->where[i] == PM_CHUNK)
                pm_expire(m, PM_CHUNK, m->chunk[i]);
    }
    for (rounds = 0; rounds < 4 * PM_MAX_UIDS && !m->cancelled; rounds++) {
        pm_chunk(m, PM_MAX_UIDS);
        for (i = 0; i < m->nchunks; i++)
            pm_publish(m, i);
        while ((uid = pm_pick(m, PM_CHUNK)) >= 0)
            pm_settle(m, uid, pm_rand(m, 5) ? PM_ST_SENT : PM_ST_FAILED);
        if (pm_pick(m, PM_SUBS) < 0)
            break;
    }
    pm_report(m);
}

static void test_property(void **state)
{
    int run, step, i;

    (void)state;
    for (run = 0; run < PM_RUNS; run++) {
        pm_model m;
        hr_progress pr, fallback;
        int64_t sum = 0;

        memset(&m, 0, sizeof m);
        m.rng = (uint64_t)run * 2654435761u + 1;
        m.n = 1 + (int)pm_rand(&m, PM_MAX_UIDS);
        for (i = 0; i < m.n; i++)
            m.logged[i] = -1;
        for (step = 0; step < PM_STEPS && !m.cancelled; step++) {
            pm_step(&m);
            pm_check(&m, m.cancelled);
        }
        pm_finish(&m);
        pm_check(&m, true);
        pm_progress(&m, true, m.n, &pr);
        for (i = 0; i < HR_OUTCOME_UNACCOUNTED; i++)
            sum += pr.outcome[i];
        assert_int_equal(sum, m.n);
        assert_int_equal(pr.outcome[HR_OUTCOME_UNACCOUNTED], 0);
        assert_int_equal(pr.done, pr.total);
        assert_true(pr.ratio == 1.0);
        /* Without the subscriptions the published count must also add up:
         * every recipient published once, pulled or cancelled. */
        pm_progress(&m, true, -1, &fallback);
        assert_true(fallback.ratio == 1.0);
        if (m.stats[PM_ST_CANCELLED] == 0 && m.stats[PM_ST_EXPIRED] == 0) {
            assert_int_equal(fallback.total, m.n);
            assert_int_equal(fallback.outcome[HR_OUTCOME_UNACCOUNTED], 0);
        }
    }
}

/* The operator's reports of the issue, as hr_progress answers them. */
static void test_cases(void **state)
{
    hr_progress pr;
    /* cancelled while scheduled: 777 subscriptions, all cancelled from subs */
    hr_progress_in in = {.outcome = {[HR_OUTCOME_CANCELLED] = 777},
                         .subscriptions = 777,
                         .subs_left = 0,
                         .finished = true};

    (void)state;
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.done, 777);
    assert_int_equal(pr.total, 777);
    assert_true(pr.ratio == 1.0);
    /* cancelled mid-run: 16,000 published and settled, 14,000 cancelled from subs */
    in = (hr_progress_in){.outcome = {[HR_OUTCOME_SENT] = 16000, [HR_OUTCOME_CANCELLED] = 14000},
                          .subscriptions = 30000,
                          .published = 16000,
                          .finished = true};
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.done, 30000);
    assert_int_equal(pr.total, 30000);
    assert_true(pr.ratio == 1.0);
    /* a running task */
    in = (hr_progress_in){.outcome = {[HR_OUTCOME_SENT] = 250, [HR_OUTCOME_FAILED] = 50},
                          .subscriptions = 1200,
                          .published = 500,
                          .subs_left = 700};
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.done, 300);
    assert_int_equal(pr.total, 1200);
    assert_true(pr.ratio == 0.25);
    /* a finished task with recipients no counter settled: unaccounted */
    in = (hr_progress_in){
        .outcome = {[HR_OUTCOME_SENT] = 90}, .subscriptions = 100, .finished = true};
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.outcome[HR_OUTCOME_UNACCOUNTED], 10);
    assert_int_equal(pr.done, 100);
    assert_true(pr.ratio == 1.0);
    /* counted twice: done is capped by nothing, total grows, over says it */
    in = (hr_progress_in){.outcome = {[HR_OUTCOME_SENT] = 110}, .subscriptions = 100};
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.over, 10);
    assert_true(pr.done <= pr.total && pr.ratio == 1.0);
    /* no subscriptions known, nothing yet */
    in = (hr_progress_in){.subscriptions = -1, .subs_left = -1};
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.total, 0);
    assert_true(pr.ratio == 0);
    assert_string_equal(hr_progress_outcome_name(HR_OUTCOME_PULLED), "pulled");
    assert_string_equal(hr_progress_outcome_name(HR_OUTCOME_UNREGISTERED), "unregistered");
    /* unregistered recipients are settled like the others */
    in = (hr_progress_in){.outcome = {[HR_OUTCOME_SENT] = 7, [HR_OUTCOME_UNREGISTERED] = 3},
                          .subscriptions = 10,
                          .finished = true};
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.done, 10);
    assert_int_equal(pr.outcome[HR_OUTCOME_UNACCOUNTED], 0);
    /* expired mid-campaign: what was not pushed by expire_at is done too */
    in = (hr_progress_in){.outcome = {[HR_OUTCOME_SENT] = 80, [HR_OUTCOME_EXPIRED] = 220},
                          .subscriptions = 300,
                          .published = 120,
                          .finished = true};
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.done, 300);
    assert_int_equal(pr.outcome[HR_OUTCOME_UNACCOUNTED], 0);
    assert_true(pr.ratio == 1.0);
    assert_string_equal(hr_progress_outcome_name(HR_OUTCOME_EXPIRED), "expired");
    /* running past expire_at: the expired count towards done at once */
    in = (hr_progress_in){.outcome = {[HR_OUTCOME_SENT] = 10, [HR_OUTCOME_EXPIRED] = 50},
                          .subscriptions = 100,
                          .published = 50,
                          .subs_left = 0};
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.done, 60);
    assert_true(pr.ratio == 0.6);
    assert_int_equal(hr_progress_merge(5, -1), 5);
    assert_int_equal(hr_progress_merge(5, 9), 9);
    /* consent (docs/recipients.md): opted out and suppressed recipients are
     * settled outcomes; a finished task with them and the sent is done */
    assert_string_equal(hr_progress_outcome_name(HR_OUTCOME_OPTED_OUT), "opted_out");
    assert_string_equal(hr_progress_outcome_name(HR_OUTCOME_SUPPRESSED), "suppressed");
    assert_string_equal(hr_progress_outcome_name(HR_OUTCOME_UNACCOUNTED), "unaccounted");
    in = (hr_progress_in){
        .outcome =
            {[HR_OUTCOME_SENT] = 70, [HR_OUTCOME_OPTED_OUT] = 20, [HR_OUTCOME_SUPPRESSED] = 5},
        .subscriptions = 100,
        .finished = true};
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.done, 100);
    assert_int_equal(pr.outcome[HR_OUTCOME_UNACCOUNTED], 5);
    in.outcome[HR_OUTCOME_SUPPRESSED] = 10;
    hr_progress_compute(&in, &pr);
    assert_int_equal(pr.outcome[HR_OUTCOME_UNACCOUNTED], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_property),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
