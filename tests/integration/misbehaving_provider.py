"""misbehaving_provider: a push provider on loopback that answers each
request the way its path's first segment asks (python3 stdlib), optionally
over TLS.  Used by test_bad_provider.py and test_security.py as a channel url.

  /ok       200 "ok"
  /huge     200 with a 10 MB body
  /trickle  200 headers promising 100 bytes, then 1 byte a second
  /reset    200 headers promising 1000 bytes, 3 bytes, then a TCP reset
  /garbage  a status line that is not HTTP, then close
  /empty    "HTTP/1.1 200 OK" with no length and no body, then close
  /nothing  close without answering

Every request is recorded (mode, uid from the JSON body, the body, when it
started and ended, whether the client went away early).  Each connection
serves one request (Connection: close), so a retry is a new record."""
import json
import socket
import socketserver
import ssl
import struct
import threading
import time

HUGE_BYTES = 10 * 1024 * 1024


class Provider:
    def __init__(self, certfile=None, keyfile=None):
        self.records = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        ctx = None
        if certfile:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(certfile, keyfile)
        self.tls_failures = 0
        self.empty_connections = 0
        provider = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                sock = self.request
                if ctx is not None:
                    try:
                        sock = ctx.wrap_socket(sock, server_side=True)
                    except (ssl.SSLError, OSError):
                        with provider.lock:
                            provider.tls_failures += 1
                        return
                provider._serve(sock)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            # a burst of retries must not overflow the accept queue: a
            # dropped SYN would cost the client its whole timeout_ms
            request_queue_size = 256

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, mode, scheme="http"):
        return "%s://127.0.0.1:%d/%s" % (scheme, self.port, mode)

    def stop(self):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def by_mode(self, mode):
        with self.lock:
            return [r for r in self.records if r["mode"] == mode]

    def _read_request(self, sock):
        sock.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return None, None
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        length = 0
        for h in lines[1:]:
            k, _, v = h.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v.strip())
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return lines[0], body

    def _serve(self, sock):
        try:
            line, body = self._read_request(sock)
        except (OSError, ValueError):
            return
        if line is None:
            with self.lock:
                self.empty_connections += 1
            return
        path = line.split(" ")[1] if line.count(" ") >= 2 else "/"
        rec = {"mode": path.strip("/").split("/")[0].split("?")[0], "body": body,
               "start": time.time(), "end": None, "client_left": False, "uid": None}
        try:
            rec["json"] = json.loads(body.decode("utf-8"))
            rec["uid"] = int(rec["json"]["uid"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            rec["json"] = None
        with self.lock:
            self.records.append(rec)
        try:
            getattr(self, "_mode_" + rec["mode"], self._mode_ok)(sock)
        except OSError:
            rec["client_left"] = True
        rec["end"] = time.time()
        try:
            sock.close()
        except OSError:
            pass

    @staticmethod
    def _mode_ok(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    def _mode_huge(self, sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                     % HUGE_BYTES)
        block = b"x" * 65536
        for _ in range(HUGE_BYTES // len(block)):
            if self.stopping.is_set():
                return
            sock.sendall(block)

    def _mode_trickle(self, sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n")
        for _ in range(100):
            if self.stopping.wait(1.0):
                return
            sock.sendall(b"x")

    @staticmethod
    def _mode_reset(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\nabc")
        time.sleep(0.05)
        raw = sock.unwrap() if isinstance(sock, ssl.SSLSocket) else sock
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    @staticmethod
    def _mode_garbage(sock):
        sock.sendall(b"GARBAGE\x00\xff not http at all\r\nX: y\r\n\r\n\x01\x02")

    @staticmethod
    def _mode_empty(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")

    @staticmethod
    def _mode_nothing(sock):
        return
