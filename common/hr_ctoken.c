/* hr_ctoken: issuing and checking the signed tokens (see hr_ctoken.h).  A
 * token is a prefix, dot-separated fields, the key id and the signature
 * over everything before it; the two kinds share the split, the key
 * lookup, the signature and its constant-time check.  The MAC is
 * hr_sign_hmac's, the encoding hr_base64's URL alphabet. */
#include "hr_ctoken.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_base64.h"
#include "hr_parse.h"
#include "hr_sign.h"

#define HR_CTOKEN_PREFIX "hrc1."
#define HR_UTOKEN_PREFIX "hru1."
#define HR_CTOKEN_EXP_MAX INT64_C(253402300799) /* 9999-12-31T23:59:59Z */
#define HR_UTOKEN_SKEW_S 300 /* an issue time this far ahead is a clock's error, not more */
#define HR_CTOKEN_FIELDS_MAX 6

bool hr_ctoken_is_client(const char *token)
{
    return strncmp(token, HR_CTOKEN_PREFIX, sizeof HR_CTOKEN_PREFIX - 1) == 0;
}

/* The signature of the LEN bytes at MSG under KEY, base64url, into SIG. */
static int hr_ctoken_sign(const hr_client_key *key, const char *msg, size_t len, hr_buf *sig)
{
    unsigned char mac[HR_SIGN_MAC_LEN];

    if (hr_sign_hmac(key->secret, strlen(key->secret), msg, len, mac) < 0)
        return -1;
    return hr_base64_append(sig, mac, sizeof mac, HR_BASE64_URL);
}

/* OUT holds the N bytes of a token's signed part: appends ".<sig>" under
 * KEY within LEN.  0, or -1 with ERRSTR. */
static int hr_ctoken_seal(const hr_client_key *key, char *out, int n, size_t len, char *errstr,
                          size_t errlen)
{
    hr_buf sig;
    int rc = -1;

    hr_buf_init(&sig, 64);
    if (n < 0 || (size_t)n >= len || hr_ctoken_sign(key, out, (size_t)n, &sig) < 0 ||
        (size_t)n + 1 + sig.len >= len) {
        snprintf(errstr, errlen, "token: cannot sign (buffer or OpenSSL)");
        goto done;
    }
    out[n] = '.';
    memcpy(out + n + 1, sig.data, sig.len);
    out[n + 1 + sig.len] = '\0';
    rc = 0;
done:
    hr_buf_free(&sig);
    return rc;
}

int hr_ctoken_issue(const hr_client_key *key, int64_t uid, int64_t exp_s, char *out, size_t len,
                    char *errstr, size_t errlen)
{
    if (uid <= 0 || exp_s <= 0 || exp_s > HR_CTOKEN_EXP_MAX) {
        snprintf(errstr, errlen, "client token: uid and expiry must be positive");
        return -1;
    }
    return hr_ctoken_seal(
        key, out,
        snprintf(out, len, HR_CTOKEN_PREFIX "%" PRId64 ".%" PRId64 ".%s", uid, exp_s, key->id), len,
        errstr, errlen);
}

/* The decimal number in the N bytes at S (1..18 digits, no sign). */
static int hr_ctoken_num(const char *s, size_t n, int64_t *out)
{
    char text[24];

    if (n == 0 || n > 18 || strspn(s, "0123456789") < n)
        return -1;
    memcpy(text, s, n);
    text[n] = '\0';
    *out = strtoll(text, NULL, 10);
    return 0;
}

/* A token of PREFIX split into N fields (the data fields, then the key id,
 * then the signature, which holds no dot): FIELDS[i] and LENS[i].  0, or
 * -1 when it has not that form. */
static int hr_ctoken_split(const char *token, const char *prefix, size_t n, const char **fields,
                           size_t *lens)
{
    const char *p = token + strlen(prefix), *end = NULL;
    size_t nf = 0;

    if (strncmp(token, prefix, strlen(prefix)) != 0)
        return -1;
    for (; nf < n; p = end + 1) {
        fields[nf] = p;
        end = strchr(p, '.');
        lens[nf++] = end != NULL ? (size_t)(end - p) : strlen(p);
        if (end == NULL)
            break;
    }
    return nf == n && end == NULL && lens[n - 1] > 0 ? 0 : -1;
}

/* The key of the NKEYS KEYS whose id is the LEN bytes at KID, or NULL. */
static const hr_client_key *hr_ctoken_key(const char *kid, size_t len, const hr_client_key *keys,
                                          size_t nkeys)
{
    for (size_t i = 0; i < nkeys; i++)
        if (strlen(keys[i].id) == len && memcmp(kid, keys[i].id, len) == 0)
            return &keys[i];
    return NULL;
}

/* Whether SIG (the token's last field, LEN bytes) signs the bytes of TOKEN
 * before it under KEY.  0 yes, -1 with ERRSTR. */
static int hr_ctoken_check(const hr_client_key *key, const char *token, const char *sig, size_t len,
                           char *errstr, size_t errlen)
{
    hr_buf want;
    int rc = -1;

    hr_buf_init(&want, 64);
    if (hr_ctoken_sign(key, token, (size_t)(sig - 1 - token), &want) < 0)
        snprintf(errstr, errlen, "token: cannot compute the signature");
    else if (len != want.len || CRYPTO_memcmp(sig, want.data, want.len) != 0)
        snprintf(errstr, errlen, "bad signature");
    else
        rc = 0;
    hr_buf_free(&want);
    return rc;
}

int hr_ctoken_verify(const char *token, const hr_client_key *keys, size_t nkeys, int64_t now_s,
                     int64_t max_ttl_s, int64_t *uid, char *errstr, size_t errlen)
{
    const char *f[4];
    const hr_client_key *key;
    size_t len[4];
    int64_t exp_s, got;
    char why[64];

    *uid = 0;
    if (strlen(token) >= HR_CTOKEN_MAX || !hr_ctoken_is_client(token)) {
        snprintf(errstr, errlen, "not a client token");
        return -1;
    }
    /* uid, exp, kid, sig */
    if (hr_ctoken_split(token, HR_CTOKEN_PREFIX, 4, f, len) != 0 ||
        hr_parse_uid(f[0], len[0], &got) < 0 || hr_ctoken_num(f[1], len[1], &exp_s) < 0) {
        snprintf(errstr, errlen, "malformed client token");
        return -1;
    }
    if ((key = hr_ctoken_key(f[2], len[2], keys, nkeys)) == NULL) {
        snprintf(errstr, errlen, "client token of an unknown key");
        return -1;
    }
    if (hr_ctoken_check(key, token, f[3], len[3], why, sizeof why) != 0) {
        snprintf(errstr, errlen, "client token: %s", why);
        return -1;
    }
    *uid = got;
    if (exp_s <= now_s) {
        snprintf(errstr, errlen, "client token expired");
        return HR_CTOKEN_EXPIRED;
    }
    if (max_ttl_s > 0 && exp_s - now_s > max_ttl_s) {
        snprintf(errstr, errlen,
                 "client token valid for %" PRId64 " s more; this dispatcher takes at most %" PRId64
                 " s (dispatcher.api.client_token_max_ttl_s)",
                 exp_s - now_s, max_ttl_s);
        return HR_CTOKEN_TOO_LONG;
    }
    return 0;
}

/* ---- unsubscribe tokens -------------------------------------------------------- */

/* A category or channel field: 1..MAX of [a-z0-9_-]. */
static bool hr_ctoken_word(const char *s, size_t len, size_t max)
{
    size_t n = 0;

    while (n < len && strchr("abcdefghijklmnopqrstuvwxyz0123456789_-", s[n]) != NULL && s[n])
        n++;
    return len >= 1 && len <= max && n == len;
}

int hr_ctoken_unsub_issue(const hr_client_key *key, const hr_utoken *u, char *out, size_t len,
                          char *errstr, size_t errlen)
{
    if (u->uid <= 0 || u->iat_s <= 0 || u->iat_s > HR_CTOKEN_EXP_MAX ||
        !hr_ctoken_word(u->category, strlen(u->category), HR_CATEGORY_NAME_MAX) ||
        !hr_ctoken_word(u->channel, strlen(u->channel), sizeof u->channel - 1)) {
        snprintf(errstr, errlen, "unsubscribe token: bad uid, time, category or channel");
        return -1;
    }
    return hr_ctoken_seal(key, out,
                          snprintf(out, len, HR_UTOKEN_PREFIX "%" PRId64 ".%s.%s.%" PRId64 ".%s",
                                   u->uid, u->category, u->channel, u->iat_s, key->id),
                          len, errstr, errlen);
}

int hr_ctoken_unsub_verify(const char *token, const hr_client_key *keys, size_t nkeys,
                           int64_t now_s, int64_t ttl_s, hr_utoken *out, char *errstr,
                           size_t errlen)
{
    const char *f[HR_CTOKEN_FIELDS_MAX];
    const hr_client_key *key;
    size_t len[HR_CTOKEN_FIELDS_MAX];
    hr_utoken u = {0};
    char why[64];

    memset(out, 0, sizeof *out);
    /* uid, category, channel, iat, kid, sig */
    if (strlen(token) >= HR_UTOKEN_MAX ||
        hr_ctoken_split(token, HR_UTOKEN_PREFIX, 6, f, len) != 0 ||
        hr_parse_uid(f[0], len[0], &u.uid) < 0 ||
        !hr_ctoken_word(f[1], len[1], HR_CATEGORY_NAME_MAX) ||
        !hr_ctoken_word(f[2], len[2], sizeof u.channel - 1) ||
        hr_ctoken_num(f[3], len[3], &u.iat_s) < 0) {
        snprintf(errstr, errlen, "malformed unsubscribe token");
        return -1;
    }
    if ((key = hr_ctoken_key(f[4], len[4], keys, nkeys)) == NULL) {
        snprintf(errstr, errlen, "unsubscribe token of an unknown key (rotated out?)");
        return -1;
    }
    if (hr_ctoken_check(key, token, f[5], len[5], why, sizeof why) != 0) {
        snprintf(errstr, errlen, "unsubscribe token: %s", why);
        return -1;
    }
    memcpy(u.category, f[1], len[1]);
    memcpy(u.channel, f[2], len[2]);
    *out = u;
    if (u.iat_s + ttl_s <= now_s || u.iat_s > now_s + HR_UTOKEN_SKEW_S) {
        snprintf(errstr, errlen, "unsubscribe token expired");
        return HR_CTOKEN_EXPIRED;
    }
    return 0;
}
