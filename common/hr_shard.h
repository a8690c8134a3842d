/* hr_shard: the arithmetic of sharded tasks (docs/architecture.md, "Sharded
 * tasks") and the Redis sums over a task's shards.
 *
 * A task of S > 1 shards keeps its recipients in S subscriber sets; a uid's
 * shard is CRC-32 of its decimal text mod S, the function MySQL's
 * CRC32(uid) % S computes too.  Shard k's n-th chunk has the number
 * (n - 1) * S + k + 1, so chunk numbers stay unique per task.  A task of
 * one shard (S = 1) is shard 0 with the identity numbering: every
 * function here treats S < 2 as one shard.
 *
 * In MySQL a task of S > 1 shards has one push_task_shard row per shard;
 * HR_SHARD_NONE names "the task itself, no shard row" (S = 1) wherever a
 * shard is passed to a counter write or carried in a message.
 * hr_shard_row() maps (S, k) to what such writes take. */
#ifndef HR_SHARD_H
#define HR_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "hr_keys.h"
#include "hr_mysql.h"
#include "hr_pipe.h"
#include "hr_redis.h"
#include "hr_vec.h"

#define HR_SHARDS_MAX 256
/* The shard size the dispatch benchmark found best (docs/performance.md,
 * "Sharded tasks"): expected_recipients / this, rounded up, is S. */
#define HR_SHARD_RECIPIENTS 250000
/* A task of one shard: no push_task_shard row, no shard in its messages. */
#define HR_SHARD_NONE (-1)

/* The standard CRC-32 (zlib's, MySQL's CRC32()) of LEN bytes. */
uint32_t hr_shard_crc32(const void *data, size_t len);
/* The shard 0..S-1 of UID (0 when S < 2). */
int hr_shard_of(uint64_t uid, int shards);
/* The same for a uid given as decimal text (as Redis and MySQL hold it). */
int hr_shard_of_str(const char *uid, int shards);

/* Orders the N uids UIDS (decimal text) by shard into SORTED (N slots):
 * shard k's are SORTED[BOUNDS[k] .. BOUNDS[k + 1]) (BOUNDS: SHARDS + 1
 * slots), in their order in UIDS.  0, or -1 when out of memory. */
int hr_shard_sort(const char *const *uids, size_t n, int shards, const char **sorted,
                  size_t *bounds);

/* The chunk number of shard SHARD's N-th chunk (N >= 1), and back: the
 * shard a chunk number belongs to, and the count N it stands for. */
int64_t hr_shard_seq(int shards, int shard, int64_t n);
int hr_shard_of_seq(int shards, int64_t seq);
int64_t hr_shard_count_of_seq(int shards, int64_t seq);

/* S for a task expected to hold EXPECTED recipients: 1..HR_SHARDS_MAX. */
int hr_shard_for_size(int64_t expected);

/* What a counter write or a message takes for shard SHARD of a task of
 * SHARDS: SHARD when SHARDS > 1, else HR_SHARD_NONE. */
int hr_shard_row(int shards, int shard);

/* Task ID's push_task.shards into *SHARDS (1 when the task is gone).  0 or
 * -1 (ERRSTR). */
int hr_shard_load(hr_mysql *m, int64_t id, int *shards, char *errstr, size_t errlen);

/* One pipelined round trip: CMD (SCARD, HLEN, ZCARD) on KIND of every
 * shard of task ID, summed into *OUT.  0 or -1 (ERRSTR). */
int hr_shard_sum(hr_redis *r, int64_t id, int shards, const char *cmd, hr_key_kind kind,
                 int64_t *out, char *errstr, size_t errlen);

/* A count taken on every shard of a task: CMD (SCARD, ZCARD, HLEN) on the
 * shard's key of KIND. */
typedef struct hr_shard_count {
    const char *cmd;
    hr_key_kind kind;
} hr_shard_count;

/* Queues on PIPE, for each shard of task ID (SHARDS, 1 when fewer) in
 * order, the N counts of COUNTS in order, keys under PREFIX: one part of a
 * caller's round trip.  0, or -1 when out of memory. */
int hr_shard_counts_queue(hr_pipe *pipe, const char *prefix, int64_t id, int shards,
                          const hr_shard_count *counts, size_t n);
/* Reads back, from PIPE's reply *AT on (*AT moved past them), what
 * hr_shard_counts_queue queued for a task of SHARDS: SUMS[j] the sum of
 * count j over the shards.  0, or -1 (ERRSTR: no reply, or one not an
 * integer). */
int hr_shard_counts_read(hr_pipe *pipe, size_t *at, int shards, size_t n, int64_t *sums,
                         char *errstr, size_t errlen);

/* A task's stats hashes summed field by field. */
typedef struct hr_shard_stat {
    char name[40];
    int64_t value;
} hr_shard_stat;
typedef HR_VEC(hr_shard_stat) hr_shard_stats;

/* HGETALL of every shard's stats hash (one pipelined round trip), summed
 * into *OUT (emptied first; free with hr_vec_free).  0 or -1 (ERRSTR). */
int hr_shard_stats_read(hr_redis *r, int64_t id, int shards, hr_shard_stats *out, char *errstr,
                        size_t errlen);
/* The summed value of NAME, or -1 when no shard has it. */
int64_t hr_shard_stats_get(const hr_shard_stats *s, const char *name);

#endif
