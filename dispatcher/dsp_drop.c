/* dsp_drop: what is left of a shard dropped and counted (dsp_drop.h).
 * Stateless; each caller passes its own connections. */
#include "dsp_drop.h"

#include <stdlib.h>

#include "hr_keys.h"

int dsp_drop_chunks(dsp_conn *conn, int64_t id, int shard, hr_outcome outcome, dsp_events_drop *ev,
                    int64_t *dropped, int64_t *total, bool *held, char *errstr, size_t errlen)
{
    char pending[256];
    redisReply *all;
    int64_t n;
    size_t i;
    int rc = -1;

    hr_key_shard(hr_redis_prefix(conn->r), pending, sizeof pending, id, shard, HR_KEY_PENDING);
    all = hr_redis_cmdf(conn->r, errstr, errlen, "HKEYS %s", pending);
    if (all == NULL)
        return -1;
    for (i = 0; i < all->elements; i++) {
        int64_t seen = 0;

        if (hr_finish_drop(conn->r, id, shard, strtoll(all->element[i]->str, NULL, 10), outcome,
                           NULL, ev != NULL ? dsp_events_dropped : NULL, ev, &n, &seen, errstr,
                           errlen) < 0)
            goto done;
        if (seen > *total)
            *total = seen;
        if (n < 0)
            *held = true;
        else
            *dropped += n;
    }
    rc = 0;
done:
    freeReplyObject(all);
    return rc;
}

int dsp_drop_shard(dsp_conn *conn, int64_t id, int shard, hr_outcome outcome, dsp_events_drop *ev,
                   int64_t *dropped, int64_t *total, bool *held, char *errstr, size_t errlen)
{
    hr_finish_dropped_fn each = ev != NULL ? dsp_events_dropped : NULL;
    int64_t n;

    if (hr_finish_drop(conn->r, id, shard, HR_FINISH_WAIT, outcome, NULL, each, ev, &n, total,
                       errstr, errlen) < 0)
        return -1;
    *dropped += n;
    if (hr_finish_drop(conn->r, id, shard, HR_FINISH_SUBS, outcome, NULL, each, ev, &n, total,
                       errstr, errlen) < 0)
        return -1;
    *dropped += n;
    return dsp_drop_chunks(conn, id, shard, outcome, ev, dropped, total, held, errstr, errlen);
}
