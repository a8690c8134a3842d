/* dsp_kafka: the dispatcher's Kafka producer: chunk messages out, their
 * delivery reports back.  A leaf: it calls no other dispatcher module; what
 * a report or a lost broker means is decided by the hooks it is given
 * (dsp_chunk.c's for reports, dispatcher.c's for the health). */
#ifndef DSP_KAFKA_H
#define DSP_KAFKA_H

#include <stdbool.h>
#include <stdint.h>

#include "hr_config.h"

typedef struct dsp_kafka dsp_kafka;

/* A chunk message, and what its delivery report hands back. */
typedef struct dsp_kafka_msg {
    int64_t task, seq;
    int shard;            /* HR_SHARD_NONE for a task of one set */
    int64_t count;        /* recipients (the message's count) */
    int64_t due_ms;       /* the task's due time (the message's) */
    int64_t published_ms; /* set by dsp_kafka_produce */
    uint64_t gen;         /* the producing owner's generation (0: none) */
    bool republish;       /* the sweeper's or a resume's, not a first publish */
} dsp_kafka_msg;

typedef struct dsp_kafka_hooks {
    void *ctx;
    /* A delivery report of MSG, on the thread that calls dsp_kafka_poll or
     * dsp_kafka_flush: ERR NULL when Kafka confirmed it, else why not. */
    void (*delivered)(void *ctx, const dsp_kafka_msg *msg, const char *err);
    /* The producer lost its brokers (all down, transport, fatal), on
     * librdkafka's thread. */
    void (*down)(void *ctx, const char *reason);
} dsp_kafka_hooks;

/* A producer for CFG's chunk topic, whose metadata it fetches at once (at
 * most DSP_KAFKA_WARM_MS; a broker down is no error).  HOOKS is copied.
 * 0, or -1 (ERRSTR). */
int dsp_kafka_new(const hr_config *cfg, const dsp_kafka_hooks *hooks, dsp_kafka **out, char *errstr,
                  size_t errlen);
/* Produces MSG (its published_ms set to now); thread-safe.  0, or -1
 * (ERRSTR): no report will come. */
int dsp_kafka_produce(dsp_kafka *kafka, dsp_kafka_msg *msg, char *errstr, size_t errlen);
/* Serves the delivery reports that arrived (the hook runs here). */
void dsp_kafka_poll(dsp_kafka *kafka);
/* At exit: waits up to TIMEOUT_MS for every message's report, then purges
 * what is left (each still gets its report, failed). */
void dsp_kafka_flush(dsp_kafka *kafka, int timeout_ms);
void dsp_kafka_free(dsp_kafka *kafka);

#endif
