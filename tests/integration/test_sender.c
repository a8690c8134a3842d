/* The worker's sender (wk_sender, wk_chan, wk_xfer, wk_sender_uv) in this
 * process, on a libuv loop, against a small HTTP/1.1 server on a thread of
 * its own that records every request as it came on the wire.  Redis is the
 * local stack's (the sender reads a channel's cluster slow-down from it,
 * through the worker's Redis thread, wk_redis).
 *
 *   - keep-alive: every push delivered over at most the channel's
 *     concurrency of connections (sockets stay registered between
 *     transfers and are found again when curl reuses them), and an idle
 *     sender does not keep the loop alive;
 *   - a server that closes each connection after its answer: every push
 *     still delivered (a dead idle connection is replaced), and the closed
 *     idle sockets do not wake the loop over and over;
 *   - one easy handle reused by two tasks' pushes in turn: every request
 *     carries exactly its own Idempotency-Key, rendered header, signature
 *     headers and body, nothing of the request before it;
 *   - the proxy environment, read when the sender is made (hr_proxy): the
 *     server plays the proxy named by http_proxy and gets every request in
 *     absolute form, although the variable was unset before the first
 *     push; HTTP_PROXY alone is not read and a no_proxy host goes direct;
 *     each with a channel URL parsed once (no variable) and one rendered
 *     per request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "hr_config.h"
#include "hr_redis.h"
#include "itest.h"
#include "wk_redis.h"
#include "wk_metrics.h"
#include "wk_sender.h"
#include "wk_task.h"

#define T_CONNS 64                 /* connections the server serves at once */
#define T_REQ_MAX 8192             /* a request's bytes (head and body) */
#define T_RECORDS 4096             /* requests recorded */
#define T_WAIT_MS 30000            /* bound of every campaign */
#define T_PATH "/push/{{task.id}}" /* the channel URL's path: rendered per request */
#define T_SECRET \
    "whsec_"     \
    "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

/* ---- the server ---------------------------------------------------------- */

typedef struct t_conn {
    int fd;
    char buf[T_REQ_MAX];
    size_t len;
} t_conn;

typedef struct t_server {
    int lfd, port;
    bool close_after; /* close each connection right after its answer */
    volatile bool stop;
    pthread_t thread;
    pthread_mutex_t lock;
    int accepted;
    char *records[T_RECORDS]; /* each request: head and body */
    int nrecords;
} t_server;

/* Serves every complete request in C; false when the connection is done. */
static bool t_serve(t_server *sv, t_conn *c)
{
    static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

    for (;;) {
        char *end = memmem(c->buf, c->len, "\r\n\r\n", 4), *cl;
        size_t head, body = 0, n;

        if (end == NULL)
            return c->len < sizeof c->buf;
        head = (size_t)(end - c->buf) + 4;
        cl = memmem(c->buf, head, "Content-Length: ", 16);
        if (cl != NULL)
            body = strtoul(cl + 16, NULL, 10);
        n = head + body;
        if (n > c->len)
            return n <= sizeof c->buf;
        pthread_mutex_lock(&sv->lock);
        if (sv->nrecords < T_RECORDS)
            sv->records[sv->nrecords++] = strndup(c->buf, n);
        pthread_mutex_unlock(&sv->lock);
        if (write(c->fd, answer, sizeof answer - 1) != (ssize_t)(sizeof answer - 1) ||
            sv->close_after)
            return false;
        memmove(c->buf, c->buf + n, c->len - n);
        c->len -= n;
    }
}

static void *t_server_run(void *arg)
{
    t_server *sv = arg;
    t_conn *conns = calloc(T_CONNS, sizeof *conns);
    struct pollfd pfd[T_CONNS + 1];

    for (int i = 0; i < T_CONNS; i++)
        conns[i].fd = -1;
    while (!sv->stop) {
        int n = 0, map[T_CONNS + 1];

        pfd[n].fd = sv->lfd;
        pfd[n].events = POLLIN;
        map[n++] = -1;
        for (int i = 0; i < T_CONNS; i++)
            if (conns[i].fd >= 0) {
                pfd[n].fd = conns[i].fd;
                pfd[n].events = POLLIN;
                map[n++] = i;
            }
        if (poll(pfd, (nfds_t)n, 50) <= 0)
            continue;
        for (int k = 0; k < n; k++) {
            t_conn *c;
            ssize_t got;

            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (map[k] < 0) {
                int fd = accept(sv->lfd, NULL, NULL), i;

                for (i = 0; fd >= 0 && i < T_CONNS && conns[i].fd >= 0; i++)
                    ;
                if (fd >= 0 && i == T_CONNS) {
                    close(fd);
                } else if (fd >= 0) {
                    conns[i].fd = fd;
                    conns[i].len = 0;
                    pthread_mutex_lock(&sv->lock);
                    sv->accepted++;
                    pthread_mutex_unlock(&sv->lock);
                }
                continue;
            }
            c = &conns[map[k]];
            got = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
            if (got > 0)
                c->len += (size_t)got;
            if (got <= 0 || !t_serve(sv, c)) {
                close(c->fd);
                c->fd = -1;
            }
        }
    }
    for (int i = 0; i < T_CONNS; i++)
        if (conns[i].fd >= 0)
            close(conns[i].fd);
    free(conns);
    return NULL;
}

static void t_server_start(t_server *sv, bool close_after)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;

    memset(sv, 0, sizeof *sv);
    sv->close_after = close_after;
    pthread_mutex_init(&sv->lock, NULL);
    sv->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(sv->lfd >= 0);
    assert_int_equal(bind(sv->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(sv->lfd, 128), 0);
    assert_int_equal(getsockname(sv->lfd, (struct sockaddr *)&a, &alen), 0);
    sv->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&sv->thread, NULL, t_server_run, sv), 0);
}

static void t_server_stop(t_server *sv)
{
    sv->stop = true;
    pthread_join(sv->thread, NULL);
    close(sv->lfd);
    for (int i = 0; i < sv->nrecords; i++)
        free(sv->records[i]);
    pthread_mutex_destroy(&sv->lock);
}

/* ---- the sender ---------------------------------------------------------- */

typedef struct t_run {
    hr_config *cfg;
    wk_redis *rd;
    wk_metrics *m;
    uv_loop_t loop;
    wk_sender *s;
    wk_task *tasks[2];
    wk_push *pushes;
    char (*uids)[24];
    int n, settled, delivered;
} t_run;

static void t_done(void *ctx, wk_push *push, const wk_push_result *res)
{
    t_run *run = ctx;

    (void)push;
    run->settled++;
    if (res->delivered)
        run->delivered++;
}

/* A config of the test's Redis and one webhook channel to HOST:PORT and
 * URL_PATH (a template) with CONCURRENCY; SIGNED adds a signing secret and a
 * rendered header. */
static hr_config *t_config(const char *host, int port, const char *url_path, int concurrency,
                           bool signed_)
{
    hr_config *base = itest_config(), *cfg = NULL;
    char path[] = "/tmp/herald-test-sender-XXXXXX.yaml", yaml[2048], errstr[512];
    int fd = mkstemps(path, 5), len;

    assert_true(fd >= 0);
    len = snprintf(yaml, sizeof yaml,
                   "redis: {host: \"%s\", port: %d, password: \"%s\", prefix: \"%s\"}\n"
                   "channels:\n"
                   "  hook:\n"
                   "    url: \"http://%s:%d%s\"\n"
                   "    body: '{\"uid\":\"{{uid}}\",\"task\":\"{{task.id}}\"}'\n"
                   "    concurrency: %d\n"
                   "    timeout_ms: 5000\n"
                   "    headers: {Content-Type: application/json%s}\n"
                   "%s",
                   base->redis.host, base->redis.port,
                   base->redis.password ? base->redis.password : "", base->redis.prefix, host, port,
                   url_path, concurrency, signed_ ? ", X-Task: \"t{{task.id}}\"" : "",
                   signed_ ? "    signing_secrets: [\"" T_SECRET "\"]\n" : "");
    assert_int_equal(write(fd, yaml, (size_t)len), len);
    close(fd);
    assert_int_equal(hr_config_load(path, &cfg, errstr, sizeof errstr), 0);
    unlink(path);
    hr_config_free(base);
    return cfg;
}

static void t_run_start(t_run *run, const char *host, int port, const char *path, int concurrency,
                        bool signed_, int n)
{
    char errstr[512];
    hr_redis *r = NULL;

    memset(run, 0, sizeof *run);
    run->cfg = t_config(host, port, path, concurrency, signed_);
    assert_int_equal(hr_redis_connect(run->cfg, &r, errstr, sizeof errstr), 0);
    run->m = wk_metrics_new(run->cfg, errstr, sizeof errstr);
    assert_non_null(run->m);
    assert_int_equal(uv_loop_init(&run->loop), 0);
    assert_int_equal(wk_redis_start(&run->loop, r, &run->rd, errstr, sizeof errstr), 0);
    for (int i = 0; i < 2; i++) {
        hr_task *row = calloc(1, sizeof *row);

        assert_non_null(row);
        row->id = 71 + i;
        row->name = strdup("sender");
        row->topic = strdup("test");
        row->channel = strdup("hook");
        row->title = strdup("");
        row->body = strdup("");
        row->lease_until_ms = row->ttl_s = row->finish_ms = row->expire_ms = -1;
        row->chunk_size = n;
        assert_int_equal(wk_task_build(run->cfg, row, NULL, &run->tasks[i], errstr, sizeof errstr),
                         0);
    }
    run->n = n;
    run->pushes = calloc((size_t)n, sizeof *run->pushes);
    run->uids = calloc((size_t)n, sizeof *run->uids);
    assert_non_null(run->pushes);
    assert_non_null(run->uids);
    assert_int_equal(wk_sender_new(&run->loop, run->cfg, run->rd, run->m, t_done, run, &run->s,
                                   errstr, sizeof errstr),
                     0);
}

/* Pushes every recipient (push i to task i % 2 when TWO_TASKS) and runs
 * the loop until all are settled, at most T_WAIT_MS. */
static void t_push_all(t_run *run, bool two_tasks)
{
    int64_t until = itest_now_ms() + T_WAIT_MS;

    for (int i = 0; i < run->n; i++) {
        snprintf(run->uids[i], sizeof run->uids[i], "%d", 1000 + i);
        run->pushes[i].task = run->tasks[two_tasks ? i % 2 : 0];
        run->pushes[i].uid = run->uids[i];
        wk_sender_submit(run->s, &run->pushes[i]);
    }
    wk_sender_kick(run->s);
    while (run->settled < run->n && itest_now_ms() < until)
        uv_run(&run->loop, UV_RUN_ONCE);
    assert_int_equal(run->settled, run->n);
    assert_int_equal(run->delivered, run->n);
}

static void t_run_stop(t_run *run)
{
    wk_sender_close(run->s);
    wk_redis_close(run->rd);
    uv_run(&run->loop, UV_RUN_DEFAULT);
    wk_sender_free(run->s);
    wk_redis_free(run->rd);
    assert_int_equal(uv_loop_close(&run->loop), 0);
    wk_task_free(run->tasks[0]);
    wk_task_free(run->tasks[1]);
    free(run->pushes);
    free(run->uids);
    wk_metrics_free(run->m);
    itest_redis_cleanup(run->cfg);
    hr_config_free(run->cfg);
}

static int t_ticks;

static void t_tick(uv_prepare_t *p)
{
    (void)p;
    t_ticks++;
}

static void t_stop_loop(uv_timer_t *t)
{
    uv_stop(t->loop);
}

/* How many loop iterations MS milliseconds of an otherwise idle sender
 * take: one or a few when nothing wakes the loop. */
static int t_idle_ticks(t_run *run, int ms)
{
    uv_prepare_t p;
    uv_timer_t t;

    t_ticks = 0;
    uv_prepare_init(&run->loop, &p);
    uv_prepare_start(&p, t_tick);
    uv_timer_init(&run->loop, &t);
    uv_timer_start(&t, t_stop_loop, (uint64_t)ms, 0);
    uv_run(&run->loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&p, NULL);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&run->loop, UV_RUN_NOWAIT);
    return t_ticks;
}

/* ---- tests --------------------------------------------------------------- */

static void test_keepalive_reuse(void **state)
{
    static t_server sv;
    static t_run run;

    (void)state;
    t_server_start(&sv, false);
    t_run_start(&run, "127.0.0.1", sv.port, T_PATH, 8, false, 2000);
    t_push_all(&run, false);
    /* Every connection served many pushes: the sockets were found again
     * after curl forgot them between transfers. */
    assert_true(sv.accepted >= 1);
    assert_true(sv.accepted <= 8);
    assert_int_equal(sv.nrecords, 2000);
    /* The idle connections are registered but do not keep the loop alive
     * (once the slow-down read the pump last asked of the Redis thread has
     * answered: a job in flight does). */
    while (wk_redis_pending(run.rd) > 0)
        uv_run(&run.loop, UV_RUN_ONCE);
    uv_run(&run.loop, UV_RUN_NOWAIT);
    assert_false(uv_loop_alive(&run.loop));
    /* ... and a second campaign on them works as the first. */
    run.settled = run.delivered = 0;
    t_push_all(&run, false);
    assert_true(sv.accepted <= 8);
    t_run_stop(&run);
    t_server_stop(&sv);
}

static void test_peer_closes(void **state)
{
    static t_server sv;
    static t_run run;
    int ticks;

    (void)state;
    t_server_start(&sv, true);
    t_run_start(&run, "127.0.0.1", sv.port, T_PATH, 4, false, 300);
    t_push_all(&run, false);
    /* A connection per push: each dead idle one was replaced. */
    assert_int_equal(sv.accepted, 300);
    assert_int_equal(sv.nrecords, 300);
    /* The peer closed the idle sockets: readable for good.  Their polls
     * are stopped at the first wake-up, so 300 ms of an idle loop take a
     * handful of iterations, not one per wake-up of a busy loop. */
    ticks = t_idle_ticks(&run, 300);
    assert_true(ticks < 50);
    t_run_stop(&run);
    t_server_stop(&sv);
}

/* The value of header NAME in request REQ ("" when absent); how many
 * times it appears goes to *COUNT. */
static const char *t_header(const char *req, const char *name, int *count, char *out, size_t len)
{
    const char *end = strstr(req, "\r\n\r\n"), *p = req;
    size_t nlen = strlen(name);

    out[0] = '\0';
    *count = 0;
    while ((p = strstr(p, "\r\n")) != NULL && p < end) {
        p += 2;
        if (strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
            const char *v = p + nlen + 1, *e = strstr(v, "\r\n");

            while (*v == ' ')
                v++;
            snprintf(out, len, "%.*s", (int)(e - v), v);
            (*count)++;
        }
    }
    return out;
}

static void test_handle_reuse(void **state)
{
    static t_server sv;
    static t_run run;

    (void)state;
    t_server_start(&sv, false);
    /* One handle: every push reuses the handle of the push before it,
     * which belonged to the other task. */
    t_run_start(&run, "127.0.0.1", sv.port, T_PATH, 1, true, 40);
    t_push_all(&run, true);
    assert_int_equal(sv.nrecords, 40);
    assert_int_equal(sv.accepted, 1);
    for (int i = 0, prev = 0; i < sv.nrecords; i++) {
        const char *req = sv.records[i], *body = strstr(req, "\r\n\r\n") + 4;
        char v[256], want[256], line[64];
        int uid, task, count;

        /* The server saw them in order: the uid says which push it was. */
        assert_int_equal(sscanf(body, "{\"uid\":\"%d\",\"task\":\"%d\"}", &uid, &task), 2);
        assert_int_equal(task, 71 + (uid - 1000) % 2);
        /* Round robin: the handle went from one task to the other. */
        assert_int_not_equal(task, prev);
        prev = task;
        snprintf(line, sizeof line, "POST /push/%d HTTP/1.1\r\n", task);
        assert_memory_equal(req, line, strlen(line));
        snprintf(want, sizeof want, "{\"uid\":\"%d\",\"task\":\"%d\"}", uid, task);
        assert_string_equal(body, want);
        snprintf(want, sizeof want, "%zu", strlen(body));
        assert_string_equal(t_header(req, "Content-Length", &count, v, sizeof v), want);
        snprintf(want, sizeof want, "herald-%d-%d", task, uid);
        assert_string_equal(t_header(req, "Idempotency-Key", &count, v, sizeof v), want);
        assert_int_equal(count, 1);
        assert_string_equal(t_header(req, "webhook-id", &count, v, sizeof v), want);
        assert_int_equal(count, 1);
        snprintf(want, sizeof want, "t%d", task);
        assert_string_equal(t_header(req, "X-Task", &count, v, sizeof v), want);
        assert_int_equal(count, 1);
        t_header(req, "webhook-signature", &count, v, sizeof v);
        assert_int_equal(count, 1);
        assert_memory_equal(v, "v1,", 3);
        t_header(req, "webhook-timestamp", &count, v, sizeof v);
        assert_int_equal(count, 1);
        t_header(req, "Content-Type", &count, v, sizeof v);
        assert_int_equal(count, 1);
        t_header(req, "Expect", &count, v, sizeof v);
        assert_int_equal(count, 0);
    }
    t_run_stop(&run);
    t_server_stop(&sv);
}

/* 20 pushes of a sender made now (reading the environment the caller set)
 * to HOST:PORT and PATH, SV's records FROM.. then each beginning with the
 * request line LINE; the variable UNSET (if not NULL) is unset once the
 * sender is made, before its first push and its first easy handle. */
static void t_proxy_round(t_server *sv, const char *host, int port, const char *path,
                          const char *unset, int from, const char *line)
{
    static t_run run;

    t_run_start(&run, host, port, path, 2, false, 20);
    if (unset != NULL)
        unsetenv(unset);
    t_push_all(&run, false);
    assert_int_equal(sv->nrecords, from + 20);
    for (int i = from; i < from + 20; i++)
        assert_memory_equal(sv->records[i], line, strlen(line));
    t_run_stop(&run);
}

/* With a proxy and without, a channel URL that names no variable (parsed
 * once, CURLOPT_CURLU) and one rendered per request. */
static void test_proxy_env(void **state)
{
    static t_server sv;
    char proxy[64];

    (void)state;
    t_server_start(&sv, false);
    /* Through the proxy: the target host does not resolve, so a request
     * that went direct would fail. */
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", sv.port);
    setenv("http_proxy", proxy, 1);
    t_proxy_round(&sv, "herald-proxy-test.invalid", 8080, "/push/fixed?a=1", "http_proxy", 0,
                  "POST http://herald-proxy-test.invalid:8080/push/fixed?a=1 HTTP/1.1\r\n");
    setenv("http_proxy", proxy, 1);
    t_proxy_round(&sv, "herald-proxy-test.invalid", 8080, T_PATH, "http_proxy", 20,
                  "POST http://herald-proxy-test.invalid:8080/push/71 HTTP/1.1\r\n");
    /* HTTP_PROXY (upper case) is not read for http, as libcurl does not:
     * direct to the server, although the variable names a dead port. */
    setenv("HTTP_PROXY", "http://127.0.0.1:9", 1);
    t_proxy_round(&sv, "127.0.0.1", sv.port, "/push/fixed?a=1", "HTTP_PROXY", 40,
                  "POST /push/fixed?a=1 HTTP/1.1\r\n");
    /* A host in no_proxy goes direct past a dead proxy. */
    setenv("http_proxy", "http://127.0.0.1:9", 1);
    setenv("no_proxy", "localhost,127.0.0.1", 1);
    t_proxy_round(&sv, "127.0.0.1", sv.port, T_PATH, "http_proxy", 60,
                  "POST /push/71 HTTP/1.1\r\n");
    unsetenv("no_proxy");
    t_server_stop(&sv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keepalive_reuse),
        cmocka_unit_test(test_peer_closes),
        cmocka_unit_test(test_handle_reuse),
        cmocka_unit_test(test_proxy_env),
    };
    hr_config *probe = itest_config(); /* exits 77 without a stack */

    hr_config_free(probe);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
