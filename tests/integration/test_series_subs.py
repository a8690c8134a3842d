"""test_series_subs: subscribers of a series (issue 29 item 3; docs/scheduling.md
"Subscribers of a series") on the real stack: herald-dispatcher, herald-worker,
herald-sink and heraldctl.

  1. the API and heraldctl: POST /v1/series/{id}/subscribers adds (a repeat
     adds nothing), DELETE unsubscribes, POST again subscribes again, GET
     counts and pages; bad uids 400, an unknown series 404, an audit row per
     change; heraldctl series subscribe|unsubscribe|subscribers the same, a
     file of uids (--file) too, a bad line refusing the whole file;
     raw SQL: an INSERT for a missing series is refused by the trigger;
  2. three occurrences (FREQ=SECONDLY;INTERVAL=10;COUNT=3) of a series of ten
     subscribers: after the first occurrence's claim one uid unsubscribes and
     a new one subscribes.  The first occurrence reaches the ten (the leaver
     included: an unsubscribe after the claim does not recall it), the second
     and third the nine and the newcomer; each ends `done` with unaccounted
     0 and its delivery rows exactly those uids; no push_subscription row is
     written for any occurrence; the subscriber count of an occurrence is
     its recipients; the pull lists an occurrence to the newcomer and not to
     the leaver, and the newcomer's acknowledgement before its claim makes it
     `pulled` for them, not pushed;
  3. recover of an occurrence: the worker is down while an occurrence of
     eight series subscribers is claimed and chunked; POST
     /v1/tasks/{id}/recover rebuilds its set from the series' subscribers
     (no push_subscription row to read; one who left and came back after the
     claim still counts, by the interval push_series_subscription_past
     kept), and once the worker is back every
     one of them is pushed and the occurrence is `done`, all accounted;
  4. the fill before the claim: an occurrence of 30 series subscribers is
     filled before its claim (its {t<ID>}series key appears); then, still
     before the claim, one member unsubscribes, a newcomer subscribes, a
     member with a push_subscription row of the occurrence unsubscribes and
     one unsubscribes and subscribes again.  The claim reads only the delta
     (its reconciliation reads fewer rows than the members) and the
     recipients are exactly the members at the claim plus the own rows,
     every one sent, unaccounted 0; the same with the key deleted before
     the claim, which then reads every member again;
  5. drips (docs/scheduling.md "Drips"): two daily series in New York's days,
     +0 and +1 day, the same five subscribers subscribing now: the +0 one
     reaches the five, the +1 one nobody (they subscribed today, not
     yesterday), both `done` and accounted, each occurrence's day written as
     New York's midnights in UTC; a drip's bad rule, catch_up and drip_days
     refused with 400.

Usage: test_series_subs.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK HERALDCTL"""
import datetime
import os
import re
import subprocess
import sys
import time
import zoneinfo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, job_wait, sink_uids, wait_until  # noqa: E402
from test_series import insert_series, occurrences  # noqa: E402


def subscribe(env, sid, uids):
    return env.http("POST", "/v1/series/%d/subscribers" % sid, {"uids": uids})


def delivered(env, tid):
    """The uids the delivery log shows sent for task TID."""
    return {int(r[0]) for r in env.sql("SELECT uid FROM push_delivery WHERE task_id = %d AND "
                                       "status = 'sent'" % tid)}


def started(env, tid):
    return env.sql("SELECT started_at IS NOT NULL FROM push_task WHERE id = %d" % tid)[0][0] == "1"


def test_api(env, ctl, cfg):
    sid = insert_series(env, "subs-api", "FREQ=DAILY", "'2030-01-01 09:00:00'")
    status, j = subscribe(env, sid, [11, 12, "13"])
    check(status == 200 and j.get("added") == 3 and j.get("received") == 3,
          "POST subscribers: 3 added (%s %s)" % (status, j))
    status, j = subscribe(env, sid, [11, 12])
    check(status == 200 and j.get("added") == 0, "a repeat adds nothing (%s)" % (j,))
    status, j = env.http("DELETE", "/v1/series/%d/subscribers/12" % sid)
    check(status == 200 and j.get("deleted") == 1, "DELETE: unsubscribed (%s %s)" % (status, j))
    status, j = env.http("DELETE", "/v1/series/%d/subscribers/12" % sid)
    check(status == 200 and j.get("deleted") == 0, "a second DELETE finds none (%s)" % (j,))
    status, j = env.http("GET", "/v1/series/%d/subscribers" % sid)
    check(status == 200 and j.get("count") == 2 and
          [s["uid"] for s in j.get("subscribers", [])] == [11, 13],
          "GET: 2 subscribers, 11 and 13 (%s)" % (j,))
    status, j = subscribe(env, sid, [12])
    check(status == 200 and j.get("added") == 1, "12 subscribes again (%s)" % (j,))
    status, j = env.http("GET", "/v1/series/%d/subscribers?after=11&limit=1" % sid)
    check(status == 200 and j.get("count") == 3 and
          [s["uid"] for s in j.get("subscribers", [])] == [12] and j.get("next_after") == 12,
          "GET ?after=11&limit=1: a page of one and where the next starts (%s)" % (j,))
    status, j = subscribe(env, sid, [0])
    check(status == 400, "uid 0: 400 (%s %s)" % (status, j))
    status, j = env.http("POST", "/v1/series/%d/subscribers" % sid, {"uid": [1]})
    check(status == 400, "no uids member: 400 (%s %s)" % (status, j))
    status, j = env.http("POST", "/v1/series/%d/subscribers" % sid, {"uids": [1], "lead_s": 60})
    check(status == 400 and "lead_s" in str(j), "a lead time: 400 (%s %s)" % (status, j))
    status, j = subscribe(env, 999999999, [1])
    check(status == 404, "an unknown series: 404 (%s)" % (j,))
    status, j = env.http("GET", "/v1/series/%d/subscribers?limit=0" % sid)
    check(status == 400, "limit 0: 400 (%s)" % (j,))
    audits = [a[0] for a in env.sql("SELECT action FROM push_audit WHERE target LIKE "
                                    "'series %d%%' ORDER BY id" % sid)]
    check(audits == ["POST /v1/series/{id}/subscribers"] * 2 +
          ["DELETE /v1/series/{id}/subscribers/{uid}"] * 2 + ["POST /v1/series/{id}/subscribers"],
          "an audit row per change (%s)" % audits)

    def run(*args):
        return subprocess.run([ctl, "-c", cfg, "series"] + [str(a) for a in args],
                              capture_output=True, text=True, timeout=60)
    out = run("subscribe", sid, 14, 15)
    check(out.returncode == 0 and "2 subscribed" in out.stdout,
          "heraldctl series subscribe (%s %s)" % (out.stdout, out.stderr))
    out = run("unsubscribe", sid, 11, 99)
    check(out.returncode == 0 and "1 unsubscribed" in out.stdout,
          "heraldctl series unsubscribe (%s %s)" % (out.stdout, out.stderr))
    out = run("subscribers", sid)
    lines = out.stdout.splitlines()
    check(out.returncode == 0 and lines[:1] == ["series %d: 4 subscriber(s)" % sid] and
          [int(x.split()[0]) for x in lines[1:]] == [12, 13, 14, 15],
          "heraldctl series subscribers (%s %s)" % (out.stdout, out.stderr))
    path = os.path.join(env.dir, "series-uids.txt")
    with open(path, "w") as f:
        f.write("# new ones\n16\n\n  17\n14\n")
    out = run("subscribe", sid, "--file", path)
    check(out.returncode == 0 and "3 uid(s), 2 subscribed" in out.stdout,
          "heraldctl series subscribe --file (%s %s)" % (out.stdout, out.stderr))
    with open(path, "w") as f:
        f.write("16\n17\n")
    out = run("unsubscribe", sid, "--file", path)
    check(out.returncode == 0 and "2 unsubscribed" in out.stdout,
          "heraldctl series unsubscribe --file (%s %s)" % (out.stdout, out.stderr))
    with open(path, "w") as f:
        f.write("18\nx19\n")
    out = run("subscribe", sid, "--file", path)
    check(out.returncode != 0 and ":2:" in out.stderr and "nothing written" in out.stderr and
          env.sql("SELECT COUNT(*) FROM push_series_subscription WHERE series_id = %d AND "
                  "uid = 18" % sid)[0][0] == "0",
          "a bad line refuses the whole file (%s)" % (out.stderr,))
    out = run("subscribe", 999999999, 1)
    check(out.returncode != 0 and "does not exist" in out.stderr,
          "heraldctl: an unknown series refused (%s)" % (out.stderr,))
    bad = env.sql("INSERT INTO push_series_subscription (series_id, uid) VALUES (999999999, 1)",
                  strict=False)
    check(isinstance(bad, str) and "does not exist" in bad,
          "raw SQL: the trigger refuses a missing series (%s)" % (bad,))
    env.sql("UPDATE push_series SET state = 'ended' WHERE id = %d" % sid)


def pulled(env, uid, ack=False):
    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    status, j = env.http("GET", "/v1/users/%d/reminders?date=%s%s" % (uid, day,
                                                                    "&ack=1" if ack else ""))
    return {r["task_id"] for r in j.get("reminders", [])} if status == 200 else None


def test_three(env, record):
    stay = list(range(9292002, 9292011))
    leaver, newcomer = 9292001, 9292011
    start = int(env.sql("SELECT UNIX_TIMESTAMP(UTC_TIMESTAMP()) + 5")[0][0])
    sid = insert_series(env, "subs-three", "FREQ=SECONDLY;INTERVAL=10;COUNT=3",
                        "FROM_UNIXTIME(%d)" % start, lead_s=4)
    status, j = subscribe(env, sid, [leaver] + stay)
    check(status == 200 and j.get("added") == 10, "ten subscribers (%s %s)" % (status, j))
    check(wait_until(lambda: occurrences(env, sid) and started(env, occurrences(env, sid)[0][0]),
                     30, 0.1), "the first occurrence claimed")
    status, _ = env.http("DELETE", "/v1/series/%d/subscribers/%d" % (sid, leaver))
    check(status == 200, "the leaver unsubscribes after the first claim")
    status, _ = subscribe(env, sid, [newcomer])
    check(status == 200, "the newcomer subscribes after the first claim")
    check(wait_until(lambda: len(occurrences(env, sid)) >= 2, 20, 0.1),
          "the second occurrence written")
    second = occurrences(env, sid)[1][0]
    seen_new, seen_left = pulled(env, newcomer, ack=True), pulled(env, leaver)
    check(seen_new is not None and second in seen_new and not started(env, second),
          "the pull lists the second occurrence to the newcomer, who acknowledges it before "
          "its claim (%s)" % (seen_new,))
    check(seen_left is not None and second not in seen_left,
          "the pull does not list it to the leaver (%s)" % (seen_left,))
    check(wait_until(lambda: len(occurrences(env, sid)) == 3 and
                     all(s == "done" for _, _, s in occurrences(env, sid)), 60, 0.3),
          "three occurrences done (%s)" % (occurrences(env, sid),))
    # the newcomer pulled the second: not pushed, counted pulled
    want = [set([leaver] + stay), set(stay), set(stay + [newcomer])]
    for (tid, _, _), uids, npulled in zip(occurrences(env, sid), want, (0, 1, 0)):
        sent, pull, unacc, total = env.task(tid, "sent, pulled, unaccounted, total")
        got = delivered(env, tid)
        check(got == uids and int(sent) == len(uids) and int(pull) == npulled and
              int(unacc) == 0 and int(total) == len(uids),
              "task %d: its recipients are the subscribers at its claim, each sent (or pulled) "
              "and accounted (sent=%s pulled=%s unaccounted=%s total=%s, extra %s, missing %s)"
              % (tid, sent, pull, unacc, total, sorted(got - uids), sorted(uids - got)))
        status, j = env.http("GET", "/v1/tasks/%d/subscribers/count" % tid)
        check(status == 200 and j.get("mysql") == len(uids) + npulled,
              "task %d: the subscriber count is its recipients (%s)" % (tid, j))
    rows = env.sql("SELECT COUNT(*) FROM push_subscription s JOIN push_task t ON t.id = s.task_id "
                   "WHERE t.series_id = %d" % sid)[0][0]
    check(rows == "0", "no push_subscription row written for the occurrences (%s)" % rows)
    check(set([leaver, newcomer] + stay) <= sink_uids(record, [leaver, newcomer] + stay),
          "the sink got every recipient")


def test_recover(env, record, worker, cfg, procs):
    uids = list(range(9293001, 9293009))
    env.stop(procs["worker"])
    start = int(env.sql("SELECT UNIX_TIMESTAMP(UTC_TIMESTAMP()) + 4")[0][0])
    sid = insert_series(env, "subs-recover", "FREQ=SECONDLY;INTERVAL=10;COUNT=1",
                        "FROM_UNIXTIME(%d)" % start, lead_s=3)
    status, _ = subscribe(env, sid, uids)
    check(status == 200, "eight subscribers")
    check(wait_until(lambda: occurrences(env, sid) and occurrences(env, sid)[0][2] == "dispatched",
                     30, 0.2), "the occurrence chunked with no worker (%s)" % (occurrences(env, sid),))
    tid = occurrences(env, sid)[0][0]
    # one of them leaves and comes back while the occurrence runs: still its
    # recipient by the interval the subscribe again closed
    status, _ = env.http("DELETE", "/v1/series/%d/subscribers/%d" % (sid, uids[0]))
    check(status == 200 and subscribe(env, sid, [uids[0]])[0] == 200,
          "uid %d unsubscribes and subscribes again after the claim" % uids[0])
    past = env.sql("SELECT COUNT(*) FROM push_series_subscription_past WHERE series_id = %d "
                   "AND uid = %d" % (sid, uids[0]))[0][0]
    check(past == "1", "the closed interval is kept (%s)" % past)
    status, j = env.http("POST", "/v1/tasks/%d/recover" % tid)
    job, _ = job_wait(lambda p: env.http("GET", p), j) if status == 202 else ({}, [])
    res = job.get("result") or {}
    check(job.get("state") == "done" and res.get("subs") == len(uids),
          "recover rebuilt the set from the series' subscribers (%s %s)" % (status, job))
    procs["worker"] = env.start([worker, "-c", cfg], "worker-2.log")
    check(wait_until(lambda: env.task(tid, "state")[0] == "done", 60, 0.3),
          "the recovered occurrence done (%s)" % (env.task(tid),))
    sent, unacc = env.task(tid, "sent, unaccounted")
    check(delivered(env, tid) == set(uids) and int(unacc) == 0,
          "every series subscriber pushed after the recover (sent=%s unaccounted=%s %s)"
          % (sent, unacc, sorted(delivered(env, tid))))
    check(set(uids) <= sink_uids(record, uids), "the sink got them")


def reconciled(env, proc, tid):
    """(added, read) of task TID's reconciliation in PROC's log, or None."""
    m = re.search(r"task_reconciled.*\btask=%d added=(\d+) read=(\d+)" % tid, env.log(proc))
    return (int(m.group(1)), int(m.group(2))) if m else None


def test_prefill(env, record, procs, drop_key):
    """An occurrence filled before its claim, then changed before it: the
    claim applies the delta (or, with DROP_KEY, reads every member again)
    and the recipients are the members at the claim plus the own rows."""
    base = 9295000 if not drop_key else 9296000
    members = list(range(base + 1, base + 31))
    leaver, own_leaver, again = members[0], members[1], members[2]
    newcomer, own_only = base + 100, base + 101
    # a lead under the scanner's recheck (DSP_RECHECK_MS, 10 s): no sync
    # between the fill and the claim, which applies the changes itself
    start = int(env.sql("SELECT UNIX_TIMESTAMP(UTC_TIMESTAMP()) + 11")[0][0])
    sid = insert_series(env, "subs-prefill-%d" % drop_key, "FREQ=SECONDLY;INTERVAL=10;COUNT=1",
                        "FROM_UNIXTIME(%d)" % start, lead_s=9)
    check(subscribe(env, sid, members)[0] == 200, "thirty subscribers")
    check(wait_until(lambda: occurrences(env, sid), 20, 0.1), "the occurrence written")
    tid = occurrences(env, sid)[0][0]
    check(wait_until(lambda: env.r.cmd("EXISTS", env.key(tid, "series")) == 1, 10, 0.1) and
          env.r.cmd("SCARD", env.key(tid, "subs")) == len(members),
          "task %d: filled before its claim (the series key exists, the set holds the %d)"
          % (tid, len(members)))
    # two push_subscription rows of the occurrence by raw SQL: the set's
    # count stays, so the scanner does not sync again before its recheck
    # (DSP_RECHECK_MS, 10 s, after the fill: past the claim), and the claim
    # reads them by their epoch
    env.sql("INSERT INTO push_subscription (task_id, uid) VALUES (%d, %d), (%d, %d)"
            % (tid, own_leaver, tid, own_only))
    for uid in (leaver, own_leaver, again):
        status, _ = env.http("DELETE", "/v1/series/%d/subscribers/%d" % (sid, uid))
        check(status == 200, "uid %d unsubscribes before the claim" % uid)
    check(subscribe(env, sid, [newcomer, again])[0] == 200,
          "a newcomer subscribes, uid %d again, before the claim" % again)
    if drop_key:
        env.r.cmd("DEL", env.key(tid, "series"))
    check(not started(env, tid), "task %d: every change came before its claim" % tid)
    check(wait_until(lambda: env.task(tid, "state")[0] == "done", 40, 0.3),
          "task %d done (%s)" % (tid, env.task(tid)))
    want = set(members) - {leaver} | {newcomer, own_only}
    sent, unacc, total = env.task(tid, "sent, unaccounted, total")
    # done follows Redis's counts; the workers' reporters write the
    # delivery rows in their next round (a run read 1 of 31 right after)
    wait_until(lambda: len(delivered(env, tid)) >= len(want), 30, 0.3)
    got = delivered(env, tid)
    check(got == want and int(sent) == len(want) and int(unacc) == 0 and int(total) == len(want),
          "task %d: the members at the claim and the own rows, each sent, accounted (sent=%s "
          "unaccounted=%s total=%s, extra %s, missing %s)"
          % (tid, sent, unacc, total, sorted(got - want), sorted(want - got)))
    check(want <= sink_uids(record, sorted(want)) and leaver not in sink_uids(record),
          "the sink got them, not the leaver")
    # the claim: the two own rows by their epoch (one new to the set), then
    # the delta: the newcomer and the one back (by subscribed_at), the two
    # leavers (by unsubscribed_at); the newcomer added, the leaver taken
    # out, the leaver with an own row kept.  Without the key: the set
    # emptied and every recipient read and added again.
    rec = reconciled(env, procs["dispatcher"], tid)
    check(rec == ((len(want), len(want)) if drop_key else (2, 6)),
          "task %d: the claim's reconciliation added and read %s: %s" % (
              tid, rec, "every recipient again, the key gone" if drop_key else "the delta only"))


def test_drip(env):
    """Two daily drips of the same subscribers, in New York's days: +0 days
    takes those who subscribed today (NY), +1 day those of yesterday
    (none)."""
    zone = zoneinfo.ZoneInfo("America/New_York")
    now = datetime.datetime.now(zone)
    start = (now + datetime.timedelta(seconds=6)).replace(microsecond=0)
    base = {"channel": "webhook", "topic": env.topic, "title": "{{uid}}", "tz": zone.key,
            "rrule": "FREQ=DAILY;COUNT=1", "dtstart": start.strftime("%Y-%m-%d %H:%M:%S"),
            "catch_up": "all", "lead_s": 3}
    for bad, why in ((dict(rrule="FREQ=WEEKLY;COUNT=1"), "FREQ=DAILY"),
                     (dict(rrule="FREQ=DAILY;BYDAY=MO"), "FREQ=DAILY"),
                     (dict(catch_up="latest"), "catch_up must be all"),
                     (dict(drip_days=3651), "drip_days")):
        status, j = env.http("POST", "/v1/series", dict(base, name="drip-bad", drip_days=3, **bad)
                             if "drip_days" not in bad else dict(base, name="drip-bad", **bad))
        check(status == 400 and why in str(j), "a drip %s: 400 (%s %s)" % (bad, status, j))
    ids = {}
    for days in (0, 1):
        status, j = env.http("POST", "/v1/series", dict(base, name="drip-%d" % days,
                                                        drip_days=days))
        check(status == 201 and j.get("drip_days") == days,
              "a drip of +%d days created (%s %s)" % (days, status, j))
        ids[days] = j.get("id", 0)
    uids = list(range(9294001, 9294006))
    for sid in ids.values():
        check(subscribe(env, sid, uids)[0] == 200, "series %d: five subscribers today" % sid)
    check(wait_until(lambda: all(len(occurrences(env, s)) == 1 and occurrences(env, s)[0][2] ==
                                 "done" for s in ids.values()), 40, 0.3),
          "both drips' occurrences done (%s)" % ({d: occurrences(env, s) for d, s in ids.items()},))
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for days, sid in ids.items():
        occ = occurrences(env, sid)
        if not occ:
            continue
        tid = occ[0][0]
        want = set(uids) if days == 0 else set()
        sent, unacc = env.task(tid, "sent, unaccounted")
        check(delivered(env, tid) == want and int(sent) == len(want) and int(unacc) == 0,
              "drip +%d: %d of the five pushed, accounted (sent=%s unaccounted=%s)"
              % (days, len(want), sent, unacc))
        day = (midnight - datetime.timedelta(days=days)).replace(tzinfo=None)
        frm = day.replace(tzinfo=zone).astimezone(datetime.timezone.utc)
        until = (day + datetime.timedelta(days=1)).replace(tzinfo=zone).astimezone(
            datetime.timezone.utc)
        got = env.sql("SELECT DATE_FORMAT(drip_from, '%%Y-%%m-%%d %%H:%%i:%%s'), "
                      "DATE_FORMAT(drip_until, '%%Y-%%m-%%d %%H:%%i:%%s') FROM push_task "
                      "WHERE id = %d" % tid)[0]
        check(list(got) == [frm.strftime("%Y-%m-%d %H:%M:%S"), until.strftime("%Y-%m-%d %H:%M:%S")],
              "drip +%d: the day taken is New York's %s, as UTC instants (%s)"
              % (days, day.date(), got))


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    dispatcher, worker, sink, ctl = sys.argv[1:]
    env = Env("series_subs")
    try:
        if not env.create_topic():
            return 77
        channel, record = env.start_sink(sink)
        cfg = env.config({"webhook": channel})
        procs = {"dispatcher": env.start([dispatcher, "-c", cfg], "dispatcher.log"),
                 "worker": env.start([worker, "-c", cfg], "worker.log")}
        check(env.wait_ready(env.dsp_port) and env.wait_ready(env.wk_port), "daemons serve")
        test_api(env, ctl, cfg)
        test_three(env, record)
        test_recover(env, record, worker, cfg, procs)
        test_prefill(env, record, procs, drop_key=False)
        test_prefill(env, record, procs, drop_key=True)
        test_drip(env)
    finally:
        env.sql("DELETE FROM push_job WHERE name = 'series:%s'" % env.topic)
        for table in ("push_series_subscription", "push_series_subscription_past"):
            env.sql("DELETE s FROM %s s JOIN push_series p ON p.id = s.series_id "
                    "WHERE p.topic = '%s'" % (table, env.topic))
        env.sql("DELETE FROM push_series WHERE topic = '%s'" % env.topic)
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
