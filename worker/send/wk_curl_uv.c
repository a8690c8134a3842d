/* wk_sender_uv: drives the sender's curl multi handles from the libuv loop
 * (after curl's docs/examples/multi-uv.c): a uv_poll per socket curl
 * watches, one uv_timer per multi handle for curl's timeout; after every
 * socket action the finished transfers are handed to wk_sender_check.
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
 *     without our pointer (it forgot it at REMOVE), so the sender keeps a
 *     table from descriptor to wk_sock (s->socks).
 * Only sockets that the sender opened (CURLOPT_OPENSOCKETFUNCTION) and that
 * curl has waited on for reading stay registered while idle: curl watches
 * a socket for reading only once it is connected, and closes a connected
 * socket through CURLOPT_CLOSESOCKETFUNCTION, where its wk_sock is closed
 * before the descriptor.  So the table never holds a descriptor that was
 * closed behind its back, whose number another socket (curl's resolver
 * pipe) could take.  Any other socket gets its poll closed at REMOVE, as
 * before.  Whoever frees a wk_sock: the uv close callback, once curl no
 * longer holds it (curl_multi_assign), else the REMOVE that lets go of it. */
#include "wk_sender_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct wk_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    wk_multi *mh;   /* the multi handle whose transfers use it; NULL before the first */
    int events;     /* UV_READABLE | UV_WRITABLE the poll waits for; 0 = stopped */
    bool owned;     /* opened by wk_sender_uv_open: curl reports its close */
    bool connected; /* curl waited on it for reading */
    bool idle;      /* between two transfers (after CURL_POLL_REMOVE) */
    bool assigned;  /* its multi handle holds the pointer (curl_multi_assign) */
    bool inited;    /* the poll was initialised */
    bool closing;   /* uv_close was called */
    bool closed;    /* the uv close callback ran */
};

/* The wk_sock of FD in the sender's table, or NULL. */
static wk_sock *wk_sender_uv_lookup(const wk_sender *s, curl_socket_t fd)
{
    return fd >= 0 && (size_t)fd < s->socks.n ? s->socks.v[fd] : NULL;
}

/* Puts SS at FD in the table; -1 when out of memory. */
static int wk_sender_uv_store(wk_sender *s, curl_socket_t fd, wk_sock *ss)
{
    size_t need = (size_t)fd + 1;

    if (need > s->socks.n) {
        if (hr_vec_reserve(&s->socks, need) != 0)
            return -1;
        memset(s->socks.v + s->socks.n, 0, (need - s->socks.n) * sizeof *s->socks.v);
        s->socks.n = need;
    }
    s->socks.v[fd] = ss;
    return 0;
}

/* Frees SS once nothing holds it: not in the table, not held by curl, its
 * poll closed (or never made). */
static void wk_sender_uv_release(wk_sender *s, wk_sock *ss)
{
    if (!ss->assigned && (!ss->inited || ss->closed) && wk_sender_uv_lookup(s, ss->fd) != ss)
        free(ss);
}

static void wk_sender_uv_sock_closed(uv_handle_t *h)
{
    wk_sock *ss = h->data;

    ss->closed = true;
    wk_sender_uv_release(ss->mh->s, ss);
}

/* Takes SS out of the table and closes its poll (and so its epoll
 * registration); it is freed once neither libuv nor curl holds it. */
static void wk_sender_uv_sock_close(wk_sender *s, wk_sock *ss)
{
    if (wk_sender_uv_lookup(s, ss->fd) == ss)
        s->socks.v[ss->fd] = NULL;
    if (ss->inited && !ss->closing) {
        ss->closing = true;
        uv_close((uv_handle_t *)&ss->poll, wk_sender_uv_sock_closed);
    }
    wk_sender_uv_release(s, ss);
}

static void wk_sender_uv_poll_cb(uv_poll_t *poll, int status, int events)
{
    wk_sock *ss = poll->data;
    wk_multi *mh = ss->mh;
    int flags = 0, running;

    if (ss->idle) {
        /* No transfer waits on it: curl checks the connection before it
         * uses it again.  Stopped, so a closed peer does not wake the loop
         * again and again. */
        uv_poll_stop(&ss->poll);
        ss->events = 0;
        return;
    }
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    curl_multi_socket_action(mh->multi, ss->fd, flags, &running);
    wk_sender_check(mh->s, mh);
}

/* Makes SS's poll wait for EVENTS, touching epoll only when they change. */
static int wk_sender_uv_watch(wk_sock *ss, int events)
{
    if (events == ss->events)
        return 0;
    if (uv_poll_start(&ss->poll, events, wk_sender_uv_poll_cb) != 0)
        return -1;
    ss->events = events;
    return 0;
}

/* The transfers of its multi handle no longer need SS (CURL_POLL_REMOVE). */
static void wk_sender_uv_sock_remove(wk_sender *s, wk_sock *ss)
{
    ss->assigned = false;
    if (ss->closing || !ss->owned || !ss->connected) {
        wk_sender_uv_sock_close(s, ss);
        return;
    }
    /* Idle in curl's cache: registered for readable only, so a peer's
     * close is seen without a wake-up per writable socket. */
    ss->idle = true;
    if (wk_sender_uv_watch(ss, UV_READABLE) != 0)
        wk_sender_uv_sock_close(s, ss);
    else
        uv_unref((uv_handle_t *)&ss->poll);
}

/* SS no longer names the socket FD of multi handle MH (the number was
 * reused, or moved to another multi handle): its poll is closed, and the
 * pointer curl holds is dropped when it is MH's. */
static void wk_sender_uv_sock_stale(wk_sender *s, wk_sock *ss, wk_multi *mh)
{
    if (ss->mh == mh)
        ss->assigned = false;
    wk_sender_uv_sock_close(s, ss);
}

static int wk_sender_uv_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *sockp)
{
    wk_multi *mh = userp;
    wk_sender *s = mh->s;
    wk_sock *ss = sockp;
    int events = 0;

    (void)easy;
    if (ss == NULL)
        ss = wk_sender_uv_lookup(s, fd);
    if (what == CURL_POLL_REMOVE) {
        if (ss != NULL)
            wk_sender_uv_sock_remove(s, ss);
        return 0;
    }
    if (ss != NULL && (ss->closing || (ss->mh != NULL && ss->mh != mh))) {
        wk_sender_uv_sock_stale(s, ss, mh);
        ss = wk_sender_uv_lookup(s, fd);
        if (ss != NULL && ss->mh != NULL && ss->mh != mh) {
            wk_sender_uv_sock_stale(s, ss, mh);
            ss = NULL;
        }
    }
    if (ss == NULL) {
        ss = calloc(1, sizeof *ss);
        if (ss == NULL)
            return -1;
        ss->fd = fd;
    }
    if (!ss->inited) {
        if (uv_poll_init_socket(s->loop, &ss->poll, fd) != 0) {
            wk_sender_uv_sock_close(s, ss);
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
    return wk_sender_uv_watch(ss, events);
}

/* CURLOPT_OPENSOCKETFUNCTION: the socket curl asks for, marked as ours in
 * the table so that it may stay registered between transfers. */
static curl_socket_t wk_sender_uv_open(void *clientp, curlsocktype purpose,
                                       struct curl_sockaddr *address)
{
    wk_sender *s = clientp;
    curl_socket_t fd;
    wk_sock *ss;

    fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    if (fd < 0)
        return CURL_SOCKET_BAD;
    if (purpose != CURLSOCKTYPE_IPCXN)
        return fd;
    ss = wk_sender_uv_lookup(s, fd);
    if (ss != NULL && ss->assigned && ss->inited) {
        /* curl closed the socket that had this number without telling (a
         * connect that failed) and still names the number in its socket
         * table, so this wk_sock stays the number's: its poll is
         * registered again, for the new descriptor. */
        int events = ss->events;

        ss->events = 0;
        ss->connected = false;
        if (events == 0 || wk_sender_uv_watch(ss, events) == 0)
            return fd;
    }
    if (ss != NULL)
        wk_sender_uv_sock_close(s, ss);
    ss = calloc(1, sizeof *ss);
    if (ss == NULL || wk_sender_uv_store(s, fd, ss) != 0) {
        free(ss);
        close(fd);
        return CURL_SOCKET_BAD;
    }
    /* Polled from the first socket callback on: a socket curl never
     * watches needs no poll. */
    ss->fd = fd;
    ss->owned = true;
    return fd;
}

/* CURLOPT_CLOSESOCKETFUNCTION: the poll goes before the descriptor. */
static int wk_sender_uv_close(void *clientp, curl_socket_t fd)
{
    wk_sender *s = clientp;
    wk_sock *ss = wk_sender_uv_lookup(s, fd);

    if (ss != NULL)
        wk_sender_uv_sock_close(s, ss);
    return close(fd);
}

void wk_sender_uv_easy(wk_sender *s, CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, wk_sender_uv_open);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, s);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, wk_sender_uv_close);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, s);
}

void wk_sender_uv_close_all(wk_sender *s)
{
    for (size_t fd = 0; fd < s->socks.n; fd++) {
        wk_sock *ss = s->socks.v[fd];

        if (ss != NULL) {
            ss->assigned = false; /* its multi handle is gone */
            wk_sender_uv_sock_close(s, ss);
        }
    }
}

static void wk_sender_uv_timeout_cb(uv_timer_t *t)
{
    wk_multi *mh = t->data;
    int running;

    curl_multi_socket_action(mh->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    wk_sender_check(mh->s, mh);
}

static int wk_sender_uv_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    wk_multi *mh = userp;

    (void)multi;
    if (timeout_ms < 0)
        uv_timer_stop(&mh->timer);
    else
        uv_timer_start(&mh->timer, wk_sender_uv_timeout_cb, (uint64_t)timeout_ms, 0);
    return 0;
}

int wk_sender_uv_multi_init(wk_sender *s, wk_multi *mh, long conns)
{
    mh->s = s;
    mh->multi = curl_multi_init();
    if (mh->multi == NULL)
        return -1;
    uv_timer_init(s->loop, &mh->timer);
    mh->timer.data = mh;
    curl_multi_setopt(mh->multi, CURLMOPT_SOCKETFUNCTION, wk_sender_uv_socket_cb);
    curl_multi_setopt(mh->multi, CURLMOPT_SOCKETDATA, mh);
    curl_multi_setopt(mh->multi, CURLMOPT_TIMERFUNCTION, wk_sender_uv_timer_cb);
    curl_multi_setopt(mh->multi, CURLMOPT_TIMERDATA, mh);
    curl_multi_setopt(mh->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    /* At most the channel's connections per host (see wk_sender_new), kept
     * for reuse; one more in the cache for an fcm channel's token host. */
    curl_multi_setopt(mh->multi, CURLMOPT_MAX_HOST_CONNECTIONS, conns);
    curl_multi_setopt(mh->multi, CURLMOPT_MAXCONNECTS, conns + 1);
    return 0;
}

void wk_sender_uv_multi_close(wk_multi *mh)
{
    if (mh->multi == NULL)
        return;
    /* Closes cached connections: the callbacks close their polls. */
    curl_multi_cleanup(mh->multi);
    mh->multi = NULL;
    uv_close((uv_handle_t *)&mh->timer, NULL);
}
