/* hr_base64: RFC 4648 base64, standard (padded) and URL-safe (unpadded,
 * as JWTs use it), appended to a capped hr_buf.
 *
 * Plain data encoding, no secrets involved: the JWT, webhook-signature and
 * MIME code share it.  Decoding is strict: only the alphabet asked for,
 * padding optional, no whitespace. */
#ifndef HR_BASE64_H
#define HR_BASE64_H

#include <stddef.h>

#include "hr_buf.h"

typedef enum hr_base64_alphabet {
    HR_BASE64_STD, /* A-Z a-z 0-9 + /, '=' padded */
    HR_BASE64_URL, /* A-Z a-z 0-9 - _, no padding */
} hr_base64_alphabet;

/* Length of the encoding of N bytes. */
size_t hr_base64_encoded_len(size_t n, hr_base64_alphabet alpha);
/* Appends the encoding of the N bytes at DATA to OUT; 0, or -1 past OUT's
 * cap (OUT then unchanged). */
int hr_base64_append(hr_buf *out, const void *data, size_t n, hr_base64_alphabet alpha);
/* Decodes the N characters at S into OUT (CAP bytes); *OUTLEN gets the
 * decoded length.  0, or -1 on a character outside ALPHA, a bad length or
 * padding, or more than CAP bytes. */
int hr_base64_decode(const char *s, size_t n, hr_base64_alphabet alpha, unsigned char *out,
                     size_t cap, size_t *outlen);

#endif
