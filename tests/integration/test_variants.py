#!/usr/bin/env python3
"""test_variants: per-locale variants of a task's content (issue 32, docs/api.md
"Variants") on the real stack, with one herald-dispatcher, one herald-worker
and a webhook receiver on loopback:

  1. a campaign of 300 recipients in three locales and their fallbacks —
     pt-BR, pt-PT (falls back to pt), de-AT (falls back to de), fr-FR (no
     variant: the task's own) and no profile at all (the task's own) —
     created by the API with its variants in the body: each recipient
     receives the title, body and payload of its locale's variant; the
     counts per variant in GET /v1/tasks/{id} (variant_counts) and
     `heraldctl status` add up to the sent; the dry-run render (GET
     /v1/tasks/{id}/render, POST /v1/render with variants) picks the
     uid's variant;
  2. the same with the variants written by raw SQL into push_task_variant
     before the task is due;
  3. `heraldctl create --variant L=JSON` writes the rows, a bad one is
     refused with nothing written;
  4. the pull (GET /v1/users/{uid}/reminders?ack=1) of a frozen task with
     variants serves each uid its locale's variant (the same fallbacks) and
     counts the acknowledged pulls per variant (variant_counts "pulled");
  5. bad variants and over-limit content answered 400 at create time with
     nothing written: a locale that is no language tag, "default", a
     locale twice (case ignored), an unknown field, subject on a webhook
     channel, and on an fcm channel a payload or a variant's text past
     FCM's 4096-byte message (the limit named).

usage: test_variants.py HERALD_DISPATCHER HERALD_WORKER HERALDCTL
(exit 77 without HERALD_TEST_CONFIG)"""
import datetime
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

N = 300


def iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.000Z")


def received(rx, path):
    """{uid: (title, body)} of the receiver's requests on PATH (the first)."""
    got = {}
    for _, _, body, _ in rx.by_path(path):
        doc = json.loads(body)
        got.setdefault(int(doc["uid"]), (doc["title"], doc["body"]))
    return got


def check_campaign(env, rx, path, task, uids, what):
    check(env.wait_state(task, "done", 60), "%s: done (%s)" % (what, env.task(task)))
    got = received(rx, path)
    wrong = [(u, got.get(u), expected(KINDS[k % 5][1], u)) for k, u in enumerate(uids)
             if got.get(u) != expected(KINDS[k % 5][1], u)]
    check(len(got) == N and not wrong,
          "%s: each of %d recipients got its locale's variant (%d received, wrong %s)"
          % (what, N, len(got), wrong[:3]))
    want = want_counts(N, "sent")
    counts = {}

    def counted():
        counts.update(env.http("GET", "/v1/tasks/%d" % task)[1].get("variant_counts") or {})
        return counts == want
    check(wait_until(counted, 15, 0.3),
          "%s: variant_counts per variant %s (%s)" % (what, want, counts))


def test_api_campaign(env, rx, ctl, cfg, uids):
    st, body = env.http("POST", "/v1/tasks", {
        "name": "variants-api", "channel": "hooka", "topic": env.topic,
        "due_at": iso(time.time() + 4), "title": TITLE, "body": BODY, "payload": PAYLOAD,
        "variants": VARIANTS})
    check(st == 201 and [v["locale"] for v in body.get("variants", [])] ==
          ["de", "pt", "pt-BR"], "POST /v1/tasks with 3 variants: 201, in key order (%s %s)"
          % (st, body))
    if st != 201:
        return
    task = body["id"]
    st, _ = env.http("POST", "/v1/tasks/%d/subscribers" % task, {"uids": uids})
    check(st in (200, 201), "subscribers added (%s)" % st)
    st, got = env.http("GET", "/v1/tasks/%d" % task)
    check(st == 200 and sorted(v["locale"] for v in got.get("variants", [])) ==
          ["de", "pt", "pt-BR"] and got["variants"][0].get("title") is not None,
          "GET shows the variants (%s)" % got.get("variants"))
    # dry-run render per locale: the stored task's, and a body's
    for k in (0, 1, 2, 3, 4):
        u = uids[k]
        st, r = env.http("GET", "/v1/tasks/%d/render?uid=%d" % (task, u))
        want = expected(KINDS[k][1], u)
        check(st == 200 and r.get("variant") == KINDS[k][1] and (r.get("title"), r.get("body"))
              == want, "render uid of %s: variant %s, %s (%s %s)"
              % (KINDS[k][0], KINDS[k][1], want, st, r))
    st, r = env.http("POST", "/v1/render", {
        "uid": uids[1], "name": "r", "channel": "hooka", "due_at": iso(time.time() + 60),
        "title": TITLE, "body": BODY, "payload": PAYLOAD, "variants": VARIANTS})
    check(st == 200 and r.get("variant") == "pt" and r.get("title") == "Olá PT %d" % uids[1],
          "POST /v1/render with variants renders the pt-PT uid's fallback (%s %s)" % (st, r))
    check_campaign(env, rx, "a", task, uids, "API campaign")
    out = subprocess.run([ctl, "-c", cfg, "status", str(task)], capture_output=True, text=True,
                         timeout=60)
    line = [x for x in out.stdout.splitlines() if x.strip().startswith("variants")]
    check(out.returncode == 0 and line and "pt-BR sent %d" % (N // 5) in line[0] and
          "default sent %d" % (2 * N // 5) in line[0],
          "heraldctl status shows the counts per variant (%s)" % line)


def test_sql_campaign(env, rx, uids):
    rows = variant_rows("@t")
    stmt = ("BEGIN; INSERT INTO push_task (name, topic, channel, title, body, payload, due_at) "
            "VALUES ('variants-sql', '%s', 'hookb', '%s', '%s', '%s', "
            "UTC_TIMESTAMP(3) + INTERVAL 4 SECOND); SET @t = LAST_INSERT_ID(); "
            "INSERT INTO push_subscription (task_id, uid) VALUES %s; "
            "INSERT INTO push_task_variant (task_id, vkey, title, body, payload) VALUES %s; "
            "COMMIT; SELECT @t;"
            % (env.topic, TITLE, BODY, json.dumps(PAYLOAD),
               ",".join("(@t,%d)" % u for u in uids), ",".join(rows)))
    task = int(env.sql(stmt)[-1][0])
    check_campaign(env, rx, "b", task, uids, "raw SQL campaign")


def test_ctl(env, ctl, cfg):
    def run(*args):
        return subprocess.run([ctl, "-c", cfg, "create", "--name", "variants-ctl", "--channel",
                               "hooka", "--topic", env.topic, "--due-in", "1h", "--title", "t",
                               "--quiet"] + list(args), capture_output=True, text=True,
                              timeout=60)
    out = run("--variant", 'de={"title": "Hallo"}', "--variant", 'pt-BR={"body": "corpo"}')
    task = int(out.stdout.strip() or 0) if out.returncode == 0 else 0
    rows = env.sql("SELECT vkey, title, body FROM push_task_variant WHERE task_id = %d "
                   "ORDER BY vkey" % task) if task else []
    check(out.returncode == 0 and [list(r) for r in rows] ==
          [["de", "Hallo", "NULL"], ["pt-BR", "NULL", "corpo"]],
          "heraldctl create --variant writes the rows (%s %s %s)" % (out.returncode, rows,
                                                                     out.stderr))
    before = env.sql("SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic)
    out = run("--variant", 'de={"title": "a"}', "--variant", 'DE={"title": "b"}')
    check(out.returncode != 0 and "appears twice" in out.stderr and
          env.sql("SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic) == before,
          "heraldctl create: a locale twice refused, nothing written (%s)" % out.stderr.strip())
    if task:
        env.sql("DELETE FROM push_task_variant WHERE task_id = %d" % task)
        env.sql("DELETE FROM push_task WHERE id = %d" % task)


def test_bad_variants(env):
    base = {"name": "variants-bad", "channel": "hooka", "topic": env.topic,
            "due_at": iso(time.time() + 3600), "title": "t", "body": "b"}
    big = "x" * 5000
    cases = [(what, {"variants": v}, words) for what, v, words in BAD_VARIANTS] + [
        ("fcm: the task's payload over 4 KiB", {"channel": "fcm", "payload": {"p": big}},
         "FCM's limit of 4096 bytes"),
        ("fcm: a variant's body over 4 KiB",
         {"channel": "fcm", "variants": [{"locale": "de", "body": big}]},
         "variant de: title, body, payload and rich options take"),
    ]
    before = env.sql("SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic)
    for what, extra, words in cases:
        st, body = env.http("POST", "/v1/tasks", dict(base, **extra))
        err = body.get("error", {}) if isinstance(body, dict) else {}
        msg, code = err.get("message", str(body)), err.get("code")
        # the task's own content refused: invalid_task; else invalid_variant
        want = "invalid_task" if "variants" not in extra else "invalid_variant"
        check(st == 400 and code == want and words in msg,
              "%s: 400 %s naming it (%s %s %s)" % (what, want, st, code, msg))
    check(env.sql("SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic) == before,
          "no bad request wrote a task")
    st, body = env.http("POST", "/v1/tasks", dict(base, channel="fcm",
                                                  variants=[{"locale": "de", "body": "x" * 3000}]))
    check(st == 201, "fcm: a variant within the limit is taken (%s)" % st)
    if st == 201:
        env.sql("DELETE FROM push_task_variant WHERE task_id = %d" % body["id"])
        env.sql("DELETE FROM push_task WHERE id = %d" % body["id"])


def test_pull(env, uids):
    """The pull (GET /v1/users/{uid}/reminders) serves each uid its locale's
    variant, with the push's fallback chain, and counts an acknowledged pull
    per variant."""
    now = time.time()
    st, body = env.http("POST", "/v1/tasks", {
        "name": "variants-pull", "channel": "hooka", "topic": env.topic,
        "due_at": iso(now + 7200), "freeze_at": iso(now - 300), "title": TITLE, "body": BODY,
        "payload": PAYLOAD, "variants": VARIANTS})
    check(st == 201, "a frozen task with variants (%s %s)" % (st, body))
    if st != 201:
        return
    task = body["id"]
    st, _ = env.http("POST", "/v1/tasks/%d/subscribers" % task, {"uids": uids[:10]})
    check(st == 200, "subscribers of the pulled task (%s)" % st)
    day = datetime.datetime.fromtimestamp(now + 7200, datetime.timezone.utc).strftime("%Y-%m-%d")
    for k, u in enumerate(uids[:10]):
        st, got = env.http("GET", "/v1/users/%d/reminders?date=%s&ack=1" % (u, day))
        r = [x for x in got.get("reminders", []) if x["task_id"] == task] if st == 200 else []
        want = expected(KINDS[k % 5][1], u)
        check(r and r[0].get("variant") == KINDS[k % 5][1] and
              (r[0].get("title"), r[0].get("body")) == want and r[0].get("acked") is True,
              "pull of a %s profile: variant %s, %s, acked (%s %s)"
              % (KINDS[k % 5][0], KINDS[k % 5][1], want, st, r))
    want = want_counts(10, "pulled")
    st, got = env.http("GET", "/v1/tasks/%d" % task)
    check(st == 200 and got.get("variant_counts") == want,
          "acknowledged pulls counted per variant %s (%s)" % (want, got.get("variant_counts")))


def tests(env, rx, ctl, cfg, uids):
    test_bad_variants(env)
    test_ctl(env, ctl, cfg)
    test_api_campaign(env, rx, ctl, cfg, uids)
    test_sql_campaign(env, rx, uids)
    test_pull(env, uids)


if __name__ == "__main__":
    sys.exit(variants_env.main(__doc__, "variants", 7_000_000_000, N, tests))
