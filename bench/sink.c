/* herald-sink: a fast HTTP/1.1 push-provider stand-in for tests, the demo and
 * benchmarks.
 *
 * Each event-loop thread owns one SO_REUSEPORT listening socket, one epoll
 * set (level-triggered) and its connections, indexed by fd in `conns`.  A
 * connection has an input buffer capped at SINK_MAX_REQ (a request, headers
 * plus body, larger than that gets 413) and an output buffer of queued
 * responses.  Requests may be pipelined; they are answered in order.  Bodies
 * need Content-Length: a request with Transfer-Encoding (chunked) gets 411
 * Length Required and the connection is closed.  Every protocol error (400,
 * 411, 413) closes the connection after a lingering half-close, so the
 * client can finish sending and still read the answer.
 *
 * --latency-ms: every response is appended to the output buffer at once but
 * only released for sending when due.  The delay is the same for every
 * request, so due times are in arrival order and one FIFO per thread (of
 * fd, generation, stream offset, due time) replaces a timer heap; the loop
 * sleeps until the head is due.  The same FIFO type tracks lingering closes.
 *
 * A body that is a JSON array is a batch (a webhook channel's `batch`,
 * docs/providers.md): every "uid" in it is one push, decided, counted and
 * recorded on its own, and the answer is 200 with {"results": [...]}, one
 * entry per uid in order — {"status":"ok"}, or {"status":"error",
 * "error":..., "retry":true|false} for an injected failure (temporary:
 * retry, permanent: none); a throttled batch is one 429.
 *
 * Fault injection is decided from a 64-bit hash of the uid and --seed, so a
 * run is repeatable.  --fail-first needs to know whether a uid was seen
 * before; only uids the hash selects for a first failure are remembered, as
 * 64-bit hashes in an open-addressing set shared by the threads (mutex).
 * Counters are shared atomics.  The record file is written with O_APPEND
 * from a per-thread buffer holding whole lines, flushed when full, every
 * 100 ms and at exit, so lines of different threads never interleave.
 *
 * SIGTERM/SIGINT set a flag that every loop checks at least every 100 ms;
 * the threads flush, free everything and the process exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SINK_MAX_REQ (64 * 1024)    /* largest request, headers + body */
#define SINK_OUT_HIGH (256 * 1024)  /* stop parsing while this much output is queued */
#define SINK_RECORD_BUF (64 * 1024) /* per-thread record buffer */
#define SINK_TICK_MS 100            /* record flush and stop-flag period */
#define SINK_LINGER_MS 2000         /* how long a closing connection may drain */
#define SINK_UID_MAX 128            /* longest uid written to the record file */
#define SINK_MAX_THREADS 64

/* ---- configuration and shared state --------------------------------- */

typedef struct sink_conf {
    char host[256];
    char port[16];
    const char *record_path;
    unsigned fail_first;     /* in 1/100 of a percent: 1000 = 10 % */
    unsigned fail_permanent; /* likewise */
    int64_t throttle_ms;
    int64_t latency_ms;
    int status_ok;
    uint64_t seed;
    int threads;
} sink_conf;

/* The uid hashes already answered with their first failure. */
typedef struct sink_seen {
    pthread_mutex_t lock;
    uint64_t *slots; /* 0 = empty */
    size_t cap, count;
} sink_seen;

typedef struct sink_shared {
    sink_conf conf;
    int record_fd;
    sink_seen seen;
    _Atomic int64_t first_request_ms; /* monotonic ms of the first push, 0 = none yet */
    _Atomic uint64_t requests;
    _Atomic uint64_t by_status[600];
} sink_shared;

static atomic_int sink_stop; /* lock-free, so a signal handler may set it */

/* ---- small helpers ---------------------------------------------------- */

static int64_t sink_now_ms(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t sink_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* FNV-1a over S, then mixed with SALT so each decision is independent. */
static uint64_t sink_hash(const char *s, size_t n, uint64_t salt)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return sink_mix64(h ^ sink_mix64(salt));
}

/* True for a deterministic SHARE (1/100 %) of uids under SALT. */
static bool sink_pick(const sink_shared *sh, const char *uid, size_t n, unsigned share,
                      uint64_t salt)
{
    if (share == 0)
        return false;
    return sink_hash(uid, n, sh->conf.seed ^ salt) % 10000 < share;
}

/* Adds H; true when it was not there yet.  When the set cannot grow it
 * answers "seen", which only turns an injected failure into a success. */
static bool sink_seen_add(sink_seen *s, uint64_t h)
{
    bool added = false;
    if (h == 0)
        h = 1;
    pthread_mutex_lock(&s->lock);
    if ((s->count + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 1024;
        uint64_t *ns = calloc(ncap, sizeof *ns);
        if (ns == NULL)
            goto out;
        for (size_t i = 0; i < s->cap; i++) {
            if (s->slots[i] == 0)
                continue;
            size_t j = s->slots[i] & (ncap - 1);
            while (ns[j] != 0)
                j = (j + 1) & (ncap - 1);
            ns[j] = s->slots[i];
        }
        free(s->slots);
        s->slots = ns;
        s->cap = ncap;
    }
    size_t j = h & (s->cap - 1);
    while (s->slots[j] != 0 && s->slots[j] != h)
        j = (j + 1) & (s->cap - 1);
    if (s->slots[j] == 0) {
        s->slots[j] = h;
        s->count++;
        added = true;
    }
out:
    pthread_mutex_unlock(&s->lock);
    return added;
}

/* ---- canned responses ------------------------------------------------- */

typedef enum sink_resp {
    SINK_R_OK,        /* --status-ok */
    SINK_R_FAIL_TEMP, /* 500, --fail-first */
    SINK_R_FAIL_PERM, /* 400 with a JSON error, --fail-permanent */
    SINK_R_THROTTLE,  /* 429 with Retry-After: 1 */
    SINK_R_HEALTH,    /* 200 for /healthz */
    SINK_R_BAD,       /* 400, unparsable request */
    SINK_R_METHOD,    /* 405 */
    SINK_R_LENGTH,    /* 411, Transfer-Encoding */
    SINK_R_TOO_LARGE, /* 413 */
    SINK_R_COUNT
} sink_resp;

typedef struct sink_canned {
    char *text[SINK_R_COUNT][2]; /* [resp][close] */
    size_t len[SINK_R_COUNT][2];
    int status[SINK_R_COUNT];
} sink_canned;

static const char *sink_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 405:
        return "Method Not Allowed";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    default:
        return "Status";
    }
}

/* Formats a whole response into a malloc'd string; NULL on failure. */
static char *sink_format(int status, const char *extra, const char *body, bool close, size_t *len)
{
    char head[512];
    int n;
    if (status == 204)
        n = snprintf(head, sizeof head, "HTTP/1.1 204 No Content\r\n%s%s\r\n", extra,
                     close ? "Connection: close\r\n" : "");
    else
        n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: "
                     "%zu\r\n%s%s\r\n%s",
                     status, sink_reason(status), strlen(body), extra,
                     close ? "Connection: close\r\n" : "", body);
    if (n < 0 || (size_t)n >= sizeof head)
        return NULL;
    *len = (size_t)n;
    return strdup(head);
}

static void sink_canned_free(sink_canned *c)
{
    for (int r = 0; r < SINK_R_COUNT; r++)
        for (int k = 0; k < 2; k++)
            free(c->text[r][k]);
}

static int sink_canned_init(sink_canned *c, int status_ok)
{
    static const struct {
        sink_resp r;
        int status;
        const char *extra, *body;
    } defs[] = {
        {SINK_R_OK, 0, "", "{\"ok\":true}"},
        {SINK_R_FAIL_TEMP, 500, "", "{\"error\":\"injected_temporary_failure\"}"},
        {SINK_R_FAIL_PERM, 400, "", "{\"error\":\"invalid_recipient\"}"},
        {SINK_R_THROTTLE, 429, "Retry-After: 1\r\n", "{\"error\":\"throttled\"}"},
        {SINK_R_HEALTH, 200, "", "{\"ok\":true}"},
        {SINK_R_BAD, 400, "", "{\"error\":\"bad_request\"}"},
        {SINK_R_METHOD, 405, "", "{\"error\":\"method_not_allowed\"}"},
        {SINK_R_LENGTH, 411, "", "{\"error\":\"content_length_required\"}"},
        {SINK_R_TOO_LARGE, 413, "", "{\"error\":\"request_too_large\"}"},
    };
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        int status = defs[i].r == SINK_R_OK ? status_ok : defs[i].status;
        c->status[defs[i].r] = status;
        for (int k = 0; k < 2; k++) {
            c->text[defs[i].r][k] =
                sink_format(status, defs[i].extra, defs[i].body, k == 1, &c->len[defs[i].r][k]);
            if (c->text[defs[i].r][k] == NULL)
                goto fail;
        }
    }
    return 0;
fail:
    sink_canned_free(c);
    return -1;
}

/* ---- per-thread state ------------------------------------------------- */

/* A due-time FIFO entry: for a delayed response, release the connection's
 * output up to stream offset `off`; for a lingering close, close it. */
typedef struct sink_due {
    int fd;
    uint32_t gen;
    uint64_t off;
    int64_t at_ms;
} sink_due;

typedef struct sink_fifo {
    sink_due *items;
    size_t cap, head, count; /* ring; cap is a power of two */
} sink_fifo;

typedef struct sink_conn {
    int fd;
    uint32_t gen;
    uint32_t events; /* what epoll currently watches */
    char *in;
    size_t in_len, in_cap, scan; /* scan: where the search for the header end resumes */
    char *out;
    size_t out_len, out_off, out_cap;
    uint64_t out_base;    /* stream offset of out[0] */
    uint64_t out_release; /* stream offset up to which output may be sent */
    /* A request whose headers are parsed and whose body is still arriving. */
    bool have_head;
    size_t head_len, body_len;
    bool head_close, head_expect, sent_continue;
    int head_route; /* sink_route */
    bool closing;   /* send what is queued, then close (or linger) */
    bool linger;    /* closing after an error: half-close and drain */
    bool lingering; /* write side shut, draining input until EOF */
} sink_conn;

typedef enum sink_route {
    SINK_ROUTE_PUSH,
    SINK_ROUTE_STATS,
    SINK_ROUTE_HEALTH,
    SINK_ROUTE_METHOD,
} sink_route;

typedef struct sink_loop {
    sink_shared *sh;
    const sink_canned *canned;
    int epfd, lfd;
    sink_conn **conns;
    size_t nconns;
    uint32_t next_gen;
    sink_fifo delayed, lingering;
    char *rec;
    size_t rec_len;
    char *batch; /* a batch's answer being built, grown as needed */
    size_t batch_cap;
    int64_t now_mono, now_wall;
    int rc; /* 0, or -1 after a fatal error */
} sink_loop;

/* ---- FIFO ------------------------------------------------------------- */

static int sink_fifo_push(sink_fifo *f, sink_due d)
{
    if (f->count == f->cap) {
        size_t ncap = f->cap ? f->cap * 2 : 256;
        sink_due *ni = malloc(ncap * sizeof *ni);
        if (ni == NULL)
            return -1;
        for (size_t i = 0; i < f->count; i++)
            ni[i] = f->items[(f->head + i) & (f->cap - 1)];
        free(f->items);
        f->items = ni;
        f->cap = ncap;
        f->head = 0;
    }
    f->items[(f->head + f->count) & (f->cap - 1)] = d;
    f->count++;
    return 0;
}

static sink_due *sink_fifo_peek(sink_fifo *f)
{
    return f->count ? &f->items[f->head] : NULL;
}

static void sink_fifo_pop(sink_fifo *f)
{
    f->head = (f->head + 1) & (f->cap - 1);
    f->count--;
}

/* ---- record file ------------------------------------------------------ */

static void sink_record_flush(sink_loop *lp)
{
    size_t off = 0;
    while (off < lp->rec_len) {
        ssize_t n = write(lp->sh->record_fd, lp->rec + off, lp->rec_len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "sink: record write failed: %s\n", strerror(errno));
            break;
        }
        off += (size_t)n;
    }
    lp->rec_len = 0;
}

static void sink_record(sink_loop *lp, const char *uid, size_t ulen, int status)
{
    if (lp->sh->record_fd < 0)
        return;
    if (SINK_RECORD_BUF - lp->rec_len < SINK_UID_MAX + 48)
        sink_record_flush(lp);
    char *w = lp->rec + lp->rec_len;
    if (ulen == 0) {
        *w++ = '-';
    } else {
        /* Keep one line per request and three fields per line. */
        for (size_t i = 0; i < ulen && i < SINK_UID_MAX; i++) {
            unsigned char c = (unsigned char)uid[i];
            *w++ = c <= ' ' || c == 0x7f ? '_' : (char)c;
        }
    }
    w += sprintf(w, " %d %" PRId64 "\n", status, lp->now_wall);
    lp->rec_len = (size_t)(w - lp->rec);
}

/* ---- connections ------------------------------------------------------ */

static void sink_conn_close(sink_loop *lp, sink_conn *c)
{
    epoll_ctl(lp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    lp->conns[c->fd] = NULL;
    free(c->in);
    free(c->out);
    free(c);
}

static void sink_conn_watch(sink_loop *lp, sink_conn *c, uint32_t events)
{
    if (events == c->events)
        return;
    struct epoll_event ev = {.events = events, .data.fd = c->fd};
    epoll_ctl(lp->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
}

static int sink_out_append(sink_conn *c, const char *s, size_t n)
{
    if (c->out_off > 0 && c->out_off == c->out_len) {
        c->out_base += c->out_len;
        c->out_len = c->out_off = 0;
    }
    if (c->out_len + n > c->out_cap) {
        if (c->out_off > 0) {
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_base += c->out_off;
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        size_t ncap = c->out_cap ? c->out_cap : 4096;
        while (ncap < c->out_len + n)
            ncap *= 2;
        if (ncap != c->out_cap) {
            char *no = realloc(c->out, ncap);
            if (no == NULL)
                return -1;
            c->out = no;
            c->out_cap = ncap;
        }
    }
    memcpy(c->out + c->out_len, s, n);
    c->out_len += n;
    return 0;
}

/* Queues a response, released now or after --latency-ms. */
static int sink_respond(sink_loop *lp, sink_conn *c, const char *s, size_t n)
{
    if (sink_out_append(c, s, n) != 0)
        return -1;
    uint64_t end = c->out_base + c->out_len;
    if (lp->sh->conf.latency_ms == 0) {
        c->out_release = end;
        return 0;
    }
    sink_due d = {
        .fd = c->fd, .gen = c->gen, .off = end, .at_ms = lp->now_mono + lp->sh->conf.latency_ms};
    return sink_fifo_push(&lp->delayed, d);
}

/* Sends what is released; closes the connection when it is done with.
 * Returns false when C was freed. */
static bool sink_conn_flush(sink_loop *lp, sink_conn *c)
{
    for (;;) {
        size_t end = c->out_len;
        if (c->out_release - c->out_base < end)
            end = (size_t)(c->out_release - c->out_base);
        if (c->out_off >= end)
            break;
        ssize_t n = send(c->fd, c->out + c->out_off, end - c->out_off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            sink_conn_watch(lp, c, c->events | EPOLLOUT);
            return true;
        }
        if (n <= 0) {
            sink_conn_close(lp, c);
            return false;
        }
        c->out_off += (size_t)n;
    }
    uint32_t ev = c->events & ~(uint32_t)EPOLLOUT;
    if (c->closing && c->out_off == c->out_len) {
        if (!c->linger) {
            sink_conn_close(lp, c);
            return false;
        }
        shutdown(c->fd, SHUT_WR);
        c->linger = false;
        c->lingering = true;
        c->in_len = 0;
        sink_due d = {.fd = c->fd, .gen = c->gen, .at_ms = lp->now_mono + SINK_LINGER_MS};
        if (sink_fifo_push(&lp->lingering, d) != 0) {
            sink_conn_close(lp, c);
            return false;
        }
        ev |= EPOLLIN;
    }
    sink_conn_watch(lp, c, ev);
    return true;
}

/* ---- request handling ------------------------------------------------- */

/* Finds the value of the first "uid" key anywhere in a JSON body (no full
 * parse: pushes are small and this runs per request): a string, raw with
 * its escapes kept, or a number.  Returns its length, 0 when there is none. */
static size_t sink_body_uid(const char *b, size_t n, const char **uid)
{
    const char *end = b + n;
    const char *p = b;
    while ((p = memmem(p, (size_t)(end - p), "\"uid\"", 5)) != NULL) {
        const char *q = p + 5;
        p = q;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
            q++;
        if (q >= end || *q != ':')
            continue;
        q++;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
            q++;
        if (q < end && *q == '"') {
            const char *s = ++q;
            while (q < end && *q != '"')
                q += *q == '\\' ? 2 : 1;
            if (q >= end)
                return 0;
            *uid = s;
            return (size_t)(q - s);
        }
        const char *s = q;
        while (q < end && ((*q >= '0' && *q <= '9') || *q == '-' || *q == '+' || *q == '.' ||
                           *q == 'e' || *q == 'E'))
            q++;
        *uid = s;
        return (size_t)(q - s);
    }
    return 0;
}

/* The uid=VALUE query parameter of TARGET, for pushes without a body. */
static size_t sink_query_uid(const char *t, size_t n, const char **uid)
{
    const char *q = memchr(t, '?', n);
    if (q == NULL)
        return 0;
    const char *end = t + n;
    for (const char *p = q + 1; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pe = amp ? amp : end;
        if (pe - p > 4 && memcmp(p, "uid=", 4) == 0) {
            *uid = p + 4;
            return (size_t)(pe - p - 4);
        }
        p = pe + 1;
    }
    return 0;
}

/* Answers 200 with the JSON BODY (N bytes). */
static int sink_json_respond(sink_loop *lp, sink_conn *c, const char *body, size_t n, bool close)
{
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                      "%zu\r\n%s\r\n",
                      n, close ? "Connection: close\r\n" : "");

    if (sink_respond(lp, c, head, (size_t)hn) != 0)
        return -1;
    return sink_respond(lp, c, body, n);
}

static int sink_stats(sink_loop *lp, sink_conn *c, bool close)
{
    /* Pushes only ever get the four canned push statuses, so this is ample. */
    char body[1024];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"requests\":%" PRIu64 ",\"by_status\":{",
                                atomic_load_explicit(&lp->sh->requests, memory_order_relaxed));
    bool first = true;
    for (int s = 100; s < 600; s++) {
        uint64_t v = atomic_load_explicit(&lp->sh->by_status[s], memory_order_relaxed);
        if (v == 0)
            continue;
        n += (size_t)snprintf(body + n, sizeof body - n, "%s\"%d\":%" PRIu64, first ? "" : ",", s,
                              v);
        first = false;
    }
    n += (size_t)snprintf(body + n, sizeof body - n, "}}");
    return sink_json_respond(lp, c, body, n, close);
}

static sink_resp sink_decide(sink_loop *lp, const char *uid, size_t ulen)
{
    sink_shared *sh = lp->sh;
    if (sh->conf.throttle_ms > 0) {
        int64_t first = atomic_load_explicit(&sh->first_request_ms, memory_order_relaxed);
        if (first == 0) {
            int64_t expect = 0;
            int64_t now = lp->now_mono > 0 ? lp->now_mono : 1;
            if (!atomic_compare_exchange_strong(&sh->first_request_ms, &expect, now))
                now = expect;
            first = now;
        }
        if (lp->now_mono - first < sh->conf.throttle_ms)
            return SINK_R_THROTTLE;
    }
    if (ulen == 0)
        return SINK_R_OK;
    if (sink_pick(sh, uid, ulen, sh->conf.fail_permanent, 0x7065726dULL))
        return SINK_R_FAIL_PERM;
    if (sink_pick(sh, uid, ulen, sh->conf.fail_first, 0x66697273ULL) &&
        sink_seen_add(&sh->seen, sink_hash(uid, ulen, 0x7365656eULL)))
        return SINK_R_FAIL_TEMP;
    return SINK_R_OK;
}

/* Whether the N bytes of BODY are a JSON array: a batch of pushes. */
static bool sink_is_batch(const char *body, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (body[i] == '[')
            return true;
        if (body[i] != ' ' && body[i] != '\t' && body[i] != '\r' && body[i] != '\n')
            return false;
    }
    return false;
}

/* Appends the N bytes at S to LP's batch answer at *LEN.  0, or -1 when out
 * of memory. */
static int sink_batch_put(sink_loop *lp, size_t *len, const char *s, size_t n)
{
    if (*len + n > lp->batch_cap) {
        size_t ncap = lp->batch_cap ? lp->batch_cap : 4096;
        while (ncap < *len + n)
            ncap *= 2;
        char *nb = realloc(lp->batch, ncap);
        if (nb == NULL)
            return -1;
        lp->batch = nb;
        lp->batch_cap = ncap;
    }
    memcpy(lp->batch + *len, s, n);
    *len += n;
    return 0;
}

/* Answers a batch: each uid of BODY (N bytes) decided and recorded, one
 * result each (see the top of the file). */
static int sink_batch(sink_loop *lp, sink_conn *c, const char *body, size_t n, bool close)
{
    static const char *const results[] = {
        [SINK_R_OK] = "{\"status\":\"ok\"}",
        [SINK_R_FAIL_TEMP] =
            "{\"status\":\"error\",\"error\":\"injected_temporary_failure\",\"retry\":true}",
        [SINK_R_FAIL_PERM] =
            "{\"status\":\"error\",\"error\":\"invalid_recipient\",\"retry\":false}",
    };
    const sink_canned *cn = lp->canned;
    const char *p = body, *end = body + n, *uid;
    size_t len = 0, ulen, items = 0;

    if (sink_decide(lp, NULL, 0) == SINK_R_THROTTLE)
        return sink_respond(lp, c, cn->text[SINK_R_THROTTLE][close],
                            cn->len[SINK_R_THROTTLE][close]);
    if (sink_batch_put(lp, &len, "{\"results\":[", 12) != 0)
        return -1;
    while ((ulen = sink_body_uid(p, (size_t)(end - p), &uid)) > 0) {
        sink_resp r = sink_decide(lp, uid, ulen);
        int status = cn->status[r];

        atomic_fetch_add_explicit(&lp->sh->requests, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&lp->sh->by_status[status], 1, memory_order_relaxed);
        sink_record(lp, uid, ulen, status);
        if ((items++ > 0 && sink_batch_put(lp, &len, ",", 1) != 0) ||
            sink_batch_put(lp, &len, results[r], strlen(results[r])) != 0)
            return -1;
        p = uid + ulen;
    }
    if (sink_batch_put(lp, &len, "]}", 2) != 0)
        return -1;
    return sink_json_respond(lp, c, lp->batch, len, close);
}

/* Answers a complete request. */
static int sink_handle(sink_loop *lp, sink_conn *c, const char *head, size_t target_off,
                       size_t target_len, const char *body)
{
    const sink_canned *cn = lp->canned;
    bool close = c->head_close;
    sink_resp r;
    switch (c->head_route) {
    case SINK_ROUTE_STATS:
        return sink_stats(lp, c, close);
    case SINK_ROUTE_HEALTH:
        r = SINK_R_HEALTH;
        break;
    case SINK_ROUTE_METHOD:
        r = SINK_R_METHOD;
        break;
    default: {
        if (sink_is_batch(body, c->body_len))
            return sink_batch(lp, c, body, c->body_len, close);
        const char *uid = NULL;
        size_t ulen = sink_body_uid(body, c->body_len, &uid);
        if (ulen == 0)
            ulen = sink_query_uid(head + target_off, target_len, &uid);
        r = sink_decide(lp, uid, ulen);
        int status = cn->status[r];
        atomic_fetch_add_explicit(&lp->sh->requests, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&lp->sh->by_status[status], 1, memory_order_relaxed);
        sink_record(lp, uid, ulen, status);
        break;
    }
    }
    return sink_respond(lp, c, cn->text[r][close], cn->len[r][close]);
}

/* Answers a protocol error and closes the connection after a linger. */
static int sink_reject(sink_loop *lp, sink_conn *c, sink_resp r)
{
    c->closing = true;
    c->linger = true;
    return sink_respond(lp, c, lp->canned->text[r][1], lp->canned->len[r][1]);
}

static bool sink_hdr_is(const char *name, size_t nlen, const char *want)
{
    return nlen == strlen(want) && strncasecmp(name, want, nlen) == 0;
}

static bool sink_has_token(const char *v, size_t n, const char *tok)
{
    size_t tl = strlen(tok);
    for (size_t i = 0; i + tl <= n; i++)
        if (strncasecmp(v + i, tok, tl) == 0)
            return true;
    return false;
}

/* Parses the request head IN[0..hlen) into C's head fields.  Returns 0, or
 * the error response to send. */
static int sink_parse_head(sink_conn *c, const char *in, size_t hlen, size_t *toff, size_t *tlen,
                           sink_resp *err)
{
    const char *end = in + hlen - 2; /* the final CRLF */
    const char *eol = memmem(in, hlen, "\r\n", 2);
    const char *sp1 = memchr(in, ' ', (size_t)(eol - in));
    if (sp1 == NULL)
        goto bad;
    const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
    if (sp2 == NULL || eol - sp2 != 9 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
        goto bad;
    size_t mlen = (size_t)(sp1 - in);
    *toff = (size_t)(sp1 + 1 - in);
    *tlen = (size_t)(sp2 - sp1 - 1);
    const char *target = sp1 + 1;
    size_t plen = *tlen;
    const char *qm = memchr(target, '?', *tlen);
    if (qm != NULL)
        plen = (size_t)(qm - target);
    bool http10 = sp2[8] == '0';
    bool is_get = mlen == 3 && memcmp(in, "GET", 3) == 0;
    bool is_push = is_get || (mlen == 4 && memcmp(in, "POST", 4) == 0) ||
                   (mlen == 3 && memcmp(in, "PUT", 3) == 0) ||
                   (mlen == 5 && memcmp(in, "PATCH", 5) == 0);
    bool special = (plen == 6 && memcmp(target, "/stats", 6) == 0) ||
                   (plen == 8 && memcmp(target, "/healthz", 8) == 0);
    if (special)
        c->head_route = !is_get     ? SINK_ROUTE_METHOD
                        : plen == 6 ? SINK_ROUTE_STATS
                                    : SINK_ROUTE_HEALTH;
    else
        c->head_route = is_push ? SINK_ROUTE_PUSH : SINK_ROUTE_METHOD;

    bool keep_alive = false, has_cl = false;
    c->head_close = false;
    c->head_expect = false;
    c->body_len = 0;
    for (const char *p = eol + 2; p < end;) {
        const char *le = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon == NULL)
            goto bad;
        size_t nlen = (size_t)(colon - p);
        const char *v = colon + 1;
        while (v < le && (*v == ' ' || *v == '\t'))
            v++;
        size_t vlen = (size_t)(le - v);
        if (sink_hdr_is(p, nlen, "content-length")) {
            size_t cl = 0;
            if (vlen == 0 || has_cl)
                goto bad;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9') {
                    if (v[i] == ' ' || v[i] == '\t')
                        break;
                    goto bad;
                }
                if (cl > SINK_MAX_REQ)
                    break; /* already too large; stop before it can overflow */
                cl = cl * 10 + (size_t)(v[i] - '0');
            }
            c->body_len = cl;
            has_cl = true;
        } else if (sink_hdr_is(p, nlen, "transfer-encoding")) {
            *err = SINK_R_LENGTH;
            return -1;
        } else if (sink_hdr_is(p, nlen, "connection")) {
            if (sink_has_token(v, vlen, "close"))
                c->head_close = true;
            if (sink_has_token(v, vlen, "keep-alive"))
                keep_alive = true;
        } else if (sink_hdr_is(p, nlen, "expect")) {
            c->head_expect = sink_has_token(v, vlen, "100-continue");
        }
        p = le + 2;
    }
    if (http10 && !keep_alive)
        c->head_close = true;
    if (c->body_len > SINK_MAX_REQ - hlen) {
        *err = SINK_R_TOO_LARGE;
        return -1;
    }
    return 0;
bad:
    *err = SINK_R_BAD;
    return -1;
}

/* Parses and answers every complete request in C's input, as long as the
 * output queue is not over its high mark. */
static int sink_conn_process(sink_loop *lp, sink_conn *c)
{
    size_t off = 0;
    while (!c->closing && off < c->in_len && c->out_len - c->out_off < SINK_OUT_HIGH) {
        const char *in = c->in + off;
        size_t avail = c->in_len - off;
        if (!c->have_head) {
            size_t from = c->scan > 3 ? c->scan - 3 : 0;
            const char *hend = from < avail ? memmem(in + from, avail - from, "\r\n\r\n", 4) : NULL;
            if (hend == NULL) {
                c->scan = avail;
                if (avail >= SINK_MAX_REQ && sink_reject(lp, c, SINK_R_TOO_LARGE) != 0)
                    return -1;
                break;
            }
            c->scan = 0;
            c->head_len = (size_t)(hend + 4 - in);
            size_t toff, tlen;
            sink_resp err;
            if (sink_parse_head(c, in, c->head_len, &toff, &tlen, &err) != 0) {
                if (sink_reject(lp, c, err) != 0)
                    return -1;
                break;
            }
            c->have_head = true;
            c->sent_continue = false;
        }
        if (avail < c->head_len + c->body_len) {
            if (c->head_expect && !c->sent_continue) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                if (sink_respond(lp, c, cont, sizeof cont - 1) != 0)
                    return -1;
                c->sent_continue = true;
            }
            break;
        }
        /* The target is re-located from the request line (cheap) rather
         * than kept across reads, where the input buffer may move. */
        const char *sp1 = memchr(in, ' ', c->head_len);
        const char *sp2 = memchr(sp1 + 1, ' ', c->head_len - (size_t)(sp1 + 1 - in));
        if (sink_handle(lp, c, in, (size_t)(sp1 + 1 - in), (size_t)(sp2 - sp1 - 1),
                        in + c->head_len) != 0)
            return -1;
        off += c->head_len + c->body_len;
        c->have_head = false;
        if (c->head_close)
            c->closing = true;
    }
    if (off > 0) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
    return 0;
}

/* Reads once (level-triggered epoll calls again if more is there). */
static void sink_conn_readable(sink_loop *lp, sink_conn *c)
{
    if (c->closing) {
        /* Nothing more is parsed: drain so that closing does not reset the
         * connection before the client has read its answer. */
        char drain[16384];
        ssize_t n = recv(c->fd, drain, sizeof drain, 0);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
            return;
        if (c->lingering || n < 0) {
            sink_conn_close(lp, c);
            return;
        }
        sink_conn_watch(lp, c, c->events & ~(uint32_t)EPOLLIN);
        sink_conn_flush(lp, c);
        return;
    }
    if (c->in_cap < SINK_MAX_REQ && c->in_cap - c->in_len < 4096) {
        size_t ncap = c->in_cap ? c->in_cap * 2 : 16384;
        if (ncap > SINK_MAX_REQ)
            ncap = SINK_MAX_REQ;
        char *ni = realloc(c->in, ncap);
        if (ni == NULL) {
            sink_conn_close(lp, c);
            return;
        }
        c->in = ni;
        c->in_cap = ncap;
    }
    if (c->in_len == c->in_cap) {
        /* Full and nothing parsable: only backpressure gets here. */
        sink_conn_watch(lp, c, c->events & ~(uint32_t)EPOLLIN);
        return;
    }
    ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n < 0) {
        sink_conn_close(lp, c);
        return;
    }
    if (n == 0) {
        /* The peer is done sending: answer what is queued, then close. */
        c->closing = true;
        c->in_len = 0;
        sink_conn_watch(lp, c, c->events & ~(uint32_t)EPOLLIN);
        sink_conn_flush(lp, c);
        return;
    }
    c->in_len += (size_t)n;
    if (sink_conn_process(lp, c) != 0) {
        sink_conn_close(lp, c);
        return;
    }
    if (!sink_conn_flush(lp, c))
        return;
    /* Stop reading while the client does not read its answers. */
    if (!c->closing && c->out_len - c->out_off >= SINK_OUT_HIGH)
        sink_conn_watch(lp, c, c->events & ~(uint32_t)EPOLLIN);
}

static void sink_conn_writable(sink_loop *lp, sink_conn *c)
{
    if (!sink_conn_flush(lp, c))
        return;
    if (c->closing || (c->events & EPOLLIN))
        return;
    if (c->out_len - c->out_off < SINK_OUT_HIGH) {
        /* Drained below the mark: parse what is buffered, read again. */
        if (sink_conn_process(lp, c) != 0) {
            sink_conn_close(lp, c);
            return;
        }
        if (sink_conn_flush(lp, c) && !c->closing)
            sink_conn_watch(lp, c, c->events | EPOLLIN);
    }
}

static void sink_accept(sink_loop *lp)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(lp->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                fprintf(stderr, "sink: accept: %s\n", strerror(errno));
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if ((size_t)fd >= lp->nconns) {
            size_t n = lp->nconns ? lp->nconns : 1024;
            while (n <= (size_t)fd)
                n *= 2;
            sink_conn **nc = realloc(lp->conns, n * sizeof *nc);
            if (nc == NULL) {
                close(fd);
                continue;
            }
            memset(nc + lp->nconns, 0, (n - lp->nconns) * sizeof *nc);
            lp->conns = nc;
            lp->nconns = n;
        }
        sink_conn *c = calloc(1, sizeof *c);
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->gen = ++lp->next_gen;
        c->events = EPOLLIN;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(lp->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            free(c);
            continue;
        }
        lp->conns[fd] = c;
    }
}

/* Releases delayed output and ends lingering connections that are due. */
static void sink_run_due(sink_loop *lp)
{
    sink_due *d;
    while ((d = sink_fifo_peek(&lp->delayed)) != NULL && d->at_ms <= lp->now_mono) {
        sink_conn *c = (size_t)d->fd < lp->nconns ? lp->conns[d->fd] : NULL;
        uint64_t off = d->off;
        sink_fifo_pop(&lp->delayed);
        if (c != NULL && c->gen == d->gen && off > c->out_release) {
            c->out_release = off;
            sink_conn_writable(lp, c);
        }
    }
    while ((d = sink_fifo_peek(&lp->lingering)) != NULL && d->at_ms <= lp->now_mono) {
        sink_conn *c = (size_t)d->fd < lp->nconns ? lp->conns[d->fd] : NULL;
        if (c != NULL && c->gen == d->gen)
            sink_conn_close(lp, c);
        sink_fifo_pop(&lp->lingering);
    }
}

static void *sink_loop_run(void *arg)
{
    sink_loop *lp = arg;
    struct epoll_event evs[256];
    int64_t next_flush = sink_now_ms(CLOCK_MONOTONIC) + SINK_TICK_MS;

    while (!sink_stop) {
        int timeout = SINK_TICK_MS;
        lp->now_mono = sink_now_ms(CLOCK_MONOTONIC);
        sink_due *d = sink_fifo_peek(&lp->delayed);
        if (d != NULL && d->at_ms - lp->now_mono < timeout)
            timeout = d->at_ms > lp->now_mono ? (int)(d->at_ms - lp->now_mono) : 0;
        int n = epoll_wait(lp->epfd, evs, sizeof evs / sizeof evs[0], timeout);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "sink: epoll_wait: %s\n", strerror(errno));
            lp->rc = -1;
            break;
        }
        lp->now_mono = sink_now_ms(CLOCK_MONOTONIC);
        lp->now_wall = sink_now_ms(CLOCK_REALTIME);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lp->lfd) {
                sink_accept(lp);
                continue;
            }
            sink_conn *c = lp->conns[fd];
            if (c == NULL)
                continue;
            uint32_t e = evs[i].events;
            if (e & EPOLLOUT) {
                sink_conn_writable(lp, c);
                c = lp->conns[fd];
                if (c == NULL)
                    continue;
            }
            if (e & (EPOLLIN | EPOLLHUP | EPOLLERR))
                sink_conn_readable(lp, c);
        }
        sink_run_due(lp);
        if (lp->now_mono >= next_flush) {
            if (lp->rec_len > 0)
                sink_record_flush(lp);
            next_flush = lp->now_mono + SINK_TICK_MS;
        }
    }
    if (lp->rec_len > 0)
        sink_record_flush(lp);
    return NULL;
}

static void sink_loop_free(sink_loop *lp)
{
    if (lp == NULL)
        return;
    for (size_t i = 0; i < lp->nconns; i++)
        if (lp->conns[i] != NULL)
            sink_conn_close(lp, lp->conns[i]);
    free(lp->conns);
    free(lp->delayed.items);
    free(lp->lingering.items);
    free(lp->rec);
    free(lp->batch);
    if (lp->epfd >= 0)
        close(lp->epfd);
    if (lp->lfd >= 0)
        close(lp->lfd);
    free(lp);
}

static sink_loop *sink_loop_new(sink_shared *sh, const sink_canned *canned, int lfd)
{
    sink_loop *lp = calloc(1, sizeof *lp);
    if (lp == NULL) {
        close(lfd);
        return NULL;
    }
    lp->sh = sh;
    lp->canned = canned;
    lp->lfd = lfd;
    lp->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (sh->record_fd >= 0)
        lp->rec = malloc(SINK_RECORD_BUF);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    if (lp->epfd < 0 || (sh->record_fd >= 0 && lp->rec == NULL) ||
        epoll_ctl(lp->epfd, EPOLL_CTL_ADD, lfd, &ev) != 0) {
        sink_loop_free(lp);
        return NULL;
    }
    return lp;
}

/* ---- startup ---------------------------------------------------------- */

/* Opens a listening socket on HOST:PORT; -1 with ERRSTR on failure. */
static int sink_listen(const char *host, const char *port, char *errstr, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int fd = -1;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (gai != 0) {
        snprintf(errstr, errlen, "resolve %s: %s", host, gai_strerror(gai));
        goto out;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(errstr, errlen, "socket: %s", strerror(errno));
        goto out;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 4096) != 0) {
        snprintf(errstr, errlen, "listen on %s:%s: %s", host, port, strerror(errno));
        close(fd);
        fd = -1;
    }
out:
    if (ai != NULL)
        freeaddrinfo(ai);
    return fd;
}

static void sink_on_signal(int sig)
{
    (void)sig;
    sink_stop = 1;
}

static void sink_usage(FILE *f)
{
    fprintf(f, "usage: herald-sink [options]\n"
               "A fast HTTP/1.1 push-provider stand-in (epoll, keep-alive, pipelining).\n"
               "Any POST/PUT/PATCH/GET is a push; GET /stats gives counters, GET /healthz 200.\n"
               "Bodies need Content-Length (chunked gets 411); requests over 64 KiB get 413.\n"
               "\n"
               "  --listen HOST:PORT      listen address (default 127.0.0.1:19099; port 0 = any)\n"
               "  --record FILE           append '<uid> <status> <recv_ms>' per push\n"
               "  --fail-first PCT        a uid's first push gets 500 for PCT %% of uids\n"
               "  --fail-permanent PCT    PCT %% of uids always get 400\n"
               "  --throttle-ms MS        429 + Retry-After: 1 for MS ms after the first push\n"
               "  --latency-ms MS         delay every answer by MS ms\n"
               "  --status-ok CODE        success status (200..299, default 200)\n"
               "  --seed N                seed of the fault decisions (default 1)\n"
               "  --threads N             event-loop threads on one SO_REUSEPORT port (default 1)\n"
               "  -h, --help              this text\n"
               "  -V, --version           the version\n"
               "The uid is the JSON body's \"uid\" (string or number), else the uid= query\n"
               "parameter, else '-'.  recv_ms is wall-clock UTC milliseconds.  A body that\n"
               "is a JSON array is a batch: one push (and record line) per \"uid\" in it,\n"
               "answered {\"results\":[...]} one entry each (docs/providers.md).\n");
}

/* Parses a percentage with up to two decimals into 1/100 %. */
static int sink_parse_pct(const char *s, unsigned *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v >= 0.0 && v <= 100.0))
        return -1;
    *out = (unsigned)(v * 100.0 + 0.5);
    return 0;
}

static int sink_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int sink_parse_args(int argc, char **argv, sink_conf *cf)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"record", required_argument, NULL, 'r'},
        {"fail-first", required_argument, NULL, 'f'},
        {"fail-permanent", required_argument, NULL, 'p'},
        {"throttle-ms", required_argument, NULL, 't'},
        {"latency-ms", required_argument, NULL, 'L'},
        {"status-ok", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'S'},
        {"threads", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *listen_at = "127.0.0.1:19099";
    int64_t v;
    int o, li = 0;
    while ((o = getopt_long(argc, argv, "hV", opts, &li)) != -1) {
        switch (o) {
        case 'l':
            listen_at = optarg;
            break;
        case 'r':
            cf->record_path = optarg;
            break;
        case 'f':
            if (sink_parse_pct(optarg, &cf->fail_first) != 0)
                goto bad;
            break;
        case 'p':
            if (sink_parse_pct(optarg, &cf->fail_permanent) != 0)
                goto bad;
            break;
        case 't':
            if (sink_parse_int(optarg, 0, INT32_MAX, &cf->throttle_ms) != 0)
                goto bad;
            break;
        case 'L':
            if (sink_parse_int(optarg, 0, INT32_MAX, &cf->latency_ms) != 0)
                goto bad;
            break;
        case 's':
            if (sink_parse_int(optarg, 200, 299, &v) != 0)
                goto bad;
            cf->status_ok = (int)v;
            break;
        case 'S':
            if (sink_parse_int(optarg, INT64_MIN, INT64_MAX, &v) != 0)
                goto bad;
            cf->seed = (uint64_t)v;
            break;
        case 'n':
            if (sink_parse_int(optarg, 1, SINK_MAX_THREADS, &v) != 0)
                goto bad;
            cf->threads = (int)v;
            break;
        case 'h':
            sink_usage(stdout);
            exit(0);
        case 'V':
            printf("herald-sink %s\n", HR_VERSION);
            exit(0);
        default:
            sink_usage(stderr);
            return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "herald-sink: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    /* HOST:PORT, where HOST may be [v6]. */
    const char *colon = strrchr(listen_at, ':');
    if (colon == NULL || colon[1] == '\0' || strlen(colon + 1) >= sizeof cf->port)
        goto bad_listen;
    const char *h = listen_at;
    size_t hl = (size_t)(colon - listen_at);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= sizeof cf->host)
        goto bad_listen;
    memcpy(cf->host, h, hl);
    cf->host[hl] = '\0';
    strcpy(cf->port, colon + 1);
    return 0;
bad_listen:
    fprintf(stderr, "herald-sink: --listen wants HOST:PORT, got '%s'\n", listen_at);
    return -1;
bad:
    fprintf(stderr, "herald-sink: bad value '%s' for --%s\n", optarg, opts[li].name);
    return -1;
}

int main(int argc, char **argv)
{
    static sink_shared sh; /* large (by_status) and shared by the threads */
    sink_canned canned;
    sink_loop *loops[SINK_MAX_THREADS] = {0};
    pthread_t tids[SINK_MAX_THREADS];
    int started = 0;
    int rc = 1;
    char err[512];

    sh.conf.status_ok = 200;
    sh.conf.seed = 1;
    sh.conf.threads = 1;
    sh.record_fd = -1;
    pthread_mutex_init(&sh.seen.lock, NULL);
    if (sink_parse_args(argc, argv, &sh.conf) != 0)
        return 2;
    if (sink_canned_init(&canned, sh.conf.status_ok) != 0) {
        fprintf(stderr, "herald-sink: out of memory\n");
        return 1;
    }

    struct sigaction sa = {.sa_handler = sink_on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (sh.conf.record_path != NULL) {
        sh.record_fd = open(sh.conf.record_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (sh.record_fd < 0) {
            fprintf(stderr, "herald-sink: open %s: %s\n", sh.conf.record_path, strerror(errno));
            goto cleanup;
        }
    }

    /* The first socket decides the port (port 0 picks a free one); the
     * others join it through SO_REUSEPORT. */
    for (int i = 0; i < sh.conf.threads; i++) {
        int lfd = sink_listen(sh.conf.host, sh.conf.port, err, sizeof err);
        if (lfd < 0) {
            fprintf(stderr, "herald-sink: %s\n", err);
            goto cleanup;
        }
        if (i == 0) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            char hbuf[NI_MAXHOST];
            getsockname(lfd, (struct sockaddr *)&ss, &sl);
            getnameinfo((struct sockaddr *)&ss, sl, hbuf, sizeof hbuf, sh.conf.port,
                        sizeof sh.conf.port, NI_NUMERICHOST | NI_NUMERICSERV);
            fprintf(stderr, "sink listening on %s%s%s:%s\n", ss.ss_family == AF_INET6 ? "[" : "",
                    hbuf, ss.ss_family == AF_INET6 ? "]" : "", sh.conf.port);
        }
        loops[i] = sink_loop_new(&sh, &canned, lfd);
        if (loops[i] == NULL) {
            fprintf(stderr, "herald-sink: cannot set up event loop %d\n", i);
            goto cleanup;
        }
    }

    if (sh.conf.threads == 1) {
        sink_loop_run(loops[0]);
    } else {
        /* Signals go to the main thread, which only waits. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        for (; started < sh.conf.threads; started++)
            if (pthread_create(&tids[started], NULL, sink_loop_run, loops[started]) != 0)
                break;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (started < sh.conf.threads) {
            fprintf(stderr, "herald-sink: cannot start threads\n");
            sink_stop = 1;
        }
        for (int i = 0; i < started; i++)
            pthread_join(tids[i], NULL);
        if (started < sh.conf.threads)
            goto cleanup;
    }
    rc = 0;
    for (int i = 0; i < sh.conf.threads; i++)
        if (loops[i] != NULL && loops[i]->rc != 0)
            rc = 1;

cleanup:
    for (int i = 0; i < sh.conf.threads; i++)
        sink_loop_free(loops[i]);
    if (sh.record_fd >= 0)
        close(sh.record_fd);
    free(sh.seen.slots);
    pthread_mutex_destroy(&sh.seen.lock);
    sink_canned_free(&canned);
    return rc;
}
