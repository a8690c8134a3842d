/* hr_slot: the key -> slot function of Redis Cluster and the slot of a
 * formatted command (see hr_slot.h).  The CRC table below is the one of
 * the polynomial 0x1021: entry i is i << 8 shifted through eight rounds of
 * it, so one table lookup replaces eight shifts per byte. */
#include "hr_slot.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

static const uint16_t hr_slot_crc_table[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7, 0x8108, 0x9129, 0xa14a, 0xb16b,
    0xc18c, 0xd1ad, 0xe1ce, 0xf1ef, 0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
    0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de, 0x2462, 0x3443, 0x0420, 0x1401,
    0x64e6, 0x74c7, 0x44a4, 0x5485, 0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
    0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4, 0xb75b, 0xa77a, 0x9719, 0x8738,
    0xf7df, 0xe7fe, 0xd79d, 0xc7bc, 0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
    0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b, 0x5af5, 0x4ad4, 0x7ab7, 0x6a96,
    0x1a71, 0x0a50, 0x3a33, 0x2a12, 0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
    0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41, 0xedae, 0xfd8f, 0xcdec, 0xddcd,
    0xad2a, 0xbd0b, 0x8d68, 0x9d49, 0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
    0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78, 0x9188, 0x81a9, 0xb1ca, 0xa1eb,
    0xd10c, 0xc12d, 0xf14e, 0xe16f, 0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
    0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e, 0x02b1, 0x1290, 0x22f3, 0x32d2,
    0x4235, 0x5214, 0x6277, 0x7256, 0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
    0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405, 0xa7db, 0xb7fa, 0x8799, 0x97b8,
    0xe75f, 0xf77e, 0xc71d, 0xd73c, 0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
    0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab, 0x5844, 0x4865, 0x7806, 0x6827,
    0x18c0, 0x08e1, 0x3882, 0x28a3, 0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
    0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92, 0xfd2e, 0xed0f, 0xdd6c, 0xcd4d,
    0xbdaa, 0xad8b, 0x9de8, 0x8dc9, 0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
    0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8, 0x6e17, 0x7e36, 0x4e55, 0x5e74,
    0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

uint16_t hr_slot_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)(crc << 8) ^ hr_slot_crc_table[((crc >> 8) ^ (uint8_t)buf[i]) & 0xff];
    return crc;
}

int hr_slot_of_key(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len), *close;

    if (open != NULL) {
        close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
        if (close != NULL && close > open + 1) {
            key = open + 1;
            len = (size_t)(close - key);
        }
    }
    return hr_slot_crc16(key, len) & (HR_SLOT_COUNT - 1);
}

/* A glob character of Redis's stringmatchlen, or its escape. */
static bool hr_slot_glob_char(char ch)
{
    return ch == '*' || ch == '?' || ch == '[' || ch == '\\';
}

int hr_slot_of_pattern(const char *pattern, size_t len)
{
    const char *open = memchr(pattern, '{', len), *close = NULL;

    if (open != NULL)
        close = memchr(open + 1, '}', len - (size_t)(open + 1 - pattern));
    /* Every key the pattern matches starts with the literal bytes before
     * the first glob character; when those hold a complete non-empty tag,
     * every such key has that tag. */
    if (close == NULL || close == open + 1)
        return HR_SLOT_ALL;
    for (const char *p = pattern; p <= close; p++)
        if (hr_slot_glob_char(*p))
            return HR_SLOT_ALL;
    return hr_slot_of_key(pattern, (size_t)(close + 1 - pattern));
}

/* Reads "<prefix char><decimal>\r\n" at *P (below END) into *OUT. */
static bool hr_slot_header(const char **p, const char *end, char prefix, size_t *out)
{
    const char *s = *p;
    size_t v = 0;

    if (s >= end || *s++ != prefix || s >= end || *s < '0' || *s > '9')
        return false;
    while (s < end && *s >= '0' && *s <= '9') {
        if (v > (SIZE_MAX - 9) / 10)
            return false;
        v = v * 10 + (size_t)(*s++ - '0');
    }
    if (end - s < 2 || s[0] != '\r' || s[1] != '\n')
        return false;
    *p = s + 2;
    *out = v;
    return true;
}

int hr_slot_args(const char *cmd, size_t len, hr_slot_arg *args, int max)
{
    const char *p = cmd, *end = cmd + len;
    size_t n, alen;

    if (!hr_slot_header(&p, end, '*', &n) || n > INT32_MAX)
        return -1;
    for (size_t i = 0; i < n && i < (size_t)max; i++) {
        if (!hr_slot_header(&p, end, '$', &alen) || (size_t)(end - p) < alen + 2 ||
            p[alen] != '\r' || p[alen + 1] != '\n')
            return -1;
        args[i].p = p;
        args[i].len = alen;
        p += alen + 2;
    }
    return (int)n;
}

/* Does argument A spell NAME, in any case? */
static bool hr_slot_is(const hr_slot_arg *a, const char *name)
{
    return a->len == strlen(name) && strncasecmp(a->p, name, a->len) == 0;
}

/* Commands of herald (and of an operator's redis-cli habits) that take no
 * key: any master answers them. */
static const char *const hr_slot_keyless[] = {
    "PING",   "TIME",   "INFO", "SCRIPT",   "CLUSTER",   "ECHO",  "AUTH",
    "SELECT", "CLIENT", "ROLE", "READONLY", "READWRITE", "HELLO", "COMMAND",
};

/* The leading arguments looked at: enough for a SCAN's (cursor, MATCH,
 * COUNT, TYPE) and an EVALSHA's first key; a SADD of a chunk's 5,000 uids
 * is read no further. */
#define HR_SLOT_ARGS_MAX 10

int hr_slot_of_command(const char *cmd, size_t len)
{
    hr_slot_arg a[HR_SLOT_ARGS_MAX];
    int n = hr_slot_args(cmd, len, a, HR_SLOT_ARGS_MAX), have;

    if (n < 1)
        return HR_SLOT_ANY;
    have = n < HR_SLOT_ARGS_MAX ? n : HR_SLOT_ARGS_MAX;
    for (size_t i = 0; i < sizeof hr_slot_keyless / sizeof hr_slot_keyless[0]; i++)
        if (hr_slot_is(&a[0], hr_slot_keyless[i]))
            return HR_SLOT_ANY;
    if (hr_slot_is(&a[0], "EVALSHA") || hr_slot_is(&a[0], "EVAL") ||
        hr_slot_is(&a[0], "EVALSHA_RO") || hr_slot_is(&a[0], "EVAL_RO")) {
        /* numkeys is argv[2]: "0" (or junk Redis refuses) has no key */
        if (have < 4 || a[2].len == 0 || a[2].p[0] < '1' || a[2].p[0] > '9')
            return HR_SLOT_ANY;
        return hr_slot_of_key(a[3].p, a[3].len);
    }
    if (hr_slot_is(&a[0], "KEYS"))
        return have < 2 ? HR_SLOT_ANY : hr_slot_of_pattern(a[1].p, a[1].len);
    if (hr_slot_is(&a[0], "SCAN")) {
        /* SCAN cursor [MATCH pattern] [COUNT n] [TYPE t] */
        for (int i = 2; i + 1 < have; i += 2)
            if (hr_slot_is(&a[i], "MATCH"))
                return hr_slot_of_pattern(a[i + 1].p, a[i + 1].len);
        return HR_SLOT_ALL;
    }
    return have < 2 ? HR_SLOT_ANY : hr_slot_of_key(a[1].p, a[1].len);
}
