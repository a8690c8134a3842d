/* hr_kv: an ordered key/value pair of strings, owned by whoever holds the
 * array (hr_config: a channel's headers, kafka.properties).  A type alone,
 * below every module that reads or writes one. */
#ifndef HR_KV_H
#define HR_KV_H

/* An ordered key/value pair (HTTP headers, librdkafka properties). */
typedef struct hr_kv {
    char *key;
    char *value;
} hr_kv;

#endif
