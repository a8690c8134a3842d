#!/usr/bin/env python3
"""Integration test of the recipients' address book through its three
doors against the local stack: the dispatcher's /v1/users/{uid}/addresses
API (every error answered as JSON and changing nothing), `heraldctl
address add|rm|ls|import`, and raw SQL on push_address reaching Redis
through the dispatcher's periodic sync — an insert, an update, a delete of
a uid's last address, and Redis losing every address set then refilled.

usage: test_addresses.py HERALD_DISPATCHER HERALDCTL   (python3 stdlib only)

Isolation: its own Redis prefix, Kafka and task topic (the dispatcher runs
with HERALD_TEST_TASK_TOPIC, so it claims no other test's task), its own
port, and uids of its own range (deleted at the end).  Exits 77 when
HERALD_TEST_CONFIG is unset.  Every wait is bounded."""
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish, wait_until  # noqa: E402
from badinput_env import stop_popen  # noqa: E402
from test_api import TOKEN, ctl, http, make_env, serve, sql, write_config  # noqa: E402

APNS = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"
SYNC_WAIT_S = 20  # the dispatcher syncs every 5 s
# A web push subscription (RFC 8291 Appendix A's user agent keys), as the
# browser's PushSubscription and as the address book writes it.
WP_ENDPOINT = "https://push.example.net/wpush/v2/abc"
WP_P256DH = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
WP_AUTH = "BTBZMqHH6r4Tts7J_aSIgg"
WP_SUB = {"endpoint": WP_ENDPOINT, "expirationTime": None,
          "keys": {"p256dh": WP_P256DH, "auth": WP_AUTH}}
WP_ADDRESS = "%s#%s.%s" % (WP_ENDPOINT, WP_P256DH, WP_AUTH)
WP_OFF_CURVE = WP_P256DH[:-1] + "8"  # the same x with another y: not on P-256


def members(env, uid):
    return sorted(env.r.cmd("SMEMBERS", "%saddr:%d" % (env.prefix, uid)))


def path(uid):
    return "/v1/users/%d/addresses" % uid


def test_api(env):
    u = env.base + 1
    status, j = http(env, "POST", path(u), {"platform": "fcm", "app": "proj", "address": "tokA"})
    check(status == 201 and j["added"] is True and j["uid"] == u
          and j["addresses"] == [{"platform": "fcm", "app": "proj", "address": "tokA"}],
          "POST adds one address -> 201 (%s %s)" % (status, j))
    status, j = http(env, "POST", path(u), {"platform": "fcm", "app": "proj", "address": "tokA"})
    check(status == 200 and j["added"] is False, "POST of the same address -> 200, added false")
    status, j = http(env, "POST", path(u), {"platform": "email", "address": "a@example.org"})
    check(status == 201 and len(j["addresses"]) == 2, "POST an email (app defaults to '')")
    check(members(env, u) == ["email  a@example.org", "fcm proj tokA"],
          "redis holds both (%s)" % members(env, u))
    status, j = http(env, "GET", path(u))
    check(status == 200 and len(j["addresses"]) == 2, "GET lists them")
    status, j = http(env, "PUT", path(u), {"addresses": [
        {"platform": "apns", "app": "com.example.app", "address": APNS},
        {"platform": "webhook", "address": "https://hooks.example.org/u/1"}]})
    check(status == 200 and [a["platform"] for a in j["addresses"]] == ["apns", "webhook"],
          "PUT replaces them (%s %s)" % (status, j))
    check(members(env, u) == ["apns com.example.app " + APNS,
                              "webhook  https://hooks.example.org/u/1"], "redis follows the PUT")
    status, j = http(env, "DELETE", path(u) + "?platform=webhook&address="
                     "https%3A%2F%2Fhooks.example.org%2Fu%2F1")
    check(status == 200 and j["deleted"] == 1 and len(j["addresses"]) == 1, "DELETE one")
    status, j = http(env, "DELETE", path(u) + "?platform=webhook&address=https%3A%2F%2Fx")
    check(status == 200 and j["deleted"] == 0, "DELETE of an absent address -> deleted 0")
    status, j = http(env, "PUT", path(u), {"addresses": []})
    check(status == 200 and j["addresses"] == [] and members(env, u) == [],
          "PUT [] removes every address from both stores")
    # The per-uid cap.
    status, j = http(env, "PUT", path(u), {"addresses": [
        {"platform": "fcm", "app": "p", "address": "t%d" % i} for i in range(64)]})
    check(status == 200 and len(j["addresses"]) == 64, "PUT of 64 addresses")
    status, j = http(env, "POST", path(u), {"platform": "fcm", "app": "p", "address": "t64"})
    check(status == 409 and j["error"]["code"] == "too_many_addresses",
          "the 65th -> 409 too_many_addresses (%s %s)" % (status, j))


def test_api_errors(env):
    u = env.base + 2
    http(env, "POST", path(u), {"platform": "email", "address": "keep@example.org"})
    before = (members(env, u), sql(env, "SELECT COUNT(*) FROM push_address WHERE uid=%d" % u))
    cases = [
        ("missing token", "POST", path(u), {"platform": "email", "address": "x@y.org"}, None,
         None, 401, "unauthorized"),
        ("bad uid", "GET", "/v1/users/abc/addresses", None, TOKEN, None, 400, "bad_id"),
        ("uid zero", "POST", "/v1/users/0/addresses", {"platform": "email", "address": "x@y.org"},
         TOKEN, None, 400, "bad_id"),
        ("malformed json", "POST", path(u), None, TOKEN, b'{"platform": ', 400, "malformed_json"),
        ("not an object", "POST", path(u), ["x"], TOKEN, None, 400, "malformed_json"),
        ("unknown field", "POST", path(u), {"platform": "email", "address": "x@y.org",
                                            "colour": "red"}, TOKEN, None, 400, "unknown_field"),
        ("missing address", "POST", path(u), {"platform": "email"}, TOKEN, None, 400,
         "missing_field"),
        ("unknown platform", "POST", path(u), {"platform": "sms", "address": "1"}, TOKEN, None,
         400, "invalid_address"),
        ("bad email", "POST", path(u), {"platform": "email", "address": "a b@c.org"}, TOKEN,
         None, 400, "invalid_address"),
        ("fcm without app", "POST", path(u), {"platform": "fcm", "address": "tok"}, TOKEN, None,
         400, "invalid_address"),
        ("short apns token", "POST", path(u), {"platform": "apns", "app": "com.x",
                                               "address": "abcd"}, TOKEN, None, 400,
         "invalid_address"),
        ("address not a string", "POST", path(u), {"platform": "email", "address": 7}, TOKEN,
         None, 400, "bad_field"),
        ("PUT 65 addresses", "PUT", path(u), {"addresses": [
            {"platform": "fcm", "app": "p", "address": "t%d" % i} for i in range(65)]}, TOKEN,
         None, 400, "too_many_addresses"),
        ("PUT with one bad", "PUT", path(u), {"addresses": [
            {"platform": "email", "address": "ok@example.org"},
            {"platform": "email", "address": "bad"}]}, TOKEN, None, 400, "invalid_address"),
        ("PUT without a list", "PUT", path(u), {"addresses": "x"}, TOKEN, None, 400, "bad_field"),
        ("DELETE without query", "DELETE", path(u), None, TOKEN, None, 400, "bad_query"),
        ("body over the limit", "POST", path(u), None, TOKEN,
         b'{"platform":"email","address":"' + b"a" * 70000 + b'@x.org"}', 413, "body_too_large"),
        ("wrong method", "PATCH", path(u), {}, TOKEN, None, 405, "method_not_allowed"),
    ]
    for what, method, p, body, token, raw, want, code in cases:
        status, j = http(env, method, p, body, token, raw)
        ok = status == want and isinstance(j, dict) and j.get("error", {}).get("code") == code \
            and j["error"].get("message")
        check(ok, "%s -> %d %s (%s %s)" % (what, want, code, status, json.dumps(j)[:160]))
    after = (members(env, u), sql(env, "SELECT COUNT(*) FROM push_address WHERE uid=%d" % u))
    check(after == before, "the error requests changed nothing (%s)" % (after,))


def test_ctl(env):
    u = env.base + 3
    r = ctl(env, "address", "add", u, "fcm", "tokC", "--app", "proj")
    check(r.returncode == 0 and r.stdout == "added\n", "ctl address add (%s)" % r.stderr)
    r = ctl(env, "address", "add", u, "fcm", "tokC", "--app", "proj")
    check(r.returncode == 0 and r.stdout == "already present\n", "ctl address add again")
    r = ctl(env, "address", "add", u, "email", "not-an-email")
    check(r.returncode == 2 and "address:" in r.stderr, "ctl refuses a bad address (exit 2)")
    r = ctl(env, "address", "ls", u)
    check(r.returncode == 0 and r.stdout == "fcm\tproj\ttokC\n", "ctl address ls (%r)" % r.stdout)
    r = ctl(env, "address", "ls", u, "--json")
    check(r.returncode == 0 and json.loads(r.stdout) == [
        {"platform": "fcm", "app": "proj", "address": "tokC"}], "ctl address ls --json")
    check(members(env, u) == ["fcm proj tokC"], "ctl wrote redis")
    r = ctl(env, "address", "rm", u, "fcm", "tokC", "--app", "proj")
    check(r.returncode == 0 and r.stdout == "removed\n" and members(env, u) == [],
          "ctl address rm")
    # The import: 2,000 good lines over 1,000 uids, a header, and bad lines.
    lines = ["uid,platform,app,address"]
    for i in range(1000):
        lines.append("%d,email,,u%d@example.org" % (env.base + 100 + i, i))
        lines.append("%d,webhook,,https://h.example.org/a,b?u=%d" % (env.base + 100 + i, i))
    lines[500:500] = ["x12,email,,a@b.org", "%d,sms,,1" % (env.base + 5), "%d,email,a@b.org"
                      % (env.base + 5)]
    fd, name = tempfile.mkstemp(suffix=".csv")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        r = ctl(env, "address", "import", name)
        check(r.returncode == 1 and "added 2000, already present 0" in r.stdout
              and "refused 3" in r.stdout and r.stderr.count("refused:") == 3
              and "line 501 refused" in r.stderr,
              "ctl address import: 2000 added, 3 lines refused with their numbers (%s | %s)"
              % (r.stdout.strip(), r.stderr.strip()[:300]))
        check(sql(env, "SELECT COUNT(*) FROM push_address WHERE uid BETWEEN %d AND %d"
                  % (env.base + 100, env.base + 1099)) == [["2000"]], "mysql holds the 2000")
        check(members(env, env.base + 100) == ["email  u0@example.org",
                                                "webhook  https://h.example.org/a,b?u=0"],
              "redis holds the imported uid's two addresses")
        r = ctl(env, "address", "import", name)
        check("added 0, already present 2000" in r.stdout, "importing again adds nothing")
    finally:
        os.unlink(name)


def test_webpush(env):
    """A webpush subscription through the three doors: the PushSubscription
    JSON (API, heraldctl) or its address; bad keys refused at each."""
    u = env.base + 20
    status, _ = http(env, "POST", path(u), {"platform": "webpush", "subscription": WP_SUB})
    check(status == 201 and members(env, u) == ["webpush  " + WP_ADDRESS],
          "API: a PushSubscription is stored as its address (%s)" % (members(env, u),))
    status, _ = http(env, "POST", path(u), {"platform": "webpush", "address": WP_ADDRESS})
    check(status == 200, "API: the same subscription as an address is already present")
    bad_keys = dict(WP_SUB, keys={"p256dh": WP_OFF_CURVE, "auth": WP_AUTH})
    for what, body, code, words in [
            ("off-curve p256dh", {"platform": "webpush", "subscription": bad_keys},
             "invalid_address", "keys.p256dh"),
            ("short auth", {"platform": "webpush", "subscription": dict(
                WP_SUB, keys={"p256dh": WP_P256DH, "auth": "AAAA"})}, "invalid_address",
             "keys.auth"),
            ("http endpoint", {"platform": "webpush", "address": WP_ADDRESS.replace(
                "https://", "http://")}, "invalid_address", "https://"),
            ("subscription on email", {"platform": "email", "subscription": WP_SUB},
             "bad_field", "platform webpush")]:
        status, j = http(env, "POST", path(u), body)
        check(status == 400 and j["error"]["code"] == code and words in j["error"]["message"],
              "API refuses a %s: 400 %s (%s %s)" % (what, code, status, json.dumps(j)[:200]))
    r = ctl(env, "address", "rm", u, "webpush", json.dumps(WP_SUB))
    check(r.returncode == 0 and r.stdout == "removed\n" and members(env, u) == [],
          "ctl address rm takes the PushSubscription JSON (%s)" % r.stderr)
    r = ctl(env, "address", "add", u, "webpush", json.dumps(bad_keys))
    check(r.returncode == 2 and "keys.p256dh" in r.stderr,
          "ctl refuses an off-curve p256dh (exit 2: %s)" % r.stderr.strip())
    sql(env, "INSERT INTO push_address (uid, platform, app, address) VALUES "
        "(%d, 'webpush', '', '%s'), (%d, 'webpush', '', '%s#%s.%s')"
        % (u, WP_ADDRESS, u + 1, WP_ENDPOINT, WP_OFF_CURVE, WP_AUTH))
    check(wait_until(lambda: members(env, u) == ["webpush  " + WP_ADDRESS], SYNC_WAIT_S),
          "raw SQL: a webpush row reaches redis through the sync")
    check(members(env, u + 1) == [], "raw SQL: a row with an off-curve key stays out of redis")


def test_raw_sql(env):
    u1, u2, u3 = env.base + 10, env.base + 11, env.base + 12
    sql(env, "INSERT INTO push_address (uid, platform, app, address) VALUES "
        "(%d, 'email', '', 'raw@example.org'), (%d, 'fcm', 'p', 'gone'), "
        "(%d, 'fcm', 'p', 'bad token')" % (u1, u2, u3))
    check(wait_until(lambda: members(env, u1) == ["email  raw@example.org"]
                     and members(env, u2) == ["fcm p gone"], SYNC_WAIT_S),
          "raw SQL inserts reach redis through the sync")
    check(members(env, u3) == [], "a row the checks refuse stays out of redis")
    sql(env, "DELETE FROM push_address WHERE uid = %d" % u2)
    sql(env, "UPDATE push_address SET address = 'new@example.org' WHERE uid = %d" % u1)
    check(wait_until(lambda: members(env, u2) == []
                     and members(env, u1) == ["email  new@example.org"], SYNC_WAIT_S),
          "a raw SQL delete and update reach redis (no stale address)")
    # Redis loses every address set and the synced mark.
    env.r.unlink_pattern(env.prefix + "addr*")
    check(wait_until(lambda: members(env, u1) == ["email  new@example.org"]
                     and members(env, env.base + 100) != []
                     and env.r.cmd("EXISTS", env.prefix + "addr_synced") == 1, SYNC_WAIT_S),
          "a full reload refills redis after it lost the sets, and sets the synced mark")


def main():
    env, base, tag = make_env("addr", __doc__)
    env.base = 7000000000000000000 + (os.getpid() % 100000) * 100000
    env.cfg_path = write_config(env, base, "{tokens: [%s], max_body_bytes: 65536, max_ids: 10000,"
                                " threads: 4}" % TOKEN)
    proc, log = serve(env, env.cfg_path, "test_addresses_%s.log" % tag)
    try:
        test_api(env)
        test_api_errors(env)
        test_ctl(env)
        test_webpush(env)
        test_raw_sql(env)
    finally:
        status = stop_popen(proc, 20)
        log.close()
        env.r.unlink_pattern(env.prefix + "*")
        sql(env, "DELETE FROM push_address WHERE uid BETWEEN %d AND %d"
            % (env.base, env.base + 99999))
        os.unlink(env.cfg_path)
    check(status == 0, "dispatcher exits 0 on SIGTERM")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
