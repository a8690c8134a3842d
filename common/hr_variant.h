/* hr_variant: a task's per-locale variants of its content
 * (push_task_variant, schemas/mysql/022_variants.sql; docs/api.md
 * "Variants") and a series' (push_series_variant, 025_series_variants.sql,
 * copied to each occurrence): read from the API's and heraldctl's JSON, checked, written
 * and loaded, the variant a recipient's locale picks, and the counts per
 * variant (push_task_variant_count) read for the task's view.
 *
 * The task's own title, body and payload are the default; a variant's NULL
 * field takes the task's (title, body, payload) or the channel's (subject,
 * text, html).  A recipient's locale picks the variant whose key is the
 * locale, else the one of the locale cut at its last '-' (pt-BR, then pt),
 * and so on; none: the default.  Keys compare case-insensitively, as BCP 47
 * tags do.
 *
 * A/B tests: a task's variants may instead be arms with split percentages
 * (SPLIT 1..100, their sum at most 100; the rest gets the task's own
 * content, arm "default").  A recipient's arm is a hash of (task, uid)
 * (hr_variant_bucket), so every worker, a redelivered chunk and the
 * dry-run render give a uid the same arm.  A task has locale variants or
 * arms, not both.
 *
 * No logging, no threads of its own; errors are -1 (HR_VARIANT_EINVAL for
 * a value the checks refuse) with ERRSTR. */
#ifndef HR_VARIANT_H
#define HR_VARIANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "hr_config.h"
#include "hr_mysql.h"
#include "hr_task.h"

#define HR_VARIANT_MAX 64            /* variants per task */
#define HR_VARIANT_KEY_MAX 35        /* a key: a language tag (HR_USER_LOCALE_MAX) */
#define HR_VARIANT_DEFAULT "default" /* the counts' name of the task's own content */
#define HR_VARIANT_PUSH_MAX 4096     /* APNs' payload and FCM's message limit, bytes */
/* A web push message's plaintext: one RFC 8291 record of 4096 bytes less
 * its header (86), tag (16) and delimiter (1); worker/send/wk_ece.h's
 * WK_ECE_PLAIN_MAX, which asserts it. */
#define HR_VARIANT_WEBPUSH_MAX 3993
#define HR_VARIANT_EINVAL -2

/* One variant: KEY (its locale) and the content fields, NULL = inherited. */
typedef struct hr_variant {
    int64_t id; /* push_task_variant.id; 0 before it is written */
    int split;  /* an A/B arm's percentage 1..100; 0: a locale variant */
    char *key;  /* the locale, or the arm's name */
    char *title, *body, *payload, *subject, *text, *html;
} hr_variant;

/* A task's variants.  Zero-initialise; hr_variant_set_clear frees. */
typedef struct hr_variant_set {
    hr_variant *v;
    size_t n;
} hr_variant_set;

void hr_variant_set_clear(hr_variant_set *s);

/* The variants (in key order, strcasecmp) of the JSON array J ([{"locale", "title", "body",
 * "payload", "subject", "text", "html"}, ...], or arms {"name", "split",
 * ...}; "payload" an object) into
 * OUT (cleared first).  0, or HR_VARIANT_EINVAL naming the first bad
 * member, or -1 when out of memory. */
int hr_variant_from_json(const cJSON *j, hr_variant_set *out, char *errstr, size_t errlen);

/* The checks of S for task T: at most HR_VARIANT_MAX, each key a language
 * tag (hr_user_locale_valid), or for arms [A-Za-z0-9_-]{1,35} with splits
 * summing to at most 100 and no locale variant beside them, and not
 * "default", no key twice (case ignored), the templates compile, a payload a JSON object, subject / text
 * / html only on an smtp channel, and on an apns or fcm channel the
 * message of the task's own content and of each variant (title, body and
 * payload as written, before rendering) within HR_VARIANT_PUSH_MAX bytes.
 * 0 or HR_VARIANT_EINVAL. */
int hr_variant_check(const hr_variant_set *s, const hr_task *t, const hr_config *cfg, char *errstr,
                     size_t errlen);

/* Writes S as task TASK's variants (in the caller's transaction); the ids
 * into S.  0 or -1. */
int hr_variant_insert(hr_mysql *m, int64_t task, hr_variant_set *s, char *errstr, size_t errlen);

/* Task TASK's variants, in key order (strcasecmp, as hr_variant_from_json
 * leaves them), into OUT (cleared first).  0 or -1. */
int hr_variant_load(hr_mysql *m, int64_t task, hr_variant_set *out, char *errstr, size_t errlen);

/* The same for series SERIES's variants (push_series_variant,
 * 025_series_variants.sql). */
int hr_variant_series_insert(hr_mysql *m, int64_t series, hr_variant_set *s, char *errstr,
                             size_t errlen);
int hr_variant_series_load(hr_mysql *m, int64_t series, hr_variant_set *out, char *errstr,
                           size_t errlen);

/* Copies series SERIES's variants to its occurrence TASK (in the caller's
 * transaction, the one of the occurrence's insert).  0 or -1. */
int hr_variant_series_copy(hr_mysql *m, int64_t series, int64_t task, char *errstr, size_t errlen);

/* Whether S is an A/B test (its variants are arms). */
bool hr_variant_is_split(const hr_variant_set *s);

/* Recipient UID's bucket 0..9999 in task TASK's A/B test: a hash of both
 * (SplitMix64), uniform, the same everywhere. */
unsigned hr_variant_bucket(int64_t task, uint64_t uid);

/* The variant of recipient UID of task TASK in S: the arm its bucket falls
 * in (arms in key order, each SPLIT percent of the buckets), or the variant
 * its LOCALE picks; -1 for the task's own content (LOCALE NULL, nothing
 * matches, or a bucket past the splits). */
int hr_variant_pick(const hr_variant_set *s, int64_t task, uint64_t uid, const char *locale);

/* S as the JSON array hr_variant_from_json reads (keys as "locale"). */
cJSON *hr_variant_to_json(const hr_variant_set *s);

/* Task TASK's counts per variant: {"default": {"sent": n, ...}, "<key>":
 * {...}} into *OUT.  0 or -1. */
int hr_variant_counts(hr_mysql *m, int64_t task, cJSON **out, char *errstr, size_t errlen);

/* One tally for push_task_variant_count. */
typedef struct hr_variant_count {
    int64_t task;
    const char *key; /* HR_VARIANT_DEFAULT for the task's own */
    const char *outcome;
    int64_t n;
} hr_variant_count;

/* Adds the N tallies ROWS (upserts, in the caller's transaction).  0 or -1. */
int hr_variant_count_add(hr_mysql *m, const hr_variant_count *rows, size_t n, char *errstr,
                         size_t errlen);

#endif
