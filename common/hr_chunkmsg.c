/* hr_chunkmsg: the Kafka chunk message (see hr_chunkmsg.h and
 * schemas/kafka/chunk.v1.json).
 *
 * Decoding uses a small strict parser instead of a general JSON library:
 * the value is one flat object of six or seven integer fields, and parsing the
 * digits ourselves keeps every int64 exact (a double-based parser rounds
 * above 2^53) and rejects fractions, exponents and strings outright. */
#include "hr_chunkmsg.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hr_shard.h"

#define HR_CHUNKMSG_MAX_COUNT 100000

/* F_SHARD is optional: a task of several shards only (hr_shard.h). */
enum { F_V, F_TASK, F_SEQ, F_COUNT, F_DUE_MS, F_PUBLISHED_MS, F_SHARD, F__COUNT };

static const struct hr_chunkmsg_field {
    const char *name;
    int64_t min;
    int64_t max;
} hr_chunkmsg_fields[F__COUNT] = {
    [F_V] = {"v", INT64_MIN, INT64_MAX},
    [F_TASK] = {"task", 1, INT64_MAX},
    [F_SEQ] = {"seq", 1, INT64_MAX},
    [F_COUNT] = {"count", 0, HR_CHUNKMSG_MAX_COUNT},
    [F_DUE_MS] = {"due_ms", 0, INT64_MAX},
    [F_PUBLISHED_MS] = {"published_ms", 0, INT64_MAX},
    [F_SHARD] = {"shard", 0, HR_SHARDS_MAX - 1},
};

typedef struct hr_chunkmsg_parser {
    const char *start;
    const char *p;
    const char *end;
    char *errstr;
    size_t errlen;
} hr_chunkmsg_parser;

int hr_chunkmsg_encode(const hr_chunkmsg *msg, char *buf, size_t len)
{
    int n = snprintf(buf, len,
                     "{\"v\":%d,\"task\":%" PRId64 ",\"seq\":%" PRId64 ",\"count\":%" PRId64
                     ",\"due_ms\":%" PRId64 ",\"published_ms\":%" PRId64 "}",
                     HR_CHUNKMSG_VERSION, msg->task, msg->seq, msg->count, msg->due_ms,
                     msg->published_ms);

    if (n < 0 || (size_t)n >= len)
        return -1;
    /* A sharded task's chunk: the field replaces the closing brace.  An old
     * worker's strict decoder refuses it (docs/architecture.md). */
    if (msg->sharded)
        n += snprintf(buf + n - 1, len - (size_t)n + 1, ",\"shard\":%d}", msg->shard) - 1;
    return n < 0 || (size_t)n >= len ? -1 : n;
}

int hr_chunkmsg_key(const hr_chunkmsg *msg, bool redelivery, char *buf, size_t len)
{
    int n = redelivery ? snprintf(buf, len, "%" PRId64 ":%" PRId64 ":%" PRId64, msg->task, msg->seq,
                                  msg->published_ms)
                       : snprintf(buf, len, "%" PRId64 ":%" PRId64, msg->task, msg->seq);

    return n < 0 || (size_t)n >= len ? -1 : n;
}

static void hr_chunkmsg_ws(hr_chunkmsg_parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int hr_chunkmsg_fail(hr_chunkmsg_parser *ps, const char *what)
{
    if (ps->p < ps->end)
        snprintf(ps->errstr, ps->errlen, "%s at byte %td", what, ps->p - ps->start);
    else
        snprintf(ps->errstr, ps->errlen, "%s at end of message", what);
    return -1;
}

static int hr_chunkmsg_expect(hr_chunkmsg_parser *ps, char c, const char *what)
{
    hr_chunkmsg_ws(ps);
    if (ps->p >= ps->end || *ps->p != c)
        return hr_chunkmsg_fail(ps, what);
    ps->p++;
    return 0;
}

/* A key: a plain string without escapes (every herald field name is
 * plain ASCII; an escaped key is as unknown as any other). */
static int hr_chunkmsg_key_index(hr_chunkmsg_parser *ps)
{
    const char *start;
    size_t n;

    if (hr_chunkmsg_expect(ps, '"', "expected a field name") != 0)
        return -1;
    start = ps->p;
    while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' && (unsigned char)*ps->p >= 0x20)
        ps->p++;
    if (ps->p >= ps->end || *ps->p != '"')
        return hr_chunkmsg_fail(ps, "bad field name");
    n = (size_t)(ps->p - start);
    ps->p++;
    for (int i = 0; i < F__COUNT; i++)
        if (strlen(hr_chunkmsg_fields[i].name) == n &&
            memcmp(hr_chunkmsg_fields[i].name, start, n) == 0)
            return i;
    snprintf(ps->errstr, ps->errlen, "unknown field \"%.*s\"", (int)(n > 32 ? 32 : n), start);
    return -1;
}

/* A JSON integer (no fraction, no exponent) that fits in int64. */
static int hr_chunkmsg_int(hr_chunkmsg_parser *ps, const char *name, int64_t *out)
{
    bool neg = false;
    uint64_t v = 0, limit;
    const char *digits;

    hr_chunkmsg_ws(ps);
    if (ps->p < ps->end && *ps->p == '-') {
        neg = true;
        ps->p++;
    }
    limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    digits = ps->p;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        unsigned d = (unsigned)(*ps->p - '0');
        if (v > (limit - d) / 10) {
            snprintf(ps->errstr, ps->errlen, "field %s: number out of range", name);
            return -1;
        }
        v = v * 10 + d;
        ps->p++;
    }
    if (ps->p == digits || (ps->p - digits > 1 && *digits == '0') ||
        (ps->p < ps->end && (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E'))) {
        snprintf(ps->errstr, ps->errlen, "field %s: not an integer", name);
        return -1;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

int hr_chunkmsg_decode(const void *data, size_t len, hr_chunkmsg *out, char *errstr, size_t errlen)
{
    hr_chunkmsg_parser ps = {data, data, (const char *)data + len, errstr, errlen};
    int64_t values[F__COUNT];
    bool seen[F__COUNT] = {false};
    bool shard;

    if (len > HR_CHUNKMSG_MAX_BYTES) {
        snprintf(errstr, errlen, "message of %zu bytes exceeds %d", len, HR_CHUNKMSG_MAX_BYTES);
        return -1;
    }
    if (hr_chunkmsg_expect(&ps, '{', "expected a JSON object") != 0)
        return -1;
    for (;;) {
        int i = hr_chunkmsg_key_index(&ps);
        if (i < 0)
            return -1;
        if (seen[i]) {
            snprintf(errstr, errlen, "duplicate field \"%s\"", hr_chunkmsg_fields[i].name);
            return -1;
        }
        seen[i] = true;
        if (hr_chunkmsg_expect(&ps, ':', "expected ':'") != 0 ||
            hr_chunkmsg_int(&ps, hr_chunkmsg_fields[i].name, &values[i]) != 0)
            return -1;
        hr_chunkmsg_ws(&ps);
        if (ps.p < ps.end && *ps.p == ',') {
            ps.p++;
            continue;
        }
        if (hr_chunkmsg_expect(&ps, '}', "expected ',' or '}'") != 0)
            return -1;
        break;
    }
    hr_chunkmsg_ws(&ps);
    if (ps.p != ps.end)
        return hr_chunkmsg_fail(&ps, "trailing bytes");
    shard = seen[F_SHARD];
    seen[F_SHARD] = true; /* optional */
    for (int i = 0; i < F__COUNT; i++) {
        if (!seen[i]) {
            snprintf(errstr, errlen, "missing field \"%s\"", hr_chunkmsg_fields[i].name);
            return -1;
        }
    }
    if (values[F_V] != HR_CHUNKMSG_VERSION) {
        snprintf(errstr, errlen, "unknown version %" PRId64, values[F_V]);
        return -1;
    }
    for (int i = 0; i < F__COUNT; i++) {
        if (i == F_SHARD && !shard)
            continue;
        if (values[i] < hr_chunkmsg_fields[i].min || values[i] > hr_chunkmsg_fields[i].max) {
            snprintf(errstr, errlen, "field %s: %" PRId64 " outside %" PRId64 "..%" PRId64,
                     hr_chunkmsg_fields[i].name, values[i], hr_chunkmsg_fields[i].min,
                     hr_chunkmsg_fields[i].max);
            return -1;
        }
    }
    /* Padding included: a decoded message compares with memcmp. */
    memset(out, 0, sizeof *out);
    out->task = values[F_TASK];
    out->seq = values[F_SEQ];
    out->count = values[F_COUNT];
    out->due_ms = values[F_DUE_MS];
    out->published_ms = values[F_PUBLISHED_MS];
    out->sharded = shard;
    out->shard = shard ? (int)values[F_SHARD] : 0;
    return 0;
}
