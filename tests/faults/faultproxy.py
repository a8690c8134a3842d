"""tests/faults/faultproxy.py: a TCP fault proxy for the fault matrix's
network rows (issue 34), standard library only.

A FaultProxy listens on a loopback port and forwards every connection to
one upstream (Redis, MariaDB, a Kafka broker, the push provider).  Its mode
applies to every connection, open or new, from the moment it is set:

  pass       bytes go through as they come
  latency    every read is delivered LATENCY later, in order, both ways
  bandwidth  at most RATE bytes/s per direction of each connection
  blackhole  accepts and never answers: a new connection is not connected
             upstream, an open one stops reading and writing (the kernel's
             buffers fill up as on a lost route); when the mode ends, what
             was held goes through, as TCP's retransmissions deliver it
             when a partition heals
  reset      once every RESET_EVERY_S, the next reply (upstream to client)
             read on any connection is cut: half of it is delivered, then
             both sides are reset (SO_LINGER 0, an RST) — a reset mid-reply

retarget() moves new connections to another upstream and cut() resets the
open ones: the switch in front of a MariaDB pair (mariadb_pair.py).

Threads: one accepting thread; per connection one pump per direction.  Each
pump reads, stamps and delivers itself (latency: it waits until the stamp
plus the latency before it writes, and reads what arrived meanwhile in the
next round, so a byte waits between LATENCY and twice that under a steady
stream; the rows' bounds do not rest on the exact figure).  Counters
(connections, resets) are read by the harness for its report.

NftRedirect sends a port's loopback connections to a proxy without a
change in herald's configuration: Kafka clients connect to the address a
broker advertises, not to the bootstrap address, so a proxy named in
kafka.brokers would be bypassed.  The rule (nftables, nat output hook)
redirects every connection from 127.0.0.1 to the port; the proxy's own
upstream connections come from 127.0.0.2 and pass. """
import socket
import subprocess
import threading
import time

MODES = ("pass", "latency", "bandwidth", "blackhole", "reset")
READ_SIZE = 65536
POLL_S = 0.05
RESET_EVERY_S = 1.0


def _hard_close(sock):
    """Closes SOCK with an RST instead of a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class FaultProxy:
    def __init__(self, upstream_port, upstream_host="127.0.0.1", source=None,
                 latency_s=0.2, rate=16384):
        """SOURCE: the local address of the upstream connections (127.0.0.2
        behind an NftRedirect), or None."""
        self.upstream = (upstream_host, upstream_port)
        self.source = source
        self.latency_s, self.rate = latency_s, rate
        self.mode = "pass"
        self.lock = threading.Lock()
        self.reset_due = 0.0        # monotonic time of the next armed reset
        self.connections = 0
        self.resets = 0
        self.closed = False
        self.conns = set()
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(256)
        self.lsock.settimeout(POLL_S * 4)
        self.port = self.lsock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def set_mode(self, mode):
        if mode not in MODES:
            raise ValueError("mode %r (one of %s)" % (mode, ", ".join(MODES)))
        with self.lock:
            self.mode = mode
            self.reset_due = time.monotonic()

    def take_reset(self):
        """Whether this reply is to be cut (one per RESET_EVERY_S)."""
        with self.lock:
            if self.mode != "reset" or time.monotonic() < self.reset_due:
                return False
            self.reset_due = time.monotonic() + RESET_EVERY_S
            self.resets += 1
            return True

    def retarget(self, port, host="127.0.0.1"):
        """New connections go to HOST:PORT from now on (a primary moved)."""
        self.upstream = (host, port)

    def cut(self):
        """Resets every open connection, as the loss of their upstream does."""
        with self.lock:
            conns = list(self.conns)
        for pair in conns:
            for s in pair:
                _hard_close(s)

    def close(self):
        self.closed = True
        try:
            self.lsock.close()
        except OSError:
            pass
        self.cut()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client):
        # Accepted, never answered while the route is a black hole.
        while self.mode == "blackhole" and not self.closed:
            time.sleep(POLL_S)
        up = socket.socket()
        try:
            if self.source:
                up.bind((self.source, 0))
            up.settimeout(10)
            up.connect(self.upstream)
        except OSError:
            _hard_close(up)
            _hard_close(client)
            return
        for s in (client, up):
            s.settimeout(POLL_S)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = (client, up)
        with self.lock:
            self.conns.add(pair)
        done = threading.Event()
        threading.Thread(target=self._pump, args=(client, up, False, pair, done),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(up, client, True, pair, done),
                         daemon=True).start()

    def _pump(self, src, dst, reply, pair, done):
        """Moves bytes from SRC to DST until either side closes; REPLY: the
        upstream-to-client direction (the one a reset cuts)."""
        try:
            while not done.is_set() and not self.closed:
                if self.mode == "blackhole":
                    time.sleep(POLL_S)
                    continue
                try:
                    data = src.recv(READ_SIZE)
                except socket.timeout:
                    continue
                if not data:
                    break
                stamp = time.monotonic()
                if reply and self.take_reset():
                    dst.sendall(data[:max(1, len(data) // 2)])
                    break
                self._deliver(dst, data, stamp, done)
        except OSError:
            pass
        done.set()
        with self.lock:
            self.conns.discard(pair)
        for s in pair:
            _hard_close(s)

    def _deliver(self, dst, data, stamp, done):
        while self.mode == "blackhole" and not done.is_set() and not self.closed:
            time.sleep(POLL_S)
        if self.mode == "latency":
            wait = stamp + self.latency_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        if self.mode != "bandwidth":
            dst.sendall(data)
            return
        slice_ = max(1, int(self.rate * POLL_S))
        for i in range(0, len(data), slice_):
            dst.sendall(data[i:i + slice_])
            time.sleep(POLL_S)


class NftRedirect:
    """Loopback connections from 127.0.0.1 to a port redirected to a proxy
    (nftables table TABLE, nat output hook).  remove() drops the table;
    the harness calls it on every way out."""

    def __init__(self, table):
        self.table = table
        self.added = False

    @staticmethod
    def nft(*args):
        return subprocess.run(["nft"] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=10)

    def add(self, rules):
        """RULES: (port, proxy port) pairs.  None, or why the rules could not
        be made (then none is left)."""
        self.nft("delete", "table", "ip", self.table)   # a run that died left it
        cmds = [("add", "table", "ip", self.table),
                ("add", "chain", "ip", self.table, "out",
                 "{ type nat hook output priority -100; }")]
        for port, to_port in rules:
            cmds.append(("add", "rule", "ip", self.table, "out", "ip", "daddr", "127.0.0.1",
                         "ip", "saddr", "!=", "127.0.0.2", "tcp", "dport", str(port),
                         "redirect", "to", ":%d" % to_port))
        for args in cmds:
            try:
                r = self.nft(*args)
            except OSError as e:
                self.remove()
                return "nft: %s" % e
            self.added = True
            if r.returncode != 0:
                self.remove()
                return "nft %s: %s" % (" ".join(args[:3]), r.stdout.strip())
        return None

    def remove(self):
        if self.added:
            self.nft("delete", "table", "ip", self.table)
            self.added = False
