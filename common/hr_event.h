/* hr_event: the event of the events topic (events.topic, default
 * herald.events), schemas/kafka/event.v1.json: one recipient's outcome of
 * a task (sent, failed, throttled, unregistered, expired, pulled,
 * cancelled, opted_out, suppressed) or an engagement (opened, clicked), as the worker's reporter,
 * the dispatcher's drops, its pull and its tracking routes publish it
 * (hr_evpub.h) and the webhook daemon (hooks/) reads it.
 *
 *   key   the uid in decimal, so one recipient's events share a partition
 *         and keep their order
 *   value {"v":1,"id":"42-1007-sent","type":"sent","kind":"outcome",
 *          "task":42,"series":null,"uid":1007,"channel":"mail",
 *          "address_hash":"<64 hex>"|null,"provider_status":250|null,
 *          "attempt":1,"at_ms":...,"due_ms":...|null,"url":null}
 *
 * The type is a string from an open set: a new outcome (as issue 28's
 * opted_out and suppressed were) is a new row of the type table below and
 * a new value on the wire, never a new field; consumers pass types they do not
 * know through (the webhook daemon's filters name types as strings).  The
 * kind says which family a type belongs to, so a consumer that counts
 * outcomes counts a type it has never seen in the right column.
 *
 * The id is the same for the same fact every time it is published: task,
 * uid and type (and, for a click, nothing more: a recipient's clicks count
 * once).  At-least-once publishing repeats an event after a crash with the
 * same id, so consumers deduplicate on it (the webhook daemon does, within
 * a window).  A recipient redriven after failing and failing again repeats
 * "failed" under the same id: it is the same outcome.
 *
 * The address hash is the SHA-256 of the address the push went to (a
 * device token, an e-mail address as stored), lower-case hex, so a CRM
 * can match its own records without herald publishing the address; null
 * for a webhook channel (one URL for everybody) and for outcomes decided
 * before an address was picked. */
#ifndef HR_EVENT_H
#define HR_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"

#define HR_EVENT_VERSION 1
/* The longest value hr_event_encode writes (a click's URL included). */
#define HR_EVENT_MAX_BYTES 4096
#define HR_EVENT_URL_MAX 2048 /* a click's original URL, at most */
#define HR_EVENT_HASH_LEN 32  /* SHA-256 */
#define HR_EVENT_ID_MAX 64

/* The types, in the order of the wire's table (append only: the values
 * are also indexes of per-type metrics and counters). */
typedef enum hr_event_type {
    HR_EVENT_SENT,
    HR_EVENT_FAILED,
    HR_EVENT_THROTTLED,
    HR_EVENT_UNREGISTERED,
    HR_EVENT_EXPIRED,
    HR_EVENT_PULLED,
    HR_EVENT_CANCELLED,
    HR_EVENT_OPENED,
    HR_EVENT_CLICKED,
    HR_EVENT_OPTED_OUT,  /* the user opted out of the category or channel type */
    HR_EVENT_SUPPRESSED, /* every address of the channel is on the suppression list */
    HR_EVENT__TYPES
} hr_event_type;

typedef enum hr_event_kind {
    HR_EVENT_OUTCOME,    /* what became of the push: one per recipient and task */
    HR_EVENT_ENGAGEMENT, /* what the recipient did with it: each at most once */
} hr_event_kind;

typedef struct hr_event {
    hr_event_type type;
    int64_t task;
    int64_t series;      /* the task's series (issue 29), 0 = none (null) */
    uint64_t uid;        /* 1..2^63-1 */
    const char *channel; /* the task's channel name */
    bool has_hash;
    unsigned char address_hash[HR_EVENT_HASH_LEN];
    int provider_status; /* the provider's last status (HTTP, SMTP reply code), 0 = none */
    int attempt;         /* requests sent for it, 0 when never pushed */
    int64_t at_ms;       /* when it happened, UTC ms */
    int64_t due_ms;      /* the task's due time, 0 = unknown (null) */
    const char *url;     /* clicked: the link's original URL; else NULL */
} hr_event;

/* TYPE's wire name ("sent"), or NULL out of range. */
const char *hr_event_type_name(hr_event_type type);
/* The type called NAME (LEN bytes): 0 with *OUT, or -1 for a name this
 * build does not know. */
int hr_event_type_parse(const char *name, size_t len, hr_event_type *out);
/* The family of TYPE. */
hr_event_kind hr_event_type_kind(hr_event_type type);
/* KIND's wire name ("outcome", "engagement"). */
const char *hr_event_kind_name(hr_event_kind kind);

/* OUT = SHA-256 of the LEN bytes of ADDRESS. */
void hr_event_hash(const char *address, size_t len, unsigned char out[HR_EVENT_HASH_LEN]);

/* Writes EV's id ("<task>-<uid>-<type>") into OUT (LEN >= HR_EVENT_ID_MAX);
 * its length. */
int hr_event_id(const hr_event *ev, char *out, size_t len);
/* Writes EV's key (the uid in decimal, at most 19 digits) into OUT; its
 * length, or -1 when LEN is under HR_BUF_I64_MAX. */
int hr_event_key(const hr_event *ev, char *out, size_t len);
/* Appends EV's JSON value to OUT.  0, or -1 past OUT's cap or for a type
 * out of range (OUT unchanged). */
int hr_event_encode(const hr_event *ev, hr_buf *out);

#endif
