#!/usr/bin/env python3
"""An smtp channel end to end against tests/providers/smtp_standin.py (an
aiosmtpd relay that requires STARTTLS and AUTH PLAIN and checks the MIME
it receives), with one dispatcher and one worker:

  - every recipient accounted: sent + unregistered == subscribers; an
    address the relay refuses with 550 5.1.1 is pruned from push_address
    and Redis and its uid (no other address) is unregistered;
  - the first two messages are greylisted (451 4.7.1) and sent again;
  - each message arrived over TLS, authenticated as the channel's user
    (password from password_file), with the subject, text and HTML parts
    rendered from the channel's templates for the recipient, and a
    List-Unsubscribe header (one-click).

usage: test_smtp.py HERALD_DISPATCHER HERALD_WORKER   (exit 77 without
HERALD_TEST_CONFIG or Debian's python3-aiosmtpd)"""
import os
import random
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish  # noqa: E402
from provider_env import (add_addresses, addresses_left, close_env, end_campaign,  # noqa: E402
                          make_ca, open_env, run_campaign, smtp_standin)

N = 12
PASSWORD = "s3cret-%d" % random.randrange(1 << 30)


def main():
    env = open_env("smtp", __doc__, "aiosmtpd, cryptography")
    if isinstance(env, int):
        return env
    base = 9_000_000_000 + random.randrange(1 << 30)
    uids = list(range(base, base + N))
    mail = {u: ["u%d@example.org" % u] for u in uids}
    mail[uids[0]].append("u%d-work@example.org" % uids[0])  # two mailboxes: both get it
    mail[uids[1]] = ["gone%d@example.org" % uids[1]]          # 550 5.1.1: unregistered
    unknown = mail[uids[1]][0]
    standin = None
    try:
        ca = make_ca(env.dir)
        standin, mail_channel = smtp_standin(
            env, ca, PASSWORD, ["--unknown", unknown, "--greylist", "2"],
            from_name="Herald Rappel", subject="Rappel : {{title}}", text="Texte : {{body}}",
            html="<p>{{body}}</p>", list_unsubscribe="https://herald.test/unsub/{{uid}}",
            concurrency=4, retry="{max_attempts: 4, backoff_ms: 50, max_backoff_ms: 500}")
        channels = {"mail": mail_channel}
        add_addresses(env, "email", "", mail)
        ran = run_campaign(env, channels, "mail", uids, "'réunion ✓'", "'bonjour {{uid}}'")
        if ran is None:
            return 77
        dsp, wk, t, (sent, failed, unreg) = ran
        check(sent == N - 1 and unreg == 1 and failed == 0,
              "every recipient accounted: sent %s + unregistered %s == %d, failed %s"
              % (sent, unreg, N, failed))
        check(env.deliveries(t).get(uids[1]) == "unregistered",
              "push_delivery: the refused mailbox's uid unregistered")
        live = {a for ts in mail.values() for a in ts} - {unknown}
        left, in_redis = addresses_left(env, uids)
        check(left == live and in_redis == live,
              "the 5.1.1 address pruned from MySQL and Redis, the others kept (%s, %s)"
              % (sorted(left ^ live), sorted(in_redis ^ live)))
        msgs = standin.events("message")
        got = sorted(a for m in msgs for a in m["rcpt_tos"])
        check(got == sorted(live), "one message per live address (%d)" % len(got))
        check(len(standin.events("greylisted")) == 2, "two greylisted (451) and sent again")
        by_addr = {m["rcpt_tos"][0]: m for m in msgs}
        u = uids[2]
        m = by_addr.get("u%d@example.org" % u, {})
        check(m.get("tls") and m.get("login") == "herald", "over STARTTLS, AUTH as herald")
        check(m.get("subject") == "Rappel : réunion ✓" and
              (m.get("text") or "").strip() == "Texte : bonjour %d" % u and
              (m.get("html") or "").strip() == "<p>bonjour %d</p>" % u,
              "subject, text and HTML rendered for the recipient (%s)" % m)
        check(m.get("list_unsubscribe") == "<https://herald.test/unsub/%d>" % u and
              m.get("list_unsubscribe_post") == "List-Unsubscribe=One-Click",
              "List-Unsubscribe with one-click")
        check(PASSWORD not in env.log(wk), "the password is not in the worker's log")
        end_campaign(env, wk, dsp, "mail", 1)
    finally:
        close_env(env, standin, base, base + N)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
