/* hr_redrive: a task's dead letters back into new chunks, the one
 * implementation behind `heraldctl redrive TASK` and
 * POST /v1/tasks/{id}/redrive (hr_redrive.c says how, step by step).
 *
 * Connections are the caller's; nothing here logs or prints. */
#ifndef HR_REDRIVE_H
#define HR_REDRIVE_H

#include <stdint.h>

#include "hr_mysql.h"
#include "hr_redis.h"
#include "hr_task.h"

typedef struct hr_redrive_result {
    int64_t moved;    /* recipients put into new chunks (0: there were no dead letters) */
    int64_t chunks;   /* new chunks */
    int64_t last_seq; /* the last new chunk's seq, 0 when none */
} hr_redrive_result;

/* Redrives task T (dispatching, dispatched or done) on M and R; a new chunk
 * is published by the next sweep, its publish time being set
 * REDELIVERY_TIMEOUT_S (dispatcher.redelivery_timeout_s) in the past.
 * 0 with *OUT; 1 when T's state is not one redrive serves (ERRSTR says
 * why, nothing changed); -1 on a failure (ERRSTR says what, and whether
 * what had moved by then, in *OUT, is counted in MySQL; redrive may be run
 * again). */
int hr_redrive(hr_mysql *m, hr_redis *r, const hr_task *t, int redelivery_timeout_s,
               hr_redrive_result *out, char *errstr, size_t errlen);

#endif
