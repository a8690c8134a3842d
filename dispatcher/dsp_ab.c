/* dsp_ab: the winner step (see dsp_ab.h).
 *
 * Why here: the owner's chunker is the one place that knows the sample is
 * over (its subs ran out, nothing due waits, no chunk pending) and the one
 * that releases a wait set; the pick is a row write, once, so a crash of
 * the owner anywhere leaves the next owner (a takeover, plain adoption)
 * the same winner: it finds ab_sampled_at and ab_winner written and only
 * releases what still holds.  The workers read the winner with the task
 * (worker/wk_task_cache.c reloads a task whose winner is not known yet at
 * every chunk) and put a held recipient that reaches them before it back
 * to wait (worker/wk_consent.c). */
#include "dsp_ab.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsp_conn.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_variant.h"

#define DSP_AB_RECHECK_MS 1000 /* the sample's end looked for, a failure retried */
#define DSP_AB_MOVE 1000       /* held members made due per wait_defer.lua */

bool dsp_ab_holds(const dsp_task *dt)
{
    return dt->ab && !dt->ab_released && dt->wait_left > 0 &&
           dt->wait_next_ms >= HR_VARIANT_HOLD_MS / 2;
}

/* Whether task ID's sample is over: subs and pending empty.  1, 0, -1. */
static int dsp_ab_sample_over(dsp_conn *conn, int64_t id, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(conn->r);
    char subs[HR_KEY_MAX], pending[HR_KEY_MAX];
    int64_t n;

    hr_key_task(prefix, subs, sizeof subs, id, HR_KEY_SUBS);
    hr_key_task(prefix, pending, sizeof pending, id, HR_KEY_PENDING);
    if ((n = dsp_reply_int(hr_redis_cmdf(conn->r, errstr, errlen, "SCARD %s", subs))) != 0)
        return n < 0 ? -1 : 0;
    n = dsp_reply_int(hr_redis_cmdf(conn->r, errstr, errlen, "HLEN %s", pending));
    return n < 0 ? -1 : n == 0;
}

/* The held rest of task ID made due (score 0), in batches.  The number
 * moved, or -1. */
static int64_t dsp_ab_release(dsp_conn *conn, int64_t id, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(conn->r);
    char wait[HR_KEY_MAX], waves[HR_KEY_MAX], hold[24], max[24];
    const char *argv[6] = {wait, waves, hold, "0", "-1 UTC", max};
    int64_t moved, all = 0;

    hr_key_task(prefix, wait, sizeof wait, id, HR_KEY_WAIT);
    hr_key_task(prefix, waves, sizeof waves, id, HR_KEY_WAVES);
    snprintf(hold, sizeof hold, "%lld", HR_VARIANT_HOLD_MS);
    snprintf(max, sizeof max, "%d", DSP_AB_MOVE);
    do {
        moved = dsp_reply_int(
            hr_redis_eval(conn->r, HR_LUA_WAIT_DEFER, 2, 6, argv, NULL, errstr, errlen));
        if (moved < 0)
            return -1;
        all += moved;
    } while (moved == DSP_AB_MOVE);
    return all;
}

void dsp_ab_step(dsp *d, dsp_task *dt, int64_t now)
{
    dsp_conn *conn = &d->loop_conn;
    hr_task *t = NULL;
    char *winner = NULL, err[512] = "the task row is gone";
    int64_t sampled, moved;
    int over;

    dt->next_ms = now + DSP_AB_RECHECK_MS;
    if ((over = dsp_ab_sample_over(conn, dt->id, err, sizeof err)) <= 0) {
        if (over < 0)
            hr_log_warn("ab_step_failed", "task=%" PRId64 " error=%s", dt->id, err);
        return;
    }
    if (hr_variant_ab_state(conn->m, dt->id, now, &sampled, &winner, err, sizeof err) < 0)
        goto failed;
    if (winner == NULL) {
        if (sampled >= 0 && now < sampled + dt->ab_wait_s * 1000) {
            dt->next_ms = sampled + dt->ab_wait_s * 1000;
            hr_log_debug("ab_waiting", "task=%" PRId64 " until_ms=%" PRId64, dt->id, dt->next_ms);
            goto done;
        }
        if (hr_task_load(conn->m, dt->id, &t, err, sizeof err) != 0 ||
            hr_variant_ab_decide(conn->m, t, &winner, err, sizeof err) < 0)
            goto failed;
        hr_log_info("ab_winner", "task=%" PRId64 " winner=%s metric=%s", dt->id, winner,
                    t->ab_metric);
    }
    if ((moved = dsp_ab_release(conn, dt->id, err, sizeof err)) < 0)
        goto failed;
    hr_log_info("ab_rest_released", "task=%" PRId64 " winner=%s recipients=%" PRId64, dt->id,
                winner, moved);
    dt->ab_released = true;
    dt->wait_next_ms = 0;
    dt->next_ms = now;
    goto done;
failed:
    hr_log_warn("ab_step_failed", "task=%" PRId64 " error=%s", dt->id, err);
done:
    free(winner);
    hr_task_free(t);
}
