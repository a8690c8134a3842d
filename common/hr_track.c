/* hr_track: the signed open and click links of an e-mail (see
 * hr_track.h).  The rewrite is a single pass over the HTML that copies it
 * and replaces href values; it parses no more HTML than an attribute needs,
 * which is all a mail client's link is. */
#include "hr_track.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "hr_base64.h"
#include "hr_parse.h"
#include "hr_sign.h"
#include "hr_template.h"

/* Appends the signature of KIND for (TASK, UID, URL) to OUT. */
static int hr_track_sig(const char *key, hr_track_kind kind, int64_t task, uint64_t uid,
                        const char *url, hr_buf *out)
{
    unsigned char mac[HR_SIGN_MAC_LEN];
    hr_buf msg;
    char head[64];
    int n = snprintf(head, sizeof head, "%c.%" PRId64 ".%" PRIu64,
                     kind == HR_TRACK_OPENED ? 'o' : 'c', task, uid);
    int rc = -1;

    hr_buf_init(&msg, 64 + HR_TRACK_URL_MAX + 2);
    if (hr_buf_append(&msg, head, (size_t)n) < 0 ||
        (kind == HR_TRACK_CLICKED &&
         (hr_buf_append(&msg, ".", 1) < 0 || hr_buf_append(&msg, url, strlen(url)) < 0)))
        goto done;
    if (hr_sign_hmac(key, strlen(key), msg.data, msg.len, mac) < 0)
        goto done;
    rc = hr_base64_append(out, mac, HR_TRACK_MAC, HR_BASE64_URL);
done:
    hr_buf_free(&msg);
    return rc;
}

int hr_track_token(const char *key, hr_track_kind kind, int64_t task, uint64_t uid, const char *url,
                   hr_buf *out)
{
    size_t start = out->len;
    char head[48];
    int n = snprintf(head, sizeof head, "%" PRId64 ".%" PRIu64 ".", task, uid);

    if (hr_buf_append(out, head, (size_t)n) < 0 ||
        hr_track_sig(key, kind, task, uid, url, out) < 0) {
        hr_buf_truncate(out, start);
        return -1;
    }
    return 0;
}

/* Whether the N bytes at S are an http(s) URL (case-insensitive scheme)
 * without a space or control byte: nothing a Location header could be
 * split by. */
static bool hr_track_is_http(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f)
            return false;
    return (n > 7 && strncasecmp(s, "http://", 7) == 0) ||
           (n > 8 && strncasecmp(s, "https://", 8) == 0);
}

int hr_track_verify(const char *key, hr_track_kind kind, const char *token, const char *url,
                    int64_t *task, uint64_t *uid, char *errstr, size_t errlen)
{
    const char *dot1 = strchr(token, '.'), *dot2 = dot1 != NULL ? strchr(dot1 + 1, '.') : NULL;
    int64_t t, u;
    hr_buf want;
    int rc = -1;

    if (dot1 == NULL || dot2 == NULL || strlen(dot2 + 1) != HR_TRACK_SIG ||
        hr_parse_uid(token, (size_t)(dot1 - token), &t) < 0 ||
        hr_parse_uid(dot1 + 1, (size_t)(dot2 - dot1 - 1), &u) < 0) {
        snprintf(errstr, errlen, "a malformed link");
        return -1;
    }
    if (kind == HR_TRACK_CLICKED &&
        (url == NULL || strlen(url) > HR_TRACK_URL_MAX || !hr_track_is_http(url, strlen(url)))) {
        snprintf(errstr, errlen, "the link's target is missing or is no http(s) URL");
        return -1;
    }
    hr_buf_init(&want, HR_TRACK_SIG + 1);
    if (hr_track_sig(key, kind, t, (uint64_t)u, url, &want) < 0 || want.len != HR_TRACK_SIG) {
        snprintf(errstr, errlen, "the signature cannot be computed");
        goto done;
    }
    if (CRYPTO_memcmp(want.data, dot2 + 1, HR_TRACK_SIG) != 0) {
        snprintf(errstr, errlen, "the link's signature does not match");
        goto done;
    }
    *task = t;
    *uid = (uint64_t)u;
    rc = 0;
done:
    hr_buf_free(&want);
    return rc;
}

/* The N bytes at S with the entities hr_html_escape_append writes decoded,
 * into OUT (reset first).  -1 past OUT's cap. */
static int hr_track_unescape(const char *s, size_t n, hr_buf *out)
{
    static const struct {
        const char *entity;
        char c;
    } entities[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''}};

    hr_buf_reset(out);
    for (size_t i = 0; i < n; i++) {
        size_t k = 0, len = 0;

        if (s[i] == '&')
            for (k = 0; k < sizeof entities / sizeof entities[0]; k++) {
                len = strlen(entities[k].entity);
                if (n - i >= len && memcmp(s + i, entities[k].entity, len) == 0)
                    break;
            }
        if (s[i] == '&' && k < sizeof entities / sizeof entities[0]) {
            if (hr_buf_append(out, &entities[k].c, 1) < 0)
                return -1;
            i += len - 1;
        } else if (hr_buf_append(out, s + i, 1) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Appends the link of KIND (with URL for a click) to OUT: BASE, the path,
 * the token, and for a click ?u= and the URL percent-encoded. */
static int hr_track_link(const char *base, const char *key, hr_track_kind kind, int64_t task,
                         uint64_t uid, const char *url, hr_buf *out)
{
    const char *path = kind == HR_TRACK_OPENED ? HR_TRACK_OPEN : HR_TRACK_CLICK;
    size_t blen = strlen(base);

    /* A base written with a trailing slash has it once. */
    while (blen > 0 && base[blen - 1] == '/')
        blen--;
    if (hr_html_escape_append(out, base, blen) < 0 || hr_buf_append(out, path, strlen(path)) < 0 ||
        hr_track_token(key, kind, task, uid, url, out) < 0)
        return -1;
    return kind == HR_TRACK_CLICKED && (hr_buf_append(out, "?u=", 3) < 0 ||
                                        hr_url_escape_append(out, url, strlen(url)) < 0)
               ? -1
               : 0;
}

/* Where the href attribute value after I starts: the index of its opening
 * quote, or 0 when HTML[I..] is no ` href=` / ` href = ` followed by a
 * quote. */
static size_t hr_track_href(const char *html, size_t len, size_t i)
{
    size_t j = i + 4;

    if (i == 0 || len - i < 6 || strncasecmp(html + i, "href", 4) != 0 ||
        strchr(" \t\r\n", html[i - 1]) == NULL)
        return 0;
    while (j < len && strchr(" \t\r\n", html[j]) != NULL)
        j++;
    if (j >= len || html[j] != '=')
        return 0;
    for (j++; j < len && strchr(" \t\r\n", html[j]) != NULL; j++)
        ;
    return j < len && (html[j] == '"' || html[j] == '\'') ? j : 0;
}

/* The place of the last "</body" (case-insensitive) in HTML, or LEN. */
static size_t hr_track_body_end(const char *html, size_t len)
{
    for (size_t i = len; i >= 6; i--)
        if (strncasecmp(html + i - 6, "</body", 6) == 0)
            return i - 6;
    return len;
}

int hr_track_rewrite(const char *base, const char *key, int64_t task, uint64_t uid,
                     const char *html, size_t len, hr_buf *out)
{
    static const char img[] = "<img src=\"",
                      img_end[] = "\" width=\"1\" height=\"1\" alt=\"\" style=\"display:none\">";
    size_t start = out->len, body_end = hr_track_body_end(html, len), blen = strlen(base);
    size_t i = 0, copied = 0;
    hr_buf url;
    int rc = -1;

    hr_buf_init(&url, HR_TRACK_URL_MAX + 1);
    while (i < len) {
        size_t q = hr_track_href(html, len, i), end;
        const char *close;

        if (q == 0 || (close = memchr(html + q + 1, html[q], len - q - 1)) == NULL) {
            i++;
            continue;
        }
        end = (size_t)(close - html);
        if (hr_track_unescape(html + q + 1, end - q - 1, &url) == 0 && url.data != NULL &&
            hr_track_is_http(url.data, url.len) && strlen(url.data) == url.len &&
            strncmp(url.data, base, blen) != 0) {
            if (hr_buf_append(out, html + copied, q + 1 - copied) < 0 ||
                hr_track_link(base, key, HR_TRACK_CLICKED, task, uid, url.data, out) < 0)
                goto done;
            copied = end;
        }
        i = end + 1;
    }
    if (body_end < copied)
        body_end = copied;
    if (hr_buf_append(out, html + copied, body_end - copied) < 0 ||
        hr_buf_append(out, img, sizeof img - 1) < 0 ||
        hr_track_link(base, key, HR_TRACK_OPENED, task, uid, NULL, out) < 0 ||
        hr_buf_append(out, img_end, sizeof img_end - 1) < 0 ||
        hr_buf_append(out, html + body_end, len - body_end) < 0)
        goto done;
    rc = 0;
done:
    if (rc != 0)
        hr_buf_truncate(out, start);
    hr_buf_free(&url);
    return rc;
}
