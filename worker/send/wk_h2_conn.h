/* wk_h2_conn: the HTTP/2 engine's connections (wk_h2.h): opening one in
 * a slot (resolving, the non-blocking connect, the TLS handshake, the
 * session's SETTINGS), its socket I/O (SSL_read into the session, the
 * session's frames through one output buffer to SSL_write), closing it
 * (its requests requeued or failed) and freeing it once its handles
 * closed.  It reaches the engine (the pump, the engine's own release)
 * only through h2->up. */
#ifndef WK_H2_CONN_H
#define WK_H2_CONN_H

#include <stdbool.h>
#include <stddef.h>

#include "wk_h2_data.h"

void wk_h2_conn_close(wk_h2_conn *conn, wk_h2_err err, const char *msg);
void wk_h2_slot_open(wk_h2 *h2, int i);
void wk_h2_flush_all(wk_h2 *h2);
SSL_CTX *wk_h2_tls_new(const char *ca_file, bool verify, char *errstr, size_t errlen);

#endif
