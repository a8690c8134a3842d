/* hr_apitoken: operators' API tokens, stored hashed in MySQL
 * (push_api_token, schemas/mysql/011_api_token.sql): made, listed and
 * revoked by `heraldctl token create|list|revoke` and the admin API
 * (/v1/tokens), read by the dispatcher's token cache (dispatcher/dsp_auth.c).
 *
 * A token is "hrt1_" and the unpadded base64url of 32 random bytes
 * (OpenSSL's RAND_bytes): 48 characters that the caller shows once, at
 * creation, and that nothing stores or logs.  The table holds the hex
 * SHA-256 of it; 256 random bits need no slow hash, and one indexed lookup
 * finds a token by its hash.  Each token has a name (unique among every
 * token ever made: the audit log names a caller "token:<name>"), one role
 * (hr_role.h) and an expiry, at most HR_APITOKEN_TTL_MAX_MS after its
 * creation.  Revoking sets revoked_at; rows are never deleted.
 *
 * Connections are the caller's and may be inside its transaction (the
 * audit row of a change goes in the same one); nothing here logs. */
#ifndef HR_APITOKEN_H
#define HR_APITOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "hr_mysql.h"
#include "hr_role.h"

#define HR_APITOKEN_PREFIX "hrt1_"
#define HR_APITOKEN_MAX 64  /* a token and its NUL, with room */
#define HR_APITOKEN_HASH 65 /* hex SHA-256 and its NUL */
#define HR_APITOKEN_NAME 65 /* a name (1..64 of [A-Za-z0-9_.@-]) and its NUL */
#define HR_APITOKEN_ACTOR 201
#define HR_APITOKEN_TTL_MAX_MS ((int64_t)366 * 86400 * 1000)
/* How long a dispatcher may go on taking a token revoked (or created)
 * elsewhere: the age of its cache of the live tokens (dispatcher/dsp_auth.h). */
#define HR_APITOKEN_CACHE_MS 5000
#define HR_APITOKEN_TTL_DEFAULT_MS ((int64_t)90 * 86400 * 1000)

/* Second success of hr_apitoken_create and hr_apitoken_revoke: nothing
 * was changed, ERRSTR says why (a name in use; no such token, or it was
 * revoked already). */
enum { HR_APITOKEN_REFUSED = 1 };

typedef struct hr_apitoken {
    int64_t id;
    char name[HR_APITOKEN_NAME];
    hr_role role;
    char hash[HR_APITOKEN_HASH];
    int64_t created_ms, expires_ms, revoked_ms; /* revoked_ms -1: not revoked */
    char created_by[HR_APITOKEN_ACTOR];
    char revoked_by[HR_APITOKEN_ACTOR]; /* "" when not revoked */
} hr_apitoken;

/* True when TOKEN has an API token's prefix: the caller then decides on
 * this module's word rather than another kind's. */
bool hr_apitoken_is(const char *token);
/* The hex SHA-256 of TOKEN into HEX (HR_APITOKEN_HASH bytes).  0 or -1. */
int hr_apitoken_hash(const char *token, char *hex);
/* 0 when NAME is 1..64 of A-Z a-z 0-9 _ . @ -; -1 with ERRSTR. */
int hr_apitoken_name_ok(const char *name, char *errstr, size_t errlen);

/* Makes a token named NAME with ROLE, valid until EXPIRES_MS (after NOW_MS,
 * at most HR_APITOKEN_TTL_MAX_MS later), created by the audit actor BY:
 * its row into MySQL, the token into TOKEN (HR_APITOKEN_MAX bytes), the
 * row as stored into *OUT.  0, HR_APITOKEN_REFUSED (the name is taken, or
 * a bad name or expiry: ERRSTR), or -1 (ERRSTR). */
int hr_apitoken_create(hr_mysql *m, const char *name, hr_role role, int64_t now_ms,
                       int64_t expires_ms, const char *by, char *token, hr_apitoken *out,
                       char *errstr, size_t errlen);

/* The tokens, newest first: every one made (ALL), or only those neither
 * revoked nor expired at NOW_MS.  *OUT (free()) holds *N.  0 or -1. */
int hr_apitoken_list(hr_mysql *m, bool all, int64_t now_ms, hr_apitoken **out, size_t *n,
                     char *errstr, size_t errlen);

/* The token of id ID, or named NAME when ID is 0, into *OUT.  0,
 * HR_APITOKEN_REFUSED (none), or -1. */
int hr_apitoken_find(hr_mysql *m, int64_t id, const char *name, hr_apitoken *out, char *errstr,
                     size_t errlen);

/* Revokes token ID (revoked_at now, revoked_by BY); *OUT gets the row
 * before the change (for the audit log).  0, HR_APITOKEN_REFUSED (no such
 * token, or revoked already), or -1. */
int hr_apitoken_revoke(hr_mysql *m, int64_t id, const char *by, hr_apitoken *out, char *errstr,
                       size_t errlen);

/* T as the API and `heraldctl token list --json` show it: id, name, role,
 * created_at, created_by, expires_at, revoked_at, revoked_by (never the
 * hash).  NULL when out of memory. */
cJSON *hr_apitoken_json(const hr_apitoken *t);

#endif
