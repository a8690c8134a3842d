"""herald_test.sink: herald-sink (bench/sink.c) for tests: its command line
and what its --record file ("uid status ms" lines) says."""
import time


def sink_argv(binary, port, record, threads=2, extra=()):
    return [binary, "--listen", "127.0.0.1:%d" % port, "--record", record,
            "--threads", str(threads)] + list(extra)


def sink_uids(path, want=(), timeout_s=5.0):
    """The distinct uids the record shows answered with a 2xx.  With WANT,
    reads again (bounded by TIMEOUT_S) until they are all in: the sink writes
    its record from per-thread buffers every 100 ms, so a campaign MySQL
    calls done may still be on its way to the file."""
    want = set(want)
    deadline = time.monotonic() + timeout_s
    while True:
        got = _read_uids(path)
        if want <= got or time.monotonic() >= deadline:
            return got
        time.sleep(0.1)


def sink_times(path):
    """{uid: recv_ms of its first 2xx answer} as the record shows them."""
    got = {}
    for parts in _answered(path):
        if len(parts) >= 3:
            got.setdefault(int(parts[0]), int(parts[2]))
    return got


def _read_uids(path):
    return {int(parts[0]) for parts in _answered(path)}


def _answered(path):
    """The record's lines answered with a 2xx, split (none when the file
    is not there yet)."""
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[1].startswith("2"):
                    yield parts
    except OSError:
        pass
