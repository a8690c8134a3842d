/* wk_h2_data: the HTTP/2 engine's data, shared by its files (wk_h2_req,
 * wk_h2_stream, wk_h2_conn, wk_h2); wk_h2.c says what each struct holds. */
#ifndef WK_H2_DATA_H
#define WK_H2_DATA_H

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <uv.h>

#include "hr_buf.h"
#include "hr_vec.h"
#include "wk_h2_mem.h"
#include "wk_h2_types.h"

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

/* What the lower files (wk_h2_req, wk_h2_stream, wk_h2_conn) call the
 * engine (wk_h2.c) back through: they never call it by name, so the
 * files' graph has no circle.  Set by wk_h2_new. */
typedef struct wk_h2_up {
    void (*pump)(wk_h2 *h2);    /* start what waits, write, arm the timer */
    void (*release)(wk_h2 *h2); /* free the engine when it is freed and nothing is left */
} wk_h2_up;

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
    bool pump_due; /* the prepare runs up.pump */
    wk_h2_up up;
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

static inline uint64_t wk_h2_now(const wk_h2 *h2)
{
    return uv_now(h2->loop);
}

static inline void wk_h2_conn_set_state(wk_h2_conn *conn, wk_h2_conn_state state)
{
    conn->state = state;
    if (state == WK_H2_CONN_READY)
        conn->was_ready = true;
}

#endif
