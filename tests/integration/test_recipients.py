#!/usr/bin/env python3
"""test_recipients: recipients as first-class (docs/recipients.md) on the real
stack, with one herald-dispatcher, one herald-worker and herald-sink:

  1. profiles by API (PUT, GET, PATCH merging attributes, DELETE), each
     mirrored into herald:user:<uid> at once; by heraldctl user set/get and
     a bulk import of CSV and JSON Lines (progress on stderr, a refused row
     reported, exit 1); by raw SQL (insert, update, delete, a preference
     row), picked up by the dispatcher's sync; a raw row with an unknown
     zone mirrored without it and counted (mirror_refused);
  2. 28 bad requests, each answered 4xx and changing nothing in MySQL or
     Redis;
  3. the profiles' hashes lost (the test's keys deleted, the synced mark
     too), then a local-time campaign: the zones come from MySQL, refilled
     before the plan, and each zone's recipients land at its instant (the
     task's default zone is hours away, so a lost zone would hold them);
  4. consent on a webhook channel: opt-out by category, by channel type and
     by both; a mandatory category reaching everyone; a user's own quiet
     hours deferring a push to their end, then delivering it; a task whose
     expire_at comes first counting them expired; every task done with
     every subscription in one outcome, in MySQL, the API, heraldctl status
     and the worker's metrics;
  5. the pull leaves out an opted-out category, also for a profile Redis
     lost (read from MySQL); preferences through a
     client token (GET, PUT, another uid's refused).

usage: test_recipients.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK HERALDCTL
(exit 77 without HERALD_TEST_CONFIG)"""
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import (Env, check, finish, hms, metric, recipients_yaml,  # noqa: E402
                          sink_times, wait_until, wall)

UNSUB_KEYS = {"k2": "recipients-test-key-two-0123456789abcdef",
              "k1": "recipients-test-key-one-0123456789abcdef"}
RECIPIENTS = recipients_yaml([("k2", UNSUB_KEYS["k2"]), ("k1", UNSUB_KEYS["k1"])],
                             token_ttl_s=3600, attributes_max_bytes=512)
CLIENT_KEY = "recipients-client-key-0123456789abcdef"
SYNC_WAIT_S = 15  # the dispatcher's profile sync runs every 5 s


class Case:
    """What one test run shares: the env, the uid range, heraldctl."""

    def __init__(self, env, ctl, cfg, base):
        self.env, self.ctl, self.cfg, self.base = env, ctl, cfg, base

    def uid(self, k):
        return self.base + k

    def hash(self, uid):
        """herald:user:<uid> as a dict."""
        flat = self.env.r.cmd("HGETALL", "%suser:%d" % (self.env.prefix, uid)) or []
        return dict(zip(flat[::2], flat[1::2]))

    def row(self, uid):
        """uid's push_user row and opt-outs, for before/after comparisons."""
        rows = self.env.sql("SELECT tz, locale, attributes, quiet_start, quiet_end FROM push_user "
                            "WHERE uid = %d" % uid)
        prefs = self.env.sql("SELECT category, channel FROM push_user_pref WHERE uid = %d "
                             "ORDER BY 1, 2" % uid)
        return (rows, prefs)

    def heraldctl(self, *args, stdin=None):
        p = subprocess.run([self.ctl, "-c", self.cfg] + [str(a) for a in args], input=stdin,
                           capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr


# ---- 1. profiles ------------------------------------------------------------------


def test_profiles_api(c):
    env, u = c.env, c.uid(1)
    st, body = env.http("PUT", "/v1/users/%d" % u, {
        "tz": "Europe/Berlin", "locale": "de-DE",
        "attributes": {"name": "Ana", "plan": "pro", "visits": 3, "tags": ["a", "b"]},
        "quiet_hours": {"start": "22:00", "end": "07:00"}})
    check(st == 201 and body.get("tz") == "Europe/Berlin" and body["attributes"]["visits"] == 3,
          "PUT creates the profile: 201 (%s %s)" % (st, body))
    h = c.hash(u)
    check(h.get("tz") == "Europe/Berlin" and h.get("locale") == "de-DE" and h.get("name") == "Ana"
          and h.get("visits") == "3" and h.get("tags") == '["a","b"]' and
          h.get("_quiet") == "79200-25200", "the hash mirrors it at once (%s)" % h)
    st, body = env.http("PATCH", "/v1/users/%d" % u,
                        {"attributes": {"plan": None, "name": "Ana B"}, "tz": "Asia/Tokyo"})
    check(st == 200 and body["attributes"] == {"name": "Ana B", "visits": 3, "tags": ["a", "b"]}
          and body["tz"] == "Asia/Tokyo" and body["locale"] == "de-DE",
          "PATCH merges the attributes (null removes one) and keeps what it does not name")
    h = c.hash(u)
    check("plan" not in h and h.get("name") == "Ana B" and h.get("tz") == "Asia/Tokyo",
          "the hash follows the PATCH (%s)" % h)
    st, body = env.http("GET", "/v1/users/%d" % u)
    check(st == 200 and body.get("quiet_hours") == {"start": "22:00", "end": "07:00"} and
          body.get("created_at", "").endswith("Z"), "GET answers it (%s)" % body)
    st, body = env.http("PUT", "/v1/users/%d" % u, {"tz": "UTC"})
    check(st == 200 and body["attributes"] == {} and body["quiet_hours"] is None,
          "PUT replaces the whole profile: 200")
    check(c.hash(u) == {"tz": "UTC"}, "the hash holds just the zone now")
    st, body = env.http("DELETE", "/v1/users/%d" % u)
    check(st == 200 and body.get("deleted") == 1 and c.hash(u) == {} and
          env.http("GET", "/v1/users/%d" % u)[0] == 404, "DELETE removes both stores")
    st, _ = env.http("PATCH", "/v1/users/%d" % u, {"tz": "UTC"})
    check(st == 404 and c.row(u)[0] == [], "PATCH of no profile: 404, nothing created")


def test_profiles_cli(c):
    env = c.env
    u = c.uid(2)
    rc, out, err = c.heraldctl("user", "set", u, "--tz", "America/New_York", "--attr", "name=Bo",
                               "--quiet", "21:30-06:45")
    check(rc == 0 and "created" in out, "heraldctl user set creates (%s %s)" % (out, err))
    rc, out, _ = c.heraldctl("user", "get", u, "--json")
    got = json.loads(out) if rc == 0 else {}
    check(got.get("tz") == "America/New_York" and got.get("attributes") == {"name": "Bo"} and
          got.get("quiet_hours") == {"start": "21:30", "end": "06:45"},
          "heraldctl user get --json (%s)" % got)
    rc, out, err = c.heraldctl("user", "set", u, "--tz", "Not/AZone")
    check(rc == 2 and "Not/AZone" in err and c.hash(u).get("tz") == "America/New_York",
          "an unknown zone refused (exit 2), nothing changed")
    # CSV: 3,000 rows, one with an unknown zone, a quoted attribute.
    lo = c.uid(10000)
    lines = ["uid,tz,locale,quiet_start,quiet_end,name,city"]
    for k in range(3000):
        tz = "Mars/Base" if k == 1234 else ("Europe/Paris" if k % 2 else "UTC")
        lines.append('%d,%s,fr-FR,,,"Nom, %d",Lyon' % (lo + k, tz, k))
    rc, out, err = c.heraldctl("user", "import", "-", stdin="\n".join(lines) + "\n")
    check(rc == 1 and "created 2999," in out and "refused 1" in out and "line 1236 refused" in err
          and "rows imported" in err, "import CSV: 2,999 created, line 1236 refused (%s / %s)"
          % (out.strip(), err.strip()[-200:]))
    h = c.hash(lo + 7)
    check(h.get("tz") == "Europe/Paris" and h.get("name") == "Nom, 7" and h.get("city") == "Lyon",
          "an imported profile's hash (%s)" % h)
    check(c.hash(lo + 1234) == {} and c.row(lo + 1234)[0] == [], "the refused row nowhere")
    # JSON Lines, a uid past 2^53 kept exact.
    big = 9007199254740993
    jl = [json.dumps({"uid": c.uid(20000 + k), "tz": "Asia/Kolkata",
                      "attributes": {"n": k}}) for k in range(500)]
    jl.append('{"uid": %d, "tz": "UTC"}' % big)
    rc, out, err = c.heraldctl("user", "import", "--format", "jsonl", "-",
                               stdin="\n".join(jl) + "\n")
    check(rc == 0 and "created 501," in out, "import JSON Lines: 501 created (%s %s)" % (out, err))
    audit = env.sql("SELECT after_json FROM push_audit WHERE action = 'heraldctl user import' "
                    "ORDER BY id DESC LIMIT 1")
    row = json.loads(audit[0][0]) if audit else {}
    check(sorted(row) == ["created", "received", "replaced"] and row["received"] == 501 and
          row["created"] + row["replaced"] == 501,
          "the import's batch has its audit row, the counts only (%s)" % audit)
    check(env.sql("SELECT tz FROM push_user WHERE uid = %d" % big) == [["UTC"]] and
          c.hash(big).get("tz") == "UTC", "a uid past 2^53 imported exactly")
    env.sql("DELETE FROM push_user WHERE uid = %d" % big)


def test_profiles_sql(c):
    env, u, v = c.env, c.uid(3), c.uid(4)
    env.sql("INSERT INTO push_user (uid, tz, attributes) VALUES (%d, 'Australia/Sydney', "
            "'{\"name\": \"Cy\"}'), (%d, 'Mars/Base', '{\"name\": \"Di\"}')" % (u, v))
    check(wait_until(lambda: c.hash(u).get("tz") == "Australia/Sydney", SYNC_WAIT_S, 0.3),
          "raw INSERT reaches Redis through the sync (%s)" % c.hash(u))
    check(wait_until(lambda: c.hash(v).get("name") == "Di", SYNC_WAIT_S, 0.3) and
          "tz" not in c.hash(v), "a raw row's unknown zone is left out, the rest mirrored")
    env.sql("UPDATE push_user SET quiet_start = '23:00', quiet_end = '06:00' WHERE uid = %d" % u)
    env.sql("INSERT INTO push_user_pref (uid, category, channel) VALUES (%d, 'marketing', '*')"
            % u)
    check(wait_until(lambda: c.hash(u).get("_quiet") == "82800-21600" and
                     c.hash(u).get("_optout") == "marketing/*", SYNC_WAIT_S, 0.3),
          "raw UPDATE and a raw preference row reach Redis (%s)" % c.hash(u))
    env.sql("DELETE FROM push_user WHERE uid = %d" % u)
    check(wait_until(lambda: c.hash(u) == {}, SYNC_WAIT_S, 0.3),
          "raw DELETE (and its cascaded preferences) empties the hash")
    return v


# ---- 2. bad input ---------------------------------------------------------------


def test_bad_input(c):
    env, u = c.env, c.uid(5)
    env.http("PUT", "/v1/users/%d" % u, {"tz": "UTC", "attributes": {"name": "Ed"}})
    env.http("PUT", "/v1/users/%d/preferences" % u,
             {"opt_out": [{"category": "marketing"}], "quiet_hours": None})
    before = (c.row(u), c.hash(u), c.row(c.uid(6)), c.hash(c.uid(6)))
    P = "/v1/users/%d" % u
    cases = [
        ("PUT", P, {"tz": "Mars/Base"}, 400),
        ("PUT", P, {"tz": "../../etc/passwd"}, 400),
        ("PUT", P, {"attributes": ["a"]}, 400),
        ("PUT", P, {"attributes": {"blob": "x" * 600}}, 400),
        ("PUT", P, {"attributes": {"tz": "UTC"}}, 400),
        ("PUT", P, {"attributes": {"_quiet": "0-1"}}, 400),
        ("PUT", P, {"attributes": {"1abc": 1}}, 400),
        ("PUT", P, {"email": "e@x.org"}, 400),
        ("PUT", P, {"locale": "de_DE"}, 400),
        ("PUT", P, {"quiet_hours": {"start": "25:00", "end": "07:00"}}, 400),
        ("PUT", P, {"quiet_hours": {"start": "07:00", "end": "07:00"}}, 400),
        ("PUT", P, {"quiet_hours": {"start": "22:00"}}, 400),
        ("PUT", P, None, 400, b"{not json"),
        ("PUT", P, [1, 2], 400),
        ("PUT", "/v1/users/0", {"tz": "UTC"}, 400),
        ("PUT", "/v1/users/abc", {"tz": "UTC"}, 400),
        ("PATCH", P, {"tz": 123}, 400),
        ("PATCH", "/v1/users/%d" % c.uid(6), {"tz": "UTC"}, 404),
        ("PUT", P + "/preferences", {"opt_out": [{"category": "promo"}]}, 400),
        ("PUT", P + "/preferences", {"opt_out": [{"category": "*", "channel": "sms"}]}, 400),
        ("PUT", P + "/preferences", {"opt_out": [{"category": "*", "colour": "x"}]}, 400),
        ("PUT", P + "/preferences", {"opt_out": "marketing"}, 400),
        ("PUT", P + "/preferences", {"quiet_hours": {"start": "1:2:3:4", "end": "07:00"}}, 400),
        ("PUT", P + "/preferences", {"mute": True}, 400),
        ("POST", "/v1/suppressions", {"platform": "email", "address": "a@b.c", "reason": "spam"},
         400),
        ("POST", "/v1/suppressions", {"platform": "email", "address": "not-an-email",
                                      "reason": "bounced"}, 400),
        ("DELETE", "/v1/suppressions?platform=email", None, 400),
        ("PUT", P, {"tz": "UTC", "attributes": {"k": "v" * 70000}}, 413),
    ]
    for case in cases:
        method, path, body, want = case[:4]
        raw = case[4] if len(case) > 4 else None
        st, got = env.http(method, path, body, raw=raw)
        check(st == want, "%s %s %s: %d (got %s %s)" % (method, path, json.dumps(body)[:60]
                                                          if body is not None else raw, want, st,
                                                          str(got)[:120]))
    st, _ = env.http("PUT", P, None, raw=b'{"tz":"UTC"}', headers={"Content-Type": "text/plain"})
    check(st == 415, "a body that is not JSON's type: 415")
    after = (c.row(u), c.hash(u), c.row(c.uid(6)), c.hash(c.uid(6)))
    check(before == after and env.sql("SELECT COUNT(*) FROM push_suppression WHERE address IN "
                                      "('a@b.c', 'not-an-email')") == [["0"]],
          "%d refusals changed nothing in MySQL or Redis" % (len(cases) + 1))


# ---- 3. a lost Redis: profiles refilled before the plan ------------------------------


def test_loss_local_time(c, record):
    env = c.env
    zones = {"Europe/Berlin": list(range(c.uid(100), c.uid(130))),
             "Asia/Kolkata": list(range(c.uid(200), c.uid(230))),
             "UTC": list(range(c.uid(300), c.uid(330)))}
    for zone, uids in zones.items():
        for u in uids:
            env.http("PUT", "/v1/users/%d" % u, {"tz": zone})
    # The loss: every profile hash of this prefix and the synced mark.
    keys = [k for k in env.r.scan(env.prefix + "user*")]
    env.r.unlink_many(keys)
    check(c.hash(zones["UTC"][0]) == {} and
          env.r.cmd("EXISTS", env.prefix + "user_synced") == 0, "profiles lost from Redis")
    start = time.time()
    due = int(start) + 8
    every = [u for uids in zones.values() for u in uids]
    t = env.insert_task("local-refill", "hook", due="'%s'" % wall(due), local_time=1,
                        default_tz="'America/New_York'", chunk_size=20,
                        _subs=",".join("(@t,%d)" % u for u in every))
    check(wait_until(lambda: set(every) <= set(sink_times(record)), 30),
          "Berlin, Kolkata and UTC recipients all pushed (%d of %d): their zones came "
          "from MySQL, not the default" % (len(set(every) & set(sink_times(record))),
                                          len(every)))
    times = sink_times(record)
    utc_first = min(times.get(u, 0) for u in zones["UTC"])
    check(utc_first >= due * 1000 - 50,
          "UTC recipients at their instant, not before (%.3f s after due)"
          % (utc_first / 1000 - due))
    check(wait_until(lambda: env.task(t, "state")[0] == "done", 30), "the task ends done")
    check(c.hash(zones["Asia/Kolkata"][3]).get("tz") == "Asia/Kolkata",
          "the lost hashes are back in Redis")
    return t


# ---- 4. consent ------------------------------------------------------------------


def outcomes(env, t):
    st, body = env.http("GET", "/v1/tasks/%d" % t)
    return body.get("progress", {}).get("outcomes", {}) if st == 200 else {}


def test_consent(c, record):
    env = c.env
    out_mkt, out_hook, out_pair, quiet, plain = ([c.uid(b + k) for k in range(10)]
                                                 for b in (400, 500, 600, 700, 800))
    for u in out_mkt:
        env.http("PUT", "/v1/users/%d/preferences" % u, {"opt_out": [{"category": "marketing"}]})
    for u in out_hook:
        env.http("PUT", "/v1/users/%d/preferences" % u, {"opt_out": [{"channel": "webhook"}]})
    for u in out_pair:
        env.http("PUT", "/v1/users/%d/preferences" % u,
                 {"opt_out": [{"category": "marketing", "channel": "webhook"}]})
    now = time.time()
    quiet_end = now + 14
    for u in quiet:
        env.http("PUT", "/v1/users/%d" % u,
                 {"tz": "UTC", "quiet_hours": {"start": hms(now - 3600), "end": hms(quiet_end)}})
    everyone = out_mkt + out_hook + out_pair + quiet + plain
    subs = ",".join("(@t,%d)" % u for u in everyone)
    tm = env.insert_task("mkt", "hook", category="'marketing'", chunk_size=15, _subs=subs)
    ts = env.insert_task("sec", "hook", category="'security'", chunk_size=15, _subs=subs)
    tr = env.insert_task("rem", "hook", category="'reminder'", chunk_size=15, _subs=subs)
    te = env.insert_task("exp", "hook", category="'marketing'", chunk_size=15,
                         expire_at="UTC_TIMESTAMP(3) + INTERVAL 6 SECOND",
                         _subs=",".join("(@t,%d)" % u for u in quiet))
    check(wait_until(lambda: env.task(ts, "state")[0] == "done" and
                     env.task(te, "state")[0] == "done", 40),
          "the security and expiring tasks done")
    o = outcomes(env, ts)
    check(o.get("sent") == len(everyone) and o.get("opted_out") == 0,
          "mandatory category: everyone sent, quiet hours and opt-outs skipped (%s)" % o)
    o = outcomes(env, te)
    check(o.get("expired") == len(quiet) and o.get("sent") == 0 and o.get("unaccounted") == 0,
          "deferred past expire_at: counted expired, done (%s)" % o)
    check(wait_until(lambda: env.task(tm, "state")[0] == "done" and
                     env.task(tr, "state")[0] == "done", 60), "marketing and reminder tasks done")
    o = outcomes(env, tm)
    check(o.get("opted_out") == 30 and o.get("sent") == 20 and o.get("unaccounted") == 0,
          "marketing: opted out by category, channel and both (30), the others sent (%s)" % o)
    o = outcomes(env, tr)
    check(o.get("opted_out") == 10 and o.get("sent") == 40,
          "reminder: only the webhook opt-outs hold (%s)" % o)
    # The delivery log is written by the workers' reporters in batches, after
    # the outcomes are counted: a task can be done before its last rows land.
    def logged():
        got = {int(u): s for u, s in env.sql("SELECT uid, status FROM push_delivery "
                                             "WHERE task_id = %d" % tm)}
        return (all(got.get(u) == "opted_out" for u in out_mkt + out_hook + out_pair) and
                all(got.get(u) == "sent" for u in quiet + plain))
    check(wait_until(logged, 10), "push_delivery: one row each, opted_out or sent")
    # The quiet users' pushes of the marketing task came after their quiet
    # hours (the delivery log's time of each push).
    first = env.sql("SELECT MIN(UNIX_TIMESTAMP(at)) FROM push_delivery WHERE task_id = %d AND "
                    "uid BETWEEN %d AND %d" % (tm, min(quiet), max(quiet)))
    first = float(first[0][0]) if first and first[0][0] != "NULL" else 0
    check(first >= quiet_end - 1,
          "quiet hours: deferred, then delivered after they ended (%.1f s after their end)"
          % (first - quiet_end))
    row = env.task(tm, "state, sent, opted_out, suppressed, unaccounted")
    check(row == ["done", "20", "30", "0", "0"], "push_task counters (%s)" % row)
    rc, out, _ = c.heraldctl("status", tm)
    check(rc == 0 and "opted_out" in out and "30" in out, "heraldctl status lists opted_out")
    rc, out, _ = c.heraldctl("list", "--json")
    listed = [t for t in json.loads(out) if t["id"] == tm] if rc == 0 else []
    check(listed and listed[0].get("opted_out") == 30, "heraldctl list --json: opted_out")
    text = env.metrics(env.wk_port)
    check(metric(text, "herald_pushes_total", '{channel="hook",outcome="opted_out"}') == 40
          and (metric(text, "herald_recipients_deferred_total", '{channel="hook"}') or 0) >= 30,
          "metrics: opted_out pushes (40) and deferred recipients counted (%s, %s)" % (
              metric(text, "herald_pushes_total", '{channel="hook",outcome="opted_out"}'),
              metric(text, "herald_recipients_deferred_total", '{channel="hook"}')))
    return tm


# ---- 5. the pull and the client-token preferences ---------------------------------------


def test_pull_and_client(c):
    env = c.env
    out, plain = c.uid(900), c.uid(901)
    env.http("PUT", "/v1/users/%d/preferences" % out, {"opt_out": [{"category": "marketing"}]})
    for cat in ("marketing", "security"):
        env.insert_task("pull-" + cat, "hook", due="UTC_TIMESTAMP(3) + INTERVAL 1 HOUR",
                        freeze_at="UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE", category="'%s'" % cat,
                        _subs="(@t,%d),(@t,%d)" % (out, plain))
    # A due time an hour ahead may be tomorrow already; the pull reads
    # that day then.
    day = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 3600))

    def names(uid):
        st, body = env.http("GET", "/v1/users/%d/reminders?date=%s" % (uid, day))
        return sorted(r["name"] for r in body.get("reminders", [])) if st == 200 else None

    check(names(plain) == ["pull-marketing", "pull-security"], "the pull: both for a plain user")
    check(names(out) == ["pull-security"],
          "the pull leaves out the opted-out category (the mandatory one stays)")
    # Redis lost the profile (and the book's mark): the pull reads it from
    # MySQL rather than answer without the opt-out.
    env.r.cmd("UNLINK", "%suser:%d" % (env.prefix, out), env.prefix + "user_synced")
    check(names(out) == ["pull-security"] and c.hash(out).get("_optout") == "marketing/*",
          "a profile Redis lost: the pull refills it and still leaves the category out")
    rc, tok, err = c.heraldctl("token", out)
    tok = tok.strip()
    st, body = env.http("GET", "/v1/users/%d/preferences" % out, token=tok)
    check(st == 200 and body.get("opt_out") == [{"category": "marketing", "channel": "*"}] and
          any(x["name"] == "security" and x["mandatory"] for x in body.get("categories", [])),
          "client token: GET its preferences (%s %s)" % (st, body))
    st, body = env.http("PUT", "/v1/users/%d/preferences" % out,
                        {"opt_out": [], "quiet_hours": {"start": "23:00", "end": "06:00"}},
                        token=tok)
    check(st == 200 and body.get("opt_out") == [] and
          env.sql("SELECT quiet_start FROM push_user WHERE uid = %d" % out) == [["23:00:00"]],
          "client token: PUT its preferences")
    check(names(out) == ["pull-marketing", "pull-security"], "opted in again: the pull has both")
    st, _ = env.http("GET", "/v1/users/%d/preferences" % plain, token=tok)
    check(st == 403, "client token: another uid's preferences refused (403)")
    st, _ = env.http("GET", "/v1/users/%d" % out, token=tok)
    check(st == 403, "client token: the profile route is the admin's (403)")


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    dispatcher, worker, sink, ctl = sys.argv[1:5]
    env = Env("recipients")
    base = 7_000_000_000 + random.randrange(1 << 30) * 100_000
    c = None
    try:
        hook, record = env.start_sink(sink)
        cfg = env.config({"hook": hook}, extra_top=RECIPIENTS,
                         api_extra=", client_keys: [{id: c1, secret: %s}]" % CLIENT_KEY)
        if not env.create_topic():
            return 77
        env.start_daemons(dispatcher, worker, cfg)
        c = Case(env, ctl, cfg, base)
        check(wait_until(lambda: env.r.cmd("EXISTS", env.prefix + "user_synced") == 1,
                         SYNC_WAIT_S, 0.3), "the dispatcher syncs the profiles (user_synced)")
        test_profiles_api(c)
        test_profiles_cli(c)
        bad = test_profiles_sql(c)
        test_bad_input(c)
        test_loss_local_time(c, record)
        test_consent(c, record)
        test_pull_and_client(c)
        dsp_log = env.log(env.procs[1])
        check("event=mirror_refused" in dsp_log and "book=user" in dsp_log and
              "uid=%d" % bad in dsp_log, "the refused raw row is logged (mirror_refused)")
    finally:
        env.drop_users(base, base + 99_999)
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
