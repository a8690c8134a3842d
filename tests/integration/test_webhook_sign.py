#!/usr/bin/env python3
"""Signed webhooks: a worker pushes a campaign to a receiver on loopback
that checks what herald promises a webhook receiver (docs/providers.md):

  - every request carries Idempotency-Key "herald-<task>-<uid>", the same
    on a retry (the receiver answers a uid's first request 503);
  - a channel with signing_secrets adds webhook-id (= the key),
    webhook-timestamp (this attempt's, within a few seconds of now) and
    webhook-signature "v1,<base64 HMAC-SHA256(secret, id.timestamp.body)>"
    once per secret, in the order written (two while rotating);
  - a channel without secrets sends no webhook-* header.
Every recipient is sent, each signature verifies with Python's own hmac.

usage: test_webhook_sign.py HERALD_DISPATCHER HERALD_WORKER   (exit 77 without
HERALD_TEST_CONFIG)"""
import base64
import hashlib
import hmac
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, Receiver, check, finish  # noqa: E402

N = 6
SECRETS = ["whsec_" + base64.b64encode(os.urandom(32)).decode(),
           "whsec_" + base64.b64encode(os.urandom(24)).decode()]
RETRY = "{max_attempts: 3, backoff_ms: 50, max_backoff_ms: 100}"


def flaky_answer():
    """The receiver's answers: a uid's first request on /flaky 503 (retried
    by the worker), every other 200."""
    seen = set()

    def answer(path, body):
        first = (path, body) not in seen
        seen.add((path, body))
        return (503 if path == "/flaky" and first else 200), b""
    return answer


def expected_signature(secret, msg_id, ts, body):
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, b"%s.%s.%s" % (msg_id.encode(), ts.encode(), body), hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def uid_of(body):
    return body.split(b'"uid":"', 1)[1].split(b'"', 1)[0].decode()


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    env = Env("whsign")
    rx = Receiver(flaky_answer())
    try:
        channels = {
            "flaky": {"url": rx.url("flaky"), "retry": RETRY,
                      "signing_secrets": "[%s, %s]" % (SECRETS[0], SECRETS[1])},
            "plain": {"url": rx.url("plain"), "retry": RETRY},
        }
        cfg = env.config(channels)
        if not env.create_topic():
            return 77
        dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        tasks = {ch: env.insert_with_subs("sign-" + ch, ch, range(100 * (i + 3),
                                                                   100 * (i + 3) + N))
                 for i, ch in enumerate(channels)}
        for ch, t in tasks.items():
            check(env.wait_state(t, "done", 60), "task %s done (%s)" % (ch, env.task(t)))
            state, sent, failed, _ = env.task(t)
            check(int(sent) == N and int(failed) == 0, "%s: sent %s of %d" % (ch, sent, N))

        signed = rx.by_path("flaky")
        check(len(signed) == 2 * N, "flaky: each uid tried twice (%d requests)" % len(signed))
        keys = {}
        for _, headers, body, at in signed:
            uid = uid_of(body)
            key = headers.get("Idempotency-Key")
            want = "herald-%d-%s" % (tasks["flaky"], uid)
            check(key == want, "flaky uid %s: Idempotency-Key %r == %r" % (uid, key, want))
            keys.setdefault(uid, set()).add(key)
            check(headers.get("webhook-id") == key, "flaky uid %s: webhook-id is the key" % uid)
            ts = headers.get("webhook-timestamp", "")
            check(ts.isdigit() and abs(int(ts) - at) < 5,
                  "flaky uid %s: webhook-timestamp %r is this attempt's" % (uid, ts))
            sigs = headers.get("webhook-signature", "").split(" ")
            want_sigs = [expected_signature(s, key, ts, body) for s in SECRETS]
            check(sigs == want_sigs, "flaky uid %s: one valid signature per secret (%s)"
                  % (uid, sigs))
        check(all(len(k) == 1 for k in keys.values()) and len(keys) == N,
              "flaky: the key is stable across a uid's retry (%d uids)" % len(keys))

        plain = rx.by_path("plain")
        check(len(plain) == N, "plain: one request per uid (%d)" % len(plain))
        for _, headers, body, _ in plain:
            uid = uid_of(body)
            check(headers.get("Idempotency-Key") == "herald-%d-%s" % (tasks["plain"], uid),
                  "plain uid %s: Idempotency-Key" % uid)
            check(not any(h.lower().startswith("webhook-") for h in headers),
                  "plain uid %s: no webhook-* header without secrets" % uid)
        check(env.stop(wk) == 0, "worker stops cleanly")
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        rx.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
