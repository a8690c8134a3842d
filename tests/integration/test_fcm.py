#!/usr/bin/env python3
"""An fcm channel end to end against tests/providers/fcm_standin.py (OAuth2
token endpoint + messages:send over TLS from a throw-away CA, the channel's
ca_file), with one dispatcher and one worker:

  - a campaign where every recipient is accounted for: sent +
    unregistered == subscribers, failed 0.  Recipients have one or two
    device tokens; tokens the stand-in calls UNREGISTERED (404) or invalid
    (400 on message.token) are pruned from push_address and from Redis,
    live ones stay; a uid whose every token is dead, or who has none, is
    `unregistered` (push_task, push_delivery, the stats hash, metrics);
  - the access token lives 4 s (refreshed half-way) and the task is rate
    limited, so the campaign outlives several tokens: more than one token
    is granted and no send goes out with a lapsed one... or when one does
    (401), it is refreshed and the send retried;
  - the first sends are answered 429 + Retry-After: the channel slows
    down, nothing fails;
  - a second fcm channel whose service account the endpoint refuses
    (invalid_grant): the worker says so in its log, keeps running, pushes
    nothing and loses nothing (its recipients stay in the chunk set).

usage: test_fcm.py HERALD_DISPATCHER HERALD_WORKER   (exit 77 without
HERALD_TEST_CONFIG or Debian's python3-jwt)"""
import json
import os
import random
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish, metric, wait_until  # noqa: E402
from provider_env import (KEYS, Standin, add_addresses, addresses_left, close_env,  # noqa: E402
                          end_campaign, make_ca, open_env)

PROJECT = "herald-test"  # tests/unit/keys/service_account.json
N = 20


def service_account(env, foreign):
    """A copy of the test service account; FOREIGN: with a new RSA key the
    token endpoint does not know (a revoked or wrong key)."""
    with open(os.path.join(KEYS, "service_account.json")) as f:
        account = json.load(f)
    if foreign:
        key = subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                              "rsa_keygen_bits:2048"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
        account["private_key"] = key
    path = os.path.join(env.dir, "sa-%s.json" % ("foreign" if foreign else "good"))
    with open(path, "w") as f:
        json.dump(account, f)
    return path


def main():
    env = open_env("fcm", __doc__)
    if isinstance(env, int):
        return env
    base = 7_000_000_000 + random.randrange(1 << 30)
    uids = list(range(base, base + N))
    # uid -> its tokens; the stand-in answers 404 UNREGISTERED for dead-*
    # and 400 on message.token for invalid-*
    tokens = {u: ["tok-%d" % u] for u in uids}
    tokens[uids[0]].append("dead-%da" % uids[0])  # one dead, one live: sent
    tokens[uids[1]].append("tok-%db" % uids[1])   # two live: sent (twice)
    for u in uids[2:5]:
        tokens[u] = ["dead-%d" % u]               # only dead: unregistered
    tokens[uids[5]] = ["invalid-%d" % uids[5]]     # refused token: unregistered
    tokens[uids[6]] = []                           # no address: unregistered
    dead = {t for ts in tokens.values() for t in ts if not t.startswith("tok-")}
    unregistered = {uids[i] for i in range(2, 7)}
    bad_uids = list(range(base + N, base + N + 3))
    standin = None
    try:
        ca = make_ca(env.dir)
        standin = Standin(env, "fcm_standin.py", ca,
                          ["--public-key", os.path.join(KEYS, "rsa_pub.pem"),
                           "--token-life", "4", "--quota-429", "2"] +
                          [a for t in sorted(dead) if t.startswith("dead-")
                           for a in ("--unregistered", t)])
        url = "https://127.0.0.1:%d" % standin.port
        retry = "{max_attempts: 3, backoff_ms: 50, max_backoff_ms: 2000}"
        channels = {
            "fcm": {"type": "fcm", "service_account_file": service_account(env, False),
                    "url": url, "token_uri": url + "/token", "ca_file": ca["ca.pem"],
                    "retry": retry, "concurrency": 8},
            "fcmbad": {"type": "fcm", "service_account_file": service_account(env, True),
                       "url": url, "token_uri": url + "/token", "ca_file": ca["ca.pem"],
                       "retry": retry},
        }
        add_addresses(env, "fcm", PROJECT, tokens)
        add_addresses(env, "fcm", PROJECT, {u: ["tok-%d" % u] for u in bad_uids})
        cfg = env.config(channels)
        if not env.create_topic():
            return 77
        dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        t = env.insert_with_subs("fcm-campaign", "fcm", uids, rate_limit=3,
                                 title="'fcm-title'", body="'hello {{uid}}'")
        bad = env.insert_with_subs("fcm-badcreds", "fcmbad", bad_uids, title="'t'", body="'b'")

        check(env.wait_state(t, "done", 90), "campaign done (%s)" % (env.task(t),))
        state, sent, failed, unreg = env.task(t, "state, sent, failed, unregistered")
        check(int(sent) + int(unreg) == N and int(failed) == 0,
              "every recipient accounted: sent %s + unregistered %s == %d, failed %s"
              % (sent, unreg, N, failed))
        dl = env.deliveries(t)
        check({u for u, s in dl.items() if s == "unregistered"} == unregistered and
              {u for u, s in dl.items() if s == "sent"} == set(uids) - unregistered,
              "push_delivery: the dead-only, refused and address-less uids unregistered, "
              "the others sent (%s)" % sorted(dl.items()))
        stats = env.r.cmd("HGETALL", env.key(t, "stats"))
        stats = dict(zip(stats[0::2], stats[1::2]))
        check(stats.get("unregistered") == str(len(unregistered)),
              "stats hash: unregistered %s" % stats.get("unregistered"))

        left, in_redis = addresses_left(env, uids)
        live = {tk for ts in tokens.values() for tk in ts} - dead
        check(left == live, "push_address: the dead tokens pruned, the live kept (%s)"
              % sorted(left ^ live))
        check(in_redis == live, "Redis: the dead tokens pruned, the live kept (%s)"
              % sorted(in_redis ^ live))

        sends = standin.events("send")
        got = sorted(e["token"] for e in sends)
        check(sorted(set(got)) == sorted(live),
              "every live token got the message (%d sends)" % len(got))
        check(all(e["message"].get("notification", {}).get("title") == "fcm-title"
                  for e in sends), "the message carries the task's title")
        grants = standin.events("token")
        check(len(grants) >= 2, "the access token was refreshed mid-campaign (%d grants)"
              % len(grants))
        check(len(standin.events("send_quota")) == 2, "two sends answered 429")
        check("channel_slowdown" in env.log(wk), "the worker slowed the channel down")

        check(metric(env.metrics(env.wk_port), "herald_addresses_pruned_total",
                     '{channel="fcm"}') == len(dead),
              "metrics: %d addresses pruned on the channel" % len(dead))

        # Bad credentials: a clear error, nothing pushed, nothing lost.
        wait_until(lambda: "invalid_grant" in env.log(wk), 20)
        check("fcm_token_failed" in env.log(wk) and "channel=fcmbad" in env.log(wk) and
              "invalid_grant" in env.log(wk), "bad credentials: the worker logs the "
              "endpoint's invalid_grant for channel fcmbad")
        state, sent, failed, unreg = env.task(bad, "state, sent, failed, unregistered")
        check(state == "dispatched" and (sent, failed, unreg) == ("0", "0", "0"),
              "bad credentials: nothing settled (%s)" % [state, sent, failed, unreg])
        chunks = env.r.scan(env.prefix + "{t%d}:chunk:*" % bad)
        held = set()
        for k in chunks:
            held |= {int(u) for u in env.r.cmd("SMEMBERS", k)}
        check(held == set(bad_uids), "bad credentials: every recipient still in its chunk "
              "(%s)" % sorted(held))
        bad_tokens = {"tok-%d" % u for u in bad_uids}
        check(not [e for e in standin.events("send") if e["token"] in bad_tokens],
              "bad credentials: nothing sent")
        check(wk.poll() is None and dsp.poll() is None, "worker and dispatcher still running")
        end_campaign(env, wk, dsp, "fcm", len(unregistered))
    finally:
        close_env(env, standin, base, base + N + 3)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
