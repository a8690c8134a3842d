/* wk_offsets: contiguous-completion offset tracking (see wk_offsets.h).
 *
 * Each partition keeps entries[head..n) in increasing offset order with a
 * done flag each.  Finishing an entry pops every done entry from the head;
 * the last one popped gives the storable offset.  The array is compacted
 * when the head passes half of it, so memory stays proportional to what is
 * in flight. */
#include "wk_offsets.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hr_vec.h"

typedef struct wk_entry {
    int64_t offset;
    bool done;
} wk_entry;

typedef struct wk_part {
    int32_t partition;
    HR_VEC(wk_entry) entries;
    size_t head;
    int64_t last; /* highest offset ever begun, -1 = none */
} wk_part;

struct wk_offsets {
    HR_VEC(wk_part) parts;
};

int wk_offsets_new(wk_offsets **out)
{
    *out = calloc(1, sizeof **out);
    return *out == NULL ? -1 : 0;
}

static void wk_part_clear(wk_part *p)
{
    hr_vec_free(&p->entries);
    p->head = 0;
}

void wk_offsets_free(wk_offsets *o)
{
    if (o == NULL)
        return;
    for (size_t i = 0; i < o->parts.n; i++)
        wk_part_clear(&o->parts.v[i]);
    hr_vec_free(&o->parts);
    free(o);
}

static wk_part *wk_offsets_find(const wk_offsets *o, int32_t partition)
{
    for (size_t i = 0; i < o->parts.n; i++)
        if (o->parts.v[i].partition == partition)
            return &o->parts.v[i];
    return NULL;
}

static wk_part *wk_offsets_get(wk_offsets *o, int32_t partition)
{
    wk_part *p = wk_offsets_find(o, partition);

    if (p != NULL)
        return p;
    if (hr_vec_reserve(&o->parts, o->parts.n + 1) != 0)
        return NULL;
    p = &o->parts.v[o->parts.n++];
    memset(p, 0, sizeof *p);
    p->partition = partition;
    p->last = -1;
    return p;
}

int wk_offsets_begin(wk_offsets *o, int32_t partition, int64_t offset)
{
    wk_part *p = wk_offsets_get(o, partition);

    if (p == NULL || offset <= p->last)
        return -1;
    if (p->head > 0 && p->head * 2 >= p->entries.n) {
        memmove(p->entries.v, p->entries.v + p->head,
                (p->entries.n - p->head) * sizeof *p->entries.v);
        p->entries.n -= p->head;
        p->head = 0;
    }
    if (hr_vec_push(&p->entries, ((wk_entry){.offset = offset, .done = false})) != 0)
        return -1;
    p->last = offset;
    return 0;
}

int wk_offsets_finish(wk_offsets *o, int32_t partition, int64_t offset, int64_t *store)
{
    wk_part *p = wk_offsets_find(o, partition);
    size_t i;
    bool grew = false;

    if (p == NULL)
        return -1;
    for (i = p->head; i < p->entries.n && p->entries.v[i].offset != offset; i++)
        ;
    if (i == p->entries.n || p->entries.v[i].done)
        return -1;
    p->entries.v[i].done = true;
    while (p->head < p->entries.n && p->entries.v[p->head].done) {
        *store = p->entries.v[p->head].offset + 1;
        p->head++;
        grew = true;
    }
    return grew ? 1 : 0;
}

void wk_offsets_drop(wk_offsets *o, int32_t partition)
{
    wk_part *p = wk_offsets_find(o, partition);

    if (p == NULL)
        return;
    wk_part_clear(p);
    *p = o->parts.v[--o->parts.n];
}

size_t wk_offsets_pending(const wk_offsets *o, int32_t partition)
{
    const wk_part *p = wk_offsets_find(o, partition);

    return p == NULL ? 0 : p->entries.n - p->head;
}
