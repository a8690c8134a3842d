#!/usr/bin/env python3
"""test_series_variants: per-locale variants of a series (issue 32;
docs/scheduling.md "Series", docs/api.md "Variants") on the real stack, with
one herald-dispatcher, one herald-worker and a webhook receiver on loopback:

  1. a series created by POST /v1/series with three variants (pt-BR, pt, de)
     in its body, FREQ=SECONDLY;INTERVAL=6;COUNT=3: its view shows the
     variants; each of its three occurrences (6 s apart, as
     integration_series keeps them) gets a copy of the variants
     (push_task_variant, written with the occurrence), and each of its 50
     recipients in five kinds of profile — pt-BR, pt-PT (falls back to pt),
     de-AT (to de), fr-FR and none (the series' own content) — receives its
     locale's text, counted per variant (variant_counts of every
     occurrence);
  2. a rewalk of that series (next_at reset, as when a dispatcher died
     between the occurrence's insert and the series' bookkeeping) finds the
     occurrences written (the unique key of (series_id, occurrence_at)) and
     copies no variant twice: the series ends again without an error;
  3. a series written by raw SQL (push_series and push_series_variant):
     its occurrence carries the rows' variants to its recipients; a raw row
     that is no language tag fails its series with last_error naming it;
  4. `heraldctl series create --variant L=JSON` writes push_series_variant
     rows, `series show` lists them; a locale twice is refused with nothing
     written;
  5. bad variants of POST /v1/series answered 400 invalid_variant with
     nothing written: no language tag, "default", a locale twice, an
     unknown field, not an array, subject on a webhook channel, a bad
     template, and on an fcm channel a variant's text past FCM's 4096-byte
     message (the limit named, as hr_variant_fits checks a task's).

usage: test_series_variants.py HERALD_DISPATCHER HERALD_WORKER HERALDCTL
(exit 77 without HERALD_TEST_CONFIG)"""
import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, wait_until  # noqa: E402
import variants_env  # noqa: E402
from variants_env import (BAD_VARIANTS, BODY, KINDS, PAYLOAD, TITLE, VARIANTS,  # noqa: E402
                          expected, variant_rows, want_counts)

N = 50


def wall_in(env, s):
    """The UTC wall time S seconds ahead, as dtstart takes it."""
    return env.sql("SELECT DATE_FORMAT(UTC_TIMESTAMP() + INTERVAL %d SECOND, "
                   "'%%Y-%%m-%%d %%H:%%i:%%s')" % s)[0][0]


def occurrences(env, series):
    return [(int(a), b) for a, b in env.sql(
        "SELECT id, state FROM push_task WHERE series_id = %d ORDER BY occurrence_at" % series)]


def series_row(env, series):
    return env.sql("SELECT state, occurrences, COALESCE(last_error, ''), "
                   "COALESCE(next_at, 'NULL') FROM push_series WHERE id = %d" % series)[0]


def received(rx, path, task):
    """{uid: (title, body)} of the receiver's requests of TASK on PATH."""
    got = {}
    for _, headers, body, _ in rx.by_path(path):
        if headers.get("Idempotency-Key", "").startswith("herald-%d-" % task):
            doc = json.loads(body)
            got.setdefault(int(doc["uid"]), (doc["title"], doc["body"]))
    return got


def run_occurrences(env, sid, uids, want_n, timeout_s):
    """Subscribes UIDS to each occurrence of SID while it is scheduled, until
    WANT_N occurrences are done.  Returns the occurrences."""
    subscribed = set()
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        occ = occurrences(env, sid)
        for tid, state in occ:
            if tid not in subscribed and state == "scheduled":
                st, _ = env.http("POST", "/v1/tasks/%d/subscribers" % tid, {"uids": uids})
                if st == 200:
                    subscribed.add(tid)
        if len(occ) == want_n and all(s == "done" for _, s in occ):
            break
        time.sleep(0.3)
    return occurrences(env, sid)


def check_occurrence(env, rx, path, task, uids, what):
    rows = env.sql("SELECT vkey, COALESCE(title, 'NULL') FROM push_task_variant "
                   "WHERE task_id = %d ORDER BY vkey" % task)
    check([r[0] for r in rows] == ["de", "pt", "pt-BR"],
          "%s: the series' variants copied once to the task (%s)" % (what, rows))
    got = received(rx, path, task)
    wrong = [(u, got.get(u), expected(KINDS[k % 5][1], u)) for k, u in enumerate(uids)
             if got.get(u) != expected(KINDS[k % 5][1], u)]
    check(len(got) == len(uids) and not wrong,
          "%s: each of %d recipients got its locale's text (%d received, wrong %s)"
          % (what, len(uids), len(got), wrong[:3]))
    want = want_counts(len(uids), "sent")
    counts = {}

    def counted():
        counts.clear()
        counts.update(env.http("GET", "/v1/tasks/%d" % task)[1].get("variant_counts") or {})
        return counts == want
    check(wait_until(counted, 20, 0.3),
          "%s: variant_counts per variant %s (%s)" % (what, want, counts))


def test_api_series(env, rx, uids):
    st, made = env.http("POST", "/v1/series", {
        "name": "sv-api", "channel": "hooka", "topic": env.topic, "title": TITLE, "body": BODY,
        "payload": PAYLOAD, "rrule": "FREQ=SECONDLY;INTERVAL=6;COUNT=3",
        "dtstart": wall_in(env, 6), "lead_s": 5, "variants": VARIANTS})
    check(st == 201 and [v["locale"] for v in made.get("variants", [])] == ["de", "pt", "pt-BR"],
          "POST /v1/series with 3 variants: 201, in key order (%s %s)" % (st, made))
    if st != 201:
        return
    sid = made["id"]
    st, got = env.http("GET", "/v1/series/%d" % sid)
    check(st == 200 and got.get("variants") == made["variants"], "GET /v1/series/{id} shows "
          "the variants (%s)" % got.get("variants"))
    rows = env.sql("SELECT vkey FROM push_series_variant WHERE series_id = %d ORDER BY vkey"
                   % sid)
    check([r[0] for r in rows] == ["de", "pt", "pt-BR"], "push_series_variant rows (%s)" % rows)
    occ = run_occurrences(env, sid, uids, 3, 90)
    check(len(occ) == 3 and all(s == "done" for _, s in occ),
          "three occurrences, each done (%s)" % occ)
    for i, (tid, _) in enumerate(occ):
        check_occurrence(env, rx, "a", tid, uids, "occurrence %d (task %d)" % (i + 1, tid))
    check(wait_until(lambda: series_row(env, sid)[0] == "ended", 10, 0.3),
          "the series ended (%s)" % (series_row(env, sid),))

    # 2. a rewalk from DTSTART writing every occurrence (catch_up all): each
    # exists, nothing is copied twice
    env.sql("UPDATE push_series SET next_at = NULL, state = 'active', catch_up = 'all' "
            "WHERE id = %d" % sid)
    check(wait_until(lambda: series_row(env, sid)[3] != "NULL", 15, 0.3),
          "the series was walked again (%s)" % (series_row(env, sid),))
    row = series_row(env, sid)
    copies = env.sql("SELECT COUNT(*) FROM push_task_variant WHERE task_id IN (%s)"
                     % ",".join(str(t) for t, _ in occ))[0][0]
    check(row[0] == "ended" and row[2] == "" and len(occurrences(env, sid)) == 3 and
          copies == "9", "a rewalk finds the 3 occurrences and copies no variant twice "
          "(%s, %s rows)" % (row, copies))


def test_sql_series(env, rx, uids):
    start = int(env.sql("SELECT UNIX_TIMESTAMP(UTC_TIMESTAMP()) + 6")[0][0])
    rows = variant_rows("@s")
    sid = int(env.sql(
        "BEGIN; INSERT INTO push_series (name, topic, channel, title, body, payload, rrule, "
        "dtstart, lead_s) VALUES ('sv-sql', '%s', 'hookb', '%s', '%s', '%s', 'FREQ=DAILY;COUNT=1', "
        "FROM_UNIXTIME(%d), 5); SET @s = LAST_INSERT_ID(); "
        "INSERT INTO push_series_variant (series_id, vkey, title, body, payload) VALUES %s; "
        "COMMIT; SELECT @s;" % (env.topic, TITLE, BODY, json.dumps(PAYLOAD), start,
                                ",".join(rows)))[-1][0])
    occ = run_occurrences(env, sid, uids, 1, 60)
    check(len(occ) == 1 and occ[0][1] == "done", "raw SQL series: its occurrence done (%s)" % occ)
    if occ:
        check_occurrence(env, rx, "b", occ[0][0], uids, "raw SQL series")
    bad = int(env.sql(
        "BEGIN; INSERT INTO push_series (name, topic, channel, title, rrule, dtstart) VALUES "
        "('sv-bad', '%s', 'hookb', 't', 'FREQ=DAILY', UTC_TIMESTAMP()); "
        "SET @s = LAST_INSERT_ID(); INSERT INTO push_series_variant (series_id, vkey, title) "
        "VALUES (@s, 'p', 'x'); COMMIT; SELECT @s;" % env.topic)[-1][0])
    check(wait_until(lambda: series_row(env, bad)[0] == "failed", 15, 0.3) and
          "language tag" in series_row(env, bad)[2] and not occurrences(env, bad),
          "a raw variant row that is no language tag fails its series, no occurrence (%s)"
          % (series_row(env, bad),))


def test_ctl(env, ctl, cfg):
    def run(*args):
        return subprocess.run([ctl, "-c", cfg, "series", "create", "--name", "sv-ctl",
                               "--channel", "hooka", "--topic", env.topic, "--title", "t",
                               "--rrule", "FREQ=DAILY", "--dtstart", "2030-01-01 09:00:00"]
                              + list(args), capture_output=True, text=True, timeout=60)
    out = run("--variant", 'de={"title": "Hallo"}', "--variant", 'pt-BR={"body": "corpo"}')
    words = out.stdout.split()
    sid = int(words[-1]) if out.returncode == 0 and words else 0
    rows = env.sql("SELECT vkey, COALESCE(title, 'NULL'), COALESCE(body, 'NULL') FROM "
                   "push_series_variant WHERE series_id = %d ORDER BY vkey" % sid) if sid else []
    check(out.returncode == 0 and [list(r) for r in rows] ==
          [["de", "Hallo", "NULL"], ["pt-BR", "NULL", "corpo"]],
          "heraldctl series create --variant writes the rows (%s %s %s)"
          % (out.returncode, rows, out.stderr))
    show = subprocess.run([ctl, "-c", cfg, "series", "show", str(sid)], capture_output=True,
                          text=True, timeout=60) if sid else None
    check(show is not None and "variants de, pt-BR\n" in show.stdout,
          "heraldctl series show lists the variants (%s)" % (show.stdout if show else None))
    before = env.sql("SELECT COUNT(*) FROM push_series WHERE topic = '%s'" % env.topic)
    out = run("--variant", 'de={"title": "a"}', "--variant", 'DE={"title": "b"}')
    check(out.returncode != 0 and "appears twice" in out.stderr and
          env.sql("SELECT COUNT(*) FROM push_series WHERE topic = '%s'" % env.topic) == before,
          "heraldctl series create: a locale twice refused, nothing written (%s)"
          % out.stderr.strip())
    if sid:
        env.sql("UPDATE push_series SET state = 'ended' WHERE id = %d" % sid)


def test_bad_variants(env):
    base = {"name": "sv-bad", "channel": "hooka", "topic": env.topic, "title": "t", "body": "b",
            "rrule": "FREQ=DAILY", "dtstart": "2030-01-01 09:00:00"}
    big = "x" * 5000
    cases = BAD_VARIANTS + [
        ("fcm: a variant's body over 4 KiB", [{"locale": "de", "body": big}],
         "variant de: title, body, payload and rich options take"),
    ]
    before = env.sql("SELECT COUNT(*) FROM push_series WHERE topic = '%s'" % env.topic)
    for what, variants, words in cases:
        body = dict(base, variants=variants)
        if what.startswith("fcm"):
            body["channel"] = "fcm"
        st, got = env.http("POST", "/v1/series", body)
        err = got.get("error", {}) if isinstance(got, dict) else {}
        msg, code = err.get("message", str(got)), err.get("code")
        check(st == 400 and code == "invalid_variant" and words in msg,
              "series, %s: 400 invalid_variant naming it (%s %s %s)" % (what, st, code, msg))
    st, got = env.http("POST", "/v1/series", dict(base, channel="fcm", payload={"p": big}))
    err = got.get("error", {}) if isinstance(got, dict) else {}
    check(st == 400 and err.get("code") == "invalid_series" and
          "FCM's limit of 4096 bytes" in err.get("message", ""),
          "series on fcm, its own payload over 4 KiB: 400 invalid_series naming the limit "
          "(%s %s)" % (st, got))
    check(env.sql("SELECT COUNT(*) FROM push_series WHERE topic = '%s'" % env.topic) == before,
          "no bad request wrote a series")
    st, got = env.http("POST", "/v1/series", dict(base, channel="fcm", variants=[
        {"locale": "de", "body": "x" * 3000}]))
    check(st == 201, "fcm: a series' variant within the limit is taken (%s)" % st)
    if st == 201:
        env.sql("UPDATE push_series SET state = 'ended' WHERE id = %d" % got["id"])


def tests(env, rx, ctl, cfg, uids):
    test_bad_variants(env)
    test_ctl(env, ctl, cfg)
    test_api_series(env, rx, uids)
    test_sql_series(env, rx, uids)


if __name__ == "__main__":
    sys.exit(variants_env.main(__doc__, "series_variants", 7_100_000_000, N, tests))
