/* hr_user: the recipients' profiles and preferences (docs/recipients.md),
 * dual-stored like the address book.
 *
 * MySQL's push_user (zone, locale, attributes, quiet hours) and
 * push_user_pref (opt-outs) are the truth (schemas/mysql/014_users.sql);
 * Redis holds one hash per uid, herald:user:<uid> (hr_key_user), which the
 * worker's templates (user.<field>), its consent check (hr_consent.h) and
 * the dispatcher's local-time plan read:
 *
 *   tz, locale          the profile's, when set
 *   <attribute>         each top-level key of the attributes object: a
 *                       string as it is, any other value as its JSON text
 *                       (a null leaves the field out)
 *   _quiet              "<start s>-<end s>": the quiet hours, seconds of
 *                       the local day, end exclusive (may wrap midnight)
 *   _optout             "<category>/<channel>,...": the opt-outs, '*'
 *                       standing for every category or channel type
 *
 * Attribute keys are [A-Za-z][A-Za-z0-9_]{0,63} and neither tz nor locale,
 * so no attribute can shadow a field herald reads.  Every write here
 * changes MySQL, then rewrites the uid's hash from the rows MySQL holds
 * (user_set.lua, in hr_user_store.c); raw SQL reaches Redis through the
 * book's mirror (hr_user_mirror, hr_mirror.h), which leaves out, counts
 * and logs what it refuses (an unknown zone, oversized attributes) — a
 * refused zone or attributes never turns into a silent default, and a
 * refused profile still carries its opt-outs and quiet hours.
 *
 * Thread use follows the connections passed in; no logging; errors are -1
 * (HR_USER_EINVAL for a value the checks refuse) with ERRSTR. */
#ifndef HR_USER_H
#define HR_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "hr_config.h"
#include "hr_mirror.h"
#include "hr_mysql.h"
#include "hr_redis.h"

#define HR_USER_LOCALE_MAX 35    /* push_user.locale: a BCP 47 tag */
#define HR_USER_ATTR_KEY_MAX 64  /* an attribute's key */
#define HR_USER_OPTOUTS_MAX 256  /* opt-out rows per uid */
#define HR_USER_CHANNEL_MAX 16   /* push_user_pref.channel */
#define HR_USER_IMPORT_BATCH 500 /* rows per multi-row statement and rewrite */

/* The hash's fields herald reads besides the attributes. */
#define HR_USER_F_TZ "tz"
#define HR_USER_F_LOCALE "locale"
#define HR_USER_F_QUIET "_quiet"
#define HR_USER_F_OPTOUT "_optout"

#define HR_USER_EINVAL -2 /* a value the checks refuse (ERRSTR names it) */

/* Quiet hours: seconds of the local day; SET false = none. */
typedef struct hr_user_quiet {
    bool set;
    int32_t start_s, end_s; /* end exclusive; end < start wraps midnight */
} hr_user_quiet;

/* One opt-out: CATEGORY (or "*") by channels of type CHANNEL (or "*"). */
typedef struct hr_user_optout {
    char category[HR_CATEGORY_NAME_MAX + 1];
    char channel[HR_USER_CHANNEL_MAX + 1];
} hr_user_optout;

/* Who wrote an opt-out (push_user_pref.source). */
typedef enum hr_user_source {
    HR_USER_SRC_ADMIN,       /* the admin API, heraldctl */
    HR_USER_SRC_APP,         /* a client token's app */
    HR_USER_SRC_UNSUBSCRIBE, /* the one-click link */
    HR_USER_SRC__COUNT
} hr_user_source;

/* A profile.  Zero-initialise; hr_user_clear frees what it owns. */
typedef struct hr_user {
    int64_t uid;
    char *tz;          /* an IANA zone; NULL = none (the task's default_tz, then UTC) */
    char *locale;      /* NULL = none */
    cJSON *attributes; /* an object; NULL = none */
    hr_user_quiet quiet;
    int64_t created_ms, updated_ms; /* 0 for a profile not read from MySQL */
} hr_user;

/* A uid's preferences: its quiet hours and opt-outs. */
typedef struct hr_user_prefs {
    hr_user_quiet quiet;
    hr_user_optout *optouts; /* owned */
    size_t noptouts;
} hr_user_prefs;

void hr_user_clear(hr_user *u);
void hr_user_prefs_clear(hr_user_prefs *p);

/* ---- values ---------------------------------------------------------------- */

/* "push_user_pref.source" names: "admin", "app", "unsubscribe". */
const char *hr_user_source_name(hr_user_source s);

/* Whether S is a BCP 47-like tag: 2..8 letters, then '-'-separated groups
 * of 1..8 letters or digits, 2..HR_USER_LOCALE_MAX bytes in all (a
 * profile's locale, a task variant's). */
bool hr_user_locale_valid(const char *s);

/* The checks of a profile: TZ a zone hr_tz loads, LOCALE a BCP 47-like tag
 * (letters, digits and '-', 2..35 bytes, starting with 2..8 letters),
 * ATTRIBUTES an object with valid keys whose JSON text is at most
 * recipients.attributes_max_bytes.  0 or HR_USER_EINVAL. */
int hr_user_check(const hr_user *u, const hr_config *cfg, char *errstr, size_t errlen);
/* An opt-out: CATEGORY "*" or a declared category (CFG NULL: any name of
 * [a-z0-9_-]); CHANNEL "*" or a channel type (webhook, fcm, apns, smtp).
 * 0 or HR_USER_EINVAL. */
int hr_user_check_optout(const hr_config *cfg, const char *category, const char *channel,
                         char *errstr, size_t errlen);

/* A profile from a JSON object {"tz", "locale", "attributes", "quiet_hours"}
 * applied to U: every field given replaces U's (null clears it); with
 * PATCH, "attributes" is merged key by key (a null value removes the key,
 * RFC 7386) instead of replaced.  Unknown fields are refused.  Checked
 * (hr_user_check) at the end.  0 or HR_USER_EINVAL. */
int hr_user_from_json(const cJSON *j, const hr_config *cfg, bool patch, hr_user *u, char *errstr,
                      size_t errlen);
/* U as {"uid", "tz", "locale", "attributes", "quiet_hours", "created_at",
 * "updated_at"} (the caller's, freed with cJSON_Delete); NULL when out of
 * memory. */
cJSON *hr_user_to_json(const hr_user *u);
/* Preferences from {"opt_out": [{"category", "channel"}...], "quiet_hours":
 * {"start": "HH:MM", "end": "HH:MM"} | null}; a field left out keeps P's.
 * 0 or HR_USER_EINVAL. */
int hr_user_prefs_from_json(const cJSON *j, const hr_config *cfg, hr_user_prefs *p, char *errstr,
                            size_t errlen);
/* {"uid", "opt_out", "quiet_hours", "categories": [{"name", "mandatory"}]}. */
cJSON *hr_user_prefs_to_json(int64_t uid, const hr_user_prefs *p, const hr_config *cfg);
/* Quiet hours as {"start": "HH:MM[:SS]", "end": ...} or a JSON null. */
cJSON *hr_user_quiet_json(const hr_user_quiet *q);
/* Appends the opt-out CATEGORY/CHANNEL to P unless held already.  0, or
 * HR_USER_EINVAL when P holds HR_USER_OPTOUTS_MAX, or -1 out of memory. */
int hr_user_prefs_add(hr_user_prefs *p, const char *category, const char *channel, char *errstr,
                      size_t errlen);

/* ---- the two stores (hr_user_store.c) ---------------------------------------- */

/* UID's profile from MySQL into *OUT (cleared first).  0, 1 when there is
 * none, or -1. */
int hr_user_get(hr_mysql *m, int64_t uid, hr_user *out, char *errstr, size_t errlen);
/* Writes U (checked first) as UID's whole profile, created or replaced
 * (its preferences stay), then its hash.  1 created, 0 replaced,
 * HR_USER_EINVAL, or -1. */
int hr_user_put(hr_mysql *m, hr_redis *r, const hr_user *u, const hr_config *cfg, char *errstr,
                size_t errlen);
/* Applies the JSON object PATCH (hr_user_from_json with patch) to UID's
 * profile in one transaction, then its hash; *OUT gets the result.  0, 1
 * when UID has no profile (nothing changed), HR_USER_EINVAL, or -1. */
int hr_user_patch(hr_mysql *m, hr_redis *r, int64_t uid, const cJSON *patch, const hr_config *cfg,
                  hr_user *out, char *errstr, size_t errlen);
/* Removes UID's profile and preferences from both stores.  1 removed, 0
 * there was none, or -1. */
int hr_user_delete(hr_mysql *m, hr_redis *r, int64_t uid, char *errstr, size_t errlen);
/* UID's preferences from MySQL into *OUT (cleared first; none = empty).
 * 0 or -1. */
int hr_user_prefs_get(hr_mysql *m, int64_t uid, hr_user_prefs *out, char *errstr, size_t errlen);
/* Makes UID's preferences exactly P (a profile row is created when there
 * is none), written by SOURCE, in one transaction, then its hash.  0,
 * HR_USER_EINVAL, or -1. */
int hr_user_prefs_put(hr_mysql *m, hr_redis *r, int64_t uid, const hr_user_prefs *p,
                      hr_user_source source, const hr_config *cfg, char *errstr, size_t errlen);
/* Adds one opt-out of UID (the one-click unsubscribe), then its hash.  1
 * added, 0 held already, HR_USER_EINVAL, or -1. */
int hr_user_opt_out(hr_mysql *m, hr_redis *r, int64_t uid, const char *category,
                    const char *channel, hr_user_source source, const hr_config *cfg, char *errstr,
                    size_t errlen);

/* What hr_user_import did with its rows. */
typedef struct hr_user_import_result {
    size_t created;  /* new profiles */
    size_t replaced; /* profiles MySQL held already, replaced */
} hr_user_import_result;

/* Bulk import of N checked profiles (the caller checked each with
 * hr_user_check and reports the ones refused; a uid given twice keeps its
 * last): multi-row upserts of HR_USER_IMPORT_BATCH in one transaction,
 * then their hashes in pipelined round trips.  0 or -1. */
int hr_user_import(hr_mysql *m, hr_redis *r, const hr_user *users, size_t n, const hr_config *cfg,
                   hr_user_import_result *res, char *errstr, size_t errlen);

/* The book's mirror (hr_mirror.h): rewrites herald:user:<uid> from
 * push_user and push_user_pref; its context is the hr_config (the
 * attributes' cap); mark herald:user_synced, lock herald:user_lock. */
extern const hr_mirror hr_user_mirror;

/* Whether REPLY, that of HMGET herald:user_book writes empty, says that no
 * profile hash exists: a sync found MySQL's book empty and no rewrite
 * began since (hr_mirror.h, step 6).  A reply of any other shape (a Redis
 * of an older herald has no state) says false: read the profiles. */
bool hr_user_book_empty(const redisReply *reply);

/* The one path that writes the hashes: the N uids at UIDS (sorted in
 * place, repeats dropped) rewritten from MySQL; CTX is the hr_config.
 * Refused values are left out and counted in RES (may be NULL).  0 or
 * -1. */
int hr_user_rewrite(hr_mysql *m, hr_redis *r, int64_t *uids, size_t n, const void *ctx,
                    hr_mirror_result *res, char *errstr, size_t errlen);

#endif
