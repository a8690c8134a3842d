/* hr_parse: strict parsing shared by the API and heraldctl (see hr_parse.h).
 *
 * Times are parsed digit by digit (sscanf's %2d would take " 5" or "+5")
 * and converted with hr_civil_days instead of timegm, which silently
 * carries Feb 30 into March: a field out of its calendar range is refused
 * before any arithmetic.
 *
 * JSON goes through cJSON first (so only well-formed text reaches the
 * rest), then one scan of the same text collects the numbers' literals in
 * document order, which is the order of a depth-first walk of cJSON's
 * tree; each literal is stored in its node's valuestring, a field cJSON
 * leaves NULL for numbers and frees with the node. */
#include "hr_parse.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hr_civil.h"
#include "hr_template.h"

#define HR_PARSE_PATH_MAX 256

/* N digits at S into *V; false unless all N are ASCII digits. */
static bool hr_parse_digits(const char *s, int n, int *v)
{
    int i;

    *v = 0;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        *v = *v * 10 + (s[i] - '0');
    }
    return true;
}

static bool hr_parse_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* "YYYY-MM-DD" at S (exactly 10 bytes used) into days; false if not a real
 * date of 1970..9999. */
static bool hr_parse_ymd(const char *s, int64_t *days)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, m, d;

    if (!hr_parse_digits(s, 4, &y) || s[4] != '-' || !hr_parse_digits(s + 5, 2, &m) ||
        s[7] != '-' || !hr_parse_digits(s + 8, 2, &d))
        return false;
    if (y < 1970 || m < 1 || m > 12 || d < 1 || d > mdays[m - 1] + (m == 2 && hr_parse_leap(y)))
        return false;
    *days = hr_civil_days(y, m, d);
    return true;
}

int hr_parse_time(const char *what, const char *s, int64_t *ms, char *errstr, size_t errlen)
{
    int64_t days;
    int h, mi, sec, frac = 0, digits = 0;
    const char *p;

    if (s == NULL || strnlen(s, 20) < 19 || !hr_parse_ymd(s, &days) ||
        (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !hr_parse_digits(s + 11, 2, &h) ||
        s[13] != ':' || !hr_parse_digits(s + 14, 2, &mi) || s[16] != ':' ||
        !hr_parse_digits(s + 17, 2, &sec) || h > 23 || mi > 59 || sec > 59)
        goto bad;
    p = s + 19;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9' && digits < 9; p++, digits++)
            if (digits < 3)
                frac = frac * 10 + (*p - '0');
        if (digits == 0)
            goto bad;
        for (; digits < 3; digits++)
            frac *= 10;
    }
    if (*p == 'Z' || *p == 'z')
        p++;
    if (*p != '\0')
        goto bad;
    *ms = ((days * 24 + h) * 60 + mi) * 60000 + sec * 1000 + frac;
    return 0;
bad:
    snprintf(errstr, errlen,
             "%s: \"%.40s\" is not a UTC time of 1970..9999 like 2026-05-01T08:00:00Z or "
             "'2026-05-01 08:00:00.000' (a real date, hour 0..23, second 0..59)",
             what, s != NULL ? s : "");
    return -1;
}

int hr_parse_date(const char *what, const char *s, int64_t *day_ms, char *errstr, size_t errlen)
{
    int64_t days;

    if (s == NULL || strnlen(s, 11) != 10 || !hr_parse_ymd(s, &days)) {
        snprintf(errstr, errlen,
                 "%s: \"%.40s\" is not a real date of 1970..9999 as "
                 "YYYY-MM-DD",
                 what, s != NULL ? s : "");
        return -1;
    }
    *day_ms = days * 86400000;
    return 0;
}

int hr_parse_time_of_day(const char *what, const char *s, int64_t *secs, char *errstr,
                         size_t errlen)
{
    size_t n = s != NULL ? strnlen(s, 9) : 0;
    int h, m, sec = 0;

    if ((n != 5 && n != 8) || !hr_parse_digits(s, 2, &h) || s[2] != ':' ||
        !hr_parse_digits(s + 3, 2, &m) ||
        (n == 8 && (s[5] != ':' || !hr_parse_digits(s + 6, 2, &sec))) || h > 23 || m > 59 ||
        sec > 59) {
        snprintf(errstr, errlen, "%s: \"%.40s\" is not a time of day as HH:MM or HH:MM:SS", what,
                 s != NULL ? s : "");
        return -1;
    }
    *secs = h * 3600 + m * 60 + sec;
    return 0;
}

int hr_parse_uid(const char *s, size_t len, int64_t *out)
{
    uint64_t v = 0;
    size_t i;

    if (s == NULL || len == 0 || len > 19 || s[0] < '1' || s[0] > '9')
        return -1;
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0'); /* 19 digits fit in uint64 */
    }
    if (v > (uint64_t)INT64_MAX)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int hr_parse_name(const char *what, const char *s, size_t max, char *errstr, size_t errlen)
{
    size_t n = s != NULL ? strlen(s) : 0;

    if (n == 0 || n > max || !hr_utf8_valid(s, n)) {
        snprintf(errstr, errlen, "%s must be a non-empty UTF-8 string of at most %zu bytes", what,
                 max);
        return -1;
    }
    return 0;
}

void hr_parse_time_format(int64_t ms, char *buf, size_t len)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;

    gmtime_r(&s, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

bool hr_parse_loopback(const char *s)
{
    char host[64];
    const char *start = s, *end;
    struct in_addr v4;
    struct in6_addr v6;

    if (s == NULL)
        return false;
    if (*s == '[') {
        start = s + 1;
        end = strchr(start, ']');
        if (end == NULL || (end[1] != '\0' && end[1] != ':'))
            return false;
    } else {
        end = strchr(s, ':');
        if (end == NULL)
            end = s + strlen(s);
        else if (strchr(end + 1, ':') != NULL)
            return false; /* an IPv6 address must be in brackets */
    }
    if (end == start || (size_t)(end - start) >= sizeof host)
        return false;
    memcpy(host, start, (size_t)(end - start));
    host[end - start] = '\0';
    if (*s == '[')
        return inet_pton(AF_INET6, host, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
    if (strcasecmp(host, "localhost") == 0)
        return true;
    /* inet_pton takes only the dotted quad, not "127.1" or octal forms. */
    return inet_pton(AF_INET, host, &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

const char *hr_parse_json_literal(const cJSON *v)
{
    return cJSON_IsNumber(v) ? v->valuestring : NULL;
}

int hr_parse_json_uid(const cJSON *v, int64_t *out)
{
    const char *s = cJSON_IsString(v) ? v->valuestring : hr_parse_json_literal(v);

    return s != NULL ? hr_parse_uid(s, strlen(s), out) : -1;
}

void hr_parse_json_exact(cJSON *v)
{
    cJSON *child;

    if (cJSON_IsNumber(v) && v->valuestring != NULL)
        v->type = cJSON_Raw | (v->type & cJSON_StringIsConst);
    for (child = v != NULL ? v->child : NULL; child != NULL; child = child->next)
        hr_parse_json_exact(child);
}

/* ---- JSON ----------------------------------------------------------------- */

typedef struct hr_parse_lits {
    const char *text, *end; /* the scan position and the value's end */
} hr_parse_lits;

/* The next number literal after L->text (well-formed JSON only): its
 * start, its length in *N; NULL when there is none. */
static const char *hr_parse_next_number(hr_parse_lits *l, size_t *n)
{
    const char *p = l->text, *start;

    while (p < l->end) {
        if (*p == '"') {
            for (p++; p < l->end && *p != '"'; p++)
                if (*p == '\\')
                    p++;
            p++;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            start = p;
            while (p < l->end && strchr("0123456789+-.eE", *p) != NULL)
                p++;
            *n = (size_t)(p - start);
            l->text = p;
            return start;
        } else {
            p++;
        }
    }
    l->text = p;
    return NULL;
}

static int hr_parse_cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Depth first over V (at PATH): the literals into the number nodes, and
 * repeated member names refused.  0, HR_PARSE_MALFORMED or
 * HR_PARSE_DUPLICATE. */
static int hr_parse_walk(cJSON *v, hr_parse_lits *l, char *path, size_t plen, char *errstr,
                         size_t errlen)
{
    const char *lit;
    const char **names = NULL;
    size_t n = 0, i;
    cJSON *child;
    int rc = 0;

    if (cJSON_IsNumber(v)) {
        /* 1e400 would be printed as null by cJSON and refused by MySQL's
         * JSON column as written: neither is the client's text. */
        if (!isfinite(v->valuedouble)) {
            snprintf(errstr, errlen, "the number at '%s' is out of range", path);
            return HR_PARSE_MALFORMED;
        }
        if ((lit = hr_parse_next_number(l, &n)) == NULL ||
            (v->valuestring = malloc(n + 1)) == NULL) {
            snprintf(errstr, errlen, "a number of the body could not be read");
            return HR_PARSE_MALFORMED;
        }
        memcpy(v->valuestring, lit, n);
        v->valuestring[n] = '\0';
        return 0;
    }
    if (cJSON_IsObject(v) && v->child != NULL) {
        for (child = v->child; child != NULL; child = child->next)
            n++;
        if ((names = malloc(n * sizeof *names)) == NULL) {
            snprintf(errstr, errlen, "out of memory");
            return HR_PARSE_MALFORMED;
        }
        for (i = 0, child = v->child; child != NULL; child = child->next)
            names[i++] = child->string;
        qsort(names, n, sizeof *names, hr_parse_cmp_names);
        for (i = 1; i < n; i++)
            if (strcmp(names[i - 1], names[i]) == 0) {
                snprintf(errstr, errlen, "field '%s%s%s' appears more than once", path,
                         plen > 0 ? "." : "", names[i]);
                free(names);
                return HR_PARSE_DUPLICATE;
            }
        free(names);
    }
    for (child = v->child; child != NULL && rc == 0; child = child->next) {
        size_t sub = plen;

        if (cJSON_IsObject(v))
            sub += (size_t)snprintf(path + plen, HR_PARSE_PATH_MAX - plen, "%s%s",
                                    plen > 0 ? "." : "", child->string);
        else
            sub += (size_t)snprintf(path + plen, HR_PARSE_PATH_MAX - plen, "[]");
        if (sub >= HR_PARSE_PATH_MAX)
            sub = HR_PARSE_PATH_MAX - 1;
        rc = hr_parse_walk(child, l, path, sub, errstr, errlen);
        path[plen] = '\0';
    }
    return rc;
}

int hr_parse_json(const char *body, size_t len, cJSON **out, char *errstr, size_t errlen)
{
    const char *end = NULL, *p;
    char path[HR_PARSE_PATH_MAX] = "";
    hr_parse_lits l;
    cJSON *j;
    int rc;

    *out = NULL;
    /* JSON text is UTF-8 (RFC 8259); cJSON passes other bytes through, and
     * MySQL would refuse them later with an error that is not the client's
     * to retry. */
    if (!hr_utf8_valid(body, len)) {
        snprintf(errstr, errlen, "the body is not valid UTF-8");
        return HR_PARSE_MALFORMED;
    }
    j = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (j == NULL) {
        snprintf(errstr, errlen, "the body is not valid JSON (near byte %zu)",
                 end != NULL ? (size_t)(end - body) : (size_t)0);
        return HR_PARSE_MALFORMED;
    }
    for (p = end; p < body + len && strchr(" \t\r\n", *p) != NULL && *p != '\0'; p++)
        ;
    if (p < body + len) {
        cJSON_Delete(j);
        snprintf(errstr, errlen, "the body has text after the JSON value (byte %zu)",
                 (size_t)(p - body));
        return HR_PARSE_MALFORMED;
    }
    l = (hr_parse_lits){body, end};
    rc = hr_parse_walk(j, &l, path, 0, errstr, errlen);
    if (rc < 0) {
        cJSON_Delete(j);
        return rc;
    }
    *out = j;
    return 0;
}
