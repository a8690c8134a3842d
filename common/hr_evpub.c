/* hr_evpub: the events publisher (see hr_evpub.h).
 *
 * Its thread polls the producer (rd_kafka_poll), which serves the delivery
 * reports: librdkafka's own background queue takes no delivery reports.
 * While events are held it serves them every EVPUB_SERVE_MS without
 * waiting on the queue, so a report does not wake it: librdkafka sends a
 * request per partition, and one wake-up per request (12 partitions,
 * linger.ms 20: up to 600 a second) cost the worker more CPU than the
 * events themselves (docs/performance.md "Issue 30").  Idle, it waits on the
 * queue, EVPUB_POLL_MS at a time.
 *
 * The events held are a ring of slots in sequence order, from the oldest
 * not yet confirmed (number BASE, at index HEAD) on, released when the
 * watermark passes them.  An event is encoded into one buffer the
 * publisher reuses and librdkafka copies it into its message (the one
 * allocation it makes for a message anyway, key included): no allocation
 * of ours per event.  A slot holds a copy of its value only when it must be
 * produced again (a failed report gives it back from the message, a full
 * local queue from the buffer).  The ring grows by doubling up to
 * events.queue_max.  A message's opaque is its sequence number, by which the
 * report finds its slot. */
#include "hr_evpub.h"

#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hr_clock.h"
#include "hr_kafka.h"

#define EVPUB_FIRST_CAP 1024
/* The publisher's thread waits this long for delivery reports at a time
 * when it holds no events (and so notices a stop within it). */
#define EVPUB_POLL_MS 100
/* While events are held, it serves their reports this often: a chunk's
 * acknowledgements wait that much longer at most (events.flush_ms, 10, is
 * the reporter's own cadence). */
#define EVPUB_SERVE_MS 10
/* Events that failed wait at least this long before they go again. */
#define EVPUB_RETRY_MS 500
/* The stats the metrics show: published, retried, lost, held. */
#define EVPUB_GAUGES 4

typedef enum evpub_state {
    EVPUB_HELD,  /* produced, its report not here yet */
    EVPUB_RETRY, /* its report failed, or librdkafka's queue was full: to produce again */
    EVPUB_DONE,  /* confirmed: released when the watermark reaches it */
} evpub_state;

typedef struct evpub_slot {
    char *value; /* to produce again (EVPUB_RETRY, and held after it); else NULL */
    size_t len;
    uint64_t uid;
    evpub_state state;
} evpub_slot;

struct hr_evpub {
    rd_kafka_t *rk;
    /* The topic's handle: RD_KAFKA_V_TOPIC would look the name up (a lock
     * and a reference) for every event. */
    rd_kafka_topic_t *rkt;
    pthread_t thread;
    atomic_bool stopping;
    const char *topic; /* the config's */
    hr_evpub_hooks hooks;
    size_t max; /* events.queue_max */

    /* The encoding of the event being published, and its mutex: taken
     * before MU, by publishers only, so the reports' thread never waits
     * while an event is encoded or produced. */
    pthread_mutex_t enc_mu;
    hr_buf enc;

    pthread_mutex_t mu;
    pthread_cond_t moved; /* the watermark moved */
    evpub_slot *slots;
    size_t cap, head, count;
    uint64_t base;    /* the number of the slot at HEAD; the watermark is BASE - 1 */
    size_t nretry;    /* slots in EVPUB_RETRY */
    int64_t retry_ms; /* the last retry round */
    hr_evpub_stats stats;
    /* The metrics' callbacks' contexts: each points back at P, its place
     * says which stat (evpub_gauge). */
    hr_evpub *gauges[EVPUB_GAUGES];
};

/* The slot of SEQ (held: BASE <= SEQ < BASE + COUNT; mutex held). */
static evpub_slot *evpub_slot_of(hr_evpub *p, uint64_t seq)
{
    return &p->slots[(p->head + (size_t)(seq - p->base)) % p->cap];
}

/* Releases the confirmed slots at the head (mutex held); whether the
 * watermark moved. */
static bool evpub_advance(hr_evpub *p)
{
    bool moved = false;

    while (p->count > 0 && p->slots[p->head].state == EVPUB_DONE) {
        free(p->slots[p->head].value);
        p->slots[p->head].value = NULL;
        p->head = (p->head + 1) % p->cap;
        p->base++;
        p->count--;
        moved = true;
    }
    if (moved)
        pthread_cond_broadcast(&p->moved);
    return moved;
}

/* Produces VALUE as event SEQ (librdkafka copies it); false when
 * librdkafka refused it (its queue full, or the handle is closing). */
static bool evpub_produce(hr_evpub *p, uint64_t seq, uint64_t uid, const char *value, size_t len)
{
    hr_event ev = {.uid = uid};
    char key[HR_BUF_I64_MAX];
    int klen = hr_event_key(&ev, key, sizeof key);

    return rd_kafka_producev(p->rk, RD_KAFKA_V_RKT(p->rkt), RD_KAFKA_V_KEY(key, (size_t)klen),
                             RD_KAFKA_V_VALUE((void *)value, len),
                             RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                             RD_KAFKA_V_OPAQUE((void *)(uintptr_t)seq),
                             RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* Slot S (number SEQ) is to be produced again, VALUE (LEN bytes) being its
 * value when the slot holds none yet (mutex held).  Out of memory for the
 * copy, the event is lost: counted, and confirmed for whoever waits (the
 * watermark may move: the answer). */
static bool evpub_again(hr_evpub *p, evpub_slot *s, const void *value, size_t len)
{
    if (s->value == NULL && (s->value = malloc(len)) != NULL) {
        memcpy(s->value, value, len);
        s->len = len;
    }
    if (s->value == NULL) {
        s->state = EVPUB_DONE;
        p->stats.lost++;
        return evpub_advance(p);
    }
    s->state = EVPUB_RETRY;
    p->nretry++;
    return false;
}

/* librdkafka refused event SEQ, of value VALUE (LEN bytes): to be
 * produced again (mutex not held). */
static void evpub_refused(hr_evpub *p, uint64_t seq, const char *value, size_t len)
{
    uint64_t upto;
    bool moved;

    pthread_mutex_lock(&p->mu);
    moved = evpub_again(p, evpub_slot_of(p, seq), value, len);
    upto = p->base - 1;
    pthread_mutex_unlock(&p->mu);
    if (moved && p->hooks.confirmed != NULL)
        p->hooks.confirmed(p->hooks.ctx, upto);
}

/* A delivery report, on the publisher's thread (rd_kafka_poll). */
static void evpub_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    hr_evpub *p = opaque;
    uint64_t seq = (uint64_t)(uintptr_t)msg->_private, upto;
    bool moved = false;
    evpub_slot *s;

    (void)rk;
    pthread_mutex_lock(&p->mu);
    if (seq >= p->base && seq < p->base + p->count &&
        (s = evpub_slot_of(p, seq))->state == EVPUB_HELD) {
        if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            s->state = EVPUB_DONE;
            p->stats.published++;
            moved = evpub_advance(p);
        } else {
            moved = evpub_again(p, s, msg->payload, msg->len);
        }
    }
    upto = p->base - 1;
    pthread_mutex_unlock(&p->mu);
    if (moved && p->hooks.confirmed != NULL)
        p->hooks.confirmed(p->hooks.ctx, upto);
}

/* Whether events are still held. */
static bool evpub_holding(hr_evpub *p)
{
    bool holding;

    pthread_mutex_lock(&p->mu);
    holding = p->count > 0;
    pthread_mutex_unlock(&p->mu);
    return holding;
}

/* The publisher's thread: serves the delivery reports until the stop. */
static void *evpub_main(void *arg)
{
    hr_evpub *p = arg;

    while (!atomic_load(&p->stopping)) {
        if (!evpub_holding(p)) {
            rd_kafka_poll(p->rk, EVPUB_POLL_MS);
            continue;
        }
        usleep(EVPUB_SERVE_MS * 1000);
        rd_kafka_poll(p->rk, 0);
    }
    return NULL;
}

int hr_evpub_new(const hr_config *cfg, const hr_evpub_hooks *hooks, hr_evpub **out, char *errstr,
                 size_t errlen)
{
    hr_evpub *p = calloc(1, sizeof *p);
    rd_kafka_conf_t *conf = NULL;
    char rkerr[512], max[24], linger[24];

    *out = NULL;
    if (p == NULL || (p->slots = calloc(EVPUB_FIRST_CAP, sizeof *p->slots)) == NULL) {
        free(p);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    p->topic = cfg->events.topic;
    p->max = (size_t)cfg->events.queue_max;
    p->cap = EVPUB_FIRST_CAP;
    p->base = 1;
    if (hooks != NULL)
        p->hooks = *hooks;
    hr_buf_init(&p->enc, HR_EVENT_MAX_BYTES);
    pthread_mutex_init(&p->enc_mu, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->moved, NULL);
    if ((conf = hr_kafka_conf_new(cfg, HR_KAFKA_PRODUCER, errstr, errlen)) == NULL)
        goto fail;
    /* librdkafka's own queue holds what we hold at most, so a full local
     * queue is never the reason an event waits.  linger.ms: events come a
     * few per partition and ms from each worker; the chunks' 1 ms would send
     * a request (and wake librdkafka's broker thread) for about every event,
     * events.linger_ms (20) gathers a batch per partition, and only holds a
     * chunk's acknowledgements that much longer. */
    snprintf(max, sizeof max, "%d", cfg->events.queue_max);
    snprintf(linger, sizeof linger, "%d", cfg->events.linger_ms);
    if (rd_kafka_conf_set(conf, "queue.buffering.max.messages", max, rkerr, sizeof rkerr) !=
            RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "linger.ms", linger, rkerr, sizeof rkerr) != RD_KAFKA_CONF_OK) {
        snprintf(errstr, errlen, "kafka: %s", rkerr);
        goto fail;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, evpub_dr_cb);
    rd_kafka_conf_set_opaque(conf, p);
    if ((p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, rkerr, sizeof rkerr)) == NULL) {
        snprintf(errstr, errlen, "kafka: %s", rkerr);
        goto fail;
    }
    conf = NULL;
    if ((p->rkt = rd_kafka_topic_new(p->rk, p->topic, NULL)) == NULL) {
        snprintf(errstr, errlen, "kafka: topic %s: %s", p->topic,
                 rd_kafka_err2str(rd_kafka_last_error()));
        rd_kafka_destroy(p->rk);
        goto fail;
    }
    if (pthread_create(&p->thread, NULL, evpub_main, p) != 0) {
        snprintf(errstr, errlen, "cannot start the events publisher's thread");
        rd_kafka_topic_destroy(p->rkt);
        rd_kafka_destroy(p->rk);
        goto fail;
    }
    *out = p;
    return 0;
fail:
    if (conf != NULL)
        rd_kafka_conf_destroy(conf);
    pthread_cond_destroy(&p->moved);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->enc_mu);
    free(p->slots);
    free(p);
    return -1;
}

/* Doubles the ring (mutex held), keeping the order from HEAD on.  -1 when
 * out of memory. */
static int evpub_grow(hr_evpub *p)
{
    size_t cap = p->cap * 2 < p->max ? p->cap * 2 : p->max;
    evpub_slot *slots = calloc(cap, sizeof *slots);

    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < p->count; i++)
        slots[i] = p->slots[(p->head + i) % p->cap];
    free(p->slots);
    p->slots = slots;
    p->cap = cap;
    p->head = 0;
    return 0;
}

uint64_t hr_evpub_publish(hr_evpub *p, const hr_event *ev)
{
    uint64_t seq;
    bool encoded;
    evpub_slot *s;

    pthread_mutex_lock(&p->enc_mu);
    hr_buf_reset(&p->enc);
    encoded = hr_event_encode(ev, &p->enc) == 0 && p->enc.data != NULL;
    pthread_mutex_lock(&p->mu);
    if (!encoded || (p->count == p->cap && (p->cap == p->max || evpub_grow(p) != 0))) {
        /* Lost, and counted: nobody waits on it, so it takes no number of
         * its own (waiting on the last number waits for those before). */
        p->stats.lost++;
        seq = p->base + p->count - 1;
        pthread_mutex_unlock(&p->mu);
        pthread_mutex_unlock(&p->enc_mu);
        return seq;
    }
    seq = p->base + p->count;
    s = &p->slots[(p->head + p->count) % p->cap];
    *s = (evpub_slot){.uid = ev->uid, .state = EVPUB_HELD};
    p->count++;
    pthread_mutex_unlock(&p->mu);
    /* Its report may come before this returns: the slot is in place. */
    if (!evpub_produce(p, seq, ev->uid, p->enc.data, p->enc.len))
        evpub_refused(p, seq, p->enc.data, p->enc.len);
    pthread_mutex_unlock(&p->enc_mu);
    return seq;
}

uint64_t hr_evpub_confirmed(hr_evpub *p)
{
    uint64_t upto;

    pthread_mutex_lock(&p->mu);
    upto = p->base - 1;
    pthread_mutex_unlock(&p->mu);
    return upto;
}

int hr_evpub_wait(hr_evpub *p, uint64_t seq, int timeout_ms)
{
    struct timespec ts;
    int rc = 0;

    hr_clock_deadline(CLOCK_REALTIME, timeout_ms, &ts);
    pthread_mutex_lock(&p->mu);
    while (p->base <= seq && rc == 0)
        if (pthread_cond_timedwait(&p->moved, &p->mu, &ts) == ETIMEDOUT)
            rc = -1;
    if (p->base > seq)
        rc = 0;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void hr_evpub_retry(hr_evpub *p)
{
    int64_t now = hr_clock_mono_ms();
    struct {
        uint64_t seq, uid;
        char *value;
        size_t len;
    } *again = NULL;
    size_t n = 0;

    pthread_mutex_lock(&p->mu);
    if (p->nretry > 0 && now - p->retry_ms >= EVPUB_RETRY_MS &&
        (again = calloc(p->nretry, sizeof *again)) != NULL) {
        p->retry_ms = now;
        for (size_t i = 0; i < p->count && n < p->nretry; i++) {
            evpub_slot *s = &p->slots[(p->head + i) % p->cap];

            if (s->state != EVPUB_RETRY)
                continue;
            s->state = EVPUB_HELD;
            again[n].seq = p->base + i;
            again[n].uid = s->uid;
            again[n].value = s->value;
            again[n].len = s->len;
            n++;
        }
        p->nretry -= n;
        p->stats.retried += n;
    }
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < n; i++)
        if (!evpub_produce(p, again[i].seq, again[i].uid, again[i].value, again[i].len))
            evpub_refused(p, again[i].seq, again[i].value, again[i].len);
    free(again);
}

void hr_evpub_stats_get(hr_evpub *p, hr_evpub_stats *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->stats;
    out->held = p->count;
    pthread_mutex_unlock(&p->mu);
}

/* A counter or gauge of the stats, at scrape time: CTX is one of P's
 * gauges[], whose place names the field. */
static double evpub_gauge(void *ctx)
{
    hr_evpub *const *at = ctx;
    const hr_evpub *p = *at;
    hr_evpub_stats st;
    const uint64_t *fields[] = {&st.published, &st.retried, &st.lost, &st.held};

    hr_evpub_stats_get((hr_evpub *)p, &st);
    return (double)*fields[at - p->gauges];
}

int hr_evpub_metrics(hr_evpub *p, hr_metrics *reg, char *errstr, size_t errlen)
{
    hr_metrics_family *published, *retried, *lost, *held;
    const hr_metrics_spec specs[] = {
        {&published, "herald_events_published_total",
         "Events of the events topic confirmed by Kafka", HR_METRICS_COUNTER, NULL, NULL, 0},
        {&retried, "herald_events_retried_total",
         "Events produced again after a failed delivery report", HR_METRICS_COUNTER, NULL, NULL, 0},
        {&lost, "herald_events_lost_total",
         "Events never published: over events.queue_max, or still unconfirmed at a stop",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&held, "herald_events_held", "Events published and not yet confirmed by Kafka",
         HR_METRICS_GAUGE, NULL, NULL, 0},
    };

    hr_metrics_family *fams[EVPUB_GAUGES];

    if (hr_metrics_register(reg, specs, sizeof specs / sizeof specs[0], errstr, errlen) != 0)
        return -1;
    fams[0] = published;
    fams[1] = retried;
    fams[2] = lost;
    fams[3] = held;
    for (size_t i = 0; i < EVPUB_GAUGES; i++) {
        p->gauges[i] = p;
        hr_metrics_gauge_fn(hr_metrics_labels(fams[i], NULL), evpub_gauge, &p->gauges[i]);
    }
    return 0;
}

void hr_evpub_free(hr_evpub *p, int timeout_ms, uint64_t *lost)
{
    int64_t until;

    if (p == NULL)
        return;
    /* What failed goes again while there is time (the thread serves the
     * reports meanwhile). */
    until = hr_clock_mono_ms() + timeout_ms;
    while (evpub_holding(p) && hr_clock_mono_ms() < until) {
        p->retry_ms = 0;
        hr_evpub_retry(p);
        usleep(EVPUB_POLL_MS * 1000);
    }
    atomic_store(&p->stopping, true);
    pthread_join(p->thread, NULL);
    rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_poll(p->rk, 0);
    rd_kafka_topic_destroy(p->rkt);
    rd_kafka_destroy(p->rk);
    pthread_mutex_lock(&p->mu);
    p->stats.lost += p->count;
    if (lost != NULL)
        *lost = p->count;
    for (size_t i = 0; i < p->count; i++)
        free(p->slots[(p->head + i) % p->cap].value);
    pthread_mutex_unlock(&p->mu);
    pthread_cond_destroy(&p->moved);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->enc_mu);
    hr_buf_free(&p->enc);
    free(p->slots);
    free(p);
}
