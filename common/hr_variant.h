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
 * Test then winner (024_ab_winner.sql, push_task.ab_*): the arms go only to
 * a sample, ab_sample_pct percent of the recipients by a second hash of
 * (task, uid) (hr_variant_sampled, independent of the arm's); the rest
 * waits in the task's wait set (dispatcher/dsp_wait.c) scored
 * HR_VARIANT_HOLD_MS until the owner (dispatcher/dsp_ab.c) picked the
 * winner ab_wait_s after the sample's end, by the metric, from the counts
 * per arm (hr_variant_winner), wrote it once (hr_variant_ab_decide) and
 * released the rest, which then gets the winner's content
 * (hr_variant_ab_pick).
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
/* hr_variant_ab_pick: a recipient of the held rest while the winner is
 * not known (not pushed: put back to wait). */
#define HR_VARIANT_HELD -2
/* The wait-set score of a winner step's held rest: past any real release
 * instant (year 33658), exact as a ZSET's double; the pick moves the
 * rest to 0 (due) with wait_defer.lua. */
#define HR_VARIANT_HOLD_MS 1000000000000000LL

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

/* ---- test then winner ------------------------------------------------------------- */

/* The "ab" object of the API's and heraldctl's JSON ({"sample_pct": 1..99,
 * "wait_s": 0.., "metric": "click" | "open" | "delivered"}; wait_s
 * defaults to 3600, metric to "click") into T's ab_sample_pct, ab_wait_s
 * and ab_metric (a static string).  The ranges are hr_task_validate's;
 * that T has arms is hr_variant_check's.  0 or HR_VARIANT_EINVAL. */
int hr_variant_ab_from_json(const cJSON *j, hr_task *t, char *errstr, size_t errlen);

/* Whether recipient UID of task TASK is in the sample of PCT percent: a
 * hash of (~TASK, UID), so independent of the arm's bucket. */
bool hr_variant_sampled(int64_t task, uint64_t uid, int64_t pct);

/* The variant of recipient UID of task T (variants S, locale LOCALE): as
 * hr_variant_pick, but for a task with a winner step a uid outside the
 * sample gets the winner (its index, -1 for "default"), or
 * HR_VARIANT_HELD while T->ab_winner is NULL. */
int hr_variant_ab_pick(const hr_variant_set *s, const hr_task *t, uint64_t uid, const char *locale);

/* One arm's counts, as push_task_variant_count holds them. */
typedef struct hr_variant_tally {
    const char *key;
    int64_t sent, failed, unregistered, opened, clicked;
} hr_variant_tally;

/* The winner among the N ARMS (in the order that breaks ties: arms in key
 * order, then "default") by METRIC: the highest click rate (clicked /
 * sent), open rate (opened / sent) or delivered rate (sent / (sent +
 * failed + unregistered)); a tie, by the delivered rate; still a tie
 * (nothing counted at all: the documented fallback), the first.  An arm
 * with nothing in a rate's denominator has the rate 0. */
size_t hr_variant_winner(const hr_variant_tally *arms, size_t n, const char *metric);

/* The owner's step on task ID's row: with MARK_MS >= 0 sets ab_sampled_at
 * to it unless set; then reads ab_sampled_at (*SAMPLED_MS, -1 = NULL) and
 * ab_winner (*WINNER, malloc'd, NULL = none).  0 or -1. */
int hr_variant_ab_state(hr_mysql *m, int64_t id, int64_t mark_ms, int64_t *sampled_ms,
                        char **winner, char *errstr, size_t errlen);

/* Picks task T's winner from its variants and counts and writes it, with
 * the figures read, unless a winner is written already; *WINNER gets the
 * row's (malloc'd), whoever wrote it.  0 or -1. */
int hr_variant_ab_decide(hr_mysql *m, const hr_task *t, char **winner, char *errstr, size_t errlen);

/* The phase of T's winner step, for its views: "sampling" (the arms to the
 * sample), "waiting" (the sample ended at ab_sampled_ms, the pick is due
 * ab_wait_s later), "sending_rest" (the winner picked, the rest chunked),
 * "done"; NULL without a winner step. */
const char *hr_variant_ab_phase(const hr_task *t);

#endif
