#!/usr/bin/env python3
"""test_abwinner: an A/B test's winner step (issue 32 item 3, docs/api.md
"Test then winner") on the real stack, with one herald-dispatcher and
herald-worker and a webhook receiver that records every push:

  1. a task of 400 recipients with arms A 50 %, B 50 % and
     "ab": {"sample_pct": 25, "wait_s": 10, "metric": "open"}: only the
     sample (the recipients the test computes with the same hash,
     SplitMix64 of (~task, uid) % 10000 < 2500) is pushed, each with its
     arm; the task's view says "sampling" then "waiting" with a decide_at,
     and nobody outside the sample is pushed meanwhile;
  2. opens of half of arm B's sample through the client-token API
     (POST /v1/users/{uid}/events), none of A's; after the wait the view
     says winner B by open with the per-arm figures (B's opens counted per
     arm), every recipient outside the sample got B's content, exactly once
     each, the sample its arm's; every recipient is in exactly one outcome
     (400 delivery rows, sent 400, the counts per variant adding up to 400),
     the task done; heraldctl status prints the winner;
  3. a dispatcher killed (SIGKILL) while the step waits, a new one
     started: it takes the task over, keeps the sample's end as written
     (ab_sampled_at once), and with nothing opened or clicked the pick
     falls back to the delivered rate, all equal: the first arm, A (arms
     A 40 %, B 40 %, default 20 % of the sample); the rest got A's content
     once each, every recipient in one outcome;
  4. heraldctl create --ab writes the columns (wait_s and metric defaulted
     as documented), refuses a winner step without arms and bad JSON;
  5. bad requests 400 JSON: sample_pct 0, 100 and not an integer, a bad
     metric, a winner step without arms (none, or locale variants), with
     local_time, an unknown field in ab.

usage: test_abwinner.py HERALD_DISPATCHER HERALD_WORKER HERALDCTL
(exit 77 without HERALD_TEST_CONFIG)"""
import json
import os
import random
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, Receiver, check, finish, wait_until  # noqa: E402
from test_abtest import MASK, bucket, iso  # noqa: E402  (hr_variant_bucket, the same)

N = 400
PCT = 25
WAIT_S = 10  # the checks while it waits take a few seconds under load
ARMS = [{"name": "A", "split": 50, "title": "A {{uid}}"},
        {"name": "B", "split": 50, "title": "B {{uid}}"}]


def sampled(task, uid):
    """hr_variant_sampled: the same hash of (~task, uid)."""
    return bucket(MASK ^ task, uid) < 100 * PCT


def arm(task, uid):
    return "A" if bucket(task, uid) < 5000 else "B"


def pushes(rx):
    """{uid: [title, ...]} of every push received."""
    got = {}
    for _, _, body, _ in rx.by_path("ab"):
        doc = json.loads(body)
        got.setdefault(int(doc["uid"]), []).append(doc["title"])
    return got


def view(env, task):
    return env.http("GET", "/v1/tasks/%d" % task)[1]


def test_winner(env, rx, ctl, cfg, uids):
    st, body = env.http("POST", "/v1/tasks", {
        "name": "ab-winner", "channel": "ab", "topic": env.topic,
        "due_at": iso(time.time() + 3), "title": "default {{uid}}", "body": "b",
        "variants": ARMS, "ab": {"sample_pct": PCT, "wait_s": WAIT_S, "metric": "open"}})
    ab = body.get("ab") or {}
    check(st == 201 and ab.get("sample_pct") == PCT and ab.get("metric") == "open" and
          ab.get("phase") == "sampling" and ab.get("winner") is None,
          "POST /v1/tasks with arms and ab: 201, phase sampling (%s %s)" % (st, body))
    if st != 201:
        return
    task = body["id"]
    st, _ = env.http("POST", "/v1/tasks/%d/subscribers" % task, {"uids": uids})
    check(st in (200, 201), "subscribers added (%s)" % st)
    sample = [u for u in uids if sampled(task, u)]
    rest = [u for u in uids if not sampled(task, u)]
    check(60 <= len(sample) <= 140, "the sample is about %d %% (%d of %d)"
          % (PCT, len(sample), N))
    check(wait_until(lambda: len(pushes(rx)) >= len(sample), 60, 0.2),
          "the sample is pushed (%d of %d)" % (len(pushes(rx)), len(sample)))
    got = pushes(rx)
    check(set(got) == set(sample) and
          all(ts == ["%s %d" % (arm(task, u), u)] for u, ts in got.items()),
          "only the sample is pushed, each once with its arm (%d pushed, %d outside the sample)"
          % (len(got), len(set(got) - set(sample))))
    # The app opens half of B's sample, none of A's.
    opened = [u for u in sample if arm(task, u) == "B"][::2]
    bad = []
    for u in opened:
        st, r = env.http("POST", "/v1/users/%d/events" % u, {"task": task, "type": "opened"})
        if st != 200 or not r.get("counted"):
            bad.append((u, st, r))
    check(opened and not bad, "%d opens of arm B counted (%s)" % (len(opened), bad[:3]))
    check(wait_until(lambda: view(env, task).get("ab", {}).get("phase") == "waiting", 20, 0.2),
          "the view says waiting (%s)" % view(env, task).get("ab"))
    v = view(env, task)
    check(v["ab"].get("decide_at") is not None and
          v.get("variant_counts", {}).get("B", {}).get("opened") == len(opened),
          "waiting until decide_at %s, B's opens counted per arm (%s)"
          % (v["ab"].get("decide_at"), v.get("variant_counts")))
    st, r = env.http("GET", "/v1/tasks/%d/render?uid=%d" % (task, rest[0]))
    check(st == 200 and r.get("held") is True and r.get("variant") is None and
          r.get("title") is None, "the render of a held uid says held (%s %s)" % (st, r))
    # The pull does not list a held uid's reminder (it would be empty) nor
    # acknowledge it: the push brings the winner's content (checked below).
    st, r = env.http("GET", "/v1/users/%d/reminders?ack=1" % rest[0])
    check(st == 200 and task not in [x.get("task_id") for x in r.get("reminders", [])],
          "the pull of a held uid leaves the task out before the pick (%s %s)" % (st, r))
    time.sleep(2)
    check(len(pushes(rx)) == len(sample), "nobody outside the sample pushed while waiting (%d)"
          % len(pushes(rx)))
    check(env.wait_state(task, "done", WAIT_S + 60), "done (%s)" % (env.task(task),))
    v = view(env, task)
    ab = v.get("ab") or {}
    print("the task's ab view: %s" % json.dumps(ab))
    figures = (ab.get("figures") or {}).get("arms", {})
    check(ab.get("winner") == "B" and ab.get("phase") == "done" and
          figures.get("B", {}).get("opened") == len(opened) and
          figures.get("A", {}).get("opened") == 0 and ab.get("decided_at") is not None,
          "winner B by open, with the per-arm figures (%s)" % ab)
    st, r = env.http("GET", "/v1/tasks/%d/render?uid=%d" % (task, rest[0]))
    check(st == 200 and r.get("variant") == "B" and r.get("title") == "B %d" % rest[0],
          "the render of a uid of the rest names the winner (%s %s)" % (st, r))
    got = pushes(rx)
    wrong = [(u, got.get(u)) for u in rest if got.get(u) != ["B %d" % u]]
    check(not wrong, "every recipient outside the sample got B's content once (%d wrong: %s)"
          % (len(wrong), wrong[:3]))
    wrong = [(u, got.get(u)) for u in sample if got.get(u) != ["%s %d" % (arm(task, u), u)]]
    check(not wrong, "the sample kept its arms (%s)" % wrong[:3])
    # `done` can come from the sweeper before the reporter's last delivery
    # rows: they are waited for, bounded.
    dl = {}
    wait_until(lambda: dl.update(env.deliveries(task)) or len(dl) == N, 30, 0.3)
    row = env.task(task, "state, sent, failed, total")
    counts = {}

    def counted():
        counts.clear()
        counts.update(view(env, task).get("variant_counts") or {})
        return sum(c.get("sent", 0) for c in counts.values()) == N
    check(wait_until(counted, 20, 0.3) and set(dl) == set(uids) and
          set(dl.values()) == {"sent"} and [str(x) for x in row[1:]] == [str(N), "0", str(N)],
          "every recipient in exactly one outcome: %d delivery rows, task %s, counts %s"
          % (len(dl), row, counts))
    check(counts.get("B", {}).get("sent") == len(rest) + len([u for u in sample
                                                               if arm(task, u) == "B"]),
          "B's sent count is its sample and the rest (%s)" % counts)
    out = subprocess.run([ctl, "-c", cfg, "status", str(task)], capture_output=True, text=True,
                         timeout=60)
    line = [x for x in out.stdout.splitlines() if x.strip().startswith("ab ")]
    check(out.returncode == 0 and line and "phase done" in line[0] and
          "winner B by open" in line[0], "heraldctl status shows the winner (%s)" % line)


def test_takeover(env, rx, argv, cfg, dsp, uids):
    arms = [{"name": "A", "split": 40, "title": "A {{uid}}"},
            {"name": "B", "split": 40, "title": "B {{uid}}"}]
    st, body = env.http("POST", "/v1/tasks", {
        "name": "ab-takeover", "channel": "ab2", "topic": env.topic,
        "due_at": iso(time.time() + 2), "title": "default {{uid}}", "body": "b",
        "variants": arms, "ab": {"sample_pct": PCT, "wait_s": 5, "metric": "click"}})
    check(st == 201, "takeover: task created (%s %s)" % (st, body))
    if st != 201:
        return dsp
    task = body["id"]
    st, _ = env.http("POST", "/v1/tasks/%d/subscribers" % task, {"uids": uids})
    sample = [u for u in uids if sampled(task, u)]
    check(wait_until(lambda: view(env, task).get("ab", {}).get("phase") == "waiting", 60, 0.2),
          "takeover: the sample is over, waiting (%s)" % view(env, task).get("ab"))
    before = view(env, task)["ab"]["sampled_at"]
    dsp.kill()
    dsp.wait()
    dsp = env.start([argv[1], "-c", cfg], "dispatcher2.log")
    check(env.wait_state(task, "done", 90), "takeover: done under the new dispatcher (%s)"
          % (env.task(task, "state, claimed_by, sent, last_error"),))
    ab = view(env, task).get("ab") or {}
    print("the taken-over task's ab view: %s" % json.dumps(ab))
    check(ab.get("sampled_at") == before and ab.get("winner") == "A",
          "takeover: the sample's end kept (%s, was %s), no clicks: winner A by the fallback "
          "(%s)" % (ab.get("sampled_at"), before, ab.get("figures")))
    got = {}
    for _, _, b, _ in rx.by_path("ab2"):
        doc = json.loads(b)
        got.setdefault(int(doc["uid"]), []).append(doc["title"])
    wrong = [(u, got.get(u)) for u in uids if u not in sample and got.get(u) != ["A %d" % u]]
    dl = {}
    wait_until(lambda: dl.update(env.deliveries(task)) or len(dl) == len(uids), 30, 0.3)
    check(not wrong and set(got) == set(uids) and set(dl) == set(uids),
          "takeover: the rest got A's content once each, every recipient delivered (%d wrong: "
          "%s; %d delivery rows)" % (len(wrong), wrong[:3], len(dl)))
    return dsp


def test_ctl(env, ctl, cfg):
    path = os.path.join(env.dir, "arms.json")
    with open(path, "w") as f:
        json.dump(ARMS, f)

    def run(*args):
        return subprocess.run([ctl, "-c", cfg, "create", "--name", "ab-ctl", "--channel", "ab",
                               "--topic", env.topic, "--due-in", "1h", "--title", "t",
                               "--quiet"] + list(args), capture_output=True, text=True,
                              timeout=60)
    out = run("--variants", path, "--ab", '{"sample_pct": 10, "metric": "delivered"}')
    task = int(out.stdout.strip() or 0) if out.returncode == 0 else 0
    row = env.task(task, "ab_sample_pct, ab_wait_s, ab_metric, ab_winner") if task else None
    check(row is not None and [str(x) for x in row] == ["10", "3600", "delivered", "NULL"],
          "heraldctl create --ab writes the columns (%s %s %s)" % (out.returncode, row,
                                                                  out.stderr.strip()))
    out = run("--ab", '{"sample_pct": 10}')
    check(out.returncode != 0 and "needs A/B arms" in out.stderr,
          "heraldctl create --ab without arms refused (%s)" % out.stderr.strip())
    out = run("--variants", path, "--ab", "ten")
    check(out.returncode != 0 and "--ab: not JSON" in out.stderr,
          "heraldctl create --ab with bad JSON refused (%s)" % out.stderr.strip())
    if task:
        env.sql("DELETE FROM push_task_variant WHERE task_id = %d" % task)
        env.sql("DELETE FROM push_task WHERE id = %d" % task)


def test_bad(env):
    base = {"name": "ab-bad", "channel": "ab", "topic": env.topic,
            "due_at": iso(time.time() + 3600), "title": "t", "body": "b", "variants": ARMS}
    cases = [
        ("sample_pct 0", {"ab": {"sample_pct": 0}}, "1..99"),
        ("sample_pct 100", {"ab": {"sample_pct": 100}}, "1..99"),
        ("sample_pct not an integer", {"ab": {"sample_pct": "20"}}, "an integer"),
        ("a bad metric", {"ab": {"sample_pct": 20, "metric": "reply"}},
         "click, open or delivered"),
        ("an unknown field", {"ab": {"sample_pct": 20, "after": 5}}, "unknown field"),
        ("a negative wait", {"ab": {"sample_pct": 20, "wait_s": -1}}, "wait_s"),
        ("no arms", {"ab": {"sample_pct": 20}, "variants": None}, "needs A/B arms"),
        ("locale variants", {"ab": {"sample_pct": 20}, "variants": [{"locale": "de"}]},
         "needs A/B arms"),
        ("local_time", {"ab": {"sample_pct": 20}, "local_time": True}, "local time"),
    ]
    before = env.sql("SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic)
    for what, extra, words in cases:
        doc = dict(base, **extra)
        doc = {k: v for k, v in doc.items() if v is not None}
        st, body = env.http("POST", "/v1/tasks", doc)
        err = body.get("error", {}) if isinstance(body, dict) else {}
        check(st == 400 and err.get("code") == "invalid_variant" and
              words in err.get("message", ""), "%s: 400 (%s %s)" % (what, st, err))
    check(env.sql("SELECT COUNT(*) FROM push_task WHERE topic = '%s'" % env.topic) == before,
          "nothing written by the refused requests")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    env = Env("abwinner")
    rx = Receiver(lambda path, body: (200, b"{}"))
    base = 9_000_000_000 + random.randrange(1 << 30) * 1000
    try:
        channels = {"ab": {"url": rx.url("ab"), "concurrency": 8},
                    "ab2": {"url": rx.url("ab2"), "concurrency": 8}}
        cfg = env.config(channels)
        # A dead dispatcher's tasks are taken over after its lease.
        with open(cfg) as f:
            text = f.read()
        with open(cfg, "w") as f:
            f.write(text.replace("dispatcher:\n", "dispatcher:\n  lease_s: 3\n", 1))
        if not env.create_topic():
            return 77
        dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        test_bad(env)
        test_ctl(env, sys.argv[3], cfg)
        test_winner(env, rx, sys.argv[3], cfg, [base + k for k in range(N)])
        dsp = test_takeover(env, rx, sys.argv, cfg, dsp, [base + N + k for k in range(200)])
        check(env.stop(wk) == 0, "worker stops cleanly")
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        rx.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
