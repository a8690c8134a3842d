/* hk_store: herald-hooks' MySQL (schemas/mysql/018_hooks.sql): the
 * endpoints read, their failures and disabling written, their dead
 * letters written, claimed for a redrive and deleted once delivered.
 * Prepared statements on the caller's connection; no state. */
#ifndef HK_STORE_H
#define HK_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_mysql.h"

/* A push_hook row. */
typedef struct hk_store_hook {
    int64_t id;
    char *url, *types, *secret;
    bool enabled;
    int64_t dead; /* its dead letters */
} hk_store_hook;

/* Every push_hook row, by id, with its dead letters counted when COUNT
 * (a scan of push_hook_dead's index; else dead is -1).  0, or -1 (ERRSTR). */
int hk_store_hooks(hr_mysql *m, bool count, hk_store_hook **out, size_t *n, char *errstr,
                   size_t errlen);
void hk_store_hooks_free(hk_store_hook *hooks, size_t n);

/* Hook ID failing since now (unless it already was), or healthy again
 * (FAILING false: failing_since cleared). */
int hk_store_failing(hr_mysql *m, int64_t id, bool failing, char *errstr, size_t errlen);
/* Disables hook ID with REASON (only while enabled: 1 when this call did). */
int hk_store_disable(hr_mysql *m, int64_t id, const char *reason, char *errstr, size_t errlen);

/* A dead letter to write: an event and why it was given up. */
typedef struct hk_store_dead {
    const char *event_id;
    uint64_t uid;
    const char *value;
    size_t len;
} hk_store_dead;

/* Writes the N dead letters ROWS of hook ID, each with ERROR.  0, or -1. */
int hk_store_bury(hr_mysql *m, int64_t id, const hk_store_dead *rows, size_t n, const char *error,
                  char *errstr, size_t errlen);

/* A claimed dead letter. */
typedef struct hk_store_claimed {
    int64_t dead_id;
    char *value;
} hk_store_claimed;

/* Claims up to N of hook ID's dead letters marked for a redrive (not
 * claimed, or whose claim ran out) for OWNER, for LEASE_MS, oldest first:
 * *OUT (free with hk_store_claimed_free) and *GOT.  0, or -1. */
int hk_store_claim(hr_mysql *m, int64_t id, const char *owner, int n, int lease_ms,
                   hk_store_claimed **out, size_t *got, char *errstr, size_t errlen);
void hk_store_claimed_free(hk_store_claimed *c, size_t n);
/* Deletes the N delivered dead letters IDS.  0, or -1. */
int hk_store_redriven(hr_mysql *m, const int64_t *ids, size_t n, char *errstr, size_t errlen);

#endif
