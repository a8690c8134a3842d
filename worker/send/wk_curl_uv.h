/* wk_curl_uv: the libuv adapter of the curl transport (wk_curl), after
 * hiredis's adapters/libuv.h and curl's docs/examples/multi-uv.c.
 *
 * The adapter fills in a wk_curl_io: a multi handle it is attached to gets
 * a uv_poll per socket curl watches and one uv_timer for curl's timeout,
 * and an easy handle gets the socket open and close callbacks below; when
 * a socket or the timer fires it calls wk_curl_action, which hands the
 * finished transfers to the transport's user.  The transport never names
 * the adapter, so another loop (or another transport) plugs in the same
 * way.
 *
 * A socket keeps its uv_poll (a wk_sock) for as long as the descriptor
 * lives, not for one transfer.  curl says CURL_POLL_REMOVE when a transfer
 * ends, although the keep-alive connection stays in its cache for the next
 * one; closing the poll there and making a new one at the next transfer
 * cost six epoll_ctl and an ioctl per push (libuv re-registers a poll on
 * every uv_poll_start, and probes a new one), about half the worker's
 * syscalls.  So:
 *   - a socket between transfers ("idle") stays registered for readable,
 *     unreferenced so it does not keep the loop running; if it becomes
 *     readable while idle (the peer closed it, or sent what nobody asked
 *     for), its poll is stopped and curl finds the connection dead when it
 *     next looks at it;
 *   - the poll's events are changed only when curl's wanted events change;
 *   - curl hands a socket it takes out of its cache to the socket callback
 *     without our pointer (it forgot it at REMOVE), so the adapter keeps a
 *     table from descriptor to wk_sock, shared by every multi handle it is
 *     attached to (descriptors are the process's).
 * Only sockets that the adapter opened (CURLOPT_OPENSOCKETFUNCTION) and that
 * curl has waited on for reading stay registered while idle: curl watches
 * a socket for reading only once it is connected, and closes a connected
 * socket through CURLOPT_CLOSESOCKETFUNCTION, where its wk_sock is closed
 * before the descriptor.  So the table never holds a descriptor that was
 * closed behind its back, whose number another socket (curl's resolver
 * pipe) could take.  Any other socket gets its poll closed at REMOVE.
 * Whoever frees a wk_sock: the uv close callback, once curl no longer
 * holds it (curl_multi_assign), else the REMOVE that lets go of it.  Loop
 * thread only. */
#ifndef WK_CURL_UV_H
#define WK_CURL_UV_H

#include <uv.h>

#include "wk_curl.h"

typedef struct wk_curl_uv wk_curl_uv;

/* An adapter on LOOP; NULL when out of memory. */
wk_curl_uv *wk_curl_uv_new(uv_loop_t *loop);
/* Its hooks, for wk_curl_new (valid until wk_curl_uv_free). */
const wk_curl_io *wk_curl_uv_io(const wk_curl_uv *uv);
/* After every transport it served was closed: closes the polls of the
 * sockets left in its table (ones curl closed without the callback).  The
 * caller then runs the loop until the handles are closed. */
void wk_curl_uv_close(wk_curl_uv *uv);
/* Frees UV (closed, the loop run).  Accepts NULL. */
void wk_curl_uv_free(wk_curl_uv *uv);

#endif
