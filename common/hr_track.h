/* hr_track: e-mail engagement links (docs/providers.md "Opens and
 * clicks"): the worker rewrites an e-mail's HTML part so that its links go
 * through the dispatcher's click redirect and an open pixel is loaded with
 * it; the dispatcher's open routes check the signature before they count
 * anything or redirect anywhere.
 *
 *   open    <base>/t/o/<task>.<uid>.<sig>
 *   click   <base>/t/c/<task>.<uid>.<sig>?u=<the original URL, percent-encoded>
 *
 * sig is the unpadded base64url of the first 16 bytes of
 * HMAC-SHA256(events.tracking.key, "o.<task>.<uid>") for an open and
 * "c.<task>.<uid>.<url>" for a click: the URL is signed, so a click link
 * redirects only to the URL herald wrote into that recipient's mail (no
 * open redirect), and a forged or altered link is refused (403) without
 * counting.  Nothing is stored per link. */
#ifndef HR_TRACK_H
#define HR_TRACK_H

#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"

#define HR_TRACK_MAC 16        /* bytes of the HMAC kept */
#define HR_TRACK_SIG 22        /* their base64url characters */
#define HR_TRACK_URL_MAX 2048  /* a link's original URL, at most */
#define HR_TRACK_OPEN "/t/o/"  /* the open pixel's path prefix */
#define HR_TRACK_CLICK "/t/c/" /* the click redirect's path prefix */

typedef enum hr_track_kind {
    HR_TRACK_OPENED, /* the pixel */
    HR_TRACK_CLICKED /* a link */
} hr_track_kind;

/* Appends the token "<task>.<uid>.<sig>" of KIND for (TASK, UID, URL; URL
 * only for a click) under KEY to OUT.  0, or -1 past OUT's cap or when
 * the HMAC fails. */
int hr_track_token(const char *key, hr_track_kind kind, int64_t task, uint64_t uid, const char *url,
                   hr_buf *out);

/* Checks TOKEN (a path segment) of KIND, and for a click URL (the decoded
 * u= argument): 0 with *TASK and *UID, or -1 with ERRSTR (malformed, a URL
 * that is no http(s) URL or too long, a wrong signature: compared in
 * constant time, never shown). */
int hr_track_verify(const char *key, hr_track_kind kind, const char *token, const char *url,
                    int64_t *task, uint64_t *uid, char *errstr, size_t errlen);

/* Appends the LEN bytes of HTML to OUT with every link to an http(s) URL
 * (an href="..." or href='...' attribute) rewritten to its click link, but
 * those under BASE (herald's own pages), and the open pixel before
 * </body> (or at the end).  The URL signed is the attribute's value with
 * the entities hr_html_escape_append writes decoded: what a browser
 * follows.  0, or -1 past OUT's cap (OUT then unchanged). */
int hr_track_rewrite(const char *base, const char *key, int64_t task, uint64_t uid,
                     const char *html, size_t len, hr_buf *out);

#endif
