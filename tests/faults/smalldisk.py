"""tests/faults/smalldisk.py: a server's data directory on a small
filesystem that the fault matrix's disk-full row fills up (issue 34).

SmallDisk(stack, server, path) moves PATH (MariaDB's or Kafka's data
directory of the harness's own stack) onto a tmpfs of its size plus
SPARE_MB: the server is stopped (`deploy/local/stack stop-one`), a tmpfs is
mounted at PATH.small, the data copied onto it and bind-mounted over PATH,
and the server started again on it.  fill() writes a ballast file until the
filesystem is full (ENOSPC); drain() deletes it, so the space returns.
restore() stops the server, copies what it wrote back to the directory
underneath, unmounts both and starts it again: the stack is as it was,
plus the run's data.

Needs root (mount); the harness checks that before the row runs. """
import os
import shutil
import subprocess

SPARE_MB = 16
FILL_BLOCK = 1 << 20


def _run(*argv):
    r = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv[:3]), r.stdout.strip()))
    return r.stdout


def _du_bytes(path):
    """What PATH's files take on disk (not their apparent size: Kafka's
    index files are preallocated sparse)."""
    return int(_run("du", "-s", "-B1", path).split()[0])


class SmallDisk:
    def __init__(self, stack, server, path):
        self.stack, self.server, self.path = stack, server, path
        self.small = path.rstrip("/") + ".small"
        self.ballast = os.path.join(self.small, "ballast")
        self.mounted = self.bound = False

    @staticmethod
    def probe():
        """None when tmpfs can be mounted here, else why not."""
        if os.geteuid() != 0:
            return "not root (mount needs it)"
        return None

    def move(self):
        """The data directory onto its small filesystem; its size in MB."""
        size = (_du_bytes(self.path) >> 20) + SPARE_MB
        self.stack.stop_one(self.server)
        try:
            os.makedirs(self.small, exist_ok=True)
            _run("mount", "-t", "tmpfs", "-o", "size=%dm" % size, "herald-faults-disk", self.small)
            self.mounted = True
            _run("cp", "-a", self.path + "/.", self.small)
            _run("mount", "--bind", self.small, self.path)
            self.bound = True
        finally:
            self.stack.start_one(self.server)
        return size

    def fill(self):
        """Writes the ballast until the filesystem is full; bytes written."""
        n = 0
        block = b"\0" * FILL_BLOCK
        with open(self.ballast, "wb", buffering=0) as f:
            while True:
                try:
                    n += f.write(block)
                except OSError:
                    break
        # Block by block fills to the last whole block; the rest too.
        try:
            with open(self.ballast + "-tail", "wb", buffering=0) as f:
                while f.write(b"\0" * 4096):
                    n += 4096
        except OSError:
            pass
        return n

    def drain(self):
        for p in (self.ballast, self.ballast + "-tail"):
            if os.path.exists(p):
                os.unlink(p)

    def free_mb(self):
        st = os.statvfs(self.small)
        return st.f_bavail * st.f_frsize / float(1 << 20)

    def restore(self):
        """Back onto the stack's own disk, with what was written meanwhile."""
        if not self.mounted:
            return
        self.drain()
        self.stack.stop_one(self.server)
        try:
            if self.bound:
                _run("umount", self.path)
                self.bound = False
            for name in os.listdir(self.path):
                p = os.path.join(self.path, name)
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p)
                else:
                    os.unlink(p)
            _run("cp", "-a", self.small + "/.", self.path)
            _run("umount", self.small)
            self.mounted = False
            os.rmdir(self.small)
        finally:
            self.stack.start_one(self.server)
