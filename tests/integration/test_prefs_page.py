#!/usr/bin/env python3
"""test_prefs_page: the preference page of the one-click links
(/u/{token}, dispatcher/dsp_unsub.c; docs/recipients.md) in a real browser:
Debian's chromium, headless, over the DevTools protocol
(tests/lib/herald_test/browser.py), against a herald-dispatcher of the
local stack.

  1. the answer: text/html, a CSP that allows nothing but this origin's
     stylesheet and forms posting here, no-store, nosniff; the page's
     stylesheet served;
  2. what a screen reader needs: the page's language, one h1, a table with a
     caption and scoped headers, every checkbox named (aria-label), the time
     fields labelled, a mandatory category said to be always sent;
  3. keyboard only: Space on a checkbox unchecks it, the quiet hours typed,
     Enter on the save button saves; the page comes back saying so (a
     status region) and MySQL holds the preferences; then Enter on the
     unsubscribe button records the link's own opt-out;
  4. a link with a bad signature shows a refusal, not the page.

Screenshots go to OUTDIR.  usage: test_prefs_page.py HERALD_DISPATCHER
HERALDCTL OUTDIR (exit 77 without HERALD_TEST_CONFIG or chromium)."""
import asyncio
import os
import random
import subprocess
import sys
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, recipients_yaml, wait_until  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lib"))
from herald_test.browser import Browser, BrowserError, chromium_path  # noqa: E402

RECIPIENTS = recipients_yaml([("p1", "prefs-page-test-key-0123456789abcdef")])


async def run(env, ctl, cfg, out, uid):
    link = subprocess.run([ctl, "-c", cfg, "user", "link", str(uid), "marketing", "webhook"],
                          capture_output=True, text=True, timeout=60).stdout.strip()
    check(link.startswith("https://herald.test/u/hru1.%d.marketing.webhook." % uid),
          "heraldctl user link prints the link (%s)" % link)
    path = urllib.parse.urlparse(link).path
    page = "http://127.0.0.1:%d%s" % (env.dsp_port, path)
    st, body = env.http("GET", path, token=None)
    check(st == 200 and "<h1>" in str(body), "GET /u/{token}: 200")
    # 1. the answer's headers
    with urllib.request.urlopen(page, timeout=10) as r:
        h = {k.lower(): v for k, v in r.getheaders()}
    check(h.get("content-type", "").startswith("text/html") and
          "default-src 'none'" in h.get("content-security-policy", "") and
          "form-action 'self'" in h.get("content-security-policy", "") and
          h.get("cache-control") == "no-store" and h.get("x-content-type-options") == "nosniff",
          "text/html, CSP default-src 'none' form-action 'self', no-store, nosniff (%s)" % h)
    st, css = env.http("GET", "/console/prefs.css", token=None)
    check(st == 200 and ":focus-visible" in str(css), "the page's stylesheet is served")

    b = await Browser.start(os.path.join(env.dir, "chromium.log"), width=900, height=800)
    try:
        await b.goto(page)
        # 2. what assistive technology reads
        check(await b.eval("document.documentElement.lang") == "en" and
              await b.eval("document.querySelectorAll('h1').length") == 1 and
              await b.eval("!!document.querySelector('table caption')") and
              await b.eval("[...document.querySelectorAll('th')].every(t => t.scope)"),
              "lang, one h1, a captioned table with scoped headers")
        boxes = await b.eval("[...document.querySelectorAll('input[type=checkbox]')]"
                             ".map(e => [e.id, e.getAttribute('aria-label'), e.checked])")
        check(len(boxes) == 4 and all(lbl and chk for _, lbl, chk in boxes),
              "4 checkboxes (2 categories by 2 channel types), each named, all checked (%s)"
              % boxes)
        check(await b.eval("['quiet_start', 'quiet_end'].every(id => "
                           "document.querySelector('label[for=' + id + ']'))"),
              "the quiet hours' fields are labelled")
        check("security messages are always sent" in (await b.text("main") or ""),
              "the mandatory category is said to be always sent")
        await b.screenshot(os.path.join(out, "prefs-page.png"), True)
        # 3. keyboard only
        await b.eval("document.getElementById('in-marketing-webhook').focus()")
        await b.key(" ", "Space", 32)
        check(await b.wait("!document.getElementById('in-marketing-webhook').checked", 5),
              "Space unchecks the focused checkbox")
        await b.eval("document.getElementById('quiet_start').focus()")
        await b.fill("#quiet_start", "22:30")
        await b.fill("#quiet_end", "06:15")
        await b.eval("document.getElementById('save').focus()")
        await b.key("Enter", "Enter", 13)
        note = await b.wait("(e => e && e.textContent)(document.querySelector('[role=status]'))",
                            10)
        check(note == "Your preferences are saved.", "Enter saves; the page says so (%s)" % note)
        check(await b.eval("location.search") == "?done=saved" and
              not await b.eval("document.getElementById('in-marketing-webhook').checked") and
              await b.eval("document.getElementById('quiet_start').value") == "22:30",
              "the page shows what was saved")
        prefs = env.sql("SELECT category, channel, source FROM push_user_pref WHERE uid = %d"
                        % uid)
        quiet = env.sql("SELECT quiet_start, quiet_end FROM push_user WHERE uid = %d" % uid)
        check(prefs == [["marketing", "webhook", "unsubscribe"]] and
              quiet == [["22:30:00", "06:15:00"]],
              "MySQL holds them: the unchecked cell opted out, the quiet hours (%s %s)"
              % (prefs, quiet))
        check(wait_until(lambda: env.r.cmd("HGET", "%suser:%d" % (env.prefix, uid), "_optout")
                         == "marketing/webhook", 5, 0.2), "and Redis")
        await b.screenshot(os.path.join(out, "prefs-saved.png"), True)
        # Every box of a category (a row) or a channel type (a column)
        # unchecked: each stored as one opt-out.
        await b.goto(page)
        await b.eval("document.getElementById('in-reminder-webhook').click()")
        await b.eval("document.getElementById('in-reminder-smtp').click()")
        await b.eval("document.getElementById('save').focus()")
        await b.key("Enter", "Enter", 13)
        await b.wait("location.search === '?done=saved' && document.readyState === 'complete'", 10)
        prefs = env.sql("SELECT category, channel FROM push_user_pref WHERE uid = %d ORDER BY 1, 2"
                        % uid)
        check(prefs == [["*", "webhook"], ["reminder", "*"]],
              "the reminder row and the webhook column unchecked: stored as (reminder, *) and "
              "(*, webhook) (%s)" % prefs)
        await b.eval("document.getElementById('unsubscribe').focus()")
        await b.key("Enter", "Enter", 13)
        note = await b.wait("(e => e && e.textContent === 'You are unsubscribed.' && "
                            "e.textContent)(document.querySelector('[role=status]'))", 10)
        check(note == "You are unsubscribed.", "Enter on the unsubscribe button: done (%s)" % note)
        # 4. a bad link
        await b.goto(page[:-3] + ("AAA" if not page.endswith("AAA") else "BBB"))
        text = await b.eval("document.body.textContent")
        check("This link is not valid." in (text or "") and
              await b.eval("!!document.querySelector('[role=alert]')") and
              not await b.eval("!!document.querySelector('form')"),
              "a bad signature: a refusal page (an alert), no form (%s)" % (text or "")[:80])
    finally:
        await b.close()


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    dispatcher, ctl, out = sys.argv[1:4]
    if chromium_path() is None:
        print("skipped: chromium is not installed (deploy/local/packages.txt lists it)")
        return 77
    env = Env("prefs_page")
    os.makedirs(out, exist_ok=True)
    uid = 6_000_000_000 + random.randrange(1 << 30)
    try:
        cfg = env.config({"hook": {"url": "http://127.0.0.1:9/push"},
                          "mail": {"type": "smtp", "url": "smtp://127.0.0.1:9",
                                   "from": "noreply@herald.test", "subject": "s",
                                   "text": "t"}}, extra_top=RECIPIENTS)
        dsp = env.start([dispatcher, "-c", cfg], "dispatcher.log")
        check(env.wait_ready(env.dsp_port), "dispatcher serves")
        env.http("PUT", "/v1/users/%d" % uid, {"tz": "Europe/Berlin"})
        try:
            asyncio.run(run(env, ctl, cfg, out, uid))
        except BrowserError as e:
            check(False, "the browser: %s" % e)
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        env.drop_users(uid, uid)
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
