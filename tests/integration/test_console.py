#!/usr/bin/env python3
"""The web console (docs/console.md) in a real browser: Debian's chromium,
headless, driven over the DevTools protocol (tests/lib/herald_test/browser.py),
against the local stack with a real herald-dispatcher, herald-worker and three
herald-sinks (a fast one, a slow one (--latency-ms) and one answering 400 to
10 % of the uids, always the same ones).

  1. the files: /console redirects, /console/ and its assets carry their
     Content-Type, the CSP and no-cache; an unknown file is 404;
  2. login: a wrong token is refused on the page (401 shown), the right one
     opens the task list (typed, then Enter: keyboard only);
  3. create a task in the form, with a dry-run preview for a sample uid;
     upload a CSV of subscribers (the dispatcher's max_ids is 1000 here, so
     the page has to split the file into smaller batches); the task runs
     and the list shows it
     done with its counts, as MySQL and the sink do (its due time is
     DUE_S ahead: subscribers are taken only before the task is claimed);
  4. a rate-limited task on the slow sink: its chunks in flight listed,
     paused from its page mid-campaign (the sink's record stays flat),
     resumed, done with every uid delivered;
  5. a task whose pushes partly fail (created first, so that it runs while
     the form is filled in): its page lists the dead letters with
     their reasons, Redrive sends them again (the API's answer and the page
     agree), and the task ends done again with the same failed count;
  6. roles (issue 31): logged in with a viewer's API token the page shows
     no control the role cannot use (no Pause, Resume, Cancel, Redrive,
     upload, New task, Audit log) and names the caller; back as the admin,
     the Audit log page lists the pause and resume of step 4 as made from
     the console, as GET /v1/audit does.
  7. the funnel of the finished form's task: opens reported through the API
     (POST /v1/users/{uid}/events) show in its table and bars, the shares of
     the sent computed, the per-minute series drawn;
  8. the event webhooks page: an endpoint registered in its form (the secret
     shown once), listed, disabled and deleted from its row;
  9. per-locale variants (issue 32): a task with a de and a pt variant pushed
     to profiles in de-AT, pt-BR and none: its page's variants table shows
     each variant's title and its recipients sent per variant, as
     GET /v1/tasks/{id}'s variant_counts; an A/B test with a winner step:
     the page's line names the winner the API names;
 10. the series view (issue 29): a daily series made through the API is
     listed with its rule; its page shows the next occurrences the API
     does and links the occurrence the dispatcher wrote (within its lead)
     to its task page; Pause, then End (two clicks), and the API reports
     the series paused, then ended.

Screenshots go to OUTDIR.  usage: test_console.py HERALD_DISPATCHER HERALD_WORKER
HERALD_SINK OUTDIR (exit 77 without HERALD_TEST_CONFIG, or when chromium is not
installed: deploy/local/packages.txt lists it)."""
import asyncio
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import (Env, check, finish, free_port, sink_argv, sink_uids,  # noqa: E402
                          wait_until)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lib"))
from herald_test.browser import Browser, BrowserError, chromium_path  # noqa: E402

N_FORM = 2500      # the CSV: 3 batches of 1000 (max_ids) or fewer
N_RATE = 2000      # the paused task, at RATE pushes/s on the slow sink
RATE = 300
SLOW_MS = 100      # the slow sink's latency: 32 connections carry 320 pushes/s, so a
                   # chunk of RATE recipients stays in flight about a second
N_FAIL = 300       # the dead letters' task: about 30 fail for good
FAIL_PCT = 10
DL_MARKUP = " <img src=x>"  # shown as text, never parsed as HTML
DUE_S = 12         # the form's task: time to preview, create and upload
# the variants' task: uid 50001 + k has profile locale VARIANT_LOCALES[k % 3]
VARIANT_UIDS = list(range(50001, 50001 + 12))
VARIANT_LOCALES = ["de-AT", "pt-BR", None]


def now_ms():
    return int(time.time() * 1000)


def raw_get(port, path):
    """(status, headers dict lower-cased, body) without following redirects."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def check_files(env):
    status, h, _ = raw_get(env.dsp_port, "/console")
    check(status == 308 and h.get("location") == "/console/", "/console -> 308 /console/")
    for path, ctype in (("/console/", "text/html"), ("/console/console.js", "text/javascript"),
                        ("/console/style.css", "text/css"), ("/console/icon.svg",
                                                             "image/svg+xml")):
        status, h, body = raw_get(env.dsp_port, path)
        check(status == 200 and h.get("content-type", "").startswith(ctype) and len(body) > 100
              and "default-src 'self'" in h.get("content-security-policy", "")
              and h.get("cache-control") == "no-cache"
              and h.get("x-content-type-options") == "nosniff",
              "%s: 200 %s, CSP default-src 'self', no-cache, nosniff (%s %s)"
              % (path, ctype, status, h.get("content-type")))
    status, _, body = raw_get(env.dsp_port, "/console/../herald.yaml")
    check(status == 404, "a path outside the console's files is 404 (%s)" % status)
    status, _, body = raw_get(env.dsp_port, "/console/nope.js")
    check(status == 404 and b"not_found" in body, "an unknown console file is 404")


class Run:
    def __init__(self, env, b, out):
        self.env = env
        self.b = b
        self.out = out
        self.base = "http://127.0.0.1:%d/console/" % env.dsp_port

    async def shot(self, name, full=False):
        await self.b.screenshot(os.path.join(self.out, name + ".png"), full)

    async def visible(self, view, timeout_s=10):
        return await self.b.wait("!document.getElementById(%s).hidden" % json.dumps(view),
                                 timeout_s)

    async def login(self):
        b = self.b
        await b.goto(self.base)
        check(await self.visible("view-login"), "the console opens on its login form")
        await b.eval("document.getElementById('login-token').focus()")
        await b.type_text("wrong-token")
        await b.key("Enter", "Enter", 13)
        alert = await b.wait("(t => t.includes('401') && t)"
                             "(document.getElementById('alert').textContent)", 10)
        check(alert and "unauthorized" in alert and await self.visible("view-login", 1),
              "a wrong token: 401 unauthorized shown, still on the login form (%s)" % alert)
        await b.eval("document.getElementById('login-token').focus()")
        await b.type_text(self.env.token)
        await b.key("Enter", "Enter", 13)
        ok = await self.visible("view-list")
        check(ok and await b.eval("sessionStorage.getItem('herald.token')") == self.env.token,
              "the right token (typed, Enter) opens the task list; kept in sessionStorage")
        await b.wait("document.getElementById('alert').textContent === ''", 5)

    async def task_state(self, want, timeout_s):
        return await self.b.wait("document.getElementById('task-state').textContent === %s"
                                 % json.dumps(want), timeout_s)

    async def outcome(self, name):
        v = await self.b.eval("(r => r ? r.cells[1].textContent : null)(document.querySelector("
                              "'#task-counters tr[data-outcome=%s]'))" % json.dumps(name))
        return None if v is None else int(v.replace(",", ""))

    # ---- 3. create in the form, CSV upload, watch it finish ------------------------

    async def create_and_upload(self, record):
        env, b = self.env, self.b
        name = "console-form-" + env.tag
        await b.goto(self.base + "#/new")
        check(await self.visible("view-new"), "New task form shown")
        due = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + DUE_S))
        for sel, value in (("#n-name", name), ("#n-channel", "webhook"), ("#n-topic", env.topic),
                           ("#n-due", due), ("#n-title", "Hi #{{uid}}"),
                           ("#n-body", "{{task.name}} says {{payload.word}}"),
                           ("#n-payload", '{"word": "hello"}'), ("#n-chunk", "500"),
                           ("#n-uid", "4242"),
                           ("#n-expire", time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                       time.gmtime(time.time() + 3600)))):
            await b.fill(sel, value)
        # An API error reaches the operator: an unknown channel.
        await b.fill("#n-channel", "no-such-channel")
        await b.click("#new-preview")
        alert = await b.wait("(t => t.startsWith('400') && t)"
                             "(document.getElementById('alert').textContent)", 10)
        check(alert and "no-such-channel" in alert and await b.eval(
            "document.getElementById('preview').hidden"),
              "preview with an unknown channel: the API's 400 shown (%s)" % alert)
        await b.fill("#n-channel", "webhook")
        await b.click("#new-preview")
        shown = await b.wait("!document.getElementById('preview').hidden", 10)
        title, body = await b.text("#pv-title"), await b.text("#pv-body")
        check(shown and title == "Hi #4242" and body == name + " says hello",
              "dry-run preview for uid 4242: %r / %r (alert %r)"
              % (title, body, await b.text("#alert")))
        n = env.sql("SELECT COUNT(*) FROM push_task WHERE name = '%s'" % name)[0][0]
        check(n == "0", "the preview stored nothing")
        await self.shot("create", full=True)
        await b.click("#new-form button[type=submit]")
        tid = await b.wait("(m => m && m[1])(/^#\\/task\\/(\\d+)$/.exec(location.hash))", 10)
        if not check(tid is not None, "Create task -> the task's page (%s)"
                     % await b.text("#alert")):
            return
        tid = int(tid)
        self.form_task = tid
        row = env.task(tid, "name, channel, title, chunk_size, state, expire_at IS NOT NULL")
        check(row == [name, "webhook", "Hi #{{uid}}", "500", "scheduled", "1"],
              "task %d in MySQL as typed (%s)" % (tid, row))
        check(await self.task_state("scheduled", 10), "its page shows it scheduled")

        # A CSV with a header, a second column and a blank line.
        path = os.path.join(env.dir, "subscribers.csv")
        uids = list(range(10001, 10001 + N_FORM))
        with open(path, "w") as f:
            f.write("uid,comment\n" + "".join("%d,user %d\n" % (u, u) for u in uids) + "\n")
        await b.set_files("#subs-file", [path])
        await b.click("#subs-form button[type=submit]")
        msg = await b.wait("(t => t.startsWith('Upload done') && t)"
                           "(document.getElementById('subs-msg').textContent)", 30)
        check(msg and ("%s uid(s)" % format(N_FORM, ",")) in msg and "new subscription" in msg,
              "CSV upload done on the page: %r (alert %r)" % (msg, await b.text("#alert")))
        bar = await b.eval("(p => [p.value, p.max])(document.getElementById('subs-progress'))")
        check(bar == [N_FORM, N_FORM], "upload progress bar full (%s)" % bar)
        n = env.sql("SELECT COUNT(*), MIN(uid), MAX(uid) FROM push_subscription "
                    "WHERE task_id = %d" % tid)[0]
        check(n == [str(N_FORM), str(uids[0]), str(uids[-1])],
              "MySQL holds the %d subscriptions (%s)" % (N_FORM, n))
        await self.shot("upload")

        ok = await self.task_state("done", DUE_S + 60)
        check(ok and await self.outcome("sent") == N_FORM,
              "the task page shows it done, %d sent" % N_FORM)
        check(env.task(tid, "state, sent, failed") == ["done", str(N_FORM), "0"],
              "MySQL: done, %d sent (%s)" % (N_FORM, env.task(tid, "state, sent, failed")))
        got = sink_uids(record, uids)
        check(set(uids) <= got, "the sink received all %d uids" % N_FORM)
        await self.shot("task-done")

        await b.goto(self.base + "#/?q=" + name)
        row = await b.wait("(r => r && r.dataset.state === 'done' && "
                           "Array.from(r.cells).map(c => c.textContent))"
                           "(document.querySelector('#list-table tr[data-task=\"%d\"]'))" % tid,
                           10)
        want = "%s / %s" % (format(N_FORM, ","), format(N_FORM, ","))
        check(row is not None and row[1] == name and row[4] == want,
              "the list, filtered by name, shows task %d done, %s (%s)" % (tid, want, row))
        rows = await b.eval("document.querySelectorAll('#list-table tbody tr').length")
        check(rows == 1, "the name filter leaves one row (%s)" % rows)
        await self.paging(tid)

    async def paging(self, newest):
        """One task a page (the failing task was made before the form's):
        Older and Newer walk the server's keyset pages."""
        b = self.b
        ids = "Array.from(document.querySelectorAll('#list-table tbody tr'))" \
              ".map(r => Number(r.dataset.task))"
        await b.goto(self.base + "#/?limit=1&q=" + self.env.tag)
        first = await b.wait("(a => a.length === 1 && a)(%s)" % ids, 10)
        check(first == [newest], "limit 1: the newest matching task alone (%s)" % first)
        ok = await b.wait("!document.getElementById('list-older').disabled", 5)
        check(ok, "Older is enabled on the first page")
        await b.click("#list-older")
        second = await b.wait("(a => a.length && a[0] !== %d && a)(%s)" % (newest, ids), 10)
        check(second and len(second) == 1 and second[0] < newest,
              "Older: the next page, an older task (%s)" % second)
        await b.click("#list-newer")
        again = await b.wait("(a => a.length && a[0] === %d && a)(%s)" % (newest, ids), 10)
        check(again == [newest], "Newer: back to the first page (%s)" % again)

    # ---- 4. pause and resume mid-campaign -------------------------------------------

    async def pause_resume(self):
        env, b = self.env, self.b
        status, t = env.http("POST", "/v1/tasks", {
            "name": "console-rate-" + env.tag, "channel": "slow", "topic": env.topic,
            "due_at": now_ms() + 3000, "title": "t", "rate_limit": RATE, "chunk_size": 1000,
            # A plan ending a second after due: its pace stays capped at RATE,
            # and the chart draws the plan against done.
            "finish_by": now_ms() + 4000})
        if not check(status == 201, "rate-limited task created (%s %s)" % (status, t)):
            return
        tid = t["id"]
        uids = list(range(20001, 20001 + N_RATE))
        record = env.slow_record
        for i in range(0, N_RATE, 1000):
            status, j = env.http("POST", "/v1/tasks/%d/subscribers" % tid,
                                 {"uids": uids[i:i + 1000]})
            check(status == 200, "subscribers %d.. added (%s %s)" % (uids[i], status, j))
        await b.goto(self.base + "#/task/%d" % tid)
        started = await b.wait("(o => o && Number(o.replace(/,/g, '')) >= %d)"
                               "((r => r && r.cells[1].textContent)(document.querySelector("
                               "'#task-counters tr[data-outcome=sent]')))" % (N_RATE // 10), 30)
        check(started, "the page shows the campaign under way (>= 10 %% sent)")
        # The dispatcher moves RATE recipients a second into a chunk, which the
        # worker sends in about a second: a chunk is in flight most of the time.
        rows = await b.wait("(r => r.length && Array.from(r, x => [x.cells[0].textContent, "
                            "x.cells[2].textContent]))(document.querySelectorAll("
                            "'#chunks-table tbody tr'))", 10)
        check(rows, "the page lists chunks in flight with their holders (%s)" % rows)
        await b.click("#btn-pause")
        ok = await self.task_state("paused", 15)
        check(ok, "Pause: the page shows the task paused (%s)" % await b.text("#task-msg"))
        check(env.task(tid, "state, control") == ["paused", "pause"],
              "MySQL: paused, control pause (%s)" % env.task(tid, "state, control"))
        # Batches a worker holds when it sees the pause finish first.
        await asyncio.sleep(2)
        before = len(sink_uids(record) & set(uids))
        await asyncio.sleep(2)
        after = len(sink_uids(record) & set(uids))
        check(before == after and after < N_RATE,
              "paused: the sink's record stays flat for 2 s (%d, %d of %d)"
              % (before, after, N_RATE))
        check(await b.eval("document.getElementById('btn-pause').disabled && "
                           "!document.getElementById('btn-resume').disabled"),
              "while paused Pause is disabled and Resume enabled")
        status, j = env.http("GET", "/v1/tasks/%d/chunks" % tid)
        api_chunks = len(j["chunks"]) if status == 200 else -1
        same = await b.wait("document.querySelectorAll('#chunks-table tbody tr').length === %d"
                            % api_chunks, 5)
        check(api_chunks >= 0 and same,
              "paused: the page lists the %d chunk(s) in flight the API does" % api_chunks)
        lines = await b.eval("document.querySelectorAll('#task-chart polyline').length")
        planned = await b.eval("document.querySelectorAll('#task-chart polyline.s-planned').length")
        check(lines == 4 and planned == 1,
              "the chart draws done, sent, failed and the finish_by plan (%s lines)" % lines)
        await self.shot("task-paused")
        await b.click("#btn-resume")
        ok = await self.task_state("done", 60)
        check(ok and await self.outcome("sent") == N_RATE,
              "Resume: the page shows the task done, %d sent" % N_RATE)
        check(env.task(tid, "state, sent") == ["done", str(N_RATE)],
              "MySQL: done, %d sent (%s)" % (N_RATE, env.task(tid, "state, sent")))
        check(set(uids) <= sink_uids(record, uids), "every uid delivered")
        return tid

    # ---- 6. roles and the audit log -----------------------------------------------------

    async def log_in_as(self, token):
        b = self.b
        if not await b.eval("document.getElementById('logout').hidden"):
            await b.click("#logout")
        check(await self.visible("view-login"), "logged out: the login form")
        await b.eval("document.getElementById('login-token').focus()")
        await b.type_text(token)
        await b.key("Enter", "Enter", 13)
        return await self.visible("view-list")

    async def viewer(self, tid):
        env, b = self.env, self.b
        name = "console-viewer-" + env.tag
        status, t = env.http("POST", "/v1/tokens", {"name": name, "role": "viewer",
                                                     "expires_in": 600})
        if not check(status == 201, "a viewer's token made (%s)" % status):
            return
        check(await self.log_in_as(t["token"]), "a viewer logs in")
        await b.goto(self.base + "#/task/%d" % tid)
        check(await self.task_state("done", 10), "the viewer sees the task page")
        hidden = await b.eval("['btn-pause', 'btn-resume', 'btn-cancel', 'dl-redrive', "
                              "'subs-section'].map(i => document.getElementById(i).hidden)")
        nav = await b.eval("['a[href=\"#/new\"]', 'a[href=\"#/audit\"]']"
                           ".map(q => document.querySelector(q).hidden)")
        who = await b.text("#whoami")
        check(hidden == [True] * 5 and nav == [True, True] and who == "token:%s (viewer)" % name,
              "a viewer sees no control it cannot use (%s %s %r)" % (hidden, nav, who))
        await self.shot("viewer")
        check(await self.log_in_as(env.token), "the admin logs in again")
        await b.goto(self.base + "#/task/%d" % tid)
        check(await self.task_state("done", 10), "the admin sees the task page")
        shown = await b.eval("['btn-pause', 'btn-resume', 'btn-cancel', 'dl-redrive']"
                             ".map(i => !document.getElementById(i).hidden)")
        check(shown == [True] * 4, "the admin sees every control (%s)" % shown)

    async def audit_page(self, tid):
        env, b = self.env, self.b
        await b.goto(self.base + "#/audit?task=%d" % tid)
        rows = await b.wait("(r => r.length && Array.from(r, x => Array.from(x.cells, "
                            "c => c.textContent)))(document.querySelectorAll("
                            "'#audit-table tbody tr'))", 10)
        status, j = env.http("GET", "/v1/audit?task=%d&limit=50" % tid)
        api = [(str(a["id"]), a["via"], a["action"]) for a in j.get("audit", [])]
        page = [(r[0], r[4], r[6]) for r in rows or []]
        check(page == api and ("console" in {p[1] for p in page})
              and {"POST /v1/tasks/{id}/pause", "POST /v1/tasks/{id}/resume"}
              <= {p[2] for p in page},
              "the Audit log page lists the task's rows as the API does, the pause and "
              "resume from the console (%s)" % page)
        await self.shot("audit", full=True)

    # ---- 6. the funnel of a finished campaign ----------------------------------------

    async def funnel(self, tid):
        env, b = self.env, self.b
        opened = [10001 + i for i in range(0, N_FORM, 100)]  # 25 of N_FORM
        for u in opened + opened[:3]:                           # repeats count once
            status, j = env.http("POST", "/v1/users/%d/events" % u,
                                 {"task": tid, "type": "opened"})
            check(status == 200, "the app's open of uid %d (%s %s)" % (u, status, j))
        await b.goto(self.base + "#/task/%d" % tid)
        cells = await b.wait("(r => r && Array.from(r.cells).map(c => c.textContent))"
                             "(document.querySelector('#funnel-table tr[data-channel=webhook]'))",
                             15)
        want = [format(N_FORM, ","), "0 (0.0 %)", "%d (1.0 %%)" % len(opened), "0 (0.0 %)"]
        check(cells is not None and cells[1:] == want,
              "the funnel table: sent %d, delivered 0, opened %d (1.0 %%), clicked 0 (%s)"
              % (N_FORM, len(opened), cells))
        bars = await b.eval("Array.from(document.querySelectorAll('#funnel-chart rect'))"
                            ".map(r => [r.dataset.step, Number(r.dataset.value), "
                            "Number(r.getAttribute('width'))])")
        check(bars and [x[0] for x in bars] == ["sent", "delivered", "opened", "clicked"] and
              bars[0][1] == N_FORM and bars[2][1] == len(opened) and bars[0][2] > bars[2][2] > 1,
              "the funnel's bars: one per step, widths in proportion (%s)" % bars)
        lines = await b.eval("Array.from(document.querySelectorAll('#series-chart polyline'))"
                             ".map(p => p.dataset.series)")
        cap = await b.text("#series-cap")
        check(lines == ["sent", "failed", "opened", "clicked"] and
              ("sent " + format(N_FORM, ",")) in cap and "opened %d" % len(opened) in cap,
              "the per-minute series drawn, adding up (%s, %r)" % (lines, cap))
        await b.eval("document.getElementById('funnel-h').scrollIntoView()")
        await self.shot("funnel")

    # ---- 9. per-locale variants on the task page ----------------------------------------

    async def variants(self):
        env, b = self.env, self.b
        last = VARIANT_UIDS[-2]  # a pt-BR profile, the last one written
        check(wait_until(lambda: env.r.cmd("HGET", "%suser:%d" % (env.prefix, last), "locale")
                         == "pt-BR", 15, 0.3), "the variants' profiles reach Redis")
        status, t = env.http("POST", "/v1/tasks", {
            "name": "console-variants", "channel": "webhook", "topic": env.topic,
            "due_at": now_ms() + 2000, "title": "Hello", "body": "b",
            "variants": [{"locale": "de", "title": "Hallo"}, {"locale": "pt", "title": "Olá"}]})
        if not check(status == 201, "a task with variants created (%s %s)" % (status, t)):
            return
        tid = t["id"]
        status, _ = env.http("POST", "/v1/tasks/%d/subscribers" % tid, {"uids": VARIANT_UIDS})
        check(status == 200 and env.wait_state(tid, "done", 30), "the variants' task done")
        want = {"default": {"sent": 4}, "de": {"sent": 4}, "pt": {"sent": 4}}
        check(wait_until(lambda: env.http("GET", "/v1/tasks/%d" % tid)[1].get("variant_counts")
                         == want, 15, 0.3), "the API counts per variant %s" % want)
        await b.goto(self.base + "#/task/%d" % tid)
        rows = await b.wait("(rs => rs.length === 3 && rs.every(r => r.cells[3].textContent "
                            "=== '4') && rs.map(r => [r.dataset.variant, r.cells[1].textContent, "
                            "r.cells[3].textContent]))(Array.from(document.querySelectorAll("
                            "'#task-variants:not([hidden]) tbody tr')))", 15)
        check(rows == [["default", "Hello", "4"], ["de", "Hallo", "4"], ["pt", "Olá", "4"]],
              "the task page's variants table: each variant's title and its sent (%s)" % rows)
        await b.eval("document.getElementById('task-variants').scrollIntoView()")
        await self.shot("variants")
        # An A/B winner step: arms A and B, half of them sampled, picked by
        # the delivered rate a second after the sample; the page's line
        # names the winner the API names.
        status, t = env.http("POST", "/v1/tasks", {
            "name": "console-abwinner", "channel": "webhook", "topic": env.topic,
            "due_at": now_ms() + 2000, "title": "Hello", "body": "b",
            "variants": [{"name": "A", "split": 50, "title": "Aa"},
                         {"name": "B", "split": 50, "title": "Bb"}],
            "ab": {"sample_pct": 50, "wait_s": 1, "metric": "delivered"}})
        if not check(status == 201, "a task with a winner step created (%s %s)" % (status, t)):
            return
        tid = t["id"]
        status, _ = env.http("POST", "/v1/tasks/%d/subscribers" % tid, {"uids": VARIANT_UIDS})
        check(status == 200 and env.wait_state(tid, "done", 60), "the winner step's task done")
        winner = (env.http("GET", "/v1/tasks/%d" % tid)[1].get("ab") or {}).get("winner")
        await b.goto(self.base + "#/task/%d" % tid)
        line = await b.wait("(p => !p.hidden && p.textContent.includes('winner') && "
                            "p.textContent)(document.getElementById('task-ab'))", 15)
        check(winner in ("A", "B") and line and "phase done" in line and
              ("winner %s by delivered" % winner) in line,
              "the task page's winner step line names the winner %s (%s)" % (winner, line))
        await b.eval("document.getElementById('task-ab').scrollIntoView()")
        await self.shot("abwinner")

    # ---- 7. the event webhooks page -----------------------------------------------------

    async def hooks(self):
        env, b = self.env, self.b
        url = "https://hooks.example.com/herald-%s" % env.tag
        await b.goto(self.base + "#/hooks")
        check(await self.visible("view-hooks"), "the event webhooks page")
        await b.fill("#h-url", url)
        await b.fill("#h-types", "sent, opened")
        await b.click("#hook-form button[type=submit]")
        msg = await b.wait("(t => t.includes('signing secret') && t)"
                           "(document.getElementById('hook-secret').textContent)", 10)
        hid = int(msg.split()[1]) if msg else 0
        check(msg and "whsec_" in msg, "registered: its secret shown once (%r)" % msg)
        row = await b.wait("(r => r && Array.from(r.cells).map(c => c.textContent))"
                           "(document.querySelector('#hooks-table tr[data-hook=\"%d\"]'))" % hid,
                           10)
        check(row and row[2] == url and row[3] == "sent, opened" and
              row[1].startswith("enabled"), "listed with its URL and types (%s)" % row)
        await self.shot("hooks")
        await b.click("#hooks-table tr[data-hook=\"%d\"] button" % hid)
        ok = await b.wait("(r => r && r.dataset.state === 'disabled')"
                          "(document.querySelector('#hooks-table tr[data-hook=\"%d\"]'))" % hid,
                          10)
        check(ok and env.http("GET", "/v1/hooks/%d" % hid)[1].get("state") == "disabled",
              "Disable: the row and the API say disabled")
        await b.click("#hooks-table tr[data-hook=\"%d\"] button.danger" % hid)
        gone = await b.wait("!document.querySelector('#hooks-table tr[data-hook=\"%d\"]')" % hid,
                            10)
        check(gone and env.http("GET", "/v1/hooks/%d" % hid)[0] == 404,
              "Delete: the row is gone, the API answers 404")

    # ---- 10. the series view -------------------------------------------------------------

    async def series(self):
        env, b = self.env, self.b
        name, rule = "console-series-" + env.tag, "FREQ=DAILY;COUNT=30"
        # The first occurrence within the dispatcher's lead (600 s): written at once.
        start = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() + 300))
        status, s = env.http("POST", "/v1/series", {
            "name": name, "channel": "webhook", "topic": env.topic, "title": "daily",
            "rrule": rule, "dtstart": start})
        if not check(status == 201, "series created (%s %s)" % (status, s)):
            return
        sid = s["id"]
        await b.click("header nav a[href='#/series']")
        check(await self.visible("view-series"), "the Series link opens the series list")
        row = await b.wait("(r => r && Array.from(r.cells).map(c => c.textContent))"
                           "(document.querySelector('#sr-table tr[data-series=\"%d\"]'))" % sid,
                           10)
        check(row and row[1] == name and row[2] == "active" and row[3] == rule and
              row[4] == "UTC", "the list shows the series, active, its rule and zone (%s)" % row)
        await b.click("#sr-table tr[data-series=\"%d\"] a" % sid)
        check(await self.visible("view-one-series"), "its name opens the series page")
        deadline, occ = time.monotonic() + 30, []
        while not occ and time.monotonic() < deadline:
            status, j = env.http("GET", "/v1/tasks?series=%d" % sid)
            occ = j["tasks"] if status == 200 else []
            await asyncio.sleep(0.5)
        if not check(len(occ) == 1, "the dispatcher wrote the first occurrence (%s)" % occ):
            return
        status, j = env.http("GET", "/v1/tasks?series=x")
        check(status == 400 and j["error"]["code"] == "bad_id",
              "GET /v1/tasks?series=x: 400 bad_id (%s %s)" % (status, j))
        link = await b.wait("(a => a && a.getAttribute('href'))"
                            "(document.querySelector('#os-tasks tbody a'))", 10)
        check(link == "#/task/%d" % occ[0]["id"],
              "the occurrence written links to its task page (%s)" % link)
        status, j = env.http("GET", "/v1/series/%d/next?count=10" % sid)
        want = [o["wall"] for o in j.get("next", [])]
        shown = await b.wait("(w => JSON.stringify(w) === %s && w)(Array.from("
                             "document.querySelectorAll('#os-next tbody tr'), "
                             "r => r.cells[0].textContent))"
                             % json.dumps(json.dumps(want, separators=(",", ":"))), 10)
        check(len(want) == 10 and shown == want,
              "the page shows the next 10 occurrences the API does (%s...)" % want[:2])
        await self.shot("series")
        await b.click("#os-pause")
        ok = await b.wait("document.getElementById('os-state').textContent === 'paused'", 10)
        status, j = env.http("GET", "/v1/series/%d" % sid)
        check(ok and status == 200 and j["state"] == "paused",
              "Pause: the page and the API say paused (%s, %s)" % (await b.text("#os-msg"),
                                                                   j.get("state")))
        check(await b.eval("document.getElementById('os-pause').disabled && "
                           "!document.getElementById('os-resume').disabled"),
              "while paused Pause is disabled and Resume enabled")
        await b.click("#os-end")
        await b.click("#os-end-confirm")
        ok = await b.wait("document.getElementById('os-state').textContent === 'ended'", 10)
        status, j = env.http("GET", "/v1/series/%d" % sid)
        check(ok and j.get("state") == "ended", "End… then Confirm: the API says ended")
        env.http("POST", "/v1/tasks/%d/cancel" % occ[0]["id"])

    # ---- 5. dead letters and redrive ------------------------------------------------

    async def dead_letters(self, tid):
        env, b = self.env, self.b
        if not check(env.wait_state(tid, "done", 60), "the failing task ends done"):
            return
        failed = int(env.task(tid, "failed")[0])
        check(0 < failed < N_FAIL, "MySQL: %d of %d failed for good" % (failed, N_FAIL))
        await b.goto(self.base + "#/task/%d" % tid)
        n = await b.wait("(n => n >= %d && n)(document.querySelectorAll('#dl-table tbody tr')"
                         ".length)" % min(failed, 50), 10)
        while await b.eval("!document.getElementById('dl-more').hidden"):
            await b.click("#dl-more")
            await asyncio.sleep(0.5)
        shown = await b.eval("Array.from(document.querySelectorAll('#dl-table tbody tr'))"
                             ".map(r => [r.dataset.uid, r.cells[1].textContent])")
        uids = {int(u) for u, _ in shown}
        check(n and len(uids) == failed and all(reason for _, reason in shown),
              "the page lists the %d dead letters, each with a reason (%d shown, e.g. %s)"
              % (failed, len(uids), shown[:1]))
        rows = env.sql("SELECT uid FROM push_delivery WHERE task_id = %d AND status = 'failed'"
                       % tid)
        check(uids == {int(r[0]) for r in rows}, "... the uids MySQL's push_delivery has failed")
        await b.eval("document.getElementById('dl-h').scrollIntoView()")
        await self.shot("dead-letters")
        h1 = await b.text("#task-h")
        imgs = await b.eval("document.querySelectorAll('main img').length")
        check(h1.endswith(DL_MARKUP) and imgs == 0,
              "markup in a task name is shown as text (%r, %d img)" % (h1, imgs))
        await b.click("#dl-redrive")
        msg = await b.wait("(t => t.startsWith('Redriven') && t)"
                           "(document.getElementById('dl-msg').textContent)", 15)
        check(msg and ("Redriven: %s dead letter" % format(failed, ",")) in msg,
              "Redrive: the page says %d redriven (%r, alert %r)"
              % (failed, msg, await b.text("#alert")))
        # The same uids fail again (the sink picks them by uid): done again,
        # the same failed count, not twice it.
        ok = env.wait_state(tid, "done", 60) and wait_failed(env, tid, failed)
        check(ok, "after the redrive: done again with %d failed (%s)"
              % (failed, env.task(tid, "state, failed")))
        status, j = env.http("GET", "/v1/tasks/%d/dead-letters?limit=1000" % tid)
        check(status == 200 and {d["uid"] for d in j["dead_letters"]} == uids,
              "the API lists the same %d dead letters again (%s)" % (failed, status))
        ok = await self.task_state("done", 15)
        check(ok and await self.outcome("failed") == failed,
              "the page shows done, %d failed" % failed)


def variant_profiles(env):
    """The profiles of VARIANT_UIDS (written before the browser starts, so
    the dispatcher's sync has them in Redis by step 9)."""
    env.sql("INSERT INTO push_user (uid, locale) VALUES %s" % ",".join(
        "(%d, '%s')" % (u, VARIANT_LOCALES[k % 3]) for k, u in enumerate(VARIANT_UIDS)
        if VARIANT_LOCALES[k % 3] is not None) + " ON DUPLICATE KEY UPDATE locale = VALUES(locale)")


def failing_task(env):
    """The dead letters' task, through the API; its id or None."""
    status, t = env.http("POST", "/v1/tasks", {
        "name": "console-dl-" + env.tag + DL_MARKUP, "channel": "flaky", "topic": env.topic,
        "due_at": now_ms() + 1000, "title": "t", "chunk_size": 100})
    if not check(status == 201, "failing task created (%s %s)" % (status, t)):
        return None
    status, j = env.http("POST", "/v1/tasks/%d/subscribers" % t["id"],
                         {"uids": list(range(30001, 30001 + N_FAIL))})
    check(status == 200, "its %d subscribers added (%s %s)" % (N_FAIL, status, j))
    return t["id"]


def wait_failed(env, tid, n, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if env.task(tid, "state, failed") == ["done", str(n)]:
            return True
        time.sleep(0.3)
    return False


async def browse(env, out):
    dl_task = failing_task(env)
    variant_profiles(env)
    b = await Browser.start(os.path.join(env.dir, "chromium.log"))
    try:
        run = Run(env, b, out)
        await run.login()
        await run.shot("login-list")
        await run.create_and_upload(env.record)
        if getattr(run, "form_task", None) is not None:
            await run.funnel(run.form_task)
        await run.hooks()
        await run.variants()
        paused = await run.pause_resume()
        if dl_task is not None:
            await run.dead_letters(dl_task)
        if paused is not None:
            await run.viewer(paused)
            await run.audit_page(paused)
        await b.goto(run.base + "#/?q=" + env.tag)
        n = await b.wait("(n => n === 3 && n)(document.querySelectorAll("
                         "'#list-table tbody tr[data-state=done]').length)", 15)
        check(n == 3, "the list shows the run's 3 tasks done")
        await run.shot("list")
        await run.series()
        check(not b.errors, "no JavaScript error or exception in the page (%s)" % b.errors[:3])
    finally:
        await b.close()


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    dispatcher, worker, sink, out = sys.argv[1:]
    if chromium_path() is None:
        print("SKIPPED: chromium is not installed (apt-get install chromium; "
              "deploy/local/packages.txt lists it)")
        return 77
    env = Env("console")
    os.makedirs(out, exist_ok=True)
    try:
        sink_port, slow_port, flaky_port = free_port(), free_port(), free_port()
        env.record = os.path.join(env.dir, "sink.record")
        env.start(sink_argv(sink, sink_port, env.record), "sink.log")
        env.slow_record = os.path.join(env.dir, "slow.record")
        env.start(sink_argv(sink, slow_port, env.slow_record,
                            extra=["--latency-ms", str(SLOW_MS)]), "slow.log")
        env.start(sink_argv(sink, flaky_port, os.path.join(env.dir, "flaky.record"),
                            extra=["--fail-permanent", str(FAIL_PCT)]), "flaky.log")
        retry = "{max_attempts: 1, backoff_ms: 100, max_backoff_ms: 100}"
        cfg = env.config({
            "webhook": {"url": "http://127.0.0.1:%d/push" % sink_port, "concurrency": 64,
                        "timeout_ms": 5000},
            "slow": {"url": "http://127.0.0.1:%d/push" % slow_port, "concurrency": 32,
                     "timeout_ms": 5000},
            "flaky": {"url": "http://127.0.0.1:%d/push" % flaky_port, "concurrency": 16,
                      "timeout_ms": 5000, "retry": retry}})
        if not env.create_topic():
            return 77
        env.start_daemons(dispatcher, worker, cfg)
        check_files(env)
        try:
            asyncio.run(asyncio.wait_for(browse(env, out), 240))
        except (BrowserError, asyncio.TimeoutError) as e:
            check(False, "the browser session: %s" % (e or "timed out"))
        print("screenshots in " + out)
    finally:
        env.drop_users(VARIANT_UIDS[0], VARIANT_UIDS[-1])
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
