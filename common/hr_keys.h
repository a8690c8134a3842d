/* hr_keys: every Redis key herald uses, built in one place.
 *
 * The builders mirror the key table of DESIGN.md ("Redis"): a per-task key
 * is PREFIX "{t" ID "}:" NAME, the hash tag {t<ID>} keeping one task's keys
 * in one Cluster slot so that a script may touch them together; the other
 * keys are PREFIX NAME.  PREFIX is the configured redis.prefix
 * (hr_redis_prefix()), at most HR_KEYS_PREFIX_MAX bytes (hr_config checks),
 * so every key without a caller-supplied string fits an HR_KEY_MAX buffer.
 * A task of S > 1 shards (docs/architecture.md, "Sharded tasks") keeps each
 * shard's keys under its own tag: shard 0 under the task's {t<ID>}, shard
 * k >= 1 under {t<ID>:s<k>}, so a script's keys share the shard's slot and
 * the shards of one task spread over a cluster; the hr_key_shard* builders
 * take the shard (< 1 = the task's tag), the others build shard 0's keys,
 * which are a task of one shard's.
 * Every builder writes into BUF and returns BUF, or NULL when the key does
 * not fit in LEN (only possible with a smaller buffer, or with the user,
 * rate-limit and throttle keys, which embed caller strings). */
#ifndef HR_KEYS_H
#define HR_KEYS_H

#include <stddef.h>
#include <stdint.h>

#define HR_KEY_MAX 256
#define HR_KEYS_PREFIX_MAX 64

/* The per-task keys that are one name (chunk and lease keys carry a seq). */
typedef enum hr_key_kind {
    HR_KEY_SUBS,    /* SET: recipients still to be chunked */
    HR_KEY_SEQ,     /* STRING: chunk counter */
    HR_KEY_PENDING, /* HASH: seq -> last publish time (ms) of chunks not yet done */
    HR_KEY_STATS,   /* HASH: live counters */
    HR_KEY_PULLED,  /* SET: recipients who pre-downloaded the reminder */
    HR_KEY_FAILED,  /* HASH: uid -> final error (dead letters) */
    HR_KEY_CTL,     /* STRING: mirror of push_task.control for workers */
    HR_KEY_SYNCED,  /* STRING: subscription epoch last loaded into subs */
    HR_KEY_PREP,    /* STRING: the prepare lock's owner */
    HR_KEY_SERIES,  /* STRING: MySQL's instant (ms) of the series subscribers in subs */
    /* local time and send windows (docs/scheduling.md) */
    HR_KEY_WAIT,  /* ZSET: uid -> release ms, recipients not yet due */
    HR_KEY_WAVES, /* HASH: <release ms> -> "<close ms> <zone>", released:<ms> -> n, planned */
    HR_KEY__COUNT
} hr_key_kind;

/* PREFIX "{t" TASK "}:" and the name of KIND, e.g. "herald:{t42}:subs". */
char *hr_key_task(const char *prefix, char *buf, size_t len, int64_t task, hr_key_kind kind);
/* KIND of shard SHARD of TASK, e.g. "herald:{t42:s3}:subs"; the task-level
 * kinds (ctl, synced, prep, series) are the task's whatever SHARD says. */
char *hr_key_shard(const char *prefix, char *buf, size_t len, int64_t task, int shard,
                   hr_key_kind kind);
/* "herald:{t42:s3}:chunk:<seq>", ":lease:<seq>", ":redrive:<seq>" of shard
 * SHARD (< 1: "{t42}"). */
char *hr_key_shard_chunk(const char *prefix, char *buf, size_t len, int64_t task, int shard,
                         int64_t seq);
char *hr_key_shard_lease(const char *prefix, char *buf, size_t len, int64_t task, int shard,
                         int64_t seq);
char *hr_key_shard_redrive(const char *prefix, char *buf, size_t len, int64_t task, int shard,
                           int64_t seq);
/* SCAN MATCH patterns of every chunk:<seq> / lease:<seq> key of one shard. */
char *hr_key_shard_chunks_match(const char *prefix, char *buf, size_t len, int64_t task, int shard);
char *hr_key_shard_leases_match(const char *prefix, char *buf, size_t len, int64_t task, int shard);
/* "herald:{t42}:": the base scripts append "chunk:<seq>" and "lease:<seq>" to. */
char *hr_key_task_base(const char *prefix, char *buf, size_t len, int64_t task);
/* "herald:{t42}:chunk:<seq>": a chunk's recipients not yet acknowledged. */
char *hr_key_chunk(const char *prefix, char *buf, size_t len, int64_t task, int64_t seq);
/* "herald:{t42}:lease:<seq>": the worker holding the chunk. */
char *hr_key_lease(const char *prefix, char *buf, size_t len, int64_t task, int64_t seq);

/* "herald:{t42}:redrive:<seq>": redrive.lua's recorded result for chunk SEQ. */
char *hr_key_redrive(const char *prefix, char *buf, size_t len, int64_t task, int64_t seq);
/* SCAN MATCH patterns of every chunk:<seq> / lease:<seq> key of TASK (the
 * prefix's glob characters escaped).  The tag {t<ID>} is spelled literally,
 * so on a Redis Cluster such a SCAN goes to the task's slot alone
 * (hr_slot_of_pattern). */
char *hr_key_chunks_match(const char *prefix, char *buf, size_t len, int64_t task);
char *hr_key_leases_match(const char *prefix, char *buf, size_t len, int64_t task);

/* "herald:timer": ZSET task id -> due time (ms). */
char *hr_key_timer(const char *prefix, char *buf, size_t len);
/* "herald:cancel_held": SET of cancelled tasks whose chunks a worker held. */
char *hr_key_cancel_held(const char *prefix, char *buf, size_t len);
/* "herald:handback": SET of "<task>:<shard>:<seq>:<due ms>", chunks workers
 * handed back (handback.lua) for a dispatcher to publish at once. */
char *hr_key_handback(const char *prefix, char *buf, size_t len);
/* "herald:redriven": SET of tasks heraldctl redrive gave new chunks. */
char *hr_key_redriven(const char *prefix, char *buf, size_t len);
/* HASH: an API job's record (dispatcher/dsp_api_job.h), and the STRING
 * counter its ids come from. */
char *hr_key_job(const char *prefix, char *buf, size_t len, int64_t id);
char *hr_key_job_seq(const char *prefix, char *buf, size_t len);
/* "herald:user:<uid>": HASH of a recipient's profile and preferences
 * (hr_user.h), the mirror of push_user and push_user_pref. */
char *hr_key_user(const char *prefix, char *buf, size_t len, const char *uid);
/* "herald:user_synced": the profile change epoch Redis holds everything
 * before; missing = reload every profile (hr_user_mirror). */
char *hr_key_user_synced(const char *prefix, char *buf, size_t len);
/* "herald:user_lock": STRING, the owner of the running profile sync. */
char *hr_key_user_lock(const char *prefix, char *buf, size_t len);
/* "herald:user_book": HASH of the book's state, that a worker may leave
 * out every profile read: "writes", the rewrites of profile hashes begun
 * (hr_user_rewrite), and "empty", the count of them at which a sync found
 * no profile in MySQL (book_empty.lua; hr_user_book_empty). */
char *hr_key_user_book(const char *prefix, char *buf, size_t len);
/* "herald:addr:<uid>": SET of a recipient's addresses (hr_addr.h). */
char *hr_key_addr(const char *prefix, char *buf, size_t len, const char *uid);
/* "herald:addr_synced": the address change epoch Redis holds everything
 * before; missing = reload every address (hr_mirror). */
char *hr_key_addr_synced(const char *prefix, char *buf, size_t len);
/* "herald:addr_lock": STRING, the owner of the running address sync. */
char *hr_key_addr_lock(const char *prefix, char *buf, size_t len);
/* "herald:slow:<channel>": STRING, until when (ms) a provider asked the
 * channel to slow down (429/503 + Retry-After), for every worker; expires
 * then. */
char *hr_key_slowdown(const char *prefix, char *buf, size_t len, const char *channel);
/* "herald:rl:<scope>": HASH, a scope's rate-limit counter, {w = the
 * window's number by Redis's clock, n = granted in it} (ratelimit.lua;
 * hr_ratelimit.h). */
char *hr_key_ratelimit(const char *prefix, char *buf, size_t len, const char *scope);
/* Pacing and the channel budget (docs/scheduling.md). */
/* "herald:{t42}:rl:<who>": the same counter for a task with a finish_by
 * (WHO "chunk" at the dispatcher, "push" at workers); in the task's slot,
 * so ratelimit.lua can read the planned rate from its stats. */
char *hr_key_pace_rl(const char *prefix, char *buf, size_t len, int64_t task, const char *who);
/* "herald:share:{c:<channel>}:tasks" (PARITY < 0): ZSET "<task>:<weight>" ->
 * last ask (ms), the tasks drawing on the channel's budget; and
 * "herald:share:{c:<channel>}:0" and ":1" (PARITY 0, 1): HASH, the grants
 * per task of an even and an odd second by Redis's clock (share.lua). */
char *hr_key_share(const char *prefix, char *buf, size_t len, const char *channel, int parity);
/* "herald:thr:<scope>:<uid>[:<value>]" (VALUE NULL = none): a recipient's
 * throttle window. */
char *hr_key_throttle(const char *prefix, char *buf, size_t len, const char *scope, const char *uid,
                      const char *value);

#endif
