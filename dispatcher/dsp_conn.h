/* dsp_conn: a thread's MySQL and Redis connections (struct dsp_conn, in
 * dsp.h) and the health of the three backends (d->down, d->seen under
 * d->health_mu), which every thread reports into. */
#ifndef DSP_CONN_H
#define DSP_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "dsp.h"

/* Connects what is missing unless in backoff; true when both are there. */
bool dsp_conn_ready(dsp *d, dsp_conn *conn);
/* A backend call failed: log the state change once, back off. */
void dsp_conn_failed(dsp *d, dsp_conn *conn, dsp_backend b, const char *err);
void dsp_conn_close(dsp_conn *conn);
/* A backend call worked: log a recovery once; true when B was down (this
 * call saw it recover). */
bool dsp_health_ok(dsp *d, dsp_backend b);
void dsp_health_fail(dsp *d, dsp_backend b, const char *err);
/* Each backend's readiness into OK: not down, and worked at least once
 * (Kafka: not down; an idle producer has nothing to confirm). */
void dsp_health_ready(dsp *d, bool ok[DSP__BACKENDS]);
/* An integer reply's value, -1 for an error or any other type; frees
 * REPLY. */
int64_t dsp_reply_int(redisReply *reply);

#endif
