/* hk_endpoint: the endpoints, their queues and deliveries (see
 * hk_endpoint.h).  An endpoint's queue is an array used from HEAD on
 * (compacted when half of it is consumed); its batch in flight is the
 * first NBATCH events of the queue, or, for a redrive, the claimed dead
 * letters in REDRIVE.  An endpoint whose row disappeared while a delivery
 * was in flight is unlinked and freed by that delivery's answer. */
#include "hk_endpoint.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_body.h"
#include "hk_store.h"
#include "hr_clock.h"
#include "hr_log.h"
#include "hr_sign.h"
#include "hr_vec.h"

/* The endpoints' dead letters are counted again (a scan) this often. */
#define HK_ENDPOINT_COUNT_MS 60000
/* How long a redrive's claim on dead letters lasts. */
#define HK_ENDPOINT_CLAIM_MS 60000
/* A request body: batch_max events of at most HR_EVENT_MAX_BYTES. */
#define HK_ENDPOINT_BODY_MAX(batch) ((size_t)(batch) * (HR_EVENT_MAX_BYTES + 1) + 256)

typedef struct hk_endpoint {
    struct hk_endpoints *es;
    int64_t id;
    char *url;
    char **types; /* the filter; none = every type */
    size_t ntypes;
    hr_sign_secret secret;
    bool secret_ok; /* the row's secret parses (logged once when not) */
    bool enabled;
    bool gone; /* its row disappeared: freed when its delivery answers */
    bool seen; /* in the last reload */
    HR_VEC(hk_event *) queue;
    size_t head;
    /* the delivery in flight, or the batch to send again */
    bool inflight;
    size_t nbatch;              /* events of the queue in it (0: a redrive, or none) */
    HR_VEC(hk_event *) redrive; /* claimed dead letters in it */
    int64_t first_try_ms;       /* the batch's first attempt, 0 = none yet */
    int64_t next_try_ms;        /* not before (a back-off) */
    int64_t backoff_ms;
    int64_t failing_since_ms; /* 0 = healthy */
    int64_t next_claim_ms;    /* dead letters looked for again then */
    int64_t dead;             /* its dead letters (counted, plus buried since) */
    char last_error[256];
} hk_endpoint;

struct hk_endpoints {
    const hr_config *cfg;
    char owner[192];
    hr_mysql *m;
    hk_metrics *met;
    hk_offsets *offsets;
    HR_VEC(hk_endpoint *) v;
    int64_t next_reload_ms, next_count_ms;
    bool loaded; /* push_hook was read once: events may be taken */
};

static size_t hk_endpoint_waiting(const hk_endpoint *e)
{
    return e->queue.n - e->head;
}

/* Drops the first N events of E's queue, putting each. */
static void hk_endpoint_pop(hk_endpoint *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        hk_offsets_put(e->es->offsets, e->queue.v[e->head + i]);
    e->head += n;
    if (e->head == e->queue.n) {
        e->queue.n = e->head = 0;
    } else if (e->head > e->queue.n / 2) {
        memmove(e->queue.v, e->queue.v + e->head, (e->queue.n - e->head) * sizeof *e->queue.v);
        e->queue.n -= e->head;
        e->head = 0;
    }
}

/* Drops the redrive batch's events. */
static void hk_endpoint_redrive_clear(hk_endpoint *e)
{
    for (size_t i = 0; i < e->redrive.n; i++)
        hk_event_free(e->redrive.v[i]);
    e->redrive.n = 0;
}

static void hk_endpoint_free(hk_endpoint *e)
{
    if (e == NULL)
        return;
    hk_endpoint_pop(e, hk_endpoint_waiting(e));
    hr_vec_free(&e->queue);
    hk_endpoint_redrive_clear(e);
    hr_vec_free(&e->redrive);
    for (size_t i = 0; i < e->ntypes; i++)
        free(e->types[i]);
    free(e->types);
    free(e->url);
    free(e);
}

/* Sets E's filter from TYPES ("a,b,c"; "" = every type).  -1 when out of
 * memory. */
static int hk_endpoint_types(hk_endpoint *e, const char *types)
{
    const char *p = types;

    for (size_t i = 0; i < e->ntypes; i++)
        free(e->types[i]);
    free(e->types);
    e->types = NULL;
    e->ntypes = 0;
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        char **more;

        if (len > 0) {
            if ((more = realloc(e->types, (e->ntypes + 1) * sizeof *more)) == NULL)
                return -1;
            e->types = more;
            if ((e->types[e->ntypes] = strndup(p, len)) == NULL)
                return -1;
            e->ntypes++;
        }
        p += len + (p[len] == ',');
    }
    return 0;
}

static bool hk_endpoint_wants(const hk_endpoint *e, const char *type)
{
    if (e->ntypes == 0)
        return true;
    for (size_t i = 0; i < e->ntypes; i++)
        if (strcmp(e->types[i], type) == 0)
            return true;
    return false;
}

hk_endpoints *hk_endpoints_new(const hr_config *cfg, const char *owner, hr_mysql *m,
                               hk_metrics *met, hk_offsets *offsets)
{
    hk_endpoints *es = calloc(1, sizeof *es);

    if (es == NULL)
        return NULL;
    es->cfg = cfg;
    snprintf(es->owner, sizeof es->owner, "%s", owner);
    es->m = m;
    es->met = met;
    es->offsets = offsets;
    return es;
}

void hk_endpoints_free(hk_endpoints *es)
{
    if (es == NULL)
        return;
    for (size_t i = 0; i < es->v.n; i++)
        hk_endpoint_free(es->v.v[i]);
    hr_vec_free(&es->v);
    free(es);
}

/* The endpoint of hook ID, or NULL. */
static hk_endpoint *hk_endpoints_find(hk_endpoints *es, int64_t id)
{
    for (size_t i = 0; i < es->v.n; i++)
        if (es->v.v[i]->id == id)
            return es->v.v[i];
    return NULL;
}

/* Applies row H to E (new or known). */
static int hk_endpoint_apply(hk_endpoint *e, const hk_store_hook *h)
{
    char err[256];
    char *url = strdup(h->url);

    if (url == NULL || hk_endpoint_types(e, h->types) < 0) {
        free(url);
        return -1;
    }
    free(e->url);
    e->url = url;
    if (hr_sign_secret_parse(h->secret, &e->secret, err, sizeof err) == 0) {
        e->secret_ok = true;
    } else if (e->secret_ok || e->dead == 0) {
        hr_log_error("hook_secret_invalid", "hook=%" PRId64 " error=%s", e->id, err);
        e->secret_ok = false;
    }
    /* Enabled again by an operator: a fresh start. */
    if (h->enabled && !e->enabled) {
        e->failing_since_ms = e->first_try_ms = e->next_try_ms = e->backoff_ms = 0;
        e->next_claim_ms = 0;
    }
    e->enabled = h->enabled;
    if (h->dead >= 0)
        e->dead = h->dead;
    e->seen = true;
    return 0;
}

int hk_endpoints_reload(hk_endpoints *es, int64_t now_ms, char *errstr, size_t errlen)
{
    bool count = now_ms >= es->next_count_ms;
    hk_store_hook *hooks = NULL;
    size_t n = 0, k = 0;
    int64_t disabled = 0;

    if (now_ms < es->next_reload_ms)
        return 0;
    es->next_reload_ms = now_ms + es->cfg->events.hooks.reload_ms;
    if (hk_store_hooks(es->m, count, &hooks, &n, errstr, errlen) < 0)
        return -1;
    if (count)
        es->next_count_ms = now_ms + HK_ENDPOINT_COUNT_MS;
    for (size_t i = 0; i < es->v.n; i++)
        es->v.v[i]->seen = false;
    for (size_t i = 0; i < n; i++) {
        hk_endpoint *e = hk_endpoints_find(es, hooks[i].id);

        if (e == NULL) {
            if ((e = calloc(1, sizeof *e)) == NULL || hr_vec_push(&es->v, e) != 0) {
                free(e);
                break;
            }
            e->es = es;
            e->id = hooks[i].id;
            hr_log_info("hook_added", "hook=%" PRId64 " url=%s types=%s", e->id, hooks[i].url,
                        hooks[i].types[0] != '\0' ? hooks[i].types : "*");
        }
        if (hk_endpoint_apply(e, &hooks[i]) < 0)
            hr_log_error("hook_reload_failed", "hook=%" PRId64 " error=out of memory", e->id);
        disabled += !hooks[i].enabled;
    }
    hk_store_hooks_free(hooks, n);
    es->loaded = true;
    /* Rows gone: their endpoints go (at once, or when their delivery
     * answers). */
    for (size_t i = 0; i < es->v.n; i++) {
        hk_endpoint *e = es->v.v[i];

        if (e->seen) {
            es->v.v[k++] = e;
            continue;
        }
        hr_log_info("hook_removed", "hook=%" PRId64 " events_dropped=%zu", e->id,
                    hk_endpoint_waiting(e));
        if (e->inflight)
            e->gone = true;
        else
            hk_endpoint_free(e);
    }
    es->v.n = k;
    hr_metrics_set(es->met->disabled, (double)disabled);
    return 0;
}

void hk_endpoints_dispatch(hk_endpoints *es, hk_event *ev, int64_t read_ms)
{
    ev->read_ms = read_ms;
    for (size_t i = 0; i < es->v.n; i++) {
        hk_endpoint *e = es->v.v[i];

        if (!hk_endpoint_wants(e, ev->type) || hr_vec_push(&e->queue, ev) != 0)
            continue;
        ev->refs++;
    }
}

/* Dead-letters the N events of E's queue from index AT (HEAD or beyond)
 * with WHY, and drops them from the queue: those over the endpoint's
 * dead_letter_max are dropped instead (counted).  0, or -1 when MySQL
 * failed (nothing changed: they stay queued). */
static int hk_endpoint_bury(hk_endpoint *e, size_t at, size_t n, const char *why)
{
    hk_endpoints *es = e->es;
    int64_t room = es->cfg->events.hooks.dead_letter_max - e->dead;
    size_t keep = room <= 0 ? 0 : (int64_t)n < room ? n : (size_t)room;
    hk_store_dead *rows = keep > 0 ? calloc(keep, sizeof *rows) : NULL;
    char err[512];

    if (keep > 0 && rows == NULL)
        return -1;
    for (size_t i = 0; i < keep; i++) {
        const hk_event *ev = e->queue.v[at + i];

        rows[i] = (hk_store_dead){ev->id, ev->uid, ev->value, ev->len};
    }
    if (keep > 0 && hk_store_bury(es->m, e->id, rows, keep, why, err, sizeof err) < 0) {
        hr_log_warn("hook_bury_failed", "hook=%" PRId64 " events=%zu error=%s", e->id, keep, err);
        atomic_store(&es->met->mysql_ok, false);
        free(rows);
        return -1;
    }
    free(rows);
    e->dead += (int64_t)keep;
    hr_metrics_add(es->met->dead_lettered, keep);
    if (n > keep) {
        hr_metrics_add(es->met->dropped, n - keep);
        hr_log_error("hook_dead_letters_full", "hook=%" PRId64 " dropped=%zu max=%d", e->id,
                     n - keep, es->cfg->events.hooks.dead_letter_max);
    }
    /* Out of the queue: the first N from AT. */
    for (size_t i = 0; i < n; i++)
        hk_offsets_put(es->offsets, e->queue.v[at + i]);
    memmove(e->queue.v + at, e->queue.v + at + n, (e->queue.n - at - n) * sizeof *e->queue.v);
    e->queue.n -= n;
    if (e->queue.n == e->head)
        e->queue.n = e->head = 0;
    return 0;
}

/* E failed for too long: disabled, in MySQL (unless an operator or
 * another process did it first) and here; its queue is dead-lettered by
 * the next pump. */
static void hk_endpoint_disable(hk_endpoint *e, int64_t now_ms)
{
    hk_endpoints *es = e->es;
    char reason[512], err[512];
    int rc;

    snprintf(reason, sizeof reason, "failing for %" PRId64 " s without a success: %s",
             (now_ms - e->failing_since_ms) / 1000, e->last_error);
    rc = hk_store_disable(es->m, e->id, reason, err, sizeof err);
    if (rc < 0) {
        hr_log_warn("hook_disable_failed", "hook=%" PRId64 " error=%s", e->id, err);
        return;
    }
    e->enabled = false;
    if (rc == 1) {
        hr_metrics_inc(es->met->disables);
        hr_log_error("hook_disabled", "hook=%" PRId64 " url=%s reason=%s", e->id, e->url, reason);
    }
}

void hk_endpoints_answered(void *ctx, const hk_http_result *res)
{
    hk_endpoint *e = ctx;
    hk_endpoints *es = e->es;
    int64_t now = hr_clock_now_ms();
    const hr_config *cfg = es->cfg;
    bool ok = res->status >= 200 && res->status <= 299;
    size_t n = e->nbatch + e->redrive.n;
    char err[512];

    e->inflight = false;
    hr_metrics_inc(ok ? es->met->requests_ok : es->met->requests_failed);
    hr_metrics_observe(es->met->latency, res->seconds);
    if (e->gone) {
        /* Its row was deleted meanwhile. */
        hk_endpoint_free(e);
        return;
    }
    if (ok) {
        if (e->redrive.n > 0) {
            int64_t *ids = calloc(e->redrive.n, sizeof *ids);

            for (size_t i = 0; ids != NULL && i < e->redrive.n; i++)
                ids[i] = e->redrive.v[i]->dead_id;
            /* Not deleted: the claim runs out, and they go once more. */
            if (ids == NULL || hk_store_redriven(es->m, ids, e->redrive.n, err, sizeof err) < 0)
                hr_log_warn("hook_redrive_delete_failed", "hook=%" PRId64 " error=%s", e->id,
                            ids == NULL ? "out of memory" : err);
            else
                e->dead -= (int64_t)e->redrive.n;
            free(ids);
            hr_metrics_add(es->met->redriven, e->redrive.n);
            hk_endpoint_redrive_clear(e);
        } else {
            hr_metrics_add(es->met->delivered, e->nbatch);
            hk_endpoint_pop(e, e->nbatch);
        }
        e->nbatch = 0;
        e->first_try_ms = e->next_try_ms = e->backoff_ms = 0;
        if (e->failing_since_ms > 0) {
            hr_log_info("hook_recovered", "hook=%" PRId64 " failed_for_ms=%" PRId64, e->id,
                        now - e->failing_since_ms);
            if (hk_store_failing(es->m, e->id, false, err, sizeof err) < 0)
                hr_log_warn("hook_state_failed", "hook=%" PRId64 " error=%s", e->id, err);
            e->failing_since_ms = 0;
        }
        return;
    }
    if (res->status > 0)
        snprintf(e->last_error, sizeof e->last_error, "HTTP %ld: %.200s", res->status, res->err);
    else
        snprintf(e->last_error, sizeof e->last_error, "%s", res->err);
    if (e->failing_since_ms == 0) {
        e->failing_since_ms = now;
        hr_log_warn("hook_failing", "hook=%" PRId64 " events=%zu error=%s", e->id, n,
                    e->last_error);
        if (hk_store_failing(es->m, e->id, true, err, sizeof err) < 0)
            hr_log_warn("hook_state_failed", "hook=%" PRId64 " error=%s", e->id, err);
    }
    e->backoff_ms = e->backoff_ms == 0 ? cfg->events.hooks.retry_backoff_ms : e->backoff_ms * 2;
    if (e->backoff_ms > cfg->events.hooks.retry_max_backoff_ms)
        e->backoff_ms = cfg->events.hooks.retry_max_backoff_ms;
    e->next_try_ms = now + e->backoff_ms;
    if (e->redrive.n > 0) {
        /* The dead letters stay; their claim runs out and they come back. */
        hk_endpoint_redrive_clear(e);
        e->next_claim_ms = now + HK_ENDPOINT_CLAIM_MS;
        e->first_try_ms = 0;
    } else if (now - e->first_try_ms >= cfg->events.hooks.retry_for_ms &&
               hk_endpoint_bury(e, e->head, e->nbatch, e->last_error) == 0) {
        hr_log_warn("hook_batch_dead_lettered", "hook=%" PRId64 " events=%zu error=%s", e->id,
                    e->nbatch, e->last_error);
        e->nbatch = 0;
        e->first_try_ms = 0;
    }
    if (now - e->failing_since_ms >= cfg->events.hooks.disable_after_ms)
        hk_endpoint_disable(e, now);
}

/* Claims a batch of E's dead letters marked for a redrive, into
 * E->redrive (as events); whether there are any. */
static bool hk_endpoint_claim(hk_endpoint *e, int64_t now_ms)
{
    hk_endpoints *es = e->es;
    hk_store_claimed *c = NULL;
    size_t got = 0;
    char err[512];

    if (now_ms < e->next_claim_ms)
        return false;
    e->next_claim_ms = now_ms + es->cfg->events.hooks.reload_ms;
    if (hk_store_claim(es->m, e->id, es->owner, es->cfg->events.hooks.batch_max,
                       HK_ENDPOINT_CLAIM_MS, &c, &got, err, sizeof err) < 0) {
        hr_log_warn("hook_claim_failed", "hook=%" PRId64 " error=%s", e->id, err);
        return false;
    }
    for (size_t i = 0; i < got; i++) {
        hk_event *ev = hk_event_read(c[i].value, strlen(c[i].value), err, sizeof err);

        if (ev == NULL || hr_vec_push(&e->redrive, ev) != 0) {
            /* An unreadable dead letter stays: an operator deletes it. */
            hr_log_warn("hook_dead_letter_unread", "hook=%" PRId64 " dead=%" PRId64 " error=%s",
                        e->id, c[i].dead_id, ev == NULL ? err : "out of memory");
            hk_event_free(ev);
            continue;
        }
        ev->dead_id = c[i].dead_id;
    }
    hk_store_claimed_free(c, got);
    return e->redrive.n > 0;
}

/* Starts E's delivery of its batch (the queue's first events, or the
 * claimed dead letters). */
static void hk_endpoint_send(hk_endpoint *e, hk_http *http, int64_t now_ms)
{
    const hr_config *cfg = e->es->cfg;
    hk_event *const *evs = e->redrive.n > 0 ? e->redrive.v : e->queue.v + e->head;
    size_t n = e->redrive.n > 0 ? e->redrive.n : e->nbatch;
    char headers[HK_BODY_HEADERS][HK_BODY_HEADER_MAX], err[256];
    const char *hv[HK_BODY_HEADERS];
    hr_buf body;

    hr_buf_init(&body, HK_ENDPOINT_BODY_MAX(cfg->events.hooks.batch_max));
    if (hk_body_build(evs, n, now_ms, &body) < 0 ||
        hk_body_headers(e->id, evs[0], n, &e->secret, &body, now_ms / 1000, headers, err,
                        sizeof err) < 0) {
        hr_log_error("hook_body_failed", "hook=%" PRId64 " events=%zu", e->id, n);
        e->next_try_ms = now_ms + cfg->events.hooks.retry_max_backoff_ms;
        goto done;
    }
    for (size_t i = 0; i < HK_BODY_HEADERS; i++)
        hv[i] = headers[i];
    if (hk_http_post(http, e->url, hv, HK_BODY_HEADERS, body.data, body.len,
                     cfg->events.hooks.timeout_ms, e) < 0) {
        e->next_try_ms = now_ms + cfg->events.hooks.retry_backoff_ms;
        goto done;
    }
    e->inflight = true;
    if (e->first_try_ms == 0)
        e->first_try_ms = now_ms;
done:
    hr_buf_free(&body);
}

void hk_endpoints_pump(hk_endpoints *es, hk_http *http, int64_t now_ms)
{
    const hr_config *cfg = es->cfg;
    size_t queued = 0;

    for (size_t i = 0; i < es->v.n; i++) {
        hk_endpoint *e = es->v.v[i];

        queued += hk_endpoint_waiting(e);
        if (e->inflight)
            continue;
        /* Disabled: what it has goes to its dead letters; enabled: what is
         * over its queue's bound, the newest. */
        if (!e->enabled) {
            e->nbatch = 0;
            e->first_try_ms = 0;
            if (hk_endpoint_waiting(e) > 0)
                hk_endpoint_bury(e, e->head, hk_endpoint_waiting(e), "endpoint disabled");
            continue;
        }
        /* (never into a batch that waits to be sent again) */
        size_t keep = (size_t)cfg->events.hooks.queue_max > e->nbatch
                          ? (size_t)cfg->events.hooks.queue_max
                          : e->nbatch;

        if (hk_endpoint_waiting(e) > keep)
            hk_endpoint_bury(e, e->head + keep, hk_endpoint_waiting(e) - keep,
                             "endpoint queue full");
        if (!e->secret_ok || now_ms < e->next_try_ms)
            continue;
        /* A new batch: batch_max events, or those of batch_ms; with none
         * waiting, the dead letters marked for a redrive.  A batch that
         * failed goes again as it was. */
        if (e->nbatch == 0 && e->redrive.n == 0) {
            size_t waiting = hk_endpoint_waiting(e), max = (size_t)cfg->events.hooks.batch_max;

            if (waiting >= max || (waiting > 0 && now_ms - e->queue.v[e->head]->read_ms >=
                                                      cfg->events.hooks.batch_ms))
                e->nbatch = waiting < max ? waiting : max;
            else if (waiting > 0 || !hk_endpoint_claim(e, now_ms))
                continue;
        }
        hk_endpoint_send(e, http, now_ms);
    }
    hr_metrics_set(es->met->queued, (double)queued);
}

bool hk_endpoints_loaded(const hk_endpoints *es)
{
    return es->loaded;
}

size_t hk_endpoints_held(const hk_endpoints *es)
{
    size_t n = 0;

    for (size_t i = 0; i < es->v.n; i++)
        n += hk_endpoint_waiting(es->v.v[i]) + es->v.v[i]->redrive.n;
    return n;
}
