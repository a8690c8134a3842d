#!/usr/bin/env python3
"""test_events: issue 30 end to end, on the real stack: the events topic,
herald-hooks' signed event webhooks, opens and clicks, the funnel.  One
dispatcher, one worker, herald-hooks, herald-sink and the SMTP stand-in
(tests/providers/smtp_standin.py), events.enabled on a topic of the test's
own, e-mail tracking on:

  - tasks with every outcome type: T0 (webhook) pushes three uids under a
    throttle rule; A (smtp) has sent, throttled (T0's three), unregistered
    (no address; an address the relay calls dead), failed (an address the
    relay refuses for good) and pulled (a pull before due) recipients; C is
    cancelled before its push, D wakes up past its expire_at; B (webhook)
    is opened by its app (POST /v1/users/{uid}/events); E (smtp) has an
    opted-out and a suppressed recipient, whose acknowledgements the worker
    writes behind their events (wk_lifecycle_consent);
  - the events topic holds exactly one outcome event per recipient and
    task, its types counting what push_task counts, each value valid
    against schemas/kafka/event.v1.json's required fields;
  - from the mail the stand-in received: the open pixel and a link, each
    fetched twice by five recipients, count once per recipient; the
    redirect goes to the original URL; a tampered URL or signature is
    refused (403, no redirect);
  - three webhooks registered through the API: one that answers, one that
    fails for its first seconds, one that never answers: the first two get
    every event (each delivery's Standard Webhooks signature checked, the
    events reconstructing the exact counts), the third is disabled and
    alerted (herald_hooks_disabled), its events dead-lettered, and after it
    is fixed, enabled again and redriven, it gets them too;
  - GET /v1/tasks/{id}/stats: the funnel sent -> delivered -> opened ->
    clicked and the per-minute series; heraldctl status shows the funnel.

usage: test_events.py HERALD_DISPATCHER HERALD_WORKER HERALD_HOOKS HERALD_SINK HERALDCTL
(exit 77 without HERALD_TEST_CONFIG, kcat, or Debian's python3-aiosmtpd)"""
import base64
import hashlib
import hmac
import http.server
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from badinput_env import Env, check, finish, free_port, metric, sink_argv, wait_until  # noqa
from provider_env import (DEBIAN_PYTHON, Standin, add_addresses, drop_addresses,  # noqa
                          make_ca, standins_usable)

SCHEMA = os.path.join(HERE, "..", "..", "schemas", "kafka", "event.v1.json")
TRACK_KEY = "track-" + "k" * 40
FLAKY_S = 3.0        # the flaky receiver fails this long after its first request
DISABLE_MS = 6000    # events.hooks.disable_after_ms


class Receivers(http.server.ThreadingHTTPServer):
    """Three webhook receivers on one port (/good, /flaky, /dead), each
    checking the Standard Webhooks signature of every delivery with its
    endpoint's secret and recording the events of the accepted ones."""
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.lock = threading.Lock()
        self.secrets = {}
        self.events = {"good": {}, "flaky": {}, "dead": {}}  # id -> event
        self.deliveries = {"good": 0, "flaky": 0, "dead": 0}
        self.bad_signatures = 0
        self.flaky_since = None
        self.dead_healed = False
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self, name):
        return "http://127.0.0.1:%d/%s" % (self.server_address[1], name)


class ReceiverHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        srv = self.server
        name = self.path.strip("/")
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        wid, ts = self.headers.get("webhook-id", ""), self.headers.get("webhook-timestamp", "")
        sigs = self.headers.get("webhook-signature", "").split()
        secret = srv.secrets.get(name, "")
        key = base64.b64decode(secret[len("whsec_"):]) if secret.startswith("whsec_") else b""
        want = "v1," + base64.b64encode(hmac.new(key, b"%s.%s.%s" % (
            wid.encode(), ts.encode(), body), hashlib.sha256).digest()).decode()
        with srv.lock:
            if want not in sigs or abs(time.time() - int(ts or 0)) > 300:
                srv.bad_signatures += 1
                return self.answer(401)
            srv.deliveries[name] = srv.deliveries.get(name, 0) + 1
            if name == "flaky":
                srv.flaky_since = srv.flaky_since or time.time()
                if time.time() - srv.flaky_since < FLAKY_S:
                    return self.answer(503)
            if name == "dead" and not srv.dead_healed:
                return self.answer(500)
            for ev in json.loads(body)["data"]["events"]:
                srv.events[name][ev["id"]] = ev
        self.answer(204)

    def answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


def read_topic(env, topic):
    """Every record of TOPIC as (key, value dict)."""
    out = subprocess.run(["kcat", "-C", "-b", env.brokers, "-t", topic, "-o", "beginning", "-e",
                          "-q", "-f", "%k\t%s\n"], capture_output=True, text=True, timeout=60)
    recs = []
    for line in out.stdout.splitlines():
        if "\t" in line:
            k, v = line.split("\t", 1)
            recs.append((k, json.loads(v)))
    return recs


def counts(events, tasks):
    """{task: {type: n}} of EVENTS (dicts) for TASKS."""
    out = {t: {} for t in tasks}
    for ev in events:
        if ev["task"] in out:
            out[ev["task"]][ev["type"]] = out[ev["task"]].get(ev["type"], 0) + 1
    return out


def get(url, follow=False):
    """(status, Location header or body) of a GET, no redirect followed."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Location") or e.read()


def main():
    if len(sys.argv) != 6:
        print(__doc__)
        return 2
    dispatcher, worker, hooks_bin, sink, ctl = sys.argv[1:]
    if shutil.which("kcat") is None:
        print("skipped: kcat is not installed")
        return 77
    if not standins_usable() or subprocess.run(
            [DEBIAN_PYTHON, "-c", "import aiosmtpd, cryptography"],
            capture_output=True).returncode != 0:
        print("skipped: Debian's python3 lacks aiosmtpd or cryptography")
        return 77
    env = Env("events")
    evtopic = "herald.test.eventstream.%s" % env.tag
    base = 8_000_000_000 + random.randrange(1 << 30)
    U = list(range(base, base + 30))               # task A
    C = list(range(base + 100, base + 110))        # task C, cancelled
    D = list(range(base + 200, base + 208))        # task D, expired
    B = list(range(base + 300, base + 305))        # task B, opened by its app
    E = [base + 400, base + 401]                   # task E: opted out, suppressed
    standin = None
    receivers = Receivers()
    try:
        ca = make_ca(env.dir)
        dead_addr, refused_addr = "gone%d@example.org" % U[27], "no%d@example.org" % U[28]
        standin = Standin(env, "smtp_standin.py", ca,
                          ["--unknown", dead_addr, "--refuse", refused_addr])
        mail = {u: ["u%d@example.org" % u] for u in U[:25]}
        mail[U[27]] = [dead_addr]
        mail[U[28]] = [refused_addr]
        for u in E:
            mail[u] = ["e%d@example.org" % u]
        add_addresses(env, "email", "", mail)
        sink_port = free_port()
        env.start(sink_argv(sink, sink_port, os.path.join(env.dir, "sink.record")), "sink.log")
        hooks_port = free_port()
        channels = {
            "mail": {"type": "smtp", "url": "smtp://127.0.0.1:%d" % standin.port,
                     "ca_file": ca["ca.pem"], "from": "noreply@herald.test",
                     "subject": "Rappel: {{title}}", "text": "Texte: {{body}}",
                     "html": "<html><body><p>{{body}}</p><a href=\"https://example.com/offer?"
                             "a=1&b=2\">offer</a></body></html>",
                     "concurrency": 4, "retry": "{max_attempts: 2, backoff_ms: 50, "
                                                "max_backoff_ms: 100}"},
            "webhook": {"url": "http://127.0.0.1:%d/push" % sink_port, "concurrency": 8,
                        "timeout_ms": 5000},
        }
        events_yaml = (
            "events:\n"
            "  enabled: true\n"
            "  topic: %s\n"
            "  tracking: {base_url: \"http://127.0.0.1:%d\", key: \"%s\"}\n"
            "  hooks: {listen: \"127.0.0.1:%d\", group: \"herald-test-hooks-%s\", "
            "batch_max: 50, batch_ms: 200, retry_backoff_ms: 100, retry_max_backoff_ms: 500, "
            "retry_for_ms: 30000, disable_after_ms: %d, reload_ms: 200}\n"
            % (evtopic, env.dsp_port, TRACK_KEY, hooks_port, env.tag, DISABLE_MS))
        cfg = env.config(channels, extra_top=events_yaml)
        if not env.create_topic():
            return 77
        # The events topic exists before anyone reads it (12 partitions).
        subprocess.run(["kcat", "-b", env.brokers, "-L", "-t", evtopic], capture_output=True,
                       timeout=30)
        dsp, wk = env.start_daemons(dispatcher, worker, cfg)
        hk = env.start([hooks_bin, "-c", cfg], "hooks.log")
        check(env.wait_ready(hooks_port), "herald-hooks serves its probes")

        # Three webhooks, registered through the API.
        ids = {}
        for name in ("good", "flaky", "dead"):
            status, j = env.http("POST", "/v1/hooks", body={
                "url": receivers.url(name), "description": name})
            check(status == 201 and j.get("secret", "").startswith("whsec_"),
                  "POST /v1/hooks %s -> 201 with its secret (%s)" % (name, status))
            ids[name] = int(j["id"])
            receivers.secrets[name] = j["secret"]
        status, j = env.http("GET", "/v1/hooks")
        check(status == 200 and "secret" not in json.dumps(j),
              "GET /v1/hooks lists them without secrets")

        # E[0] opts out of e-mail, E[1]'s address is suppressed.
        status, _ = env.http("PUT", "/v1/users/%d" % E[0], body={"tz": "UTC"})
        check(status in (200, 201), "E[0]'s profile (%s)" % status)
        status, _ = env.http("PUT", "/v1/users/%d/preferences" % E[0],
                             body={"opt_out": [{"channel": "smtp"}]})
        check(status == 200, "E[0] opts out of smtp (%s)" % status)
        status, _ = env.http("POST", "/v1/suppressions", body={
            "platform": "email", "address": "e%d@example.org" % E[1], "reason": "bounced"})
        check(status in (200, 201), "E[1]'s address suppressed (%s)" % status)
        check(wait_until(lambda: env.r.cmd("SMEMBERS", "%saddr:%d" % (env.prefix, E[1]))
                         == ["email  e%d@example.org bounced" % E[1]], 20, 0.2),
              "the suppression in Redis")
        e = env.insert_with_subs("consent", "mail", E, due_s=2)

        # T0 pushes U[0..2] under the throttle rule A shares.
        thr = {"throttle_scope": "'evt%s'" % env.tag, "throttle_limit": 1,
               "throttle_window_s": 3600}
        t0 = env.insert_with_subs("throttle-first", "webhook", U[:3], due_s=1, **thr)
        check(env.wait_state(t0, "done", 60), "T0 done")
        a = env.insert_with_subs("every-outcome", "mail", U, due_s=6, title="'Rappel'",
                                 body="'bonjour {{uid}}'", **thr)
        b = env.insert_with_subs("app-opened", "webhook", B, due_s=2)
        c = env.insert_with_subs("to-cancel", "webhook", C, due_s=30)
        d = env.insert_task("woke-late", "webhook", due="UTC_TIMESTAMP(3) - INTERVAL 2 HOUR",
                            expire_at="UTC_TIMESTAMP(3) - INTERVAL 1 HOUR",
                            _subs=",".join("(@t,%d)" % u for u in D))
        # A pull before A's due time (once the scanner put A's subscribers
        # into Redis): U[29] pulled.
        check(wait_until(lambda: env.r.cmd("SCARD", env.key(a, "subs")) == len(U), 20, 0.1),
              "A's subscribers in Redis before its due time")
        status, j = env.http("GET", "/v1/users/%d/reminders?ack=1" % U[29])
        acked = [r for r in (j.get("reminders", []) if isinstance(j, dict) else [])
                 if int(r["task_id"]) == a and r.get("acked")]
        check(status == 200 and len(acked) == 1,
              "U[29] pulls task A before its due time (%s %s)" % (status, j))
        # C: cancelled once its subscribers are in Redis.
        check(wait_until(lambda: env.r.cmd("SCARD", env.key(c, "subs")) == len(C), 20),
              "C's subscribers in Redis")
        status, _ = env.http("POST", "/v1/tasks/%d/cancel" % c)
        check(status in (200, 202), "C cancelled (%s)" % status)
        for t, want in ((a, "done"), (b, "done"), (c, "cancelled"), (d, "done"), (e, "done")):
            check(env.wait_state(t, want, 90), "task %d %s (%s)" % (t, want, env.task(t)))
        # B's app opens: two uids, one twice; an unknown task or uid is refused.
        for u in (B[0], B[1], B[1]):
            status, j = env.http("POST", "/v1/users/%d/events" % u,
                                 body={"task": b, "type": "opened"})
            check(status == 200, "POST /v1/users/%d/events opened -> 200 (%s)" % (u, j))
        status, _ = env.http("POST", "/v1/users/%d/events" % U[0], body={"task": b,
                                                                          "type": "opened"})
        check(status == 404, "an open of a task the uid is no recipient of -> 404")
        status, _ = env.http("POST", "/v1/users/%d/events" % B[0], body={"task": b,
                                                                          "type": "clicked"})
        check(status == 400, "the app reports only opened -> 400")

        # Opens and clicks from the mail received.
        msgs = {m["rcpt_tos"][0]: m for m in standin.events("message")}
        check(len(msgs) == 22, "22 mails received (%d)" % len(msgs))
        clicked = []
        for u in U[3:8]:
            html = msgs.get("u%d@example.org" % u, {}).get("html") or ""
            pixel = re.search(r'<img src="([^"]+)"', html)
            link = re.search(r'<a href="([^"]+)"', html)
            check(pixel is not None and link is not None and "/t/c/" in link.group(1),
                  "uid %d's mail has a tracked link and the pixel" % u)
            if pixel is None or link is None:
                continue
            purl = pixel.group(1).replace("&amp;", "&")
            lurl = link.group(1).replace("&amp;", "&")
            for _ in range(2):
                status, data = get(purl)
                check(status == 200 and data[:6] == b"GIF89a", "the pixel answers a GIF")
                status, loc = get(lurl)
                check(status == 302 and loc == "https://example.com/offer?a=1&b=2",
                      "the click redirects to the original URL (%s %s)" % (status, loc))
            clicked.append((u, lurl))
        u, lurl = clicked[0]
        tampered = re.sub(r"u=[^&]+", "u=" + urllib.parse.quote("https://evil.test/", safe=""),
                          lurl)
        status, loc = get(tampered)
        check(status == 403 and not str(loc).startswith("https://evil"),
              "a tampered URL is refused, no redirect (%s)" % status)
        forged = re.sub(r"(/t/c/\d+\.\d+\.)[A-Za-z0-9_-]+", r"\1" + "A" * 22, lurl)
        check(get(forged)[0] == 403, "a forged signature is refused")
        other = lurl.replace("/t/c/%d.%d." % (a, u), "/t/c/%d.%d." % (a, u + 1))
        check(get(other)[0] == 403, "another uid under the same signature is refused")

        # The counters.
        _, sent, failed, thr_n, unreg, pulled = env.task(
            a, "state, sent, failed, throttled, unregistered, pulled")
        want_a = {"sent": 22, "throttled": 3, "unregistered": 3, "failed": 1, "pulled": 1}
        check((int(sent), int(thr_n), int(unreg), int(failed), int(pulled)) == (22, 3, 3, 1, 1),
              "A: sent 22 throttled 3 unregistered 3 failed 1 pulled 1 (%s %s %s %s %s)"
              % (sent, thr_n, unreg, failed, pulled))
        check([int(v) for v in env.task(e, "opted_out, suppressed, unaccounted")] == [1, 1, 0],
              "E: opted_out 1 suppressed 1, each counted once (%s)"
              % env.task(e, "opted_out, suppressed, unaccounted"))
        want = {t0: {"sent": 3}, a: dict(want_a, opened=5, clicked=5), b: {"sent": 5, "opened": 2},
                c: {"cancelled": len(C)}, d: {"expired": len(D)},
                e: {"opted_out": 1, "suppressed": 1}}

        # The events topic: exactly one outcome per recipient, the counts.
        def topic_counts():
            return counts([v for _, v in read_topic(env, evtopic)], want)
        check(wait_until(lambda: topic_counts() == want, 30, 1),
              "the events topic counts every outcome (%s)" % topic_counts())
        recs = read_topic(env, evtopic)
        per = {}
        for k, v in recs:
            if v["kind"] == "outcome":
                per.setdefault((v["task"], v["uid"]), []).append(v["type"])
        check(all(len(x) == 1 for x in per.values()),
              "one outcome event per recipient and task (%d)" % len(per))
        with open(SCHEMA) as f:
            required = json.load(f)["required"]
        check(all(k == str(v["uid"]) and all(r in v for r in required) for k, v in recs),
              "each record keyed by its uid, with every required field")
        a_sent = [v for _, v in recs if v["task"] == a and v["type"] == "sent"]
        check(all(v["address_hash"] == hashlib.sha256(b"u%d@example.org" % v["uid"]).hexdigest()
                  and v["provider_status"] == 250 and v["channel"] == "mail" for v in a_sent),
              "A's sent events name the address's SHA-256, the SMTP code, the channel")
        ids_topic = {v["id"] for _, v in recs}

        # The webhooks.
        check(wait_until(lambda: set(receivers.events["good"]) == ids_topic, 30, 0.5),
              "the answering webhook got every event (%d of %d)"
              % (len(receivers.events["good"]), len(ids_topic)))
        check(wait_until(lambda: set(receivers.events["flaky"]) == ids_topic, 30, 0.5),
              "the webhook that failed for %.0f s got every event after it recovered (%d)"
              % (FLAKY_S, len(receivers.events["flaky"])))
        check(counts(receivers.events["good"].values(), want) == want,
              "the webhook's events reconstruct the exact counts")
        check(receivers.bad_signatures == 0, "every delivery's signature verified")

        def hook(name):
            return env.http("GET", "/v1/hooks/%d" % ids[name])[1]
        check(wait_until(lambda: hook("dead").get("state") == "disabled", 30, 0.5),
              "the webhook that never answers is disabled (%s)" % hook("dead"))
        check(wait_until(lambda: int(hook("dead").get("dead_letters", 0)) == len(ids_topic),
                         20, 0.5),
              "its events are dead letters (%s of %d)" % (hook("dead").get("dead_letters"),
                                                         len(ids_topic)))
        text = env.metrics(hooks_port)
        check(metric(text, "herald_hooks_disabled") == 1 and
              metric(text, "herald_hook_disabled_total") == 1,
              "herald_hooks_disabled 1 (the alert's), herald_hook_disabled_total 1")
        check("hook_disabled" in env.log(hk), "herald-hooks logs hook_disabled")
        # Fixed, enabled again, redriven.
        receivers.dead_healed = True
        status, j = env.http("PATCH", "/v1/hooks/%d" % ids["dead"], body={"state": "enabled"})
        check(status == 200 and j.get("state") == "enabled", "PATCH state enabled")
        status, j = env.http("POST", "/v1/hooks/%d/redrive" % ids["dead"])
        check(status == 200 and int(j.get("marked", 0)) == len(ids_topic),
              "POST redrive marks every dead letter (%s)" % j)
        check(wait_until(lambda: set(receivers.events["dead"]) == ids_topic, 30, 0.5),
              "the redrive delivers them (%d)" % len(receivers.events["dead"]))
        check(wait_until(lambda: int(hook("dead").get("dead_letters", -1)) == 0, 20, 0.5),
              "and deletes them")

        # The funnel.
        status, st = env.http("GET", "/v1/tasks/%d/stats" % a)
        f = st.get("funnel", [{}])[0] if status == 200 else {}
        check(status == 200 and (f.get("sent"), f.get("delivered"), f.get("opened"),
                                 f.get("clicked")) == (22, 1, 5, 5),
              "GET stats: funnel sent 22 -> delivered 1 -> opened 5 -> clicked 5 (%s)" % f)
        series = st.get("series", []) if status == 200 else []
        check(sum(p.get("sent", 0) for p in series) == 22 and
              sum(p.get("opened", 0) for p in series) == 5,
              "the per-minute series adds up (%s)" % series)
        out = subprocess.run([ctl, "-c", cfg, "status", str(a)], capture_output=True, text=True,
                             timeout=30)
        check("funnel    mail sent 22 -> delivered 1" in out.stdout and "clicked 5" in out.stdout,
              "heraldctl status shows the funnel")
        wtext = env.metrics(env.wk_port)
        check(metric(wtext, "herald_events_lost_total") == 0 and
              metric(wtext, "herald_events_gate_forced_total") == 0,
              "the worker lost no event and forced no acknowledgement")
        check(env.stop(hk) == 0, "herald-hooks stops cleanly")
        check(env.stop(wk) == 0 and env.stop(dsp) == 0, "dispatcher and worker stop cleanly")
    finally:
        receivers.shutdown()
        if standin is not None:
            standin.stop()
        drop_addresses(env, base, base + 410)
        env.drop_users(base + 400, base + 410)
        env.sql("DELETE FROM push_suppression WHERE address IN ('e%d@example.org', "
                "'e%d@example.org')" % (E[0], E[1]))
        env.sql("DELETE FROM push_hook_dead WHERE hook_id IN (SELECT id FROM push_hook WHERE "
                "url LIKE 'http://127.0.0.1:%d/%%')" % receivers.server_address[1])
        env.sql("DELETE FROM push_hook WHERE url LIKE 'http://127.0.0.1:%d/%%'"
                % receivers.server_address[1])
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
