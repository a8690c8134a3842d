/* wk_retry: the sender's retry arithmetic, kept pure for unit tests.
 *
 * Backoff is exponential with full jitter: attempt N (1-based) waits a
 * uniformly drawn 0..min(max, base * 2^(N-1)) ms, so retries of many
 * recipients that failed together spread out instead of returning in a
 * wave.  The in-flight cap of a channel follows AIMD: a provider's "slow
 * down" (429/503 with Retry-After) halves it (never below 1), every success
 * grows it by one back up to the configured concurrency.
 *
 * Pushes waiting out a backoff sit in a binary min-heap keyed on their due
 * time (wk_retry_heap): a provider outage puts a whole channel's pushes
 * there, and finding the earliest or the due ones must not walk them all. */
#ifndef WK_RETRY_H
#define WK_RETRY_H

#include <stddef.h>
#include <stdint.h>

#include "hr_vec.h"

/* Delay before retry ATTEMPT (>= 1) drawn with RND (any 64-bit random). */
int64_t wk_retry_backoff_ms(int base_ms, int max_ms, int attempt, uint64_t rnd);
/* The next number of the xorshift64* sequence in *STATE (not 0): jitter
 * needs spread, not secrecy. */
uint64_t wk_retry_random(uint64_t *state);

typedef struct wk_retry_cap {
    int cap; /* requests allowed in flight now, 1..max */
    int max; /* the channel's concurrency */
} wk_retry_cap;

void wk_retry_cap_init(wk_retry_cap *cap, int max);
void wk_retry_cap_halve(wk_retry_cap *cap);
void wk_retry_cap_grow(wk_retry_cap *cap);

/* Embedded in the waiting item; the heap keeps INDEX up to date. */
typedef struct wk_retry_node {
    int64_t due_ms;
    size_t index;
} wk_retry_node;

/* A min-heap by due_ms: V[0..N) on a growable array (hr_vec). */
typedef HR_VEC(wk_retry_node *) wk_retry_heap;

/* Adds N (due_ms set); 0, or -1 when out of memory. */
int wk_retry_heap_push(wk_retry_heap *h, wk_retry_node *n);
/* The earliest node, or NULL when empty. */
wk_retry_node *wk_retry_heap_min(const wk_retry_heap *h);
/* Removes N, which must be in H. */
void wk_retry_heap_remove(wk_retry_heap *h, wk_retry_node *n);
void wk_retry_heap_free(wk_retry_heap *h);

#endif
