/* hr_httpd_req: what a handler reads of its request: path params, query
 * arguments, headers, the peer's address and the bearer token (compared in
 * constant time).  The request itself is hr_httpd.h's. */
#ifndef HR_HTTPD_REQ_H
#define HR_HTTPD_REQ_H

#include <stdbool.h>
#include <stddef.h>

#include "hr_httpd.h"

/* The value of path param NAME, query argument NAME (decoded) or header
 * NAME (case-insensitive), or NULL when absent. */
const char *hr_httpd_param(const hr_httpd_req *req, const char *name);
const char *hr_httpd_query(const hr_httpd_req *req, const char *name);
const char *hr_httpd_header(const hr_httpd_req *req, const char *name);

/* The client's address ("127.0.0.1", "::1"; no port) into BUF
 * (HR_HTTPD_PEER bytes); "unknown" when libmicrohttpd does not say. */
void hr_httpd_peer(const hr_httpd_req *req, char *buf, size_t len);

/* True when the Authorization header is "Bearer T" for one of TOKENS.  The
 * comparison takes the same time whichever bytes differ, and every token is
 * compared, so timing tells nothing of the tokens' contents. */
bool hr_httpd_bearer_ok(const hr_httpd_req *req, char *const *tokens, size_t ntokens);
/* The token of an "Authorization: Bearer T" header, or NULL (no header,
 * another scheme, an empty token). */
const char *hr_httpd_bearer(const hr_httpd_req *req);
/* True when the request's Host header names a loopback host (localhost,
 * 127.0.0.0/8, [::1], with or without a port).  A server without
 * authentication checks it so that a web page whose name an attacker
 * re-points at 127.0.0.1 (DNS rebinding) is not served. */
bool hr_httpd_host_is_loopback(const hr_httpd_req *req);

#endif
