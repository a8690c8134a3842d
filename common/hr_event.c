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
    [HR_EVENT_OPTED_OUT] = {"opted_out", HR_EVENT_OUTCOME},
    [HR_EVENT_SUPPRESSED] = {"suppressed", HR_EVENT_OUTCOME},
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

/* Appends the literal L. */
#define HR_EVENT_LIT(out, l) hr_buf_append((out), (l), sizeof(l) - 1)

/* Appends ,"NAME": (NAME a literal without escapes). */
#define HR_EVENT_NAME(out, name) HR_EVENT_LIT((out), ",\"" name "\":")

/* Appends the integer V, or null when NULLED.  No snprintf here: the
 * encoder runs once per push. */
static int hr_event_int(hr_buf *out, int64_t v, bool nulled)
{
    return nulled ? HR_EVENT_LIT(out, "null") : hr_buf_append_i64(out, v);
}

/* Appends S as a JSON string, or null when S is NULL. */
static int hr_event_str(hr_buf *out, const char *s)
{
    if (s == NULL)
        return HR_EVENT_LIT(out, "null");
    return HR_EVENT_LIT(out, "\"") < 0 || hr_json_escape_append(out, s, strlen(s)) < 0 ||
                   HR_EVENT_LIT(out, "\"") < 0
               ? -1
               : 0;
}

int hr_event_encode(const hr_event *ev, hr_buf *out)
{
    static const char hex[] = "0123456789abcdef";
    const char *type = hr_event_type_name(ev->type), *kind;
    char hash[2 * HR_EVENT_HASH_LEN + 1];
    size_t start = out->len;

    if (type == NULL)
        return -1;
    kind = hr_event_kind_name(hr_event_type_kind(ev->type));
    for (size_t i = 0; i < HR_EVENT_HASH_LEN; i++) {
        hash[2 * i] = hex[ev->address_hash[i] >> 4];
        hash[2 * i + 1] = hex[ev->address_hash[i] & 15];
    }
    hash[2 * HR_EVENT_HASH_LEN] = '\0';
    /* The id as hr_event_id writes it: TASK-UID-TYPE. */
    if (HR_EVENT_LIT(out, "{\"v\":") < 0 || hr_buf_append_i64(out, HR_EVENT_VERSION) < 0 ||
        HR_EVENT_NAME(out, "id") < 0 || HR_EVENT_LIT(out, "\"") < 0 ||
        hr_buf_append_i64(out, ev->task) < 0 || HR_EVENT_LIT(out, "-") < 0 ||
        hr_buf_append_u64(out, ev->uid) < 0 || HR_EVENT_LIT(out, "-") < 0 ||
        hr_buf_append(out, type, strlen(type)) < 0 || HR_EVENT_LIT(out, "\"") < 0 ||
        HR_EVENT_NAME(out, "type") < 0 || hr_event_str(out, type) < 0 ||
        HR_EVENT_NAME(out, "kind") < 0 || hr_event_str(out, kind) < 0 ||
        HR_EVENT_NAME(out, "task") < 0 || hr_event_int(out, ev->task, false) < 0 ||
        HR_EVENT_NAME(out, "series") < 0 || hr_event_int(out, ev->series, ev->series <= 0) < 0 ||
        HR_EVENT_NAME(out, "uid") < 0 || hr_event_int(out, (int64_t)ev->uid, false) < 0 ||
        HR_EVENT_NAME(out, "channel") < 0 || hr_event_str(out, ev->channel) < 0 ||
        HR_EVENT_NAME(out, "address_hash") < 0 ||
        hr_event_str(out, ev->has_hash ? hash : NULL) < 0 ||
        HR_EVENT_NAME(out, "provider_status") < 0 ||
        hr_event_int(out, ev->provider_status, ev->provider_status <= 0) < 0 ||
        HR_EVENT_NAME(out, "attempt") < 0 || hr_event_int(out, ev->attempt, false) < 0 ||
        HR_EVENT_NAME(out, "at_ms") < 0 || hr_event_int(out, ev->at_ms, false) < 0 ||
        HR_EVENT_NAME(out, "due_ms") < 0 || hr_event_int(out, ev->due_ms, ev->due_ms <= 0) < 0 ||
        HR_EVENT_NAME(out, "url") < 0 || hr_event_str(out, ev->url) < 0 ||
        HR_EVENT_LIT(out, "}") < 0) {
        hr_buf_truncate(out, start);
        return -1;
    }
    return 0;
}
