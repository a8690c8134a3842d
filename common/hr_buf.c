/* hr_buf: the growable output buffer with a hard cap chosen by its owner,
 * which every renderer, signer and encoder writes into (curl's dynbuf is the
 * model: a peer can make it grow, never past the cap).
 *
 * The data is kept NUL-terminated (the terminator is not counted in len and
 * does not count against max), so a rendering can be handed to C string APIs
 * as is.  The owner frees it with hr_buf_free. */
#include "hr_buf.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void hr_buf_init(hr_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void hr_buf_reset(hr_buf *b)
{
    hr_buf_truncate(b, 0);
}

void hr_buf_truncate(hr_buf *b, size_t len)
{
    b->len = len;
    if (b->data != NULL)
        b->data[len] = '\0';
}

void hr_buf_free(hr_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

/* Makes room for N more bytes (plus the terminator); -1 past max or on
 * allocation failure, the buffer then unchanged. */
static int hr_buf_reserve(hr_buf *b, size_t n)
{
    if (n > b->max - b->len)
        return -1;
    size_t need = b->len + n;
    if (need <= b->cap && b->data != NULL)
        return 0;
    size_t cap = b->cap < 256 ? 256 : b->cap;
    while (cap < need)
        cap = cap > SIZE_MAX / 4 ? need : cap * 2;
    if (cap > b->max)
        cap = b->max;
    char *data = realloc(b->data, cap + 1);
    if (data == NULL)
        return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

int hr_buf_append(hr_buf *b, const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (hr_buf_reserve(b, n) != 0)
        return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

/* U in decimal, after a minus sign when MINUS, into OUT; its length.  Two
 * digits a division, written in place from the end once the length is
 * known: the events encoder (hr_event) writes six numbers a push. */
static size_t hr_buf_digits(uint64_t u, bool minus, char out[HR_BUF_I64_MAX])
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                   "25262728293031323334353637383940414243444546474849"
                                   "50515253545556575859606162636465666768697071727374"
                                   "75767778798081828384858687888990919293949596979899";
    static const uint64_t tens[20] = {1u,
                                      10u,
                                      100u,
                                      1000u,
                                      10000u,
                                      100000u,
                                      1000000u,
                                      10000000u,
                                      100000000u,
                                      1000000000u,
                                      10000000000u,
                                      100000000000u,
                                      1000000000000u,
                                      10000000000000u,
                                      100000000000000u,
                                      1000000000000000u,
                                      10000000000000000u,
                                      100000000000000000u,
                                      1000000000000000000u,
                                      10000000000000000000u};
    size_t len = 1, n;

    while (len < 20 && u >= tens[len])
        len++;
    if (minus)
        *out++ = '-';
    out[len] = '\0';
    n = len;
    while (u >= 100) {
        unsigned d = (unsigned)(u % 100) * 2;

        u /= 100;
        out[--n] = pairs[d + 1];
        out[--n] = pairs[d];
    }
    if (u >= 10) {
        out[--n] = pairs[u * 2 + 1];
        out[--n] = pairs[u * 2];
    } else {
        out[--n] = (char)('0' + u);
    }
    return len + (minus ? 1 : 0);
}

size_t hr_buf_i64(int64_t v, char out[HR_BUF_I64_MAX])
{
    /* Through uint64_t, so INT64_MIN negates without overflow. */
    return hr_buf_digits(v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0, out);
}

int hr_buf_append_i64(hr_buf *b, int64_t v)
{
    char text[HR_BUF_I64_MAX];

    return hr_buf_append(b, text, hr_buf_i64(v, text));
}

int hr_buf_append_u64(hr_buf *b, uint64_t v)
{
    char text[HR_BUF_I64_MAX]; /* UINT64_MAX has 20 digits too */

    return hr_buf_append(b, text, hr_buf_digits(v, false, text));
}
