#!/usr/bin/env python3
"""Integration test of herald-dispatcher's HTTP API, the control transitions
and heraldctl pause/resume/cancel/recover/redrive, against the local stack.

usage: test_api.py HERALD_DISPATCHER HERALDCTL   (python3 stdlib only)

Isolation: its own Redis prefix, Kafka topic and task topic (the dispatcher
runs with HERALD_TEST_TASK_TOPIC), its own port.  Exits 77 when
HERALD_TEST_CONFIG is unset.  Every wait is bounded."""
import copy
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import (FAILS, Mysql, Redis, Settings, check, free_port,  # noqa: E402
                          require_seams, stop_popen, wait_until)
import yaml  # noqa: E402  (after badinput_env, which puts Debian's packages on the path)

TOKEN = "t0k3n-%032x" % random.getrandbits(128)  # dispatcher.api.tokens: at least 32 bytes


# ---- backends -------------------------------------------------------------

class Env:
    pass


def sql(env, q):
    return env.db.sql(q)


def http(env, method, path, body=None, token=TOKEN, raw=None, port=None, headers=None):
    """(status, JSON or text) of a request to the API, or to PORT (e.g.
    env.probe_port for /healthz, /readyz and /metrics), with more HEADERS."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port or env.port, path), data=data,
                                 method=method)
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    if data is not None or method == "POST":
        req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        status = e.code
    except (urllib.error.URLError, OSError) as e:
        return 0, str(e)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def iso(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def key(env, task, suffix):
    return "%s{t%d}:%s" % (env.prefix, task, suffix)


# ---- setup ------------------------------------------------------------------

def write_config(env, base, api_line):
    """The stack's config (BASE, parsed) moved to this test's prefix, topic
    and port, with API_LINE (YAML flow text) as dispatcher.api."""
    cfg = copy.deepcopy(base)
    cfg["redis"]["prefix"] = env.prefix
    cfg["kafka"]["topic"] = env.kafka_topic
    cfg["dispatcher"]["listen"] = "127.0.0.1:%d" % env.port
    cfg["dispatcher"]["probe_listen"] = "127.0.0.1:%d" % env.probe_port
    cfg["dispatcher"]["api"] = yaml.safe_load(api_line)
    text = yaml.safe_dump(cfg, sort_keys=False)
    fd, path = tempfile.mkstemp(suffix=".yaml", prefix="herald-test-api-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def start_dispatcher(env, path, log):
    e = dict(os.environ, HERALD_TEST_TASK_TOPIC=env.topic)
    return subprocess.Popen([env.dispatcher, "-c", path], stdout=log, stderr=log, env=e)


def serve(env, path, log_name):
    """Starts the dispatcher on config PATH with its output in LOG_NAME in
    the temporary directory, and checks that /healthz answers on
    env.probe_port within 15 s; (the Popen, the open log)."""
    log = open(os.path.join(tempfile.gettempdir(), log_name), "w")
    proc = start_dispatcher(env, path, log)
    check(wait_until(lambda: http(env, "GET", "/healthz", token=None, port=env.probe_port)[0]
                     == 200, 15), "dispatcher serves /healthz")
    return proc, log


def ctl(env, *args):
    return subprocess.run([env.heraldctl, "-c", env.cfg_path] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=60)


def create(env, name, due, freeze=None, **extra):
    body = {"name": name, "channel": env.channel, "topic": env.topic, "due_at": iso(due),
            "title": "Hi {{user.name}} #{{uid}}", "body": "{{payload.item}} in {{task.name}}",
            "payload": {"item": "tea"}}
    if freeze is not None:
        body["freeze_at"] = iso(freeze)
    body.update(extra)
    status, j = http(env, "POST", "/v1/tasks", body)
    check(status == 201, "create %s -> 201 (%s)" % (name, status))
    return j["id"] if status == 201 else 0


# ---- the tests --------------------------------------------------------------

def test_refuses_without_tokens(env, base):
    path = write_config(env, base, "{insecure: false}")
    try:
        out = subprocess.run([env.dispatcher, "-c", path], capture_output=True, text=True,
                             timeout=20)
        check(out.returncode == 2 and "api.tokens" in out.stderr,
              "no tokens, not insecure -> exit 2 with a message (%d)" % out.returncode)
    finally:
        os.unlink(path)


def snapshot(env, tasks):
    rows = sql(env, "SELECT COUNT(*), COALESCE(SUM(control <> 'run'), 0) FROM push_task "
               "WHERE topic = '%s'" % env.topic)
    subs = sql(env, "SELECT COUNT(*) FROM push_subscription WHERE task_id IN (%s)"
               % ",".join(str(t) for t in tasks))
    titles = sql(env, "SELECT GROUP_CONCAT(title ORDER BY id) FROM push_task WHERE topic = '%s'"
                 % env.topic)
    return (rows, subs, titles, [env.r.cmd("SCARD", key(env, t, "subs")) for t in tasks])


def test_errors(env, sched, frozen):
    before = snapshot(env, [sched, frozen])
    cases = [
        ("missing token", "POST", "/v1/tasks", {"name": "x"}, None, None, 401),
        ("wrong token", "POST", "/v1/tasks/%d/subscribers" % sched, {"uids": [1]}, "nope", None,
         401),
        ("body over the limit", "POST", "/v1/tasks/%d/subscribers" % sched, None, TOKEN,
         b'{"uids":[' + b"1," * 40000 + b"1]}", 413),
        ("malformed json", "POST", "/v1/tasks", None, TOKEN, b'{"name": ', 400),
        ("unknown field", "POST", "/v1/tasks", {"name": "x", "channel": env.channel,
                                                "due_at": 1, "colour": "red"}, TOKEN, None, 400),
        ("invalid task", "POST", "/v1/tasks", {"name": "x", "channel": env.channel,
                                               "topic": env.topic, "due_at": 1,
                                               "chunk_size": 0}, TOKEN, None, 400),
        ("uid string not digits", "POST", "/v1/tasks/%d/subscribers" % sched,
         {"uids": [1, "2x"]}, TOKEN, None, 400),
        ("uid negative", "POST", "/v1/tasks/%d/subscribers" % sched, {"uids": [-3]}, TOKEN, None,
         400),
        ("uid zero", "POST", "/v1/tasks/%d/subscribers" % sched, {"uids": [0]}, TOKEN, None, 400),
        ("uid fraction", "POST", "/v1/tasks/%d/subscribers" % sched, {"uids": [1.5]}, TOKEN, None,
         400),
        ("10001 ids", "POST", "/v1/tasks/%d/subscribers" % sched,
         {"uids": list(range(1, 10002))}, TOKEN, None, 400),
        ("bad task id", "GET", "/v1/tasks/abc", None, TOKEN, None, 400),
        ("unknown task", "GET", "/v1/tasks/999999999999", None, TOKEN, None, 404),
        ("unknown task subs", "POST", "/v1/tasks/999999999999/subscribers", {"uids": [1]}, TOKEN,
         None, 404),
        ("unknown task pause", "POST", "/v1/tasks/999999999999/pause", None, TOKEN, None, 404),
        ("frozen task", "PATCH", "/v1/tasks/%d" % frozen, {"title": "changed"}, TOKEN, None, 409),
        ("wrong method", "DELETE", "/v1/tasks", None, TOKEN, None, 405),
        ("unknown path", "GET", "/v1/nothing", None, TOKEN, None, 404),
    ]
    for what, method, path, body, token, raw, want in cases:
        status, j = http(env, method, path, body, token, raw)
        ok = status == want and isinstance(j, dict) and "code" in j.get("error", {}) \
            and j["error"].get("message")
        check(ok, "%s -> %d (%s %s)" % (what, want, status, json.dumps(j)[:160]))
    check(snapshot(env, [sched, frozen]) == before, "the error requests changed nothing")


def test_tasks_and_subs(env, sched):
    status, j = http(env, "GET", "/v1/tasks/%d" % sched)
    check(status == 200 and j["state"] == "scheduled" and j["payload"] == {"item": "tea"}
          and "progress" in j and "counters" in j, "get task")
    status, j = http(env, "GET", "/v1/tasks?state=scheduled&limit=1000")
    check(status == 200 and sched in [t["id"] for t in j["tasks"]], "list by state")
    status, j = http(env, "POST", "/v1/tasks/%d/subscribers" % sched,
                     {"uids": list(range(1, 101))})
    check(status == 200 and j["added"] == 100, "add 100 subscribers (%s %s)" % (status, j))
    status, j = http(env, "POST", "/v1/tasks/%d/subscribers" % sched,
                     {"uids": list(range(1, 101))})
    check(status == 200 and j["added"] == 0, "adding them again adds nothing")
    check(env.r.cmd("SCARD", key(env, sched, "subs")) == 100, "redis holds 100")
    check(sql(env, "SELECT COUNT(*) FROM push_subscription WHERE task_id=%d" % sched)
          == [["100"]], "mysql holds 100")
    status, j = http(env, "DELETE", "/v1/tasks/%d/subscribers/100" % sched)
    check(status == 200 and j["deleted"] == 1, "delete one subscriber")
    check(env.r.cmd("SISMEMBER", key(env, sched, "subs"), 100) == 0
          and sql(env, "SELECT COUNT(*) FROM push_subscription WHERE task_id=%d" % sched)
          == [["99"]], "deleted from redis and mysql")
    status, j = http(env, "GET", "/v1/tasks/%d" % sched)
    check(status == 200 and j["live"]["subs"] == 99, "get shows the live set")


def test_pull(env, frozen, later):
    env.r.cmd("HSET", env.prefix + "user:7", "name", "Ada")
    for t in (frozen, later):
        s, _ = http(env, "POST", "/v1/tasks/%d/subscribers" % t, {"uids": [7, 8]})
        check(s == 200 or t == frozen, "subscribe 7, 8 to %d" % t)
    # frozen is already frozen: subscribers still go in while it is scheduled.
    day = env.due.strftime("%Y-%m-%d")
    status, j = http(env, "GET", "/v1/users/7/reminders?date=" + day)
    ids = [r["task_id"] for r in j.get("reminders", [])] if status == 200 else []
    check(status == 200 and frozen in ids and later not in ids,
          "pull returns the frozen task only (%s)" % ids)
    r = [x for x in j.get("reminders", []) if x["task_id"] == frozen]
    check(r and r[0]["title"] == "Hi Ada #7" and r[0]["body"].startswith("tea in "),
          "title/body rendered (%s)" % (r[0] if r else None))
    status, j = http(env, "GET", "/v1/users/7/reminders?date=%s&ack=1" % day)
    r = [x for x in j.get("reminders", []) if x["task_id"] == frozen]
    check(status == 200 and r and r[0]["acked"] is True, "ack moves the uid")
    check(env.r.cmd("SISMEMBER", key(env, frozen, "subs"), 7) == 0
          and env.r.cmd("SISMEMBER", key(env, frozen, "pulled"), 7) == 1
          and env.r.cmd("SCARD", key(env, frozen, "subs")) == 1, "7 left subs for pulled")
    status, j = http(env, "GET", "/v1/users/7/reminders?date=%s&ack=1" % day)
    r = [x for x in j.get("reminders", []) if x["task_id"] == frozen]
    check(status == 200 and r and r[0]["acked"] is False, "a second ack changes nothing")
    check(sql(env, "SELECT pulled FROM push_task WHERE id=%d" % frozen) == [["1"]]
          and sql(env, "SELECT status FROM push_delivery WHERE task_id=%d AND uid=7" % frozen)
          == [["pulled"]], "mysql counts one pull and logs it")
    check(env.r.cmd("HGET", key(env, frozen, "stats"), "pulled") == "1", "stats.pulled = 1")
    status, _ = http(env, "GET", "/v1/users/7/reminders?date=2024-13-01")
    check(status == 400, "bad date -> 400")


def test_control(env, sched, later):
    status, j = http(env, "POST", "/v1/tasks/%d/pause" % sched)
    check(status == 200 and j["control"] == "pause", "pause accepted")
    check(env.r.cmd("GET", key(env, sched, "ctl")) == "pause", "ctl key set at once")
    check(wait_until(lambda: sql(env, "SELECT state FROM push_task WHERE id=%d" % sched)
                     == [["paused"]], 15), "the dispatcher makes it paused")
    status, _ = http(env, "POST", "/v1/tasks/%d/subscribers" % sched, {"uids": [500]})
    check(status == 409, "subscribers on a paused task -> 409")
    status, j = http(env, "POST", "/v1/tasks/%d/resume" % sched)
    check(status == 200 and env.r.cmd("GET", key(env, sched, "ctl")) == "run", "resume")
    check(wait_until(lambda: sql(env, "SELECT state FROM push_task WHERE id=%d" % sched)
                     == [["scheduled"]], 15), "never claimed -> scheduled again")
    out = ctl(env, "cancel", later)
    check(out.returncode == 0 and env.r.cmd("GET", key(env, later, "ctl")) == "cancel",
          "heraldctl cancel (%s)" % out.stderr.strip())
    check(wait_until(lambda: sql(env, "SELECT state, cancelled FROM push_task WHERE id=%d"
                                 % later) == [["cancelled", "2"]], 15),
          "cancelled with its 2 subscribers counted")
    check(env.r.cmd("EXISTS", key(env, later, "subs")) == 0
          and env.r.cmd("HGET", key(env, later, "stats"), "cancelled") == "2",
          "subs dropped, stats.cancelled = 2")
    check(env.r.cmd("PTTL", key(env, later, "stats")) > 6 * 86400 * 1000
          and env.r.cmd("PTTL", key(env, later, "ctl")) > 6 * 86400 * 1000,
          "a cancelled task's keys expire after the retention")
    status, j = http(env, "POST", "/v1/tasks/%d/resume" % later)
    check(status == 409, "control on a cancelled task -> 409")
    out = ctl(env, "pause", later)
    check(out.returncode == 1, "heraldctl pause of a cancelled task fails")


def test_subs_after_start(env, sched):
    # seq exists (an owner's reconciliation ran) while MySQL still says
    # scheduled: the rows committed before any claim, so the reconciliation
    # reads them and the API says so with a 200.
    env.r.cmd("SET", key(env, sched, "seq"), 1)
    status, j = http(env, "POST", "/v1/tasks/%d/subscribers" % sched, {"uids": [777]})
    check(status == 200 and j["added"] == 1,
          "subscribers stored before the claim -> 200 (%d %s)" % (status, j))
    env.r.cmd("DEL", key(env, sched, "seq"))
    status, _ = http(env, "DELETE", "/v1/tasks/%d/subscribers/777" % sched)
    check(status == 200, "the row can be deleted again")
    # After the claim: 409, and MySQL keeps nothing of the request.
    before = sql(env, "SELECT COUNT(*) FROM push_subscription WHERE task_id = %d" % sched)
    sql(env, "UPDATE push_task SET state = 'dispatching' WHERE id = %d" % sched)
    status, j = http(env, "POST", "/v1/tasks/%d/subscribers" % sched, {"uids": [778, 779]})
    after = sql(env, "SELECT COUNT(*) FROM push_subscription WHERE task_id = %d" % sched)
    sql(env, "UPDATE push_task SET state = 'scheduled' WHERE id = %d" % sched)
    check(status == 409 and j["error"]["code"] == "wrong_state",
          "subscribers after the claim -> 409 wrong_state (%d %s)" % (status, j))
    check(before == after, "... and no row stored (%s -> %s)" % (before, after))


def raw_head(env, path, length, auth=None):
    """Sends only the head of a POST announcing LENGTH body bytes (no body)
    and returns (status, body text) of what the server answers on it."""
    with socket.create_connection(("127.0.0.1", env.port), timeout=10) as s:
        head = "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" % path
        if auth is not None:
            head += "Authorization: Bearer %s\r\n" % auth
        s.sendall((head + "Content-Length: %d\r\n\r\n" % length).encode())
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            piece = s.recv(4096)
            if not piece:
                break
            data += piece
    text = data.decode(errors="replace")
    status = int(text.split(" ", 2)[1]) if text.startswith("HTTP/1.1 ") else 0
    return status, text.partition("\r\n\r\n")[2]


def test_auth_before_body(env, sched):
    """Refused on the headers: the body (1 MiB announced) is never sent."""
    path = "/v1/tasks/%d/subscribers" % sched
    status, body = raw_head(env, path, 1 << 20)
    check(status == 401 and '"unauthorized"' in body, "1 MiB POST without a token -> 401 "
          "before the body (%s %s)" % (status, body))
    status, body = raw_head(env, path, 1 << 20, auth=TOKEN)
    check(status == 413 and '"body_too_large"' in body, "1 MiB POST with the token -> 413 "
          "before the body (%s %s)" % (status, body))


def test_metrics(env):
    status, text = http(env, "GET", "/metrics", token=None, port=env.probe_port)
    check(status == 200 and 'herald_api_requests_total{route="/v1/tasks",code="401"} 1' in text,
          "metrics count the 401")
    check('herald_tasks{state="cancelled"}' in text and "herald_chunks_published_total" in text
          and "herald_claim_lag_seconds_bucket" in text, "dispatcher families exported")
    check(wait_until(lambda: http(env, "GET", "/readyz", token=None, port=env.probe_port)[0]
                     == 200, 15), "ready")
    # herald_tasks{state} against MySQL, every state: the unfinished ones are
    # counted every scan, the finished ones once a minute and in the scan
    # after a control cancel (test_control cancelled one), so both agree
    # within a few scans.
    def counts():
        """(the gauge by state, MySQL's count of the same states)"""
        text = http(env, "GET", "/metrics", token=None, port=env.probe_port)[1]
        gauge = {m.group(1): int(float(m.group(2))) for m in
                 re.finditer(r'^herald_tasks\{state="(\w+)"\} (\S+)$', text, re.M)}
        rows = dict(sql(env, "SELECT state, COUNT(*) FROM push_task WHERE topic = '%s' "
                        "GROUP BY state" % env.topic))
        return gauge, {s: int(rows.get(s, 0)) for s in gauge}

    def agree():
        gauge, mysql = counts()
        return len(gauge) == 7 and gauge == mysql
    check(wait_until(agree, 10) and counts()[1]["cancelled"] >= 1,
          "herald_tasks{state} = MySQL's count of each state (%s)" % (counts(),))


def test_recover(env, sched):
    sql(env, "INSERT INTO push_delivery (task_id, uid, status, at) SELECT %d, uid, 'sent', "
        "UTC_TIMESTAMP(3) FROM push_subscription WHERE task_id=%d AND uid <= 10" % (sched, sched))
    env.r.cmd("SADD", key(env, sched, "pulled"), 11)
    env.r.cmd("DEL", key(env, sched, "subs"))
    env.r.cmd("SADD", key(env, sched, "chunk:3"), 50)
    out = ctl(env, "recover", sched)
    check(out.returncode == 0, "heraldctl recover (%s%s)" % (out.stdout.strip(), out.stderr))
    # 99 subscribed, 10 sent, 1 pulled
    check(env.r.cmd("SCARD", key(env, sched, "subs")) == 88
          and env.r.cmd("SISMEMBER", key(env, sched, "subs"), 5) == 0
          and env.r.cmd("SISMEMBER", key(env, sched, "subs"), 11) == 0
          and env.r.cmd("EXISTS", key(env, sched, "chunk:3")) == 0,
          "recover rebuilt subs = subscriptions - delivered - pulled, dropped stale chunks")
    check(env.r.cmd("ZSCORE", env.prefix + "timer", sched) is not None, "back in the timer")


def test_redrive(env, sched):
    sql(env, "UPDATE push_task SET state='done', failed=5, total=200 WHERE id=%d" % sched)
    sql(env, "DELETE FROM push_delivery WHERE task_id=%d" % sched)
    sql(env, "INSERT INTO push_delivery (task_id, uid, status, at) VALUES %s"
        % ",".join("(%d, %d, '%s', UTC_TIMESTAMP(3))" % (sched, u, "failed" if u > 200 else "sent")
                   for u in (1, 2, 201, 202, 203, 204, 205)))
    for uid in range(201, 206):
        env.r.cmd("HSET", key(env, sched, "failed"), uid, "http 500")
    env.r.cmd("HSET", key(env, sched, "stats"), "failed", 5)
    env.r.cmd("HSET", key(env, sched, "stats"), "published", 200)
    env.r.cmd("SET", key(env, sched, "seq"), 4)
    out = ctl(env, "redrive", sched)
    check(out.returncode == 0 and "5 recipients into chunk 5" in out.stdout,
          "heraldctl redrive (%s%s)" % (out.stdout.strip(), out.stderr))
    check(env.r.cmd("EXISTS", key(env, sched, "failed")) == 0
          and env.r.cmd("SCARD", key(env, sched, "chunk:5")) == 5
          and int(env.r.cmd("HGET", key(env, sched, "pending"), 5)) < time.time() * 1000 - 1000
          and env.r.cmd("HGET", key(env, sched, "stats"), "failed") == "0",
          "the dead letters form chunk 5, pending with an old publish time")
    check(sql(env, "SELECT state, failed FROM push_task WHERE id=%d" % sched)
          == [["dispatched", "0"]], "mysql: failed - 5, done -> dispatched")
    # The 5 were published once: total and stats.published drop by 5 until
    # the new chunk's first publish adds them back (never 205), and their
    # 'failed' log rows go so a recover would push them again.
    total = sql(env, "SELECT total FROM push_task WHERE id=%d" % sched)[0][0]
    published = env.r.cmd("HGET", key(env, sched, "stats"), "published")
    check(total in ("195", "200") and published in ("195", "200"),
          "redrive takes the 5 off total and stats.published (%s, %s)" % (total, published))
    check(sql(env, "SELECT uid, status FROM push_delivery WHERE task_id=%d ORDER BY uid" % sched)
          == [["1", "sent"], ["2", "sent"]], "their 'failed' log rows are gone, the rest stay")


def cleanup(env):
    """Drops what a test run left: its Redis keys, its tasks' rows, its config."""
    env.r.unlink_pattern(env.prefix + "*")
    ids = "SELECT id FROM push_task WHERE topic = '%s'" % env.topic
    sql(env, "DELETE FROM push_subscription WHERE task_id IN (%s)" % ids)
    sql(env, "DELETE FROM push_delivery WHERE task_id IN (%s)" % ids)
    sql(env, "DELETE FROM push_task WHERE topic = '%s'" % env.topic)
    os.unlink(env.cfg_path)


def make_env(kind, doc):
    """The Env of a test run as `test_KIND.py HERALD_DISPATCHER HERALDCTL`
    on the stack of $HERALD_TEST_CONFIG: its MySQL and Redis, its first
    channel, and a Redis prefix, task topic, Kafka topic and free port of
    its own.  Returns (env, the parsed config, the test's unique tag);
    exits 2 with DOC on bad usage, 77 (skipped) without the stack or the
    dispatcher's test seams."""
    if len(sys.argv) != 3:
        print(doc)
        sys.exit(2)
    cfg = os.environ.get("HERALD_TEST_CONFIG")
    if not cfg:
        print("HERALD_TEST_CONFIG is not set: skipped")
        sys.exit(77)
    require_seams(sys.argv[1])
    env = Env()
    env.dispatcher, env.heraldctl = sys.argv[1], sys.argv[2]
    with open(cfg) as f:
        base = yaml.safe_load(f)
    stack = Settings.load()
    env.db = Mysql.of(stack)
    env.channel = next(iter(base["channels"]))
    tag = "%d_%d" % (os.getpid(), random.randrange(1 << 20))
    env.prefix = "hrtest:%s:%s:" % (kind, tag)
    env.topic = "%stest_%s" % (kind, tag)
    env.kafka_topic = "herald.test.%s.%s" % (kind, tag)
    env.port = free_port()
    env.probe_port = free_port()
    env.r = Redis.of(stack)
    return env, base, tag


def main():
    env, base, tag = make_env("api", __doc__)
    test_refuses_without_tokens(env, base)
    env.cfg_path = write_config(env, base, "{tokens: [%s], max_body_bytes: 65536, max_ids: 10000,"
                                " threads: 4}" % TOKEN)
    proc, log = serve(env, env.cfg_path, "test_api_%s.log" % tag)
    try:
        now = datetime.now(timezone.utc)
        env.due = (now + timedelta(hours=3)).replace(microsecond=0)
        sched = create(env, "sched", now + timedelta(days=3), now + timedelta(days=2))
        frozen = create(env, "frozen", env.due, now - timedelta(minutes=5))
        later = create(env, "later", env.due, now + timedelta(hours=1))
        test_errors(env, sched, frozen)
        test_tasks_and_subs(env, sched)
        test_subs_after_start(env, sched)
        test_pull(env, frozen, later)
        test_control(env, sched, later)
        test_auth_before_body(env, sched)
        test_metrics(env)
    finally:
        stop_popen(proc, 20)
        log.close()
    check(proc.returncode == 0, "dispatcher exits 0 on SIGTERM")
    try:
        test_recover(env, sched)
        test_redrive(env, sched)
    finally:
        cleanup(env)
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
