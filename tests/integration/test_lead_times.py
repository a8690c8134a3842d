"""test_lead_times: lead times per subscription (issue 29 item 4a,
docs/scheduling.md "Lead times") end to end, with one herald-dispatcher,
one herald-worker and herald-sink recording when each push arrived.

  1. waves: a task made by the API with event_at 16 s ahead and due_at 4 s
     ahead; subscribers added by the API with lead_s 8 and 4, without a
     lead, with lead_s 0, and by raw SQL with a lead of 100 s (its wave is
     before the claim: it goes out at the claim, with the no-lead group).
     Each group arrives at its own instant (not before it, within
     TOLERANCE_MS after), every subscription is accounted for (done,
     unaccounted 0), and the task's view shows event_at.
  2. expiry: a wave after expire_at is counted expired, not pushed; a task
     whose every subscriber has a lead (subs empty at the claim) waits for
     its wave, then ends done.
  2b. pause, recover and resume back to back while two leads' waves wait
     (30 and 60 s ahead): the resumed task is owned anew and both waves
     planned again, each wave's recipients pushed at its instant, once.
  3. refusals: lead_s on a task without event_at, a lead whose wave is
     before due_at, a negative or fractional lead (400 bad_field); event_at
     with local_time, a window or shards 2 (400 invalid_task); a negative
     lead by raw SQL (the CHECK constraint); a raw row with event_at and
     local_time fails with last_error.
  4. heraldctl: create --event-at, import --lead writes the leads; a lead
     before due_at is refused naming it, nothing written.

Usage: test_lead_times.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK HERALDCTL"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, job_wait, sink_times, wait_until, wall  # noqa: E402

# From a wave's instant to its push's arrival: the chunker's tick, a chunk
# through Kafka, the worker and the sink, on a loaded 2-core machine.
TOLERANCE_MS = 3000
# Before the instant: the sink's clock and Redis's are the same host's.
EARLY_MS = 100


def add_subs(env, t, uids, lead_s=None):
    body = {"uids": uids}
    if lead_s is not None:
        body["lead_s"] = lead_s
    return env.http("POST", "/v1/tasks/%d/subscribers" % t, body)


def test_waves(env, record):
    now_ms = int(time.time() * 1000)
    due_ms, event_ms = now_ms + 4000, now_ms + 16000
    status, body = env.http("POST", "/v1/tasks", {
        "name": "leads", "channel": "webhook", "topic": env.topic, "title": "t", "body": "b",
        "due_at": due_ms, "event_at": event_ms, "chunk_size": 10})
    check(status == 201 and body.get("event_at", "").startswith(
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(event_ms // 1000))),
        "POST stores event_at and shows it (%s %s)" % (status, body.get("event_at")))
    if status != 201:
        return
    t = int(body["id"])
    groups = {  # name: (uids, lead_s, expected instant)
        "8 s before": (list(range(1000, 1030)), 8, event_ms - 8000),
        "4 s before": (list(range(2000, 2030)), 4, event_ms - 4000),
        "no lead": (list(range(3000, 3030)), None, due_ms),
        "at the event": (list(range(4000, 4030)), 0, event_ms),
    }
    for name, (uids, lead, _) in groups.items():
        status, body = add_subs(env, t, uids, lead)
        check(status == 200 and body.get("added") == len(uids) and body.get("lead_s") == lead,
              "POST subscribers %s: %s %s" % (name, status, body))
    # Raw SQL writes what the API refuses: a wave before due_at.
    early = list(range(5000, 5030))
    env.sql("INSERT INTO push_subscription (task_id, uid, lead_s) VALUES %s"
            % ",".join("(%d,%d,100)" % (t, u) for u in early))
    groups["100 s before (raw SQL)"] = (early, 100, due_ms)
    everyone = [u for g in groups.values() for u in g[0]]
    ok = wait_until(lambda: set(everyone) <= set(sink_times(record)), 40)
    times = sink_times(record)
    check(ok, "every subscriber pushed (%d of %d)" % (len(set(everyone) & set(times)),
                                                       len(everyone)))
    for name, (uids, _, at) in groups.items():
        got = [times[u] for u in uids if u in times]
        first, last = (min(got), max(got)) if got else (0, 0)
        check(got and first >= at - EARLY_MS and last <= at + TOLERANCE_MS,
              "%s: pushed at %+d..%+d ms of its wave %s" % (name, first - at, last - at,
                                                          wall(at / 1000)))
    ok = env.wait_state(t, ("done", "failed", "cancelled"), 20)
    row = env.task(t, "state, sent, unaccounted, last_error")
    check(ok and row[:3] == ["done", str(len(everyone)), "0"],
          "the task ends done, all %d sent, unaccounted 0 (%s)" % (len(everyone), row))


def test_expiry(env, record):
    now_ms = int(time.time() * 1000)
    t = env.insert_task("leads-expire", "webhook", due="'%s'" % wall(now_ms / 1000 + 2),
                        event_at="'%s'" % wall(now_ms / 1000 + 30),
                        expire_at="'%s'" % wall(now_ms / 1000 + 5))
    soon, late = list(range(6000, 6010)), list(range(6100, 6110))
    env.sql("INSERT INTO push_subscription (task_id, uid, lead_s) VALUES %s"
            % ",".join(["(%d,%d,NULL)" % (t, u) for u in soon]
                       + ["(%d,%d,5)" % (t, u) for u in late]))
    ok = env.wait_state(t, ("done", "failed", "cancelled"), 25)
    row = env.task(t, "state, sent, expired, unaccounted")
    check(ok and row == ["done", "10", "10", "0"],
          "no lead sent, the wave after expire_at counted expired, done (%s)" % (row,))
    check(not set(late) & set(sink_times(record)), "nobody of the late wave pushed")


def test_only_leads(env, record):
    now_ms = int(time.time() * 1000)
    wave_ms = now_ms + 6000
    t = env.insert_task("leads-only", "webhook", due="'%s'" % wall(now_ms / 1000 + 2),
                        event_at="'%s'" % wall((wave_ms + 3000) / 1000))
    uids = list(range(7000, 7010))
    env.sql("INSERT INTO push_subscription (task_id, uid, lead_s) VALUES %s"
            % ",".join("(%d,%d,3)" % (t, u) for u in uids))
    ok = env.wait_state(t, ("done", "failed", "cancelled"), 25)
    # The sink writes its record after it answered: done may come first.
    wait_until(lambda: set(uids) <= set(sink_times(record)), 10)
    times = sink_times(record)
    got = [times[u] for u in uids if u in times]
    row = env.task(t, "state, sent, unaccounted")
    check(ok and row == ["done", "10", "0"] and len(got) == 10
          and min(got) >= wave_ms - EARLY_MS and max(got) <= wave_ms + TOLERANCE_MS,
          "only leads: nothing at the claim, all 10 at their wave (%+d..%+d ms), done (%s)"
          % (((min(got) - wave_ms, max(got) - wave_ms) if got else (0, 0)) + (row,)))


def test_recover(env, record):
    now_ms = int(time.time() * 1000)
    # Two waves ahead, 30 s apart: a resumed task that kept its plan would
    # send the second one's recipients at the first one's instant.
    first_ms, wave_ms = now_ms + 30000, now_ms + 60000
    t = env.insert_task("leads-recover", "webhook", due="'%s'" % wall(now_ms / 1000 + 2),
                        event_at="'%s'" % wall((wave_ms + 6000) / 1000))
    now_uids, first_uids = list(range(8000, 8010)), list(range(8050, 8060))
    lead_uids = list(range(8100, 8110))
    env.sql("INSERT INTO push_subscription (task_id, uid, lead_s) VALUES %s"
            % ",".join(["(%d,%d,NULL)" % (t, u) for u in now_uids]
                       + ["(%d,%d,36)" % (t, u) for u in first_uids]
                       + ["(%d,%d,6)" % (t, u) for u in lead_uids]))
    wait_until(lambda: set(now_uids) <= set(sink_times(record)), 15)
    scores = env.r.cmd("ZRANGE", env.key(t, "wait"), 0, -1, "WITHSCORES")
    planned = sorted(int(float(x)) for x in scores[1::2])
    check(planned == [first_ms] * 10 + [wave_ms] * 10,
          "the 20 with a lead wait scored their waves %d and %d (%s)"
          % (first_ms, wave_ms, scores[:4]))
    # Pause, recover and resume back to back: within the lease tick
    # (lease_s / 3) of the pause, while the dispatcher still holds the task;
    # its takeover of the resumed task starts a new ownership
    # (task_owned_anew), whose reconciliation plans both waves again.
    env.http("POST", "/v1/tasks/%d/pause" % t)
    paused = env.wait_state(t, "paused", 10)
    status, rec = env.http("POST", "/v1/tasks/%d/recover" % t)
    job, _ = job_wait(lambda path: env.http("GET", path), rec) if status == 202 else ({}, [])
    env.http("POST", "/v1/tasks/%d/resume" % t)
    resumed = wait_until(lambda: [str(c) for c in env.task(t, "state, claimed_by IS NOT NULL")]
                         == ["dispatching", "1"], 15)
    replanned = wait_until(
        lambda: env.r.cmd("ZRANGE", env.key(t, "wait"), 0, -1, "WITHSCORES") == scores,
        max(1.0, first_ms / 1000 - time.time() - 3))
    check(paused and resumed and job.get("state") == "done",
          "pause, recover (a job) and resume (%s)" % job.get("state"))
    check(replanned, "both waves planned again before the first")
    check(not (set(first_uids) | set(lead_uids)) & set(sink_times(record)),
          "nobody of the waves pushed before them, after the recover")
    ok = env.wait_state(t, ("done", "failed", "cancelled"),
                        max(1.0, wave_ms / 1000 - time.time() + 20))
    wait_until(lambda: set(first_uids + lead_uids) <= set(sink_times(record)), 10)
    times = sink_times(record)
    row = env.task(t, "state, sent, unaccounted")
    check(ok and row == ["done", "30", "0"], "30 sent once, done (%s)" % (row,))
    for name, uids, at in (("first", first_uids, first_ms), ("second", lead_uids, wave_ms)):
        got = [times[u] for u in uids if u in times]
        check(len(got) == 10 and min(got) >= at - EARLY_MS and max(got) <= at + TOLERANCE_MS,
              "after the recover the %s wave goes at its instant (%+d..%+d ms, %d of 10)"
              % ((name,) + ((min(got) - at, max(got) - at) if got else (0, 0)) + (len(got),)))


def test_refusals(env):
    now_ms = int(time.time() * 1000)
    base = {"name": "leads-api", "channel": "webhook", "topic": env.topic,
            "due_at": now_ms + 3600000}
    status, plain = env.http("POST", "/v1/tasks", base)
    status2, ev = env.http("POST", "/v1/tasks", dict(base, event_at=now_ms + 3600000 + 600000))
    if status != 201 or status2 != 201:
        check(False, "tasks created (%s %s)" % (status, status2))
        return
    for t, body, what in ((plain["id"], {"uids": [1], "lead_s": 60}, "has no event_at"),
                          (ev["id"], {"uids": [1], "lead_s": 601}, "before task"),
                          (ev["id"], {"uids": [1], "lead_s": -1}, "lead_s must be"),
                          (ev["id"], {"uids": [1], "lead_s": 1.5}, "lead_s must be"),
                          (ev["id"], {"uids": [1], "lead_s": "15m"}, "lead_s must be")):
        status, got = env.http("POST", "/v1/tasks/%s/subscribers" % t, body)
        err = got.get("error", {}) if isinstance(got, dict) else {}
        check(status == 400 and err.get("code") == "bad_field" and what in err.get("message", ""),
              "%s -> 400 bad_field '%s' (%s %s)" % (body, what, status, err))
    status, got = env.http("POST", "/v1/tasks/%s/subscribers" % ev["id"],
                           {"uids": [7], "lead_s": 600})
    check(status == 200 and got.get("added") == 1, "a lead of exactly event_at - due_at is taken")
    status, got = env.http("PATCH", "/v1/tasks/%s" % ev["id"], {"event_at": None})
    check(status == 200 and got.get("event_at") is None, "PATCH event_at null clears it")
    for fields in ({"local_time": True}, {"window_start": "08:00", "window_end": "20:00"},
                   {"shards": 2}):
        status, got = env.http("POST", "/v1/tasks", dict(base, event_at=now_ms + 7200000,
                                                         **fields))
        err = got.get("error", {}) if isinstance(got, dict) else {}
        check(status == 400 and err.get("code") == "invalid_task"
              and "event_at" in err.get("message", ""),
              "event_at with %s -> 400 invalid_task (%s %s)" % (fields, status, err))
    got = env.sql("INSERT INTO push_subscription (task_id, uid, lead_s) VALUES (%s, 9, -5)"
                  % ev["id"], strict=False)
    check(isinstance(got, str) and "push_subscription_lead" in got,
          "a negative lead by raw SQL is refused by the CHECK (%s)" % (got,))
    bad = env.insert_task("leads-sql-local", "webhook", due="UTC_TIMESTAMP(3)", local_time=1,
                          event_at="UTC_TIMESTAMP(3) + INTERVAL 1 HOUR")
    ok = env.wait_state(bad, "failed", 10)
    row = env.task(bad, "state, last_error")
    check(ok and "event_at with local_time" in (row[1] or ""),
          "a raw row with event_at and local_time fails with last_error (%s)" % (row,))


def test_cli(env, ctl, cfg):
    def run(*args, stdin=None):
        p = subprocess.run([ctl, "-c", cfg] + list(args), input=stdin, capture_output=True,
                           text=True, timeout=120)
        return p.returncode, p.stdout.strip(), p.stderr

    rc, out, err = run("create", "--name", "cli-leads", "--channel", "webhook", "--topic",
                       env.topic, "--due-in", "1h", "--event-at",
                       wall(time.time() + 7200)[:19], "--quiet")
    check(rc == 0 and out.isdigit(), "heraldctl create --event-at (%s %s %s)" % (rc, out, err))
    if rc != 0:
        return
    t = int(out)
    rc, out, err = run("import", str(t), "-", "--lead", "15m", stdin="11\n12\n")
    rows = env.sql("SELECT uid, lead_s FROM push_subscription WHERE task_id = %d ORDER BY uid"
                   % t)
    check(rc == 0 and rows == [["11", "900"], ["12", "900"]],
          "heraldctl import --lead 15m writes lead_s 900 (%s %s %s)" % (rc, rows, err))
    rc, out, err = run("import", "--lead", "2h", str(t), "-", stdin="13\n")
    n = env.sql("SELECT COUNT(*) FROM push_subscription WHERE task_id = %d" % t)[0][0]
    check(rc != 0 and "before task %d's due_at" % t in err and n == "2",
          "heraldctl import --lead 2h is refused, nothing written (%s %s %s)" % (rc, n, err))
    status, body = env.http("GET", "/v1/tasks/%d" % t)
    check(status == 200 and body.get("event_at") is not None, "the view shows event_at")
    rc, out, err = run("status", str(t))
    check(rc == 0 and "  event     " + body.get("event_at", "?")[:19] in out,
          "heraldctl status prints the event (%s)" % out.splitlines()[:6])
    env.http("POST", "/v1/tasks/%d/cancel" % t)


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    dispatcher, worker, sink, ctl = sys.argv[1:]
    env = Env("leadtimes")
    try:
        if not env.create_topic():
            return 77
        channel, record = env.start_sink(sink)
        cfg = env.config({"webhook": dict(channel, concurrency=16)})
        env.start_daemons(dispatcher, worker, cfg)
        test_refusals(env)
        test_cli(env, ctl, cfg)
        test_waves(env, record)
        test_expiry(env, record)
        test_only_leads(env, record)
        test_recover(env, record)
    finally:
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
