/* hr_tz: TZif zones, their cache, and wall-clock conversions (see hr_tz.h).
 *
 * A zone is its transitions (UTC seconds, strictly increasing) with the
 * offset in force from each, the offset before the first one (local time
 * type 0, RFC 8536 3.2) and, past the last one, the footer's POSIX rule:
 * a standard offset and optionally a daylight offset with the two yearly
 * change dates.  Every query turns into "the period around instant T": the
 * offset in force at T and the instants [start, end) it holds over, which
 * is what local-to-UTC walks.
 *
 * The cache is a fixed table of zone pointers under one mutex; a zone is
 * never freed once published (the process keeps at most one copy per zone
 * file, of a few kB each), so readers use it after unlocking.  Unknown or
 * bad names are not cached: a client cannot grow the table with them.
 * When the table is full (more distinct names than HR_TZ_CACHE_MAX), the
 * zone is loaded for the one call and freed after it. */
#include "hr_tz.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hr_civil.h"

#define HR_TZ_CACHE_MAX 1024
/* Largest TZif file read; the biggest zones of tzdata are under 4 kB. */
#define HR_TZ_FILE_MAX (256 * 1024)
/* RFC 8536 recommends offsets within -25:59:59..+25:59:59; tzdata's span
 * -12..+14 h.  Keeping them within 26 h bounds the local-to-UTC walk. */
#define HR_TZ_OFFSET_MAX (26 * 3600)
#define HR_TZ_WALK_MAX 64

typedef enum hr_tz_rule_kind {
    HR_TZ_RULE_JULIAN1, /* Jn: 1..365, Feb 29 never counted */
    HR_TZ_RULE_JULIAN0, /* n: 0..365, Feb 29 counted */
    HR_TZ_RULE_MWD,     /* Mm.w.d: weekday d of week w (5 = last) of month m */
} hr_tz_rule_kind;

typedef struct hr_tz_rule {
    hr_tz_rule_kind kind;
    int day, month, week, wday;
    int32_t secs; /* local time of day of the change, may be < 0 or > 24 h */
} hr_tz_rule;

typedef struct hr_tz_posix {
    int32_t std_off, dst_off;
    bool has_dst;
    hr_tz_rule start, end; /* start: std -> dst; end: dst -> std */
} hr_tz_posix;

typedef struct hr_tz_zone {
    char name[HR_TZ_NAME_MAX + 1];
    int64_t *trans; /* ntrans instants, strictly increasing */
    int32_t *offs;  /* offs[i] in force from trans[i] */
    size_t ntrans;
    int32_t off0;    /* before trans[0] (or always, with no transitions and no rule) */
    bool has_footer; /* footer holds from trans[ntrans - 1] (or always) */
    hr_tz_posix footer;
} hr_tz_zone;

static pthread_mutex_t hr_tz_mu = PTHREAD_MUTEX_INITIALIZER;
static hr_tz_zone *hr_tz_cache[HR_TZ_CACHE_MAX];
static size_t hr_tz_ncache;

static const hr_tz_zone hr_tz_utc = {.name = "UTC", .off0 = 0};

/* ---- names ---- */

bool hr_tz_name_ok(const char *name)
{
    size_t seg = 0, n = 0;

    if (name == NULL)
        return false;
    for (const char *p = name; *p != '\0'; p++, n++) {
        char ch = *p;

        if (n >= HR_TZ_NAME_MAX)
            return false;
        if (ch == '/') {
            if (seg == 0)
                return false; /* leading '/' or "//" */
            seg = 0;
            continue;
        }
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '+' || ch == '-'))
            return false;
        seg++;
    }
    return seg > 0; /* non-empty, no trailing '/' */
}

/* ---- the footer's POSIX TZ string ---- */

/* A zone abbreviation: 3+ letters, or <...> of [A-Za-z0-9+-]. */
static bool hr_tz_posix_name(const char **s)
{
    const char *p = *s;

    if (*p == '<') {
        p++;
        while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
               *p == '+' || *p == '-')
            p++;
        if (*p != '>' || p - *s < 4)
            return false;
        *s = p + 1;
        return true;
    }
    while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
        p++;
    if (p - *s < 3)
        return false;
    *s = p;
    return true;
}

/* Up to MAXD decimal digits (at least one) into *V. */
static bool hr_tz_posix_num(const char **s, int maxd, int *v)
{
    int n = 0;

    *v = 0;
    while (**s >= '0' && **s <= '9' && n < maxd) {
        *v = *v * 10 + (**s - '0');
        (*s)++;
        n++;
    }
    return n > 0 && !(**s >= '0' && **s <= '9');
}

/* [+-]hh[:mm[:ss]] with hh up to MAXH, into seconds. */
static bool hr_tz_posix_hms(const char **s, int maxh, int32_t *secs)
{
    int sign = 1, h, mi = 0, sec = 0;

    if (**s == '+' || **s == '-') {
        sign = **s == '-' ? -1 : 1;
        (*s)++;
    }
    if (!hr_tz_posix_num(s, 3, &h) || h > maxh)
        return false;
    if (**s == ':') {
        (*s)++;
        if (!hr_tz_posix_num(s, 2, &mi) || mi > 59)
            return false;
        if (**s == ':') {
            (*s)++;
            if (!hr_tz_posix_num(s, 2, &sec) || sec > 59)
                return false;
        }
    }
    *secs = sign * (h * 3600 + mi * 60 + sec);
    return true;
}

/* ",date[/time]" into R; the time defaults to 02:00. */
static bool hr_tz_posix_rule(const char **s, hr_tz_rule *r)
{
    if (**s != ',')
        return false;
    (*s)++;
    memset(r, 0, sizeof *r);
    if (**s == 'M') {
        (*s)++;
        r->kind = HR_TZ_RULE_MWD;
        if (!hr_tz_posix_num(s, 2, &r->month) || r->month < 1 || r->month > 12 || **s != '.')
            return false;
        (*s)++;
        if (!hr_tz_posix_num(s, 1, &r->week) || r->week < 1 || r->week > 5 || **s != '.')
            return false;
        (*s)++;
        if (!hr_tz_posix_num(s, 1, &r->wday) || r->wday > 6)
            return false;
    } else if (**s == 'J') {
        (*s)++;
        r->kind = HR_TZ_RULE_JULIAN1;
        if (!hr_tz_posix_num(s, 3, &r->day) || r->day < 1 || r->day > 365)
            return false;
    } else {
        r->kind = HR_TZ_RULE_JULIAN0;
        if (!hr_tz_posix_num(s, 3, &r->day) || r->day > 365)
            return false;
    }
    r->secs = 2 * 3600;
    if (**s == '/') {
        (*s)++;
        /* RFC 8536 3.3.1 extends the hour to -167..167. */
        if (!hr_tz_posix_hms(s, 167, &r->secs))
            return false;
    }
    return true;
}

/* The footer text (without its newlines), e.g. "CET-1CEST,M3.5.0,M10.5.0/3"
 * or "<+0530>-5:30".  POSIX offsets count west of UTC: the sign flips. */
static bool hr_tz_posix_parse(const char *s, hr_tz_posix *px)
{
    int32_t off;

    memset(px, 0, sizeof *px);
    if (!hr_tz_posix_name(&s) || !hr_tz_posix_hms(&s, 24, &off))
        return false;
    px->std_off = -off;
    if (*s == '\0')
        return true;
    if (!hr_tz_posix_name(&s))
        return false;
    px->has_dst = true;
    px->dst_off = px->std_off + 3600;
    if (*s != ',' && *s != '\0') {
        if (!hr_tz_posix_hms(&s, 24, &off))
            return false;
        px->dst_off = -off;
    }
    /* POSIX leaves the rule of "EST5EDT" to the implementation; zic always
     * writes one, so a footer without it is refused, not guessed. */
    if (!hr_tz_posix_rule(&s, &px->start) || !hr_tz_posix_rule(&s, &px->end) || *s != '\0')
        return false;
    return true;
}

/* Local seconds since the epoch (the wall clock read as if it were UTC) of
 * rule R's change in year Y. */
static int64_t hr_tz_rule_local(const hr_tz_rule *r, int y)
{
    int64_t day;

    switch (r->kind) {
    case HR_TZ_RULE_JULIAN1:
        day = hr_civil_days(y, 1, 1) + r->day - 1 + (hr_civil_leap(y) && r->day >= 60);
        break;
    case HR_TZ_RULE_JULIAN0:
        day = hr_civil_days(y, 1, 1) + r->day;
        break;
    default: {
        int64_t first = hr_civil_days(y, r->month, 1);
        int wd1 = (int)((first % 7 + 7 + 4) % 7); /* 1970-01-01 was a Thursday (4) */
        int mday = 1 + (r->wday - wd1 + 7) % 7 + (r->week - 1) * 7;

        while (mday > hr_civil_month_days(y, r->month))
            mday -= 7;
        day = first + mday - 1;
        break;
    }
    }
    return day * 86400 + r->secs;
}

/* ---- periods ---- */

typedef struct hr_tz_period {
    int32_t off;
    int64_t start, end; /* UTC seconds; INT64_MIN / INT64_MAX when unbounded */
} hr_tz_period;

/* The footer's period around T (UTC seconds), from the changes of the years
 * around T's.  Changes are listed year by year, start before end, and sorted
 * stably: where one year's end meets the next year's start (all-year
 * daylight time, e.g. "EST5EDT,0/0,J365/25") the later rule wins. */
static void hr_tz_posix_period(const hr_tz_posix *px, int64_t t, hr_tz_period *p)
{
    struct change {
        int64_t at;
        int32_t off;
    } ch[6], tmp;
    int y, mo, d;
    size_t n = 0, i, j;

    p->off = px->std_off;
    p->start = INT64_MIN;
    p->end = INT64_MAX;
    if (!px->has_dst)
        return;
    hr_civil_date(hr_civil_floordiv(t + px->std_off, 86400), &y, &mo, &d);
    for (int yy = y - 1; yy <= y + 1; yy++) {
        ch[n++] = (struct change){hr_tz_rule_local(&px->start, yy) - px->std_off, px->dst_off};
        ch[n++] = (struct change){hr_tz_rule_local(&px->end, yy) - px->dst_off, px->std_off};
    }
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && ch[j - 1].at > ch[j].at; j--) {
            tmp = ch[j];
            ch[j] = ch[j - 1];
            ch[j - 1] = tmp;
        }
    /* Before the first listed change: the offset the last one of the year
     * before would leave, i.e. the other side of ch[0]. */
    p->off = ch[0].off == px->dst_off ? px->std_off : px->dst_off;
    p->end = ch[0].at;
    for (i = 0; i < n && ch[i].at <= t; i++) {
        p->off = ch[i].off;
        p->start = ch[i].at;
        p->end = i + 1 < n ? ch[i + 1].at : INT64_MAX;
    }
}

/* The period of Z around T (UTC seconds). */
static void hr_tz_period_at(const hr_tz_zone *z, int64_t t, hr_tz_period *p)
{
    size_t lo = 0, hi = z->ntrans;

    if (z->ntrans == 0 || t < z->trans[0]) {
        if (z->ntrans == 0 && z->has_footer) {
            hr_tz_posix_period(&z->footer, t, p);
            return;
        }
        p->off = z->off0;
        p->start = INT64_MIN;
        p->end = z->ntrans > 0 ? z->trans[0] : INT64_MAX;
        return;
    }
    /* The last transition <= t. */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;

        if (z->trans[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    if (lo + 1 < z->ntrans) {
        p->off = z->offs[lo];
        p->start = z->trans[lo];
        p->end = z->trans[lo + 1];
        return;
    }
    if (!z->has_footer) {
        p->off = z->offs[lo];
        p->start = z->trans[lo];
        p->end = INT64_MAX;
        return;
    }
    hr_tz_posix_period(&z->footer, t, p);
    if (p->start < z->trans[lo])
        p->start = z->trans[lo];
}

/* ---- loading ---- */

static uint32_t hr_tz_be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static int64_t hr_tz_be64(const unsigned char *b)
{
    return (int64_t)((uint64_t)hr_tz_be32(b) << 32 | hr_tz_be32(b + 4));
}

static void hr_tz_zone_free(hr_tz_zone *z)
{
    if (z == NULL)
        return;
    free(z->trans);
    free(z->offs);
    free(z);
}

/* Reads the whole regular file PATH (at most HR_TZ_FILE_MAX bytes) into a
 * malloc'd *BUF. */
static int hr_tz_read_file(const char *path, unsigned char **buf, size_t *len, char *errstr,
                           size_t errlen)
{
    struct stat st;
    int fd, rc = HR_TZ_ERR_UNKNOWN;
    size_t got = 0;

    *buf = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(errstr, errlen, "unknown time zone (%s)", strerror(errno));
        return HR_TZ_ERR_UNKNOWN;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(errstr, errlen, "unknown time zone (not a zone file)");
        goto cleanup;
    }
    rc = HR_TZ_ERR_FILE;
    if (st.st_size < 44 || st.st_size > HR_TZ_FILE_MAX) {
        snprintf(errstr, errlen, "zone file of %lld bytes", (long long)st.st_size);
        goto cleanup;
    }
    *buf = malloc((size_t)st.st_size);
    if (*buf == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto cleanup;
    }
    while (got < (size_t)st.st_size) {
        ssize_t k = read(fd, *buf + got, (size_t)st.st_size - got);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            snprintf(errstr, errlen, "zone file read failed");
            goto cleanup;
        }
        got += (size_t)k;
    }
    *len = got;
    rc = 0;
cleanup:
    if (rc != 0) {
        free(*buf);
        *buf = NULL;
    }
    close(fd);
    return rc;
}

typedef struct hr_tz_counts {
    uint32_t isut, isstd, leap, time, type, chars;
} hr_tz_counts;

/* The 44-byte header at B (LEN bytes left); false if not TZif. */
static bool hr_tz_header(const unsigned char *b, size_t len, hr_tz_counts *c, char *version)
{
    if (len < 44 || memcmp(b, "TZif", 4) != 0)
        return false;
    *version = (char)b[4];
    c->isut = hr_tz_be32(b + 20);
    c->isstd = hr_tz_be32(b + 24);
    c->leap = hr_tz_be32(b + 28);
    c->time = hr_tz_be32(b + 32);
    c->type = hr_tz_be32(b + 36);
    c->chars = hr_tz_be32(b + 40);
    /* RFC 8536 3.1: at least one type, at most 256 (an 8-bit index), and
     * the indicator arrays are either absent or one per type. */
    return c->type >= 1 && c->type <= 256 && c->chars >= 1 && c->time <= 100000 &&
           c->leap <= 100000 && (c->isut == 0 || c->isut == c->type) &&
           (c->isstd == 0 || c->isstd == c->type);
}

/* Bytes of a data block with TSZ-byte times. */
static size_t hr_tz_block_len(const hr_tz_counts *c, size_t tsz)
{
    return (size_t)c->time * (tsz + 1) + (size_t)c->type * 6 + c->chars +
           (size_t)c->leap * (tsz + 4) + c->isstd + c->isut;
}

/* The TZif data in B (LEN bytes) into *OUT (the caller's, hr_tz_zone_free). */
static int hr_tz_parse(const char *name, const unsigned char *b, size_t len, hr_tz_zone **out,
                       char *errstr, size_t errlen)
{
    hr_tz_counts c;
    hr_tz_zone *z = NULL;
    const unsigned char *data, *types, *foot, *nl;
    char version, text[128];
    size_t v1len, dlen;
    int32_t *type_off = NULL;
    int rc = HR_TZ_ERR_FILE;

    *out = NULL;
    if (!hr_tz_header(b, len, &c, &version) || version < '2') {
        snprintf(errstr, errlen, "not a TZif file of version 2 or later");
        goto cleanup;
    }
    /* Skip the 32-bit block to the second header. */
    v1len = 44 + hr_tz_block_len(&c, 4);
    if (v1len > len || !hr_tz_header(b + v1len, len - v1len, &c, &version)) {
        snprintf(errstr, errlen, "TZif file without a valid 64-bit section");
        goto cleanup;
    }
    data = b + v1len + 44;
    dlen = hr_tz_block_len(&c, 8);
    if (dlen > len - v1len - 44) {
        snprintf(errstr, errlen, "truncated TZif file");
        goto cleanup;
    }
    if (c.leap != 0) {
        /* "right/" zones count leap seconds; herald's times are POSIX. */
        snprintf(errstr, errlen, "zone with leap seconds (use the zone without right/)");
        goto cleanup;
    }
    z = calloc(1, sizeof *z);
    type_off = calloc(c.type, sizeof *type_off);
    if (z == NULL || type_off == NULL ||
        (c.time > 0 &&
         ((z->trans = calloc(c.time, 8)) == NULL || (z->offs = calloc(c.time, 4)) == NULL))) {
        snprintf(errstr, errlen, "out of memory");
        goto cleanup;
    }
    snprintf(z->name, sizeof z->name, "%s", name);
    types = data + (size_t)c.time * 9;
    for (uint32_t i = 0; i < c.type; i++) {
        type_off[i] = (int32_t)hr_tz_be32(types + i * 6);
        if (type_off[i] < -HR_TZ_OFFSET_MAX || type_off[i] > HR_TZ_OFFSET_MAX ||
            types[i * 6 + 5] >= c.chars) {
            snprintf(errstr, errlen, "TZif local time type %u out of range", i);
            goto cleanup;
        }
    }
    z->off0 = type_off[0];
    z->ntrans = c.time;
    for (uint32_t i = 0; i < c.time; i++) {
        uint8_t idx = data[(size_t)c.time * 8 + i];

        z->trans[i] = hr_tz_be64(data + (size_t)i * 8);
        if (idx >= c.type || (i > 0 && z->trans[i] <= z->trans[i - 1])) {
            snprintf(errstr, errlen, "TZif transition %u is out of order or of no type", i);
            goto cleanup;
        }
        z->offs[i] = type_off[idx];
    }
    /* The footer: "\n" TZ-string "\n" right after the data. */
    foot = data + dlen;
    if ((size_t)(foot - b) < len) {
        size_t left = len - (size_t)(foot - b), n;

        nl = left > 1 ? memchr(foot + 1, '\n', left - 1) : NULL;
        if (foot[0] != '\n' || nl == NULL || (n = (size_t)(nl - foot - 1)) >= sizeof text) {
            snprintf(errstr, errlen, "TZif footer is malformed");
            goto cleanup;
        }
        memcpy(text, foot + 1, n);
        text[n] = '\0';
        if (n > 0) {
            if (!hr_tz_posix_parse(text, &z->footer)) {
                snprintf(errstr, errlen, "TZif footer \"%s\" is not a POSIX TZ string", text);
                goto cleanup;
            }
            z->has_footer = true;
        }
    }
    *out = z;
    z = NULL;
    rc = 0;
cleanup:
    free(type_off);
    hr_tz_zone_free(z);
    return rc;
}

static int hr_tz_load(const char *name, hr_tz_zone **out, char *errstr, size_t errlen)
{
    char path[sizeof HR_TZ_DIR + 1 + HR_TZ_NAME_MAX + 1];
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc;

    snprintf(path, sizeof path, "%s/%s", HR_TZ_DIR, name);
    rc = hr_tz_read_file(path, &buf, &len, errstr, errlen);
    if (rc == 0)
        rc = hr_tz_parse(name, buf, len, out, errstr, errlen);
    free(buf);
    return rc;
}

/* The zone NAME into *Z; *OWNED is set when the caller must free it (the
 * cache was full). */
static int hr_tz_get(const char *name, const hr_tz_zone **z, hr_tz_zone **owned, char *errstr,
                     size_t errlen)
{
    hr_tz_zone *loaded = NULL;
    int rc;

    *z = NULL;
    *owned = NULL;
    if (!hr_tz_name_ok(name)) {
        snprintf(errstr, errlen, "not a time zone name");
        return HR_TZ_ERR_NAME;
    }
    if (strcmp(name, "UTC") == 0) {
        *z = &hr_tz_utc;
        return 0;
    }
    pthread_mutex_lock(&hr_tz_mu);
    for (size_t i = 0; i < hr_tz_ncache; i++)
        if (strcmp(hr_tz_cache[i]->name, name) == 0) {
            *z = hr_tz_cache[i];
            pthread_mutex_unlock(&hr_tz_mu);
            return 0;
        }
    pthread_mutex_unlock(&hr_tz_mu);
    /* Loaded outside the lock (file I/O); two threads may both load a new
     * zone, and the second one's copy is dropped below. */
    rc = hr_tz_load(name, &loaded, errstr, errlen);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&hr_tz_mu);
    for (size_t i = 0; i < hr_tz_ncache; i++)
        if (strcmp(hr_tz_cache[i]->name, name) == 0) {
            *z = hr_tz_cache[i];
            break;
        }
    if (*z == NULL && hr_tz_ncache < HR_TZ_CACHE_MAX) {
        hr_tz_cache[hr_tz_ncache++] = loaded;
        *z = loaded;
        loaded = NULL;
    }
    pthread_mutex_unlock(&hr_tz_mu);
    if (*z == NULL) {
        *z = loaded;
        *owned = loaded;
    } else {
        hr_tz_zone_free(loaded);
    }
    return 0;
}

/* ---- queries ---- */

int hr_tz_check(const char *zone, char *errstr, size_t errlen)
{
    const hr_tz_zone *z;
    hr_tz_zone *owned;
    int rc = hr_tz_get(zone, &z, &owned, errstr, errlen);

    hr_tz_zone_free(owned);
    return rc;
}

int hr_tz_offset_at(const char *zone, int64_t utc_ms, int32_t *offset_s, char *errstr,
                    size_t errlen)
{
    const hr_tz_zone *z;
    hr_tz_zone *owned;
    hr_tz_period p;
    int rc;

    if (utc_ms < HR_TZ_MIN_MS || utc_ms >= HR_TZ_END_MS) {
        snprintf(errstr, errlen, "time outside years 1..9999");
        return HR_TZ_ERR_RANGE;
    }
    rc = hr_tz_get(zone, &z, &owned, errstr, errlen);
    if (rc != 0)
        return rc;
    hr_tz_period_at(z, hr_civil_floordiv(utc_ms, 1000), &p);
    *offset_s = p.off;
    hr_tz_zone_free(owned);
    return 0;
}

/* Walks the periods around the local time L (wall seconds read as UTC):
 * the first period whose wall-clock span holds L gives the instant (the
 * earlier one of an overlap); if L falls between two spans, it is a gap
 * and the offset before it applies. */
static int64_t hr_tz_resolve(const hr_tz_zone *z, int64_t l)
{
    hr_tz_period p;
    int64_t t = l - HR_TZ_OFFSET_MAX, prev_off;
    int i;

    hr_tz_period_at(z, t, &p);
    prev_off = p.off;
    for (i = 0; i < HR_TZ_WALK_MAX; i++) {
        bool begun = p.start == INT64_MIN || l >= p.start + p.off;
        bool before_end = p.end == INT64_MAX || l < p.end + p.off;

        if (p.start != p.end) { /* an empty period has no wall time */
            if (!begun)
                return l - prev_off; /* the gap before p */
            if (before_end)
                return l - p.off;
            prev_off = p.off;
        }
        if (p.end == INT64_MAX)
            break;
        hr_tz_period_at(z, p.end, &p);
    }
    /* Not reached with offsets within HR_TZ_OFFSET_MAX: the walk starts
     * 26 h before L and periods do not shrink to nothing 64 times in a row. */
    return l - prev_off;
}

int hr_tz_local_to_utc(const char *zone, int y, int m, int d, int hh, int mm, int ss,
                       int64_t *utc_ms, char *errstr, size_t errlen)
{
    const hr_tz_zone *z;
    hr_tz_zone *owned;
    int rc;

    if (y < 1 || y > 9999 || m < 1 || m > 12 || d < 1 || d > hr_civil_month_days(y, m) || hh < 0 ||
        hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 59) {
        snprintf(errstr, errlen, "not a calendar time of years 1..9999");
        return HR_TZ_ERR_RANGE;
    }
    rc = hr_tz_get(zone, &z, &owned, errstr, errlen);
    if (rc != 0)
        return rc;
    *utc_ms = hr_tz_resolve(z, hr_civil_days(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss) * 1000;
    hr_tz_zone_free(owned);
    return 0;
}
