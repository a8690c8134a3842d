/* hr_keys: the names of herald's Redis keys (see hr_keys.h and the key
 * table of DESIGN.md); the only file that spells them. */
#include "hr_keys.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const hr_key_names[HR_KEY__COUNT] = {
    [HR_KEY_SUBS] = "subs",   [HR_KEY_SEQ] = "seq",       [HR_KEY_PENDING] = "pending",
    [HR_KEY_STATS] = "stats", [HR_KEY_PULLED] = "pulled", [HR_KEY_FAILED] = "failed",
    [HR_KEY_CTL] = "ctl",     [HR_KEY_SYNCED] = "synced", [HR_KEY_PREP] = "prep",
    [HR_KEY_WAIT] = "wait",   [HR_KEY_WAVES] = "waves",
};

/* BUF when snprintf's N says the key fitted, else NULL. */
static char *hr_key_fit(char *buf, size_t len, int n)
{
    return n >= 0 && (size_t)n < len ? buf : NULL;
}

char *hr_key_task(const char *prefix, char *buf, size_t len, int64_t task, hr_key_kind kind)
{
    if ((unsigned)kind >= HR_KEY__COUNT)
        return NULL;
    return hr_key_fit(buf, len,
                      snprintf(buf, len, "%s{t%" PRId64 "}:%s", prefix, task, hr_key_names[kind]));
}

char *hr_key_task_base(const char *prefix, char *buf, size_t len, int64_t task)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%s{t%" PRId64 "}:", prefix, task));
}

char *hr_key_chunk(const char *prefix, char *buf, size_t len, int64_t task, int64_t seq)
{
    return hr_key_fit(buf, len,
                      snprintf(buf, len, "%s{t%" PRId64 "}:chunk:%" PRId64, prefix, task, seq));
}

char *hr_key_lease(const char *prefix, char *buf, size_t len, int64_t task, int64_t seq)
{
    return hr_key_fit(buf, len,
                      snprintf(buf, len, "%s{t%" PRId64 "}:lease:%" PRId64, prefix, task, seq));
}

char *hr_key_redrive(const char *prefix, char *buf, size_t len, int64_t task, int64_t seq)
{
    return hr_key_fit(buf, len,
                      snprintf(buf, len, "%s{t%" PRId64 "}:redrive:%" PRId64, prefix, task, seq));
}

/* PREFIX with glob characters escaped, then "{t" TASK "}:" NAME ":*". */
static char *hr_key_match(const char *prefix, char *buf, size_t len, int64_t task, const char *name)
{
    size_t o = 0;

    for (size_t i = 0; prefix[i] != '\0'; i++) {
        if (o + 2 >= len)
            return NULL;
        if (strchr("*?[]\\", prefix[i]) != NULL)
            buf[o++] = '\\';
        buf[o++] = prefix[i];
    }
    return hr_key_fit(buf, len,
                      (int)o + snprintf(buf + o, len - o, "{t%" PRId64 "}:%s:*", task, name));
}

char *hr_key_chunks_match(const char *prefix, char *buf, size_t len, int64_t task)
{
    return hr_key_match(prefix, buf, len, task, "chunk");
}

char *hr_key_leases_match(const char *prefix, char *buf, size_t len, int64_t task)
{
    return hr_key_match(prefix, buf, len, task, "lease");
}

char *hr_key_timer(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%stimer", prefix));
}

char *hr_key_cancel_held(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%scancel_held", prefix));
}

char *hr_key_redriven(const char *prefix, char *buf, size_t len)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%sredriven", prefix));
}

char *hr_key_user(const char *prefix, char *buf, size_t len, const char *uid)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%suser:%s", prefix, uid));
}

char *hr_key_addr(const char *prefix, char *buf, size_t len, const char *uid)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%saddr:%s", prefix, uid));
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

char *hr_key_ratelimit(const char *prefix, char *buf, size_t len, const char *scope, int64_t window)
{
    return hr_key_fit(buf, len, snprintf(buf, len, "%srl:%s:%" PRId64, prefix, scope, window));
}

char *hr_key_pace_rl(const char *prefix, char *buf, size_t len, int64_t task, const char *who,
                     int64_t epoch_s)
{
    return hr_key_fit(
        buf, len,
        snprintf(buf, len, "%s{t%" PRId64 "}:rl:%s:%" PRId64, prefix, task, who, epoch_s));
}

char *hr_key_share(const char *prefix, char *buf, size_t len, const char *channel, int64_t epoch_s)
{
    if (epoch_s < 0)
        return hr_key_fit(buf, len, snprintf(buf, len, "%sshare:{c:%s}:tasks", prefix, channel));
    return hr_key_fit(buf, len,
                      snprintf(buf, len, "%sshare:{c:%s}:%" PRId64, prefix, channel, epoch_s));
}

char *hr_key_throttle(const char *prefix, char *buf, size_t len, const char *scope, const char *uid,
                      const char *value)
{
    if (value == NULL)
        return hr_key_fit(buf, len, snprintf(buf, len, "%sthr:%s:%s", prefix, scope, uid));
    return hr_key_fit(buf, len, snprintf(buf, len, "%sthr:%s:%s:%s", prefix, scope, uid, value));
}
