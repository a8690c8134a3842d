#!/usr/bin/env python3
"""bench/chunkmove.py: Redis's own time in common/lua/chunk_move.lua per chunk,
against the size of the set it cuts from (docs/performance.md, "Sharded
tasks").  N uids split over S sets as a task of S shards holds them
(zlib.crc32 of the decimal uid mod S, common/hr_shard.c), then cut in
chunks of 5,000, shard after shard in turn, until every set is empty.
Redis's time is the EVALSHA line of INFO commandstats.

    bench/chunkmove.py PORT N SHARDS [yes|no]

PORT: a private redis-server it may FLUSHALL (never the stack's); the last
argument sets appendonly for the run (default no: the move alone).  Any AOF
rewrite the load set off ends before the cut is timed."""
import os
import sys
import time
import zlib

sys.path.append("/usr/lib/python3/dist-packages")
import redis  # noqa: E402

LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common", "lua",
                   "chunk_move.lua")
CHUNK = 5000


def key(shard, name):
    return ("x:{t1}:" if shard == 0 else "x:{t1:s%d}:" % shard) + name


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__)
        return 2
    port, n, shards = int(argv[1]), int(argv[2]), int(argv[3])
    aof = argv[4] if len(argv) == 5 else "no"
    r = redis.Redis(host="127.0.0.1", port=port)
    r.flushall()
    r.config_set("appendonly", aof)
    sha = r.script_load(open(LUA).read())
    t0 = time.time()
    pipe, batch = r.pipeline(transaction=False), [[] for _ in range(shards)]
    for i in range(1, n + 1):
        uid = str(1_000_000_000 + i)
        k = zlib.crc32(uid.encode()) % shards if shards > 1 else 0
        batch[k].append(uid)
        if len(batch[k]) == 1000:
            pipe.sadd(key(k, "subs"), *batch[k])
            batch[k] = []
        if i % 200_000 == 0:
            pipe.execute()
    for k in range(shards):
        if batch[k]:
            pipe.sadd(key(k, "subs"), *batch[k])
    pipe.execute()
    load = time.time() - t0
    while r.info("persistence").get("aof_rewrite_in_progress"):
        time.sleep(0.5)
    r.config_resetstat()
    t0 = time.time()
    seq, live, chunks = [0] * shards, list(range(shards)), 0
    while live:
        for k in list(live):
            seq[k] += 1
            s = (seq[k] - 1) * shards + k + 1
            moved = r.evalsha(sha, 3, key(k, "subs"), key(k, "chunk:%d" % s), key(k, "pending"),
                              CHUNK, s, int(time.time() * 1000))
            if moved == 0:
                live.remove(k)
            else:
                chunks += 1
                r.delete(key(k, "chunk:%d" % s))
    wall = time.time() - t0
    usec = r.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0)
    print("n=%d shards=%d (%d per set) aof=%s load=%.1fs chunks=%d wall=%.1fs redis=%.1fs "
          "per_chunk=%.2fms load_avg=%s" % (n, shards, n // shards, aof, load, chunks, wall,
                                            usec / 1e6, usec / 1e3 / max(chunks, 1),
                                            open("/proc/loadavg").read().split()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
