/* wk_revoke: a revoke drained before the partitions go (see wk_revoke.h). */
#include "wk_revoke.h"

#include <inttypes.h>

#include "hr_log.h"
#include "wk_lifecycle_end.h"
#include "wk_sender.h"

void wk_revoke_init(wk_revoke *rv, uv_loop_t *loop, rd_kafka_t *rk, const hr_config *cfg,
                    wk_lifecycle *life, wk_inbox *inbox, const wk_revoke_hooks *hooks)
{
    *rv = (wk_revoke){.rk = rk, .cfg = cfg, .life = life, .inbox = inbox, .hooks = *hooks};
    uv_timer_init(loop, &rv->grace);
    rv->grace.data = rv;
}

bool wk_revoke_active(const wk_revoke *rv)
{
    return rv->parts != NULL;
}

bool wk_revoke_has(const wk_revoke *rv, int32_t partition)
{
    if (rv->parts == NULL)
        return false;
    for (int i = 0; i < rv->parts->cnt; i++)
        if (rv->parts->elems[i].partition == partition)
            return true;
    return false;
}

/* True while a chunk of the revoke being drained is still on the list. */
static bool wk_revoke_draining(const wk_revoke *rv)
{
    for (int i = 0; i < rv->parts->cnt; i++)
        if (wk_lifecycle_count(rv->life, rv->parts->elems[i].partition) > 0)
            return true;
    return false;
}

/* Unassigns PARTS (every assigned partition: the eager protocol revokes
 * them all), resumed first while still assigned: paused by wk_revoke_start
 * or by the worker's full inbox (wk_revoke.h says why). */
static void wk_revoke_unassign(wk_revoke *rv, rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_resp_err_t err = rd_kafka_resume_partitions(rv->rk, parts);

    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn("resume_failed", "error=%s", rd_kafka_err2str(err));
    err = rd_kafka_assign(rv->rk, NULL);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        hr_log_warn("unassign_failed", "error=%s", rd_kafka_err2str(err));
    rv->hooks.unassigned(rv->hooks.ctx);
}

void wk_revoke_finish(wk_revoke *rv)
{
    rd_kafka_topic_partition_list_t *parts = rv->parts;

    if (parts == NULL)
        return;
    rv->parts = NULL;
    uv_timer_stop(&rv->grace);
    wk_lifecycle_abandon_revoked(rv->life, "revoke grace expired");
    for (int i = 0; i < parts->cnt; i++)
        wk_lifecycle_forget(rv->life, parts->elems[i].partition);
    hr_log_info("partitions_revoked", "count=%d", parts->cnt);
    wk_revoke_unassign(rv, parts);
    rd_kafka_topic_partition_list_destroy(parts);
}

void wk_revoke_check(wk_revoke *rv)
{
    if (rv->parts != NULL && !wk_revoke_draining(rv))
        wk_revoke_finish(rv);
}

static void wk_revoke_grace_cb(uv_timer_t *t)
{
    wk_revoke *rv = t->data;

    hr_log_warn("revoke_grace_expired", "in_flight=%zu", wk_sender_in_flight(rv->life->sender));
    wk_revoke_finish(rv);
    /* The group waits for no one: the abandons go even with events not yet
     * confirmed (counted). */
    wk_lifecycle_release(rv->life, true);
}

/* The longest a revoke waits for its chunks' running requests: the
 * slowest channel's request timeout and a second for the answers, at most
 * WK_REVOKE_GRACE_MAX_MS — the whole group waits in the rebalance
 * meanwhile, and librdkafka wants the unassign well within the session
 * timeout (6 s). */
static uint64_t wk_revoke_grace_ms(const wk_revoke *rv)
{
    int ms = 0;

    for (size_t i = 0; i < rv->cfg->nchannels; i++)
        if (rv->cfg->channels[i].timeout_ms > ms)
            ms = rv->cfg->channels[i].timeout_ms;
    ms += 1000;
    return (uint64_t)(ms < WK_REVOKE_GRACE_MAX_MS ? ms : WK_REVOKE_GRACE_MAX_MS);
}

void wk_revoke_start(wk_revoke *rv, rd_kafka_topic_partition_list_t *parts, bool stopping)
{
    size_t draining = 0;

    if (rv->parts != NULL) /* not expected: librdkafka waits for the unassign */
        wk_revoke_finish(rv);
    for (int i = 0; i < parts->cnt; i++) {
        /* Never begun: the next owner consumes them from the stored offset. */
        size_t queued = wk_inbox_drop(rv->inbox, parts->elems[i].partition);

        if (queued > 0)
            hr_log_info("partition_queued_dropped", "partition=%" PRId32 " messages=%zu",
                        parts->elems[i].partition, queued);
    }
    rv->parts = rd_kafka_topic_partition_list_copy(parts);
    if (rv->parts == NULL) {
        /* Out of memory: no drain, but no pause flag left behind either. */
        wk_revoke_unassign(rv, parts);
        return;
    }
    rd_kafka_pause_partitions(rv->rk, rv->parts);
    for (int i = 0; i < parts->cnt; i++)
        draining += wk_lifecycle_revoke(rv->life, parts->elems[i].partition);
    if (draining == 0 || stopping) {
        wk_revoke_finish(rv);
        return;
    }
    hr_log_info("revoke_draining", "partitions=%d chunks=%zu in_flight=%zu", parts->cnt, draining,
                wk_sender_in_flight(rv->life->sender));
    uv_timer_start(&rv->grace, wk_revoke_grace_cb, wk_revoke_grace_ms(rv), 0);
}

void wk_revoke_close(wk_revoke *rv)
{
    uv_close((uv_handle_t *)&rv->grace, NULL);
}

void wk_revoke_clear(wk_revoke *rv)
{
    if (rv->parts != NULL)
        rd_kafka_topic_partition_list_destroy(rv->parts);
    rv->parts = NULL;
}
