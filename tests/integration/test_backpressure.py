#!/usr/bin/env python3
"""Cluster-wide back-pressure: two workers push one campaign (a topic of 4
partitions, so both hold chunks) to a receiver that answers one request
429 with Retry-After as an HTTP-date 3 s ahead, everything else 200.

  - the worker that got the 429 publishes the slow-down (herald:slow:<channel>)
    and the other one takes part in it: no request reaches the receiver from
    shortly after the 429 (one poll and the requests in flight) until the
    Retry-After date, from either worker;
  - both workers log the slow-down (source=provider on one, source=cluster
    on the other), then recover: every recipient is sent.

usage: test_backpressure.py HERALD_DISPATCHER HERALD_WORKER   (exit 77
without HERALD_TEST_CONFIG)"""
import email.utils
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, PostServer, check, finish, free_port, wait_until  # noqa: E402

N = 400
PAUSE_S = 3
QUIET_FROM_S = 0.8   # a poll (250 ms), the requests in flight, scheduling
PARTITIONS = 4


class Receiver:
    """Answers the request number TRIGGER 429 with Retry-After = an
    HTTP-date PAUSE_S ahead; records when each request arrived."""

    def __init__(self, trigger):
        self.times = []
        self.t429 = None
        self.trigger = trigger
        self.lock = threading.Lock()
        # a burst of new connections must not overflow the accept queue: a
        # dropped SYN comes back a second later, and would look like a
        # request sent during the pause
        self.http = PostServer(self._post, queue=256)
        self.port = self.http.port

    def _post(self, req, body):
        now = time.time()
        with self.lock:
            self.times.append(now)
            slow = len(self.times) == self.trigger
            if slow:
                self.t429 = now
        if slow:
            req.send_response(429)
            req.send_header("Retry-After", email.utils.formatdate(now + PAUSE_S + 1, usegmt=True))
        else:
            req.send_response(200)
        req.send_header("Content-Length", "0")
        req.end_headers()

    def stop(self):
        self.http.stop()


def kafka_topic(env, partitions):
    stack_env = os.path.join(os.path.dirname(os.environ["HERALD_TEST_CONFIG"]), "env")
    # The broker's default replication factor: 3 on a three-broker stack.
    script = ". '%s' && kafka_topics --create --if-not-exists --topic %s --partitions %d" \
             % (stack_env, env.kafka_topic, partitions)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=90)
    return out.returncode == 0


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    env = Env("backpressure")
    rx = Receiver(trigger=60)
    try:
        channels = {"hook": {"url": "http://127.0.0.1:%d/push" % rx.port, "concurrency": 8,
                             "retry": "{max_attempts: 3, backoff_ms: 50, max_backoff_ms: 6000}"}}
        cfg = env.config(channels)
        if not check(kafka_topic(env, PARTITIONS), "topic with %d partitions" % PARTITIONS):
            return 1
        dsp = env.start([sys.argv[1], "-c", cfg], "dispatcher.log")
        ports = [free_port(), free_port()]
        wks = [env.start([sys.argv[2], "-c", cfg, "--listen", "127.0.0.1:%d" % p],
                         "worker%d.log" % i) for i, p in enumerate(ports)]
        check(env.wait_ready(env.dsp_port) and all(env.wait_ready(p) for p in ports),
              "dispatcher and 2 workers serve")
        check(wait_until(lambda: all("event=partitions_assigned" in env.log(w) for w in wks),
                         60, 0.5), "both workers hold partitions")
        t = env.insert_with_subs("backpressure", "hook", range(1, N + 1), chunk_size=10,
                                 rate_limit=80)
        check(env.wait_state(t, "done", 90), "campaign done (%s)" % (env.task(t),))
        state, sent, failed, _ = env.task(t)
        check(int(sent) == N and int(failed) == 0, "every recipient sent (%s)" % sent)

        check(rx.t429 is not None, "the receiver answered 429")
        quiet = [x - rx.t429 for x in rx.times if QUIET_FROM_S < x - rx.t429 < PAUSE_S - 0.2]
        check(not quiet, "no request from either worker during the slow-down (%d at +%s s; "
              "around: %s)" % (len(quiet), [round(q, 2) for q in quiet],
                               [round(x - rx.t429, 2) for x in rx.times
                                if -0.5 < x - rx.t429 < PAUSE_S + 0.5]))
        after = [x for x in rx.times if x - rx.t429 >= PAUSE_S - 0.2]
        check(len(after) > 0, "requests resumed after the Retry-After date (%d)" % len(after))
        logs = [env.log(w) for w in wks]
        sources = sorted("source=provider" if "source=provider" in lg else
                         "source=cluster" if "source=cluster" in lg else "none" for lg in logs)
        check(sources == ["source=cluster", "source=provider"],
              "one worker slowed down for the provider, the other for the cluster (%s)"
              % sources)
        for w in wks:
            check(env.stop(w) == 0, "worker stops cleanly")
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        rx.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
