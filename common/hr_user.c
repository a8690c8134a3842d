/* hr_user: the values of the recipients' profiles and preferences — the
 * checks, the JSON forms the API and heraldctl share (see hr_user.h).  The
 * two stores are hr_user_store.c's. */
#include "hr_user.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_config_channel.h"
#include "hr_parse.h"
#include "hr_tz.h"

#define HR_USER_LETTERS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define HR_USER_DIGITS "0123456789"

static const char *const hr_user_sources[HR_USER_SRC__COUNT] = {
    [HR_USER_SRC_ADMIN] = "admin",
    [HR_USER_SRC_APP] = "app",
    [HR_USER_SRC_UNSUBSCRIBE] = "unsubscribe",
};

const char *hr_user_source_name(hr_user_source s)
{
    return (unsigned)s < HR_USER_SRC__COUNT ? hr_user_sources[s] : "admin";
}

void hr_user_clear(hr_user *u)
{
    free(u->tz);
    free(u->locale);
    cJSON_Delete(u->attributes);
    *u = (hr_user){.uid = u->uid};
}

void hr_user_prefs_clear(hr_user_prefs *p)
{
    free(p->optouts);
    *p = (hr_user_prefs){0};
}

/* ---- checks ------------------------------------------------------------------ */

/* An attribute key: [A-Za-z][A-Za-z0-9_]{0,63}, and not a field herald
 * writes itself. */
static bool hr_user_key_ok(const char *k)
{
    size_t n = strlen(k);

    return n >= 1 && n <= HR_USER_ATTR_KEY_MAX && strchr(HR_USER_LETTERS, k[0]) != NULL &&
           strspn(k, HR_USER_LETTERS HR_USER_DIGITS "_") == n && strcmp(k, HR_USER_F_TZ) != 0 &&
           strcmp(k, HR_USER_F_LOCALE) != 0;
}

bool hr_user_locale_valid(const char *s)
{
    size_t n = strlen(s), lead = strspn(s, HR_USER_LETTERS);
    const char *p = s + lead;

    if (n < 2 || n > HR_USER_LOCALE_MAX || lead < 2 || lead > 8)
        return false;
    while (*p == '-') {
        size_t k = strspn(p + 1, HR_USER_LETTERS HR_USER_DIGITS);

        if (k < 1 || k > 8)
            return false;
        p += 1 + k;
    }
    return *p == '\0';
}

int hr_user_check(const hr_user *u, const hr_config *cfg, char *errstr, size_t errlen)
{
    char detail[160];

    if (u->uid <= 0) {
        snprintf(errstr, errlen, "uid: must be 1..2^63-1");
        return HR_USER_EINVAL;
    }
    if (u->tz != NULL && hr_tz_check(u->tz, detail, sizeof detail) != 0) {
        snprintf(errstr, errlen, "tz \"%.64s\": %s", u->tz, detail);
        return HR_USER_EINVAL;
    }
    if (u->locale != NULL && !hr_user_locale_valid(u->locale)) {
        snprintf(errstr, errlen, "locale \"%.40s\": not a language tag such as de-DE", u->locale);
        return HR_USER_EINVAL;
    }
    if (u->quiet.set && (u->quiet.start_s < 0 || u->quiet.start_s >= 86400 || u->quiet.end_s < 0 ||
                         u->quiet.end_s >= 86400 || u->quiet.start_s == u->quiet.end_s)) {
        snprintf(errstr, errlen, "quiet_hours: start and end must be two different times of day");
        return HR_USER_EINVAL;
    }
    if (u->attributes != NULL) {
        const cJSON *a;
        char *text;
        size_t len;

        if (!cJSON_IsObject(u->attributes)) {
            snprintf(errstr, errlen, "attributes: must be a JSON object");
            return HR_USER_EINVAL;
        }
        cJSON_ArrayForEach(a, u->attributes) if (!hr_user_key_ok(a->string))
        {
            snprintf(errstr, errlen,
                     "attributes: key \"%.70s\" must be 1..%d of A-Z a-z 0-9 _, start with a "
                     "letter, and not be tz or locale",
                     a->string, HR_USER_ATTR_KEY_MAX);
            return HR_USER_EINVAL;
        }
        text = cJSON_PrintUnformatted(u->attributes);
        if (text == NULL) {
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
        len = strlen(text);
        free(text);
        if ((long)len > cfg->recipients.attributes_max_bytes) {
            snprintf(errstr, errlen,
                     "attributes: %zu bytes of JSON, over recipients.attributes_max_bytes %ld", len,
                     cfg->recipients.attributes_max_bytes);
            return HR_USER_EINVAL;
        }
    }
    return 0;
}

int hr_user_check_optout(const hr_config *cfg, const char *category, const char *channel,
                         char *errstr, size_t errlen)
{
    size_t n = strlen(category);
    hr_channel_type type;

    if (strcmp(category, "*") != 0 &&
        (cfg != NULL ? hr_config_category(cfg, category) == NULL
                     : n == 0 || n > HR_CATEGORY_NAME_MAX ||
                           strspn(category, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n)) {
        snprintf(errstr, errlen, "opt_out category \"%.40s\": not \"*\" nor a category of %s",
                 category, cfg != NULL ? "recipients.categories" : "a-z 0-9 _ -");
        return HR_USER_EINVAL;
    }
    if (strcmp(channel, "*") != 0 && hr_channel_type_parse(channel, &type) != 0) {
        snprintf(errstr, errlen,
                 "opt_out channel \"%.20s\": not \"*\" nor a channel type (webhook, fcm, apns, "
                 "smtp)",
                 channel);
        return HR_USER_EINVAL;
    }
    return 0;
}

int hr_user_prefs_add(hr_user_prefs *p, const char *category, const char *channel, char *errstr,
                      size_t errlen)
{
    hr_user_optout *grown;

    for (size_t i = 0; i < p->noptouts; i++)
        if (strcmp(p->optouts[i].category, category) == 0 &&
            strcmp(p->optouts[i].channel, channel) == 0)
            return 0;
    if (p->noptouts >= HR_USER_OPTOUTS_MAX) {
        snprintf(errstr, errlen, "opt_out: at most %d entries", HR_USER_OPTOUTS_MAX);
        return HR_USER_EINVAL;
    }
    if (strlen(category) > HR_CATEGORY_NAME_MAX || strlen(channel) > HR_USER_CHANNEL_MAX) {
        snprintf(errstr, errlen, "opt_out: category or channel too long");
        return HR_USER_EINVAL;
    }
    grown = realloc(p->optouts, (p->noptouts + 1) * sizeof *grown);
    if (grown == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    p->optouts = grown;
    snprintf(grown[p->noptouts].category, sizeof grown->category, "%s", category);
    snprintf(grown[p->noptouts].channel, sizeof grown->channel, "%s", channel);
    p->noptouts++;
    return 0;
}

/* ---- JSON ------------------------------------------------------------------------ */

/* A string field V (or null) into *OUT (replaced).  0 or HR_USER_EINVAL. */
static int hr_user_json_str(const cJSON *v, const char *name, char **out, char *errstr,
                            size_t errlen)
{
    char *copy = NULL;

    if (!cJSON_IsNull(v) && !cJSON_IsString(v)) {
        snprintf(errstr, errlen, "%s: must be a string or null", name);
        return HR_USER_EINVAL;
    }
    if (cJSON_IsString(v) && (copy = strdup(v->valuestring)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    free(*out);
    *out = copy;
    return 0;
}

/* {"start": "HH:MM[:SS]", "end": ...} or null into *Q.  0 or
 * HR_USER_EINVAL. */
static int hr_user_json_quiet(const cJSON *v, hr_user_quiet *q, char *errstr, size_t errlen)
{
    const cJSON *start = cJSON_GetObjectItemCaseSensitive(v, "start");
    const cJSON *end = cJSON_GetObjectItemCaseSensitive(v, "end");
    int64_t s, e;

    if (cJSON_IsNull(v)) {
        *q = (hr_user_quiet){0};
        return 0;
    }
    if (!cJSON_IsObject(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsString(start) ||
        !cJSON_IsString(end)) {
        snprintf(errstr, errlen,
                 "quiet_hours: must be {\"start\": \"HH:MM\", \"end\": \"HH:MM\"} or null");
        return HR_USER_EINVAL;
    }
    if (hr_parse_time_of_day("quiet_hours.start", start->valuestring, &s, errstr, errlen) != 0 ||
        hr_parse_time_of_day("quiet_hours.end", end->valuestring, &e, errstr, errlen) != 0)
        return HR_USER_EINVAL;
    if (s == e) {
        snprintf(errstr, errlen, "quiet_hours: start and end must be two different times of day");
        return HR_USER_EINVAL;
    }
    *q = (hr_user_quiet){.set = true, .start_s = (int32_t)s, .end_s = (int32_t)e};
    return 0;
}

/* RFC 7386 on the attributes: PATCH's keys replace U's, a null removes
 * one; a null PATCH clears them all. */
static int hr_user_json_merge(const cJSON *patch, hr_user *u, char *errstr, size_t errlen)
{
    const cJSON *kv;

    if (cJSON_IsNull(patch)) {
        cJSON_Delete(u->attributes);
        u->attributes = NULL;
        return 0;
    }
    if (!cJSON_IsObject(patch)) {
        snprintf(errstr, errlen, "attributes: must be a JSON object or null");
        return HR_USER_EINVAL;
    }
    if (u->attributes == NULL && (u->attributes = cJSON_CreateObject()) == NULL)
        goto oom;
    cJSON_ArrayForEach(kv, patch)
    {
        cJSON *copy;

        cJSON_DeleteItemFromObjectCaseSensitive(u->attributes, kv->string);
        if (cJSON_IsNull(kv))
            continue;
        if ((copy = cJSON_Duplicate(kv, true)) == NULL ||
            !cJSON_AddItemToObject(u->attributes, kv->string, copy)) {
            cJSON_Delete(copy);
            goto oom;
        }
    }
    return 0;
oom:
    snprintf(errstr, errlen, "out of memory");
    return -1;
}

int hr_user_from_json(const cJSON *j, const hr_config *cfg, bool patch, hr_user *u, char *errstr,
                      size_t errlen)
{
    const cJSON *f;
    int rc = 0;

    if (!cJSON_IsObject(j)) {
        snprintf(errstr, errlen, "the body must be a JSON object");
        return HR_USER_EINVAL;
    }
    cJSON_ArrayForEach(f, j)
    {
        if (strcmp(f->string, "tz") == 0) {
            rc = hr_user_json_str(f, "tz", &u->tz, errstr, errlen);
        } else if (strcmp(f->string, "locale") == 0) {
            rc = hr_user_json_str(f, "locale", &u->locale, errstr, errlen);
        } else if (strcmp(f->string, "quiet_hours") == 0) {
            rc = hr_user_json_quiet(f, &u->quiet, errstr, errlen);
        } else if (strcmp(f->string, "attributes") == 0) {
            if (patch) {
                rc = hr_user_json_merge(f, u, errstr, errlen);
            } else if (!cJSON_IsNull(f) && !cJSON_IsObject(f)) {
                snprintf(errstr, errlen, "attributes: must be a JSON object or null");
                rc = HR_USER_EINVAL;
            } else {
                cJSON_Delete(u->attributes);
                u->attributes = cJSON_IsNull(f) ? NULL : cJSON_Duplicate(f, true);
                if (!cJSON_IsNull(f) && u->attributes == NULL) {
                    snprintf(errstr, errlen, "out of memory");
                    rc = -1;
                }
            }
        } else if (strcmp(f->string, "uid") == 0 || strcmp(f->string, "created_at") == 0 ||
                   strcmp(f->string, "updated_at") == 0) {
            /* what GET answers may be sent back as it is; the path's uid
             * and the store's times stand */
        } else {
            snprintf(errstr, errlen,
                     "unknown field \"%.40s\" (tz, locale, attributes, quiet_hours)", f->string);
            rc = HR_USER_EINVAL;
        }
        if (rc != 0)
            return rc;
    }
    /* An emptied object is no attributes. */
    if (u->attributes != NULL && cJSON_GetArraySize(u->attributes) == 0) {
        cJSON_Delete(u->attributes);
        u->attributes = NULL;
    }
    return hr_user_check(u, cfg, errstr, errlen);
}

/* "HH:MM", or "HH:MM:SS" when the seconds are not 0; S in 0..86399. */
static void hr_user_tod(int32_t s, char *buf, size_t len)
{
    s = s < 0 ? 0 : s % 86400;
    if (s % 60 != 0)
        snprintf(buf, len, "%02d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, len, "%02d:%02d", s / 3600, s / 60 % 60);
}

cJSON *hr_user_quiet_json(const hr_user_quiet *q)
{
    char start[40], end[40];
    cJSON *o;

    if (!q->set)
        return cJSON_CreateNull();
    hr_user_tod(q->start_s, start, sizeof start);
    hr_user_tod(q->end_s, end, sizeof end);
    o = cJSON_CreateObject();
    if (o != NULL && (cJSON_AddStringToObject(o, "start", start) == NULL ||
                      cJSON_AddStringToObject(o, "end", end) == NULL)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Adds NAME: S, or null for a NULL S.  false when out of memory. */
static bool hr_user_add_str(cJSON *o, const char *name, const char *s)
{
    return (s != NULL ? cJSON_AddStringToObject(o, name, s) : cJSON_AddNullToObject(o, name)) !=
           NULL;
}

cJSON *hr_user_to_json(const hr_user *u)
{
    cJSON *o = cJSON_CreateObject(), *attrs = NULL, *quiet = NULL;
    char uid[24], created[48], updated[48];

    if (o == NULL)
        return NULL;
    snprintf(uid, sizeof uid, "%" PRId64, u->uid);
    hr_parse_time_format(u->created_ms, created, sizeof created);
    hr_parse_time_format(u->updated_ms, updated, sizeof updated);
    /* A uid is an exact integer: a raw literal (a cJSON number is a double). */
    if (cJSON_AddRawToObject(o, "uid", uid) == NULL || !hr_user_add_str(o, "tz", u->tz) ||
        !hr_user_add_str(o, "locale", u->locale))
        goto fail;
    attrs = u->attributes != NULL ? cJSON_Duplicate(u->attributes, true) : cJSON_CreateObject();
    if (attrs == NULL || !cJSON_AddItemToObject(o, "attributes", attrs))
        goto fail_attrs;
    quiet = hr_user_quiet_json(&u->quiet);
    if (quiet == NULL || !cJSON_AddItemToObject(o, "quiet_hours", quiet))
        goto fail_quiet;
    if (u->created_ms > 0 && (cJSON_AddStringToObject(o, "created_at", created) == NULL ||
                              cJSON_AddStringToObject(o, "updated_at", updated) == NULL))
        goto fail;
    return o;
fail_attrs:
    cJSON_Delete(attrs);
    goto fail;
fail_quiet:
    cJSON_Delete(quiet);
fail:
    cJSON_Delete(o);
    return NULL;
}

int hr_user_prefs_from_json(const cJSON *j, const hr_config *cfg, hr_user_prefs *p, char *errstr,
                            size_t errlen)
{
    const cJSON *f, *e;
    int rc;

    if (!cJSON_IsObject(j)) {
        snprintf(errstr, errlen, "the body must be a JSON object");
        return HR_USER_EINVAL;
    }
    cJSON_ArrayForEach(f, j)
    {
        if (strcmp(f->string, "quiet_hours") == 0) {
            if ((rc = hr_user_json_quiet(f, &p->quiet, errstr, errlen)) != 0)
                return rc;
            continue;
        }
        if (strcmp(f->string, "uid") == 0 || strcmp(f->string, "categories") == 0)
            continue; /* what GET answers, sent back as it is */
        if (strcmp(f->string, "opt_out") != 0) {
            snprintf(errstr, errlen, "unknown field \"%.40s\" (opt_out, quiet_hours)", f->string);
            return HR_USER_EINVAL;
        }
        if (!cJSON_IsArray(f)) {
            snprintf(errstr, errlen, "opt_out: must be an array of {\"category\", \"channel\"}");
            return HR_USER_EINVAL;
        }
        free(p->optouts);
        p->optouts = NULL;
        p->noptouts = 0;
        cJSON_ArrayForEach(e, f)
        {
            const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "category");
            const cJSON *ch = cJSON_GetObjectItemCaseSensitive(e, "channel");
            const char *c = cJSON_IsString(cat) ? cat->valuestring : NULL;
            const char *t = cJSON_IsString(ch) ? ch->valuestring : NULL;

            if (!cJSON_IsObject(e) || (cat != NULL && c == NULL) || (ch != NULL && t == NULL) ||
                (c == NULL && t == NULL) || cJSON_GetArraySize(e) != (cat != NULL) + (ch != NULL)) {
                snprintf(errstr, errlen,
                         "opt_out: each entry is {\"category\": NAME|\"*\", \"channel\": "
                         "TYPE|\"*\"} (one may be left out: \"*\")");
                return HR_USER_EINVAL;
            }
            if ((rc = hr_user_check_optout(cfg, c ? c : "*", t ? t : "*", errstr, errlen)) != 0 ||
                (rc = hr_user_prefs_add(p, c ? c : "*", t ? t : "*", errstr, errlen)) != 0)
                return rc;
        }
    }
    return 0;
}

cJSON *hr_user_prefs_to_json(int64_t uid, const hr_user_prefs *p, const hr_config *cfg)
{
    cJSON *o = cJSON_CreateObject(), *list, *quiet, *cats;
    char uid_s[24];

    if (o == NULL)
        return NULL;
    snprintf(uid_s, sizeof uid_s, "%" PRId64, uid);
    if (cJSON_AddRawToObject(o, "uid", uid_s) == NULL ||
        (list = cJSON_AddArrayToObject(o, "opt_out")) == NULL)
        goto fail;
    for (size_t i = 0; i < p->noptouts; i++) {
        cJSON *e = cJSON_CreateObject();

        if (e == NULL || !cJSON_AddItemToArray(list, e)) {
            cJSON_Delete(e);
            goto fail;
        }
        if (cJSON_AddStringToObject(e, "category", p->optouts[i].category) == NULL ||
            cJSON_AddStringToObject(e, "channel", p->optouts[i].channel) == NULL)
            goto fail;
    }
    quiet = hr_user_quiet_json(&p->quiet);
    if (quiet == NULL || !cJSON_AddItemToObject(o, "quiet_hours", quiet)) {
        cJSON_Delete(quiet);
        goto fail;
    }
    if ((cats = cJSON_AddArrayToObject(o, "categories")) == NULL)
        goto fail;
    for (size_t i = 0; i < cfg->recipients.ncategories; i++) {
        cJSON *c = cJSON_CreateObject();

        if (c == NULL || !cJSON_AddItemToArray(cats, c)) {
            cJSON_Delete(c);
            goto fail;
        }
        if (cJSON_AddStringToObject(c, "name", cfg->recipients.categories[i].name) == NULL ||
            cJSON_AddBoolToObject(c, "mandatory", cfg->recipients.categories[i].mandatory) == NULL)
            goto fail;
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}
