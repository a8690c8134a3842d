/* wk_h2send: the HTTP/2 transport of one apns or fcm channel — the engine
 * (wk_h2) for the channel URL's origin (and, for an fcm channel whose
 * token URI is another origin, a second one with one connection for the
 * token requests), the pool of streams (wk_stream) its requests are built
 * on, and the streams that finished.
 *
 * The engine keeps a few long-lived TLS connections to the origin (an apns
 * channel's `connections`; an fcm channel one per WK_H2SEND_STREAMS of its
 * concurrency, up to WK_H2_CONNECTIONS_MAX), each carrying as many streams
 * as the peer's SETTINGS allow; it reconnects after a GOAWAY or a failure
 * with a back-off, and ends every request within the channel's timeout_ms
 * (queueing for a stream included).  TLS verification follows the
 * channel's tls_verify and ca_file.  Streams are made when first needed,
 * up to the channel's concurrency, and kept with their buffers between
 * requests.
 *
 * An answer is copied into its stream inside the engine's callback, and
 * the stream is handed to the user (the sender) through wk_h2send_hooks
 * after the engine returned to the loop, from a uv_check handle: every
 * stream one read of the sockets finished, then the end of the drain.  So
 * the user never runs inside nghttp2, may submit and cancel from the hook,
 * and the requests it submits go out together before the loop next waits
 * (the engine flushes in its prepare handle).  Loop thread only. */
#ifndef WK_H2SEND_H
#define WK_H2SEND_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "hr_config.h"
#include "wk_stream.h"

/* An fcm channel opens one connection per this many of its concurrency
 * (Google's front ends allow 100 streams a connection). */
#define WK_H2SEND_STREAMS 100

typedef struct wk_h2send wk_h2send;

/* What the transport reports to its user, on the loop thread, never
 * inside the engine. */
typedef struct wk_h2send_hooks {
    void *ctx;
    /* SX's request ended: its answer (or transport error) is in SX, which
     * stays the user's until wk_h2send_give. */
    void (*finished)(void *ctx, wk_stream *sx);
    /* Every stream that had finished was handed over. */
    void (*drained)(void *ctx);
} wk_h2send_hooks;

/* The transport of channel CH (apns or fcm) on LOOP: an engine for URL's
 * origin and, with TOKEN_URL (fcm), for the token URI's when it differs.
 * Both must be https://.  0, or -1 with ERRSTR; *OUT is set either way
 * (closed on failure: its handles close as the loop runs, then
 * wk_h2send_free). */
int wk_h2send_new(uv_loop_t *loop, const hr_channel *ch, const char *url, const char *token_url,
                  const wk_h2send_hooks *hooks, wk_h2send **out, char *errstr, size_t errlen);

/* URL's path (and query): an apns channel's prefix ("" for none), an fcm
 * channel's messages:send path. */
const char *wk_h2send_path(const wk_h2send *hs);
/* TOKEN_URL's path (and query). */
const char *wk_h2send_token_path(const wk_h2send *hs);

/* An idle stream of the pool (made when none is idle and fewer than the
 * channel's concurrency exist), or NULL. */
wk_stream *wk_h2send_take(wk_h2send *hs);
/* Puts SX (taken, not running, or handed over by the finished hook) back
 * into the pool (SX->p cleared). */
void wk_h2send_give(wk_h2send *hs, wk_stream *sx);
/* A stream outside the pool (the fcm channel's token request); NULL when
 * out of memory.  Freed with the transport. */
wk_stream *wk_h2send_extra(wk_h2send *hs);

/* Opens the connections of URL's engine ahead of the requests
 * (wk_h2_warm); the token's engine opens when its request comes. */
void wk_h2send_warm(wk_h2send *hs);

/* Submits SX's request (built) to the engine of URL, or with TOKEN, of
 * TOKEN_URL: 0, or -1 with ERRSTR (SX not running). */
int wk_h2send_add(wk_h2send *hs, wk_stream *sx, bool token, char *errstr, size_t errlen);
/* Drops SX's request, running or finished and not yet handed over: no
 * hook is called for it; SX stays taken. */
void wk_h2send_cancel(wk_h2send *hs, wk_stream *sx);

/* Drops every request, frees the engines (their handles close as the
 * loop runs) and closes the check handle: run the loop, then
 * wk_h2send_free. */
void wk_h2send_close(wk_h2send *hs);
/* Frees HS (closed first).  Accepts NULL. */
void wk_h2send_free(wk_h2send *hs);

#endif
