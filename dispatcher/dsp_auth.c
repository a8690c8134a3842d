/* dsp_auth: the API's callers (see dsp_auth.h).  The bootstrap tokens are
 * kept as their SHA-256 digests and a presented token's digest is compared
 * with each of them with CRYPTO_memcmp, all of them every time: the time
 * says nothing of which matched or of their lengths.  The API tokens'
 * cache is an array of the live rows sorted by hash, searched with
 * bsearch; the key set is an hr_jwks replaced whole on a reload. */
#include "dsp_auth.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hr_apitoken.h"
#include "hr_clock.h"
#include "hr_config_file.h"
#include "hr_jwks.h"
#include "hr_log.h"
#include "hr_mysql.h"
#include "hr_sign.h"

#define DSP_AUTH_SUBJECT_MAX 150 /* bytes of a JWT subject kept in a caller's name */

/* One live API token of the cache. */
typedef struct dsp_auth_token {
    char hash[HR_APITOKEN_HASH];
    char name[HR_APITOKEN_NAME];
    hr_role role;
    int64_t expires_ms;
} dsp_auth_token;

struct dsp_auth {
    const hr_config *cfg;
    char (*bootstrap)[HR_SIGN_SHA256_HEX]; /* digests of dispatcher.api.tokens */
    size_t nbootstrap;

    pthread_mutex_t tokens_mu; /* the cache and its connection */
    hr_mysql *m;
    dsp_auth_token *tokens; /* sorted by hash */
    size_t ntokens;
    int64_t loaded_mono, tried_mono; /* the last good reading, the last attempt (0: none) */

    pthread_mutex_t jwks_mu; /* the key set */
    hr_jwks *jwks;
    struct timespec jwks_mtime;
    off_t jwks_size;
    int64_t jwks_checked_mono;
};

static int dsp_auth_token_cmp(const void *a, const void *b)
{
    return strcmp(((const dsp_auth_token *)a)->hash, ((const dsp_auth_token *)b)->hash);
}

/* ---- the JWK Set ---------------------------------------------------------- */

/* Reads the JWK Set file into au->jwks when it changed since the last
 * reading (or always, FIRST).  0, or -1 with ERRSTR (au->jwks unchanged). */
static int dsp_auth_jwks_load(dsp_auth *au, bool first, char *errstr, size_t errlen)
{
    const char *path = au->cfg->dispatcher.api.jwt.jwks_file;
    struct stat st;
    hr_jwks *set = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc;

    au->jwks_checked_mono = hr_clock_mono_ms();
    if (stat(path, &st) != 0) {
        snprintf(errstr, errlen, "%s: cannot stat", path);
        return -1;
    }
    if (!first && st.st_mtim.tv_sec == au->jwks_mtime.tv_sec &&
        st.st_mtim.tv_nsec == au->jwks_mtime.tv_nsec && st.st_size == au->jwks_size)
        return 0;
    if (hr_config_read_file(path, HR_JWKS_FILE_MAX, &text, &len, errstr, errlen) != 0)
        return -1;
    rc = hr_jwks_parse(text, len, &set, errstr, errlen);
    free(text);
    if (rc != 0)
        return -1;
    hr_jwks_free(au->jwks);
    au->jwks = set;
    au->jwks_mtime = st.st_mtim;
    au->jwks_size = st.st_size;
    if (!first)
        hr_log_info("jwks_reloaded", "file=%s keys=%zu", path, hr_jwks_count(set));
    return 0;
}

/* The highest role the claim V names: a role name, or an array of them
 * (a provider's groups); HR_ROLE_NONE when it names none. */
static hr_role dsp_auth_claim_role(const cJSON *v)
{
    hr_role best = HR_ROLE_NONE, r;
    const cJSON *item;

    if (cJSON_IsString(v))
        return hr_role_parse(v->valuestring, &r) == 0 ? r : HR_ROLE_NONE;
    if (!cJSON_IsArray(v))
        return HR_ROLE_NONE;
    cJSON_ArrayForEach(item, v)
    {
        if (cJSON_IsString(item) && hr_role_parse(item->valuestring, &r) == 0 && r > best)
            best = r;
    }
    return best;
}

static int dsp_auth_jwt(dsp_auth *au, const char *token, dsp_auth_who *who, char *errstr,
                        size_t errlen)
{
    const hr_config *cfg = au->cfg;
    const hr_jwks_expect x = {.issuer = cfg->dispatcher.api.jwt.issuer,
                              .audience = cfg->dispatcher.api.jwt.audience,
                              .now_s = hr_clock_now_ms() / 1000,
                              .leeway_s = cfg->dispatcher.api.jwt.leeway_s};
    const cJSON *sub;
    cJSON *claims = NULL;
    char why[256];
    int rc;

    pthread_mutex_lock(&au->jwks_mu);
    if (hr_clock_mono_ms() - au->jwks_checked_mono >= DSP_AUTH_REFRESH_MS &&
        dsp_auth_jwks_load(au, false, why, sizeof why) != 0)
        hr_log_warn("jwks_reload_failed", "error=%s keys=last_good", why);
    rc = hr_jwks_verify(au->jwks, token, &x, &claims, errstr, errlen);
    pthread_mutex_unlock(&au->jwks_mu);
    if (rc != 0)
        return DSP_AUTH_UNKNOWN;
    sub = cJSON_GetObjectItemCaseSensitive(claims, cfg->dispatcher.api.jwt.subject_claim);
    who->role = dsp_auth_claim_role(
        cJSON_GetObjectItemCaseSensitive(claims, cfg->dispatcher.api.jwt.role_claim));
    if (!cJSON_IsString(sub) || sub->valuestring[0] == '\0') {
        snprintf(errstr, errlen, "jwt: no %s claim naming the caller",
                 cfg->dispatcher.api.jwt.subject_claim);
        rc = DSP_AUTH_UNKNOWN;
    } else if (who->role == HR_ROLE_NONE) {
        snprintf(errstr, errlen, "jwt: claim %s names no herald role (viewer, operator, admin)",
                 cfg->dispatcher.api.jwt.role_claim);
        rc = DSP_AUTH_NO_ROLE;
    } else {
        /* The provider's text goes into log lines and the audit log:
         * control bytes become '?'. */
        snprintf(who->name, sizeof who->name, "jwt:%.*s", DSP_AUTH_SUBJECT_MAX, sub->valuestring);
        for (char *c = who->name; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
    }
    cJSON_Delete(claims);
    return rc;
}

/* ---- API tokens ------------------------------------------------------------- */

/* Reads the live tokens into the cache (tokens_mu held).  0, or -1 with
 * ERRSTR (the cache unchanged). */
static int dsp_auth_tokens_load(dsp_auth *au, char *errstr, size_t errlen)
{
    hr_apitoken *rows = NULL;
    dsp_auth_token *tokens = NULL;
    size_t n = 0;

    au->tried_mono = hr_clock_mono_ms();
    if (au->m == NULL && hr_mysql_connect(au->cfg, &au->m, errstr, errlen) != 0)
        return -1;
    if (hr_apitoken_list(au->m, false, hr_clock_now_ms(), &rows, &n, errstr, errlen) != 0)
        return -1;
    if (n > 0 && (tokens = calloc(n, sizeof *tokens)) == NULL) {
        free(rows);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(tokens[i].hash, rows[i].hash, sizeof tokens[i].hash);
        memcpy(tokens[i].name, rows[i].name, sizeof tokens[i].name);
        tokens[i].role = rows[i].role;
        tokens[i].expires_ms = rows[i].expires_ms;
    }
    free(rows);
    qsort(tokens, n, sizeof *tokens, dsp_auth_token_cmp);
    free(au->tokens);
    au->tokens = tokens;
    au->ntokens = n;
    au->loaded_mono = au->tried_mono;
    return 0;
}

static int dsp_auth_apitoken(dsp_auth *au, const char *token, dsp_auth_who *who, char *errstr,
                             size_t errlen)
{
    dsp_auth_token key, *found;
    char why[256];
    int64_t now = hr_clock_mono_ms(), age;
    int rc = DSP_AUTH_UNKNOWN;

    if (hr_apitoken_hash(token, key.hash) != 0) {
        snprintf(errstr, errlen, "cannot hash the token");
        return DSP_AUTH_UNAVAILABLE;
    }
    pthread_mutex_lock(&au->tokens_mu);
    age = au->loaded_mono > 0 ? now - au->loaded_mono : INT64_MAX;
    if (age >= DSP_AUTH_REFRESH_MS && now - au->tried_mono >= DSP_AUTH_MISS_MS) {
        if (dsp_auth_tokens_load(au, why, sizeof why) != 0)
            hr_log_warn("api_tokens_unreadable", "error=%s last_good_ms_ago=%lld", why,
                        au->loaded_mono > 0 ? (long long)(now - au->loaded_mono) : -1LL);
        age = au->loaded_mono > 0 ? now - au->loaded_mono : INT64_MAX;
    }
    found = au->ntokens > 0 ? bsearch(&key, au->tokens, au->ntokens, sizeof key, dsp_auth_token_cmp)
                            : NULL;
    /* Not there: perhaps made a moment ago (at most one reading a second). */
    if (found == NULL && age >= DSP_AUTH_MISS_MS && now - au->tried_mono >= DSP_AUTH_MISS_MS) {
        if (dsp_auth_tokens_load(au, why, sizeof why) == 0)
            age = 0;
        found = au->ntokens > 0
                    ? bsearch(&key, au->tokens, au->ntokens, sizeof key, dsp_auth_token_cmp)
                    : NULL;
    }
    if (age >= DSP_AUTH_STALE_MS) {
        snprintf(errstr, errlen, "the API tokens cannot be read (MySQL); try again");
        rc = DSP_AUTH_UNAVAILABLE;
    } else if (found == NULL || found->expires_ms <= hr_clock_now_ms()) {
        snprintf(errstr, errlen, "unknown, revoked or expired API token");
    } else {
        snprintf(who->name, sizeof who->name, "token:%s", found->name);
        who->role = found->role;
        rc = 0;
    }
    pthread_mutex_unlock(&au->tokens_mu);
    return rc;
}

void dsp_auth_forget(dsp_auth *au)
{
    pthread_mutex_lock(&au->tokens_mu);
    au->loaded_mono = au->tried_mono = 0;
    pthread_mutex_unlock(&au->tokens_mu);
}

/* ---- who ---------------------------------------------------------------------- */

int dsp_auth_identify(dsp_auth *au, const char *token, dsp_auth_who *who, char *errstr,
                      size_t errlen)
{
    char digest[HR_SIGN_SHA256_HEX];
    size_t match = 0;

    memset(who, 0, sizeof *who);
    if (hr_sign_sha256_hex(token, strlen(token), digest) != 0) {
        snprintf(errstr, errlen, "cannot hash the token");
        return DSP_AUTH_UNAVAILABLE;
    }
    for (size_t i = 0; i < au->nbootstrap; i++)
        if (CRYPTO_memcmp(digest, au->bootstrap[i], sizeof digest) == 0)
            match = i + 1;
    if (match > 0) {
        snprintf(who->name, sizeof who->name, "bootstrap:%zu", match);
        who->role = HR_ROLE_ADMIN;
        return 0;
    }
    if (hr_apitoken_is(token))
        return dsp_auth_apitoken(au, token, who, errstr, errlen);
    if (au->jwks != NULL && strchr(token, '.') != NULL)
        return dsp_auth_jwt(au, token, who, errstr, errlen);
    snprintf(errstr, errlen, "a valid 'Authorization: Bearer TOKEN' header is required");
    return DSP_AUTH_UNKNOWN;
}

int dsp_auth_new(const hr_config *cfg, dsp_auth **out, char *errstr, size_t errlen)
{
    dsp_auth *au = calloc(1, sizeof *au);
    size_t n = cfg->dispatcher.api.ntokens;

    *out = NULL;
    if (au == NULL || (au->bootstrap = calloc(n ? n : 1, sizeof *au->bootstrap)) == NULL) {
        free(au);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    au->cfg = cfg;
    pthread_mutex_init(&au->tokens_mu, NULL);
    pthread_mutex_init(&au->jwks_mu, NULL);
    for (size_t i = 0; i < n; i++, au->nbootstrap++)
        if (hr_sign_sha256_hex(cfg->dispatcher.api.tokens[i], strlen(cfg->dispatcher.api.tokens[i]),
                               au->bootstrap[i]) != 0) {
            snprintf(errstr, errlen, "cannot hash the bootstrap tokens");
            goto fail;
        }
    if (hr_config_jwt_on(cfg) && dsp_auth_jwks_load(au, true, errstr, errlen) != 0)
        goto fail;
    *out = au;
    return 0;
fail:
    dsp_auth_free(au);
    return -1;
}

void dsp_auth_free(dsp_auth *au)
{
    if (au == NULL)
        return;
    OPENSSL_cleanse(au->bootstrap, au->nbootstrap * sizeof *au->bootstrap);
    free(au->bootstrap);
    free(au->tokens);
    hr_mysql_free(au->m);
    hr_jwks_free(au->jwks);
    pthread_mutex_destroy(&au->tokens_mu);
    pthread_mutex_destroy(&au->jwks_mu);
    free(au);
}
