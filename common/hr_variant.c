/* hr_variant: a task's per-locale variants (see hr_variant.h). */
#include "hr_variant.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hr_rich.h"
#include "hr_template.h"
#include "hr_user.h"

/* The content fields, in push_task_variant's column order after vkey. */
enum { HR_VF_TITLE, HR_VF_BODY, HR_VF_PAYLOAD, HR_VF_SUBJECT, HR_VF_TEXT, HR_VF_HTML, HR_VF__N };

static const char *const hr_variant_fields[HR_VF__N] = {"title",   "body", "payload",
                                                        "subject", "text", "html"};

static char **hr_variant_field(hr_variant *v, int f)
{
    char **slots[HR_VF__N] = {&v->title, &v->body, &v->payload, &v->subject, &v->text, &v->html};

    return slots[f];
}

static const char *hr_variant_cfield(const hr_variant *v, int f)
{
    return *hr_variant_field((hr_variant *)v, f);
}

void hr_variant_set_clear(hr_variant_set *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].key);
        for (int f = 0; f < HR_VF__N; f++)
            free(*hr_variant_field(&s->v[i], f));
    }
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* Member M of the array as variant V.  0, HR_VARIANT_EINVAL or -1. */
static int hr_variant_member(const cJSON *m, size_t at, hr_variant *v, char *errstr, size_t errlen)
{
    const cJSON *f;

    if (!cJSON_IsObject(m)) {
        snprintf(errstr, errlen, "variants[%zu]: not an object", at);
        return HR_VARIANT_EINVAL;
    }
    cJSON_ArrayForEach(f, m)
    {
        int k;

        if (strcmp(f->string, "locale") == 0 || strcmp(f->string, "name") == 0) {
            if (!cJSON_IsString(f) || v->key != NULL) {
                snprintf(errstr, errlen, "variants[%zu]: one locale or name, a string", at);
                return HR_VARIANT_EINVAL;
            }
            if ((v->key = strdup(f->valuestring)) == NULL)
                return -1;
            /* a name is an arm's: -1 until its split is read */
            if (strcmp(f->string, "name") == 0 && v->split == 0)
                v->split = -1;
            continue;
        }
        if (strcmp(f->string, "split") == 0) {
            if (!cJSON_IsNumber(f) || f->valuedouble < 1 || f->valuedouble > 100 ||
                f->valuedouble != (double)(int)f->valuedouble) {
                snprintf(errstr, errlen, "variants[%zu].split: an integer percentage 1..100", at);
                return HR_VARIANT_EINVAL;
            }
            v->split = (int)f->valuedouble;
            continue;
        }
        for (k = 0; k < HR_VF__N && strcmp(f->string, hr_variant_fields[k]) != 0; k++)
            ;
        if (k == HR_VF__N) {
            snprintf(errstr, errlen,
                     "variants[%zu]: unknown field \"%.40s\" (locale, or name and split; title, "
                     "body, payload, subject, text, html)",
                     at, f->string);
            return HR_VARIANT_EINVAL;
        }
        if (cJSON_IsNull(f))
            continue;
        if (k == HR_VF_PAYLOAD ? !cJSON_IsObject(f) : !cJSON_IsString(f)) {
            snprintf(errstr, errlen, "variants[%zu].%s: not %s", at, f->string,
                     k == HR_VF_PAYLOAD ? "a JSON object" : "a string");
            return HR_VARIANT_EINVAL;
        }
        *hr_variant_field(v, k) =
            k == HR_VF_PAYLOAD ? cJSON_PrintUnformatted(f) : strdup(f->valuestring);
        if (*hr_variant_field(v, k) == NULL)
            return -1;
    }
    if (v->key == NULL) {
        snprintf(errstr, errlen, "variants[%zu]: locale (or name and split) is missing", at);
        return HR_VARIANT_EINVAL;
    }
    if (v->split != 0 && (v->split < 0 || cJSON_GetObjectItemCaseSensitive(m, "locale") != NULL)) {
        snprintf(errstr, errlen, "variants[%zu]: an A/B arm has a name and a split, no locale", at);
        return HR_VARIANT_EINVAL;
    }
    return 0;
}

static int hr_variant_cmp(const void *a, const void *b)
{
    return strcasecmp(((const hr_variant *)a)->key, ((const hr_variant *)b)->key);
}

/* S in key order (strcasecmp), whoever read it: an A/B arm's buckets
 * follow the order, which must be the same in every process. */
static void hr_variant_sort(hr_variant_set *s)
{
    if (s->n > 1)
        qsort(s->v, s->n, sizeof *s->v, hr_variant_cmp);
}

int hr_variant_from_json(const cJSON *j, hr_variant_set *out, char *errstr, size_t errlen)
{
    int n = cJSON_GetArraySize(j), rc;

    hr_variant_set_clear(out);
    if (!cJSON_IsArray(j)) {
        snprintf(errstr, errlen, "variants: not an array");
        return HR_VARIANT_EINVAL;
    }
    if (n > HR_VARIANT_MAX) {
        snprintf(errstr, errlen, "variants: %d are more than %d", n, HR_VARIANT_MAX);
        return HR_VARIANT_EINVAL;
    }
    if (n > 0 && (out->v = calloc((size_t)n, sizeof *out->v)) == NULL)
        goto oom;
    for (const cJSON *m = j->child; m != NULL; m = m->next) {
        rc = hr_variant_member(m, out->n, &out->v[out->n], errstr, errlen);
        out->n++;
        if (rc == -1)
            goto oom;
        if (rc != 0) {
            hr_variant_set_clear(out);
            return rc;
        }
    }
    hr_variant_sort(out);
    return 0;
oom:
    hr_variant_set_clear(out);
    snprintf(errstr, errlen, "out of memory");
    return -1;
}

/* The JSON text of the message TITLE, BODY and PAYLOAD (an object's text,
 * or NULL) make on a push channel: its length in bytes, or -1 when
 * PAYLOAD does not parse or memory ran out.  (The caller adds the rich
 * options' text: image, buttons and the rest travel in the same message.) */
static long hr_variant_message_len(const char *title, const char *body, const char *payload)
{
    cJSON *o = payload != NULL ? cJSON_Parse(payload) : cJSON_CreateObject();
    char *text;
    long n = -1;

    if (o == NULL || !cJSON_IsObject(o) ||
        cJSON_AddStringToObject(o, "title", title ? title : "") == NULL ||
        cJSON_AddStringToObject(o, "body", body ? body : "") == NULL)
        goto done;
    if ((text = cJSON_PrintUnformatted(o)) != NULL) {
        n = (long)strlen(text);
        free(text);
    }
done:
    cJSON_Delete(o);
    return n;
}

/* Whether the content NAME (the task's or a variant's) fits a push
 * channel's message.  0 or HR_VARIANT_EINVAL. */
static int hr_variant_fits(const hr_channel *ch, const char *name, const char *title,
                           const char *body, const char *payload, const char *rich, char *errstr,
                           size_t errlen)
{
    bool webpush = ch->type == HR_CHANNEL_WEBPUSH;
    long n, max = webpush ? HR_VARIANT_WEBPUSH_MAX : HR_VARIANT_PUSH_MAX;

    if (ch->type != HR_CHANNEL_APNS && ch->type != HR_CHANNEL_FCM && !webpush)
        return 0;
    n = hr_variant_message_len(title, body, payload);
    if (n < 0) {
        snprintf(errstr, errlen, "%s: payload is not a JSON object", name);
        return HR_VARIANT_EINVAL;
    }
    /* Web push nests its payload as "data" ({"title","body","data":{...}}:
     * 9 bytes more than the members side by side, at most) and maps the
     * rich options it carries beside them (wk_webpush_plaintext: "image",
     * "actions" of {"action","title"}, "tag"), at most the options' text
     * plus 4 bytes a button ("action" for "id"). */
    n += rich == NULL ? (webpush ? 9 : 0)
         : webpush    ? 9 + (long)strlen(rich) + 4 * HR_RICH_BUTTONS_MAX
                      : (long)strlen(rich);
    if (n > max) {
        snprintf(errstr, errlen,
                 "%s: title, body, payload%s take %ld bytes, over %s's limit of %ld bytes per "
                 "message",
                 name, webpush && rich == NULL ? "" : " and rich options", n,
                 webpush                       ? "web push"
                 : ch->type == HR_CHANNEL_APNS ? "APNs"
                                               : "FCM",
                 max);
        return HR_VARIANT_EINVAL;
    }
    return 0;
}

/* Whether SRC compiles as a template.  0 or HR_VARIANT_EINVAL. */
static int hr_variant_compiles(const char *key, const char *field, const char *src, char *errstr,
                               size_t errlen)
{
    hr_template *t = NULL;
    char detail[200];

    if (src == NULL)
        return 0;
    if (hr_template_compile(src, strlen(src), false, &t, detail, sizeof detail) != 0) {
        snprintf(errstr, errlen, "variant %s: %s template: %s", key, field, detail);
        return HR_VARIANT_EINVAL;
    }
    hr_template_free(t);
    return 0;
}

bool hr_variant_is_split(const hr_variant_set *s)
{
    return s->n > 0 && s->v[0].split > 0;
}

/* The A/B arms' rules: all arms or none, names [A-Za-z0-9_-]{1,35}, the
 * splits summing to at most 100.  0 or HR_VARIANT_EINVAL. */
static int hr_variant_check_split(const hr_variant_set *s, char *errstr, size_t errlen)
{
    int sum = 0;

    for (size_t i = 0; i < s->n; i++) {
        const hr_variant *v = &s->v[i];
        size_t n = strlen(v->key);

        if ((v->split > 0) != hr_variant_is_split(s)) {
            snprintf(errstr, errlen,
                     "variants: locale variants and A/B arms (name, split) do not mix in a task");
            return HR_VARIANT_EINVAL;
        }
        if (v->split <= 0)
            continue;
        if (n < 1 || n > HR_VARIANT_KEY_MAX ||
            strspn(v->key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                n) {
            snprintf(errstr, errlen, "variant name \"%.40s\": [A-Za-z0-9_-], 1..%d bytes", v->key,
                     HR_VARIANT_KEY_MAX);
            return HR_VARIANT_EINVAL;
        }
        sum += v->split;
    }
    if (sum > 100) {
        snprintf(errstr, errlen, "variants: the splits add up to %d%%, over 100%%", sum);
        return HR_VARIANT_EINVAL;
    }
    return 0;
}

/* A winner step needs arms, and a winner written by hand must name one of
 * them (or "default" while the splits leave some to it): a name that is
 * neither would hold the rest for ever.  0 or HR_VARIANT_EINVAL. */
static int hr_variant_check_ab(const hr_variant_set *s, const hr_task *t, char *errstr,
                               size_t errlen)
{
    int sum = 0;

    if (t->ab_sample_pct <= 0)
        return 0;
    if (!hr_variant_is_split(s)) {
        snprintf(errstr, errlen, "ab: a winner step needs A/B arms (variants with name and split)");
        return HR_VARIANT_EINVAL;
    }
    if (t->ab_winner == NULL)
        return 0;
    for (size_t i = 0; i < s->n; i++) {
        if (strcasecmp(s->v[i].key, t->ab_winner) == 0)
            return 0;
        sum += s->v[i].split;
    }
    if (sum < 100 && strcmp(t->ab_winner, HR_VARIANT_DEFAULT) == 0)
        return 0;
    snprintf(errstr, errlen, "ab_winner \"%.40s\" is none of the task's arms", t->ab_winner);
    return HR_VARIANT_EINVAL;
}

int hr_variant_check(const hr_variant_set *s, const hr_task *t, const hr_config *cfg, char *errstr,
                     size_t errlen)
{
    const hr_channel *ch = hr_config_channel(cfg, t->channel);
    char name[64];
    int rc;

    if (ch == NULL) {
        snprintf(errstr, errlen, "unknown channel \"%.64s\"", t->channel ? t->channel : "");
        return HR_VARIANT_EINVAL;
    }
    if (s->n > HR_VARIANT_MAX) {
        snprintf(errstr, errlen, "%zu variants are more than %d", s->n, HR_VARIANT_MAX);
        return HR_VARIANT_EINVAL;
    }
    if ((rc = hr_variant_fits(ch, "the task's content", t->title, t->body, t->payload, t->rich,
                              errstr, errlen)) != 0 ||
        (rc = hr_variant_check_split(s, errstr, errlen)) != 0 ||
        (rc = hr_variant_check_ab(s, t, errstr, errlen)) != 0)
        return rc;
    for (size_t i = 0; i < s->n; i++) {
        const hr_variant *v = &s->v[i];

        if (v->split > 0
                ? strcasecmp(v->key, HR_VARIANT_DEFAULT) == 0
                : !hr_user_locale_valid(v->key) || strcasecmp(v->key, HR_VARIANT_DEFAULT) == 0) {
            snprintf(errstr, errlen,
                     "variant locale \"%.40s\": not a language tag such as pt-BR (and not "
                     "\"default\")",
                     v->key);
            return HR_VARIANT_EINVAL;
        }
        for (size_t k = 0; k < i; k++)
            if (strcasecmp(s->v[k].key, v->key) == 0) {
                snprintf(errstr, errlen, "variant locale \"%s\" appears twice", v->key);
                return HR_VARIANT_EINVAL;
            }
        for (int f = 0; f < HR_VF__N; f++)
            if (f != HR_VF_PAYLOAD &&
                (rc = hr_variant_compiles(v->key, hr_variant_fields[f], hr_variant_cfield(v, f),
                                          errstr, errlen)) != 0)
                return rc;
        if (ch->type != HR_CHANNEL_SMTP &&
            (v->subject != NULL || v->text != NULL || v->html != NULL)) {
            snprintf(errstr, errlen,
                     "variant %s: subject, text and html are for smtp channels; \"%s\" is %s",
                     v->key, ch->name, hr_channel_type_name(ch->type));
            return HR_VARIANT_EINVAL;
        }
        snprintf(name, sizeof name, "variant %s", v->key);
        if (v->payload != NULL && hr_variant_message_len(NULL, NULL, v->payload) < 0) {
            snprintf(errstr, errlen, "%s: payload is not a JSON object", name);
            return HR_VARIANT_EINVAL;
        }
        if ((rc = hr_variant_fits(ch, name, v->title ? v->title : t->title,
                                  v->body ? v->body : t->body, v->payload ? v->payload : t->payload,
                                  t->rich, errstr, errlen)) != 0)
            return rc;
    }
    return 0;
}

/* The statements of a set of variants keyed by a task (push_task_variant)
 * or by a series (push_series_variant, 025_series_variants.sql). */
typedef struct hr_variant_sql {
    const char *insert, *load;
} hr_variant_sql;

#define HR_VARIANT_SQL(table, owner)                                                           \
    {                                                                                          \
        "INSERT INTO " table " (" owner ", split, vkey, title, body, payload, subject, text, " \
        "html) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",                                            \
            "SELECT id, vkey, title, body, payload, subject, text, html, COALESCE(split, 0) "  \
            "FROM " table " WHERE " owner " = ? ORDER BY vkey"                                 \
    }

static const hr_variant_sql hr_variant_of_task = HR_VARIANT_SQL("push_task_variant", "task_id");
static const hr_variant_sql hr_variant_of_series =
    HR_VARIANT_SQL("push_series_variant", "series_id");

/* Writes S as OWNER's variants with SQL's statements; the ids into S. */
static int hr_variant_insert_as(const hr_variant_sql *sql, hr_mysql *m, int64_t owner,
                                hr_variant_set *s, char *errstr, size_t errlen)
{
    for (size_t i = 0; i < s->n; i++) {
        hr_variant *v = &s->v[i];
        const hr_mysql_param p[] = {HR_P_I64(owner),
                                    v->split > 0 ? HR_P_I64(v->split) : HR_P_NULL,
                                    HR_P_STR(v->key),
                                    hr_mysql_p_str_or_null(v->title),
                                    hr_mysql_p_str_or_null(v->body),
                                    hr_mysql_p_str_or_null(v->payload),
                                    hr_mysql_p_str_or_null(v->subject),
                                    hr_mysql_p_str_or_null(v->text),
                                    hr_mysql_p_str_or_null(v->html)};
        uint64_t id = 0;

        if (hr_mysql_exec(m, sql->insert, p, sizeof p / sizeof p[0], NULL, &id, NULL, errstr,
                          errlen) < 0)
            return -1;
        v->id = (int64_t)id;
    }
    return 0;
}

/* OWNER's variants read with SQL's statements into OUT (cleared first). */
static int hr_variant_load_as(const hr_variant_sql *sql, hr_mysql *m, int64_t owner,
                              hr_variant_set *out, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(owner)};
    hr_mysql_rows *rows = NULL;
    int rc = -1;

    hr_variant_set_clear(out);
    if (hr_mysql_query(m, sql->load, p, 1, &rows, errstr, errlen) < 0)
        return -1;
    if (rows->nrows > 0 && (out->v = calloc(rows->nrows, sizeof *out->v)) == NULL)
        goto oom;
    for (size_t r = 0; r < rows->nrows; r++) {
        hr_variant *v = &out->v[out->n++];

        v->id = strtoll(hr_mysql_cell(rows, r, 0), NULL, 10);
        v->split = (int)strtol(hr_mysql_cell(rows, r, 2 + HR_VF__N), NULL, 10);
        if ((v->key = strdup(hr_mysql_cell(rows, r, 1))) == NULL)
            goto oom;
        for (int f = 0; f < HR_VF__N; f++) {
            const char *cell = hr_mysql_cell(rows, r, (size_t)(2 + f));

            if (cell != NULL && (*hr_variant_field(v, f) = strdup(cell)) == NULL)
                goto oom;
        }
    }
    hr_variant_sort(out);
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
    hr_variant_set_clear(out);
done:
    hr_mysql_rows_free(rows);
    return rc;
}

int hr_variant_insert(hr_mysql *m, int64_t task, hr_variant_set *s, char *errstr, size_t errlen)
{
    return hr_variant_insert_as(&hr_variant_of_task, m, task, s, errstr, errlen);
}

int hr_variant_load(hr_mysql *m, int64_t task, hr_variant_set *out, char *errstr, size_t errlen)
{
    return hr_variant_load_as(&hr_variant_of_task, m, task, out, errstr, errlen);
}

int hr_variant_series_insert(hr_mysql *m, int64_t series, hr_variant_set *s, char *errstr,
                             size_t errlen)
{
    return hr_variant_insert_as(&hr_variant_of_series, m, series, s, errstr, errlen);
}

int hr_variant_series_load(hr_mysql *m, int64_t series, hr_variant_set *out, char *errstr,
                           size_t errlen)
{
    return hr_variant_load_as(&hr_variant_of_series, m, series, out, errstr, errlen);
}

int hr_variant_series_copy(hr_mysql *m, int64_t series, int64_t task, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(task), HR_P_I64(series)};

    return hr_mysql_exec(m,
                         "INSERT INTO push_task_variant (task_id, split, vkey, title, body, "
                         "payload, subject, text, html) SELECT ?, split, vkey, title, body, "
                         "payload, subject, text, html FROM push_series_variant WHERE "
                         "series_id = ?",
                         p, 2, NULL, NULL, NULL, errstr, errlen) < 0
               ? -1
               : 0;
}

unsigned hr_variant_bucket(int64_t task, uint64_t uid)
{
    /* SplitMix64's finalizer over both: every bit of each moves the bucket. */
    uint64_t z = (uint64_t)task * 0x9E3779B97F4A7C15ULL ^ uid;

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (unsigned)(z % 10000);
}

int hr_variant_pick(const hr_variant_set *s, int64_t task, uint64_t uid, const char *locale)
{
    char tag[HR_USER_LOCALE_MAX + 1];
    size_t len;

    if (hr_variant_is_split(s)) {
        unsigned bucket = hr_variant_bucket(task, uid), upto = 0;

        for (size_t i = 0; i < s->n; i++)
            if (bucket < (upto += 100 * (unsigned)s->v[i].split))
                return (int)i;
        return -1;
    }
    if (locale == NULL || s->n == 0 || (len = strlen(locale)) > HR_USER_LOCALE_MAX)
        return -1;
    memcpy(tag, locale, len + 1);
    /* pt-BR, then pt: each round cuts the last subtag. */
    for (;;) {
        char *dash;

        for (size_t i = 0; i < s->n; i++)
            if (strcasecmp(s->v[i].key, tag) == 0)
                return (int)i;
        if ((dash = strrchr(tag, '-')) == NULL)
            return -1;
        *dash = '\0';
    }
}

cJSON *hr_variant_to_json(const hr_variant_set *s)
{
    cJSON *a = cJSON_CreateArray();

    for (size_t i = 0; a != NULL && i < s->n; i++) {
        const hr_variant *v = &s->v[i];
        cJSON *o = cJSON_CreateObject();

        if (o == NULL || !cJSON_AddItemToArray(a, o) ||
            cJSON_AddStringToObject(o, v->split > 0 ? "name" : "locale", v->key) == NULL ||
            (v->split > 0 && cJSON_AddNumberToObject(o, "split", v->split) == NULL))
            goto oom;
        for (int f = 0; f < HR_VF__N; f++) {
            const char *val = hr_variant_cfield(v, f);
            cJSON *item;

            if (val == NULL)
                continue;
            item = f == HR_VF_PAYLOAD ? cJSON_Parse(val) : cJSON_CreateString(val);
            if (item == NULL || !cJSON_AddItemToObject(o, hr_variant_fields[f], item)) {
                cJSON_Delete(item);
                goto oom;
            }
        }
    }
    return a;
oom:
    cJSON_Delete(a);
    return NULL;
}

int hr_variant_counts(hr_mysql *m, int64_t task, cJSON **out, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(task)};
    hr_mysql_rows *rows = NULL;
    cJSON *o = cJSON_CreateObject();

    *out = NULL;
    if (o == NULL ||
        hr_mysql_query(m,
                       "SELECT vkey, outcome, CAST(n AS SIGNED) FROM push_task_variant_count "
                       "WHERE task_id = ? ORDER BY vkey, outcome",
                       p, 1, &rows, errstr, errlen) < 0) {
        cJSON_Delete(o);
        return -1;
    }
    for (size_t r = 0; r < rows->nrows; r++) {
        const char *key = hr_mysql_cell(rows, r, 0);
        cJSON *k = cJSON_GetObjectItemCaseSensitive(o, key);

        if ((k == NULL && (k = cJSON_AddObjectToObject(o, key)) == NULL) ||
            cJSON_AddNumberToObject(k, hr_mysql_cell(rows, r, 1),
                                    (double)strtoll(hr_mysql_cell(rows, r, 2), NULL, 10)) == NULL) {
            snprintf(errstr, errlen, "out of memory");
            cJSON_Delete(o);
            hr_mysql_rows_free(rows);
            return -1;
        }
    }
    hr_mysql_rows_free(rows);
    *out = o;
    return 0;
}

int hr_variant_count_add(hr_mysql *m, const hr_variant_count *rows, size_t n, char *errstr,
                         size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const hr_mysql_param p[] = {HR_P_I64(rows[i].task), HR_P_STR(rows[i].key),
                                    HR_P_STR(rows[i].outcome), HR_P_I64(rows[i].n)};

        if (hr_mysql_exec(m,
                          "INSERT INTO push_task_variant_count (task_id, vkey, outcome, n) "
                          "VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE n = n + VALUES(n)",
                          p, 4, NULL, NULL, NULL, errstr, errlen) < 0)
            return -1;
    }
    return 0;
}

/* ---- test then winner ------------------------------------------------------------- */

static const char *const hr_variant_metrics[] = {"click", "open", "delivered"};

int hr_variant_ab_from_json(const cJSON *j, hr_task *t, char *errstr, size_t errlen)
{
    const cJSON *f;

    if (!cJSON_IsObject(j)) {
        snprintf(errstr, errlen, "ab: not an object ({\"sample_pct\", \"wait_s\", \"metric\"})");
        return HR_VARIANT_EINVAL;
    }
    t->ab_sample_pct = 0;
    t->ab_wait_s = 3600;
    t->ab_metric = (char *)hr_variant_metrics[0];
    cJSON_ArrayForEach(f, j)
    {
        if (strcmp(f->string, "metric") == 0) {
            size_t k;

            for (k = 0; k < 3 &&
                        !(cJSON_IsString(f) && strcmp(f->valuestring, hr_variant_metrics[k]) == 0);
                 k++)
                ;
            if (k == 3) {
                snprintf(errstr, errlen, "ab.metric: click, open or delivered");
                return HR_VARIANT_EINVAL;
            }
            t->ab_metric = (char *)hr_variant_metrics[k];
            continue;
        }
        if (strcmp(f->string, "sample_pct") != 0 && strcmp(f->string, "wait_s") != 0) {
            snprintf(errstr, errlen, "ab: unknown field \"%.40s\" (sample_pct, wait_s, metric)",
                     f->string);
            return HR_VARIANT_EINVAL;
        }
        /* The ranges are hr_task_validate's; here only integers that fit. */
        if (!cJSON_IsNumber(f) || f->valuedouble != (double)(int64_t)f->valuedouble ||
            f->valuedouble < -1e9 || f->valuedouble > 1e9) {
            snprintf(errstr, errlen, "ab.%s: an integer", f->string);
            return HR_VARIANT_EINVAL;
        }
        if (strcmp(f->string, "sample_pct") == 0)
            t->ab_sample_pct = (int64_t)f->valuedouble;
        else
            t->ab_wait_s = (int64_t)f->valuedouble;
    }
    if (t->ab_sample_pct < 1 || t->ab_sample_pct > 99) {
        snprintf(errstr, errlen, "ab.sample_pct %" PRId64 " is outside 1..99", t->ab_sample_pct);
        return HR_VARIANT_EINVAL;
    }
    return 0;
}

bool hr_variant_sampled(int64_t task, uint64_t uid, int64_t pct)
{
    return hr_variant_bucket(~task, uid) < 100 * (uint64_t)pct;
}

int hr_variant_ab_pick(const hr_variant_set *s, const hr_task *t, uint64_t uid, const char *locale)
{
    if (t->ab_sample_pct <= 0 || !hr_variant_is_split(s) ||
        hr_variant_sampled(t->id, uid, t->ab_sample_pct))
        return hr_variant_pick(s, t->id, uid, locale);
    if (t->ab_winner == NULL)
        return HR_VARIANT_HELD;
    for (size_t i = 0; i < s->n; i++)
        if (strcasecmp(s->v[i].key, t->ab_winner) == 0)
            return (int)i;
    return -1; /* "default" (hr_variant_check refuses any other name) */
}

/* A's rate by METRIC (0: click, 1: open, 2: delivered), as a fraction
 * NUM / DEN, DEN 0 when nothing counts. */
static void hr_variant_rate(const hr_variant_tally *a, int metric, double *num, double *den)
{
    *num = (double)(metric == 0 ? a->clicked : metric == 1 ? a->opened : a->sent);
    *den = (double)(metric == 2 ? a->sent + a->failed + a->unregistered : a->sent);
    if (*den <= 0)
        *num = 0, *den = 1;
}

/* Compares A's and B's rates by METRIC: > 0 when A's is higher.  The
 * products are exact below 2^53 (counts up to 90 million each). */
static int hr_variant_cmp_rate(const hr_variant_tally *a, const hr_variant_tally *b, int metric)
{
    double an, ad, bn, bd;

    hr_variant_rate(a, metric, &an, &ad);
    hr_variant_rate(b, metric, &bn, &bd);
    return an * bd > bn * ad ? 1 : an * bd < bn * ad ? -1 : 0;
}

size_t hr_variant_winner(const hr_variant_tally *arms, size_t n, const char *metric)
{
    int m = 0;
    size_t best = 0;

    while (m < 2 && (metric == NULL || strcmp(metric, hr_variant_metrics[m]) != 0))
        m++;
    for (size_t i = 1; i < n; i++) {
        int c = hr_variant_cmp_rate(&arms[i], &arms[best], m);

        /* strictly better only: a tie keeps the earlier arm */
        if (c > 0 || (c == 0 && m != 2 && hr_variant_cmp_rate(&arms[i], &arms[best], 2) > 0))
            best = i;
    }
    return best;
}

int hr_variant_ab_state(hr_mysql *m, int64_t id, int64_t mark_ms, int64_t *sampled_ms,
                        char **winner, char *errstr, size_t errlen)
{
    const hr_mysql_param mark[] = {HR_P_I64(mark_ms), HR_P_I64(id)};
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    const char *w;

    *sampled_ms = -1;
    *winner = NULL;
    if (mark_ms >= 0 &&
        hr_mysql_exec(m,
                      "UPDATE push_task SET ab_sampled_at = FROM_UNIXTIME(? / 1000) "
                      "WHERE id = ? AND ab_sampled_at IS NULL",
                      mark, 2, NULL, NULL, NULL, errstr, errlen) < 0)
        return -1;
    if (hr_mysql_query(m,
                       "SELECT CAST(ROUND(UNIX_TIMESTAMP(ab_sampled_at) * 1000) AS SIGNED), "
                       "ab_winner FROM push_task WHERE id = ?",
                       p, 1, &rows, errstr, errlen) < 0)
        return -1;
    if (rows->nrows == 1) {
        const char *ms = hr_mysql_cell(rows, 0, 0);

        *sampled_ms = ms != NULL ? strtoll(ms, NULL, 10) : -1;
        if ((w = hr_mysql_cell(rows, 0, 1)) != NULL && (*winner = strdup(w)) == NULL) {
            hr_mysql_rows_free(rows);
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
    }
    hr_mysql_rows_free(rows);
    return 0;
}

/* The figures of the N arms TL by METRIC as the JSON the row keeps:
 * {"metric": ..., "arms": {"<key>": {"sent", "failed", "unregistered",
 * "opened", "clicked", "rate"}}}. */
static char *hr_variant_figures(const hr_variant_tally *tl, size_t n, const char *metric)
{
    cJSON *o = cJSON_CreateObject(), *arms = cJSON_AddObjectToObject(o, "arms");
    int mi = 0;
    char *text = NULL;

    while (mi < 2 && strcmp(metric, hr_variant_metrics[mi]) != 0)
        mi++;
    if (o == NULL || arms == NULL || cJSON_AddStringToObject(o, "metric", metric) == NULL)
        goto done;
    for (size_t i = 0; i < n; i++) {
        cJSON *a = cJSON_AddObjectToObject(arms, tl[i].key);
        double num, den;

        hr_variant_rate(&tl[i], mi, &num, &den);
        if (a == NULL || cJSON_AddNumberToObject(a, "sent", (double)tl[i].sent) == NULL ||
            cJSON_AddNumberToObject(a, "failed", (double)tl[i].failed) == NULL ||
            cJSON_AddNumberToObject(a, "unregistered", (double)tl[i].unregistered) == NULL ||
            cJSON_AddNumberToObject(a, "opened", (double)tl[i].opened) == NULL ||
            cJSON_AddNumberToObject(a, "clicked", (double)tl[i].clicked) == NULL ||
            cJSON_AddNumberToObject(a, "rate", num / den) == NULL)
            goto done;
    }
    text = cJSON_PrintUnformatted(o);
done:
    cJSON_Delete(o);
    return text;
}

/* The tallies of S's arms (key order) and of "default" when the splits
 * leave some of the sample to it, from push_task_variant_count, into TL
 * (S->n + 1 slots); the number.  -1 on a query error. */
static long hr_variant_tallies(hr_mysql *m, int64_t task, const hr_variant_set *s,
                               hr_variant_tally *tl, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(task)};
    hr_mysql_rows *rows = NULL;
    size_t n = 0;
    int sum = 0;

    for (size_t i = 0; i < s->n; i++) {
        tl[n++] = (hr_variant_tally){.key = s->v[i].key};
        sum += s->v[i].split;
    }
    if (sum < 100)
        tl[n++] = (hr_variant_tally){.key = HR_VARIANT_DEFAULT};
    if (hr_mysql_query(m,
                       "SELECT vkey, outcome, CAST(n AS SIGNED) FROM push_task_variant_count "
                       "WHERE task_id = ?",
                       p, 1, &rows, errstr, errlen) < 0)
        return -1;
    for (size_t r = 0; r < rows->nrows; r++) {
        const char *key = hr_mysql_cell(rows, r, 0), *outcome = hr_mysql_cell(rows, r, 1);
        int64_t v = strtoll(hr_mysql_cell(rows, r, 2), NULL, 10);

        for (size_t i = 0; i < n; i++) {
            hr_variant_tally *a = &tl[i];
            int64_t *slot = strcmp(outcome, "sent") == 0           ? &a->sent
                            : strcmp(outcome, "failed") == 0       ? &a->failed
                            : strcmp(outcome, "unregistered") == 0 ? &a->unregistered
                            : strcmp(outcome, "opened") == 0       ? &a->opened
                            : strcmp(outcome, "clicked") == 0      ? &a->clicked
                                                                   : NULL;

            if (slot != NULL && strcasecmp(a->key, key) == 0)
                *slot += v;
        }
    }
    hr_mysql_rows_free(rows);
    return (long)n;
}

int hr_variant_ab_decide(hr_mysql *m, const hr_task *t, char **winner, char *errstr, size_t errlen)
{
    hr_variant_set s = {0};
    hr_variant_tally *tl = NULL;
    char *figures = NULL;
    int64_t sampled;
    size_t w;
    long n;
    int rc = -1;

    *winner = NULL;
    if (hr_variant_load(m, t->id, &s, errstr, errlen) != 0)
        return -1;
    if ((tl = calloc(s.n + 1, sizeof *tl)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    if ((n = hr_variant_tallies(m, t->id, &s, tl, errstr, errlen)) < 0)
        goto done;
    if (n == 0) {
        snprintf(errstr, errlen, "task %" PRId64 " has a winner step and no arms", t->id);
        goto done;
    }
    w = hr_variant_winner(tl, (size_t)n, t->ab_metric);
    if ((figures = hr_variant_figures(tl, (size_t)n, t->ab_metric)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    {
        const hr_mysql_param p[] = {HR_P_STR(tl[w].key), HR_P_STR(figures), HR_P_I64(t->id)};

        /* Once: a second owner after a crash keeps the first one's. */
        if (hr_mysql_exec(m,
                          "UPDATE push_task SET ab_winner = ?, ab_decided_at = NOW(3), "
                          "ab_figures = ? WHERE id = ? AND ab_winner IS NULL",
                          p, 3, NULL, NULL, NULL, errstr, errlen) < 0)
            goto done;
    }
    rc = hr_variant_ab_state(m, t->id, -1, &sampled, winner, errstr, errlen);
    if (rc == 0 && *winner == NULL) {
        snprintf(errstr, errlen, "task %" PRId64 ": the winner was not written", t->id);
        rc = -1;
    }
done:
    free(figures);
    free(tl);
    hr_variant_set_clear(&s);
    return rc;
}

const char *hr_variant_ab_phase(const hr_task *t)
{
    if (t->ab_sample_pct <= 0)
        return NULL;
    if (t->ab_winner != NULL)
        return t->state == HR_STATE_DONE ? "done" : "sending_rest";
    return t->ab_sampled_ms >= 0 ? "waiting" : "sampling";
}
