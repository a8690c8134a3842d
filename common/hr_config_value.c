/* hr_config_value: the checks and conversions of single configuration
 * values (integers, booleans, listen addresses, URLs, methods, headers,
 * templates, choices) that hr_config's key tables point at. */
#include "hr_config_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hr_keys.h"
#include "hr_log.h"
#include "hr_template.h"

/* ---- value checks --------------------------------------------------- */

/* TEXT as a decimal integer in MIN..MAX. */
int cfg_parse_int(const char *text, long long min, long long max, long long *out,
                         char *why, size_t whylen)
{
    const char *d = text[0] == '-' ? text + 1 : text;
    if (d[0] == '\0' || strspn(d, "0123456789") != strlen(d)) {
        snprintf(why, whylen, "expected an integer, got \"%.64s\"", text);
        return -1;
    }
    errno = 0;
    long long v = strtoll(text, NULL, 10);
    if (errno == ERANGE || v < min || v > max) {
        snprintf(why, whylen, "%.64s is out of range (%lld..%lld)", text, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cfg_parse_bool(const char *text, bool *out, char *why, size_t whylen)
{
    static const char *const yes[] = {"true", "yes", "on", "True", "Yes", "On", "TRUE", "YES", "ON"};
    static const char *const no[] = {"false", "no", "off", "False", "No", "Off", "FALSE", "NO", "OFF"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcmp(text, yes[i]) == 0 || strcmp(text, no[i]) == 0) {
            *out = strcmp(text, yes[i]) == 0;
            return 0;
        }
    }
    snprintf(why, whylen, "expected true or false, got \"%.64s\"", text);
    return -1;
}

/* [A-Za-z0-9.-]+ or a bracketed IPv6 address, then ":PORT" when PORT_REQUIRED
 * or optionally; *END is set past what was read. */
static int cfg_check_hostport(const char *s, bool port_required, long long port_min,
                              const char **end, char *why, size_t whylen)
{
    size_t n;
    if (s[0] == '[') {
        n = strspn(s + 1, "0123456789abcdefABCDEF:.");
        if (n == 0 || s[1 + n] != ']') {
            snprintf(why, whylen, "bad IPv6 address");
            return -1;
        }
        n += 2;
    } else {
        n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_");
        if (n == 0) {
            snprintf(why, whylen, "no host");
            return -1;
        }
    }
    s += n;
    if (s[0] == ':') {
        size_t digits = strspn(s + 1, "0123456789");
        char port[8];
        long long v;
        if (digits == 0 || digits >= sizeof(port)) {
            snprintf(why, whylen, "bad port");
            return -1;
        }
        memcpy(port, s + 1, digits);
        port[digits] = '\0';
        if (cfg_parse_int(port, port_min, 65535, &v, why, whylen) < 0)
            return -1;
        s += 1 + digits;
    } else if (port_required) {
        snprintf(why, whylen, "expected host:port");
        return -1;
    }
    *end = s;
    return 0;
}

/* host:port; port 0 asks for any free port (tests use it). */
int cfg_check_listen(const char *text, char *why, size_t whylen)
{
    const char *end = text;
    char inner[64] = "junk after the port";
    if (cfg_check_hostport(text, true, 0, &end, inner, sizeof(inner)) == 0 && *end == '\0')
        return 0;
    snprintf(why, whylen, "\"%.64s\" is not a listen address host:port (%s)", text, inner);
    return -1;
}

/* Every key starts with the prefix; hr_keys sizes its buffers for one of
 * at most HR_KEYS_PREFIX_MAX bytes. */
int cfg_check_prefix(const char *text, char *why, size_t whylen)
{
    if (strlen(text) <= HR_KEYS_PREFIX_MAX)
        return 0;
    snprintf(why, whylen, "%zu bytes long; at most %d", strlen(text), HR_KEYS_PREFIX_MAX);
    return -1;
}

/* The owner id "<instance>/<pid>" must fit push_task.claimed_by
 * (VARCHAR(128)), or every claim fails. */
int cfg_check_instance(const char *text, char *why, size_t whylen)
{
    if (strlen(text) <= 100)
        return 0;
    snprintf(why, whylen, "%zu bytes long; at most 100", strlen(text));
    return -1;
}

/* A channel's url, body and header values are templates: one that does
 * not compile would fail every task on the channel at run time, so it is a
 * configuration error instead. */
static int cfg_check_template(const char *what, const char *text, char *why, size_t whylen)
{
    hr_template *t = NULL;
    char err[160];
    if (hr_template_compile(text, strlen(text), false, &t, err, sizeof(err)) == 0) {
        hr_template_free(t);
        return 0;
    }
    snprintf(why, whylen, "%s template: %s", what, err);
    return -1;
}

int cfg_check_body(const char *text, char *why, size_t whylen)
{
    return cfg_check_template("body", text, why, whylen);
}

/* http:// or https://, a host and an optional port, then a path/query in
 * which {{...}} templates may appear; no spaces or control characters
 * outside templates (the renderer escapes what it substitutes). */
int cfg_check_url(const char *text, char *why, size_t whylen)
{
    const char *s;
    char inner[64] = "";
    if (strncasecmp(text, "http://", 7) == 0) {
        s = text + 7;
    } else if (strncasecmp(text, "https://", 8) == 0) {
        s = text + 8;
    } else {
        snprintf(why, whylen, "\"%.64s\" is not an http:// or https:// URL", text);
        return -1;
    }
    if (cfg_check_hostport(s, false, 1, &s, inner, sizeof(inner)) < 0) {
        snprintf(why, whylen, "URL \"%.64s\": %s", text, inner);
        return -1;
    }
    if (*s != '\0' && *s != '/' && *s != '?' && *s != '#') {
        snprintf(why, whylen, "URL \"%.64s\": bad character '%c' after the host", text, *s);
        return -1;
    }
    while (*s != '\0') {
        if (s[0] == '{' && s[1] == '{') {
            const char *close = strstr(s + 2, "}}");
            if (close == NULL) {
                snprintf(why, whylen, "URL \"%.64s\": unclosed {{", text);
                return -1;
            }
            s = close + 2;
            continue;
        }
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7F) {
            snprintf(why, whylen, "URL \"%.64s\": spaces and control characters must be %%-encoded",
                     text);
            return -1;
        }
        s++;
    }
    return cfg_check_template("url", text, why, whylen);
}

int cfg_check_method(const char *text, char *why, size_t whylen)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "PATCH"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strcmp(text, methods[i]) == 0)
            return 0;
    snprintf(why, whylen, "unknown method \"%.64s\" (expected: GET, POST, PUT, PATCH)", text);
    return -1;
}

/* An HTTP header name is a token; a value may not break the header block. */
int cfg_check_header(const char *name, const char *value, char *why, size_t whylen)
{
    static const char tchar[] = "!#$%&'*+-.^_`|~0123456789"
                                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    if (name[0] == '\0' || strspn(name, tchar) != strlen(name)) {
        snprintf(why, whylen, "\"%.64s\" is not a valid header name", name);
        return -1;
    }
    if (strpbrk(value, "\r\n") != NULL) {
        snprintf(why, whylen, "header %.64s: line breaks are not allowed in values", name);
        return -1;
    }
    return cfg_check_template("header value", value, why, whylen);
}

/* ---- choices: a name in the file -> a value in the struct ------------ */

int cfg_choose_level(void *field, const char *text)
{
    int level = hr_log_level_parse(text);
    if (level < 0)
        return -1;
    *(int *)field = level;
    return 0;
}

int cfg_choose_format(void *field, const char *text)
{
    if (strcmp(text, "logfmt") == 0)
        *(hr_log_format *)field = HR_LOG_FORMAT_LOGFMT;
    else if (strcmp(text, "json") == 0)
        *(hr_log_format *)field = HR_LOG_FORMAT_JSON;
    else
        return -1;
    return 0;
}

int cfg_choose_escape(void *field, const char *text)
{
    if (strcmp(text, "json") == 0)
        *(bool *)field = true;
    else if (strcmp(text, "none") == 0)
        *(bool *)field = false;
    else
        return -1;
    return 0;
}

int cfg_choose_throttle(void *field, const char *text)
{
    if (strcmp(text, "enforce") == 0)
        *(hr_throttle_mode *)field = HR_THROTTLE_ENFORCE;
    else if (strcmp(text, "shadow") == 0)
        *(hr_throttle_mode *)field = HR_THROTTLE_SHADOW;
    else
        return -1;
    return 0;
}
