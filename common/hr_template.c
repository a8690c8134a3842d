/* hr_template: compile-once, render-many {{name}} templates, and the
 * escapes (JSON, URL) that renderers append into an hr_buf.
 *
 * hr_template_compile() parses the source once into an array of parts, each
 * a literal run or a variable.  All part text lives in one block owned by
 * the template (`text`): literal bytes are copied there, and each variable's
 * name (the part after "task.", "payload." or "user.") is stored there
 * NUL-terminated, because the lookup callback takes a C string.  Rendering
 * then walks the parts: literals are memcpy'd, variables are asked of the
 * lookup and appended (JSON-escaped when the template was compiled so).  A
 * render allocates nothing except when the output buffer has to grow, and
 * never scans the template source again.
 *
 * Syntax: "{{" opens a variable and the next "}}" closes it; spaces and tabs
 * inside the braces are ignored.  In a run of three or more '{' only the
 * last two open the variable, so a JSON body may write {"a":{{{payload.o}}}}
 * ... and get "{" literal before the value.  A "}}" with no opener is plain
 * text.  "{{raw NAME}}" inserts the value as it is whatever the template's
 * escape (the part's `raw` flag): the explicit opt-out, so that an escaped
 * template (an e-mail's HTML) is safe unless its author wrote otherwise.
 * Errors carry the byte offset of the offending "{{". */
#include "hr_template.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HR_TEMPLATE_MAX_LEN ((size_t)64 * 1024)
#define HR_TPART_LITERAL 255 /* kind of a literal part; hr_tvar_kind values are < 8 */

typedef struct hr_tpart {
    const char *s; /* literal bytes, or the variable's NUL-terminated name */
    uint32_t len;  /* literal length, or name length */
    uint8_t kind;  /* HR_TPART_LITERAL or an hr_tvar_kind */
    bool raw;      /* a variable written {{raw NAME}}: never escaped */
} hr_tpart;

struct hr_template {
    hr_tpart *parts;
    size_t nparts;
    char *text;    /* owns every part's bytes */
    unsigned uses; /* bit (1 << kind) for each variable kind named */
    hr_template_escape escape;
};

/* ---- JSON escaping --------------------------------------------------- */

/* Length of the valid UTF-8 sequence starting at S (1..4), or 0 when the
 * bytes there are not one (overlong forms, surrogates and code points past
 * U+10FFFF are invalid too, so the output is always valid JSON). */
static size_t hr_utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c >= 0xC2 && c <= 0xDF)
        return n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 0;
        if (c == 0xE0 && s[1] < 0xA0)
            return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0)
            return 0; /* UTF-16 surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && s[1] < 0x90)
            return 0; /* overlong */
        if (c == 0xF4 && s[1] >= 0x90)
            return 0; /* past U+10FFFF */
        return 4;
    }
    return 0;
}

bool hr_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        size_t seq = p[i] < 0x80 ? 1 : hr_utf8_seq_len(p + i, n - i);
        if (seq == 0)
            return false;
        i += seq;
    }
    return true;
}

int hr_url_escape_append(hr_buf *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t start_len = out->len;

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char enc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
        bool plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                     (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~';

        if (hr_buf_append(out, plain ? (const char *)&s[i] : enc, plain ? 1 : 3) != 0) {
            hr_buf_truncate(out, start_len);
            return -1;
        }
    }
    return 0;
}

int hr_html_escape_append(hr_buf *out, const char *s, size_t n)
{
    size_t start_len = out->len, run = 0;

    for (size_t i = 0; i < n; i++) {
        const char *rep;
        switch (s[i]) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&#39;";
            break;
        default:
            continue;
        }
        if (hr_buf_append(out, s + run, i - run) != 0 || hr_buf_append(out, rep, strlen(rep)) != 0)
            goto fail;
        run = i + 1;
    }
    if (hr_buf_append(out, s + run, n - run) != 0)
        goto fail;
    return 0;

fail:
    hr_buf_truncate(out, start_len);
    return -1;
}

/* The characters JSON escapes with one letter, and that letter. */
static const char hr_json_brief[] = "\"\\\n\r\t\b\f";
static const char hr_json_brief_letter[] = "\"\\nrtbf";

int hr_json_escape_append(hr_buf *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t start_len = out->len;
    size_t run = 0; /* start of the pending run of bytes copied as they are */
    size_t i = 0;

    while (i < n) {
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        size_t seq = c >= 0x80 ? hr_utf8_seq_len(p + i, n - i) : 0;
        if (seq > 0) {
            i += seq;
            continue;
        }
        if (hr_buf_append(out, s + run, i - run) != 0)
            goto fail;
        char esc[6] = {'\\'};
        const char *rep = esc, *brief = memchr(hr_json_brief, c, sizeof hr_json_brief - 1);
        size_t rlen = 2;
        if (brief != NULL) {
            esc[1] = hr_json_brief_letter[brief - hr_json_brief];
        } else if (c < 0x20) {
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 0xF];
            rlen = 6;
        } else {
            rep = "\xEF\xBF\xBD"; /* U+FFFD for a byte that is not UTF-8 */
            rlen = 3;
        }
        if (hr_buf_append(out, rep, rlen) != 0)
            goto fail;
        i++;
        run = i;
    }
    if (hr_buf_append(out, s + run, n - run) != 0)
        goto fail;
    return 0;

fail:
    hr_buf_truncate(out, start_len);
    return -1;
}

/* ---- compile --------------------------------------------------------- */

static bool hr_tname_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

/* Splits NAME (N bytes) into a kind and the part after the prefix; -1 when
 * it is not a name templates know. */
static int hr_tname_parse(const char *name, size_t n, hr_tvar_kind *kind, size_t *field_off)
{
    static const struct {
        const char *word;
        hr_tvar_kind kind;
        bool has_field;
    } names[] = {
        {"uid", HR_TVAR_UID, false},         {"title", HR_TVAR_TITLE, false},
        {"body", HR_TVAR_BODY, false},       {"task.", HR_TVAR_TASK, true},
        {"payload.", HR_TVAR_PAYLOAD, true}, {"user.", HR_TVAR_USER, true},
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        size_t wl = strlen(names[k].word);
        if (!names[k].has_field) {
            if (n == wl && memcmp(name, names[k].word, wl) == 0) {
                *kind = names[k].kind;
                *field_off = n;
                return 0;
            }
            continue;
        }
        if (n <= wl || memcmp(name, names[k].word, wl) != 0)
            continue;
        for (size_t i = wl; i < n; i++)
            if (!hr_tname_char((unsigned char)name[i]))
                return -1;
        *kind = names[k].kind;
        *field_off = wl;
        return 0;
    }
    return -1;
}

static bool hr_tspace(char c)
{
    return c == ' ' || c == '\t';
}

/* Appends a part; PARTS has room for every part the source can yield. */
static void hr_template_add(hr_template *t, uint8_t kind, const char *s, size_t len, bool raw)
{
    t->parts[t->nparts].s = s;
    t->parts[t->nparts].len = (uint32_t)len;
    t->parts[t->nparts].kind = kind;
    t->parts[t->nparts].raw = raw;
    t->nparts++;
}

/* True, with *NS moved past it, when the name at SRC[*NS..NE) starts with
 * the word "raw" and white space. */
static bool hr_template_raw(const char *src, size_t *ns, size_t ne)
{
    size_t i = *ns + 3;
    if (ne - *ns < 4 || memcmp(src + *ns, "raw", 3) != 0 || !hr_tspace(src[i]))
        return false;
    while (i < ne && hr_tspace(src[i]))
        i++;
    *ns = i;
    return true;
}

int hr_template_compile(const char *src, size_t len, bool json_escape, hr_template **out,
                        char *errstr, size_t errlen)
{
    return hr_template_compile_escape(src, len, json_escape ? HR_TEMPLATE_JSON : HR_TEMPLATE_RAW,
                                      out, errstr, errlen);
}

int hr_template_compile_escape(const char *src, size_t len, hr_template_escape escape,
                               hr_template **out, char *errstr, size_t errlen)
{
    hr_template *t = NULL;
    *out = NULL;

    if (len > HR_TEMPLATE_MAX_LEN) {
        snprintf(errstr, errlen, "template is %zu bytes, over the 64 KiB limit (offset %zu)", len,
                 HR_TEMPLATE_MAX_LEN);
        goto fail;
    }
    t = calloc(1, sizeof *t);
    if (t == NULL)
        goto oom;
    t->escape = escape;
    /* Every variable takes at least 4 source bytes ("{{x}}" is 5) and yields
     * at most two parts, so len / 2 + 1 parts always suffice; literal and
     * name bytes never exceed len, plus one NUL per variable. */
    size_t maxparts = len / 2 + 1;
    t->parts = malloc(maxparts * sizeof *t->parts);
    t->text = malloc(len + len / 4 + 1);
    if (t->parts == NULL || t->text == NULL)
        goto oom;

    char *w = t->text;
    size_t lit = 0; /* start of the current literal run in src */
    size_t i = 0;
    while (i + 1 < len) {
        const char *open = memmem(src + i, len - i, "{{", 2);
        if (open == NULL)
            break;
        size_t o = (size_t)(open - src);
        while (o + 2 < len && src[o + 2] == '{')
            o++;
        const char *close = memmem(src + o + 2, len - o - 2, "}}", 2);
        if (close == NULL) {
            snprintf(errstr, errlen, "unclosed '{{' at offset %zu", o);
            goto fail;
        }
        size_t ns = o + 2, ne = (size_t)(close - src);
        while (ns < ne && hr_tspace(src[ns]))
            ns++;
        while (ne > ns && hr_tspace(src[ne - 1]))
            ne--;
        bool raw = hr_template_raw(src, &ns, ne);
        if (ns == ne) {
            snprintf(errstr, errlen, "empty variable name at offset %zu", o);
            goto fail;
        }
        hr_tvar_kind kind;
        size_t field;
        if (hr_tname_parse(src + ns, ne - ns, &kind, &field) != 0) {
            snprintf(errstr, errlen, "unknown variable '%.*s' at offset %zu", (int)(ne - ns),
                     src + ns, o);
            goto fail;
        }
        if (o > lit) {
            memcpy(w, src + lit, o - lit);
            hr_template_add(t, HR_TPART_LITERAL, w, o - lit, false);
            w += o - lit;
        }
        size_t nl = ne - ns - field;
        memcpy(w, src + ns + field, nl);
        w[nl] = '\0';
        hr_template_add(t, (uint8_t)kind, w, nl, raw);
        w += nl + 1;
        t->uses |= 1u << kind;
        i = (size_t)(close - src) + 2;
        lit = i;
    }
    if (len > lit) {
        memcpy(w, src + lit, len - lit);
        hr_template_add(t, HR_TPART_LITERAL, w, len - lit, false);
    }
    *out = t;
    return 0;

oom:
    snprintf(errstr, errlen, "out of memory");
fail:
    hr_template_free(t);
    return -1;
}

void hr_template_free(hr_template *t)
{
    if (t == NULL)
        return;
    free(t->parts);
    free(t->text);
    free(t);
}

bool hr_template_uses_user(const hr_template *t)
{
    return hr_template_uses(t, HR_TVAR_USER);
}

bool hr_template_uses(const hr_template *t, hr_tvar_kind kind)
{
    return (t->uses & (1u << kind)) != 0;
}

/* ---- render ---------------------------------------------------------- */

int hr_template_render(const hr_template *t, hr_template_lookup lookup, void *ctx, hr_buf *out,
                       size_t *missing)
{
    size_t start_len = out->len;
    size_t nmissing = 0;

    for (size_t k = 0; k < t->nparts; k++) {
        const hr_tpart *p = &t->parts[k];
        int rc;
        if (p->kind == HR_TPART_LITERAL) {
            rc = hr_buf_append(out, p->s, p->len);
        } else {
            size_t vlen = 0;
            const char *v = lookup(ctx, (hr_tvar_kind)p->kind, p->s, &vlen);
            if (v == NULL) {
                nmissing++;
                continue;
            }
            switch (p->raw ? HR_TEMPLATE_RAW : t->escape) {
            case HR_TEMPLATE_JSON:
                rc = hr_json_escape_append(out, v, vlen);
                break;
            case HR_TEMPLATE_URL:
                rc = hr_url_escape_append(out, v, vlen);
                break;
            case HR_TEMPLATE_HTML:
                rc = hr_html_escape_append(out, v, vlen);
                break;
            default:
                rc = hr_buf_append(out, v, vlen);
                break;
            }
        }
        if (rc != 0)
            goto fail;
    }
    if (missing != NULL)
        *missing += nmissing;
    return 0;

fail:
    hr_buf_truncate(out, start_len);
    return -1;
}
