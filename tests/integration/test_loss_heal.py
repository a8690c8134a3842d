"""test_loss_heal: Redis loses a running task's state, and pause -> recover ->
resume at once (issue 20, items 7 and 9), against the real stack with one
herald-dispatcher, one herald-worker and herald-sink (delivery log on).

  1. every key of a running task is deleted mid-campaign (what FLUSHALL or a
     restart without the AOF does to it), with no pause: the task does not
     end `done`; it ends `failed` with `unaccounted` > 0 and a last_error
     naming recover; `heraldctl recover` then pushes the rest and the task
     ends `done` with every subscriber pushed, each counted once (`sent` and
     `total` = the subscribers: recover waited for what the worker pushed
     until its lease renewal found the chunk's lease gone, and counts the
     delivery log's outcomes).
  2. pause, recover and resume issued back to back mid-campaign: the owner
     stops chunking within a tick (`published` stays put while paused),
     recover succeeds (waiting for the parked chunks' leases if need be), and
     the task ends `done` with every subscriber pushed and `total` = the
     subscribers.

Usage: test_loss_heal.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK HERALDCTL"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import (Env, check, finish, sink_uids,  # noqa: E402
                          wait_until)

N = 3000


class T:
    def __init__(self, env, ctl, cfg, record):
        self.env, self.ctl_bin, self.cfg, self.record = env, ctl, cfg, record

    def ctl(self, *args):
        return subprocess.run([self.ctl_bin, "-c", self.cfg] + [str(a) for a in args],
                              capture_output=True, text=True, timeout=90)

    def campaign(self, name, base):
        """N subscribers chunked at 500/s (6 s), so there is a middle to act in."""
        uids = range(base, base + N)
        t = self.env.insert_with_subs(name, "webhook", uids, due_s=2, rate_limit=500,
                                      chunk_size=250)
        ok = wait_until(lambda: len(sink_uids(self.record) & set(uids)) >= 500, 30, 0.1)
        check(ok, "%s: the campaign is under way" % name)
        return t, uids

    def lost_mid_campaign(self):
        env = self.env
        t, uids = self.campaign("lost-mid", 9000001)
        env.r.unlink_pattern(env.prefix + "{t%d}*" % t)
        ok = env.wait_state(t, ("done", "failed"), 60)
        row = env.task(t, "state, unaccounted, last_error")
        check(ok and row[0] == "failed" and int(row[1]) > 0
              and "heraldctl recover" in (row[2] or ""),
              "lost mid-campaign: not done, failed unaccounted (%s)" % row)
        out = self.ctl("recover", t)
        check(out.returncode == 0, "lost mid-campaign: recover (%s%s)"
              % (out.stdout.strip(), out.stderr.strip()))
        ok = env.wait_state(t, ("done", "failed"), 60)
        row = env.task(t, "state, sent, unaccounted, total")
        missing = set(uids) - sink_uids(self.record, uids)
        check(ok and row[0] == "done" and row[2] == "0" and not missing,
              "lost mid-campaign: recovered, done, every subscriber pushed (%s; %d missing)"
              % (row, len(missing)))
        check(row[1] == str(N) and row[3] == str(N),
              "... sent and total count each subscriber once (%s)" % row)

    def pause_recover_resume(self):
        env = self.env
        t, uids = self.campaign("pause-recover", 9100001)
        out = self.ctl("pause", t)
        check(out.returncode == 0, "pause (%s)" % out.stderr.strip())
        published = env.r.cmd("HGET", env.key(t, "stats"), "published")
        # recover refuses until the task is paused and its chunks parked.
        for _ in range(50):
            out = self.ctl("recover", t)
            if out.returncode == 0 or not ("chunks in flight" in out.stderr
                                           or "is dispatching" in out.stderr):
                break
            time.sleep(0.2)
        check(out.returncode == 0, "recover right after the pause (%s%s)"
              % (out.stdout.strip(), out.stderr.strip()))
        time.sleep(0.5)
        still = env.r.cmd("HGET", env.key(t, "stats"), "published")
        out = self.ctl("resume", t)
        check(out.returncode == 0, "resume (%s)" % out.stderr.strip())
        ok = env.wait_state(t, ("done", "failed"), 90)
        row = env.task(t, "state, total, sent, unaccounted")
        missing = set(uids) - sink_uids(self.record, uids)
        check(ok and row[0] == "done" and row[3] == "0" and not missing,
              "pause, recover, resume: done, every subscriber pushed (%s; %d missing)"
              % (row, len(missing)))
        check(int(row[1]) == N, "... total counts each recipient once (%s)" % row[1])
        print("     published %s at the pause, %s after recover" % (published, still), flush=True)


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    dispatcher, worker, sink, ctl = sys.argv[1:]
    env = Env("lossheal")
    try:
        if not env.create_topic():
            return 77
        channel, record = env.start_sink(sink)
        cfg = env.config({"webhook": channel})
        env.start_daemons(dispatcher, worker, cfg)
        t = T(env, ctl, cfg, record)
        t.lost_mid_campaign()
        t.pause_recover_resume()
    finally:
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
