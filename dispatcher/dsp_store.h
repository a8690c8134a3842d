/* dsp_store: the dispatcher's MySQL statements on task rows that the
 * scanner, poller, timer, lease renewal and API share: loading rows,
 * validating them, the conditional claims; and the lease of a push_job row
 * (one dispatcher at a time does a job: the delivery log's upkeep, the
 * series' occurrences). */
#ifndef DSP_STORE_H
#define DSP_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "dsp.h"
#include "hr_state.h"
#include "hr_task.h"

/* Claims a scheduled task due by NOW_MS (+ DSP_DUE_EARLY_MS); one we
 * already claimed counts again (a retried claim whose reply was lost).
 * 1 = ours, 0 = not (any more) claimable, HR_STATE_BUSY = its row stayed
 * locked (subscriptions being inserted in an open transaction; the DB
 * poller tries again), -1. */
int dsp_store_claim(dsp *d, hr_mysql *m, int64_t id, int64_t now_ms, char *errstr, size_t errlen);
/* Claims the due tasks IDS[N] (sorted ascending) in one statement, as
 * dsp_store_claim each, and hands the rows of those that are ours now to
 * *OUT (*NOUT of them; dsp_store_tasks_free).  0, HR_STATE_BUSY (a row
 * stayed locked: nothing claimed, claim them one at a time), -1. */
int dsp_store_claim_batch(dsp *d, hr_mysql *m, const int64_t *ids, size_t n, int64_t now_ms,
                          hr_task ***out, size_t *nout, char *errstr, size_t errlen);
/* Which of the N tasks IDS are in STATE and claimed by this dispatcher
 * (MINE[i]).  0 or -1. */
int dsp_store_mine(dsp *d, hr_mysql *m, const int64_t *ids, size_t n, hr_task_state state,
                   bool *mine, char *errstr, size_t errlen);
/* The tasks of a query that selected HR_TASK_COLUMNS, or -1. */
int dsp_store_tasks(hr_mysql *m, const char *sql, const hr_mysql_param *p, size_t np,
                    hr_task ***out, size_t *n, char *errstr, size_t errlen);
void dsp_store_tasks_free(hr_task **tasks, size_t n);
/* Validates T; an invalid task is made failed from the state T was read
 * in (logged once).  true = valid. */
bool dsp_store_check(dsp *d, hr_mysql *m, const hr_task *t);
/* The task's effective rate limit: its own, else its channel's. */
int64_t dsp_store_rate_limit(const dsp *d, const hr_task *t);

/* Takes or extends, for LEASE_S seconds on the database's clock, the
 * lease of push_job row JOB for d->owner (an expired lease is taken over).
 * 1 ours, 0 another's, -1. */
int dsp_store_job_lease(dsp *d, hr_mysql *m, const char *job, int lease_s, char *errstr,
                        size_t errlen);

#endif
