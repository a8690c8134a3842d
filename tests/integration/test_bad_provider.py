#!/usr/bin/env python3
"""Bad provider responses: a worker pushing to misbehaving_provider.py
(huge body, 1 byte/s trickle, reset mid-response, a garbage status line,
200 with no body, no answer at all) survives; every recipient ends sent or
dead-lettered, a trickle is cut at the channel's timeout_ms and retried, and
a good task beside them is delivered in full.

usage: test_bad_provider.py HERALD_DISPATCHER HERALD_WORKER   (exit 77 without
HERALD_TEST_CONFIG)"""
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, metric, wait_until  # noqa: E402
from misbehaving_provider import Provider  # noqa: E402

N = 4
RETRY = "{max_attempts: 2, backoff_ms: 50, max_backoff_ms: 100}"
TIMEOUT_MS = 1000
# mode -> the outcome every recipient must end with ("any": sent or failed)
MODES = {"ok": "sent", "huge": "any", "trickle": "failed", "reset": "failed",
         "garbage": "failed", "empty": "sent", "nothing": "failed"}


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    env = Env("badprov")
    provider = Provider()
    try:
        channels = {m: {"url": provider.url(m), "timeout_ms": TIMEOUT_MS, "retry": RETRY}
                    for m in MODES}
        cfg = env.config(channels)
        if not env.create_topic():
            return 77
        dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        tasks = {}
        for i, mode in enumerate(MODES):
            tasks[mode] = env.insert_with_subs("prov-" + mode, mode,
                                               range(100 * (i + 1), 100 * (i + 1) + N))
        for mode, t in tasks.items():
            check(env.wait_state(t, "done", 60), "task %s done (%s)" % (mode, env.task(t)))
        for i, (mode, t) in enumerate(tasks.items()):
            uids = set(range(100 * (i + 1), 100 * (i + 1) + N))
            dl = env.deliveries(t)
            state, sent, failed, _ = env.task(t)
            want = MODES[mode]
            check(set(dl) == uids and all(s in ("sent", "failed") for s in dl.values()),
                  "%s: every uid accounted for in push_delivery (%s)" % (mode, dl))
            check(int(sent) + int(failed) == N, "%s: sent %s + failed %s == %d"
                  % (mode, sent, failed, N))
            if want != "any":
                check(all(s == want for s in dl.values()), "%s: all %s" % (mode, want))
            seen = {r["uid"] for r in provider.by_mode(mode)}
            check(seen == uids, "%s: the provider saw every uid (%s)" % (mode, sorted(seen)))
            if want == "failed":
                check(len(provider.by_mode(mode)) == 2 * N,
                      "%s: each uid tried twice (max_attempts 2): %d requests"
                      % (mode, len(provider.by_mode(mode))))
                fh = env.r.cmd("HGETALL", env.key(t, "failed"))
                check(len(fh) == 2 * N, "%s: %d dead letters in the failed hash: %s"
                      % (mode, len(fh) // 2, sorted(set(fh[1::2]))))
        tr = provider.by_mode("trickle")
        # the provider notices a client gone only at its next byte (1/s)
        wait_until(lambda: all(r["end"] is not None for r in tr), 5)
        slow = [None if r["end"] is None else round(r["end"] - r["start"], 1) for r in tr
                if r["end"] is None or r["end"] - r["start"] > TIMEOUT_MS / 1000 + 2.5]
        check(tr and not slow and all(r["client_left"] for r in tr),
              "trickle: every request cut near timeout_ms (too slow: %s)" % slow)
        check(int(env.task(tasks["trickle"], "retried")[0]) >= N, "trickle: retries counted")
        check(wk.poll() is None and dsp.poll() is None, "worker and dispatcher still running")
        text = env.metrics(env.wk_port)
        check(metric(text, "herald_pushes_total", '{channel="ok",outcome="sent"}') == N,
              "worker metrics: ok channel sent %d" % N)
        check(env.stop(wk) == 0, "worker stops cleanly")
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        provider.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
