/* hr_wpsub: web push subscriptions as addresses (see hr_wpsub.h).  The
 * keys are decoded with hr_base64 and the p256dh point checked with
 * hr_jwt_p256_point (OpenSSL refuses a point off the curve), so a
 * subscription the worker could not encrypt to is refused at insert. */
#include "hr_wpsub.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "hr_base64.h"

/* An https:// URL with a host, no space or control byte, N bytes at S. */
static bool hr_wpsub_endpoint_ok(const char *s, size_t n)
{
    if (n <= 8 || strncasecmp(s, "https://", 8) != 0 || s[8] == '/')
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

/* Decodes the N base64url characters at S into exactly LEN bytes at OUT. */
static bool hr_wpsub_key(const char *s, size_t n, unsigned char *out, size_t len)
{
    size_t got = 0;

    return hr_base64_decode(s, n, HR_BASE64_URL, out, len, &got) == 0 && got == len;
}

/* Checks the parts of a subscription (ENDPOINT of ELEN bytes, the keys'
 * texts P256DH and AUTH of PLEN and ALEN bytes) into *OUT; with CURVE,
 * that the p256dh point is on P-256 too. */
static int hr_wpsub_check(const char *endpoint, size_t elen, const char *p256dh, size_t plen,
                          const char *auth, size_t alen, bool curve, hr_wpsub *out, char *errstr,
                          size_t errlen)
{
    EVP_PKEY *pkey = NULL;
    char why[160];

    if (!hr_wpsub_endpoint_ok(endpoint, elen)) {
        snprintf(errstr, errlen,
                 "endpoint: a web push endpoint is an https:// URL with a host "
                 "and no spaces");
        return -1;
    }
    if (!hr_wpsub_key(p256dh, plen, out->p256dh, sizeof out->p256dh) || out->p256dh[0] != 0x04) {
        snprintf(errstr, errlen,
                 "keys.p256dh: not a base64url uncompressed P-256 point "
                 "(65 bytes)");
        return -1;
    }
    if (!hr_wpsub_key(auth, alen, out->auth, sizeof out->auth)) {
        snprintf(errstr, errlen, "keys.auth: not a base64url secret of %d bytes", HR_WPSUB_AUTH);
        return -1;
    }
    if (curve && hr_jwt_p256_point(out->p256dh, &pkey, why, sizeof why) != 0) {
        snprintf(errstr, errlen, "keys.p256dh: not a point on P-256");
        return -1;
    }
    EVP_PKEY_free(pkey);
    out->endpoint = endpoint;
    out->endpoint_len = elen;
    return 0;
}

/* hr_wpsub_parse and hr_wpsub_split: CURVE says whether to check the
 * point. */
static int hr_wpsub_read(const char *address, bool curve, hr_wpsub *out, char *errstr,
                         size_t errlen)
{
    const char *hash = strrchr(address, '#'), *dot;

    dot = hash != NULL ? strchr(hash + 1, '.') : NULL;
    if (dot == NULL) {
        snprintf(errstr, errlen,
                 "address: a webpush address is <endpoint>#<p256dh>.<auth> "
                 "(or give the PushSubscription JSON)");
        return -1;
    }
    return hr_wpsub_check(address, (size_t)(hash - address), hash + 1, (size_t)(dot - hash - 1),
                          dot + 1, strlen(dot + 1), curve, out, errstr, errlen);
}

int hr_wpsub_parse(const char *address, hr_wpsub *out, char *errstr, size_t errlen)
{
    return hr_wpsub_read(address, true, out, errstr, errlen);
}

int hr_wpsub_split(const char *address, hr_wpsub *out, char *errstr, size_t errlen)
{
    return hr_wpsub_read(address, false, out, errstr, errlen);
}

int hr_wpsub_from_json(const cJSON *sub, hr_buf *out, char *errstr, size_t errlen)
{
    const cJSON *endpoint = cJSON_GetObjectItemCaseSensitive(sub, "endpoint");
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(sub, "keys");
    const cJSON *p256dh = cJSON_GetObjectItemCaseSensitive(keys, "p256dh");
    const cJSON *auth = cJSON_GetObjectItemCaseSensitive(keys, "auth");
    size_t before = out->len, elen, plen, alen;
    hr_wpsub ws;

    if (!cJSON_IsString(endpoint) || !cJSON_IsString(p256dh) || !cJSON_IsString(auth)) {
        snprintf(errstr, errlen,
                 "a PushSubscription has the strings endpoint, keys.p256dh and "
                 "keys.auth");
        return -1;
    }
    elen = strlen(endpoint->valuestring);
    plen = strlen(p256dh->valuestring);
    alen = strlen(auth->valuestring);
    if (hr_wpsub_check(endpoint->valuestring, elen, p256dh->valuestring, plen, auth->valuestring,
                       alen, true, &ws, errstr, errlen) != 0)
        return -1;
    if (hr_buf_append(out, endpoint->valuestring, elen) != 0 || hr_buf_append(out, "#", 1) != 0 ||
        hr_buf_append(out, p256dh->valuestring, plen) != 0 || hr_buf_append(out, ".", 1) != 0 ||
        hr_buf_append(out, auth->valuestring, alen) != 0) {
        hr_buf_truncate(out, before);
        snprintf(errstr, errlen, "subscription over the buffer's cap");
        return -1;
    }
    return 0;
}
