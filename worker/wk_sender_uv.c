/* wk_sender_uv: drives the sender's curl multi handle from the libuv loop
 * (after curl's docs/examples/multi-uv.c): a uv_poll per socket curl
 * watches, one uv_timer for curl's timeout; after every socket action the
 * finished transfers are handed to wk_sender_check. */
#include "wk_sender_int.h"

#include <stdlib.h>

static void wk_sender_uv_sock_closed(uv_handle_t *h)
{
    free(h->data);
}

static void wk_sender_uv_poll_cb(uv_poll_t *poll, int status, int events)
{
    wk_sock *ss = poll->data;
    wk_sender *s = ss->s;
    int flags = 0, running;

    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    curl_multi_socket_action(s->multi, ss->fd, flags, &running);
    wk_sender_check(s);
}

int wk_sender_uv_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *sockp)
{
    wk_sender *s = userp;
    wk_sock *ss = sockp;
    int events = 0;

    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        if (ss != NULL) {
            uv_poll_stop(&ss->poll);
            uv_close((uv_handle_t *)&ss->poll, wk_sender_uv_sock_closed);
            curl_multi_assign(s->multi, fd, NULL);
        }
        return 0;
    }
    if (ss == NULL) {
        ss = calloc(1, sizeof *ss);
        if (ss == NULL)
            return -1;
        ss->fd = fd;
        ss->s = s;
        if (uv_poll_init_socket(s->loop, &ss->poll, fd) != 0) {
            free(ss);
            return -1;
        }
        ss->poll.data = ss;
        curl_multi_assign(s->multi, fd, ss);
    }
    if (what & CURL_POLL_IN)
        events |= UV_READABLE;
    if (what & CURL_POLL_OUT)
        events |= UV_WRITABLE;
    uv_poll_start(&ss->poll, events, wk_sender_uv_poll_cb);
    return 0;
}

static void wk_sender_uv_timeout_cb(uv_timer_t *t)
{
    wk_sender *s = t->data;
    int running;

    curl_multi_socket_action(s->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    wk_sender_check(s);
}

int wk_sender_uv_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    wk_sender *s = userp;

    (void)multi;
    if (timeout_ms < 0)
        uv_timer_stop(&s->timer);
    else
        uv_timer_start(&s->timer, wk_sender_uv_timeout_cb, (uint64_t)timeout_ms, 0);
    return 0;
}
