#!/usr/bin/env python3
"""bench/issue19.py: issue 19's table of figures, from bench/run's results.

bench/run imports it: when a run covers every scenario the table needs
(`bench/run issue19`, a full `bench/run`, or `bench/run --smoke`) it prints
the table after the scenarios' summary and writes it to
bench/results/issue19-<stamp>.txt (and .json).  Each row holds the measured
figure, the target, whether it is met and the result file it comes from.  A
row whose scenario ran at another size than the target's (`--n`, `--smoke`)
says so instead of met / not met: a smoke run's table is the smoke's, not
the targets'.

The figures are computed here from the scenarios' result dicts, so that
this file alone says what each row means:

  slow start   pushes/s over the first 6 s after due against the steady rate,
               the median of the whole seconds after those 6 up to the last
               full second (issue 19: "first 6 s at a quarter speed");
  first push   nearest-rank percentiles of the first-push lags of the
               firstpush scenario's campaigns (p99 of 20 runs is their max);
  RSS flat     the same fleet's peak RSS (VmHWM) after a campaign of N/5,
               after one of N and after one of N again: flat when no herald
               process grew by more than FLAT_PCT % from the first to the
               second (its memory may not follow the campaign's size) nor
               from the second to the third (nor the number of campaigns).

    python3 bench/issue19.py selftest      # the row logic on made-up results
    python3 bench/issue19.py table FILE... # the table of result files of
                                           # several runs (the newest per scenario)
"""
import json
import math
import sys

FIRST_S = 6          # the slow start's window after due
SLOW_START_MIN = 0.8  # the first seconds at >= 80 % of the steady rate: "gone"
FLAT_PCT = 10.0

# The scenarios the table reads; a run that covers all of them prints it.
SCENARIOS = ("ceiling", "e2e", "throttle", "peer", "small", "dispatch", "firstpush", "rss")


def pctl(values, p):
    """Nearest-rank percentile P (0..100] of VALUES; None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(math.ceil(p / 100.0 * len(s))) - 1))]


def slow_start(series, first_s=FIRST_S):
    """The start's rate against the steady one, from sinkstats' per-second
    SERIES ([second after due, pushes]); None when the campaign lasted too
    short to have a steady part (3 whole seconds after the first FIRST_S)."""
    per = dict((int(s), int(c)) for s, c in series)
    if not per:
        return None
    last = max(per)  # partial: the campaign ended inside it
    steady = [per.get(s, 0) for s in range(first_s, last)]
    if len(steady) < 3:
        return None
    steady.sort()
    mid = steady[len(steady) // 2] if len(steady) % 2 else \
        (steady[len(steady) // 2 - 1] + steady[len(steady) // 2]) / 2.0
    first = sum(per.get(s, 0) for s in range(0, first_s)) / float(first_s)
    return {"first_s": first_s, "first_per_s": round(first, 1), "steady_per_s": round(mid, 1),
            "ratio": round(first / mid, 3) if mid else None}


def rss_growth(small, big):
    """{process: [peak MiB at the small size, at the big one, growth %]} of
    the herald processes (not the sink) in both campaigns' stats."""
    out = {}
    for name, v in big.items():
        if name.startswith("sink") or name not in small:
            continue
        a, b = small[name]["peak_rss_mib"], v["peak_rss_mib"]
        out[name] = [a, b, round((b - a) * 100.0 / a, 1) if a else None]
    return out


def _n(v):
    if v is None:
        return "-"
    if isinstance(v, tuple):
        return " x ".join(_n(x) for x in v)
    if isinstance(v, float) and v < 1000:
        return "{:,}".format(round(v, 2) if v < 10 else round(v, 1))
    return "{:,}".format(int(round(v)))


def _row(figure, target, res, size, need, measured, value, ok, src):
    """One row.  RES: the scenario's result (None = not run); SIZE: the size
    it ran at, NEED: the target's (None = any); VALUE: the figure (None =
    not measured); OK(value) -> bool."""
    row = {"figure": figure, "target": target, "measured": "-", "met": "not run",
           "source": src or "-", "value": value, "load": None}
    if res is None:
        return row
    row["load"] = res.get("load")
    if not res.get("ok"):
        row["met"] = "FAILED"
        row["measured"] = str(res.get("error", ""))[:60]
        return row
    row["measured"] = measured if value is not None else "not measured"
    if value is None:
        row["met"] = "-"
    elif need is not None and size != need:
        row["met"] = "size %s, not %s" % (_n(size), _n(need))
    else:
        row["met"] = "met" if ok(value) else "NOT MET"
    return row


def rows(results, files):
    """The table's rows from RESULTS ({scenario: result dict}) and FILES
    ({scenario: result file})."""
    def get(name):
        return results.get(name)

    def src(*names):
        return " ".join(files[n] for n in names if n in files) or None

    out = []
    e2e, ceil = get("e2e"), get("ceiling")
    ratio = e2e.get("ceiling_ratio") if e2e and e2e.get("ok") else None
    out.append(_row("e2e 1M pushes/s / wrk ceiling (same sink, same connections, one run)",
                    ">= 0.66", e2e, e2e and e2e.get("n"), 1_000_000,
                    "%s (%s/s of %s req/s)" % (_n(ratio), _n(e2e.get("pushes_per_s")),
                                              _n((ceil or {}).get("requests_per_s")))
                    if ratio is not None else "", ratio, lambda v: v >= 0.66,
                    src("e2e", "ceiling")))
    cpu = e2e.get("cpu_us_per_push") if e2e and e2e.get("ok") else None
    out.append(_row("herald CPU-us per push (dispatcher + workers)", "<= 12", e2e,
                    e2e and e2e.get("n"), 1_000_000, _n(cpu), cpu, lambda v: v <= 12,
                    src("e2e")))
    fd = (e2e or {}).get("from_due") or {}
    sysv = fd.get("system_us_per_push")
    parts = " + ".join("%s %s" % (k, _n(v)) for k, v in
                       [("herald", fd.get("herald_us_per_push"))] +
                       sorted((fd.get("server_us_per_push") or {}).items()))
    out.append(_row("whole-system CPU-us per push (herald + Redis + MariaDB + Kafka, "
                    "from due: import excluded)", "<= 30", e2e, e2e and e2e.get("n"),
                    1_000_000, "%s (%s)" % (_n(sysv), parts), sysv, lambda v: v <= 30,
                    src("e2e")))
    peer = get("peer")
    pr = peer.get("cpu_ratio_peer_herald") if peer and peer.get("ok") else None
    out.append(_row("peer ratio: seed-002 pipeline CPU per push / herald's", ">= 10x", peer,
                    peer and peer.get("n"), 1_000_000,
                    "%sx (%s / %s us); servers counted: %sx (%s / %s us)"
                    % (_n(pr), _n(peer.get("peer_cpu_us_per_push")),
                       _n(peer.get("herald_cpu_us_per_push")),
                       _n(peer.get("system_ratio_peer_herald")),
                       _n(peer.get("peer_system_cpu_us_per_push")),
                       _n(peer.get("herald_system_cpu_us_per_push"))) if pr else "",
                    pr, lambda v: v >= 10, src("peer")))
    ss = (e2e or {}).get("slow_start")
    out.append(_row("slow start after due (first 6 s / steady pushes/s)",
                    ">= %.2f (gone)" % SLOW_START_MIN, e2e, e2e and e2e.get("n"),
                    1_000_000,
                    "%s (%s/s, then %s/s)" % (_n(ss["ratio"]), _n(ss["first_per_s"]),
                                             _n(ss["steady_per_s"])) if ss else "",
                    ss and ss["ratio"], lambda v: v >= SLOW_START_MIN, src("e2e")))
    small = get("small")
    sm = small.get("big_5000_over_small") if small and small.get("ok") else None
    out.append(_row("many small tasks: one big task's pushes/s / 1,500 x 10's "
                    "(2 dispatchers, 3 workers)", "<= 2", small,
                    small and (small.get("tasks"), small.get("per_task")), (1_500, 10),
                    "%s (%s/s against %s/s)" % (_n(sm), _n(small["big_5000"]["pushes_per_s"]),
                                               _n(small["small"]["pushes_per_s"])) if sm else "",
                    sm, lambda v: v <= 2, src("small")))
    d = get("dispatch")
    ds = d.get("makespan_s") if d and d.get("ok") else None
    out.append(_row("10M subscribers chunked and published (s)", "<= 45", d, d and d.get("n"),
                    10_000_000, "%s s (%s recipients/s)"
                    % (_n(ds), _n(d.get("recipients_per_s"))) if ds else "", ds,
                    lambda v: v <= 45, src("dispatch")))
    th = get("throttle")
    tr = th.get("ratio_on_off") if th and th.get("ok") and th.get("available") else None
    out.append(_row("throttle on / off, 1M, fresh windows", ">= 0.85", th, th and th.get("n"),
                    1_000_000, "%s (%s/s against %s/s)"
                    % (_n(tr), _n(th["on"]["pushes_per_s"]), _n(th["off"]["pushes_per_s"]))
                    if tr else "", tr, lambda v: v >= 0.85, src("throttle")))
    fp = get("firstpush")
    lag = fp.get("lag_ms") if fp and fp.get("ok") else None
    out.append(_row("first push after due, p99 over 20 runs (ms)", "<= 100", fp,
                    fp and fp.get("runs"), 20,
                    "p99 %s, p50 %s, max %s ms over %s runs"
                    % (_n(lag["p99"]), _n(lag["p50"]), _n(lag["max"]), fp["runs"]) if lag else "",
                    lag and lag["p99"], lambda v: v <= 100, src("firstpush")))
    rss = get("rss")
    peaks = None
    if rss and rss.get("ok"):
        g, g2 = rss["growth"], rss["growth_again"]
        wk = max(v[1] for k, v in g2.items() if k.startswith("worker"))
        dp = max(v[1] for k, v in g2.items() if k.startswith("dispatcher"))
        peaks = (wk, dp, max(v[2] for v in g.values() if v[2] is not None),
                 max(v[2] for v in g2.values() if v[2] is not None))
    out.append(_row("worker / dispatcher peak RSS (MiB), flat in campaign size",
                    "<= 48 / 16, growth <= %g %%" % FLAT_PCT, rss,
                    rss and rss.get("sizes", [None, None])[1], 1_000_000,
                    "%s / %s after %s twice; largest growth from %s: %+.1f %%, then %+.1f %%"
                    % (_n(peaks[0]), _n(peaks[1]), _n(rss["sizes"][1]), _n(rss["sizes"][0]),
                       peaks[2], peaks[3]) if peaks else "", peaks,
                    lambda v: v[0] <= 48 and v[1] <= 16 and max(v[2], v[3]) <= FLAT_PCT,
                    src("rss")))
    return out


def render(table, smoke, header):
    """The table as text: HEADER, then one block per row."""
    lines = [header + (" -- smoke sizes, not the targets" if smoke else "")]
    for i, r in enumerate(table, 1):
        lines.append("%2d. %s" % (i, r["figure"]))
        lines.append("    measured %s | target %s | %s" % (r["measured"], r["target"], r["met"]))
        lines.append("    from %s%s" % (r["source"], " (load %.1f at its start)" % r["load"]
                                        if r.get("load") is not None else ""))
    return "\n".join(lines)


def selftest():
    fails = []

    def check(what, got, want):
        if got != want:
            fails.append("%s: got %r, want %r" % (what, got, want))

    check("pctl p99 of 20", pctl(list(range(1, 21)), 99), 20)
    check("pctl p50 of 20", pctl(list(range(1, 21)), 50), 10)
    check("pctl p50 of 5", pctl([5, 1, 4, 2, 3], 50), 3)
    check("pctl empty", pctl([], 50), None)
    # 6 s at 1,000/s, then 4,000/s for 10 s, a partial last second
    series = [[s, 1000] for s in range(6)] + [[s, 4000] for s in range(6, 16)] + [[16, 10]]
    ss = slow_start(series)
    check("slow start ratio", ss["ratio"], 0.25)
    check("slow start steady", ss["steady_per_s"], 4000)
    check("slow start too short", slow_start([[0, 5], [1, 5], [7, 3]]), None)
    g = rss_growth({"worker0": {"peak_rss_mib": 40.0}, "sink": {"peak_rss_mib": 5.0}},
                   {"worker0": {"peak_rss_mib": 44.0}, "sink": {"peak_rss_mib": 9.0}})
    check("rss growth", g, {"worker0": [40.0, 44.0, 10.0]})
    results = {
        "ceiling": {"ok": True, "requests_per_s": 90000.0},
        "e2e": {"ok": True, "n": 1_000_000, "ceiling_ratio": 0.7, "pushes_per_s": 63000.0,
                "cpu_us_per_push": 13.0, "slow_start": ss,
                "from_due": {"system_us_per_push": 29.0, "herald_us_per_push": 12.5,
                             "server_us_per_push": {"redis": 8.0, "mariadb": 6.0,
                                                    "kafka": 2.5}}},
        "peer": {"ok": True, "n": 200_000, "cpu_ratio_peer_herald": 11.0},
        "firstpush": {"ok": True, "runs": 20, "lag_ms": {"p50": 40, "p99": 120, "max": 120}},
        "rss": {"ok": True, "sizes": [200_000, 1_000_000, 1_000_000],
                "growth": {"worker0": [40.0, 41.0, 2.5], "dispatcher0": [14.0, 14.0, 0.0]},
                "growth_again": {"worker0": [41.0, 41.0, 0.0],
                                 "dispatcher0": [14.0, 15.0, 7.1]}},
        "dispatch": {"ok": False, "error": "boom"},
        "small": {"ok": True, "tasks": 100, "per_task": 10, "big_5000_over_small": 7.3,
                  "big_5000": {"pushes_per_s": 10162.0}, "small": {"pushes_per_s": 1387.0}},
    }
    t = {r["figure"].split(" ")[0] + str(i): r["met"] for i, r in enumerate(rows(results, {}))}
    check("ratio met", t["e2e0"], "met")
    check("cpu not met", t["herald1"], "NOT MET")
    check("system met", t["whole-system2"], "met")
    check("peer at another size", t["peer3"], "size 200,000, not 1,000,000")
    check("slow start not met", t["slow4"], "NOT MET")
    check("small at another size", t["many5"], "size 100 x 10, not 1,500 x 10")
    check("dispatch failed", t["10M6"], "FAILED")
    check("first push not met", t["first8"], "NOT MET")
    check("rss met", t["worker9"], "met")
    results["rss"]["growth_again"]["worker0"] = [41.0, 46.0, 12.2]
    check("rss grows again: not met",
          rows(results, {})[9]["met"], "NOT MET")
    text = render(rows(results, {"e2e": "bench/results/e2e-x.json"}), True, "issue 19")
    check("render smoke header", text.splitlines()[0], "issue 19 -- smoke sizes, not the targets")
    check("render source", "from bench/results/e2e-x.json" in text, True)
    for f in fails:
        sys.stderr.write("issue19 selftest: %s\n" % f)
    if not fails:
        print("issue19 selftest: 1 passed, 0 failed")
    return 1 if fails else 0


def table_of(paths):
    """The table of the result files PATHS (bench/results/<scenario>-*.json),
    the newest per scenario; the header says the files' loads."""
    results, files = {}, {}
    for path in paths:
        with open(path) as f:
            res = json.load(f)
        name = res["scenario"]
        if name not in results or res["started"] > results[name]["started"]:
            results[name], files[name] = res, path
    loads = sorted("%s %.1f" % (k, v.get("load", v["machine"]["loadavg_at_start"][0]))
                   for k, v in results.items() if "machine" in v)
    smoke = any(v.get("smoke") for v in results.values())
    return render(rows(results, files), smoke,
                  "issue 19 (from %d result files; load at start: %s)"
                  % (len(files), ", ".join(loads)))


if __name__ == "__main__":
    if sys.argv[1:] == ["selftest"]:
        sys.exit(selftest())
    if sys.argv[1:2] == ["table"] and sys.argv[2:]:
        print(table_of(sys.argv[2:]))
        sys.exit(0)
    sys.stderr.write(__doc__)
    sys.exit(2)
