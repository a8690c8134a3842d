"""test_series: series of reminders (issue 29; docs/scheduling.md "Series") on
the real stack: herald-dispatcher (two of them), one herald-worker and
herald-sink.  Series are raw SQL rows of push_series.

  1. exactly once: FREQ=SECONDLY;INTERVAL=8;COUNT=3 with two dispatchers
     running: three occurrence tasks, one per occurrence_at, 8 s apart;
     each gets its subscribers (as any task: push_subscription rows while it
     is scheduled), delivers them to the sink and ends `done` with every
     subscription accounted; the series ends `ended` with occurrences = 3.
     A second write of an occurrence (the unique key) is refused by MySQL;
  2. catch-up after an outage: a series whose last 5 occurrences passed
     unwritten (DTSTART 25 s ago, every 5 s), once per policy: `none` writes
     none of them, `latest` only the last, `all` every one;
  3. the dispatcher down across two occurrences: stopped, restarted 12 s
     later; with catch_up latest one task stands for the two missed;
  4. a bad rule (and a bad zone) written by hand: the series becomes `failed`
     with last_error naming it; the dispatcher keeps serving;
  5. a local-time series: its occurrence is a local-time task (local_time 1,
     default_tz the series' zone, due_at the wall time);
  6. the API: "every weekday at 09:00 in each recipient's zone, until
     2027-06-30" created, read with its next occurrences, listed, paused,
     resumed and ended (a second end is 409), each change with its audit
     row; a bad rule is 400 naming it.

Usage: test_series.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import (Env, check, finish, free_port, sink_uids,  # noqa: E402
                          wait_until)


def insert_series(env, name, rrule, dtstart, **cols):
    """A push_series row of this test's topic (COLS are SQL expressions);
    DTSTART is an SQL expression of a wall time.  Returns the id."""
    cols = dict({"name": "'%s'" % name, "topic": "'%s'" % env.topic, "channel": "'webhook'",
                 "title": "'{{uid}}'", "rrule": "'%s'" % rrule, "dtstart": dtstart}, **cols)
    rows = env.sql("INSERT INTO push_series (%s) VALUES (%s); SELECT LAST_INSERT_ID();"
                   % (", ".join(cols), ", ".join(str(v) for v in cols.values())))
    return int(rows[-1][0])


def occurrences(env, series):
    """[(task id, occurrence_at ms, state)] of SERIES, oldest first."""
    return [(int(a), int(b), c) for a, b, c in env.sql(
        "SELECT id, CAST(ROUND(UNIX_TIMESTAMP(occurrence_at) * 1000) AS SIGNED), state "
        "FROM push_task WHERE series_id = %d ORDER BY occurrence_at" % series)]


def series_row(env, series):
    return env.sql("SELECT state, occurrences, COALESCE(last_error, '') FROM push_series "
                   "WHERE id = %d" % series)[0]


def ago(s):
    return "UTC_TIMESTAMP() - INTERVAL %d SECOND" % s


def test_exactly_once(env, record):
    uids = list(range(9290001, 9290001 + 20))
    start = int(env.sql("SELECT UNIX_TIMESTAMP(UTC_TIMESTAMP()) + 4")[0][0])
    sid = insert_series(env, "every-8s", "FREQ=SECONDLY;INTERVAL=8;COUNT=3",
                        "FROM_UNIXTIME(%d)" % start, lead_s=3)
    subscribed = set()
    deadline = time.time() + 60
    while time.time() < deadline:
        for tid, _, state in occurrences(env, sid):
            if tid not in subscribed and state == "scheduled":
                env.sql("INSERT IGNORE INTO push_subscription (task_id, uid) VALUES %s"
                        % ",".join("(%d,%d)" % (tid, u) for u in uids))
                subscribed.add(tid)
        occ = occurrences(env, sid)
        if len(occ) == 3 and all(s == "done" for _, _, s in occ):
            break
        time.sleep(0.3)
    occ = occurrences(env, sid)
    check(len(occ) == 3, "three occurrence tasks, one each (%s)" % occ)
    check([o[1] for o in occ] == [(start + 8 * i) * 1000 for i in range(3)],
          "occurrence_at 8 s apart from DTSTART (%s)" % [o[1] for o in occ])
    check(all(o[2] == "done" for o in occ), "every occurrence done (%s)" % occ)
    for tid, _, _ in occ:
        sent, unacc, total = env.task(tid, "sent, unaccounted, total")
        check(int(sent) == len(uids) and int(unacc) == 0 and int(total) == len(uids),
              "task %d: every subscription sent and accounted (sent=%s unaccounted=%s)"
              % (tid, sent, unacc))
    check(set(uids) <= sink_uids(record, uids), "the sink got every recipient")
    check(wait_until(lambda: series_row(env, sid)[0] == "ended", 10, 0.3),
          "series ended after COUNT (%s)" % (series_row(env, sid),))
    check(int(series_row(env, sid)[1]) == 3, "occurrences = 3")
    dup = env.sql("INSERT INTO push_task (name, topic, channel, due_at, series_id, occurrence_at) "
                  "SELECT name, topic, channel, due_at, series_id, occurrence_at FROM push_task "
                  "WHERE id = %d" % occ[0][0], strict=False)
    check(isinstance(dup, str) and "Duplicate" in dup,
          "a second row of an occurrence is refused by the unique key (%s)" % (dup,))


def test_catch_up(env):
    # DTSTART 26 s ago, every 5 s: 26, 21, 16, 11 and 6 s ago are missed
    # (more than DSP_SERIES_LATE_MS late); 1 s ago is on time, written by
    # every policy; the next is 4 s ahead (lead 0: not yet).
    want = {"none": 0, "latest": 1, "all": 5}
    ids = {p: insert_series(env, "catch-" + p, "FREQ=SECONDLY;INTERVAL=5;COUNT=12", ago(26),
                            catch_up="'%s'" % p, lead_s=0)
           for p in want}
    now_ms = int(env.sql("SELECT CAST(UNIX_TIMESTAMP(UTC_TIMESTAMP(3)) * 1000 AS SIGNED)")[0][0])
    check(wait_until(lambda: all(series_row(env, s)[1] != "0" for s in ids.values()), 10, 0.2),
          "the series were walked")
    for p, s in ids.items():
        missed = [o[1] for o in occurrences(env, s) if o[1] < now_ms - 5000]
        check(len(missed) == want[p], "catch_up %s: %d missed occurrences written (%s)"
              % (p, len(missed), missed))
        if p == "latest" and missed:
            check(missed[0] >= now_ms - 7000, "latest writes the last missed one")
        env.sql("UPDATE push_series SET state = 'ended' WHERE id = %d" % s)


def test_dispatcher_down(env, dispatcher, cfg, dsps):
    # every 10 s from 3 s ahead; the dispatchers stop after the first is
    # written and come back 27 s later: +10 and +20 were missed (8 s late or
    # more), +30 is within its lead again.
    start = int(env.sql("SELECT UNIX_TIMESTAMP(UTC_TIMESTAMP()) + 3")[0][0])
    sid = insert_series(env, "down", "FREQ=SECONDLY;INTERVAL=10;COUNT=4",
                        "FROM_UNIXTIME(%d)" % start, lead_s=1, catch_up="'latest'")
    check(wait_until(lambda: len(occurrences(env, sid)) >= 1, 15, 0.2), "first occurrence written")
    for p in dsps:
        env.stop(p)
    check([o[1] for o in occurrences(env, sid)] == [start * 1000], "only the first before the stop")
    time.sleep(27)
    dsps[:] = [env.start([dispatcher, "-c", cfg], "dispatcher-r.log")]
    check(env.wait_ready(env.dsp_port), "dispatcher back")
    check(wait_until(lambda: len(occurrences(env, sid)) >= 2, 15, 0.2),
          "occurrences written again after the restart")
    missed = [o[1] for o in occurrences(env, sid) if o[1] in ((start + 10) * 1000,
                                                               (start + 20) * 1000)]
    check(missed == [(start + 20) * 1000],
          "catch_up latest: one task, the later of the two missed (%s)" % missed)
    env.sql("UPDATE push_series SET state = 'ended' WHERE id = %d" % sid)


def test_bad_rows(env):
    bad = insert_series(env, "bad-rule", "FREQ=SOMETIMES", ago(0))
    zone = insert_series(env, "bad-zone", "FREQ=DAILY", ago(0), tz="'Mars/Olympus'")
    check(wait_until(lambda: series_row(env, bad)[0] == "failed" and
                     series_row(env, zone)[0] == "failed", 10, 0.2), "bad series failed")
    check("not an RFC 5545 recurrence rule" in series_row(env, bad)[2],
          "last_error names the rule (%s)" % series_row(env, bad)[2])
    check("Mars/Olympus" in series_row(env, zone)[2],
          "last_error names the zone (%s)" % series_row(env, zone)[2])
    check(env.http("GET", "/healthz", token=None, port=env.probe(env.dsp_port))[0] == 200,
          "the dispatcher still serves")


def test_local_time(env):
    sid = insert_series(env, "local", "FREQ=DAILY;COUNT=2",
                        "DATE(UTC_TIMESTAMP()) + INTERVAL 2 DAY + INTERVAL 9 HOUR",
                        tz="'Europe/Berlin'", local_time=1, lead_s=2678400)
    check(wait_until(lambda: len(occurrences(env, sid)) >= 1, 10, 0.2),
          "a local-time occurrence written a lead ahead (%s)" % (series_row(env, sid),))
    row = env.sql("SELECT t.local_time, t.default_tz, t.due_at = s.dtstart FROM push_task t "
                  "JOIN push_series s ON s.id = t.series_id WHERE t.series_id = %d "
                  "ORDER BY t.id LIMIT 1" % sid)[0]
    check(tuple(row) == ("1", "Europe/Berlin", "1"),
          "a local-time task of the series' zone at the wall time (%s)" % (row,))


def test_api(env):
    body = {"name": "standup", "channel": "webhook", "topic": env.topic, "title": "standup",
            "rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;UNTIL=20270630T235959",
            "dtstart": "2027-06-25 09:00:00", "tz": "Europe/Berlin", "local_time": True}
    status, made = env.http("POST", "/v1/series", body)
    check(status == 201 and made.get("state") == "active", "POST /v1/series (%s %s)"
          % (status, made))
    sid = made["id"]
    walls = [n["wall"] for n in made["next"]]
    check(walls == ["2027-06-25T09:00:00.000", "2027-06-28T09:00:00.000",
                    "2027-06-29T09:00:00.000", "2027-06-30T09:00:00.000"] and made["ends"],
          "weekdays at 09:00 until 2027-06-30, then no more (%s)" % walls)
    status, got = env.http("GET", "/v1/series/%d/next?count=2" % sid)
    check(status == 200 and len(got["next"]) == 2 and got["next"][0]["due_at"] is None,
          "GET next: 2, local time has no single instant (%s)" % (got,))
    status, page = env.http("GET", "/v1/series")
    check(status == 200 and any(x["id"] == sid for x in page["series"]), "GET /v1/series")
    for verb, want in (("pause", 200), ("resume", 200), ("end", 200), ("end", 409)):
        status, got = env.http("POST", "/v1/series/%d/%s" % (sid, verb))
        check(status == want, "POST %s: %d (%s)" % (verb, status, got))
    audits = env.sql("SELECT action FROM push_audit WHERE target = 'series %d' ORDER BY id" % sid)
    check([a[0] for a in audits] == ["POST /v1/series", "POST /v1/series/{id}/pause",
                                     "POST /v1/series/{id}/resume", "POST /v1/series/{id}/end"],
          "an audit row per change (%s)" % audits)
    status, got = env.http("POST", "/v1/series", dict(body, rrule="FREQ=SOMETIMES"))
    check(status == 400 and "FREQ=SOMETIMES" in str(got), "a bad rule: 400 (%s)" % (got,))
    status, got = env.http("GET", "/v1/series/999999999")
    check(status == 404, "an unknown series: 404")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    dispatcher, worker, sink = sys.argv[1:]
    env = Env("series")
    try:
        if not env.create_topic():
            return 77
        channel, record = env.start_sink(sink)
        cfg = env.config({"webhook": channel})
        dsps = [env.start([dispatcher, "-c", cfg], "dispatcher.log")]
        # a second dispatcher on ports of its own, racing for the same series
        with open(cfg) as f:
            text = f.read()
        for old in (env.dsp_port, env.probe_ports[env.dsp_port]):
            text = text.replace("listen: 127.0.0.1:%d\n" % old,
                                "listen: 127.0.0.1:%d\n" % free_port())
        cfg2 = cfg.replace(".yaml", "-2.yaml")
        with open(cfg2, "w") as f:
            f.write(text)
        dsps.append(env.start([dispatcher, "-c", cfg2], "dispatcher2.log"))
        env.start([worker, "-c", cfg], "worker.log")
        check(env.wait_ready(env.dsp_port) and env.wait_ready(env.wk_port), "daemons serve")
        test_api(env)
        test_exactly_once(env, record)
        test_catch_up(env)
        test_bad_rows(env)
        test_local_time(env)
        test_dispatcher_down(env, dispatcher, cfg, dsps)
    finally:
        env.sql("DELETE FROM push_job WHERE name = 'series:%s'" % env.topic)
        env.sql("DELETE FROM push_series WHERE topic = '%s'" % env.topic)
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
