/* wk_h2: an HTTP/2 client engine on nghttp2 + OpenSSL + libuv (see wk_h2.h).
 *
 * Data:
 *   - the engine (wk_h2): the origin, one SSL_CTX, the nghttp2 callbacks
 *     and options shared by its sessions, the allocator handed to them
 *     (wk_h2_mem), one uv_timer for every deadline, one uv_prepare that
 *     starts what was submitted before the loop next waits, the connection
 *     slots (conf.connections of them, each with its back-off), every
 *     connection (wk_h2_conn) in conns, and the request pool;
 *   - a request (wk_h2_req) is FREE (on the free list), QUEUED (on queue),
 *     STREAM (on its connection's streams), or ORPHAN: done for its caller
 *     (timed out or cancelled) while its reset stream is not closed yet,
 *     so nghttp2 may still read the header array in its slot.  QUEUED and
 *     STREAM requests are also on live, in deadline order (one timeout for
 *     all, so submission order; a requeued request keeps its place);
 *   - a connection is RESOLVING, CONNECTING (TCP), HANDSHAKE (TLS),
 *     SETTINGS (waiting for the peer's first SETTINGS), READY, DRAINING
 *     (after a GOAWAY: no new streams; closed once its streams are) or
 *     CLOSED (its handles closing).  A connection in a slot is any but
 *     DRAINING and CLOSED; leaving the slot lets a new one open there.
 * The socket is a non-blocking descriptor under a uv_poll; reads go
 * SSL_read -> nghttp2_session_mem_recv, writes nghttp2_session_mem_send ->
 * an output buffer -> SSL_write, so a burst of requests is one TLS record
 * and one write.  Whoever frees: the engine frees its connections (a
 * connection's memory once its handles closed) and the pool; the engine
 * itself goes once its own and its connections' handles closed. */
#include "wk_h2.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hr_buf.h"
#include "hr_vec.h"
#include "wk_h2_mem.h"

#define WK_H2_SLAB 64                   /* requests allocated at once */
#define WK_H2_MSG_MAX 160               /* an error message */
#define WK_H2_READ_MAX 16384            /* one SSL_read */
#define WK_H2_OUT_FILL 65536            /* mem_send while less than this waits */
#define WK_H2_OUT_MAX (4u << 20)        /* a connection's output buffer cap */
#define WK_H2_STREAM_WINDOW (256 << 10) /* our receive window per stream... */
#define WK_H2_CONN_WINDOW (16 << 20)    /* ...and per connection */
#define WK_H2_PSEUDO 4                  /* :method :scheme :authority :path */

typedef enum wk_h2_req_state {
    WK_H2_REQ_FREE,
    WK_H2_REQ_QUEUED,
    WK_H2_REQ_STREAM,
    WK_H2_REQ_ORPHAN,
    WK_H2_REQ_ENDING, /* off the queue and its connection, about to be requeued or done */
} wk_h2_req_state;

typedef enum wk_h2_conn_state {
    WK_H2_CONN_RESOLVING,
    WK_H2_CONN_CONNECTING,
    WK_H2_CONN_HANDSHAKE,
    WK_H2_CONN_SETTINGS,
    WK_H2_CONN_READY,
    WK_H2_CONN_DRAINING,
    WK_H2_CONN_CLOSED,
    WK_H2_CONN__COUNT
} wk_h2_conn_state;

static const char *const wk_h2_conn_state_names[WK_H2_CONN__COUNT] = {
    "resolving", "connecting", "in the TLS handshake", "waiting for SETTINGS", "ready",
    "draining",  "closed",
};

const char *const wk_h2_err_names[WK_H2__ERR_COUNT] = {
    "ok",     "connect", "tls",     "timeout",  "reset",
    "closed", "refused", "too_big", "protocol", "shutdown",
};

typedef struct wk_h2_conn wk_h2_conn;

struct wk_h2_req {
    TAILQ_ENTRY(wk_h2_req) link; /* free list, queue or the connection's streams */
    TAILQ_ENTRY(wk_h2_req) live; /* QUEUED and STREAM: h2->live */
    wk_h2_req_state state;
    wk_h2_conn *conn; /* STREAM, ORPHAN */
    int32_t stream_id;
    uint64_t deadline; /* uv_now() milliseconds */
    wk_h2_done_cb *done;
    void *user;
    const uint8_t *body; /* borrowed */
    size_t body_len, body_off;
    int requeues;
    bool sent;     /* its HEADERS went out on this stream */
    bool complete; /* the response's END_STREAM arrived */
    int status;
    size_t head_bytes; /* of the response's header list */
    wk_h2_err err;     /* set by a failure noticed before the stream closes */
    char msg[WK_H2_MSG_MAX];
    bool kept[WK_H2_KEEP_MAX];
    char keep[WK_H2_KEEP_MAX][WK_H2_KEEP_VALUE_MAX + 1];
    hr_buf resp; /* the response body, capped at conf.body_max */
    nghttp2_nv nv[WK_H2_PSEUDO + WK_H2_HEADERS_MAX];
    size_t nnv;
    char head[WK_H2_HEAD_MAX]; /* what nv points to */
};

struct wk_h2_conn {
    wk_h2 *h2;
    int slot; /* index in h2->slot, -1 once it left it */
    wk_h2_conn_state state;
    bool was_ready; /* reached READY (a later failure is no connect failure) */
    int fd;
    uv_poll_t poll;
    bool poll_open; /* initialised, its close callback not yet run */
    int events;     /* the poll's, 0: stopped */
    uv_getaddrinfo_t gai;
    bool resolving; /* gai is pending: the struct outlives it */
    SSL *ssl;
    nghttp2_session *sess;
    uint32_t max_streams; /* min(peer's SETTINGS_MAX_CONCURRENT_STREAMS, conf) */
    size_t nstreams;      /* requests on streams (ORPHAN included) */
    int32_t goaway_last;  /* the peer's last-stream-id, INT32_MAX before a GOAWAY */
    uint64_t connect_deadline;
    hr_buf out; /* serialized frames not yet taken by SSL_write */
    size_t out_off;
    TAILQ_HEAD(, wk_h2_req) streams;
    TAILQ_ENTRY(wk_h2_conn) link; /* h2->conns */
};

typedef struct wk_h2_slot {
    wk_h2_conn *conn;
    uint64_t retry_at; /* no connection attempt before */
    int backoff_ms;    /* the last back-off, 0 after a success */
} wk_h2_slot;

struct wk_h2 {
    uv_loop_t *loop;
    wk_h2_conf conf; /* strings point into the engine's own copies below */
    char host[256];
    char authority[300];
    char *ca_file;
    char keep[WK_H2_KEEP_MAX][64];
    size_t keep_len[WK_H2_KEEP_MAX];
    bool literal; /* host is an IP address (no resolving, no SNI) */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    SSL_CTX *ctx;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *opt;
    wk_h2_mem mem;
    uv_timer_t timer;
    uv_prepare_t prepare;
    int handles; /* the engine's own uv handles not yet closed */
    bool freeing;
    bool pump_due; /* the prepare runs wk_h2_pump */
    uint64_t rand;
    wk_h2_slot slot[WK_H2_CONNECTIONS_MAX];
    TAILQ_HEAD(, wk_h2_conn) conns;
    TAILQ_HEAD(, wk_h2_req) queue, live, free;
    HR_VEC(wk_h2_req *) slabs;
    size_t used; /* requests submitted and not yet done (or cancelled) */
    size_t queued;
    wk_h2_stats st;
    uint8_t rbuf[WK_H2_READ_MAX];
};

static void wk_h2_pump(wk_h2 *h2);
static void wk_h2_prepare_cb(uv_prepare_t *prepare);
static void wk_h2_timer_cb(uv_timer_t *timer);
static void wk_h2_conn_poll_cb(uv_poll_t *poll, int status, int events);
static void wk_h2_conn_close(wk_h2_conn *conn, wk_h2_err err, const char *msg);

void wk_h2_conf_init(wk_h2_conf *conf)
{
    memset(conf, 0, sizeof *conf);
    conf->port = 443;
    conf->tls_verify = true;
    conf->connections = 1;
    conf->max_streams = 1000;
    conf->connect_timeout_ms = 10000;
    conf->timeout_ms = 30000;
    conf->max_requests = 10000;
    conf->body_max = 64 << 10;
    conf->header_max = 16 << 10;
    conf->backoff_min_ms = 100;
    conf->backoff_max_ms = 10000;
}

/* ---------------------------------------------------------------- requests */

static wk_h2_req *wk_h2_req_get(wk_h2 *h2)
{
    wk_h2_req *req;

    if (TAILQ_EMPTY(&h2->free)) {
        wk_h2_req *slab = calloc(WK_H2_SLAB, sizeof *slab);
        if (slab == NULL)
            return NULL;
        if (hr_vec_push(&h2->slabs, slab) != 0) {
            free(slab);
            return NULL;
        }
        for (size_t i = 0; i < WK_H2_SLAB; i++) {
            hr_buf_init(&slab[i].resp, h2->conf.body_max);
            TAILQ_INSERT_TAIL(&h2->free, &slab[i], link);
        }
        h2->st.pool += WK_H2_SLAB;
    }
    req = TAILQ_FIRST(&h2->free);
    TAILQ_REMOVE(&h2->free, req, link);
    return req;
}

static void wk_h2_req_put(wk_h2 *h2, wk_h2_req *req)
{
    req->state = WK_H2_REQ_FREE;
    req->conn = NULL;
    TAILQ_INSERT_HEAD(&h2->free, req, link);
}

/* Forgets what an attempt received, before the (next) attempt. */
static void wk_h2_req_reset(wk_h2_req *req)
{
    req->conn = NULL;
    req->stream_id = 0;
    req->body_off = 0;
    req->sent = false;
    req->complete = false;
    req->status = 0;
    req->head_bytes = 0;
    req->err = WK_H2_OK;
    req->msg[0] = '\0';
    memset(req->kept, 0, sizeof req->kept);
    hr_buf_reset(&req->resp);
}

/* Records a failure of REQ that the stream's close will report. */
static void wk_h2_req_fail(wk_h2_req *req, wk_h2_err err, const char *msg)
{
    if (req->err != WK_H2_OK)
        return;
    req->err = err;
    snprintf(req->msg, sizeof req->msg, "%s", msg);
}

/* Hands REQ's outcome to its caller (ERR, MSG and UNPROCESSED when ERR is
 * not WK_H2_OK); REQ leaves the queue or live list, then goes back to the
 * pool unless its stream is still open (it becomes an ORPHAN). */
static void wk_h2_req_done(wk_h2 *h2, wk_h2_req *req, wk_h2_err err, const char *msg,
                           bool unprocessed)
{
    wk_h2_response resp = {.err = err, .msg = err == WK_H2_OK ? "" : msg};
    wk_h2_done_cb *done = req->done;
    void *user = req->user;

    if (err == WK_H2_OK) {
        resp.status = req->status;
        h2->st.responses++;
    } else {
        resp.unprocessed = unprocessed;
    }
    h2->st.errors[err]++;
    resp.body = req->resp.data != NULL ? req->resp.data : "";
    resp.body_len = req->resp.len;
    for (size_t i = 0; i < h2->conf.nkeep; i++)
        resp.keep[i] = req->kept[i] ? req->keep[i] : NULL;
    TAILQ_REMOVE(&h2->live, req, live);
    if (req->state == WK_H2_REQ_QUEUED) {
        TAILQ_REMOVE(&h2->queue, req, link);
        h2->queued--;
    }
    req->done = NULL;
    /* Not the caller's any more: its callback may submit in its place. */
    h2->used--;
    if (req->state == WK_H2_REQ_STREAM) {
        req->state = WK_H2_REQ_ORPHAN;
        done(user, &resp);
    } else {
        done(user, &resp);
        /* After the call: RESP points into the slot. */
        wk_h2_req_put(h2, req);
    }
}

/* Puts REQ (ENDING: its stream refused or never started) back at the head
 * of the queue, keeping its place in live, or fails it when it was refused
 * too often. */
static void wk_h2_req_requeue(wk_h2 *h2, wk_h2_req *req, const char *why)
{
    if (++req->requeues > WK_H2_REQUEUE_MAX) {
        char msg[WK_H2_MSG_MAX];
        snprintf(msg, sizeof msg, "refused %d times (last: %s)", req->requeues, why);
        wk_h2_req_done(h2, req, WK_H2_E_REFUSED, msg, true);
        return;
    }
    wk_h2_req_reset(req);
    req->state = WK_H2_REQ_QUEUED;
    TAILQ_INSERT_HEAD(&h2->queue, req, link);
    h2->queued++;
    h2->st.requeued++;
}

/* ---------------------------------------------------------------- scheduling */

static uint64_t wk_h2_now(const wk_h2 *h2)
{
    return uv_now(h2->loop);
}

/* Asks for wk_h2_pump before the loop next waits. */
static void wk_h2_pump_later(wk_h2 *h2)
{
    if (!h2->pump_due && !h2->freeing) {
        h2->pump_due = true;
        uv_prepare_start(&h2->prepare, wk_h2_prepare_cb);
    }
}

/* The next instant the timer must wake at: the first request's deadline,
 * a connection attempt's, or (requests waiting) a slot's back-off end. */
static void wk_h2_arm(wk_h2 *h2)
{
    uint64_t next = UINT64_MAX, now = wk_h2_now(h2);
    wk_h2_conn *conn;

    if (!TAILQ_EMPTY(&h2->live))
        next = TAILQ_FIRST(&h2->live)->deadline;
    TAILQ_FOREACH(conn, &h2->conns, link)
    {
        if (conn->state < WK_H2_CONN_READY && conn->connect_deadline < next)
            next = conn->connect_deadline;
    }
    if (!TAILQ_EMPTY(&h2->queue)) {
        for (int i = 0; i < h2->conf.connections; i++) {
            if (h2->slot[i].conn == NULL && h2->slot[i].retry_at < next)
                next = h2->slot[i].retry_at;
        }
    }
    if (next == UINT64_MAX) {
        uv_timer_stop(&h2->timer);
        return;
    }
    uv_timer_start(&h2->timer, wk_h2_timer_cb, next > now ? next - now : 0, 0);
}

/* A back-off after a failed connection of slot I: doubled from
 * conf.backoff_min_ms up to conf.backoff_max_ms, with full jitter over
 * its upper half. */
static void wk_h2_slot_backoff(wk_h2 *h2, int i)
{
    wk_h2_slot *sl = &h2->slot[i];
    int ms = sl->backoff_ms == 0 ? h2->conf.backoff_min_ms : sl->backoff_ms * 2;

    if (ms > h2->conf.backoff_max_ms)
        ms = h2->conf.backoff_max_ms;
    sl->backoff_ms = ms;
    h2->rand ^= h2->rand << 13;
    h2->rand ^= h2->rand >> 7;
    h2->rand ^= h2->rand << 17;
    sl->retry_at = wk_h2_now(h2) + (uint64_t)ms / 2 + h2->rand % ((uint64_t)ms / 2 + 1);
}

/* ---------------------------------------------------------------- connection I/O */

static void wk_h2_conn_set_state(wk_h2_conn *conn, wk_h2_conn_state state)
{
    conn->state = state;
    if (state == WK_H2_CONN_READY)
        conn->was_ready = true;
}

/* Polls the socket for EVENTS (UV_READABLE | UV_WRITABLE). */
static int wk_h2_conn_watch(wk_h2_conn *conn, int events)
{
    if (events == conn->events)
        return 0;
    conn->events = events;
    return uv_poll_start(&conn->poll, events, wk_h2_conn_poll_cb);
}

/* The detail of a failed SSL call whose SSL_get_error was E, into MSG. */
static void wk_h2_ssl_msg(wk_h2_conn *conn, int e, const char *what, char *msg, size_t len)
{
    unsigned long code = ERR_get_error();
    long verify = SSL_get_verify_result(conn->ssl);

    if (verify != X509_V_OK && conn->state == WK_H2_CONN_HANDSHAKE)
        snprintf(msg, len, "%s: certificate not verified: %s", what,
                 X509_verify_cert_error_string(verify));
    else if (code != 0)
        snprintf(msg, len, "%s: %s", what, ERR_reason_error_string(code));
    else if (e == SSL_ERROR_SYSCALL && errno != 0)
        snprintf(msg, len, "%s: %s", what, strerror(errno));
    else if (e == SSL_ERROR_ZERO_RETURN || e == SSL_ERROR_SYSCALL)
        snprintf(msg, len, "%s: connection closed by the peer", what);
    else
        snprintf(msg, len, "%s: TLS error %d", what, e);
    ERR_clear_error();
}

/* Writes what nghttp2 has to send: frames gathered into conn->out, handed
 * to SSL_write until it would block (then the poll waits for writable).
 * 0, or -1 with MSG. */
static int wk_h2_conn_flush(wk_h2_conn *conn, char *msg, size_t len)
{
    for (;;) {
        while (conn->out.len < WK_H2_OUT_FILL) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(conn->sess, &data);
            if (n < 0) {
                snprintf(msg, len, "nghttp2: %s", nghttp2_strerror((int)n));
                return -1;
            }
            if (n == 0)
                break;
            if (hr_buf_append(&conn->out, (const char *)data, (size_t)n) != 0) {
                snprintf(msg, len, "output over %u bytes", WK_H2_OUT_MAX);
                return -1;
            }
        }
        if (conn->out_off == conn->out.len) {
            hr_buf_reset(&conn->out);
            conn->out_off = 0;
            if (wk_h2_conn_watch(conn, UV_READABLE) == 0)
                return 0;
            snprintf(msg, len, "uv_poll_start failed");
            return -1;
        }
        ERR_clear_error();
        int w = SSL_write(conn->ssl, conn->out.data + conn->out_off,
                          (int)(conn->out.len - conn->out_off));
        if (w > 0) {
            conn->out_off += (size_t)w;
            continue;
        }
        int e = SSL_get_error(conn->ssl, w);
        if (e == SSL_ERROR_WANT_WRITE) {
            if (wk_h2_conn_watch(conn, UV_READABLE | UV_WRITABLE) == 0)
                return 0;
            snprintf(msg, len, "uv_poll_start failed");
            return -1;
        }
        if (e == SSL_ERROR_WANT_READ)
            return 0;
        wk_h2_ssl_msg(conn, e, "write", msg, len);
        return -1;
    }
}

/* Reads what the socket holds into nghttp2.  0, or -1 with MSG (the peer
 * closed, a TLS or HTTP/2 error). */
static int wk_h2_conn_read(wk_h2_conn *conn, char *msg, size_t len)
{
    wk_h2 *h2 = conn->h2;

    for (;;) {
        ERR_clear_error();
        int n = SSL_read(conn->ssl, h2->rbuf, sizeof h2->rbuf);
        if (n > 0) {
            ssize_t rv = nghttp2_session_mem_recv(conn->sess, h2->rbuf, (size_t)n);
            if (rv < 0) {
                snprintf(msg, len, "nghttp2: %s", nghttp2_strerror((int)rv));
                return -1;
            }
            continue;
        }
        int e = SSL_get_error(conn->ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return 0;
        wk_h2_ssl_msg(conn, e, "read", msg, len);
        return -1;
    }
}

/* ---------------------------------------------------------------- nghttp2 callbacks */

/* REQ of STREAM_ID on CONN, or NULL when the stream is not a live one of
 * this connection (a stale user pointer of a recycled slot, an orphan). */
static wk_h2_req *wk_h2_stream_req(wk_h2_conn *conn, int32_t stream_id)
{
    wk_h2_req *req = nghttp2_session_get_stream_user_data(conn->sess, stream_id);

    if (req == NULL || req->conn != conn || req->stream_id != stream_id ||
        req->state != WK_H2_REQ_STREAM)
        return NULL;
    return req;
}

/* Stops REQ's stream: the failure is reported when it closes. */
static void wk_h2_stream_refuse(wk_h2_conn *conn, wk_h2_req *req, wk_h2_err err, const char *msg)
{
    wk_h2_req_fail(req, err, msg);
    nghttp2_submit_rst_stream(conn->sess, NGHTTP2_FLAG_NONE, req->stream_id, NGHTTP2_CANCEL);
}

static int wk_h2_on_header(nghttp2_session *sess, const nghttp2_frame *frame, const uint8_t *name,
                           size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                           void *data)
{
    wk_h2_conn *conn = data;
    wk_h2 *h2 = conn->h2;
    wk_h2_req *req = wk_h2_stream_req(conn, frame->hd.stream_id);
    char msg[WK_H2_MSG_MAX];

    (void)sess;
    (void)flags;
    if (req == NULL || req->err != WK_H2_OK)
        return 0;
    /* RFC 7541's size of an entry: what SETTINGS_MAX_HEADER_LIST_SIZE counts. */
    req->head_bytes += namelen + valuelen + 32;
    if (req->head_bytes > h2->conf.header_max) {
        snprintf(msg, sizeof msg, "response headers over %zu bytes", h2->conf.header_max);
        wk_h2_stream_refuse(conn, req, WK_H2_E_TOO_BIG, msg);
        return 0;
    }
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        req->status = 0;
        for (size_t i = 0; i < valuelen && i < 3; i++)
            req->status = req->status * 10 + (value[i] - '0');
        return 0;
    }
    for (size_t i = 0; i < h2->conf.nkeep; i++) {
        const char *k = h2->conf.keep[i];
        if (h2->keep_len[i] != namelen || memcmp(k, name, namelen) != 0)
            continue;
        if (valuelen > WK_H2_KEEP_VALUE_MAX) {
            snprintf(msg, sizeof msg, "response header %s over %d bytes", k, WK_H2_KEEP_VALUE_MAX);
            wk_h2_stream_refuse(conn, req, WK_H2_E_TOO_BIG, msg);
            return 0;
        }
        memcpy(req->keep[i], value, valuelen);
        req->keep[i][valuelen] = '\0';
        req->kept[i] = true;
    }
    return 0;
}

static int wk_h2_on_data(nghttp2_session *sess, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *user)
{
    wk_h2_conn *conn = user;
    wk_h2_req *req = wk_h2_stream_req(conn, stream_id);
    char msg[WK_H2_MSG_MAX];

    (void)sess;
    (void)flags;
    if (req == NULL || req->err != WK_H2_OK)
        return 0;
    if (hr_buf_append(&req->resp, (const char *)data, len) != 0) {
        snprintf(msg, sizeof msg, "response body over %zu bytes", conn->h2->conf.body_max);
        wk_h2_stream_refuse(conn, req, WK_H2_E_TOO_BIG, msg);
    }
    return 0;
}

static int wk_h2_on_frame_recv(nghttp2_session *sess, const nghttp2_frame *frame, void *data)
{
    wk_h2_conn *conn = data;
    wk_h2 *h2 = conn->h2;
    wk_h2_req *req;

    switch (frame->hd.type) {
    case NGHTTP2_SETTINGS:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK)
            break;
        conn->max_streams =
            nghttp2_session_get_remote_settings(sess, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
        if (conn->max_streams > h2->conf.max_streams)
            conn->max_streams = h2->conf.max_streams;
        if (conn->state == WK_H2_CONN_SETTINGS) {
            wk_h2_conn_set_state(conn, WK_H2_CONN_READY);
            h2->slot[conn->slot].backoff_ms = 0;
        }
        break;
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
            break;
        req = wk_h2_stream_req(conn, frame->hd.stream_id);
        if (req != NULL)
            req->complete = true;
        break;
    case NGHTTP2_GOAWAY:
        h2->st.goaways++;
        conn->goaway_last = frame->goaway.last_stream_id;
        if (conn->slot >= 0) {
            /* A new connection may open at once after a graceful GOAWAY;
             * after an error one it waits a back-off. */
            if (frame->goaway.error_code == NGHTTP2_NO_ERROR)
                h2->slot[conn->slot].retry_at = wk_h2_now(h2);
            else
                wk_h2_slot_backoff(h2, conn->slot);
            h2->slot[conn->slot].conn = NULL;
            conn->slot = -1;
        }
        wk_h2_conn_set_state(conn, WK_H2_CONN_DRAINING);
        break;
    default:
        break;
    }
    return 0;
}

static int wk_h2_on_frame_send(nghttp2_session *sess, const nghttp2_frame *frame, void *data)
{
    wk_h2_conn *conn = data;
    wk_h2_req *req;

    (void)sess;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        req = wk_h2_stream_req(conn, frame->hd.stream_id);
        if (req != NULL)
            req->sent = true;
    }
    return 0;
}

/* A request's HEADERS that nghttp2 did not send (a GOAWAY came first): the
 * peer never saw it, so it goes to another connection. */
static int wk_h2_on_frame_not_send(nghttp2_session *sess, const nghttp2_frame *frame, int lib_error,
                                   void *data)
{
    wk_h2_conn *conn = data;
    wk_h2_req *req;

    (void)sess;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    /* The stream never opened, so nghttp2 has no user pointer for it. */
    TAILQ_FOREACH(req, &conn->streams, link)
    {
        if (req->stream_id == frame->hd.stream_id)
            break;
    }
    if (req == NULL)
        return 0;
    TAILQ_REMOVE(&conn->streams, req, link);
    conn->nstreams--;
    if (req->state == WK_H2_REQ_ORPHAN) {
        wk_h2_req_put(conn->h2, req);
    } else {
        req->state = WK_H2_REQ_ENDING;
        wk_h2_req_requeue(conn->h2, req, nghttp2_strerror(lib_error));
    }
    wk_h2_pump_later(conn->h2);
    return 0;
}

static int wk_h2_on_stream_close(nghttp2_session *sess, int32_t stream_id, uint32_t code,
                                 void *data)
{
    wk_h2_conn *conn = data;
    wk_h2 *h2 = conn->h2;
    wk_h2_req *req = nghttp2_session_get_stream_user_data(sess, stream_id);
    char msg[WK_H2_MSG_MAX];

    if (req == NULL || req->conn != conn || req->stream_id != stream_id ||
        (req->state != WK_H2_REQ_STREAM && req->state != WK_H2_REQ_ORPHAN))
        return 0;
    TAILQ_REMOVE(&conn->streams, req, link);
    conn->nstreams--;
    wk_h2_pump_later(h2);
    if (req->state == WK_H2_REQ_ORPHAN) {
        wk_h2_req_put(h2, req);
        return 0;
    }
    req->state = WK_H2_REQ_ENDING;
    if (req->err != WK_H2_OK) {
        wk_h2_req_done(h2, req, req->err, req->msg, false);
    } else if (req->complete) {
        wk_h2_req_done(h2, req, WK_H2_OK, "", false);
    } else if (code == NGHTTP2_REFUSED_STREAM || stream_id > conn->goaway_last) {
        /* The peer did not process it (RFC 9113 8.7): safe to send again. */
        wk_h2_req_requeue(h2, req,
                          code == NGHTTP2_REFUSED_STREAM ? "REFUSED_STREAM"
                                                         : "above the GOAWAY's last-stream-id");
    } else {
        snprintf(msg, sizeof msg, "stream reset by the peer: %s", nghttp2_http2_strerror(code));
        wk_h2_req_done(h2, req, WK_H2_E_RESET, msg, false);
    }
    return 0;
}

static ssize_t wk_h2_read_body(nghttp2_session *sess, int32_t stream_id, uint8_t *buf, size_t len,
                               uint32_t *flags, nghttp2_data_source *src, void *data)
{
    wk_h2_req *req = src->ptr;
    size_t n;

    (void)sess;
    (void)data;
    /* An orphan's body may be gone (its caller was told it is done). */
    if (req->state != WK_H2_REQ_STREAM || req->stream_id != stream_id)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    n = req->body_len - req->body_off < len ? req->body_len - req->body_off : len;
    memcpy(buf, req->body + req->body_off, n);
    req->body_off += n;
    if (req->body_off == req->body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---------------------------------------------------------------- connections */

/* Frees CONN once it is closed and none of its handles is pending; the
 * engine too when it is being freed and this was its last. */
static void wk_h2_conn_release(wk_h2_conn *conn);

static void wk_h2_conn_poll_closed(uv_handle_t *handle)
{
    wk_h2_conn *conn = handle->data;

    conn->poll_open = false;
    wk_h2_conn_release(conn);
}

/* Leaves the slot (a new connection may open there) and takes no new
 * streams. */
static void wk_h2_conn_drain(wk_h2_conn *conn)
{
    if (conn->slot >= 0) {
        conn->h2->slot[conn->slot].conn = NULL;
        conn->slot = -1;
    }
    wk_h2_conn_set_state(conn, WK_H2_CONN_DRAINING);
}

/* Fails the requests waiting in the queue with ERR and MSG (a connection
 * attempt failed and none is ready).  Requests their callbacks submit wait
 * for the next attempt. */
static void wk_h2_fail_queue(wk_h2 *h2, wk_h2_err err, const char *msg)
{
    TAILQ_HEAD(, wk_h2_req) q = TAILQ_HEAD_INITIALIZER(q);
    wk_h2_req *req;

    TAILQ_CONCAT(&q, &h2->queue, link);
    h2->queued = 0;
    TAILQ_FOREACH(req, &q, link)
    req->state = WK_H2_REQ_ENDING;
    while ((req = TAILQ_FIRST(&q)) != NULL) {
        TAILQ_REMOVE(&q, req, link);
        if (req->done == NULL) /* cancelled meanwhile */
            wk_h2_req_put(h2, req);
        else
            wk_h2_req_done(h2, req, err, msg, true);
    }
}

static bool wk_h2_any_ready(const wk_h2 *h2)
{
    for (int i = 0; i < h2->conf.connections; i++) {
        if (h2->slot[i].conn != NULL && h2->slot[i].conn->state == WK_H2_CONN_READY)
            return true;
    }
    return false;
}

/* Closes CONN: ERR (WK_H2_OK for a drained connection) and MSG say why.
 * Its requests that the peer never saw are queued again, the others fail
 * with ERR (WK_H2_E_SHUTDOWN while the engine is freed).  A connection
 * that never became ready counts as a failed attempt: its slot backs off,
 * and the queue fails with ERR when no other connection is ready. */
static void wk_h2_conn_close(wk_h2_conn *conn, wk_h2_err err, const char *msg)
{
    wk_h2 *h2 = conn->h2;
    TAILQ_HEAD(, wk_h2_req) q = TAILQ_HEAD_INITIALIZER(q);
    bool attempt_failed = !conn->was_ready && err != WK_H2_OK;
    wk_h2_req *req;

    if (conn->state == WK_H2_CONN_CLOSED)
        return;
    if (conn->slot >= 0) {
        if (err != WK_H2_OK && err != WK_H2_E_SHUTDOWN)
            wk_h2_slot_backoff(h2, conn->slot);
        else
            h2->slot[conn->slot].retry_at = wk_h2_now(h2);
        h2->slot[conn->slot].conn = NULL;
        conn->slot = -1;
    }
    if (attempt_failed)
        h2->st.connect_failures++;
    wk_h2_conn_set_state(conn, WK_H2_CONN_CLOSED);
    /* Off the connection before any callback runs, so a callback that
     * cancels one of them finds it ENDING. */
    TAILQ_CONCAT(&q, &conn->streams, link);
    TAILQ_FOREACH(req, &q, link)
    {
        if (req->state == WK_H2_REQ_STREAM)
            req->state = WK_H2_REQ_ENDING;
    }
    conn->nstreams = 0;
    nghttp2_session_del(conn->sess);
    conn->sess = NULL;
    SSL_free(conn->ssl);
    conn->ssl = NULL;
    if (conn->poll_open)
        uv_close((uv_handle_t *)&conn->poll, wk_h2_conn_poll_closed);
    if (conn->fd >= 0)
        close(conn->fd);
    conn->fd = -1;
    if (conn->resolving)
        uv_cancel((uv_req_t *)&conn->gai);
    while ((req = TAILQ_FIRST(&q)) != NULL) {
        TAILQ_REMOVE(&q, req, link);
        if (req->state == WK_H2_REQ_ORPHAN || req->done == NULL)
            wk_h2_req_put(h2, req);
        else if (h2->freeing)
            wk_h2_req_done(h2, req, WK_H2_E_SHUTDOWN, "the engine was freed", !req->sent);
        else if (!req->sent || req->stream_id > conn->goaway_last)
            wk_h2_req_requeue(h2, req, "the connection ended before the request went out");
        else if (req->err != WK_H2_OK)
            wk_h2_req_done(h2, req, req->err, req->msg, false);
        else if (req->complete)
            wk_h2_req_done(h2, req, WK_H2_OK, "", false);
        else
            wk_h2_req_done(h2, req, err != WK_H2_OK ? err : WK_H2_E_CLOSED, msg, false);
    }
    if (attempt_failed && !h2->freeing && !wk_h2_any_ready(h2))
        wk_h2_fail_queue(h2, err, msg);
    wk_h2_pump_later(h2);
    wk_h2_conn_release(conn);
}

/* Starts REQ on CONN (ready, with a stream to spare). */
static void wk_h2_conn_start(wk_h2_conn *conn, wk_h2_req *req)
{
    nghttp2_data_provider prd = {.source.ptr = req, .read_callback = wk_h2_read_body};
    int32_t id = nghttp2_submit_request(conn->sess, NULL, req->nv, req->nnv,
                                        req->body_len > 0 ? &prd : NULL, req);

    if (id < 0) {
        req->state = WK_H2_REQ_ENDING;
        if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
            /* This connection used up its stream ids: a new one takes over. */
            wk_h2_conn_drain(conn);
            wk_h2_req_requeue(conn->h2, req, "stream ids used up");
        } else {
            wk_h2_req_done(conn->h2, req, WK_H2_E_PROTOCOL, nghttp2_strerror(id), true);
        }
        return;
    }
    req->state = WK_H2_REQ_STREAM;
    req->conn = conn;
    req->stream_id = id;
    TAILQ_INSERT_TAIL(&conn->streams, req, link);
    conn->nstreams++;
}

/* The TLS handshake goes on; once done, the HTTP/2 session starts (our
 * SETTINGS: no server push, the stream window, the header list cap).
 * WK_H2_OK, or the error with MSG. */
static wk_h2_err wk_h2_conn_handshake(wk_h2_conn *conn, char *msg, size_t len)
{
    wk_h2 *h2 = conn->h2;
    const unsigned char *alpn = NULL;
    unsigned alpn_len = 0;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WK_H2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)h2->conf.header_max},
    };
    int rv;

    ERR_clear_error();
    rv = SSL_connect(conn->ssl);
    if (rv != 1) {
        int e = SSL_get_error(conn->ssl, rv);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return wk_h2_conn_watch(conn, e == SSL_ERROR_WANT_READ ? UV_READABLE : UV_WRITABLE) == 0
                       ? WK_H2_OK
                       : WK_H2_E_TLS;
        wk_h2_ssl_msg(conn, e, "TLS handshake", msg, len);
        return WK_H2_E_TLS;
    }
    SSL_get0_alpn_selected(conn->ssl, &alpn, &alpn_len);
    if (alpn_len != 2 || memcmp(alpn, "h2", 2) != 0) {
        snprintf(msg, len, "TLS handshake: the peer did not choose h2 (ALPN)");
        return WK_H2_E_TLS;
    }
    rv = nghttp2_session_client_new3(&conn->sess, h2->cbs, conn, h2->opt, &h2->mem.mem);
    if (rv == 0)
        rv = nghttp2_submit_settings(conn->sess, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof *iv);
    if (rv == 0)
        rv = nghttp2_session_set_local_window_size(conn->sess, NGHTTP2_FLAG_NONE, 0,
                                                   WK_H2_CONN_WINDOW);
    if (rv != 0) {
        snprintf(msg, len, "nghttp2: %s", nghttp2_strerror(rv));
        return WK_H2_E_PROTOCOL;
    }
    wk_h2_conn_set_state(conn, WK_H2_CONN_SETTINGS);
    return wk_h2_conn_flush(conn, msg, len) == 0 ? WK_H2_OK : WK_H2_E_CLOSED;
}

/* Opens CONN's socket to SA and starts connecting (TLS set up for the
 * handshake that follows).  WK_H2_OK, or the error with MSG. */
static wk_h2_err wk_h2_conn_connect(wk_h2_conn *conn, const struct sockaddr *sa, socklen_t salen,
                                    char *msg, size_t len)
{
    wk_h2 *h2 = conn->h2;
    int one = 1;

    conn->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (conn->fd < 0) {
        snprintf(msg, len, "socket: %s", strerror(errno));
        return WK_H2_E_CONNECT;
    }
    setsockopt(conn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(conn->fd, sa, salen) != 0 && errno != EINPROGRESS) {
        snprintf(msg, len, "connect to %.64s:%d: %s", h2->host, h2->conf.port, strerror(errno));
        return WK_H2_E_CONNECT;
    }
    if (uv_poll_init_socket(h2->loop, &conn->poll, conn->fd) != 0) {
        snprintf(msg, len, "uv_poll_init_socket failed");
        return WK_H2_E_CONNECT;
    }
    conn->poll.data = conn;
    conn->poll_open = true;
    /* The deadlines' timer keeps the loop alive while requests are live;
     * an idle connection does not. */
    uv_unref((uv_handle_t *)&conn->poll);
    conn->ssl = SSL_new(h2->ctx);
    if (conn->ssl == NULL || SSL_set_fd(conn->ssl, conn->fd) != 1 ||
        (!h2->literal && SSL_set_tlsext_host_name(conn->ssl, h2->host) != 1) ||
        (h2->conf.tls_verify && !h2->literal && SSL_set1_host(conn->ssl, h2->host) != 1) ||
        (h2->conf.tls_verify && h2->literal &&
         X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(conn->ssl), h2->host) != 1)) {
        snprintf(msg, len, "TLS set-up failed");
        return WK_H2_E_TLS;
    }
    SSL_set_connect_state(conn->ssl);
    wk_h2_conn_set_state(conn, WK_H2_CONN_CONNECTING);
    return wk_h2_conn_watch(conn, UV_WRITABLE) == 0 ? WK_H2_OK : WK_H2_E_CONNECT;
}

static void wk_h2_conn_resolved(uv_getaddrinfo_t *gai, int status, struct addrinfo *res)
{
    wk_h2_conn *conn = gai->data;
    wk_h2 *h2 = conn->h2;
    char msg[WK_H2_MSG_MAX];
    wk_h2_err err = WK_H2_OK;

    conn->resolving = false;
    if (conn->state == WK_H2_CONN_CLOSED) {
        uv_freeaddrinfo(res);
        wk_h2_conn_release(conn);
        return;
    }
    if (status != 0 || res == NULL) {
        snprintf(msg, sizeof msg, "resolving %.64s: %s", h2->host, uv_strerror(status));
        err = WK_H2_E_CONNECT;
    } else {
        err = wk_h2_conn_connect(conn, res->ai_addr, res->ai_addrlen, msg, sizeof msg);
    }
    uv_freeaddrinfo(res);
    if (err != WK_H2_OK)
        wk_h2_conn_close(conn, err, msg);
    wk_h2_pump(h2);
}

/* Opens a connection in slot I. */
static void wk_h2_slot_open(wk_h2 *h2, int i)
{
    wk_h2_conn *conn = calloc(1, sizeof *conn);
    char msg[WK_H2_MSG_MAX], port[8];
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    wk_h2_err err = WK_H2_OK;

    if (conn == NULL) {
        wk_h2_slot_backoff(h2, i);
        return;
    }
    conn->h2 = h2;
    conn->slot = i;
    conn->fd = -1;
    conn->goaway_last = INT32_MAX;
    conn->connect_deadline = wk_h2_now(h2) + (uint64_t)h2->conf.connect_timeout_ms;
    hr_buf_init(&conn->out, WK_H2_OUT_MAX);
    TAILQ_INIT(&conn->streams);
    TAILQ_INSERT_TAIL(&h2->conns, conn, link);
    h2->slot[i].conn = conn;
    h2->st.connects++;
    if (h2->literal) {
        err = wk_h2_conn_connect(conn, (struct sockaddr *)&h2->addr, h2->addrlen, msg, sizeof msg);
    } else {
        wk_h2_conn_set_state(conn, WK_H2_CONN_RESOLVING);
        snprintf(port, sizeof port, "%d", h2->conf.port);
        conn->gai.data = conn;
        if (uv_getaddrinfo(h2->loop, &conn->gai, wk_h2_conn_resolved, h2->host, port, &hints) ==
            0) {
            conn->resolving = true;
        } else {
            snprintf(msg, sizeof msg, "resolving %.64s failed to start", h2->host);
            err = WK_H2_E_CONNECT;
        }
    }
    if (err != WK_H2_OK)
        wk_h2_conn_close(conn, err, msg);
}

static void wk_h2_conn_poll_cb(uv_poll_t *poll, int status, int events)
{
    wk_h2_conn *conn = poll->data;
    wk_h2 *h2 = conn->h2;
    char msg[WK_H2_MSG_MAX];
    wk_h2_err err = WK_H2_OK;
    int soerr = 0;
    socklen_t solen = sizeof soerr;

    if (status < 0) {
        /* libuv reports a socket error (POLLERR) as UV_EBADF: the socket
         * knows what it was. */
        if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &soerr, &solen) == 0 && soerr != 0)
            snprintf(msg, sizeof msg, "%s %.64s:%d: %s",
                     conn->state == WK_H2_CONN_CONNECTING ? "connect to" : "connection to",
                     h2->host, h2->conf.port, strerror(soerr));
        else
            snprintf(msg, sizeof msg, "poll: %s", uv_strerror(status));
        err = conn->state == WK_H2_CONN_CONNECTING  ? WK_H2_E_CONNECT
              : conn->state == WK_H2_CONN_HANDSHAKE ? WK_H2_E_TLS
                                                    : WK_H2_E_CLOSED;
    } else {
        switch (conn->state) {
        case WK_H2_CONN_CONNECTING:
            if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &soerr, &solen) != 0)
                soerr = errno;
            if (soerr != 0) {
                snprintf(msg, sizeof msg, "connect to %.64s:%d: %s", h2->host, h2->conf.port,
                         strerror(soerr));
                err = WK_H2_E_CONNECT;
                break;
            }
            wk_h2_conn_set_state(conn, WK_H2_CONN_HANDSHAKE);
            err = wk_h2_conn_handshake(conn, msg, sizeof msg);
            break;
        case WK_H2_CONN_HANDSHAKE:
            err = wk_h2_conn_handshake(conn, msg, sizeof msg);
            break;
        case WK_H2_CONN_SETTINGS:
        case WK_H2_CONN_READY:
        case WK_H2_CONN_DRAINING:
            if ((events & UV_READABLE) && wk_h2_conn_read(conn, msg, sizeof msg) != 0)
                err = strncmp(msg, "nghttp2", 7) == 0 ? WK_H2_E_PROTOCOL : WK_H2_E_CLOSED;
            break;
        default:
            return;
        }
    }
    if (err != WK_H2_OK)
        wk_h2_conn_close(conn, err, msg);
    wk_h2_pump(h2);
}

/* Flushes every connection with a session; closes those that fail and the
 * drained ones. */
static void wk_h2_flush_all(wk_h2 *h2)
{
    wk_h2_conn *conn, *next;
    char msg[WK_H2_MSG_MAX];

    for (conn = TAILQ_FIRST(&h2->conns); conn != NULL; conn = next) {
        next = TAILQ_NEXT(conn, link);
        if (conn->sess == NULL || conn->state == WK_H2_CONN_CLOSED)
            continue;
        if (wk_h2_conn_flush(conn, msg, sizeof msg) != 0)
            wk_h2_conn_close(
                conn, strncmp(msg, "nghttp2", 7) == 0 ? WK_H2_E_PROTOCOL : WK_H2_E_CLOSED, msg);
        else if ((conn->state == WK_H2_CONN_DRAINING && conn->nstreams == 0 &&
                  conn->out.len == 0) ||
                 (!nghttp2_session_want_read(conn->sess) &&
                  !nghttp2_session_want_write(conn->sess)))
            wk_h2_conn_close(conn, WK_H2_OK, "the connection was drained");
    }
}

/* ---------------------------------------------------------------- the pump */

/* Starts queued requests on the least loaded ready connections, opens
 * connections in free slots while requests wait, writes what the sessions
 * have to send, and arms the timer.  Runs again (a few times at most)
 * while what it did asked for more (a stream closed on a failed write). */
static void wk_h2_pump(wk_h2 *h2)
{
    for (int pass = 0; pass < 4 && !h2->freeing; pass++) {
        h2->pump_due = false;
        while (!TAILQ_EMPTY(&h2->queue)) {
            wk_h2_conn *best = NULL;
            for (int i = 0; i < h2->conf.connections; i++) {
                wk_h2_conn *conn = h2->slot[i].conn;
                if (conn != NULL && conn->state == WK_H2_CONN_READY &&
                    conn->nstreams < conn->max_streams &&
                    (best == NULL || conn->nstreams < best->nstreams))
                    best = conn;
            }
            if (best == NULL)
                break;
            wk_h2_req *req = TAILQ_FIRST(&h2->queue);
            TAILQ_REMOVE(&h2->queue, req, link);
            h2->queued--;
            wk_h2_conn_start(best, req);
        }
        if (!TAILQ_EMPTY(&h2->queue)) {
            uint64_t now = wk_h2_now(h2);
            for (int i = 0; i < h2->conf.connections; i++) {
                if (h2->slot[i].conn == NULL && h2->slot[i].retry_at <= now)
                    wk_h2_slot_open(h2, i);
            }
        }
        wk_h2_flush_all(h2);
        if (!h2->pump_due)
            break;
    }
    if (!h2->pump_due)
        uv_prepare_stop(&h2->prepare);
    if (!h2->freeing)
        wk_h2_arm(h2);
}

static void wk_h2_prepare_cb(uv_prepare_t *prepare)
{
    wk_h2_pump(prepare->data);
}

/* Expired requests fail (a started one's stream is reset), connection
 * attempts past conf.connect_timeout_ms are closed, back-offs end. */
static void wk_h2_timer_cb(uv_timer_t *timer)
{
    wk_h2 *h2 = timer->data;
    uint64_t now = wk_h2_now(h2);
    wk_h2_conn *conn, *next;
    wk_h2_req *req;
    char msg[WK_H2_MSG_MAX];

    while ((req = TAILQ_FIRST(&h2->live)) != NULL && req->deadline <= now) {
        if (req->state == WK_H2_REQ_QUEUED) {
            snprintf(msg, sizeof msg, "no stream within %d ms", h2->conf.timeout_ms);
            wk_h2_req_done(h2, req, WK_H2_E_TIMEOUT, msg, true);
        } else {
            snprintf(msg, sizeof msg, "no response within %d ms", h2->conf.timeout_ms);
            nghttp2_submit_rst_stream(req->conn->sess, NGHTTP2_FLAG_NONE, req->stream_id,
                                      NGHTTP2_CANCEL);
            wk_h2_req_done(h2, req, WK_H2_E_TIMEOUT, msg, !req->sent);
        }
    }
    for (conn = TAILQ_FIRST(&h2->conns); conn != NULL; conn = next) {
        next = TAILQ_NEXT(conn, link);
        if (conn->state < WK_H2_CONN_READY && conn->connect_deadline <= now) {
            snprintf(msg, sizeof msg, "timed out %s after %d ms",
                     wk_h2_conn_state_names[conn->state], h2->conf.connect_timeout_ms);
            wk_h2_conn_close(
                conn, conn->state == WK_H2_CONN_HANDSHAKE ? WK_H2_E_TLS : WK_H2_E_CONNECT, msg);
        }
    }
    wk_h2_pump(h2);
}

/* ---------------------------------------------------------------- the engine */

static void wk_h2_release(wk_h2 *h2)
{
    if (!h2->freeing || h2->handles > 0 || !TAILQ_EMPTY(&h2->conns))
        return;
    for (size_t i = 0; i < h2->slabs.n; i++) {
        for (size_t j = 0; j < WK_H2_SLAB; j++)
            hr_buf_free(&h2->slabs.v[i][j].resp);
        free(h2->slabs.v[i]);
    }
    hr_vec_free(&h2->slabs);
    wk_h2_mem_release(&h2->mem);
    SSL_CTX_free(h2->ctx);
    nghttp2_session_callbacks_del(h2->cbs);
    nghttp2_option_del(h2->opt);
    free(h2->ca_file);
    free(h2);
}

static void wk_h2_conn_release(wk_h2_conn *conn)
{
    wk_h2 *h2 = conn->h2;

    if (conn->state != WK_H2_CONN_CLOSED || conn->poll_open || conn->resolving)
        return;
    TAILQ_REMOVE(&h2->conns, conn, link);
    hr_buf_free(&conn->out);
    free(conn);
    wk_h2_release(h2);
}

static void wk_h2_handle_closed(uv_handle_t *handle)
{
    wk_h2 *h2 = handle->data;

    h2->handles--;
    wk_h2_release(h2);
}

/* The TLS context: TLS 1.2 or later, ALPN h2, the peer verified against
 * CA_FILE (or the system's store) unless not VERIFY.  NULL with ERRSTR. */
static SSL_CTX *wk_h2_tls_new(const char *ca_file, bool verify, char *errstr, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    static const unsigned char alpn[] = {2, 'h', '2'};

    if (ctx == NULL) {
        snprintf(errstr, errlen, "SSL_CTX_new failed");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    /* Writes may be partial and retried from a moved buffer (the output
     * buffer can grow between two tries); reads take what the socket has. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(ctx, 1);
    if (SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn) != 0 ||
        (ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL)
                         : SSL_CTX_set_default_verify_paths(ctx)) != 1) {
        unsigned long code = ERR_get_error();
        snprintf(errstr, errlen, "%s: %s", ca_file != NULL ? ca_file : "the system's CAs",
                 code != 0 ? ERR_reason_error_string(code) : "cannot be loaded");
        ERR_clear_error();
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int wk_h2_new(uv_loop_t *loop, const wk_h2_conf *conf, wk_h2 **out, char *errstr, size_t errlen)
{
    wk_h2 *h2 = NULL;
    struct sockaddr_in *sin;
    struct sockaddr_in6 *sin6;

    *out = NULL;
    if (conf->host == NULL || conf->host[0] == '\0' || strlen(conf->host) >= sizeof h2->host ||
        conf->port < 1 || conf->port > 65535 || conf->connections < 1 ||
        conf->connections > WK_H2_CONNECTIONS_MAX || conf->max_streams < 1 ||
        conf->connect_timeout_ms < 1 || conf->timeout_ms < 1 || conf->max_requests < 1 ||
        conf->body_max < 1 || conf->header_max < 64 || conf->header_max > UINT32_MAX ||
        conf->backoff_min_ms < 1 || conf->backoff_max_ms < conf->backoff_min_ms ||
        conf->nkeep > WK_H2_KEEP_MAX) {
        snprintf(errstr, errlen, "wk_h2: a setting is out of its bounds (wk_h2.h)");
        return -1;
    }
    h2 = calloc(1, sizeof *h2);
    if (h2 == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    h2->loop = loop;
    h2->conf = *conf;
    snprintf(h2->host, sizeof h2->host, "%s", conf->host);
    h2->conf.host = h2->host;
    for (size_t i = 0; i < conf->nkeep; i++) {
        if (conf->keep[i] == NULL || strlen(conf->keep[i]) >= sizeof h2->keep[i]) {
            snprintf(errstr, errlen, "wk_h2: kept header %zu missing or too long", i);
            goto fail;
        }
        snprintf(h2->keep[i], sizeof h2->keep[i], "%s", conf->keep[i]);
        h2->keep_len[i] = strlen(h2->keep[i]);
        h2->conf.keep[i] = h2->keep[i];
    }
    h2->ca_file = conf->ca_file != NULL ? strdup(conf->ca_file) : NULL;
    h2->conf.ca_file = h2->ca_file;
    sin = (struct sockaddr_in *)&h2->addr;
    sin6 = (struct sockaddr_in6 *)&h2->addr;
    if (inet_pton(AF_INET, h2->host, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)conf->port);
        h2->addrlen = sizeof *sin;
        h2->literal = true;
    } else if (inet_pton(AF_INET6, h2->host, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)conf->port);
        h2->addrlen = sizeof *sin6;
        h2->literal = true;
    }
    if (conf->port == 443)
        snprintf(h2->authority, sizeof h2->authority, "%s", h2->host);
    else if (h2->literal && strchr(h2->host, ':') != NULL)
        snprintf(h2->authority, sizeof h2->authority, "[%s]:%d", h2->host, conf->port);
    else
        snprintf(h2->authority, sizeof h2->authority, "%s:%d", h2->host, conf->port);
    h2->rand = (uint64_t)uv_hrtime() | 1;
    TAILQ_INIT(&h2->conns);
    TAILQ_INIT(&h2->queue);
    TAILQ_INIT(&h2->live);
    TAILQ_INIT(&h2->free);
    wk_h2_mem_init(&h2->mem);
    h2->ctx = wk_h2_tls_new(h2->ca_file, conf->tls_verify, errstr, errlen);
    if (h2->ctx == NULL)
        goto fail;
    if (nghttp2_session_callbacks_new(&h2->cbs) != 0 || nghttp2_option_new(&h2->opt) != 0) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    nghttp2_session_callbacks_set_on_header_callback(h2->cbs, wk_h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(h2->cbs, wk_h2_on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(h2->cbs, wk_h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(h2->cbs, wk_h2_on_frame_send);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(h2->cbs, wk_h2_on_frame_not_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(h2->cbs, wk_h2_on_stream_close);
    uv_timer_init(loop, &h2->timer);
    h2->timer.data = h2;
    h2->handles++;
    uv_prepare_init(loop, &h2->prepare);
    h2->prepare.data = h2;
    h2->handles++;
    /* Both run only while there is work (a submission to start, a
     * deadline), so an idle engine does not keep the loop alive. */
    *out = h2;
    return 0;
fail:
    h2->freeing = true;
    wk_h2_release(h2);
    return -1;
}

void wk_h2_free(wk_h2 *h2)
{
    wk_h2_conn *conn, *next;

    if (h2 == NULL)
        return;
    h2->freeing = true;
    for (conn = TAILQ_FIRST(&h2->conns); conn != NULL; conn = next) {
        next = TAILQ_NEXT(conn, link);
        wk_h2_conn_close(conn, WK_H2_E_SHUTDOWN, "the engine was freed");
    }
    wk_h2_fail_queue(h2, WK_H2_E_SHUTDOWN, "the engine was freed");
    uv_close((uv_handle_t *)&h2->timer, wk_h2_handle_closed);
    uv_close((uv_handle_t *)&h2->prepare, wk_h2_handle_closed);
}

/* RFC 9110 token characters without upper case (HTTP/2 field names), as
 * bitmaps of the characters 0..63 and 64..127. */
#define WK_H2_BIT(c) (1ULL << ((c)&63))
#define WK_H2_NAME_LO                                                                      \
    (WK_H2_BIT('!') | WK_H2_BIT('#') | WK_H2_BIT('$') | WK_H2_BIT('%') | WK_H2_BIT('&') |  \
     WK_H2_BIT('\'') | WK_H2_BIT('*') | WK_H2_BIT('+') | WK_H2_BIT('-') | WK_H2_BIT('.') | \
     (0x3ffULL << '0'))
#define WK_H2_NAME_HI                                                                     \
    (WK_H2_BIT('^') | WK_H2_BIT('_') | WK_H2_BIT('`') | WK_H2_BIT('|') | WK_H2_BIT('~') | \
     (0x3ffffffULL << ('a' - 64)))

/* Whether the N bytes at S are an HTTP/2 field name.  (A bitmap, not
 * nghttp2_check_header_name: its table walk cost 90 instructions a name.) */
static bool wk_h2_name_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned c = (unsigned char)s[i];
        if (c >= 128 || !(((c < 64 ? WK_H2_NAME_LO : WK_H2_NAME_HI) >> (c & 63)) & 1))
            return false;
    }
    return n > 0;
}

/* Appends H to REQ's header array, its value (and, with COPY_NAME, its
 * name; a pseudo-header's is static) copied into REQ's head at *P.  0, or
 * -1 with ERRSTR when the head is full or H is no valid HTTP/2 header: a
 * name not lower-case token characters, a value (CHECK_VALUE: the caller's,
 * not one the engine made) with NUL, CR or LF.  nghttp2 does not check
 * what it sends, and a peer answers a bad header by closing the
 * connection, with every other stream on it. */
static int wk_h2_req_nv(wk_h2_req *req, char **p, const wk_h2_nv *h, bool copy_name,
                        bool check_value, char *errstr, size_t errlen)
{
    char *end = req->head + sizeof req->head;
    nghttp2_nv *nv = &req->nv[req->nnv];

    if ((size_t)(end - *p) < (copy_name ? h->name_len : 0) + h->value_len) {
        snprintf(errstr, errlen, "request head over %d bytes", WK_H2_HEAD_MAX);
        return -1;
    }
    if ((copy_name && !wk_h2_name_ok(h->name, h->name_len)) ||
        (check_value && (memchr(h->value, '\0', h->value_len) != NULL ||
                         memchr(h->value, '\r', h->value_len) != NULL ||
                         memchr(h->value, '\n', h->value_len) != NULL))) {
        snprintf(errstr, errlen, "request header %.*s is not a valid HTTP/2 header",
                 (int)(h->name_len < 64 ? h->name_len : 64), h->name);
        return -1;
    }
    if (copy_name) {
        memcpy(*p, h->name, h->name_len);
        nv->name = (uint8_t *)*p;
        *p += h->name_len;
    } else {
        nv->name = (uint8_t *)h->name;
    }
    memcpy(*p, h->value, h->value_len);
    nv->value = (uint8_t *)*p;
    *p += h->value_len;
    nv->namelen = h->name_len;
    nv->valuelen = h->value_len;
    /* The strings stay in the slot until its stream is closed. */
    nv->flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE |
                (h->no_index ? NGHTTP2_NV_FLAG_NO_INDEX : 0);
    req->nnv++;
    return 0;
}

int wk_h2_submit(wk_h2 *h2, const wk_h2_request *rq, wk_h2_req **out, char *errstr, size_t errlen)
{
    wk_h2_req *req;
    char *p;
    const char *authority = rq->authority != NULL ? rq->authority : h2->authority;
    int rv = 0;

    if (out != NULL)
        *out = NULL;
    if (h2->freeing) {
        snprintf(errstr, errlen, "the HTTP/2 engine is being freed");
        return -1;
    }
    if (rq->done == NULL || rq->method == NULL || rq->path == NULL ||
        (rq->body == NULL && rq->body_len > 0)) {
        snprintf(errstr, errlen, "a request needs a method, a path and a done callback");
        return -1;
    }
    if (rq->nheaders > WK_H2_HEADERS_MAX) {
        snprintf(errstr, errlen, "%zu request headers (at most %d)", rq->nheaders,
                 WK_H2_HEADERS_MAX);
        return -1;
    }
    if (h2->used >= h2->conf.max_requests) {
        snprintf(errstr, errlen, "%zu requests queued or in flight (max_requests)", h2->used);
        return -1;
    }
    req = wk_h2_req_get(h2);
    if (req == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    req->nnv = 0;
    p = req->head;
    /* nghttp2 never indexes a :path (a device token's is unique anyway). */
    const wk_h2_nv pseudo[WK_H2_PSEUDO] = {
        {":method", rq->method, 7, strlen(rq->method), false},
        {":scheme", "https", 7, 5, false},
        {":authority", authority, 10, strlen(authority), false},
        {":path", rq->path, 5, strlen(rq->path), false},
    };
    for (size_t i = 0; i < WK_H2_PSEUDO && rv == 0; i++)
        rv = wk_h2_req_nv(req, &p, &pseudo[i], false, pseudo[i].value != h2->authority, errstr,
                          errlen);
    for (size_t i = 0; i < rq->nheaders && rv == 0; i++)
        rv = wk_h2_req_nv(req, &p, &rq->headers[i], true, true, errstr, errlen);
    if (rv != 0) {
        wk_h2_req_put(h2, req);
        return -1;
    }
    wk_h2_req_reset(req);
    req->body = rq->body;
    req->body_len = rq->body_len;
    req->done = rq->done;
    req->user = rq->user;
    req->requeues = 0;
    req->deadline = wk_h2_now(h2) + (uint64_t)h2->conf.timeout_ms;
    req->state = WK_H2_REQ_QUEUED;
    TAILQ_INSERT_TAIL(&h2->queue, req, link);
    TAILQ_INSERT_TAIL(&h2->live, req, live);
    h2->used++;
    h2->queued++;
    h2->st.requests++;
    wk_h2_pump_later(h2);
    if (out != NULL)
        *out = req;
    return 0;
}

void wk_h2_cancel(wk_h2 *h2, wk_h2_req *req)
{
    if (req->state == WK_H2_REQ_QUEUED || req->state == WK_H2_REQ_STREAM ||
        (req->state == WK_H2_REQ_ENDING && req->done != NULL))
        h2->used--;
    switch (req->state) {
    case WK_H2_REQ_QUEUED:
        TAILQ_REMOVE(&h2->queue, req, link);
        TAILQ_REMOVE(&h2->live, req, live);
        h2->queued--;
        wk_h2_req_put(h2, req);
        break;
    case WK_H2_REQ_STREAM:
        TAILQ_REMOVE(&h2->live, req, live);
        req->done = NULL;
        req->state = WK_H2_REQ_ORPHAN;
        nghttp2_submit_rst_stream(req->conn->sess, NGHTTP2_FLAG_NONE, req->stream_id,
                                  NGHTTP2_CANCEL);
        wk_h2_pump_later(h2);
        break;
    case WK_H2_REQ_ENDING:
        /* Whoever holds it (a closing connection) puts it back. */
        TAILQ_REMOVE(&h2->live, req, live);
        req->done = NULL;
        break;
    default:
        break;
    }
}

void wk_h2_stats_get(const wk_h2 *h2, wk_h2_stats *st)
{
    const wk_h2_conn *conn;

    *st = h2->st;
    st->queued = h2->queued;
    st->inflight = h2->used - h2->queued;
    st->ready_connections = 0;
    TAILQ_FOREACH(conn, &h2->conns, link)
    st->ready_connections += conn->state == WK_H2_CONN_READY;
}
