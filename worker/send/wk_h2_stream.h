/* wk_h2_stream: the HTTP/2 engine's streams (wk_h2.h): a request started
 * on a connection's session, nghttp2's callbacks for what arrives on its
 * streams (headers, body, frames, GOAWAY, the close that ends a request),
 * the request body handed to nghttp2, and the slot state a GOAWAY or
 * used-up stream ids change.  Below the connections (wk_h2_conn): it
 * reports through the requests' outcomes (wk_h2_req), never by closing a
 * connection itself. */
#ifndef WK_H2_STREAM_H
#define WK_H2_STREAM_H

#include "wk_h2_data.h"

void wk_h2_slot_backoff(wk_h2 *h2, int i);
/* Starts REQ on a new stream of CONN (ready, with a stream to spare);
 * REQ is requeued or done when no stream can be had. */
void wk_h2_stream_start(wk_h2_conn *conn, wk_h2_req *req);
/* Sets the stream callbacks on CBS, the sessions' shared table. */
void wk_h2_stream_callbacks(nghttp2_session_callbacks *cbs);

#endif
