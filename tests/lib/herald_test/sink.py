"""herald_test.sink: herald-sink (bench/sink.c) for tests: its command line
and what its --record file ("uid status ms" lines) says."""


def sink_argv(binary, port, record, threads=2, extra=()):
    return [binary, "--listen", "127.0.0.1:%d" % port, "--record", record,
            "--threads", str(threads)] + list(extra)


def sink_uids(path):
    """The distinct uids the record shows answered with a 2xx."""
    got = set()
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[1].startswith("2"):
                    got.add(int(parts[0]))
    except OSError:
        pass
    return got
