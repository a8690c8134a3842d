/* hr_ctoken: issuing and checking client tokens (see hr_ctoken.h).  The
 * MAC is hr_sign_hmac's, the encoding hr_base64's URL alphabet. */
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
#define HR_CTOKEN_EXP_MAX INT64_C(253402300799) /* 9999-12-31T23:59:59Z */

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

int hr_ctoken_issue(const hr_client_key *key, int64_t uid, int64_t exp_s, char *out, size_t len,
                    char *errstr, size_t errlen)
{
    hr_buf sig;
    int n, rc = -1;

    if (uid <= 0 || exp_s <= 0 || exp_s > HR_CTOKEN_EXP_MAX) {
        snprintf(errstr, errlen, "client token: uid and expiry must be positive");
        return -1;
    }
    n = snprintf(out, len, HR_CTOKEN_PREFIX "%" PRId64 ".%" PRId64 ".%s", uid, exp_s, key->id);
    hr_buf_init(&sig, 64);
    if (n < 0 || (size_t)n >= len || hr_ctoken_sign(key, out, (size_t)n, &sig) < 0 ||
        (size_t)n + 1 + sig.len >= len) {
        snprintf(errstr, errlen, "client token: cannot sign (buffer or OpenSSL)");
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

int hr_ctoken_verify(const char *token, const hr_client_key *keys, size_t nkeys, int64_t now_s,
                     int64_t max_ttl_s, int64_t *uid, char *errstr, size_t errlen)
{
    const char *fields[4], *p, *end;
    const hr_client_key *key = NULL;
    size_t tlen = strlen(token), nf = 0, i;
    int64_t exp_s;
    hr_buf want;
    int rc = -1;

    *uid = 0;
    if (tlen >= HR_CTOKEN_MAX || !hr_ctoken_is_client(token)) {
        snprintf(errstr, errlen, "not a client token");
        return -1;
    }
    /* uid, exp, kid, sig: four fields after the prefix. */
    for (p = token + sizeof HR_CTOKEN_PREFIX - 1; nf < 4; p = end + 1) {
        fields[nf++] = p;
        end = strchr(p, '.');
        if (end == NULL)
            break;
    }
    if (nf != 4 || strchr(fields[3], '.') != NULL ||
        hr_parse_uid(fields[0], (size_t)(fields[1] - fields[0] - 1), uid) < 0 ||
        hr_ctoken_num(fields[1], (size_t)(fields[2] - fields[1] - 1), &exp_s) < 0) {
        *uid = 0;
        snprintf(errstr, errlen, "malformed client token");
        return -1;
    }
    for (i = 0; i < nkeys && key == NULL; i++) {
        size_t idlen = strlen(keys[i].id);

        if ((size_t)(fields[3] - fields[2] - 1) == idlen &&
            memcmp(fields[2], keys[i].id, idlen) == 0)
            key = &keys[i];
    }
    if (key == NULL) {
        *uid = 0;
        snprintf(errstr, errlen, "client token of an unknown key");
        return -1;
    }
    hr_buf_init(&want, 64);
    if (hr_ctoken_sign(key, token, (size_t)(fields[3] - 1 - token), &want) < 0) {
        snprintf(errstr, errlen, "client token: cannot compute the signature");
    } else if (strlen(fields[3]) != want.len ||
               CRYPTO_memcmp(fields[3], want.data, want.len) != 0) {
        snprintf(errstr, errlen, "client token: bad signature");
    } else if (exp_s <= now_s) {
        snprintf(errstr, errlen, "client token expired");
        rc = HR_CTOKEN_EXPIRED;
    } else if (max_ttl_s > 0 && exp_s - now_s > max_ttl_s) {
        snprintf(errstr, errlen,
                 "client token valid for %" PRId64 " s more; this dispatcher takes at most %" PRId64
                 " s (dispatcher.api.client_token_max_ttl_s)",
                 exp_s - now_s, max_ttl_s);
        rc = HR_CTOKEN_TOO_LONG;
    } else {
        rc = 0;
    }
    if (rc != 0 && rc != HR_CTOKEN_EXPIRED && rc != HR_CTOKEN_TOO_LONG)
        *uid = 0;
    hr_buf_free(&want);
    return rc;
}
