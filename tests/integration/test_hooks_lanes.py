#!/usr/bin/env python3
"""test_hooks_lanes: herald-hooks with several deliveries in flight per
endpoint, on the real stack (Kafka, MySQL), no dispatcher or worker: a
topic of the test's own holds 4 events for each of 300 uids (sent,
delivered, opened, clicked, in that order, keyed by uid), read by
herald-hooks with events.hooks.inflight_max 4, batch_max 10 and queue_max
100 (the least), delivering to one receiver that takes 30 ms a request and
answers 503 to every fifth:

  - the receiver has several requests in flight at once (at most
    inflight_max), each signed (Standard Webhooks, the endpoint's secret);
  - every event arrives exactly once among the accepted deliveries, and
    each uid's four events in their published order, across the retries
    of the failed batches;
  - the topic holds 12 times queue_max: the reading waits for the
    endpoint (its queue never past queue_max), so nothing is
    dead-lettered (herald_hook_events_total{result="dead_lettered"} 0, no
    push_hook_dead row).

usage: test_hooks_lanes.py HERALD_HOOKS HERALDCTL
(exit 77 without HERALD_TEST_CONFIG or kcat)"""
import base64
import hashlib
import hmac
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from badinput_env import Env, check, finish, free_port, metric, wait_until  # noqa
from herald_test.receiver import PostServer  # noqa

TYPES = ("sent", "delivered", "opened", "clicked")
UIDS = 300
LANES = 4
QUEUE_MAX = 100
DELAY_S = 0.03
FAIL_EVERY = 5


class Receiver:
    """One webhook receiver (herald_test.receiver.PostServer): checks each
    delivery's signature, fails every FAIL_EVERY-th request, records the
    accepted events in arrival order and the most requests it had in flight
    at once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.secret = ""
        self.requests = 0
        self.failed = 0
        self.bad_signatures = 0
        self.inflight = 0
        self.most_inflight = 0
        self.events = []  # (uid, type, id), accepted deliveries only
        self.server = PostServer(self.post)

    def url(self):
        return "http://127.0.0.1:%d/hook" % self.server.port

    def post(self, req, body):
        wid, ts = req.headers.get("webhook-id", ""), req.headers.get("webhook-timestamp", "")
        key = base64.b64decode(self.secret[len("whsec_"):])
        want = "v1," + base64.b64encode(hmac.new(key, b"%s.%s.%s" % (
            wid.encode(), ts.encode(), body), hashlib.sha256).digest()).decode()
        with self.lock:
            self.inflight += 1
            self.most_inflight = max(self.most_inflight, self.inflight)
            self.requests += 1
            n = self.requests
        # Outside the lock: the requests of other lanes overlap this one.
        time.sleep(DELAY_S)
        with self.lock:
            self.inflight -= 1
            if want not in req.headers.get("webhook-signature", "").split():
                self.bad_signatures += 1
                status = 401
            elif n % FAIL_EVERY == 0:
                self.failed += 1
                status = 503
            else:
                for ev in json.loads(body)["data"]["events"]:
                    self.events.append((ev["uid"], ev["type"], ev["id"]))
                status = 204
        req.send_response(status)
        req.send_header("Content-Length", "0")
        req.end_headers()


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    hooks_bin, ctl = sys.argv[1:]
    if shutil.which("kcat") is None:
        print("skipped: kcat is not installed")
        return 77
    env = Env("hooks_lanes")
    base = 9_000_000_000 + random.randrange(1 << 30)
    task = 900_000_000 + random.randrange(1 << 20)
    uids = list(range(base, base + UIDS))
    receiver = Receiver()
    try:
        hooks_port = free_port()
        cfg = env.hooks_config(hooks_port, (
            "batch_max: 10, batch_ms: 50, inflight_max: %d, queue_max: %d, "
            "retry_backoff_ms: 20, retry_max_backoff_ms: 100, retry_for_ms: 600000, "
            "reload_ms: 200" % (LANES, QUEUE_MAX)))
        if not env.create_topic():
            return 77
        # Every event before herald-hooks starts: it finds twelve times
        # queue_max waiting.
        lines = []
        for t in TYPES:
            for u in uids:
                ev = {"id": "%d-%d-%s" % (task, u, t), "kind": "outcome", "type": t,
                      "task": task, "uid": u}
                lines.append("%d\t%s" % (u, json.dumps(ev)))
        out = subprocess.run(["kcat", "-P", "-b", env.brokers, "-t", env.kafka_topic, "-K",
                              "\t"], input="\n".join(lines) + "\n", capture_output=True,
                             text=True, timeout=60)
        check(out.returncode == 0, "%d events produced (%s)" % (len(lines), out.stderr.strip()))
        hook, receiver.secret = env.hook_add(ctl, cfg, receiver.url())
        hk = env.start([hooks_bin, "-c", cfg], "hooks.log")
        check(env.wait_ready(hooks_port), "herald-hooks serves its probes")

        def accepted():
            with receiver.lock:
                return len(receiver.events)
        most_queued = [0]

        def done():
            q = metric(env.metrics(hooks_port), "herald_hook_queue_depth") or 0
            most_queued[0] = max(most_queued[0], q)
            return accepted() >= len(lines)
        check(wait_until(done, 120, 0.1),
              "every event delivered (%d of %d)" % (accepted(), len(lines)))
        time.sleep(0.5)  # a repeat, if any, would land by now
        with receiver.lock:
            events = list(receiver.events)
        ids = [e[2] for e in events]
        check(len(ids) == len(lines) and len(set(ids)) == len(lines),
              "each event accepted exactly once (%d, %d distinct)" % (len(ids), len(set(ids))))
        per = {}
        for u, t, _ in events:
            per.setdefault(u, []).append(t)
        wrong = [u for u in uids if per.get(u) != list(TYPES)]
        check(not wrong, "each uid's events in their published order (%d out of order, e.g. %s)"
              % (len(wrong), [(u, per.get(u)) for u in wrong[:3]]))
        check(1 < receiver.most_inflight <= LANES,
              "several deliveries in flight at once, at most inflight_max (%d)"
              % receiver.most_inflight)
        check(receiver.failed > 0 and receiver.bad_signatures == 0,
              "failed deliveries were retried (%d), every signature verified" % receiver.failed)
        check(most_queued[0] <= QUEUE_MAX,
              "the queue stayed within queue_max while the topic held more (%d)" % most_queued[0])
        text = env.metrics(hooks_port)
        check(metric(text, "herald_hook_events_total", '{result="dead_lettered"}') == 0 and
              metric(text, "herald_hook_events_total", '{result="delivered"}') == len(lines),
              "nothing dead-lettered, every event counted delivered")
        dead = env.sql("SELECT COUNT(*) FROM push_hook_dead WHERE hook_id = %d" % hook)
        check(int(dead[0][0]) == 0, "no push_hook_dead row (%s)" % dead[0][0])
        check(env.stop(hk) == 0, "herald-hooks stops cleanly")
    finally:
        receiver.server.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
