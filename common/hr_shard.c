/* hr_shard: shard of a uid, chunk numbers of a shard, and the sums over a
 * task's shards (see hr_shard.h). */
#include "hr_shard.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t hr_shard_crc32(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t crc = 0xffffffffu;

    /* Bitwise, reflected polynomial 0xEDB88320: a uid is at most 20 bytes,
     * so a table would cost more to build than it saves. */
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

int hr_shard_of_str(const char *uid, int shards)
{
    if (shards < 2)
        return 0;
    return (int)(hr_shard_crc32(uid, strlen(uid)) % (uint32_t)shards);
}

int hr_shard_of(uint64_t uid, int shards)
{
    char s[24];

    snprintf(s, sizeof s, "%" PRIu64, uid);
    return hr_shard_of_str(s, shards);
}

int hr_shard_sort(const char *const *uids, size_t n, int shards, const char **sorted,
                  size_t *bounds)
{
    size_t *at;
    int *of;

    if (shards < 2) {
        memcpy(sorted, uids, n * sizeof *sorted);
        bounds[0] = 0;
        bounds[1] = n;
        return 0;
    }
    at = calloc((size_t)shards, sizeof *at);
    of = malloc((n ? n : 1) * sizeof *of);
    if (at == NULL || of == NULL) {
        free(at);
        free(of);
        return -1;
    }
    /* A counting sort: count, prefix sums, place. */
    memset(bounds, 0, ((size_t)shards + 1) * sizeof *bounds);
    for (size_t i = 0; i < n; i++) {
        of[i] = hr_shard_of_str(uids[i], shards);
        bounds[of[i] + 1]++;
    }
    for (int k = 0; k < shards; k++) {
        bounds[k + 1] += bounds[k];
        at[k] = bounds[k];
    }
    for (size_t i = 0; i < n; i++)
        sorted[at[of[i]]++] = uids[i];
    free(at);
    free(of);
    return 0;
}

int64_t hr_shard_seq(int shards, int shard, int64_t n)
{
    if (shards < 2)
        return n;
    return (n - 1) * shards + shard + 1;
}

int hr_shard_of_seq(int shards, int64_t seq)
{
    if (shards < 2 || seq < 1)
        return 0;
    return (int)((seq - 1) % shards);
}

int64_t hr_shard_count_of_seq(int shards, int64_t seq)
{
    if (shards < 2 || seq < 1)
        return seq;
    return (seq - 1) / shards + 1;
}

int hr_shard_for_size(int64_t expected)
{
    int64_t s;

    if (expected <= HR_SHARD_RECIPIENTS)
        return 1;
    s = (expected + HR_SHARD_RECIPIENTS - 1) / HR_SHARD_RECIPIENTS;
    return s > HR_SHARDS_MAX ? HR_SHARDS_MAX : (int)s;
}

int hr_shard_row(int shards, int shard)
{
    return shards > 1 ? shard : HR_SHARD_NONE;
}

int hr_shard_load(hr_mysql *m, int64_t id, int *shards, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;

    if (hr_mysql_query(m, "SELECT shards FROM push_task WHERE id = ?", p, 1, &rows, errstr,
                       errlen) < 0)
        return -1;
    *shards = rows->nrows == 1 ? atoi(hr_mysql_cell(rows, 0, 0)) : 1;
    if (*shards < 1)
        *shards = 1;
    hr_mysql_rows_free(rows);
    return 0;
}

/* One pipelined round trip: "CMD <KIND of shard k>" for every shard of task
 * ID, each reply handed to EACH(CTX, reply) in shard order (a non-zero
 * answer stops: out of memory).  0 or -1 (ERRSTR). */
static int hr_shard_each(hr_redis *r, int64_t id, int shards, const char *cmd, hr_key_kind kind,
                         int (*each)(void *ctx, const redisReply *reply), void *ctx, char *errstr,
                         size_t errlen)
{
    hr_pipe *pipe = hr_pipe_new(r);
    char key[HR_KEY_MAX];
    int n = shards > 1 ? shards : 1, rc = -1;

    if (pipe == NULL)
        goto oom;
    for (int k = 0; k < n; k++) {
        const char *argv[2] = {cmd, key};

        hr_key_shard(hr_redis_prefix(r), key, sizeof key, id, k, kind);
        if (hr_pipe_cmd(pipe, 2, argv, NULL) != 0)
            goto oom;
    }
    if (hr_pipe_exec(pipe, errstr, errlen) != 0)
        goto done;
    for (int k = 0; k < n; k++) {
        redisReply *reply = hr_pipe_reply(pipe, (size_t)k, errstr, errlen);
        int stop;

        if (reply == NULL)
            goto done;
        stop = each(ctx, reply);
        freeReplyObject(reply);
        if (stop != 0)
            goto oom;
    }
    rc = 0;
    goto done;
oom:
    snprintf(errstr, errlen, "out of memory");
done:
    hr_pipe_free(pipe);
    return rc;
}

static int hr_shard_add_int(void *ctx, const redisReply *reply)
{
    if (reply->type == REDIS_REPLY_INTEGER)
        *(int64_t *)ctx += reply->integer;
    return 0;
}

int hr_shard_sum(hr_redis *r, int64_t id, int shards, const char *cmd, hr_key_kind kind,
                 int64_t *out, char *errstr, size_t errlen)
{
    *out = 0;
    return hr_shard_each(r, id, shards, cmd, kind, hr_shard_add_int, out, errstr, errlen);
}

int hr_shard_counts_queue(hr_pipe *pipe, const char *prefix, int64_t id, int shards,
                          const hr_shard_count *counts, size_t n)
{
    char key[HR_KEY_MAX];

    for (int k = 0; k < (shards > 1 ? shards : 1); k++)
        for (size_t j = 0; j < n; j++) {
            const char *argv[] = {counts[j].cmd, key};

            hr_key_shard(prefix, key, sizeof key, id, k, counts[j].kind);
            if (hr_pipe_cmd(pipe, 2, argv, NULL) < 0)
                return -1;
        }
    return 0;
}

int hr_shard_counts_read(hr_pipe *pipe, size_t *at, int shards, size_t n, int64_t *sums,
                         char *errstr, size_t errlen)
{
    for (size_t j = 0; j < n; j++)
        sums[j] = 0;
    for (int k = 0; k < (shards > 1 ? shards : 1); k++)
        for (size_t j = 0; j < n; j++) {
            redisReply *reply = hr_pipe_reply(pipe, (*at)++, errstr, errlen);
            int ok = reply != NULL && reply->type == REDIS_REPLY_INTEGER;

            if (ok)
                sums[j] += reply->integer;
            else if (reply != NULL)
                snprintf(errstr, errlen, "a shard count's reply is not an integer");
            freeReplyObject(reply);
            if (!ok)
                return -1;
        }
    return 0;
}

/* Adds the fields of a stats hash (an HGETALL REPLY) to *CTX, an
 * hr_shard_stats; -1 when out of memory. */
static int hr_shard_add_stats(void *ctx, const redisReply *reply)
{
    hr_shard_stats *s = ctx;

    for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i + 1 < reply->elements; i += 2) {
        const char *name = reply->element[i]->str;
        int64_t value = strtoll(reply->element[i + 1]->str, NULL, 10);
        hr_shard_stat f = {.value = value};
        size_t j;

        for (j = 0; j < s->n && strcmp(s->v[j].name, name) != 0; j++)
            ;
        if (j < s->n) {
            s->v[j].value += value;
            continue;
        }
        snprintf(f.name, sizeof f.name, "%s", name);
        if (hr_vec_push(s, f) != 0)
            return -1;
    }
    return 0;
}

int hr_shard_stats_read(hr_redis *r, int64_t id, int shards, hr_shard_stats *out, char *errstr,
                        size_t errlen)
{
    out->n = 0;
    return hr_shard_each(r, id, shards, "HGETALL", HR_KEY_STATS, hr_shard_add_stats, out, errstr,
                         errlen);
}

int64_t hr_shard_stats_get(const hr_shard_stats *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i].name, name) == 0)
            return s->v[i].value;
    return -1;
}
