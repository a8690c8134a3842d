/* wk_h2_stream: see wk_h2_stream.h; the engine's data is described in wk_h2.c. */
#include "wk_h2_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wk_h2_req.h"

/* A back-off after a failed connection of slot I: doubled from
 * conf.backoff_min_ms up to conf.backoff_max_ms, with full jitter over
 * its upper half. */
void wk_h2_slot_backoff(wk_h2 *h2, int i)
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

/* Starts REQ on CONN (ready, with a stream to spare). */
void wk_h2_stream_start(wk_h2_conn *conn, wk_h2_req *req)
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

void wk_h2_stream_callbacks(nghttp2_session_callbacks *cbs)
{
    nghttp2_session_callbacks_set_on_header_callback(cbs, wk_h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, wk_h2_on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, wk_h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, wk_h2_on_frame_send);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(cbs, wk_h2_on_frame_not_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, wk_h2_on_stream_close);
}
