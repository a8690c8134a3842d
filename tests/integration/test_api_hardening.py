#!/usr/bin/env python3
"""The dispatcher's HTTP layer as an attacker reads it (issue 31, findings
1, 2, 6 and 7), against the real herald-dispatcher:

1. /healthz, /readyz and /metrics are on dispatcher.probe_listen only (404
   on the API's listener); a body is refused on the headers wherever a
   route takes none (the probes, GET, DELETE, pause), 413 before a byte of
   it is read; 100 connections announcing 1 MiB to the open /console/,
   sending all of it but a byte and stalling, grow the dispatcher's RSS by
   under 16 MiB (the review saw 4 -> 111 MB).
2. 2,000 idle connections on the API's listener (from 40 loopback
   addresses, under the per-address limit of 64) while /healthz on the
   probe listener answers within 100 ms every time; they are all held,
   then all closed by the header deadline although each keeps trickling a
   byte; of 65 connections from one address one is closed at once.
6. A POST whose Content-Type is not application/json (or absent, with or
   without a body) is 415 and changes nothing; without tokens (insecure
   mode) a request whose Host is not loopback is 403 (DNS rebinding).
7. HEAD of the pull with ?ack=1 is 405 and acknowledges nothing; the GET
   with ?ack=1 does (so the check would see it).
8. 40,000 uids in one subscriber request (max_ids 50,000) are stored, in
   MySQL and Redis; before, the INSERT of 80,000 placeholders passed
   MariaDB's 65,535 and the request answered 503 "try again" for ever.
9. A page of GET /v1/tasks?limit=1000 over twelve tasks of 1 MB payloads
   holds no more than its 4 MiB budget (and at least one task), its next
   continues, and paging serves every task once; before, the page built all
   of them (12 MB here, hundreds of MB with more).  Insecure mode warns
   at startup and counts herald_insecure_settings{setting="api_insecure"}.

usage: test_api_hardening.py HERALD_DISPATCHER HERALDCTL

Isolation: its own Redis prefix, task topic and ports.  Exits 77 when
HERALD_TEST_CONFIG is unset.  Every wait is bounded."""
import json
import os
import resource
import select
import socket
import sys
import time
from datetime import datetime, timedelta, timezone
from http.client import HTTPConnection

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish, free_port, stop_popen, wait_until  # noqa: E402
from test_api import (TOKEN, cleanup, create, http, key, make_env, serve, sql,  # noqa: E402
                      write_config)

IDLE = 2000
PER_ADDR = 50           # idle connections per source address, under the limit
PER_IP = 64             # dispatcher.api.max_connections_per_ip (the default)
HEADER_TIMEOUT_MS = 6000


def raw(port, head, src=None, timeout=10):
    """Sends HEAD (bytes) on a new connection and returns (status, body)
    of the answer; (0, "") when the server closes without one."""
    s = socket.socket()
    s.settimeout(timeout)
    try:
        if src:
            s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(head)
        data = b""
        while True:
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                length = [int(line.split(b":")[1]) for line in data[:end].split(b"\r\n")
                          if line.lower().startswith(b"content-length:")]
                if length and len(data) >= end + 4 + length[0]:
                    break
            piece = s.recv(65536)
            if not piece:
                break
            data += piece
    except OSError:
        return 0, ""
    finally:
        s.close()
    text = data.decode(errors="replace")
    status = int(text.split(" ", 2)[1]) if text.startswith("HTTP/1.1 ") else 0
    return status, text.partition("\r\n\r\n")[2]


def request(port, method, path, body=None, headers=None):
    """(status, body text, headers) of one request through http.client,
    which sends exactly the headers given (and Host, unless given)."""
    c = HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace"), dict(r.getheaders())
    except OSError as e:
        return 0, str(e), {}
    finally:
        c.close()


def test_listeners(env):
    for path in ("/healthz", "/readyz", "/metrics"):
        status, _ = http(env, "GET", path, token=None, port=env.probe_port)
        check(status == 200, "GET %s on the probe listener -> 200 (%s)" % (path, status))
        status, _ = http(env, "GET", path, port=env.port)
        check(status == 404, "GET %s on the API's listener -> 404 (%s)" % (path, status))
    status, _, _ = request(env.probe_port, "HEAD", "/healthz")
    check(status == 200, "HEAD /healthz on the probe listener -> 200 (%s)" % status)


def test_bodies(env, task):
    auth = "Authorization: Bearer %s\r\n" % TOKEN
    json_ct = "Content-Type: application/json\r\n"
    for port, line, extra in ((env.probe_port, "GET /healthz", ""),
                              (env.probe_port, "GET /metrics", ""),
                              (env.port, "GET /v1/tasks", auth),
                              (env.port, "POST /v1/tasks/%d/pause" % task, auth),
                              (env.port, "DELETE /v1/tasks/%d/subscribers/1" % task, auth)):
        head = "%s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%sContent-Length: 1048576\r\n\r\n" % (
            line, extra, json_ct)
        status, body = raw(port, head.encode())
        check(status == 413 and '"body_too_large"' in body,
              "%s announcing 1 MiB, none sent -> 413 on the headers (%s %s)"
              % (line, status, body[:120]))
    head = ("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            "\r\n").encode()
    status, body = raw(env.probe_port, head)
    check(status == 413, "GET /healthz with a chunked body -> 413 (%s)" % status)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_stalled_uploads(env, proc):
    head = (b"GET /console/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1048576\r\n\r\n")
    body = b"x" * ((1 << 20) - 1)
    before, socks = rss_kib(proc.pid), []
    try:
        for i in range(100):
            s = socket.socket()
            s.bind(("127.0.0.%d" % (200 + i % 2), 0))  # under the per-address limit
            s.connect(("127.0.0.1", env.port))
            s.setblocking(False)
            socks.append([s, head + body])
        end = time.monotonic() + 2
        while time.monotonic() < end:
            for item in socks:
                try:
                    if item[1]:
                        item[1] = item[1][item[0].send(item[1]):]
                except OSError:
                    item[1] = b""
            time.sleep(0.02)
        grown = rss_kib(proc.pid) - before
    finally:
        for item in socks:
            item[0].close()
    check(grown < 16 * 1024, "100 stalled 1 MiB uploads to /console/ grew the dispatcher by "
          "%d KiB (< 16 MiB)" % grown)


def control(env, task):
    return sql(env, "SELECT control FROM push_task WHERE id = %d" % task)[0][0]


def test_content_type(env, task):
    bearer = {"Authorization": "Bearer " + TOKEN}
    body = '{"name": "ct", "channel": "%s", "topic": "%s", "due_at": "2099-01-01T00:00:00Z"}' % (
        env.channel, env.topic)
    before = sql(env, "SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic)
    for ctype in ("text/plain", "application/x-www-form-urlencoded",
                  "multipart/form-data; boundary=x", None):
        headers = dict(bearer, **({"Content-Type": ctype} if ctype else {}))
        status, text, _ = request(env.port, "POST", "/v1/tasks", body, headers)
        check(status == 415 and "unsupported_media_type" in text,
              "POST /v1/tasks as %s -> 415 (%s)" % (ctype, status))
    check(sql(env, "SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic) == before,
          "... and no task made")
    # A bodiless POST is what a cross-site form or fetch() can send too.
    status, text, _ = request(env.port, "POST", "/v1/tasks/%d/pause" % task, None, bearer)
    check(status == 415 and control(env, task) == "run",
          "POST pause without Content-Type -> 415, the task not paused (%s %s)"
          % (status, control(env, task)))
    status, text, _ = request(env.port, "POST", "/v1/tasks/%d/pause" % task, None,
                              dict(bearer, **{"Content-Type": "application/json"}))
    check(status == 200 and control(env, task) == "pause",
          "POST pause saying application/json -> 200, paused (%s)" % status)
    status, _ = http(env, "POST", "/v1/tasks/%d/resume" % task)
    check(status == 200, "resumed")


def test_head(env, uid):
    now = datetime.now(timezone.utc).replace(microsecond=0)
    due = now + timedelta(hours=2)
    task = create(env, "head", due, now - timedelta(minutes=5))
    status, _ = http(env, "POST", "/v1/tasks/%d/subscribers" % task, {"uids": [uid]})
    check(status == 200, "subscribe %d" % uid)
    path = "/v1/users/%d/reminders?date=%s&ack=1" % (uid, due.strftime("%Y-%m-%d"))
    bearer = {"Authorization": "Bearer " + TOKEN}
    status, _, headers = request(env.port, "HEAD", path, None, bearer)
    check(status == 405 and headers.get("Allow") == "GET",
          "HEAD of the pull with ?ack=1 -> 405, Allow: GET (%s %s)" % (status, headers))
    check(env.r.cmd("SISMEMBER", key(env, task, "subs"), uid) == 1,
          "... and uid %d is not acknowledged" % uid)
    status, j = http(env, "GET", path)
    acked = [r.get("acked") for r in j.get("reminders", [])] if status == 200 else []
    check(acked == [True] and env.r.cmd("SISMEMBER", key(env, task, "subs"), uid) == 0,
          "the GET with ?ack=1 acknowledges it (%s %s)" % (status, acked))
    status, _, _ = request(env.port, "HEAD", "/v1/tasks", None, bearer)
    check(status == 405, "HEAD /v1/tasks -> 405 (%s)" % status)


def closed(socks):
    """The sockets of SOCKS that the server has closed (end of stream or reset)."""
    poller = select.poll()
    for s in socks:
        poller.register(s.fileno(), select.POLLIN | select.POLLRDHUP)
    by_fd = {s.fileno(): s for s in socks}
    gone = set()
    for fd, _ in poller.poll(0):
        try:
            if by_fd[fd].recv(4096, socket.MSG_DONTWAIT) == b"":
                gone.add(fd)
        except BlockingIOError:
            pass
        except OSError:
            gone.add(fd)
    return gone


def test_slow_clients(env):
    socks, t0 = [], time.monotonic()
    try:
        for i in range(IDLE):
            s = socket.socket()
            s.bind(("127.0.0.%d" % (2 + i // PER_ADDR), 0))
            s.connect(("127.0.0.1", env.port))
            s.sendall(b"GET /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            socks.append(s)
        answers = []
        for _ in range(20):
            start = time.monotonic()
            status, _, _ = request(env.probe_port, "GET", "/healthz")
            answers.append((status, round((time.monotonic() - start) * 1000, 1)))
            time.sleep(0.05)
        check(all(st == 200 and ms < 100 for st, ms in answers),
              "with %d idle connections on the API, /healthz on the probe listener answered "
              "200 within 100 ms 20 times (status, ms: %s)" % (IDLE, answers))
        held = time.monotonic() - t0
        gone = closed(socks)
        check(not gone or held > HEADER_TIMEOUT_MS / 1000 - 0.5,
              "all %d connections held (%d closed after %.1f s)" % (IDLE, len(gone), held))
        # Each keeps sending a byte of its head every 0.5 s: the deadline holds.
        gone, first = set(), None
        deadline = t0 + HEADER_TIMEOUT_MS / 1000 + 10
        while len(gone) < IDLE and time.monotonic() < deadline:
            for s in socks:
                if s.fileno() not in gone:
                    try:
                        s.send(b"X", socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
                    except OSError:
                        pass
            time.sleep(0.5)
            gone |= closed([s for s in socks if s.fileno() not in gone])
            first = first or (time.monotonic() - t0 if gone else None)
        check(len(gone) == IDLE and first is not None and first > HEADER_TIMEOUT_MS / 1000 - 0.5,
              "the header deadline (%d ms) closed all %d trickling connections, the first after "
              "%.1f s, all within %.0f s (%d closed)"
              % (HEADER_TIMEOUT_MS, IDLE, first or 0, deadline - t0, len(gone)))
    finally:
        for s in socks:
            s.close()


def test_per_ip(env):
    socks, t0 = [], time.monotonic()
    try:
        for _ in range(PER_IP + 1):
            s = socket.socket()
            s.bind(("127.0.0.99", 0))
            s.connect(("127.0.0.1", env.port))
            socks.append(s)
        # Which one is refused is not the connect order: libmicrohttpd's pool
        # threads accept side by side and the one that counts last is refused, so
        # on a loaded machine that may be the 64th (CI on 2026-12-01).  What
        # holds is the count: one of the 65 closed at once, 64 kept, checked
        # before the header deadline closes the idle rest.
        wait_until(lambda: closed(socks), 5, 0.1)
        time.sleep(0.3)
        gone, took = closed(socks), time.monotonic() - t0
        check(len(gone) == 1 and took < HEADER_TIMEOUT_MS / 1000.0,
              "of %d connections from one address one is closed at once and %d are kept (%d "
              "closed after %.1f s)" % (PER_IP + 1, PER_IP, len(gone), took))
        status, _ = raw(env.port, b"GET /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n", "127.0.0.98")
        check(status == 200, "another address is served meanwhile (%s)" % status)
    finally:
        for s in socks:
            s.close()


def test_insecure_host(env, base, tag):
    """Without tokens: served only when Host names a loopback host."""
    saved = env.port, env.probe_port
    env.port, env.probe_port = port, probes = free_port(), free_port()
    path = write_config(env, base, "{insecure: true}")
    try:
        proc, log = serve(env, path, "test_api_hardening_insecure_%s.log" % tag)
    finally:
        env.port, env.probe_port = saved
    try:
        for host, want in (("127.0.0.1:%d" % port, 200), ("localhost", 200),
                           ("[::1]:%d" % port, 200), ("evil.example", 403),
                           ("evil.example:%d" % port, 403), ("127.0.0.1.evil.example", 403)):
            status, text, _ = request(port, "GET", "/v1/tasks?limit=1", None, {"Host": host})
            check(status == want, "insecure mode, Host: %s -> %d (%s %s)"
                  % (host, want, status, text[:100]))
        status, _, _ = request(port, "POST", "/v1/tasks/1/pause", None,
                               {"Host": "evil.example", "Content-Type": "application/json"})
        check(status == 403, "a rebinding page's POST -> 403 (%s)" % status)
        status, text, _ = request(probes, "GET", "/metrics")
        check('herald_insecure_settings{setting="api_insecure"} 1' in text,
              "insecure mode is counted in herald_insecure_settings")
        with open(log.name) as f:
            check("event=insecure_setting setting=api_insecure" in f.read(),
                  "insecure mode: a startup warning")
    finally:
        stop_popen(proc, 20)
        log.close()
        os.unlink(log.name)
        os.unlink(path)


def test_many_uids(env):
    t = create(env, "many-uids", datetime.now(timezone.utc) + timedelta(days=2))
    uids = list(range(1, 40001))
    status, j = http(env, "POST", "/v1/tasks/%d/subscribers" % t, {"uids": uids})
    check(status == 200 and j.get("added") == 40000,
          "40,000 uids in one request -> 200, all added (%s %s)" % (status, str(j)[:200]))
    check(sql(env, "SELECT COUNT(*) FROM push_subscription WHERE task_id=%d" % t) == [["40000"]]
          and env.r.cmd("SCARD", key(env, t, "subs")) == 40000,
          "MySQL and Redis hold the 40,000")
    status, j = http(env, "POST", "/v1/tasks/%d/subscribers" % t, {"uids": uids})
    check(status == 200 and j.get("added") == 0, "sent again: nothing added (%s)" % status)


def test_list_budget(env, tag):
    marker = "budget%s" % tag
    blob = "x" * 1000000
    ids = [create(env, "%s-%d" % (marker, i), datetime.now(timezone.utc) + timedelta(days=2),
                  payload={"blob": blob}) for i in range(12)]
    c = HTTPConnection("127.0.0.1", env.port, timeout=30)
    c.request("GET", "/v1/tasks?q=%s&limit=1000" % marker,
              headers={"Authorization": "Bearer " + TOKEN})
    r = c.getresponse()
    body = r.read()
    c.close()
    page = json.loads(body) if r.status == 200 else {}
    n = len(page.get("tasks", []))
    check(r.status == 200 and 1 <= n <= 5 and page.get("next") is not None
          and len(body) < 8 * 1024 * 1024,
          "limit=1000 over 12 tasks of 1 MB: a page of %d task(s), %d bytes, next %s"
          % (n, len(body), page.get("next")))
    seen, before, pages = [], None, 0
    while pages < 20:
        q = "/v1/tasks?q=%s&limit=1000" % marker + ("&before=%d" % before if before else "")
        status, j = http(env, "GET", q)
        if status != 200:
            break
        pages += 1
        seen += [t["id"] for t in j["tasks"]]
        before = j["next"]
        if before is None:
            break
    check(seen == sorted(ids, reverse=True) and pages >= 3,
          "paging serves every task once, newest first, in %d pages" % pages)


def main():
    env, base, tag = make_env("hard", __doc__)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 3 * IDLE
    if soft < want and (hard == resource.RLIM_INFINITY or hard >= want):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))  # the dispatcher inherits it
    elif soft < want:
        print("RLIMIT_NOFILE hard limit %d is below %d: skipped" % (hard, want))
        return 77
    env.cfg_path = write_config(
        env, base, "{tokens: [%s], threads: 4, max_connections: 4096, "
        "max_connections_per_ip: %d, header_timeout_ms: %d, max_ids: 50000, "
        "max_body_bytes: 2097152}" % (TOKEN, PER_IP, HEADER_TIMEOUT_MS))
    proc, log = serve(env, env.cfg_path, "test_api_hardening_%s.log" % tag)
    status = None
    try:
        now = datetime.now(timezone.utc).replace(microsecond=0)
        task = create(env, "hard", now + timedelta(days=2))
        test_listeners(env)
        test_bodies(env, task)
        test_stalled_uploads(env, proc)
        test_content_type(env, task)
        test_head(env, 4242)
        test_slow_clients(env)
        test_per_ip(env)
        test_many_uids(env)
        test_list_budget(env, tag)
        check(proc.poll() is None, "the dispatcher is still running")
        test_insecure_host(env, base, tag)
    finally:
        status = stop_popen(proc, 20)
        log.close()
        cleanup(env)
    check(status == 0, "dispatcher exits 0 on SIGTERM")
    os.unlink(log.name)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
