#!/usr/bin/env python3
"""Operators, roles and the audit log (issue 31), against the real
herald-dispatcher and heraldctl:

1. Roles, table-driven: every route `herald-dispatcher --print-routes`
   prints is called with a viewer's, an operator's and an admin's API token
   (made through POST /v1/tokens) and with a JWT of each role; a caller
   below the route's role gets 403 (on the headers, nothing changed), one
   at or above it is let in; no token and an unknown one get 401.  The
   test holds its own table of the roles too: a route it does not know
   fails it.
2. The audit log: each mutating call (create, PATCH, pause, resume, cancel,
   subscribers added and removed, an address added, replaced and removed,
   redrive, recover, a token made and revoked, an event webhook made,
   changed and deleted, a profile put, a suppression added and removed;
   heraldctl pause, hooks add, suppression add) leaves one
   row naming who (token:<name>, its role), how (api, console, cli), from
   where, what (the route, the task, the target) and the fields before and
   after; a refused or failed call leaves none.  Rows are append-only:
   UPDATE and DELETE are refused by the triggers, the retention purge
   deletes only rows past 30 days and writes its own row.
3. Tokens: shown once, never in the log; one revoked through the API is
   refused at once, one revoked with heraldctl (another process) within the
   cache's 5 s; one made with heraldctl works within a second.
4. Single sign-on: RS256 and ES256 tokens of a JWK Set made here (valid:
   let in with the role of their claim); wrong issuer, wrong audience,
   expired, a bad signature, an unknown kid, alg none and HS256 keyed with
   the RSA public key: 401; no role claim: 403; the key set file replaced
   with a new key is taken within 5 s, without a restart.

usage: test_api_roles.py HERALD_DISPATCHER HERALDCTL

Isolation: its own Redis prefix, task topic, ports and token names.  Exits
77 when HERALD_TEST_CONFIG is unset.  Every wait is bounded."""
import base64
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timedelta, timezone

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import MysqlError, check, finish, job_wait, stop_popen, wait_until  # noqa: E402
from test_api import (TOKEN, cleanup, create, ctl, http, key, make_env, serve, sql,  # noqa: E402
                      write_config)
import jwt  # noqa: E402  (Debian's python3-jwt, on the path through badinput_env)
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402

ISS = "https://id.example.org"
AUD = "herald-test"
ROLES = ("viewer", "operator", "admin")
RANK = {"viewer": 1, "operator": 2, "admin": 3}
MISSING = 999999999999  # an id no task, job or token has

# The role of every route, decided once (docs/api.md "Operators and roles").
WANT = {
    ("GET", "/v1/me"): "viewer",
    ("POST", "/v1/tasks"): "admin",
    ("GET", "/v1/tasks"): "viewer",
    ("GET", "/v1/tasks/{id}"): "viewer",
    ("PATCH", "/v1/tasks/{id}"): "admin",
    ("POST", "/v1/tasks/{id}/pause"): "operator",
    ("POST", "/v1/tasks/{id}/resume"): "operator",
    ("POST", "/v1/tasks/{id}/cancel"): "operator",
    ("POST", "/v1/tasks/{id}/subscribers"): "operator",
    ("DELETE", "/v1/tasks/{id}/subscribers/{uid}"): "operator",
    ("GET", "/v1/tasks/{id}/subscribers/count"): "viewer",
    ("GET", "/v1/tasks/{id}/chunks"): "viewer",
    ("GET", "/v1/tasks/{id}/dead-letters"): "viewer",
    ("POST", "/v1/tasks/{id}/redrive"): "operator",
    ("POST", "/v1/tasks/{id}/recover"): "operator",
    ("GET", "/v1/tasks/{id}/render"): "operator",
    ("GET", "/v1/tasks/{id}/stats"): "viewer",
    ("POST", "/v1/render"): "operator",
    ("GET", "/v1/users/{uid}/reminders"): "operator",
    ("POST", "/v1/users/{uid}/events"): "operator",
    ("GET", "/v1/users/{uid}/addresses"): "operator",
    ("POST", "/v1/users/{uid}/addresses"): "operator",
    ("PUT", "/v1/users/{uid}/addresses"): "operator",
    ("DELETE", "/v1/users/{uid}/addresses"): "operator",
    ("GET", "/v1/jobs/{id}"): "viewer",
    ("GET", "/v1/tokens"): "admin",
    ("POST", "/v1/tokens"): "admin",
    ("DELETE", "/v1/tokens/{id}"): "admin",
    ("GET", "/v1/audit"): "admin",
    ("POST", "/v1/hooks"): "admin",
    ("GET", "/v1/hooks"): "operator",
    ("GET", "/v1/hooks/{id}"): "operator",
    ("PATCH", "/v1/hooks/{id}"): "admin",
    ("DELETE", "/v1/hooks/{id}"): "admin",
    ("GET", "/v1/hooks/{id}/dead-letters"): "operator",
    ("POST", "/v1/hooks/{id}/redrive"): "operator",
    ("POST", "/v1/series"): "operator",
    ("GET", "/v1/series"): "viewer",
    ("GET", "/v1/series/{id}"): "viewer",
    ("GET", "/v1/series/{id}/next"): "viewer",
    ("POST", "/v1/series/{id}/pause"): "operator",
    ("POST", "/v1/series/{id}/resume"): "operator",
    ("POST", "/v1/series/{id}/end"): "operator",
    ("POST", "/v1/series/{id}/subscribers"): "operator",
    ("DELETE", "/v1/series/{id}/subscribers/{uid}"): "operator",
    ("GET", "/v1/series/{id}/subscribers"): "operator",
    ("GET", "/v1/users/{uid}"): "operator",
    ("PUT", "/v1/users/{uid}"): "operator",
    ("PATCH", "/v1/users/{uid}"): "operator",
    ("DELETE", "/v1/users/{uid}"): "operator",
    ("GET", "/v1/users/{uid}/preferences"): "operator",
    ("PUT", "/v1/users/{uid}/preferences"): "operator",
    ("GET", "/v1/suppressions"): "operator",
    ("POST", "/v1/suppressions"): "operator",
    ("DELETE", "/v1/suppressions"): "admin",
}


def short(x, n=200):
    """X as text of at most N characters, for a check's message."""
    text = x if isinstance(x, str) else json.dumps(x)
    return text if len(text) <= n else text[:n] + "..."


def b64(n, size=None):
    raw = n.to_bytes(size or (n.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class Keys:
    """An identity provider of the test: an RSA and an EC signing key,
    written as a JWK Set to PATH."""

    def __init__(self, path):
        self.path = path
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.rsa_kid, self.ec_kid = "rsa-1", "ec-1"
        self.write()

    def jwks(self):
        r, e = self.rsa.public_key().public_numbers(), self.ec.public_key().public_numbers()
        return {"keys": [
            {"kty": "RSA", "kid": self.rsa_kid, "use": "sig", "alg": "RS256",
             "n": b64(r.n), "e": b64(r.e)},
            {"kty": "EC", "kid": self.ec_kid, "crv": "P-256",
             "x": b64(e.x, 32), "y": b64(e.y, 32)}]}

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.jwks(), f)
        os.replace(tmp, self.path)

    def token(self, role="operator", alg="RS256", kid=None, **claims):
        now = int(time.time())
        body = {"iss": ISS, "aud": AUD, "sub": "alice@example.org", "exp": now + 300,
                "iat": now, "herald_role": role}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        key_obj = self.rsa if alg == "RS256" else self.ec
        return jwt.encode(body, key_obj, algorithm=alg,
                          headers={"kid": kid or (self.rsa_kid if alg == "RS256" else self.ec_kid)})


def forged(header, claims, sig=b""):
    part = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()  # noqa
    return "%s.%s.%s" % (part(header), part(claims),
                         base64.urlsafe_b64encode(sig).rstrip(b"=").decode())


def hs256(secret, kid, claims):
    """A JWT whose HMAC is keyed with SECRET (the RSA public key's PEM): what
    a verifier taking alg from the token would accept as signed."""
    head = forged({"alg": "HS256", "typ": "JWT", "kid": kid}, claims).rsplit(".", 1)[0]
    sig = hmac.new(secret, head.encode(), hashlib.sha256).digest()
    return head + "." + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


def request(env, method, path, token, body=None, headers=None):
    """(status, JSON or text) with TOKEN (None: no Authorization)."""
    return http(env, method, path, body, token=token, headers=headers)


def make_token(env, name, role, by=TOKEN):
    status, j = request(env, "POST", "/v1/tokens", by,
                        {"name": name, "role": role, "expires_in": 3600})
    check(status == 201 and j["role"] == role and j["token"].startswith("hrt1_")
          and j["created_by"] == "bootstrap:1",
          "POST /v1/tokens makes %s's %s token (%s)" % (name, role, status))
    return j


# ---- 1. roles ----------------------------------------------------------------

def routes(env):
    out = subprocess.run([env.dispatcher, "--print-routes"], capture_output=True, text=True,
                         timeout=10)
    table = [tuple(line.split(" ")) for line in out.stdout.splitlines() if line]
    v1 = {(m, p): r for m, p, r in table if p.startswith("/v1/")}
    check(out.returncode == 0 and all(r in ROLES for r in v1.values()),
          "--print-routes gives every /v1 route a role (%s)" % v1)
    check(v1 == WANT, "the routes and their roles are this test's table (served %s, want %s)"
          % (sorted(set(v1.items()) - set(WANT.items())),
             sorted(set(WANT.items()) - set(v1.items()))))
    return v1


def call(env, method, pattern, token):
    """Calls a route so that, let in, it changes nothing: ids nobody has,
    empty bodies that fail validation."""
    path = pattern.replace("{id}", str(MISSING)).replace("{uid}", "1")
    body = {} if method in ("POST", "PUT", "PATCH") else None
    if pattern.startswith("/v1/users/{uid}") and not pattern.endswith(("/reminders", "/events",
                                                                       "/addresses")):
        # A profile or its preferences: a uid nobody has and a bad value
        # (an empty profile would be one).
        path = pattern.replace("{uid}", str(MISSING))
        body = {"tz": 1} if pattern.endswith("{uid}") else {"opt_out": 1}
        body = body if method in ("PUT", "PATCH") else None
    if method == "POST" and not (pattern.endswith("/tasks") or pattern.endswith("/render")
                                 or pattern.endswith("/subscribers")
                                 or pattern.endswith("/tokens")
                                 or pattern.endswith("/addresses")):
        body = None
    return request(env, method, path, token, body)


def test_roles(env, table, callers, tag):
    # Rows of this test's callers only: other tests share the database.
    mine = ("SELECT COUNT(*) FROM push_audit WHERE actor LIKE '%%%s' OR actor = "
            "'jwt:alice@example.org'" % tag)
    audit_before = sql(env, mine)
    for (method, pattern), need in sorted(table.items()):
        status, j = call(env, method, pattern, None)
        check(status == 401, "%s %s without a token -> 401 (%s)" % (method, pattern, status))
        status, j = call(env, method, pattern, "hrt1_" + "A" * 43)
        check(status == 401, "%s %s with an unknown API token -> 401 (%s)"
              % (method, pattern, status))
        for who, (role, token) in callers.items():
            status, j = call(env, method, pattern, token)
            if RANK[role] < RANK[need]:
                check(status == 403 and "needs " + need in j["error"]["message"],
                      "%s %s as %s (%s) -> 403 (%s %s)" % (method, pattern, who, role, status,
                                                           short(j)))
            else:
                check(status not in (401, 403),
                      "%s %s as %s (%s) is let in (%s %s)" % (method, pattern, who, role, status,
                                                               short(j)))
    check(sql(env, mine) == audit_before,
          "no call of the table changed anything (no audit row of its callers)")


def test_me(env, callers):
    status, j = request(env, "GET", "/v1/me", TOKEN)
    check(status == 200 and j["name"] == "bootstrap:1" and j["role"] == "admin"
          and len(j["routes"]) == len(WANT), "GET /v1/me of the bootstrap token (%s)" % j)
    status, j = request(env, "GET", "/v1/me", callers["viewer"][1])
    check(status == 200 and j["role"] == "viewer" and j["name"].startswith("token:")
          and "POST /v1/tasks/{id}/pause" not in j["routes"] and "GET /v1/tasks" in j["routes"],
          "GET /v1/me of a viewer lists only what it may call (%s)" % j)


# ---- 2. the audit log --------------------------------------------------------

def last_row(env, task=None, action=None, actor=None):
    q = "/v1/audit?limit=1"
    if task is not None:
        q += "&task=%d" % task
    if action is not None:
        q += "&action=" + urllib.request.quote(action)
    if actor is not None:
        q += "&actor=" + urllib.request.quote(actor)
    status, j = request(env, "GET", q, TOKEN)
    return j["audit"][0] if status == 200 and j["audit"] else {}


def expect_row(env, what, row, actor, role, action, task=None, before=None, after=None,
               via="api", target=None):
    ok = (row.get("actor") == actor and row.get("role") == role and row.get("via") == via
          and row.get("action") == action and row.get("task_id") == task
          and row.get("peer") == ("127.0.0.1" if via != "cli" else row.get("peer"))
          and (target is None or row.get("target") == target)
          and (before is None or row.get("before") == before)
          and (after is None or all(row.get("after", {}).get(k) == v for k, v in after.items())))
    check(ok, "audit: %s (%s)" % (what, json.dumps(row)[:400]))


def test_audit_rows(env, callers, op, admin):
    op_name, adm_name = "token:" + callers["operator"][2], "token:" + callers["admin"][2]
    due = (datetime.now(timezone.utc) + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status, t = request(env, "POST", "/v1/tasks", admin,
                        {"name": "audited", "channel": env.channel, "topic": env.topic,
                         "due_at": due, "title": "t1"})
    tid = t.get("id")
    expect_row(env, "create", last_row(env, tid), adm_name, "admin", "POST /v1/tasks", tid,
               before=None, after={"name": "audited", "title": "t1"})
    request(env, "PATCH", "/v1/tasks/%d" % tid, admin, {"title": "t2"})
    expect_row(env, "PATCH: the changed field only", last_row(env, tid), adm_name, "admin",
               "PATCH /v1/tasks/{id}", tid, before={"title": "t1"}, after={"title": "t2"})
    status, _ = request(env, "PATCH", "/v1/tasks/%d" % tid, op, {"title": "t3"})
    check(status == 403 and last_row(env, tid).get("action") == "PATCH /v1/tasks/{id}"
          and sql(env, "SELECT title FROM push_task WHERE id=%d" % tid) == [["t2"]],
          "an operator's PATCH is refused and leaves no row")
    request(env, "POST", "/v1/tasks/%d/subscribers" % tid, op, {"uids": [5, 6, 7]})
    expect_row(env, "subscribers added: the counts", last_row(env, tid), op_name, "operator",
               "POST /v1/tasks/{id}/subscribers", tid, after={"received": 3, "added": 3})
    request(env, "DELETE", "/v1/tasks/%d/subscribers/7" % tid, op)
    expect_row(env, "a subscriber removed", last_row(env, tid), op_name, "operator",
               "DELETE /v1/tasks/{id}/subscribers/{uid}", tid, target="uid 7",
               before={"subscribed": True}, after={"subscribed": False})
    for action, want in (("pause", "pause"), ("resume", "run")):
        request(env, "POST", "/v1/tasks/%d/%s" % (tid, action), op,
                headers={"X-Herald-Client": "console"})
        expect_row(env, action + " from the console", last_row(env, tid), op_name, "operator",
                   "POST /v1/tasks/{id}/" + action, tid, via="console",
                   after={"control": want})
    out = ctl(env, "pause", tid)
    row = last_row(env, tid)
    check(out.returncode == 0 and row.get("actor", "").startswith("cli:")
          and row.get("via") == "cli" and row.get("role") is None
          and row.get("action") == "heraldctl pause" and row.get("peer", "").startswith("host:")
          and row.get("after") == {"control": "pause"},
          "audit: heraldctl pause (%s)" % json.dumps(row)[:300])
    # Addresses: before and after are the uid's whole list.
    uid = 900000000 + os.getpid()
    addr = {"platform": "email", "address": "ann@example.org"}
    request(env, "POST", "/v1/users/%d/addresses" % uid, op, addr)
    row = last_row(env, action="POST /v1/users/{uid}/addresses", actor=op_name)
    check(row.get("target") == "uid %d" % uid and row.get("before") == {"addresses": []}
          and len(row.get("after", {}).get("addresses", [])) == 1 and row["actor"] == op_name,
          "audit: an address added (%s)" % row)
    request(env, "PUT", "/v1/users/%d/addresses" % uid, op,
            {"addresses": [{"platform": "email", "address": "bob@example.org"}]})
    row = last_row(env, action="PUT /v1/users/{uid}/addresses", actor=op_name)
    check(row.get("after", {}).get("addresses", [{}])[0].get("address") == "bob@example.org"
          and row.get("before", {}).get("addresses", [{}])[0].get("address") == "ann@example.org",
          "audit: the addresses replaced (%s)" % row)
    request(env, "DELETE", "/v1/users/%d/addresses?platform=email&address=bob%%40example.org"
            % uid, op)
    row = last_row(env, action="DELETE /v1/users/{uid}/addresses", actor=op_name)
    check(row.get("after") == {"addresses": []}, "audit: the address removed (%s)" % row)
    newest = last_row(env, actor=op_name).get("id")
    status, _ = request(env, "POST", "/v1/users/%d/addresses" % uid, op,
                        {"platform": "email", "address": "not an address"})
    check(status == 400 and last_row(env, actor=op_name).get("id") == newest,
          "a refused address writes no row")
    # Redrive and recover write their rows after their work.
    sql(env, "UPDATE push_task SET state='done', failed=2, total=2 WHERE id=%d" % tid)
    env.r.cmd("HSET", key(env, tid, "failed"), 5, "http 500", 6, "http 500")
    env.r.cmd("SET", key(env, tid, "seq"), 1)
    request(env, "POST", "/v1/tasks/%d/redrive" % tid, op)
    expect_row(env, "redrive", last_row(env, tid), op_name, "operator",
               "POST /v1/tasks/{id}/redrive", tid, after={"redriven": 2})
    sql(env, "UPDATE push_task SET state='scheduled', control='run' WHERE id=%d" % tid)
    status, j = request(env, "POST", "/v1/tasks/%d/recover" % tid, op)
    job, _ = job_wait(lambda path: request(env, "GET", path, op), j) if status == 202 else ({}, [])
    check(job.get("state") == "done", "the recover job ended done (%s)" % job)
    rows = request(env, "GET", "/v1/audit?task=%d&limit=2" % tid, TOKEN)[1]["audit"]
    check([r["action"] for r in rows] == ["recover job", "POST /v1/tasks/{id}/recover"]
          or [r["action"] for r in rows] == ["POST /v1/tasks/{id}/recover", "recover job"],
          "recover: the request's row and the job's end (%s)" % [r["action"] for r in rows])
    request(env, "POST", "/v1/tasks/%d/cancel" % tid, op)
    expect_row(env, "cancel", last_row(env, tid), op_name, "operator",
               "POST /v1/tasks/{id}/cancel", tid, after={"control": "cancel"})
    # A call that fails after its change started leaves no row: a finished
    # task's control is refused.
    sql(env, "UPDATE push_task SET state='cancelled' WHERE id=%d" % tid)
    n = sql(env, "SELECT COUNT(*) FROM push_audit WHERE task_id=%d" % tid)
    status, _ = request(env, "POST", "/v1/tasks/%d/pause" % tid, op)
    check(status == 409 and sql(env, "SELECT COUNT(*) FROM push_audit WHERE task_id=%d" % tid)
          == n, "a refused pause (409) writes no row")
    out = ctl(env, "audit", "--task", tid, "--json")
    rows = json.loads(out.stdout) if out.returncode == 0 else []
    check(len(rows) >= 10 and rows[0]["task_id"] == tid,
          "heraldctl audit --task lists the task's rows (%d)" % len(rows))
    return tid


def rows_of(env, action, target):
    """How many audit rows ACTION on TARGET left."""
    return int(sql(env, "SELECT COUNT(*) FROM push_audit WHERE action = '%s' AND target = '%s'"
                   % (action, target.replace("'", "''")))[0][0])


def one_row(env, what, action, target, actor, role, via="api", before=None, after=None,
            secret=None):
    """Exactly one row of ACTION on TARGET, by ACTOR, with the fields
    BEFORE (exactly) and AFTER (these members), and SECRET nowhere in it."""
    n = rows_of(env, action, target)
    row = last_row(env, action=action, actor=actor)
    text = json.dumps(row)
    check(n == 1 and row.get("target") == target and row.get("actor") == actor
          and row.get("role") == role and row.get("via") == via
          and (before is None or row.get("before") == before)
          and (after is None or all(row.get("after", {}).get(k) == v for k, v in after.items()))
          and (secret is None or (secret not in text and "whsec_" not in text)),
          "audit: %s: one row (%d; %s)" % (what, n, text[:400]))
    return row


def test_audit_recipients_hooks(env, callers, op, admin):
    """The event webhooks and the recipients' changes (issue 31's holes):
    one row each, by the right actor, the hook's secret in none."""
    op_name, adm_name = "token:" + callers["operator"][2], "token:" + callers["admin"][2]
    url = "http://127.0.0.1:9/audited-%d" % os.getpid()
    status, h = request(env, "POST", "/v1/hooks", admin, {"url": url, "description": "audited"})
    check(status == 201 and h.get("secret", "").startswith("whsec_"),
          "POST /v1/hooks makes a hook (%s)" % status)
    target, secret = "hook %s" % h.get("id"), h.get("secret", "?")
    one_row(env, "a hook made", "POST /v1/hooks", target, adm_name, "admin", before=None,
            after={"url": url, "description": "audited", "state": "enabled", "secret": "set"},
            secret=secret)
    status, _ = request(env, "PATCH", "/v1/hooks/%s" % h.get("id"), admin,
                        {"state": "disabled", "description": "audited 2"})
    one_row(env, "a hook changed: the changed fields only", "PATCH /v1/hooks/{id}", target,
            adm_name, "admin", before={"state": "enabled", "description": "audited"},
            after={"state": "disabled", "description": "audited 2"}, secret=secret)
    status, _ = request(env, "PATCH", "/v1/hooks/%s" % h.get("id"), admin, {"url": "ftp://x"})
    check(status == 400 and rows_of(env, "PATCH /v1/hooks/{id}", target) == 1,
          "a refused hook PATCH (400) writes no row")
    status, _ = request(env, "DELETE", "/v1/hooks/%s" % h.get("id"), admin)
    row = one_row(env, "a hook deleted", "DELETE /v1/hooks/{id}", target, adm_name, "admin",
                  secret=secret)
    check(status == 204 and row.get("after") is None and row.get("before", {}).get("url") == url,
          "audit: a hook deleted: before is the hook, after null (%s)" % json.dumps(row)[:300])
    out = ctl(env, "hooks", "add", url + "/cli")
    made = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    cli = "hook %s" % made.get("hook")
    row = last_row(env, action="heraldctl hooks add")
    check(out.returncode == 0 and rows_of(env, "heraldctl hooks add", cli) == 1
          and row.get("actor", "").startswith("cli:") and row.get("via") == "cli"
          and row.get("after", {}).get("secret") == "set"
          and made.get("secret", "?") not in json.dumps(row),
          "audit: heraldctl hooks add: one row, no secret (%s)" % json.dumps(row)[:300])
    ctl(env, "hooks", "rm", made.get("hook", "0"))
    check(rows_of(env, "heraldctl hooks rm", cli) == 1, "audit: heraldctl hooks rm: one row")
    # A profile: before null (none), after its fields; a PUT of the same
    # profile changes nothing and writes no row.
    uid = 910000000 + os.getpid()
    prof = {"tz": "Europe/Paris", "locale": "fr", "attributes": {"name": "Ann"}}
    status, _ = request(env, "PUT", "/v1/users/%d" % uid, op, prof)
    one_row(env, "a profile put", "PUT /v1/users/{uid}", "uid %d" % uid, op_name, "operator",
            before=None, after={"tz": "Europe/Paris", "locale": "fr",
                                "attributes": {"name": "Ann"}, "opt_out": []})
    check(status == 201, "PUT /v1/users/{uid} still answers 201 (%s)" % status)
    request(env, "PUT", "/v1/users/%d" % uid, op, prof)
    check(rows_of(env, "PUT /v1/users/{uid}", "uid %d" % uid) == 1,
          "a PUT that changes nothing writes no row")
    # The suppression list.
    addr = "audited-%d@example.org" % os.getpid()
    supp = "suppression email//" + addr
    status, _ = request(env, "POST", "/v1/suppressions", op,
                        {"platform": "email", "address": addr, "reason": "complained"})
    one_row(env, "a suppression added", "POST /v1/suppressions", supp, op_name, "operator",
            before=None, after={"reason": "complained"})
    status, _ = request(env, "DELETE", "/v1/suppressions?platform=email&address=%s"
                        % urllib.request.quote(addr), admin)
    row = one_row(env, "a suppression removed", "DELETE /v1/suppressions", supp, adm_name,
                  "admin", before={"reason": "complained", "note": None})
    check(status == 200 and row.get("after") is None,
          "audit: a suppression removed: after null (%s)" % json.dumps(row)[:300])
    out = ctl(env, "suppression", "add", "email", addr, "bounced")
    row = last_row(env, action="heraldctl suppression add")
    check(out.returncode == 0 and rows_of(env, "heraldctl suppression add", supp) == 1
          and row.get("via") == "cli" and row.get("after", {}).get("reason") == "bounced",
          "audit: heraldctl suppression add: one row (%s)" % json.dumps(row)[:300])
    ctl(env, "suppression", "rm", "email", addr)


def test_append_only(env, tag):
    for q, what in (("UPDATE push_audit SET actor = 'x' ORDER BY id DESC LIMIT 1", "UPDATE"),
                    ("DELETE FROM push_audit ORDER BY id DESC LIMIT 1", "DELETE"),
                    ("SET @herald_audit_purge = 'retention'; "
                     "DELETE FROM push_audit ORDER BY id DESC LIMIT 1", "a recent row's purge")):
        try:
            sql(env, q)
            refused = False
        except MysqlError as e:
            refused = "append-only" in str(e) or "30 days" in str(e)
        check(refused, "push_audit refuses %s" % what)
    old = "old-%s" % tag
    sql(env, "INSERT INTO push_audit (at, actor, via, action, peer) VALUES "
        "(UTC_TIMESTAMP(3) - INTERVAL 40 DAY, '%s', 'cli', 'test', 'host:test')" % old)
    out = ctl(env, "audit", "purge", "--older-than", "10d")
    check(out.returncode == 2, "audit purge under 30 days -> exit 2 (%s)" % out.stderr.strip())
    out = ctl(env, "audit", "purge", "--older-than", "35d")
    check(out.returncode == 0 and sql(env, "SELECT COUNT(*) FROM push_audit WHERE actor='%s'"
                                      % old) == [["0"]],
          "audit purge --older-than 35d deletes the 40-day-old row (%s%s)"
          % (out.stdout.strip(), out.stderr.strip()))
    row = sql(env, "SELECT action, after_json FROM push_audit WHERE action = "
              "'heraldctl audit purge' ORDER BY id DESC LIMIT 1")
    check(row and '"deleted"' in row[0][1], "the purge wrote its own row (%s)" % row)


# ---- 3. tokens -----------------------------------------------------------------

def test_revocation(env, tag):
    t = make_token(env, "rv-api-%s" % tag, "viewer")
    check(request(env, "GET", "/v1/me", t["token"])[0] == 200, "a new token works at once")
    status, j = request(env, "DELETE", "/v1/tokens/%d" % t["id"], TOKEN)
    check(status == 200 and j["revoked_at"] is not None, "DELETE /v1/tokens/{id} revokes it")
    check(request(env, "GET", "/v1/me", t["token"])[0] == 401,
          "revoked through this dispatcher: refused at once")
    status, _ = request(env, "DELETE", "/v1/tokens/%d" % t["id"], TOKEN)
    check(status == 409, "revoking it again -> 409 (%s)" % status)
    # Made and revoked by heraldctl, another process: the cache's bound.
    name = "rv-cli-%s" % tag
    out = ctl(env, "token", "create", "--name", name, "--role", "operator", "--expires", "1h")
    tok = out.stdout.strip()
    check(out.returncode == 0 and tok.startswith("hrt1_") and tok not in out.stderr,
          "heraldctl token create prints the token alone on stdout")
    check(wait_until(lambda: request(env, "GET", "/v1/me", tok)[0] == 200, 2),
          "a token made with heraldctl works within a second or so")
    request(env, "GET", "/v1/me", tok)
    out = ctl(env, "token", "revoke", name)
    start = time.monotonic()
    check(out.returncode == 0, "heraldctl token revoke NAME (%s)" % out.stderr.strip())
    gone = wait_until(lambda: request(env, "GET", "/v1/me", tok)[0] == 401, 10)
    took = time.monotonic() - start
    # The bound is the cache's 5 s; the margin is the polling's and a loaded
    # machine's, not the dispatcher's.
    check(gone and took <= 6.5, "revoked by heraldctl: refused within the cache's 5 s (%.1f s)"
          % took)
    out = ctl(env, "token", "create", "--name", name, "--role", "viewer")
    check(out.returncode == 1 and "never reused" in out.stderr,
          "a name is never reused (%s)" % out.stderr.strip())
    status, j = request(env, "POST", "/v1/tokens", TOKEN, {"name": "x y", "role": "viewer"})
    check(status == 400, "a bad name -> 400")
    status, j = request(env, "POST", "/v1/tokens", TOKEN, {"name": "ok", "role": "root"})
    check(status == 400, "a bad role -> 400")
    return tok


# ---- 4. single sign-on -----------------------------------------------------------

def test_jwt(env, keys):
    ok = keys.token("operator")
    status, j = request(env, "GET", "/v1/me", ok)
    check(status == 200 and j == {"name": "jwt:alice@example.org", "role": "operator",
                                  "routes": j.get("routes")}, "RS256 JWT -> operator (%s)"
          % short(j))
    status, j = request(env, "GET", "/v1/me", keys.token("viewer", alg="ES256"))
    check(status == 200 and j["role"] == "viewer", "ES256 JWT -> viewer (%s)" % short(j))
    status, j = request(env, "GET", "/v1/me", keys.token(["viewer", "admin", "other"]))
    check(status == 200 and j["role"] == "admin", "a role claim array -> its highest role")
    status, _ = request(env, "POST", "/v1/tasks/%d/pause" % MISSING, keys.token("viewer"))
    check(status == 403, "a viewer's JWT may not pause -> 403")
    now = int(time.time())
    rsa_pub = keys.rsa.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    claims = {"iss": ISS, "aud": AUD, "sub": "mallory", "exp": now + 300, "herald_role": "admin"}
    bad = {
        "wrong issuer": keys.token(iss="https://evil.example.org"),
        "wrong audience": keys.token(aud="someone-else"),
        "expired": keys.token(exp=now - 60, iat=now - 600),
        "bad signature": ok[:-4] + ("AAAA" if not ok.endswith("AAAA") else "BBBB"),
        "unknown kid": keys.token(kid="rsa-9"),
        "alg none": forged({"alg": "none", "kid": keys.rsa_kid}, claims),
        "HS256 keyed with the RSA public key": hs256(rsa_pub, keys.rsa_kid, claims),
    }
    for what, token in bad.items():
        status, j = request(env, "GET", "/v1/me", token)
        check(status == 401, "JWT %s -> 401 (%s %s)" % (what, status, j))
    status, j = request(env, "GET", "/v1/me", keys.token(None))
    check(status == 403 and "names no herald role" in j["error"]["message"],
          "a JWT without a role claim -> 403 (%s %s)" % (status, j))
    # A new key set file is read within the refresh (no restart).
    keys.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    keys.rsa_kid = "rsa-2"
    keys.write()
    check(wait_until(lambda: request(env, "GET", "/v1/me", keys.token())[0] == 200, 8),
          "a rotated JWK Set is taken without a restart")


def main():
    env, base, tag = make_env("roles", __doc__)
    tmp = tempfile.mkdtemp(prefix="herald-test-roles-")
    keys = Keys(os.path.join(tmp, "jwks.json"))
    env.cfg_path = write_config(
        env, base,
        "{tokens: [%s], threads: 4, jwt: {jwks_file: %s, issuer: '%s', audience: %s, "
        "leeway_s: 5}}" % (TOKEN, keys.path, ISS, AUD))
    proc, log = serve(env, env.cfg_path, "test_api_roles_%s.log" % tag)
    secrets = [TOKEN]
    status = None
    try:
        table = routes(env)
        callers = {}
        for role in ROLES:
            t = make_token(env, "%s-%s" % (role, tag), role)
            callers["token " + role] = (role, t["token"])
            callers["jwt " + role] = (role, keys.token(role))
            callers[role] = (role, t["token"], t["name"])
            secrets.append(t["token"])
        test_me(env, callers)
        test_roles(env, table, {k: v[:2] for k, v in callers.items() if " " in k}, tag)
        test_audit_rows(env, callers, callers["operator"][1], callers["admin"][1])
        test_audit_recipients_hooks(env, callers, callers["operator"][1], callers["admin"][1])
        test_append_only(env, tag)
        secrets.append(test_revocation(env, tag))
        test_jwt(env, keys)
    finally:
        status = stop_popen(proc, 20)
        log.close()
        cleanup(env)
        shutil.rmtree(tmp, ignore_errors=True)
    check(status == 0, "dispatcher exits 0 on SIGTERM")
    with open(os.path.join(tempfile.gettempdir(), "test_api_roles_%s.log" % tag)) as f:
        text = f.read()
    check(not any(s in text for s in secrets), "no token appears in the dispatcher's log")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
