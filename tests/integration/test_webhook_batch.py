#!/usr/bin/env python3
"""Batched webhooks (a channel's `batch`, docs/providers.md "Batched
webhooks"): a worker pushes campaigns to a receiver on loopback that takes
up to `batch` recipients per request and answers each of them in
{"results": [...]}:

  - mixed: per uid, ok / error without retry (fails for good, the
    receiver's error as the reason) / error with retry once (sent by a
    retry) — the retries carry only the recipients that asked for one,
    every request at most `batch` items, signed (Standard Webhooks) with an
    Idempotency-Key "herald-<task>-b<16 hex>" per batch, the items inside
    the channel's batch_body;
  - partial: the answer stops short of the recipients the receiver first
    sees in a batch's second half: they are sent again (and then answered),
    the answered ones never;
  - garbled: 200 with a body that is no results array: every recipient is
    retried, then dead-lettered with "batch answer: ...", none counted
    sent; the worker logs batch_answer_bad.

usage: test_webhook_batch.py HERALD_DISPATCHER HERALD_WORKER   (exit 77 without
HERALD_TEST_CONFIG)"""
import base64
import hashlib
import hmac
import json
import os
import re
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, Raw, Receiver, check, finish, q, wait_until  # noqa: E402

N = 40
BATCH = 8
SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
RETRY = "{max_attempts: 3, backoff_ms: 50, max_backoff_ms: 100}"
WRAP = '{"notifications":[{{items}}]}'


def kind(uid):
    """What the mixed channel's receiver does with UID."""
    return ("ok", "fail", "retry", "ok")[uid % 4]


class Batches:
    """The receiver's answers per path (see the module's doc), and which
    uids each request carried."""

    def __init__(self):
        self.seen = set()

    @staticmethod
    def uids(body):
        doc = json.loads(body)
        items = doc["notifications"] if isinstance(doc, dict) else doc
        return [int(i["uid"]) for i in items]

    def answer(self, path, body):
        if path == "/garbled":
            return 200, b"<html>upstream timed out</html>"
        uids = self.uids(body)
        results = []
        firsts = [(path, u) not in self.seen for u in uids]
        self.seen.update((path, u) for u in uids)
        for i, (u, first) in enumerate(zip(uids, firsts)):
            if path == "/partial":
                if first and i >= len(uids) // 2:
                    break  # a short answer: the rest is not said
                results.append({"status": "ok"})
            elif kind(u) == "fail":
                results.append({"status": "error", "error": "no such user", "retry": False})
            elif kind(u) == "retry" and first:
                results.append({"status": "error", "error": "busy", "retry": True})
            else:
                results.append({"status": "ok"})
        return 200, json.dumps({"results": results}).encode()


def signature(secret, msg_id, ts, body):
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, b"%s.%s.%s" % (msg_id.encode(), ts.encode(), body), hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def sent_counts(reqs):
    counts = {}
    for _, _, body, _ in reqs:
        for u in Batches.uids(body):
            counts[u] = counts.get(u, 0) + 1
    return counts


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    env = Env("whbatch")
    rx = Receiver(Batches().answer)
    try:
        channels = {name: {"url": rx.url(name), "retry": RETRY, "batch": BATCH,
                           "batch_body": Raw(q(WRAP)), "signing_secrets": "[%s]" % SECRET}
                    for name in ("mixed", "partial", "garbled")}
        cfg = env.config(channels)
        if not env.create_topic():
            return 77
        dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        uids = {name: list(range(1000 * (i + 1), 1000 * (i + 1) + N))
                for i, name in enumerate(channels)}
        tasks = {name: env.insert_with_subs("batch-" + name, name, uids[name])
                 for name in channels}
        for name, t in tasks.items():
            check(env.wait_state(t, "done", 60), "task %s done (%s)" % (name, env.task(t)))
        # done follows the stats hash; the delivery log's rows come through
        # the reporter's queue and may trail it by a flush.
        for name, t in tasks.items():
            check(wait_until(lambda: len(env.deliveries(t)) == N, 10, 0.2),
                  "task %s: %d delivery rows" % (name, N))

        # mixed: each recipient its own outcome.
        t = tasks["mixed"]
        dl = env.deliveries(t)
        want = {u: "failed" if kind(u) == "fail" else "sent" for u in uids["mixed"]}
        check(dl == want, "mixed: push_delivery per recipient (%s)"
              % sorted((u, s) for u, s in dl.items() if want.get(u) != s))
        _, sent, failed, _ = env.task(t)
        check((int(sent), int(failed)) == (3 * N // 4, N // 4),
              "mixed: sent %s, failed %s" % (sent, failed))
        fh = env.r.cmd("HGETALL", env.key(t, "failed")) or []
        reasons = set(fh[1::2])
        check(len(fh) == N // 2 and all("no such user" in r for r in reasons),
              "mixed: dead letters carry the receiver's error (%s)" % sorted(reasons))
        reqs = rx.by_path("mixed")
        counts = sent_counts(reqs)
        check(counts == {u: 2 if kind(u) == "retry" else 1 for u in uids["mixed"]},
              "mixed: only the recipients that asked for a retry were sent again")
        sizes = sorted(len(Batches.uids(r[2])) for r in reqs)
        check(sizes[0] >= 1 and sizes[-1] <= BATCH and sizes[-1] > 1,
              "mixed: requests carry 1..%d recipients, some several (%s)" % (BATCH, sizes))
        bad = []
        for _, headers, body, _ in reqs:
            key = headers.get("Idempotency-Key", "")
            ts = headers.get("webhook-timestamp", "")
            if (not re.fullmatch(r"herald-%d-b[0-9a-f]{16}" % t, key) or
                    headers.get("webhook-id") != key or
                    headers.get("webhook-signature") != signature(SECRET, key, ts, body) or
                    not body.startswith(b'{"notifications":[')):
                bad.append(key)
        check(not bad, "mixed: every request signed, its batch key, its batch_body (%s)" % bad)
        check(len({r[1]["Idempotency-Key"] for r in reqs}) == len(reqs),
              "mixed: one key per batch")

        # partial: the unanswered recipients sent again, the answered never.
        t = tasks["partial"]
        dl = env.deliveries(t)
        check(set(dl.values()) == {"sent"} and len(dl) == N,
              "partial: every recipient sent (%s, %d rows, missing %s)"
              % (sorted(set(dl.values())), len(dl), sorted(set(uids["partial"]) - set(dl))))
        counts = sent_counts(rx.by_path("partial"))
        again = {u for u, c in counts.items() if c == 2}
        check(again and set(counts.values()) <= {1, 2} and len(counts) == N,
              "partial: %d recipients without an answer sent again, the rest once (%s)"
              % (len(again), sorted(counts.items())))

        # garbled: nobody counted sent, everybody retried then dead-lettered.
        t = tasks["garbled"]
        dl = env.deliveries(t)
        check(set(dl.values()) == {"failed"} and len(dl) == N,
              "garbled: every recipient failed, none sent (%s)" % sorted(set(dl.values())))
        counts = sent_counts(rx.by_path("garbled"))
        check(counts == {u: 3 for u in uids["garbled"]},
              "garbled: each recipient tried max_attempts (3) times")
        fh = env.r.cmd("HGETALL", env.key(t, "failed")) or []
        check(fh and all(r.startswith("batch answer: not JSON") for r in fh[1::2]),
              "garbled: dead letters say why (%s)" % sorted(set(fh[1::2]))[:2])
        with open(wk.logpath, encoding="utf-8", errors="replace") as f:
            log = f.read()
        check("event=batch_answer_bad channel=garbled" in log, "garbled: the worker logs it")
        check(env.stop(wk) == 0, "worker stops cleanly")
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        rx.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
