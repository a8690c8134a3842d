/* wk_h2_req: see wk_h2_req.h; the engine's data is described in wk_h2.c. */
#include "wk_h2_req.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- requests */

wk_h2_req *wk_h2_req_get(wk_h2 *h2)
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

void wk_h2_req_put(wk_h2 *h2, wk_h2_req *req)
{
    req->state = WK_H2_REQ_FREE;
    req->conn = NULL;
    TAILQ_INSERT_HEAD(&h2->free, req, link);
}

/* Forgets what an attempt received, before the (next) attempt. */
void wk_h2_req_reset(wk_h2_req *req)
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
void wk_h2_req_fail(wk_h2_req *req, wk_h2_err err, const char *msg)
{
    if (req->err != WK_H2_OK)
        return;
    req->err = err;
    snprintf(req->msg, sizeof req->msg, "%s", msg);
}

/* Hands REQ's outcome to its caller (ERR, MSG and UNPROCESSED when ERR is
 * not WK_H2_OK); REQ leaves the queue or live list, then goes back to the
 * pool unless its stream is still open (it becomes an ORPHAN). */
void wk_h2_req_done(wk_h2 *h2, wk_h2_req *req, wk_h2_err err, const char *msg, bool unprocessed)
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
void wk_h2_req_requeue(wk_h2 *h2, wk_h2_req *req, const char *why)
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

static void wk_h2_pump_due(uv_prepare_t *prepare)
{
    wk_h2 *h2 = prepare->data;

    h2->up.pump(h2);
}

/* Asks for the engine's pump before the loop next waits. */
void wk_h2_pump_later(wk_h2 *h2)
{
    if (!h2->pump_due && !h2->freeing) {
        h2->pump_due = true;
        uv_prepare_start(&h2->prepare, wk_h2_pump_due);
    }
}

/* Fails the requests waiting in the queue with ERR and MSG (a connection
 * attempt failed and none is ready).  Requests their callbacks submit wait
 * for the next attempt. */
void wk_h2_fail_queue(wk_h2 *h2, wk_h2_err err, const char *msg)
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
int wk_h2_req_nv(wk_h2_req *req, char **p, const wk_h2_nv *h, bool copy_name, bool check_value,
                 char *errstr, size_t errlen)
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
