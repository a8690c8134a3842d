#!/usr/bin/env python3
"""bench/timeline.py: where a batch of tasks spent its time, from the
daemons' logs (issue 19's many small tasks; docs/performance.md).

    bench/timeline.py FIRST LAST [LOG...]

For the tasks FIRST..LAST (ids) it reads the logfmt lines of the
dispatchers and workers (default: .herald/bench/*.log, what `bench/run
small` leaves) and prints, per stage, how many tasks reached it and when,
in ms after each task's due time (task_claimed's ts minus its lag_ms):
claimed, reconciled, dispatched (the dispatcher), chunk_start and
chunk_done (the workers; a task's first chunk), task_done.  Then the span
from the first due to the last chunk_done, in wall-clock time, which is
what `perf report --time` takes for a profile of the same seconds (record
with `perf record -a -g --clockid realtime`)."""
import calendar
import glob
import os
import re
import sys
import time

STAGES = ("task_claimed", "task_reconciled", "task_dispatched", "chunk_start", "chunk_done",
          "task_done")
LINE = re.compile(r"^ts=(\S+) .* event=(\w+) task=(\d+)\b(.*)$")


def epoch(ts):
    """2026-11-28T13:50:32.243Z -> seconds since the epoch."""
    whole, frac = ts.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + int(frac) / 1000


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    first, last = int(argv[1]), int(argv[2])
    logs = argv[3:] or glob.glob(os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), ".herald", "bench", "*.log"))
    seen = {s: {} for s in STAGES}
    due = {}
    for path in logs:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.match(line)
                if not m or m.group(2) not in seen:
                    continue
                task = int(m.group(3))
                if not first <= task <= last:
                    continue
                t = epoch(m.group(1))
                stage = seen[m.group(2)]
                stage[task] = min(stage.get(task, t), t)
                if m.group(2) == "task_claimed":
                    lag = re.search(r" lag_ms=(\d+)", m.group(4))
                    due[task] = t - (int(lag.group(1)) / 1000 if lag else 0)
    if not due:
        print("no task_claimed of tasks %d..%d in %d logs" % (first, last, len(logs)))
        return 1
    print("%d tasks due, %d..%d; ms after each task's due time:" % (len(due), first, last))
    print("  %-16s %6s %8s %8s %8s %8s" % ("stage", "tasks", "p10", "p50", "p90", "max"))
    for s in STAGES:
        ms = [(t - due[k]) * 1000 for k, t in seen[s].items() if k in due]
        if ms:
            print("  %-16s %6d %8.0f %8.0f %8.0f %8.0f"
                  % (s, len(ms), pct(ms, 10), pct(ms, 50), pct(ms, 90), max(ms)))
    start = min(due.values())
    end = max(seen["chunk_done"].values() or [start])
    print("span: %.3f s, perf report --time %.3f,%.3f" % (end - start, start, end))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
