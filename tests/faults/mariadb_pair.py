"""tests/faults/mariadb_pair.py: a MariaDB primary and a replica with real
replication on loopback, for the fault matrix's mysql-failover row (issue
34), and the switch that herald reaches them through.

Both servers are private to one run: their data directories, sockets and
logs live in DIR, each on a port the kernel picked.  The primary writes a
binary log (row format, GTIDs); the replica replicates it
(MASTER_USE_GTID=slave_pos, read_only) from the first transaction on, so the
herald user, the database and the tables (`heraldctl migrate` through the
switch) reach it by replication, as they would in production.

herald names one MySQL host; in production that is an address that follows
the primary — a proxy (MaxScale, ProxySQL) or the Kubernetes Service an
operator points at the promoted pod (docs/operations.md) — not a list of
hosts in herald's configuration.  The switch here plays that part: a
FaultProxy whose upstream the harness moves to the replica once it is
promoted.  fail_over() is the operator's work: kill -9 of the primary, the
replica stops replicating, drops read_only, and the switch points at it;
connections to the dead primary are cut (a Service's endpoints change the
same way). """
import os
import signal
import subprocess
import time

from faultproxy import FaultProxy
from herald_test.procs import free_port

START_TIMEOUT_S = 60


class Server:
    """One mariadbd of the pair."""

    def __init__(self, base, name, server_id):
        self.name, self.server_id = name, server_id
        self.data = os.path.join(base, name)
        self.sock = os.path.join(base, name + ".sock")
        self.log = os.path.join(base, name + ".log")
        self.port = free_port()
        self.p = None

    def start(self):
        user = ["--user=root"] if os.geteuid() == 0 else []
        if not os.path.isdir(os.path.join(self.data, "mysql")):
            r = subprocess.run(["mariadb-install-db", "--no-defaults", "--datadir=" + self.data,
                                "--auth-root-authentication-method=socket",
                                "--auth-root-socket-user=" + os.environ.get("USER", "root"),
                                "--skip-test-db"] + user,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=120)
            if r.returncode != 0:
                raise RuntimeError("mariadb-install-db %s: %s" % (self.name, r.stdout[-500:]))
        tmp = self.data + "-tmp"
        os.makedirs(tmp, exist_ok=True)
        with open(self.log, "ab") as out:
            self.p = subprocess.Popen(
                ["mariadbd", "--no-defaults", "--datadir=" + self.data,
                 "--bind-address=127.0.0.1", "--port=%d" % self.port, "--socket=" + self.sock,
                 "--skip-name-resolve", "--max-connections=500", "--tmpdir=" + tmp,
                 "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci",
                 "--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=1",
                 "--server-id=%d" % self.server_id, "--log-bin=" + self.name + "-bin",
                 "--binlog-format=ROW", "--log-bin-trust-function-creators=1",
                 "--sync-binlog=1", "--log-slave-updates=1"] + user,
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.admin("SELECT 1", check=False).returncode != 0:
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mariadbd %s did not start (log %s)" % (self.name, self.log))
            time.sleep(0.2)

    def admin(self, sql, check=True, names=False):
        """SQL as root through the socket; NAMES: with the column names (a
        \\G query's "Field: value" lines)."""
        r = subprocess.run(["mariadb", "--no-defaults", "--socket=" + self.sock, "-uroot", "-B"]
                           + ([] if names else ["-N"]) + ["-e", sql],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError("%s: %s: %s" % (self.name, sql[:60], r.stdout.strip()))
        return r

    def kill(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait(30)

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()


class MariadbPair:
    def __init__(self, base):
        os.makedirs(base, exist_ok=True)
        self.primary = Server(base, "primary", 1)
        self.replica = Server(base, "replica", 2)
        self.switch = None
        self.promoted = False

    def start(self):
        """Both servers up, the herald user on the primary, the replica
        replicating; the switch in front of the primary."""
        self.primary.start()
        self.primary.admin(
            "CREATE DATABASE IF NOT EXISTS herald CHARACTER SET utf8mb4 "
            "COLLATE utf8mb4_unicode_ci; "
            "CREATE USER IF NOT EXISTS 'herald'@'127.0.0.1' IDENTIFIED BY 'herald'; "
            "GRANT ALL PRIVILEGES ON herald.* TO 'herald'@'127.0.0.1'; "
            "CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'repl'; "
            "GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1'")
        self.replica.start()
        self.replica.admin(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='repl', "
            "MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos; START SLAVE; "
            "SET GLOBAL read_only = 1" % self.primary.port)
        self.switch = FaultProxy(self.primary.port)

    def lag(self):
        """The replica's Seconds_Behind_Master and its GTID position against
        the primary's, as text."""
        r = self.replica.admin("SHOW SLAVE STATUS\\G", check=False, names=True).stdout
        behind = next((ln.split(":", 1)[1].strip() for ln in r.splitlines()
                       if "Seconds_Behind_Master" in ln), "?")
        mine = self.replica.admin("SELECT @@gtid_slave_pos", check=False).stdout.strip()
        theirs = self.primary.admin("SELECT @@gtid_binlog_pos", check=False).stdout.strip()
        return "seconds behind %s, replica at %s, primary at %s" % (behind, mine, theirs)

    def fail_over(self):
        """kill -9 of the primary; the replica applies what it received,
        stops replicating and takes writes; the switch points at it.
        Seconds from the kill until the switch moved."""
        killed = time.monotonic()
        self.primary.kill()
        self.switch.cut()
        # What the replica received is applied before it takes writes.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st = self.replica.admin("SHOW SLAVE STATUS\\G", check=False, names=True).stdout
            if "Slave_SQL_Running_State: Slave has read all relay log" in st:
                break
            time.sleep(0.1)
        self.replica.admin("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0")
        self.switch.retarget(self.replica.port)
        self.promoted = True
        return time.monotonic() - killed

    def close(self):
        if self.switch:
            self.switch.close()
        self.replica.stop()
        self.primary.stop()
