/* hr_addr: the recipients' address book — where a uid is reached on each
 * platform (an FCM or APNs device token, an email address, a webhook URL),
 * dual-stored like subscriptions.
 *
 * MySQL's push_address (schemas/mysql/004_address.sql) is the truth;
 * Redis holds the working copy the workers read, one SET per uid
 * (herald:addr:<uid>, hr_key_addr) whose members are
 * "<platform> <app> <address>" (hr_addr_member; none of the three holds a
 * space).  A uid may hold several addresses per platform and app.
 *
 * Every write here changes MySQL first, then rewrites the uid's set from
 * the rows MySQL holds (addr_set.lua), so a failed Redis step leaves
 * nothing the next sync would not repair.  Writes made with raw SQL reach
 * Redis through the book's mirror (hr_addr_mirror, hr_mirror.h):
 * triggers record the changed uids with the address epoch; the sync
 * rewrites those uids' sets, or every uid's when Redis lost its synced mark
 * (herald:addr_synced).  The dispatcher runs it
 * at every task claim and periodically.  hr_addr_prune is the worker's
 * exception: a dead token goes from both stores without a rewrite.
 *
 * Thread use follows the connections passed in; no logging; errors are
 * -1 (or a negative HR_ADDR_E* code) with ERRSTR. */
#ifndef HR_ADDR_H
#define HR_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "hr_mirror.h"
#include "hr_mysql.h"
#include "hr_redis.h"
#include "hr_vec.h"

#define HR_ADDR_APP_MAX 255     /* push_address.app */
#define HR_ADDR_ADDRESS_MAX 512 /* push_address.address */
#define HR_ADDR_PER_UID_MAX 64  /* addresses one uid may hold (API, heraldctl, import) */
#define HR_ADDR_FETCH_BATCH 500 /* uids per pipelined round trip of a read or rewrite */
/* Longest Redis member: platform, two spaces, app, address, a space and
 * the longest suppression reason. */
#define HR_ADDR_MEMBER_MAX (8 + 2 + HR_ADDR_APP_MAX + HR_ADDR_ADDRESS_MAX + 1 + 12)

/* The address kinds of the channel types (push_address.platform). */
typedef enum hr_addr_platform {
    HR_ADDR_FCM,     /* FCM registration token; app = FCM project id */
    HR_ADDR_APNS,    /* APNs device token (hex); app = bundle topic */
    HR_ADDR_EMAIL,   /* an email address; app = '' */
    HR_ADDR_WEBHOOK, /* an http(s) URL; app = '' */
    HR_ADDR_WEBPUSH, /* a web push subscription (hr_wpsub.h); app = '' */
    HR_ADDR__COUNT
} hr_addr_platform;

/* Why an address is on the suppression list (push_suppression.reason,
 * 015_suppression.sql); HR_ADDR_SUPP_NONE: it is not. */
typedef enum hr_addr_supp {
    HR_ADDR_SUPP_NONE,
    HR_ADDR_SUPP_UNSUBSCRIBED, /* the address asked to leave: mandatory categories still go */
    HR_ADDR_SUPP_COMPLAINED,   /* a spam report */
    HR_ADDR_SUPP_BOUNCED,      /* a hard bounce */
    HR_ADDR_SUPP__COUNT
} hr_addr_supp;

#define HR_ADDR_EINVAL -2 /* hr_addr_check refused the address (ERRSTR says why) */
#define HR_ADDR_EFULL -3  /* the uid holds HR_ADDR_PER_UID_MAX addresses already */

/* One address.  APP and ADDRESS point into the list's arena (or the
 * caller's strings for an input).  IDX: for hr_addr_take, the index its
 * caller gave (the worker's: the member's in its chunk); otherwise 0. */
typedef struct hr_addr {
    int64_t uid;
    hr_addr_platform platform;
    const char *app;
    const char *address;
    size_t idx;
    hr_addr_supp supp; /* on the suppression list (read from Redis or MySQL) */
} hr_addr;

/* A list of addresses with the storage of their strings.  Zero-initialise;
 * free with hr_addr_list_free (which leaves it empty and reusable). */
typedef struct hr_addr_list {
    HR_VEC(hr_addr) a;
    HR_VEC(char *) blocks; /* arena blocks APP and ADDRESS point into */
    size_t used, avail;    /* bytes used / left in the last block */
} hr_addr_list;

void hr_addr_list_free(hr_addr_list *l);

/* "unsubscribed", "complained", "bounced"; NULL for NONE and anything
 * else. */
const char *hr_addr_supp_name(hr_addr_supp s);
/* The reason named S (not NONE).  0, or -1. */
int hr_addr_supp_parse(const char *s, hr_addr_supp *out);

/* "fcm", "apns", "email", "webhook", "webpush"; NULL for anything else. */
const char *hr_addr_platform_name(hr_addr_platform p);
/* The platform named S.  0, or -1. */
int hr_addr_platform_parse(const char *s, hr_addr_platform *out);

/* Whether APP and ADDRESS are valid for P: fcm — a project id (letters,
 * digits, '-', 1..HR_ADDR_APP_MAX) and a token of [A-Za-z0-9_:.-];
 * apns — a bundle topic ([A-Za-z0-9.-]) and an even number of 64..200 hex
 * digits; email — app '' and local@domain (printable ASCII, no space,
 * quote, parenthesis, comma, angle bracket or backslash in the local
 * part; domain labels of letters, digits and inner '-'; at most 254
 * bytes); webhook — app '' and an http:// or https:// URL with a host and
 * no space or control character; webpush — app '' and a subscription
 * <endpoint>#<p256dh>.<auth> (hr_wpsub_parse).  Every address 1..HR_ADDR_ADDRESS_MAX
 * bytes.  0, or HR_ADDR_EINVAL with ERRSTR naming the field. */
int hr_addr_check(hr_addr_platform p, const char *app, const char *address, char *errstr,
                  size_t errlen);

/* The Redis member of an address into BUF ("<platform> <app> <address>",
 * and " <reason>" when SUPP is not NONE: a suppressed address, which an
 * older worker's parse refuses and so never pushes to); BUF, or NULL when
 * it does not fit LEN. */
char *hr_addr_member(char *buf, size_t len, hr_addr_platform p, const char *app,
                     const char *address, hr_addr_supp supp);
/* The reverse: splits MEMBER (LEN bytes) into OUT's fields (supp
 * included), the strings copied into L's arena (OUT is not appended).  0,
 * or -1 when MEMBER is not a member hr_addr_check accepts (or out of
 * memory) — except a webpush address's p256dh point, not checked on the
 * curve here: every write path and the sync checked it before it reached
 * Redis, the worker reads members for every push (the check is an EC point
 * decode, about 15 us), and OpenSSL checks the point again when the push is
 * encrypted, which fails that one push loudly (hr_wpsub_split). */
int hr_addr_parse_member(hr_addr_list *l, const char *member, size_t len, hr_addr *out);

/* L as a JSON array of {"platform", "app", "address"} and "suppressed":
 * the reason, for an address on the suppression list (the caller's, freed
 * with cJSON_Delete); NULL when out of memory. */
cJSON *hr_addr_list_json(const hr_addr_list *l);

/* Appends an address to L, its strings copied into L's arena.  0 or -1. */
int hr_addr_list_push(hr_addr_list *l, const hr_addr *a);

/* Adds one address to UID (checked first): MySQL, then the uid's Redis
 * set.  1 = added, 0 = the uid held it already, HR_ADDR_EINVAL,
 * HR_ADDR_EFULL, or -1. */
int hr_addr_add(hr_mysql *m, hr_redis *r, int64_t uid, hr_addr_platform p, const char *app,
                const char *address, char *errstr, size_t errlen);
/* Removes one address of UID from both stores.  1 = removed, 0 = absent,
 * or -1. */
int hr_addr_remove(hr_mysql *m, hr_redis *r, int64_t uid, hr_addr_platform p, const char *app,
                   const char *address, char *errstr, size_t errlen);
/* Makes UID's addresses exactly the N of LIST (N = 0: removes them all), in
 * one MySQL transaction, then rewrites the Redis set.  Every entry is
 * checked first (HR_ADDR_EINVAL names the first bad one by index), N at
 * most HR_ADDR_PER_UID_MAX (HR_ADDR_EFULL); LIST's uid fields are ignored.
 * 0 or a negative code. */
int hr_addr_replace(hr_mysql *m, hr_redis *r, int64_t uid, const hr_addr *list, size_t n,
                    char *errstr, size_t errlen);
/* UID's addresses as MySQL holds them (platform, app, address order),
 * with their suppression, appended to OUT.  0 or -1. */
int hr_addr_list_uid(hr_mysql *m, int64_t uid, hr_addr_list *out, char *errstr, size_t errlen);

/* What hr_addr_import did with its rows. */
typedef struct hr_addr_import_result {
    size_t added;   /* new rows */
    size_t existed; /* rows MySQL held already */
    size_t full;    /* refused: the uid held HR_ADDR_PER_UID_MAX addresses */
} hr_addr_import_result;

/* Bulk import of N checked addresses (the caller checked each with
 * hr_addr_check and reports the ones refused): one MySQL transaction with
 * one multi-row statement per uid, then the Redis sets of their uids
 * rewritten in one pipelined round trip.  N may be up to a few thousand.
 * *RES gets the counts (added + existed + full = N).  0 or -1. */
int hr_addr_import(hr_mysql *m, hr_redis *r, const hr_addr *rows, size_t n,
                   hr_addr_import_result *res, char *errstr, size_t errlen);

/* The addresses on platform P (and app APP; NULL = any) of the SMEMBERS
 * REPLY of uid UID appended to OUT with IDX; members that do not parse are
 * counted in *BAD; for a caller that reads the sets in a pipeline of its
 * own (the worker's open reads them HR_ADDR_FETCH_BATCH uids per round
 * trip, beside the profiles: worker/wk_consent.c).  0, or -1 out of
 * memory. */
int hr_addr_take(hr_addr_list *out, const redisReply *reply, int64_t uid, size_t idx,
                 hr_addr_platform p, const char *app, size_t *bad);

/* Removes one dead address (a provider answered it is unregistered) from
 * both stores: Redis first (the next fetch no longer sees it), then MySQL.
 * 1 = removed from MySQL, 0 = MySQL no longer held it, -1. */
int hr_addr_prune(hr_mysql *m, hr_redis *r, const hr_addr *a, char *errstr, size_t errlen);
/* Its two steps, for a caller whose Redis connection lives on another
 * thread (the worker's): the SREM (0 or -1), then the DELETE (as
 * hr_addr_prune). */
int hr_addr_unlist(hr_redis *r, const hr_addr *a, char *errstr, size_t errlen);
int hr_addr_forget(hr_mysql *m, const hr_addr *a, char *errstr, size_t errlen);

/* ---- the suppression list (015_suppression.sql) ---------------------------- */

/* Puts an address on the suppression list for REASON (not NONE; checked
 * with hr_addr_check first), NOTE (may be NULL, at most 255 bytes) kept
 * beside it, then rewrites the sets of the uids that hold it.  1 added, 0
 * updated, HR_ADDR_EINVAL, or -1. */
int hr_addr_suppress(hr_mysql *m, hr_redis *r, hr_addr_platform p, const char *app,
                     const char *address, hr_addr_supp reason, const char *note, char *errstr,
                     size_t errlen);
/* Takes an address off the list, then rewrites its uids' sets.  1
 * removed, 0 it was not on it, or -1. */
int hr_addr_unsuppress(hr_mysql *m, hr_redis *r, hr_addr_platform p, const char *app,
                       const char *address, char *errstr, size_t errlen);
/* Rewrites the sets of every uid holding the address P/APP/ADDRESS from
 * MySQL (its suppression changed, or a change of it was rolled back).  0
 * or -1. */
int hr_addr_rewrite_holders(hr_mysql *m, hr_redis *r, hr_addr_platform p, const char *app,
                            const char *address, char *errstr, size_t errlen);
/* The suppressed addresses of platform P and app APP as a JSON array of
 * {"platform", "app", "address", "reason", "note", "created_at"}: the one
 * of ADDRESS when it is not NULL, else at most LIMIT (1..1000) in address
 * order after AFTER (NULL = from the start), *MORE (may be NULL) true when
 * more follow.  NULL (ERRSTR) on a MySQL error. */
cJSON *hr_addr_suppressions(hr_mysql *m, hr_addr_platform p, const char *app, const char *address,
                            const char *after, int limit, bool *more, char *errstr, size_t errlen);

/* The address book's mirror (hr_mirror.h): its sync, hr_mirror_sync(&hr_addr_mirror, ...),
 * rewrites herald:addr:<uid> from push_address; the mark is
 * herald:addr_synced, the lock herald:addr_lock. */
extern const hr_mirror hr_addr_mirror;

#endif
