#!/usr/bin/env python3
"""Integration test of bench/herald-sink (needs no stack).

Usage: test_sink.py PATH/TO/herald-sink

Each case starts its own sink on a free loopback port (--listen 127.0.0.1:0,
the port is read from the "sink listening on" line) with --record to a temp
file, talks HTTP to it, stops it with SIGTERM and checks the exit code and
the record file.  Every wait has a timeout; the whole run takes a few
seconds.
"""
import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

SINK = None
TIMEOUT = 5.0


class Sink:
    def __init__(self, *args):
        fd, self.record = tempfile.mkstemp(prefix="herald-sink-", suffix=".rec")
        os.close(fd)
        self.proc = subprocess.Popen(
            [SINK, "--listen", "127.0.0.1:0", "--record", self.record, *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        line = b""
        deadline = time.monotonic() + TIMEOUT
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stderr], [], [], left)[0]:
                self.proc.kill()
                raise AssertionError("sink did not report its address")
            ch = os.read(self.proc.stderr.fileno(), 1)
            if not ch:
                raise AssertionError("sink exited: %r" % line)
            line += ch
        text = line.decode().strip()
        assert text.startswith("sink listening on 127.0.0.1:"), text
        self.port = int(text.rsplit(":", 1)[1])

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)

    def raw(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT)

    def stop(self):
        """SIGTERM; returns the record file's lines as (uid, status, ms)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        finally:
            self.kill_if_running()
        self.proc.stderr.close()
        assert rc == 0, "sink exit code %d" % rc
        with open(self.record) as f:
            lines = [ln.split() for ln in f.read().splitlines()]
        os.unlink(self.record)
        for ln in lines:
            assert len(ln) == 3, ln
        return [(u, int(s), int(ms)) for u, s, ms in lines]

    def kill_if_running(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT)


def push(conn, uid, path="/push"):
    body = json.dumps({"uid": uid, "title": "hi", "body": "x"})
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, r.getheaders(), r.read()


def push_all(sink, uids, nconn=4):
    """Pushes every uid round-robin over NCONN keep-alive connections."""
    conns = [sink.conn() for _ in range(nconn)]
    out = {}
    for i, uid in enumerate(uids):
        status, _, _ = push(conns[i % nconn], uid)
        out[uid] = status
    for c in conns:
        c.close()
    return out


def read_responses(sock, count):
    """Reads COUNT responses with Content-Length bodies; (status, headers, body)."""
    buf = b""
    out = []
    deadline = time.monotonic() + TIMEOUT
    while len(out) < count:
        while b"\r\n\r\n" in buf and len(out) < count:
            head, rest = buf.split(b"\r\n\r\n", 1)
            lines = head.decode().split("\r\n")
            hdrs = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
            n = int(hdrs.get("content-length", "0"))
            if len(rest) < n:
                break
            out.append((int(lines[0].split()[1]), hdrs, rest[:n]))
            buf = rest[n:]
        if len(out) == count:
            break
        assert time.monotonic() < deadline, "timed out reading responses"
        data = sock.recv(65536)
        assert data, "connection closed after %d responses" % len(out)
        buf += data
    return out


def test_keepalive_record_stats():
    s = Sink()
    try:
        t0 = int(time.time() * 1000)
        uids = ["u%d" % i for i in range(1000)]
        got = push_all(s, uids)
        assert all(v == 200 for v in got.values())
        c = s.conn()
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        assert r.status == 200
        c.request("GET", "/stats")
        r = c.getresponse()
        stats = json.loads(r.read())
        assert stats["requests"] == 1000, stats
        assert stats["by_status"] == {"200": 1000}, stats
        # A number uid and a query-string uid are recorded too.
        status, _, _ = push(c, 12345)
        assert status == 200
        c.request("GET", "/p?x=1&uid=q7")
        r = c.getresponse()
        r.read()
        assert r.status == 200
        c.request("DELETE", "/x")
        r = c.getresponse()
        r.read()
        assert r.status == 405
        c.close()
        t1 = int(time.time() * 1000)
    finally:
        lines = s.stop()
    assert len(lines) == 1002, len(lines)
    assert sorted(u for u, _, _ in lines[:1000]) == sorted(uids)
    assert all(st == 200 for _, st, _ in lines)
    assert all(t0 <= ms <= t1 for _, _, ms in lines)
    assert [u for u, _, _ in lines[1000:]] == ["12345", "q7"]


def test_fail_first():
    uids = ["ff-%d" % i for i in range(1000)]
    s = Sink("--fail-first", "10", "--seed", "7")
    try:
        first = push_all(s, uids)
        failed = sorted(u for u, st in first.items() if st == 500)
        assert all(st in (200, 500) for st in first.values())
        assert 50 <= len(failed) <= 150, len(failed)
        second = push_all(s, failed)
        assert all(st == 200 for st in second.values()), second
    finally:
        lines = s.stop()
    assert len(lines) == 1000 + len(failed)
    assert sum(1 for _, st, _ in lines if st == 500) == len(failed)
    # The same seed picks the same uids; another seed picks others.
    s = Sink("--fail-first", "10", "--seed", "7")
    try:
        again = sorted(u for u, st in push_all(s, uids).items() if st == 500)
    finally:
        s.stop()
    assert again == failed
    s = Sink("--fail-first", "10", "--seed", "8")
    try:
        other = sorted(u for u, st in push_all(s, uids).items() if st == 500)
    finally:
        s.stop()
    assert other != failed


def test_fail_permanent():
    uids = ["fp-%d" % i for i in range(1000)]
    s = Sink("--fail-permanent", "5")
    try:
        first = push_all(s, uids)
        bad = sorted(u for u, st in first.items() if st == 400)
        assert 20 <= len(bad) <= 80, len(bad)
        c = s.conn()
        for u in bad:
            status, _, body = push(c, u)
            assert status == 400
            assert json.loads(body)["error"] == "invalid_recipient"
        c.close()
        second = push_all(s, uids)
        assert sorted(u for u, st in second.items() if st == 400) == bad
    finally:
        s.stop()


def test_batch():
    """A JSON array is a batch: one result per uid, in order, each decided
    (and recorded) on its own; the same uids alone get the same answers."""
    uids = ["b-%d" % i for i in range(200)]
    s = Sink("--fail-permanent", "10", "--seed", "3")
    try:
        c = s.conn()
        body = json.dumps([{"uid": u, "title": "t"} for u in uids])
        c.request("POST", "/push", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200
        results = json.loads(r.read())["results"]
        assert len(results) == len(uids)
        alone = push_all(s, uids)
        for u, res in zip(uids, results):
            if alone[u] == 400:
                assert res == {"status": "error", "error": "invalid_recipient",
                               "retry": False}, res
            else:
                assert res == {"status": "ok"}, res
        assert any(st == 400 for st in alone.values())
        c.close()
    finally:
        lines = s.stop()
    assert [u for u, _, _ in lines[:len(uids)]] == uids
    assert len(lines) == 2 * len(uids)


def test_throttle():
    s = Sink("--throttle-ms", "500")
    try:
        c = s.conn()
        t0 = time.monotonic()
        status, hdrs, _ = push(c, "t1")
        assert status == 429
        assert dict((k.lower(), v) for k, v in hdrs)["retry-after"] == "1"
        status, _, _ = push(c, "t2")
        if time.monotonic() - t0 < 0.45:
            assert status == 429
        time.sleep(max(0.0, 0.6 - (time.monotonic() - t0)))
        status, _, _ = push(c, "t1")
        assert status == 200
        c.close()
    finally:
        lines = s.stop()
    assert lines[0][:2] == ("t1", 429)
    assert lines[-1][:2] == ("t1", 200)


def test_pipelined():
    s = Sink()
    try:
        sock = s.raw()
        req = b""
        for uid in ("p1", "p2"):
            body = json.dumps({"uid": uid}).encode()
            req += (b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
        sock.sendall(req)
        rs = read_responses(sock, 2)
        assert [r[0] for r in rs] == [200, 200]
        # A request split over many writes is still one request.
        body = b'{"uid":"p3"}'
        msg = b"PUT /b HTTP/1.1\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (
            len(body), body)
        for i in range(len(msg)):
            sock.send(msg[i:i + 1])
        rs = read_responses(sock, 1)
        assert rs[0][0] == 200
        assert rs[0][1].get("connection") == "close"
        assert sock.recv(10) == b""  # closed after Connection: close
        sock.close()
    finally:
        lines = s.stop()
    assert [u for u, _, _ in lines] == ["p1", "p2", "p3"]


def test_rejects():
    s = Sink()
    try:
        # Body too large: 413 even though the client sends the whole body.
        sock = s.raw()
        body = b"x" * 70000
        sock.sendall(b"POST /a HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        assert read_responses(sock, 1)[0][0] == 413
        sock.close()
        # Headers too large.
        sock = s.raw()
        try:
            sock.sendall(b"POST /a HTTP/1.1\r\nX-Big: " + b"y" * 70000 + b"\r\n\r\n")
        except OSError:
            pass  # the sink may stop reading once it has answered
        assert read_responses(sock, 1)[0][0] == 413
        sock.close()
        # Chunked bodies are not supported: 411.
        sock = s.raw()
        sock.sendall(b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        assert read_responses(sock, 1)[0][0] == 411
        sock.close()
        # Garbage: 400.
        sock = s.raw()
        sock.sendall(b"NONSENSE\r\n\r\n")
        assert read_responses(sock, 1)[0][0] == 400
        sock.close()
        # The sink still serves.
        c = s.conn()
        assert push(c, "after")[0] == 200
        c.close()
    finally:
        lines = s.stop()
    assert [u for u, _, _ in lines] == ["after"]


def test_latency():
    s = Sink("--latency-ms", "300")
    try:
        a, b = s.raw(), s.raw()
        req = b'POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n{"uid":"L"}'
        t0 = time.monotonic()
        a.sendall(req + req)
        b.sendall(req)
        read_responses(a, 2)
        read_responses(b, 1)
        took = time.monotonic() - t0
        # Both connections and both pipelined requests wait in parallel.
        assert 0.29 <= took < 0.6, took  # one after another would take 0.6 s or more
        a.close()
        b.close()
    finally:
        lines = s.stop()
    assert len(lines) == 3


def test_sigterm_flushes_promptly():
    s = Sink("--threads", "2")
    try:
        push_all(s, ["z%d" % i for i in range(50)], nconn=2)
    finally:
        t0 = time.monotonic()
        lines = s.stop()  # right after the pushes: less than one flush period
        took = time.monotonic() - t0
    assert len(lines) == 50
    assert took < 1.0, took


def main():
    global SINK
    if len(sys.argv) != 2:
        print("usage: test_sink.py PATH/TO/herald-sink", file=sys.stderr)
        return 2
    SINK = sys.argv[1]
    tests = [v for k, v in sorted(globals().items()) if k.startswith("test_")]
    passed = failed = 0
    for t in tests:
        t0 = time.monotonic()
        try:
            t()
        except Exception as e:  # report every case, fail the run at the end
            failed += 1
            print("FAIL %s: %s: %s" % (t.__name__, type(e).__name__, e))
        else:
            passed += 1
            print("ok   %s (%.2fs)" % (t.__name__, time.monotonic() - t0))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
