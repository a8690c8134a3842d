/* hr_rich: rich and silent push options (see hr_rich.h). */
#include "hr_rich.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

/* STR (a JSON string member M, or absent) copied into OUT (CAP bytes with
 * the NUL).  0, or -1 with ERRSTR. */
static int hr_rich_str(const cJSON *m, const char *name, char *out, size_t cap, char *errstr,
                       size_t errlen)
{
    size_t n;

    if (!cJSON_IsString(m) || (n = strlen(m->valuestring)) == 0 || n >= cap ||
        strpbrk(m->valuestring, "\r\n") != NULL) {
        snprintf(errstr, errlen, "rich.%s: a string of 1..%zu bytes on one line", name, cap - 1);
        return -1;
    }
    memcpy(out, m->valuestring, n + 1);
    return 0;
}

static bool hr_rich_bool(const cJSON *m, bool *out)
{
    if (!cJSON_IsBool(m))
        return false;
    *out = cJSON_IsTrue(m);
    return true;
}

static int hr_rich_buttons(const cJSON *m, hr_rich *out, char *errstr, size_t errlen)
{
    const cJSON *b;

    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) > HR_RICH_BUTTONS_MAX) {
        snprintf(errstr, errlen, "rich.buttons: an array of at most %d buttons",
                 HR_RICH_BUTTONS_MAX);
        return -1;
    }
    cJSON_ArrayForEach(b, m)
    {
        hr_rich_button *btn = &out->buttons[out->nbuttons++];
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id");
        const cJSON *title = cJSON_GetObjectItemCaseSensitive(b, "title");

        if (!cJSON_IsObject(b) || cJSON_GetArraySize(b) != 2 ||
            hr_rich_str(id, "buttons[].id", btn->id, sizeof btn->id, errstr, errlen) != 0 ||
            hr_rich_str(title, "buttons[].title", btn->title, sizeof btn->title, errstr, errlen) !=
                0 ||
            strspn(btn->id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                strlen(btn->id)) {
            snprintf(errstr, errlen,
                     "rich.buttons[%zu]: {\"id\": [A-Za-z0-9_.-]{1,%d}, \"title\": 1..%d bytes}",
                     out->nbuttons - 1, HR_RICH_NAME_MAX, HR_RICH_NAME_MAX);
            return -1;
        }
    }
    return 0;
}

/* Member M of the object into OUT.  0, or -1 with ERRSTR. */
static int hr_rich_member(const cJSON *m, hr_rich *out, char *errstr, size_t errlen)
{
    const char *k = m->string;

    if (strcmp(k, "image") == 0) {
        if (hr_rich_str(m, k, out->image, sizeof out->image, errstr, errlen) != 0)
            return -1;
        if (strncmp(out->image, "https://", 8) != 0) {
            snprintf(errstr, errlen, "rich.image: an https:// URL");
            return -1;
        }
        return 0;
    }
    if (strcmp(k, "buttons") == 0)
        return hr_rich_buttons(m, out, errstr, errlen);
    if (strcmp(k, "sound") == 0)
        return hr_rich_str(m, k, out->sound, sizeof out->sound, errstr, errlen);
    if (strcmp(k, "thread") == 0)
        return hr_rich_str(m, k, out->thread, sizeof out->thread, errstr, errlen);
    if (strcmp(k, "category") == 0)
        return hr_rich_str(m, k, out->category, sizeof out->category, errstr, errlen);
    if (strcmp(k, "badge") == 0) {
        if (!cJSON_IsNumber(m) || m->valuedouble < 0 || m->valuedouble > HR_RICH_BADGE_MAX ||
            m->valuedouble != (double)(int64_t)m->valuedouble) {
            snprintf(errstr, errlen, "rich.badge: an integer 0..%d", HR_RICH_BADGE_MAX);
            return -1;
        }
        out->badge = (int64_t)m->valuedouble;
        return 0;
    }
    if ((strcmp(k, "mutable_content") == 0 && hr_rich_bool(m, &out->mutable_content)) ||
        (strcmp(k, "silent") == 0 && hr_rich_bool(m, &out->silent)))
        return 0;
    if (strcmp(k, "mutable_content") == 0 || strcmp(k, "silent") == 0)
        snprintf(errstr, errlen, "rich.%s: true or false", k);
    else
        snprintf(errstr, errlen,
                 "rich: unknown field \"%.40s\" (image, buttons, sound, badge, thread, category, "
                 "mutable_content, silent)",
                 k);
    return -1;
}

int hr_rich_parse(const char *text, hr_rich *out, char *errstr, size_t errlen)
{
    cJSON *o;
    const cJSON *m;
    int rc = -1;

    memset(out, 0, sizeof *out);
    out->badge = -1;
    if (text == NULL)
        return 0;
    if ((o = cJSON_Parse(text)) == NULL || !cJSON_IsObject(o)) {
        snprintf(errstr, errlen, "rich is not a JSON object");
        goto done;
    }
    cJSON_ArrayForEach(m, o)
    {
        if (hr_rich_member(m, out, errstr, errlen) != 0)
            goto done;
    }
    if (out->silent && (out->image[0] != '\0' || out->nbuttons > 0 || out->sound[0] != '\0' ||
                        out->badge >= 0 || out->mutable_content || out->category[0] != '\0')) {
        snprintf(errstr, errlen,
                 "rich.silent: a silent (background) push shows nothing: no image, buttons, "
                 "sound, badge, category or mutable_content with it");
        goto done;
    }
    rc = 0;
done:
    cJSON_Delete(o);
    return rc;
}

bool hr_rich_any(const hr_rich *r)
{
    return r->image[0] != '\0' || r->nbuttons > 0 || r->sound[0] != '\0' || r->badge >= 0 ||
           r->thread[0] != '\0' || r->category[0] != '\0' || r->mutable_content || r->silent;
}

int hr_rich_check_webpush(const hr_rich *r, char *errstr, size_t errlen)
{
    const char *what = r->sound[0] != '\0'      ? "sound"
                       : r->badge >= 0          ? "badge"
                       : r->category[0] != '\0' ? "category"
                       : r->mutable_content     ? "mutable_content"
                       : r->silent              ? "silent"
                                                : NULL;

    if (what == NULL)
        return 0;
    snprintf(errstr, errlen, "rich.%s: web push cannot carry it (image, buttons and thread it can)",
             what);
    return -1;
}
