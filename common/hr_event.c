/* hr_event: the events topic's value, written (see hr_event.h).  The
 * encoder writes the JSON by hand into the caller's buffer: it runs once
 * per push on the worker's reporter thread, where cJSON's tree of
 * allocations would cost more than the write itself. */
#include "hr_event.h"

#include <inttypes.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "hr_template.h"

/* The type table: wire name and family, by hr_event_type. */
static const struct {
    const char *name;
    hr_event_kind kind;
} hr_event_types[HR_EVENT__TYPES] = {
    [HR_EVENT_SENT] = {"sent", HR_EVENT_OUTCOME},
    [HR_EVENT_FAILED] = {"failed", HR_EVENT_OUTCOME},
    [HR_EVENT_THROTTLED] = {"throttled", HR_EVENT_OUTCOME},
    [HR_EVENT_UNREGISTERED] = {"unregistered", HR_EVENT_OUTCOME},
    [HR_EVENT_EXPIRED] = {"expired", HR_EVENT_OUTCOME},
    [HR_EVENT_PULLED] = {"pulled", HR_EVENT_OUTCOME},
    [HR_EVENT_CANCELLED] = {"cancelled", HR_EVENT_OUTCOME},
    [HR_EVENT_OPENED] = {"opened", HR_EVENT_ENGAGEMENT},
    [HR_EVENT_CLICKED] = {"clicked", HR_EVENT_ENGAGEMENT},
};

const char *hr_event_type_name(hr_event_type type)
{
    return (unsigned)type < HR_EVENT__TYPES ? hr_event_types[type].name : NULL;
}

int hr_event_type_parse(const char *name, size_t len, hr_event_type *out)
{
    for (int i = 0; i < HR_EVENT__TYPES; i++)
        if (strlen(hr_event_types[i].name) == len &&
            memcmp(hr_event_types[i].name, name, len) == 0) {
            *out = (hr_event_type)i;
            return 0;
        }
    return -1;
}

hr_event_kind hr_event_type_kind(hr_event_type type)
{
    return (unsigned)type < HR_EVENT__TYPES ? hr_event_types[type].kind : HR_EVENT_OUTCOME;
}

const char *hr_event_kind_name(hr_event_kind kind)
{
    return kind == HR_EVENT_ENGAGEMENT ? "engagement" : "outcome";
}

void hr_event_hash(const char *address, size_t len, unsigned char out[HR_EVENT_HASH_LEN])
{
    SHA256((const unsigned char *)address, len, out);
}

int hr_event_id(const hr_event *ev, char *out, size_t len)
{
    const char *type = hr_event_type_name(ev->type);

    return snprintf(out, len, "%" PRId64 "-%" PRIu64 "-%s", ev->task, ev->uid,
                    type != NULL ? type : "unknown");
}

int hr_event_key(const hr_event *ev, char *out, size_t len)
{
    return snprintf(out, len, "%" PRIu64, ev->uid);
}

/* Appends NAME:VALUE (",\"NAME\":" and the integer, or null when NULLED). */
static int hr_event_int(hr_buf *out, const char *name, int64_t v, bool nulled)
{
    char text[64];
    int n = nulled ? snprintf(text, sizeof text, ",\"%s\":null", name)
                   : snprintf(text, sizeof text, ",\"%s\":%" PRId64, name, v);

    return hr_buf_append(out, text, (size_t)n);
}

/* Appends ,"NAME": and S as a JSON string, or null when S is NULL. */
static int hr_event_str(hr_buf *out, const char *name, const char *s)
{
    char head[40];
    int n = snprintf(head, sizeof head, ",\"%s\":", name);

    if (hr_buf_append(out, head, (size_t)n) < 0)
        return -1;
    if (s == NULL)
        return hr_buf_append(out, "null", 4);
    return hr_buf_append(out, "\"", 1) < 0 || hr_json_escape_append(out, s, strlen(s)) < 0 ||
                   hr_buf_append(out, "\"", 1) < 0
               ? -1
               : 0;
}

int hr_event_encode(const hr_event *ev, hr_buf *out)
{
    static const char hex[] = "0123456789abcdef";
    const char *type = hr_event_type_name(ev->type);
    char id[HR_EVENT_ID_MAX], head[200], hash[2 * HR_EVENT_HASH_LEN + 1];
    size_t start = out->len;
    int n;

    if (type == NULL)
        return -1;
    hr_event_id(ev, id, sizeof id);
    n = snprintf(head, sizeof head, "{\"v\":%d,\"id\":\"%s\",\"type\":\"%s\",\"kind\":\"%s\"",
                 HR_EVENT_VERSION, id, type, hr_event_kind_name(hr_event_type_kind(ev->type)));
    for (size_t i = 0; i < HR_EVENT_HASH_LEN; i++) {
        hash[2 * i] = hex[ev->address_hash[i] >> 4];
        hash[2 * i + 1] = hex[ev->address_hash[i] & 15];
    }
    hash[2 * HR_EVENT_HASH_LEN] = '\0';
    if (hr_buf_append(out, head, (size_t)n) < 0 || hr_event_int(out, "task", ev->task, false) < 0 ||
        hr_event_int(out, "series", ev->series, ev->series <= 0) < 0 ||
        hr_event_int(out, "uid", (int64_t)ev->uid, false) < 0 ||
        hr_event_str(out, "channel", ev->channel) < 0 ||
        hr_event_str(out, "address_hash", ev->has_hash ? hash : NULL) < 0 ||
        hr_event_int(out, "provider_status", ev->provider_status, ev->provider_status <= 0) < 0 ||
        hr_event_int(out, "attempt", ev->attempt, false) < 0 ||
        hr_event_int(out, "at_ms", ev->at_ms, false) < 0 ||
        hr_event_int(out, "due_ms", ev->due_ms, ev->due_ms <= 0) < 0 ||
        hr_event_str(out, "url", ev->url) < 0 || hr_buf_append(out, "}", 1) < 0) {
        hr_buf_truncate(out, start);
        return -1;
    }
    return 0;
}
