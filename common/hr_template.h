/* hr_template: {{name}} templates for channel bodies, URLs, headers and the
 * task's title and body.
 *
 * A template is compiled once into literal and variable parts.  Names are
 * uid, title, body, task.id, task.name, task.topic, payload.FIELD and
 * user.ATTR (FIELD/ATTR: [A-Za-z0-9_.-]+).  Syntax errors (unclosed "{{",
 * empty or unknown names, over 64 KiB) are reported with the byte offset.
 * Rendering asks a lookup callback for each variable's value; a missing
 * value renders as "" and is counted in hr_template_out.missing.  Values are
 * JSON-escaped when the template is compiled with escape on (the channel's
 * `escape: json`), percent-encoded in URL mode and HTML-escaped in HTML mode
 * (hr_template_compile_escape), except a variable written {{raw NAME}},
 * which is inserted as it is in every mode; literals are never changed. */
#ifndef HR_TEMPLATE_H
#define HR_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"

typedef struct hr_template hr_template;

typedef enum hr_tvar_kind {
    HR_TVAR_UID,
    HR_TVAR_TITLE,
    HR_TVAR_BODY,
    HR_TVAR_TASK,    /* name = task.<field> */
    HR_TVAR_PAYLOAD, /* name = payload.<field> */
    HR_TVAR_USER,    /* name = user.<attr> */
} hr_tvar_kind;

/* Returns the value of variable KIND/NAME (NAME is the part after the dot,
 * or "" for uid/title/body) and its length, or NULL when missing. */
typedef const char *(*hr_template_lookup)(void *ctx, hr_tvar_kind kind, const char *name,
                                          size_t *len);

int hr_template_compile(const char *src, size_t len, bool json_escape, hr_template **out,
                        char *errstr, size_t errlen);

/* How variable values are escaped when rendered (literals never are). */
typedef enum hr_template_escape {
    HR_TEMPLATE_RAW,  /* as they are */
    HR_TEMPLATE_JSON, /* JSON string escapes (hr_json_escape_append) */
    HR_TEMPLATE_URL,  /* percent-encoded but for RFC 3986 unreserved bytes (URL templates) */
    HR_TEMPLATE_HTML, /* & < > " ' as entities (an e-mail's text/html part) */
} hr_template_escape;

/* hr_template_compile with an escape mode; hr_template_compile(.., b, ..)
 * is hr_template_compile_escape(.., b ? HR_TEMPLATE_JSON : HR_TEMPLATE_RAW, ..). */
int hr_template_compile_escape(const char *src, size_t len, hr_template_escape escape,
                               hr_template **out, char *errstr, size_t errlen);
void hr_template_free(hr_template *t);

/* True when the template names any user.* variable (the worker then fetches
 * herald:user:<uid> hashes for the chunk). */
bool hr_template_uses_user(const hr_template *t);
/* True when it names KIND at all. */
bool hr_template_uses(const hr_template *t, hr_tvar_kind kind);

/* Appends the rendering to OUT; *MISSING (may be NULL) is increased by the
 * number of variables the lookup did not know.  0, or -1 past OUT's cap. */
int hr_template_render(const hr_template *t, hr_template_lookup lookup, void *ctx, hr_buf *out,
                       size_t *missing);

/* Appends S JSON-escaped (without quotes) to OUT. */
int hr_json_escape_append(hr_buf *out, const char *s, size_t n);

/* True when the N bytes at S are valid UTF-8 (no overlong forms, no
 * surrogates, nothing past U+10FFFF): what JSON text and MySQL's utf8mb4
 * columns accept. */
bool hr_utf8_valid(const char *s, size_t n);
/* Appends S with & < > " ' written as &amp; &lt; &gt; &quot; &#39; to OUT:
 * safe in HTML text and in a quoted attribute value. */
int hr_html_escape_append(hr_buf *out, const char *s, size_t n);
/* Appends S percent-encoded (every byte but A-Z a-z 0-9 - . _ ~) to OUT. */
int hr_url_escape_append(hr_buf *out, const char *s, size_t n);

#endif
