/* hr_log: logfmt or JSON lines on stderr.  See hr_log.h for the contract.
 *
 * The configured format and instance are process-wide and set once at
 * start-up, before threads exist; emitting only reads them. */
#include "hr_log.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int hr_log_min_level = HR_LOG_INFO;
static hr_log_format log_format = HR_LOG_FORMAT_LOGFMT;
static char log_instance[128] = "herald";

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void hr_log_setup(int level, hr_log_format format, const char *instance)
{
    hr_log_min_level = level;
    log_format = format;
    if (instance != NULL && instance[0] != '\0')
        snprintf(log_instance, sizeof(log_instance), "%s", instance);
}

int hr_log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

/* A bounded append-only buffer: writes past the end are dropped. */
typedef struct {
    char *p;
    size_t len, cap;
} outbuf;

static void put(outbuf *o, const char *s, size_t n)
{
    if (o->len + 1 >= o->cap)
        return;
    size_t room = o->cap - 1 - o->len;
    if (n > room)
        n = room;
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void puts_(outbuf *o, const char *s)
{
    put(o, s, strlen(s));
}

/* Writes VALUE quoted for the current format when it needs it. */
static void put_value(outbuf *o, const char *v, size_t n)
{
    bool json = log_format == HR_LOG_FORMAT_JSON;
    bool quote = json || n == 0;
    for (size_t i = 0; i < n && !quote; i++)
        if (v[i] == ' ' || v[i] == '"' || v[i] == '=' || (unsigned char)v[i] < 0x20)
            quote = true;
    if (!quote) {
        put(o, v, n);
        return;
    }
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c == '\n') {
            put(o, "\\n", 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            puts_(o, esc);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
    put(o, "\"", 1);
}

static void put_pair(outbuf *o, bool first, const char *k, size_t kn, const char *v, size_t vn)
{
    if (log_format == HR_LOG_FORMAT_JSON) {
        if (!first)
            put(o, ",", 1);
        put(o, "\"", 1);
        put(o, k, kn);
        put(o, "\":", 2);
    } else {
        if (!first)
            put(o, " ", 1);
        put(o, k, kn);
        put(o, "=", 1);
    }
    put_value(o, v, vn);
}

static bool is_key_char(char c)
{
    return islower((unsigned char)c) || isdigit((unsigned char)c) || c == '_' || c == '.';
}

/* Length of a "key=" starting at S, or 0 when S does not start one. */
static size_t key_at(const char *s)
{
    size_t n = 0;
    while (is_key_char(s[n]))
        n++;
    return (n > 0 && s[n] == '=') ? n : 0;
}

size_t hr_log_format_line(char *buf, size_t len, int level, const char *event, const char *fields)
{
    outbuf o = {buf, 0, len};
    if (len == 0)
        return 0;
    buf[0] = '\0';

    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[96];
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (long)(tv.tv_usec / 1000));
    if (level < 0 || level > 3)
        level = HR_LOG_ERROR;

    if (log_format == HR_LOG_FORMAT_JSON)
        put(&o, "{", 1);
    put_pair(&o, true, "ts", 2, ts, strlen(ts));
    put_pair(&o, false, "level", 5, level_names[level], strlen(level_names[level]));
    put_pair(&o, false, "instance", 8, log_instance, strlen(log_instance));
    put_pair(&o, false, "event", 5, event, strlen(event));

    /* Split FIELDS at every " key=" (or a leading "key="); a value runs to
     * the next such boundary, so it may itself contain spaces. */
    const char *p = fields;
    while (*p == ' ')
        p++;
    while (*p != '\0') {
        size_t kn = key_at(p); /* 0: free text, kept as msg= */
        const char *k = kn ? p : "msg";
        size_t klen = kn ? kn : 3;
        const char *v = kn ? p + kn + 1 : p;
        const char *end = v;
        while (*end != '\0' && !(*end == ' ' && key_at(end + 1) > 0))
            end++;
        put_pair(&o, false, k, klen, v, (size_t)(end - v));
        p = end;
        while (*p == ' ')
            p++;
    }
    if (log_format == HR_LOG_FORMAT_JSON)
        put(&o, "}", 1);
    return o.len;
}

void hr_log_emit(int level, const char *event, const char *fmt, ...)
{
    char fields[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fields, sizeof(fields), fmt, ap);
    va_end(ap);

    char line[4096];
    size_t n = hr_log_format_line(line, sizeof(line) - 1, level, event, fields);
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w; /* nowhere to report a failed log write */
}
