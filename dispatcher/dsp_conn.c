/* dsp_conn: a thread's MySQL and Redis connections and the health of the
 * three backends.
 *
 * Connections are made lazily, so the dispatcher starts (and keeps its
 * signal handling) while a backend is down.  After any failure the thread
 * backs off (100 ms doubling to 1 s) before touching a backend again, so a
 * dead server is retried, never spun on, and one that is back is used
 * within a second (issue 34: at 5 s the chunker and the sweeper sat out up
 * to 5 s of a Redis that served again).  Health is one flag per backend
 * shared by every thread: a change is logged once (`mysql_down` with the
 * error, `mysql_up`), not every failed call. */
#include <time.h>

#include "dsp_conn.h"
#include "hr_clock.h"
#include "hr_log.h"

#define DSP_BACKOFF_MIN_MS 100
#define DSP_BACKOFF_MAX_MS 1000

static const char *const dsp_down_events[DSP__BACKENDS] = {"mysql_down", "redis_down",
                                                           "kafka_down"};
static const char *const dsp_up_events[DSP__BACKENDS] = {"mysql_up", "redis_up", "kafka_up"};

static bool dsp_health_set(dsp *d, dsp_backend b, bool down, const char *err)
{
    bool changed;

    pthread_mutex_lock(&d->health_mu);
    changed = d->down[b] != down;
    d->down[b] = down;
    d->seen[b] = d->seen[b] || !down;
    pthread_mutex_unlock(&d->health_mu);
    if (!changed)
        return false;
    if (down)
        hr_log_error(dsp_down_events[b], "error=%s", err ? err : "");
    else
        hr_log_info(dsp_up_events[b], "recovered=1");
    return true;
}

bool dsp_health_ok(dsp *d, dsp_backend b)
{
    return dsp_health_set(d, b, false, NULL);
}

void dsp_health_fail(dsp *d, dsp_backend b, const char *err)
{
    hr_metrics_inc(d->met.backend_errors[b]);
    dsp_health_set(d, b, true, err);
}

void dsp_conn_failed(dsp *d, dsp_conn *conn, dsp_backend b, const char *err)
{
    dsp_health_fail(d, b, err);
    conn->backoff_ms = conn->backoff_ms == 0 ? DSP_BACKOFF_MIN_MS : conn->backoff_ms * 2;
    if (conn->backoff_ms > DSP_BACKOFF_MAX_MS)
        conn->backoff_ms = DSP_BACKOFF_MAX_MS;
    conn->retry_at_ms = hr_clock_now_ms() + conn->backoff_ms;
}

void dsp_health_ready(dsp *d, bool ok[DSP__BACKENDS])
{
    pthread_mutex_lock(&d->health_mu);
    for (size_t i = 0; i < DSP__BACKENDS; i++)
        ok[i] = !d->down[i] && (d->seen[i] || i == DSP_KAFKA);
    pthread_mutex_unlock(&d->health_mu);
}

bool dsp_conn_ready(dsp *d, dsp_conn *conn)
{
    char err[512];

    if (hr_clock_now_ms() < conn->retry_at_ms)
        return false;
    if (conn->m == NULL) {
        if (hr_mysql_connect(d->cfg, &conn->m, err, sizeof err) < 0) {
            dsp_conn_failed(d, conn, DSP_MYSQL, err);
            return false;
        }
        dsp_health_ok(d, DSP_MYSQL);
    }
    if (conn->r == NULL) {
        if (hr_redis_connect(d->cfg, &conn->r, err, sizeof err) < 0) {
            dsp_conn_failed(d, conn, DSP_REDIS, err);
            return false;
        }
        dsp_health_ok(d, DSP_REDIS);
    }
    conn->backoff_ms = 0;
    return true;
}

void dsp_conn_close(dsp_conn *conn)
{
    hr_mysql_free(conn->m);
    hr_redis_free(conn->r);
    conn->m = NULL;
    conn->r = NULL;
}

int64_t dsp_reply_int(redisReply *reply)
{
    int64_t v = reply != NULL && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;

    freeReplyObject(reply);
    return v;
}
