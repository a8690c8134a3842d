"""test_aof_rewind: Redis comes back from an AOF older than the end of
dispatch (issue 20, item 1), made deterministic.

A task of 2,000 subscribers is chunked by one herald-dispatcher with no
worker running, so it reaches `dispatched` with its chunks pending.  Then
Redis is "rewound" the way a restart from an older AOF rewinds it: 500
recipients are back in subs, seq is back to 1, and the pending entries of
the later chunks are gone (their chunk sets stay, as do their Kafka
messages).  Checked:

  1. the sweeper sees a `dispatched` task with recipients left and no owner
     and hands it back (`task_redispatched`), a poller takes it over;
  2. the new owner's reconciliation sees seq behind the chunk numbers in
     push_chunk and raises it (`seq_behind`), so no chunk number is reused;
  3. with a worker started, every subscriber is pushed and the task ends
     `done` with every subscription accounted for.

Usage: test_aof_rewind.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, sink_uids, wait_until  # noqa: E402

N = 2000


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    dispatcher, worker, sink = sys.argv[1:]
    env = Env("aofrewind")
    try:
        if not env.create_topic():
            return 77
        channel, record = env.start_sink(sink)
        cfg = env.config({"webhook": channel})
        dsp = env.start([dispatcher, "-c", cfg], "dispatcher.log")
        check(env.wait_ready(env.dsp_port), "dispatcher serves")
        uids = list(range(7000001, 7000001 + N))
        t = env.insert_with_subs("rewind", "webhook", uids, due_s=2, chunk_size=250)
        ok = env.wait_state(t, "dispatched", 30)
        check(ok, "task dispatched with no worker running (%s)" % env.task(t))
        # seq also counts the last INCR, which found subs empty.
        seq = int(env.r.cmd("GET", env.key(t, "seq")))
        chunks = int(env.sql("SELECT MAX(seq) FROM push_chunk WHERE task_id = %d" % t)[0][0])
        check(chunks == N // 250 and seq == chunks + 1,
              "chunks 1..%d published (seq %d)" % (chunks, seq))

        # The rewind: chunks 3.. never happened as far as subs, seq and
        # pending know; their sets and messages are still there.
        # subs first: a sweep between the steps must not see an empty task.
        back = []
        for s in range(3, seq + 1):
            back += env.r.cmd("SMEMBERS", env.key(t, "chunk:%d" % s))
        back = back[:500]
        env.r.cmd("SADD", env.key(t, "subs"), *back)
        env.r.cmd("SET", env.key(t, "seq"), 1)
        env.r.cmd("HDEL", env.key(t, "pending"), *range(1, seq + 1))

        ok = wait_until(lambda: "event=task_redispatched task=%d " % t in env.log(dsp), 30, 0.3)
        check(ok, "the sweeper hands back a dispatched task with recipients left")
        ok = wait_until(lambda: "event=seq_behind task=%d seq=1 raised_to=%d" % (t, chunks)
                        in env.log(dsp), 30, 0.3)
        check(ok, "the new owner raises seq above the chunks it ever had")
        ok = env.wait_state(t, "dispatched", 30)
        new_seq = int(env.r.cmd("GET", env.key(t, "seq")) or 0)
        fresh = env.sql("SELECT COUNT(*) FROM push_chunk WHERE task_id = %d AND seq > %d "
                        "AND publishes = 1" % (t, chunks))[0][0]
        check(ok and new_seq == chunks + 3 and fresh == "2",
              "the 500 are chunked again as new chunks %d and %d (seq %d)"
              % (chunks + 1, chunks + 2, new_seq))

        env.start([worker, "-c", cfg], "worker.log")
        ok = env.wait_state(t, ("done", "failed"), 90)
        row = env.task(t, "state, sent, unaccounted, last_error")
        got = sink_uids(record, uids)
        missing = set(uids) - got
        check(ok and row[0] == "done" and row[2] == "0",
              "the task ends done, every subscription accounted for (%s)" % row)
        check(not missing, "every subscriber pushed (%d missing)" % len(missing))
    finally:
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
