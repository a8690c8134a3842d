/* wk_task: a task ready to render pushes.
 *
 * A chunk names its task by id; loading the push_task row, compiling its
 * title/body and its channel's URL, header and body templates, and parsing
 * the payload happen once per task, not per chunk: wk_task_build makes the
 * entry that the cache (wk_task_cache.h) keeps, and the render functions
 * below render it for one recipient.
 *
 * The task's throttle rule (hr_throttle.h) is resolved here too.
 *
 * wk_task also carries the tokens of the task's two budgets granted to
 * this worker: its own rate limit (or finish_by's rate) and its weighted
 * share of its channel's (docs/scheduling.md), spent by the sender, and
 * the sender's ready queue of the task (a task has one channel, so one
 * queue). */
#ifndef WK_TASK_H
#define WK_TASK_H

#include <curl/curl.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hr_config.h"
#include "hr_mysql.h"
#include "hr_rich.h"
#include "hr_task.h"
#include "hr_template.h"
#include "hr_throttle.h"
#include "hr_variant.h"

/* The templates of an smtp channel, in wk_task.mail. */
typedef enum wk_task_mail {
    WK_TASK_SUBJECT,
    WK_TASK_TEXT,
    WK_TASK_HTML,
    WK_TASK_UNSUBSCRIBE,
    WK_TASK__MAIL
} wk_task_mail;

/* One content a recipient may get (hr_variant.h): the task's own
 * (wk_task.content[0]) or a per-locale variant's, each field compiled from
 * the variant's value or, where the variant has none, the task's. */
typedef struct wk_content {
    const char *key;           /* HR_VARIANT_DEFAULT, or the variant's key (its locale) */
    hr_template *title, *body; /* rendered raw */
    /* When title and body name no uid or user.* field they are the same for
     * every recipient: rendered once, at build (fixed). */
    bool fixed;
    hr_buf fixed_title, fixed_body;
    struct cJSON *payload; /* NULL when there is none */
    /* smtp channels: the variant's subject, text, html; NULL = the
     * channel's (wk_task.mail) */
    hr_template *mail[WK_TASK_UNSUBSCRIBE];
} wk_content;

typedef struct wk_task {
    hr_task *row;
    const hr_channel *ch;
    size_t ch_index; /* position in cfg->channels */
    /* content[0] the task's own, content[1 + i] variants.v[i]'s; a push
     * carries the index it got (wk_push.variant, wk_task_variant) */
    wk_content *content;
    size_t ncontent;
    hr_variant_set variants;
    /* rich and silent options (push_task.rich, hr_rich.h), checked by
     * hr_task_validate; has_rich: any set */
    hr_rich rich;
    bool has_rich;
    hr_template *url, *chbody; /* the channel's */
    hr_template **headers;     /* one per channel header value */
    /* smtp channels: subject, text, html, list_unsubscribe (NULL: none) */
    hr_template *mail[WK_TASK__MAIL];
    /* An smtp channel's HTML part with events.tracking configured: its
     * links go through the click redirect, and it loads the open pixel
     * (hr_track.h); the config's strings, NULL = none. */
    const char *track_base, *track_key;
    /* consent (docs/recipients.md): the category's mandatory flag (opt-outs,
     * quiet hours and unsubscribed addresses do not apply), and for an smtp
     * channel without a list_unsubscribe of its own herald's one-click
     * link: recipients.unsubscribe's public_url and signing key (NULL: none) */
    bool mandatory;
    const char *unsub_base;
    const hr_client_key *unsub_key;
    bool uses_user;            /* some template or the throttle_key names user.* */
    hr_throttle_rule throttle; /* limit 0 = the task does not throttle */
    int64_t rate_limit;        /* effective pushes/s for the task, 0 = none */
    char rl_scope[40];         /* "push:task<ID>" */
    char id_text[24];          /* the id in decimal ({{task.id}}, Idempotency-Key) */
    size_t id_len;
    int64_t tokens;          /* granted by the limiter, not yet spent */
    int64_t tokens_until_ms; /* monotonic: the end of the window they were granted in */
    int64_t pace_rate;       /* a finish_by's rate in force at the last grant, 0 = none */
    /* The task's share of its channel's budget (hr_ratelimit_take_share). */
    int weight; /* hr_pace_weight of its priority */
    int64_t share_tokens, share_until_ms;
    /* Sender state (loop thread; wk_sender): the ready pushes, the place
     * in the channel's round robin while any wait, and until when the
     * task's limiter said no. */
    TAILQ_HEAD(wk_push_list, wk_push) ready;
    TAILQ_ENTRY(wk_task) rr;
    bool queued;
    int64_t wait_until_ms;
    bool granting[2]; /* a grant of the task's budget (task, share) is on its way */
    int refs;
    int64_t loaded_ms;
} wk_task;

/* wk_task_get's and wk_task_build's answer for a task whose channel this
 * worker's configuration lacks (another worker may have it). */
#define WK_TASK_NO_CHANNEL 3

/* Builds a task from ROW and its VARIANTS (both always taken over;
 * VARIANTS NULL: none): 0, WK_TASK_NO_CHANNEL, or 2 with ERRSTR when it
 * cannot be pushed (a bad variant too, hr_variant_check).  wk_task_get uses
 * it; tests call it directly. */
int wk_task_build(const hr_config *cfg, hr_task *row, hr_variant_set *variants, wk_task **out,
                  char *errstr, size_t errlen);

/* The content index (wk_task.content) recipient UID (a valid uid) whose
 * profile's locale is LOCALE (NULL: none) gets: hr_variant_ab_pick's
 * variant (its A/B arm, the winner for the rest of a winner step, or its
 * locale's) + 1, or 0.  Never asked for a held one (wk_task_held). */
unsigned wk_task_variant(const wk_task *wt, const char *uid, const char *locale);
/* Whether UID is of the held rest of WT's winner step and WT (as loaded)
 * knows no winner yet: it must not be pushed. */
bool wk_task_held(const wk_task *wt, const char *uid);
/* Whether WT has a winner step whose winner it does not know: the cache
 * keeps such an entry only while a chunk holds it. */
bool wk_task_undecided(const wk_task *wt);
/* Content VARIANT of WT (content[0] for an index past the last). */
const wk_content *wk_task_content(const wk_task *wt, unsigned variant);
/* Frees a task built by wk_task_build.  Accepts NULL. */
void wk_task_free(wk_task *wt);

/* The render functions below render content VARIANT (wk_task_variant) of
 * the task for one recipient. */

/* Renders the task's title and body for UID (raw: a provider module
 * escapes them) into TITLE and BODY (reset first).  0, or -1 with ERRSTR
 * past a buffer's cap. */
int wk_task_render_texts(const wk_task *wt, unsigned variant, const char *uid,
                         const redisReply *user, hr_buf *title, hr_buf *body, char *errstr,
                         size_t errlen);

/* Renders the smtp channel's templates for UID into OUT[wk_task_mail]
 * (each reset first; OUT[i].data stays NULL for a template the channel
 * lacks; OUT[WK_TASK_UNSUBSCRIBE] is herald's one-click link for UID,
 * issued now, when the task has an UNSUB_KEY), the HTML part with its
 * tracking links when the task has them (left as rendered, untracked, when
 * they would not fit under the buffer's cap).  0, or -1 with ERRSTR past a
 * buffer's cap. */
int wk_task_render_mail(const wk_task *wt, unsigned variant, const char *uid,
                        const redisReply *user, hr_buf out[WK_TASK__MAIL], char *errstr,
                        size_t errlen);

/* Where wk_task_render writes one push's request.  Its owner keeps it
 * from one push to the next (wk_xfer), so once the buffers have grown,
 * rendering allocates nothing. */
typedef struct wk_task_out {
    hr_buf url, body;
    hr_buf headers;     /* the channel's header lines: "Name: value" and a NUL each */
    size_t nheaders;    /* how many */
    size_t stripped;    /* control bytes removed from the rendered header values */
    hr_buf title, text; /* the task's title and body, when rendered per recipient */
} wk_task_out;

/* Buffers with the caps of a request's parts; wk_task_out_free accepts a
 * zeroed one. */
void wk_task_out_init(wk_task_out *out);
void wk_task_out_free(wk_task_out *out);

/* Renders one push for UID (USER: its HGETALL reply or NULL) into OUT: URL
 * and body, and the channel's header lines (OUT's buffers reset first).
 * Values rendered into the URL are percent-encoded; control bytes (< 0x20,
 * 0x7f) are removed from rendered header values (header injection) and
 * counted in OUT->stripped.  0, or -1 with ERRSTR (a value past a buffer's
 * cap). */
int wk_task_render(const wk_task *wt, unsigned variant, const char *uid, const redisReply *user,
                   wk_task_out *out, char *errstr, size_t errlen);

/* Appends the channel's body rendered for UID to OUT: one recipient's item
 * of a batched request (the URL and headers are the request's, rendered
 * once).  SCRATCH's title and text take the task's texts when they are
 * rendered per recipient.  0, or -1 with ERRSTR past a buffer's cap. */
int wk_task_render_item(const wk_task *wt, unsigned variant, const char *uid,
                        const redisReply *user, wk_task_out *scratch, hr_buf *out, char *errstr,
                        size_t errlen);

#endif
