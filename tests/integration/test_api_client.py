#!/usr/bin/env python3
"""Integration test of the client-facing pull (issue 16): per-user client
tokens (issued by heraldctl token and by the 5-line Python recipe of
docs/api.md), what they may and may not call, key rotation, the per-uid
rate limit, and the pull's day in the user's time zone.

usage: test_api_client.py HERALD_DISPATCHER HERALDCTL

Isolation: its own Redis prefix, Kafka and task topic (the dispatcher runs
with HERALD_TEST_TASK_TOPIC), its own port.  Exits 77 when
HERALD_TEST_CONFIG is unset.  Every wait is bounded."""
import base64
import hashlib
import hmac
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish, stop_popen  # noqa: E402
from test_api import (TOKEN, cleanup, create, ctl, http, make_env, raw_head, serve,  # noqa: E402
                      sql, write_config)

SECRET1 = "k1-" + "a" * 40
SECRET2 = "k2-" + "b" * 40
PER_MINUTE = 5


def herald_token(uid, key_id, secret, ttl=86400):
    """docs/api.md's recipe for a platform's backend, verbatim."""
    msg = "hrc1.%d.%d.%s" % (uid, int(time.time()) + ttl, key_id)
    sig = hmac.new(secret.encode(), msg.encode(), hashlib.sha256).digest()
    return msg + "." + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


def pull(env, uid, token, query=""):
    return http(env, "GET", "/v1/users/%d/reminders%s" % (uid, query), token=token)


def test_tokens(env, day):
    out = ctl(env, "token", 7, "--ttl", "1h")
    tok7 = out.stdout.strip()
    check(out.returncode == 0 and tok7.startswith("hrc1.7."), "heraldctl token 7 (%s)"
          % out.stderr.strip())
    status, j = pull(env, 7, tok7, "?date=" + day)
    ids = [r["task_id"] for r in j.get("reminders", [])] if status == 200 else []
    check(status == 200 and env.task in ids, "a client token pulls its own reminders (%s %s)"
          % (status, j))
    status, j = pull(env, 8, tok7, "?date=" + day)
    check(status == 403 and j["error"]["code"] == "forbidden", "another uid -> 403 (%s)" % status)
    for method, path in (("GET", "/v1/tasks"), ("GET", "/v1/tasks/%d" % env.task),
                         ("GET", "/v1/users/7/addresses"), ("POST", "/v1/render")):
        status, j = http(env, method, path, body={} if method == "POST" else None, token=tok7)
        check(status == 403 and j["error"]["code"] == "forbidden",
              "client token on admin route %s %s -> 403 (%s)" % (method, path, status))
    status, body = raw_head(env, "/v1/tasks/%d/subscribers" % env.task, 1 << 20, auth=tok7)
    check(status == 403 and '"forbidden"' in body, "a client token's 1 MiB POST -> 403 before "
          "the body (%s)" % status)
    status, j = pull(env, 7, herald_token(7, "k1", SECRET1), "?date=" + day)
    check(status == 200, "the recipe's token works (%s)" % status)
    status, j = pull(env, 7, herald_token(7, "k1", SECRET1, ttl=-10), "?date=" + day)
    check(status == 401 and "expired" in j["error"]["message"], "expired -> 401 (%s %s)"
          % (status, j))
    bad = tok7[:-2] + ("AA" if not tok7.endswith("AA") else "BB")
    status, j = pull(env, 7, bad, "?date=" + day)
    check(status == 401 and "signature" in j["error"]["message"], "bad signature -> 401 (%s)"
          % status)
    status, _ = pull(env, 7, herald_token(7, "k9", SECRET1), "?date=" + day)
    check(status == 401, "unknown key -> 401")
    status, _ = pull(env, 7, herald_token(7, "k1", SECRET2), "?date=" + day)
    check(status == 401, "signed with another key's secret -> 401")
    out = ctl(env, "token", 7, "--key", "k2")
    status, j = pull(env, 7, out.stdout.strip(), "?date=" + day)
    check(out.returncode == 0 and status == 200, "a token of the second (rotated-in) key works")
    # dispatcher.api.client_token_max_ttl_s is 2 days here (issue 31,
    # finding 9): a token valid for longer is refused, and heraldctl issues
    # none; before, a backend could issue tokens that never ended.
    status, j = pull(env, 7, herald_token(7, "k1", SECRET1, ttl=3 * 86400), "?date=" + day)
    check(status == 401 and "client_token_max_ttl_s" in j["error"]["message"],
          "a token valid for 3 days over a 2-day bound -> 401 (%s %s)" % (status, j))
    status, _ = pull(env, 7, herald_token(7, "k1", SECRET1, ttl=2 * 86400 - 60), "?date=" + day)
    check(status == 200, "one within the bound works (%s)" % status)
    out = ctl(env, "token", 7, "--ttl", "3d")
    check(out.returncode == 2 and "client_token_max_ttl_s" in out.stderr,
          "heraldctl token --ttl over the bound -> exit 2 (%s)" % out.stderr.strip()[:120])
    out = ctl(env, "token", "client", 7, "--ttl", "1h")
    check(out.returncode == 0 and out.stdout.startswith("hrc1.7."),
          "heraldctl token client UID is the same as token UID")
    status, j = pull(env, 8, TOKEN, "?date=" + day)
    check(status == 200, "an admin token still pulls any uid")
    status, j = http(env, "GET", "/v1/tasks", token=TOKEN)
    check(status == 200, "and calls admin routes")


def test_rate_limit(env, day):
    tok = herald_token(9, "k1", SECRET1)
    statuses, retry, minute = [], None, int(time.time()) // 60
    for _ in range(PER_MINUTE + 1):
        req = urllib.request.Request("http://127.0.0.1:%d/v1/users/9/reminders?date=%s"
                                     % (env.port, day))
        req.add_header("Authorization", "Bearer " + tok)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                statuses.append(r.status)
        except urllib.error.HTTPError as e:
            statuses.append(e.code)
            retry = e.headers.get("Retry-After")
    rolled = int(time.time()) // 60 != minute
    check(rolled or statuses == [200] * PER_MINUTE + [429],
          "%d pulls a minute, then 429 (%s)" % (PER_MINUTE, statuses))
    check(rolled or (retry is not None and 1 <= int(retry) <= 60),
          "429 says Retry-After (%s)" % retry)
    # One hash a scope, its window numbered by Redis's clock (ratelimit.lua).
    check(env.r.cmd("HGET", "%srl:pull:9" % env.prefix, "n") is not None or rolled,
          "the counter lives in Redis (shared by every dispatcher)")
    status, _ = pull(env, 7, herald_token(7, "k1", SECRET1), "?date=" + day)
    check(status == 200, "another uid's budget is its own")
    for _ in range(PER_MINUTE + 1):
        status, _ = pull(env, 9, TOKEN, "?date=" + day)
    check(status == 200, "admin pulls are not limited")


def test_zone(env, task_day):
    """The task is due at 23:30 UTC on TASK_DAY: in Tokyo (UTC+9) that is
    08:30 the next day."""
    nxt = (task_day + timedelta(days=1)).strftime("%Y-%m-%d")
    day = task_day.strftime("%Y-%m-%d")
    status, j = pull(env, 8, TOKEN, "?date=" + day)
    ids = [r["task_id"] for r in j.get("reminders", [])] if status == 200 else []
    check(status == 200 and env.late in ids and j["tz"] == "UTC", "no tz: the UTC day (%s)" % j)
    env.r.cmd("HSET", env.prefix + "user:8", "tz", "Asia/Tokyo")
    status, j = pull(env, 8, TOKEN, "?date=" + day)
    ids = [r["task_id"] for r in j.get("reminders", [])] if status == 200 else []
    check(status == 200 and env.late not in ids and j["tz"] == "Asia/Tokyo",
          "tz Asia/Tokyo: not on the UTC date (%s)" % j)
    status, j = pull(env, 8, TOKEN, "?date=" + nxt)
    ids = [r["task_id"] for r in j.get("reminders", [])] if status == 200 else []
    check(status == 200 and env.late in ids and j["date"] == nxt,
          "tz Asia/Tokyo: on the next local day (%s)" % j)
    env.r.cmd("HSET", env.prefix + "user:8", "tz", "Not/AZone")
    status, j = pull(env, 8, TOKEN, "?date=" + day)
    ids = [r["task_id"] for r in j.get("reminders", [])] if status == 200 else []
    check(status == 200 and env.late in ids and j["tz"] == "UTC", "an unknown tz: UTC (%s)" % j)


def main():
    env, base, tag = make_env("cli", __doc__)
    fd, secret_file = tempfile.mkstemp(prefix="herald-test-key-")
    with os.fdopen(fd, "w") as f:
        f.write(SECRET2 + "\n")
    env.cfg_path = write_config(
        env, base, "{tokens: [%s], client_keys: [{id: k1, secret: %s}, {id: k2, secret_file: %s}],"
        " pull_per_minute: %d, threads: 4, client_token_max_ttl_s: 172800}"
        % (TOKEN, SECRET1, secret_file, PER_MINUTE))
    proc, log = serve(env, env.cfg_path, "test_api_client_%s.log" % tag)
    status = None
    try:
        now = datetime.now(timezone.utc).replace(microsecond=0)
        due = now + timedelta(days=2)
        task_day = due.replace(hour=23, minute=30, second=0)
        env.task = create(env, "pull", due, now - timedelta(minutes=5))
        env.late = create(env, "late", task_day, now - timedelta(minutes=5))
        for t in (env.task, env.late):
            s, _ = http(env, "POST", "/v1/tasks/%d/subscribers" % t, {"uids": [7, 8, 9]})
            check(s == 200, "subscribe 7, 8, 9")
        day = due.strftime("%Y-%m-%d")
        test_tokens(env, day)
        test_rate_limit(env, day)
        test_zone(env, task_day)
    finally:
        status = stop_popen(proc, 20)
        log.close()
        cleanup(env)
        os.unlink(secret_file)
    check(status == 0, "dispatcher exits 0 on SIGTERM")
    with open(log.name) as f:
        text = f.read()
    check(SECRET1 not in text and SECRET2 not in text and "hrc1." not in text,
          "no client key secret and no client token in the dispatcher's log")
    os.unlink(log.name)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
