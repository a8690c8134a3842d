/* cmd_status: `heraldctl status TASK [--watch] [--interval 1s]` — where a
 * task stands: state, MySQL counters, live Redis state, progress, rate, ETA,
 * and its funnel (sent -> delivered -> opened -> clicked, hr_stats.h).
 *
 * A sample is one hr_task_load, COUNT(push_subscription) (once the task is
 * claimed the subscriptions are frozen, so a --watch counts them once) and
 * one pipelined round trip to Redis (SCARD subs, HLEN pending, HGETALL
 * stats, ZCARD wait: a local-time or windowed task's recipients not yet
 * due, shown and counted as not chunked yet).  Progress is hr_progress's, the same as the API's: each outcome
 * the larger of MySQL's counter and the stats hash's, done = their sum,
 * total = the subscriptions, ratio exactly 1 once the task is finished
 * (unaccounted then shows what no counter settled).
 * The rate is measured over the last STATUS_RATE_SAMPLES samples of a
 * --watch; a single status shows the average since the due time.  Redis is
 * optional: without it the MySQL half is still shown. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_cmd.h"
#include "ctl_fmt.h"
#include "hr_clock.h"
#include "hr_pipe.h"
#include "hr_progress.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_subs.h"
#include "hr_stats.h"
#include "hr_variant.h"
#include "hr_task.h"

#define STATUS_BAR_WIDTH 24
#define STATUS_RATE_SAMPLES 5
#define STATUS_MIN_INTERVAL_MS 100
#define STATUS_STATS_TEXT 512

typedef struct status_sample {
    hr_task *t;
    int64_t subs;                         /* SCARD subs, -1 = unknown */
    int64_t pending;                      /* HLEN pending, -1 = unknown */
    int64_t waiting;                      /* ZCARD wait (docs/scheduling.md), -1 = unknown */
    int64_t published;                    /* stats.published, 0 when absent */
    int64_t live[HR_OUTCOME_UNACCOUNTED]; /* the stats hash's outcomes, -1 = absent */
    int64_t subscriptions;                /* COUNT(push_subscription), -1 = unknown */
    int64_t shard_rows[3];                /* a sharded task's rows: ready, chunking, chunked */
    char stats[STATUS_STATS_TEXT];        /* "k=v k=v ..." of the stats hash */
    hr_progress pr;
    int64_t done, total;
    int64_t mono_ms;
    hr_stats_funnel funnel;
    bool has_funnel;    /* read (the report's; MySQL answered) */
    char variants[512]; /* "<key> sent N failed N; ..." of push_task_variant_count, "" = none */
} status_sample;

/* T's winner step (docs/api.md "Test then winner"): the phase, and what it
 * waits for or what the pick found. */
static void status_ab(const hr_task *t)
{
    const char *phase = hr_variant_ab_phase(t);
    char at[40];

    if (phase == NULL)
        return;
    printf("  ab        sample %" PRId64 "%%  wait %" PRId64 " s  metric %s  phase %s",
           t->ab_sample_pct, t->ab_wait_s, t->ab_metric, phase);
    if (t->ab_winner == NULL && t->ab_sampled_ms >= 0)
        printf(" until %s",
               ctl_fmt_time_iso(t->ab_sampled_ms + t->ab_wait_s * 1000, at, sizeof at));
    if (t->ab_winner != NULL)
        printf("  winner %s by %s  %s", t->ab_winner, t->ab_metric,
               t->ab_figures != NULL ? t->ab_figures : "");
    printf("\n");
}

/* The counts per variant of TASK into S->variants (left "" when there are
 * none or MySQL did not answer: the rest still shows). */
static void status_variants(hr_mysql *m, int64_t task, status_sample *s)
{
    cJSON *counts = NULL, *v, *o;
    char errstr[256];
    size_t off = 0;

    s->variants[0] = '\0';
    if (hr_variant_counts(m, task, &counts, errstr, sizeof errstr) != 0)
        return;
    cJSON_ArrayForEach(v, counts)
    {
        off += (size_t)snprintf(s->variants + off, sizeof s->variants - off, "%s%s",
                                off > 0 ? "; " : "", v->string);
        cJSON_ArrayForEach(o, v)
        {
            if (off >= sizeof s->variants)
                break;
            off += (size_t)snprintf(s->variants + off, sizeof s->variants - off, " %s %.0f",
                                    o->string, o->valuedouble);
        }
        if (off >= sizeof s->variants)
            break;
    }
    cJSON_Delete(counts);
}

static void status_stats(status_sample *s, const hr_shard_stats *st)
{
    size_t off = 0;

    s->stats[0] = '\0';
    for (size_t i = 0; i < st->n; i++) {
        const hr_shard_stat *f = &st->v[i];

        if (strcmp(f->name, "published") == 0)
            s->published = f->value;
        for (int o = 0; o < HR_OUTCOME_UNACCOUNTED; o++)
            if (strcmp(f->name, hr_progress_outcome_name(o)) == 0)
                s->live[o] = f->value;
        if (off < sizeof s->stats)
            off += (size_t)snprintf(s->stats + off, sizeof s->stats - off, "%s%s=%" PRId64,
                                    off ? " " : "", f->name, f->value);
    }
}

/* The Redis half of a sample, summed over the task's shards; leaves -1s
 * when Redis does not answer. */
static void status_redis(hr_redis *r, const hr_task *t, status_sample *s)
{
    hr_shard_stats st = {0};
    char errstr[256];
    int shards = (int)t->shards;

    if (hr_shard_sum(r, t->id, shards, "SCARD", HR_KEY_SUBS, &s->subs, errstr, sizeof errstr) < 0 ||
        hr_shard_sum(r, t->id, shards, "HLEN", HR_KEY_PENDING, &s->pending, errstr, sizeof errstr) <
            0 ||
        hr_shard_sum(r, t->id, shards, "ZCARD", HR_KEY_WAIT, &s->waiting, errstr, sizeof errstr) <
            0 ||
        hr_shard_stats_read(r, t->id, shards, &st, errstr, sizeof errstr) < 0) {
        s->subs = s->pending = s->waiting = -1;
        hr_vec_free(&st);
        return;
    }
    status_stats(s, &st);
    hr_vec_free(&st);
}

/* The task's recipients in MySQL (hr_subs_count): what the scanner and the
 * reconciliation load into Redis. */
static int64_t status_subscriptions(hr_mysql *m, int64_t task)
{
    char errstr[256];

    return hr_subs_count(m, task, errstr, sizeof errstr);
}

/* A sharded task's push_task_shard rows by state into S->shard_rows (left
 * 0 when MySQL does not answer: the line is informative). */
static void status_shards(hr_mysql *m, int64_t task, status_sample *s)
{
    static const char *const states[] = {"ready", "chunking", "chunked"};
    hr_mysql_param p = HR_P_I64(task);
    hr_mysql_rows *rows = NULL;
    char errstr[256];

    if (hr_mysql_query(m,
                       "SELECT state, COUNT(*) FROM push_task_shard WHERE task_id = ? "
                       "GROUP BY state",
                       &p, 1, &rows, errstr, sizeof errstr) == 0)
        for (size_t i = 0; i < rows->nrows; i++)
            for (int k = 0; k < 3; k++)
                if (strcmp(hr_mysql_cell(rows, i, 0), states[k]) == 0)
                    s->shard_rows[k] = strtoll(hr_mysql_cell(rows, i, 1), NULL, 10);
    hr_mysql_rows_free(rows);
}

/* Takes one sample into S (S->t replaced).  0, 1 = no such task, -1. */
static int status_sample_take(hr_mysql *m, hr_redis *r, int64_t task, status_sample *s,
                              char *errstr, size_t errlen)
{
    hr_task *t = NULL;
    int64_t known = s->t != NULL && s->t->state != HR_STATE_SCHEDULED ? s->subscriptions : -1;
    int rc = hr_task_load(m, task, &t, errstr, errlen);
    hr_progress_in in;

    if (rc != 0)
        return rc;
    hr_task_free(s->t);
    *s = (status_sample){.t = t,
                         .subs = -1,
                         .pending = -1,
                         .waiting = -1,
                         .mono_ms = hr_clock_mono_ms(),
                         .live = {-1, -1, -1, -1, -1, -1, -1}};
    if (r != NULL)
        status_redis(r, t, s);
    if (t->shards > 1)
        status_shards(m, task, s);
    /* Without the series (a database before 017) the rest still shows. */
    s->has_funnel = hr_stats_funnel_load(m, t, &s->funnel, errstr, errlen) == 0;
    status_variants(m, task, s);
    s->subscriptions = known >= 0 ? known : status_subscriptions(m, task);
    in = (hr_progress_in){.subscriptions = s->subscriptions,
                          .published = hr_progress_merge(t->total, s->published),
                          /* waiting recipients are not chunked yet either */
                          .subs_left =
                              s->subs >= 0 && s->waiting > 0 ? s->subs + s->waiting : s->subs,
                          .finished = hr_state_final(t->state)};
    {
        int64_t mysql[HR_OUTCOME_UNACCOUNTED];

        hr_task_outcome_counts(t, mysql);
        for (int o = 0; o < HR_OUTCOME_UNACCOUNTED; o++)
            in.outcome[o] = hr_progress_merge(mysql[o], s->live[o]);
    }
    hr_progress_compute(&in, &s->pr);
    s->done = s->pr.done;
    s->total = s->pr.total;
    return 0;
}

static double status_fraction(const status_sample *s)
{
    return s->pr.ratio;
}

/* "12,345/s" and "ETA 4 s" (or "due in 3 s" before the due time) for
 * RATE (recipients/s, < 0 = unknown). */
static void status_rate_text(const status_sample *s, double rate, char *rbuf, size_t rlen,
                             char *ebuf, size_t elen)
{
    int64_t until_due = s->t->due_ms - hr_clock_now_ms();
    char n[32], d[32];

    if (hr_state_final(s->t->state) && rate < 0) {
        snprintf(rbuf, rlen, "-/s");
        snprintf(ebuf, elen, "finished");
        return;
    }
    if (s->t->state == HR_STATE_SCHEDULED && until_due > 0) {
        snprintf(rbuf, rlen, "-/s");
        snprintf(ebuf, elen, "due in %s", ctl_fmt_eta(until_due / 1000.0, d, sizeof d));
        return;
    }
    if (rate < 0) {
        snprintf(rbuf, rlen, "-/s");
        snprintf(ebuf, elen, "ETA -");
        return;
    }
    snprintf(rbuf, rlen, "%s/s", ctl_fmt_count((int64_t)(rate + 0.5), n, sizeof n));
    if (hr_state_final(s->t->state) || s->done >= s->total)
        snprintf(ebuf, elen, "ETA 0 s");
    else
        snprintf(ebuf, elen, "ETA %s",
                 ctl_fmt_eta(rate > 0 ? (s->total - s->done) / rate : -1, d, sizeof d));
}

/* The one line of --watch. */
static void status_line(FILE *out, const status_sample *s, double rate, const char *end)
{
    char bar[STATUS_BAR_WIDTH + 3], d[32], t[32], sent[32], failed[32], thr[32], r[48], eta[48];

    status_rate_text(s, rate, r, sizeof r, eta, sizeof eta);
    fprintf(out, "%s %5.1f%%  %s/%s  sent %s failed %s throttled %s  %s  %s  %s%s",
            ctl_fmt_bar(status_fraction(s), STATUS_BAR_WIDTH, bar, sizeof bar),
            status_fraction(s) * 100, ctl_fmt_count(s->done, d, sizeof d),
            ctl_fmt_count(s->total, t, sizeof t),
            ctl_fmt_count(s->pr.outcome[HR_OUTCOME_SENT], sent, sizeof sent),
            ctl_fmt_count(s->pr.outcome[HR_OUTCOME_FAILED], failed, sizeof failed),
            ctl_fmt_count(s->pr.outcome[HR_OUTCOME_THROTTLED], thr, sizeof thr), r, eta,
            hr_state_name(s->t->state), end);
    fflush(out);
}

/* The funnel line: each step's count and its share of the sent. */
static void status_funnel(const hr_stats_funnel *f)
{
    const int64_t steps[] = {f->delivered, f->opened, f->clicked};
    const char *names[] = {"delivered", "opened", "clicked"};
    char n[32];

    printf("  funnel    %s sent %s", f->channel, ctl_fmt_count(f->sent, n, sizeof n));
    for (size_t i = 0; i < 3; i++) {
        printf(" -> %s %s", names[i], ctl_fmt_count(steps[i], n, sizeof n));
        if (f->sent > 0)
            printf(" (%.1f%%)", 100.0 * (double)steps[i] / (double)f->sent);
    }
    putchar('\n');
}

/* The full report of a single status and of the end of a --watch. */
static void status_report(const status_sample *s, double rate)
{
    const hr_task *t = s->t;
    char due[40], when[32], bar[STATUS_BAR_WIDTH + 3], n[9][32], r[48], eta[48];
    int64_t lag = hr_clock_now_ms() - t->due_ms;

    status_rate_text(s, rate, r, sizeof r, eta, sizeof eta);
    printf("task %" PRId64 " \"%s\" on %s: %s%s%s\n", t->id, t->name, t->channel,
           hr_state_name(t->state), t->control != HR_CONTROL_RUN ? ", control " : "",
           t->control != HR_CONTROL_RUN ? hr_control_name(t->control) : "");
    printf("  due       %s (%s%s%s)\n", ctl_fmt_time_iso(t->due_ms, due, sizeof due),
           lag < 0 ? "in " : "", ctl_fmt_eta((lag < 0 ? -lag : lag) / 1000.0, when, sizeof when),
           lag < 0 ? "" : " ago");
    if (t->shards > 1) /* docs/architecture.md "Sharded tasks" */
        printf("  shards    %" PRId64 ": %" PRId64 " ready, %" PRId64 " chunking, %" PRId64
               " chunked\n",
               t->shards, s->shard_rows[0], s->shard_rows[1], s->shard_rows[2]);
    if (hr_task_leads(t))
        printf("  event     %s (subscribers' leads count back from it)\n",
               ctl_fmt_time_iso(t->event_ms, due, sizeof due));
    if (t->expire_ms > 0)
        printf("  expires   %s%s\n", ctl_fmt_time_iso(t->expire_ms, due, sizeof due),
               hr_task_expired(t, hr_clock_now_ms()) ? " (past: nothing more is pushed)" : "");
    printf("  progress  %s %5.1f%%  %s of %s\n",
           ctl_fmt_bar(status_fraction(s), STATUS_BAR_WIDTH, bar, sizeof bar),
           status_fraction(s) * 100, ctl_fmt_count(s->done, n[0], sizeof n[0]),
           ctl_fmt_count(s->total, n[1], sizeof n[1]));
    printf("  outcomes ");
    for (int o = 0; o < HR__OUTCOMES; o++)
        printf(" %s %s", hr_progress_outcome_name(o),
               ctl_fmt_count(s->pr.outcome[o], n[0], sizeof n[0]));
    if (s->pr.over > 0)
        printf("  (counted twice %s)", ctl_fmt_count(s->pr.over, n[0], sizeof n[0]));
    printf(
        "\n  mysql     total %s  sent %s  failed %s  throttled %s  pulled %s  cancelled %s  "
        "retried %s  unregistered %s  expired %s\n",
        ctl_fmt_count(t->total, n[0], sizeof n[0]), ctl_fmt_count(t->sent, n[1], sizeof n[1]),
        ctl_fmt_count(t->failed, n[2], sizeof n[2]), ctl_fmt_count(t->throttled, n[3], sizeof n[3]),
        ctl_fmt_count(t->pulled, n[4], sizeof n[4]), ctl_fmt_count(t->cancelled, n[5], sizeof n[5]),
        ctl_fmt_count(t->retried, n[6], sizeof n[6]),
        ctl_fmt_count(t->unregistered, n[7], sizeof n[7]),
        ctl_fmt_count(t->expired, n[8], sizeof n[8]));
    if (s->has_funnel)
        status_funnel(&s->funnel);
    if (s->variants[0] != '\0')
        printf("  variants  %s\n", s->variants);
    status_ab(t);
    if (s->subs >= 0)
        printf("  redis     subs left %s  pending chunks %s  stats %s\n",
               ctl_fmt_count(s->subs, n[0], sizeof n[0]),
               ctl_fmt_count(s->pending, n[1], sizeof n[1]), s->stats[0] ? s->stats : "-");
    else
        printf("  redis     unavailable\n");
    if (s->waiting > 0) /* a local-time or windowed task (docs/scheduling.md) */
        printf("  waiting   %s for their release instant (waves: GET /v1/tasks/%" PRId64 ")\n",
               ctl_fmt_count(s->waiting, n[0], sizeof n[0]), t->id);
    printf("  rate      %s  %s\n", r, eta);
    if (t->last_error != NULL)
        printf("  error     %s\n", t->last_error);
    /* pacing and admission control (docs/scheduling.md) */
    if (hr_task_paced(t))
        printf("  finish by %s\n", ctl_fmt_time_iso(t->finish_ms, n[0], sizeof n[0]));
    if (t->last_warning != NULL)
        printf("  warning   %s\n", t->last_warning);
}

/* Recipients/s over the samples in HIST (oldest first), -1 if unknown. */
static double status_rate(const int64_t hist_done[], const int64_t hist_ms[], int nhist)
{
    if (nhist < 2 || hist_ms[nhist - 1] <= hist_ms[0])
        return -1;
    return (hist_done[nhist - 1] - hist_done[0]) * 1000.0 / (hist_ms[nhist - 1] - hist_ms[0]);
}

static void status_sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

static int status_watch(hr_mysql *m, hr_redis *r, int64_t task, int64_t interval_ms,
                        status_sample *s)
{
    int64_t hist_done[STATUS_RATE_SAMPLES], hist_ms[STATUS_RATE_SAMPLES];
    bool tty = isatty(STDOUT_FILENO);
    char errstr[512];
    int nhist = 0;
    double rate = -1;

    for (;;) {
        int rc = status_sample_take(m, r, task, s, errstr, sizeof errstr);
        if (rc != 0) {
            if (tty)
                putchar('\n');
            return rc > 0 ? ctl_fail("task %" PRId64 " does not exist", task)
                          : ctl_fail("status: %s", errstr);
        }
        if (nhist == STATUS_RATE_SAMPLES) {
            memmove(hist_done, hist_done + 1, (STATUS_RATE_SAMPLES - 1) * sizeof hist_done[0]);
            memmove(hist_ms, hist_ms + 1, (STATUS_RATE_SAMPLES - 1) * sizeof hist_ms[0]);
            nhist--;
        }
        hist_done[nhist] = s->done;
        hist_ms[nhist++] = s->mono_ms;
        rate = status_rate(hist_done, hist_ms, nhist);
        if (tty) {
            putchar('\r');
            status_line(stdout, s, rate, "\033[K");
        } else {
            status_line(stdout, s, rate, "\n");
        }
        if (hr_state_final(s->t->state))
            break;
        status_sleep_ms(interval_ms);
    }
    if (tty)
        putchar('\n');
    status_report(s, rate);
    return s->t->state == HR_STATE_FAILED ? CTL_EXIT_FAIL : CTL_EXIT_OK;
}

int ctl_cmd_status(ctl_ctx *ctx, int argc, char **argv)
{
    static const struct option options[] = {
        {"watch", no_argument, NULL, 'w'},
        {"interval", required_argument, NULL, 'i'},
        {NULL, 0, NULL, 0},
    };
    status_sample s = {0};
    int64_t task, interval_ms = 1000, since;
    bool watch = false;
    hr_mysql *m;
    hr_redis *r = NULL;
    char errstr[512];
    int opt, rc;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 'w') {
            watch = true;
        } else if (opt == 'i') {
            if (ctl_fmt_parse_duration("--interval", optarg, &interval_ms, errstr, sizeof errstr) <
                0)
                return ctl_usage(ctx, "%s", errstr);
            if (interval_ms < STATUS_MIN_INTERVAL_MS)
                interval_ms = STATUS_MIN_INTERVAL_MS;
        } else {
            return ctl_usage(ctx, NULL);
        }
    }
    if (optind != argc - 1)
        return ctl_usage(ctx, optind >= argc ? "TASK is required" : "one TASK only");
    if (ctl_fmt_parse_int("TASK", argv[optind], 1, INT64_MAX, &task, errstr, sizeof errstr) < 0)
        return ctl_usage(ctx, "%s", errstr);
    if (ctl_mysql(ctx, &m) < 0)
        return CTL_EXIT_FAIL;
    if (ctl_redis(ctx, &r) < 0)
        r = NULL; /* reported; the MySQL half is still worth showing */

    if (watch) {
        rc = status_watch(m, r, task, interval_ms, &s);
    } else {
        rc = status_sample_take(m, r, task, &s, errstr, sizeof errstr);
        if (rc != 0) {
            rc = rc > 0 ? ctl_fail("task %" PRId64 " does not exist", task)
                        : ctl_fail("status: %s", errstr);
        } else {
            since = hr_clock_now_ms() - s.t->due_ms;
            status_report(&s, !hr_state_final(s.t->state) && since > 0 && s.done > 0
                                  ? s.done * 1000.0 / since
                                  : -1);
            rc = CTL_EXIT_OK;
        }
    }
    hr_task_free(s.t);
    return rc;
}
