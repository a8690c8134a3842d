/* hr_throttle: the per-recipient sliding-window throttle shared by tasks
 * (lua/throttle.lua; docs/throttle.md explains the semantics).
 *
 * A recipient's window is one Redis key, "herald:thr:<scope>:<uid>" or
 * "herald:thr:<scope>:<uid>:<value>" when the task's throttle_key names an
 * attribute: a string "<task>:<ms>" while it holds one pass, else a sorted
 * set with one member per task let through (the task id, scored with the
 * Redis server's time of its pass).  The key carries no
 * {t<ID>} tag: the window spans tasks, and on a Redis Cluster each script
 * call touches one key, so the cluster routes it by itself.  The script
 * counts each window, and adds the task's pass (trimming what left the
 * window) when under the limit, atomically, so concurrent workers need no
 * lock.  hr_throttle_check() decides up to 100 recipients of one rule per
 * call on one server and pipelines the calls of a whole batch: one round
 * trip per HR_THROTTLE_PIPE_MAX recipients.
 *
 * Shadow mode is applied here, after the script: the script answers the same
 * in both modes (a would-be-throttled push adds no entry), and a throttled
 * recipient becomes HR_THROTTLE_SHADOWED instead of HR_THROTTLE_BLOCKED. */
#ifndef HR_THROTTLE_H
#define HR_THROTTLE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_config.h"
#include "hr_redis.h"
#include "hr_task.h"

#define HR_THROTTLE_KEY_MAX 640   /* a whole key; scope <= 100, value < 256 */
#define HR_THROTTLE_VALUE_MAX 256 /* a throttle_key value, with its NUL */
#define HR_THROTTLE_PIPE_MAX 1000 /* script calls per round trip */

typedef enum hr_throttle_verdict {
    HR_THROTTLE_PASS = 0,     /* under the limit (or already counted for this task): push */
    HR_THROTTLE_BLOCKED = 1,  /* over the limit, enforce: do not push, ack as throttled */
    HR_THROTTLE_SHADOWED = 2, /* over the limit, shadow: push anyway, count it */
} hr_throttle_verdict;

/* A task's throttle, resolved once per task.  limit 0 = the task does not
 * throttle. */
typedef struct hr_throttle_rule {
    int64_t limit;
    int64_t window_ms;     /* 1000 .. HR_TASK_MAX_WINDOW_S * 1000 */
    int64_t task;          /* the tag of this task's entries */
    hr_throttle_mode mode; /* the task's column, else the channel's */
} hr_throttle_rule;

typedef struct hr_throttle_req {
    const char *key;              /* from hr_throttle_key() */
    const hr_throttle_rule *rule; /* limit >= 1 */
} hr_throttle_req;

typedef struct hr_throttle_result {
    hr_throttle_verdict verdict;
    int64_t now_ms; /* the Redis server time the script decided at */
    int64_t count;  /* entries in the window after the call */
} hr_throttle_result;

/* Fills RULE from task T sent through channel CH (the mode when the task's
 * column is NULL).  Returns 0, or -1 when the throttle columns are out of
 * the range hr_task_validate allows or the mode is unknown. */
int hr_throttle_rule_from_task(const hr_task *t, const hr_channel *ch, hr_throttle_rule *rule,
                               char *errstr, size_t errlen);

/* The value of attribute ATTR for one recipient: from PAYLOAD (the task's
 * payload object, may be NULL) first, else from USER (that recipient's
 * HGETALL reply of herald:user:<uid>, may be NULL).  A payload string is
 * taken as is, a number as its decimal text, a boolean as true/false; other
 * payload types are skipped.  Writes the value into BUF (LEN, normally
 * HR_THROTTLE_VALUE_MAX) and returns BUF, or NULL when the attribute is
 * missing, empty or longer than LEN - 1 — the caller then throttles without
 * it and counts throttle_key_missing. */
const char *hr_throttle_value(const char *attr, const cJSON *payload, const redisReply *user,
                              char *buf, size_t len);

/* Writes "<prefix>thr:<scope>:<uid>" (+ ":<value>" when VALUE is not NULL)
 * into BUF.  Returns 0, or -1 when it does not fit in LEN. */
int hr_throttle_key(const hr_redis *r, const char *scope, const char *uid, const char *value,
                    char *buf, size_t len, char *errstr, size_t errlen);

/* Runs the throttle for the N requests, pipelined, and writes one result
 * per request into OUT.  Returns 0, or -1 on a Redis or protocol error; the
 * results are then unknown (some entries may have been added, so a retry
 * counts those recipients' own entries as the same task's: verdict PASS). */
int hr_throttle_check(hr_redis *r, const hr_throttle_req *reqs, size_t n, hr_throttle_result *out,
                      char *errstr, size_t errlen);

#endif
