/* hr_proxy: the HTTP proxy a daemon's curl handles go through, read from
 * the environment once, when the transport is made, by the rules libcurl
 * 7.88 applies when it reads the variables itself, and handed to every
 * handle as CURLOPT_PROXY and CURLOPT_NOPROXY.  Its users: the worker's
 * webhook and smtp channels (wk_curl, one read per channel) and
 * herald-hooks' deliveries (hk_http, one read per scheme, http and https).
 *
 * Why: libcurl reads the variables on every transfer when neither option
 * is set (no_proxy, NO_PROXY, <scheme>_proxy, all_proxy, ALL_PROXY: five
 * getenv a request, each a walk of the whole environment;
 * docs/performance.md, "Issue 33").
 * Given both options it reads none.  The rules, for the scheme of the
 * request's URL (http, https, smtp, smtps; a web push endpoint is https):
 *
 *   - the proxy is <scheme>_proxy in lower case; if that is unset or empty,
 *     <SCHEME>_PROXY in upper case, except for http (libcurl never reads
 *     HTTP_PROXY: a CGI program's environment gets it from a request's
 *     "Proxy:" header); then all_proxy, then ALL_PROXY;
 *   - the hosts that go direct are no_proxy, else NO_PROXY (libcurl
 *     matches the request's host against the list on every transfer, as
 *     before);
 *   - a variable set to "" counts as unset; no proxy found is "" (no proxy).
 *
 * A running daemon therefore does not see a changed environment, as with
 * any of its settings: restart it.  The strings are the struct's (copies
 * of the environment's); curl copies them again into each handle. */
#ifndef HR_PROXY_H
#define HR_PROXY_H

#include <curl/curl.h>
#include <stddef.h>

typedef struct hr_proxy {
    char *proxy;   /* "" = none */
    char *noproxy; /* "" = none */
} hr_proxy;

/* Fills PX from the environment for the URL scheme SCHEME (its LEN bytes,
 * any case).  0, or -1 with ERRSTR when out of memory (PX then holds
 * nothing to free). */
int hr_proxy_read(hr_proxy *px, const char *scheme, size_t len, char *errstr, size_t errlen);
/* The scheme of URL (the bytes before "://"; LEN gets their count), or of a
 * channel without a URL, a web push channel's: "https". */
const char *hr_proxy_scheme(const char *url, size_t *len);
/* Sets PX on EASY as CURLOPT_PROXY and CURLOPT_NOPROXY: from then on curl
 * reads no proxy variable for it. */
void hr_proxy_apply(const hr_proxy *px, CURL *easy);
/* Frees PX's strings; PX may be NULL or zeroed. */
void hr_proxy_clear(hr_proxy *px);

#endif
