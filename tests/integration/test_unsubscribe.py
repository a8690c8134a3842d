#!/usr/bin/env python3
"""test_unsubscribe: one-click unsubscribe and the suppression list
(docs/recipients.md) with an smtp channel against
tests/providers/smtp_standin.py, one dispatcher and one worker:

  1. the suppression list: a bounced address and an unsubscribed one (the
     API and heraldctl); a marketing campaign counts both uids suppressed and
     sends to the rest, a security (mandatory) campaign still reaches the
     unsubscribed address but never the bounced one;
  2. every received mail carries herald's List-Unsubscribe link
     (<https://herald.test/u/...>) and List-Unsubscribe-Post: One-Click;
     the link of one recipient's mail, POSTed as a mail client does
     (List-Unsubscribe=One-Click), opts that uid out of marketing by email:
     the next marketing campaign counts it opted_out, while a reminder
     campaign by email still reaches it;
  3. tokens refused with 403 and nothing changed: a forged signature, a key
     rotated out, an expired link, a link issued in the future, a malformed
     one, a GET of the page for a bad token; a link of the second (rotated
     in) key works; the page's GET never unsubscribes.

usage: test_unsubscribe.py HERALD_DISPATCHER HERALD_WORKER HERALDCTL (exit 77
without HERALD_TEST_CONFIG or Debian's python3-aiosmtpd)"""
import base64
import hashlib
import hmac
import os
import random
import subprocess
import sys
import time
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish, recipients_yaml, wait_until  # noqa: E402
from provider_env import add_addresses, close_env, make_ca, open_env, smtp_standin  # noqa: E402

KEYS = {"k2": "unsubscribe-test-key-two-0123456789abcdef",
        "k1": "unsubscribe-test-key-one-0123456789abcdef"}
PASSWORD = "s3cret-%d" % random.randrange(1 << 30)
N = 10


def token(uid, category, channel, iat, kid, secret):
    """An unsubscribe token as herald signs it (hr_ctoken.h)."""
    msg = "hru1.%d.%s.%s.%d.%s" % (uid, category, channel, iat, kid)
    sig = base64.urlsafe_b64encode(hmac.new(secret.encode(), msg.encode(),
                                            hashlib.sha256).digest()).rstrip(b"=").decode()
    return msg + "." + sig


def one_click(env, path, body=b"List-Unsubscribe=One-Click"):
    return env.http("POST", path, raw=body, token=None,
                    headers={"Content-Type": "application/x-www-form-urlencoded"})


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    ctl = sys.argv.pop()  # open_env takes the two daemons
    env = open_env("unsubscribe", __doc__, "aiosmtpd, cryptography")
    if isinstance(env, int):
        return env
    base = 8_000_000_000 + random.randrange(1 << 30)
    uids = list(range(base, base + N))
    bounced, unsub, clicker = uids[0], uids[1], uids[2]
    mail = {u: ["u%d@example.org" % u] for u in uids}
    standin = None
    try:
        ca = make_ca(env.dir)
        standin, mail_channel = smtp_standin(env, ca, PASSWORD, subject="News: {{title}}",
                                             text="Hello {{uid}}", concurrency=4)
        recipients = recipients_yaml([("k2", KEYS["k2"]), ("k1", KEYS["k1"])], token_ttl_s=3600)
        cfg = env.config({"mail": mail_channel}, extra_top=recipients)
        if not env.create_topic():
            return 77
        add_addresses(env, "email", "", mail)
        env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        # 1. the suppression list
        st, body = env.http("POST", "/v1/suppressions", {"platform": "email",
                                                         "address": mail[bounced][0],
                                                         "reason": "bounced", "note": "5.1.1"})
        check(st == 201 and body.get("added"), "POST /v1/suppressions: 201 (%s %s)" % (st, body))
        out = subprocess.run([ctl, "-c", cfg, "suppression", "add", "email", mail[unsub][0],
                              "unsubscribed"], capture_output=True, text=True, timeout=60)
        check(out.returncode == 0 and "suppressed" in out.stdout,
              "heraldctl suppression add (%s %s)" % (out.stdout, out.stderr))
        members = env.r.cmd("SMEMBERS", "%saddr:%d" % (env.prefix, bounced))
        check(members == ["email  %s bounced" % mail[bounced][0]],
              "the suppressed address travels with the address book (%s)" % members)
        st, body = env.http("GET", "/v1/suppressions?platform=email&address=%s"
                            % urllib.parse.quote(mail[unsub][0]))
        check(st == 200 and body["suppressions"][0]["reason"] == "unsubscribed",
              "GET /v1/suppressions of one address")
        tm = env.insert_with_subs("mkt", "mail", uids, title="'Sale'", category="'marketing'")
        ts = env.insert_with_subs("sec", "mail", uids, title="'Reset'", category="'security'")
        check(env.wait_state(tm, "done", 90) and env.wait_state(ts, "done", 90),
              "both campaigns done")
        row = env.task(tm, "sent, suppressed, unaccounted")
        check(row == [str(N - 2), "2", "0"], "marketing: 2 suppressed, %d sent (%s)" % (N - 2, row))
        row = env.task(ts, "sent, suppressed, unaccounted")
        check(row == [str(N - 1), "1", "0"],
              "security (mandatory): the unsubscribed address reached, the bounced one not (%s)"
              % row)
        msgs = standin.events("message")
        to_bounced = [m for m in msgs if mail[bounced][0] in m["rcpt_tos"]]
        check(to_bounced == [], "no message to the bounced address")
        # 2. the link of a received mail
        mine = [m for m in msgs if mail[clicker][0] in m["rcpt_tos"]]
        link = mine[0].get("list_unsubscribe") if mine else None
        check(link is not None and link.startswith("<https://herald.test/u/hru1.%d." % clicker)
              and mine[0].get("list_unsubscribe_post") == "List-Unsubscribe=One-Click",
              "the mail carries herald's one-click link (%s)" % link)
        path = urllib.parse.urlparse(link.strip("<>")).path if link else "/u/x"
        links = {m["rcpt_tos"][0]: m.get("list_unsubscribe") for m in msgs}
        check(".marketing.smtp." in links.get(mail[clicker][0], "") or
              ".security.smtp." in links.get(mail[clicker][0], ""),
              "the link names the category and the channel type")
        mkt_link = [m.get("list_unsubscribe") for m in mine if ".marketing.smtp." in
                    (m.get("list_unsubscribe") or "")]
        path = urllib.parse.urlparse(mkt_link[0].strip("<>")).path if mkt_link else path
        st, text = env.http("GET", path, token=None)
        check(st == 200 and "List-Unsubscribe" in text and
              env.sql("SELECT COUNT(*) FROM push_user_pref WHERE uid = %d" % clicker) == [["0"]],
              "GET of the link shows the page and unsubscribes nobody")
        st, text = one_click(env, path)
        check(st == 200 and "unsubscribed" in str(text), "one-click POST: 200 (%s)" % text)
        check(env.sql("SELECT category, channel, source FROM push_user_pref WHERE uid = %d"
                      % clicker) == [["marketing", "smtp", "unsubscribe"]],
              "the uid opted out of marketing by smtp")
        st, _ = one_click(env, path, b"--b\r\nContent-Disposition: form-data; "
                                     b"name=\"List-Unsubscribe\"\r\n\r\nOne-Click\r\n--b--\r\n")
        check(st == 400, "a multipart body sent as urlencoded is no one-click form: 400")
        st, _ = env.http("POST", path, raw=b"--b\r\nContent-Disposition: form-data; name=\""
                         b"List-Unsubscribe\"\r\n\r\nOne-Click\r\n--b--\r\n", token=None,
                         headers={"Content-Type": "multipart/form-data; boundary=b"})
        check(st == 200, "one-click as multipart/form-data (RFC 8058 allows it): 200")
        tm2 = env.insert_with_subs("mkt2", "mail", uids, title="'Sale 2'", category="'marketing'")
        tr = env.insert_with_subs("rem", "mail", uids, title="'Remember'", category="'reminder'")
        check(env.wait_state(tm2, "done", 90) and env.wait_state(tr, "done", 90),
              "the next campaigns done")
        # done follows the stats hash; the delivery rows and the task's
        # counters come through the reporter's queue and may trail it by a
        # flush (bounded wait)
        check(wait_until(lambda: env.deliveries(tm2).get(clicker) == "opted_out" and
                         env.task(tm2, "opted_out")[0] == "1", 10, 0.2),
              "the next marketing campaign: the uid opted_out")
        check(wait_until(lambda: env.deliveries(tr).get(clicker) == "sent", 10, 0.2),
              "a reminder campaign by email still reaches it (the category only)")
        # 3. refused tokens, each changing nothing
        before = env.sql("SELECT uid, category, channel FROM push_user_pref WHERE uid BETWEEN %d "
                         "AND %d ORDER BY 1, 2, 3" % (base, base + N))
        now = int(time.time())
        good = token(uids[3], "marketing", "smtp", now, "k2", KEYS["k2"])
        forged = good[:-2] + ("AA" if not good.endswith("AA") else "BB")
        bad = {
            "forged signature": forged,
            "a key rotated out": token(uids[3], "marketing", "smtp", now, "k0",
                                       "unsubscribe-test-key-zero-0123456789ab"),
            "a known key id with another secret": token(uids[3], "marketing", "smtp", now, "k2",
                                                        KEYS["k1"]),
            "expired": token(uids[3], "marketing", "smtp", now - 7200, "k2", KEYS["k2"]),
            "issued in the future": token(uids[3], "marketing", "smtp", now + 3600, "k2",
                                          KEYS["k2"]),
            "malformed": "hru1.%d.marketing.smtp" % uids[3],
            "another uid in the signed part": good.replace(".%d." % uids[3],
                                                           ".%d." % uids[4], 1),
        }
        for why, tok in bad.items():
            st, _ = one_click(env, "/u/" + tok)
            check(st == 403, "%s: 403" % why)
        st, text = env.http("GET", "/u/" + forged, token=None)
        check(st == 403, "the page of a forged token: 403")
        # A good token with a body the open route does not take: refused on
        # the headers (413, 415) or by the handler (400), changing nothing.
        st, _ = one_click(env, "/u/" + good, b"List-Unsubscribe=One-Click&x=" + b"y" * 9000)
        check(st == 413, "a form over 8 KiB: 413 (%s)" % st)
        st, _ = env.http("POST", "/u/" + good, raw=b'{"List-Unsubscribe": "One-Click"}',
                         token=None, headers={"Content-Type": "application/json"})
        check(st == 415, "a JSON body: 415 (%s)" % st)
        st, _ = one_click(env, "/u/" + good, b"List-Unsubscribe=Later")
        check(st == 400, "a form without List-Unsubscribe=One-Click: 400 (%s)" % st)
        after = env.sql("SELECT uid, category, channel FROM push_user_pref WHERE uid BETWEEN %d "
                        "AND %d ORDER BY 1, 2, 3" % (base, base + N))
        check(before == after, "the refused tokens and bodies changed nothing")
        st, _ = one_click(env, "/u/" + token(uids[3], "reminder", "smtp", now, "k1", KEYS["k1"]))
        check(st == 200 and env.sql("SELECT category FROM push_user_pref WHERE uid = %d"
                                    % uids[3]) == [["reminder"]],
              "a link of the second (rotated in) key works")
    finally:
        env.drop_users(base, base + N)
        env.sql("DELETE FROM push_suppression WHERE address LIKE 'u%%@example.org' AND "
                "address BETWEEN 'u%d' AND 'u%d'" % (base, base + N))
        close_env(env, standin, base, base + N)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
