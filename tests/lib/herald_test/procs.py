"""herald_test.procs: processes, ports and bounded waits.

A Proc is one program with its output appended to a log file; stop() sends
SIGTERM and SIGKILLs after a bounded wait, so no test hangs on a process."""
import fcntl
import os
import signal
import socket
import subprocess
import tempfile
import time

STOP_TIMEOUT_S = 30
KILL_WAIT_S = 10


def wait_until(fn, timeout_s, step=0.1):
    """Calls FN until it returns true or TIMEOUT_S pass; whether it did."""
    end = time.time() + timeout_s
    while True:
        if fn():
            return True
        if time.time() >= end:
            return False
        time.sleep(step)


def cpu_of(pid):
    """utime + stime of process PID in seconds, None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # utime and stime are fields 14 and 15 of stat; [0] here is field 3.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# The ports free_port() handed out in the last PORT_HOLD_S, by any process
# of this user: "<port> <unix time>" lines in one file, rewritten under an
# flock.  The kernel picks bind(0)'s port at random and forgets it on close,
# so two calls before the first daemon binds can return the same port: CI
# saw a test's third dispatcher fail with "Address already in use" on the
# second one's API port 11 ms after that one started.  bind(0) draws from
# the odd ports of 32768-60999 (connect() takes the even ones first), 14,116
# ports: n calls repeat about n * n / 28,232 of them, 140 in 2,000.  Tests
# run side by side (meson's two, the cluster step beside the fault matrix),
# so one process's memory is not enough.  A port is bound well within the
# hold; after it the kernel no longer hands out a port whose daemon still
# runs.
PORT_REGISTRY = os.path.join(tempfile.gettempdir(), "herald-ports-%d" % os.getuid())
PORT_HOLD_S = 300
FREE_PORT_TRIES = 100


def _claim(port):
    """Whether PORT was free to claim (no claim in the last PORT_HOLD_S);
    claims it if so."""
    # Not followed if a link, and ours: another user's file in the temp dir
    # is neither truncated nor trusted.
    fd = os.open(PORT_REGISTRY, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_APPEND, 0o600)
    if os.fstat(fd).st_uid != os.getuid():
        os.close(fd)
        raise OSError("%s belongs to another user" % PORT_REGISTRY)
    with open(fd, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        now = time.time()
        held = {}
        for line in f:
            fields = line.split()
            try:
                if len(fields) == 2 and now - float(fields[1]) < PORT_HOLD_S:
                    held[int(fields[0])] = fields[1]
            except ValueError:
                pass  # a torn or foreign line: dropped with the rewrite
        if port in held:
            return False
        held[port] = "%.3f" % now
        f.seek(0)
        f.truncate()
        f.write("".join("%d %s\n" % kv for kv in held.items()))
        return True


def free_port():
    """A loopback port the kernel says is free now and that no process of
    this user has been handed in the last PORT_HOLD_S."""
    for _ in range(FREE_PORT_TRIES):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if _claim(port):
            return port
    raise OSError("no loopback port unclaimed in %s in %d tries"
                  % (PORT_REGISTRY, FREE_PORT_TRIES))


def port_open(port, timeout_s=0.5):
    """Whether something accepts connections on loopback PORT."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def stop_popen(p, timeout_s=STOP_TIMEOUT_S, on_kill=None):
    """SIGTERM, then SIGKILL after TIMEOUT_S (ON_KILL() is called first);
    the exit status."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            if on_kill:
                on_kill()
            p.kill()
            p.wait(timeout=KILL_WAIT_S)
    return p.returncode


class Proc:
    """NAME run as ARGV with stdout and stderr appended to LOG; ENV is added
    to the environment.  start() may be called again after a stop (a
    restart); log_start is where the current process's lines begin."""

    def __init__(self, name, argv, log, env=None, new_session=False):
        self.name, self.argv, self.log, self.env = name, argv, log, env
        self.new_session = new_session
        self.p = None
        self.starts = 0
        self.log_start = 0

    def start(self, env=None):
        e = dict(os.environ)
        e.update(self.env or {})
        e.update(env or {})
        with open(self.log, "ab") as out:
            self.log_start = out.tell()
            self.p = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env=e,
                                      start_new_session=self.new_session)
        self.starts += 1
        return self

    @property
    def pid(self):
        return self.p.pid

    @property
    def returncode(self):
        return self.p.returncode if self.p else None

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def signal(self, sig):
        if self.alive():
            self.p.send_signal(sig)

    def stop(self, timeout_s=STOP_TIMEOUT_S, on_kill=None):
        """See stop_popen; None when never started."""
        return stop_popen(self.p, timeout_s, on_kill) if self.p else None

    def kill(self):
        if self.alive():
            self.p.kill()
            try:
                self.p.wait(KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                pass

    def text(self):
        """The whole log."""
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")

    def tail(self, n=15):
        return "".join(self.text().splitlines(True)[-n:])

    def log_has(self, event):
        """Whether the log has a logfmt line of EVENT."""
        return ("event=%s " % event) in self.text()


if __name__ == "__main__":
    # python3 tests/lib/herald_test/procs.py N: N free ports on one line, for
    # shell scripts.
    import sys
    print(" ".join(str(free_port()) for _ in range(int(sys.argv[1]))))
