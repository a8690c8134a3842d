/* wk_h2_types: the HTTP/2 engine's public types and limits (the engine is
 * described in wk_h2.h, which includes this; its files share them too). */
#ifndef WK_H2_TYPES_H
#define WK_H2_TYPES_H

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

#endif
