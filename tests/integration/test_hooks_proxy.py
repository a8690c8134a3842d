#!/usr/bin/env python3
"""test_hooks_proxy: herald-hooks delivers through the proxy its environment
names (hr_proxy: read once when it starts, by libcurl's rules), on the real
stack (Kafka, MySQL), no dispatcher or worker.  One event on a topic of the
test's own goes to three hooks; herald-hooks runs with http_proxy and
https_proxy naming two recording proxies and no_proxy naming 127.0.0.1
(every other proxy variable set empty, which counts as unset):

  - https://herald-proxy-test.invalid:8443/b reaches https_proxy's as a
    CONNECT (the host does not resolve, so a request that went direct would
    reach nothing; the proxy refuses the tunnel, so the hook never
    succeeds, and that is all this one asks);
  - http://127.0.0.2:9/a (plain http is for loopback hosts only, hr_hooks)
    reaches http_proxy's as an absolute-form POST (direct, it would be
    refused: nothing listens there);
  - http://127.0.0.1:PORT/c is in no_proxy: it goes to the receiver
    direct, in origin form, and neither proxy sees anything else.

usage: test_hooks_proxy.py HERALD_HOOKS HERALDCTL
(exit 77 without HERALD_TEST_CONFIG or kcat)"""
import http.server
import json
import os
import random
import sys
import threading

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from badinput_env import Env, check, finish, free_port, wait_until  # noqa

HOST = "herald-proxy-test.invalid"
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
              "ALL_PROXY", "no_proxy", "NO_PROXY")


class Recorder:
    """An HTTP/1.1 server on loopback that records every request line
    (absolute-form POSTs and CONNECTs when it plays the proxy, origin-form
    POSTs when it is the receiver), answers a POST 204 and refuses a
    CONNECT (403)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.lines = []
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self, status):
                with rec.lock:
                    rec.lines.append(self.requestline)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.answer(204)

            def do_CONNECT(self):
                self.close_connection = True
                self.answer(403)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def seen(self):
        with self.lock:
            return list(self.lines)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    hooks_bin, ctl = sys.argv[1:]
    env = Env("hooks_proxy")
    proxy, tunnel, receiver = Recorder(), Recorder(), Recorder()
    try:
        hooks_port = free_port()
        cfg = env.hooks_config(hooks_port, "batch_max: 10, batch_ms: 50, retry_backoff_ms: 20, "
                               "retry_max_backoff_ms: 200, retry_for_ms: 600000, reload_ms: 200")
        if not env.create_topic():  # prints why (kcat missing)
            return 77
        task = 900_000_000 + random.randrange(1 << 20)
        uid = 9_000_000_000 + random.randrange(1 << 30)
        ev = {"id": "%d-%d-sent" % (task, uid), "kind": "outcome", "type": "sent", "task": task,
              "uid": uid}
        env.kcat_produce([json.dumps(ev).encode()], key=str(uid))
        for url in ("http://127.0.0.2:9/a", "https://%s:8443/b" % HOST,
                    "http://127.0.0.1:%d/c" % receiver.port):
            if env.hook_add(ctl, cfg, url) is None:
                return finish()
        penv = {k: "" for k in PROXY_VARS}
        penv.update(http_proxy="http://127.0.0.1:%d" % proxy.port,
                    https_proxy="http://127.0.0.1:%d" % tunnel.port, no_proxy="localhost,127.0.0.1")
        hk = env.start([hooks_bin, "-c", cfg], "hooks.log", env=penv)
        check(env.wait_ready(hooks_port), "herald-hooks serves its probes")
        want = {proxy: "POST http://127.0.0.2:9/a HTTP/1.1",
                tunnel: "CONNECT %s:8443 HTTP/1.1" % HOST, receiver: "POST /c HTTP/1.1"}

        def arrived():
            return all(line in rec.seen() for rec, line in want.items())

        def seen():
            return "http_proxy's saw %s, https_proxy's %s, the receiver %s" % (
                sorted(set(proxy.seen())), sorted(set(tunnel.seen())), receiver.seen())
        check(wait_until(arrived, 60, 0.1),
              "the http hook through http_proxy, the https hook tunnelled through "
              "https_proxy, the no_proxy hook direct (%s)" % seen())
        check(all(set(rec.seen()) == {line} for rec, line in want.items()),
              "each saw its own hook's requests and nothing else (%s)" % seen())
        check(env.stop(hk) == 0, "herald-hooks stops cleanly")
    finally:
        for rec in (proxy, tunnel, receiver):
            rec.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
