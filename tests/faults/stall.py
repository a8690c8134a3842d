"""tests/faults/stall.py: how long a fault stopped the pushing, read from
the workers' logs and the sink's record (tests/faults/run).  Apart from the
harness so that its unit test (test_stall.py) needs none of the harness's
clients."""
import calendar
import re
import time


# A chunk is no longer this worker's after one of these (wk_worker.c).
CHUNK_ENDS = ("chunk_done", "chunk_abandoned", "chunk_dropped", "chunk_parked",
              "chunk_cancelled", "chunk_cancel_foreign", "chunk_busy")
LOG_CHUNK = re.compile(rb'ts=(\S+) .*?event=(\w+) .*?task=(\d+) seq=(\d+)(?:.*? partition=(\d+))?')
LOG_REVOKED = re.compile(rb' event=partitions_revoked ')


def log_ts(raw):
    """Seconds since the epoch of a log line's ts= (2026-11-26T11:17:51.123Z)."""
    whole, _, frac = raw.decode().rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def chunk_events(path, start=0, end=None):
    """(ts, event, (task, seq), partition) of every chunk event in
    PATH[start:end], and (ts, "partitions_revoked", None, None) of every
    revoke; partition is None where the line names none (only chunk_start
    does)."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read() if end is None else f.read(end - start)
    out = []
    for line in data.splitlines():
        m = LOG_CHUNK.search(line)
        if m:
            out.append((log_ts(m.group(1)), m.group(2).decode(),
                        (int(m.group(3)), int(m.group(4))),
                        None if m.group(5) is None else int(m.group(5))))
        elif LOG_REVOKED.search(line):
            out.append((log_ts(line.split()[0][3:]), "partitions_revoked", None, None))
    return out


def kill_stall(mark, logs):
    """Seconds from a kill -9 until the dead worker's work went on, as
    (first, last); (0, 0) when it had no chunk open, None for one that
    never went on.

    first: until any worker started a chunk of a partition the dead worker
    held (the partitions it started chunks of since its last revoke; the
    eager assignor hands out whole assignments) or one of its open chunks
    again: detection, rebalance and lease.  Not the first of its open
    chunks alone: its new owner may start the partitions' other chunks
    first, the ones the dead worker had received but not started (seed
    189584 of CI's short matrix, 2026-12-03: the dead worker3's partitions
    went on 5.4 s after the kill, its four open chunks 10.3 s after, each
    behind the new owner's four slots filled by that backlog).
    last: until the last of its open chunks was taken up again (chunk_start,
    or chunk_done of an already empty redelivery); they wait for free slots
    of their new owner (max_chunks_in_flight), which is capacity, not a
    stall."""
    pr, start, end, killed_at = mark
    open_chunks, held = set(), set()
    for _ts, event, key, part in chunk_events(pr.log, start, end):
        if event == "chunk_start":
            open_chunks.add(key)
            held.add(part)
        elif event == "partitions_revoked":
            held.clear()
        elif event in CHUNK_ENDS:
            open_chunks.discard(key)
    if not open_chunks:
        return 0.0, 0.0
    later, resumed = {}, None
    for path in logs:
        for ts, event, key, part in chunk_events(path):
            if ts < killed_at or event not in ("chunk_start", "chunk_done"):
                continue
            if key in open_chunks:
                later[key] = min(later.get(key, ts), ts)
            if key in open_chunks or (event == "chunk_start" and part in held):
                resumed = ts if resumed is None else min(resumed, ts)
    delays = [later[k] - killed_at if k in later else None for k in open_chunks]
    return (None if resumed is None else resumed - killed_at), (None if None in delays else max(delays))


def sink_stall(record, since, uids=None):
    """The longest gap (s) between consecutive 2xx requests at the sink from
    SINCE (wall s) to the last one: how long pushing stood still.  UIDS (a
    set of str): only their requests count."""
    times = []
    with open(record, "rb") as f:
        for raw in f:
            parts = raw.split()
            if (len(parts) == 3 and parts[1][:1] == b"2"
                    and (uids is None or parts[0].decode() in uids)):
                times.append(int(parts[2]) / 1000.0)
    times = sorted(t for t in times if t >= since)
    gap, prev = 0.0, since
    for t in times:
        gap, prev = max(gap, t - prev), t
    return gap
