#!/usr/bin/env python3
"""sqlshapes: which statements MariaDB ran, grouped by their text's shape.

Reads a MariaDB general log (SET GLOBAL general_log_file = ...,
general_log = 1 as the stack's administrator, through its socket) and
counts the statements run (Query, and Execute of a prepared statement,
whose text the log shows with its parameters) between two lines, by
shape: quoted strings become 'S', numbers N, lists of them one item
("N.."), so the executions of one statement fall together whatever their
parameters.  Without a range it takes the statements between the first
two `SHOW GLOBAL STATUS` of the log: `bench/run small` runs one at the
small tasks' due time and one after they ended (bench/run's DueMark), so
that is what its statements per task count (docs/performance.md
"Issue 33").

    python3 bench/sqlshapes.py LOG [FIRST_LINE LAST_LINE] [--per N]

--per N also prints each count divided by N (the tasks of the run).
"""
import argparse
import collections
import re

COMMANDS = ("Connect", "Query", "Prepare", "Execute", "Close stmt", "Quit", "Init DB",
            "Reset stmt", "Long Data", "Fetch", "Statistics", "Ping", "Change user",
            "Field List", "Refresh", "Processlist", "Kill", "Shutdown", "Debug", "Set option")
HEADER = re.compile(r"^(?:\d{6}\s+\d+:\d\d:\d\d)?\s+(\d+) (%s)\t?(.*)$"
                    % "|".join(re.escape(c) for c in COMMANDS))


def records(path):
    """[line, connection, command, text] of each entry; a statement's
    continuation lines are joined to it."""
    out = []
    with open(path, errors="replace") as f:
        for no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = HEADER.match(line)
            if m:
                out.append([no, int(m.group(1)), m.group(2), m.group(3)])
            elif out:
                out[-1][3] += " " + line
    return out


def shape(text):
    """TEXT with its literals replaced, whitespace folded, cut at 230."""
    s = re.sub(r"'(?:[^'\\]|\\.)*'", "'S'", text)
    s = re.sub(r"\b\d+\b", "N", s)
    s = re.sub(r"(N\s*,\s*)+N", "N..", s)
    s = re.sub(r"('S'\s*,\s*)+'S'", "'S'..", s)
    return re.sub(r"\s+", " ", s)[:230]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("lines", nargs="*", type=int)
    ap.add_argument("--per", type=int, default=0)
    a = ap.parse_args()
    recs = records(a.log)
    if len(a.lines) == 2:
        lo, hi = a.lines
    else:
        marks = [r[0] for r in recs if "SHOW GLOBAL STATUS" in r[3]]
        if len(marks) < 2:
            ap.error("no two SHOW GLOBAL STATUS in the log: give FIRST_LINE LAST_LINE")
        lo, hi = marks[0], marks[1]
    count = collections.Counter()
    for no, _, cmd, text in recs:
        if lo <= no <= hi and cmd in ("Query", "Execute"):
            count[shape(text)] += 1
    print("lines %d..%d: %d statements" % (lo, hi, sum(count.values())))
    for s, n in count.most_common():
        per = "  %6.2f" % (n / a.per) if a.per else ""
        print("%6d%s  %s" % (n, per, s))


if __name__ == "__main__":
    main()
