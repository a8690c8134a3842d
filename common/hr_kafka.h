/* hr_kafka: librdkafka configuration for herald's producer and consumer.
 *
 * Builds an rd_kafka_conf_t from hr_config: bootstrap servers, client.id =
 * instance, the role's defaults, then the user's kafka.properties verbatim
 * (so TLS/SASL and tuning pass through, and may override a default).
 * Producer defaults: enable.idempotence=true, acks=all, linger.ms=5.
 * Consumer defaults: group.id = kafka.group, partition.assignment.strategy=
 * range (eager; cooperative-sticky can abort on close in librdkafka 2.0.2),
 * enable.auto.offset.store=false, enable.auto.commit=true,
 * auto.offset.reset=earliest. */
#ifndef HR_KAFKA_H
#define HR_KAFKA_H

#include <librdkafka/rdkafka.h>

#include "hr_config.h"

typedef enum hr_kafka_role { HR_KAFKA_PRODUCER, HR_KAFKA_CONSUMER } hr_kafka_role;

/* A new configuration the caller owns (rd_kafka_new takes it over on
 * success), or NULL with ERRSTR naming the offending property. */
rd_kafka_conf_t *hr_kafka_conf_new(const hr_config *cfg, hr_kafka_role role, char *errstr,
                                   size_t errlen);

/* Subscribes consumer RK to TOPIC alone.  0, or -1 (ERRSTR names the
 * topic and librdkafka's error). */
int hr_kafka_subscribe(rd_kafka_t *rk, const char *topic, char *errstr, size_t errlen);

/* Creates TOPIC with PARTITIONS partitions (replication factor RF, -1 = the
 * broker's default) unless it exists; waits up to TIMEOUT_MS. */
int hr_kafka_ensure_topic(const hr_config *cfg, const char *topic, int partitions, int rf,
                          int timeout_ms, char *errstr, size_t errlen);

#endif
