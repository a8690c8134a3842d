/* wk_task_cache: the worker's task cache (see wk_task_cache.h). */
#include "wk_task_cache.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A task that could not be loaded (no such row, or not pushable), so its
 * chunks are skipped without a query each for WK_TASK_NEG_TTL_MS. */
typedef struct wk_task_neg {
    int64_t id;
    int rc;
    int64_t until_ms;
    char why[200];
} wk_task_neg;

struct wk_task_cache {
    const hr_config *cfg;
    wk_task *slots[WK_TASK_CACHE_SLOTS];
    wk_task_neg neg[WK_TASK_NEG_SLOTS];
    size_t neg_next; /* the slot the next negative entry overwrites */
};

int wk_task_cache_new(const hr_config *cfg, wk_task_cache **out)
{
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return -1;
    (*out)->cfg = cfg;
    return 0;
}

void wk_task_cache_free(wk_task_cache *tc)
{
    if (tc == NULL)
        return;
    for (size_t i = 0; i < WK_TASK_CACHE_SLOTS; i++)
        wk_task_free(tc->slots[i]);
    free(tc);
}

/* The unexpired negative entry of ID, or NULL. */
static const wk_task_neg *wk_task_neg_find(const wk_task_cache *tc, int64_t id, int64_t now_ms)
{
    for (size_t i = 0; i < WK_TASK_NEG_SLOTS; i++)
        if (tc->neg[i].id == id && tc->neg[i].until_ms > now_ms)
            return &tc->neg[i];
    return NULL;
}

static void wk_task_neg_add(wk_task_cache *tc, int64_t id, int rc, const char *why, int64_t now_ms)
{
    wk_task_neg *n = &tc->neg[tc->neg_next];

    tc->neg_next = (tc->neg_next + 1) % WK_TASK_NEG_SLOTS;
    n->id = id;
    n->rc = rc;
    n->until_ms = now_ms + WK_TASK_NEG_TTL_MS;
    snprintf(n->why, sizeof n->why, "%s", why);
}

/* The slot of ID's entry, or WK_TASK_CACHE_SLOTS. */
static size_t wk_task_find(const wk_task_cache *tc, int64_t id)
{
    for (size_t i = 0; i < WK_TASK_CACHE_SLOTS; i++)
        if (tc->slots[i] != NULL && tc->slots[i]->row->id == id)
            return i;
    return WK_TASK_CACHE_SLOTS;
}

/* Whether entry WT may be handed out as it is: a chunk holds it, or it is
 * younger than WK_TASK_TTL_MS.  A winner step's task without its winner
 * is read again for every chunk that is not sharing it: the winner is
 * written before the owner releases the rest, so the rest's chunks read
 * it (one query per chunk, only until the pick). */
static bool wk_task_fresh(const wk_task *wt, int64_t now_ms)
{
    return wt->refs > 0 || (now_ms - wt->loaded_ms < WK_TASK_TTL_MS && !wk_task_undecided(wt));
}

/* The slot a new entry takes: an empty one, else the oldest unreferenced
 * entry's; WK_TASK_CACHE_SLOTS when every entry is referenced. */
static size_t wk_task_victim(const wk_task_cache *tc)
{
    size_t slot = WK_TASK_CACHE_SLOTS;

    for (size_t i = 0; i < WK_TASK_CACHE_SLOTS; i++) {
        if (tc->slots[i] == NULL)
            return i;
        if (tc->slots[i]->refs == 0 &&
            (slot == WK_TASK_CACHE_SLOTS || tc->slots[i]->loaded_ms < tc->slots[slot]->loaded_ms))
            slot = i;
    }
    return slot;
}

/* Puts WT (just built, taken over) into the cache, loaded at NOW_MS: in
 * the slot of an unreferenced entry of its task, else wk_task_victim's.
 * 0, or -1 when every slot is referenced (WT is freed). */
static int wk_task_insert(wk_task_cache *tc, wk_task *wt, int64_t now_ms)
{
    size_t slot = wk_task_find(tc, wt->row->id);

    if (slot == WK_TASK_CACHE_SLOTS || tc->slots[slot]->refs > 0)
        slot = wk_task_victim(tc);
    if (slot == WK_TASK_CACHE_SLOTS) {
        wk_task_free(wt);
        return -1;
    }
    wk_task_free(tc->slots[slot]);
    wt->loaded_ms = now_ms;
    tc->slots[slot] = wt;
    return 0;
}

/* Builds ROW (taken over) and its variants (read on M, only when the row
 * says it has some: most tasks have none, and their load stays one
 * statement) into the cache, or remembers why it cannot be pushed.  0, or
 * as wk_task_build, or -1 (ERRSTR) when the variants' read failed or the
 * cache is full. */
static int wk_task_add(wk_task_cache *tc, hr_mysql *m, hr_task *row, int64_t now_ms, wk_task **out,
                       char *errstr, size_t errlen)
{
    int64_t id = row->id;
    hr_variant_set vs = {0};
    wk_task *wt;
    int rc;

    if (row->has_variants && hr_variant_load(m, id, &vs, errstr, errlen) != 0) {
        hr_task_free(row);
        return -1;
    }
    rc = wk_task_build(tc->cfg, row, &vs, &wt, errstr, errlen);

    if (rc != 0) {
        wk_task_neg_add(tc, id, rc, errstr, now_ms);
        return rc;
    }
    if (wk_task_insert(tc, wt, now_ms) != 0) {
        snprintf(errstr, errlen, "task cache full");
        return -1;
    }
    *out = wt;
    return 0;
}

int wk_task_get(wk_task_cache *tc, hr_mysql *m, int64_t id, int64_t now_ms, wk_task **out,
                char *errstr, size_t errlen)
{
    size_t slot = wk_task_find(tc, id);
    const wk_task_neg *neg = wk_task_neg_find(tc, id, now_ms);
    hr_task *row = NULL;
    wk_task *wt;
    int rc;

    *out = NULL;
    if (neg != NULL) {
        snprintf(errstr, errlen, "%s", neg->why);
        return neg->rc;
    }
    if (slot < WK_TASK_CACHE_SLOTS && wk_task_fresh(tc->slots[slot], now_ms)) {
        tc->slots[slot]->refs++;
        *out = tc->slots[slot];
        return 0;
    }
    rc = hr_task_load(m, id, &row, errstr, errlen);
    if (rc < 0 && slot < WK_TASK_CACHE_SLOTS) {
        /* MySQL is unreachable: the stale entry is better than nothing,
         * and is tried again after another TTL. */
        wt = tc->slots[slot];
        wt->loaded_ms = now_ms;
        wt->refs++;
        *out = wt;
        return 0;
    }
    if (slot < WK_TASK_CACHE_SLOTS) {
        wk_task_free(tc->slots[slot]);
        tc->slots[slot] = NULL;
    }
    if (rc == 1) {
        snprintf(errstr, errlen, "no such task");
        wk_task_neg_add(tc, id, rc, errstr, now_ms);
    }
    if (rc != 0)
        return rc;
    rc = wk_task_add(tc, m, row, now_ms, &wt, errstr, errlen);
    if (rc != 0)
        return rc;
    wt->refs = 1;
    *out = wt;
    return 0;
}

void wk_task_prefetch(wk_task_cache *tc, hr_mysql *m, const int64_t *ids, size_t n, int64_t now_ms)
{
    int64_t want[WK_TASK_PREFETCH_MAX];
    hr_task **rows = NULL;
    size_t i, k = 0, nrows = 0;
    char errstr[256];
    wk_task *wt;

    for (i = 0; i < n && k < WK_TASK_PREFETCH_MAX; i++) {
        size_t slot = wk_task_find(tc, ids[i]), j;

        if (wk_task_neg_find(tc, ids[i], now_ms) != NULL ||
            (slot < WK_TASK_CACHE_SLOTS && wk_task_fresh(tc->slots[slot], now_ms)))
            continue;
        for (j = 0; j < k && want[j] != ids[i]; j++)
            ;
        if (j == k)
            want[k++] = ids[i];
    }
    /* One task: wk_task_get's own load is the same round trip.  A failed
     * load leaves each to wk_task_get, which reports it. */
    if (k < 2 || hr_task_load_many(m, want, k, &rows, &nrows, errstr, sizeof errstr) != 0)
        return;
    for (i = 0; i < nrows; i++)
        wk_task_add(tc, m, rows[i], now_ms, &wt, errstr, sizeof errstr);
    free(rows);
}

void wk_task_put(wk_task_cache *tc, wk_task *wt)
{
    (void)tc;
    if (wt != NULL && wt->refs > 0)
        wt->refs--;
}
