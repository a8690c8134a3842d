#!/usr/bin/env python3
"""bench/task_guard.py: MariaDB's CPU per UPDATE of a task row under each
set of push_task's BEFORE UPDATE triggers (docs/performance.md "One guard
trigger on push_task").

    bench/task_guard.py [--rows R] [--passes P] [--rounds N]

On the local stack's MariaDB (HERALD_HOME, as bench/run), in a scratch table
bench_task_guard made LIKE push_task and holding R task rows (1,500: the
many-small-tasks scenario's), it runs P (30) batched counter updates of
every row, the statement shape of the workers' reporter (UPDATE
JSON_TABLE(<list>) ... STRAIGHT_JOIN <table> SET sent = sent + ...), under:
  none    no trigger
  pair    the two triggers before 030: 002_freeze_trigger.sql's freeze
          rule and 010_shards.sql's fixed shards
  guard   030_task_guard.sql's one trigger
each variant in turn, N (3) rounds alternated.  It reports each variant's
median MariaDB CPU (utime + stime of mariadbd, /proc) per row update in us,
and what its triggers add to a row update without any, and writes
bench/results/task-guard-<YYYYMMDD-HHMMSS>.json.  The triggers are the
migration files' text, renamed onto the scratch table; the table is dropped
at the end."""
import argparse
import datetime
import json
import os
import re
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
from herald_test import procs  # noqa: E402
from herald_test.clients import Mysql  # noqa: E402
from herald_test.stack import Settings  # noqa: E402

HOME = os.environ.get("HERALD_HOME", os.path.join(REPO, ".herald"))
RESULTS = os.path.join(REPO, "bench", "results")
MIGRATIONS = os.path.join(REPO, "schemas", "mysql")
TABLE = "bench_task_guard"


def triggers(*files):
    """The CREATE TRIGGER statements on push_task of FILES, moved onto
    TABLE (names prefixed with it)."""
    out = []
    for name in files:
        with open(os.path.join(MIGRATIONS, name)) as f:
            text = f.read()
        for m in re.finditer(r"^CREATE TRIGGER (\w+) BEFORE UPDATE ON push_task\n.*?^END;",
                             text, re.S | re.M):
            body = m.group(0)[:-1].replace("ON push_task\n", "ON %s\n" % TABLE, 1)
            out.append(body.replace(m.group(1), "%s_%s" % (TABLE, m.group(1)), 1))
    if not out:
        sys.exit("bench/task_guard.py: no push_task trigger in %s" % ", ".join(files))
    return out


VARIANTS = {
    "none": [],
    "pair": triggers("002_freeze_trigger.sql", "010_shards.sql"),
    "guard": triggers("030_task_guard.sql"),
}


def drop_triggers(db):
    for (name,) in db.sql("SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE "
                          "EVENT_OBJECT_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = '%s'"
                          % TABLE):
        db.sql("DROP TRIGGER %s" % name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--passes", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    settings = Settings.load(HOME)
    db = Mysql.of(settings)
    pid = settings.pids()["mariadb"]
    db.sql("DROP TABLE IF EXISTS {t}; CREATE TABLE {t} LIKE push_task; "
           "INSERT INTO {t} (name, channel, title, body, payload, due_at) "
           "SELECT CONCAT('bench-', seq), 'webhook', 'A reminder', "
           "'The body of the reminder, about sixty bytes long, as a campaign''s.', "
           "'{{\"k\":\"v\"}}', UTC_TIMESTAMP(3) - INTERVAL 1 HOUR FROM seq_1_to_{n}"
           .format(t=TABLE, n=a.rows))
    ids = json.dumps([[int(i), 1] for (i,) in db.sql("SELECT id FROM %s" % TABLE)])
    update = ("UPDATE JSON_TABLE('%s', '$[*]' COLUMNS (task BIGINT PATH '$[0]', "
              "sent BIGINT PATH '$[1]')) j STRAIGHT_JOIN %s t ON t.id = j.task "
              "SET t.sent = t.sent + j.sent;" % (ids, TABLE))
    per_row = {v: [] for v in VARIANTS}
    try:
        for r in range(a.rounds):
            for name, create in VARIANTS.items():
                drop_triggers(db)
                for stmt in create:
                    db.sql(stmt)
                before = procs.cpu_of(pid)
                db.sql(update * a.passes)
                us = (procs.cpu_of(pid) - before) * 1e6 / (a.rows * a.passes)
                per_row[name].append(round(us, 2))
                print("round %d %-5s %.1f us of MariaDB's CPU a row update" % (r + 1, name, us),
                      flush=True)
    finally:
        db.sql("DROP TABLE IF EXISTS %s" % TABLE)
    med = {v: statistics.median(x) for v, x in per_row.items()}
    res = {"rows": a.rows, "passes": a.passes, "rounds": per_row,
           "median_us_per_row": med,
           "triggers_us_per_row": {v: round(med[v] - med["none"], 2) for v in VARIANTS},
           "load_at_end": os.getloadavg()[0]}
    print("medians: none %.1f, pair %.1f, guard %.1f us a row update; triggers add %.1f "
          "(pair) and %.1f (guard)" % (med["none"], med["pair"], med["guard"],
                                       med["pair"] - med["none"], med["guard"] - med["none"]))
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, "task-guard-%s.json"
                        % datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print("results in %s" % path)


if __name__ == "__main__":
    main()
