/* hk_event: the events held, their partitions' offsets and the id window
 * (see hk_event.h).  The window is an open-addressing set of 64-bit FNV-1a
 * hashes (twice the window's size, linear probing, deletion by backward
 * shift) plus a ring in arrival order that says which hash leaves when a
 * new one comes. */
#include "hk_event.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_parse.h"

#define HK_PARTITIONS 1024

hk_event *hk_event_read(const void *value, size_t len, char *errstr, size_t errlen)
{
    cJSON *j = cJSON_ParseWithLength(value, len);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(j, "uid");
    hk_event *ev = NULL;

    if (!cJSON_IsObject(j) || !cJSON_IsString(id) || strlen(id->valuestring) >= HR_EVENT_ID_MAX ||
        id->valuestring[0] == '\0' ||
        strspn(id->valuestring,
               "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") !=
            strlen(id->valuestring) ||
        !cJSON_IsString(type) || strlen(type->valuestring) >= HK_EVENT_TYPE_MAX ||
        !cJSON_IsNumber(uid) || uid->valuedouble < 1) {
        snprintf(errstr, errlen, "not an event (an id of [A-Za-z0-9_-], a type, a uid)");
        goto done;
    }
    if ((ev = calloc(1, sizeof *ev)) == NULL || (ev->value = malloc(len + 1)) == NULL) {
        free(ev);
        ev = NULL;
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    memcpy(ev->value, value, len);
    ev->value[len] = '\0';
    ev->len = len;
    ev->refs = 1;
    ev->partition = -1;
    snprintf(ev->id, sizeof ev->id, "%s", id->valuestring);
    snprintf(ev->type, sizeof ev->type, "%s", type->valuestring);
    /* The uid exactly: a JSON number past 2^53 loses digits as a double,
     * the id ("<task>-<uid>-<type>") keeps them. */
    {
        const char *dash = strchr(ev->id, '-');
        int64_t exact;

        ev->uid = dash != NULL && hr_parse_uid(dash + 1, strcspn(dash + 1, "-"), &exact) == 0
                      ? (uint64_t)exact
                      : (uint64_t)uid->valuedouble;
    }
done:
    cJSON_Delete(j);
    return ev;
}

void hk_event_free(hk_event *ev)
{
    if (ev == NULL)
        return;
    free(ev->value);
    free(ev);
}

/* ---- offsets ------------------------------------------------------------------ */

TAILQ_HEAD(hk_event_list, hk_event);

typedef struct hk_partition {
    struct hk_event_list events; /* read, in offset order, not yet committable */
    int64_t next;                /* one past the last offset read; -1: none */
    int64_t answered;            /* the last committable offset answered */
} hk_partition;

struct hk_offsets {
    hk_partition parts[HK_PARTITIONS];
};

hk_offsets *hk_offsets_new(void)
{
    hk_offsets *o = calloc(1, sizeof *o);

    if (o == NULL)
        return NULL;
    for (int i = 0; i < HK_PARTITIONS; i++) {
        TAILQ_INIT(&o->parts[i].events);
        o->parts[i].next = o->parts[i].answered = -1;
    }
    return o;
}

void hk_offsets_forget(hk_offsets *o, int32_t partition)
{
    hk_partition *p;
    hk_event *ev;

    if (partition < 0 || partition >= HK_PARTITIONS)
        return;
    p = &o->parts[partition];
    while ((ev = TAILQ_FIRST(&p->events)) != NULL) {
        TAILQ_REMOVE(&p->events, ev, link);
        /* Still held by endpoints: no longer listed, freed by its last put. */
        ev->partition = -1;
        if (ev->refs == 0)
            hk_event_free(ev);
    }
    p->next = p->answered = -1;
}

void hk_offsets_free(hk_offsets *o)
{
    if (o == NULL)
        return;
    for (int i = 0; i < HK_PARTITIONS; i++)
        hk_offsets_forget(o, i);
    free(o);
}

void hk_offsets_add(hk_offsets *o, hk_event *ev)
{
    hk_partition *p;

    if (ev->partition < 0 || ev->partition >= HK_PARTITIONS) {
        ev->partition = -1;
        return;
    }
    p = &o->parts[ev->partition];
    TAILQ_INSERT_TAIL(&p->events, ev, link);
    p->next = ev->offset + 1;
}

void hk_offsets_put(hk_offsets *o, hk_event *ev)
{
    (void)o;
    if (--ev->refs > 0)
        return;
    /* Listed events are freed by hk_offsets_committable, in order. */
    if (ev->partition < 0)
        hk_event_free(ev);
}

int64_t hk_offsets_committable(hk_offsets *o, int32_t partition)
{
    hk_partition *p;
    hk_event *ev;
    int64_t at;

    if (partition < 0 || partition >= HK_PARTITIONS)
        return -1;
    p = &o->parts[partition];
    while ((ev = TAILQ_FIRST(&p->events)) != NULL && ev->refs == 0) {
        TAILQ_REMOVE(&p->events, ev, link);
        hk_event_free(ev);
    }
    at = ev != NULL ? ev->offset : p->next;
    if (at < 0 || at == p->answered)
        return -1;
    p->answered = at;
    return at;
}

/* ---- the window of ids -------------------------------------------------------------- */

struct hk_dedupe {
    size_t cap, n, head; /* the ring: N of CAP, oldest at HEAD */
    uint64_t *ring;
    uint64_t *set; /* 2 * CAP slots, 0 = empty */
    size_t slots;
};

hk_dedupe *hk_dedupe_new(size_t cap)
{
    hk_dedupe *d = calloc(1, sizeof *d);

    if (d == NULL)
        return NULL;
    d->cap = cap;
    d->slots = cap * 2;
    if (cap > 0 && ((d->ring = calloc(cap, sizeof *d->ring)) == NULL ||
                    (d->set = calloc(d->slots, sizeof *d->set)) == NULL)) {
        hk_dedupe_free(d);
        return NULL;
    }
    return d;
}

void hk_dedupe_free(hk_dedupe *d)
{
    if (d == NULL)
        return;
    free(d->ring);
    free(d->set);
    free(d);
}

static uint64_t hk_dedupe_hash(const char *s)
{
    uint64_t h = 14695981039346656037ULL;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h != 0 ? h : 1; /* 0 marks an empty slot */
}

/* The slot holding H, or the empty one it would go to. */
static size_t hk_dedupe_slot(const hk_dedupe *d, uint64_t h)
{
    size_t i = (size_t)(h % d->slots);

    while (d->set[i] != 0 && d->set[i] != h)
        i = (i + 1) % d->slots;
    return i;
}

/* Removes H from the set (backward-shift deletion keeps every probe run
 * unbroken). */
static void hk_dedupe_remove(hk_dedupe *d, uint64_t h)
{
    size_t i = hk_dedupe_slot(d, h), j = i;

    if (d->set[i] == 0)
        return;
    for (;;) {
        size_t home;

        d->set[i] = 0;
        for (;;) {
            j = (j + 1) % d->slots;
            if (d->set[j] == 0)
                return;
            home = (size_t)(d->set[j] % d->slots);
            /* Stays unless its home lies cyclically in (i, j]. */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
                break;
        }
        d->set[i] = d->set[j];
        i = j;
    }
}

bool hk_dedupe_seen(hk_dedupe *d, const char *id)
{
    uint64_t h;
    size_t i;

    if (d->cap == 0)
        return false;
    h = hk_dedupe_hash(id);
    i = hk_dedupe_slot(d, h);
    if (d->set[i] == h)
        return true;
    if (d->n == d->cap) {
        hk_dedupe_remove(d, d->ring[d->head]);
        d->ring[d->head] = h;
        d->head = (d->head + 1) % d->cap;
        i = hk_dedupe_slot(d, h);
    } else {
        d->ring[(d->head + d->n++) % d->cap] = h;
    }
    d->set[i] = h;
    return false;
}
