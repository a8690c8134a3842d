#!/usr/bin/env python3
"""test_delivery_log: the delivery log partitioned by day (issue 30, item 5;
schemas/mysql/013_delivery_partitions.sql, dispatcher/dsp_dlog.c,
common/hr_dlog.c, common/hr_purge.c) on the real stack, in a database of
its own: the test rewrites push_delivery and drops its partitions, which
the other tests share in `herald`.

  1. 013 converts an existing log: on a push_delivery of the old shape
     (001..010) holding rows, `heraldctl migrate` puts an empty table
     partitioned by day (p<today>, pmax) in its place and keeps the rows in
     push_delivery_legacy; migrate again, and 013 run a second time, change
     nothing.
  2. A dispatcher with dispatcher.delivery_retention_days 3 (the test made
     day partitions 10 and 5 days back) creates the partitions up to 7 days
     ahead, drops the two older than 3 days (recorded in
     push_delivery_dropped, their rows gone), moves rows written without a
     day to their task's day, copies the legacy rows of a task due within the
     retention (not those of one due 10 days back, nor of a task that is
     gone) and drops the legacy table; herald_delivery_partition_days_ahead
     is 7.  A second dispatcher, while the first holds the push_job lease,
     reads the partitions (its gauge says 7 too) and changes nothing.
  3. No insert fails for want of a partition: a day in 1990 lands in the
     oldest partition, one in 2099 in pmax, one of a dropped day in the
     oldest remaining one.
  4. recover of a paused task due yesterday (inside the window) rebuilds its
     set from the subscriptions minus the delivery log (a row written
     without a day counted too); one due 10 days back is refused by
     heraldctl and by the API (409), naming the retention, and nothing is
     written; under a retention of 30 a task due on a dropped day is still
     refused (push_delivery_dropped); a task whose rows are still in a
     legacy table waits (exit 1, "not yet copied").
  5. heraldctl purge --finished-before <2 days back>: --dry-run counts and
     changes nothing; then the done and failed tasks that finished 5 days
     back go with their subscriptions, delivery rows, chunk and shard rows
     and Redis keys, in DELETEs of at most --batch 300 rows (10 for 1,000 +
     1,000 + 3 + 2 rows), a purge cut short earlier is finished, and a task
     finished today, a dispatched one and a paused one with an old
     finished_at are untouched; the closed subscription intervals of
     series (push_series_subscription_past) that ended an hour back or more
     and before the claim of every occurrence still kept go too (the dry
     run counts those no occurrence reads yet).

Usage: test_delivery_log.py HERALD_DISPATCHER HERALDCTL"""
import datetime
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import (Env, Mysql, check, finish, free_port, metric,  # noqa: E402
                          wait_until)

OLD_SHAPE = """CREATE TABLE push_delivery (
  task_id BIGINT UNSIGNED NOT NULL, uid BIGINT UNSIGNED NOT NULL,
  status ENUM('sent','failed','throttled','pulled','cancelled','unregistered','expired') NOT NULL,
  attempts SMALLINT UNSIGNED NOT NULL DEFAULT 1, http_status SMALLINT UNSIGNED NULL,
  latency_ms INT UNSIGNED NULL, at DATETIME(3) NOT NULL,
  PRIMARY KEY (task_id, uid)) ENGINE=InnoDB"""


def ymd(d):
    return d.strftime("%Y%m%d")


def iso(d):
    return d.strftime("%Y-%m-%d")


class T:
    def __init__(self, env, db, ctl, cfg, today):
        self.env, self.db, self.ctl_bin, self.cfg, self.today = env, db, ctl, cfg, today

    def day(self, n):
        return self.today + datetime.timedelta(days=n)

    def sql(self, q):
        return self.db.sql("SET time_zone = '+00:00'; " + q)

    def one(self, q):
        rows = self.sql(q)
        return rows[0][0] if rows else None

    def ctl(self, *args, cfg=None):
        return subprocess.run([self.ctl_bin, "-c", cfg or self.cfg] + [str(a) for a in args],
                              capture_output=True, text=True, timeout=120)

    def task(self, name, due_days, state="done", topic=None, finished_days=None,
             control="run"):
        """A task row due DUE_DAYS from today at 12:00 UTC; its id."""
        due = "'%s 12:00:00'" % iso(self.day(due_days))
        fin = ("UTC_TIMESTAMP(3) - INTERVAL %d DAY" % -finished_days
               if finished_days is not None else "NULL")
        return int(self.sql(
            "INSERT INTO push_task (name, topic, channel, due_at, state, control, finished_at) "
            "VALUES ('%s', '%s', 'webhook', %s, '%s', '%s', %s); SELECT LAST_INSERT_ID()"
            % (name, topic or self.env.topic, due, state, control, fin))[0][0])

    def parts(self):
        return [r[0] for r in self.sql(
            "SELECT PARTITION_NAME FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = "
            "DATABASE() AND TABLE_NAME = 'push_delivery' ORDER BY PARTITION_ORDINAL_POSITION")]

    def table_exists(self, name):
        return int(self.one("SELECT COUNT(*) FROM information_schema.TABLES WHERE "
                            "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '%s'" % name)) == 1

    def rows(self, task, where="1"):
        return int(self.one("SELECT COUNT(*) FROM push_delivery WHERE task_id = %d AND %s"
                            % (task, where)))

    # ---- 1 ---------------------------------------------------------------

    def convert(self):
        out = self.ctl("migrate")
        check(out.returncode == 0, "1. a new database migrates (%s)" % out.stderr.strip())
        # Back to the shape before 013, with rows: what an upgrade finds.
        self.sql("DROP TABLE push_delivery; DROP TABLE IF EXISTS push_delivery_legacy; "
                 + OLD_SHAPE + "; DELETE FROM schema_migrations WHERE version = 13")
        self.l1 = self.task("legacy-in", -1, topic="dlog-other")
        self.l2 = self.task("legacy-out", -10, topic="dlog-other")
        for task, n in ((self.l1, 300), (self.l2, 200), (999999999, 10)):
            self.sql("INSERT INTO push_delivery (task_id, uid, status, at) SELECT %d, seq, "
                     "'sent', UTC_TIMESTAMP(3) FROM seq_1_to_%d" % (task, n))
        out = self.ctl("migrate")
        check(out.returncode == 0 and "013_delivery_partitions" in out.stdout,
              "1. migrate applies 013 to a log of 510 rows (%s%s)"
              % (out.stdout.strip(), out.stderr.strip()))
        check(self.parts() == ["p" + ymd(self.today), "pmax"],
              "1. push_delivery is partitioned: p<today>, pmax (%s)" % self.parts())
        legacy = int(self.one("SELECT COUNT(*) FROM push_delivery_legacy"))
        check(legacy == 510 and int(self.one("SELECT COUNT(*) FROM push_delivery")) == 0,
              "1. the old rows are kept in push_delivery_legacy (%d), the new table is empty"
              % legacy)
        out = self.ctl("migrate")
        check(out.returncode == 0 and "up to date" in out.stdout, "1. migrate again: up to date")
        self.sql("DELETE FROM schema_migrations WHERE version = 13")
        out = self.ctl("migrate")
        check(out.returncode == 0 and self.parts() == ["p" + ymd(self.today), "pmax"]
              and int(self.one("SELECT COUNT(*) FROM push_delivery_legacy")) == 510,
              "1. 013 run twice changes nothing (%s)" % out.stderr.strip())

    # ---- 2, 3 ------------------------------------------------------------

    def prepare(self):
        """Day partitions 10 and 5 days back (as if the dispatchers had made
        them then), rows in them, rows without a day and far-off days."""
        t = self.day
        self.sql("ALTER TABLE push_delivery REORGANIZE PARTITION p%s INTO ("
                 "PARTITION p%s VALUES LESS THAN ('%s'), PARTITION p%s VALUES LESS THAN ('%s'), "
                 "PARTITION p%s VALUES LESS THAN ('%s'))"
                 % (ymd(t(0)), ymd(t(-10)), iso(t(-9)), ymd(t(-5)), iso(t(-4)), ymd(t(0)),
                    iso(t(1))))
        self.a = self.task("old-10", -10, topic="dlog-other")
        self.b = self.task("old-5", -5, topic="dlog-other")
        self.c = self.task("recent", -1, topic="dlog-other")
        for task, d in ((self.a, -10), (self.b, -5), (self.c, -1)):
            self.sql("INSERT INTO push_delivery (task_id, uid, status, at, day) SELECT %d, seq, "
                     "'sent', UTC_TIMESTAMP(3), '%s' FROM seq_1_to_40" % (task, iso(t(d))))
        # an older release's rows: no day (the column's default, in pmax)
        self.sql("INSERT INTO push_delivery (task_id, uid, status, at) SELECT %d, seq, 'sent', "
                 "UTC_TIMESTAMP(3) FROM seq_1001_to_1005" % self.c)
        check(int(self.one("SELECT COUNT(*) FROM push_delivery PARTITION (pmax) WHERE "
                           "task_id = %d" % self.c)) == 5,
              "2. rows written without a day go in (into pmax)")
        self.sql("INSERT INTO push_delivery (task_id, uid, status, at, day) VALUES "
                 "(%d, 5000, 'sent', UTC_TIMESTAMP(3), '1990-01-01'), "
                 "(%d, 5001, 'sent', UTC_TIMESTAMP(3), '2099-01-01')" % (self.c, self.c))
        check(int(self.one("SELECT COUNT(*) FROM push_delivery PARTITION (p%s) WHERE uid = 5000"
                           % ymd(t(-10)))) == 1
              and int(self.one("SELECT COUNT(*) FROM push_delivery PARTITION (pmax) "
                               "WHERE uid = 5001")) == 1,
              "3. a row of 1990 lands in the oldest partition, one of 2099 in pmax")

    def upkeep(self, dsp_log):
        t, env = self.day, self.env
        want = ["p" + ymd(t(n)) for n in range(0, 8)]
        ok = wait_until(lambda: not self.table_exists("push_delivery_legacy")
                        and all(p in self.parts() for p in want)
                        and int(self.one("SELECT COUNT(*) FROM push_delivery_dropped")) == 2,
                        30, 0.3)
        parts = self.parts()
        check(ok and parts == want + ["pmax"],
              "2. partitions today .. today + 7 and pmax, the two older than 3 days dropped (%s)"
              % parts)
        dropped = sorted(r[0] for r in self.sql("SELECT day + 0 FROM push_delivery_dropped"))
        check(dropped == [ymd(t(-10)), ymd(t(-5))],
              "2. both drops recorded in push_delivery_dropped (%s)" % dropped)
        check(self.rows(self.a) == 0 and self.rows(self.b) == 0,
              "2. the rows of the tasks due 10 and 5 days back went with their partitions")
        c_day = "day = '%s'" % iso(t(-1))
        check(self.rows(self.c, c_day) == 45 and self.rows(self.c, "day = '9999-12-31'") == 0,
              "2. the rows written without a day were moved to their task's day (%d of 45)"
              % self.rows(self.c, c_day))
        check(self.rows(self.l1, "day = '%s'" % iso(t(-1))) == 300 and self.rows(self.l2) == 0
              and self.rows(999999999) == 0,
              "2. legacy: the task due within the retention copied into its day (%d of 300), "
              "the one due 10 days back and the one that is gone not" % self.rows(self.l1))
        check(not self.table_exists("push_delivery_legacy"), "2. the legacy table is dropped")
        text = env.log(dsp_log)
        check(all(e in text for e in ("delivery_partitions_added", "delivery_partitions_dropped",
                                      "delivery_legacy_done")),
              "2. the dispatcher logged the partitions added, dropped and the copy done")
        ahead = metric(env.metrics(env.dsp_port), "herald_delivery_partition_days_ahead")
        check(ahead == 7, "2. herald_delivery_partition_days_ahead is 7 (%s)" % ahead)
        self.sql("INSERT INTO push_delivery (task_id, uid, status, at, day) VALUES "
                 "(%d, 5002, 'sent', UTC_TIMESTAMP(3), '%s')" % (self.c, iso(t(-10))))
        check(int(self.one("SELECT COUNT(*) FROM push_delivery PARTITION (p%s) WHERE uid = 5002"
                           % ymd(t(0)))) == 1,
              "3. a row of a dropped day lands in the oldest partition left")

    def second(self, dispatcher, cfg):
        """A second dispatcher on the same database, the lease being the
        first one's: it alters nothing."""
        env = self.env
        port, probe = free_port(), free_port()
        with open(cfg) as f:
            text = f.read()
        cfg2 = cfg + ".second"
        with open(cfg2, "w") as f:
            f.write(text.replace("listen: 127.0.0.1:%d\n" % env.dsp_port,
                                 "listen: 127.0.0.1:%d\n" % port)
                    .replace("probe_listen: 127.0.0.1:%d\n" % env.probe_ports[env.dsp_port],
                             "probe_listen: 127.0.0.1:%d\n" % probe))
        env.probe_ports[port] = probe
        owner = self.one("SELECT owner FROM push_job WHERE name = 'delivery_log'")
        dsp2 = env.start([dispatcher, "-c", cfg2], "dispatcher2.log")
        ok = env.wait_ready(port) and wait_until(
            lambda: metric(env.metrics(port), "herald_delivery_partition_days_ahead") == 7, 20,
            0.3)
        text = env.log(dsp2)
        check(ok and self.one("SELECT owner FROM push_job WHERE name = 'delivery_log'") == owner
              and "delivery_partitions" not in text and "delivery_legacy" not in text,
              "2. a second dispatcher reads 7 days ahead and, the lease being %s's, alters "
              "nothing" % owner)
        env.stop(dsp2)

    # ---- 4 ---------------------------------------------------------------

    def recover(self, cfg30):
        env, t = self.env, self.day
        subs = ",".join("(@t,%d)" % u for u in range(1, 21))

        def paused(name, due_days):
            task = self.task(name, due_days, state="scheduled")
            self.sql("SET @t = %d; INSERT INTO push_subscription (task_id, uid) VALUES %s; "
                     "UPDATE push_task SET state = 'paused', control = 'pause', "
                     "started_at = UTC_TIMESTAMP(3) WHERE id = @t" % (task, subs))
            return task

        inside = paused("recover-in", -1)
        self.sql("INSERT INTO push_delivery (task_id, uid, status, at, day) SELECT %d, seq, "
                 "'sent', UTC_TIMESTAMP(3), '%s' FROM seq_1_to_8; "
                 "INSERT INTO push_delivery (task_id, uid, status, at) "
                 "VALUES (%d, 9, 'sent', UTC_TIMESTAMP(3))" % (inside, iso(t(-1)), inside))
        out = self.ctl("recover", inside)
        members = {int(u) for u in env.r.cmd("SMEMBERS", env.key(inside, "subs"))}
        check(out.returncode == 0 and members == set(range(10, 21)),
              "4. recover inside the window: subs = the 20 subscriptions minus the 9 the log "
              "shows (%s; %s)" % (sorted(members), (out.stdout + out.stderr).strip()))
        check(int(self.one("SELECT sent FROM push_task WHERE id = %d" % inside)) == 9,
              "4. ... and sent = 9, the row written without a day counted")

        outside = paused("recover-out", -10)
        out = self.ctl("recover", outside)
        check(out.returncode == 1 and "dispatcher.delivery_retention_days = 3" in out.stderr
              and "nothing was changed" in out.stderr,
              "4. heraldctl recover of a task due 10 days back refuses, naming the retention "
              "(%s)" % out.stderr.strip())
        check(env.r.cmd("EXISTS", env.key(outside, "subs")) == 0,
              "4. ... and writes nothing to Redis")
        status, body = env.http("POST", "/v1/tasks/%d/recover" % outside)
        msg = body.get("error", {}).get("message", "") if isinstance(body, dict) else str(body)
        check(status == 409 and "delivery_retention_days" in msg,
              "4. POST /v1/tasks/{id}/recover refuses it too: 409 (%s %s)" % (status, msg))

        dropped_day = paused("recover-dropped", -5)
        out = self.ctl("recover", dropped_day, cfg=cfg30)
        check(out.returncode == 1 and "were dropped" in out.stderr
              and iso(t(-5)) in out.stderr,
              "4. with a retention of 30, a task due on a dropped day is refused "
              "(push_delivery_dropped: %s)" % out.stderr.strip())

        self.sql(OLD_SHAPE.replace("push_delivery", "push_delivery_legacy") + "; "
                 "INSERT INTO push_delivery_legacy (task_id, uid, status, at) "
                 "VALUES (%d, 15, 'sent', UTC_TIMESTAMP(3))" % inside)
        out = self.ctl("recover", inside)
        check(out.returncode == 1 and "not yet copied" in out.stderr,
              "4. a task with rows still in push_delivery_legacy waits (%s)" % out.stderr.strip())
        self.sql("DROP TABLE push_delivery_legacy")

    # ---- 5 ---------------------------------------------------------------

    def purge(self):
        env, t = self.env, self.day
        other = "dlog-other"
        old = self.task("purge-old", -6, finished_days=-5, topic=other)
        failed = self.task("purge-failed", -6, state="failed", finished_days=-5, topic=other)
        new = self.task("purge-new", 0, finished_days=0, topic=other)
        running = self.task("purge-running", -6, state="dispatched", topic=other)
        paused = self.task("purge-paused", -6, state="paused", finished_days=-5, topic=other,
                           control="pause")
        states = {old: "done", failed: "failed", new: "done", running: "dispatched",
                  paused: "paused"}
        for task, state in states.items():
            # subscriptions go in while a task is scheduled (the guard trigger)
            self.sql("UPDATE push_task SET state = 'scheduled' WHERE id = %d; "
                     "INSERT INTO push_subscription (task_id, uid) SELECT %d, seq FROM "
                     "seq_1_to_1000; UPDATE push_task SET state = '%s' WHERE id = %d; "
                     "INSERT INTO push_delivery (task_id, uid, status, at, day) "
                     "SELECT %d, seq, 'sent', UTC_TIMESTAMP(3), '%s' FROM seq_1_to_1000"
                     % (task, task, state, task, task, iso(t(-6) if task != new else t(0))))
        self.sql("INSERT INTO push_chunk (task_id, seq, size, state, published_at) VALUES "
                 "(%d, 1, 400, 'done', UTC_TIMESTAMP(3)), (%d, 2, 400, 'done', UTC_TIMESTAMP(3)), "
                 "(%d, 3, 200, 'done', UTC_TIMESTAMP(3)); INSERT INTO push_task_shard (task_id, "
                 "shard, state) VALUES (%d, 0, 'chunked'), (%d, 1, 'chunked')"
                 % (old, old, old, old, old))
        env.r.cmd("HSET", env.key(old, "stats"), "sent", "1000")
        env.r.cmd("HSET", env.key(old, "failed"), "7", "gone")
        env.r.cmd("SADD", env.key(old, "chunk:1"), "7")
        env.r.cmd("SET", env.key(old, "lease:1"), "a worker")
        # a purge cut short: the task row went, push_purge says what is left
        left = self.task("purge-left", -6, state="scheduled", topic=other)
        self.sql("INSERT INTO push_subscription (task_id, uid) SELECT %d, seq FROM seq_1_to_50; "
                 "INSERT INTO push_purge (task_id, day, shards, purged_at) VALUES "
                 "(%d, '%s', 1, UTC_TIMESTAMP(3)); DELETE FROM push_task WHERE id = %d"
                 % (left, left, iso(t(-6)), left))

        # Closed subscription intervals of three series (days back, uid):
        # `lone` has no occurrence: the one that ended 7 days back goes, the
        # one that ended 30 minutes back stays (the hour's margin); `kept`'s
        # occurrence (the dispatched task, claimed 4 days back) keeps the
        # interval around its claim, not the one that ended before it;
        # `gone`'s only occurrence is the done task purged here, so its
        # interval goes too, though a dry run before finds it still read.
        def series(name):
            return int(self.sql(
                "INSERT INTO push_series (name, channel, rrule, dtstart, state) VALUES "
                "('%s', 'webhook', 'FREQ=DAILY', '2026-01-01 09:00:00', 'ended'); "
                "SELECT LAST_INSERT_ID()" % name)[0][0])

        lone, kept, gone = series("purge-lone"), series("purge-kept"), series("purge-gone")
        self.sql("UPDATE push_task SET series_id = %d, occurrence_at = due_at, started_at = "
                 "UTC_TIMESTAMP(3) - INTERVAL 4 DAY WHERE id = %d; UPDATE push_task SET "
                 "series_id = %d, occurrence_at = due_at, started_at = UTC_TIMESTAMP(3) - "
                 "INTERVAL 6 DAY WHERE id = %d" % (kept, running, gone, old))
        past = [(lone, 1, "8 DAY", "7 DAY"), (lone, 2, "3 HOUR", "30 MINUTE"),
                (kept, 1, "10 DAY", "5 DAY"), (kept, 2, "6 DAY", "3 DAY"),
                (gone, 1, "7 DAY", "132 HOUR")]
        self.sql("INSERT INTO push_series_subscription_past (series_id, uid, subscribed_at, "
                 "unsubscribed_at) VALUES %s" % ", ".join(
                     "(%d, %d, UTC_TIMESTAMP(3) - INTERVAL %s, UTC_TIMESTAMP(3) - INTERVAL %s)"
                     % row for row in past))

        def past_left():
            return sorted((int(a), int(b)) for a, b in self.sql(
                "SELECT series_id, uid FROM push_series_subscription_past WHERE series_id IN "
                "(%d, %d, %d)" % (lone, kept, gone)))

        def counts():
            return {task: (int(self.one("SELECT COUNT(*) FROM push_subscription WHERE task_id = "
                                        "%d" % task)), self.rows(task),
                           int(self.one("SELECT COUNT(*) FROM push_task WHERE id = %d" % task)))
                    for task in (old, failed, new, running, paused, left)}

        before = counts()
        cutoff = iso(t(-2))
        out = self.ctl("purge", "--finished-before", cutoff, "--dry-run")
        check(out.returncode == 0 and counts() == before
              and re.search(r"task %d \(done, finished [^)]*\): would delete 1000 subscriptions, "
                            r"1000 delivery rows, 3 chunk rows, 2 shard rows" % old, out.stdout)
              and "would purge 2 tasks" in out.stdout
              and "2 past series subscription intervals" in out.stdout
              and len(past_left()) == len(past),
              "5. purge --dry-run counts the two finished tasks and the two intervals no "
              "occurrence reads, and changes nothing (%s)" % (out.stdout + out.stderr).strip())
        out = self.ctl("purge", "--finished-before", cutoff, "--batch", "300")
        after = counts()
        check(past_left() == sorted([(lone, 2), (kept, 2)])
              and "3 past series subscription intervals" in out.stdout,
              "5. purge deletes the series' closed intervals no occurrence left reads: %s kept "
              "(%s)" % (past_left(), out.stdout.strip().splitlines()[-1:]))
        check(out.returncode == 0 and after[old] == (0, 0, 0) and after[failed] == (0, 0, 0),
              "5. purge: the done and the failed task finished 5 days back are gone with their "
              "subscriptions and delivery rows (%s; %s)" % (after, out.stderr.strip()))
        check(after[new] == before[new] and after[running] == before[running]
              and after[paused] == before[paused],
              "5. a task finished today, a dispatched one and a paused one are untouched")
        check(int(self.one("SELECT COUNT(*) FROM push_chunk WHERE task_id = %d" % old)) == 0
              and int(self.one("SELECT COUNT(*) FROM push_task_shard WHERE task_id = %d"
                               % old)) == 0
              and not env.r.scan(env.prefix + "{t%d}*" % old),
              "5. ... its chunk and shard rows and its Redis keys too")
        check(re.search(r"task %d \(done[^)]*\): 1000 subscriptions, 1000 delivery rows, 3 chunk "
                        r"rows, 2 shard rows, 4 Redis keys; 10 DELETEs" % old, out.stdout),
              "5. in DELETEs of at most 300 rows: 10 for 1,000 + 1,000 + 3 + 2 (%s)"
              % out.stdout.strip())
        check(after[left][0] == 0 and int(self.one("SELECT COUNT(*) FROM push_purge")) == 0
              and "1 of them left by a purge cut short" in out.stdout,
              "5. the purge cut short earlier is finished first")
        row = self.one("SELECT after_json FROM push_audit WHERE action = 'heraldctl purge' "
                       "ORDER BY id DESC LIMIT 1")
        got = json.loads(row) if row else {}
        check(got.get("tasks", 0) >= 2 and got.get("subscriptions", 0) >= 2000
              and str(got.get("finished_before")).startswith(cutoff),
              "5. the purge has its audit row, with its counts (%s)" % row)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    dispatcher, ctl = sys.argv[1:3]
    # The partitions expected are named after today (UTC): a run must not
    # straddle midnight, so one that would starts just after it.
    now = datetime.datetime.now(datetime.timezone.utc)
    left = 86400 - (now.hour * 3600 + now.minute * 60 + now.second)
    if left < 120:
        time.sleep(left + 1)
    env = Env("dlog")
    name = "herald_dlog_%d" % os.getpid()
    env.db.sql("CREATE DATABASE %s" % name)
    env.my = dict(env.my, database=name)
    db = Mysql(env.my["host"], env.my["port"], env.my["user"], env.my["password"], name)
    try:
        cfg = env.config({"webhook": {"url": "http://127.0.0.1:9/push"}})
        with open(cfg) as f:
            text = f.read()
        cfg30 = cfg + ".30"
        for path, days in ((cfg, 3), (cfg30, 30)):
            with open(path, "w") as f:
                f.write(text.replace("  sweep_interval_ms: 1000\n", "  sweep_interval_ms: 1000\n"
                                     "  delivery_retention_days: %d\n" % days))
        today = datetime.datetime.strptime(db.sql("SELECT UTC_DATE() + 0")[0][0],
                                           "%Y%m%d").date()
        t = T(env, db, ctl, cfg, today)
        t.convert()
        t.prepare()
        dsp = env.start([dispatcher, "-c", cfg], "dispatcher.log")
        check(env.wait_ready(env.dsp_port), "the dispatcher serves")
        t.upkeep(dsp)
        t.second(dispatcher, cfg)
        t.recover(cfg30)
        t.purge()
    finally:
        env.cleanup()
        env.db.sql("DROP DATABASE IF EXISTS %s" % name)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
