/* wk_smtp: MIME message building and SMTP reply classification.
 *
 * The message is built into a private hr_buf and appended to the caller's
 * only when whole.  Header values are checked before anything is written:
 * addresses against a conservative addr-spec alphabet, every free text for
 * CR / LF and valid UTF-8.  Encoded words carry at most 45 bytes of text
 * (60 base64 characters, 75 with the "=?UTF-8?B?" "?=" frame, RFC 2047's
 * limit) and never split a UTF-8 sequence. */
#include "wk_smtp.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hr_base64.h"
#include "hr_template.h" /* hr_utf8_valid */

#define WK_SMTP_ADDR_MAX 254
#define WK_SMTP_MSGID_MAX 128
#define WK_SMTP_URL_MAX 900   /* a header line may hold 998 */
#define WK_SMTP_WORD_BYTES 45 /* text bytes per encoded word */
#define WK_SMTP_PLAIN_MAX 70  /* a longer subject is encoded (and folded) */
#define WK_SMTP_B64_LINE 57   /* bytes per body line: 76 base64 characters */
#define WK_SMTP_PHRASE_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 "
#define WK_SMTP_BOUNDARY "=_herald_alt" /* "=_" never occurs in base64 */

/* An addr-spec herald accepts: local@domain of atext and dots, no quoting,
 * nothing a header or an SMTP command could be bent with. */
static bool wk_smtp_addr_ok(const char *a)
{
    const char *at = a ? strchr(a, '@') : NULL;
    size_t n = a ? strlen(a) : 0;

    if (at == NULL || at == a || at[1] == '\0' || strchr(at + 1, '@') != NULL ||
        n > WK_SMTP_ADDR_MAX)
        return false;
    for (const char *p = a; *p; p++)
        if (!isalnum((unsigned char)*p) && strchr("@.!#$%&'*+/=?^_`{|}~-", *p) == NULL)
            return false;
    return true;
}

/* Free header text: no CR, LF or NUL inside, valid UTF-8. */
static bool wk_smtp_text_ok(const char *s)
{
    return strpbrk(s, "\r\n") == NULL && hr_utf8_valid(s, strlen(s));
}

/* Every byte printable ASCII (space to '~'). */
static bool wk_smtp_ascii(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return false;
    return true;
}

/* Header text that may go out as it is: short printable ASCII that does
 * not look like an encoded word. */
static bool wk_smtp_plain(const char *s, size_t max)
{
    return strlen(s) <= max && strstr(s, "=?") == NULL && wk_smtp_ascii(s);
}

static int wk_smtp_str(hr_buf *b, const char *s)
{
    return hr_buf_append(b, s, strlen(s));
}

/* Appends S as RFC 2047 B-encoded words, folded onto continuation lines. */
static int wk_smtp_words(hr_buf *b, const char *s)
{
    size_t n = strlen(s), i = 0;

    while (i < n) {
        size_t k = n - i < WK_SMTP_WORD_BYTES ? n - i : WK_SMTP_WORD_BYTES;
        /* Back off to the start of a UTF-8 sequence (not a continuation byte). */
        while (i + k < n && k > 0 && ((unsigned char)s[i + k] & 0xc0) == 0x80)
            k--;
        if ((i > 0 && wk_smtp_str(b, "\r\n ") != 0) || wk_smtp_str(b, "=?UTF-8?B?") != 0 ||
            hr_base64_append(b, s + i, k, HR_BASE64_STD) != 0 || wk_smtp_str(b, "?=") != 0)
            return -1;
        i += k;
    }
    return 0;
}

/* Appends header text S as it is when it is short and every byte is
 * printable ASCII (and, when SAFE is not NULL, in SAFE: a display name
 * with anything else would need quoting), else as encoded words. */
static int wk_smtp_text(hr_buf *b, const char *s, const char *safe)
{
    if (wk_smtp_plain(s, WK_SMTP_PLAIN_MAX) && (safe == NULL || strspn(s, safe) == strlen(s)))
        return wk_smtp_str(b, s);
    return wk_smtp_words(b, s);
}

/* "Thu, 26 Nov 2026 16:32:35 +0000", whatever the locale. */
static int wk_smtp_date(hr_buf *b, int64_t now_s)
{
    static const char days[][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = (time_t)now_s;
    struct tm tm;
    char line[64];

    if (gmtime_r(&t, &tm) == NULL)
        return -1;
    snprintf(line, sizeof line, "Date: %s, %02d %s %04d %02d:%02d:%02d +0000\r\n", days[tm.tm_wday],
             tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return wk_smtp_str(b, line);
}

/* Appends one part: its headers, a blank line, S in base64 lines.  Text
 * is encoded in its canonical form (RFC 2045 6.8): bare LFs become CRLF. */
static int wk_smtp_part(hr_buf *b, const char *type, const char *s)
{
    const char *p = s, *nl;
    hr_buf canon;
    int rc = -1;

    hr_buf_init(&canon, b->max);
    for (; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
        bool cr = nl > s && nl[-1] == '\r';
        if (hr_buf_append(&canon, p, (size_t)(nl - p)) != 0 ||
            wk_smtp_str(&canon, cr ? "\n" : "\r\n") != 0)
            goto cleanup;
    }
    if (wk_smtp_str(&canon, p) != 0)
        goto cleanup;
    if (wk_smtp_str(b, "Content-Type: ") != 0 || wk_smtp_str(b, type) != 0 ||
        wk_smtp_str(b, "; charset=UTF-8\r\nContent-Transfer-Encoding: base64\r\n\r\n") != 0)
        goto cleanup;
    for (size_t i = 0; i < canon.len; i += WK_SMTP_B64_LINE) {
        size_t k = canon.len - i < WK_SMTP_B64_LINE ? canon.len - i : WK_SMTP_B64_LINE;
        if (hr_base64_append(b, canon.data + i, k, HR_BASE64_STD) != 0 ||
            wk_smtp_str(b, "\r\n") != 0)
            goto cleanup;
    }
    rc = 0;
cleanup:
    hr_buf_free(&canon);
    return rc;
}

/* Checks M; 0, or -1 with ERRSTR. */
static int wk_smtp_check(const wk_smtp_mail *m, char *errstr, size_t errlen)
{
    const char *u = m->unsubscribe_url;

    if (!wk_smtp_addr_ok(m->from) || !wk_smtp_addr_ok(m->to) ||
        (m->unsubscribe_mailto && !wk_smtp_addr_ok(m->unsubscribe_mailto))) {
        snprintf(errstr, errlen, "smtp: malformed address (from, to or unsubscribe mailto)");
        return -1;
    }
    if (m->subject == NULL || !wk_smtp_text_ok(m->subject) ||
        (m->from_name && !wk_smtp_text_ok(m->from_name))) {
        snprintf(errstr, errlen, "smtp: subject or sender name holds CR/LF or bad UTF-8");
        return -1;
    }
    if (u && (strncmp(u, "https://", 8) != 0 || strlen(u) > WK_SMTP_URL_MAX ||
              strpbrk(u, " <>\"") != NULL || !wk_smtp_ascii(u))) {
        snprintf(errstr, errlen,
                 "smtp: unsubscribe URL must be https, at most %d bytes, "
                 "without spaces, quotes, <, >, CR or LF",
                 WK_SMTP_URL_MAX);
        return -1;
    }
    if (m->message_id == NULL || m->message_id[0] == '\0' ||
        strlen(m->message_id) > WK_SMTP_MSGID_MAX ||
        strspn(m->message_id, WK_SMTP_PHRASE_CHARS "._-") != strlen(m->message_id) ||
        strchr(m->message_id, ' ') != NULL) {
        snprintf(errstr, errlen, "smtp: message id must be 1..%d of [A-Za-z0-9._-]",
                 WK_SMTP_MSGID_MAX);
        return -1;
    }
    if ((m->text == NULL && m->html == NULL) ||
        (m->text && !hr_utf8_valid(m->text, strlen(m->text))) ||
        (m->html && !hr_utf8_valid(m->html, strlen(m->html)))) {
        snprintf(errstr, errlen, "smtp: need a text or an HTML part, in UTF-8");
        return -1;
    }
    return 0;
}

/* Appends the header block (without the blank line) of M to B. */
static int wk_smtp_headers(const wk_smtp_mail *m, hr_buf *b)
{
    const char *domain = strchr(m->from, '@') + 1;
    bool named = m->from_name != NULL && m->from_name[0] != '\0';

    if (wk_smtp_str(b, "From: ") != 0 ||
        (named && wk_smtp_text(b, m->from_name, WK_SMTP_PHRASE_CHARS) != 0))
        return -1;
    if (wk_smtp_str(b, named ? " <" : "<") != 0 || wk_smtp_str(b, m->from) != 0 ||
        wk_smtp_str(b, ">\r\nTo: <") != 0 || wk_smtp_str(b, m->to) != 0 ||
        wk_smtp_str(b, ">\r\nSubject: ") != 0 || wk_smtp_text(b, m->subject, NULL) != 0 ||
        wk_smtp_str(b, "\r\n") != 0 || wk_smtp_date(b, m->now_s) != 0 ||
        wk_smtp_str(b, "Message-ID: <") != 0 || wk_smtp_str(b, m->message_id) != 0 ||
        wk_smtp_str(b, "@") != 0 || wk_smtp_str(b, domain) != 0 ||
        wk_smtp_str(b, ">\r\nMIME-Version: 1.0\r\n") != 0)
        return -1;
    if (m->unsubscribe_url || m->unsubscribe_mailto) {
        if (wk_smtp_str(b, "List-Unsubscribe: ") != 0 ||
            (m->unsubscribe_mailto &&
             (wk_smtp_str(b, "<mailto:") != 0 || wk_smtp_str(b, m->unsubscribe_mailto) != 0 ||
              wk_smtp_str(b, m->unsubscribe_url ? ">,\r\n " : ">") != 0)) ||
            (m->unsubscribe_url &&
             (wk_smtp_str(b, "<") != 0 || wk_smtp_str(b, m->unsubscribe_url) != 0 ||
              wk_smtp_str(b, ">\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click") != 0)) ||
            wk_smtp_str(b, "\r\n") != 0)
            return -1;
    }
    return 0;
}

int wk_smtp_message_build(const wk_smtp_mail *m, hr_buf *out, char *errstr, size_t errlen)
{
    hr_buf b;
    int rc = -1;

    if (wk_smtp_check(m, errstr, errlen) != 0)
        return -1;
    hr_buf_init(&b, out->max - out->len);
    if (wk_smtp_headers(m, &b) != 0)
        goto cap;
    if (m->text && m->html) {
        if (wk_smtp_str(&b, "Content-Type: multipart/alternative; boundary=\"" WK_SMTP_BOUNDARY
                            "\"\r\n\r\n--" WK_SMTP_BOUNDARY "\r\n") != 0 ||
            wk_smtp_part(&b, "text/plain", m->text) != 0 ||
            wk_smtp_str(&b, "--" WK_SMTP_BOUNDARY "\r\n") != 0 ||
            wk_smtp_part(&b, "text/html", m->html) != 0 ||
            wk_smtp_str(&b, "--" WK_SMTP_BOUNDARY "--\r\n") != 0)
            goto cap;
    } else if (wk_smtp_part(&b, m->text ? "text/plain" : "text/html",
                            m->text ? m->text : m->html) != 0) {
        goto cap;
    }
    if (hr_buf_append(out, b.data, b.len) != 0)
        goto cap;
    rc = 0;
    goto cleanup;
cap:
    snprintf(errstr, errlen, "smtp: message over the buffer's cap");
cleanup:
    hr_buf_free(&b);
    return rc;
}

/* The enhanced status code ("5.1.1") at the start of REPLY's text, after
 * the 3-digit code and its separator, into CODE; "" when there is none. */
static void wk_smtp_enhanced(const char *reply, char *code, size_t len)
{
    const char *p = reply;
    size_t n;

    code[0] = '\0';
    if (p == NULL || strspn(p, "0123456789") != 3 || (p[3] != ' ' && p[3] != '-'))
        return;
    p += 4;
    n = strspn(p, "0123456789.");
    /* class "." subject (1..3 digits) "." detail (1..3 digits) */
    if (n < 5 || n >= len || !isdigit((unsigned char)p[0]) || p[1] != '.')
        return;
    memcpy(code, p, n);
    code[n] = '\0';
}

void wk_smtp_classify(long code, const char *reply, wk_provider_result *out)
{
    char enhanced[16];

    wk_smtp_enhanced(reply, enhanced, sizeof enhanced);
    if (code >= 200 && code <= 299)
        wk_provider_set(out, WK_VERDICT_DELIVERED, code, NULL);
    else if (code == 0 || (code >= 400 && code <= 499))
        wk_provider_set(out, WK_VERDICT_RETRY, code, enhanced);
    else if (code >= 500 && code <= 599 &&
             (strcmp(enhanced, "5.1.1") == 0 || strcmp(enhanced, "5.1.10") == 0 ||
              strcmp(enhanced, "5.2.1") == 0))
        wk_provider_set(out, WK_VERDICT_UNREGISTERED, code, enhanced);
    else
        wk_provider_set(out, WK_VERDICT_FAILED, code, enhanced);
}
