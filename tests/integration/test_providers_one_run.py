#!/usr/bin/env python3
"""One run of a dispatcher and a worker pushing three tasks due together,
each on its own provider type against its stand-in (tests/providers/):
an fcm, an apns and an smtp channel (issue 14, "Done when"):

  - every task ends done with sent + unregistered == subscribers, failed 0;
  - the invalid addresses (FCM UNREGISTERED, APNs 410, SMTP 5.1.1) are
    pruned from push_address and Redis, the live ones kept;
  - the tasks' push options reach the providers: FCM's android.ttl /
    collapse_key / priority, APNs' apns-expiration / apns-collapse-id /
    apns-priority.

usage: test_providers_one_run.py HERALD_DISPATCHER HERALD_WORKER   (exit 77
without HERALD_TEST_CONFIG, kcat or Debian's python3-jwt / -h2 / -aiosmtpd)"""
import hashlib
import os
import random
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish  # noqa: E402
from provider_env import (KEYS, Standin, add_addresses, addresses_left,  # noqa: E402
                          drop_addresses, end_campaign, make_ca, open_env)

PROJECT = "herald-test"  # tests/unit/keys/service_account.json
TOPIC = "com.example.herald"
KEY_ID = "ABC123DEFG"
TEAM_ID = "TEAM123456"
N = 8  # subscribers per task
FCM_TTL, APNS_TTL = 3600, 600


def device(u, tag):
    return hashlib.sha256(("%d-%s" % (u, tag)).encode()).hexdigest()


def accounted(env, t, unregistered):
    """Task T done, every subscriber sent or unregistered (UNREGISTERED of them)."""
    check(env.wait_state(t, "done", 90), "task %d done (%s)" % (t, env.task(t)))
    sent, failed, unreg = (int(v) for v in env.task(t, "sent, failed, unregistered"))
    check(sent + unreg == N and failed == 0 and unreg == unregistered,
          "task %d: sent %d + unregistered %d == %d, failed %d" % (t, sent, unreg, N, failed))


def pruned(env, what, uids, addrs, dead):
    live = {a for ts in addrs.values() for a in ts} - dead
    left, in_redis = addresses_left(env, uids)
    check(left == live and in_redis == live, "%s: the dead addresses pruned from MySQL and "
          "Redis, the live kept (%s, %s)" % (what, sorted(left ^ live), sorted(in_redis ^ live)))
    return live


def main():
    env = open_env("providers_one_run", __doc__, "jwt, cryptography, h2, aiosmtpd")
    if isinstance(env, int):
        return env
    base = 9_500_000_000 + random.randrange(1 << 30)
    fcm_uids = list(range(base, base + N))
    apns_uids = list(range(base + N, base + 2 * N))
    mail_uids = list(range(base + 2 * N, base + 3 * N))
    fcm = {u: ["tok-%d" % u] for u in fcm_uids}
    fcm[fcm_uids[0]] = ["dead-%d" % fcm_uids[0]]                  # 404 UNREGISTERED
    fcm[fcm_uids[1]].append("dead-%d" % fcm_uids[1])              # one dead, one live
    apns = {u: [device(u, "a")] for u in apns_uids}
    apns[apns_uids[0]] = [device(apns_uids[0], "dead")]          # 410
    mail = {u: ["u%d@example.org" % u] for u in mail_uids}
    mail[mail_uids[0]] = ["gone%d@example.org" % mail_uids[0]]    # 550 5.1.1
    fcm_dead = {"dead-%d" % fcm_uids[0], "dead-%d" % fcm_uids[1]}
    apns_dead = {device(apns_uids[0], "dead")}
    mail_dead = {mail[mail_uids[0]][0]}
    standins = []
    try:
        ca = make_ca(env.dir)
        fcm_si = Standin(env, "fcm_standin.py", ca,
                         ["--public-key", os.path.join(KEYS, "rsa_pub.pem")] +
                         [a for t in sorted(fcm_dead) for a in ("--unregistered", t)])
        standins.append(fcm_si)
        apns_si = Standin(env, "apns_standin.py", ca,
                          ["--public-key", os.path.join(KEYS, "ec_pub.pem"),
                           "--key-id", KEY_ID, "--team-id", TEAM_ID] +
                          [a for t in sorted(apns_dead) for a in ("--unregistered", t)])
        standins.append(apns_si)
        smtp_si = Standin(env, "smtp_standin.py", ca, ["--unknown", next(iter(mail_dead))])
        standins.append(smtp_si)
        fcm_url = "https://127.0.0.1:%d" % fcm_si.port
        retry = "{max_attempts: 3, backoff_ms: 50, max_backoff_ms: 500}"
        channels = {
            "android": {"type": "fcm", "service_account_file":
                        os.path.join(KEYS, "service_account.json"), "url": fcm_url,
                        "token_uri": fcm_url + "/token", "ca_file": ca["ca.pem"],
                        "retry": retry},
            "ios": {"type": "apns", "url": "https://127.0.0.1:%d" % apns_si.port,
                    "key_file": os.path.join(KEYS, "ec.p8"), "key_id": KEY_ID,
                    "team_id": TEAM_ID, "topic": TOPIC, "ca_file": ca["ca.pem"],
                    "retry": retry},
            "mail": {"type": "smtp", "url": "smtp://127.0.0.1:%d" % smtp_si.port,
                     "ca_file": ca["ca.pem"], "from": "noreply@herald.test",
                     "subject": "Rappel {{title}}", "text": "Texte {{body}}", "retry": retry},
        }
        add_addresses(env, "fcm", PROJECT, fcm)
        add_addresses(env, "apns", TOPIC, apns)
        add_addresses(env, "email", "", mail)
        cfg = env.config(channels)
        if not env.create_topic():
            return 77
        dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        before = time.time()
        t_fcm = env.insert_with_subs("fcm", "android", fcm_uids, title="'t'", body="'b'",
                                     ttl_s=FCM_TTL, collapse_key="'fcm-score'",
                                     priority="'normal'")
        t_apns = env.insert_with_subs("apns", "ios", apns_uids, title="'t'", body="'b'",
                                      ttl_s=APNS_TTL, collapse_key="'apns-score'",
                                      priority="'normal'")
        t_mail = env.insert_with_subs("mail", "mail", mail_uids, title="'t'", body="'b'",
                                      ttl_s=60, collapse_key="'ignored'")
        accounted(env, t_fcm, 1)
        accounted(env, t_apns, 1)
        accounted(env, t_mail, 1)
        after = time.time()

        live = pruned(env, "fcm", fcm_uids, fcm, fcm_dead)
        sends = fcm_si.events("send")
        check(sorted(s["token"] for s in sends) == sorted(live), "fcm: each live token pushed")
        check(all(s["message"]["android"].get("ttl") == "%ds" % FCM_TTL and
                  s["message"]["android"].get("collapse_key") == "fcm-score" and
                  s["message"]["android"].get("priority") == "NORMAL" for s in sends),
              "fcm: android.ttl, collapse_key and priority from the task (%s)"
              % (sends[:1] and sends[0]["message"].get("android")))

        live = pruned(env, "apns", apns_uids, apns, apns_dead)
        ok = [r for r in apns_si.events("request") if r["status"] == 200]
        check(sorted(r["path"].rsplit("/", 1)[1] for r in ok) == sorted(live),
              "apns: each live token pushed")
        check(all(r["headers"].get("apns-collapse-id") == "apns-score" and
                  r["headers"].get("apns-priority") == "5" and
                  before + APNS_TTL - 2 <= int(r["headers"].get("apns-expiration", 0))
                  <= after + APNS_TTL + 2 for r in ok),
              "apns: apns-expiration, apns-collapse-id and apns-priority from the task (%s)"
              % (ok[:1] and ok[0]["headers"]))

        live = pruned(env, "smtp", mail_uids, mail, mail_dead)
        got = sorted(a for m in smtp_si.events("message") for a in m["rcpt_tos"])
        check(got == sorted(live), "smtp: one message per live address")
        end_campaign(env, wk, dsp, "android", 1)
    finally:
        for s in standins:
            s.stop()
        drop_addresses(env, base, base + 3 * N)
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
