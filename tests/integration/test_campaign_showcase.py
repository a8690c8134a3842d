#!/usr/bin/env python3
"""test_campaign_showcase: issue 32's "done when" on the real stack — one
campaign to a web push, an FCM and an APNs stand-in (tests/providers/), with
rich content, in three locales, as an A/B test whose winner is picked from
the app's opens, every recipient accounted; one dispatcher and one worker.

What "one campaign" is here, and why: a task has one channel (one channel
type, so one platform of the address book: webpush, fcm or apns), and a
task has locale variants or A/B arms, not both (docs/api.md "A/B tests").
So the campaign is nine tasks created together, one per channel and locale,
each with the same settings: two arms A and B (50 % each) whose title and
body are in the task's language, the winner step {"sample_pct": 50,
"wait_s": 15, "metric": "open"}, and the same "rich" options (on web push
those it carries: image, buttons, thread).  Each locale's
audience is read from the profiles (push_user.locale: pt-BR, de-DE, fr-FR).
Metric open, not click: the only click path is e-mail's tracked link
(docs/api.md "Opens and clicks"); a push app reports its opens through
POST /v1/users/{uid}/events.

  1. the nine tasks are created by the API (201, phase sampling); only each
     task's sample (the test's own hr_variant_sampled) is pushed, once per
     recipient, each with its arm's text in its locale's language;
  2. every web push is decrypted by the stand-in with its subscription's
     private key (http_ece) and its VAPID token verified (py_vapid): none
     undecryptable, none refused; its plaintext is the arm's {title, body}
     with the Notification API's image, actions and tag (docs/providers.md);
     a web push task asking for a badge is refused (400, naming it);
  3. FCM and APNs pushes carry the rich options: image, buttons, sound,
     badge, thread (APNs: mutable-content for the image);
  4. the app opens half of one arm's sample in each task, never the other
     arm's (pt-BR and fr-FR: B, de-DE: A); each task's view then names
     that arm the winner by open, with the opens in its figures, and every
     recipient outside the sample got the winner's text once;
  5. every recipient accounted: each task's delivery rows are its
     subscribers, all sent, its counters and variant_counts add up to
     them; across the campaign every recipient got exactly one push from
     exactly one stand-in and is in exactly one task.

usage: test_campaign_showcase.py HERALD_DISPATCHER HERALD_WORKER   (exit 77
without HERALD_TEST_CONFIG, Debian's python3-jwt / -h2, or the web push
stand-in's venv)"""
import json
import os
import random
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish, wait_until  # noqa: E402
from provider_env import (KEYS, Standin, add_addresses, drop_addresses, make_ca,  # noqa: E402
                          open_env)
from test_abtest import MASK, bucket, iso  # noqa: E402  (hr_variant_bucket)
from test_rich import KEY_ID, PROJECT, TEAM_ID, TOPIC, device  # noqa: E402
from test_webpush import SUBJECT, b64, keypair, venv_python  # noqa: E402

N = 40  # recipients per task: a 50 % sample holds both arms all but surely
PCT = 50
WAIT_S = 15  # the sample's pushes, then the opens, must come before the pick
CHANNELS = ("browser", "android", "ios")
TEXT = {  # locale: {arm: (title, body)}
    "pt-BR": {"A": ("Promoção hoje", "20% de desconto, {{uid}}"),
              "B": ("Só hoje: 20%", "Aproveite, {{uid}}")},
    "de-DE": {"A": ("Heute Rabatt", "20 % Rabatt, {{uid}}"),
              "B": ("Nur heute: 20 %", "Jetzt zugreifen, {{uid}}")},
    "fr-FR": {"A": ("Soldes du jour", "20 % de remise, {{uid}}"),
              "B": ("Aujourd'hui : 20 %", "Profitez-en, {{uid}}")},
}
WINNER = {"pt-BR": "B", "de-DE": "A", "fr-FR": "B"}  # the arm whose opens the app reports
RICH = {"image": "https://cdn.example.com/sale.png", "sound": "chime.caf", "badge": 2,
        "thread": "sale", "buttons": [{"id": "shop", "title": "Shop"}]}
# What a web push carries (hr_rich_check_webpush refuses the rest).
RICH_WEB = {k: RICH[k] for k in ("image", "thread", "buttons")}


def rich_of(channel):
    return RICH_WEB if channel == "browser" else RICH


def arm(task, uid):
    return "A" if bucket(task, uid) < 5000 else "B"


def sampled(task, uid):
    """hr_variant_sampled: the second hash, of (~task, uid)."""
    return bucket(MASK ^ task, uid) < 100 * PCT


def text(locale, name, uid):
    title, body = TEXT[locale][name]
    return title, body.replace("{{uid}}", str(uid))


def received(standins, sid_uid, dev_uid):
    """{uid: [(channel, title, body, the push as the provider got it)]} of
    every push a stand-in took."""
    got = {}
    for r in standins["browser"].events("request"):
        if r["status"] == 201:
            doc = json.loads(r["plaintext"])
            got.setdefault(sid_uid[r["path"].rsplit("/", 1)[1]], []).append(
                ("browser", doc.get("title"), doc.get("body"), doc))
    for s in standins["android"].events("send"):
        n = s["message"].get("notification", {})
        got.setdefault(int(s["token"][4:]), []).append(
            ("android", n.get("title"), n.get("body"), s["message"]))
    for r in standins["ios"].events("request"):
        if r["status"] == 200:
            doc = json.loads(r["body"])
            alert = doc.get("aps", {}).get("alert", {})
            got.setdefault(dev_uid[r["path"].rsplit("/", 1)[1]], []).append(
                ("ios", alert.get("title"), alert.get("body"), doc))
    return got


def rich_ok(channel, doc):
    """Whether the push DOC carries RICH as CHANNEL's provider maps it
    (docs/providers.md "Rich and silent pushes")."""
    if channel == "browser":
        return (set(doc) == {"title", "body", "image", "actions", "tag"} and
                doc["image"] == RICH["image"] and doc["tag"] == RICH["thread"] and
                doc["actions"] == [{"action": b["id"], "title": b["title"]}
                                   for b in RICH["buttons"]])
    if channel == "android":
        return (doc.get("notification", {}).get("image") == RICH["image"] and
                json.loads(doc.get("data", {}).get("buttons", "null")) == RICH["buttons"] and
                doc.get("android", {}).get("notification") ==
                {"sound": RICH["sound"], "tag": RICH["thread"],
                 "notification_count": RICH["badge"]})
    aps = doc.get("aps", {})
    return (aps.get("sound") == RICH["sound"] and aps.get("badge") == RICH["badge"] and
            aps.get("thread-id") == RICH["thread"] and aps.get("mutable-content") == 1 and
            doc.get("image") == RICH["image"] and doc.get("buttons") == RICH["buttons"])


def view(env, task):
    return env.http("GET", "/v1/tasks/%d" % task)[1]


def create(env, channel, locale, uids):
    """The task of CHANNEL and LOCALE to UIDS by the API; its id or None."""
    arms = [{"name": a, "split": 50, "title": t, "body": b}
            for a, (t, b) in sorted(TEXT[locale].items())]
    st, body = env.http("POST", "/v1/tasks", {
        "name": "showcase-%s-%s" % (channel, locale), "channel": channel, "topic": env.topic,
        "due_at": iso(time.time() + 5), "title": "Sale {{uid}}", "body": "20% off",
        "variants": arms, "rich": rich_of(channel),
        "ab": {"sample_pct": PCT, "wait_s": WAIT_S, "metric": "open"}})
    ok = (st == 201 and (body.get("ab") or {}).get("phase") == "sampling" and
          body.get("rich") == rich_of(channel))
    check(ok, "%s %s: POST /v1/tasks with arms, rich and ab: 201, phase sampling (%s %s)"
          % (channel, locale, st, body))
    if not ok:
        return None
    st, _ = env.http("POST", "/v1/tasks/%d/subscribers" % body["id"], {"uids": uids})
    check(st in (200, 201), "%s %s: %d subscribers added (%s)" % (channel, locale, len(uids), st))
    return body["id"]


def campaign(env, standins, groups, sid_uid, dev_uid):
    """Steps 1 to 5 of the docstring on the running daemons."""
    tasks = {}  # (channel, locale): (task, uids)
    st, body = env.http("POST", "/v1/tasks", {
        "name": "showcase-refused", "channel": "browser", "topic": env.topic,
        "due_at": iso(time.time() + 5), "title": "t", "body": "b", "rich": RICH})
    check(st == 400 and "rich.sound: web push cannot carry it" in json.dumps(body),
          "a web push task asking for a sound and a badge: 400 naming rich.sound (%s %s)"
          % (st, body))
    for (ch, loc), uids in groups.items():
        t = create(env, ch, loc, uids)
        if t is not None:
            tasks[(ch, loc)] = (t, uids)
    if len(tasks) != len(groups):
        return
    sample = {k: [u for u in uids if sampled(t, u)] for k, (t, uids) in tasks.items()}
    nsample = sum(len(s) for s in sample.values())
    check(wait_until(lambda: len(received(standins, sid_uid, dev_uid)) >= nsample, 60, 0.3),
          "every task's sample pushed (%d of %d)"
          % (len(received(standins, sid_uid, dev_uid)), nsample))
    got = received(standins, sid_uid, dev_uid)
    for (ch, loc), (t, _) in tasks.items():
        want = {u: [(ch,) + text(loc, arm(t, u), u)] for u in sample[(ch, loc)]}
        mine = {u: [p[:3] for p in ps] for u, ps in got.items() if u in groups[(ch, loc)]}
        check(mine == want and {arm(t, u) for u in want} == {"A", "B"},
              "%s %s: only the sample pushed (%d), once each, its arm's text in its language"
              % (ch, loc, len(mine)))
    # The app opens half of one arm's sample in each task.
    opened = {}
    for (ch, loc), (t, _) in tasks.items():
        opened[(ch, loc)] = [u for u in sample[(ch, loc)] if arm(t, u) == WINNER[loc]][::2]
        bad = []
        for u in opened[(ch, loc)]:
            st, r = env.http("POST", "/v1/users/%d/events" % u, {"task": t, "type": "opened"})
            if st != 200 or not r.get("counted"):
                bad.append((u, st, r))
        check(opened[(ch, loc)] and not bad, "%s %s: %d opens of arm %s counted (%s)"
              % (ch, loc, len(opened[(ch, loc)]), WINNER[loc], bad[:3]))
    for (ch, loc), (t, _) in tasks.items():
        check(env.wait_state(t, "done", WAIT_S + 60), "%s %s: done (%s)" % (ch, loc, env.task(t)))
    total = sum(len(uids) for _, uids in tasks.values())
    check(wait_until(lambda: len(received(standins, sid_uid, dev_uid)) >= total, 30, 0.3),
          "the rest pushed too (%d of %d)" % (len(received(standins, sid_uid, dev_uid)), total))
    got = received(standins, sid_uid, dev_uid)
    for (ch, loc), (t, uids) in tasks.items():
        ab = view(env, t).get("ab") or {}
        figs = (ab.get("figures") or {}).get("arms", {})
        loser = "A" if WINNER[loc] == "B" else "B"
        print("%s %s: ab %s" % (ch, loc, json.dumps(ab)))
        check(ab.get("phase") == "done" and ab.get("winner") == WINNER[loc] and
              figs.get(WINNER[loc], {}).get("opened") == len(opened[(ch, loc)]) and
              figs.get(loser, {}).get("opened") == 0,
              "%s %s: winner %s by open, the opens in its figures (%s)"
              % (ch, loc, WINNER[loc], figs))
        wrong = [(u, got.get(u)) for u in uids
                 if [p[:3] for p in got.get(u, [])] !=
                 [(ch,) + text(loc, arm(t, u) if u in sample[(ch, loc)] else WINNER[loc], u)]]
        check(not wrong, "%s %s: the sample kept its arms, the rest got %s's text, once each "
              "(%d wrong: %s)" % (ch, loc, WINNER[loc], len(wrong), wrong[:2]))
        bare = [u for u in uids if not all(rich_ok(ch, p[3]) for p in got.get(u, []))]
        check(not bare, "%s %s: every push %s (%d not: %s)"
              % (ch, loc, "carries image, actions and tag" if ch == "browser" else
                 "carries image, buttons, sound, badge and thread", len(bare),
                 [got[u][0][3] for u in bare[:1]]))
    reqs = standins["browser"].events("request")
    check(reqs and all(r["status"] == 201 for r in reqs),
          "web push: every push decrypted with its subscription's key and its VAPID token "
          "verified (%d pushes; refused: %s)"
          % (len(reqs), [(r["status"], r["why"]) for r in reqs if r["status"] != 201][:3]))
    account(env, tasks, got)


def account(env, tasks, got):
    """Every recipient in exactly one outcome of exactly one task."""
    seen = []
    for (ch, loc), (t, uids) in tasks.items():
        dl = {}
        wait_until(lambda: dl.update(env.deliveries(t)) or len(dl) == len(uids), 30, 0.3)
        counts = {}

        def counted():
            counts.clear()
            counts.update(view(env, t).get("variant_counts") or {})
            return sum(c.get("sent", 0) for c in counts.values()) == len(uids)
        row = [str(x) for x in env.task(t, "sent, failed, unregistered, total")]
        check(wait_until(counted, 20, 0.3) and set(dl) == set(uids) and
              set(dl.values()) == {"sent"} and row == [str(len(uids)), "0", "0", str(len(uids))],
              "%s %s: %d delivery rows all sent, task sent/failed/unregistered/total %s, "
              "variant_counts %s" % (ch, loc, len(dl), row, counts))
        seen += list(dl)
    everyone = [u for _, uids in tasks.values() for u in uids]
    check(len(seen) == len(set(seen)) == len(everyone) and set(seen) == set(everyone) and
          sorted(got) == sorted(everyone) and all(len(ps) == 1 for ps in got.values()),
          "the campaign: %d recipients, each in one task's delivery rows and pushed once by "
          "one stand-in (%d delivery rows, %d pushed)"
          % (len(everyone), len(seen), sum(len(ps) for ps in got.values())))


def main():
    env = open_env("showcase", __doc__)
    if isinstance(env, int):
        return env
    python = venv_python()
    if python is None:
        print("skipped: tests/providers/webpush-venv could not make the stand-in's venv")
        env.cleanup()
        return 77
    base = 9_500_000_000 + random.randrange(1 << 30) * 1000
    groups, k = {}, 0
    for ch in CHANNELS:
        for loc in sorted(TEXT):
            groups[(ch, loc)] = list(range(base + k * N, base + (k + 1) * N))
            k += 1
    top = base + k * N
    # One web push subscription per browser recipient, made here as the
    # browser's PushSubscription would be; the stand-in holds the private keys.
    browser = [u for (ch, _), uids in groups.items() if ch == "browser" for u in uids]
    keys = {u: (keypair(), os.urandom(16)) for u in browser}
    path = os.path.join(env.dir, "subscriptions.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"s%d" % u: {"private": b64(k.private_numbers().private_value
                                              .to_bytes(32, "big")), "auth": b64(auth)}
                   for u, ((k, _), auth) in keys.items()}, f)
    standins = {}
    try:
        ca = make_ca(env.dir)
        standins["browser"] = Standin(env, "webpush_standin.py", ca,
                                      ["--public-key", os.path.join(KEYS, "ec_pub.pem"),
                                       "--subject", SUBJECT, "--subscriptions", path],
                                      python=python)
        standins["android"] = Standin(env, "fcm_standin.py", ca,
                                      ["--public-key", os.path.join(KEYS, "rsa_pub.pem")])
        standins["ios"] = Standin(env, "apns_standin.py", ca,
                                  ["--public-key", os.path.join(KEYS, "ec_pub.pem"),
                                   "--key-id", KEY_ID, "--team-id", TEAM_ID])
        wp = standins["browser"].port
        add_addresses(env, "webpush", "", {
            u: ["https://127.0.0.1:%d/push/s%d#%s.%s" % (wp, u, b64(pub), b64(auth))]
            for u, ((_, pub), auth) in keys.items()})
        add_addresses(env, "fcm", PROJECT, {u: ["tok-%d" % u] for (ch, _), uids in groups.items()
                                            if ch == "android" for u in uids})
        add_addresses(env, "apns", TOPIC, {u: [device(u)] for (ch, _), uids in groups.items()
                                           if ch == "ios" for u in uids})
        env.sql("INSERT INTO push_user (uid, locale) VALUES " + ",".join(
            "(%d, '%s')" % (u, loc) for (_, loc), uids in groups.items() for u in uids))
        # Each locale's audience as the profiles hold it.
        for (ch, loc), uids in groups.items():
            groups[(ch, loc)] = [int(r[0]) for r in env.sql(
                "SELECT uid FROM push_user WHERE uid BETWEEN %d AND %d AND locale = '%s' "
                "ORDER BY uid" % (uids[0], uids[-1], loc))]
        fcm_url = "https://127.0.0.1:%d" % standins["android"].port
        cfg = env.config({
            "browser": {"type": "webpush", "vapid_key_file": os.path.join(KEYS, "ec.p8"),
                        "vapid_subject": SUBJECT, "ca_file": ca["ca.pem"], "concurrency": 8},
            "android": {"type": "fcm", "service_account_file":
                        os.path.join(KEYS, "service_account.json"), "url": fcm_url,
                        "token_uri": fcm_url + "/token", "ca_file": ca["ca.pem"]},
            "ios": {"type": "apns", "url": "https://127.0.0.1:%d" % standins["ios"].port,
                    "key_file": os.path.join(KEYS, "ec.p8"), "key_id": KEY_ID,
                    "team_id": TEAM_ID, "topic": TOPIC, "ca_file": ca["ca.pem"]}})
        if not env.create_topic():
            return 77
        dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        sid_uid = {"s%d" % u: u for u in browser}
        dev_uid = {device(u): u for (ch, _), uids in groups.items() if ch == "ios" for u in uids}
        campaign(env, standins, groups, sid_uid, dev_uid)
        check(env.stop(wk) == 0, "worker stops cleanly")
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        for s in standins.values():
            s.stop()
        drop_addresses(env, base, top)
        env.drop_users(base, top)
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
