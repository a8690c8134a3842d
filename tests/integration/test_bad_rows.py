#!/usr/bin/env python3
"""Bad task rows: every column value the dispatcher validates makes the task
failed with a readable last_error; odd but valid rows (60 KB title and body,
templates naming missing fields, control characters, template text inside
payload values and names, invalid UTF-8 in a user attribute) are delivered
and rendered as documented; the daemons keep running and a good task beside
them is delivered in full.

usage: test_bad_rows.py HERALD_DISPATCHER HERALD_WORKER   (exit 77 without
HERALD_TEST_CONFIG)"""
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish  # noqa: E402
from misbehaving_provider import Provider  # noqa: E402

# (name, columns as SQL expressions, text last_error must contain)
INVALID = [
    ("unknown-channel", {"channel": "'nope'"}, 'unknown channel "nope"'),
    ("chunk0", {"chunk_size": 0}, "chunk_size 0 is outside"),
    ("chunk-big", {"chunk_size": 100001}, "chunk_size 100001 is outside"),
    ("due-null", {"due_at": "NULL"}, "due_at is NULL"),
    ("window0", {"throttle_limit": 5, "throttle_window_s": 0}, "throttle_window_s 0"),
    ("window-big", {"throttle_limit": 5, "throttle_window_s": 2678401},
     "throttle_window_s 2678401"),
    ("rate-neg", {"rate_limit": -1}, "rate_limit -1 is negative"),
    ("payload-text", {"payload": "'not json'"}, "payload is not a JSON object"),
    ("payload-array", {"payload": "'[1,2]'"}, "payload is not a JSON object"),
    ("title-syntax", {"title": "'{{uid'"}, "title template"),
    ("body-syntax", {"body": "'x {{payload.'"}, "body template"),
    # pacing (docs/scheduling.md)
    ("finish-before-due", {"finish_by": "UTC_TIMESTAMP(3)"}, "finish_by must be after due_at"),
]
CTRL_TITLE = "a\x01b\tc\nd\"q\"\\e"


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    env = Env("badrows")
    provider = Provider()
    try:
        cfg = env.config({"ok": {"url": provider.url("ok"), "timeout_ms": 3000}})
        if not env.create_topic():
            return 77
        dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        err = env.sql("INSERT INTO push_task (name, topic, channel, title) VALUES "
                      "('utf8', '%s', 'ok', UNHEX('41C328FF42'))" % env.topic, strict=False)
        check(isinstance(err, str) and "Incorrect string value" in err,
              "MySQL (strict mode) refuses invalid UTF-8 in title (%s)" % str(err).strip())
        bad = {}
        for i, (name, cols, _) in enumerate(INVALID):
            cols = dict(cols)
            channel = cols.pop("channel", "'ok'").strip("'")
            bad[name] = env.insert_with_subs(name, channel, [1000 + i], **cols)
        good = env.insert_with_subs("good", "ok", range(1, 21),
                                    title="'Hi {{user.name}}'", body="'{{payload.item}}'",
                                    payload="'{\"item\": \"tea\"}'")
        env.r.cmd("HSET", env.prefix + "user:1", "name", "Ada")
        longt = env.insert_with_subs("long", "ok", [101, 102], title="REPEAT('t', 60000)",
                                     body="REPEAT('b', 60000)")
        missing = env.insert_with_subs("missing", "ok", [201],
                                       title="'[{{payload.nope}}][{{user.nope}}]'",
                                       body="'[{{task.nope}}]'", payload="'{}'")
        ctrl = env.insert_with_subs("ctrl", "ok", [301],
                                    title="CONCAT('a', CHAR(1), 'b', CHAR(9), 'c', CHAR(10), "
                                          "'d\"q\"', CHAR(92), 'e')")
        inj = env.insert_with_subs("{{uid}}", "ok", [401], title="'{{payload.x}}'",
                                   body="'{{task.name}}'", payload="'{\"x\": \"{{uid}}\"}'")
        env.r.cmd("HSET", env.prefix + "user:501", "name", b"\xc3\x28\xff")
        utf = env.insert_with_subs("bad-utf8-user", "ok", [501], title="'{{user.name}}'")

        for name, cols, want in INVALID:
            t = bad[name]
            ok = env.wait_state(t, "failed", 20)
            row = env.task(t)
            check(ok and want in (row[3] or ""),
                  "%s -> failed, last_error: %s" % (name, row[3]))
        for t in (good, longt, missing, ctrl, inj, utf):
            check(env.wait_state(t, "done", 30), "task %d done (%s)" % (t, env.task(t)))
        check(env.task(good)[1] == "20" and set(env.deliveries(good)) == set(range(1, 21)),
              "the good task beside them: 20 sent")
        recs = {r["uid"]: r for r in provider.records}
        r = recs.get(101)
        check(r and r["json"] and len(r["json"]["title"]) == 60000
              and len(r["json"]["body"]) == 60000, "60 KB title and body delivered whole")
        r = recs.get(201)
        check(r and r["json"] and r["json"]["title"] == "[][]" and r["json"]["body"] == "[]",
              "missing fields render empty (%s)" % (r and r["json"]))
        check(env.task(missing)[1] == "1", "and the push is counted as sent")
        r = recs.get(301)
        check(r and r["json"] and r["json"]["title"] == CTRL_TITLE,
              "control characters arrive JSON-escaped and intact (%r)"
              % (r and r["json"] and r["json"]["title"]))
        r = recs.get(401)
        check(r and r["json"] and r["json"]["title"] == "{{uid}}"
              and r["json"]["body"] == "{{uid}}",
              "template text in a payload value or the name is not rendered again (%s)"
              % (r and r["json"]))
        r = recs.get(501)
        check(r is not None and env.deliveries(utf).get(501) in ("sent", "failed"),
              "invalid UTF-8 in a user attribute: pushed and accounted for")
        check(r is not None and r["json"] is not None,
              "... and the body is still valid UTF-8 JSON (%r)" % (r and r["body"][:80]))
        check(dsp.poll() is None and wk.poll() is None, "daemons still running")
        check(env.stop(wk) == 0 and env.stop(dsp) == 0, "both stop cleanly")
    finally:
        provider.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
