/* hr_proxy: the proxy environment, read once (see hr_proxy.h). */
#include "hr_proxy.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A variable's value, NULL when unset or empty (libcurl's curl_getenv). */
static const char *hr_proxy_env(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The proxy variable of SCHEME (LEN bytes) by libcurl's order, or NULL.
 * A scheme is one of four short names (a channel's: hr_config; a hook's:
 * hr_hooks); the name is cut to fit all the same. */
static const char *hr_proxy_find(const char *scheme, size_t len)
{
    char name[32];
    const char *v;

    if (len + sizeof "_proxy" > sizeof name)
        len = sizeof name - sizeof "_proxy";
    for (size_t i = 0; i < len; i++)
        name[i] = (char)tolower((unsigned char)scheme[i]);
    memcpy(name + len, "_proxy", sizeof "_proxy");
    if ((v = hr_proxy_env(name)) != NULL)
        return v;
    if (strcmp(name, "http_proxy") != 0) {
        for (size_t i = 0; name[i] != '\0'; i++)
            name[i] = (char)toupper((unsigned char)name[i]);
        if ((v = hr_proxy_env(name)) != NULL)
            return v;
    }
    if ((v = hr_proxy_env("all_proxy")) != NULL)
        return v;
    return hr_proxy_env("ALL_PROXY");
}

int hr_proxy_read(hr_proxy *px, const char *scheme, size_t len, char *errstr, size_t errlen)
{
    const char *proxy = hr_proxy_find(scheme, len), *noproxy = hr_proxy_env("no_proxy");

    if (noproxy == NULL)
        noproxy = hr_proxy_env("NO_PROXY");
    px->proxy = strdup(proxy != NULL ? proxy : "");
    px->noproxy = strdup(noproxy != NULL ? noproxy : "");
    if (px->proxy == NULL || px->noproxy == NULL) {
        hr_proxy_clear(px);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    return 0;
}

const char *hr_proxy_scheme(const char *url, size_t *len)
{
    const char *end = url != NULL ? strstr(url, "://") : NULL;

    if (end == NULL) {
        *len = 5;
        return "https";
    }
    *len = (size_t)(end - url);
    return url;
}

void hr_proxy_apply(const hr_proxy *px, CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_PROXY, px->proxy);
    curl_easy_setopt(easy, CURLOPT_NOPROXY, px->noproxy);
}

void hr_proxy_clear(hr_proxy *px)
{
    if (px == NULL)
        return;
    free(px->proxy);
    free(px->noproxy);
    px->proxy = px->noproxy = NULL;
}
