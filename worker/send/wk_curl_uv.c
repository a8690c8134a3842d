/* wk_curl_uv: the libuv adapter of the curl transport (see wk_curl_uv.h). */
#include "wk_curl_uv.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hr_vec.h"

struct wk_curl_uv {
    uv_loop_t *loop;
    wk_curl_io io;
    HR_VEC(struct wk_sock *) socks; /* by descriptor: the sockets opened for curl */
};

/* What the adapter attaches to one multi handle (wk_multi.ev). */
typedef struct wk_uv_multi {
    uv_timer_t timer; /* curl's timeout */
    wk_multi *mh;
    wk_curl_uv *uv;
} wk_uv_multi;

typedef struct wk_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    wk_curl_uv *uv;
    wk_multi *mh;   /* the multi handle whose transfers use it; NULL before the first */
    int events;     /* UV_READABLE | UV_WRITABLE the poll waits for; 0 = stopped */
    bool owned;     /* opened by wk_curl_uv_open: curl reports its close */
    bool connected; /* curl waited on it for reading */
    bool idle;      /* between two transfers (after CURL_POLL_REMOVE) */
    bool assigned;  /* its multi handle holds the pointer (curl_multi_assign) */
    bool inited;    /* the poll was initialised */
    bool closing;   /* uv_close was called */
    bool closed;    /* the uv close callback ran */
} wk_sock;

/* The wk_sock of FD in the table, or NULL. */
static wk_sock *wk_curl_uv_lookup(const wk_curl_uv *uv, curl_socket_t fd)
{
    return fd >= 0 && (size_t)fd < uv->socks.n ? uv->socks.v[fd] : NULL;
}

/* Puts SS at FD in the table; -1 when out of memory. */
static int wk_curl_uv_store(wk_curl_uv *uv, curl_socket_t fd, wk_sock *ss)
{
    size_t need = (size_t)fd + 1;

    if (need > uv->socks.n) {
        if (hr_vec_reserve(&uv->socks, need) != 0)
            return -1;
        memset(uv->socks.v + uv->socks.n, 0, (need - uv->socks.n) * sizeof *uv->socks.v);
        uv->socks.n = need;
    }
    uv->socks.v[fd] = ss;
    return 0;
}

/* Frees SS once nothing holds it: not in the table, not held by curl, its
 * poll closed (or never made). */
static void wk_curl_uv_release(wk_curl_uv *uv, wk_sock *ss)
{
    if (!ss->assigned && (!ss->inited || ss->closed) && wk_curl_uv_lookup(uv, ss->fd) != ss)
        free(ss);
}

static void wk_curl_uv_sock_closed(uv_handle_t *h)
{
    wk_sock *ss = h->data;

    ss->closed = true;
    wk_curl_uv_release(ss->uv, ss);
}

/* Takes SS out of the table and closes its poll (and so its epoll
 * registration); it is freed once neither libuv nor curl holds it. */
static void wk_curl_uv_sock_close(wk_curl_uv *uv, wk_sock *ss)
{
    if (wk_curl_uv_lookup(uv, ss->fd) == ss)
        uv->socks.v[ss->fd] = NULL;
    if (ss->inited && !ss->closing) {
        ss->closing = true;
        uv_close((uv_handle_t *)&ss->poll, wk_curl_uv_sock_closed);
    }
    wk_curl_uv_release(uv, ss);
}

/* Stops SS's poll: no wake-up until it is watched again. */
static void wk_curl_uv_quiet(wk_sock *ss)
{
    if (ss->inited)
        uv_poll_stop(&ss->poll);
    ss->events = 0;
}

static void wk_curl_uv_poll_cb(uv_poll_t *poll, int status, int events)
{
    wk_sock *ss = poll->data;
    int flags = 0;

    if (ss->idle) {
        /* No transfer waits on it: curl checks the connection before it
         * uses it again.  Stopped, so a closed peer does not wake the loop
         * again and again. */
        wk_curl_uv_quiet(ss);
        return;
    }
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    wk_curl_action(ss->mh, ss->fd, flags);
}

/* Makes SS's poll wait for EVENTS, touching epoll only when they change. */
static int wk_curl_uv_watch(wk_sock *ss, int events)
{
    if (events == ss->events)
        return 0;
    if (uv_poll_start(&ss->poll, events, wk_curl_uv_poll_cb) != 0)
        return -1;
    ss->events = events;
    return 0;
}

/* The transfers of its multi handle no longer need SS (CURL_POLL_REMOVE). */
static void wk_curl_uv_sock_remove(wk_curl_uv *uv, wk_sock *ss)
{
    ss->assigned = false;
    if (ss->closing || !ss->owned) {
        wk_curl_uv_sock_close(uv, ss);
        return;
    }
    /* Idle in curl's cache: registered for readable only, so a peer's
     * close is seen without a wake-up per writable socket.  One curl has
     * not yet waited on for reading (libcurl 7.88 may let go of a new
     * connection's socket between its connect and its first request) is
     * only stopped, as a connection that never answered has no close to
     * report.  Both stay ours in the table until curl closes them: a
     * socket dropped from it here would come back unowned, and get a poll
     * made and closed again for every transfer on its connection. */
    ss->idle = true;
    if (!ss->connected)
        wk_curl_uv_quiet(ss);
    else if (wk_curl_uv_watch(ss, UV_READABLE) != 0) {
        wk_curl_uv_sock_close(uv, ss);
        return;
    }
    if (ss->inited)
        uv_unref((uv_handle_t *)&ss->poll);
}

/* SS no longer names the socket FD of multi handle MH (the number was
 * reused, or moved to another multi handle): its poll is closed, and the
 * pointer curl holds is dropped when it is MH's. */
static void wk_curl_uv_sock_stale(wk_curl_uv *uv, wk_sock *ss, wk_multi *mh)
{
    if (ss->mh == mh)
        ss->assigned = false;
    wk_curl_uv_sock_close(uv, ss);
}

static int wk_curl_uv_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *sockp)
{
    wk_uv_multi *um = userp;
    wk_curl_uv *uv = um->uv;
    wk_multi *mh = um->mh;
    wk_sock *ss = sockp;
    int events = 0;

    (void)easy;
    if (ss == NULL)
        ss = wk_curl_uv_lookup(uv, fd);
    if (what == CURL_POLL_REMOVE) {
        if (ss != NULL)
            wk_curl_uv_sock_remove(uv, ss);
        return 0;
    }
    if (ss != NULL && (ss->closing || (ss->mh != NULL && ss->mh != mh))) {
        wk_curl_uv_sock_stale(uv, ss, mh);
        ss = wk_curl_uv_lookup(uv, fd);
        if (ss != NULL && ss->mh != NULL && ss->mh != mh) {
            wk_curl_uv_sock_stale(uv, ss, mh);
            ss = NULL;
        }
    }
    if (ss == NULL) {
        ss = calloc(1, sizeof *ss);
        if (ss == NULL)
            return -1;
        ss->fd = fd;
        ss->uv = uv;
    }
    if (!ss->inited) {
        if (uv_poll_init_socket(uv->loop, &ss->poll, fd) != 0) {
            wk_curl_uv_sock_close(uv, ss);
            return -1;
        }
        ss->poll.data = ss;
        ss->mh = mh;
        ss->inited = true;
    }
    if (!ss->assigned) {
        curl_multi_assign(mh->multi, fd, ss);
        ss->assigned = true;
    }
    if (ss->idle) {
        ss->idle = false;
        uv_ref((uv_handle_t *)&ss->poll);
    }
    if (what & CURL_POLL_IN) {
        events |= UV_READABLE;
        ss->connected = true;
    }
    if (what & CURL_POLL_OUT)
        events |= UV_WRITABLE;
    return wk_curl_uv_watch(ss, events);
}

/* CURLOPT_OPENSOCKETFUNCTION: the socket curl asks for, marked as ours in
 * the table so that it may stay registered between transfers. */
static curl_socket_t wk_curl_uv_open(void *clientp, curlsocktype purpose,
                                     struct curl_sockaddr *address)
{
    wk_curl_uv *uv = clientp;
    curl_socket_t fd;
    wk_sock *ss;

    fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    if (fd < 0)
        return CURL_SOCKET_BAD;
    if (purpose != CURLSOCKTYPE_IPCXN)
        return fd;
    ss = wk_curl_uv_lookup(uv, fd);
    if (ss != NULL && ss->assigned && ss->inited) {
        /* curl closed the socket that had this number without telling (a
         * connect that failed) and still names the number in its socket
         * table, so this wk_sock stays the number's: its poll is
         * registered again, for the new descriptor. */
        int events = ss->events;

        ss->events = 0;
        ss->connected = false;
        if (events == 0 || wk_curl_uv_watch(ss, events) == 0)
            return fd;
    }
    if (ss != NULL)
        wk_curl_uv_sock_close(uv, ss);
    ss = calloc(1, sizeof *ss);
    if (ss == NULL || wk_curl_uv_store(uv, fd, ss) != 0) {
        free(ss);
        close(fd);
        return CURL_SOCKET_BAD;
    }
    /* Polled from the first socket callback on: a socket curl never
     * watches needs no poll. */
    ss->fd = fd;
    ss->uv = uv;
    ss->owned = true;
    return fd;
}

/* CURLOPT_CLOSESOCKETFUNCTION: the poll goes before the descriptor. */
static int wk_curl_uv_closesocket(void *clientp, curl_socket_t fd)
{
    wk_curl_uv *uv = clientp;
    wk_sock *ss = wk_curl_uv_lookup(uv, fd);

    if (ss != NULL)
        wk_curl_uv_sock_close(uv, ss);
    return close(fd);
}

/* wk_curl_io.easy: the socket hooks of a new easy handle. */
static void wk_curl_uv_easy(void *data, CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, wk_curl_uv_open);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, data);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, wk_curl_uv_closesocket);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, data);
}

static void wk_curl_uv_timeout_cb(uv_timer_t *t)
{
    wk_uv_multi *um = t->data;

    wk_curl_action(um->mh, CURL_SOCKET_TIMEOUT, 0);
}

static int wk_curl_uv_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    wk_uv_multi *um = userp;

    (void)multi;
    if (timeout_ms < 0)
        uv_timer_stop(&um->timer);
    else
        uv_timer_start(&um->timer, wk_curl_uv_timeout_cb, (uint64_t)timeout_ms, 0);
    return 0;
}

/* wk_curl_io.attach: MH's socket and timer callbacks, on the loop. */
static int wk_curl_uv_attach(void *data, wk_multi *mh)
{
    wk_uv_multi *um = calloc(1, sizeof *um);

    if (um == NULL)
        return -1;
    um->mh = mh;
    um->uv = data;
    uv_timer_init(um->uv->loop, &um->timer);
    um->timer.data = um;
    mh->ev = um;
    curl_multi_setopt(mh->multi, CURLMOPT_SOCKETFUNCTION, wk_curl_uv_socket_cb);
    curl_multi_setopt(mh->multi, CURLMOPT_SOCKETDATA, um);
    curl_multi_setopt(mh->multi, CURLMOPT_TIMERFUNCTION, wk_curl_uv_timer_cb);
    curl_multi_setopt(mh->multi, CURLMOPT_TIMERDATA, um);
    return 0;
}

static void wk_curl_uv_timer_closed(uv_handle_t *h)
{
    free(h->data);
}

/* wk_curl_io.detach: MH was cleaned up, its timer goes. */
static void wk_curl_uv_detach(void *data, wk_multi *mh)
{
    wk_uv_multi *um = mh->ev;

    (void)data;
    mh->ev = NULL;
    uv_close((uv_handle_t *)&um->timer, wk_curl_uv_timer_closed);
}

wk_curl_uv *wk_curl_uv_new(uv_loop_t *loop)
{
    wk_curl_uv *uv = calloc(1, sizeof *uv);

    if (uv == NULL)
        return NULL;
    uv->loop = loop;
    uv->io = (wk_curl_io){.data = uv,
                          .attach = wk_curl_uv_attach,
                          .detach = wk_curl_uv_detach,
                          .easy = wk_curl_uv_easy};
    return uv;
}

const wk_curl_io *wk_curl_uv_io(const wk_curl_uv *uv)
{
    return &uv->io;
}

void wk_curl_uv_close(wk_curl_uv *uv)
{
    if (uv == NULL)
        return;
    for (size_t fd = 0; fd < uv->socks.n; fd++) {
        wk_sock *ss = uv->socks.v[fd];

        if (ss != NULL) {
            ss->assigned = false; /* its multi handle is gone */
            wk_curl_uv_sock_close(uv, ss);
        }
    }
}

void wk_curl_uv_free(wk_curl_uv *uv)
{
    if (uv == NULL)
        return;
    hr_vec_free(&uv->socks);
    free(uv);
}
