/* hr_base64: RFC 4648 base64 encode and strict decode, standard and
 * URL-safe alphabets.  Encoding goes through a small stack chunk appended
 * to the hr_buf, so the buffer's cap is the only limit. */
#include "hr_base64.h"

#include <stdbool.h>
#include <string.h>

static const char hr_b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char hr_b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t hr_base64_encoded_len(size_t n, hr_base64_alphabet alpha)
{
    if (alpha == HR_BASE64_STD)
        return (n + 2) / 3 * 4;
    return n / 3 * 4 + (n % 3 == 0 ? 0 : n % 3 + 1);
}

/* Encodes the N (1..3) bytes at P as one quad into DST; returns the
 * characters written (4 padded, else N + 1). */
static size_t hr_b64_quad(const unsigned char *p, size_t n, const char *tab, bool pad, char *dst)
{
    unsigned v = (unsigned)p[0] << 16 | (n > 1 ? (unsigned)p[1] << 8 : 0) | (n > 2 ? p[2] : 0);
    size_t k = 0;

    dst[k++] = tab[v >> 18 & 63];
    dst[k++] = tab[v >> 12 & 63];
    if (n > 1)
        dst[k++] = tab[v >> 6 & 63];
    if (n > 2)
        dst[k++] = tab[v & 63];
    while (pad && k < 4)
        dst[k++] = '=';
    return k;
}

int hr_base64_append(hr_buf *out, const void *data, size_t n, hr_base64_alphabet alpha)
{
    const unsigned char *p = data;
    const char *tab = alpha == HR_BASE64_STD ? hr_b64_std : hr_b64_url;
    size_t start = out->len, i = 0;
    char chunk[256];

    if (hr_base64_encoded_len(n, alpha) > out->max - out->len)
        return -1;
    /* 48 input bytes -> 64 characters per pass, appended a chunk at a time. */
    while (i < n) {
        size_t k = 0;
        for (; i < n && k + 4 <= sizeof chunk; i += 3)
            k += hr_b64_quad(p + i, n - i < 3 ? n - i : 3, tab, alpha == HR_BASE64_STD, chunk + k);
        if (hr_buf_append(out, chunk, k) != 0) {
            out->len = start;
            if (out->data != NULL)
                out->data[start] = '\0';
            return -1;
        }
    }
    return 0;
}

/* The 6-bit value of C in ALPHA, or -1. */
static int hr_b64_value(char c, hr_base64_alphabet alpha)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (alpha == HR_BASE64_STD ? '+' : '-'))
        return 62;
    if (c == (alpha == HR_BASE64_STD ? '/' : '_'))
        return 63;
    return -1;
}

int hr_base64_decode(const char *s, size_t n, hr_base64_alphabet alpha, unsigned char *out,
                     size_t cap, size_t *outlen)
{
    unsigned acc = 0;
    int bits = 0;
    size_t o = 0, i;

    /* Padding is optional but, when present, must complete the last quad. */
    if (n % 4 == 0 && n > 0 && s[n - 1] == '=')
        n -= (n > 1 && s[n - 2] == '=') ? 2 : 1;
    if (n % 4 == 1)
        return -1;
    for (i = 0; i < n; i++) {
        int v = hr_b64_value(s[i], alpha);
        if (v < 0)
            return -1;
        acc = (acc << 6 | (unsigned)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o == cap)
                return -1;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    /* The unused low bits of the last character must be zero (canonical). */
    if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
        return -1;
    *outlen = o;
    return 0;
}
