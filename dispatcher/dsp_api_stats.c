/* dsp_api_stats: a task's funnel and series as JSON (see dsp_api_stats.h).
 * The series is one object per channel and minute, each outcome that has
 * a count a key of it (new outcomes appear as new keys). */
#include "dsp_api_stats.h"

#include <stdio.h>
#include <string.h>

#include "dsp_api_parse.h"
#include "hr_state.h"
#include "hr_stats.h"

/* The task's outcome counters (push_task's, exact). */
static void dsp_api_stats_outcomes(cJSON *o, const hr_task *t)
{
    const struct {
        const char *name;
        int64_t v;
    } c[] = {{"total", t->total},
             {"sent", t->sent},
             {"failed", t->failed},
             {"throttled", t->throttled},
             {"unregistered", t->unregistered},
             {"expired", t->expired},
             {"opted_out", t->opted_out},
             {"suppressed", t->suppressed},
             {"pulled", t->pulled},
             {"cancelled", t->cancelled},
             {"retried", t->retried}};

    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        dsp_api_add_id(o, c[i].name, c[i].v);
}

void dsp_api_stats_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_stats st = {0};
    hr_task *t = NULL;
    cJSON *o, *funnel, *f, *series, *pt = NULL;
    char err[512], minute[40];
    int64_t id;

    (void)d;
    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_load_task(ac, id, resp, &t))
        return;
    if (hr_stats_load(ac->m, t, &st, err, sizeof err) < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "task", t->id);
    cJSON_AddStringToObject(o, "state", hr_state_name(t->state));
    funnel = cJSON_AddArrayToObject(o, "funnel");
    f = cJSON_CreateObject();
    cJSON_AddItemToArray(funnel, f);
    cJSON_AddStringToObject(f, "channel", st.funnel.channel);
    dsp_api_add_id(f, "sent", st.funnel.sent);
    dsp_api_add_id(f, "delivered", st.funnel.delivered);
    dsp_api_add_id(f, "opened", st.funnel.opened);
    dsp_api_add_id(f, "clicked", st.funnel.clicked);
    dsp_api_stats_outcomes(cJSON_AddObjectToObject(o, "outcomes"), t);
    series = cJSON_AddArrayToObject(o, "series");
    for (size_t i = 0; i < st.npoints; i++) {
        const hr_stats_point *p = &st.points[i];

        /* The points come by channel and minute: one object each. */
        if (i == 0 || p->minute_ms != st.points[i - 1].minute_ms ||
            strcmp(p->channel, st.points[i - 1].channel) != 0) {
            pt = cJSON_CreateObject();
            cJSON_AddItemToArray(series, pt);
            dsp_api_time(p->minute_ms, minute, sizeof minute);
            cJSON_AddStringToObject(pt, "minute", minute);
            cJSON_AddStringToObject(pt, "channel", p->channel);
        }
        dsp_api_add_id(pt, p->outcome, p->n);
    }
    dsp_api_reply(resp, 200, o);
done:
    hr_stats_free(&st);
    hr_task_free(t);
}
