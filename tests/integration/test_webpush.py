#!/usr/bin/env python3
"""A webpush channel end to end against tests/providers/webpush_standin.py
(TLS from a throw-away CA, the channel's ca_file; the stand-in checks the
VAPID token with py_vapid and decrypts every push with http_ece), with one
dispatcher and one worker.  Subscriptions are made here: a P-256 key pair
and an auth secret each, written to the address book as the browser's
PushSubscription would be.

  - every recipient accounted: sent + failed + unregistered == N, and
    push_delivery holds each uid;
  - every push the service took decrypts with its subscription's private
    key to {"title", "body"} of the task rendered for its uid, and the VAPID
    token verifies (aud: the service's origin, sub: the channel's subject);
  - a control subscription whose private key the stand-in holds wrong
    cannot be decrypted: its uid fails (400), and it is the only one — a
    push that does not decrypt is seen;
  - 410: those subscriptions are pruned from MySQL and Redis; a uid with
    only a gone subscription is unregistered, one with a live one too is
    sent;
  - 429 with Retry-After: 1 slows the channel: each refused push is sent
    again no sooner than a second later, and delivered;
  - TTL, Urgency and Topic come from the task (ttl_s, priority,
    collapse_key); HTTP/2, as the stand-in offers it.

usage: test_webpush.py HERALD_DISPATCHER HERALD_WORKER   (exit 77 without
HERALD_TEST_CONFIG, Debian's python3-h2 / python3-jwt, or the stand-in's
venv: tests/providers/webpush-venv)"""
import base64
import json
import os
import random
import subprocess
import sys
import time

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish, metric  # noqa: E402
from provider_env import (KEYS, PROVIDERS, Standin, add_addresses, addresses_left,  # noqa: E402
                          close_env, end_campaign, make_ca, open_env, run_campaign)

N = 30
SUBJECT = "mailto:ops@example.com"
SLOW = 3
TTL = 3600
TOPIC = "score-update"


def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def keypair():
    k = ec.generate_private_key(ec.SECP256R1())
    pub = k.public_key().public_bytes(serialization.Encoding.X962,
                                      serialization.PublicFormat.UncompressedPoint)
    return k, pub


def venv_python():
    try:
        out = subprocess.run([os.path.join(PROVIDERS, "webpush-venv")], capture_output=True,
                             text=True, timeout=180)
    except subprocess.TimeoutExpired:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def check_create_limit(env):
    """A task whose message cannot fit one web push record is refused at
    create time, naming the limit, not failed push by push."""
    base = {"name": "wp-limit", "topic": env.topic, "channel": "browser",
            "due_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600)),
            "title": "t"}
    st, body = env.http("POST", "/v1/tasks", dict(base, body="x" * 4000))
    err = body.get("error", {}) if isinstance(body, dict) else {}
    check(st == 400 and err.get("code") == "invalid_task"
          and "web push's limit of 3993 bytes" in err.get("message", ""),
          "a 4,000-byte body on web push: 400 naming the limit (%s %s)" % (st, body))
    st, body = env.http("POST", "/v1/tasks", dict(base, body="x" * 3000))
    check(st == 201, "a 3,000-byte body on web push is taken (%s %s)" % (st, body))
    if st == 201:
        env.sql("DELETE FROM push_task WHERE id = %d" % body["id"])


def main():
    env = open_env("webpush", __doc__)
    if isinstance(env, int):
        return env
    python = venv_python()
    base = 9_000_000_000 + random.randrange(1 << 30)
    uids = list(range(base, base + N))
    if python is None:
        print("skipped: tests/providers/webpush-venv could not make the stand-in's venv")
        env.cleanup()
        return 77
    # One subscription per uid; the first uid has a second, gone one.
    subs = {"s%d" % u: u for u in uids}
    subs["extra%d" % uids[0]] = uids[0]
    gone = {"extra%d" % uids[0], "s%d" % uids[1], "s%d" % uids[2]}
    control = "s%d" % uids[3]  # the stand-in gets the wrong key for it
    keys = {sid: (keypair(), os.urandom(16)) for sid in subs}
    wrong, _ = keypair()
    standin_subs = {sid: {"private": b64((wrong if sid == control else k).private_numbers()
                                         .private_value.to_bytes(32, "big")),
                          "auth": b64(auth)}
                    for sid, ((k, _), auth) in keys.items()}
    path = os.path.join(env.dir, "subscriptions.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(standin_subs, f)
    standin = None
    try:
        ca = make_ca(env.dir)
        standin = Standin(env, "webpush_standin.py", ca,
                          ["--public-key", os.path.join(KEYS, "ec_pub.pem"),
                           "--subject", SUBJECT, "--subscriptions", path,
                           "--slow", str(SLOW), "--retry-after", "1"] +
                          [a for sid in sorted(gone) for a in ("--gone", sid)], python=python)
        addr = {sid: "https://127.0.0.1:%d/push/%s#%s.%s" % (standin.port, sid, b64(pub),
                                                              b64(auth))
                for sid, ((_, pub), auth) in keys.items()}
        book = {}
        for sid, u in subs.items():
            book.setdefault(u, []).append(addr[sid])
        add_addresses(env, "webpush", "", book)
        channels = {
            "browser": {"type": "webpush", "vapid_key_file": os.path.join(KEYS, "ec.p8"),
                        "vapid_subject": SUBJECT, "ca_file": ca["ca.pem"], "concurrency": 8,
                        "retry": "{max_attempts: 3, backoff_ms: 50, max_backoff_ms: 1000}"},
        }
        ran = run_campaign(env, channels, "browser", uids, "'wp-title'", "'hello {{uid}}'",
                           ttl_s=TTL, collapse_key="'%s'" % TOPIC, priority="'normal'")
        if ran is None:
            return 77
        dsp, wk, t, (sent, failed, unreg) = ran
        check(sent + failed + unreg == N and failed == 1 and unreg == 2,
              "every recipient accounted: sent %s + failed %s (the control) + unregistered %s "
              "(2) == %d" % (sent, failed, unreg, N))
        dl = env.deliveries(t)
        check(set(dl) == set(uids), "push_delivery holds every uid (%d)" % len(dl))
        check({u for u, s in dl.items() if s == "failed"} == {subs[control]},
              "push_delivery: the control's uid failed")

        reqs = standin.events("request")
        ok = [r for r in reqs if r["status"] == 201]
        taken = sorted(r["path"].rsplit("/", 1)[1] for r in ok)
        live = sorted(sid for sid in subs if sid not in gone and sid != control)
        check(taken == live, "every live subscription took exactly one push (%d of %d)"
              % (len(taken), len(live)))
        check(all(json.loads(r["plaintext"]) ==
                  {"title": "wp-title", "body": "hello %d" % subs[r["path"].rsplit("/", 1)[1]]}
                  for r in ok), "every push decrypts to its uid's title and body")
        undecryptable = {r["path"].rsplit("/", 1)[1] for r in reqs
                         if (r["why"] or "").startswith("undecryptable")}
        check(undecryptable == {control},
              "only the control's push could not be decrypted (%s)" % sorted(undecryptable))
        check(not [r for r in reqs if r["status"] in (401, 403)],
              "the VAPID token verifies (py_vapid; aud, exp, sub)")
        check(all(r["headers"] == {"ttl": str(TTL), "urgency": "normal", "topic": TOPIC,
                                   "content-encoding": "aes128gcm"} for r in reqs),
              "TTL, Urgency and Topic from the task, Content-Encoding aes128gcm")

        slowed = [r for r in reqs if r["status"] == 429]
        again = [min((q["at"] for q in reqs if q["path"] == r["path"] and q["at"] > r["at"]),
                     default=None) for r in slowed]
        check(len(slowed) == SLOW and all(a is not None and a - r["at"] >= 0.9
                                          for r, a in zip(slowed, again)),
              "429 + Retry-After: 1: each sent again no sooner than 1 s later (%s)"
              % [round(a - r["at"], 2) if a else None for r, a in zip(slowed, again)])
        check(all(any(q["status"] == 201 for q in reqs if q["path"] == r["path"])
                  for r in slowed),
              "the slowed pushes were delivered")

        check(standin.events("streams"), "HTTP/2: the push service offered h2 and got it (ALPN)")
        left, in_redis = addresses_left(env, uids)
        kept = {addr[sid] for sid in subs if sid not in gone}
        check(left == kept and in_redis == kept,
              "the 410 subscriptions pruned from MySQL and Redis, the others kept (%d, %d)"
              % (len(left ^ kept), len(in_redis ^ kept)))
        check(metric(env.metrics(env.wk_port), "herald_addresses_pruned_total",
                     '{channel="browser"}') == len(gone),
              "metrics: %d subscriptions pruned, counted with the channel" % len(gone))
        check_create_limit(env)
        end_campaign(env, wk, dsp, "browser", 2)
    finally:
        close_env(env, standin, base, base + N)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
