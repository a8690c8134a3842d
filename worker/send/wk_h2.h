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

#include "wk_h2_types.h"

extern const char *const wk_h2_err_names[WK_H2__ERR_COUNT];

/* An engine for CONF's origin on LOOP (which the caller runs).  CONF's
 * strings are copied.  0, or -1 with ERRSTR (a bad value, the CA file
 * unreadable). */
int wk_h2_new(uv_loop_t *loop, const wk_h2_conf *conf, wk_h2 **out, char *errstr, size_t errlen);

/* Opens a connection in every free slot not backing off, with no request
 * waiting: what a caller does when requests will follow soon, so that they
 * do not wait for the TCP and TLS handshakes and the SETTINGS.  A slot
 * whose connection fails backs off as on a request's behalf. */
void wk_h2_warm(wk_h2 *h2);

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
