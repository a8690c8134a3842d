/* dsp_wait: local-time sends and send windows on the dispatcher's side
 * (docs/scheduling.md): the wait set of a task whose recipients are not all
 * due at once.
 *
 * - Plan (the reconciliation job, dsp_reconcile.c, once the set is
 *   complete and before the first chunk): every recipient in subs moves to
 *   the wait ZSET scored with its release instant (hr_release_at, its zone
 *   from the `tz` field of its profile hash, read in pipelined batches; a
 *   uid whose hash Redis lost while MySQL holds a zone for it gets that
 *   zone, and its hash rewritten, before the plan — never the default),
 *   through wait_park.lua; each distinct instant is a wave, recorded in the
 *   waves hash with the window's close and a zone to compute the next
 *   opening from.  A "planned" mark ends the plan, so a later owner (a
 *   takeover, a resume) does not plan again; a plan cut short is redone
 *   from what is still in subs.
 * - Release (the chunker, dsp_chunk.c, loop thread): before each chunk the
 *   due members, at most the chunk's grant, move from wait into subs
 *   (wait_release.lua) and chunk_move takes them in the same tick, so what
 *   stands released but unchunked is one chunk at most.  For a windowed
 *   task a chunk takes members of one wave only: the earliest due one
 *   whose window is open, after every earlier due wave whose window closed
 *   before it was all released was put off to its next opening
 *   (wait_defer.lua).
 * - Lead times (docs/scheduling.md "Lead times"): the plan of a task with
 *   event_at reads the task's subscriptions that carry a lead from MySQL
 *   (frozen since the claim; a task where few have one reads a page of them,
 *   not its whole set from Redis) and parks those whose wave event_at -
 *   lead_s is still ahead, one wave per distinct lead.  The others stay in
 *   subs and go out at once: its chunks cost what any task's cost until
 *   subs runs dry, when the chunker finds the wait set (dsp_chunk.c).
 * - An A/B test's winner step (dsp_ab.c) plans through the same park: its
 *   sample is due at once, the rest scored HR_VARIANT_HOLD_MS (one wave
 *   without a window) until the pick moves it to due.
 * A task is not finished while the wait set holds members: the chunker
 * sleeps until the next release instant instead.  Cancel drops the wait set
 * as it drops subs (dsp_control.c), a pull takes a uid out of it
 * (pull_ack.lua), and recover deletes it with the other working keys and
 * plans again (common/hr_recover.c). */
#include "dsp_wait.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_conn.h"
#include "hr_batch.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_pipe.h"
#include "hr_release.h"
#include "hr_shard.h"
#include "hr_tz.h"
#include "hr_user.h"
#include "hr_variant.h"
#include "hr_vec.h"

#define DSP_WAIT_BATCH 1000
/* The shard whose wait set a chunker releases: a sharded task's shards each
 * hold the recipients their workers put off (wk_consent.h). */
#define DSP_WAIT_SHARD(dt) ((dt)->shard != HR_SHARD_NONE ? (dt)->shard : 0)
#define DSP_WAIT_WAVE_VALUE 96 /* "<close ms> <zone>" */

/* The release and close of the recipients whose `tz` attribute is ATTR
 * ("" = none), computed once per plan; NAME is the zone it resolved to. */
typedef struct dsp_wait_zone {
    char attr[HR_TZ_NAME_MAX + 1], name[HR_TZ_NAME_MAX + 1];
    int64_t release_ms, close_ms;
} dsp_wait_zone;

typedef HR_VEC(dsp_wait_zone) dsp_wait_zones;

/* Distinct attribute values a plan remembers; past it (users holding many
 * bad values) each recipient's zone is worked out on its own. */
#define DSP_WAIT_ZONES_MAX 4096

/* The release of a recipient of T whose `tz` attribute is USER_TZ (NULL =
 * none) into *OUT, from the plan's cache Z (filled on first use).  0, or
 * -1 on a zone error (ERRSTR). */
static int dsp_wait_zone_get(dsp_wait_zones *z, const hr_task *t, const char *user_tz, int64_t now,
                             dsp_wait_zone *out, char *errstr, size_t errlen)
{
    const char *attr = user_tz != NULL && strlen(user_tz) <= HR_TZ_NAME_MAX ? user_tz : "";

    for (size_t i = 0; i < z->n; i++)
        if (strcmp(z->v[i].attr, attr) == 0) {
            *out = z->v[i];
            return 0;
        }
    memset(out, 0, sizeof *out);
    snprintf(out->attr, sizeof out->attr, "%s", attr);
    snprintf(out->name, sizeof out->name, "%s", hr_release_zone(t, *attr ? attr : NULL));
    if (hr_release_at(t, out->name, now, &out->release_ms, &out->close_ms, errstr, errlen) < 0)
        return -1;
    if (z->n < DSP_WAIT_ZONES_MAX)
        (void)hr_vec_push(z, *out); /* out of memory: computed again next time */
    return 0;
}

/* The waves hash value of a zone: its close (-1 = never) and its name. */
static void dsp_wait_wave_value(const dsp_wait_zone *zone, char *buf, size_t len)
{
    snprintf(buf, len, "%" PRId64 " %s",
             zone->close_ms == HR_RELEASE_NEVER ? (int64_t)-1 : zone->close_ms, zone->name);
}

/* What the refill of a batch's missing profiles found: the zones of the
 * batch's uids MISSING (their indices in the batch: AT), copied into TZ. */
typedef struct dsp_wait_refill {
    const size_t *at;
    char (*tz)[HR_TZ_NAME_MAX + 1];
    int64_t *found; /* the uids MySQL gave a zone, for their rewrite */
    size_t nfound;
} dsp_wait_refill;

static bool dsp_wait_refilled(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row)
{
    dsp_wait_refill *rf = ctx;

    snprintf(rf->tz[rf->at[i]], sizeof rf->tz[0], "%s", hr_mysql_cell(rows, row, 1));
    rf->found[rf->nfound++] = strtoll(hr_mysql_cell(rows, row, 0), NULL, 10);
    return true;
}

/* The N members at MISSING (indices into MEMBERS) have no zone in Redis:
 * those whose profile MySQL holds with one (Redis lost the hash, and the
 * profiles' sync has not rebuilt it yet) get it into TZ, and their hashes
 * are rewritten, so the plan never puts them in the default zone.  0 or
 * -1. */
static int dsp_wait_refill_zones(dsp_conn *conn, const hr_config *cfg, const redisReply *members,
                                 const size_t *missing, size_t n, char (*tz)[HR_TZ_NAME_MAX + 1],
                                 char *errstr, size_t errlen)
{
    int64_t *uids = calloc(n, sizeof *uids), *found = calloc(n, sizeof *found);
    dsp_wait_refill rf = {.at = missing, .tz = tz, .found = found};
    int rc = -1;

    if (uids == NULL || found == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        uids[i] = strtoll(members->element[missing[i]]->str, NULL, 10);
    if (hr_batch_select(conn->m,
                        "SELECT u.uid, u.tz FROM JSON_TABLE(?, '$[*]' COLUMNS (uid BIGINT PATH "
                        "'$')) j STRAIGHT_JOIN push_user u ON u.uid = j.uid "
                        "WHERE u.tz IS NOT NULL",
                        &(hr_batch){uids, n, 1}, NULL, 0, 1, dsp_wait_refilled, &rf, errstr,
                        errlen) < 0)
        goto done;
    rc = rf.nfound > 0
             ? hr_user_rewrite(conn->m, conn->r, found, rf.nfound, cfg, NULL, errstr, errlen)
             : 0;
    if (rf.nfound > 0 && rc == 0)
        hr_log_info("plan_profiles_refilled", "uids=%zu", rf.nfound);
done:
    free(found);
    free(uids);
    return rc;
}

/* One batch of the plan: the zones of the uids in MEMBERS (from their
 * profile hashes, or MySQL for a hash Redis lost), then the park. */
static int dsp_wait_park(dsp_conn *conn, const hr_config *cfg, const hr_task *t,
                         const redisReply *members, dsp_wait_zones *zones, int64_t now,
                         int64_t *parked, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(conn->r);
    char keys[3][HR_KEY_MAX], (*vals)[2][DSP_WAIT_WAVE_VALUE] = NULL;
    char(*tz)[HR_TZ_NAME_MAX + 1] = NULL;
    const char **argv = NULL;
    hr_pipe *pipe = hr_pipe_new(conn->r);
    redisReply *reply = NULL;
    size_t n = members->elements, i, *missing = NULL, nmissing = 0;
    int rc = -1;

    argv = calloc(3 + 3 * n, sizeof *argv);
    vals = calloc(n, sizeof *vals);
    tz = calloc(n, sizeof *tz);
    missing = calloc(n, sizeof *missing);
    if (pipe == NULL || argv == NULL || vals == NULL || tz == NULL || missing == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    /* A winner step's release is no zone's: the sample now, the rest held. */
    for (i = 0; t->ab_sample_pct <= 0 && i < n; i++) {
        char user[HR_KEY_MAX];
        const char *cmd[3] = {"HGET", user, "tz"};

        if (hr_key_user(prefix, user, sizeof user, members->element[i]->str) == NULL ||
            hr_pipe_cmd(pipe, 3, cmd, NULL) < 0) {
            snprintf(errstr, errlen, "user key of uid %.40s", members->element[i]->str);
            goto done;
        }
    }
    if (t->ab_sample_pct <= 0 && hr_pipe_exec(pipe, errstr, errlen) < 0)
        goto done;
    for (i = 0; t->ab_sample_pct <= 0 && i < n; i++) {
        redisReply *got = hr_pipe_reply(pipe, i, errstr, errlen);

        if (got != NULL && got->type == REDIS_REPLY_STRING)
            snprintf(tz[i], sizeof tz[i], "%s", got->str);
        else
            missing[nmissing++] = i;
        freeReplyObject(got);
    }
    if (nmissing > 0 &&
        dsp_wait_refill_zones(conn, cfg, members, missing, nmissing, tz, errstr, errlen) < 0)
        goto done;
    hr_key_task(prefix, keys[0], sizeof keys[0], t->id, HR_KEY_SUBS);
    hr_key_task(prefix, keys[1], sizeof keys[1], t->id, HR_KEY_WAIT);
    hr_key_task(prefix, keys[2], sizeof keys[2], t->id, HR_KEY_WAVES);
    argv[0] = keys[0];
    argv[1] = keys[1];
    argv[2] = keys[2];
    for (i = 0; i < n; i++) {
        dsp_wait_zone zone = {.name = "UTC", .close_ms = HR_RELEASE_NEVER};

        if (t->ab_sample_pct > 0)
            zone.release_ms =
                hr_variant_sampled(t->id, strtoull(members->element[i]->str, NULL, 10),
                                   t->ab_sample_pct)
                    ? now
                    : HR_VARIANT_HOLD_MS;
        else if (dsp_wait_zone_get(zones, t, tz[i][0] != '\0' ? tz[i] : NULL, now, &zone, errstr,
                                   errlen) < 0)
            goto done;
        snprintf(vals[i][0], sizeof vals[i][0], "%" PRId64, zone.release_ms);
        dsp_wait_wave_value(&zone, vals[i][1], sizeof vals[i][1]);
        argv[3 + 3 * i] = vals[i][0];
        argv[4 + 3 * i] = members->element[i]->str;
        argv[5 + 3 * i] = vals[i][1];
    }
    reply =
        hr_redis_eval(conn->r, HR_LUA_WAIT_PARK, 3, (int)(3 + 3 * n), argv, NULL, errstr, errlen);
    if (reply == NULL)
        goto done;
    *parked += reply->integer;
    rc = 0;
done:
    freeReplyObject(reply);
    hr_pipe_free(pipe);
    free(missing);
    free(tz);
    free(vals);
    free(argv);
    return rc;
}

/* The lead plan of T (hr_task_leads): pages of its subscriptions with a
 * lead, by uid, each one whose wave is after NOW parked at it (one wave
 * without a window: "-1 UTC").  A wave already past stays in subs: sent at
 * the claim, *AT_CLAIM counts those.  0 or -1. */
static int dsp_wait_plan_leads(dsp_conn *conn, const hr_task *t, int64_t now, int64_t *parked,
                               int64_t *at_claim, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(conn->r);
    char keys[3][HR_KEY_MAX], (*vals)[2][24] = calloc(DSP_WAIT_BATCH, sizeof *vals);
    const char **argv = calloc(3 + 3 * DSP_WAIT_BATCH, sizeof *argv);
    hr_mysql_rows *rows = NULL;
    redisReply *reply = NULL;
    int64_t after = 0;
    int rc = -1;

    if (vals == NULL || argv == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    hr_key_task(prefix, keys[0], sizeof keys[0], t->id, HR_KEY_SUBS);
    hr_key_task(prefix, keys[1], sizeof keys[1], t->id, HR_KEY_WAIT);
    hr_key_task(prefix, keys[2], sizeof keys[2], t->id, HR_KEY_WAVES);
    for (int i = 0; i < 3; i++)
        argv[i] = keys[i];
    for (;;) {
        const hr_mysql_param p[] = {HR_P_I64(t->id), HR_P_I64(after), HR_P_I64(DSP_WAIT_BATCH)};
        size_t n = 0;

        if (hr_mysql_query(conn->m,
                           "SELECT uid, lead_s FROM push_subscription WHERE task_id = ? AND "
                           "uid > ? AND lead_s IS NOT NULL ORDER BY uid LIMIT ?",
                           p, 3, &rows, errstr, errlen) < 0)
            goto done;
        for (size_t r = 0; r < rows->nrows; r++) {
            const char *uid = hr_mysql_cell(rows, r, 0);
            int64_t at =
                hr_task_lead_release_ms(t, strtoll(hr_mysql_cell(rows, r, 1), NULL, 10), now);

            after = strtoll(uid, NULL, 10);
            if (at <= now) {
                ++*at_claim;
                continue;
            }
            snprintf(vals[n][0], sizeof vals[n][0], "%" PRId64, at);
            snprintf(vals[n][1], sizeof vals[n][1], "%s", uid);
            argv[3 + 3 * n] = vals[n][0];
            argv[4 + 3 * n] = vals[n][1];
            argv[5 + 3 * n] = "-1 UTC";
            n++;
        }
        if (n > 0) {
            reply = hr_redis_eval(conn->r, HR_LUA_WAIT_PARK, 3, (int)(3 + 3 * n), argv, NULL,
                                  errstr, errlen);
            if (reply == NULL)
                goto done;
            *parked += reply->integer;
            freeReplyObject(reply);
            reply = NULL;
        }
        if (rows->nrows < DSP_WAIT_BATCH)
            break;
        hr_mysql_rows_free(rows);
        rows = NULL;
    }
    rc = 0;
done:
    hr_mysql_rows_free(rows);
    free(argv);
    free(vals);
    return rc;
}

/* The plan of a local-time, windowed or A/B task T: every member of SUBS
 * parked in batches (dsp_wait_park).  0 or -1. */
static int dsp_wait_plan_zones(dsp_conn *conn, const hr_config *cfg, const hr_task *t,
                               const char *subs, dsp_wait_zones *zones, int64_t now,
                               int64_t *parked, char *errstr, size_t errlen)
{
    redisReply *reply = NULL;
    int64_t left, rounds;
    int rc = -1;

    left = dsp_reply_int(hr_redis_cmdf(conn->r, errstr, errlen, "SCARD %s", subs));
    if (left < 0)
        goto done;
    /* Every batch empties its members from subs (parked, or pulled
     * meanwhile); the bound only guards against a set that keeps growing. */
    for (rounds = left / DSP_WAIT_BATCH + 2; rounds > 0; rounds--) {
        reply = hr_redis_cmdf(conn->r, errstr, errlen, "SRANDMEMBER %s %d", subs, DSP_WAIT_BATCH);
        if (reply == NULL)
            goto done;
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0)
            break;
        if (dsp_wait_park(conn, cfg, t, reply, zones, now, parked, errstr, errlen) < 0)
            goto done;
        freeReplyObject(reply);
        reply = NULL;
    }
    if (rounds == 0) {
        snprintf(errstr, errlen, "subs still not empty after %" PRId64 " batches",
                 left / DSP_WAIT_BATCH + 2);
        goto done;
    }
    rc = 0;
done:
    freeReplyObject(reply);
    return rc;
}

int dsp_wait_plan(dsp_conn *conn, const hr_config *cfg, int64_t id, int64_t *parked, char *errstr,
                  size_t errlen)
{
    const char *prefix = hr_redis_prefix(conn->r);
    char subs[HR_KEY_MAX], waves[HR_KEY_MAX];
    dsp_wait_zones zones = {0};
    hr_task *t = NULL;
    int64_t left, now, at_claim = 0;
    int rc = -1;

    *parked = 0;
    /* Redis's clock, as the release's: an instant already past is released
     * at NOW, and an owner ahead of it stamped its own now, the skew late
     * by the release's clock (clock-ahead: the first push 19 s late). */
    if (hr_redis_time_ms(conn->r, &now, errstr, errlen) < 0)
        return -1;
    rc = hr_task_load(conn->m, id, &t, errstr, errlen);
    if (rc != 0 || (!hr_task_waits(t) && !hr_task_leads(t))) {
        rc = rc == 1 ? 0 : rc; /* a vanished row: nothing to plan */
        goto done;
    }
    rc = -1;
    hr_key_task(prefix, subs, sizeof subs, id, HR_KEY_SUBS);
    hr_key_task(prefix, waves, sizeof waves, id, HR_KEY_WAVES);
    left = dsp_reply_int(hr_redis_cmdf(conn->r, errstr, errlen, "HEXISTS %s planned", waves));
    if (left != 0) {
        rc = left == 1 ? 0 : -1;
        goto done;
    }
    /* hr_task_validate: leads with none of the others */
    if (hr_task_leads(t)
            ? dsp_wait_plan_leads(conn, t, now, parked, &at_claim, errstr, errlen) < 0
            : dsp_wait_plan_zones(conn, cfg, t, subs, &zones, now, parked, errstr, errlen) < 0)
        goto done;
    rc = dsp_reply_int(hr_redis_cmdf(conn->r, errstr, errlen, "HSET %s planned 1", waves)) < 0 ? -1
                                                                                               : 0;
    if (rc == 0)
        hr_log_info("task_planned",
                    "task=%" PRId64 " parked=%" PRId64 " zones=%zu leads_at_claim=%" PRId64, id,
                    *parked, zones.n, at_claim);
done:
    hr_vec_free(&zones);
    hr_task_free(t);
    return rc;
}

/* Moves the members of DT's wave RELEASE, whose window closed, to the
 * window's next opening in ZONE after CLOSE.  0 or -1. */
static int dsp_wait_defer_wave(dsp_conn *conn, const dsp_task *dt, int64_t release, int64_t close,
                               const char *zone, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(conn->r);
    char wait[HR_KEY_MAX], waves[HR_KEY_MAX], old_s[24], new_s[24], value[DSP_WAIT_WAVE_VALUE];
    char max_s[24];
    const char *argv[6] = {wait, waves, old_s, new_s, value, max_s};
    /* hr_release_at reads only the window and due_at of the task. */
    hr_task t = {.id = dt->id,
                 .due_ms = dt->due_ms,
                 .window = true,
                 .window_start_s = dt->window_start_s,
                 .window_end_s = dt->window_end_s,
                 .window_tz = dt->window_tz[0] != '\0' ? (char *)dt->window_tz : NULL};
    dsp_wait_zone next = {0};
    int64_t moved;

    if (hr_release_at(&t, zone, close, &next.release_ms, &next.close_ms, errstr, errlen) < 0)
        return -1;
    snprintf(next.name, sizeof next.name, "%s", zone);
    hr_key_shard(prefix, wait, sizeof wait, dt->id, DSP_WAIT_SHARD(dt), HR_KEY_WAIT);
    hr_key_shard(prefix, waves, sizeof waves, dt->id, DSP_WAIT_SHARD(dt), HR_KEY_WAVES);
    snprintf(old_s, sizeof old_s, "%" PRId64, release);
    snprintf(new_s, sizeof new_s, "%" PRId64, next.release_ms);
    snprintf(max_s, sizeof max_s, "%d", DSP_WAIT_BATCH);
    dsp_wait_wave_value(&next, value, sizeof value);
    do {
        moved = dsp_reply_int(
            hr_redis_eval(conn->r, HR_LUA_WAIT_DEFER, 2, 6, argv, NULL, errstr, errlen));
        if (moved < 0)
            return -1;
        if (moved > 0)
            hr_log_info("wave_deferred",
                        "task=%" PRId64 " from=%" PRId64 " to=%" PRId64 " recipients=%" PRId64
                        " zone=%s",
                        dt->id, release, next.release_ms, moved, zone);
    } while (moved == DSP_WAIT_BATCH);
    return 0;
}

/* The release bound of a windowed task at NOW: the earliest due wave whose
 * window is still open (into *UPTO: release only up to its instant, so a
 * chunk never takes members of a later wave whose window closed), after
 * putting off each earlier one whose window closed (its close <= NOW).
 * *UPTO is NOW when nothing is due.  0 or -1. */
static int dsp_wait_open_bound(dsp_conn *conn, const dsp_task *dt, int64_t now, int64_t *upto,
                               char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(conn->r);
    char wait[HR_KEY_MAX], waves[HR_KEY_MAX];
    redisReply *first = NULL, *wave = NULL;
    int rc = -1;

    *upto = now;
    hr_key_shard(prefix, wait, sizeof wait, dt->id, DSP_WAIT_SHARD(dt), HR_KEY_WAIT);
    hr_key_shard(prefix, waves, sizeof waves, dt->id, DSP_WAIT_SHARD(dt), HR_KEY_WAVES);
    /* Each round moves a closed wave past NOW, so the next round sees a
     * later one; the bound only guards against a Redis that keeps
     * answering the same wave. */
    for (int round = 0; round < 64; round++) {
        char zone[HR_TZ_NAME_MAX + 1];
        int64_t release, close;

        first = hr_redis_cmdf(conn->r, errstr, errlen,
                              "ZRANGEBYSCORE %s -inf %" PRId64 " WITHSCORES LIMIT 0 1", wait, now);
        if (first == NULL)
            goto done;
        if (first->type != REDIS_REPLY_ARRAY || first->elements < 2) {
            rc = 0; /* nothing due */
            goto done;
        }
        release = strtoll(first->element[1]->str, NULL, 10);
        wave = hr_redis_cmdf(conn->r, errstr, errlen, "HGET %s %" PRId64, waves, release);
        if (wave == NULL)
            goto done;
        if (wave->type != REDIS_REPLY_STRING ||
            sscanf(wave->str, "%" SCNd64 " %64s", &close, zone) != 2 || close < 0 || close > now) {
            *upto = release; /* open (or a wave without a record: released) */
            rc = 0;
            goto done;
        }
        if (dsp_wait_defer_wave(conn, dt, release, close, zone, errstr, errlen) < 0)
            goto done;
        freeReplyObject(first);
        freeReplyObject(wave);
        first = wave = NULL;
    }
    snprintf(errstr, errlen, "closed waves keep coming back");
done:
    freeReplyObject(first);
    freeReplyObject(wave);
    return rc;
}

int64_t dsp_wait_release(dsp_conn *conn, const dsp_task *dt, int64_t now, int64_t max,
                         int64_t *next_ms, int64_t *left, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(conn->r);
    char keys[3][HR_KEY_MAX], now_s[24], max_s[24];
    const char *argv[5] = {keys[0], keys[1], keys[2], now_s, max_s};
    redisReply *reply;
    int64_t released = -1, upto, rnow, skew;

    /* Redis's clock decides what is due, so that an owner whose host clock
     * is off releases a wave on time (docs/architecture.md "Clocks"); the
     * next release instant goes back in the host's clock, which the
     * chunker sleeps by. */
    if (hr_redis_time_ms(conn->r, &rnow, errstr, errlen) < 0)
        return -1;
    skew = rnow - now;
    upto = rnow;
    if (dt->window && dsp_wait_open_bound(conn, dt, rnow, &upto, errstr, errlen) < 0)
        return -1;
    hr_key_shard(prefix, keys[0], sizeof keys[0], dt->id, DSP_WAIT_SHARD(dt), HR_KEY_WAIT);
    hr_key_shard(prefix, keys[1], sizeof keys[1], dt->id, DSP_WAIT_SHARD(dt), HR_KEY_SUBS);
    hr_key_shard(prefix, keys[2], sizeof keys[2], dt->id, DSP_WAIT_SHARD(dt), HR_KEY_WAVES);
    snprintf(now_s, sizeof now_s, "%" PRId64, upto);
    snprintf(max_s, sizeof max_s, "%" PRId64, max);
    reply = hr_redis_eval(conn->r, HR_LUA_WAIT_RELEASE, 3, 5, argv, NULL, errstr, errlen);
    if (reply == NULL)
        return -1;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        reply->element[1]->type != REDIS_REPLY_INTEGER ||
        reply->element[2]->type != REDIS_REPLY_INTEGER) {
        snprintf(errstr, errlen, "wait_release: unexpected reply");
        goto done;
    }
    released = reply->element[0]->integer;
    *next_ms = reply->element[1]->integer >= 0 ? reply->element[1]->integer - skew : -1;
    *left = reply->element[2]->integer;
done:
    freeReplyObject(reply);
    return released;
}
