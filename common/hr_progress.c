/* hr_progress: outcome counts and progress of a task (see hr_progress.h). */
#include "hr_progress.h"

#include <stddef.h>

static const char *const hr_progress_names[HR__OUTCOMES] = {
    [HR_OUTCOME_SENT] = "sent",
    [HR_OUTCOME_FAILED] = "failed",
    [HR_OUTCOME_THROTTLED] = "throttled",
    [HR_OUTCOME_PULLED] = "pulled",
    [HR_OUTCOME_CANCELLED] = "cancelled",
    [HR_OUTCOME_UNREGISTERED] = "unregistered",
    [HR_OUTCOME_EXPIRED] = "expired",
    [HR_OUTCOME_OPTED_OUT] = "opted_out",
    [HR_OUTCOME_SUPPRESSED] = "suppressed",
    [HR_OUTCOME_UNACCOUNTED] = "unaccounted",
};

int64_t hr_progress_merge(int64_t mysql, int64_t live)
{
    return live > mysql ? live : mysql;
}

const char *hr_progress_outcome_name(hr_outcome o)
{
    return o >= 0 && o < HR__OUTCOMES ? hr_progress_names[o] : "?";
}

void hr_progress_compute(const hr_progress_in *in, hr_progress *out)
{
    int64_t settled = 0, total;
    size_t i;

    for (i = 0; i < HR_OUTCOME_UNACCOUNTED; i++) {
        out->outcome[i] = in->outcome[i] > 0 ? in->outcome[i] : 0;
        settled += out->outcome[i];
    }
    if (in->subscriptions >= 0) {
        total = in->subscriptions;
    } else {
        /* Without the subscriptions: every recipient is chunked, still in
         * subs or was pulled from subs (a cancel of subs is then unknown,
         * hence the max with what is settled). */
        total = (in->published > 0 ? in->published : 0) + (in->subs_left > 0 ? in->subs_left : 0) +
                out->outcome[HR_OUTCOME_PULLED];
    }
    out->over = in->subscriptions >= 0 && settled > total ? settled - total : 0;
    if (settled > total)
        total = settled;
    out->outcome[HR_OUTCOME_UNACCOUNTED] = in->finished ? total - settled : 0;
    out->done = settled + out->outcome[HR_OUTCOME_UNACCOUNTED];
    out->total = total;
    if (in->finished || (total > 0 && out->done >= total))
        out->ratio = 1;
    else
        out->ratio = total > 0 ? (double)out->done / (double)total : 0;
}
