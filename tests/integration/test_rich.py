#!/usr/bin/env python3
"""Rich and silent pushes (issue 32, docs/providers.md "Rich and silent
pushes"): one dispatcher and one worker push five tasks due together to the
APNs and FCM stand-ins (tests/providers/) and a webhook receiver, and the
test reads what each provider received:

  - apns rich: aps.alert, sound, badge, thread-id, category,
    mutable-content 1 (an image), the top-level image and buttons,
    apns-push-type alert;
  - apns silent: apns-push-type background, apns-priority 5, aps is
    {"content-available": 1} alone (no alert), the payload beside it;
  - fcm rich: notification.image, android.notification sound / tag /
    notification_count, the buttons as data "buttons" (a JSON array's text),
    the apns block's aps for iOS through FCM;
  - fcm silent: no notification block (a data message), apns-push-type
    background and apns-priority 5 in the apns block;
  - webhook: the channel's body template reads the options as
    {{raw task.rich}};
  - every task done, every recipient sent;
  - bad options answered 400 at create time with nothing written (silent
    with an image, four buttons, a badge out of range, an http image, an
    unknown field), and a rich task over APNs' 4096 bytes.

usage: test_rich.py HERALD_DISPATCHER HERALD_WORKER   (exit 77 without
HERALD_TEST_CONFIG or Debian's python3-jwt / -h2)"""
import datetime
import hashlib
import json
import os
import random
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Raw, Receiver, check, finish, q  # noqa: E402
from provider_env import (KEYS, Standin, add_addresses, drop_addresses, make_ca,  # noqa: E402
                          open_env)

PROJECT = "herald-test"  # tests/unit/keys/service_account.json
TOPIC = "com.example.herald"
KEY_ID = "ABC123DEFG"
TEAM_ID = "TEAM123456"
N = 4  # subscribers per task
RICH = {"image": "https://cdn.example.com/sale.png", "sound": "chime.caf", "badge": 3,
        "thread": "orders", "category": "ORDER",
        "buttons": [{"id": "open", "title": "Open"}, {"id": "later", "title": "Later"}]}
SILENT = {"silent": True, "thread": "sync"}


def device(u):
    return hashlib.sha256(("%d-rich" % u).encode()).hexdigest()


def sql_json(o):
    return "'%s'" % json.dumps(o)


def iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.000Z")


def test_bad(env):
    base = {"name": "rich-bad", "channel": "ios", "topic": env.topic,
            "due_at": iso(time.time() + 3600), "title": "t", "body": "b"}
    cases = [
        ("silent with an image", {"silent": True, "image": "https://x.example/a.png"},
         "shows nothing"),
        ("four buttons", {"buttons": [{"id": "b%d" % i, "title": "B"} for i in range(4)]},
         "at most 3 buttons"),
        ("badge out of range", {"badge": -1}, "rich.badge"),
        ("an http image", {"image": "http://x.example/a.png"}, "https:// URL"),
        ("unknown field", {"colour": "red"}, "unknown field"),
        ("over APNs' 4096 bytes", {"image": "https://x.example/" + "a" * 1000,
                                    "buttons": [{"id": "a" * 60, "title": "b" * 60}],
                                    "thread": "t" * 60}, None),
    ]
    before = env.sql("SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic)
    for what, rich, words in cases:
        body = dict(base, rich=rich)
        if words is None:  # the message itself too long with the options
            body["body"] = "x" * 3500
            words = "over APNs's limit of 4096 bytes"
        st, got = env.http("POST", "/v1/tasks", body)
        err = got.get("error", {}) if isinstance(got, dict) else {}
        check(st == 400 and err.get("code") == "invalid_task" and words in err.get("message", ""),
              "%s: 400 invalid_task naming it (%s %s)" % (what, st, err))
    check(env.sql("SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic) == before,
          "no bad request wrote a task")
    st, got = env.http("POST", "/v1/tasks", dict(base, rich=RICH))
    check(st == 201 and got.get("rich") == RICH, "a good rich task: 201, rich shown (%s)"
          % got.get("rich"))
    if st == 201:
        env.sql("DELETE FROM push_task WHERE id = %d" % got["id"])


def main():
    env = open_env("rich", __doc__, "jwt, cryptography, h2")
    if isinstance(env, int):
        return env
    base = 9_700_000_000 + random.randrange(1 << 30)
    groups = {name: list(range(base + i * N, base + (i + 1) * N))
              for i, name in enumerate(("apns_rich", "apns_silent", "fcm_rich", "fcm_silent",
                                        "hook"))}
    standins = []
    rx = Receiver(lambda path, body: (200, b"{}"))
    try:
        ca = make_ca(env.dir)
        fcm_si = Standin(env, "fcm_standin.py", ca,
                         ["--public-key", os.path.join(KEYS, "rsa_pub.pem")])
        standins.append(fcm_si)
        apns_si = Standin(env, "apns_standin.py", ca,
                          ["--public-key", os.path.join(KEYS, "ec_pub.pem"),
                           "--key-id", KEY_ID, "--team-id", TEAM_ID])
        standins.append(apns_si)
        fcm_url = "https://127.0.0.1:%d" % fcm_si.port
        channels = {
            "android": {"type": "fcm", "service_account_file":
                        os.path.join(KEYS, "service_account.json"), "url": fcm_url,
                        "token_uri": fcm_url + "/token", "ca_file": ca["ca.pem"]},
            "ios": {"type": "apns", "url": "https://127.0.0.1:%d" % apns_si.port,
                    "key_file": os.path.join(KEYS, "ec.p8"), "key_id": KEY_ID,
                    "team_id": TEAM_ID, "topic": TOPIC, "ca_file": ca["ca.pem"]},
            "hook": {"url": rx.url("hook"),
                     "body": Raw(q('{"uid":"{{uid}}","title":"{{title}}",'
                                   '"rich":{{raw task.rich}}}'))},
        }
        add_addresses(env, "fcm", PROJECT,
                      {u: ["tok-%d" % u] for u in groups["fcm_rich"] + groups["fcm_silent"]})
        add_addresses(env, "apns", TOPIC,
                      {u: [device(u)] for u in groups["apns_rich"] + groups["apns_silent"]})
        cfg = env.config(channels)
        if not env.create_topic():
            return 77
        dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        test_bad(env)
        data = sql_json({"order": "A-1"})
        tasks = {
            "apns_rich": env.insert_with_subs("apns-rich", "ios", groups["apns_rich"],
                                              title="'Sale'", body="'20% off'",
                                              rich=sql_json(RICH)),
            "apns_silent": env.insert_with_subs("apns-silent", "ios", groups["apns_silent"],
                                                title="'never shown'", body="'x'",
                                                payload=data, rich=sql_json(SILENT)),
            "fcm_rich": env.insert_with_subs("fcm-rich", "android", groups["fcm_rich"],
                                             title="'Sale'", body="'20% off'",
                                             rich=sql_json(RICH)),
            "fcm_silent": env.insert_with_subs("fcm-silent", "android", groups["fcm_silent"],
                                               title="'never shown'", body="'x'",
                                               payload=data, rich=sql_json(SILENT)),
            "hook": env.insert_with_subs("hook-rich", "hook", groups["hook"], title="'Sale'",
                                         body="'b'", rich=sql_json(RICH)),
        }
        for name, t in tasks.items():
            check(env.wait_state(t, "done", 60), "%s: done (%s)" % (name, env.task(t)))
            sent = int(env.task(t, "sent")[0])
            check(sent == N, "%s: %d of %d sent" % (name, sent, N))

        reqs = {r["path"].rsplit("/", 1)[1]: r for r in apns_si.events("request")
                if r["status"] == 200}
        rich = [reqs.get(device(u)) for u in groups["apns_rich"]]
        bodies = [json.loads(r["body"]) if r else {} for r in rich]
        aps = bodies[0].get("aps", {})
        check(all(r is not None and r["headers"].get("apns-push-type") == "alert" for r in rich)
              and all(b == bodies[0] for b in bodies) and
              aps.get("alert") == {"title": "Sale", "body": "20% off"} and
              aps.get("sound") == "chime.caf" and aps.get("badge") == 3 and
              aps.get("thread-id") == "orders" and aps.get("category") == "ORDER" and
              aps.get("mutable-content") == 1 and bodies[0].get("image") == RICH["image"] and
              bodies[0].get("buttons") == RICH["buttons"],
              "apns rich: alert, sound, badge, thread-id, category, mutable-content, image and "
              "buttons received (%s)" % bodies[0])
        silent = [reqs.get(device(u)) for u in groups["apns_silent"]]
        bodies = [json.loads(r["body"]) if r else {} for r in silent]
        check(all(r is not None and r["headers"].get("apns-push-type") == "background" and
                  r["headers"].get("apns-priority") == "5" for r in silent) and
              all(b == {"aps": {"content-available": 1}, "order": "A-1"} for b in bodies),
              "apns silent: apns-push-type background, apns-priority 5, content-available "
              "alone with the payload (%s %s)" % (silent[0] and silent[0]["headers"],
                                                  bodies[0]))

        # each message without its token, which differs per recipient
        sends = {s["token"]: {k: v for k, v in s["message"].items() if k != "token"}
                 for s in fcm_si.events("send")}
        msgs = [sends.get("tok-%d" % u, {}) for u in groups["fcm_rich"]]
        m = msgs[0]
        an = m.get("android", {}).get("notification", {})
        apns_aps = m.get("apns", {}).get("payload", {}).get("aps", {})
        check(all(x == m for x in msgs) and
              m.get("notification") == {"title": "Sale", "body": "20% off",
                                        "image": RICH["image"]} and
              an == {"sound": "chime.caf", "tag": "orders", "notification_count": 3} and
              json.loads(m.get("data", {}).get("buttons", "null")) == RICH["buttons"] and
              apns_aps.get("mutable-content") == 1 and apns_aps.get("badge") == 3 and
              m.get("apns", {}).get("fcm_options") == {"image": RICH["image"]},
              "fcm rich: notification.image, android.notification sound/tag/count, data "
              "buttons, the apns block (%s)" % m)
        msgs = [sends.get("tok-%d" % u, {}) for u in groups["fcm_silent"]]
        m = msgs[0]
        hdrs = m.get("apns", {}).get("headers", {})
        check(all(x == m for x in msgs) and "notification" not in m and
              m.get("data") == {"order": "A-1"} and
              hdrs.get("apns-push-type") == "background" and hdrs.get("apns-priority") == "5" and
              m.get("apns", {}).get("payload") == {"aps": {"content-available": 1}},
              "fcm silent: a data message, no notification block, background for iOS (%s)" % m)

        got = [json.loads(r[2]) for r in rx.by_path("hook")]
        check(len(got) == N and all(g.get("rich") == RICH for g in got),
              "webhook: {{raw task.rich}} carries the options (%s)" % got[:1])
        check(env.stop(wk) == 0, "worker stops cleanly")
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        for s in standins:
            s.stop()
        rx.stop()
        drop_addresses(env, base, base + 5 * N)
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
