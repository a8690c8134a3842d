/* hr_keys: the names of herald's Redis keys (see hr_keys.h and the key
 * table of DESIGN.md); the only file that spells them. */
#include "hr_keys.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *const hr_key_names[HR_KEY__COUNT] = {
    [HR_KEY_SUBS] = "subs",   [HR_KEY_SEQ] = "seq",       [HR_KEY_PENDING] = "pending",
    [HR_KEY_STATS] = "stats", [HR_KEY_PULLED] = "pulled", [HR_KEY_FAILED] = "failed",
    [HR_KEY_CTL] = "ctl",     [HR_KEY_SYNCED] = "synced", [HR_KEY_PREP] = "prep",
    [HR_KEY_WAIT] = "wait",   [HR_KEY_WAVES] = "waves",   [HR_KEY_SERIES] = "series",
};

/* BUF when snprintf's N says the key fitted, else NULL. */
static char *hr_key_fit(char *buf, size_t len, int n)
{
    return n >= 0 && (size_t)n < len ? buf : NULL;
}

/* Whether KIND is the task's own (one per task, under {t<ID>} whatever
 * the shard): the control mirror and the prepare lock and marks of the
 * one reconciliation; every other kind is per shard. */
static bool hr_key_task_level(hr_key_kind kind)
{
    return kind == HR_KEY_CTL || kind == HR_KEY_SYNCED || kind == HR_KEY_PREP ||
           kind == HR_KEY_SERIES;
}

/* "{t42}" for shard 0 (or a task of one shard), "{t42:s3}" for shard 3:
 * the hash tag every key of one shard shares. */
static int hr_key_tag(char *buf, size_t len, int64_t task, int shard)
{
    if (shard < 1)
        return snprintf(buf, len, "{t%" PRId64 "}", task);
    return snprintf(buf, len, "{t%" PRId64 ":s%d}", task, shard);
}

char *hr_key_shard(const char *prefix, char *buf, size_t len, int64_t task, int shard,
                   hr_key_kind kind)
{
    char tag[48];

    if ((unsigned)kind >= HR_KEY__COUNT)
        return NULL;
    hr_key_tag(tag, sizeof tag, task, hr_key_task_level(kind) ? 0 : shard);
    return hr_key_fit(buf, len, snprintf(buf, len, "%s%s:%s", prefix, tag, hr_key_names[kind]));
}

char *hr_key_task(const char *prefix, char *buf, size_t len, int64_t task, hr_key_kind kind)
{
    return hr_key_shard(prefix, buf, len, task, 0, kind);
}

char *hr_key_task_base(const char *prefix, char *buf, size_t len, int64_t task)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%s{t%" PRId64 "}:", prefix, task));
}

/* PREFIX TAG ":" NAME ":" SEQ: the keys of one chunk. */
static char *hr_key_seq(const char *prefix, char *buf, size_t len, int64_t task, int shard,
                        const char *name, int64_t seq)
{
    char tag[48];

    hr_key_tag(tag, sizeof tag, task, shard);
    return hr_key_fit(buf, len, snprintf(buf, len, "%s%s:%s:%" PRId64, prefix, tag, name, seq));
}

char *hr_key_shard_chunk(const char *prefix, char *buf, size_t len, int64_t task, int shard,
                         int64_t seq)
{
    return hr_key_seq(prefix, buf, len, task, shard, "chunk", seq);
}

char *hr_key_shard_lease(const char *prefix, char *buf, size_t len, int64_t task, int shard,
                         int64_t seq)
{
    return hr_key_seq(prefix, buf, len, task, shard, "lease", seq);
}

char *hr_key_shard_redrive(const char *prefix, char *buf, size_t len, int64_t task, int shard,
                           int64_t seq)
{
    return hr_key_seq(prefix, buf, len, task, shard, "redrive", seq);
}

char *hr_key_chunk(const char *prefix, char *buf, size_t len, int64_t task, int64_t seq)
{
    return hr_key_shard_chunk(prefix, buf, len, task, 0, seq);
}

char *hr_key_lease(const char *prefix, char *buf, size_t len, int64_t task, int64_t seq)
{
    return hr_key_shard_lease(prefix, buf, len, task, 0, seq);
}

char *hr_key_redrive(const char *prefix, char *buf, size_t len, int64_t task, int64_t seq)
{
    return hr_key_shard_redrive(prefix, buf, len, task, 0, seq);
}

/* PREFIX with glob characters escaped, then TAG ":" NAME ":*" (the tag's
 * braces and colon are no glob characters). */
static char *hr_key_match(const char *prefix, char *buf, size_t len, int64_t task, int shard,
                          const char *name)
{
    char tag[48];
    size_t o = 0;

    for (size_t i = 0; prefix[i] != '\0'; i++) {
        if (o + 2 >= len)
            return NULL;
        if (strchr("*?[]\\", prefix[i]) != NULL)
            buf[o++] = '\\';
        buf[o++] = prefix[i];
    }
    hr_key_tag(tag, sizeof tag, task, shard);
    return hr_key_fit(buf, len, (int)o + snprintf(buf + o, len - o, "%s:%s:*", tag, name));
}

char *hr_key_shard_chunks_match(const char *prefix, char *buf, size_t len, int64_t task, int shard)
{
    return hr_key_match(prefix, buf, len, task, shard, "chunk");
}

char *hr_key_shard_leases_match(const char *prefix, char *buf, size_t len, int64_t task, int shard)
{
    return hr_key_match(prefix, buf, len, task, shard, "lease");
}

char *hr_key_chunks_match(const char *prefix, char *buf, size_t len, int64_t task)
{
    return hr_key_shard_chunks_match(prefix, buf, len, task, 0);
}

char *hr_key_leases_match(const char *prefix, char *buf, size_t len, int64_t task)
{
    return hr_key_shard_leases_match(prefix, buf, len, task, 0);
}

char *hr_key_timer(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%stimer", prefix));
}

char *hr_key_handback(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%shandback", prefix));
}

char *hr_key_cancel_held(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%scancel_held", prefix));
}

char *hr_key_redriven(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%sredriven", prefix));
}

char *hr_key_job(const char *prefix, char *buf, size_t len, int64_t id)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%sjob:%" PRId64, prefix, id));
}

char *hr_key_job_seq(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%sjob_seq", prefix));
}

/* PREFIX NAME ID into BUF, as snprintf's "%s%s%s" (BUF, or NULL when it
 * did not fit): the per-uid keys a chunk's open builds for each recipient,
 * where printf's machinery cost twenty times the copy. */
static char *hr_key_join(char *buf, size_t len, const char *prefix, const char *name,
                         const char *id)
{
    size_t np = strlen(prefix), nn = strlen(name), ni = strlen(id);

    if (np + nn + ni >= len)
        return hr_key_fit(buf, len, snprintf(buf, len, "%s%s%s", prefix, name, id));
    memcpy(buf, prefix, np);
    memcpy(buf + np, name, nn);
    memcpy(buf + np + nn, id, ni + 1);
    return buf;
}

char *hr_key_user(const char *prefix, char *buf, size_t len, const char *uid)
{
    return hr_key_join(buf, len, prefix, "user:", uid);
}

char *hr_key_user_synced(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%suser_synced", prefix));
}

char *hr_key_user_lock(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%suser_lock", prefix));
}

char *hr_key_user_book(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%suser_book", prefix));
}

char *hr_key_addr(const char *prefix, char *buf, size_t len, const char *uid)
{
    return hr_key_join(buf, len, prefix, "addr:", uid);
}

char *hr_key_slowdown(const char *prefix, char *buf, size_t len, const char *channel)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%sslow:%s", prefix, channel));
}

char *hr_key_addr_synced(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%saddr_synced", prefix));
}

char *hr_key_addr_lock(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%saddr_lock", prefix));
}

char *hr_key_ratelimit(const char *prefix, char *buf, size_t len, const char *scope)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%srl:%s", prefix, scope));
}

char *hr_key_pace_rl(const char *prefix, char *buf, size_t len, int64_t task, const char *who)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%s{t%" PRId64 "}:rl:%s", prefix, task, who));
}

char *hr_key_share(const char *prefix, char *buf, size_t len, const char *channel, int parity)
{
    if (parity < 0)
        return hr_key_fit(buf, len, snprintf(buf, len, "%sshare:{c:%s}:tasks", prefix, channel));
    return hr_key_fit(buf, len, snprintf(buf, len, "%sshare:{c:%s}:%d", prefix, channel, parity));
}

char *hr_key_throttle(const char *prefix, char *buf, size_t len, const char *scope, const char *uid,
                      const char *value)
{
    if (value == NULL)
        return hr_key_fit(buf, len, snprintf(buf, len, "%sthr:%s:%s", prefix, scope, uid));
    return hr_key_fit(buf, len, snprintf(buf, len, "%sthr:%s:%s:%s", prefix, scope, uid, value));
}
