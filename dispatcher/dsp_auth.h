/* dsp_auth: who presents a bearer token to the API, and with which role
 * (docs/api.md "Operators and roles"), for the auth hook of dsp_api.c.
 *
 * Three kinds of token name a caller:
 *   - a bootstrap token of dispatcher.api.tokens (and tokens_file): an
 *     admin named "bootstrap:<n>" (its place in the list, from 1);
 *   - an API token (hr_apitoken.h, "hrt1_..."): "token:<name>" with its
 *     role, found in a cache of the live tokens of push_api_token;
 *   - with dispatcher.api.jwt, a JWT of the identity provider (hr_jwks.h):
 *     "jwt:<subject claim>" with the role its role claim names.
 * Client tokens of the pull are dsp_api.c's (they name a uid, not a
 * caller with a role).
 *
 * The cache: the token lookup costs no MySQL round trip per request.  The
 * live tokens (not revoked, not expired) are read in one query and kept,
 * sorted by hash, for DSP_AUTH_REFRESH_MS; a request that finds the copy
 * older waits for one reading (one at a time: the others wait on the
 * mutex, then find it fresh), so a token revoked or expired on any
 * dispatcher stops working within DSP_AUTH_REFRESH_MS, and at once on the
 * dispatcher that revoked it (dsp_auth_forget).  An unknown token reads the
 * store again only when the copy is older than DSP_AUTH_MISS_MS, so
 * guessing costs MySQL at most one query per DSP_AUTH_MISS_MS, and a token
 * just created elsewhere works within that.  A failed reading is not
 * retried for DSP_AUTH_MISS_MS either; the copy is then used for at most
 * DSP_AUTH_STALE_MS after the last good reading, after which API tokens are
 * answered 503 (the bootstrap tokens and JWTs go on).  An expiry is
 * checked at every use against the copy's expires_at, so it is exact.
 *
 * The JWK Set file is read again when its modification time or size
 * changes, looked at no more than every DSP_AUTH_REFRESH_MS (a rotated key
 * set on a mounted Secret needs no restart); a file that no longer parses
 * leaves the last good set in use, and says so in the log.
 *
 * Threads: any of the API's; one mutex for the token cache and its MySQL
 * connection, another for the key set (verifying under it: a verification
 * is ~50 us). */
#ifndef DSP_AUTH_H
#define DSP_AUTH_H

#include <stddef.h>

#include "hr_apitoken.h"
#include "hr_config.h"
#include "hr_httpd.h"
#include "hr_role.h"

#define DSP_AUTH_REFRESH_MS HR_APITOKEN_CACHE_MS
#define DSP_AUTH_MISS_MS 1000
#define DSP_AUTH_STALE_MS 60000

typedef struct dsp_auth dsp_auth;

/* A caller: its name for the audit log and its role. */
typedef struct dsp_auth_who {
    char name[HR_HTTPD_AUTH_NAME];
    hr_role role;
} dsp_auth_who;

/* The refusals of dsp_auth_identify. */
enum {
    DSP_AUTH_UNKNOWN = -1,     /* no such token, expired, revoked, a bad JWT: 401 */
    DSP_AUTH_UNAVAILABLE = -2, /* the token store cannot be read: 503 */
    DSP_AUTH_NO_ROLE = -3,     /* a good JWT whose role claim names no role: 403 */
};

/* The identities CFG configures (it must outlive AU).  0, or -1 with
 * ERRSTR (the JWK Set file cannot be read). */
int dsp_auth_new(const hr_config *cfg, dsp_auth **out, char *errstr, size_t errlen);
void dsp_auth_free(dsp_auth *au);

/* Who TOKEN names, into *WHO.  0, or one of the refusals above with
 * ERRSTR (never quoting the token). */
int dsp_auth_identify(dsp_auth *au, const char *token, dsp_auth_who *who, char *errstr,
                      size_t errlen);

/* The next API token lookup reads the store: a token was created or
 * revoked through this dispatcher. */
void dsp_auth_forget(dsp_auth *au);

#endif
