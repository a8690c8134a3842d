#!/usr/bin/env python3
"""The worker's loop never waits for Redis (issue 19): a worker whose Redis
connection goes through a loopback proxy pushes a campaign to a receiver
that answers each request after RESPONSE_S; mid-campaign the proxy holds
every reply from Redis for STALL_S (the server runs the commands, the worker
hears nothing, as with a Redis busy in a long command or a slow network).

  - the worker keeps starting requests during the stall: in the stall's
    window (after its first DRAIN_S) the receiver gets at least
    MIN_RATE_SHARE of the requests per second it got before the stall.
    A worker whose loop waits for its acknowledgements, lease renewals or
    control reads (the code before wk_redis) starts none then: the loop
    blocks in the first Redis call after the stall began, and no curl
    completion is served until the replies come;
  - the answers come after the stall and nothing is lost: the campaign ends
    done, every recipient sent once (the delivery log has one row per uid,
    the receiver got every uid), no chunk dropped, no lease lost.

The dispatcher talks to Redis directly; only the worker goes through the
proxy.

usage: test_redis_stall.py HERALD_DISPATCHER HERALD_WORKER   (exit 77
without HERALD_TEST_CONFIG)"""
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, PostServer, check, finish, wait_until  # noqa: E402
from test_retry_races import LoopbackProxy  # noqa: E402

N = 2400
CHUNK = 1200          # two chunks open at once, each lasting ~10 s at the rate below
CONCURRENCY = 6
RESPONSE_S = 0.05     # per request: ~120 requests/s per worker, steady
WARM = 300            # requests received before the stall starts
STALL_S = 2.0
DRAIN_S = 0.4         # the requests in flight when the stall began, and one ack batch
MIN_RATE_SHARE = 0.5


class StallProxy(LoopbackProxy):
    """Passes every byte; while `stalled` is set, what Redis answers is held
    (read from the server, not given to the client) and handed on in order
    once it is cleared."""

    def __init__(self, upstream_port):
        self.stalled = threading.Event()
        super().__init__(upstream_port)

    def _serve(self, cli, up):
        threading.Thread(target=self._c2s, args=(cli, up), daemon=True).start()
        threading.Thread(target=self._s2c, args=(cli, up), daemon=True).start()

    def _s2c(self, cli, up):
        try:
            while True:
                data = up.recv(65536)
                if not data:
                    break
                while self.stalled.is_set():
                    time.sleep(0.005)
                cli.sendall(data)
        except OSError:
            pass
        self.shut(up, cli)

    def stall(self, seconds):
        """Holds Redis's answers for SECONDS from now; returns (start, end)."""
        start = time.time()
        self.stalled.set()
        time.sleep(seconds)
        self.stalled.clear()
        return start, time.time()


class Receiver:
    """Answers every POST 200 after RESPONSE_S; records each request's
    arrival time and uid."""

    def __init__(self):
        self.times, self.uids = [], []
        self.lock = threading.Lock()
        self.http = PostServer(self._post)
        self.port = self.http.port

    def _post(self, req, body):
        with self.lock:
            self.times.append(time.time())
            try:
                self.uids.append(int(body.decode().partition("uid=")[2]))
            except ValueError:
                self.uids.append(-1)
        time.sleep(RESPONSE_S)
        req.send_response(200)
        req.send_header("Content-Length", "0")
        req.end_headers()

    def channels(self, concurrency):
        """A config's channels: "hook", posting to this receiver the body
        it reads the uid from."""
        return {"hook": {"url": "http://127.0.0.1:%d/push" % self.port,
                         "concurrency": concurrency, "body": "uid={{uid}}"}}

    def count(self):
        with self.lock:
            return len(self.times)

    def between(self, t0, t1):
        with self.lock:
            return sum(1 for t in self.times if t0 <= t < t1)

    def stop(self):
        self.http.stop()


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    env = Env("redis_stall")
    rx = Receiver()
    proxy = StallProxy(env.redis_port)
    try:
        channels = rx.channels(CONCURRENCY)
        dsp_cfg = env.config(channels)
        wk_cfg = env.config(channels, redis_port=proxy.port)
        dsp = env.start([sys.argv[1], "-c", dsp_cfg], "dispatcher.log")
        wk = env.start([sys.argv[2], "-c", wk_cfg], "worker.log")
        if not check(env.wait_ready(env.dsp_port) and env.wait_ready(env.wk_port),
                     "dispatcher and worker serve"):
            return finish()
        check(wait_until(lambda: "event=partitions_assigned" in env.log(wk), 60, 0.5),
              "the worker holds the partition")
        t = env.insert_with_subs("redis stall", "hook", range(1, N + 1), chunk_size=CHUNK)
        if not check(wait_until(lambda: rx.count() >= WARM, 60, 0.05),
                     "the campaign runs (%d requests)" % rx.count()):
            return finish()
        t_warm = time.time()
        time.sleep(1.0)
        before = rx.between(t_warm, time.time()) / (time.time() - t_warm)
        start, end = proxy.stall(STALL_S)
        during = rx.between(start + DRAIN_S, end) / (end - start - DRAIN_S)
        print("requests/s: %.0f before the stall, %.0f during it (after %.1f s)"
              % (before, during, DRAIN_S))
        check(rx.count() < N, "the stall came before the campaign's end (%d of %d)"
              % (rx.count(), N))
        check(during >= MIN_RATE_SHARE * before,
              "requests go on while Redis does not answer: %.0f/s during the stall, "
              "%.0f/s before" % (during, before))

        check(env.wait_state(t, "done", 90), "campaign done (%s)" % (env.task(t),))
        _, sent, failed, _ = env.task(t)
        check(int(sent) == N and int(failed) == 0, "every recipient sent (%s)" % sent)
        with rx.lock:
            uids = list(rx.uids)
        check(set(uids) == set(range(1, N + 1)),
              "the receiver got every uid (%d distinct of %d)" % (len(set(uids)), N))
        rows = env.deliveries(t)
        check(len(rows) == N and set(rows.values()) == {"sent"},
              "one delivery row per uid, all sent (%d)" % len(rows))
        log = env.log(wk)
        for event in ("chunk_dropped", "lease_lost", "chunks_stalled"):
            check("event=" + event not in log, "no %s in the worker's log" % event)
        check(env.stop(wk) == 0, "worker stops cleanly")
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        proxy.close()
        rx.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
