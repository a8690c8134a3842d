#!/usr/bin/env python3
"""An apns channel end to end against tests/providers/apns_standin.py
(HTTP/2 over TLS from a throw-away CA, the channel's ca_file), with one
dispatcher and one worker:

  - every recipient accounted: sent + unregistered == subscribers; device
    tokens the stand-in answers 410 Unregistered are pruned from
    push_address and Redis, live ones stay;
  - every request carries the ES256 provider token the stand-in verifies,
    apns-topic, apns-push-type and apns-id: a UUID derived from (task,
    uid, token), so a re-sent push repeats it;
  - HTTP/2: the stand-in advertises 4 concurrent streams and holds each
    answer 100 ms while the channel allows 16 requests in flight on 2
    connections; no connection ever has more than 4 streams open, and
    requests share connections (multiplexed); never more than the
    channel's 2 connections open at once (the worker's per-channel host
    limit: bookworm's libcurl 7.88 would open one per request past the
    streams in flight).

usage: test_apns.py HERALD_DISPATCHER HERALD_WORKER   (exit 77 without
HERALD_TEST_CONFIG or Debian's python3-h2 / python3-jwt)"""
import hashlib
import os
import random
import sys
import uuid

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish  # noqa: E402
from provider_env import (KEYS, Standin, add_addresses, addresses_left, close_env,  # noqa: E402
                          end_campaign, make_ca, open_env, run_campaign)

TOPIC = "com.example.herald"
KEY_ID = "ABC123DEFG"
TEAM_ID = "TEAM123456"
N = 24
MAX_STREAMS = 4


def device(u, tag):
    return hashlib.sha256(("%d-%s" % (u, tag)).encode()).hexdigest()


def apns_id(task, uid, dev):
    d = bytearray(hashlib.sha256(("%d.%d.%s" % (task, uid, dev)).encode()).digest()[:16])
    d[6] = (d[6] & 0x0F) | 0x80
    d[8] = (d[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(d)))


def main():
    env = open_env("apns", __doc__)
    if isinstance(env, int):
        return env
    base = 8_000_000_000 + random.randrange(1 << 30)
    uids = list(range(base, base + N))
    tokens = {u: [device(u, "a")] for u in uids}
    tokens[uids[0]].append(device(uids[0], "b"))      # two live: sent to both
    tokens[uids[1]].append(device(uids[1], "dead"))   # one dead, one live: sent
    for u in uids[2:4]:
        tokens[u] = [device(u, "dead")]               # only dead: unregistered
    dead = {t for ts in tokens.values() for t in ts if t in
            {device(u, "dead") for u in uids}}
    unregistered = {uids[2], uids[3]}
    standin = None
    try:
        ca = make_ca(env.dir)
        standin = Standin(env, "apns_standin.py", ca,
                          ["--public-key", os.path.join(KEYS, "ec_pub.pem"),
                           "--key-id", KEY_ID, "--team-id", TEAM_ID,
                           "--max-streams", str(MAX_STREAMS), "--delay-ms", "100"] +
                          [a for t in sorted(dead) for a in ("--unregistered", t)])
        channels = {
            "ios": {"type": "apns", "url": "https://127.0.0.1:%d" % standin.port,
                    "key_file": os.path.join(KEYS, "ec.p8"), "key_id": KEY_ID,
                    "team_id": TEAM_ID, "topic": TOPIC, "ca_file": ca["ca.pem"],
                    "concurrency": 16, "connections": 2,
                    "retry": "{max_attempts: 3, backoff_ms: 50, max_backoff_ms: 1000}"},
        }
        add_addresses(env, "apns", TOPIC, tokens)
        ran = run_campaign(env, channels, "ios", uids, "'apns-title'", "'hello {{uid}}'")
        if ran is None:
            return 77
        dsp, wk, t, (sent, failed, unreg) = ran
        check(sent + unreg == N and failed == 0 and unreg == 2,
              "every recipient accounted: sent %s + unregistered %s == %d, failed %s"
              % (sent, unreg, N, failed))
        dl = env.deliveries(t)
        check({u for u, s in dl.items() if s == "unregistered"} == unregistered,
              "push_delivery: the dead-only uids unregistered")
        live = {tk for ts in tokens.values() for tk in ts} - dead
        left, in_redis = addresses_left(env, uids)
        check(left == live and in_redis == live,
              "the 410 tokens pruned from MySQL and Redis, the live kept (%s, %s)"
              % (sorted(left ^ live), sorted(in_redis ^ live)))

        reqs = standin.events("request")
        ok = [r for r in reqs if r["status"] == 200]
        check(sorted(r["path"].rsplit("/", 1)[1] for r in ok) == sorted(live),
              "every live token got one push (%d)" % len(ok))
        check(all(r["reason"] not in ("InvalidProviderToken", "ExpiredProviderToken",
                                      "MissingProviderToken") for r in reqs),
              "the provider token verifies")
        by_dev = {dev: u for u, ts in tokens.items() for dev in ts}
        check(all(r["headers"].get("apns-topic") == TOPIC and
                  r["headers"].get("apns-push-type") == "alert" and
                  r["headers"].get("apns-id") == apns_id(t, by_dev[r["path"].rsplit("/", 1)[1]],
                                                         r["path"].rsplit("/", 1)[1])
                  for r in reqs), "apns-topic, apns-push-type and the derived apns-id")
        check(all('"title": "apns-title"' in r["body"] or '"title":"apns-title"' in r["body"]
                  for r in ok), "the alert carries the task's title")
        most = max([e["max_open"] for e in standin.events("streams")] or [0])
        check(1 < most <= MAX_STREAMS, "HTTP/2: requests multiplexed, at most %d streams open "
              "on a connection (%d)" % (MAX_STREAMS, most))
        conns = max([e["max_open"] for e in standin.events("connections")] or [0])
        check(1 <= conns <= 2, "at most the channel's 2 connections open at once (%d)" % conns)
        end_campaign(env, wk, dsp, "ios", 2)
    finally:
        close_env(env, standin, base, base + N)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
