"""test_retire: key retirement gives each finished task's keys the retention
expiry once (issue 33; dispatcher/dsp_sweep.c, dsp_sweep_retire), on the real
stack with one herald-dispatcher, one herald-worker and herald-sink.  All
tasks are raw SQL rows.

  1. a task ended by the worker's report gets its keys' expiry from the
     dispatcher's retirement pass, not before its finish is
     2 x mysql.timeout_s old (the pass's margin for commits behind it);
  2. the pass does not give it again: a key made persistent after that
     stays so over many sweeps (the pass used to start over after a short
     page and give every task finished within the day its expiry again);
  3. a task finished later is still read: the cursor moves on.

Usage: test_retire.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, wait_until  # noqa: E402

TIMEOUT_S = 2     # mysql.timeout_s: the pass reads a finish 4 s old
SWEEP_S = 1       # badinput_env's sweep_interval_ms
RETENTION_MS = 7 * 86400 * 1000


def run_task(env, name, first_uid):
    """A task of 3 recipients due in a second, run to done; its id."""
    task = env.insert_with_subs(name, "webhook", range(first_uid, first_uid + 3), due_s=1)
    check(env.wait_state(task, "done", 30), "task %s done" % name)
    return task


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    dispatcher, worker, sink = sys.argv[1:]
    env = Env("retire")
    try:
        if not env.create_topic():
            return 77
        channel, _ = env.start_sink(sink)
        cfg = env.config({"webhook": channel})
        with open(cfg) as f:
            text = f.read()
        with open(cfg, "w") as f:
            f.write(text.replace("database: ", "timeout_s: %d, database: " % TIMEOUT_S, 1))
        env.start_daemons(dispatcher, worker, cfg)

        # 1. the expiry comes, after the margin.
        first = run_task(env, "retire-first", 9600001)
        stats = env.key(first, "stats")
        check(wait_until(lambda: env.r.cmd("PTTL", stats) > 0, 30, 0.2),
              "the finished task's stats key gets an expiry")
        age = env.sql("SELECT TIMESTAMPDIFF(MICROSECOND, finished_at, UTC_TIMESTAMP(6)) "
                      "FROM push_task WHERE id = %d" % first)[0][0]
        check(int(age) >= 2 * TIMEOUT_S * 1000000,
              "given once the finish was %d s old (age %s us)" % (2 * TIMEOUT_S, age))
        check(env.r.cmd("PTTL", env.key(first, "ctl")) > RETENTION_MS - 60000,
              "every per-task key of it gets the retention")

        # 2. once: a key made persistent stays so over many sweeps.
        check(env.r.cmd("PERSIST", stats) == 1, "stats made persistent")
        time.sleep(2 * TIMEOUT_S + 6 * SWEEP_S)
        check(env.r.cmd("PTTL", stats) == -1,
              "the pass did not give the same finish its expiry again")

        # 3. a later finish is read: the cursor moved on, not stuck.
        second = run_task(env, "retire-second", 9600101)
        check(wait_until(lambda: env.r.cmd("PTTL", env.key(second, "stats")) > 0, 30, 0.2),
              "a task finished later gets its expiry too")
        check(env.r.cmd("PTTL", stats) == -1, "and the first one's is still not given again")
    finally:
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
