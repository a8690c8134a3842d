/* wk_prune: dead addresses out of both stores (see wk_prune.h). */
#include "wk_prune.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hr_log.h"

typedef struct wk_prune_job {
    wk_prune *pr;
    int64_t task;
    size_t ch_index; /* the task's channel, for the metric */
    hr_addr a;       /* APP and ADDRESS point into STRINGS */
    char *strings;
    int rc;
    char errstr[512];
} wk_prune_job;

static void wk_prune_run(hr_redis *r, void *arg)
{
    wk_prune_job *p = arg;

    p->rc = hr_addr_unlist(r, &p->a, p->errstr, sizeof p->errstr);
}

static void wk_prune_done(void *arg)
{
    wk_prune_job *p = arg;
    wk_prune *pr = p->pr;

    if (p->rc == 0)
        p->rc = hr_addr_forget(pr->mysql, &p->a, p->errstr, sizeof p->errstr);
    if (p->rc < 0) {
        hr_log_warn("address_prune_failed", "task=%" PRId64 " uid=%" PRId64 " error=\"%s\"",
                    p->task, p->a.uid, p->errstr);
    } else {
        hr_metrics_inc(pr->met->chans[p->ch_index].pruned);
        hr_log_debug("address_pruned", "task=%" PRId64 " uid=%" PRId64 " platform=%s", p->task,
                     p->a.uid, hr_addr_platform_name(p->a.platform));
    }
    free(p->strings);
    free(p);
}

void wk_prune_address(void *ctx, wk_push *push, const hr_addr *a)
{
    wk_prune *pr = ctx;
    int64_t task = push->task->row->id;
    wk_prune_job *p = calloc(1, sizeof *p);
    size_t napp = strlen(a->app) + 1, naddr = strlen(a->address) + 1;

    if (p == NULL || (p->strings = malloc(napp + naddr)) == NULL) {
        free(p);
        hr_log_warn("address_prune_failed", "task=%" PRId64 " uid=%s error=\"out of memory\"", task,
                    push->uid);
        return;
    }
    p->pr = pr;
    p->task = task;
    p->ch_index = push->task->ch_index;
    p->a = *a;
    p->a.app = memcpy(p->strings, a->app, napp);
    p->a.address = memcpy(p->strings + napp, a->address, naddr);
    if (wk_redis_call(pr->rd, wk_prune_run, wk_prune_done, p) != 0) {
        hr_log_warn("address_prune_failed",
                    "task=%" PRId64 " uid=%s error=\"the Redis thread took no job\"", task,
                    push->uid);
        free(p->strings);
        free(p);
    }
}
