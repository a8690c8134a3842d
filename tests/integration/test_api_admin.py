#!/usr/bin/env python3
"""Integration test of the admin API that issue 16 completed, against the
local stack: list paging (before, q, next), subscriber counts, chunks in
flight, dead letters paged, redrive and recover over HTTP (the code of
heraldctl's), the dry-run render, PATCH resetting ttl/collapse_key with
null, and the route table (--print-routes) against schemas/openapi.yaml
both ways.

usage: test_api_admin.py HERALD_DISPATCHER HERALDCTL OPENAPI_YAML

Isolation: its own Redis prefix, Kafka and task topic (the dispatcher runs
with HERALD_TEST_TASK_TOPIC), its own port, its own task names.  Exits 77
when HERALD_TEST_CONFIG is unset.  Every wait is bounded."""
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish, job_wait, stop_popen  # noqa: E402
from test_api import (TOKEN, cleanup, create, http, key, make_env, serve, sql,  # noqa: E402
                      write_config)
import yaml  # noqa: E402


def test_openapi(env, doc_path):
    """Every served route is in the document and every documented one is
    served (GET routes answer HEAD: not listed separately), each with the
    role the server gives it (x-herald-role: viewer, operator, admin or
    open)."""
    out = subprocess.run([env.dispatcher, "--print-routes"], capture_output=True, text=True,
                         timeout=10)
    roles = {(m, p): r for m, p, r in (line.split(" ") for line in out.stdout.splitlines()
                                       if line)}
    served = set(roles)
    with open(doc_path) as f:
        doc = yaml.safe_load(f)
    documented = {(m.upper(), p) for p, ops in doc.get("paths", {}).items()
                  for m in ops if m in ("get", "post", "put", "patch", "delete")}
    check(out.returncode == 0 and len(served) > 20, "--print-routes lists the routes")
    check(served - documented == set(), "every route is in openapi.yaml (missing: %s)"
          % sorted(served - documented))
    check(documented - served == set(), "every documented route is served (extra: %s)"
          % sorted(documented - served))
    check(doc.get("openapi", "").startswith("3.0"), "an OpenAPI 3.0 document")
    for (m, p) in sorted(documented):
        op = doc["paths"][p][m.lower()]
        check("responses" in op and op.get("operationId"), "%s %s has responses and an id"
              % (m, p))
        check(op.get("x-herald-role") == roles.get((m, p)),
              "%s %s: x-herald-role %s is the served role %s"
              % (m, p, op.get("x-herald-role"), roles.get((m, p))))


def test_list_paging(env, tag):
    marker = "pg%s" % tag
    ids = [create(env, "%s-%d" % (marker, i), env.due) for i in range(5)]
    status, j = http(env, "GET", "/v1/tasks?q=%s&limit=2" % marker)
    pages, seen = 0, []
    while status == 200 and pages < 10:
        pages += 1
        seen += [t["id"] for t in j["tasks"]]
        check(len(j["tasks"]) <= 2, "a page holds at most limit")
        if j["next"] is None:
            break
        status, j = http(env, "GET", "/v1/tasks?q=%s&limit=2&before=%d" % (marker, j["next"]))
    check(seen == sorted(ids, reverse=True) and pages == 3,
          "3 pages of 2, 2, 1, newest first, each task once (%s vs %s)" % (seen, ids))
    status, j = http(env, "GET", "/v1/tasks?q=%s&before=%d" % (marker, ids[2]))
    check(status == 200 and [t["id"] for t in j["tasks"]] == [ids[1], ids[0]]
          and j["next"] is None, "before=ID gives the older ones")
    for bad in ("before=0", "before=x", "q=" + "a" * 201, "limit=0"):
        status, j = http(env, "GET", "/v1/tasks?" + bad)
        check(status == 400 and j["error"]["code"] == "bad_query", "%s -> 400 bad_query" % bad)
    return ids


def test_counts_and_chunks(env, t):
    http(env, "POST", "/v1/tasks/%d/subscribers" % t, {"uids": list(range(1, 31))})
    env.r.cmd("SREM", key(env, t, "subs"), 1, 2, 3)
    status, j = http(env, "GET", "/v1/tasks/%d/subscribers/count" % t)
    check(status == 200 and j == {"task_id": t, "mysql": 30, "redis_pending": 27},
          "subscriber counts (%s %s)" % (status, j))
    # Two chunks pending: seq 2 leased by a worker, seq 1 parked.
    env.r.cmd("HSET", key(env, t, "pending"), 1, 1000, 2, 2000)
    env.r.cmd("SADD", key(env, t, "chunk:1"), 4, 5, 6)
    env.r.cmd("SADD", key(env, t, "chunk:2"), 7)
    env.r.cmd("SET", key(env, t, "lease:2"), "worker-a/1", "PX", 60000)
    status, j = http(env, "GET", "/v1/tasks/%d/chunks" % t)
    c = j.get("chunks", []) if status == 200 else []
    check(len(c) == 2 and c[0]["seq"] == 1 and c[0]["remaining"] == 3 and c[0]["holder"] is None
          and c[0]["lease_ms_left"] is None and c[1]["seq"] == 2 and c[1]["remaining"] == 1
          and c[1]["holder"] == "worker-a/1" and 0 < c[1]["lease_ms_left"] <= 60000
          and j["parked"] == 1 and j["truncated"] is False, "chunks in flight (%s)" % j)
    for k in ("pending", "chunk:1", "chunk:2", "lease:2"):
        env.r.cmd("DEL", key(env, t, k))
    status, _ = http(env, "GET", "/v1/tasks/999999999999/chunks")
    check(status == 404, "chunks of no task -> 404")


def test_dead_letters(env, t):
    n = 250
    for i in range(0, n, 50):
        args = []
        for uid in range(i + 1, i + 51):
            args += [uid, "http 500 #%d" % uid]
        env.r.cmd("HSET", key(env, t, "failed"), *args)
    got, cursor, pages = {}, None, 0
    while pages < 20:
        q = "/v1/tasks/%d/dead-letters?limit=100" % t + ("&cursor=" + cursor if cursor else "")
        status, j = http(env, "GET", q)
        if status != 200:
            break
        pages += 1
        check(len(j["dead_letters"]) <= 100, "a page holds at most limit")
        for d in j["dead_letters"]:
            got[d["uid"]] = d["reason"]
        cursor = j["cursor"]
        if cursor is None:
            break
    check(len(got) == n and got[17] == "http 500 #17" and pages >= 3,
          "every dead letter once, with its reason, over %d pages (%d)" % (pages, len(got)))
    for bad in ("limit=0", "limit=1001", "cursor=abc", "cursor=5"):
        status, j = http(env, "GET", "/v1/tasks/%d/dead-letters?%s" % (t, bad))
        check(status == 400, "dead-letters %s -> 400" % bad)


def test_redrive(env, t):
    status, j = http(env, "POST", "/v1/tasks/%d/redrive" % t)
    check(status == 409 and j["error"]["code"] == "wrong_state",
          "redrive of a scheduled task -> 409 (%s)" % status)
    sql(env, "UPDATE push_task SET state='done', failed=250, total=250 WHERE id=%d" % t)
    env.r.cmd("HSET", key(env, t, "stats"), "failed", 250, "published", 250)
    env.r.cmd("SET", key(env, t, "seq"), 4)
    status, j = http(env, "POST", "/v1/tasks/%d/redrive" % t)
    check(status == 200 and j["task_id"] == t and j["redriven"] == 250,
          "redrive over HTTP (%s %s)" % (status, j))
    check(env.r.cmd("EXISTS", key(env, t, "failed")) == 0
          and env.r.cmd("SCARD", key(env, t, "chunk:5")) == 250,
          "the dead letters form chunk 5")
    check(sql(env, "SELECT state, failed FROM push_task WHERE id=%d" % t)
          == [["dispatched", "0"]], "mysql: failed - 250, done -> dispatched")
    status, j = http(env, "POST", "/v1/tasks/%d/redrive" % t)
    check(status == 200 and j["redriven"] == 0, "a second redrive finds none")


def test_recover_expired(env, t):
    sql(env, "UPDATE push_task SET expire_at = UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE "
        "WHERE id=%d" % t)
    status, j = http(env, "POST", "/v1/tasks/%d/recover" % t)
    check(status == 409 and j["error"]["code"] == "wrong_state"
          and "expired at" in j["error"]["message"], "recover of an expired task -> 409 (%s)" % j)


def get(env):
    return lambda path: http(env, "GET", path)


def test_recover(env, t, done):
    env.r.cmd("DEL", key(env, t, "subs"))
    env.r.cmd("ZREM", env.prefix + "timer", t)
    status, j = http(env, "POST", "/v1/tasks/%d/recover" % t)
    check(status == 202 and j["task_id"] == t and j["state"] == "queued"
          and j["status_url"] == "/v1/jobs/%d" % j["job"],
          "recover over HTTP answers 202 with its job (%s %s)" % (status, j))
    job, _ = job_wait(get(env), j) if status == 202 else ({}, [])
    res = job.get("result") or {}
    check(job.get("state") == "done" and job.get("kind") == "recover" and job["task_id"] == t
          and res.get("subs") == 10 and res.get("state") == "scheduled"
          and job.get("actor", "").startswith("bootstrap:"),
          "the job recovered the scheduled task (%s)" % job)
    check(env.r.cmd("SCARD", key(env, t, "subs")) == 10
          and env.r.cmd("ZSCORE", env.prefix + "timer", t) is not None,
          "subs rebuilt, back in the timer")
    sql(env, "UPDATE push_task SET state='done' WHERE id=%d" % done)
    status, j = http(env, "POST", "/v1/tasks/%d/recover" % done)
    check(status == 409 and j["error"]["code"] == "wrong_state"
          and "nothing to recover" in j["error"]["message"], "recover of a done task -> 409")


def test_recover_job(env, t):
    """A recover that waits (a claimed task: one lease renewal, then the
    delivery log standing still) holds no request thread: the API answers
    202 at once and serves other requests while the job waits; the job's
    phase says what it waits for.  Before, the POST held its thread the
    whole time (up to 90 s)."""
    sql(env, "UPDATE push_task SET state = 'paused' WHERE id = %d" % t)
    started = time.monotonic()
    status, j = http(env, "POST", "/v1/tasks/%d/recover" % t)
    answered = time.monotonic() - started
    check(status == 202 and answered < 1.0,
          "recover of a paused task answers 202 in %.2f s (%s %s)" % (answered, status, j))
    quick = []
    for _ in range(5):
        t0 = time.monotonic()
        s2, _ = http(env, "GET", "/v1/tasks/%d" % t)
        quick.append((s2, time.monotonic() - t0))
    job, phases = job_wait(get(env), j) if status == 202 else ({}, [])
    check(all(s2 == 200 and dt < 1.0 for s2, dt in quick),
          "the API serves other requests while the job waits (%s)" % quick)
    check(job.get("state") == "done" and any("workers' last reports" in (p or "") for p in phases)
          and time.monotonic() - started >= 2.0,
          "the job waited for the workers' reports, then recovered (%s, phases %s)"
          % (job.get("state"), phases))
    status, j = http(env, "GET", "/v1/jobs/999999999")
    check(status == 404, "an unknown job -> 404 (%s)" % status)


def test_render(env, t):
    env.r.cmd("HSET", env.prefix + "user:42", "name", "Lin")
    # Scoped to this test's topic: other tests' dispatchers may be creating
    # tasks of their own on a shared stack.
    count = "SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic
    before = sql(env, count)
    body = {"name": "preview", "channel": env.channel, "topic": env.topic,
            "due_at": "2030-01-01T00:00:00.000Z", "title": "Hi {{user.name}} #{{uid}}",
            "body": "{{payload.item}}!", "payload": {"item": "tea"}, "uid": 42}
    status, j = http(env, "POST", "/v1/render", body)
    check(status == 200 and j == {"uid": 42, "title": "Hi Lin #42", "body": "tea!",
                                  "payload": {"item": "tea"}}, "dry-run render (%s)" % j)
    check(sql(env, count) == before, "nothing stored")
    del body["uid"]
    status, j = http(env, "POST", "/v1/render", body)
    check(status == 400 and j["error"]["code"] == "missing_field", "render without uid -> 400")
    body.update(uid=42, title="{{nope")
    status, j = http(env, "POST", "/v1/render", body)
    check(status == 400 and j["error"]["code"] == "invalid_task",
          "render validates like create (%s)" % j)
    status, j = http(env, "GET", "/v1/tasks/%d/render?uid=42" % t)
    check(status == 200 and j["title"] == "Hi Lin #42" and j["body"] == "tea in render",
          "render of an existing task (%s)" % j)
    status, _ = http(env, "GET", "/v1/tasks/%d/render" % t)
    check(status == 400, "render without ?uid -> 400")


def test_patch_null(env):
    t = create(env, "nullable", env.due, ttl=60, collapse_key="k1")
    status, j = http(env, "PATCH", "/v1/tasks/%d" % t, {"ttl": None, "collapse_key": None})
    check(status == 200 and j["ttl"] is None and j["collapse_key"] is None,
          "PATCH null resets ttl and collapse_key (%s %s)" % (status, j))
    check(sql(env, "SELECT ttl_s IS NULL, collapse_key IS NULL FROM push_task WHERE id=%d" % t)
          == [["1", "1"]], "stored as NULL")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    doc_path = sys.argv.pop()
    env, base, tag = make_env("adm", __doc__)
    env.cfg_path = write_config(env, base, "{tokens: [%s], max_body_bytes: 65536, max_ids: 10000,"
                                " threads: 4}" % TOKEN)
    proc, log = serve(env, env.cfg_path, "test_api_admin_%s.log" % tag)
    status = None
    try:
        test_openapi(env, doc_path)
        now = datetime.now(timezone.utc)
        env.due = (now + timedelta(days=3)).replace(microsecond=0)
        ids = test_list_paging(env, tag)
        test_counts_and_chunks(env, ids[0])
        test_dead_letters(env, ids[1])
        test_redrive(env, ids[1])
        rec = create(env, "render", env.due)
        http(env, "POST", "/v1/tasks/%d/subscribers" % rec, {"uids": list(range(1, 11))})
        test_render(env, rec)
        test_recover(env, rec, ids[2])
        test_recover_job(env, rec)
        test_recover_expired(env, ids[3])
        test_patch_null(env)
    finally:
        status = stop_popen(proc, 20)
        log.close()
        cleanup(env)
    check(status == 0, "dispatcher exits 0 on SIGTERM")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
