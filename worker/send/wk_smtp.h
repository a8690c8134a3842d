/* wk_smtp: e-mail as pure functions: the RFC 5322 / MIME message one
 * recipient gets, and what an SMTP server's reply means (the SMTP session
 * itself is the sender's, over libcurl).
 *
 * The message: From (display name RFC 2047-encoded when not plain ASCII),
 * To, Subject (RFC 2047 "=?UTF-8?B?..?=" words, folded, when not short
 * plain ASCII), Date, Message-ID (given: stable per task, recipient and
 * address, so a resent chunk repeats it and receivers can dedupe),
 * MIME-Version, List-Unsubscribe (mailto and/or https) with
 * List-Unsubscribe-Post: List-Unsubscribe=One-Click (RFC 8058) when an
 * https URL is given, and a text part, an HTML part, or both as
 * multipart/alternative, each UTF-8 in base64 (lines of 76).  Any header
 * value holding CR or LF is refused, never cleaned up: it is a header
 * injection attempt or a bug upstream.
 *
 * The reply: 2xx delivered; 4xx retry; 5xx fails for good, except the
 * enhanced codes saying the address itself is dead — 5.1.1 (no such
 * mailbox), 5.1.10 (the domain takes no mail), 5.2.1 (mailbox disabled) —
 * which mean unregistered (prune the address); no reply at all (code 0)
 * retries. */
#ifndef WK_SMTP_H
#define WK_SMTP_H

#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"
#include "wk_provider.h"

typedef struct wk_smtp_mail {
    const char *from;               /* addr-spec: local@domain */
    const char *from_name;          /* display name (UTF-8), or NULL */
    const char *to;                 /* addr-spec */
    const char *subject;            /* UTF-8 */
    const char *text;               /* the text/plain part, or NULL */
    const char *html;               /* the text/html part, or NULL (not both NULL) */
    const char *unsubscribe_url;    /* https URL, or NULL */
    const char *unsubscribe_mailto; /* addr-spec, or NULL */
    const char *message_id;         /* left of the '@' in Message-ID: [A-Za-z0-9._-]{1,128} */
    int64_t now_s;                  /* the Date header */
} wk_smtp_mail;

/* Appends the message for M (CRLF line ends, ready for DATA) to OUT.  0,
 * or -1 with ERRSTR (a CR/LF in a header value, a malformed address,
 * message id or URL, invalid UTF-8, no part, over OUT's cap); OUT is
 * unchanged on failure. */
int wk_smtp_message_build(const wk_smtp_mail *m, hr_buf *out, char *errstr, size_t errlen);

/* Classifies the server's last reply: CODE (0 when none came) and its
 * text REPLY (e.g. "550 5.1.1 <a@b>: user unknown"; may be NULL). */
void wk_smtp_classify(long code, const char *reply, wk_provider_result *out);

#endif
