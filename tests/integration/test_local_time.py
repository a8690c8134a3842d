"""test_local_time: local-time sends and send windows end to end (issue 18,
docs/scheduling.md), with one herald-dispatcher, one herald-worker and
herald-sink recording when each push arrived.

  1. local_time: due_at's wall clock is "now + 6 s" read in each
     recipient's zone.  Real zones are hours apart, so the test picks zones
     whose instant has passed (Europe/Berlin, Asia/Kolkata: released at the
     plan, right after the claim), one whose instant is seconds ahead (UTC,
     the users without a tz attribute, through default_tz) and one hours
     ahead (America/New_York: it stays waiting; its wave in the API and its
     scores in the wait set say when).  The UTC recipients must arrive at
     their instant, not before; a pause and resume leave the waiting ones
     as they are; the cancel counts them `cancelled`.  The bucketing of a DST change date is a unit test
     (tests/unit/test_release.c), not repeated here.
  2. a window closing mid-campaign: a rate-limited task whose window (fixed
     zone UTC) is closed only from now + 3 s to now + 7 s, i.e. it wraps
     midnight and opens again four seconds after it closed.  No push
     arrives while it is closed (beyond the chunks moved before the close),
     the rest waits in the wait set and is released when it reopens; every
     recipient is pushed once and the task ends done.

  3. the API: the fields stored and shown back, PATCH null clearing the
     window, and bad zones, times and windows refused with 400; a raw SQL
     row with an unknown zone fails with last_error.

Usage: test_local_time.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import (Env, check, finish, hms, job_wait, sink_times, wait_until,  # noqa: E402
                          wall)

# A chunk moved just before the window closed is still pushed after it
# (docs/scheduling.md "Quiet hours"): how late such a push may arrive.
IN_FLIGHT_MS = 1500


def set_zone(env, uids, zone):
    for u in uids:
        env.r.cmd("HSET", "%suser:%d" % (env.prefix, u), "name", "u%d" % u, "tz", zone)


def test_three_zones(env, record):
    berlin, kolkata, utc, ny = (list(range(b, b + 40)) for b in (1000, 2000, 3000, 4000))
    set_zone(env, berlin, "Europe/Berlin")
    set_zone(env, kolkata, "Asia/Kolkata")
    set_zone(env, ny, "America/New_York")
    set_zone(env, [utc[0]], "Not/AZone")  # a bad attribute falls back to default_tz
    start = time.time()
    due = int(start) + 6  # whole seconds: hr_tz takes the wall time's seconds
    t = env.insert_task("local", "webhook", due="'%s'" % wall(due), local_time=1,
                        default_tz="'UTC'", chunk_size=20,
                        _subs=",".join("(@t,%d)" % u for u in berlin + kolkata + utc + ny))
    ok = wait_until(lambda: set(berlin + kolkata + utc) <= set(sink_times(record)), 20)
    times = sink_times(record)
    check(ok, "Berlin, Kolkata and UTC recipients pushed (%d of %d)"
          % (len(set(berlin + kolkata + utc) & set(times)), 120))
    early = [u for u in berlin + kolkata if u in times and times[u] > due * 1000]
    check(not early, "zones whose wall time passed go out at once, before %s (late: %s)"
          % (wall(due), early[:5]))
    before = [u for u in utc if u in times and times[u] < due * 1000]
    check(not before, "UTC recipients arrive at their instant %s, not before (%d early)"
          % (wall(due), len(before)))
    check(not set(ny) & set(times), "New York recipients are not pushed hours early")
    status, body = env.http("GET", "/v1/tasks/%d" % t)
    prog = body.get("progress", {}) if status == 200 else {}
    waves = prog.get("waves", [])
    ny_at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(due + 5 * 3600))
    ny_wave = [w for w in waves if w.get("zone") == "America/New_York"]
    check(prog.get("waiting") == 40 and len(ny_wave) == 1 and ny_wave[0]["waiting"] == 40
          and ny_wave[0]["release_at"].startswith(ny_at),
          "the API shows New York's wave at %s with 40 waiting (%s)" % (ny_at, waves))
    # Berlin's and Kolkata's instants passed: both are released at the plan,
    # one wave; every recipient is in one of the waves, listed in time order.
    check(sum(w.get("recipients", 0) for w in waves) == 160
          and [w.get("release_at") for w in waves] == sorted(w.get("release_at") for w in waves),
          "the waves hold all 160 recipients, in release order (%s)" % waves)
    utc_wave = [w for w in waves if w.get("zone") == "UTC"]
    check(len(utc_wave) == 1 and utc_wave[0]["released"] == 40
          and utc_wave[0]["release_at"].startswith(time.strftime("%Y-%m-%dT%H:%M:%S",
                                                                 time.gmtime(due))),
          "UTC's wave released its 40 at the wall time (%s)" % utc_wave)
    scores = env.r.cmd("ZRANGE", env.key(t, "wait"), 0, -1, "WITHSCORES")
    ny_ms = (due + 5 * 3600) * 1000
    check(len(scores) == 80 and all(int(float(s)) == ny_ms for s in scores[1::2]),
          "the wait set holds the 40 New York uids scored %d" % ny_ms)
    check(env.task(t, "state")[0] == "dispatching", "the task is not finished while they wait")
    # Pause and resume: the waiting ones stay where they are, the next
    # owner (the poller's takeover) does not plan them again.
    env.http("POST", "/v1/tasks/%d/pause" % t)
    paused = env.wait_state(t, "paused", 10)
    # A recover while paused rebuilds subs from MySQL: the waiting ones must
    # be planned again by the next owner, not pushed from subs at once.
    status, rec = env.http("POST", "/v1/tasks/%d/recover" % t)
    job, _ = job_wait(lambda path: env.http("GET", path), rec) if status == 202 else ({}, [])
    check(status == 202 and job.get("state") == "done",
          "recover of the paused local-time task, a job (%s %s %s)" % (status, rec, job))
    env.http("POST", "/v1/tasks/%d/resume" % t)
    resumed = wait_until(lambda: [str(c) for c in env.task(t, "state, claimed_by IS NOT NULL")]
                         == ["dispatching", "1"], 10)
    wait_until(lambda: env.r.cmd("ZRANGE", env.key(t, "wait"), 0, -1, "WITHSCORES") == scores, 10)
    scores2 = env.r.cmd("ZRANGE", env.key(t, "wait"), 0, -1, "WITHSCORES")
    check(paused and resumed and env.task(t, "state")[0] == "dispatching" and scores2 == scores,
          "pause, recover and resume keep the 40 waiting at their instant (%s)"
          % (env.task(t, "state"),))
    time.sleep(1)
    check(not set(ny) & set(sink_times(record)),
          "after the recover New York recipients are still not pushed early")
    status, _ = env.http("POST", "/v1/tasks/%d/cancel" % t)
    ok = env.wait_state(t, "cancelled", 15)
    row = env.task(t, "state, sent, cancelled")
    check(ok and int(row[1]) == 120 and int(row[2]) == 40,
          "cancel counts the 40 waiting ones cancelled, 120 sent (%s)" % (row,))
    print("three zones: %.1f s" % (time.time() - start), flush=True)


def test_waves_in_order(env):
    """GET /v1/tasks/{id} lists every wave of a task with recipients in four
    zones, in release order, whatever the order of the waves hash.  The hash
    is written here in an order (earliest, latest, third, second) after which
    Debian's cJSON 1.7.15 lost two waves when the list was sorted with
    cJSON_InsertItemInArray (an insert at index 0 left the tail wrong)."""
    due = int(time.time()) + 3 * 86400  # beyond the horizon: nobody plans it
    t = env.insert_task("waves-order", "webhook", due="'%s'" % wall(due), local_time=1,
                        default_tz="'UTC'")
    zones = ("Pacific/Kiritimati", "Asia/Tokyo", "Europe/Berlin", "America/New_York")
    release = [(due - 14 * 3600 + i * 5 * 3600) * 1000 for i in range(4)]
    for i in (0, 3, 2, 1):
        env.r.cmd("HSET", env.key(t, "waves"), str(release[i]), "-1 %s" % zones[i])
        env.r.cmd("ZADD", env.key(t, "wait"), *[x for u in range(10 * i + 1)
                                               for x in (release[i], 900000 + 100 * i + u)])
    env.r.cmd("HSET", env.key(t, "waves"), "planned", "1")
    status, body = env.http("GET", "/v1/tasks/%d" % t)
    waves = body.get("progress", {}).get("waves", []) if status == 200 else []
    got = [(w.get("zone"), w.get("waiting")) for w in waves]
    check(got == [(zones[i], 10 * i + 1) for i in range(4)],
          "four zones, four waves in release order (%s %s)" % (status, got))


def test_api_fields(env):
    """The API takes the fields, shows them back, and refuses bad ones."""
    base = {"name": "api-local", "channel": "webhook", "topic": env.topic,
            "due_at": "2030-05-01T09:00:00Z"}
    status, body = env.http("POST", "/v1/tasks", dict(base, local_time=True,
                                                     default_tz="America/New_York",
                                                     window_start="08:00", window_end="21:30:15",
                                                     window_tz="Europe/Paris"))
    check(status == 201 and body.get("local_time") is True
          and body.get("default_tz") == "America/New_York"
          and body.get("window_start") == "08:00:00" and body.get("window_end") == "21:30:15"
          and body.get("window_tz") == "Europe/Paris",
          "POST stores local_time, default_tz and the window (%s %s)" % (status, body))
    if status == 201:
        status, body = env.http("PATCH", "/v1/tasks/%s" % body["id"],
                                {"window_start": None, "window_end": None, "window_tz": None})
        check(status == 200 and body.get("window_start") is None
              and body.get("window_tz") is None, "PATCH null clears the window (%s)" % status)
    for fields, code in (({"default_tz": "../../etc/passwd"}, "bad_field"),
                         ({"default_tz": "Mars/Base"}, "invalid_task"),
                         ({"window_start": "25:00", "window_end": "08:00"}, "bad_field"),
                         ({"window_start": "08:00"}, "invalid_task"),
                         ({"window_start": "08:00", "window_end": "08:00"}, "invalid_task"),
                         ({"local_time": 1}, "bad_field")):
        status, body = env.http("POST", "/v1/tasks", dict(base, **fields))
        got = body.get("error", {}).get("code") if isinstance(body, dict) else body
        check(status == 400 and got == code, "%s -> 400 %s (%s %s)" % (fields, code, status, got))
    # The same mistakes written with raw SQL fail the row with last_error.
    bad = env.insert_task("sql-bad-zone", "webhook", due="UTC_TIMESTAMP(3)",
                          window_start="'08:00'", window_end="'09:00'", window_tz="'Nowhere/Zone'")
    ok = env.wait_state(bad, "failed", 10)
    row = env.task(bad, "state, last_error")
    check(ok and "window_tz \"Nowhere/Zone\": unknown time zone" in row[1],
          "a raw row with an unknown window_tz fails with last_error (%s)" % (row,))


def test_window_closes(env, record):
    uids = list(range(10000, 10400))
    start = time.time()
    closes = int(start) + 3
    opens = closes + 4
    # The window is open all day except [closes, opens): it wraps midnight.
    t = env.insert_task("window", "webhook", due="UTC_TIMESTAMP(3)", rate_limit=40, chunk_size=10,
                        window_start="'%s'" % hms(opens), window_end="'%s'" % hms(closes),
                        window_tz="'UTC'", _subs=",".join("(@t,%d)" % u for u in uids))
    ok = env.wait_state(t, ("done", "failed", "cancelled"), 30)
    # The sink writes its record every 100 ms: the last chunk's answers may
    # reach the file after the task is done (a CI run read 390 of 400).
    wait_until(lambda: set(uids) <= set(sink_times(record)), 5)
    times = sink_times(record)
    row = env.task(t, "state, sent, last_error")
    check(ok and row[0] == "done" and int(row[1]) == len(uids),
          "the windowed task ends done with all %d sent (%s)" % (len(uids), row))
    got = [times[u] for u in uids if u in times]
    check(len(got) == len(uids), "every recipient pushed (%d of %d)" % (len(got), len(uids)))
    inside = [ms for ms in got if closes * 1000 + IN_FLIGHT_MS <= ms < opens * 1000]
    check(not inside, "no push while the window is closed [%s, %s) (%d were)"
          % (hms(closes), hms(opens), len(inside)))
    before = sum(1 for ms in got if ms < closes * 1000 + IN_FLIGHT_MS)
    after = sum(1 for ms in got if ms >= opens * 1000)
    check(0 < before < len(uids) and after > 0,
          "pushed before the close (%d) and after the reopening (%d)" % (before, after))
    waves = env.r.cmd("HGETALL", env.key(t, "waves"))
    fields = dict(zip(waves[0::2], waves[1::2]))
    check(str(opens * 1000) in fields,
          "the rest became a wave at the reopening %s (%s)" % (hms(opens), sorted(fields)))
    print("window: %.1f s" % (time.time() - start), flush=True)


def test_expiry_while_waiting(env, record):
    """A wave waiting hours ahead when expire_at passes: counted expired at
    expire_at (not at its release), the task done with every one accounted."""
    start = time.time()
    utc, ny = list(range(5000, 5020)), list(range(6000, 6020))
    set_zone(env, ny, "America/New_York")
    due = int(start) + 2
    t = env.insert_task("local-expire", "webhook", due="'%s'" % wall(due), local_time=1,
                        default_tz="'UTC'", chunk_size=20,
                        expire_at="'%s'" % wall(due + 4),
                        _subs=",".join("(@t,%d)" % u for u in utc + ny))
    ok = env.wait_state(t, ("done", "failed", "cancelled"), 20)
    row = env.task(t, "state, sent, expired, unaccounted")
    check(ok and row == ["done", "20", "20", "0"],
          "UTC's 20 sent, New York's 20 waiting counted expired at expire_at, done (%s)"
          % (row,))
    check(time.time() - start < 15, "done within seconds of expire_at, not at the release")
    check(not set(ny) & set(sink_times(record)), "no New York recipient pushed")
    print("expiry while waiting: %.1f s" % (time.time() - start), flush=True)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    dispatcher, worker, sink = sys.argv[1:]
    env = Env("localtime")
    try:
        if not env.create_topic():
            return 77
        channel, record = env.start_sink(sink)
        cfg = env.config({"webhook": dict(channel, concurrency=16)})
        env.start_daemons(dispatcher, worker, cfg)
        test_api_fields(env)
        test_waves_in_order(env)
        test_three_zones(env, record)
        test_window_closes(env, record)
        test_expiry_while_waiting(env, record)
    finally:
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
