/* wk_proxy: the proxy environment, read once (see wk_proxy.h). */
#include "wk_proxy.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A variable's value, NULL when unset or empty (libcurl's curl_getenv). */
static const char *wk_proxy_env(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The proxy variable of SCHEME (LEN bytes) by libcurl's order, or NULL.
 * A channel's scheme is one of four short names (hr_config); the name is
 * cut to fit all the same. */
static const char *wk_proxy_find(const char *scheme, size_t len)
{
    char name[32];
    const char *v;

    if (len + sizeof "_proxy" > sizeof name)
        len = sizeof name - sizeof "_proxy";
    for (size_t i = 0; i < len; i++)
        name[i] = (char)tolower((unsigned char)scheme[i]);
    memcpy(name + len, "_proxy", sizeof "_proxy");
    if ((v = wk_proxy_env(name)) != NULL)
        return v;
    if (strcmp(name, "http_proxy") != 0) {
        for (size_t i = 0; name[i] != '\0'; i++)
            name[i] = (char)toupper((unsigned char)name[i]);
        if ((v = wk_proxy_env(name)) != NULL)
            return v;
    }
    if ((v = wk_proxy_env("all_proxy")) != NULL)
        return v;
    return wk_proxy_env("ALL_PROXY");
}

int wk_proxy_read(wk_proxy *px, const char *scheme, size_t len, char *errstr, size_t errlen)
{
    const char *proxy = wk_proxy_find(scheme, len), *noproxy = wk_proxy_env("no_proxy");

    if (noproxy == NULL)
        noproxy = wk_proxy_env("NO_PROXY");
    px->proxy = strdup(proxy != NULL ? proxy : "");
    px->noproxy = strdup(noproxy != NULL ? noproxy : "");
    if (px->proxy == NULL || px->noproxy == NULL) {
        wk_proxy_clear(px);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    return 0;
}

const char *wk_proxy_scheme(const char *url, size_t *len)
{
    const char *end = url != NULL ? strstr(url, "://") : NULL;

    if (end == NULL) {
        *len = 5;
        return "https";
    }
    *len = (size_t)(end - url);
    return url;
}

void wk_proxy_apply(const wk_proxy *px, CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_PROXY, px->proxy);
    curl_easy_setopt(easy, CURLOPT_NOPROXY, px->noproxy);
}

void wk_proxy_clear(wk_proxy *px)
{
    if (px == NULL)
        return;
    free(px->proxy);
    free(px->noproxy);
    px->proxy = px->noproxy = NULL;
}
