#!/usr/bin/env python3
"""bench/throttle_lua.py: Redis CPU per call of throttle.lua variants
(issue 19; docs/performance.md, docs/throttle.md "Cost").

    bench/throttle_lua.py [--n N] [--keys K] [--node-bytes B] [--aof] [--callgrind]
                          [--plain [get|noget]] [--passes P] [--rewrite-pct R]
                          [--window-ms W] [--scope S] [--expire] SCRIPT.lua [SCRIPT.lua ...]

For each script it starts a private redis-server (no persistence unless
--aof, which sets appendfsync everysec as the local stack does;
auto-aof-rewrite-percentage R, 100 by default as Redis ships, 400 as the
stack, 0 for no rewrite; stream-node-max-bytes B, 4096 by default as Redis
ships) on a loopback port of the stack's band (16379 + HERALD_PORT_OFFSET +
20), loads the script and calls it as the worker does (EVALSHA of K keys,
100 by default as the worker sends to one server, 1 as to a Redis Cluster
and as every script before issue 19's batches took; pipelines of 1,000
recipients; limit 5, window W ms, 3,600,000 by default as bench/run
throttle; keys bench:thr:S:<uid>, S "s" by default, "bench-<13 digits>"
the length of bench/run's): N recipients (200,000) on fresh keys (a new
scope), then the same N again (every window holds this task's entry: the
redelivery case), then N by a second task (the window is read and a second
entry added); --passes P runs the first P of these three.  It reports, per
pass, the Redis CPU (utime + stime of the server, /proc) per recipient in
µs and the wall per recipient, the commands' usec (INFO commandstats: wall
time inside each command, a script's nested commands counted both in it and
on their own) per recipient, the forks (AOF rewrites) and expired keys, and
after the first pass the server's used_memory per window and MEMORY USAGE
of one window; with --aof also the AOF bytes written per recipient (what
makes a campaign's AOF grow, and Redis rewrite it).  --expire then waits
until the server's active expiry has deleted the N windows (give a short
--window-ms) and reports its Redis CPU and AOF bytes (the DELs) per window:
what a campaign's windows cost when they expire, after it.  Give the
committed script and an older one to compare, e.g.
`bench/throttle_lua.py --keys 1 <(git show 1288c18:common/lua/throttle.lua)` against
`bench/throttle_lua.py common/lua/throttle.lua`.
Each variant runs on its own fresh server, one after the other: run the
pair twice, A B A B, on a busy machine.

--callgrind runs the server under valgrind's callgrind and reports, per
pass, the instructions the server executed per recipient instead of its
CPU: the same count on a busy machine as on an idle one (give --n 20000:
callgrind is some 50 times slower).  --plain sends each recipient's first
step as a plain command, SET key <task>:<ms> NX PX window GET (--plain or
--plain get) or SET key <task>:<ms> NX PX window (--plain noget: +OK when
written), ms from one TIME per round trip, and the script only for the keys
that answered something else than nil (get) or +OK (noget): the shape
issue 33 measured twice and left (docs/throttle.md "Cost")."""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "lib"))
import herald_test  # noqa: E402,F401  (Debian's dist-packages on sys.path)
from herald_test import procs  # noqa: E402
import redis  # noqa: E402

PORT = 16379 + int(os.environ.get("HERALD_PORT_OFFSET") or 0) + 20
LIMIT = 5
BATCH = 1000


def aof_size(r):
    """The bytes the AOF holds (INFO persistence aof_current_size: written,
    the everysec fsync aside), or None without AOF."""
    info = r.info("persistence")
    return info.get("aof_current_size") if info.get("aof_enabled") else None


def plain_sets(r, batch, task, plain, window_ms):
    """The keys of BATCH whose SET NX PX GET (--plain get; SET NX PX with
    --plain noget), sent as plain commands in one round trip, found the key
    there; the others passed (verdict 1)."""
    sec, usec = r.time()
    stamp = "%s:%d" % (task, sec * 1000 + usec // 1000)
    pipe = r.pipeline(transaction=False)
    tail = ("GET",) if plain == "get" else ()
    for key in batch:
        pipe.execute_command("SET", key, stamp, "NX", "PX", window_ms, *tail)
    written = True if plain == "noget" else None
    return [k for k, v in zip(batch, pipe.execute(raise_on_error=False)) if v != written]


def calls(r, sha, keys, task, a):
    """Every key once, A.KEYS keys per call, pipelined BATCH keys per
    round trip; the verdicts' counts."""
    verdicts = {0: 0, 1: 0, 2: 0}
    for i in range(0, len(keys), BATCH):
        pipe = r.pipeline(transaction=False)
        batch = keys[i:i + BATCH]
        if a.plain:
            rest = plain_sets(r, batch, task, a.plain, a.window_ms)
            verdicts[1] += len(batch) - len(rest)
            batch = rest
        sizes = []
        for j in range(0, len(batch), a.keys):
            group = batch[j:j + a.keys]
            sizes.append(len(group))
            pipe.evalsha(sha, len(group), *group, LIMIT, a.window_ms, task)
        for v, n in zip(pipe.execute(), sizes):
            # {now_ms, verdict + 4 * count, ...} (issue 33); before it
            # {now_ms, verdict, count, ...}; a one-key script from before
            # the batches answers {verdict, now_ms, count} (a verdict is 0..2).
            if int(v[0]) <= 2:
                codes = v[:1]
            elif len(v) == 1 + n:
                codes = [int(c) % 4 for c in v[1:]]
            else:
                codes = v[1::2]
            for code in codes:
                verdicts[int(code)] += 1
    return verdicts


def expiry(r, pid, n):
    """Redis CPU and AOF bytes per window while its active expiry deletes
    the N windows (--expire: after the passes, until expired_keys reaches N,
    at most 10 minutes)."""
    c0, t0, f0 = procs.cpu_of(pid), time.time(), aof_size(r)
    while r.info("stats")["expired_keys"] < n and time.time() < t0 + 600:
        time.sleep(0.2)
    c1, t1, f1 = procs.cpu_of(pid), time.time(), aof_size(r)
    return {"cpu_us_per_window": round((c1 - c0) * 1e6 / n, 2), "wall_s": round(t1 - t0, 1),
            "expired": r.info("stats")["expired_keys"],
            "aof_bytes_per_window": None if f0 is None else round((f1 - f0) / n, 1)}


class Callgrind:
    """The server's instructions (callgrind's Ir) since the last mark."""

    def __init__(self, pid, out_dir):
        self.pid, self.out_dir = pid, out_dir

    def mark(self):
        subprocess.run(["callgrind_control", "-z", str(self.pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)

    def since(self):
        before = set(glob.glob(os.path.join(self.out_dir, "cg.*")))
        subprocess.run(["callgrind_control", "-d", str(self.pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        (dump,) = set(glob.glob(os.path.join(self.out_dir, "cg.*"))) - before
        with open(dump) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        raise RuntimeError("no totals in " + dump)


def run(path, a):
    with open(path) as f:
        source = f.read()
    work = tempfile.mkdtemp(prefix="throttle-lua-")
    argv = ["redis-server", "--port", str(PORT), "--bind", "127.0.0.1", "--dir", work,
            "--save", "", "--appendonly", "yes" if a.aof else "no",
            "--appendfsync", "everysec", "--stream-node-max-bytes", str(a.node_bytes),
            "--auto-aof-rewrite-percentage", str(a.rewrite_pct)]
    if a.callgrind:
        argv = ["valgrind", "--tool=callgrind",
                "--callgrind-out-file=" + os.path.join(work, "cg.%p")] + argv
    srv = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cg = Callgrind(srv.pid, work) if a.callgrind else None
    out = {"script": path}
    try:
        r = redis.Redis(host="127.0.0.1", port=PORT, socket_timeout=60)
        for _ in range(600 if a.callgrind else 100):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        sha = r.script_load(source)
        keys = ["bench:thr:%s:%d" % (a.scope, 10 ** 9 + i) for i in range(a.n)]
        base_mem = r.info("memory")["used_memory"]
        for name, task in (("fresh", 1), ("again", 1), ("second task", 2))[:a.passes]:
            r.config_resetstat()
            c0, t0, f0 = procs.cpu_of(srv.pid), time.time(), aof_size(r)
            if cg:
                cg.mark()
            verdicts = calls(r, sha, keys, task, a)
            ir = cg.since() if cg else None
            c1, t1, f1 = procs.cpu_of(srv.pid), time.time(), aof_size(r)
            stats = r.info("commandstats")
            forks = r.info("stats")
            out[name] = {"cpu_us_per_recipient": round((c1 - c0) * 1e6 / a.n, 2),
                         "wall_us_per_recipient": round((t1 - t0) * 1e6 / a.n, 2),
                         "verdicts": verdicts,
                         "forks": forks["total_forks"], "expired": forks["expired_keys"],
                         "usec": {c: round(v["usec"] / a.n, 2) for c, v in stats.items()
                                  if v["usec"] * 20 > sum(x["usec"] for x in stats.values())}}
            if ir is not None:
                out[name]["instructions_per_recipient"] = round(ir / a.n)
            if f0 is not None:
                out[name]["aof_bytes_per_recipient"] = round((f1 - f0) / a.n, 1)
            if name == "fresh":
                out["bytes_per_window"] = round((r.info("memory")["used_memory"] - base_mem)
                                                / a.n)
                out["memory_usage_one"] = r.memory_usage(keys[0])
        out["memory_usage_two"] = r.memory_usage(keys[0])
        if a.expire:
            out["expiry"] = expiry(r, srv.pid, a.n)
        return out
    finally:
        srv.terminate()
        srv.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scripts", nargs="+")
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--node-bytes", type=int, default=4096)
    ap.add_argument("--aof", action="store_true")
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--plain", nargs="?", const="get", choices=("get", "noget"))
    ap.add_argument("--passes", type=int, default=3, choices=(1, 2, 3))
    ap.add_argument("--scope", default="s")
    ap.add_argument("--rewrite-pct", type=int, default=100)
    ap.add_argument("--window-ms", type=int, default=3_600_000)
    ap.add_argument("--expire", action="store_true")
    a = ap.parse_args()
    with open("/proc/loadavg") as f:
        print("load %s; n %d, %d keys per call%s, stream-node-max-bytes %d, aof %s%s"
              % (f.read().split()[0], a.n, a.keys,
                 ", first step as a plain SET" if a.plain else "", a.node_bytes,
                 "everysec" if a.aof else "off", ", under callgrind" if a.callgrind else ""))
    for path in a.scripts:
        res = run(path, a)
        print("%s: bytes/window %s (MEMORY USAGE %s, with 2 entries %s)"
              % (res["script"], res["bytes_per_window"], res["memory_usage_one"],
                 res["memory_usage_two"]))
        for name in ("fresh", "again", "second task")[:a.passes]:
            p = res[name]
            print("  %-12s Redis CPU %6.2f us/recipient, wall %6.2f us/recipient, verdicts %s%s%s"
                  "\n               commands' usec/recipient %s, forks %d, expired %d"
                  % (name, p["cpu_us_per_recipient"], p["wall_us_per_recipient"], p["verdicts"],
                     ", AOF %s bytes/recipient" % p["aof_bytes_per_recipient"]
                     if "aof_bytes_per_recipient" in p else "",
                     ", %d instructions/recipient" % p["instructions_per_recipient"]
                     if "instructions_per_recipient" in p else "", p["usec"], p["forks"],
                     p["expired"]))
        if "expiry" in res:
            print("  expiry       %s" % res["expiry"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
