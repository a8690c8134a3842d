/* wk_prune: dead addresses out of both stores (see wk_prune.h). */
#include "wk_prune.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_clock.h"
#include "hr_log.h"

/* Address A of PUSH is dead (the provider said so): out of Redis (on the
 * Redis thread), then out of MySQL, so no later campaign tries it.  A
 * failure is logged; the next campaign's answer prunes it then. */
typedef struct wk_lifecycle_prune_job {
    wk_lifecycle *l;
    int64_t task;
    hr_addr a; /* APP and ADDRESS point into STRINGS */
    char *strings;
    int rc;
    char errstr[512];
} wk_lifecycle_prune_job;

static void wk_lifecycle_prune_run(hr_redis *r, void *arg)
{
    wk_lifecycle_prune_job *p = arg;

    p->rc = hr_addr_unlist(r, &p->a, p->errstr, sizeof p->errstr);
}

static void wk_lifecycle_prune_done(void *arg)
{
    wk_lifecycle_prune_job *p = arg;
    wk_lifecycle *l = p->l;

    if (p->rc == 0)
        p->rc = hr_addr_forget(l->mysql, &p->a, p->errstr, sizeof p->errstr);
    if (p->rc < 0) {
        hr_log_warn("address_prune_failed", "task=%" PRId64 " uid=%" PRId64 " error=\"%s\"",
                    p->task, p->a.uid, p->errstr);
    } else {
        hr_metrics_inc(l->met->pruned);
        hr_log_debug("address_pruned", "task=%" PRId64 " uid=%" PRId64 " platform=%s", p->task,
                     p->a.uid, hr_addr_platform_name(p->a.platform));
    }
    free(p->strings);
    free(p);
}

void wk_lifecycle_prune(void *ctx, wk_push *push, const hr_addr *a)
{
    wk_lifecycle *l = ctx;
    wk_chunk *c = push->owner;
    wk_lifecycle_prune_job *p = calloc(1, sizeof *p);
    size_t napp = strlen(a->app) + 1, naddr = strlen(a->address) + 1;

    if (p == NULL || (p->strings = malloc(napp + naddr)) == NULL) {
        free(p);
        hr_log_warn("address_prune_failed", "task=%" PRId64 " uid=%s error=\"out of memory\"",
                    c->msg.task, push->uid);
        return;
    }
    p->l = l;
    p->task = c->msg.task;
    p->a = *a;
    p->a.app = memcpy(p->strings, a->app, napp);
    p->a.address = memcpy(p->strings + napp, a->address, naddr);
    if (wk_redis_call(l->rd, wk_lifecycle_prune_run, wk_lifecycle_prune_done, p) != 0) {
        hr_log_warn("address_prune_failed",
                    "task=%" PRId64 " uid=%s error=\"the Redis thread took no job\"", c->msg.task,
                    push->uid);
        free(p->strings);
        free(p);
    }
}
