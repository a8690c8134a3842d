/* wk_h2: an HTTP/2 client for one origin (https://host:port) on
 * libnghttp2's session API over OpenSSL, driven by a libuv loop that the
 * caller owns and runs (the engine only adds handles to it).
 *
 * It keeps up to conf.connections long-lived TLS connections (ALPN "h2",
 * TLS 1.2 or later, the peer's certificate verified against conf.ca_file
 * or the system's store, its name or IP checked, unless conf.tls_verify is
 * off), opened when requests
 * wait and reopened with a jittered exponential back-off after a failure.
 * Requests wait in one FIFO queue and start on the least loaded ready
 * connection that has a stream to spare: a connection is ready once the
 * peer's first SETTINGS arrived, and carries at most
 * min(peer's SETTINGS_MAX_CONCURRENT_STREAMS, conf.max_streams) streams.
 * Response bodies are flow-controlled by nghttp2 (WINDOW_UPDATE as the
 * engine consumes them) and capped (conf.body_max), as are response
 * header lists (conf.header_max).  A GOAWAY drains its connection: streams
 * at or below the peer's last-stream-id complete there, those above it
 * (and a stream refused with REFUSED_STREAM) go back to the head of the
 * queue for a new connection, at most WK_H2_REQUEUE_MAX times.  Every
 * request has a deadline (conf.timeout_ms from its submission, queueing
 * included); connecting, the TLS handshake and the first SETTINGS have
 * conf.connect_timeout_ms.  When a connection attempt fails while no
 * connection is ready, the requests waiting for one fail with its error
 * (a wrong CA is refused at once, not after the requests' deadline).
 *
 * Each submitted request completes exactly once, through its done
 * callback, never from inside wk_h2_submit: with the response (status,
 * the headers named in conf.keep, the body), or with a transport error
 * (wk_h2_err) and a message.  The callback may submit or cancel requests;
 * it must not free the engine.
 *
 * Memory: requests live in a pool of wk_h2_req (grown in slabs, never
 * shrunk, at most conf.max_requests queued or in flight); a request's
 * method, path, authority and headers are copied into its slot at
 * submission (at most WK_H2_HEAD_MAX bytes, WK_H2_HEADERS_MAX headers),
 * its body is borrowed until the done callback.  nghttp2's own per-stream
 * allocations go through a size-class free list owned by the engine, so a
 * warmed-up engine makes no heap allocation per request.
 *
 * The engine keeps the loop alive while requests are live, not while its
 * connections are idle.
 *
 * Threads: one; every call on the loop's thread.  The process ignores
 * SIGPIPE (herald-worker does): a write to a connection the peer reset
 * must fail, not kill it. */
#ifndef WK_H2_H
#define WK_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define WK_H2_HEADERS_MAX 16    /* request headers, pseudo-headers excluded */
#define WK_H2_HEAD_MAX 8192     /* bytes of method, path, authority and headers */
#define WK_H2_KEEP_MAX 4        /* response headers handed to the callback */
#define WK_H2_KEEP_VALUE_MAX 96 /* bytes of one kept header's value */
#define WK_H2_REQUEUE_MAX 3     /* refused (GOAWAY, REFUSED_STREAM) and sent again */
#define WK_H2_CONNECTIONS_MAX 16

typedef struct wk_h2 wk_h2;
typedef struct wk_h2_req wk_h2_req;

/* Why a request ended without a response. */
typedef enum wk_h2_err {
    WK_H2_OK,
    WK_H2_E_CONNECT,  /* resolving, connecting or its timeout */
    WK_H2_E_TLS,      /* handshake failed: certificate not verified, no "h2" */
    WK_H2_E_TIMEOUT,  /* no complete response within conf.timeout_ms */
    WK_H2_E_RESET,    /* the peer reset the stream (RST_STREAM) */
    WK_H2_E_CLOSED,   /* the connection ended before the response did */
    WK_H2_E_REFUSED,  /* refused more than WK_H2_REQUEUE_MAX times */
    WK_H2_E_TOO_BIG,  /* the response's headers or body over their cap */
    WK_H2_E_PROTOCOL, /* the peer broke HTTP/2 or TLS */
    WK_H2_E_SHUTDOWN, /* the engine was freed first */
    WK_H2__ERR_COUNT
} wk_h2_err;

extern const char *const wk_h2_err_names[WK_H2__ERR_COUNT];

/* What the engine needs; wk_h2_conf_init fills in the defaults. */
typedef struct wk_h2_conf {
    const char *host;       /* DNS name or IP literal (also the certificate name) */
    int port;               /* 1..65535 (default 443) */
    const char *ca_file;    /* PEM CAs to verify the peer with; NULL: the system's */
    bool tls_verify;        /* false: the peer's certificate is not checked (default true) */
    int connections;        /* 1..WK_H2_CONNECTIONS_MAX (default 1) */
    uint32_t max_streams;   /* per connection, under the peer's limit (default 1000) */
    int connect_timeout_ms; /* TCP, TLS and the first SETTINGS (default 10,000) */
    int timeout_ms;         /* a request, from its submission (default 30,000) */
    size_t max_requests;    /* queued + in flight (default 10,000) */
    size_t body_max;        /* response body cap (default 64 KiB) */
    size_t header_max;      /* response header list cap, RFC 7541 sizes (default 16 KiB) */
    int backoff_min_ms, backoff_max_ms; /* reconnection back-off (default 100, 10,000) */
    const char *keep[WK_H2_KEEP_MAX];   /* lowercase names of the response headers to hand */
    size_t nkeep;                       /* over, e.g. "apns-id", "retry-after" */
} wk_h2_conf;

void wk_h2_conf_init(wk_h2_conf *conf);

/* One request header; NAME lowercase (HTTP/2).  NO_INDEX for a value
 * that differs on every request (apns-id): HPACK then sends it as a
 * literal instead of adding it to the connection's table, where it would
 * only push out the values that repeat (authorization, apns-topic). */
typedef struct wk_h2_nv {
    const char *name, *value;
    size_t name_len, value_len;
    bool no_index;
} wk_h2_nv;

typedef struct wk_h2_response {
    int status;      /* the :status, 0 when err != WK_H2_OK */
    wk_h2_err err;   /* WK_H2_OK: a complete response */
    const char *msg; /* err's detail ("" when WK_H2_OK) */
    /* err != WK_H2_OK and the request never reached the peer (or the peer
     * said it did not process it): sending it again cannot duplicate it. */
    bool unprocessed;
    const char *body; /* NUL-terminated, BODY_LEN bytes */
    size_t body_len;
    const char *keep[WK_H2_KEEP_MAX]; /* conf.keep[i]'s value (NUL-terminated) or NULL */
} wk_h2_response;

/* Called once per request; RESP and what it points to are valid during
 * the call only. */
typedef void wk_h2_done_cb(void *user, const wk_h2_response *resp);

typedef struct wk_h2_request {
    const char *method, *path; /* NUL-terminated, copied */
    const char *authority;     /* NULL: host, or host:port when port != 443 */
    const wk_h2_nv *headers;   /* copied */
    size_t nheaders;
    const void *body; /* borrowed until DONE is called; NULL with body_len 0 */
    size_t body_len;
    wk_h2_done_cb *done;
    void *user;
} wk_h2_request;

typedef struct wk_h2_stats {
    uint64_t requests, responses, errors[WK_H2__ERR_COUNT];
    uint64_t connects, connect_failures, goaways, requeued;
    size_t queued, inflight, ready_connections, pool;
} wk_h2_stats;

/* An engine for CONF's origin on LOOP (which the caller runs).  CONF's
 * strings are copied.  0, or -1 with ERRSTR (a bad value, the CA file
 * unreadable). */
int wk_h2_new(uv_loop_t *loop, const wk_h2_conf *conf, wk_h2 **out, char *errstr, size_t errlen);

/* Fails every request not yet done with WK_H2_E_SHUTDOWN (their callbacks
 * run here), closes the connections and frees the engine once the loop
 * has run the handles' close callbacks: run the loop after it.  NULL is
 * fine. */
void wk_h2_free(wk_h2 *h2);

/* Queues RQ; it starts as soon as a connection has a stream to spare (at
 * the latest before the loop next waits).  *OUT (when OUT is not NULL)
 * gets a handle for wk_h2_cancel, valid until the done callback.  0, or
 * -1 with ERRSTR: conf.max_requests reached, too many or too long
 * headers, a header name not lower-case token characters or a value with
 * NUL, CR or LF, the engine being freed; the callback is then never
 * called. */
int wk_h2_submit(wk_h2 *h2, const wk_h2_request *rq, wk_h2_req **out, char *errstr, size_t errlen);

/* Drops REQ (not yet done): its stream is reset if it started, and its
 * done callback is never called. */
void wk_h2_cancel(wk_h2 *h2, wk_h2_req *req);

void wk_h2_stats_get(const wk_h2 *h2, wk_h2_stats *st);

#endif
