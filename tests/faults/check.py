"""tests/faults/check.py: the fault harness's checker.

Compares what the sink received with the subscriber list and with herald's
own accounting of one task:

  delivered   uids the sink answered with a 2xx (the record file, one
              '<uid> <status> <recv_ms>' line per request)
  failed      uids in the task's dead-letter hash (<prefix>{t<ID>}:failed)
  pulled      uids in the task's pulled set (<prefix>{t<ID>}:pulled)
  lost        subscribers in none of those, minus the throttled,
              cancelled, unregistered and expired counts (herald keeps those
              as counts, not uids)
  duplicates  2xx requests beyond the first for one uid
  strangers   2xx uids that are not subscribers (must be 0)

`accounted` is the task's Redis stats hash (sent, failed, throttled, pulled,
cancelled, unregistered, expired); its sum must equal the subscriber count: every recipient is
counted exactly once however often it was pushed.  The MySQL counters of
push_task are reported beside it; after a kill -9 they may lag Redis.

Run standalone:  check.py RECORD N_SUBSCRIBERS  (uids 1..N, no Redis side). """
import collections
import sys

ACCOUNT_FIELDS = ("sent", "failed", "throttled", "pulled", "cancelled", "unregistered",
                  "expired")
# Outcomes herald keeps as counts, not uids: a subscriber the sink never saw
# is not lost when one of them counts it.
COUNTED_ONLY = ("throttled", "cancelled", "unregistered", "expired")


def read_record(path):
    """Returns (Counter of 2xx uids, number of lines, number of non-2xx lines)."""
    ok = collections.Counter()
    lines = other = 0
    with open(path, "rb") as f:
        for raw in f:
            parts = raw.split()
            if len(parts) != 3:
                continue
            lines += 1
            try:
                status = int(parts[1])
            except ValueError:
                continue
            if 200 <= status < 300:
                ok[parts[0].decode("utf-8", "replace")] += 1
            else:
                other += 1
    return ok, lines, other


def check(record, subscribers, failed=(), pulled=(), stats=None, mysql=None):
    """subscribers: iterable of uid strings.  stats/mysql: dicts of counters
    (or None).  Returns a dict with every figure of the report."""
    subs = set(subscribers)
    ok, lines, non2xx = read_record(record)
    failed, pulled = set(failed), set(pulled)
    missing = subs - set(ok) - failed - pulled
    stats = stats or {}
    uncounted = sum(int(stats.get(k, 0)) for k in COUNTED_ONLY)
    res = {
        "subscribers": len(subs),
        "requests": lines,
        "non2xx": non2xx,
        "delivered": len(subs & set(ok)),
        "duplicates": sum(n - 1 for n in ok.values() if n > 1),
        "dup_uids": sum(1 for n in ok.values() if n > 1),
        "strangers": len(set(ok) - subs),
        "failed_uids": len(failed & subs),
        "pulled_uids": len(pulled & subs),
        "missing": len(missing),
        "missing_sample": sorted(missing, key=lambda u: (len(u), u))[:10],
        "lost": max(0, len(missing) - uncounted),
        "accounted": {k: int(stats.get(k, 0)) for k in ACCOUNT_FIELDS},
        "mysql": {k: int((mysql or {}).get(k, 0)) for k in ACCOUNT_FIELDS},
    }
    res["accounted_sum"] = sum(res["accounted"].values())
    res["mysql_sum"] = sum(res["mysql"].values())
    return res


def fmt_counts(d):
    return ",".join("%s:%d" % (k, d[k]) for k in ACCOUNT_FIELDS)


def main(argv):
    if len(argv) != 3:
        print("usage: check.py RECORD N_SUBSCRIBERS", file=sys.stderr)
        return 2
    n = int(argv[2])
    res = check(argv[1], (str(i) for i in range(1, n + 1)))
    print("lost=%d duplicates=%d strangers=%d delivered=%d requests=%d" %
          (res["lost"], res["duplicates"], res["strangers"], res["delivered"], res["requests"]))
    return 1 if res["lost"] or res["strangers"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
