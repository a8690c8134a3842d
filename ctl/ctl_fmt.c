/* ctl_fmt: parsing and printing helpers of heraldctl (see ctl_fmt.h).
 *
 * Parsers are strict (the whole string must match) because their input is
 * an admin's command line: "5" for a duration or "2026-02-30" for a date is
 * refused with a message rather than guessed at. */
#include "ctl_fmt.h"
#include "hr_parse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ctl_fmt_parse_int(const char *what, const char *s, int64_t min, int64_t max, int64_t *out,
                      char *errstr, size_t errlen)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max) {
        snprintf(errstr, errlen, "%s: \"%.40s\" is not an integer in %" PRId64 "..%" PRId64, what,
                 s, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int ctl_fmt_parse_duration(const char *what, const char *s, int64_t *ms, char *errstr,
                           size_t errlen)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (end != s && s[0] >= '0' && s[0] <= '9' && errno == 0 && v > 0) {
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            if (strcmp(end, units[i].unit) == 0 && v <= INT64_MAX / units[i].ms) {
                *ms = v * units[i].ms;
                return 0;
            }
        }
    }
    snprintf(errstr, errlen, "%s: \"%.40s\" is not a duration like 250ms, 30s, 5m, 2h or 1d", what,
             s);
    return -1;
}

int ctl_fmt_parse_time(const char *what, const char *s, int64_t *ms, char *errstr, size_t errlen)
{
    /* The API's parser: what one refuses, the other refuses too. */
    return hr_parse_time(what, s, ms, errstr, errlen);
}

static char *ctl_fmt_time(int64_t ms, const char *datefmt, const char *suffix, char *buf,
                          size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char date[32];

    if (ms < 0 || gmtime_r(&t, &tm) == NULL) {
        snprintf(buf, len, "-");
        return buf;
    }
    strftime(date, sizeof date, datefmt, &tm);
    snprintf(buf, len, "%s.%03d%s", date, (int)(ms % 1000), suffix);
    return buf;
}

char *ctl_fmt_time_iso(int64_t ms, char *buf, size_t len)
{
    return ctl_fmt_time(ms, "%Y-%m-%dT%H:%M:%S", "Z", buf, len);
}

char *ctl_fmt_time_sql(int64_t ms, char *buf, size_t len)
{
    return ctl_fmt_time(ms, "%Y-%m-%d %H:%M:%S", "", buf, len);
}

char *ctl_fmt_count(int64_t n, char *buf, size_t len)
{
    char digits[32], out[48];
    size_t nd, o = 0;

    snprintf(digits, sizeof digits, "%" PRId64, n < 0 ? -n : n);
    nd = strlen(digits);
    if (n < 0)
        out[o++] = '-';
    for (size_t i = 0; i < nd; i++) {
        if (i > 0 && (nd - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    snprintf(buf, len, "%s", out);
    return buf;
}

char *ctl_fmt_eta(double seconds, char *buf, size_t len)
{
    long s;

    if (seconds < 0 || seconds > 1e9) {
        snprintf(buf, len, "-");
        return buf;
    }
    s = (long)(seconds + 0.5);
    if (s < 60)
        snprintf(buf, len, "%ld s", s);
    else if (s < 3600)
        snprintf(buf, len, "%ld min %02ld s", s / 60, s % 60);
    else
        snprintf(buf, len, "%ld h %02ld min", s / 3600, s / 60 % 60);
    return buf;
}

char *ctl_fmt_bar(double frac, int width, char *buf, size_t len)
{
    int full, i;

    if (len < (size_t)width + 3) {
        snprintf(buf, len, "%s", "");
        return buf;
    }
    if (!(frac >= 0))
        frac = 0;
    if (frac > 1)
        frac = 1;
    full = (int)(frac * width + 0.5);
    buf[0] = '[';
    for (i = 0; i < width; i++)
        buf[1 + i] = i < full ? '#' : '-';
    buf[1 + width] = ']';
    buf[2 + width] = '\0';
    return buf;
}

/* ---- UTF-8 table cells ------------------------------------------------- */

typedef struct fmt_range {
    uint32_t lo, hi;
} fmt_range;

/* Zero columns: combining marks, zero-width spaces and joiners, variation
 * selectors, emoji skin-tone modifiers and tags. */
static const fmt_range fmt_zero[] = {
    {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD},   {0x0610, 0x061A},   {0x064B, 0x065F},
    {0x0E31, 0x0E31}, {0x0E34, 0x0E3A}, {0x0E47, 0x0E4E},   {0x200B, 0x200F},   {0x2028, 0x202E},
    {0x2060, 0x2064}, {0x20D0, 0x20FF}, {0x302A, 0x302F},   {0x3099, 0x309A},   {0xFE00, 0xFE0F},
    {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF}, {0x1F3FB, 0x1F3FF}, {0xE0000, 0xE007F}, {0xE0100, 0xE01EF},
};

/* Two columns: East Asian Wide and Fullwidth, and emoji presentation. */
static const fmt_range fmt_wide[] = {
    {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},
    {0x23F0, 0x23F0},   {0x23F3, 0x23F3},   {0x25FD, 0x25FE},   {0x2614, 0x2615},
    {0x2648, 0x2653},   {0x267F, 0x267F},   {0x2693, 0x2693},   {0x26A1, 0x26A1},
    {0x26AA, 0x26AB},   {0x26BD, 0x26BE},   {0x26C4, 0x26C5},   {0x26CE, 0x26CE},
    {0x26D4, 0x26D4},   {0x26EA, 0x26EA},   {0x26F2, 0x26F3},   {0x26F5, 0x26F5},
    {0x26FA, 0x26FA},   {0x26FD, 0x26FD},   {0x2705, 0x2705},   {0x270A, 0x270B},
    {0x2728, 0x2728},   {0x274C, 0x274C},   {0x274E, 0x274E},   {0x2753, 0x2755},
    {0x2757, 0x2757},   {0x2795, 0x2797},   {0x27B0, 0x27B0},   {0x27BF, 0x27BF},
    {0x2B1B, 0x2B1C},   {0x2B50, 0x2B50},   {0x2B55, 0x2B55},   {0x2E80, 0x303E},
    {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},
    {0xA960, 0xA97F},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},
    {0xFE30, 0xFE6F},   {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x16FE4},
    {0x17000, 0x18AFF}, {0x1B000, 0x1B2FF}, {0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF},
    {0x1F18E, 0x1F18E}, {0x1F191, 0x1F19A}, {0x1F200, 0x1F251}, {0x1F300, 0x1F64F},
    {0x1F680, 0x1F6FF}, {0x1F7E0, 0x1F7EB}, {0x1F90C, 0x1F9FF}, {0x1FA70, 0x1FAFF},
    {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD},
};

static bool fmt_in(uint32_t cp, const fmt_range *r, size_t n)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].lo)
            hi = mid;
        else if (cp > r[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

int ctl_fmt_cp_width(uint32_t cp)
{
    if (fmt_in(cp, fmt_zero, sizeof fmt_zero / sizeof fmt_zero[0]))
        return 0;
    return fmt_in(cp, fmt_wide, sizeof fmt_wide / sizeof fmt_wide[0]) ? 2 : 1;
}

/* Decodes the character at S (strict UTF-8: no overlong forms, surrogates
 * or code points past U+10FFFF).  Its length in bytes, or 0 when S does not
 * start a valid character. */
static size_t fmt_utf8_decode(const unsigned char *s, uint32_t *cp)
{
    size_t n, i;
    uint32_t c = s[0], min;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2, c &= 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3, c &= 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4, c &= 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return n;
}

/* One character of a cell: its bytes as printed and its columns. */
typedef struct fmt_char {
    const char *bytes;
    size_t n, consumed;
    int width;
} fmt_char;

static fmt_char fmt_next(const char *s)
{
    uint32_t cp;
    size_t n = fmt_utf8_decode((const unsigned char *)s, &cp);

    if (n == 0)
        return (fmt_char){"?", 1, 1, 1};
    if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0))
        return (fmt_char){" ", 1, n, 1};
    return (fmt_char){s, n, n, ctl_fmt_cp_width(cp)};
}

#define FMT_ELLIPSIS "\xE2\x80\xA6" /* U+2026, one column */

char *ctl_fmt_cell(const char *s, int width, bool pad, char *buf, size_t len)
{
    const char *p;
    size_t o = 0;
    int total = 0, used = 0, budget;
    bool cut = false;

    if (len == 0)
        return buf;
    if (s == NULL)
        s = "";
    if (width < 0)
        width = 0;
    for (p = s; *p != '\0';) {
        fmt_char c = fmt_next(p);
        total += c.width;
        p += c.consumed;
    }
    /* A cut text keeps one column for the ellipsis. */
    budget = total <= width ? width : width - 1;
    for (p = s; *p != '\0';) {
        fmt_char c = fmt_next(p);
        /* Room for this character, the ellipsis, the padding and the NUL. */
        if (used + c.width > budget ||
            o + c.n + sizeof FMT_ELLIPSIS + (size_t)(width - used) > len) {
            cut = true;
            break;
        }
        memcpy(buf + o, c.bytes, c.n);
        o += c.n;
        used += c.width;
        p += c.consumed;
    }
    if (cut && used < width && o + sizeof FMT_ELLIPSIS <= len) {
        memcpy(buf + o, FMT_ELLIPSIS, sizeof FMT_ELLIPSIS - 1);
        o += sizeof FMT_ELLIPSIS - 1;
        used++;
    }
    while (pad && used < width && o + 1 < len) {
        buf[o++] = ' ';
        used++;
    }
    buf[o] = '\0';
    return buf;
}

int ctl_fmt_read_line(FILE *in, char *line, size_t cap, size_t *n)
{
    if (fgets(line, (int)cap, in) == NULL)
        return 0;
    *n = strlen(line);
    if (*n > 0 && line[*n - 1] == '\n') {
        line[--*n] = '\0';
    } else if (!feof(in)) {
        int ch;

        while ((ch = fgetc(in)) != EOF && ch != '\n')
            ;
        return CTL_FMT_LINE_LONG;
    }
    if (*n > 0 && line[*n - 1] == '\r')
        line[--*n] = '\0';
    return 1;
}
