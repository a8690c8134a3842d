/* hr_httpd_req: what a handler reads of its request (see hr_httpd_req.h).
 * Params point into the server's copy of the path; the query and headers
 * are libmicrohttpd's, looked up on the request's connection. */
#include "hr_httpd_req.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "hr_parse.h"

const char *hr_httpd_param(const hr_httpd_req *req, const char *name)
{
    for (size_t i = 0; i < req->nparams; i++) {
        if (strcmp(req->param_names[i], name) == 0)
            return req->param_values[i];
    }
    return NULL;
}

const char *hr_httpd_query(const hr_httpd_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *hr_httpd_header(const hr_httpd_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* Equal in time that depends only on the lengths, never on the bytes. */
static bool hr_httpd_ct_equal(const char *given, size_t glen, const char *want, size_t wlen)
{
    volatile unsigned char diff = glen != wlen;
    for (size_t i = 0; i < wlen; i++)
        diff |= (unsigned char)((i < glen ? given[i] : 0) ^ want[i]);
    return diff == 0;
}

void hr_httpd_peer(const hr_httpd_req *req, char *buf, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        req->conn != NULL ? MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS)
                          : NULL;
    const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;

    snprintf(buf, len, "unknown");
    if (sa != NULL && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
                  (socklen_t)len);
    else if (sa != NULL && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, buf,
                  (socklen_t)len);
}

bool hr_httpd_host_is_loopback(const hr_httpd_req *req)
{
    return hr_parse_loopback(hr_httpd_header(req, MHD_HTTP_HEADER_HOST));
}

const char *hr_httpd_bearer(const hr_httpd_req *req)
{
    const char *auth = hr_httpd_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
        return NULL;
    const char *token = auth + 7;
    token += strspn(token, " ");
    return token[0] != '\0' ? token : NULL;
}

bool hr_httpd_bearer_ok(const hr_httpd_req *req, char *const *tokens, size_t ntokens)
{
    const char *token = hr_httpd_bearer(req);
    if (token == NULL)
        return false;
    size_t len = strlen(token);
    bool ok = false;
    for (size_t i = 0; i < ntokens; i++) {
        size_t wlen = tokens[i] != NULL ? strlen(tokens[i]) : 0;
        /* An empty token never matches: it would admit any empty header. */
        ok |= wlen > 0 && hr_httpd_ct_equal(token, len, tokens[i], wlen);
    }
    return ok;
}
