#!/usr/bin/env python3
"""sinkstats: what herald-sink's record says about one campaign.

The record (herald-sink --record) has one line per push received,
"<uid> <status> <recv_ms>".  summarize() turns it into the figures the
benchmark and the quickstart report: pushes, distinct uids delivered, first
push lag after due, makespan from due to the last push, due-to-delivery
latency percentiles and pushes per second over time.

Only lines whose uid lies in [uid_lo, uid_hi] count when a range is given:
the record file may hold pushes of earlier campaigns (a worker that resumes
an old chunk), and each benchmark campaign uses its own uid range.

    python3 bench/sinkstats.py RECORD DUE_MS [UID_LO UID_HI]   # prints JSON
"""
import json
import sys

PERCENTILES = (50, 90, 99, 99.9)


def _pct(sorted_vals, p):
    if not sorted_vals:
        return None
    return sorted_vals[min(len(sorted_vals) - 1, int(p / 100.0 * len(sorted_vals)))]


def summarize(record, due_ms, uid_lo=None, uid_hi=None):
    """Figures of the pushes in `record` for a campaign due at `due_ms`."""
    lat, uids = [], set()
    pushes = errors = 0
    per_sec = {}
    with open(record) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3 or not parts[0].isdigit():
                continue
            uid = int(parts[0])
            if uid_lo is not None and not uid_lo <= uid <= uid_hi:
                continue
            status, recv = int(parts[1]), int(parts[2])
            pushes += 1
            sec = (recv - due_ms) // 1000
            per_sec[sec] = per_sec.get(sec, 0) + 1
            if 200 <= status < 300:
                lat.append(recv - due_ms)
                uids.add(uid)
            else:
                errors += 1
    lat.sort()
    makespan = lat[-1] / 1000.0 if lat else None
    out = {
        "pushes": pushes,
        "errors": errors,
        "distinct_uids": len(uids),
        "first_push_lag_ms": lat[0] if lat else None,
        "makespan_s": makespan,
        "pushes_per_s": round(pushes / makespan, 1) if makespan else None,
        "latency_ms": {("p%g" % p): _pct(lat, p) for p in PERCENTILES},
        "series": [[s, per_sec[s]] for s in sorted(per_sec)],
    }
    out["latency_ms"]["max"] = lat[-1] if lat else None
    return out


def main(argv):
    if len(argv) not in (3, 5):
        sys.stderr.write(__doc__)
        return 2
    lo = int(argv[3]) if len(argv) == 5 else None
    hi = int(argv[4]) if len(argv) == 5 else None
    json.dump(summarize(argv[1], int(argv[2]), lo, hi), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
