/* fuzz_template: compile and render arbitrary templates.
 *
 * Input: byte 0 picks the mode (bit 0: escape json; else bit 1: escape
 * html; else raw), the rest is the template source.  A template that
 * compiles is rendered with a lookup whose values are derived from the
 * variable's kind and name (any byte, invalid UTF-8 included, some
 * variables missing) into an hr_buf whose cap is small enough to be hit.
 * Checks: the buffer never passes its cap, a failed render leaves the
 * buffer as it was; when the source names no {{raw ...}} variable: with
 * JSON escaping and literals of plain JSON-safe ASCII, the whole output is
 * valid JSON string content (no raw control bytes, quotes and backslashes
 * escaped, valid UTF-8), and with HTML escaping and literals free of
 * & < > " ', the output has none of < > " ' and every & starts one of the
 * five entities. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_template.h"

#define FT_OUT_MAX 1024
#define FT_PREFIX "prefix:"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct ft_ctx {
    char value[300];
    size_t nulls; /* variables the lookup said were missing */
} ft_ctx;

/* FNV-1a of KIND and NAME: the seed of the variable's value. */
static uint32_t ft_hash(hr_tvar_kind kind, const char *name)
{
    uint32_t h = 2166136261u ^ (uint32_t)kind;

    for (; *name != '\0'; name++)
        h = (h ^ (unsigned char)*name) * 16777619u;
    return h;
}

/* One variable in eight is missing; the others get 0..299 bytes from a
 * generator seeded by the name, biased towards the bytes escaping must
 * handle (controls, quote, backslash, lone UTF-8 lead and continuation
 * bytes) and towards valid multi-byte sequences. */
static const char *ft_lookup(void *ctx, hr_tvar_kind kind, const char *name, size_t *len)
{
    static const char *const pieces[] = {"\"",
                                         "\\",
                                         "\n",
                                         "\x01",
                                         "\x1f",
                                         "\x7f",
                                         "\xC3\xA9",
                                         "\xE2\x82\xAC",
                                         "\xF0\x9F\x98\x80",
                                         "\xC3",
                                         "\x80",
                                         "\xED\xA0\x80",
                                         "\xF4\x90\x80\x80",
                                         "\xC0\xAF",
                                         "a",
                                         "{{",
                                         "}}"};
    ft_ctx *c = ctx;
    uint32_t h = ft_hash(kind, name);
    size_t n = 0, want;

    if (h % 8 == 0) {
        c->nulls++;
        return NULL;
    }
    want = (h >> 3) % sizeof c->value;
    while (n < want) {
        h = h * 1103515245u + 12345u;
        if ((h >> 16) % 2 == 0) {
            c->value[n++] = (char)(h >> 24);
        } else {
            const char *p = pieces[(h >> 17) % (sizeof pieces / sizeof pieces[0])];
            size_t plen = strlen(p);
            if (n + plen > want)
                break;
            memcpy(c->value + n, p, plen);
            n += plen;
        }
    }
    *len = n;
    return c->value;
}

/* Length of the UTF-8 sequence at P (at most N bytes), 0 when invalid:
 * overlong forms, surrogates and code points past U+10FFFF are invalid. */
static size_t ft_utf8_len(const unsigned char *p, size_t n)
{
    uint32_t cp;
    size_t len, i;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        len = 2, cp = p[0] & 0x1F;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF)
        len = 3, cp = p[0] & 0x0F;
    else if (p[0] >= 0xF0 && p[0] <= 0xF4)
        len = 4, cp = p[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

static bool ft_is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* True when S (N bytes) may stand between the quotes of a JSON string. */
static bool ft_json_content(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, k;

    while (i < n) {
        if (p[i] < 0x20 || p[i] == '"')
            return false;
        if (p[i] == '\\') {
            if (i + 1 >= n)
                return false;
            if (p[i + 1] == 'u') {
                if (i + 6 > n)
                    return false;
                for (k = 2; k < 6; k++)
                    if (!ft_is_hex(p[i + k]))
                        return false;
                i += 6;
            } else if (p[i + 1] != '\0' && strchr("\"\\/bfnrt", p[i + 1]) != NULL) {
                i += 2;
            } else {
                return false;
            }
            continue;
        }
        k = ft_utf8_len(p + i, n - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

/* True when every byte of SRC is printable ASCII other than '"' and '\\':
 * then the literals need no escaping and the output can be checked whole. */
static bool ft_plain_source(const uint8_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (src[i] < 0x20 || src[i] >= 0x7f || src[i] == '"' || src[i] == '\\')
            return false;
    return true;
}

/* True when S (N bytes) holds no < > " ' and each & starts &amp; &lt;
 * &gt; &quot; or &#39;: what HTML escaping makes of any value. */
static bool ft_html_content(const char *s, size_t n)
{
    static const char *const entities[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};

    for (size_t i = 0; i < n; i++) {
        if (s[i] == '<' || s[i] == '>' || s[i] == '"' || s[i] == '\'')
            return false;
        if (s[i] != '&')
            continue;
        bool known = false;
        for (size_t k = 0; k < sizeof entities / sizeof entities[0] && !known; k++)
            known = n - i >= strlen(entities[k]) &&
                    memcmp(s + i, entities[k], strlen(entities[k])) == 0;
        if (!known)
            return false;
    }
    return true;
}

/* True when the N bytes at SRC hold none of the bytes of SET. */
static bool ft_lacks(const uint8_t *src, size_t n, const char *set)
{
    for (size_t i = 0; i < n; i++)
        if (src[i] == '\0' || strchr(set, src[i]) != NULL)
            return false;
    return true;
}

/* True when the source may name a {{raw ...}} variable (any "raw": a
 * superset, so the escaping checks skip only what they must). */
static bool ft_may_be_raw(const uint8_t *src, size_t n)
{
    return memmem(src, n, "raw", 3) != NULL;
}

static void ft_fail(const char *what, const hr_buf *out)
{
    fprintf(stderr, "fuzz_template: %s (len=%zu max=%zu)\n", what, out->len, out->max);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hr_template *t = NULL;
    ft_ctx ctx = {.nulls = 0};
    hr_buf out;
    char err[256] = "";
    size_t missing = 0, plen = strlen(FT_PREFIX);
    hr_template_escape mode;
    int rc;

    if (size < 1)
        return 0;
    mode = (data[0] & 1) != 0   ? HR_TEMPLATE_JSON
           : (data[0] & 2) != 0 ? HR_TEMPLATE_HTML
                                : HR_TEMPLATE_RAW;
    if (hr_template_compile_escape((const char *)data + 1, size - 1, mode, &t, err, sizeof err) <
        0) {
        if (t != NULL || err[0] == '\0') {
            fprintf(stderr, "fuzz_template: failed compile left a template or no reason\n");
            abort();
        }
        return 0;
    }
    hr_buf_init(&out, FT_OUT_MAX);
    if (hr_buf_append(&out, FT_PREFIX, plen) != 0)
        ft_fail("prefix does not fit", &out);
    rc = hr_template_render(t, ft_lookup, &ctx, &out, &missing);
    if (out.len > out.max)
        ft_fail("output past the cap", &out);
    if (memcmp(out.data, FT_PREFIX, plen) != 0)
        ft_fail("render changed what was already in the buffer", &out);
    if (rc != 0) {
        if (out.len != plen || out.data[plen] != '\0')
            ft_fail("failed render did not roll back", &out);
    } else {
        if (missing != ctx.nulls)
            ft_fail("missing count differs from the lookup's misses", &out);
        bool raw = ft_may_be_raw(data + 1, size - 1);
        if (mode == HR_TEMPLATE_JSON && !raw && ft_plain_source(data + 1, size - 1) &&
            !ft_json_content(out.data + plen, out.len - plen))
            ft_fail("escaped output is not JSON string content", &out);
        if (mode == HR_TEMPLATE_HTML && !raw && ft_lacks(data + 1, size - 1, "&<>\"'") &&
            !ft_html_content(out.data + plen, out.len - plen))
            ft_fail("HTML-escaped output holds markup", &out);
    }
    hr_buf_free(&out);
    hr_template_free(t);
    return 0;
}
