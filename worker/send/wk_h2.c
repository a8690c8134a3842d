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
 * itself goes once its own and its connections' handles closed.
 *
 * Files, bottom up (no circle): wk_h2_types.h (the public types),
 * wk_h2_data.h (the structs above), wk_h2_req.c (the pool, a request's
 * head, its outcomes), wk_h2_stream.c (a request on a stream, nghttp2's
 * callbacks), wk_h2_conn.c (opening, I/O, closing connections), and this
 * file: the public API, scheduling (the pump, the timer) and the engine's
 * life.  The lower files call this one only through h2->up (the pump and
 * the engine's release), which wk_h2_new sets. */
#include "wk_h2.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wk_h2_conn.h"
#include "wk_h2_req.h"
#include "wk_h2_stream.h"

static const char *const wk_h2_conn_state_names[WK_H2_CONN__COUNT] = {
    "resolving", "connecting", "in the TLS handshake", "waiting for SETTINGS", "ready",
    "draining",  "closed",
};

const char *const wk_h2_err_names[WK_H2__ERR_COUNT] = {
    "ok",     "connect", "tls",     "timeout",  "reset",
    "closed", "refused", "too_big", "protocol", "shutdown",
};

static void wk_h2_pump(wk_h2 *h2);
static void wk_h2_release(wk_h2 *h2);
static void wk_h2_timer_cb(uv_timer_t *timer);

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

/* ---------------------------------------------------------------- scheduling */

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

/* ---------------------------------------------------------------- the pump */

/* Opens a connection in each free slot whose back-off is over. */
static void wk_h2_open_slots(wk_h2 *h2)
{
    uint64_t now = wk_h2_now(h2);

    for (int i = 0; i < h2->conf.connections; i++)
        if (h2->slot[i].conn == NULL && h2->slot[i].retry_at <= now)
            wk_h2_slot_open(h2, i);
}

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
            wk_h2_stream_start(best, req);
        }
        if (!TAILQ_EMPTY(&h2->queue))
            wk_h2_open_slots(h2);
        wk_h2_flush_all(h2);
        if (!h2->pump_due)
            break;
    }
    if (!h2->pump_due)
        uv_prepare_stop(&h2->prepare);
    if (!h2->freeing)
        wk_h2_arm(h2);
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

static void wk_h2_handle_closed(uv_handle_t *handle)
{
    wk_h2 *h2 = handle->data;

    h2->handles--;
    wk_h2_release(h2);
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
    h2->up = (wk_h2_up){.pump = wk_h2_pump, .release = wk_h2_release};
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
    wk_h2_stream_callbacks(h2->cbs);
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

void wk_h2_warm(wk_h2 *h2)
{
    if (h2->freeing)
        return;
    wk_h2_open_slots(h2);
    /* The connection attempts' deadlines. */
    wk_h2_arm(h2);
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
