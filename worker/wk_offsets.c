/* wk_offsets: contiguous-completion offset tracking (see wk_offsets.h).
 *
 * Each partition keeps offs[head..len) in increasing order with a done flag
 * per entry.  Finishing an entry pops every done entry from the head; the
 * last one popped gives the storable offset.  The array is compacted when
 * the head passes half of it, so memory stays proportional to what is in
 * flight. */
#include "wk_offsets.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct wk_part {
    int32_t partition;
    int64_t *offs;
    bool *done;
    size_t head, len, cap;
    int64_t last; /* highest offset ever begun, -1 = none */
} wk_part;

struct wk_offsets {
    wk_part *parts;
    size_t nparts, cap;
};

int wk_offsets_new(wk_offsets **out)
{
    *out = calloc(1, sizeof **out);
    return *out == NULL ? -1 : 0;
}

static void wk_part_clear(wk_part *p)
{
    free(p->offs);
    free(p->done);
    p->offs = NULL;
    p->done = NULL;
    p->head = p->len = p->cap = 0;
}

void wk_offsets_free(wk_offsets *o)
{
    if (o == NULL)
        return;
    for (size_t i = 0; i < o->nparts; i++)
        wk_part_clear(&o->parts[i]);
    free(o->parts);
    free(o);
}

static wk_part *wk_offsets_find(const wk_offsets *o, int32_t partition)
{
    for (size_t i = 0; i < o->nparts; i++)
        if (o->parts[i].partition == partition)
            return &o->parts[i];
    return NULL;
}

static wk_part *wk_offsets_get(wk_offsets *o, int32_t partition)
{
    wk_part *p = wk_offsets_find(o, partition);

    if (p != NULL)
        return p;
    if (o->nparts == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 8;
        wk_part *parts = realloc(o->parts, cap * sizeof *parts);

        if (parts == NULL)
            return NULL;
        o->parts = parts;
        o->cap = cap;
    }
    p = &o->parts[o->nparts++];
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
    if (p->head > 0 && p->head * 2 >= p->len) {
        memmove(p->offs, p->offs + p->head, (p->len - p->head) * sizeof *p->offs);
        memmove(p->done, p->done + p->head, (p->len - p->head) * sizeof *p->done);
        p->len -= p->head;
        p->head = 0;
    }
    if (p->len == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        int64_t *offs = realloc(p->offs, cap * sizeof *offs);

        if (offs == NULL)
            return -1;
        p->offs = offs;
        bool *done = realloc(p->done, cap * sizeof *done);

        if (done == NULL)
            return -1;
        p->done = done;
        p->cap = cap;
    }
    p->offs[p->len] = offset;
    p->done[p->len] = false;
    p->len++;
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
    for (i = p->head; i < p->len && p->offs[i] != offset; i++)
        ;
    if (i == p->len || p->done[i])
        return -1;
    p->done[i] = true;
    while (p->head < p->len && p->done[p->head]) {
        *store = p->offs[p->head] + 1;
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
    *p = o->parts[--o->nparts];
}

size_t wk_offsets_pending(const wk_offsets *o, int32_t partition)
{
    const wk_part *p = wk_offsets_find(o, partition);

    return p == NULL ? 0 : p->len - p->head;
}
