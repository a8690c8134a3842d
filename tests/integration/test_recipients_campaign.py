#!/usr/bin/env python3
"""test_recipients_campaign: issue 28's "done when" on the real stack — a
campaign of N recipients (10,000 here, about a minute; HERALD_CAMPAIGN_N=100000
for the full run) with mixed categories, opt-outs, suppressed addresses and
users' own quiet hours, through an smtp channel to tests/providers/smtp_standin.py,
one dispatcher and one worker:

  - the profiles bulk-imported with heraldctl user import (CSV), opt-outs,
    addresses and suppressions written with raw SQL (the dispatcher's syncs
    mirror them);
  - a marketing task to every recipient and a security (mandatory) task to
    a fifth of them, due together;
  - mid-campaign every Redis key of the deployment is lost (the test's
    prefix: the tasks' working sets, the profiles, the address book, their
    synced marks), then `heraldctl recover` of both tasks;
  - both end `done`; every subscription is in exactly one outcome: one
    push_delivery row per uid, its status the one its preferences call for
    (marketing: opted_out for a category or email opt-out, suppressed for a
    bounced or unsubscribed address, sent for the rest — the quiet-hours
    users after their quiet hours; security: only the bounced addresses
    suppressed, everyone else sent), the counters equal to those rows and
    adding up to the subscriptions, unaccounted 0.

usage: test_recipients_campaign.py HERALD_DISPATCHER HERALD_WORKER HERALDCTL
(exit 77 without HERALD_TEST_CONFIG or Debian's python3-aiosmtpd)"""
import os
import random
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish, recipients_yaml, wait_until  # noqa: E402
from provider_env import close_env, make_ca, open_env, smtp_standin  # noqa: E402

N = int(os.environ.get("HERALD_CAMPAIGN_N", "10000"))
# The waits grow with N: the stand-in relay (Python) takes the mails at
# 100-300/s on a busy machine, so 100,000 take far longer than 20,000.
SCALE = max(1.0, N / 20000)
PASSWORD = "s3cret-%d" % random.randrange(1 << 30)
KEY = "campaign-test-key-0123456789abcdef0123"


def kind(k):
    """What recipient k is: the preferences and addresses it is given."""
    if k % 10 == 1:
        return "out_marketing"
    if k % 20 == 2:
        return "out_email"
    if k % 50 == 3:
        return "bounced"
    if k % 50 == 4:
        return "unsubscribed"
    if k % 10 == 5:
        return "quiet"
    return "plain"


def want(k, category):
    """The outcome recipient k must end in for a task of CATEGORY."""
    what = kind(k)
    if category == "security":
        return "suppressed" if what == "bounced" else "sent"
    return {"out_marketing": "opted_out", "out_email": "opted_out", "bounced": "suppressed",
            "unsubscribed": "suppressed"}.get(what, "sent")


def hms(ts):
    return time.strftime("%H:%M:%S", time.gmtime(ts))


def bulk(env, head, rows, per=5000):
    for i in range(0, len(rows), per):
        env.sql(head + ",".join(rows[i:i + per]))


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    ctl = sys.argv.pop()
    env = open_env("campaign", __doc__, "aiosmtpd, cryptography")
    if isinstance(env, int):
        return env
    base = 5_000_000_000 + random.randrange(1 << 30) * 1_000
    uids = [base + k for k in range(N)]
    sec = uids[:N // 5]
    standin = None
    t0 = time.time()
    try:
        ca = make_ca(env.dir)
        standin, mail_channel = smtp_standin(env, ca, PASSWORD,
                                             ["--max-seconds", str(int(1200 * SCALE))],
                                             subject="News: {{title}}",
                                             text="Hello {{user.name}}", concurrency=16)
        cfg = env.config({"mail": mail_channel}, extra_top=recipients_yaml([("c1", KEY)]))
        if not env.create_topic():
            return 77
        # The quiet-hours users' hours end a while into the campaign: their
        # pushes wait for it, across the loss and the recover.
        quiet_end = time.time() + (45 if N <= 20000 else 150)
        lines = ["uid,tz,locale,quiet_start,quiet_end,name"]
        for k, u in enumerate(uids):
            q = ("%s,%s" % (hms(time.time() - 3600), hms(quiet_end))
                 if kind(k) == "quiet" else ",")
            lines.append("%d,UTC,en-GB,%s,User%d" % (u, q, k))
        start = time.time()
        out = subprocess.run([ctl, "-c", cfg, "user", "import", "-"], input="\n".join(lines) + "\n",
                             capture_output=True, text=True, timeout=600)
        took = time.time() - start
        check(out.returncode == 0 and ("created %d," % N) in out.stdout,
              "heraldctl user import: %d profiles in %.1f s (%.0f/s) (%s)"
              % (N, took, N / took, out.stdout.strip()))
        bulk(env, "INSERT INTO push_user_pref (uid, category, channel) VALUES ",
             ["(%d, 'marketing', '*')" % u for k, u in enumerate(uids)
              if kind(k) == "out_marketing"]
             + ["(%d, '*', 'smtp')" % u for k, u in enumerate(uids) if kind(k) == "out_email"])
        bulk(env, "INSERT INTO push_address (uid, platform, app, address) VALUES ",
             ["(%d, 'email', '', 'c%d@example.org')" % (u, u) for u in uids])
        bulk(env, "INSERT INTO push_suppression (platform, app, address, reason) VALUES ",
             ["('email', '', 'c%d@example.org', '%s')" % (u, kind(k)) for k, u in enumerate(uids)
              if kind(k) in ("bounced", "unsubscribed")])
        env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        # The raw rows reach Redis through the dispatcher's syncs.
        probe = [k for k in range(N) if kind(k) == "bounced"][0]
        check(wait_until(lambda: env.r.cmd("SMEMBERS", "%saddr:%d" % (env.prefix, uids[probe]))
                         == ["email  c%d@example.org bounced" % uids[probe]] and
                         env.r.cmd("HGET", "%suser:%d" % (env.prefix, uids[1]), "_optout")
                         == "marketing/*", 60, 0.5), "the books mirrored into Redis")
        tm = env.insert_with_subs("campaign-marketing", "mail", uids, due_s=3,
                                  title="'Offer'", category="'marketing'", chunk_size=1000)
        ts = env.insert_with_subs("campaign-security", "mail", sec, due_s=3,
                                  title="'Sign-in'", category="'security'", chunk_size=1000)
        # Both tasks under way (the loss comes while each has recipients
        # left: together they have sent a sixth of the mails).
        sent_before = lambda: [int(env.task(t, "sent")[0]) for t in (tm, ts)]  # noqa: E731
        check(wait_until(lambda: sum(sent_before()) >= (N + len(sec)) // 6, 240 * SCALE, 0.2),
              "the campaign is under way (%s sent)" % sent_before())
        # The loss: every key of this deployment.
        lost = env.r.unlink_pattern(env.prefix + "*")
        print("     lost every Redis key of the deployment (%s) at %s sent (marketing, security), "
              "%.1f s in" % (lost, sent_before(), time.time() - t0), flush=True)
        for t in (tm, ts):
            ok = env.wait_state(t, ("done", "failed", "dispatching", "dispatched"), 5)
            paused = False
            for attempt in range(60):
                out = subprocess.run([ctl, "-c", cfg, "recover", str(t)], capture_output=True,
                                     text=True, timeout=240)
                if out.returncode == 0 or "nothing to recover" in out.stderr:
                    break
                # dispatching: pause it first, as the refusal says
                if "pause it first" in out.stderr or "chunks in flight" in out.stderr:
                    subprocess.run([ctl, "-c", cfg, "pause", str(t)], capture_output=True,
                                   timeout=60)
                    paused = True
                time.sleep(1)
            check(ok and (out.returncode == 0 or "nothing to recover" in out.stderr),
                  "task %d recovered (%s%s)" % (t, out.stdout.strip(), out.stderr.strip()))
            # Resumed by its control, whatever its state reads now (the
            # control scan may turn the recovered task paused only later).
            if paused:
                subprocess.run([ctl, "-c", cfg, "resume", str(t)], capture_output=True, timeout=60)
        check(env.wait_state(tm, "done", 600 * SCALE) and env.wait_state(ts, "done", 300 * SCALE)
              and env.task(tm, "last_error") == env.task(ts, "last_error") == ["NULL"],
              "both tasks done after the loss, no error left from before the recover (%s, %s)"
              % (env.task(tm, "state, last_error"), env.task(ts, "state, last_error")))
        for t, members, category in ((tm, uids, "marketing"), (ts, sec, "security")):
            # done follows the acks' counts in Redis (hr_finish); the workers'
            # reporters write the delivery rows in their next round, so under
            # load a read right after done can be short (a CI run read 9,981
            # of 10,000).  Bounded: a row that never comes still fails below.
            wait_until(lambda: len(env.deliveries(t)) >= len(members), 30 * SCALE, 0.5)
            got = env.deliveries(t)
            wrong = [u for k, u in enumerate(members) if got.get(u) != want(k, category)]
            cols = "sent, failed, throttled, pulled, cancelled, unregistered, expired, " \
                   "opted_out, suppressed, unaccounted"
            row = dict(zip(cols.split(", "), (int(v) for v in env.task(t, cols))))
            by = {}
            for s in got.values():
                by[s] = by.get(s, 0) + 1
            check(len(got) == len(members) and not wrong,
                  "%s: one delivery row per subscription, each in the outcome its preferences "
                  "call for (%d rows, %d wrong: %s)" % (category, len(got), len(wrong),
                                                       wrong[:5]))
            settled = sum(v for k, v in row.items() if k != "unaccounted")
            check(row["unaccounted"] == 0 and settled == len(members) and
                  all(row[s] == n for s, n in by.items()),
                  "%s: counters = the rows, adding up to the %d subscriptions (%s)"
                  % (category, len(members), row))
            print("     %s: %s" % (category, {k: v for k, v in row.items() if v}), flush=True)
        quiet = [u for k, u in enumerate(uids) if kind(k) == "quiet"]
        first = env.sql("SELECT MIN(UNIX_TIMESTAMP(at)) FROM push_delivery WHERE task_id = %d AND "
                        "uid IN (%s)" % (tm, ",".join(str(u) for u in quiet[:1000])))
        check(float(first[0][0]) >= quiet_end - 1,
              "quiet hours: the marketing pushes of those users after their end (%.1f s after)"
              % (float(first[0][0]) - quiet_end))
        print("     the whole run took %.1f s" % (time.time() - t0), flush=True)
    finally:
        env.sql("DELETE FROM push_suppression WHERE address LIKE 'c%%@example.org' AND "
                "address BETWEEN 'c%d' AND 'c%d'" % (base, base + N))
        env.drop_users(base, base + N)
        close_env(env, standin, base, base + N)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
