"""test_channel_gap: a worker whose configuration lacks a task's channel does
not fail the task (issue 20, item 8: a rolling ConfigMap update replaces
workers one at a time).

One herald-dispatcher with the channel, and first only a worker without it:
that worker skips the task's chunks (`channel_missing`, counted in
herald_bad_messages_total{reason="no_channel"}) and hands them back (issue
34), and the task is neither failed nor acknowledged.  Then that worker is
replaced by one that has the channel (the rollout finishing): the
dispatcher publishes the handed-back chunks again within a second
(chunk_redelivered last_publish_ms=0), not after the suite's 20 s
redelivery timeout, and every subscriber is pushed, the task ends `done`
within DONE_S of the new worker's start.

Usage: test_channel_gap.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import (Env, check, finish, metric, sink_uids,  # noqa: E402
                          wait_until)


DONE_S = 15  # below the suite's redelivery_timeout_s (20)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    dispatcher, worker, sink = sys.argv[1:]
    env = Env("changap")
    try:
        if not env.create_topic():
            return 77
        channel, record = env.start_sink(sink)
        with_channel = env.config({"webhook": channel})
        without = env.config({"other": channel})
        dsp = env.start([dispatcher, "-c", with_channel], "dispatcher.log")
        old = env.start([worker, "-c", without], "worker-old.log")
        check(env.wait_ready(env.dsp_port) and env.wait_ready(env.wk_port), "daemons serve")
        uids = range(8000001, 8000501)
        t = env.insert_with_subs("channel-gap", "webhook", uids, due_s=2, chunk_size=100)
        skipped = wait_until(
            lambda: (metric(env.metrics(env.wk_port), "herald_bad_messages_total",
                            '{reason="no_channel"}') or 0) >= 5, 30, 0.3)
        check(skipped, "the worker without the channel skips the 5 chunks (channel_missing)")
        row = env.task(t, "state, sent, failed, last_error")
        check(row[0] in ("dispatching", "dispatched") and row[1] == "0",
              "... and the task is not failed, nothing sent (%s)" % row)
        check(env.stop(old) == 0, "the old worker stops")
        env.start([worker, "-c", with_channel], "worker-new.log")
        started = time.time()
        ok = env.wait_state(t, ("done", "failed"), 90)
        took = time.time() - started
        check(took <= DONE_S, "done %.1f s after the new worker started (<= %d s: handed back, "
              "not waiting for the redelivery timeout)" % (took, DONE_S))
        check("last_publish_ms=0" in env.log(dsp),
              "the dispatcher published the handed-back chunks again")
        row = env.task(t, "state, sent, unaccounted, last_error")
        missing = set(uids) - sink_uids(record, uids)
        check(ok and row[0] == "done" and not missing,
              "the new worker pushes every subscriber, the task is done (%s; %d missing)"
              % (row, len(missing)))
    finally:
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
