/* hr_event: the events topic's value, written (see hr_event.h).  The
 * encoder writes the JSON by hand into the caller's buffer: it runs once
 * per push on the worker's reporter thread, where cJSON's tree of
 * allocations would cost more than the write itself. */
#include "hr_event.h"

#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hr_template.h"

/* The type table: wire name and family, by hr_event_type. */
static const struct {
    const char *name;
    hr_event_kind kind;
} hr_event_types[HR_EVENT__TYPES] = {
    [HR_EVENT_SENT] = {"sent", HR_EVENT_OUTCOME},
    [HR_EVENT_FAILED] = {"failed", HR_EVENT_OUTCOME},
    [HR_EVENT_THROTTLED] = {"throttled", HR_EVENT_OUTCOME},
    [HR_EVENT_UNREGISTERED] = {"unregistered", HR_EVENT_OUTCOME},
    [HR_EVENT_EXPIRED] = {"expired", HR_EVENT_OUTCOME},
    [HR_EVENT_PULLED] = {"pulled", HR_EVENT_OUTCOME},
    [HR_EVENT_CANCELLED] = {"cancelled", HR_EVENT_OUTCOME},
    [HR_EVENT_OPENED] = {"opened", HR_EVENT_ENGAGEMENT},
    [HR_EVENT_CLICKED] = {"clicked", HR_EVENT_ENGAGEMENT},
    [HR_EVENT_OPTED_OUT] = {"opted_out", HR_EVENT_OUTCOME},
    [HR_EVENT_SUPPRESSED] = {"suppressed", HR_EVENT_OUTCOME},
};

const char *hr_event_type_name(hr_event_type type)
{
    return (unsigned)type < HR_EVENT__TYPES ? hr_event_types[type].name : NULL;
}

int hr_event_type_parse(const char *name, size_t len, hr_event_type *out)
{
    for (int i = 0; i < HR_EVENT__TYPES; i++)
        if (strlen(hr_event_types[i].name) == len &&
            memcmp(hr_event_types[i].name, name, len) == 0) {
            *out = (hr_event_type)i;
            return 0;
        }
    return -1;
}

hr_event_kind hr_event_type_kind(hr_event_type type)
{
    return (unsigned)type < HR_EVENT__TYPES ? hr_event_types[type].kind : HR_EVENT_OUTCOME;
}

const char *hr_event_kind_name(hr_event_kind kind)
{
    return kind == HR_EVENT_ENGAGEMENT ? "engagement" : "outcome";
}

/* SHA-256, fetched once for the process: OpenSSL 3's one-shot SHA256()
 * looks the algorithm up in its provider store on every call, which was
 * most of the digest's cost with one outcome hashed per push (OpenSSL
 * keeps a fetched algorithm until the process ends).  Each thread that
 * hashes keeps one digest context (EVP_Digest makes and frees one per
 * call), freed when the thread ends by the key's destructor. */
static EVP_MD *hr_event_sha256;
static pthread_key_t hr_event_ctx_key;
static bool hr_event_ctx_keyed;
static pthread_once_t hr_event_sha256_once = PTHREAD_ONCE_INIT;

static void hr_event_ctx_free(void *ctx)
{
    EVP_MD_CTX_free(ctx);
}

static void hr_event_sha256_fetch(void)
{
    hr_event_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    hr_event_ctx_keyed = pthread_key_create(&hr_event_ctx_key, hr_event_ctx_free) == 0;
}

/* The calling thread's digest context, made on its first call; NULL when
 * out of memory. */
static EVP_MD_CTX *hr_event_ctx(void)
{
    EVP_MD_CTX *ctx;

    if (!hr_event_ctx_keyed)
        return NULL;
    if ((ctx = pthread_getspecific(hr_event_ctx_key)) == NULL && (ctx = EVP_MD_CTX_new()) != NULL &&
        pthread_setspecific(hr_event_ctx_key, ctx) != 0) {
        EVP_MD_CTX_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

void hr_event_hash(const char *address, size_t len, unsigned char out[HR_EVENT_HASH_LEN])
{
    EVP_MD_CTX *ctx;

    pthread_once(&hr_event_sha256_once, hr_event_sha256_fetch);
    ctx = hr_event_sha256 != NULL ? hr_event_ctx() : NULL;
    if (ctx == NULL || EVP_DigestInit_ex2(ctx, hr_event_sha256, NULL) != 1 ||
        EVP_DigestUpdate(ctx, address, len) != 1 || EVP_DigestFinal_ex(ctx, out, NULL) != 1)
        SHA256((const unsigned char *)address, len, out);
}

int hr_event_id(const hr_event *ev, char *out, size_t len)
{
    const char *type = hr_event_type_name(ev->type);

    return snprintf(out, len, "%" PRId64 "-%" PRIu64 "-%s", ev->task, ev->uid,
                    type != NULL ? type : "unknown");
}

int hr_event_key(const hr_event *ev, char *out, size_t len)
{
    /* Once per event produced: printf's machinery left out. */
    if (len < HR_BUF_I64_MAX)
        return -1;
    return (int)hr_buf_i64((int64_t)ev->uid, out);
}

/* Writes the literal L at P; the end. */
#define HR_EVENT_LIT(p, l) ((char *)memcpy((p), (l), sizeof(l) - 1) + sizeof(l) - 1)

/* Writes ,"NAME": (NAME a literal without escapes) at P; the end. */
#define HR_EVENT_NAME(p, name) HR_EVENT_LIT((p), ",\"" name "\":")

/* Writes the integer V, or null when NULLED, at P (HR_BUF_I64_MAX bytes of
 * room); the end. */
static char *hr_event_int(char *p, int64_t v, bool nulled)
{
    return nulled ? HR_EVENT_LIT(p, "null") : p + hr_buf_i64(v, p);
}

/* Appends S as a JSON string, or null when S is NULL. */
static int hr_event_str(hr_buf *out, const char *s)
{
    if (s == NULL)
        return hr_buf_append(out, "null", 4);
    return hr_buf_append(out, "\"", 1) < 0 || hr_json_escape_append(out, s, strlen(s)) < 0 ||
                   hr_buf_append(out, "\"", 1) < 0
               ? -1
               : 0;
}

/* The most bytes of an event before its channel's value (the literals' 72,
 * four integers of at most 20 digits and the last one's NUL, the type's
 * name twice and the kind's, at most 12 each: 187) and after it (the literals'
 * 77, four integers and a NUL, the hash's 66: 224), both under this. */
#define HR_EVENT_PART_MAX 256
#define HR_EVENT_STR(x) #x
#define HR_EVENT_XSTR(x) HR_EVENT_STR(x)

int hr_event_encode(const hr_event *ev, hr_buf *out)
{
    static const char hex[] = "0123456789abcdef";
    const char *type = hr_event_type_name(ev->type), *kind;
    size_t start = out->len, tlen, klen, task_len, uid_len;
    /* The fields up to the channel's value, then those after it: each
     * written here and appended at once (the encoder runs once per push on
     * the worker's reporter thread, where an append per field cost more
     * than the event's production to Kafka; issue 30's measurement in
     * docs/performance.md). */
    char head[HR_EVENT_PART_MAX], tail[HR_EVENT_PART_MAX], *p;
    char task[HR_BUF_I64_MAX], uid[HR_BUF_I64_MAX]; /* each written twice */

    if (type == NULL)
        return -1;
    kind = hr_event_kind_name(hr_event_type_kind(ev->type));
    tlen = strlen(type);
    klen = strlen(kind);
    task_len = hr_buf_i64(ev->task, task);
    uid_len = hr_buf_i64((int64_t)ev->uid, uid);
    /* The id as hr_event_id writes it: TASK-UID-TYPE.  The type and kind
     * names are the table's, which need no escapes. */
    p = HR_EVENT_LIT(head, "{\"v\":" HR_EVENT_XSTR(HR_EVENT_VERSION) ",\"id\":\"");
    p = (char *)memcpy(p, task, task_len) + task_len;
    *p++ = '-';
    p = (char *)memcpy(p, uid, uid_len) + uid_len;
    *p++ = '-';
    p = (char *)memcpy(p, type, tlen) + tlen;
    p = HR_EVENT_LIT(p, "\",\"type\":\"");
    p = (char *)memcpy(p, type, tlen) + tlen;
    p = HR_EVENT_LIT(p, "\",\"kind\":\"");
    p = (char *)memcpy(p, kind, klen) + klen;
    p = HR_EVENT_LIT(p, "\"");
    p = HR_EVENT_NAME(p, "task");
    p = (char *)memcpy(p, task, task_len) + task_len;
    p = hr_event_int(HR_EVENT_NAME(p, "series"), ev->series, ev->series <= 0);
    p = HR_EVENT_NAME(p, "uid");
    p = (char *)memcpy(p, uid, uid_len) + uid_len;
    p = HR_EVENT_NAME(p, "channel");
    if (hr_buf_append(out, head, (size_t)(p - head)) < 0 || hr_event_str(out, ev->channel) < 0)
        goto fail;
    p = HR_EVENT_NAME(tail, "address_hash");
    if (ev->has_hash) {
        *p++ = '"';
        for (size_t i = 0; i < HR_EVENT_HASH_LEN; i++) {
            *p++ = hex[ev->address_hash[i] >> 4];
            *p++ = hex[ev->address_hash[i] & 15];
        }
        *p++ = '"';
    } else {
        p = HR_EVENT_LIT(p, "null");
    }
    p = hr_event_int(HR_EVENT_NAME(p, "provider_status"), ev->provider_status,
                     ev->provider_status <= 0);
    p = hr_event_int(HR_EVENT_NAME(p, "attempt"), ev->attempt, false);
    p = hr_event_int(HR_EVENT_NAME(p, "at_ms"), ev->at_ms, false);
    p = hr_event_int(HR_EVENT_NAME(p, "due_ms"), ev->due_ms, ev->due_ms <= 0);
    p = HR_EVENT_NAME(p, "url");
    if (ev->url == NULL)
        p = HR_EVENT_LIT(p, "null}");
    if (hr_buf_append(out, tail, (size_t)(p - tail)) < 0 ||
        (ev->url != NULL && (hr_event_str(out, ev->url) < 0 || hr_buf_append(out, "}", 1) < 0)))
        goto fail;
    return 0;
fail:
    hr_buf_truncate(out, start);
    return -1;
}
