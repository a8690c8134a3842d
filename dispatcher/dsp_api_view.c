/* dsp_api_view: the JSON views of a task (dsp_api_view.h).  Times are
 * RFC 3339 strings (dsp_api_time), ids exact integers (dsp_api_add_id),
 * the payload as stored; the live half reads Redis with the request's
 * connection pair and falls back to MySQL's counters. */
#include "dsp_api_view.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_api_parse.h"
#include "dsp_conn.h"
#include "hr_clock.h"
#include "hr_keys.h"
#include "hr_pace.h"
#include "hr_parse.h"
#include "hr_progress.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_tz.h"
#include "hr_variant.h"

/* ---- task JSON ------------------------------------------------------------ */

void dsp_api_add_time(cJSON *o, const char *name, int64_t ms)
{
    char buf[40];

    if (ms < 0) {
        cJSON_AddNullToObject(o, name);
        return;
    }
    dsp_api_time(ms, buf, sizeof buf);
    cJSON_AddStringToObject(o, name, buf);
}

static void dsp_api_add_str(cJSON *o, const char *name, const char *s)
{
    if (s != NULL)
        cJSON_AddStringToObject(o, name, s);
    else
        cJSON_AddNullToObject(o, name);
}

/* local_time, default_tz and the window (docs/scheduling.md); bounds as
 * "HH:MM:SS". */
static void dsp_api_add_local(cJSON *o, const hr_task *t)
{
    const int64_t bounds[2] = {t->window_start_s, t->window_end_s};
    const char *names[2] = {"window_start", "window_end"};
    char buf[16];

    cJSON_AddBoolToObject(o, "local_time", t->local_time == 1);
    dsp_api_add_str(o, "default_tz", t->default_tz);
    for (size_t i = 0; i < 2; i++) {
        if (bounds[i] < 0) {
            cJSON_AddNullToObject(o, names[i]);
            continue;
        }
        snprintf(buf, sizeof buf, "%02d:%02d:%02d", (int)(bounds[i] / 3600),
                 (int)(bounds[i] / 60 % 60), (int)(bounds[i] % 60));
        cJSON_AddStringToObject(o, names[i], buf);
    }
    dsp_api_add_str(o, "window_tz", t->window_tz);
}

/* T's winner step (docs/api.md "Test then winner") as its "ab" member:
 * the settings, the phase and its instants, the winner and the per-arm
 * figures the pick read.  Nothing without one. */
static void dsp_api_view_ab(cJSON *o, const hr_task *t)
{
    const char *phase = hr_variant_ab_phase(t);
    cJSON *ab;

    if (phase == NULL || (ab = cJSON_AddObjectToObject(o, "ab")) == NULL)
        return;
    cJSON_AddNumberToObject(ab, "sample_pct", (double)t->ab_sample_pct);
    cJSON_AddNumberToObject(ab, "wait_s", (double)t->ab_wait_s);
    dsp_api_add_str(ab, "metric", t->ab_metric);
    cJSON_AddStringToObject(ab, "phase", phase);
    dsp_api_add_time(ab, "sampled_at", t->ab_sampled_ms);
    dsp_api_add_time(ab, "decide_at",
                     t->ab_sampled_ms >= 0 ? t->ab_sampled_ms + t->ab_wait_s * 1000 : -1);
    if (t->ab_winner != NULL)
        cJSON_AddStringToObject(ab, "winner", t->ab_winner);
    else
        cJSON_AddNullToObject(ab, "winner");
    dsp_api_add_time(ab, "decided_at", t->ab_decided_ms);
    if (t->ab_figures == NULL || !cJSON_AddItemToObject(ab, "figures", cJSON_Parse(t->ab_figures)))
        cJSON_AddNullToObject(ab, "figures");
}

cJSON *dsp_api_view_task(const hr_task *t)
{
    cJSON *o = cJSON_CreateObject(), *counters, *payload = NULL;
    char err[256];

    dsp_api_add_id(o, "id", t->id);
    dsp_api_add_str(o, "name", t->name);
    dsp_api_add_str(o, "topic", t->topic);
    dsp_api_add_str(o, "channel", t->channel);
    dsp_api_add_str(o, "title", t->title);
    dsp_api_add_str(o, "body", t->body);
    /* Numbers as stored, not through a double. */
    if (t->payload != NULL &&
        hr_parse_json(t->payload, strlen(t->payload), &payload, err, sizeof err) == 0)
        hr_parse_json_exact(payload);
    if (payload == NULL || !cJSON_AddItemToObject(o, "payload", payload)) {
        cJSON_Delete(payload);
        cJSON_AddNullToObject(o, "payload");
    }
    if (t->rich == NULL || !cJSON_AddItemToObject(o, "rich", cJSON_Parse(t->rich)))
        cJSON_AddNullToObject(o, "rich");
    dsp_api_view_ab(o, t);
    dsp_api_add_time(o, "due_at", t->due_ms);
    dsp_api_add_time(o, "freeze_at", t->freeze_ms);
    dsp_api_add_time(o, "expire_at", t->expire_ms > 0 ? t->expire_ms : -1);
    dsp_api_add_time(o, "event_at", hr_task_leads(t) ? t->event_ms : -1);
    cJSON_AddNumberToObject(o, "rate_limit", (double)t->rate_limit);
    cJSON_AddNumberToObject(o, "chunk_size", (double)t->chunk_size);
    cJSON_AddNumberToObject(o, "shards", (double)(t->shards > 1 ? t->shards : 1));
    cJSON_AddNumberToObject(o, "throttle_limit", (double)t->throttle_limit);
    cJSON_AddNumberToObject(o, "throttle_window_s", (double)t->throttle_window_s);
    dsp_api_add_str(o, "throttle_scope", t->throttle_scope);
    dsp_api_add_str(o, "throttle_key", t->throttle_key);
    dsp_api_add_str(o, "throttle_mode", t->throttle_mode);
    if (t->ttl_s >= 0)
        cJSON_AddNumberToObject(o, "ttl", (double)t->ttl_s);
    else
        cJSON_AddNullToObject(o, "ttl");
    dsp_api_add_str(o, "collapse_key", t->collapse_key);
    dsp_api_add_str(o, "priority", hr_priority_name(t->priority));
    dsp_api_add_str(o, "category", hr_task_category(t));
    dsp_api_add_local(o, t);
    /* pacing and admission (docs/scheduling.md) */
    dsp_api_add_time(o, "finish_by", hr_task_paced(t) ? t->finish_ms : -1);
    dsp_api_add_str(o, "last_warning", t->last_warning);
    dsp_api_add_str(o, "control", hr_control_name(t->control));
    dsp_api_add_str(o, "state", hr_state_name(t->state));
    dsp_api_add_str(o, "last_error", t->last_error);
    dsp_api_add_str(o, "claimed_by", t->claimed_by);
    counters = cJSON_AddObjectToObject(o, "counters");
    cJSON_AddNumberToObject(counters, "total", (double)t->total);
    cJSON_AddNumberToObject(counters, "sent", (double)t->sent);
    cJSON_AddNumberToObject(counters, "failed", (double)t->failed);
    cJSON_AddNumberToObject(counters, "throttled", (double)t->throttled);
    cJSON_AddNumberToObject(counters, "pulled", (double)t->pulled);
    cJSON_AddNumberToObject(counters, "cancelled", (double)t->cancelled);
    cJSON_AddNumberToObject(counters, "retried", (double)t->retried);
    cJSON_AddNumberToObject(counters, "unregistered", (double)t->unregistered);
    cJSON_AddNumberToObject(counters, "expired", (double)t->expired);
    cJSON_AddNumberToObject(counters, "opted_out", (double)t->opted_out);
    cJSON_AddNumberToObject(counters, "suppressed", (double)t->suppressed);
    return o;
}

cJSON *dsp_api_view_settings(const hr_task *t)
{
    static const char *const herald_s[] = {"id",         "last_warning", "control", "state",
                                           "last_error", "claimed_by",   "counters"};
    cJSON *o = dsp_api_view_task(t);

    for (size_t i = 0; o != NULL && i < sizeof herald_s / sizeof herald_s[0]; i++)
        cJSON_DeleteItemFromObjectCaseSensitive(o, herald_s[i]);
    return o;
}

/* The value of FIELD in an HGETALL reply, -1 when absent. */
static int64_t dsp_api_stat(const redisReply *stats, const char *field)
{
    size_t i;

    for (i = 0; stats != NULL && i + 1 < stats->elements; i += 2)
        if (strcmp(stats->element[i]->str, field) == 0)
            return strtoll(stats->element[i + 1]->str, NULL, 10);
    return -1;
}

/* A wave of the waves hash: its release instant and the reply index of
 * its field. */
typedef struct dsp_api_wave {
    int64_t release;
    size_t at;
} dsp_api_wave;

static int dsp_api_wave_cmp(const void *a, const void *b)
{
    int64_t x = ((const dsp_api_wave *)a)->release, y = ((const dsp_api_wave *)b)->release;

    return (x > y) - (x < y);
}

/* A local-time or windowed task's waves into PROGRESS (docs/scheduling.md):
 * "waiting" (members of the wait set) and "waves", one per release instant
 * in time order: its zone, the window's close, recipients, released and
 * still waiting.  *WAITING gets the wait set's size (-1 when Redis does not
 * answer; the waves are then left out).  HGETALL's order is the hash's, so
 * the waves are sorted here and then appended: cJSON_InsertItemInArray at
 * index 0 leaves Debian's cJSON 1.7.15 list with a wrong tail, and a later
 * append lost waves. */
static void dsp_api_waves(dsp_api_conn *ac, const hr_task *t, cJSON *progress, int64_t *waiting)
{
    char wait[HR_KEY_MAX], waves[HR_KEY_MAX], err[256], field[40];
    redisReply *all = NULL, *n;
    dsp_api_wave *order = NULL;
    size_t nwaves = 0;
    cJSON *list;

    *waiting = -1;
    hr_key_task(hr_redis_prefix(ac->r), wait, sizeof wait, t->id, HR_KEY_WAIT);
    hr_key_task(hr_redis_prefix(ac->r), waves, sizeof waves, t->id, HR_KEY_WAVES);
    n = hr_redis_cmdf(ac->r, err, sizeof err, "ZCARD %s", wait);
    if (n == NULL || (all = hr_redis_cmdf(ac->r, err, sizeof err, "HGETALL %s", waves)) == NULL)
        goto done;
    *waiting = n->integer;
    cJSON_AddNumberToObject(progress, "waiting", (double)n->integer);
    list = cJSON_AddArrayToObject(progress, "waves");
    if (all->type != REDIS_REPLY_ARRAY || all->elements < 2 ||
        (order = calloc(all->elements / 2, sizeof *order)) == NULL)
        goto done;
    for (size_t i = 0; i + 1 < all->elements; i += 2) {
        char *end;
        int64_t release = strtoll(all->element[i]->str, &end, 10);

        if (*end == '\0') /* not "planned", "released:<ms>" */
            order[nwaves++] = (dsp_api_wave){.release = release, .at = i};
    }
    qsort(order, nwaves, sizeof *order, dsp_api_wave_cmp);
    for (size_t k = 0; k < nwaves; k++) {
        char zone[HR_TZ_NAME_MAX + 1] = "";
        int64_t release = order[k].release, close = -1, released, left;
        cJSON *w;

        (void)sscanf(all->element[order[k].at + 1]->str, "%" SCNd64 " %64s", &close, zone);
        snprintf(field, sizeof field, "released:%" PRId64, release);
        released = hr_progress_merge(0, dsp_api_stat(all, field));
        left = dsp_reply_int(hr_redis_cmdf(ac->r, err, sizeof err, "ZCOUNT %s %" PRId64 " %" PRId64,
                                           wait, release, release));
        w = cJSON_CreateObject();
        dsp_api_add_time(w, "release_at", release);
        cJSON_AddStringToObject(w, "zone", zone);
        dsp_api_add_time(w, "window_closes_at", close);
        cJSON_AddNumberToObject(w, "recipients", (double)(released + (left > 0 ? left : 0)));
        cJSON_AddNumberToObject(w, "released", (double)released);
        cJSON_AddNumberToObject(w, "waiting", (double)(left > 0 ? left : 0));
        cJSON_AddItemToArray(list, w);
    }
done:
    free(order);
    freeReplyObject(n);
    freeReplyObject(all);
}

/* Finish-by pacing's part of the progress (docs/scheduling.md): the rate
 * in force (the stats hash's planned_rate, null before the owner derived
 * one) and the plan a console draws against the actual `done`: the
 * straight line from due_at to finish_by.  null for a task without one. */
static void dsp_api_task_plan(const hr_task *t, const hr_shard_stats *stats, const hr_progress *pr,
                              int64_t now, cJSON *progress)
{
    int64_t rate = hr_shard_stats_get(stats, "planned_rate");
    cJSON *plan;

    if (rate > 0)
        cJSON_AddNumberToObject(progress, "planned_rate", (double)rate);
    else
        cJSON_AddNullToObject(progress, "planned_rate");
    if (!hr_task_paced(t)) {
        cJSON_AddNullToObject(progress, "plan");
        return;
    }
    plan = cJSON_AddObjectToObject(progress, "plan");
    dsp_api_add_time(plan, "start", t->due_ms);
    dsp_api_add_time(plan, "finish_by", t->finish_ms);
    dsp_api_add_time(plan, "now", now);
    cJSON_AddNumberToObject(plan, "planned_done_now",
                            (double)hr_pace_planned_done(pr->total, t->due_ms, t->finish_ms, now));
}

/* The live half of GET /v1/tasks/{id}: Redis state, and the progress of
 * hr_progress: each outcome the larger of MySQL's counter and the stats
 * hash's, total the subscriptions; ETA = remaining at the average rate
 * since the due time. */
void dsp_api_view_live(dsp_api_conn *ac, const hr_task *t, cJSON *o)
{
    char err[256];
    hr_shard_stats stats = {0}; /* summed over the shards; empty without Redis */
    cJSON *live = cJSON_AddObjectToObject(o, "live"), *st, *progress, *oc;
    int64_t mysql[HR_OUTCOME_UNACCOUNTED];
    hr_progress_in in = {.subscriptions = dsp_api_subscriptions(ac, t->id),
                         .subs_left = -1,
                         .finished = hr_state_final(t->state)};
    hr_progress pr;
    int64_t now = hr_clock_now_ms(), subs;
    size_t i;

    /* A sharded task's live state is the sum of its shards'. */
    if (hr_shard_sum(ac->r, t->id, (int)t->shards, "SCARD", HR_KEY_SUBS, &subs, err, sizeof err) <
            0 ||
        hr_shard_stats_read(ac->r, t->id, (int)t->shards, &stats, err, sizeof err) < 0) {
        cJSON_AddStringToObject(live, "error", err);
        stats.n = 0;
    } else {
        in.subs_left = subs;
        cJSON_AddNumberToObject(live, "subs", (double)subs);
        st = cJSON_AddObjectToObject(live, "stats");
        for (i = 0; i < stats.n; i++)
            cJSON_AddNumberToObject(st, stats.v[i].name, (double)stats.v[i].value);
    }
    hr_task_outcome_counts(t, mysql);
    for (i = 0; i < HR_OUTCOME_UNACCOUNTED; i++)
        in.outcome[i] =
            hr_progress_merge(mysql[i], hr_shard_stats_get(&stats, hr_progress_outcome_name(i)));
    in.published = hr_progress_merge(t->total, hr_shard_stats_get(&stats, "published"));
    progress = cJSON_CreateObject();
    if (hr_task_waits(t) || hr_task_leads(t)) {
        int64_t waiting;

        /* Not chunked yet either: the fallback total counts them. */
        dsp_api_waves(ac, t, progress, &waiting);
        if (in.subs_left >= 0 && waiting > 0)
            in.subs_left += waiting;
    }
    hr_progress_compute(&in, &pr);
    cJSON_AddItemToObject(o, "progress", progress);
    cJSON_AddNumberToObject(progress, "done", (double)pr.done);
    cJSON_AddNumberToObject(progress, "total", (double)pr.total);
    cJSON_AddNumberToObject(progress, "ratio", pr.ratio);
    oc = cJSON_AddObjectToObject(progress, "outcomes");
    for (i = 0; i < HR__OUTCOMES; i++)
        cJSON_AddNumberToObject(oc, hr_progress_outcome_name(i), (double)pr.outcome[i]);
    cJSON_AddNumberToObject(progress, "over", (double)pr.over);
    /* Reported beside the outcomes, not among them: attempts, and pushes a
     * shadow-mode throttle let through. */
    cJSON_AddNumberToObject(
        progress, "retried",
        (double)hr_progress_merge(t->retried, hr_shard_stats_get(&stats, "retried")));
    cJSON_AddNumberToObject(
        progress, "shadowed",
        (double)hr_progress_merge(0, hr_shard_stats_get(&stats, "throttle_shadowed")));
    if (pr.done > 0 && pr.done < pr.total && t->due_ms > 0 && now > t->due_ms && !in.finished)
        cJSON_AddNumberToObject(progress, "eta_s",
                                (double)(pr.total - pr.done) * (double)(now - t->due_ms) /
                                    (double)pr.done / 1000.0);
    else
        cJSON_AddNullToObject(progress, "eta_s");
    dsp_api_task_plan(t, &stats, &pr, now, progress);
    hr_vec_free(&stats);
}
