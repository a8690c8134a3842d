/* wk_consent: an open's read of its recipients and their consent (see
 * wk_consent.h). */
#include "wk_consent.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_consent.h"
#include "hr_keys.h"
#include "hr_pipe.h"
#include "hr_release.h"
#include "hr_tz.h"
#include "hr_user.h"

/* Distinct (zone, quiet hours) an open remembers the verdict of: users
 * share a few zones and a few quiet hours, so each is worked out once. */
#define WK_CONSENT_QUIET_CACHE 64
#define WK_CONSENT_WAVE_VALUE 96 /* "<close ms> <zone>", as dsp_wait's */

/* ---- the read ------------------------------------------------------------------ */

/* Whether both books the read needs are in Redis (their synced marks);
 * with USERS, whether the profile book is known to be empty (*NO_PROFILES:
 * no profile hash exists, hr_user_book_empty). */
static int wk_consent_marks(hr_redis *r, bool addresses, bool users, bool *no_profiles,
                            char *errstr, size_t errlen)
{
    char akey[HR_KEY_MAX], ukey[HR_KEY_MAX], bkey[HR_KEY_MAX];
    const char *aargv[] = {"EXISTS", hr_key_addr_synced(hr_redis_prefix(r), akey, sizeof akey)};
    const char *uargv[] = {"EXISTS", hr_key_user_synced(hr_redis_prefix(r), ukey, sizeof ukey)};
    const char *bargv[] = {"HMGET", hr_key_user_book(hr_redis_prefix(r), bkey, sizeof bkey),
                           "writes", "empty"};
    size_t marks = (size_t)addresses + (size_t)users;
    hr_pipe *pipe = hr_pipe_new(r);
    int rc = -1;

    *no_profiles = false;
    if (pipe == NULL || (addresses && hr_pipe_cmd(pipe, 2, aargv, NULL) != 0) ||
        (users &&
         (hr_pipe_cmd(pipe, 2, uargv, NULL) != 0 || hr_pipe_cmd(pipe, 4, bargv, NULL) != 0))) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    if (hr_pipe_exec(pipe, errstr, errlen) != 0)
        goto done;
    for (size_t i = 0; i < marks; i++) {
        redisReply *reply = hr_pipe_reply(pipe, i, errstr, errlen);
        bool synced = reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;

        freeReplyObject(reply);
        /* Without its mark Redis lost the book (a flush, a restart without
         * its AOF) and the dispatchers' sync has not rebuilt it yet: an
         * empty key would read as "no opt-out" or "no address". */
        if (!synced) {
            snprintf(errstr, errlen,
                     "the %s book is not in Redis (no %s): waiting for the dispatchers' sync",
                     addresses && i == 0 ? "address" : "profile",
                     addresses && i == 0 ? akey : ukey);
            goto done;
        }
    }
    if (users) {
        redisReply *reply = hr_pipe_reply(pipe, marks, errstr, errlen);

        *no_profiles = hr_user_book_empty(reply);
        freeReplyObject(reply);
    }
    rc = 0;
done:
    hr_pipe_free(pipe);
    return rc;
}

/* Queues member I's reads: its profile hash (all of it, or the consent
 * fields), its address set.  0 or -1. */
static int wk_consent_queue(const wk_consent *cs, hr_pipe *pipe, const char *prefix,
                            const char *uid, bool user, bool addressed)
{
    char ukey[HR_KEY_MAX], akey[HR_KEY_MAX];
    const char *hgetall[] = {"HGETALL", ukey};
    const char *hmget[] = {"HMGET",         ukey, HR_USER_F_TZ, HR_USER_F_QUIET, HR_USER_F_OPTOUT,
                           HR_USER_F_LOCALE};
    const char *smembers[] = {"SMEMBERS", akey};

    /* A valid uid always fits a key. */
    hr_key_user(prefix, ukey, sizeof ukey, uid);
    hr_key_addr(prefix, akey, sizeof akey, uid);
    if (user && (cs->full_users ? hr_pipe_cmd(pipe, 2, hgetall, NULL)
                                : hr_pipe_cmd(pipe, 6, hmget, NULL)) != 0)
        return -1;
    return addressed ? hr_pipe_cmd(pipe, 2, smembers, NULL) : 0;
}

int wk_consent_read(wk_consent *cs, hr_redis *r, const wk_chunk *c, const redisReply *members,
                    size_t from, size_t to, const hr_addr_platform *platform, const char *app,
                    char *errstr, size_t errlen)
{
    const wk_task *wt = c->task;
    /* Per-locale variants pick by the profile's locale (A/B arms by the
     * uid alone). */
    bool locales = wt->variants.n > 0 && !hr_variant_is_split(&wt->variants);
    bool user = wt->uses_user || !wt->mandatory || locales;
    size_t n = to - from;
    hr_pipe *pipe = NULL;
    int rc = -1;

    cs->from = from;
    cs->n = n;
    cs->full_users = wt->uses_user;
    cs->verdicts = calloc(n ? n : 1, sizeof *cs->verdicts);
    if (cs->verdicts == NULL)
        goto oom;
    for (size_t k = 0; k < n; k++)
        if (members->element[from + k]->type != REDIS_REPLY_STRING ||
            !wk_chunk_uid_valid(members->element[from + k]->str))
            cs->verdicts[k] = WK_CONSENT_SKIP;
    if (!user && platform == NULL)
        return 0;
    /* The marks once an open, with its first part; the later parts go by
     * what it found (the open's done kept it in C before submitting them). */
    if (from == 0) {
        if (wk_consent_marks(r, platform != NULL, !wt->mandatory || locales, &cs->no_profiles,
                             errstr, errlen) != 0)
            return -1;
    } else {
        cs->no_profiles = c->no_profiles;
    }
    /* With no profile anywhere each HMGET would answer nothing, as no read
     * does: the verdicts and locales are those of an absent profile.  (A
     * template's HGETALL is still made: its empty answer is what it
     * renders.) */
    if (cs->no_profiles && !wt->uses_user)
        user = false;
    if (!user && platform == NULL)
        return 0;
    if ((user && (cs->users = calloc(n ? n : 1, sizeof *cs->users)) == NULL) ||
        (platform != NULL &&
         ((cs->addr_first = calloc(n ? n : 1, sizeof *cs->addr_first)) == NULL ||
          (cs->addr_n = calloc(n ? n : 1, sizeof *cs->addr_n)) == NULL)))
        goto oom;
    /* Made only for a read: a chunk that reads nothing allocates none. */
    if ((cs->arena = hr_arena_new()) == NULL || (pipe = hr_pipe_new(r)) == NULL)
        goto oom;
    hr_pipe_set_arena(pipe, cs->arena);
    for (size_t at = 0; at < n; at += HR_ADDR_FETCH_BATCH) {
        size_t end = n - at < HR_ADDR_FETCH_BATCH ? n : at + HR_ADDR_FETCH_BATCH, q = 0;

        hr_pipe_reset(pipe);
        for (size_t k = at; k < end; k++)
            if (cs->verdicts[k] != WK_CONSENT_SKIP &&
                wk_consent_queue(cs, pipe, hr_redis_prefix(r), members->element[from + k]->str,
                                 user, platform != NULL) != 0)
                goto oom;
        if (hr_pipe_exec(pipe, errstr, errlen) != 0)
            goto done;
        for (size_t k = at; k < end; k++) {
            const char *uid = members->element[from + k]->str;
            char detail[256];

            if (cs->verdicts[k] == WK_CONSENT_SKIP)
                continue;
            /* The batch was read whole: an error reply concerns this key
             * alone (WRONGTYPE: written by hand), and the member goes on
             * without it. */
            if (user && (cs->users[k] = hr_pipe_reply(pipe, q++, detail, sizeof detail)) == NULL &&
                cs->user_errors++ == 0)
                snprintf(cs->user_error, sizeof cs->user_error, "uid=%.40s error=%.100s", uid,
                         detail);
            if (platform != NULL) {
                redisReply *reply = hr_pipe_reply(pipe, q++, detail, sizeof detail);
                int taken = 0;

                cs->addr_first[k] = cs->addrs.a.n;
                if (reply == NULL)
                    cs->bad_addrs++;
                else
                    taken = hr_addr_take(&cs->addrs, reply, strtoll(uid, NULL, 10), from + k,
                                         *platform, app, &cs->bad_addrs);
                if (taken != 0)
                    goto oom;
                cs->addr_n[k] = cs->addrs.a.n - cs->addr_first[k];
            }
        }
    }
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    hr_pipe_free(pipe);
    return rc;
}

/* ---- the verdicts ----------------------------------------------------------------- */

/* The consent fields of a member's profile reply (NULL: absent). */
typedef struct wk_consent_fields {
    const char *tz, *quiet, *optout, *locale;
} wk_consent_fields;

static wk_consent_fields wk_consent_fields_of(const wk_consent *cs, const redisReply *u)
{
    wk_consent_fields f = {0};
    const char **slot[4] = {&f.tz, &f.quiet, &f.optout, &f.locale};
    static const char *const names[4] = {HR_USER_F_TZ, HR_USER_F_QUIET, HR_USER_F_OPTOUT,
                                         HR_USER_F_LOCALE};

    if (u == NULL || u->type != REDIS_REPLY_ARRAY)
        return f;
    if (!cs->full_users) {
        /* HMGET: the four values in order */
        for (size_t k = 0; k < 4 && k < u->elements; k++)
            if (u->element[k]->type == REDIS_REPLY_STRING)
                *slot[k] = u->element[k]->str;
        return f;
    }
    for (size_t i = 0; i + 1 < u->elements; i += 2) {
        const redisReply *k = u->element[i], *v = u->element[i + 1];

        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        for (size_t s = 0; s < 4; s++)
            if (strcmp(k->str, names[s]) == 0)
                *slot[s] = v->str;
    }
    return f;
}

const char *wk_consent_locale(const wk_consent *cs, size_t k)
{
    return wk_consent_fields_of(cs, cs->users != NULL ? cs->users[k] : NULL).locale;
}

/* One remembered quiet-hours verdict. */
typedef struct wk_consent_quiet {
    char tz[HR_TZ_NAME_MAX + 1], quiet[32];
    int defer;
    int64_t release_ms, close_ms;
    char zone[HR_TZ_NAME_MAX + 1];
} wk_consent_quiet;

typedef struct wk_consent_quiets {
    wk_consent_quiet v[WK_CONSENT_QUIET_CACHE];
    size_t n;
    wk_consent_quiet spare; /* past the cache: worked out each time */
    wk_consent_quiet held;  /* an A/B winner step's rest reaching us before the winner */
} wk_consent_quiets;

/* How soon a held recipient (wk_task_held) is released again: the task
 * entry is reloaded at the next chunk (wk_task_cache.c), so the winner the
 * owner wrote before releasing the rest is read by then. */
#define WK_CONSENT_HELD_RETRY_MS 2000

/* Whether a member with the fields F is in its quiet hours at NOW_MS
 * (1, with *OUT's release, close and zone), 0 when not (or its _quiet is
 * not one: a hand-written value), -1 (ERRSTR) when a zone does not load. */
static int wk_consent_quiet_of(wk_consent_quiets *qs, const hr_task *t, const wk_consent_fields *f,
                               int64_t now_ms, const wk_consent_quiet **out, char *errstr,
                               size_t errlen)
{
    const char *tz = f->tz != NULL && strlen(f->tz) <= HR_TZ_NAME_MAX ? f->tz : "";
    wk_consent_quiet *e = NULL;
    hr_user_quiet q;
    const char *zone;

    if (strlen(f->quiet) >= sizeof qs->spare.quiet || hr_consent_parse_quiet(f->quiet, &q) != 0)
        return 0;
    for (size_t i = 0; i < qs->n; i++)
        if (strcmp(qs->v[i].tz, tz) == 0 && strcmp(qs->v[i].quiet, f->quiet) == 0) {
            *out = &qs->v[i];
            return qs->v[i].defer;
        }
    e = qs->n < WK_CONSENT_QUIET_CACHE ? &qs->v[qs->n++] : &qs->spare;
    memset(e, 0, sizeof *e);
    snprintf(e->tz, sizeof e->tz, "%s", tz);
    snprintf(e->quiet, sizeof e->quiet, "%s", f->quiet);
    e->defer = hr_consent_quiet(t, *tz ? tz : NULL, &q, now_ms, &e->release_ms, &e->close_ms, &zone,
                                errstr, errlen);
    if (e->defer < 0) {
        if (e != &qs->spare)
            qs->n--;
        return -1;
    }
    snprintf(e->zone, sizeof e->zone, "%s", zone);
    *out = e;
    return e->defer;
}

/* The member CS->from + K's verdict at NOW_MS; a deferral's release, close
 * and zone into *QUIET.  -1 (ERRSTR) when a zone does not load. */
static int wk_consent_verdict_of(wk_consent *cs, const wk_chunk *c, size_t k, wk_consent_quiets *qs,
                                 int64_t now_ms, const wk_consent_quiet **quiet, char *errstr,
                                 size_t errlen)
{
    const wk_task *wt = c->task;
    wk_consent_fields f = wk_consent_fields_of(cs, cs->users != NULL ? cs->users[k] : NULL);
    int rc;

    if (!wt->mandatory && hr_consent_opted_out(f.optout, hr_task_category(wt->row),
                                               hr_channel_type_name(wt->ch->type)))
        return WK_CONSENT_OPTED_OUT;
    if (cs->addr_n != NULL && cs->addr_n[k] > 0) {
        size_t keep =
            hr_consent_addresses(&cs->addrs.a.v[cs->addr_first[k]], cs->addr_n[k], wt->mandatory);

        if (keep == 0)
            return WK_CONSENT_SUPPRESSED;
        cs->addr_n[k] = keep;
    }
    if (wt->mandatory || f.quiet == NULL)
        return WK_CONSENT_PUSH;
    rc = wk_consent_quiet_of(qs, wt->row, &f, now_ms, quiet, errstr, errlen);
    return rc < 0 ? -1 : rc == 1 ? WK_CONSENT_DEFER : WK_CONSENT_PUSH;
}

int wk_consent_decide(wk_consent *cs, hr_redis *r, const wk_chunk *c, const redisReply *members,
                      int64_t now_ms, char *errstr, size_t errlen)
{
    size_t n = cs->n, ndefer = 0, at = 0;
    wk_consent_quiets *qs = NULL;
    wk_chunk_acks a = {0};
    const char **park = NULL;
    char(*vals)[2][WK_CONSENT_WAVE_VALUE] = NULL;
    hr_pipe *pipe = NULL;
    redisReply *reply = NULL;
    int rc = -1;

    if ((qs = calloc(1, sizeof *qs)) == NULL || (park = calloc(3 + 3 * n, sizeof *park)) == NULL ||
        (vals = calloc(n ? n : 1, sizeof *vals)) == NULL)
        goto oom;
    park[0] = c->k_set;
    park[1] = c->k_wait;
    park[2] = c->k_waves;
    qs->held = (wk_consent_quiet){.release_ms = now_ms + WK_CONSENT_HELD_RETRY_MS,
                                  .close_ms = HR_RELEASE_NEVER,
                                  .zone = "UTC"};
    for (size_t k = 0; k < n; k++) {
        const wk_consent_quiet *quiet = NULL;
        const char *uid = members->element[cs->from + k]->str;
        int v;

        if (cs->verdicts[k] == WK_CONSENT_SKIP)
            continue;
        /* Held: this entry of the task predates its winner (rare: a chunk
         * of the sample still held it); back to wait, never the default. */
        if (wk_task_held(c->task, uid)) {
            v = WK_CONSENT_DEFER;
            quiet = &qs->held;
        } else if ((v = wk_consent_verdict_of(cs, c, k, qs, now_ms, &quiet, errstr, errlen)) < 0) {
            goto done;
        }
        cs->verdicts[k] = (uint8_t)v;
        /* With the events gate the loop acknowledges them, behind their
         * events (wk_lifecycle_consent). */
        if ((v == WK_CONSENT_OPTED_OUT || v == WK_CONSENT_SUPPRESSED) && c->gate == NULL &&
            wk_chunk_acks_add(&a, n,
                              v == WK_CONSENT_OPTED_OUT ? WK_CHUNK_OPTED_OUT : WK_CHUNK_SUPPRESSED,
                              uid, NULL) < 0)
            goto oom;
        if (v != WK_CONSENT_DEFER)
            continue;
        /* The wave of the release instant, as the dispatcher's plan records
         * it: the task window's close (-1: none) and the zone. */
        snprintf(vals[ndefer][0], sizeof vals[ndefer][0], "%" PRId64, quiet->release_ms);
        snprintf(vals[ndefer][1], sizeof vals[ndefer][1], "%" PRId64 " %s",
                 quiet->close_ms == HR_RELEASE_NEVER ? (int64_t)-1 : quiet->close_ms, quiet->zone);
        park[3 + 3 * ndefer] = vals[ndefer][0];
        park[4 + 3 * ndefer] = uid;
        park[5 + 3 * ndefer] = vals[ndefer][1];
        ndefer++;
    }
    if (wk_chunk_acks_ncalls(&a) == 0 && ndefer == 0) {
        rc = 0;
        goto done;
    }
    if ((pipe = hr_pipe_new(r)) == NULL || wk_chunk_acks_queue(c, &a, pipe) != 0 ||
        (ndefer > 0 &&
         hr_pipe_eval(pipe, HR_LUA_WAIT_PARK, 3, (int)(3 + 3 * ndefer), park, NULL) != 0))
        goto oom;
    /* A connection that failed makes every reply below report it. */
    hr_pipe_exec(pipe, errstr, errlen);
    wk_chunk_acks_read(&a, pipe, &at, wk_chunk_acks_ncalls(&a), &cs->acked);
    if (cs->acked.rc != 0) {
        snprintf(errstr, errlen, "%s", cs->acked.errstr);
        goto done;
    }
    cs->opted_out = cs->acked.removed[WK_CHUNK_OPTED_OUT];
    cs->suppressed = cs->acked.removed[WK_CHUNK_SUPPRESSED];
    if (ndefer > 0) {
        if ((reply = hr_pipe_reply(pipe, at, errstr, errlen)) == NULL)
            goto done;
        if (reply->type != REDIS_REPLY_INTEGER) {
            snprintf(errstr, errlen, "wait_park: unexpected reply");
            goto done;
        }
        cs->deferred = reply->integer;
    }
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    freeReplyObject(reply);
    hr_pipe_free(pipe);
    wk_chunk_acks_free(&a);
    free(vals);
    free(park);
    free(qs);
    return rc;
}

void wk_consent_free(wk_consent *cs)
{
    free(cs->users);
    hr_arena_free(cs->arena);
    hr_addr_list_free(&cs->addrs);
    free(cs->addr_first);
    free(cs->addr_n);
    free(cs->verdicts);
    memset(cs, 0, sizeof *cs);
}
