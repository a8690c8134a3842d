/* wk_curl: the curl transport of one channel — its curl multi handles, the
 * pool of easy handles (wk_xfer) its requests run on, and the transfers
 * that finished, drained with curl_multi_info_read.
 *
 * A channel's connections are spread over multi handles of at most
 * WK_CURL_MULTI_CONNS each: libcurl 7.88 looks for an idle connection by
 * walking its connections to the host on every transfer
 * (ConnectionExists), and with a channel's 256 connections in one multi
 * handle that walk cost about 10,000 instructions a push
 * (docs/performance.md, issue 19).  Easy handle i runs on multi handle
 * i % n.  Handles are made when first needed, up to the channel's
 * concurrency, and kept configured between requests, so their connections
 * are reused; each is given the proxy the environment named when the
 * transport was made (hr_proxy), so curl reads no variable per transfer.
 * Handle and pool belong to the transport; the push a running handle
 * carries (wk_xfer.p) is the sender's.
 *
 * The transport never owns the event loop (hiredis's async.h and its
 * adapters are the model): an adapter (wk_curl_uv, for libuv) fills in a
 * wk_curl_io, whose calls hook each multi handle's socket and timer
 * callbacks and each easy handle's socket open and close into its loop, and
 * the adapter calls wk_curl_action when a socket or the timer fires.  The
 * transport reaches the adapter only through those pointers and its user
 * (the sender) only through wk_curl_hooks: every finished transfer, then
 * the end of the drain.  Loop thread only. */
#ifndef WK_CURL_H
#define WK_CURL_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include "hr_config.h"
#include "wk_xfer.h"

/* A channel's connections per curl multi handle (see above). */
#define WK_CURL_MULTI_CONNS 32

typedef struct wk_curl wk_curl;

/* One curl multi handle of a channel's transport. */
typedef struct wk_multi {
    CURLM *multi;
    wk_curl *curl; /* its transport */
    void *ev;      /* the adapter's: set by wk_curl_io.attach, dropped by .detach */
} wk_multi;

/* An event loop's side of the transport, set up by an adapter. */
typedef struct wk_curl_io {
    void *data;
    /* MH->multi was made: set its socket and timer callbacks (and MH->ev).
     * 0, or -1 when that failed. */
    int (*attach)(void *data, wk_multi *mh);
    /* MH->multi was cleaned up (its cached connections closed, their
     * socket callbacks run): drop what attach made. */
    void (*detach)(void *data, wk_multi *mh);
    /* EASY was made: set its socket open and close callbacks. */
    void (*easy)(void *data, CURL *easy);
} wk_curl_io;

/* What the transport reports to its user, on the loop thread. */
typedef struct wk_curl_hooks {
    void *ctx;
    /* X's transfer ended with curl result RC; X is still on its multi
     * handle (wk_curl_release takes it off).  Runs after
     * curl_multi_socket_action returned, never inside a curl callback. */
    void (*finished)(void *ctx, wk_xfer *x, CURLcode rc);
    /* Every transfer a socket or timer event finished was handed over. */
    void (*drained)(void *ctx);
} wk_curl_hooks;

/* The transport of channel CH: its multi handles, hooked into a loop by
 * IO (copied; its data must outlive the transport).  0, or -1 with
 * ERRSTR. */
int wk_curl_new(const hr_channel *ch, const wk_curl_io *io, const wk_curl_hooks *hooks,
                wk_curl **out, char *errstr, size_t errlen);

/* An idle handle of the pool (made when none is idle and fewer than the
 * channel's concurrency exist), or NULL. */
wk_xfer *wk_curl_take(wk_curl *curl);
/* Whether wk_curl_take would find or make a handle (a batched channel's
 * cap counts pushes, so its handles may all be busy first). */
bool wk_curl_can_take(const wk_curl *curl);
/* Puts X, taken and not added, back into the pool. */
void wk_curl_give(wk_curl *curl, wk_xfer *x);
/* Takes X off its multi handle and back into the pool (X->p cleared). */
void wk_curl_release(wk_curl *curl, wk_xfer *x);

/* Adds X (its request built) to its multi handle: 0, or -1 with ERRSTR. */
int wk_curl_add(wk_curl *curl, wk_xfer *x, char *errstr, size_t errlen);

/* The adapter's: socket FD of MH (CURL_SOCKET_TIMEOUT: its timer) is ready
 * for EV_BITMASK (CURL_CSELECT_*); the transfers that finished are handed
 * to the hooks. */
void wk_curl_action(wk_multi *mh, curl_socket_t fd, int ev_bitmask);

/* Takes every running transfer off its multi handle, closes the multi
 * handles (their cached connections) and frees the easy handles. */
void wk_curl_close(wk_curl *curl);
/* Frees CURL (closed first).  Accepts NULL. */
void wk_curl_free(wk_curl *curl);

#endif
