/* wk_retry: backoff with full jitter and the AIMD in-flight cap
 * (see wk_retry.h). */
#include "wk_retry.h"

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

void wk_retry_cap_init(wk_retry_cap *c, int max)
{
    c->max = max < 1 ? 1 : max;
    c->cap = c->max;
}

void wk_retry_cap_halve(wk_retry_cap *c)
{
    c->cap /= 2;
    if (c->cap < 1)
        c->cap = 1;
}

void wk_retry_cap_grow(wk_retry_cap *c)
{
    if (c->cap < c->max)
        c->cap++;
}
