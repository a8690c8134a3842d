"""test_expiry: push_task.expire_at and the `expired` outcome (issue 18, part 4;
docs/scheduling.md, "Expiry"), on the real stack with one herald-dispatcher,
one herald-worker and herald-sink.  All tasks are raw SQL rows.

  1. mid-campaign: 300 recipients at 20 pushes/s (15 s of work) expire 4 s
     after due: the chunker stops, the rest counts `expired` (the chunker's
     drop of subs and unheld chunks, the worker's of the chunks it holds),
     the task ends `done` with sent + expired = the subscriptions, nothing
     reaches the sink after expire_at, and GET /v1/tasks/{id} shows it;
  2. the late wake-up: a task due 2 h ago whose expire_at passed 1 h ago
     (the dispatchers were down) pushes nobody: all `expired`, `done`;
  3. a retry due past expire_at is never sent: every first push answers 500
     and the channel's backoff is an hour, so the recipients end `expired`
     (or `sent`, for a retry whose random backoff landed before expire_at),
     never `failed`, and no retry reaches the sink after expire_at;
  4. the pull leaves out a task past its expire_at (both tasks held by
     control=pause, so neither finishes meanwhile);
  5. a crashed holder's chunk redelivered after expire_at: the chunk set and
     its pending entry are left as a worker killed mid-chunk leaves them
     (lease gone), and its message is published again, as the sweeper does:
     the worker that receives it pushes nobody, all `expired`, task `done`.

Usage: test_expiry.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK"""
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import (Env, check, finish, free_port, metric,  # noqa: E402
                          sink_argv, sink_uids)

N = 300


def record_2xx(path):
    """[(uid, recv_ms)] of the pushes the sink answered with a 2xx."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[1].startswith("2") and parts[0].isdigit():
                    out.append((int(parts[0]), int(parts[2])))
    except OSError:
        pass
    return out


def ms(env, t, col):
    return int(env.sql("SELECT CAST(ROUND(UNIX_TIMESTAMP(%s) * 1000) AS SIGNED) FROM push_task "
                       "WHERE id = %d" % (col, t))[0][0])


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    dispatcher, worker, sink = sys.argv[1:]
    env = Env("expiry")
    try:
        if not env.create_topic():
            return 77
        channel, record = env.start_sink(sink)
        flaky_port = free_port()
        flaky_record = os.path.join(env.dir, "flaky.record")
        env.start(sink_argv(sink, flaky_port, flaky_record, extra=["--fail-first", "100"]),
                  "flaky.log")
        flaky = {"url": "http://127.0.0.1:%d/push" % flaky_port, "concurrency": 8,
                 "timeout_ms": 5000, "retry": "{max_attempts: 5, backoff_ms: 3600000, "
                 "max_backoff_ms: 3600000}"}
        cfg = env.config({"webhook": channel, "flaky": flaky})
        dsp = env.start([dispatcher, "-c", cfg], "dispatcher.log")
        wk = env.start([worker, "-c", cfg], "worker.log")
        check(env.wait_ready(env.dsp_port) and env.wait_ready(env.wk_port), "daemons serve")

        mid_uids = list(range(9100001, 9100001 + N))
        mid = env.insert_with_subs("expire-mid", "webhook", mid_uids, due_s=2, chunk_size=10,
                                   rate_limit=20,
                                   expire_at="UTC_TIMESTAMP(3) + INTERVAL 6 SECOND")
        late_uids = list(range(9200001, 9200051))
        late = env.insert_task("expire-late", "webhook",
                               due="UTC_TIMESTAMP(3) - INTERVAL 2 HOUR",
                               expire_at="UTC_TIMESTAMP(3) - INTERVAL 1 HOUR",
                               _subs=",".join("(@t,%d)" % u for u in late_uids))
        retry_uids = list(range(9300001, 9300041))
        retry = env.insert_with_subs("expire-retry", "flaky", retry_uids, due_s=1,
                                     expire_at="UTC_TIMESTAMP(3) + INTERVAL 4 SECOND")

        # 5. the crashed holder's chunk, redelivered after expire_at.
        crash_uids = list(range(9500001, 9500031))
        # Subscriptions are only taken while scheduled (the guard trigger):
        # held under a topic no dispatcher serves until the row says what a
        # dispatcher wrote.  Not by control=pause: a control scan between
        # the two statements pauses the task and sets its ctl key, which
        # the UPDATE below would leave saying pause, and the worker parks
        # the chunk for good (CI, Redis Cluster run, 2026-12-03).
        crash = env.insert_task("expire-crash", "webhook",
                                due="UTC_TIMESTAMP(3) - INTERVAL 20 SECOND",
                                expire_at="UTC_TIMESTAMP(3) - INTERVAL 10 SECOND",
                                topic="'%s_held'" % env.topic,
                                _subs=",".join("(@t,%d)" % u for u in crash_uids))
        env.sql("UPDATE push_task SET state = 'dispatched', topic = '%s', "
                "started_at = UTC_TIMESTAMP(3), dispatched_at = UTC_TIMESTAMP(3) "
                "WHERE id = %d" % (env.topic, crash))
        env.r.cmd("SADD", env.key(crash, "chunk:1"), *crash_uids)
        env.r.cmd("HSET", env.key(crash, "pending"), 1, str(int(time.time() * 1000)))
        env.r.cmd("SET", env.key(crash, "seq"), 1)
        now = int(time.time() * 1000)
        env.kcat_produce([json.dumps({"v": 1, "task": crash, "seq": 1, "count": len(crash_uids),
                                      "due_ms": now - 20000, "published_ms": now},
                                     separators=(",", ":")).encode()], key="%d:1" % crash)

        # 4. the pull, while both tasks are held by control=pause (never
        # claimed, so unfinished).
        due = "UTC_TIMESTAMP(3) - INTERVAL 10 SECOND"
        paused = {"control": "'pause'"}
        fresh = env.insert_task("pull-fresh", "webhook", due=due, _subs="(@t,9400001)", **paused)
        stale = env.insert_task("pull-stale", "webhook", due=due, _subs="(@t,9400001)",
                                expire_at="UTC_TIMESTAMP(3) - INTERVAL 5 SECOND", **paused)
        day = datetime.datetime.fromtimestamp(ms(env, fresh, "due_at") / 1000,
                                              datetime.timezone.utc).strftime("%Y-%m-%d")
        status, body = env.http("GET", "/v1/users/9400001/reminders?date=" + day)
        ids = [r["task_id"] for r in body.get("reminders", [])] if status == 200 else []
        check(status == 200 and fresh in ids and stale not in ids,
              "the pull returns the paused task and leaves out the expired one (%s %s)"
              % (status, ids))

        # 2. the late wake-up.
        ok = env.wait_state(late, ("done", "failed"), 20)
        row = env.task(late, "state, sent, failed, expired, unaccounted, last_error")
        check(ok and row[0] == "done" and row[1] == "0" and row[3] == str(len(late_uids))
              and row[4] == "0",
              "the task that woke up past expire_at is done, all %d expired (%s)"
              % (len(late_uids), row))
        check(not sink_uids(record, timeout_s=0) & set(late_uids),
              "... and none of its recipients reached the sink")

        ok = env.wait_state(crash, ("done", "failed"), 20)
        row = env.task(crash, "state, sent, failed, expired, unaccounted")
        check(ok and row[0] == "done" and row[1] == "0" and row[3] == str(len(crash_uids))
              and row[4] == "0",
              "the chunk redelivered after expire_at is expired whole, the task done (%s)" % row)
        check(not sink_uids(record, timeout_s=0) & set(crash_uids),
              "... and none of its recipients reached the sink")
        chunk_state = env.sql("SELECT state FROM push_chunk WHERE task_id = %d" % crash)
        check(env.r.cmd("EXISTS", env.key(crash, "chunk:1")) == 0,
              "... its chunk set is gone (%s)" % chunk_state)

        # 1. mid-campaign.
        ok = env.wait_state(mid, ("done", "failed"), 25)
        row = env.task(mid, "state, sent, failed, expired, unaccounted, total")
        sent, expired = int(row[1]), int(row[3])
        check(ok and row[0] == "done" and row[2] == "0" and row[4] == "0"
              and sent + expired == N and sent > 0 and expired > 0,
              "the rate-limited task is done, sent + expired = %d, both > 0 (%s)" % (N, row))
        expire_ms = ms(env, mid, "expire_at")
        got = [(u, t) for u, t in record_2xx(record) if u in set(mid_uids)]
        late_pushes = [(u, t - expire_ms) for u, t in got if t > expire_ms + 1000]
        check(len({u for u, _ in got}) == sent and not late_pushes,
              "the sink got exactly the %d sent, none later than expire_at (+1 s in flight): %s"
              % (sent, late_pushes[:5]))
        check("event=task_expired task=%d " % mid in env.log(dsp),
              "the dispatcher logged task_expired")
        status, body = env.http("GET", "/v1/tasks/%d" % mid)
        pr = body.get("progress", {}) if status == 200 else {}
        check(status == 200 and pr.get("outcomes", {}).get("expired") == expired
              and pr.get("done") == N and body.get("counters", {}).get("expired") == expired
              and body.get("expire_at") is not None,
              "GET /v1/tasks shows expire_at and the expired outcome (%s)" % pr)
        left = env.sql("SELECT COUNT(*) FROM push_chunk WHERE task_id = %d AND state = "
                       "'published'" % mid)[0][0]
        check(left == "0", "no chunk row is left 'published' (%s)" % left)

        # 3. retries due past expire_at.
        ok = env.wait_state(retry, ("done", "failed"), 20)
        row = env.task(retry, "state, sent, failed, expired, unaccounted")
        check(ok and row[0] == "done" and row[2] == "0" and row[4] == "0"
              and int(row[1]) + int(row[3]) == len(retry_uids) and int(row[3]) > 0,
              "the retried task is done: sent + expired = %d, none failed (%s)"
              % (len(retry_uids), row))
        expire_ms = ms(env, retry, "expire_at")
        late_pushes = [t - expire_ms for _, t in record_2xx(flaky_record) if t > expire_ms + 1000]
        check(not late_pushes, "no retry reached the provider after expire_at (%s)"
              % late_pushes[:5])
        check("event=chunk_expired" in env.log(wk), "the worker expired the chunks it held")

        # Every expired recipient is counted once, by the chunker or a worker.
        want = len(late_uids) + len(crash_uids) + expired + int(row[3])
        by_dsp = metric(env.metrics(env.dsp_port), "herald_recipients_expired_total") or 0
        wk_text = env.metrics(env.wk_port)
        by_wk = sum(metric(wk_text, "herald_pushes_total",
                           '{channel="%s",outcome="expired"}' % ch) or 0
                    for ch in ("webhook", "flaky"))
        check(by_dsp + by_wk == want and by_wk >= int(row[3]),
              "the metrics count each expired recipient once: chunker %d + workers %d = %d"
              % (by_dsp, by_wk, want))
    finally:
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
