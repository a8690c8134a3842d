/* hr_rich: a task's rich and silent push options (push_task.rich,
 * schemas/mysql/023_rich_split.sql; docs/providers.md "Rich and silent pushes"),
 * read from the JSON object the API, heraldctl and raw SQL write, and
 * checked: the image, up to HR_RICH_BUTTONS_MAX action buttons, sound,
 * badge, thread (group), mutable-content, an APNs category, and silent
 * (a data-only / background push, which carries none of the visible ones).
 * The providers' payload builders map them per channel type (worker/send/
 * wk_apns.c, wk_fcm.c, wk_webpush.c); webhook templates read the object as
 * {{task.rich}}.
 *
 * No logging; errors are -1 with ERRSTR. */
#ifndef HR_RICH_H
#define HR_RICH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HR_RICH_BUTTONS_MAX 3   /* Android shows three actions */
#define HR_RICH_URL_MAX 1024    /* the image's URL */
#define HR_RICH_NAME_MAX 64     /* a button's id and title, the thread, the category */
#define HR_RICH_SOUND_MAX 256   /* a sound file's name, or "default" */
#define HR_RICH_BADGE_MAX 99999 /* the app icon's number */

typedef struct hr_rich_button {
    char id[HR_RICH_NAME_MAX + 1];    /* the action's identifier, [A-Za-z0-9_.-] */
    char title[HR_RICH_NAME_MAX + 1]; /* what the button reads */
} hr_rich_button;

/* The options; zeroed = none (a plain push).  Strings "" = not set. */
typedef struct hr_rich {
    char image[HR_RICH_URL_MAX + 1]; /* an https:// URL */
    hr_rich_button buttons[HR_RICH_BUTTONS_MAX];
    size_t nbuttons;
    char sound[HR_RICH_SOUND_MAX + 1];
    int64_t badge; /* -1 = not set */
    char thread[HR_RICH_NAME_MAX + 1];
    char category[HR_RICH_NAME_MAX + 1]; /* APNs' aps.category (the app's action set) */
    bool mutable_content;                /* APNs' mutable-content: 1 (also for an image) */
    bool silent;                         /* data only: no alert, background priority */
} hr_rich;

/* The options of TEXT (a JSON object's text; NULL: none) into OUT.  0, or
 * -1 with ERRSTR naming the first bad member ("rich.badge: ...").  Silent
 * with any visible option (image, buttons, sound, badge, mutable_content,
 * category) is refused: a background push shows nothing. */
int hr_rich_parse(const char *text, hr_rich *out, char *errstr, size_t errlen);

/* Whether R asks for anything. */
bool hr_rich_any(const hr_rich *r);

/* Whether a web push can carry R: the Notification API shows an image,
 * actions and a tag (the service worker passes them to showNotification),
 * but has no sound, numeric badge, APNs category or mutable-content, and a
 * push to a userVisibleOnly subscription must show something (no silent
 * push).  0, or -1 with ERRSTR naming the first option it cannot carry. */
int hr_rich_check_webpush(const hr_rich *r, char *errstr, size_t errlen);

#endif
