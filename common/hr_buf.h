/* hr_buf: a growable output buffer with a hard cap chosen by its owner;
 * its data stays NUL-terminated.  See hr_buf.c. */
#ifndef HR_BUF_H
#define HR_BUF_H

#include <stddef.h>
#include <stdint.h>

/* A growable output buffer with a hard cap chosen by its owner. */
typedef struct hr_buf {
    char *data;
    size_t len, cap, max; /* max: the most it may grow to */
} hr_buf;

void hr_buf_init(hr_buf *b, size_t max);
void hr_buf_reset(hr_buf *b);
/* Back to its first LEN bytes (LEN <= b->len): how an encoder undoes a
 * partial append that ran into the cap. */
void hr_buf_truncate(hr_buf *b, size_t len);
void hr_buf_free(hr_buf *b);
/* 0, or -1 when the cap would be exceeded (the buffer is then unchanged). */
int hr_buf_append(hr_buf *b, const char *s, size_t n);

/* Appends V in decimal.  0, or -1 past the cap (B unchanged). */
int hr_buf_append_i64(hr_buf *b, int64_t v);
/* The same for an unsigned value. */
int hr_buf_append_u64(hr_buf *b, uint64_t v);

/* Writes V in decimal into OUT, NUL-terminated, and returns its length:
 * the digits of hr_buf_append_i64 for a caller without an hr_buf (a
 * header line, a reason), printf's machinery left out. */
#define HR_BUF_I64_MAX 21 /* "-9223372036854775808" and its NUL */
size_t hr_buf_i64(int64_t v, char out[HR_BUF_I64_MAX]);

#endif
