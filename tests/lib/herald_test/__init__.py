"""herald_test: what herald's Python test programs share (bench/run,
tests/faults/run, the Python integration tests).

  stack     the local stack's settings, read from the stack.json that
            `deploy/local/stack up` writes beside herald.yaml
  procs     processes with a log file (SIGTERM, then SIGKILL, bounded),
            free ports, bounded waits
  clients   Redis and MySQL through the packaged drivers, heraldctl
  sink      herald-sink: start it, read its --record file (uids, times)
  recipients  the recipients section of issue 28's tests (categories, keys)
  receiver  an HTTP server on loopback that hands each POST to a test's answer
  certs     a test CA and certificates signed by it (openssl)

Third-party modules are Debian bookworm's (deploy/local/packages.txt:
python3-redis, python3-pymysql).  An interpreter that is not Debian's own
(a pyenv python3 first in PATH, say) does not see Debian's dist-packages, so
that directory is appended to sys.path when the drivers are not importable
otherwise: both are pure Python."""
import sys

DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"

try:
    import pymysql  # noqa: F401
    import redis  # noqa: F401
except ImportError:
    if DEBIAN_DIST_PACKAGES not in sys.path:
        sys.path.append(DEBIAN_DIST_PACKAGES)
