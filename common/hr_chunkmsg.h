/* hr_chunkmsg: the Kafka chunk message, schemas/kafka/chunk.v1.json.
 *
 *   key   "<task>:<seq>", a redelivery's "<task>:<seq>:<published_ms>"
 *   value {"v":1,"task":42,"seq":17,"count":5000,"due_ms":...,"published_ms":...}
 *         and, for a task of several shards only, "shard":3
 *
 * Decoding is strict: a message that is not exactly this (wrong version,
 * missing or non-integer fields, task/seq < 1, count outside 0..100000, shard
 * outside 0..255,
 * unknown fields, trailing bytes, over 4 KiB) is rejected with a reason, so
 * the worker can count and skip it. */
#ifndef HR_CHUNKMSG_H
#define HR_CHUNKMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HR_CHUNKMSG_VERSION 1
#define HR_CHUNKMSG_MAX_BYTES 4096

typedef struct hr_chunkmsg {
    int64_t task;
    int64_t seq;
    int64_t count;
    int64_t due_ms;
    int64_t published_ms;
    /* A task of several shards (docs/architecture.md "Sharded tasks"):
     * SHARDED, and the chunk's SHARD (then in the message).  Zeroed: a task
     * of one shard, whose keys are shard 0's, and no field. */
    bool sharded;
    int shard;
} hr_chunkmsg;

/* Writes the JSON value into BUF; returns its length or -1 if LEN is short. */
int hr_chunkmsg_encode(const hr_chunkmsg *msg, char *buf, size_t len);
/* Writes "<task>:<seq>", or for a REDELIVERY "<task>:<seq>:<published_ms>";
 * returns its length or -1.  A redelivery's key differs from the first
 * publish's, and from every earlier redelivery's, so the partitioner hashes
 * each copy afresh: a copy stuck on a partition whose consumer never fetches
 * it does not send every later copy of its chunk to the same partition
 * (docs/reliability.md "A partition nobody reads"). */
int hr_chunkmsg_key(const hr_chunkmsg *msg, bool redelivery, char *buf, size_t len);
/* Parses LEN bytes (not NUL-terminated).  0, or -1 with the reason. */
int hr_chunkmsg_decode(const void *data, size_t len, hr_chunkmsg *out, char *errstr, size_t errlen);

#endif
