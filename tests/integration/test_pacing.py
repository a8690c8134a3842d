"""test_pacing: finish-by pacing, admission control and the channel budget
shared by weight (issue 18, parts 3 and 5; docs/scheduling.md), end to end
against the local stack with one herald-dispatcher, two herald-workers and
herald-sink.  The second worker's clock runs 30 s behind the host's
(the test seam HERALD_TEST_CLOCK_SKEW_MS, as the fault rows' clock-*;
issue 34): the limiter's windows and the time left to finish_by are
Redis's, so it draws from the same one-second budgets and paces to the same
finish_by as the first (with its own clock it drew a second budget of its
own and saw 30 s more to finish_by: measured under Debian's faketime before
the fix, the channel carried 200/s of its 100/s and the paced task ended
30 s late).  Times are the sink's (its record), not push_delivery.at, which
each worker stamps with its own clock.  Two campaigns run at once, on two
channels:

1. finish_by from a raw SQL row: 900 recipients due in 4 s with finish_by
   15 s after due_at, on a channel whose rate_limit (200/s) would end them
   in under 5 s.  The task's last push (push_delivery.at) lands within 5 %
   of the span (0.75 s) of finish_by; meanwhile GET shows the rate in force
   (progress.planned_rate, well under 200) and the plan
   (progress.plan.planned_done_now), and herald_paced_tasks counts it.
2. Two tasks of 500 recipients each due together on a channel of 100/s
   (API): the second's subscribers overbook the budget, so a PATCH (its
   priority to high) answers with last_warning "... overbooked ...", the
   first gets its warning from the scanner's next estimate (every 10 s), both
   before due, and
   herald_task_warnings_total{kind="overbooked"} counts them; both stay
   scheduled and are pushed.  While both run, the high task gets 2/3 of the
   budget: from the delivery log, its share of the pushes in the whole
   seconds both run (the first and the last second left out, where one task
   starts or ends inside) is within 0.58..0.76.  The tolerance: the limiter
   grants per second in batches of limit / 20 = 5, the worker round-robins
   the two tasks' pushes, and a second's grants are counted by the second
   the push ended in (a push granted at x.99 s may land in the next), which
   at 100/s over ~6 s moves the share by a few pushes per second, not by 8
   points.

Usage: test_pacing.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK"""
import collections
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, free_port, metric, wait_until  # noqa: E402
from test_backpressure import kafka_topic  # noqa: E402

SPAN_S = 15
PARTITIONS = 4  # both workers hold chunks
SKEW_S = -30    # the second worker's clock, behind the host's


def ms_of(text):
    """Epoch ms of an API time ("2026-11-26T20:00:00.000Z")."""
    t = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


def api_time(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def sink_pushes(record, first_uid, n):
    """The sink's 2xx answers to uids FIRST_UID..FIRST_UID+N-1: [epoch ms], by
    the sink's clock (the host's), one per uid (its first)."""
    seen = {}
    with open(record) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3 or not parts[1].startswith("2"):
                continue
            uid = int(parts[0])
            if first_uid <= uid < first_uid + n and uid not in seen:
                seen[uid] = int(parts[2])
    return sorted(seen.values())


def per_second(times):
    """{epoch second: pushes in it} of a list of epoch ms."""
    return collections.Counter(t // 1000 for t in times)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    dispatcher, worker, sink = sys.argv[1:]
    env = Env("pacing")
    try:
        if not check(kafka_topic(env, PARTITIONS), "topic with %d partitions" % PARTITIONS):
            return finish()
        channel, record = env.start_sink(sink)
        # Room for every chunk at once (30 of 50): a worker shares a budget
        # among the tasks whose chunks it holds (docs/scheduling.md).
        cfg = env.config({"paced": dict(channel, rate_limit=200),
                          "shared": dict(channel, rate_limit=100)},
                         worker_extra=["max_chunks_in_flight: 64"])
        _, wk1 = env.start_daemons(dispatcher, worker, cfg)
        wk2_port = free_port()
        wk2 = env.start([worker, "-c", cfg, "--listen", "127.0.0.1:%d" % wk2_port],
                        "worker-skewed.log",
                        env={"HERALD_TEST_CLOCK_SKEW_MS": str(SKEW_S * 1000)})
        check(env.wait_ready(wk2_port) and
              wait_until(lambda: all("event=partitions_assigned" in env.log(w)
                                     for w in (wk1, wk2)), 60, 0.5),
              "the worker %+d s off serves, both workers hold partitions" % SKEW_S)

        # 1. finish_by from a raw SQL row
        paced = env.insert_with_subs(
            "paced", "paced", range(9100001, 9100901), due_s=4, chunk_size=50,
            finish_by="UTC_TIMESTAMP(3) + INTERVAL %d SECOND" % (4 + SPAN_S))
        due_ms, finish_ms = (int(v) for v in env.sql(
            "SELECT CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED), "
            "CAST(ROUND(UNIX_TIMESTAMP(finish_by) * 1000) AS SIGNED) FROM push_task "
            "WHERE id = %d" % paced)[0])

        # 2. two tasks due together on 100/s, through the API
        due2 = int(time.time() * 1000) + 14000
        ids = []
        for name in ("shared-normal", "shared-high"):
            status, body = env.http("POST", "/v1/tasks", {
                "name": name, "channel": "shared", "topic": env.topic,
                "due_at": api_time(due2), "chunk_size": 50, "priority": "normal"})
            check(status == 201 and body.get("last_warning") is None,
                  "%s created, no warning yet (no subscribers): %s" % (name, status))
            ids.append(body["id"])
            base = 9200001 if name == "shared-normal" else 9300001
            status, body = env.http("POST", "/v1/tasks/%s/subscribers" % ids[-1],
                                    {"uids": list(range(base, base + 500))})
            check(status == 200 and body.get("added") == 500, "500 subscribers added")
        normal, high = (int(i) for i in ids)
        status, body = env.http("PATCH", "/v1/tasks/%d" % high, {"priority": "high"})
        warning = body.get("last_warning") if status == 200 else None
        check(warning is not None and "overbooked" in warning and "2 tasks" in warning,
              "the PATCH answers with the overbooked warning: %s" % warning)
        # A scan between the two may have estimated the task again: the
        # warning is the same, its estimated finish may not be.
        shown = env.http("GET", "/v1/tasks/%d" % high)[1].get("last_warning")
        check(shown is not None and warning is not None
              and shown.split("; estimated finish")[0] == warning.split("; estimated finish")[0],
              "... and GET shows it: %s" % shown)
        warned = wait_until(lambda: env.task(normal, "last_warning")[0] != "NULL", 12, 0.3)
        row = env.task(normal, "state, last_warning")
        check(warned and row[0] == "scheduled" and "overbooked" in row[1]
              and int(time.time() * 1000) < due2,
              "the scanner's next estimate warns the first task too, before due, still scheduled "
              "(%s)" % (row,))
        count = metric(env.metrics(env.dsp_port), "herald_task_warnings_total",
                       '{kind="overbooked"}') or 0
        check(count >= 2, "herald_task_warnings_total{kind=\"overbooked\"} = %d" % count)

        # 1. while it runs: the rate in force and the plan
        wait_until(lambda: int(time.time() * 1000) > due_ms + 5000, 30, 0.2)
        status, body = env.http("GET", "/v1/tasks/%d" % paced)
        progress = body.get("progress", {}) if status == 200 else {}
        plan = progress.get("plan") or {}
        rate = progress.get("planned_rate")
        check(rate is not None and 40 <= rate <= 80,
              "GET shows the planned rate, about 900 / 16 s, not the channel's 200: %s" % rate)
        check(ms_of(plan.get("finish_by", "1970-01-01T00:00:00.000Z")) == finish_ms
              and 0 < plan.get("planned_done_now", 0) < 900
              and 0 < progress.get("done", 0) < 900,
              "... and the plan beside the actual done (%s, done %s)"
              % (plan, progress.get("done")))
        check((metric(env.metrics(env.dsp_port), "herald_paced_tasks") or 0) >= 1,
              "herald_paced_tasks counts it")

        ok = all(env.wait_state(t, "done", 60) for t in (paced, normal, high))
        check(ok, "the three tasks end done")
        # Its delivery rows carry its clock: stamped before any push began.
        skewed = env.sql("SELECT COUNT(*) FROM push_delivery WHERE task_id IN (%d, %d, %d) "
                         "AND at < FROM_UNIXTIME(%d / 1000) - INTERVAL %d SECOND"
                         % (paced, normal, high, due_ms, -SKEW_S // 2))
        check(int(skewed[0][0]) > 0,
              "the worker %+d s off pushed too (%s of its delivery rows stamped so)"
              % (SKEW_S, skewed[0][0]))
        # The sink writes its record every 100 ms.
        wait_until(lambda: len(sink_pushes(record, 9100001, 900)) == 900 and
                   len(sink_pushes(record, 9200001, 500)) == 500 and
                   len(sink_pushes(record, 9300001, 500)) == 500, 5, 0.1)
        times = sink_pushes(record, 9100001, 900)
        off = times[-1] - finish_ms if times else 0
        check(len(times) == 900 and abs(off) <= SPAN_S * 1000 * 0.05,
              "the paced task's last push lands %+d ms from finish_by (span %d s, 5 %% = %d ms)"
              % (off, SPAN_S, SPAN_S * 50))

        # 2. the budget shared 2:1 while both ran
        hs = per_second(sink_pushes(record, 9300001, 500))
        ns = per_second(sink_pushes(record, 9200001, 500))
        ps = per_second(times)
        print("pushes per second (paced, high, normal):",
              [(s - min(ps), ps[s], hs[s], ns[s]) for s in sorted(set(ps) | set(hs) | set(ns))])
        both = sorted(set(hs) & set(ns))[1:-1]
        h = sum(hs[s] for s in both)
        n = sum(ns[s] for s in both)
        share = h / (h + n) if h + n else 0
        check(len(both) >= 3 and 0.58 <= share <= 0.76,
              "the high task got %.2f of the pushes in the %d whole seconds both ran "
              "(%d vs %d; want 2/3)" % (share, len(both), h, n))
        peak = max((hs[s] + ns[s]) for s in both) if both else 0
        check(peak <= 110, "no second carried more than the budget (+ a few late ends): %d"
              % peak)
        check(all(env.task(t, "sent")[0] == "500" for t in (normal, high)),
              "every recipient of both pushed")
    finally:
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
