/* wk_gate: the events gate's FIFO of waiting jobs (see wk_gate.h). */
#include "wk_gate.h"

#include <stdlib.h>

struct wk_gate_node {
    wk_redis_job *job;
    uint64_t upto;
    unsigned *held;
    wk_gate_node *next;
};

int wk_gate_hold(wk_gate *g, uint64_t upto, wk_redis_job *job, unsigned *held)
{
    wk_gate_node *n = malloc(sizeof *n);

    if (n == NULL)
        return -1;
    *n = (wk_gate_node){.job = job, .upto = upto, .held = held};
    if (g->tail != NULL)
        g->tail->next = n;
    else
        g->head = n;
    g->tail = n;
    g->waiting++;
    (*held)++;
    return 0;
}

void wk_gate_release(wk_gate *g, wk_redis *rd)
{
    wk_gate_node **at = &g->head, *prev = NULL, *n;

    while ((n = *at) != NULL) {
        if (!wk_gate_open(g, n->upto)) {
            prev = n;
            at = &n->next;
            continue;
        }
        if (wk_redis_submit(rd, n->job) != 0)
            break;
        if (atomic_load(&g->confirmed) < n->upto)
            hr_metrics_inc(g->forced_jobs);
        (*n->held)--;
        *at = n->next;
        if (g->tail == n)
            g->tail = prev;
        g->waiting--;
        free(n);
    }
}

void wk_gate_force(wk_gate *g, wk_redis *rd)
{
    g->forced = true;
    wk_gate_release(g, rd);
}

void wk_gate_clear(wk_gate *g)
{
    wk_gate_node *n, *next;

    for (n = g->head; n != NULL; n = next) {
        next = n->next;
        free(n->job);
        free(n);
    }
    g->head = g->tail = NULL;
    g->waiting = 0;
}
