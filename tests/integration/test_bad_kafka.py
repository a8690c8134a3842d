#!/usr/bin/env python3
"""Bad Kafka messages on the worker's topic (garbage bytes, 1 MB, version 2,
negative and absurd counts, an unknown task, a duplicate of a finished
chunk) are skipped and counted; the real chunks behind them on the same
partition (the topic has one) are still processed, and the duplicate pushes
nobody again.  Raw messages are produced with kcat.

usage: test_bad_kafka.py HERALD_DISPATCHER HERALD_WORKER   (exit 77 without
HERALD_TEST_CONFIG or kcat)"""
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, metric, wait_until  # noqa: E402
from misbehaving_provider import Provider  # noqa: E402


def chunk(task, seq, count, v=1):
    now = int(time.time() * 1000)
    return json.dumps({"v": v, "task": task, "seq": seq, "count": count, "due_ms": now,
                       "published_ms": now}, separators=(",", ":")).encode()


DECODE_BAD = [
    b"\x00\xff\xfe garbage \x01\n\x02",
    b"{" + b" " * (1000 * 1000) + b"}",
    chunk(1, 1, 5, v=2),
    chunk(1, 1, -5),
    chunk(1, 1, 10 ** 9),
]


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    env = Env("badkafka")
    provider = Provider()
    try:
        cfg = env.config({"ok": {"url": provider.url("ok"), "timeout_ms": 3000}})
        if not env.create_topic():
            return 77
        dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
        env.kcat_produce(DECODE_BAD, key="1:1")
        env.kcat_produce([chunk(1 << 40, 1, 3)], key="%d:1" % (1 << 40))
        first = env.insert_with_subs("first", "ok", range(1, 11), due_s=1)
        check(env.wait_state(first, "done", 30), "the real chunk behind them is processed (%s)"
              % env.task(first))
        text = env.metrics(env.wk_port)
        dec = metric(text, "herald_bad_messages_total", '{reason="decode"}')
        unk = metric(text, "herald_bad_messages_total", '{reason="unknown_task"}')
        check(dec == len(DECODE_BAD), "decode failures counted: %s" % dec)
        check(unk == 1, "unknown task counted: %s" % unk)
        log = env.log(wk)
        check(log.count("event=bad_message") == len(DECODE_BAD)
              and log.count("event=unknown_task") == 1, "and logged once each")
        # a duplicate of the finished chunk, then a second real task behind it
        env.kcat_produce([chunk(first, 1, 10)], key="%d:1" % first)
        second = env.insert_with_subs("second", "ok", range(11, 21), due_s=1)
        check(env.wait_state(second, "done", 30), "a later chunk is still processed")
        pushed = [r["uid"] for r in provider.records]
        check(sorted(pushed) == list(range(1, 21)),
              "every uid pushed exactly once, the duplicate pushed nobody (%d pushes)"
              % len(pushed))
        check(env.task(first)[1] == "10" and env.task(second)[1] == "10", "sent 10 and 10")
        check(wait_until(lambda: env.log(wk).count("event=chunk_done") >= 3, 5)
              or "chunk_duplicate" in env.log(wk), "the duplicate was taken and closed empty")
        check(wk.poll() is None and dsp.poll() is None, "daemons still running")
        check(env.stop(wk) == 0 and env.stop(dsp) == 0, "both stop cleanly")
    finally:
        provider.stop()
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
