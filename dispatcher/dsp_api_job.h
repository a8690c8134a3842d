/* dsp_api_job: the API's long operations, run as jobs so that no request
 * thread waits for them (docs/api.md "Jobs").  One kind today: recover,
 * which waits up to about 90 s (hr_recover.h).  POST
 * /v1/tasks/{id}/recover answers 202 with the job's id at once, and GET
 * /v1/jobs/{id} its progress.
 *
 * A job's record is a Redis hash (hr_key_job, "P job:<id>", the id from
 * INCR of hr_key_job_seq) written by job_set.lua, kept DSP_API_JOB_KEEP_MS
 * after its last change, so that any replica of the dispatcher answers its
 * GET.  Fields: kind, task_id, actor, state, phase, created_at,
 * started_at, finished_at, deadline_at, owner (the dispatcher running it),
 * result (JSON) or error.  States: queued -> running -> done | refused
 * (nothing to do, ERRSTR says why) | busy (try again) | failed (a backend)
 * | interrupted (the dispatcher stopped).  A record still queued or
 * running past its deadline_at belonged to a dispatcher that died: GET
 * says lost.
 *
 * The jobs run on one thread of the runner, in the order queued, at most
 * DSP_API_JOB_QUEUE waiting (the next is refused, 503), with connections
 * of their own.  Each writes its own audit row when it ends (action
 * "recover job", the caller of the request as who).  Stopping the runner
 * interrupts a recover at its next wait (hr_recover_opts.stop) and joins
 * the thread. */
#ifndef DSP_API_JOB_H
#define DSP_API_JOB_H

#include <cJSON.h>
#include <stdint.h>

#include "dsp.h"
#include "hr_audit.h"
#include "hr_redis.h"

#define DSP_API_JOB_QUEUE 16
#define DSP_API_JOB_KEEP_MS ((int64_t)86400 * 1000)
/* A recover's longest run (hr_recover.h: ~30 s for the lock, ~60 s for
 * the reports) and a margin: past it a job not ended is lost. */
#define DSP_API_JOB_DEADLINE_MS ((int64_t)180 * 1000)

typedef struct dsp_api_job_runner dsp_api_job_runner;

/* Starts the runner's thread for D (its cfg and owner).  0, or -1 with
 * ERRSTR. */
int dsp_api_job_start(dsp *d, dsp_api_job_runner **out, char *errstr, size_t errlen);
/* Interrupts the running job, drops the queued ones (their records say
 * interrupted), joins the thread and frees; NULL is fine. */
void dsp_api_job_stop(dsp_api_job_runner *runner);

/* Queues a recover of task TASK_ID for WHO, its record written on R first.
 * 0 and *ID; -1 (ERRSTR) when Redis does not answer or the queue is full
 * (both 503 for the caller). */
int dsp_api_job_recover(dsp_api_job_runner *runner, hr_redis *r, int64_t task_id,
                        const hr_audit_who *who, int64_t *id, char *errstr, size_t errlen);

/* The record of job ID as the API shows it into *OUT: 0; 1 when there is
 * none (expired or never made); -1 (ERRSTR) when Redis does not answer. */
int dsp_api_job_get(hr_redis *r, int64_t id, int64_t now_ms, cJSON **out, char *errstr,
                    size_t errlen);

#endif
