/* dsp_engage: what a recipient did with a push, counted once per
 * recipient (docs/api.md "Opens and clicks"), and a pull's event: the
 * facts the dispatcher learns about recipients and records.
 *
 * An engagement (opened, clicked) is recorded in this order: is it new
 * (its push_engagement row absent)?  then its event, waited for (so a
 * recorded engagement always has its event: at least once); then, in one
 * transaction, the row (INSERT IGNORE, so two first opens at once count
 * once) and its minute of push_task_series.  A crash between the event and
 * the commit publishes the event again at the next open, under the same id.
 *
 * A pull that moved its uid (pull_ack.lua) gets its event and its minute
 * of the series after the script: a dispatcher killed in between loses
 * that event (the pulled counter keeps it). */
#ifndef DSP_ENGAGE_H
#define DSP_ENGAGE_H

#include <stdint.h>

#include "dsp.h"
#include "hr_event.h"
#include "hr_task.h"

/* Records that UID did TYPE (HR_EVENT_OPENED or HR_EVENT_CLICKED, with the
 * link's URL) with task T, on M: 1 when counted now, 0 when it was counted
 * before, -1 (ERRSTR: MySQL, or Kafka did not confirm the event in time;
 * nothing recorded, the caller answers 503). */
int dsp_engage_record(dsp *d, hr_mysql *m, const hr_task *t, uint64_t uid, hr_event_type type,
                      const char *url, char *errstr, size_t errlen);

/* UID pulled task T (pull_ack.lua moved it): its event, and its minute of
 * the series, on M.  0, or -1 (ERRSTR). */
int dsp_engage_pulled(dsp *d, hr_mysql *m, const hr_task *t, uint64_t uid, char *errstr,
                      size_t errlen);

#endif
