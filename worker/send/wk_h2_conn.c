/* wk_h2_conn: see wk_h2_conn.h; the engine's data is described in wk_h2.c. */
#include "wk_h2_conn.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wk_h2_req.h"
#include "wk_h2_stream.h"

static void wk_h2_conn_poll_cb(uv_poll_t *poll, int status, int events);

/* ---------------------------------------------------------------- connection I/O */

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
void wk_h2_conn_close(wk_h2_conn *conn, wk_h2_err err, const char *msg)
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
    h2->up.pump(h2);
}

/* Opens a connection in slot I. */
void wk_h2_slot_open(wk_h2 *h2, int i)
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
    h2->up.pump(h2);
}

/* Flushes every connection with a session; closes those that fail and the
 * drained ones. */
void wk_h2_flush_all(wk_h2 *h2)
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

static void wk_h2_conn_release(wk_h2_conn *conn)
{
    wk_h2 *h2 = conn->h2;

    if (conn->state != WK_H2_CONN_CLOSED || conn->poll_open || conn->resolving)
        return;
    TAILQ_REMOVE(&h2->conns, conn, link);
    hr_buf_free(&conn->out);
    free(conn);
    h2->up.release(h2);
}

/* The TLS context: TLS 1.2 or later, ALPN h2, the peer verified against
 * CA_FILE (or the system's store) unless not VERIFY.  NULL with ERRSTR. */
SSL_CTX *wk_h2_tls_new(const char *ca_file, bool verify, char *errstr, size_t errlen)
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
