/* wk_retry: backoff with full jitter and the AIMD in-flight cap
 * (see wk_retry.h). */
#include "wk_retry.h"

#include <stdlib.h>

int64_t wk_retry_backoff_ms(int base_ms, int max_ms, int attempt, uint64_t rnd)
{
    int64_t ceiling = base_ms;

    /* Doubling stops at the cap, so a large attempt cannot overflow. */
    for (int i = 1; i < attempt && ceiling < max_ms; i++)
        ceiling *= 2;
    if (ceiling > max_ms)
        ceiling = max_ms;
    if (ceiling < 0)
        ceiling = 0;
    return (int64_t)(rnd % (uint64_t)(ceiling + 1));
}

uint64_t wk_retry_random(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 2685821657736338717ULL;
}

void wk_retry_cap_init(wk_retry_cap *cap, int max)
{
    cap->max = max < 1 ? 1 : max;
    cap->cap = cap->max;
}

void wk_retry_cap_halve(wk_retry_cap *cap)
{
    cap->cap /= 2;
    if (cap->cap < 1)
        cap->cap = 1;
}

void wk_retry_cap_grow(wk_retry_cap *cap)
{
    if (cap->cap < cap->max)
        cap->cap++;
}

static void wk_retry_heap_set(wk_retry_heap *h, size_t i, wk_retry_node *n)
{
    h->v[i] = n;
    n->index = i;
}

static void wk_retry_heap_up(wk_retry_heap *h, size_t i)
{
    wk_retry_node *n = h->v[i];

    while (i > 0 && h->v[(i - 1) / 2]->due_ms > n->due_ms) {
        wk_retry_heap_set(h, i, h->v[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    wk_retry_heap_set(h, i, n);
}

static void wk_retry_heap_down(wk_retry_heap *h, size_t i)
{
    wk_retry_node *n = h->v[i];

    for (;;) {
        size_t child = 2 * i + 1;

        if (child >= h->n)
            break;
        if (child + 1 < h->n && h->v[child + 1]->due_ms < h->v[child]->due_ms)
            child++;
        if (h->v[child]->due_ms >= n->due_ms)
            break;
        wk_retry_heap_set(h, i, h->v[child]);
        i = child;
    }
    wk_retry_heap_set(h, i, n);
}

int wk_retry_heap_push(wk_retry_heap *h, wk_retry_node *n)
{
    if (hr_vec_reserve(h, h->n + 1) != 0)
        return -1;
    h->v[h->n++] = n;
    wk_retry_heap_up(h, h->n - 1);
    return 0;
}

wk_retry_node *wk_retry_heap_min(const wk_retry_heap *h)
{
    return h->n > 0 ? h->v[0] : NULL;
}

void wk_retry_heap_remove(wk_retry_heap *h, wk_retry_node *n)
{
    size_t i = n->index;

    h->n--;
    if (i == h->n)
        return;
    /* The last node fills the hole, then moves whichever way it must. */
    wk_retry_heap_set(h, i, h->v[h->n]);
    if (i > 0 && h->v[(i - 1) / 2]->due_ms > h->v[i]->due_ms)
        wk_retry_heap_up(h, i);
    else
        wk_retry_heap_down(h, i);
}

void wk_retry_heap_free(wk_retry_heap *h)
{
    hr_vec_free(h);
}
