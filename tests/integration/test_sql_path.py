"""test_sql_path: nothing is silently lost on the admin's SQL path (issue 12).

Against the real stack, with one herald-dispatcher, one herald-worker and
herald-sink (delivery log on):

  1. raw SQL: a task row, then 20,000 subscriptions INSERTed in batches in
     the seconds up to its due time (the last one within ~0.1 s of it),
     plus a raw DELETE of earlier rows and a uid only Redis holds, so that
     comparing counts would hide new rows: every subscription is pushed and
     the task ends `done`.
  2. an INSERT after the claim fails with the guard trigger's error naming
     the task and its state, and stores nothing.
  3. heraldctl import racing a claim (the claim holds the task row while
     the import's first batch waits for it): the import stops, says which
     ids were refused, and MySQL has none of them.
  4. a task whose Redis set loses members after the claim does not end
     `done`: it is `failed` with unaccounted = the gap, a last_error that
     says so, and herald_recipients_unaccounted_total counts the gap; then
     `heraldctl recover` pushes the lost ones and the task ends `done`.
  5. an admin's transaction inserting subscriptions is still open at the
     due time: the dispatcher waits at most a second for the task row at a
     time (a task due beside it is pushed meanwhile), and claims the task
     once the transaction committed.

Usage: test_sql_path.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK HERALDCTL"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, metric, sink_uids, wait_until  # noqa: E402

N = 20000
BATCH = 2000


def test_raw_sql_before_due(env, record):
    due_s = 6
    t = env.insert_task("raw-sql", "webhook", due="UTC_TIMESTAMP(3) + INTERVAL %d SECOND" % due_s)
    due = float(env.sql("SELECT UNIX_TIMESTAMP(due_at) FROM push_task WHERE id = %d" % t)[0][0])
    uid = 1
    batches = N // BATCH
    # Spread the batches over the last ~4 s before due, the last right at it.
    for b in range(batches):
        at = due - 4.0 + 4.0 * (b + 1) / batches - 0.1
        time.sleep(max(0.0, at - time.time()))
        values = ",".join("(%d,%d)" % (t, u) for u in range(uid, uid + BATCH))
        err = env.sql("INSERT INTO push_subscription (task_id, uid) VALUES %s" % values,
                      strict=False)
        if isinstance(err, str):
            # Only the batch that lost the race with the claim may be refused.
            check("only be added while it is scheduled" in err and b == batches - 1,
                  "a refused batch is the last one and says why (%s)" % err.strip())
            break
        uid += BATCH
        if b == 2:
            # Counts would now agree while new rows are missing from Redis.
            env.sql("DELETE FROM push_subscription WHERE task_id = %d AND uid <= 50" % t)
            env.r.cmd("SADD", env.key(t, "subs"), 900000001)
    stored = int(env.sql("SELECT COUNT(*) FROM push_subscription WHERE task_id = %d" % t)[0][0])
    ok = env.wait_state(t, ("done", "failed"), 90)
    row = env.task(t, "state, sent, failed, unaccounted, last_error")
    check(ok and row[0] == "done", "raw-SQL task ends done (%s)" % row)
    want = {int(r[0]) for r in env.sql("SELECT uid FROM push_subscription WHERE task_id = %d"
                                       % t)}
    got = sink_uids(record, want)
    missing = want - got
    check(len(want) == stored and not missing,
          "every one of the %d stored subscriptions was pushed (%d missing, e.g. %s)"
          % (stored, len(missing), sorted(missing)[:5]))
    check(int(row[1]) >= stored and row[3] == "0",
          "sent %s covers the %d subscriptions, unaccounted %s" % (row[1], stored, row[3]))
    return t


def test_insert_after_claim(env, t):
    before = env.sql("SELECT COUNT(*) FROM push_subscription WHERE task_id = %d" % t)[0][0]
    err = env.sql("INSERT INTO push_subscription (task_id, uid) VALUES (%d, 990000001)" % t,
                  strict=False)
    check(isinstance(err, str) and ("push_task %d is done" % t) in err
          and "only be added while it is scheduled" in err,
          "an INSERT after the claim fails with the trigger's error (%s)" % str(err).strip())
    after = env.sql("SELECT COUNT(*) FROM push_subscription WHERE task_id = %d" % t)[0][0]
    check(before == after, "... and stores nothing (%s -> %s)" % (before, after))


def test_import_racing_claim(env, ctl, cfg):
    t = env.insert_task("import-race", "webhook", due="UTC_TIMESTAMP(3) + INTERVAL 1 DAY")
    path = os.path.join(env.dir, "ids.txt")
    with open(path, "w") as f:
        f.write("".join("%d\n" % u for u in range(1, 25001)))
    # The "claim": holds the task row for 2 s, then takes the task.
    claim = subprocess.Popen(
        ["mariadb", "-h", env.my["host"], "-P", str(env.my["port"]), "-u", env.my["user"],
         "-p" + env.my["password"], env.my["database"], "-N", "-B", "-e",
         "BEGIN; SELECT id FROM push_task WHERE id = %d FOR UPDATE; SELECT SLEEP(2); "
         "UPDATE push_task SET state = 'dispatching', claimed_by = 'test', "
         "started_at = UTC_TIMESTAMP(3) WHERE id = %d; COMMIT;" % (t, t)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # The import starts once the claim holds the row (its session sleeps
    # with the lock), not after a fixed 0.5 s: on a loaded machine the
    # client took longer to start, and the import's first batch of 10,000
    # went in before the lock (CI, 2026-12-03).
    check(wait_until(lambda: int(env.sql(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
        "WHERE INFO LIKE 'SELECT SLEEP(2)%'")[0][0]) > 0, 10, 0.05),
        "the racing claim holds the task row")
    out = subprocess.run([ctl, "-c", cfg, "import", str(t), path], capture_output=True,
                         text=True, timeout=60)
    claim.wait(timeout=30)
    stored = int(env.sql("SELECT COUNT(*) FROM push_subscription WHERE task_id = %d" % t)[0][0])
    check(out.returncode == 1 and "refused (ids #1 to #25000 of the input" in out.stderr
          and "is dispatching" in out.stderr,
          "import racing the claim stops and names the refused ids (rc %d: %s)"
          % (out.returncode, out.stderr.strip()))
    check(stored == 0, "... and MySQL holds none of them (%d)" % stored)
    env.sql("UPDATE push_task SET state = 'cancelled', finished_at = UTC_TIMESTAMP(3) "
            "WHERE id = %d" % t)


def test_lost_after_claim(env, dsp_port, wk_port, ctl, cfg, record):
    uids = range(500001, 503001)
    # 500 a second: the set is chunked over 6 s, so members can go missing
    # after the claim and before their chunk.
    t = env.insert_with_subs("lost-after-claim", "webhook", uids, due_s=2, rate_limit=500,
                             chunk_size=500)
    ok = env.wait_state(t, ("dispatching", "dispatched", "done"), 30)
    check(ok, "lost-after-claim task claimed")
    wait_until(lambda: env.r.cmd("EXISTS", env.key(t, "seq")) == 1, 10, 0.05)
    gone = env.r.cmd("SPOP", env.key(t, "subs"), 100)
    check(len(gone) == 100, "100 members taken out of the set after the claim (%d)" % len(gone))
    ok = env.wait_state(t, ("done", "failed"), 60)
    row = env.task(t, "state, sent, unaccounted, last_error")
    check(ok and row[0] == "failed" and row[2] == "100"
          and "100 of 3000 subscriptions have no outcome" in row[3],
          "the gap is counted, the task is not done (%s)" % row)
    counted = wait_until(
        lambda: (metric(env.metrics(dsp_port), "herald_recipients_unaccounted_total") or 0)
        + (metric(env.metrics(wk_port), "herald_recipients_unaccounted_total") or 0) == 100,
        10, 0.2)
    check(counted, "herald_recipients_unaccounted_total counts the 100")
    # What the last_error says to do: recover pushes the 100 (the delivery
    # log tells them from the delivered), and the task ends done.
    out = subprocess.run([ctl, "-c", cfg, "recover", str(t)], capture_output=True, text=True,
                         timeout=60)
    check(out.returncode == 0, "heraldctl recover of the failed task (%s%s)"
          % (out.stdout.strip(), out.stderr.strip()))
    ok = env.wait_state(t, ("done", "failed"), 60)
    row = env.task(t, "state, sent, unaccounted")
    got = sink_uids(record, (int(u) for u in gone))
    check(ok and row[0] == "done" and row[2] == "0" and all(int(u) in got for u in gone),
          "after recover the 100 are pushed and the task is done (%s)" % row)


def test_open_transaction_at_due(env, record):
    """An admin's transaction inserting subscriptions is still open at the due
    time of its task: the dispatcher does not wait for it (a task due at the
    same time is claimed and pushed meanwhile), and once it commits the task
    is claimed and its rows are pushed."""
    t = env.insert_task("open-txn", "webhook", due="UTC_TIMESTAMP(3) + INTERVAL 2 SECOND")
    other = env.insert_with_subs("beside-open-txn", "webhook", range(610001, 610051), due_s=2)
    uids = range(600001, 600101)
    txn = subprocess.Popen(
        ["mariadb", "-h", env.my["host"], "-P", str(env.my["port"]), "-u", env.my["user"],
         "-p" + env.my["password"], env.my["database"], "-N", "-B", "-e",
         "BEGIN; INSERT INTO push_subscription (task_id, uid) VALUES %s; SELECT SLEEP(10); "
         "COMMIT;" % ",".join("(%d,%d)" % (t, u) for u in uids)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ok = env.wait_state(other, "done", 8)
    check(ok and txn.poll() is None,
          "a task due beside it is claimed and done while the transaction is open (%s)"
          % env.task(other, "state, sent"))
    check(env.task(t, "state")[0] == "scheduled", "... and the open one waits (%s)"
          % env.task(t, "state")[0])
    txn.wait(timeout=30)
    check(txn.returncode == 0, "the open transaction committed (%s)" % txn.stderr.read())
    ok = env.wait_state(t, ("done", "failed"), 60)
    got = sink_uids(record, uids)
    row = env.task(t, "state, sent, unaccounted")
    check(ok and row[0] == "done" and all(u in got for u in uids),
          "after the commit it was claimed and all 100 were pushed (%s)" % row)


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    dispatcher, worker, sink, ctl = sys.argv[1:]
    env = Env("sqlpath")
    try:
        if not env.create_topic():
            return 77
        channel, record = env.start_sink(sink)
        cfg = env.config({"webhook": dict(channel, concurrency=64)})
        env.start_daemons(dispatcher, worker, cfg)
        t = test_raw_sql_before_due(env, record)
        test_insert_after_claim(env, t)
        test_import_racing_claim(env, ctl, cfg)
        test_lost_after_claim(env, env.dsp_port, env.wk_port, ctl, cfg, record)
        test_open_transaction_at_due(env, record)
    finally:
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
