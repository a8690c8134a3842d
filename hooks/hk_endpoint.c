/* hk_endpoint: the endpoints, their lanes and deliveries (see
 * hk_endpoint.h).  An endpoint has events.hooks.inflight_max lanes of
 * queued events and one more for its redrives.  A lane's queue is an array
 * used from HEAD on (compacted when half of it is consumed); its batch in
 * flight is the first NBATCH events of the queue, or, on the redrive lane,
 * the endpoint's claimed dead letters in REDRIVE.  An endpoint whose row
 * disappeared while deliveries were in flight is unlinked and freed by the
 * last one's answer. */
#include "hk_endpoint.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
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

/* One lane: its FIFO and its batch (in flight, or waiting to go again).
 * The HTTP client's context is the lane. */
typedef struct hk_lane {
    struct hk_endpoint *e;
    HR_VEC(hk_event *) queue; /* unused on the redrive lane */
    size_t head;
    bool inflight;
    size_t nbatch;        /* events of the queue in its batch (0: none, or a redrive) */
    int64_t first_try_ms; /* the batch's first attempt, 0 = none yet */
    int64_t next_try_ms;  /* not before (a back-off) */
    int64_t backoff_ms;
} hk_lane;

typedef struct hk_endpoint {
    struct hk_endpoints *es;
    int64_t id;
    char *url;
    char **types; /* the filter; none = every type */
    size_t ntypes;
    hr_sign_secret secret;
    bool secret_ok; /* the row's secret parses (logged once when not) */
    bool enabled;
    bool gone;      /* its row disappeared: freed when its last delivery answers */
    bool seen;      /* in the last reload */
    hk_lane *lanes; /* NLANES by uid, then the redrive lane */
    size_t nlanes;
    size_t inflight;            /* deliveries in flight, every lane */
    HR_VEC(hk_event *) redrive; /* claimed dead letters, the redrive lane's batch */
    int64_t failing_since_ms;   /* 0 = healthy */
    int64_t next_claim_ms;      /* dead letters looked for again then */
    int64_t dead;               /* its dead letters (counted, plus buried since) */
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

static size_t hk_lane_waiting(const hk_lane *l)
{
    return l->queue.n - l->head;
}

static size_t hk_endpoint_waiting(const hk_endpoint *e)
{
    size_t n = 0;

    for (size_t i = 0; i < e->nlanes; i++)
        n += hk_lane_waiting(&e->lanes[i]);
    return n;
}

static hk_lane *hk_endpoint_redrive_lane(hk_endpoint *e)
{
    return &e->lanes[e->nlanes];
}

/* A lane's share of events.hooks.queue_max. */
static size_t hk_lane_max(const hk_endpoint *e)
{
    return ((size_t)e->es->cfg->events.hooks.queue_max + e->nlanes - 1) / e->nlanes;
}

/* A lane's batch retried as it was, or none: a fresh start. */
static void hk_lane_reset(hk_lane *l)
{
    l->first_try_ms = l->next_try_ms = l->backoff_ms = 0;
}

/* Whether E holds the reading back when a lane is full (NOW_MS): an
 * endpoint that delivers (enabled, its secret usable) and has not been
 * failing for retry_for_ms — a receiver down for a while (a deploy) or
 * refusing now and then gets its events late, not as dead letters.  One
 * failing longer (its batches are given up by then anyway) would stall
 * every other endpoint until it is disabled: its overflow is dead-lettered
 * instead. */
static bool hk_endpoint_holds_back(const hk_endpoint *e, int64_t now_ms)
{
    return e->enabled && e->secret_ok &&
           (e->failing_since_ms == 0 ||
            now_ms - e->failing_since_ms < e->es->cfg->events.hooks.retry_for_ms);
}

/* Drops the first N events of L's queue, putting each. */
static void hk_lane_pop(hk_lane *l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        hk_offsets_put(l->e->es->offsets, l->queue.v[l->head + i]);
    l->head += n;
    if (l->head == l->queue.n) {
        l->queue.n = l->head = 0;
    } else if (l->head > l->queue.n / 2) {
        memmove(l->queue.v, l->queue.v + l->head, (l->queue.n - l->head) * sizeof *l->queue.v);
        l->queue.n -= l->head;
        l->head = 0;
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
    for (size_t i = 0; e->lanes != NULL && i < e->nlanes; i++) {
        hk_lane_pop(&e->lanes[i], hk_lane_waiting(&e->lanes[i]));
        hr_vec_free(&e->lanes[i].queue);
    }
    free(e->lanes);
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
        for (size_t i = 0; i <= e->nlanes; i++)
            hk_lane_reset(&e->lanes[i]);
        e->failing_since_ms = e->next_claim_ms = 0;
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
            size_t nlanes = (size_t)es->cfg->events.hooks.inflight_max;

            if ((e = calloc(1, sizeof *e)) == NULL ||
                (e->lanes = calloc(nlanes + 1, sizeof *e->lanes)) == NULL ||
                hr_vec_push(&es->v, e) != 0) {
                if (e != NULL)
                    free(e->lanes);
                free(e);
                break;
            }
            e->es = es;
            e->id = hooks[i].id;
            e->nlanes = nlanes;
            for (size_t j = 0; j <= nlanes; j++)
                e->lanes[j].e = e;
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
        if (e->inflight > 0)
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

        /* One uid, one lane: its events stay in order. */
        if (!hk_endpoint_wants(e, ev->type) ||
            hr_vec_push(&e->lanes[ev->uid % e->nlanes].queue, ev) != 0)
            continue;
        ev->refs++;
    }
}

/* Dead-letters the N events of L's queue from index AT (HEAD or beyond)
 * with WHY, and drops them from the queue: those over the endpoint's
 * dead_letter_max are dropped instead (counted).  0, or -1 when MySQL
 * failed (nothing changed: they stay queued). */
static int hk_lane_bury(hk_lane *l, size_t at, size_t n, const char *why)
{
    hk_endpoint *e = l->e;
    hk_endpoints *es = e->es;
    int64_t room = es->cfg->events.hooks.dead_letter_max - e->dead;
    size_t keep = room <= 0 ? 0 : (int64_t)n < room ? n : (size_t)room;
    hk_store_dead *rows = keep > 0 ? calloc(keep, sizeof *rows) : NULL;
    char err[512];

    if (keep > 0 && rows == NULL)
        return -1;
    for (size_t i = 0; i < keep; i++) {
        const hk_event *ev = l->queue.v[at + i];

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
        hk_offsets_put(es->offsets, l->queue.v[at + i]);
    memmove(l->queue.v + at, l->queue.v + at + n, (l->queue.n - at - n) * sizeof *l->queue.v);
    l->queue.n -= n;
    if (l->queue.n == l->head)
        l->queue.n = l->head = 0;
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

/* L's batch answered 2xx. */
static void hk_lane_delivered(hk_lane *l, int64_t now_ms)
{
    hk_endpoint *e = l->e;
    hk_endpoints *es = e->es;
    char err[512];

    if (l == hk_endpoint_redrive_lane(e)) {
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
        hr_metrics_add(es->met->delivered, l->nbatch);
        hk_lane_pop(l, l->nbatch);
    }
    l->nbatch = 0;
    hk_lane_reset(l);
    if (e->failing_since_ms > 0) {
        hr_log_info("hook_recovered", "hook=%" PRId64 " failed_for_ms=%" PRId64, e->id,
                    now_ms - e->failing_since_ms);
        if (hk_store_failing(es->m, e->id, false, err, sizeof err) < 0)
            hr_log_warn("hook_state_failed", "hook=%" PRId64 " error=%s", e->id, err);
        e->failing_since_ms = 0;
    }
}

/* L's batch failed (RES): backed off, given up after retry_for_ms, the
 * endpoint disabled after disable_after_ms without a success. */
static void hk_lane_failed(hk_lane *l, const hk_http_result *res, int64_t now_ms)
{
    hk_endpoint *e = l->e;
    hk_endpoints *es = e->es;
    const hr_config *cfg = es->cfg;
    char err[512];

    if (res->status > 0)
        snprintf(e->last_error, sizeof e->last_error, "HTTP %ld: %.200s", res->status, res->err);
    else
        snprintf(e->last_error, sizeof e->last_error, "%s", res->err);
    if (e->failing_since_ms == 0) {
        e->failing_since_ms = now_ms;
        hr_log_warn("hook_failing", "hook=%" PRId64 " events=%zu error=%s", e->id,
                    l->nbatch + (l == hk_endpoint_redrive_lane(e) ? e->redrive.n : 0),
                    e->last_error);
        if (hk_store_failing(es->m, e->id, true, err, sizeof err) < 0)
            hr_log_warn("hook_state_failed", "hook=%" PRId64 " error=%s", e->id, err);
    }
    l->backoff_ms = l->backoff_ms == 0 ? cfg->events.hooks.retry_backoff_ms : l->backoff_ms * 2;
    if (l->backoff_ms > cfg->events.hooks.retry_max_backoff_ms)
        l->backoff_ms = cfg->events.hooks.retry_max_backoff_ms;
    l->next_try_ms = now_ms + l->backoff_ms;
    if (l == hk_endpoint_redrive_lane(e)) {
        /* The dead letters stay; their claim runs out and they come back. */
        hk_endpoint_redrive_clear(e);
        e->next_claim_ms = now_ms + HK_ENDPOINT_CLAIM_MS;
        l->first_try_ms = 0;
    } else if (now_ms - l->first_try_ms >= cfg->events.hooks.retry_for_ms &&
               hk_lane_bury(l, l->head, l->nbatch, e->last_error) == 0) {
        hr_log_warn("hook_batch_dead_lettered", "hook=%" PRId64 " events=%zu error=%s", e->id,
                    l->nbatch, e->last_error);
        l->nbatch = 0;
        l->first_try_ms = 0;
    }
    if (now_ms - e->failing_since_ms >= cfg->events.hooks.disable_after_ms)
        hk_endpoint_disable(e, now_ms);
}

void hk_endpoints_answered(void *ctx, const hk_http_result *res)
{
    hk_lane *l = ctx;
    hk_endpoint *e = l->e;
    hk_endpoints *es = e->es;
    bool ok = res->status >= 200 && res->status <= 299;

    l->inflight = false;
    e->inflight--;
    hr_metrics_inc(ok ? es->met->requests_ok : es->met->requests_failed);
    hr_metrics_observe(es->met->latency, res->seconds);
    if (e->gone) {
        /* Its row was deleted meanwhile: freed with its last delivery. */
        if (e->inflight == 0)
            hk_endpoint_free(e);
        return;
    }
    if (ok)
        hk_lane_delivered(l, hr_clock_now_ms());
    else
        hk_lane_failed(l, res, hr_clock_now_ms());
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

/* Starts L's delivery of its batch (its queue's first events, or, on the
 * redrive lane, the claimed dead letters). */
static void hk_lane_send(hk_lane *l, hk_http *http, int64_t now_ms)
{
    hk_endpoint *e = l->e;
    const hr_config *cfg = e->es->cfg;
    bool redrive = l == hk_endpoint_redrive_lane(e);
    hk_event *const *evs = redrive ? e->redrive.v : l->queue.v + l->head;
    size_t n = redrive ? e->redrive.n : l->nbatch;
    char headers[HK_BODY_HEADERS][HK_BODY_HEADER_MAX], err[256];
    const char *hv[HK_BODY_HEADERS];
    hr_buf body;

    hr_buf_init(&body, HK_ENDPOINT_BODY_MAX(cfg->events.hooks.batch_max));
    if (hk_body_build(evs, n, now_ms, &body) < 0 ||
        hk_body_headers(e->id, evs[0], n, &e->secret, &body, now_ms / 1000, headers, err,
                        sizeof err) < 0) {
        hr_log_error("hook_body_failed", "hook=%" PRId64 " events=%zu", e->id, n);
        l->next_try_ms = now_ms + cfg->events.hooks.retry_max_backoff_ms;
        goto done;
    }
    for (size_t i = 0; i < HK_BODY_HEADERS; i++)
        hv[i] = headers[i];
    if (hk_http_post(http, e->url, hv, HK_BODY_HEADERS, body.data, body.len,
                     cfg->events.hooks.timeout_ms, l) < 0) {
        l->next_try_ms = now_ms + cfg->events.hooks.retry_backoff_ms;
        goto done;
    }
    l->inflight = true;
    e->inflight++;
    if (l->first_try_ms == 0)
        l->first_try_ms = now_ms;
done:
    hr_buf_free(&body);
}

/* Starts L's next delivery when one is due: its batch to send again, or a
 * new one of batch_max events or of those that waited batch_ms. */
static void hk_lane_pump(hk_lane *l, hk_http *http, int64_t now_ms)
{
    const hr_config *cfg = l->e->es->cfg;
    size_t waiting = hk_lane_waiting(l), max = (size_t)cfg->events.hooks.batch_max;

    if (l->inflight || now_ms < l->next_try_ms)
        return;
    if (l->nbatch == 0) {
        if (waiting < max &&
            (waiting == 0 || now_ms - l->queue.v[l->head]->read_ms < cfg->events.hooks.batch_ms))
            return;
        l->nbatch = waiting < max ? waiting : max;
    }
    hk_lane_send(l, http, now_ms);
}

/* Dead-letters what E must not hold: every event of a disabled endpoint,
 * and what is over a lane's share of queue_max on an endpoint that does
 * not hold the reading back (a healthy one's lanes are bounded by the
 * reading, hk_endpoints_room).  Never a batch in flight, nor one that
 * waits to be sent again. */
static void hk_endpoint_shed(hk_endpoint *e, int64_t now_ms)
{
    for (size_t i = 0; i < e->nlanes; i++) {
        hk_lane *l = &e->lanes[i];
        size_t keep = hk_lane_max(e) > l->nbatch ? hk_lane_max(e) : l->nbatch;

        if (l->inflight)
            continue;
        if (!e->enabled) {
            l->nbatch = 0;
            l->first_try_ms = 0;
            if (hk_lane_waiting(l) > 0)
                hk_lane_bury(l, l->head, hk_lane_waiting(l), "endpoint disabled");
        } else if (!hk_endpoint_holds_back(e, now_ms) && hk_lane_waiting(l) > keep) {
            hk_lane_bury(l, l->head + keep, hk_lane_waiting(l) - keep, "endpoint queue full");
        }
    }
}

void hk_endpoints_pump(hk_endpoints *es, hk_http *http, int64_t now_ms)
{
    size_t queued = 0;

    for (size_t i = 0; i < es->v.n; i++) {
        hk_endpoint *e = es->v.v[i];
        hk_lane *redrive = hk_endpoint_redrive_lane(e);
        size_t waiting;

        hk_endpoint_shed(e, now_ms);
        waiting = hk_endpoint_waiting(e);
        queued += waiting;
        if (!e->enabled || !e->secret_ok)
            continue;
        for (size_t j = 0; j < e->nlanes; j++)
            hk_lane_pump(&e->lanes[j], http, now_ms);
        /* The dead letters marked for a redrive, claimed once every lane
         * is idle (they arrive after the events read since, as
         * documented); a claimed batch whose request could not start goes
         * again as it was. */
        if (redrive->inflight || now_ms < redrive->next_try_ms)
            continue;
        if (e->redrive.n > 0 || (waiting == 0 && e->inflight == 0 && hk_endpoint_claim(e, now_ms)))
            hk_lane_send(redrive, http, now_ms);
    }
    hr_metrics_set(es->met->queued, (double)queued);
}

size_t hk_endpoints_room(const hk_endpoints *es, int64_t now_ms)
{
    size_t room = SIZE_MAX;

    /* Each lane's room: the events read may all be one lane's. */
    for (size_t i = 0; i < es->v.n; i++) {
        const hk_endpoint *e = es->v.v[i];
        size_t max = hk_lane_max(e);

        if (!hk_endpoint_holds_back(e, now_ms))
            continue;
        for (size_t j = 0; j < e->nlanes; j++) {
            size_t waiting = hk_lane_waiting(&e->lanes[j]);

            if (waiting >= max)
                return 0;
            if (max - waiting < room)
                room = max - waiting;
        }
    }
    return room;
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
