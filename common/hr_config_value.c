/* hr_config_value: the checks and conversions of single configuration
 * values (integers, booleans, listen addresses, URLs, methods, headers,
 * templates, choices) that hr_config's key tables point at. */
#include "hr_config_value.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hr_keys.h"
#include "hr_sign.h"
#include "hr_template.h"

/* ---- value checks --------------------------------------------------- */

/* TEXT as a decimal integer in MIN..MAX. */
int cfg_parse_int(const char *text, long long min, long long max, long long *out, char *errstr,
                  size_t errlen)
{
    const char *d = text[0] == '-' ? text + 1 : text;
    if (d[0] == '\0' || strspn(d, "0123456789") != strlen(d)) {
        snprintf(errstr, errlen, "expected an integer, got \"%.64s\"", text);
        return -1;
    }
    errno = 0;
    long long v = strtoll(text, NULL, 10);
    if (errno == ERANGE || v < min || v > max) {
        snprintf(errstr, errlen, "%.64s is out of range (%lld..%lld)", text, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cfg_parse_bool(const char *text, bool *out, char *errstr, size_t errlen)
{
    static const char *const yes[] = {"true", "yes",  "on",  "True", "Yes",
                                      "On",   "TRUE", "YES", "ON"};
    static const char *const no[] = {"false", "no",    "off", "False", "No",
                                     "Off",   "FALSE", "NO",  "OFF"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcmp(text, yes[i]) == 0 || strcmp(text, no[i]) == 0) {
            *out = strcmp(text, yes[i]) == 0;
            return 0;
        }
    }
    snprintf(errstr, errlen, "expected true or false, got \"%.64s\"", text);
    return -1;
}

/* [A-Za-z0-9.-]+ or a bracketed IPv6 address, then ":PORT" when PORT_REQUIRED
 * or optionally; *END is set past what was read. */
static int cfg_check_hostport(const char *s, bool port_required, long long port_min,
                              const char **end, char *errstr, size_t errlen)
{
    size_t n;
    if (s[0] == '[') {
        n = strspn(s + 1, "0123456789abcdefABCDEF:.");
        if (n == 0 || s[1 + n] != ']') {
            snprintf(errstr, errlen, "bad IPv6 address");
            return -1;
        }
        n += 2;
    } else {
        n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_");
        if (n == 0) {
            snprintf(errstr, errlen, "no host");
            return -1;
        }
    }
    s += n;
    if (s[0] == ':') {
        size_t digits = strspn(s + 1, "0123456789");
        char port[8];
        long long v;
        if (digits == 0 || digits >= sizeof(port)) {
            snprintf(errstr, errlen, "bad port");
            return -1;
        }
        memcpy(port, s + 1, digits);
        port[digits] = '\0';
        if (cfg_parse_int(port, port_min, 65535, &v, errstr, errlen) < 0)
            return -1;
        s += 1 + digits;
    } else if (port_required) {
        snprintf(errstr, errlen, "expected host:port");
        return -1;
    }
    *end = s;
    return 0;
}

/* TEXT as host:port with a port of at least PORT_MIN, WHAT naming it in
 * the message. */
static int cfg_check_address(const char *text, long long port_min, const char *what, char *errstr,
                             size_t errlen)
{
    const char *end = text;
    char inner[64] = "junk after the port";
    if (cfg_check_hostport(text, true, port_min, &end, inner, sizeof(inner)) == 0 && *end == '\0')
        return 0;
    snprintf(errstr, errlen, "\"%.64s\" is not %s host:port (%s)", text, what, inner);
    return -1;
}

/* host:port; port 0 asks for any free port (tests use it). */
int cfg_check_listen(const char *text, char *errstr, size_t errlen)
{
    return cfg_check_address(text, 0, "a listen address", errstr, errlen);
}

/* host:port of a server to connect to (redis.nodes). */
int cfg_check_server(const char *text, char *errstr, size_t errlen)
{
    return cfg_check_address(text, 1, "a server address", errstr, errlen);
}

/* Every key starts with the prefix; hr_keys sizes its buffers for one of
 * at most HR_KEYS_PREFIX_MAX bytes. */
int cfg_check_prefix(const char *text, char *errstr, size_t errlen)
{
    if (strlen(text) <= HR_KEYS_PREFIX_MAX)
        return 0;
    snprintf(errstr, errlen, "%zu bytes long; at most %d", strlen(text), HR_KEYS_PREFIX_MAX);
    return -1;
}

/* The owner id "<instance>/<pid>" must fit push_task.claimed_by
 * (VARCHAR(128)), or every claim fails. */
int cfg_check_instance(const char *text, char *errstr, size_t errlen)
{
    if (strlen(text) <= 100)
        return 0;
    snprintf(errstr, errlen, "%zu bytes long; at most 100", strlen(text));
    return -1;
}

/* A channel's url, body and header values are templates: one that does
 * not compile would fail every task on the channel at run time, so it is a
 * configuration error instead. */
static int cfg_check_template(const char *what, const char *text, char *errstr, size_t errlen)
{
    hr_template *t = NULL;
    char detail[160];
    if (hr_template_compile(text, strlen(text), false, &t, detail, sizeof(detail)) == 0) {
        hr_template_free(t);
        return 0;
    }
    snprintf(errstr, errlen, "%s template: %s", what, detail);
    return -1;
}

int cfg_check_body(const char *text, char *errstr, size_t errlen)
{
    return cfg_check_template("body", text, errstr, errlen);
}

/* http(s):// or smtp(s):// (which scheme a channel's type takes is
 * cfg_channel_finish()'s check), a host and an optional port, then a path/query in
 * which {{...}} templates may appear; no spaces or control characters
 * outside templates (the renderer escapes what it substitutes). */
int cfg_check_url(const char *text, char *errstr, size_t errlen)
{
    static const char *const schemes[] = {"http://", "https://", "smtp://", "smtps://"};
    const char *s = NULL;
    char inner[64] = "";
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]) && s == NULL; i++)
        if (strncasecmp(text, schemes[i], strlen(schemes[i])) == 0)
            s = text + strlen(schemes[i]);
    if (s == NULL) {
        snprintf(errstr, errlen, "\"%.64s\" is not an http(s):// or smtp(s):// URL", text);
        return -1;
    }
    if (cfg_check_hostport(s, false, 1, &s, inner, sizeof(inner)) < 0) {
        snprintf(errstr, errlen, "URL \"%.64s\": %s", text, inner);
        return -1;
    }
    if (*s != '\0' && *s != '/' && *s != '?' && *s != '#') {
        snprintf(errstr, errlen, "URL \"%.64s\": bad character '%c' after the host", text, *s);
        return -1;
    }
    while (*s != '\0') {
        if (s[0] == '{' && s[1] == '{') {
            const char *close = strstr(s + 2, "}}");
            if (close == NULL) {
                snprintf(errstr, errlen, "URL \"%.64s\": unclosed {{", text);
                return -1;
            }
            s = close + 2;
            continue;
        }
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7F) {
            snprintf(errstr, errlen,
                     "URL \"%.64s\": spaces and control characters must be %%-encoded", text);
            return -1;
        }
        s++;
    }
    return cfg_check_template("url", text, errstr, errlen);
}

int cfg_check_method(const char *text, char *errstr, size_t errlen)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "PATCH"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strcmp(text, methods[i]) == 0)
            return 0;
    snprintf(errstr, errlen, "unknown method \"%.64s\" (expected: GET, POST, PUT, PATCH)", text);
    return -1;
}

/* An HTTP header name is a token; a value may not break the header block. */
int cfg_check_header(const char *name, const char *value, char *errstr, size_t errlen)
{
    static const char tchar[] = "!#$%&'*+-.^_`|~0123456789"
                                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    if (name[0] == '\0' || strspn(name, tchar) != strlen(name)) {
        snprintf(errstr, errlen, "\"%.64s\" is not a valid header name", name);
        return -1;
    }
    if (strpbrk(value, "\r\n") != NULL) {
        snprintf(errstr, errlen, "header %.64s: line breaks are not allowed in values", name);
        return -1;
    }
    return cfg_check_template("header value", value, errstr, errlen);
}

int cfg_check_mail_template(const char *text, char *errstr, size_t errlen)
{
    return cfg_check_template("mail", text, errstr, errlen);
}

/* The secret itself never goes into the message: a config error is logged. */
int cfg_check_secret(const char *text, char *errstr, size_t errlen)
{
    hr_sign_secret secret;
    return hr_sign_secret_parse(text, &secret, errstr, errlen);
}

/* An addr-spec as SMTP's MAIL FROM takes it: local@domain, printable
 * ASCII without spaces, angle brackets or a second '@' (wk_smtp checks the
 * rest when it builds a message). */
int cfg_check_mailbox(const char *text, char *errstr, size_t errlen)
{
    const char *at = strchr(text, '@');
    bool ok = at != NULL && at != text && at[1] != '\0' && strchr(at + 1, '@') == NULL;
    for (const char *c = text; ok && *c != '\0'; c++)
        ok = *c > 0x20 && *c < 0x7F && *c != '<' && *c != '>';
    if (!ok) {
        snprintf(errstr, errlen, "\"%.64s\" is not an address local@domain", text);
        return -1;
    }
    return 0;
}

/* Apple's key and team ids: 10 characters of A-Z 0-9. */
int cfg_check_apple_id(const char *text, char *errstr, size_t errlen)
{
    if (strlen(text) != 10 || strspn(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != 10) {
        snprintf(errstr, errlen, "\"%.64s\" is not 10 characters of A-Z 0-9", text);
        return -1;
    }
    return 0;
}

/* https:// or mailto: first (wk_smtp puts the URL or the address into the
 * List-Unsubscribe header), a template after. */
int cfg_check_unsubscribe(const char *text, char *errstr, size_t errlen)
{
    if (strncasecmp(text, "https://", 8) != 0 && strncasecmp(text, "mailto:", 7) != 0) {
        snprintf(errstr, errlen, "\"%.64s\" is neither an https:// URL nor a mailto: address",
                 text);
        return -1;
    }
    return cfg_check_template("list_unsubscribe", text, errstr, errlen);
}

/* recipients.unsubscribe.public_url: https (RFC 8058 one-click links must
 * be), a host, no query, fragment or trailing slash (the link appends
 * "/u/<token>"), printable ASCII without quotes or angle brackets (it is
 * written into a mail header between < and >). */
int cfg_check_public_url(const char *text, char *errstr, size_t errlen)
{
    size_t n = strlen(text);

    if (strncmp(text, "https://", 8) != 0 || n <= 8 || n > 200 || text[8] == '/' ||
        text[n - 1] == '/' || strpbrk(text, "?#\"<> ") != NULL) {
        snprintf(errstr, errlen,
                 "\"%.64s\" is not an https://host[:port][/path] URL without a query, a "
                 "fragment or a trailing slash",
                 text);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)text[i] < 0x21 || (unsigned char)text[i] > 0x7e) {
            snprintf(errstr, errlen, "public_url: only printable ASCII");
            return -1;
        }
    return 0;
}

/* ---- choices: a name in the file -> its index ----------------------- */

/* The index of TEXT among the N NAMES, or -1: what every choice of the
 * tables (cfg_key.choose) maps to its enum or bool. */
int cfg_choice(const char *text, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(text, names[i]) == 0)
            return (int)i;
    return -1;
}
