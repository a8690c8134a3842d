#!/usr/bin/env python3
"""A Redis failover is a pause, not a drop (issue 34, item 1).  A worker
reaches Redis through a loopback proxy that, mid-campaign, closes every
connection and refuses new ones for OUTAGE_S (what a restarted Redis or a
dead master looks like from the worker: "Server closed the connection",
then "Connection refused"), then serves again.  The dispatcher talks to
Redis directly, with the shipped redelivery_timeout_s (120 s), so nothing
here may wait for the sweeper.

  - held: with the default worker.stall_max_ms (30 s) the worker's chunks
    stall (chunk_stalled: held, the failed acks kept) and go on when Redis
    answers (chunk_unstalled, the rest of each chunk read again): no chunk
    dropped or handed back, every uid received exactly once, the receiver's
    longest silence within OUTAGE_S + SILENCE_SLACK_S;
  - handed back: a worker with stall_max_ms 1000 gives its stalled chunks
    up during the outage (chunk_handed_back, an error); the hand-back is
    retried until Redis answers, and the dispatcher publishes each chunk
    again within a second (chunk_redelivered last_publish_ms=0), not after the 120 s
    redelivery timeout: the campaign ends done, every uid received, the
    longest silence within OUTAGE_S + SILENCE_SLACK_S.

usage: test_redis_failover.py HERALD_DISPATCHER HERALD_WORKER   (exit 77
without HERALD_TEST_CONFIG)"""
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, wait_until  # noqa: E402
from test_redis_stall import Receiver  # noqa: E402
from test_retry_races import LoopbackProxy  # noqa: E402

N = 2400
CHUNK = 600
CONCURRENCY = 6
WARM = 300              # requests received before the outage
OUTAGE_S = 4.0
SILENCE_SLACK_S = 4.0   # the retry back-off (at most 2 s), an open, the hand-back's second


class OutageProxy(LoopbackProxy):
    """Passes every byte between the worker and Redis; outage(S) closes
    every connection and refuses new ones for S seconds (the listener is
    closed, and bound again on the same port)."""

    def __init__(self, upstream_port):
        self.socks = []
        super().__init__(upstream_port)

    def _serve(self, cli, up):
        with self.lock:
            self.socks += [cli, up]
        # _c2s pumps its first socket into its second, whichever way.
        threading.Thread(target=self._c2s, args=(cli, up), daemon=True).start()
        threading.Thread(target=self._c2s, args=(up, cli), daemon=True).start()

    def _drop_all(self):
        """Closes the listener (shutdown() first: a bare close() leaves it
        listening while the accept thread waits in it) and every
        connection."""
        with self.lock:
            socks, self.socks = [self.srv] + self.socks, []
        self.shut(*socks)
        for sock in socks:
            sock.close()

    def outage(self, seconds):
        """Every connection closed, none accepted for SECONDS; (start, end)."""
        start = time.time()
        self._drop_all()
        time.sleep(seconds)
        self.listen(self.port)
        return start, time.time()

    def close(self):
        self._drop_all()


def longest_silence(rx, t0):
    """The receiver's longest gap between two requests from T0 on."""
    with rx.lock:
        times = sorted(t for t in rx.times if t >= t0 - 1.0)
    return max((b - a for a, b in zip(times, times[1:])), default=0.0)


def campaign(env, rx, proxy, name, wk_log, dsp_log, handed_back):
    """One campaign with an outage in the middle; the checks above."""
    first = rx.count()
    t = env.insert_with_subs(name, "hook", range(1, N + 1), chunk_size=CHUNK)
    if not check(wait_until(lambda: rx.count() - first >= WARM, 60, 0.05),
                 "%s: the campaign runs (%d requests)" % (name, rx.count() - first)):
        return
    start, _ = proxy.outage(OUTAGE_S)
    check(rx.count() - first < N, "%s: the outage came before the campaign's end" % name)
    check(env.wait_state(t, "done", 90), "%s: done (%s)" % (name, env.task(t),))
    silence = longest_silence(rx, start)
    print("%s: longest silence %.1f s (outage %.1f s)" % (name, silence, OUTAGE_S))
    check(silence <= OUTAGE_S + SILENCE_SLACK_S,
          "%s: the receiver's longest silence %.1f s <= %.1f s"
          % (name, silence, OUTAGE_S + SILENCE_SLACK_S))
    with rx.lock:
        uids = rx.uids[first:]
    check(set(uids) == set(range(1, N + 1)),
          "%s: the receiver got every uid (%d distinct of %d)" % (name, len(set(uids)), N))
    rows = env.deliveries(t)
    check(len(rows) == N, "%s: one delivery row per uid (%d)" % (name, len(rows)))
    _, sent, failed, _ = env.task(t)
    check(int(sent) == N and int(failed) == 0, "%s: every recipient sent (%s)" % (name, sent))
    check("event=chunk_stalled" in wk_log(), "%s: the worker stalled its chunks" % name)
    check("event=chunk_dropped" not in wk_log(), "%s: no chunk dropped" % name)
    timed_out = [line for line in dsp_log().splitlines()
                 if "event=chunk_redelivered" in line and "last_publish_ms=0" not in line]
    check(not timed_out, "%s: the sweeper's timer republished nothing (%s)"
          % (name, timed_out[:1]))
    if handed_back:
        check("event=chunk_handed_back" in wk_log(), "%s: chunks handed back" % name)
        check("last_publish_ms=0" in dsp_log(),
              "%s: the dispatcher published them again at once" % name)
    else:
        check(len(uids) == N, "%s: nobody pushed twice (%d requests)" % (name, len(uids)))
        check("event=chunk_unstalled" in wk_log(), "%s: the chunks went on" % name)
        check("event=chunk_handed_back" not in wk_log(), "%s: nothing handed back" % name)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    env = Env("redis_failover")
    rx = Receiver()
    proxy = OutageProxy(env.redis_port)
    try:
        channels = rx.channels(CONCURRENCY)

        def shipped(path):
            """The shipped redelivery timeout and lease (the suite's own are
            20 s and 20 s)."""
            with open(path) as f:
                text = f.read().replace("redelivery_timeout_s: 20", "redelivery_timeout_s: 120")
            with open(path, "w") as f:
                f.write(text.replace("lease_ms: 20000", "lease_ms: 6000"))
            return path

        dsp_cfg = shipped(env.config(channels))
        held_cfg = shipped(env.config(channels, redis_port=proxy.port))
        back_cfg = shipped(env.config(channels, worker_extra=["stall_max_ms: 1000"],
                                      redis_port=proxy.port))
        dsp = env.start([sys.argv[1], "-c", dsp_cfg], "dispatcher.log")
        for name, cfg, handed_back in (("held", held_cfg, False), ("handed back", back_cfg, True)):
            wk = env.start([sys.argv[2], "-c", cfg], "worker-%s.log" % name.replace(" ", "-"))
            if not check(env.wait_ready(env.dsp_port) and env.wait_ready(env.wk_port),
                         "%s: dispatcher and worker serve" % name):
                return finish()
            check(wait_until(lambda: "event=partitions_assigned" in env.log(wk), 60, 0.5),
                  "%s: the worker holds the partition" % name)
            campaign(env, rx, proxy, name, lambda: env.log(wk), lambda: env.log(dsp),
                     handed_back)
            check(env.stop(wk) == 0, "%s: worker stops cleanly" % name)
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        proxy.close()
        rx.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
